// A model compiled ahead of time and called like any C function: examples/CMakeLists.txt has
//
//   hfuse_add_model(hfuse_example_cbrm_kernel MODEL ../models/conv_bias_relu_maxpool.json NAME cbrm)
//   target_link_libraries(hfuse_example_aot_cbrm PRIVATE hfuse_example_cbrm_kernel)
//
// which, at build time, runs `hfuse compile` (x86 rules, hfuse's schedule templates, host target) and
// gives cbrm.a + cbrm.h: int cbrm(halide_buffer_t *input, halide_buffer_t *pool). Calling it needs
// only that header and HalideBuffer.h; this example also links hfuse, but only to check the result
// against hfuse's independent reference evaluator (plain loops) and to make its input.
//
//   build/bin/hfuse_example_aot_cbrm [RUNS]     (default 20 timed runs after a warm-up)
//
// The input is what `hfuse run models/conv_bias_relu_maxpool.json` generates (uniform [-1, 1], seed
// 1000), so the printed summary is the same as that command's.
#include "cbrm.h"  // the compiled model (from hfuse_add_model)
#include "HalideBuffer.h"

#include "hfuse/model_io.h"
#include "hfuse/random.h"
#include "hfuse/reference.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

int main(int argc, char **argv) {
    const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
    try {
        // Input [1, 64, 56, 56] NCHW, row-major: a Halide buffer of extents (W, H, C, N) = (56, 56, 64, 1).
        const std::vector<float> data = hfuse::uniform_values(1 * 64 * 56 * 56, -1.0, 1.0, 1000);
        Halide::Runtime::Buffer<float> input(56, 56, 64, 1);
        std::copy(data.begin(), data.end(), input.data());
        Halide::Runtime::Buffer<float> pool(28, 28, 64, 1);  // output [1, 64, 28, 28]

        // Warm-up (starts Halide's thread pool), then timed runs.
        if (int rc = cbrm(input, pool); rc != 0) {
            std::fprintf(stderr, "cbrm returned %d\n", rc);
            return 1;
        }
        std::vector<double> ms;
        for (int r = 0; r < runs; r++) {
            auto t0 = std::chrono::steady_clock::now();
            int rc = cbrm(input, pool);
            auto t1 = std::chrono::steady_clock::now();
            if (rc != 0) {
                std::fprintf(stderr, "cbrm returned %d\n", rc);
                return 1;
            }
            ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        }
        std::sort(ms.begin(), ms.end());

        double sum = 0, abs_sum = 0;
        float lo = INFINITY, hi = -INFINITY;
        for (int i = 0; i < pool.number_of_elements(); i++) {
            const float v = pool.data()[i];
            sum += v;
            abs_sum += std::fabs(v);
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
        const double gflop = 2.0 * 64 * 64 * 9 * 56 * 56 * 1e-9;  // the conv's multiply-adds
        std::printf("output 'pool' [1x64x28x28]: sum %.6g  mean|x| %.6g  min %.6g  max %.6g\n", sum,
                    abs_sum / pool.number_of_elements(), lo, hi);
        std::printf("cbrm: median %.3f ms, min %.3f ms over %d runs (%.1f GFLOP/s)\n", ms[ms.size() / 2], ms[0],
                    runs, gflop / (ms[ms.size() / 2] * 1e-3));

        // The same model through hfuse's reference evaluator.
        hfuse::Graph graph = hfuse::load_model(HFUSE_EXAMPLE_MODEL);
        auto expected = hfuse::reference::run(graph, {{"input", {{1, 64, 56, 56}, data}}}).at("pool");
        hfuse::reference::Comparison cmp =
            hfuse::reference::compare(pool.data(), expected.data.data(), expected.data.size());
        const bool ok = cmp.relative() <= 1e-4;
        std::printf("check against the reference evaluator: max abs error %.3g at scale %.3g: %s\n", cmp.max_abs_error,
                    cmp.scale, ok ? "ok" : "MISMATCH");
        return ok ? 0 : 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        return 1;
    }
}
