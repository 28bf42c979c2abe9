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
// The loops split so run on worker threads of hfuse_runtime.h's own rather than in an OpenMP parallel
// region: a loop is published by one counter the workers spin on (20000 pauses, then they sleep), and done
// when each has counted itself in another. An empty loop of 2 tasks on 2 threads took 3.6 us in an
// OpenMP region, 1.2 us so (Zen 5, 2 vCPUs), and the networks run dozens of loops a run: alternating
// the two builds, 5 rounds of medians, ShuffleNet-V2 x0.5 1.22x, SqueezeNet 1.1 1.07x, MobileNet-V2
// 1.05x, GoogLeNet 1.05x, EfficientNet-B0 1.04x, MnasNet 1.03x, RegNet-Y 800MF 1.01x, SqueezeNet 1.0
// 1.02x, ResNet-18 and ResNet-34 alike (0.96-1.01x over three alternations: few loops, long tasks).
//
//   pipeline.jit_handlers().custom_do_par_for = exec::openmp_do_par_for;
#pragma once

#include "hfuse/executor.h"

#include <Halide.h>

#include <cstdint>

namespace hfuse::exec {

// Halide's custom_do_par_for on OpenMP (hfuse_openmp_par_for of include/hfuse/hfuse_runtime.h, which
// compiled models run on too): tasks [min, min + extent) split statically over openmp_threads()
// threads; 0, or the status of a task that failed (once one has, the tasks not yet started are
// skipped). Runs the tasks on the calling thread, in order, inside an OpenMP parallel region (a
// nested loop) or when there is one task.
int openmp_do_par_for(Halide::JITUserContext *context, int (*task)(Halide::JITUserContext *, int, uint8_t *), int min,
                      int extent, uint8_t *closure);
// The same for code compiled ahead of time (the kernel cache's), its tasks called with `user_context`.
int openmp_do_par_for_aot(void *user_context, int (*task)(void *, int, uint8_t *), int min, int extent,
                          uint8_t *closure);

// ParallelRuntime::Auto's line: every group of a model of at least this many FLOPs runs its parallel
// loops on OpenMP, every group of a smaller one on Halide's pool. On 2 Zen 5 cores (a VM) an empty
// OpenMP fork and join took 3.5 us; the LSTM cell (262 KFLOP) in 2 tasks ran in 12.3 us a run on
// OpenMP against 9.1 on Halide's pool (6.1 serial, as the gemm template now runs it), the MLP's
// 784->256 layer (401 KFLOP, 3 tasks) 12.2 against 7.4; the depthwise conv (2.1 MFLOP), the 1x1 conv
// (51 MFLOP) and the MobileNet-V2 block's groups alike on both, the 3x3 convs (230 MFLOP and up) 3-9%
// faster on OpenMP.
constexpr double kOpenMPMinFlops = 1e6;

// The runtime the groups of a model of `flops` run on: `requested`, Auto resolved by kOpenMPMinFlops.
ParallelRuntime resolve_parallel_runtime(ParallelRuntime requested, double flops);
// Sets `pipeline`'s parallel loops on `runtime` (OpenMP or Halide, not Auto).
void use_parallel_runtime(Halide::Pipeline &pipeline, ParallelRuntime runtime);

// Threads openmp_do_par_for uses: n, or one per core for n <= 0. Until set, HL_NUM_THREADS if the
// environment has it (as Halide's pool), else one per core.
void set_openmp_threads(int n);
int openmp_threads();

// Calls of openmp_do_par_for so far (for tests and diagnostics).
uint64_t openmp_loops_run();

}  // namespace hfuse::exec
