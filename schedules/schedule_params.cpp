#include "schedules/schedule_params.h"

#include "hfuse/error.h"

#include <algorithm>

namespace hfuse::schedules {

TargetTraits target_traits(const Halide::Target &target) {
    TargetTraits t;
    t.vector_width = target.natural_vector_size<float>();
    if (target.arch == Halide::Target::X86) {
        const bool avx512 = target.has_feature(Halide::Target::AVX512) ||
                            target.has_feature(Halide::Target::AVX512_KNL) ||
                            target.has_feature(Halide::Target::AVX512_Skylake) ||
                            target.has_feature(Halide::Target::AVX512_Cannonlake) ||
                            target.has_feature(Halide::Target::AVX512_SapphireRapids);
        t.vector_registers = avx512 ? 32 : 16;
        t.avx512 = avx512;
        if (avx512) {
            t.l1_data_bytes = 48 << 10;
            t.l2_bytes = 1 << 20;
        }
    } else if (target.arch == Halide::Target::ARM && target.bits == 64) {
        t.vector_registers = 32;
    } else {
        t.vector_registers = 16;
    }
    return t;
}

int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

int64_t largest_divisor_at_most(int64_t n, int64_t limit) {
    for (int64_t d = std::min(n, limit); d > 1; d--) {
        if (n % d == 0) return d;
    }
    return 1;
}

int param_int(const nlohmann::json &p, const std::string &key, int64_t lo, int64_t hi) {
    const std::string field = "schedule." + key;
    if (!p.contains(key)) fail_field(field, "missing (expected an integer)");
    if (!p[key].is_number_integer()) fail_field(field, "expected an integer, got " + p[key].dump());
    int64_t v = p[key].get<int64_t>();
    if (v < lo || v > hi) {
        fail_field(field, std::to_string(v) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) +
                              "] for these shapes");
    }
    return static_cast<int>(v);
}

int param_int_or(const nlohmann::json &p, const std::string &key, int64_t lo, int64_t hi, int fallback) {
    return p.contains(key) ? param_int(p, key, lo, hi) : fallback;
}

bool param_bool_or(const nlohmann::json &p, const std::string &key, bool fallback) {
    if (!p.contains(key)) return fallback;
    if (!p[key].is_boolean()) fail_field("schedule." + key, "expected true or false, got " + p[key].dump());
    return p[key].get<bool>();
}

std::string param_choice(const nlohmann::json &p, const std::string &key, const std::vector<std::string> &allowed) {
    std::string expected;
    for (const std::string &a : allowed) expected += (expected.empty() ? "\"" : ", \"") + a + "\"";
    const std::string field = "schedule." + key;
    if (!p.contains(key)) fail_field(field, "missing (expected one of " + expected + ")");
    if (!p[key].is_string()) fail_field(field, "expected one of " + expected + ", got " + p[key].dump());
    std::string v = p[key].get<std::string>();
    if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
        fail_field(field, "expected one of " + expected + ", got \"" + v + "\"");
    }
    return v;
}

void check_param_keys(const nlohmann::json &p, const std::vector<std::string> &allowed) {
    for (auto it = p.begin(); it != p.end(); ++it) {
        const std::string &k = it.key();
        // "flatten_positions" is the composer's, for any template (src/compose/position_view.h).
        if (k == "template" || k == "why" || k == "flatten_positions") continue;
        if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
            std::string known;
            for (const std::string &a : allowed) known += (known.empty() ? "" : ", ") + a;
            fail_field("schedule." + k, "unknown parameter for template '" + p.value("template", "") + "' (it takes " +
                                            (known.empty() ? "none" : known) + ")");
        }
    }
}

int vector_width_param(const nlohmann::json &p, const Halide::Target &target, bool power_of_two) {
    const int vw = param_int_or(p, "vector_width", 1, 64, target.natural_vector_size<float>());
    if (power_of_two) require_power_of_two("vector_width", vw);
    return vw;
}

void require_power_of_two(const std::string &key, int lanes) {
    if ((lanes & (lanes - 1)) != 0) fail_field("schedule." + key, std::to_string(lanes) + " is not a power of two");
}

}  // namespace hfuse::schedules
