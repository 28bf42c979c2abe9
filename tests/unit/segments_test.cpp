// Explore's segments (src/explore/segments.h): cuts at values only one crosses, taken where several
// nodes read that value (residual blocks), single-reader cuts only to keep segments short, never
// inside branches; repeated blocks share a signature; and the plan space composed from segments holds
// legal plans that compute what the reference computes, repeated blocks grouped alike.
#include "explore/segments.h"
#include "explore/plan_space.h"
#include "explore/segment_findings.h"
#include "hfuse/model_io.h"
#include "hfuse/passes.h"
#include "hfuse/planner.h"

#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace hfuse {
namespace {

using nlohmann::json;
using test::model_node;
using test::residual_net;

json conv_weight(int cout, int cin, int k, int seed) {
    return {{"shape", {cout, cin, k, k}}, {"uniform", {-0.3, 0.3}}, {"seed", seed}};
}

Graph load(const json &m) {
    return prepare(parse_model(m, ".", "segments_test.json"));
}

std::vector<std::pair<int, int>> ranges(const std::vector<explore::Segment> &s) {
    std::vector<std::pair<int, int>> r;
    for (const explore::Segment &x : s) r.push_back({x.begin, x.end});
    return r;
}

TEST(ExploreSegments, CutAtValuesSeveralNodesReadAndRepeatedBlocksShareASignature) {
    const Graph g = residual_net(3);
    const std::vector<explore::Segment> s = explore::cut_segments(g, 24);
    // The stem, then one segment per block: each block's input is read by its first conv and its Add.
    EXPECT_EQ(ranges(s), (std::vector<std::pair<int, int>>{{0, 2}, {2, 7}, {7, 12}, {12, 17}}));
    ASSERT_EQ(s.size(), 4u);
    EXPECT_EQ(s[1].signature, s[2].signature);
    EXPECT_EQ(s[2].signature, s[3].signature);
    EXPECT_NE(s[0].signature, s[1].signature);
    // A block's own graph: its input in, its output out, its weights.
    const Graph b = explore::segment_graph(g, s[2]);
    ASSERT_EQ(b.inputs.size(), 1u);
    EXPECT_EQ(b.inputs[0].name, "b0_out");
    EXPECT_EQ(b.outputs, std::vector<std::string>{"b1_out"});
    EXPECT_EQ(b.nodes.size(), 5u);
    EXPECT_EQ(b.weights.size(), 2u);
    EXPECT_NO_THROW(prepare(b));
}

TEST(ExploreSegments, LongChainsSplitAtSingleReaderCutsBranchesNever) {
    // 10 elementwise ops in a chain, each value read once: split only to keep segments at most 4 long.
    json nodes = json::array();
    std::string prev = "x";
    for (int i = 0; i < 10; i++) {
        nodes.push_back(model_node("e" + std::to_string(i), i % 2 ? "Sigmoid" : "Relu", {prev}));
        prev = "e" + std::to_string(i);
    }
    const Graph chain = load({{"format", "hfuse-model"},
                              {"version", 1},
                              {"name", "chain"},
                              {"inputs", {{{"name", "x"}, {"shape", {1, 4, 8, 8}}}}},
                              {"weights", json::object()},
                              {"nodes", nodes},
                              {"outputs", {prev}}});
    EXPECT_EQ(ranges(explore::cut_segments(chain, 24)), (std::vector<std::pair<int, int>>{{0, 10}}));
    const std::vector<explore::Segment> short_ones = explore::cut_segments(chain, 4);
    EXPECT_EQ(ranges(short_ones), (std::vector<std::pair<int, int>>{{0, 4}, {4, 8}, {8, 10}}));

    // A value one node reads twice (Mul(a, a)) has one reader: no cut is forced there.
    const Graph square =
        load({{"format", "hfuse-model"},
              {"version", 1},
              {"name", "square"},
              {"inputs", {{{"name", "x"}, {"shape", {1, 4, 8, 8}}}}},
              {"weights", json::object()},
              {"nodes",
               {model_node("a", "Relu", {"x"}), model_node("m", "Mul", {"a", "a"}), model_node("r", "Sigmoid", {"m"})}},
              {"outputs", {"r"}}});
    EXPECT_EQ(ranges(explore::cut_segments(square, 24)), (std::vector<std::pair<int, int>>{{0, 3}}));

    // Two branches from one value, concatenated: no cut between the branches' nodes, whatever the limit.
    const Graph branches =
        load({{"format", "hfuse-model"},
              {"version", 1},
              {"name", "branches"},
              {"inputs", {{{"name", "x"}, {"shape", {1, 4, 6, 6}}}}},
              {"weights", {{"w1", conv_weight(4, 4, 1, 1)}, {"w2", conv_weight(4, 4, 3, 2)}}},
              {"nodes",
               {model_node("a", "Relu", {"x"}), model_node("b1", "Conv", {"a", "w1"}),
                model_node("b2", "Conv", {"a", "w2"}, {{"pads", {1, 1, 1, 1}}}), model_node("b2s", "Sigmoid", {"b2"}),
                model_node("cat", "Concat", {"b1", "b2s"}, {{"axis", 1}}), model_node("out", "Relu", {"cat"})}},
              {"outputs", {"out"}}});
    for (int limit : {1, 2, 24}) {
        SCOPED_TRACE(limit);
        const std::vector<explore::Segment> s = explore::cut_segments(branches, limit);
        for (const explore::Segment &x : s) {
            EXPECT_FALSE(x.begin > 1 && x.begin < 5) << "a cut inside the branches at node " << x.begin;
        }
        EXPECT_EQ(s.front().begin, 0);
        EXPECT_EQ(s.back().end, 6);
    }
}

// The group structure of `plan` within nodes [begin, end), as node offsets from begin.
std::set<std::set<int>> groups_within(const FusedGraph &plan, const Graph &g, int begin, int end) {
    std::map<std::string, int> index;
    for (size_t i = 0; i < g.nodes.size(); i++) index[g.nodes[i].name] = static_cast<int>(i);
    std::set<std::set<int>> r;
    for (const FusedGroup &grp : plan.groups) {
        std::set<int> members;
        for (const std::string &n : grp.nodes) {
            const int i = index.at(n);
            if (i >= begin && i < end) members.insert(i - begin);
        }
        if (!members.empty()) r.insert(members);
    }
    return r;
}

TEST(ExploreSegments, PlanSpaceComposesLegalPlansThatMatchTheReferenceBlocksAlike) {
    const Graph g = residual_net(3);
    explore::PlanSpaceOptions o;
    o.exhaustive_limit = 16;  // the whole net has far more plans: composed from its segments
    const explore::PlanSpace space = explore::plan_space(g, Halide::get_host_target(), o);
    ASSERT_FALSE(space.exhaustive);
    EXPECT_EQ(space.segments, 4);
    EXPECT_EQ(space.distinct_segments, 2);
    ASSERT_GT(space.plans.size(), 3u);
    std::set<size_t> group_counts;
    for (size_t i = 0; i < space.plans.size(); i++) {
        SCOPED_TRACE("plan " + std::to_string(i));
        const FusedGraph &plan = space.plans[i].plan;
        EXPECT_NO_THROW(check_plan(plan));
        group_counts.insert(plan.groups.size());
        // The three blocks were searched once: grouped alike in every plan.
        EXPECT_EQ(groups_within(plan, g, 2, 7), groups_within(plan, g, 7, 12));
        EXPECT_EQ(groups_within(plan, g, 2, 7), groups_within(plan, g, 12, 17));
        if (i < 3) test::expect_plan_matches_reference(plan, 1e-4, &g);
    }
    EXPECT_GT(group_counts.size(), 1u) << "the choices differ in their grouping";
}

TEST(ExploreSegments, TheFastestMeasuredChoicePerSegmentByItsGroupsProfiledTimes) {
    // Two candidates: the x86 plan (two groups per block) and the unfused plan (five), every group
    // profiled at `per_group` ms: the block's own time decides, whatever the whole runs took.
    // (No rewrite changes this model: the unfused plan, over the graph as written, counts.)
    const Graph g = residual_net(3);
    const FusedGraph fused = plan_fusion(g, {load_rules("x86")}), unfused = check_plan(singleton_groups(g));
    auto row = [](const FusedGraph &plan, double per_group, double whole_ms) {
        explore::Evaluation e;
        e.candidate.plan = plan_to_json(plan);
        e.status = "ok";
        e.median_ms = whole_ms;
        for (const FusedGroup &grp : plan.groups) e.group_ms[grp.name] = per_group;
        return e;
    };
    const Halide::Target target = Halide::get_host_target();
    auto block_groups = [&](const TuningRecords &r) {
        std::set<std::vector<int>> out;
        for (const TuningEntry &e : r.entries) {
            if (e.nodes.front() != "b0_c1") continue;
            for (const TunedGroup &tg : e.groups) out.insert(tg.nodes);
        }
        return out;
    };
    // Unfused groups at 0.1 ms: 0.5 ms a block against the fused plan's 2 x 1 ms.
    TuningRecords r = explore::fastest_segment_choices(g, false, {row(fused, 1.0, 1), row(unfused, 0.1, 9)}, target);
    ASSERT_EQ(r.entries.size(), 2u);
    EXPECT_EQ(block_groups(r), (std::set<std::vector<int>>{{0}, {1}, {2}, {3}, {4}}));
    // At 0.5 ms each, the fused plan's block (1 ms) beats the unfused one's (2.5 ms).
    r = explore::fastest_segment_choices(g, false, {row(fused, 0.5, 9), row(unfused, 0.5, 1)}, target);
    EXPECT_EQ(block_groups(r), (std::set<std::vector<int>>{{0, 1}, {2, 3, 4}}));
    // A candidate without profiles measures nothing.
    explore::Evaluation silent = row(fused, 0, 1);
    silent.group_ms.clear();
    EXPECT_TRUE(explore::fastest_segment_choices(g, false, {silent}, target).entries.empty());
    // Composed onto the default plan: a legal plan computing what the reference computes.
    r = explore::fastest_segment_choices(g, false, {row(fused, 1.0, 1), row(unfused, 0.1, 9)}, target);
    const TunedPlan composed = apply_tuning(fused, r, target);
    EXPECT_EQ(composed.applied, 4);
    EXPECT_EQ(composed.plan.groups.size(), g.nodes.size());
    test::expect_plan_matches_reference(composed.plan, 1e-4, &g);
}

}  // namespace
}  // namespace hfuse
