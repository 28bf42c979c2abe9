// Halide's shared JIT runtime, compiled on its own.
//
// Every JIT-compiled pipeline in a process links against one shared runtime (thread pool, allocator,
// buffer and error helpers), which Halide compiles with the first pipeline, for that pipeline's
// target. Its compile time would then be charged to whichever group happens to come first: on the
// Zen 3 VM (AVX2) 0.6-0.65 s of the 1.3-2.1 s `hfuse bench conv_bias_relu_maxpool` reported for its
// one group. The executor compiles it up front instead, so that a group's compile time is its own,
// and reports the runtime's apart (Executor::runtime_compile_ms).
//
//   double ms = exec::compile_jit_runtime(target);  // > 0 the first time in a process, then 0
#pragma once

#include <Halide.h>

namespace hfuse::exec {

// Compiles Halide's shared JIT runtime for `target` unless this process already has it (from an
// earlier call or any JIT-compiled pipeline); returns the milliseconds it took, 0 when there was
// nothing to do. Thread-safe.
double compile_jit_runtime(const Halide::Target &target);

}  // namespace hfuse::exec
