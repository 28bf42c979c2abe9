// The machine's measured single-precision FMA peak: the yardstick for "share of peak" in `hfuse run
// --profile`, `hfuse bench --profile` and bench/.
//
//   if (const FmaKernel *k = fma_kernel_for_target(Halide::get_jit_target_from_environment()))
//       double peak = measure_fma_peak_gflops(*k, num_threads());  // GFLOP/s of all the threads
#pragma once

#include <cstdint>

namespace Halide {
struct Target;
}

namespace hfuse {

// The widest FMA loop this CPU runs: independent vfmadd231ps chains (enough to cover FMA latency x
// throughput on current x86 cores), all in registers: 16 on zmm registers where the CPU has AVX-512F,
// else 12 on ymm registers.
// Measuring with ymm on an AVX-512 machine would halve the peak on cores with 512-bit FMA units
// (Zen 5: 422 against 220 GFLOP/s on two cores) and double every share of it.
struct FmaKernel {
    const char *isa;                   // "avx512f" or "avx2+fma"
    double flops_per_iteration;        // chains x lanes x 2
    float (*run)(int64_t iterations);  // returns a value that depends on every chain
};

// The widest of the two the CPU runs, AVX2's where `allow_avx512` is false (the peak of code built for
// AVX2 on an AVX-512 machine); nullptr where the CPU has neither AVX-512F nor AVX2 + FMA.
const FmaKernel *widest_fma_kernel(bool allow_avx512);

// The kernel on the vectors of code compiled for `target` (Halide's JIT target: the peak of the code
// hfuse runs): AVX-512F's where the target has AVX512, AVX2's where it has AVX2 and FMA; nullptr for a
// target with neither (the loops measured would not be its code's) or a CPU without them.
const FmaKernel *fma_kernel_for_target(const Halide::Target &target);

// GFLOP/s of `threads` threads each running `kernel` at once: the best of `bursts` bursts of
// `iterations` iterations a thread (the least disturbed by other jobs on a shared machine). The
// defaults, bench/'s, take ~13 ms a burst at 3 GHz with AVX-512 (16 chains, 2 FMA pipes; 10 ms with
// AVX2's 12): well under a second in all.
double measure_fma_peak_gflops(const FmaKernel &kernel, int threads, int bursts = 7, int64_t iterations = 5'000'000);

}  // namespace hfuse
