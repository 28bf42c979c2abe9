// `hfuse explain`: each group's members and placements, its loop nest as Halide lowers it, and the
// same ops' loop nests unfused. On cbrm (conv + bias + relu + maxpool in one group) the conv is
// produced inside the pool's loops and the ReLU has no stage of its own; unfused, each op is a stage.
#include "test_util.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace hfuse {
namespace {

using test::contains;
using test::kCbrm;
using test::kModels;

// The lines of `text` from the one that starts with `from` (after its indentation) up to the next
// line at that line's indentation or less.
std::vector<std::string> section(const std::string &text, const std::string &from) {
    std::istringstream in(text);
    std::vector<std::string> out;
    size_t indent = std::string::npos;
    for (std::string line; std::getline(in, line);) {
        const size_t at = line.find_first_not_of(' ');
        if (indent == std::string::npos) {
            if (at != std::string::npos && line.compare(at, from.size(), from) == 0) indent = at;
            continue;
        }
        if (at == std::string::npos || at <= indent) break;
        out.push_back(line);
    }
    return out;
}

// The indentation of the first line of `lines` starting (after it) with `prefix`; npos if none.
size_t indent_of(const std::vector<std::string> &lines, const std::string &prefix) {
    for (const std::string &l : lines) {
        const size_t at = l.find_first_not_of(' ');
        if (at != std::string::npos && l.compare(at, prefix.size(), prefix) == 0) return at;
    }
    return std::string::npos;
}

TEST(CliExplain, FusedTheConvIsProducedInsideThePoolsLoopsAndTheReluInlined) {
    test::CommandResult r = test::run_cli("explain " + kCbrm);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "plan x86, 1 group, schedule templates")) << r.out;
    EXPECT_TRUE(contains(r.out, "group g0 (master conv): conv compute_at, relu inline, pool output")) << r.out;
    EXPECT_TRUE(contains(r.out, "  schedule: ")) << r.out;

    const std::vector<std::string> fused = section(r.out, "fused, one pipeline:");
    ASSERT_FALSE(fused.empty()) << r.out;
    const size_t pool = indent_of(fused, "produce pool"), conv = indent_of(fused, "produce conv");
    const size_t loop = indent_of(fused, "parallel for pool");
    ASSERT_NE(pool, std::string::npos) << r.out;
    ASSERT_NE(conv, std::string::npos) << r.out;
    ASSERT_NE(loop, std::string::npos) << r.out;
    EXPECT_GT(loop, pool) << "the pool's parallel loop is inside its production: " << r.out;
    EXPECT_GT(conv, loop) << "the conv is produced inside the pool's loops: " << r.out;
    EXPECT_EQ(indent_of(fused, "produce relu"), std::string::npos) << "the ReLU is inlined: " << r.out;
    EXPECT_NE(indent_of(fused, "allocate conv"), std::string::npos) << "per-tile buffers with sizes: " << r.out;

    // Unfused: each op its own pipeline, the ReLU a stage, the values between them in memory.
    const std::vector<std::string> unfused = section(r.out, "unfused, each op its own pipeline");
    for (const char *op : {"conv (Conv):", "relu (Relu):", "pool (MaxPool):"}) {
        EXPECT_NE(indent_of(unfused, op), std::string::npos) << op << "\n" << r.out;
    }
    EXPECT_NE(indent_of(section(r.out, "relu (Relu):"), "produce relu"), std::string::npos) << r.out;
    // conv and relu outputs, 64 x 56 x 56 floats each, never reach memory.
    // As `plan` says it (human_bytes).
    EXPECT_TRUE(contains(r.out, "intermediates the fusion keeps out of memory: 1.5 MiB")) << r.out;
}

TEST(CliExplain, AnUnfusedPlanHasOneStagePerGroupAndNothingToCompare) {
    test::CommandResult r = test::run_cli("explain " + kCbrm + " --unfused");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "plan unfused, 3 groups")) << r.out;
    EXPECT_FALSE(contains(r.out, "unfused, each op its own pipeline")) << r.out;
    EXPECT_FALSE(contains(r.out, "intermediates the fusion keeps")) << r.out;
    EXPECT_NE(indent_of(section(r.out, "group g1 (master relu)"), "produce relu"), std::string::npos) << r.out;
    // Nothing is fused: each group's nest is just its pipeline.
    EXPECT_FALSE(contains(r.out, "fused, one pipeline")) << r.out;
    EXPECT_NE(indent_of(section(r.out, "group g1 (master relu)"), "one pipeline:"), std::string::npos) << r.out;
}

TEST(CliExplain, OneGroupByNameAndAnUnknownGroupIsAUsageError) {
    test::CommandResult r = test::run_cli("explain " + kModels + "resnet_block.json --group g1");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "group g1 ")) << r.out;
    EXPECT_FALSE(contains(r.out, "group g0 ")) << r.out;
    EXPECT_TRUE(contains(r.out, "bn2 folded")) << r.out;
    r = test::run_cli("explain " + kCbrm + " --group g9", /*stderr_only=*/true);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_TRUE(contains(r.out, "--group 'g9': the plan has no such group (it has g0)")) << r.out;
}

}  // namespace
}  // namespace hfuse
