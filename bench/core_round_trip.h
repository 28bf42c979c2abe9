// How far apart the cores the benchmarks run on are: the round trip of one cache line between two
// threads pinned on two CPUs. Beside the FMA peak (peak_flops.h), the other machine state that moves
// a run's figures on a shared VM: its vCPUs can sit on one core complex (one L3) for a while, then on
// two. Zen 4 VM, 2 vCPUs, minutes apart: 52-58 ns, then 280-335 ns; with it hfuse's MobileNet-V2
// block 0.27 -> 0.36-0.41 ms on 2 threads, oneDNN's 0.315 -> 0.34, while the FMA peak and either
// core alone did not move.
//
//   if (auto pair = first_two_cpus()) register_core_round_trip_benchmark(*pair);
#pragma once

#include <optional>

namespace hfuse::bench {

struct CpuPair {
    int a = 0, b = 0;
};

// The first two CPUs of this process's affinity mask (those its threads run on); none with fewer.
std::optional<CpuPair> first_two_cpus();

// Nanoseconds for one cache line to go from `p.a` to `p.b` and back: a flag passed between two
// threads pinned on them, the best of a few bursts (a burst a neighbour interrupted is slower).
double measure_core_round_trip_ns(CpuPair p);

// Registers machine/core_round_trip (counter round_trip_ns, min and max statistics), interleaved
// with the workloads as peak/fma is, so its repetitions sample the cores' distance through the run.
void register_core_round_trip_benchmark(CpuPair p);

}  // namespace hfuse::bench
