// The JIT pipelines' allocator (hfuse_runtime.h's block cache, which compiled models install too):
// aligned blocks, large ones reused by size across runs (so a run of a small model does not fault its
// buffers in again), an executor run that allocates nothing new once warm, and blocks another
// allocator made passed on to it.
#include "exec/jit_allocator.h"
#include "hfuse/executor.h"
#include "hfuse/fusion_rules.h"
#include "hfuse/hfuse_runtime.h"
#include "hfuse/model_io.h"
#include "hfuse/planner.h"

#include "test_util.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <unistd.h>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

namespace hfuse {
namespace {

TEST(JitAllocator, AlignedAndLargeBlocksReusedBySize) {
    for (size_t size : {size_t{1}, size_t{100}, size_t{70000}, size_t{3} << 20}) {
        void *p = exec::jit_malloc(nullptr, size);
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << size;
        std::memset(p, 1, size);  // the whole block is usable
        exec::jit_free(nullptr, p);
    }
    const size_t before = exec::jit_allocator_cached_bytes();
    void *a = exec::jit_malloc(nullptr, 1 << 20);
    exec::jit_free(nullptr, a);
    EXPECT_GE(exec::jit_allocator_cached_bytes(), before);
    void *b = exec::jit_malloc(nullptr, 1 << 20);
    EXPECT_EQ(a, b) << "a freed block of the same size is handed out again";
    void *c = exec::jit_malloc(nullptr, 1 << 20);
    EXPECT_NE(b, c);
    exec::jit_free(nullptr, b);
    exec::jit_free(nullptr, c);
    exec::jit_free(nullptr, nullptr);  // as free(nullptr)
}

// hfuse_cached_free takes a block Halide's default allocator made (a compiled model's header installs
// the cache while such blocks may be live) and passes it to foreign_free. This translation unit's copy
// of the cache, as each one including the header has its own.
TEST(BlockCache, BlocksAnotherAllocatorMadeGoToIt) {
    static void *passed = nullptr;
    hfuse_block_cache()->foreign_free = [](void *, void *p) { passed = p; };
    for (size_t offset : {16, 64, 128}) {  // Halide's default malloc: 16 to 128 bytes before the pointer
        std::vector<char> raw(offset + 256 * 1024);
        std::memset(raw.data(), 0x5a, raw.size());
        passed = nullptr;
        hfuse_cached_free(nullptr, raw.data() + offset);
        EXPECT_EQ(passed, raw.data() + offset) << "offset " << offset;
    }
    // Its own blocks stay with it, cached or freed.
    passed = nullptr;
    for (size_t size : {size_t{100}, size_t{1} << 20}) hfuse_cached_free(nullptr, hfuse_cached_malloc(nullptr, size));
    EXPECT_EQ(passed, nullptr);
    hfuse_block_cache()->foreign_free = nullptr;
}

TEST(JitAllocator, AThreadGetsBackTheBlockItFreedLast) {
    // Blocks freed by this thread come back most recent first, before one another thread freed; that
    // one serves a thread that has none of the size.
    constexpr size_t kSize = (size_t{5} << 20) + 7 * 4096 + 123;  // a size no other test frees
    void *other = nullptr;
    std::thread([&] { other = exec::jit_malloc(nullptr, kSize); }).join();
    void *a = exec::jit_malloc(nullptr, kSize), *b = exec::jit_malloc(nullptr, kSize);
    exec::jit_free(nullptr, a);
    exec::jit_free(nullptr, b);
    std::thread([&] { exec::jit_free(nullptr, other); }).join();  // the most recent, but another's
    EXPECT_EQ(exec::jit_malloc(nullptr, kSize), b);
    EXPECT_EQ(exec::jit_malloc(nullptr, kSize), a);
    EXPECT_EQ(exec::jit_malloc(nullptr, kSize), other);
    exec::jit_free(nullptr, a);
    exec::jit_free(nullptr, b);
    exec::jit_free(nullptr, other);
}

long minor_faults() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

TEST(JitAllocator, WarmRunsFaultNoPagesIn) {
    // The residual block: its groups' padded inputs (860 KB each) are Halide root buffers. Freed to
    // malloc, they were returned to the system and faulted in again every run (~375 faults a run).
    Graph g = load_model(std::string(HFUSE_SOURCE_DIR) + "/models/resnet_block.json");
    test::ModelInputs in = test::make_inputs(g);
    Executor ex(plan_fusion(g, {load_rules("x86")}));
    for (int i = 0; i < 3; i++) ex.run(in.buffers);
    const long before = minor_faults();
    for (int i = 0; i < 10; i++) ex.run(in.buffers);
    // Each run allocates its 800 KB output afresh; malloc keeps that block once the root buffers no
    // longer come and go. Allow a little for the runtime's own bookkeeping.
    EXPECT_LT(minor_faults() - before, 200) << "page faults over 10 warm runs";
}

TEST(JitAllocator, LargeOutputsReuseTheirStorage) {
    // A 32 MB model output: glibc maps a block that large afresh for every malloc and unmaps it at
    // free, so each run faulted its 8,192 pages in again (a 3x3 conv at batch 8: 81 against 23 ms).
    const std::string path = testing::TempDir() + "/big_output_" + std::to_string(getpid()) + ".json";
    std::ofstream(path) << R"({"format": "hfuse-model", "version": 1, "name": "big",
        "inputs": [{"name": "x", "shape": [8, 64, 128, 128]}], "weights": {},
        "nodes": [{"name": "r", "op": "Relu", "inputs": ["x"]}], "outputs": ["r"]})";
    Graph g = load_model(path);
    test::ModelInputs in = test::make_inputs(g);
    Executor ex(plan_fusion(g, {load_rules("x86")}));
    const float *first = nullptr;
    {
        const TensorBuffer out = ex.run(in.buffers).at("r");
        first = out.data();
    }
    const long before = minor_faults();
    for (int i = 0; i < 4; i++) {
        const TensorBuffer out = ex.run(in.buffers).at("r");
        EXPECT_EQ(out.data(), first) << "run " << i << ": the freed output's storage is handed out again";
        EXPECT_EQ(out(5, 7, 63, 7), std::max(0.0f, in.buffers.at("x")(5, 7, 63, 7)));
    }
    EXPECT_LT(minor_faults() - before, 1000) << "page faults over 4 warm runs (8,192 a run before)";
}

}  // namespace
}  // namespace hfuse
