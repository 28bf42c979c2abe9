#include "peak_flops.h"

#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace hfuse::bench {

// Intrinsics with a target attribute rather than -mfma for the whole file: the binary still starts
// on a machine without FMA and says so instead of dying on an illegal instruction.
__attribute__((target("avx2,fma"))) float fma_chains(int64_t iterations) {
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
    __m256 c0 = _mm256_set1_ps(0.0f), c1 = _mm256_set1_ps(0.1f), c2 = _mm256_set1_ps(0.2f), c3 = _mm256_set1_ps(0.3f),
           c4 = _mm256_set1_ps(0.4f), c5 = _mm256_set1_ps(0.5f), c6 = _mm256_set1_ps(0.6f), c7 = _mm256_set1_ps(0.7f),
           c8 = _mm256_set1_ps(0.8f), c9 = _mm256_set1_ps(0.9f), c10 = _mm256_set1_ps(1.0f), c11 = _mm256_set1_ps(1.1f);
    for (int64_t i = 0; i < iterations; i++) {
        c0 = _mm256_fmadd_ps(c0, a, b);
        c1 = _mm256_fmadd_ps(c1, a, b);
        c2 = _mm256_fmadd_ps(c2, a, b);
        c3 = _mm256_fmadd_ps(c3, a, b);
        c4 = _mm256_fmadd_ps(c4, a, b);
        c5 = _mm256_fmadd_ps(c5, a, b);
        c6 = _mm256_fmadd_ps(c6, a, b);
        c7 = _mm256_fmadd_ps(c7, a, b);
        c8 = _mm256_fmadd_ps(c8, a, b);
        c9 = _mm256_fmadd_ps(c9, a, b);
        c10 = _mm256_fmadd_ps(c10, a, b);
        c11 = _mm256_fmadd_ps(c11, a, b);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                             _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, s);
    float sum = 0;
    for (float v : lanes) sum += v;
    return sum;
}

bool has_fma() {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

namespace {

// Seconds of wall time for `threads` threads each running fma_chains(iterations), started together.
double fma_burst(int threads, int64_t iterations) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> pool;
    std::vector<float> sink(threads);
    for (int t = 0; t < threads; t++) {
        pool.emplace_back([&, t] {
            ready++;
            while (!go.load()) {
            }
            sink[t] = fma_chains(iterations);
        });
    }
    while (ready.load() < threads) {
    }
    auto start = std::chrono::steady_clock::now();
    go = true;
    for (auto &th : pool) th.join();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    benchmark::DoNotOptimize(sink.data());
    return s;
}

// peak/fma/threads:N — the kernel on N threads under Google Benchmark (its threads persist across
// iterations, unlike a burst's).
void BM_fma_peak(benchmark::State &state) {
    if (!has_fma()) {
        state.SkipWithError("this CPU has no AVX2 + FMA");
        return;
    }
    constexpr int64_t kIterations = 1'000'000;
    for (auto _ : state) benchmark::DoNotOptimize(fma_chains(kIterations));
    // Each thread counts its own FLOPs; Google Benchmark sums the threads' counters and divides by the
    // mean wall time of a thread: the aggregate rate.
    state.counters["GFLOP/s"] = benchmark::Counter(
        double(state.iterations()) * kIterations * kFlopsPerFmaIteration * 1e-9, benchmark::Counter::kIsRate);
}

}  // namespace

double measure_fma_peak_gflops(int threads) {
    if (!has_fma()) return 0;
    // ~10 ms per burst at 3 GHz; 7 bursts: the start-up cost stays well under a second.
    constexpr int64_t kIterations = 5'000'000;
    double best = 0;
    for (int burst = 0; burst < 7; burst++) {
        best = std::max(best, threads * kIterations * kFlopsPerFmaIteration / fma_burst(threads, kIterations) * 1e-9);
    }
    return best;
}

void register_peak_benchmarks(int max_threads) {
    auto *b = benchmark::RegisterBenchmark("peak/fma", BM_fma_peak)->Threads(1);
    if (max_threads > 1) b->Threads(max_threads);
    b->UseRealTime()->Unit(benchmark::kMillisecond);
}

}  // namespace hfuse::bench
