#include "hfuse/target.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <fstream>

namespace hfuse {
namespace {

// CPUID leaf 7, subleaf 1, EAX bit 4: AVX-VNNI.
bool cpu_has_avx_vnni() {
#if defined(__x86_64__) || defined(__i386__)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) return false;
    return (eax >> 4) & 1;
#else
    return false;
#endif
}

}  // namespace

Halide::Target runnable_here(Halide::Target target) {
    if (target.arch == Halide::Target::X86 && target.has_feature(Halide::Target::AVX512_SapphireRapids) &&
        !cpu_has_avx_vnni())
        target = target.without_feature(Halide::Target::AVX512_SapphireRapids);
    return target;
}

std::string cpu_name() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("model name", 0) == 0) {
            auto colon = line.find(':');
            return colon == std::string::npos ? line : line.substr(colon + 2);
        }
    }
    return "unknown";
}

Halide::Target host_target() {
    return runnable_here(Halide::get_jit_target_from_environment());
}

}  // namespace hfuse
