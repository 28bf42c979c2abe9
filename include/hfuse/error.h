// Errors reported to users. Every failure caused by bad input is an hfuse::Error whose one-line message
// names where the problem is (file, node, field), so a user can fix the input without a debugger.
//
//   throw Error("must be positive").at_field("strides");
//   // ... a pass that knows the node adds it while the error propagates:
//   catch (Error &e) { e.at_node("conv1", "Conv"); throw; }
//   // what(): "models/m.json: node 'conv1' (Conv): field 'strides': must be positive"
//   // a group of a plan: "p.json: group 'g0': node 'conv' (Conv): field 'schedule.tile_c': ..."
#pragma once

#include <stdexcept>
#include <string>

namespace hfuse {

class Error : public std::runtime_error {
public:
    explicit Error(std::string message);

    // Each setter only fills a location that is still unknown, so the innermost (most precise)
    // context wins when several layers annotate the same error.
    Error &in_file(const std::string &file);
    Error &at_node(const std::string &node, const std::string &op = "");
    Error &at_field(const std::string &field);
    Error &in_group(const std::string &group);  // a group of a plan
    // Names `file` whatever file an inner layer named: for a layer that knows the problem lies in
    // another file than the one an inner layer reported it against (a group's schedule, which the
    // plan file gives, met while lowering the model's nodes).
    Error &moved_to_file(const std::string &file);

    const std::string &file() const { return file_; }
    const std::string &group() const { return group_; }
    const std::string &node() const { return node_; }
    const std::string &field() const { return field_; }
    const std::string &message() const { return message_; }

    const char *what() const noexcept override { return formatted_.c_str(); }

private:
    void format();

    std::string message_, file_, group_, node_, op_, field_, formatted_;
};

// Shorthand for the common case inside op definitions: a bad attribute or input.
[[noreturn]] void fail_field(const std::string &field, const std::string &message);
[[noreturn]] void fail(const std::string &message);

}  // namespace hfuse
