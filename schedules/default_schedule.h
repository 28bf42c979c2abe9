// The schedule every op gets when it runs as its own stage (the unfused baseline): computed at root,
// innermost dimension vectorized at the target's natural width, outer dimensions fused into one
// parallel loop when there is enough work. Update definitions (the reductions of Conv, Gemm, MatMul)
// get the same, with the reduction loops placed inside the vector loop so each vector of outputs
// accumulates in place.
#pragma once

#include "hfuse/tensor.h"

#include <Halide.h>

namespace hfuse::schedules {

void schedule_root_stage(Halide::Func f, const Shape &shape, const Halide::Target &target);

// For intermediates whose extents the op does not report (Lowered::stages): root, vectorized with
// guarded tails so no extent is ever rounded up past what the producer can supply.
void schedule_root_intermediate(Halide::Func f, const Halide::Target &target);

}  // namespace hfuse::schedules
