// Schedule template for a group led by a reduction: Softmax (along any axis) or GlobalAveragePool /
// GlobalMaxPool, optionally followed by an elementwise chain to the group's single output T.
//
// The reductions are computed per row of T rather than at root: a Softmax's max and sum stages at
// T's row loop, a global pool per channel. Reducing along contiguous memory (Softmax on the last
// axis, a pool's plane) accumulates vw lanes (rfactor) and adds across lanes once per row; reducing
// along a strided axis (Softmax on channels) vectorizes across the row instead. Rows are fused into
// one loop cut into parallel tasks.
//
// Measured on the 2-core Zen 3 (AVX2, 2 threads), one reduction per group:
//   Softmax 64 x 1000 (last axis):         simple 57 us,  reduction 45 us (exp computed twice per element)
//   Softmax over channels, 1x64x56x56:     simple 282 us, reduction 146 us
//   GlobalAveragePool 64x56x56:            simple 41 us,  reduction 21 us
//   GlobalAveragePool 512x7x7:             simple 7.8 us, reduction 6.7 us
//   Softmax over 10 classes (mlp_softmax): 0.10 us either way.
//
// Parameters: vector_width, rows_per_task (rows of T per parallel task; all of them: serial).
#pragma once

#include "hfuse/tensor.h"

#include <Halide.h>
#include <nlohmann/json.hpp>

namespace hfuse::schedules {

struct ReductionGroupShape {
    Shape output;         // T's ONNX shape (the reduction's output shape)
    int axis_arg = 0;     // Softmax: the Halide arg it normalises along; global pool: unused
    int64_t reduced = 1;  // elements reduced per output row (Softmax: the axis; global pool: the plane)
    bool global_pool = false;
};

nlohmann::json reduction_default_params(const ReductionGroupShape &shape, const Halide::Target &target);

// Softmax: `stages` (its max and sum, indexed by every arg of T but axis_arg) computed per row of
// `tile` (pure, shape.output), vectorized.
void schedule_softmax(Halide::Func tile, const std::vector<Halide::Func> &stages, const ReductionGroupShape &shape,
                      const nlohmann::json &params, const Halide::Target &target);

// GlobalAveragePool / GlobalMaxPool: `pool` (a pure init, a reduction over the plane, for the
// average a division) computed per channel of `tile` (pure, shape.output).
void schedule_global_pool(Halide::Func tile, Halide::Func pool, const ReductionGroupShape &shape,
                          const nlohmann::json &params, const Halide::Target &target);

}  // namespace hfuse::schedules
