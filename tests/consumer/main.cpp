// A program that only knows the generated headers and HalideBuffer.h (no hfuse, no Halide library):
// it calls the conv+bias+relu+maxpool model that hfuse_add_model compiled, once per library
// (`cbrm`, planned by the default x86 rules, and `cbrm_two_groups`, compiled from a hand-written
// two-group plan), and checks each against a plain-loop computation written here from the model
// file's description:
//
//   conv  3x3, 64 -> 64 channels, stride 1, pads 1, weights conv_bias_relu_maxpool.w.f32 (OIHW)
//   bias  64 values, "uniform": [-1/24, 1/24], "seed": 1 — hfuse's documented SplitMix64 generator,
//         re-implemented below from the README's description of the model format
//   relu, then MaxPool 2x2 stride 2:  input [1, 64, 56, 56] -> output [1, 64, 28, 28]
//
//   consumer [WEIGHTS.f32]      (default: the bundled model's weight file, CONSUMER_WEIGHTS)
#include "HalideBuffer.h"
#include "cbrm.h"
#include "cbrm_two_groups.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

constexpr int N = 1, C = 64, H = 56, W = 56, K = 3, PH = H / 2, PW = W / 2;

// The model format's generator for "uniform": [lo, hi], "seed": S (README, "The generator").
std::vector<float> uniform_values(size_t count, double lo, double hi, uint64_t seed) {
    std::vector<float> v(count);
    uint64_t state = seed;
    for (float &x : v) {
        state += 0x9E3779B97F4A7C15ull;
        uint64_t z = state;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        x = static_cast<float>(lo + (hi - lo) * (static_cast<double>(z >> 40) / 16777216.0));
    }
    return v;
}

bool read_floats(const std::string &path, std::vector<float> &out) {
    std::ifstream f(path, std::ios::binary);
    f.read(reinterpret_cast<char *>(out.data()), static_cast<std::streamsize>(out.size() * sizeof(float)));
    return f && f.peek() == EOF;  // exactly out.size() floats
}

// conv + bias + relu + maxpool with plain loops, in double; in and out are row-major NCHW.
std::vector<float> expected_output(const std::vector<float> &in, const std::vector<float> &w,
                                   const std::vector<float> &b) {
    std::vector<double> act(static_cast<size_t>(C) * H * W);
    for (int co = 0; co < C; co++) {
        for (int y = 0; y < H; y++) {
            for (int x = 0; x < W; x++) {
                double s = b[co];
                for (int ci = 0; ci < C; ci++) {
                    for (int ky = 0; ky < K; ky++) {
                        const int iy = y + ky - 1;
                        if (iy < 0 || iy >= H) continue;
                        for (int kx = 0; kx < K; kx++) {
                            const int ix = x + kx - 1;
                            if (ix < 0 || ix >= W) continue;
                            s += static_cast<double>(w[((co * C + ci) * K + ky) * K + kx]) *
                                 in[(static_cast<size_t>(ci) * H + iy) * W + ix];
                        }
                    }
                }
                act[(static_cast<size_t>(co) * H + y) * W + x] = std::max(s, 0.0);
            }
        }
    }
    std::vector<float> out(static_cast<size_t>(C) * PH * PW);
    for (int c = 0; c < C; c++) {
        for (int y = 0; y < PH; y++) {
            for (int x = 0; x < PW; x++) {
                double m = -INFINITY;
                for (int dy = 0; dy < 2; dy++) {
                    for (int dx = 0; dx < 2; dx++) {
                        m = std::max(m, act[(static_cast<size_t>(c) * H + 2 * y + dy) * W + 2 * x + dx]);
                    }
                }
                out[(static_cast<size_t>(c) * PH + y) * PW + x] = static_cast<float>(m);
            }
        }
    }
    return out;
}

using ModelFn = int (*)(halide_buffer_t *, halide_buffer_t *);

// Runs `fn` on `input` and compares with `expected`; also checks that wrongly shaped buffers are refused.
bool check_model(const char *name, ModelFn fn, Halide::Runtime::Buffer<float> &input,
                 const std::vector<float> &expected) {
    // Extents are the ONNX shape reversed: NCHW [1, 64, 28, 28] is (W, H, C, N) = (28, 28, 64, 1).
    Halide::Runtime::Buffer<float> output(PW, PH, C, N);
    output.fill(-12345.0f);
    const int rc = fn(input, output);
    if (rc != 0) {
        std::printf("%s: FAILED: returned %d\n", name, rc);
        return false;
    }
    double max_err = 0, scale = 1e-6, sum = 0;
    for (size_t i = 0; i < expected.size(); i++) {
        max_err = std::max(max_err, static_cast<double>(std::fabs(output.data()[i] - expected[i])));
        scale = std::max(scale, static_cast<double>(std::fabs(expected[i])));
        sum += output.data()[i];
    }
    const bool close = max_err <= 1e-4 * scale;
    std::printf("%s: output [1x64x28x28] sum %.4f, max |compiled - plain loops| = %.3g at scale %.3g: %s\n", name,
                sum, max_err, scale, close ? "ok" : "MISMATCH");

    // A buffer of another shape must be refused with an error code, not read or written out of bounds.
    std::printf("%s: calling with wrongly shaped buffers (errors expected):\n", name);
    std::fflush(stdout);
    Halide::Runtime::Buffer<float> small_input(W - 1, H, C, N), wide_output(PW + 1, PH, C, N);
    small_input.fill(0.0f);
    const int rc_in = fn(small_input, output);
    const int rc_out = fn(input, wide_output);
    const bool refused = rc_in != 0 && rc_out != 0;
    std::printf("%s: input 55x56 -> %d, output 29x28 -> %d: %s\n", name, rc_in, rc_out,
                refused ? "refused, ok" : "NOT REFUSED");
    return close && refused;
}

}  // namespace

int main(int argc, char **argv) {
    const std::string weights_file = argc > 1 ? argv[1] : CONSUMER_WEIGHTS;
    std::vector<float> w(static_cast<size_t>(C) * C * K * K);
    if (!read_floats(weights_file, w)) {
        std::fprintf(stderr, "consumer: cannot read %zu floats from %s\n", w.size(), weights_file.c_str());
        return 1;
    }
    const std::vector<float> b = uniform_values(C, -0.041666666666666664, 0.041666666666666664, 1);

    // Deterministic input, row-major NCHW, in [-1, 1].
    Halide::Runtime::Buffer<float> input(W, H, C, N);
    std::vector<float> in(input.number_of_elements());
    for (size_t i = 0; i < in.size(); i++) in[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 0.1));
    std::copy(in.begin(), in.end(), input.data());

    const std::vector<float> expected = expected_output(in, w, b);
    bool ok = check_model("cbrm", cbrm, input, expected);
    ok = check_model("cbrm_two_groups", cbrm_two_groups, input, expected) && ok;
    std::printf("%s\n", ok ? "consumer: all checks passed" : "consumer: FAILED");
    return ok ? 0 : 1;
}
