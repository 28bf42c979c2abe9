#include "hfuse/attributes.h"

#include "hfuse/error.h"

#include <cmath>

namespace hfuse {
namespace {

const nlohmann::json &require(const nlohmann::json &attrs, const std::string &name) {
    if (!attrs.is_object() || !attrs.contains(name)) fail_field(name, "required attribute is missing");
    return attrs.at(name);
}

int64_t as_int(const nlohmann::json &v, const std::string &name) {
    if (v.is_number_integer()) return v.get<int64_t>();
    // Accept 2.0 written for 2, but not 2.5: a fractional value is a mistake the user should see.
    if (v.is_number_float()) {
        double d = v.get<double>();
        if (std::floor(d) == d && std::abs(d) < 9.0e18) return static_cast<int64_t>(d);
    }
    fail_field(name, "expected an integer, got " + v.dump());
}

float as_float(const nlohmann::json &v, const std::string &name) {
    if (v.is_number()) return v.get<float>();
    fail_field(name, "expected a number, got " + v.dump());
}

}  // namespace

int64_t Attributes::get_int(const std::string &name) const {
    return as_int(require(attrs_, name), name);
}

int64_t Attributes::get_int(const std::string &name, int64_t fallback) const {
    return has(name) ? get_int(name) : fallback;
}

float Attributes::get_float(const std::string &name) const {
    return as_float(require(attrs_, name), name);
}

float Attributes::get_float(const std::string &name, float fallback) const {
    return has(name) ? get_float(name) : fallback;
}

std::string Attributes::get_string(const std::string &name) const {
    const auto &v = require(attrs_, name);
    if (!v.is_string()) fail_field(name, "expected a string, got " + v.dump());
    return v.get<std::string>();
}

std::string Attributes::get_string(const std::string &name, const std::string &fallback) const {
    return has(name) ? get_string(name) : fallback;
}

std::vector<int64_t> Attributes::get_ints(const std::string &name) const {
    const auto &v = require(attrs_, name);
    if (!v.is_array()) fail_field(name, "expected a list of integers, got " + v.dump());
    std::vector<int64_t> out;
    for (const auto &e : v) out.push_back(as_int(e, name));
    return out;
}

std::vector<int64_t> Attributes::get_ints(const std::string &name, const std::vector<int64_t> &fallback) const {
    return has(name) ? get_ints(name) : fallback;
}

std::vector<float> Attributes::get_floats(const std::string &name) const {
    const auto &v = require(attrs_, name);
    if (!v.is_array()) fail_field(name, "expected a list of numbers, got " + v.dump());
    std::vector<float> out;
    for (const auto &e : v) out.push_back(as_float(e, name));
    return out;
}

}  // namespace hfuse
