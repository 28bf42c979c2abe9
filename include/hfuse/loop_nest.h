// The loop nest Halide runs for a pipeline, compact: what `hfuse explain` prints. Each loop with its
// extent and kind (parallel; vectorized and unrolled loops are gone by then, their stores are vectors
// and copies), each allocation with its size, where each stage is produced (nested in the loops of
// its consumer when computed at them) and which buffers are stored to. Bounds checks, buffer queries
// and let bindings are left out; extents that depend on nothing but constants are folded.
//
//   ModelPipeline mp(plan, {target});
//   std::cout << loop_nest(mp.pipeline(), mp.halide_arguments(), target);
//
//   produce pool:
//     parallel for pool.s0.c.c (extent 8):
//       for pool.s0.y.y (extent 14):
//         allocate conv: float32 x 58 x 3 x 8 (5.4 KiB)
//         produce conv:
//           ...
#pragma once

#include <Halide.h>

#include <string>
#include <vector>

namespace hfuse {

// `pipeline` lowered for `target` (compile_to_module: no machine code is made) and printed as above.
std::string loop_nest(Halide::Pipeline pipeline, const std::vector<Halide::Argument> &arguments,
                      const Halide::Target &target);

// The same for a statement already lowered.
std::string loop_nest(const Halide::Internal::Stmt &body);

}  // namespace hfuse
