// hfuse::host_target() / runnable_here(): Halide's target less what this CPU cannot run (AVX-VNNI
// under avx512_sapphirerapids, which Halide 14 sets on AMD Zen 4, whose kernels then died with SIGILL).
#include "hfuse/target.h"

#include <gtest/gtest.h>

#include <cpuid.h>

namespace hfuse {
namespace {

bool cpu_has_avx_vnni() {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && ((eax >> 4) & 1);
}

TEST(Target, SapphireRapidsOnlyWhereTheCpuHasAvxVnni) {
    const Halide::Target spr(
        "x86-64-linux-avx-avx2-avx512-avx512_skylake-avx512_cannonlake-avx512_sapphirerapids-f16c-fma-sse41");
    const Halide::Target here = runnable_here(spr);
    EXPECT_EQ(here.has_feature(Halide::Target::AVX512_SapphireRapids), cpu_has_avx_vnni()) << here.to_string();
    // Nothing else changes.
    EXPECT_EQ(here.without_feature(Halide::Target::AVX512_SapphireRapids),
              spr.without_feature(Halide::Target::AVX512_SapphireRapids));
    const Halide::Target skylake("x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41");
    EXPECT_EQ(runnable_here(skylake), skylake);
    const Halide::Target arm("arm-64-linux");
    EXPECT_EQ(runnable_here(arm), arm);
    // host_target() is the environment's target made runnable.
    EXPECT_EQ(host_target(), runnable_here(Halide::get_jit_target_from_environment()));
}

}  // namespace
}  // namespace hfuse
