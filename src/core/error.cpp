#include "hfuse/error.h"

namespace hfuse {

Error::Error(std::string message) : std::runtime_error(message), message_(std::move(message)) {
    format();
}

Error &Error::in_file(const std::string &file) {
    if (file_.empty()) file_ = file;
    format();
    return *this;
}

Error &Error::moved_to_file(const std::string &file) {
    file_ = file;
    format();
    return *this;
}

Error &Error::in_group(const std::string &group) {
    if (group_.empty()) group_ = group;
    format();
    return *this;
}

Error &Error::at_node(const std::string &node, const std::string &op) {
    if (node_.empty()) {
        node_ = node;
        op_ = op;
    }
    format();
    return *this;
}

Error &Error::at_field(const std::string &field) {
    if (field_.empty()) field_ = field;
    format();
    return *this;
}

void Error::format() {
    std::string s;
    if (!file_.empty()) s += file_ + ": ";
    if (!group_.empty()) s += "group '" + group_ + "': ";
    if (!node_.empty()) s += "node '" + node_ + "'" + (op_.empty() ? "" : " (" + op_ + ")") + ": ";
    if (!field_.empty()) s += "field '" + field_ + "': ";
    formatted_ = s + message_;
}

void fail_field(const std::string &field, const std::string &message) {
    throw Error(message).at_field(field);
}

void fail(const std::string &message) {
    throw Error(message);
}

}  // namespace hfuse
