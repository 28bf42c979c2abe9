// Concats computed in place (exec/concat_in_place.h): which Concats place_concats_in_place() places,
// where each value lies in the storage it shares, which it copies instead, and that the executor
// computes what the reference does, and exactly what it computes with every Concat copied.
#include "exec/concat_in_place.h"
#include "hfuse/composer.h"
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/model_io.h"
#include "hfuse/passes.h"
#include "hfuse/planner.h"
#include "hfuse/reference.h"

#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>

namespace hfuse {
namespace {

using nlohmann::json;
using test::kJitTarget;
using test::model_node;

json conv(const std::string &name, const std::string &in, const std::string &w, int k) {
    json attrs = {{"kernel_shape", {k, k}}};
    if (k == 3) attrs["pads"] = {1, 1, 1, 1};
    return {{"name", name}, {"op", "Conv"}, {"inputs", {in, w}}, {"attrs", attrs}};
}
json concat(const std::string &name, const std::vector<std::string> &inputs) {
    return {{"name", name}, {"op", "Concat"}, {"inputs", inputs}, {"attrs", {{"axis", 1}}}};
}
json weight(const Shape &shape, int seed) {
    return {{"shape", shape}, {"uniform", {-0.3, 0.3}}, {"seed", seed}};
}

// A dense block of three layers on a 9x7 image (DenseNet's): layer k reads the Concat of the block's
// input f0 (8 channels) and the outputs of layers 1..k-1 (4 channels each), through a ReLU, by a
// 3x3 conv; a 1x1 conv and a global pool read the last Concat.
Graph dense_block(int batch) {
    const json nodes =
        json::array({conv("c0", "x", "w0", 3), model_node("f0", "Relu", {"c0"}), conv("o1", "f0", "w1", 3),
                     concat("k1", {"f0", "o1"}), model_node("r1", "Relu", {"k1"}), conv("o2", "r1", "w2", 3),
                     concat("k2", {"f0", "o1", "o2"}), model_node("r2", "Relu", {"k2"}), conv("o3", "r2", "w3", 3),
                     concat("k3", {"f0", "o1", "o2", "o3"}), conv("t", "k3", "wt", 1),
                     model_node("y", "GlobalAveragePool", {"t"})});
    const json weights = {{"w0", weight({8, 3, 3, 3}, 1)},
                          {"w1", weight({4, 8, 3, 3}, 2)},
                          {"w2", weight({4, 12, 3, 3}, 3)},
                          {"w3", weight({4, 16, 3, 3}, 4)},
                          {"wt", weight({16, 20, 1, 1}, 5)}};
    return test::one_input_model("dense_block", {batch, 3, 9, 7}, nodes, {"y"}, weights);
}

FusedGraph default_plan(const Graph &g) {
    return with_default_schedules(plan_fusion(simplify(g), {load_rules("x86")}), kJitTarget);
}

std::map<std::string, std::string> templates_by_master(const Executor &ex) {
    std::map<std::string, std::string> out;
    for (const GroupInfo &info : ex.groups()) out[info.master] = info.schedule_template;
    return out;
}

// Runs `plan` with Concats in place (or copied) and with every Concat group computing its copy: both
// match the reference, and each other exactly.
void expect_same_as_copies(const Graph &g, const FusedGraph &plan) {
    test::ModelInputs in = test::make_inputs(g);
    Executor ex(plan);
    ExecutorOptions copies;
    copies.concat_in_place = false;
    Executor copied(plan, copies);
    for (const GroupInfo &info : copied.groups()) EXPECT_NE(info.schedule_template, "in_place") << info.name;
    for (int run = 0; run < 2; run++) {
        auto a = ex.run(in.buffers), b = copied.run(in.buffers);
        auto expected = reference::run(g, in.reference);
        for (const std::string &out : g.outputs) {
            const TensorBuffer &x = a.at(out), &y = b.at(out);
            ASSERT_EQ(shape_of(x), shape_of(y));
            EXPECT_EQ(0, std::memcmp(x.data(), y.data(), x.size_in_bytes())) << out;
            auto cmp = reference::compare(x.data(), expected.at(out).data.data(), expected.at(out).data.size());
            EXPECT_LE(cmp.relative(), 1e-4) << out;
        }
    }
}

TEST(ConcatInPlace, TheRulesKeepConcatsInGroupsOfTheirOwn) {
    const FusedGraph plan = default_plan(dense_block(1));
    int concats = 0;
    for (const FusedGroup &grp : plan.groups) {
        for (const std::string &name : grp.nodes) {
            if (plan.graph.find_node(name)->op != "Concat") continue;
            concats++;
            EXPECT_EQ(grp.nodes.size(), 1u) << grp.name;
        }
    }
    EXPECT_EQ(concats, 3);
}

TEST(ConcatInPlace, ADenseBlockSharesOneStorage) {
    const Graph g = dense_block(1);
    const FusedGraph plan = default_plan(g);
    const exec::InPlaceConcats placed = exec::place_concats_in_place(plan, {});
    EXPECT_EQ(placed.groups.size(), 3u);
    EXPECT_TRUE(placed.copies.empty());
    const int64_t plane = 9 * 7;
    const std::map<std::string, int64_t> offsets = {
        {"f0", 0}, {"o1", 8 * plane}, {"o2", 12 * plane}, {"o3", 16 * plane}, {"k1", 0}, {"k2", 0}, {"k3", 0}};
    ASSERT_EQ(placed.slices.size(), offsets.size());
    const std::string storage = placed.slices.at("f0").storage;
    for (const auto &[value, offset] : offsets) {
        const exec::SharedSlice &s = placed.slices.at(value);
        EXPECT_EQ(s.storage, storage) << value;
        EXPECT_EQ(s.elements, 20 * plane) << value;
        EXPECT_EQ(s.offset, offset) << value;
    }
    Executor ex(plan);
    const auto templates = templates_by_master(ex);
    for (const char *k : {"k1", "k2", "k3"}) EXPECT_EQ(templates.at(k), "in_place") << k;
    expect_same_as_copies(g, plan);
}

TEST(ConcatInPlace, CopiedWhereSlicesAreNotContiguous) {
    // Batch 2: a value's channels are two runs apart in the Concat's output.
    const Graph g = dense_block(2);
    const FusedGraph plan = default_plan(g);
    const exec::InPlaceConcats placed = exec::place_concats_in_place(plan, {});
    EXPECT_TRUE(placed.groups.empty());
    EXPECT_EQ(placed.copies.size(), 3u);
    const exec::ConcatCopy &k2 = placed.copies.begin()->second;
    EXPECT_EQ(k2.outer, 2);
    const auto templates = templates_by_master(Executor(plan));
    for (const char *k : {"k1", "k2", "k3"}) EXPECT_EQ(templates.at(k), "memcpy") << k;
    expect_same_as_copies(g, plan);
}

TEST(ConcatInPlace, PlacementsThatDisagreeOrOverlapAreCopied) {
    // a and b in k1 as (a, b) and in k2 as (b, a): no one placement holds both. k3 puts d where k1 has
    // b: the two would overlap. A model input (x) and a returned Concat are copied too.
    const json nodes = json::array({conv("a", "x", "wa", 3), conv("b", "x", "wb", 1), conv("d", "x", "wd", 3),
                                    concat("k1", {"a", "b"}), concat("k2", {"b", "a"}), concat("k3", {"a", "d"}),
                                    model_node("s12", "Add", {"k1", "k2"}), model_node("s", "Add", {"s12", "k3"}),
                                    conv("e", "s", "we", 3), concat("k4", {"x", "e"})});
    const json weights = {{"wa", weight({5, 3, 3, 3}, 1)},
                          {"wb", weight({4, 3, 1, 1}, 2)},
                          {"wd", weight({4, 3, 3, 3}, 3)},
                          {"we", weight({6, 9, 3, 3}, 4)}};
    const Graph g = test::one_input_model("disagree", {1, 3, 11, 6}, nodes, {"k4"}, weights);
    // Without the Adds' fusion into k1..k3's readers being relevant: each Concat is a group of its own.
    const FusedGraph plan = default_plan(g);
    const exec::InPlaceConcats placed = exec::place_concats_in_place(plan, {});
    ASSERT_EQ(placed.groups.size(), 1u);
    const auto templates = templates_by_master(Executor(plan));
    EXPECT_EQ(templates.at("k1"), "in_place");
    EXPECT_EQ(templates.at("k2"), "memcpy");  // b before a
    EXPECT_EQ(templates.at("k3"), "memcpy");  // d where b lies
    EXPECT_EQ(templates.at("k4"), "memcpy");  // a model input, and returned
    expect_same_as_copies(g, plan);
}

}  // namespace
}  // namespace hfuse
