// Who runs a JIT pipeline's parallel loops (ExecutorOptions::parallel_runtime).
//
// Halide's own thread pool hands a loop's tasks to whichever thread asks next, and its owner waits
// for the last task on a condition variable. OpenMP's static schedule (libgomp, as oneDNN's
// threading on Debian uses) gives each thread a fixed contiguous share, the same share every run
// and every group, and its threads spin a while between loops: a core then reads back the rows it
// wrote in the previous group or run from its own cache. Zen 5, 2 threads, `hfuse bench` alternating
// the two, 4 rounds of medians: resnet_block 1.23 -> 1.16 ms, conv3x3_bn_relu 3.28 -> 3.01,
// conv_bias_relu_maxpool 0.600 -> 0.585; the MobileNet-V2 block and the 1x1 conv alike (0.25, 0.13).
//
//   pipeline.jit_handlers().custom_do_par_for = exec::openmp_do_par_for;
#pragma once

#include <Halide.h>

#include <cstdint>

namespace hfuse::exec {

// Halide's custom_do_par_for on OpenMP: tasks [min, min + extent) split statically over
// openmp_threads() threads; the first nonzero status a task returns, else 0 (once a task fails, the
// tasks not yet started are skipped). Runs the tasks on the calling thread, in order, inside an
// OpenMP parallel region (a nested loop) or when there is one task.
int openmp_do_par_for(Halide::JITUserContext *context, int (*task)(Halide::JITUserContext *, int, uint8_t *), int min,
                      int extent, uint8_t *closure);

// Threads openmp_do_par_for uses: n, or one per core for n <= 0. Until set, HL_NUM_THREADS if the
// environment has it (as Halide's pool), else one per core.
void set_openmp_threads(int n);
int openmp_threads();

// Calls of openmp_do_par_for so far (for tests and diagnostics).
uint64_t openmp_loops_run();

}  // namespace hfuse::exec
