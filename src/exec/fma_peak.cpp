#include "hfuse/fma_peak.h"

#include <Halide.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace hfuse {

// Intrinsics with target attributes rather than -mavx512f for the whole file: the library still runs
// on any x86-64 and picks the widest kernel the CPU runs.
//
// Independent chains per thread, all in registers with the two operands: AVX-512's 32 registers hold
// 16, AVX2's 16 hold 12 (16 spilled three chains, whose store-to-load round trip then paced the loop:
// one FMA a cycle, 56.6 GFLOP/s a Zen 3 core where 12 chains reach twice that). 12 still cover two
// FMA pipes x 4-5 cycles of latency.
namespace {

// GCC warns that the vector types in fma_chains_sum's template parameters pass differently without
// AVX (-Wpsabi): every one of those functions is internal and inlined into a caller of its own ISA.
#pragma GCC diagnostic ignored "-Wpsabi"

constexpr int kChainsAvx512 = 16, kChainsAvx2 = 12;

// `Chains` chains on vectors of `Lanes` floats, summed to one float. Inlined into a caller compiled
// for the ISA of its operations (each a one-intrinsic function with that target).
template <typename Vec, int Lanes, int Chains, Vec (*Splat)(float), Vec (*Fma)(Vec, Vec, Vec), Vec (*Add)(Vec, Vec),
          void (*Store)(float *, Vec)>
inline __attribute__((always_inline)) float fma_chains_sum(int64_t iterations) {
    const Vec a = Splat(0.999999f), b = Splat(1e-6f);
    Vec c[Chains];
    for (int j = 0; j < Chains; j++) c[j] = Splat(0.1f * j);
    for (int64_t i = 0; i < iterations; i++) {
#pragma GCC unroll 16
        for (int j = 0; j < Chains; j++) c[j] = Fma(c[j], a, b);
    }
    for (int width = Chains; width > 1;) {  // pairwise: 16 -> 8 -> ... -> 1, 12 -> 6 -> 3 -> 2 -> 1
        const int half = (width + 1) / 2;
        for (int j = 0; j + half < width; j++) c[j] = Add(c[j], c[j + half]);
        width = half;
    }
    alignas(64) float lanes[Lanes];
    Store(lanes, c[0]);
    float sum = 0;
    for (float v : lanes) sum += v;
    return sum;
}

__attribute__((target("avx2,fma"))) __m256 splat256(float v) {
    return _mm256_set1_ps(v);
}
__attribute__((target("avx2,fma"))) __m256 fma256(__m256 x, __m256 a, __m256 b) {
    return _mm256_fmadd_ps(x, a, b);
}
__attribute__((target("avx2,fma"))) __m256 add256(__m256 x, __m256 y) {
    return _mm256_add_ps(x, y);
}

__attribute__((target("avx2,fma"))) void store256(float *p, __m256 v) {
    _mm256_store_ps(p, v);
}
__attribute__((target("avx2,fma"))) float fma_chains_avx2(int64_t iterations) {
    return fma_chains_sum<__m256, 8, kChainsAvx2, splat256, fma256, add256, store256>(iterations);
}

__attribute__((target("avx512f"))) __m512 splat512(float v) {
    return _mm512_set1_ps(v);
}
__attribute__((target("avx512f"))) __m512 fma512(__m512 x, __m512 a, __m512 b) {
    return _mm512_fmadd_ps(x, a, b);
}
__attribute__((target("avx512f"))) __m512 add512(__m512 x, __m512 y) {
    return _mm512_add_ps(x, y);
}

__attribute__((target("avx512f"))) void store512(float *p, __m512 v) {
    _mm512_store_ps(p, v);
}
__attribute__((target("avx512f"))) float fma_chains_avx512(int64_t iterations) {
    return fma_chains_sum<__m512, 16, kChainsAvx512, splat512, fma512, add512, store512>(iterations);
}

// Keeps the bursts' results alive.
volatile float g_sink = 0;

// Seconds of wall time for `threads` threads each running `kernel` for `iterations`, started together.
double fma_burst(const FmaKernel &kernel, int threads, int64_t iterations) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> pool;
    std::vector<float> sink(threads);
    for (int t = 0; t < threads; t++) {
        pool.emplace_back([&, t] {
            ready++;
            while (!go.load()) {
            }
            sink[t] = kernel.run(iterations);
        });
    }
    while (ready.load() < threads) {
    }
    auto start = std::chrono::steady_clock::now();
    go = true;
    for (auto &th : pool) th.join();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    float sum = 0;
    for (float v : sink) sum += v;
    g_sink = sum;
    return s;
}

}  // namespace

const FmaKernel *widest_fma_kernel(bool allow_avx512) {
    static const FmaKernel avx512{"avx512f", kChainsAvx512 * 16 * 2, fma_chains_avx512};
    static const FmaKernel avx2{"avx2+fma", kChainsAvx2 * 8 * 2, fma_chains_avx2};
    if (allow_avx512 && __builtin_cpu_supports("avx512f")) return &avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &avx2;
    return nullptr;
}

const FmaKernel *fma_kernel_for_target(const Halide::Target &target) {
    const bool avx512 = target.has_feature(Halide::Target::AVX512);
    const bool fma = avx512 || (target.has_feature(Halide::Target::AVX2) && target.has_feature(Halide::Target::FMA));
    return fma ? widest_fma_kernel(avx512) : nullptr;
}

double measure_fma_peak_gflops(const FmaKernel &kernel, int threads, int bursts, int64_t iterations) {
    double best = 0;
    for (int burst = 0; burst < bursts; burst++) {
        best = std::max(
            best, threads * iterations * kernel.flops_per_iteration / fma_burst(kernel, threads, iterations) * 1e-9);
    }
    return best;
}

}  // namespace hfuse
