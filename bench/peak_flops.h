// The machine's measured single-precision FMA peak as a benchmark: the yardstick for "share of peak"
// in bench/. The kernels and their measurement are the library's (hfuse/fma_peak.h).
#pragma once

#include "hfuse/fma_peak.h"

namespace hfuse::bench {

// The library's, under the names bench/ uses (its main() sees hfuse::bench).
using hfuse::fma_kernel_for_target;
using hfuse::FmaKernel;
using hfuse::measure_fma_peak_gflops;
using hfuse::widest_fma_kernel;

// Registers peak/fma/threads:1 (and threads:max_threads): `kernel`'s bursts as a benchmark.
void register_peak_benchmarks(const FmaKernel *kernel, int max_threads);

}  // namespace hfuse::bench
