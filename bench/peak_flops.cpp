#include "peak_flops.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

namespace hfuse::bench {
namespace {

// peak/fma/threads:N — the kernel on N threads under Google Benchmark (its threads persist across
// iterations, unlike a burst's).
void BM_fma_peak(benchmark::State &state, const FmaKernel *kernel) {
    if (!kernel) {
        state.SkipWithError("no FMA peak: the CPU or the Halide target has neither AVX-512F nor AVX2 + FMA");
        return;
    }
    constexpr int64_t kIterations = 1'000'000;
    for (auto _ : state) benchmark::DoNotOptimize(kernel->run(kIterations));
    state.SetLabel(kernel->isa);
    // Each thread counts its own FLOPs; Google Benchmark sums the threads' counters and divides by the
    // mean wall time of a thread: the aggregate rate.
    state.counters["GFLOP/s"] = benchmark::Counter(
        double(state.iterations()) * kIterations * kernel->flops_per_iteration * 1e-9, benchmark::Counter::kIsRate);
}

}  // namespace

void register_peak_benchmarks(const FmaKernel *kernel, int max_threads) {
    auto *b = benchmark::RegisterBenchmark("peak/fma", BM_fma_peak, kernel)->Threads(1);
    if (max_threads > 1) b->Threads(max_threads);
    // Interleaved with the workloads (--benchmark_enable_random_interleaving), its repetitions sample
    // the machine's speed through the run; bench/plot.py reports their spread.
    b->UseRealTime()
        ->Unit(benchmark::kMillisecond)
        ->ComputeStatistics("min", [](const std::vector<double> &v) { return *std::min_element(v.begin(), v.end()); })
        ->ComputeStatistics("max", [](const std::vector<double> &v) { return *std::max_element(v.begin(), v.end()); });
}

}  // namespace hfuse::bench
