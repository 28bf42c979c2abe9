// What every schedule template shares: reading its parameters from a plan's "schedule" object (each
// bad or unknown one reported as an Error on the field "schedule.<param>") and what the target
// offers (vector width, vector registers), from which each template picks its defaults.
#pragma once

#include <Halide.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace hfuse::schedules {

// The vector unit of a target, for float32. Register budgets (how many accumulators a tile may hold)
// follow vector_registers; a default measured on one ISA and explained by nothing more general is
// tied to that ISA's flag, so that another target with as many registers (AArch64) keeps its own.
struct TargetTraits {
    int vector_width;      // lanes per vector: 8 with AVX2, 16 with AVX-512, 4 with SSE/NEON
    int vector_registers;  // 16 ymm (AVX2), 32 zmm (AVX-512), 32 on AArch64
    bool avx512 = false;   // x86 with any AVX-512 feature
    // The L1 data cache a core is assumed to have (a target names no cache): 48 KB with AVX-512 (Ice
    // Lake and later, Zen 5; Zen 4 has 32 KB), 32 KB otherwise (Zen 3, Skylake).
    int64_t l1_data_bytes = 32 << 10;
    // The L2 a core is assumed to have: 1 MB with AVX-512 (Zen 4, Zen 5, Skylake-SP; Sapphire Rapids
    // has 2 MB), 512 KB otherwise (Zen 3).
    int64_t l2_bytes = 512 << 10;
    // The shared (last-level) cache a run's weights may stay in between runs: 32 MB, a Zen 3, 4 or 5
    // core complex's L3 (a cloud VM's share of it may be smaller).
    int64_t shared_cache_bytes = 32 << 20;
};
TargetTraits target_traits(const Halide::Target &target);

// The integer parameter `key`, required, in [lo, hi]; an Error on "schedule.<key>" otherwise.
int param_int(const nlohmann::json &params, const std::string &key, int64_t lo, int64_t hi);
// As param_int, with `fallback` when `key` is absent.
int param_int_or(const nlohmann::json &params, const std::string &key, int64_t lo, int64_t hi, int fallback);
// The boolean parameter `key`, `fallback` when absent; an Error on "schedule.<key>" if not a boolean.
bool param_bool_or(const nlohmann::json &params, const std::string &key, bool fallback);
// The string parameter `key`, one of `allowed`.
std::string param_choice(const nlohmann::json &params, const std::string &key, const std::vector<std::string> &allowed);

// The largest divisor of n not above `limit` (1 when limit < 1): blocks of channels or rows that
// divide them, so that no last block is a second, shorter copy of the loops.
int64_t largest_divisor_at_most(int64_t n, int64_t limit);

// a / b rounded up (b > 0): how many blocks of b cover a.
int64_t ceil_div(int64_t a, int64_t b);

// Throws an Error on "schedule.<key>" for the first key of `params` that is neither "template", "why",
// "flatten_positions" (the composer's, for any template) nor in `allowed`: a misspelt parameter must
// not be silently ignored.
void check_param_keys(const nlohmann::json &params, const std::vector<std::string> &allowed);

// The vector width a template uses: "vector_width" if the plan gives one, else the target's. With
// `power_of_two` other widths are rejected: a template whose loops guard their tails vectorizes them
// with masked loads and stores, which LLVM 14 fails to legalize for odd widths (e.g. 9 = 8 + 1 lanes).
int vector_width_param(const nlohmann::json &params, const Halide::Target &target, bool power_of_two);
// An Error on "schedule.<key>" unless `lanes` is a power of two: Halide 14 fails to compile guarded
// vector tails of other widths (tests/data/property_failures/vector_width_9).
void require_power_of_two(const std::string &key, int lanes);

}  // namespace hfuse::schedules
