// Merges the cost model cannot price: recorded by the planner (FusedGroup::undecided), measured and
// settled by measure_undecided_merges, and every outcome computes what the model does.
#include "hfuse/undecided_merges.h"
#include "hfuse/fusion_rules.h"
#include "hfuse/planner.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace hfuse {
namespace {

using nlohmann::json;

// conv -> relu -> a 3x3 stride-2 max pool, odd sizes: the pool's windows overlap, so the composer
// computes the conv at root inside the group and the merge keeps nothing out of memory while its
// ReLU runs again on each tile's halo: a few hundred FLOPs either way, which the model cannot tell.
Graph conv_relu_overlapping_pool() {
    const json nodes =
        json::array({{{"name", "conv"}, {"op", "Conv"}, {"inputs", {"x", "w"}}, {"attrs", {{"pads", {1, 1, 1, 1}}}}},
                     {{"name", "relu"}, {"op", "Relu"}, {"inputs", {"conv"}}},
                     {{"name", "pool"},
                      {"op", "MaxPool"},
                      {"inputs", {"relu"}},
                      {"attrs", {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}}}}});
    const json weights = {{"w", {{"shape", {12, 5, 3, 3}}, {"uniform", {-0.3, 0.3}}, {"seed", 4}}}};
    return test::one_input_model("crp_undecided", {1, 5, 23, 19}, nodes, {"pool"}, weights);
}

const FusedGroup &group_with(const FusedGraph &f, const std::string &node) {
    for (const FusedGroup &g : f.groups) {
        if (std::find(g.nodes.begin(), g.nodes.end(), node) != g.nodes.end()) return g;
    }
    throw std::runtime_error("test bug: no group holds '" + node + "'");
}

TEST(UndecidedMerges, ThePlannerRecordsTheSideAMergeJoined) {
    const FusedGraph planned = plan_fusion(conv_relu_overlapping_pool(), {load_rules("x86")});
    ASSERT_EQ(planned.groups.size(), 1u) << "the rules merge the pool with its producer";
    const FusedGroup &g = planned.groups[0];
    EXPECT_TRUE(test::contains(g.why, "the model cannot tell")) << g.why;
    ASSERT_EQ(g.undecided.size(), 1u);
    EXPECT_EQ(g.undecided[0], (std::vector<std::string>{"conv", "relu"}));

    // A merge the model prices as paying is decided: nothing to measure.
    const FusedGraph paying = plan_fusion(conv_relu_overlapping_pool(), {load_rules("tvm")});
    for (const FusedGroup &grp : paying.groups) EXPECT_TRUE(grp.undecided.empty()) << grp.name;
}

TEST(UndecidedMerges, EitherOutcomeComputesTheSame) {
    const FusedGraph planned = plan_fusion(conv_relu_overlapping_pool(), {load_rules("x86")});
    UndecidedMeasureOptions o;
    o.chunks = 1;
    o.runs = 1;
    // A margin no time can meet (apart below 0 ms) keeps the merge; -1e12 splits whatever the times
    // (apart below 1e12 times merged). (0.99 asked apart below 1% of merged: one cold run of the merged
    // plan once met it; -100, apart below 101 times merged, failed once in CI on a busy machine, runs
    // of 1.)
    for (double margin : {1.0, -1e12}) {
        o.margin = margin;
        const MeasuredMerges m = measure_undecided_merges(planned, o);
        ASSERT_EQ(m.measured.size(), 1u);
        EXPECT_TRUE(m.notes.empty());
        const UndecidedMeasurement &u = m.measured[0];
        EXPECT_GT(u.merged_ms, 0);
        EXPECT_GT(u.apart_ms, 0);
        EXPECT_EQ(u.part, (std::vector<std::string>{"conv", "relu"}));
        const bool split = margin < 0;
        EXPECT_EQ(u.split, split);
        ASSERT_EQ(m.plan.groups.size(), split ? 2u : 1u);
        const FusedGroup &pool = group_with(m.plan, "pool");
        EXPECT_TRUE(test::contains(pool.why, "measured: as one group")) << pool.why;
        EXPECT_TRUE(test::contains(pool.why, split ? "split" : "kept as one")) << pool.why;
        EXPECT_TRUE(pool.undecided.empty());
        if (split) EXPECT_EQ(group_with(m.plan, "conv").nodes, (std::vector<std::string>{"conv", "relu"}));
        test::expect_plan_matches_reference(m.plan, 1e-5);
    }
}

// x -> a = Relu (returned: a group of its own, and a recompute copy in the block) -> Slice of 8 of its
// 16 channels -> 1x1 conv -> Relu -> 3x3 depthwise conv: the block as one group, undecided about its
// pointwise side {pw, pw_relu} (as ShuffleNet's branches are planned).
FusedGraph sliced_block_plan() {
    const json nodes = json::array({{{"name", "a"}, {"op", "Relu"}, {"inputs", {"x"}}},
                                    {{"name", "s"}, {"op", "Slice"}, {"inputs", {"a", "starts", "ends", "axes"}}},
                                    {{"name", "pw"}, {"op", "Conv"}, {"inputs", {"s", "w1"}}},
                                    {{"name", "pw_relu"}, {"op", "Relu"}, {"inputs", {"pw"}}},
                                    {{"name", "dw"},
                                     {"op", "Conv"},
                                     {"inputs", {"pw_relu", "w2"}},
                                     {"attrs", {{"group", 12}, {"pads", {1, 1, 1, 1}}}}}});
    const json weights = {{"starts", {{"shape", {1}}, {"values", {0}}, {"dtype", "int64"}}},
                          {"ends", {{"shape", {1}}, {"values", {8}}, {"dtype", "int64"}}},
                          {"axes", {{"shape", {1}}, {"values", {1}}, {"dtype", "int64"}}},
                          {"w1", {{"shape", {12, 8, 1, 1}}, {"uniform", {-0.4, 0.4}}, {"seed", 5}}},
                          {"w2", {{"shape", {12, 1, 3, 3}}, {"uniform", {-0.4, 0.4}}, {"seed", 6}}}};
    FusedGraph f;
    f.graph = test::one_input_model("sliced_block", {1, 16, 13, 11}, nodes, {"dw", "a"}, weights);
    FusedGroup own_a, block;
    own_a.nodes = {"a"};
    block.nodes = {"a", "s", "pw", "pw_relu", "dw"};
    block.placement = {{"a", Placement::Recompute}};
    block.undecided = {{"pw", "pw_relu"}};
    f.groups = {own_a, block};
    return check_plan(f);
}

TEST(UndecidedMerges, ASplitKeepsWhatFeedsThePartAndTheCopiesEachSideReads) {
    UndecidedMeasureOptions o;
    o.chunks = 1;
    o.runs = 1;
    o.margin = -1e12;  // split, whatever the times
    const MeasuredMerges m = measure_undecided_merges(sliced_block_plan(), o);
    ASSERT_TRUE(m.notes.empty()) << m.notes[0];
    ASSERT_EQ(m.measured.size(), 1u);
    ASSERT_TRUE(m.measured[0].split);
    // The Slice feeds the pointwise side and goes with it, with a copy of the Relu it reads; the
    // depthwise conv reads neither.
    const FusedGroup &pw = group_with(m.plan, "pw");
    EXPECT_EQ(pw.nodes, (std::vector<std::string>{"a", "s", "pw", "pw_relu"}));
    EXPECT_TRUE(is_recompute_copy(pw, "a"));
    EXPECT_EQ(group_with(m.plan, "dw").nodes, (std::vector<std::string>{"dw"}));
    test::expect_plan_matches_reference(m.plan, 1e-5);
}

TEST(UndecidedMerges, APlanWithoutThemIsReturnedAsIs) {
    const FusedGraph planned = plan_fusion(conv_relu_overlapping_pool(), {load_rules("tvm")});
    const MeasuredMerges m = measure_undecided_merges(planned);
    EXPECT_TRUE(m.measured.empty());
    ASSERT_EQ(m.plan.groups.size(), planned.groups.size());
    for (size_t i = 0; i < planned.groups.size(); i++) EXPECT_EQ(m.plan.groups[i].nodes, planned.groups[i].nodes);
}

TEST(UndecidedMerges, CliMeasuresOnRequestAndRefusesAPlanFile) {
    const std::string model = std::string(HFUSE_SOURCE_DIR) + "/models/conv_bias_relu_maxpool.json";
    const test::CommandResult r = test::run_cli("plan " + model + " --measure-undecided --threads 2");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(test::contains(r.out, "undecided merges in")) << r.out;
    const test::CommandResult bad = test::run_cli("run " + model + " --measure-undecided --plan some.json");
    EXPECT_NE(bad.code, 0);
    EXPECT_TRUE(test::contains(bad.out, "--measure-undecided")) << bad.out;
}

}  // namespace
}  // namespace hfuse
