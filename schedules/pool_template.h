// Schedule template for a group led by a MaxPool or AveragePool (no conv in the group; after a conv
// the pool is the conv template's tile): the pool is computed per vector of the group's output T —
// the pool itself, or the end of an elementwise chain after it — with x vectorized (a stride-2
// window reads two vectors and deinterleaves), the window loops unrolled, and parallel tasks of
// rows_per_task rows: below a plane's rows, bands of one plane; from there, whole planes of a block of
// channels (rows_per_task / plane rows of them), the batch fused outside (by default whole planes a
// task where planes are small, so that a task's windows stay in its channels). Where the windows read a padded
// input (the pool's own pads, or a Pad inlined into it) or a computed one (an elementwise op inlined
// into it) and read each value more than once, that input is computed per task into a dense buffer
// (`window_input: "task"`): every tap is then a dense vector load, where inlined each tap tests its
// bounds or recomputes (Inception-V3's Pad + 3x3 AveragePool over 768 channels at 17x17).
//
// Measured on the 2-core Zen 3 (AVX2, 2 threads), one pool per group (as the unfused models run them):
//   MaxPool 2x2 s2, 64x56x56 (conv_bias_relu_maxpool):  simple 75 us,  pool 20.5 us (9.8 GFLOP/s)
//   MaxPool 3x3 s2 pad 1, 64x112x112:                   simple 328 us, pool 190 us
//   AveragePool 3x3 s1 pad 1, 32x28x28:                 simple 143 us, pool 52 us
// A pool does one operation per 4-byte input it reads, so it runs at memory speed (the 2x2 pool:
// 1 MB read and written in 20.5 us, ~49 GB/s).
//
// Parameters: vector_width (at most the output width; 1: scalar), rows_per_task, unroll_window (0/1),
// window_input ("inline" or "task"; optional, absent: inline).
#pragma once

#include "hfuse/tensor.h"

#include <Halide.h>
#include <nlohmann/json.hpp>

namespace hfuse::schedules {

struct PoolGroupShape {
    Shape output;                // the tile Func's (= the pool's) NCHW shape (rank >= 3)
    int64_t window_taps = 1;     // kernel cells per output
    int64_t stride_product = 1;  // the product of the strides: taps / stride_product reads per input value
    bool padded = false;         // the pool's own pads: its windows test their bounds
    bool window_input = false;   // the windows read a Func the template can place (padded or computed)
};

nlohmann::json pool_default_params(const PoolGroupShape &shape, const Halide::Target &target);

// Schedules `pool` (a Func with a pure init and window updates) per vector of `tile` (pure, the
// group output, same shape). `window_input` is the Func its windows read (undefined where they read
// the group's input as it is). Throws an Error naming "schedule.<param>" for parameters that do not fit.
void schedule_pool(Halide::Func tile, Halide::Func pool, Halide::Func window_input, const PoolGroupShape &shape,
                   const nlohmann::json &params, const Halide::Target &target);

}  // namespace hfuse::schedules
