// The machine's measured single-precision FMA peak: the yardstick for "share of peak" in bench/.
#pragma once

#include <cstdint>

namespace hfuse::bench {

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

// GFLOP/s of `threads` threads each running `kernel` at once: the best of a few short bursts (the
// least disturbed by other jobs on a shared machine).
double measure_fma_peak_gflops(const FmaKernel &kernel, int threads);

// Registers peak/fma/threads:1 (and threads:max_threads): `kernel`'s bursts as a benchmark.
void register_peak_benchmarks(const FmaKernel *kernel, int max_threads);

}  // namespace hfuse::bench
