#include "core_round_trip.h"

#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace hfuse::bench {
namespace {

constexpr int kBursts = 8, kRoundTripsPerBurst = 10000;

// The flag alone on its cache line.
struct alignas(64) Line {
    std::atomic<int> value{0};
};

void pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

// Seconds of the fastest burst of kRoundTripsPerBurst round trips: the flag's owner writes 2k + 1,
// the other answers 2k + 2. Two fresh threads, so that the caller's affinity (and so OpenMP's and
// Halide's threads') stays as it was.
double fastest_burst_seconds(CpuPair p) {
    Line line;
    std::atomic<int> &flag = line.value;
    std::atomic<bool> ready{false};
    std::thread echo([&] {
        pin_to(p.b);
        ready.store(true);
        for (int k = 0; k < kBursts * kRoundTripsPerBurst; k++) {
            while (flag.load(std::memory_order_acquire) != 2 * k + 1) {
            }
            flag.store(2 * k + 2, std::memory_order_release);
        }
    });
    double best = 1e9;
    std::thread caller([&] {
        pin_to(p.a);
        while (!ready.load()) {
        }
        for (int burst = 0, k = 0; burst < kBursts; burst++) {
            const auto start = std::chrono::steady_clock::now();
            for (int i = 0; i < kRoundTripsPerBurst; i++, k++) {
                flag.store(2 * k + 1, std::memory_order_release);
                while (flag.load(std::memory_order_acquire) != 2 * k + 2) {
                }
            }
            best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
    });
    caller.join();
    echo.join();
    return best;
}

double round_trip_ns(double burst_seconds) {
    return burst_seconds * 1e9 / kRoundTripsPerBurst;
}

void BM_core_round_trip(benchmark::State &state, CpuPair p) {
    double ns = 0;
    for (auto _ : state) {
        const double seconds = fastest_burst_seconds(p);
        state.SetIterationTime(seconds);
        ns = round_trip_ns(seconds);
    }
    state.counters["round_trip_ns"] = ns;
    state.SetLabel("CPUs " + std::to_string(p.a) + " and " + std::to_string(p.b));
}

}  // namespace

std::optional<CpuPair> first_two_cpus() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return std::nullopt;
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; c++) {
        if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
    if (cpus.size() < 2) return std::nullopt;
    return CpuPair{cpus[0], cpus[1]};
}

double measure_core_round_trip_ns(CpuPair p) {
    return round_trip_ns(fastest_burst_seconds(p));
}

void register_core_round_trip_benchmark(CpuPair p) {
    benchmark::RegisterBenchmark("machine/core_round_trip", BM_core_round_trip, p)
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMicrosecond)
        ->ComputeStatistics("min", [](const std::vector<double> &v) { return *std::min_element(v.begin(), v.end()); })
        ->ComputeStatistics("max", [](const std::vector<double> &v) { return *std::max_element(v.begin(), v.end()); });
}

}  // namespace hfuse::bench
