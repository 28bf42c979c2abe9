// Plan files: writing and reading back, hand-written plans, and every illegal plan rejected with an
// Error that names the plan file and the offending nodes.
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/fused_graph.h"
#include "hfuse/fusion_rules.h"
#include "hfuse/model_io.h"
#include "hfuse/passes.h"
#include "hfuse/plan_report.h"
#include "hfuse/planner.h"
#include "hfuse/random.h"
#include "hfuse/reference.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace hfuse {
namespace {

using nlohmann::json;
using test::kModels;
using test::tmp_path;

Graph load_text(const std::string &name, const std::string &text) {
    const std::string path = tmp_path(name + ".json");
    std::ofstream(path) << text;
    return load_model(path);
}

// conv (with bias) -> relu -> maxpool 2x2/2 at 4 channels, 8x8.
Graph small_cbrm() {
    return load_text("small_cbrm", R"({"format": "hfuse-model", "version": 1, "name": "small_cbrm",
      "inputs": [{"name": "x", "shape": [1, 4, 8, 8]}],
      "weights": {"w": {"shape": [4, 4, 3, 3], "uniform": [-0.5, 0.5], "seed": 1},
                  "b": {"shape": [4], "uniform": [-0.5, 0.5], "seed": 2}},
      "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w", "b"], "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}},
                {"name": "relu", "op": "Relu", "inputs": ["conv"]},
                {"name": "pool", "op": "MaxPool", "inputs": ["relu"], "attrs": {"kernel_shape": [2, 2], "strides": [2, 2]}}],
      "outputs": ["pool"]})");
}

// conv -> BatchNormalization (folded by simplify) -> relu at 4 channels, 6x6.
Graph small_cbr() {
    return load_text("small_cbr", R"({"format": "hfuse-model", "version": 1, "name": "small_cbr",
      "inputs": [{"name": "x", "shape": [1, 4, 6, 6]}],
      "weights": {"w": {"shape": [4, 4, 3, 3], "uniform": [-0.5, 0.5], "seed": 1},
                  "s": {"shape": [4], "uniform": [0.5, 1.5], "seed": 2},
                  "b": {"shape": [4], "uniform": [-0.5, 0.5], "seed": 3},
                  "m": {"shape": [4], "uniform": [-0.5, 0.5], "seed": 4},
                  "v": {"shape": [4], "uniform": [0.5, 1.5], "seed": 5}},
      "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w"], "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}},
                {"name": "bn", "op": "BatchNormalization", "inputs": ["conv", "s", "b", "m", "v"]},
                {"name": "relu", "op": "Relu", "inputs": ["bn"]}],
      "outputs": ["relu"]})");
}

// relu feeds two convolutions whose results are added: relu is the cheap shared producer that
// "recompute" copies into both conv groups.
Graph shared_relu() {
    return load_text("shared_relu", R"({"format": "hfuse-model", "version": 1, "name": "shared_relu",
      "inputs": [{"name": "x", "shape": [1, 3, 7, 5]}],
      "weights": {"wa": {"shape": [4, 3, 3, 3], "uniform": [-0.5, 0.5], "seed": 1},
                  "wb": {"shape": [4, 3, 1, 1], "uniform": [-0.5, 0.5], "seed": 2}},
      "nodes": [{"name": "relu", "op": "Relu", "inputs": ["x"]},
                {"name": "conv_a", "op": "Conv", "inputs": ["relu", "wa"], "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}},
                {"name": "conv_b", "op": "Conv", "inputs": ["relu", "wb"], "attrs": {"kernel_shape": [1, 1]}},
                {"name": "add", "op": "Add", "inputs": ["conv_a", "conv_b"]}],
      "outputs": ["add"]})");
}

std::string write_plan_json(const std::string &name, const json &plan) {
    const std::string path = tmp_path(name + ".plan.json");
    std::ofstream(path) << plan.dump(2);
    return path;
}

json plan_with(const json &groups) {
    return {{"format", "hfuse-plan"}, {"version", 1}, {"groups", groups}};
}

// Runs `plan` and the unfused graph `original` on the same inputs; expects outputs within 1e-4.
void expect_runs_like_unfused(const FusedGraph &plan, const Graph &original) {
    std::map<std::string, TensorBuffer> inputs;
    for (size_t i = 0; i < original.inputs.size(); i++) {
        std::vector<float> data = uniform_values(num_elements(original.inputs[i].shape), -1, 1, 77 + i);
        inputs[original.inputs[i].name] = tensor_from_data(original.inputs[i].shape, data.data());
    }
    auto expected = Executor(singleton_groups(original)).run(inputs);
    auto actual = Executor(plan).run(inputs);
    for (const auto &kv : expected) {
        auto cmp = reference::compare(actual.at(kv.first).data(), kv.second.data(), kv.second.number_of_elements());
        EXPECT_LE(cmp.relative(), 1e-4) << kv.first << "\n" << plan_table(plan);
    }
}

// Reads `plan` for `graph` (simplified, as `hfuse run --plan` does) and expects an Error naming the
// plan file and containing each needle, on one line.
void expect_plan_error(const std::string &name, const Graph &graph, const json &plan,
                       const std::vector<std::string> &needles) {
    SCOPED_TRACE(name);
    const std::string path = write_plan_json(name, plan);
    try {
        FusedGraph f = read_plan(path, simplify(graph));
        ADD_FAILURE() << "plan accepted:\n" << plan_table(f);
    } catch (const Error &e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(path), std::string::npos) << "message does not name the plan file: " << msg;
        for (const auto &n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "missing '" << n << "' in: " << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
    }
}

// --- Round trips --------------------------------------------------------------------------------------

TEST(PlanFile, WriteThenReadRoundTrips) {
    for (const char *model : {"conv_bn_relu", "conv_bias_relu_maxpool", "resnet_block", "lstm_cell", "mlp_softmax"}) {
        Graph g = load_model(kModels + model + ".json");
        for (const auto &rounds : std::vector<std::vector<std::string>>{{"x86"}, {"tvm"}, {"none"}, {"tvm", "x86"}}) {
            std::vector<RuleSet> rules;
            std::string what = model;
            for (const auto &r : rounds) {
                rules.push_back(load_rules(r));
                what += "_" + r;
            }
            SCOPED_TRACE(what);
            FusedGraph f = plan_fusion(g, rules);
            const std::string path = tmp_path(what + ".plan.json");
            write_plan(path, f);
            FusedGraph back = read_plan(path, simplify(g));
            EXPECT_EQ(plan_to_json(back), plan_to_json(f));
            ASSERT_EQ(back.groups.size(), f.groups.size());
            for (size_t i = 0; i < f.groups.size(); i++) {
                EXPECT_EQ(back.groups[i].name, f.groups[i].name);
                EXPECT_EQ(back.groups[i].master, f.groups[i].master);
                EXPECT_EQ(back.groups[i].nodes, f.groups[i].nodes);
                EXPECT_EQ(back.groups[i].placement, f.groups[i].placement);
            }
            EXPECT_EQ(back.rules, f.rules);
            // check_plan accepts its own output unchanged.
            EXPECT_EQ(plan_to_json(check_plan(f)), plan_to_json(f));
        }
    }
}

TEST(PlanFile, FoldedBatchNormIsListedWithItsConv) {
    Graph g = load_model(kModels + "conv_bn_relu.json");
    FusedGraph f = plan_fusion(g, {load_rules("x86")});
    const std::string path = tmp_path("folded.plan.json");
    write_plan(path, f);
    std::ifstream in(path);
    json j = json::parse(in);
    EXPECT_EQ(j["format"], "hfuse-plan");
    EXPECT_EQ(j["version"], 1);
    EXPECT_EQ(j["model"], "conv_bn_relu");
    EXPECT_EQ(j["rules"], json({"x86"}));
    ASSERT_EQ(j["groups"].size(), 1u) << j.dump(2);
    EXPECT_EQ(j["groups"][0]["nodes"], json({"conv", "bn", "relu"})) << j.dump(2);
    EXPECT_EQ(j["groups"][0]["placement"]["bn"], "folded");
    EXPECT_EQ(j["groups"][0]["placement"]["relu"], "output");
    EXPECT_EQ(j["groups"][0]["master"], "conv");
}

TEST(PlanFile, ResnetPlanIsTheReadmeExample) {
    Graph g = load_model(kModels + "resnet_block.json");
    json j = plan_to_json(plan_fusion(g, {load_rules("x86")}));
    json expected = json::parse(
        R"({"format": "hfuse-plan", "version": 1, "model": "resnet_block", "rules": ["x86"], "rewritten": true,
     "groups": [
       {"name": "g0", "master": "conv1", "nodes": ["conv1", "bn1", "relu1"],
        "placement": {"conv1": "compute_at", "bn1": "folded", "relu1": "output"},
        "why": "keeps 784.0 KiB out of memory (~100 us); recomputes nothing"},
       {"name": "g1", "master": "conv2", "nodes": ["conv2", "bn2", "add", "relu2"],
        "placement": {"conv2": "compute_at", "bn2": "folded", "add": "inline", "relu2": "output"},
        "why": "keeps 1.5 MiB out of memory (~201 us); recomputes nothing"}]})");
    EXPECT_EQ(j, expected) << j.dump(2);
}

TEST(PlanFile, MinimalHandWrittenPlanIsAcceptedAndRuns) {
    Graph g = small_cbrm();
    // Only "master" and "nodes": names, placements and the order of groups are derived.
    const std::string path = write_plan_json("minimal", plan_with({{{"master", "pool"}, {"nodes", {"pool"}}},
                                                                   {{"master", "conv"}, {"nodes", {"relu", "conv"}}}}));
    FusedGraph f = read_plan(path, simplify(g));
    ASSERT_EQ(f.groups.size(), 2u);
    EXPECT_EQ(f.groups[0].nodes, (std::vector<std::string>{"conv", "relu"})) << "groups in dependence order";
    EXPECT_EQ(f.groups[0].master, "conv");
    EXPECT_FALSE(f.groups[0].name.empty());
    EXPECT_NE(f.groups[0].name, f.groups[1].name);
    EXPECT_EQ(f.groups[0].placement.at("conv"), Placement::ComputeAt);
    EXPECT_EQ(f.groups[0].placement.at("relu"), Placement::Output);
    EXPECT_EQ(f.groups[1].placement.at("pool"), Placement::Output);
    expect_runs_like_unfused(f, g);

    // Without masters either; given placements are kept.
    const std::string path2 = write_plan_json(
        "minimal2",
        plan_with({{{"nodes", {"conv", "relu", "pool"}}, {"placement", {{"conv", "root"}, {"relu", "compute_at"}}}}}));
    FusedGraph f2 = read_plan(path2, simplify(g));
    ASSERT_EQ(f2.groups.size(), 1u);
    EXPECT_EQ(f2.groups[0].master, "conv");
    EXPECT_EQ(f2.groups[0].placement.at("conv"), Placement::Root);
    EXPECT_EQ(f2.groups[0].placement.at("relu"), Placement::ComputeAt);
    expect_runs_like_unfused(f2, g);
}

TEST(PlanFile, HandWrittenPlanMayNameOrOmitAFoldedNode) {
    Graph g = small_cbr();
    for (const json &nodes : {json({"conv", "bn", "relu"}), json({"conv", "relu"}), json({"relu", "bn", "conv"})}) {
        SCOPED_TRACE(nodes.dump());
        const std::string path = write_plan_json("folded_ok", plan_with({{{"master", "conv"}, {"nodes", nodes}}}));
        FusedGraph f = read_plan(path, simplify(g));
        ASSERT_EQ(f.groups.size(), 1u);
        EXPECT_EQ(f.groups[0].placement.at("bn"), Placement::Folded);
        EXPECT_EQ(f.groups[0].nodes, (std::vector<std::string>{"conv", "relu"}));
    }
    // The folded node may also be named as the master: it stands for the conv that absorbed it.
    const std::string path =
        write_plan_json("folded_master", plan_with({{{"master", "bn"}, {"nodes", {"conv", "relu"}}}}));
    EXPECT_EQ(read_plan(path, simplify(g)).groups[0].master, "conv");
    // Two groups, the BN listed with its conv.
    const std::string two = write_plan_json(
        "folded_two",
        plan_with({{{"nodes", {"conv", "bn"}}, {"placement", {{"bn", "folded"}}}}, {{"nodes", {"relu"}}}}));
    FusedGraph f = read_plan(two, simplify(g));
    ASSERT_EQ(f.groups.size(), 2u);
    EXPECT_EQ(f.groups[0].placement.at("conv"), Placement::Output);
    expect_runs_like_unfused(f, g);
}

TEST(PlanFile, PlanMayNameEveryNodeOfTheSourceModel) {
    // Plans use the source model's node names (fused_graph.h). simplify() also removes nodes without
    // an absorbing node to list them under: an Identity reading a model input, and a Transpose of a
    // weight that fold_constants turns into a weight. A plan naming them (e.g. one written for the
    // model as written) must not fail with "unknown node" for nodes the model has.
    Graph g = load_text("removed_nodes", R"({"format": "hfuse-model", "version": 1, "name": "removed_nodes",
      "inputs": [{"name": "x", "shape": [1, 2, 4, 4]}],
      "weights": {"w": {"shape": [2, 2, 1, 1], "uniform": [-0.5, 0.5], "seed": 1}},
      "nodes": [{"name": "id0", "op": "Identity", "inputs": ["x"]},
                {"name": "wt", "op": "Transpose", "inputs": ["w"], "attrs": {"perm": [1, 0, 2, 3]}},
                {"name": "conv", "op": "Conv", "inputs": ["id0", "wt"], "attrs": {"kernel_shape": [1, 1]}},
                {"name": "id1", "op": "Identity", "inputs": ["conv"]},
                {"name": "relu", "op": "Relu", "inputs": ["id1"]}],
      "outputs": ["relu"]})");
    // id1 is absorbed by conv and listed as folded; that already works.
    FusedGraph planned = plan_fusion(g, {load_rules("x86")});
    EXPECT_EQ(planned.groups[0].placement.at("id1"), Placement::Folded);
    const std::string path =
        write_plan_json("removed_nodes", plan_with({{{"nodes", {"id0", "wt", "conv", "id1", "relu"}}}}));
    try {
        FusedGraph f = read_plan(path, simplify(g));
        EXPECT_EQ(f.groups.size(), 1u);
        expect_runs_like_unfused(f, g);
    } catch (const Error &e) {
        ADD_FAILURE() << "a plan naming the model's own nodes was rejected: " << e.what();
    }
}

// --- Recomputed nodes -----------------------------------------------------------------------------------

TEST(PlanFile, RecomputedNodeWithoutOwnerRunsAndRoundTrips) {
    Graph g = shared_relu();
    json plan =
        plan_with({{{"name", "a"}, {"nodes", {"relu", "conv_a"}}, {"placement", {{"relu", "recompute"}}}},
                   {{"name", "b"}, {"nodes", {"relu", "conv_b", "add"}}, {"placement", {{"relu", "recompute"}}}}});
    FusedGraph f = read_plan(write_plan_json("recompute_no_owner", plan), simplify(g));
    ASSERT_EQ(f.groups.size(), 2u);
    for (const FusedGroup &grp : f.groups) {
        EXPECT_EQ(grp.placement.at("relu"), Placement::Recompute) << grp.name;
        EXPECT_FALSE(handed_out_values(f, grp).count("relu")) << "a copy is never handed out";
    }
    EXPECT_EQ(handed_out_values(f, f.groups[0]), (std::set<std::string>{"conv_a"}));
    expect_runs_like_unfused(f, g);
    // Written and read back: the same groups and placements.
    const std::string path = tmp_path("recompute_round_trip.plan.json");
    write_plan(path, f);
    FusedGraph back = read_plan(path, simplify(g));
    EXPECT_EQ(plan_to_json(back)["groups"], plan_to_json(f)["groups"]);
}

TEST(PlanFile, RecomputedNodeWithAnOwnerIsHandedOutOnlyToGroupsWithoutACopy) {
    Graph g = shared_relu();
    // Group r owns relu and hands it to b; a recomputes its own.
    json plan = plan_with({{{"name", "r"}, {"nodes", {"relu"}}},
                           {{"name", "a"}, {"nodes", {"relu", "conv_a"}}, {"placement", {{"relu", "recompute"}}}},
                           {{"name", "b"}, {"nodes", {"conv_b", "add"}}}});
    FusedGraph f = read_plan(write_plan_json("recompute_owner", plan), simplify(g));
    ASSERT_EQ(f.groups.size(), 3u);
    const FusedGroup &r = f.groups[0];
    EXPECT_EQ(r.name, "r");
    EXPECT_EQ(r.placement.at("relu"), Placement::Output);
    expect_runs_like_unfused(f, g);
}

TEST(PlanFile, IllegalRecomputePlansAreRejected) {
    Graph g = shared_relu();
    expect_plan_error("twice_no_recompute", g,
                      plan_with({{{"name", "a"}, {"nodes", {"relu", "conv_a"}}},
                                 {{"name", "b"}, {"nodes", {"relu", "conv_b", "add"}}}}),
                      {"'relu'", "two groups", "recompute"});
    expect_plan_error(
        "recompute_conv", g,
        plan_with({{{"name", "a"}, {"nodes", {"relu", "conv_a"}}},
                   {{"name", "b"}, {"nodes", {"conv_a", "conv_b", "add"}}, {"placement", {{"conv_a", "recompute"}}}}}),
        {"placement.conv_a", "only elementwise, broadcast and injective", "Conv"});
    expect_plan_error(
        "copy_unread", g,
        plan_with({{{"name", "a"}, {"nodes", {"relu", "conv_a"}}},
                   {{"name", "b"}, {"nodes", {"conv_b", "add"}}},
                   {{"name", "c"}, {"nodes", {"relu", "conv_b"}}, {"placement", {{"relu", "recompute"}}}}}),
        {"'conv_b' is in two groups"});
    expect_plan_error("copy_unread2", g,
                      plan_with({{{"name", "a"}, {"nodes", {"relu", "conv_a", "conv_b"}}},
                                 {{"name", "b"}, {"nodes", {"relu", "add"}}, {"placement", {{"relu", "recompute"}}}}}),
                      {"placement.relu", "nothing in that group reads it"});
    expect_plan_error("reader_without_copy", g,
                      plan_with({{{"name", "a"}, {"nodes", {"relu", "conv_a"}}, {"placement", {{"relu", "recompute"}}}},
                                 {{"name", "b"}, {"nodes", {"conv_b", "add"}}}}),
                      {"groups.b", "'conv_b' reads 'relu'", "no group hands out"});
    expect_plan_error(
        "only_copies", g,
        plan_with({{{"name", "a"}, {"nodes", {"relu", "conv_a"}}, {"placement", {{"relu", "recompute"}}}},
                   {{"name", "b"}, {"nodes", {"relu", "conv_b", "add"}}, {"placement", {{"relu", "recompute"}}}},
                   {{"name", "c"}, {"nodes", {"relu"}}, {"placement", {{"relu", "recompute"}}}}}),
        {"nothing in that group reads it"});
    expect_plan_error(
        "copy_leads", g,
        plan_with(
            {{{"name", "a"}, {"master", "relu"}, {"nodes", {"relu", "conv_a"}}, {"placement", {{"relu", "recompute"}}}},
             {{"name", "b"}, {"nodes", {"relu", "conv_b", "add"}}, {"placement", {{"relu", "recompute"}}}}}),
        {"groups.a.master", "recomputed in the group and cannot lead it"});
    // A recomputed model output needs an owner.
    Graph out = load_text("shared_relu_out", R"({"format": "hfuse-model", "version": 1, "name": "shared_relu_out",
      "inputs": [{"name": "x", "shape": [1, 2, 3, 3]}],
      "nodes": [{"name": "neg", "op": "Relu", "inputs": ["x"]},
                {"name": "exp", "op": "Sigmoid", "inputs": ["neg"]},
                {"name": "abs", "op": "Tanh", "inputs": ["neg"]}],
      "outputs": ["exp", "abs", "neg"]})");
    expect_plan_error("recomputed_output", out,
                      plan_with({{{"nodes", {"neg", "exp"}}, {"placement", {{"neg", "recompute"}}}},
                                 {{"nodes", {"neg", "abs"}}, {"placement", {{"neg", "recompute"}}}}}),
                      {"placement.neg", "the model returns 'neg'"});
    // A copy whose input depends on the group's own output is a cycle: g1's copy of c reads b from g2,
    // which reads a from g1.
    Graph chain = load_text("recompute_cycle", R"({"format": "hfuse-model", "version": 1, "name": "recompute_cycle",
      "inputs": [{"name": "x", "shape": [1, 2, 3, 3]}],
      "nodes": [{"name": "a", "op": "Relu", "inputs": ["x"]},
                {"name": "b", "op": "Sigmoid", "inputs": ["a"]},
                {"name": "c", "op": "Tanh", "inputs": ["b"]},
                {"name": "d", "op": "Add", "inputs": ["a", "c"]}],
      "outputs": ["d"]})");
    expect_plan_error("recompute_cycle", chain,
                      plan_with({{{"name", "g1"}, {"nodes", {"a", "d", "c"}}, {"placement", {{"c", "recompute"}}}},
                                 {{"name", "g2"}, {"nodes", {"b", "c"}}}}),
                      {"group g1 is not convex", "leaves it at 'a'", "comes back at 'c'"});
}

// --- Illegal plans ------------------------------------------------------------------------------------

TEST(PlanFile, NonConvexGroupIsRejected) {
    expect_plan_error("non_convex", small_cbrm(), plan_with({{{"nodes", {"conv", "pool"}}}, {{"nodes", {"relu"}}}}),
                      {"not convex", "'conv'", "'pool'", "relu"});
}

TEST(PlanFile, MissingNodeIsRejected) {
    expect_plan_error("missing", small_cbrm(), plan_with({{{"nodes", {"conv", "relu"}}}}), {"no group", "'pool'"});
}

TEST(PlanFile, NodeInTwoGroupsIsRejected) {
    expect_plan_error(
        "twice", small_cbrm(),
        plan_with({{{"name", "a"}, {"nodes", {"conv", "relu"}}}, {{"name", "b"}, {"nodes", {"relu", "pool"}}}}),
        {"'relu'", "two groups", "a", "b"});
}

TEST(PlanFile, NodeInTwoUnnamedGroupsNamesBothGroups) {
    // Unnamed groups are called "#i" in this message; the first one must not come out as an empty name
    // ("... is in two groups ( and #1)").
    const std::string path =
        write_plan_json("twice_unnamed", plan_with({{{"nodes", {"conv", "relu"}}}, {{"nodes", {"relu", "pool"}}}}));
    try {
        read_plan(path, simplify(small_cbrm()));
        ADD_FAILURE() << "plan accepted";
    } catch (const Error &e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("'relu'"), std::string::npos) << msg;
        EXPECT_EQ(msg.find("( and"), std::string::npos) << "the first group has no name in: " << msg;
    }
}

TEST(PlanFile, UnknownNodeIsRejected) {
    expect_plan_error("unknown", small_cbrm(), plan_with({{{"nodes", {"conv", "relu", "pool", "frobnicate"}}}}),
                      {"unknown node 'frobnicate'", "groups[0].nodes"});
}

TEST(PlanFile, MasterThatCannotLeadIsRejected) {
    expect_plan_error("bad_master", small_cbrm(),
                      plan_with({{{"master", "relu"}, {"nodes", {"conv", "relu", "pool"}}}}),
                      {"'relu' cannot lead", "'conv'", "master"});
    expect_plan_error("pool_master", small_cbrm(),
                      plan_with({{{"master", "pool"}, {"nodes", {"conv", "relu", "pool"}}}}),
                      {"'pool' cannot lead", "'conv'"});
    expect_plan_error("foreign_master", small_cbrm(),
                      plan_with({{{"master", "pool"}, {"nodes", {"conv", "relu"}}}, {{"nodes", {"pool"}}}}),
                      {"'pool' is not a member"});
}

TEST(PlanFile, InlineConvIsRejected) {
    expect_plan_error("inline_conv", small_cbrm(),
                      plan_with({{{"nodes", {"conv", "relu", "pool"}}, {"placement", {{"conv", "inline"}}}}}),
                      {"placement.conv", "cannot be inlined"});
}

TEST(PlanFile, ValueUsedOutsideMustBeOutput) {
    for (const char *p : {"inline", "compute_at", "root"}) {
        expect_plan_error(
            std::string("live_") + p, small_cbrm(),
            plan_with({{{"nodes", {"conv", "relu"}}, {"placement", {{"relu", p}}}}, {{"nodes", {"pool"}}}}),
            {"placement.relu", "must be output"});
    }
    // A model output is used outside too.
    expect_plan_error("model_output", small_cbrm(),
                      plan_with({{{"nodes", {"conv", "relu", "pool"}}, {"placement", {{"pool", "inline"}}}}}),
                      {"placement.pool", "must be output"});
}

TEST(PlanFile, FoldedNodeWithoutItsConvIsRejected) {
    expect_plan_error("folded_alone", small_cbr(), plan_with({{{"nodes", {"conv"}}}, {{"nodes", {"bn", "relu"}}}}),
                      {"'bn' was folded into 'conv'", "groups[1]"});
}

TEST(PlanFile, OtherMalformedPlansAreRejected) {
    Graph g = small_cbrm();
    expect_plan_error("folded_real", g,
                      plan_with({{{"nodes", {"conv", "relu", "pool"}}, {"placement", {{"relu", "folded"}}}}}),
                      {"placement.relu", "folded"});
    expect_plan_error("bad_placement", g,
                      plan_with({{{"nodes", {"conv", "relu", "pool"}}, {"placement", {{"relu", "sideways"}}}}}),
                      {"placement.relu", "unknown placement 'sideways'"});
    expect_plan_error(
        "placement_outsider", g,
        plan_with({{{"nodes", {"conv", "relu"}}, {"placement", {{"pool", "output"}}}}, {{"nodes", {"pool"}}}}),
        {"'pool' is not in the group"});
    expect_plan_error("unknown_key", g, plan_with({{{"nodes", {"conv", "relu", "pool"}}, {"fuse", true}}}),
                      {"groups[0].fuse", "unknown key"});
    expect_plan_error("why_not_text", g, plan_with({{{"nodes", {"conv", "relu", "pool"}}, {"why", 5}}}),
                      {"groups[0].why", "expected a string"});
    expect_plan_error("empty_group", g, plan_with({{{"nodes", {"conv", "relu", "pool"}}}, {{"nodes", json::array()}}}),
                      {"groups[1]"});
    expect_plan_error("duplicate_names", g,
                      plan_with({{{"name", "a"}, {"nodes", {"conv", "relu"}}}, {{"name", "a"}, {"nodes", {"pool"}}}}),
                      {"two groups are named 'a'"});
    expect_plan_error("bad_format", g, {{"format", "hfuse-model"}, {"version", 1}, {"groups", json::array()}},
                      {"format"});
    expect_plan_error("bad_version", g, {{"format", "hfuse-plan"}, {"version", 2}, {"groups", json::array()}},
                      {"version"});
    expect_plan_error("no_groups", g, {{"format", "hfuse-plan"}, {"version", 1}}, {"groups"});

    const std::string broken = tmp_path("broken.plan.json");
    std::ofstream(broken) << "{\"format\": \"hfuse-plan\", ";
    EXPECT_THROW(read_plan(broken, g), Error);
    try {
        read_plan(tmp_path("nonexistent.plan.json"), g);
        ADD_FAILURE() << "missing plan file accepted";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("nonexistent.plan.json"), std::string::npos) << e.what();
    }
}

TEST(PlanFile, CheckPlanRejectsIllegalInMemoryPlans) {
    Graph g = simplify(small_cbrm());
    auto plan_of = [&](std::vector<std::vector<std::string>> groups) {
        FusedGraph f;
        f.graph = g;
        for (auto &nodes : groups) {
            FusedGroup grp;
            grp.nodes = nodes;
            f.groups.push_back(grp);
        }
        return f;
    };
    EXPECT_THROW(check_plan(plan_of({{"conv", "pool"}, {"relu"}})), Error);
    EXPECT_THROW(check_plan(plan_of({{"conv", "relu"}})), Error);
    EXPECT_THROW(check_plan(plan_of({{"conv", "relu"}, {"relu", "pool"}})), Error);
    EXPECT_NO_THROW(check_plan(plan_of({{"conv", "relu"}, {"pool"}})));
}

}  // namespace
}  // namespace hfuse
