// The deterministic generator behind `"uniform": [lo, hi], "seed": S` weights and default inputs.
// It is part of the model format, so it must give the same numbers on every platform and compiler:
//
//   state = seed (uint64)
//   next():   state += 0x9E3779B97F4A7C15; z = state;
//             z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
//             return z ^ (z >> 31)                                   (SplitMix64)
//   value i:  u = (next() >> 40) * 2^-24   (24 random bits: exact in float32, u in [0, 1))
//             lo + (hi - lo) * u           (computed in double, then rounded to float32)
//
// tools/hfuse_weights.py implements the same in Python for making reference data.
#pragma once

#include <cstdint>
#include <vector>

namespace hfuse {

std::vector<float> uniform_values(int64_t count, double lo, double hi, uint64_t seed);

}  // namespace hfuse
