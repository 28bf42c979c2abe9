// hfuse explore: the pieces in process (candidate keys, the plan space, the beam search, the cost
// estimate, parameter variants, the CSV and the plot) and a tiny end-to-end run of the command:
// results.json/.csv rows and statuses, a failing candidate (a bad schedule parameter) recorded as an
// error, best_plan.json accepted by run --check, bench and compile, --resume skipping what is done,
// timeouts recorded as such, and bad flags (exit 2, naming the flag).
#include "explore/candidate.h"
#include "explore/cost_model.h"
#include "explore/group_search.h"
#include "explore/plan_space.h"
#include "explore/report.h"
#include "explore/results.h"
#include "explore/schedule_variants.h"
#include "explore/svg_plot.h"
#include "hfuse/composer.h"
#include "hfuse/error.h"
#include "hfuse/model_io.h"
#include "hfuse/passes.h"
#include "hfuse/planner.h"
#include "hfuse/tuning_record.h"

#include "test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace hfuse {
namespace {

using nlohmann::json;
using test::CommandResult;
using test::contains;
using test::model_node;
using test::read_file;

// A path of this process's, cleared first: an earlier process with the same pid may have left it (a
// run directory that `explore -o` would then refuse).
std::string fresh_tmp(const std::string &name) {
    const std::string path = testing::TempDir() + "/hfuse_explore_test_" + std::to_string(getpid()) + "_" + name;
    std::filesystem::remove_all(path);
    return path;
}

// conv 3x3 (4 -> 8 channels, 16x16) + bias + relu + 2x2 maxpool: small enough to compile in a blink,
// wide enough (16 columns) for the conv template.
json tiny_model(int in_channels = 4, int out_channels = 8, int size = 16) {
    return {{"format", "hfuse-model"},
            {"version", 1},
            {"name", "tiny_cbrm"},
            {"inputs", {{{"name", "x"}, {"shape", {1, in_channels, size, size}}}}},
            {"weights",
             {{"w", {{"shape", {out_channels, in_channels, 3, 3}}, {"uniform", {-0.3, 0.3}}, {"seed", 1}}},
              {"b", {{"shape", {out_channels}}, {"uniform", {-0.1, 0.1}}, {"seed", 2}}}}},
            {"nodes",
             {model_node("conv", "Conv", {"x", "w", "b"}, {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}}),
              model_node("relu", "Relu", {"conv"}),
              model_node("pool", "MaxPool", {"relu"}, {{"kernel_shape", {2, 2}}, {"strides", {2, 2}}})}},
            {"outputs", {"pool"}}};
}

std::string write_tiny_model() {
    std::string path = fresh_tmp("tiny.json");
    std::ofstream(path) << tiny_model().dump(1);
    return path;
}

Graph load(const json &j) {
    return prepare(parse_model(j, ".", "explore_test.json"));
}

// --- In process --------------------------------------------------------------------------------

TEST(ExploreCandidate, KeyIgnoresNamesOrderAndRules) {
    Graph g = simplify(load(tiny_model()));
    // AVX2's defaults whatever the host: its 8 lanes give the 8-channel conv a conv_cv group.
    const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41");
    FusedGraph a = with_default_schedules(plan_fusion(g, {load_rules("tvm")}), avx2);
    explore::Candidate c1, c2, c3, c4;
    c1.plan = plan_to_json(a);
    c2.plan = c1.plan;
    c2.plan["rules"] = {"something else"};
    std::swap(c2.plan["groups"][0], c2.plan["groups"][1]);
    c2.plan["groups"][0]["name"] = "renamed";
    explore::assign_key(c1, false);
    explore::assign_key(c2, false);
    EXPECT_EQ(c1.key, c2.key);

    c3.plan = c1.plan;
    for (json &grp : c3.plan["groups"]) {
        if (grp["schedule"]["template"] == "conv_cv") grp["schedule"]["block_rows"] = 5;
    }
    explore::assign_key(c3, false);
    EXPECT_NE(c1.key, c3.key) << "template parameters are part of a plan";

    // An autoscheduler ignores the templates' parameters: the same candidate.
    c4 = c3;
    c4.schedule = c1.schedule = "mullapudi2016";
    explore::assign_key(c1, false);
    explore::assign_key(c4, false);
    EXPECT_EQ(c1.key, c4.key);
    c4.whole = true;
    explore::assign_key(c4, false);
    EXPECT_NE(c1.key, c4.key);
}

TEST(ExploreCandidate, ParameterChangesMatchGroupsByNodesThenByMaster) {
    // g0: the same nodes, block_rows changed ("why" is not a parameter); g1: conv2 now with its pool,
    // matched by its master, another template; g2: nothing in the other plan to compare with.
    const json before = {{"groups",
                          {{{"nodes", {"conv", "relu"}},
                            {"master", "conv"},
                            {"schedule", {{"template", "conv_cv"}, {"block_rows", 7}, {"why", "a"}}}},
                           {{"nodes", {"conv2"}}, {"master", "conv2"}, {"schedule", {{"template", "conv_xv"}}}}}}};
    const json after = {{"groups",
                         {{{"nodes", {"conv", "relu"}},
                           {"master", "conv"},
                           {"schedule", {{"template", "conv_cv"}, {"block_rows", 3}, {"tile_c", 2}, {"why", "b"}}}},
                          {{"nodes", {"conv2", "pool"}}, {"master", "conv2"}, {"schedule", {{"template", "conv_cv"}}}},
                          {{"nodes", {"fc"}}, {"master", "fc"}, {"schedule", {{"template", "gemm_nv"}}}}}}};
    const std::vector<explore::ParameterChange> c = explore::parameter_changes(after, before);
    ASSERT_EQ(c.size(), 3u);
    EXPECT_EQ(c[0].text, "block_rows 7 -> 3");
    EXPECT_EQ(c[1].text, "tile_c - -> 2");
    EXPECT_EQ(c[0].group, &after["groups"][0]);
    EXPECT_EQ(c[2].text, "template conv_xv -> conv_cv");
    EXPECT_EQ(c[2].group, &after["groups"][1]);
}

TEST(ExplorePlanSpace, ExhaustiveIsEveryLegalPlanOnceBestPerGroupCountFirst) {
    // conv -> relu -> pool, and a second branch relu -> sigmoid joining with an add.
    json m = tiny_model();
    m["nodes"].push_back(model_node("sig", "Sigmoid", {"pool"}));
    m["nodes"].push_back(model_node("tanh", "Tanh", {"pool"}));
    m["nodes"].push_back(model_node("add", "Add", {"sig", "tanh"}));
    m["outputs"] = {"add"};
    Graph g = simplify(load(m));
    const Halide::Target host = Halide::get_host_target();
    explore::PlanSpace space = explore::plan_space(g, host, {});
    ASSERT_TRUE(space.exhaustive);
    std::vector<FusedGraph> all = enumerate_plans(g, {});
    EXPECT_EQ(space.plans.size(), all.size());
    std::set<std::string> keys;
    std::set<size_t> counts;
    for (const explore::RankedPlan &r : space.plans) {
        EXPECT_TRUE(keys.insert(explore::partition_key(plan_to_json(r.plan))).second) << "a plan twice";
        counts.insert(r.plan.groups.size());
        EXPECT_GT(r.cost.ms, 0);
        for (const FusedGroup &grp : r.plan.groups) EXPECT_TRUE(grp.schedule.contains("template"));
    }
    // The first plans have distinct group counts, one per count.
    std::set<size_t> leading;
    for (size_t i = 0; i < counts.size(); i++) leading.insert(space.plans[i].plan.groups.size());
    EXPECT_EQ(leading, counts);
}

// A chain of `n` elementwise ops: 2^(n-1) legal plans.
Graph chain(int n) {
    json nodes = json::array();
    std::string prev = "x";
    for (int i = 0; i < n; i++) {
        std::string name = "e" + std::to_string(i);
        nodes.push_back(model_node(name, i % 2 ? "Sigmoid" : "Relu", {prev}));
        prev = name;
    }
    json m = {{"format", "hfuse-model"},   {"version", 1},
              {"name", "chain"},           {"inputs", {{{"name", "x"}, {"shape", {1, 4, 8, 8}}}}},
              {"weights", json::object()}, {"nodes", nodes},
              {"outputs", {prev}}};
    return simplify(load(m));
}

TEST(ExplorePlanSpace, BeamSearchIsLegalDistinctAndSeeded) {
    Graph g = chain(10);  // 512 plans
    const Halide::Target host = Halide::get_host_target();
    explore::PlanSpaceOptions o;
    o.exhaustive_limit = 16;
    o.seed = 7;
    explore::PlanSpace a = explore::plan_space(g, host, o), b = explore::plan_space(g, host, o);
    ASSERT_FALSE(a.exhaustive);
    ASSERT_GT(a.plans.size(), 10u);
    ASSERT_EQ(a.plans.size(), b.plans.size());
    std::set<std::string> keys;
    for (size_t i = 0; i < a.plans.size(); i++) {
        json pa = plan_to_json(a.plans[i].plan);
        EXPECT_EQ(pa, plan_to_json(b.plans[i].plan)) << "same seed, same plans in the same order";
        EXPECT_TRUE(keys.insert(explore::partition_key(pa)).second) << "a plan twice";
        EXPECT_NO_THROW(check_plan(a.plans[i].plan));
    }
    // It reaches the maximal plan (one group) through merges along edges.
    bool one_group = false;
    for (const explore::RankedPlan &r : a.plans) one_group = one_group || r.plan.groups.size() == 1;
    EXPECT_TRUE(one_group);
}

TEST(ExploreCostModel, FusionMovesFewerBytesAndTwoConvsInAGroupCostMore) {
    const Halide::Target host = Halide::get_host_target();
    Graph g = simplify(load(tiny_model()));
    FusedGraph fused = with_default_schedules(plan_fusion(g, {load_rules("x86")}), host);
    FusedGraph unfused = with_default_schedules(singleton_groups(g), host);
    explore::PlanCost f = explore::estimate_plan(fused, host), u = explore::estimate_plan(unfused, host);
    EXPECT_EQ(f.bytes_between_groups, 4 * 8 * 8 * 8) << "one group: only the model output leaves it";
    EXPECT_EQ(u.bytes_between_groups, 2 * (2 * 4 * 8 * 16 * 16) + 4 * 8 * 8 * 8)
        << "conv and relu written and read once each, the pool written";
    EXPECT_LT(f.ms, u.ms);
    EXPECT_DOUBLE_EQ(f.flops, u.flops);

    json m = tiny_model(16, 16, 32);
    m["nodes"].push_back(
        model_node("conv2", "Conv", {"pool", "w2"}, {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}}));
    m["weights"]["w2"] = {{"shape", {16, 16, 3, 3}}, {"uniform", {-0.3, 0.3}}, {"seed", 3}};
    m["outputs"] = {"conv2"};
    Graph g2 = simplify(load(m));
    FusedGraph apart, together;
    apart.graph = together.graph = g2;
    apart.rewritten = together.rewritten = true;
    apart.groups = {FusedGroup{"", "", {"conv", "relu", "pool"}}, FusedGroup{"", "", {"conv2"}}};
    together.groups = {FusedGroup{"", "", {"conv", "relu", "pool", "conv2"}}};
    explore::PlanCost pa = explore::estimate_plan(with_default_schedules(check_plan(apart), host), host);
    explore::PlanCost pt = explore::estimate_plan(with_default_schedules(check_plan(together), host), host);
    EXPECT_TRUE(pt.groups[0].heavy_in_simple);
    EXPECT_GT(pt.ms, pa.ms) << "a second conv in a group runs under the simple schedule";
}

TEST(ExploreVariants, NeighboursChangeOneParameterAndTheComposerAcceptsThem) {
    const Halide::Target host = Halide::get_host_target();
    Graph g = simplify(load(tiny_model()));
    FusedGraph plan = with_default_schedules(plan_fusion(g, {load_rules("tvm")}), host);
    explore::VariantChecker checker(g, host);
    for (const FusedGroup &grp : plan.groups) EXPECT_EQ(checker.check(plan, grp.name), "");
    std::vector<explore::ScheduleVariant> v = explore::schedule_neighbours(plan, checker, host, 3);
    ASSERT_GT(v.size(), 3u);
    std::set<std::string> seen;
    for (const explore::ScheduleVariant &var : v) {
        EXPECT_TRUE(seen.insert(var.description).second);
        int changed = 0;  // parameters changed, added (one the plan left out) or removed
        for (size_t i = 0; i < plan.groups.size(); i++) {
            const json &before = plan.groups[i].schedule, &after = var.schedule_of(plan, i);
            for (const json *s : {&before, &after}) {
                for (const auto &kv : s->items()) {
                    const bool in_both = before.contains(kv.key()) && after.contains(kv.key());
                    if (kv.key() == "why" || (in_both && s == &after)) continue;  // counted once
                    if (!in_both || before[kv.key()] != after[kv.key()]) changed++;
                }
            }
        }
        EXPECT_EQ(changed, 1) << var.description;
        const FusedGraph applied = var.applied_to(plan);
        for (const FusedGroup &grp : applied.groups) EXPECT_EQ(checker.check(applied, grp.name), "") << var.description;
    }
    // The same seed gives the same order.
    std::vector<explore::ScheduleVariant> again = explore::schedule_neighbours(plan, checker, host, 3);
    ASSERT_EQ(again.size(), v.size());
    for (size_t i = 0; i < v.size(); i++) EXPECT_EQ(again[i].description, v[i].description);
    // The checker rejects what the composer rejects, naming the parameter.
    FusedGraph bad = plan;
    int rejected = 0;
    for (FusedGroup &grp : bad.groups) {
        const std::string tmpl = grp.schedule.value("template", "");
        if (tmpl != "conv_xv" && tmpl != "conv_cv") continue;
        const std::string param = tmpl == "conv_xv" ? "tile_c" : "tile_c_vectors";
        grp.schedule[param] = 99;
        EXPECT_TRUE(contains(checker.check(bad, grp.name), "schedule." + param)) << checker.check(bad, grp.name);
        rejected++;
    }
    EXPECT_GT(rejected, 0);
}

TEST(ExploreVariants, ParametersThePlanLeavesOutAreTriedToo) {
    // A 1x1 conv 8 -> 16 + ReLU: its default conv_xv schedule leaves "reduction_unroll" out (8 input
    // channels: the reduction rolled); a neighbour sets it to 2, from the 1 the template runs with.
    const Halide::Target host = Halide::get_host_target();
    const json model = {
        {"format", "hfuse-model"},
        {"version", 1},
        {"name", "pointwise"},
        {"inputs", {{{"name", "x"}, {"shape", {1, 8, 16, 16}}}}},
        {"weights", {{"w", {{"shape", {16, 8, 1, 1}}, {"uniform", {-0.3, 0.3}}, {"seed", 1}}}}},
        {"nodes",
         {model_node("conv", "Conv", {"x", "w"}, {{"kernel_shape", {1, 1}}}), model_node("relu", "Relu", {"conv"})}},
        {"outputs", {"relu"}}};
    Graph g = simplify(load(model));
    FusedGraph plan = with_default_schedules(plan_fusion(g, {load_rules("x86")}), host);
    explore::VariantChecker checker(g, host);
    std::vector<explore::ScheduleVariant> v = explore::schedule_neighbours(plan, checker, host, 3);
    int groups = 0;
    for (size_t i = 0; i < plan.groups.size(); i++) {
        const json &s = plan.groups[i].schedule;
        if (s.value("template", "") != "conv_xv" || s.contains("reduction_unroll")) continue;
        groups++;
        bool unrolled = false;
        for (const explore::ScheduleVariant &var : v) {
            if (var.schedule_of(plan, i).value("reduction_unroll", 0) != 2) continue;
            unrolled = true;
            EXPECT_TRUE(contains(var.description, "reduction_unroll (absent: 1)->2")) << var.description;
        }
        EXPECT_TRUE(unrolled) << plan.groups[i].name;
        // From a plan that sets it, the step back to 1 leaves it out: the original plan, not a
        // different-looking copy for `explore` to time again.
        FusedGraph set = plan;
        set.groups[i].schedule["reduction_unroll"] = 2;
        bool back = false;
        for (const explore::ScheduleVariant &var : explore::schedule_neighbours(set, checker, host, 3)) {
            if (!contains(var.description, "reduction_unroll 2->1")) continue;
            back = true;
            EXPECT_FALSE(var.schedule_of(set, i).contains("reduction_unroll"));
        }
        EXPECT_TRUE(back);
    }
    ASSERT_GT(groups, 0) << "no conv_xv group without reduction_unroll: the test checks nothing";
}

TEST(ExploreVariants, FlagsAreFlipped) {
    // A 5x5 stride-2 depthwise conv (a pad across): conv_dw's deinterleave_x, set by the defaults,
    // is one neighbour away from false (left out: what the template runs with absent), and back.
    const Halide::Target host = Halide::get_host_target();
    json model = {{"format", "hfuse-model"},
                  {"version", 1},
                  {"name", "dw"},
                  {"inputs", {{{"name", "x"}, {"shape", {1, 8, 20, 40}}}}},
                  {"weights", {{"w", {{"shape", {8, 1, 5, 5}}, {"uniform", {-0.3, 0.3}}, {"seed", 1}}}}},
                  {"nodes",
                   {model_node("conv", "Conv", {"x", "w"},
                               {{"kernel_shape", {5, 5}}, {"strides", {2, 2}}, {"pads", {2, 2, 2, 2}}, {"group", 8}}),
                    model_node("relu", "Relu", {"conv"})}},
                  {"outputs", {"relu"}}};
    Graph g = simplify(load(model));
    FusedGraph plan = with_default_schedules(plan_fusion(g, {load_rules("x86")}), host);
    ASSERT_EQ(plan.groups[0].schedule.value("template", ""), "conv_dw");
    ASSERT_EQ(plan.groups[0].schedule.value("deinterleave_x", false), true) << plan.groups[0].schedule.dump();
    explore::VariantChecker checker(g, host);
    bool off = false;
    for (const explore::ScheduleVariant &var : explore::schedule_neighbours(plan, checker, host, 3)) {
        if (var.schedule_of(plan, 0).contains("deinterleave_x")) continue;
        off = true;
        EXPECT_TRUE(contains(var.description, "deinterleave_x true->false")) << var.description;
    }
    EXPECT_TRUE(off);
    FusedGraph plain = plan;
    plain.groups[0].schedule.erase("deinterleave_x");
    bool on = false;
    for (const explore::ScheduleVariant &var : explore::schedule_neighbours(plain, checker, host, 3)) {
        on = on || var.schedule_of(plain, 0).value("deinterleave_x", false);
    }
    EXPECT_TRUE(on);
}

TEST(ExploreVariants, WinogradGroupsTryTheDirectConvAndBack) {
    // 16 -> 16 channels at 24x24 (36 tiles): Winograd F(4x4, 3x3) by default; F(2x2, 3x3) and the direct conv
    // (without Winograd's tile, and without "algorithm": the direct conv is what conv_cv runs with it
    // left out) one neighbour away.
    const Halide::Target host = Halide::get_host_target();
    Graph g = simplify(load(tiny_model(16, 16, 24)));
    FusedGraph plan = with_default_schedules(plan_fusion(g, {load_rules("x86")}), host);
    ASSERT_EQ(plan.groups[0].schedule.value("template", ""), "conv_cv");
    ASSERT_EQ(plan.groups[0].schedule.value("algorithm", ""), "winograd");
    ASSERT_EQ(plan.groups[0].schedule.value("winograd_tile", 0), 4);
    explore::VariantChecker checker(g, host);
    bool direct = false, f2 = false;
    for (const explore::ScheduleVariant &var : explore::schedule_neighbours(plan, checker, host, 3)) {
        const nlohmann::json &s = var.schedule_of(plan, 0);
        if (!s.contains("algorithm")) {
            direct = true;
            EXPECT_TRUE(contains(var.description, "algorithm \"winograd\"->\"direct\"")) << var.description;
            EXPECT_FALSE(s.contains("winograd_tile")) << var.description;
        }
        f2 = f2 || s.value("winograd_tile", 0) == 2;
    }
    EXPECT_TRUE(direct);
    EXPECT_TRUE(f2);
    // From the direct conv (the plan without "algorithm"), Winograd is one neighbour away.
    FusedGraph plain = plan;
    plain.groups[0].schedule.erase("algorithm");
    plain.groups[0].schedule.erase("winograd_tile");
    ASSERT_EQ(checker.check(plain, plan.groups[0].name), "");
    bool winograd = false;
    for (const explore::ScheduleVariant &var : explore::schedule_neighbours(plain, checker, host, 3)) {
        if (var.schedule_of(plain, 0).value("algorithm", "") != "winograd") continue;
        winograd = true;
        EXPECT_TRUE(contains(var.description, "algorithm (absent: \"direct\")->\"winograd\"")) << var.description;
    }
    EXPECT_TRUE(winograd);
}

// Two 3x3 convs 8 -> 8 with ReLU (alike: the same ops, shapes and, given the same schedule, one
// class), then a 3x3 conv 8 -> 16 with ReLU (another class).
json alike_convs_model() {
    json weights = json::object(), nodes = json::array();
    std::string in = "x";
    for (int i = 0; i < 3; i++) {
        const int out = i == 2 ? 16 : 8;
        const std::string w = "w" + std::to_string(i), c = "conv" + std::to_string(i), r = "relu" + std::to_string(i);
        weights[w] = {{"shape", {out, 8, 3, 3}}, {"uniform", {-0.3, 0.3}}, {"seed", i + 1}};
        nodes.push_back(model_node(c, "Conv", {in, w}, {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}}));
        nodes.push_back(model_node(r, "Relu", {c}));
        in = r;
    }
    return {{"format", "hfuse-model"}, {"version", 1},
            {"name", "alike_convs"},   {"inputs", {{{"name", "x"}, {"shape", {1, 8, 16, 16}}}}},
            {"weights", weights},      {"nodes", nodes},
            {"outputs", {in}}};
}

TEST(ExploreGroupSearch, AlikeGroupsAreOneClassAndTakeEachVariantTogether) {
    const Halide::Target host = Halide::get_host_target();
    Graph g = simplify(load(alike_convs_model()));
    FusedGraph plan = with_default_schedules(plan_fusion(g, {load_rules("x86")}), host);
    std::map<std::string, size_t> by_master;
    for (size_t i = 0; i < plan.groups.size(); i++) by_master[plan.groups[i].master] = i;
    ASSERT_TRUE(by_master.count("conv0") && by_master.count("conv1") && by_master.count("conv2"));
    const size_t a = by_master["conv0"], b = by_master["conv1"], c = by_master["conv2"];
    plan.groups[b].schedule = plan.groups[a].schedule;  // alike only when scheduled alike
    explore::VariantChecker checker(g, host);
    const std::vector<explore::ScheduleVariant> neighbours = explore::schedule_neighbours(plan, checker, host, 3);
    const std::vector<explore::GroupClass> classes = explore::group_classes(plan, neighbours);
    ASSERT_EQ(classes.size(), 2u);
    EXPECT_EQ(classes[0].groups, (std::vector<size_t>{a, b}));
    EXPECT_EQ(classes[1].groups, std::vector<size_t>{c});
    EXPECT_TRUE(contains(classes[0].label, "(2 alike)")) << classes[0].label;
    for (const explore::ScheduleVariant &v : classes[0].variants) EXPECT_EQ(v.group, a);
    for (const explore::ScheduleVariant &v : classes[1].variants) EXPECT_EQ(v.group, c);

    // Round r gives each class its variant r, on all its groups; past the longest list, nothing.
    std::vector<std::string> changes;
    const std::optional<FusedGraph> round = explore::round_plan(plan, classes, 0, &changes);
    ASSERT_TRUE(round);
    EXPECT_EQ(round->groups[a].schedule, classes[0].variants[0].schedule);
    EXPECT_EQ(round->groups[b].schedule, classes[0].variants[0].schedule);
    EXPECT_EQ(round->groups[c].schedule, classes[1].variants[0].schedule);
    ASSERT_EQ(changes.size(), 2u);
    EXPECT_TRUE(contains(changes[0], "(x2)")) << changes[0];
    for (const FusedGroup &grp : round->groups) EXPECT_EQ(checker.check(*round, grp.name), "") << grp.name;
    const size_t longest = std::max(classes[0].variants.size(), classes[1].variants.size());
    EXPECT_TRUE(explore::round_plan(plan, classes, longest - 1));
    EXPECT_FALSE(explore::round_plan(plan, classes, longest));

    // A class's time is its groups' sum over the default's; a class keeps its fastest variant when
    // that took at most 1 - min_gain of the default's time.
    explore::GroupTimes times;
    times.ms[plan.groups[a].name] = {0.9, 1.0};
    times.ms[plan.groups[b].name] = {1.3, 1.0};
    EXPECT_DOUBLE_EQ(*explore::class_ratio(classes[0], *round, times), 1.1);
    EXPECT_FALSE(explore::class_ratio(classes[1], *round, times)) << "conv2's group was not timed";
    const std::map<size_t, size_t> winners =
        explore::winning_variants({{{0, 1.02}, {1, 0.96}, {2, 0.98}}, {{0, 0.98}}, {}}, 0.03);
    EXPECT_EQ(winners, (std::map<size_t, size_t>{{0, 1}}));
    const FusedGraph won = explore::with_variants(plan, classes, {{0, 1}});
    EXPECT_EQ(won.groups[a].schedule, classes[0].variants[1].schedule);
    EXPECT_EQ(won.groups[b].schedule, classes[0].variants[1].schedule);
    EXPECT_EQ(won.groups[c].schedule, plan.groups[c].schedule);

    // An evaluation's times: groups without the other plan's time are left out; no profile at all, or
    // a failed run, has none.
    explore::Evaluation e;
    e.status = "ok";
    e.group_ms = {{"g0", 0.5}, {"g1", 0.5}};
    e.against_group_ms = {{"g0", 0.6}};
    const std::optional<explore::GroupTimes> parsed = explore::group_times(e);
    ASSERT_TRUE(parsed);
    ASSERT_EQ(parsed->ms.size(), 1u);
    EXPECT_EQ(parsed->ms.at("g0"), std::make_pair(0.5, 0.6));
    e.status = "error";
    EXPECT_FALSE(explore::group_times(e));
    e.status = "ok";
    e.against_group_ms.clear();
    EXPECT_FALSE(explore::group_times(e));
}

TEST(ExploreReport, CostModelRankedBesideTheMeasurements) {
    // Plans timed with default parameters, their estimates in the measured order, then reversed:
    // Spearman's rank correlation 1 and -1. A variant and an autoscheduled candidate do not count.
    auto row = [](int id, double estimate, double measured, const std::string &origin) {
        explore::Evaluation e;
        e.id = id;
        e.status = "ok";
        e.median_ms = measured;
        e.candidate.key = "k" + std::to_string(id);
        e.candidate.origin = origin;
        e.candidate.estimate_ms = estimate;
        e.candidate.groups = id + 1;
        e.candidate.plan = {{"groups", json::array()}};
        return e;
    };
    explore::ReportInput in;
    in.header = {{"model", "m"}};
    in.rows = {row(0, 1.0, 10.0, "baseline"), row(1, 2.0, 11.0, "plans"), row(2, 3.0, 12.0, "plans"),
               row(3, 4.0, 13.0, "plans")};
    in.rows.push_back(row(4, 9.0, 1.0, "params"));  // a variant: not the model's to rank
    in.rows.back().candidate.variant = "g0.tile_c 4->6";
    in.rows.push_back(row(5, 9.0, 1.0, "autoschedule"));
    in.rows.back().candidate.schedule = "adams2019";
    EXPECT_TRUE(contains(explore::markdown_report(in),
                         "4 plans timed with the templates' default parameters: "
                         "Spearman's rank correlation of the cost estimate with "
                         "the measured time 1.00"))
        << explore::markdown_report(in);
    for (int i = 0; i < 4; i++) in.rows[i].candidate.estimate_ms = 10.0 - i;
    EXPECT_TRUE(contains(explore::markdown_report(in), "measured time -1.00")) << explore::markdown_report(in);
    in.rows.resize(2);  // fewer than 3 plans: no section
    EXPECT_FALSE(contains(explore::markdown_report(in), "The cost model against the measurements"));
}

TEST(ExploreResults, CsvQuotesAndThePlotMarksTheBest) {
    explore::Evaluation ok, bad;
    ok.candidate.plan = {{"groups", {{{"name", "g0"}, {"nodes", {"conv", "relu"}}}}}};
    ok.candidate.key = "aaaa";
    ok.candidate.groups = 1;
    ok.candidate.baselines = {"default"};
    ok.status = "ok";
    ok.median_ms = 1.5;
    ok.compile_s = 0.25;
    bad = ok;
    bad.candidate.key = "bbbb";
    bad.candidate.baselines.clear();
    bad.status = "error";
    bad.median_ms = NAN;
    bad.error = "field 'schedule.tile_c', \"quoted\"";
    std::string csv = explore::results_csv({ok, bad});
    EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
    EXPECT_TRUE(contains(csv, "\"field 'schedule.tile_c', \"\"quoted\"\"\"")) << csv;
    EXPECT_TRUE(contains(csv, ",1.5,")) << csv;
    std::string svg = explore::svg_plot({ok, bad}, "aaaa", "t<1>");
    EXPECT_EQ(svg.rfind("<svg", 0), 0u);
    EXPECT_TRUE(contains(svg, "best 1.5 ms"));
    EXPECT_TRUE(contains(svg, "t&lt;1&gt;"));
    EXPECT_TRUE(contains(svg, ">default</text>"));
    // A round trip through results.json's row format.
    explore::Evaluation back = explore::evaluation_from_json(explore::to_json(bad));
    EXPECT_EQ(back.error, bad.error);
    EXPECT_TRUE(std::isnan(back.median_ms));
}

// --- The command ---------------------------------------------------------------------------------

json results_of(const std::string &dir) {
    return json::parse(read_file(dir + "/results.json"));
}

TEST(ExploreCli, TinyRunResumeAndBestPlan) {
    const std::string model = write_tiny_model();
    // A plan file with a parameter the conv template rejects: recorded as an error, the run goes on.
    Graph g = load_model(model);
    FusedGraph bad = with_default_schedules(plan_fusion(g, {load_rules("x86")}), Halide::get_host_target());
    bad.groups[0].schedule["tile_c"] = 99;
    const std::string bad_path = fresh_tmp("bad_plan.json");
    write_plan(bad_path, bad);

    const std::string dir = fresh_tmp("run");
    CommandResult r = test::run_cli("explore " + model + " -o " + dir +
                                    " --budget 6 --schedules templates,mullapudi2016 --runs 3 --confirm 1 --jobs 2 "
                                    "--plan " +
                                    bad_path);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "explore [1/")) << "plain progress lines when not on a terminal: " << r.out;
    json res = results_of(dir);
    EXPECT_EQ(res["model"], "tiny_cbrm");
    EXPECT_TRUE(res["machine"].contains("cpu"));
    const json &rows = res["candidates"];
    ASSERT_EQ(rows.size(), 6u) << r.out;
    std::set<std::string> baselines, sources, keys, statuses;
    int bad_rows = 0;
    for (const json &c : rows) {
        for (const char *f : {"plan", "schedule", "params", "groups", "compile_s", "median_ms", "status", "error"}) {
            EXPECT_TRUE(c.contains(f)) << f;
        }
        EXPECT_TRUE(keys.insert(c["key"].get<std::string>()).second) << "a candidate twice";
        for (const json &b : c["baselines"])
            baselines.insert(b.get<std::string>() + "/" + c["schedule"].get<std::string>());
        statuses.insert(c["status"].get<std::string>());
        if (c["status"] == "ok") {
            sources.insert(c["schedule"].get<std::string>());
            EXPECT_GT(c["median_ms"].get<double>(), 0);
            EXPECT_GT(c["compile_s"].get<double>(), 0);
        }
        if (c["origin"] == "user") {
            bad_rows++;
            EXPECT_EQ(c["status"], "error");
            EXPECT_TRUE(contains(c["error"].get<std::string>(), "schedule.tile_c")) << c["error"];
        }
    }
    EXPECT_EQ(bad_rows, 1);
    for (const char *b : {"default/templates", "unfused/templates", "tvm/templates", "whole/mullapudi2016"})
        EXPECT_TRUE(baselines.count(b)) << b;
    EXPECT_EQ(sources, (std::set<std::string>{"templates", "mullapudi2016"}));
    std::string csv = read_file(dir + "/results.csv");
    EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7) << csv;
    EXPECT_TRUE(contains(read_file(dir + "/plot.svg"), "best "));
    std::string report = read_file(dir + "/report.md");
    EXPECT_TRUE(contains(report, "## Why it won")) << report;
    EXPECT_TRUE(contains(report, "| default")) << report;

    // best_plan.json as is: run --check, bench, compile.
    const std::string best = dir + "/best_plan.json";
    r = test::run_cli("run " + model + " --plan " + best + " --check");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, ": ok")) << r.out;
    r = test::run_cli("bench " + model + " --plan " + best + " --runs 1 --json");
    EXPECT_EQ(r.code, 0) << r.out;
    r = test::run_cli("compile " + model + " --plan " + best + " -o " + fresh_tmp("aot") + " --name tiny");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(res["best_plan"]["key"].get<std::string>().size(), 16u);
    // best_plan.json is another plan than the default only if it beat the default, timed in one
    // process against it (one call per confirmation round), by 2% or more.
    std::string default_key;
    for (const json &c : rows) {
        for (const json &b : c["baselines"]) {
            if (b == "default") default_key = c["key"];
        }
    }
    if (res["best_plan"]["key"] != default_key) {
        ASSERT_TRUE(res.contains("against_default")) << res.dump(1);
        EXPECT_EQ(res["against_default"]["candidate"], res["best_plan"]["key"]);
        EXPECT_TRUE(res["against_default"]["kept"].get<bool>());
        ASSERT_EQ(res["against_default"]["speedups"].size(), 1u);
        EXPECT_GE(res["against_default"]["speedups"][0].get<double>(), 1.02);
    }

    // Without --resume the directory is refused; with it, the finished candidates are kept, not rerun.
    r = test::run_cli("explore " + model + " -o " + dir + " --budget 6");
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_TRUE(contains(r.out, "-o " + dir)) << r.out;
    r = test::run_cli("explore " + model + " -o " + dir +
                      " --budget 8 --schedules templates,mullapudi2016 --runs 3 --confirm 0 --resume --plan " +
                      bad_path);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "resuming: 6 candidates done")) << r.out;
    json again = results_of(dir);
    ASSERT_EQ(again["candidates"].size(), 8u) << r.out;
    for (size_t i = 0; i < rows.size(); i++) {
        EXPECT_EQ(again["candidates"][i]["key"], rows[i]["key"]);
        EXPECT_EQ(again["candidates"][i]["median_ms"], rows[i]["median_ms"]) << "candidate " << i << " ran again";
    }
}

TEST(ExploreCli, TimeoutsAreRecordedAndTheRunGoesOn) {
    const std::string model = write_tiny_model();
    const std::string dir = fresh_tmp("timeouts");
    CommandResult r = test::run_cli("explore " + model + " -o " + dir +
                                    " --budget 1 --schedules templates --timeout-per-candidate 0.05 --confirm 0"
                                    " --no-cache");  // compiling takes longer than 0.05 s; loading may not
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_TRUE(contains(r.out, "no candidate ran successfully")) << r.out;
    json rows = results_of(dir)["candidates"];
    ASSERT_EQ(rows.size(), 3u) << "default, unfused and tvm all ran (and timed out): " << r.out;
    for (const json &c : rows) {
        EXPECT_EQ(c["status"], "timeout");
        EXPECT_TRUE(contains(c["error"].get<std::string>(), "timed out after 0.05 s")) << c["error"];
        EXPECT_TRUE(c["median_ms"].is_null());
    }
    EXPECT_TRUE(contains(read_file(dir + "/results.csv"), ",timeout,"));
}

TEST(ExploreCli, CandidatesPastTheMemoryBoundAreSkippedAndTheRunGoesOn) {
    // 128 MB of address space is less than loading hfuse's libraries takes: every candidate fails for
    // memory, is recorded so, and the run goes on to the end.
    const std::string model = write_tiny_model();
    const std::string dir = fresh_tmp("memory");
    CommandResult r = test::run_cli("explore " + model + " -o " + dir +
                                    " --budget 1 --schedules templates --max-memory 128 --confirm 0");
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_TRUE(contains(r.out, "no candidate ran successfully")) << r.out;
    const json results = results_of(dir);
    EXPECT_EQ(results["options"]["max_memory_mb"], 128) << results["options"].dump();
    ASSERT_EQ(results["candidates"].size(), 3u) << r.out;
    for (const json &c : results["candidates"]) {
        EXPECT_EQ(c["status"], "error");
        EXPECT_EQ(c["error"], "needed more than --max-memory 128 MB (skipped)");
    }
    // Without the bound the same candidates run.
    const std::string free_dir = fresh_tmp("memory_free");
    r = test::run_cli("explore " + model + " -o " + free_dir +
                      " --budget 1 --schedules templates --max-memory 0 --confirm 0 --runs 2");
    EXPECT_EQ(r.code, 0) << r.out;
    // An autoscheduler's candidates have a bound of their own: the --whole baseline and the first
    // per-group candidate pass it, and the autoscheduler is given up per group after that one; the
    // templates' candidates run under --max-memory's.
    const std::string auto_dir = fresh_tmp("memory_autoschedule");
    r = test::run_cli("explore " + model + " -o " + auto_dir +
                      " --budget 10 --schedules templates,mullapudi2016 --max-memory 0 --autoschedule-max-memory 128 "
                      "--confirm 0 --runs 2");
    EXPECT_EQ(r.code, 0) << r.out;
    int whole = 0, per_group = 0, templated = 0;
    const json auto_results = results_of(auto_dir);
    for (const json &c : auto_results["candidates"]) {
        if (c["schedule"] == "templates") {
            EXPECT_EQ(c["status"], "ok") << c.dump();
            templated++;
        } else {
            (c["whole"].get<bool>() ? whole : per_group)++;
            EXPECT_EQ(c["error"], "needed more than --autoschedule-max-memory 128 MB (skipped)") << c.dump();
        }
    }
    EXPECT_GE(templated, 3);
    EXPECT_EQ(whole, 1);
    EXPECT_EQ(per_group, 1) << auto_results["candidates"].dump(1);
    EXPECT_TRUE(contains(read_file(auto_dir + "/report.md"), "mullapudi2016 per group was given up after candidate"));
}

TEST(ExploreCli, ATimeLimitedRunWritesItsOutputsAndResumes) {
    // A limit the first candidate already passes: it alone runs, and the run ends as a finished one
    // (best_plan.json, report.md), saying so; --resume without the limit then completes the budget,
    // the first candidate kept as it was.
    const std::string model = write_tiny_model();
    const std::string dir = fresh_tmp("time_limit");
    CommandResult r = test::run_cli("explore " + model + " -o " + dir +
                                    " --budget 5 --schedules templates --time-limit 0.001 --runs 2");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "stopped at --time-limit after 1 candidates")) << r.out;
    const json first = results_of(dir)["candidates"];
    ASSERT_EQ(first.size(), 1u) << r.out;
    EXPECT_TRUE(std::filesystem::exists(dir + "/best_plan.json"));
    EXPECT_TRUE(contains(read_file(dir + "/report.md"), "Stopped at --time-limit 0.001 s after 1 of 5 candidates"));
    r = test::run_cli("explore " + model + " -o " + dir + " --budget 5 --schedules templates --runs 2 --resume");
    EXPECT_EQ(r.code, 0) << r.out;
    const json all = results_of(dir)["candidates"];
    EXPECT_GE(all.size(), 3u) << r.out;  // the baselines at least
    EXPECT_EQ(all[0]["key"], first[0]["key"]);
    EXPECT_EQ(all[0]["median_ms"], first[0]["median_ms"]) << "the first candidate ran again";
    EXPECT_FALSE(contains(read_file(dir + "/report.md"), "Stopped at --time-limit"));
}

TEST(ExploreCli, PerSegmentFindingsAndATuningRecordOtherModelsUse) {
    // Three residual blocks (one signature) after a stem: the report and results.json speak of each
    // distinct segment, tuning.json records them, and `--tuned` regroups this model and one with five
    // blocks of other weights as best_plan.json groups them, the outputs still right.
    const std::string model = fresh_tmp("res3.json"), other = fresh_tmp("res5.json");
    save_model(test::residual_net(3), model);
    save_model(test::residual_net(5, 40), other);
    const std::string dir = fresh_tmp("segments");
    CommandResult r = test::run_cli("explore " + model + " -o " + dir + " --budget 6 --schedules templates --runs 2");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "tuning.json")) << r.out;
    const json res = results_of(dir);
    ASSERT_EQ(res["segments"].size(), 2u) << res["segments"].dump(1);
    const json &block = res["segments"][1];
    EXPECT_EQ(block["occurrences"], 3);
    EXPECT_EQ(block["nodes"][0], "b0_c1");
    ASSERT_FALSE(block["choices"].empty());
    // Every candidate the templates scheduled groups the block some way (no rewrite changes this model,
    // so the unfused plans over the graph as written count too).
    int timed = 0, templated = 0;
    for (const json &c : block["choices"]) timed += c["candidates"].get<int>();
    for (const json &c : res["candidates"]) templated += c["status"] == "ok" && c["schedule"] == "templates";
    EXPECT_EQ(timed, templated);
    EXPECT_GE(timed, 4);
    // Each templated candidate's groups were profiled, so the block has its own time per grouping;
    // the budget's last candidate is the plan composed from each segment's fastest grouping.
    for (const json &c : res["candidates"]) {
        if (c["status"] == "ok" && c["schedule"] == "templates") EXPECT_FALSE(c["group_ms"].empty()) << c["key"];
    }
    EXPECT_GT(block["choices"][0]["measured"].get<int>(), 0);
    int composed = 0;
    for (const json &c : res["candidates"]) composed += c["origin"] == "segments";
    EXPECT_TRUE(composed == 1 || contains(read_file(dir + "/report.md"), "fastest measured choice is candidate"))
        << res["candidates"].dump(1);
    const std::string report = read_file(dir + "/report.md");
    EXPECT_TRUE(contains(report, "## Per segment")) << report;
    EXPECT_TRUE(contains(report, "| `b0_c1` ... `b0_out` (5 nodes) | 3 |")) << report;

    const std::string tuning = dir + "/tuning.json";
    const TuningRecords records = read_tuning_records(tuning);
    ASSERT_EQ(records.entries.size(), 2u);
    const FusedGraph best = read_plan_for_model(dir + "/best_plan.json", load_model(model));
    std::set<std::set<std::string>> best_groups;
    for (const FusedGroup &g : best.groups) best_groups.insert({g.nodes.begin(), g.nodes.end()});

    const std::string tuned_plan = fresh_tmp("tuned_plan.json");
    r = test::run_cli("plan " + model + " --tuned " + tuning + " -o " + tuned_plan);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "tuned: 4 of the model's 4 segments regrouped by 2 tuning entries")) << r.out;
    std::set<std::set<std::string>> tuned_groups;
    for (const FusedGroup &g : read_plan_for_model(tuned_plan, load_model(model)).groups)
        tuned_groups.insert({g.nodes.begin(), g.nodes.end()});
    EXPECT_EQ(tuned_groups, best_groups);
    r = test::run_cli("run " + other + " --tuned " + tuning + " --check");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "tuned: 6 of the model's 6 segments regrouped")) << r.out;
    EXPECT_TRUE(contains(r.out, ": ok")) << r.out;

    // --tuned plans; it does not take a plan file or another whole plan. A bad record names its field.
    r = test::run_cli("run " + model + " --plan " + dir + "/best_plan.json --tuned " + tuning);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_TRUE(contains(r.out, "--tuned")) << r.out;
    const std::string bad = fresh_tmp("bad_tuning.json");
    std::ofstream(bad) << R"({"format": "hfuse-tuning", "version": 1, "entries": [{"signature": 3}]})";
    r = test::run_cli("bench " + model + " --tuned " + bad + " --runs 1");
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_TRUE(contains(r.out, bad)) << r.out;
    EXPECT_TRUE(contains(r.out, "entries[0].signature")) << r.out;
}

TEST(ExploreCli, GroupParametersAreTimedAgainstTheDefaultInOneProcess) {
    // Three residual blocks: after the baselines and plans, rounds that each vary every class of alike
    // groups, timed with `bench --against` the default plan, whose times results.json and report.md show.
    const std::string model = fresh_tmp("res3_groups.json");
    save_model(test::residual_net(3), model);
    const std::string dir = fresh_tmp("group_search");
    CommandResult r =
        test::run_cli("explore " + model + " -o " + dir + " --budget 12 --schedules templates --runs 2 --confirm 0");
    ASSERT_EQ(r.code, 0) << r.out;
    const json res = results_of(dir);
    std::string default_key;
    for (const json &c : res["candidates"]) {
        for (const json &b : c["baselines"]) {
            if (b == "default") default_key = c["key"];
        }
    }
    ASSERT_FALSE(default_key.empty());
    ASSERT_TRUE(res.contains("group_search")) << res.dump(1);
    const json &search = res["group_search"];
    EXPECT_EQ(search["against"], default_key);
    ASSERT_GE(search["rounds"].size(), 2u) << search.dump(1);
    int alike = 0;
    for (const json &c : search["classes"]) {
        alike = std::max(alike, static_cast<int>(c["groups"].size()));
        for (const json &t : c["trials"]) EXPECT_GT(t["ratio"].get<double>(), 0) << c.dump();
    }
    EXPECT_GE(alike, 2) << "the blocks' alike groups are one class: " << search["classes"].dump(1);
    int rounds = 0;
    for (const json &c : res["candidates"]) {
        if (c["origin"] != "group_params" || c["status"] != "ok") continue;
        rounds++;
        EXPECT_EQ(c["against_key"], default_key);
        EXPECT_GT(c["against_ms"].get<double>(), 0);
        EXPECT_FALSE(c["against_group_ms"].empty());
        for (const auto &kv : c["against_group_ms"].items()) EXPECT_TRUE(c["group_ms"].contains(kv.key())) << kv.key();
    }
    EXPECT_GE(rounds, 2);
    const std::string report = read_file(dir + "/report.md");
    EXPECT_TRUE(contains(report, "## Group parameters")) << report;
    EXPECT_TRUE(contains(report, "(3 alike)")) << report;
}

TEST(ExploreCli, BadFlagsExitTwoNamingTheFlag) {
    const std::string model = write_tiny_model();
    struct Case {
        std::string args, flag;
    };
    for (const Case &c : {Case{"--budget 0", "--budget"}, Case{"--jobs 0", "--jobs"},
                          Case{"--schedules templates,bogus", "--schedules"},
                          Case{"--timeout-per-candidate -1", "--timeout-per-candidate"}, Case{"--runs x", "--runs"},
                          Case{"--max-memory -5", "--max-memory"}, Case{"--time-limit -1", "--time-limit"},
                          Case{"--autoschedule-max-memory -1", "--autoschedule-max-memory"},
                          Case{"--autoschedule-timeout 0", "--autoschedule-timeout"}}) {
        CommandResult r = test::run_cli("explore " + model + " -o " + fresh_tmp("bad_flags") + " " + c.args);
        EXPECT_EQ(r.code, 2) << c.args << ": " << r.out;
        EXPECT_TRUE(contains(r.out, c.flag)) << c.args << ": " << r.out;
    }
    CommandResult r = test::run_cli("explore " + model);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_TRUE(contains(r.out, "--output")) << r.out;
    r = test::run_cli("explore " + fresh_tmp("missing.json") + " -o " + fresh_tmp("missing_out"));
    EXPECT_EQ(r.code, 1) << r.out;
}

}  // namespace
}  // namespace hfuse
