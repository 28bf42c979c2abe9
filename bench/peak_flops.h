// The machine's measured single-precision FMA peak: the yardstick for "share of peak" in bench/.
#pragma once

#include <cstdint>

namespace hfuse::bench {

// FLOPs one fma_chains() iteration does: 12 independent 8-lane FMAs (2 FLOPs each).
constexpr double kFlopsPerFmaIteration = 12 * 8 * 2;

// Runs `iterations` rounds of 12 independent vfmadd231ps chains on ymm registers (enough chains to
// cover FMA latency x throughput on current x86 cores) and returns a value that depends on them all.
// Needs AVX2 + FMA (check has_fma()).
float fma_chains(int64_t iterations);

bool has_fma();

// GFLOP/s of `threads` threads each running fma_chains() at once: the best of a few short bursts
// (the least disturbed by other jobs on a shared machine).
double measure_fma_peak_gflops(int threads);

// Registers peak/fma/threads:1 (and threads:max_threads): the bursts above as a benchmark.
void register_peak_benchmarks(int max_threads);

}  // namespace hfuse::bench
