// Tuning records (hfuse/tuning_record.h): made from a plan per distinct segment, written and read back,
// checked field by field, and applied to the same model or another one sharing its segments, where
// every regrouped plan still computes what the reference computes.
#include "hfuse/tuning_record.h"
#include "hfuse/error.h"
#include "hfuse/planner.h"
#include "hfuse/target.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

namespace hfuse {
namespace {

using nlohmann::json;
using test::residual_net;

// The groups of `plan` as sets of node names.
std::set<std::set<std::string>> grouping(const FusedGraph &plan) {
    std::set<std::set<std::string>> out;
    for (const FusedGroup &g : plan.groups) out.insert(std::set<std::string>(g.nodes.begin(), g.nodes.end()));
    return out;
}

FusedGraph default_plan(const Graph &g) {
    return plan_fusion(g, {load_rules("x86")});
}

// Every block's conv c1 apart from its Relu, the rest as the default plan has it: a grouping the x86
// rules never make.
FusedGraph split_c1_plan(const Graph &g) {
    FusedGraph plan = default_plan(g);
    std::vector<FusedGroup> groups;
    for (FusedGroup &grp : plan.groups) {
        const auto c1 = std::find_if(grp.nodes.begin(), grp.nodes.end(),
                                     [](const std::string &n) { return n.find("_c1") != std::string::npos; });
        if (c1 == grp.nodes.end() || grp.nodes.size() == 1) {
            groups.push_back(grp);
            continue;
        }
        FusedGroup alone, rest;
        alone.nodes = {*c1};
        for (const std::string &n : grp.nodes) {
            if (n != *c1) rest.nodes.push_back(n);
        }
        groups.push_back(alone);
        groups.push_back(rest);
    }
    plan.groups = groups;
    return check_plan(plan);
}

TEST(TuningRecord, OneEntryPerDistinctSegmentRoundTripsThroughJson) {
    const Graph g = residual_net(3);
    const Halide::Target target = host_target();
    const FusedGraph tuned = split_c1_plan(g);
    std::vector<std::string> notes;
    const TuningRecords records = tuning_records_from_plan(tuned, target, 1.5, 2.0, &notes);
    // The stem and the block (three times, one signature).
    ASSERT_EQ(records.entries.size(), 2u);
    EXPECT_TRUE(notes.empty()) << notes.front();
    const TuningEntry &block = records.entries[1];
    EXPECT_EQ(block.nodes, (std::vector<std::string>{"b0_c1", "b0_r1", "b0_c2", "b0_add", "b0_out"}));
    EXPECT_EQ(block.target, tuning_target(target));
    EXPECT_EQ(block.model, "residual");
    EXPECT_EQ(block.tuned_ms, 1.5);
    EXPECT_EQ(block.default_ms, 2.0);
    std::set<std::vector<int>> groups;
    for (const TunedGroup &tg : block.groups) groups.insert(tg.nodes);
    EXPECT_EQ(groups, (std::set<std::vector<int>>{{0}, {1}, {2, 3, 4}}));

    const json j = tuning_records_to_json(records);
    const TuningRecords back = tuning_records_from_json(j, "t.json");
    EXPECT_EQ(tuning_records_to_json(back), j);
}

TEST(TuningRecord, AppliedToTheSameModelAndToAnotherWithTheSameBlocks) {
    const Graph g = residual_net(3);
    const Halide::Target target = host_target();
    const FusedGraph tuned = split_c1_plan(g);
    const TuningRecords records = tuning_records_from_plan(tuned, target, 1, 1, nullptr);

    // The model it was made on: the default plan becomes the tuned one, schedules included.
    TunedPlan same = apply_tuning(default_plan(g), records, target);
    EXPECT_EQ(same.segments, 4);
    EXPECT_EQ(same.applied, 4);
    EXPECT_TRUE(same.notes.empty());
    EXPECT_EQ(grouping(same.plan), grouping(tuned));
    EXPECT_NE(grouping(same.plan), grouping(default_plan(g)));
    test::expect_plan_matches_reference(same.plan, 1e-4, &g);

    // Five blocks with other weights: every block regrouped (the stem's entry too), outputs right.
    const Graph other = residual_net(5, 40);
    TunedPlan carried = apply_tuning(default_plan(other), records, target);
    EXPECT_EQ(carried.segments, 6);
    EXPECT_EQ(carried.applied, 6);
    EXPECT_EQ(grouping(carried.plan), grouping(split_c1_plan(other)));
    test::expect_plan_matches_reference(carried.plan, 1e-4, &other);

    // Another target's entries are not applied, and it says so.
    TuningRecords elsewhere = records;
    for (TuningEntry &e : elsewhere.entries) e.target = "arm-64, 4 float lanes, fma";
    TunedPlan none = apply_tuning(default_plan(g), elsewhere, target);
    EXPECT_EQ(none.applied, 0);
    EXPECT_EQ(grouping(none.plan), grouping(default_plan(g)));
    ASSERT_EQ(none.notes.size(), 1u);
    EXPECT_TRUE(test::contains(none.notes[0], "arm-64, 4 float lanes, fma")) << none.notes[0];
}

TEST(TuningRecord, AnEntryThatMakesAnIllegalPlanIsLeftOutWithANote) {
    const Graph g = residual_net(2);
    const Halide::Target target = host_target();
    TuningRecords records = tuning_records_from_plan(split_c1_plan(g), target, 1, 1, nullptr);
    ASSERT_EQ(records.entries.size(), 2u);
    // The block's c1 led by its Relu: a Relu cannot lead a group holding a Conv.
    TuningEntry &block = records.entries[1];
    block.groups = {TunedGroup{{0, 1}, 1, {}, json::object()}, TunedGroup{{2, 3, 4}, 2, {}, json::object()}};
    TunedPlan t = apply_tuning(default_plan(g), records, target);
    EXPECT_EQ(t.applied, 1);  // the stem's entry only
    ASSERT_EQ(t.notes.size(), 2u);
    EXPECT_TRUE(test::contains(t.notes[0], "'b0_c1' ... 'b0_out'")) << t.notes[0];
    EXPECT_TRUE(test::contains(t.notes[0], "illegal plan")) << t.notes[0];
    EXPECT_NO_THROW(check_plan(t.plan));
    test::expect_plan_matches_reference(t.plan, 1e-4, &g);
}

TEST(TuningRecord, SegmentsAPlanGroupsAcrossAreNotRecorded) {
    const Graph g = residual_net(2);
    FusedGraph plan = default_plan(g);
    // The stem's group takes the first block's c1 and r1 too (b0's input then stays inside the group
    // for c1 and goes out to the Add).
    std::vector<FusedGroup> groups;
    FusedGroup merged;
    for (const FusedGroup &grp : plan.groups) {
        const bool take = std::count(grp.nodes.begin(), grp.nodes.end(), "stem") ||
                          std::count(grp.nodes.begin(), grp.nodes.end(), "b0_c1");
        if (!take) {
            groups.push_back(grp);
            continue;
        }
        merged.nodes.insert(merged.nodes.end(), grp.nodes.begin(), grp.nodes.end());
    }
    groups.push_back(merged);
    plan.groups = groups;
    plan = check_plan(plan);
    std::vector<std::string> notes;
    const TuningRecords records = tuning_records_from_plan(plan, host_target(), 1, 1, &notes);
    // Stem and b0 are left out; b1 has b0's signature, and its grouping is recorded under it.
    ASSERT_EQ(records.entries.size(), 1u);
    EXPECT_EQ(records.entries[0].nodes.front(), "b1_c1");
    ASSERT_EQ(notes.size(), 2u);
    EXPECT_TRUE(test::contains(notes[0], "'stem' ... 'stem_relu' is not recorded")) << notes[0];
}

TEST(TuningRecord, ReadingChecksEveryField) {
    const Graph g = residual_net(1);
    const json good = tuning_records_to_json(tuning_records_from_plan(default_plan(g), host_target(), 1, 1, nullptr));
    auto error_of = [&](const std::function<void(json &)> &edit) {
        json j = good;
        edit(j);
        try {
            tuning_records_from_json(j, "rec.json");
        } catch (const Error &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    EXPECT_TRUE(test::contains(error_of([](json &j) { j["format"] = "hfuse-plan"; }), "rec.json"));
    EXPECT_TRUE(test::contains(error_of([](json &j) { j["format"] = "hfuse-plan"; }), "format"));
    EXPECT_TRUE(test::contains(error_of([](json &j) { j["version"] = 2; }), "version"));
    EXPECT_TRUE(test::contains(error_of([](json &j) { j["entries"][0].erase("signature"); }), "entries[0].signature"));
    EXPECT_TRUE(test::contains(error_of([](json &j) { j["entries"][1]["groups"][0]["nodes"][0] = 99; }),
                               "entries[1].groups[0].nodes"));
    EXPECT_TRUE(test::contains(error_of([](json &j) { j["entries"][1]["groups"][0]["master"] = 4; }),
                               "entries[1].groups[0].master"));
    EXPECT_TRUE(test::contains(error_of([](json &j) { j["entries"][1]["groups"][0]["placement"]["0"] = "sideways"; }),
                               "entries[1].groups[0].placement.0"));
    EXPECT_TRUE(test::contains(error_of([](json &j) { j["entries"][1]["groups"][0]["placement"]["x"] = "inline"; }),
                               "entries[1].groups[0].placement.x"));
    EXPECT_TRUE(
        test::contains(error_of([](json &j) { j["entries"][1]["groups"].push_back(j["entries"][1]["groups"][0]); }),
                       "is in two groups"));
    EXPECT_TRUE(test::contains(error_of([](json &j) { j["entries"][0]["tuned_ms"] = "fast"; }), "entries[0].tuned_ms"));
    EXPECT_EQ(error_of([](json &) {}), "no error");
}

}  // namespace
}  // namespace hfuse
