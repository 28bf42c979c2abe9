// The target hfuse compiles for on this machine: Halide's JIT target from the environment
// (HL_JIT_TARGET, else the host's features), less the features this CPU cannot run.
//
// Halide 14 marks AMD Zen 4 as avx512_sapphirerapids (it has AVX512-BF16 and AVX512-VNNI), and that
// feature lets LLVM emit AVX-VNNI, the VEX-encoded vpdpwssd, which Zen 4 lacks: such a kernel dies with
// SIGILL (seen in a Li2018 whole-model schedule of ResNet-18). Where the CPU has no AVX-VNNI, the
// feature is dropped (AVX-512 itself stays).
#pragma once

#include <Halide.h>

#include <string>

namespace hfuse {

Halide::Target host_target();

// `target` without the features the running CPU lacks (as host_target() drops them).
Halide::Target runnable_here(Halide::Target target);

// The CPU's model name ("AMD EPYC 9R14 96-Core Processor", from /proc/cpuinfo), or "unknown".
std::string cpu_name();

}  // namespace hfuse
