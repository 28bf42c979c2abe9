// Typed, checked access to a node's attributes (ONNX attribute names and defaults).
//
//   Attributes a(node.attrs);
//   int64_t group = a.get_int("group", 1);
//   std::vector<int64_t> k = a.get_ints("kernel_shape");   // required: throws if absent
// A missing required attribute or a value of the wrong type throws an Error naming the field.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace hfuse {

class Attributes {
public:
    explicit Attributes(const nlohmann::json &attrs) : attrs_(attrs) {}

    bool has(const std::string &name) const { return attrs_.is_object() && attrs_.contains(name); }

    int64_t get_int(const std::string &name) const;
    int64_t get_int(const std::string &name, int64_t fallback) const;
    float get_float(const std::string &name) const;
    float get_float(const std::string &name, float fallback) const;
    std::string get_string(const std::string &name) const;
    std::string get_string(const std::string &name, const std::string &fallback) const;
    std::vector<int64_t> get_ints(const std::string &name) const;
    std::vector<int64_t> get_ints(const std::string &name, const std::vector<int64_t> &fallback) const;
    std::vector<float> get_floats(const std::string &name) const;

private:
    const nlohmann::json &attrs_;
};

}  // namespace hfuse
