// The simple schedule ("template": "simple"), which is also the injective/elementwise template: every
// stage computed at root, its innermost dimension vectorized, outer dimensions fused into one parallel
// loop when there is enough work. Update definitions (the reductions of Conv, Gemm, MatMul, pools)
// get the same, with the reduction loops placed inside the vector loop so each vector of outputs
// accumulates in place. Every op of the unfused baseline that no other template covers runs this way.
//
// Parameters ("schedule" in a plan; each optional, the target's defaults otherwise):
//   vector_width        lanes of the innermost loop (the target's: 8 AVX2, 16 AVX-512)
//   parallel_threshold  stages with fewer elements run serially (4096)
//   task_elements       elements each parallel task computes at least (8192): rows are grouped so
//                       that a task amortises its scheduling cost
#pragma once

#include "hfuse/tensor.h"

#include <Halide.h>
#include <nlohmann/json.hpp>

namespace hfuse::schedules {

struct RootScheduleParams {
    int vector_width = 8;
    int64_t parallel_threshold = 4096;
    int64_t task_elements = 8192;
};

// The defaults for a target, and as recorded in a plan ({"template": "simple", ...}).
RootScheduleParams root_schedule_defaults(const Halide::Target &target);
nlohmann::json simple_params(const RootScheduleParams &p);
// Reads a "simple" schedule: missing parameters take the target's defaults; bad or unknown ones throw
// an Error naming "schedule.<param>".
RootScheduleParams read_simple_params(const nlohmann::json &params, const Halide::Target &target);

void schedule_root_stage(Halide::Func f, const Shape &shape, const RootScheduleParams &p);

// For intermediates whose extents the op does not report (Lowered::stages): root, vectorized with
// guarded tails so no extent is ever rounded up past what the producer can supply.
void schedule_root_intermediate(Halide::Func f, const RootScheduleParams &p);

}  // namespace hfuse::schedules
