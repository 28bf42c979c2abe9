#include "hfuse/random.h"

#include <cstddef>

namespace hfuse {

std::vector<float> uniform_values(int64_t count, double lo, double hi, uint64_t seed) {
    std::vector<float> out(static_cast<size_t>(count));
    uint64_t state = seed;
    for (float &v : out) {
        state += 0x9E3779B97F4A7C15ull;
        uint64_t z = state;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        double u = static_cast<double>(z >> 40) * (1.0 / 16777216.0);
        v = static_cast<float>(lo + (hi - lo) * u);
    }
    return out;
}

}  // namespace hfuse
