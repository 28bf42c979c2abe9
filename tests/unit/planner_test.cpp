// The fusion planner: expected groups on small hand-made graphs (chains, diamonds, branches,
// multi-consumer producers, residual blocks, Concat/Split, Slice fan-outs) under each built-in rule
// set, every rule-set option, rounds, the bundled models, and numerical equivalence of fused plans
// (planned and random legal partitions) with the unfused graph.
#include "hfuse/planner.h"
#include "hfuse/composer.h"
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/fused_graph.h"
#include "hfuse/fusion_rules.h"
#include "hfuse/model_io.h"
#include "hfuse/op_registry.h"
#include "hfuse/passes.h"
#include "hfuse/plan_report.h"
#include "hfuse/random.h"
#include "hfuse/reference.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

namespace hfuse {
namespace {

using nlohmann::json;
using Groups = std::set<std::set<std::string>>;
using test::kModels;
using test::kRulesDir;
using test::tmp_path;

// Builds a model as JSON, writes it to a temp file and loads it like a user's model.
class ModelBuilder {
public:
    explicit ModelBuilder(std::string name) : name_(std::move(name)) {}

    ModelBuilder &input(const std::string &n, const Shape &shape) {
        inputs_.push_back({{"name", n}, {"shape", shape}});
        return *this;
    }
    ModelBuilder &weight(const std::string &n, const Shape &shape) {
        weights_[n] = {{"shape", shape}, {"uniform", {-0.5, 0.5}}, {"seed", ++seed_}};
        return *this;
    }
    ModelBuilder &ints(const std::string &n, const std::vector<int64_t> &values) {
        weights_[n] = {{"shape", {values.size()}}, {"dtype", "int64"}, {"values", values}};
        return *this;
    }
    ModelBuilder &node(const std::string &n, const std::string &op, const std::vector<std::string> &inputs,
                       const json &attrs = json::object(), const std::vector<std::string> &outputs = {}) {
        json j = {{"name", n}, {"op", op}, {"inputs", inputs}};
        if (!attrs.empty()) j["attrs"] = attrs;
        if (!outputs.empty()) j["outputs"] = outputs;
        nodes_.push_back(j);
        return *this;
    }
    // A k x k convolution, stride 1, "same" padding, with bias.
    ModelBuilder &conv(const std::string &n, const std::string &x, int cin, int cout, int k = 3) {
        weight(n + ".w", {cout, cin, k, k});
        weight(n + ".b", {cout});
        const int p = k / 2;
        return node(n, "Conv", {x, n + ".w", n + ".b"}, {{"kernel_shape", {k, k}}, {"pads", {p, p, p, p}}});
    }
    ModelBuilder &bn(const std::string &n, const std::string &x, int channels) {
        for (const char *s : {".scale", ".bias", ".mean"}) weight(n + s, {channels});
        weights_[n + ".var"] = {{"shape", {channels}}, {"uniform", {0.5, 1.5}}, {"seed", ++seed_}};
        return node(n, "BatchNormalization", {x, n + ".scale", n + ".bias", n + ".mean", n + ".var"});
    }
    ModelBuilder &output(const std::string &n) {
        outputs_.push_back(n);
        return *this;
    }

    std::string text() const {
        json j = {{"format", "hfuse-model"}, {"version", 1},    {"name", name_},      {"inputs", inputs_},
                  {"weights", weights_},     {"nodes", nodes_}, {"outputs", outputs_}};
        return j.dump(1);
    }
    Graph load() const {
        const std::string path = tmp_path(name_ + ".json");
        std::ofstream(path) << text();
        return load_model(path);
    }

private:
    std::string name_;
    json inputs_ = json::array(), weights_ = json::object(), nodes_ = json::array();
    std::vector<std::string> outputs_;
    int seed_ = 0;
};

Groups groups_of(const FusedGraph &f) {
    Groups out;
    for (const FusedGroup &g : f.groups) out.insert(std::set<std::string>(g.nodes.begin(), g.nodes.end()));
    return out;
}

// The groups of a plan as written to a plan file (names, masters, nodes, placements).
json groups_json(const FusedGraph &f) {
    return plan_to_json(f)["groups"];
}

const FusedGroup &group_with(const FusedGraph &f, const std::string &node) {
    for (const FusedGroup &g : f.groups) {
        for (const std::string &n : g.nodes) {
            if (n == node) return g;
        }
    }
    throw std::runtime_error("test bug: no group holds '" + node + "'");
}

FusedGraph plan(const Graph &g, const std::vector<std::string> &rule_sets) {
    std::vector<RuleSet> rounds;
    for (const std::string &r : rule_sets) rounds.push_back(load_rules(r));
    return plan_fusion(g, rounds);
}

// A rule set: the shipped x86 file with some keys replaced, written to a temp file and loaded by path.
RuleSet custom_rules(const std::string &name, const json &changes, const std::string &base = "x86") {
    std::ifstream in(kRulesDir + base + ".json");
    json j = json::parse(in);
    j["name"] = name;
    for (const auto &kv : changes.items()) j[kv.key()] = kv.value();
    const std::string path = tmp_path("rules_" + name + ".json");
    std::ofstream(path) << j.dump(2);
    return load_rules(path);
}

// Seeded inputs for every model input.
std::map<std::string, TensorBuffer> make_inputs(const Graph &g, uint64_t seed = 1000) {
    std::map<std::string, TensorBuffer> inputs;
    for (size_t i = 0; i < g.inputs.size(); i++) {
        std::vector<float> data = uniform_values(num_elements(g.inputs[i].shape), -1, 1, seed + i);
        inputs[g.inputs[i].name] = tensor_from_data(g.inputs[i].shape, data.data());
    }
    return inputs;
}

// The unfused results of `original` (the graph as written: one group per op, no rewrites).
struct Baseline {
    std::map<std::string, TensorBuffer> inputs, outputs;
};
Baseline unfused_baseline(const Graph &original) {
    Baseline b;
    b.inputs = make_inputs(original);
    Executor ex(singleton_groups(original));
    b.outputs = ex.run(b.inputs);
    return b;
}

// Runs `plan` and expects every model output within 1e-4 (relative) of the baseline.
void expect_matches(const FusedGraph &plan, const Baseline &base, const std::string &what) {
    SCOPED_TRACE(what);
    std::map<std::string, TensorBuffer> actual;
    try {
        Executor ex(plan);
        actual = ex.run(base.inputs);
    } catch (const std::exception &e) {
        ADD_FAILURE() << "plan failed to compile or run: " << e.what() << "\n" << plan_table(plan);
        return;
    }
    for (const auto &kv : base.outputs) {
        ASSERT_TRUE(actual.count(kv.first)) << kv.first;
        const TensorBuffer &a = actual.at(kv.first);
        ASSERT_EQ(shape_of(a), shape_of(kv.second)) << kv.first;
        auto cmp = reference::compare(a.data(), kv.second.data(), kv.second.number_of_elements());
        EXPECT_LE(cmp.relative(), 1e-4) << kv.first << ": max abs error " << cmp.max_abs_error << " at scale "
                                        << cmp.scale << "\n"
                                        << plan_table(plan);
    }
}

// Graphs used by several tests; small shapes so each JIT compile is quick.

// conv -> relu -> maxpool 2x2/2, like models/conv_bias_relu_maxpool.json at 4 channels, 8x8.
Graph conv_relu_pool(const std::string &name = "crp") {
    return ModelBuilder(name)
        .input("x", {1, 4, 8, 8})
        .conv("conv", "x", 4, 4)
        .node("relu", "Relu", {"conv"})
        .node("pool", "MaxPool", {"relu"}, {{"kernel_shape", {2, 2}}, {"strides", {2, 2}}})
        .output("pool")
        .load();
}

// A diamond whose branches are an elementwise op and a (same-shape) window op.
Graph diamond(const std::string &name = "diamond") {
    return ModelBuilder(name)
        .input("x", {1, 4, 8, 8})
        .conv("conv", "x", 4, 4)
        .node("relu", "Relu", {"conv"})
        .node("pool", "MaxPool", {"conv"}, {{"kernel_shape", {3, 3}}, {"strides", {1, 1}}, {"pads", {1, 1, 1, 1}}})
        .node("add", "Add", {"relu", "pool"})
        .output("add")
        .load();
}

// conv -> split into two channel halves -> relu / sigmoid -> concat.
Graph split_concat(const std::string &name = "split_concat") {
    return ModelBuilder(name)
        .input("x", {1, 4, 6, 6})
        .conv("conv", "x", 4, 4)
        .node("split", "Split", {"conv"}, {{"axis", 1}}, {"s0", "s1"})
        .node("relu", "Relu", {"s0"})
        .node("sig", "Sigmoid", {"s1"})
        .node("concat", "Concat", {"relu", "sig"}, {{"axis", 1}})
        .output("concat")
        .load();
}

// An LSTM-like cell: one Gemm, its output sliced four ways, gates combined; two outputs, one of which
// (c_next) is also used inside.
Graph lstm_like(const std::string &name = "lstm_like") {
    ModelBuilder b(name);
    b.input("x", {1, 8}).input("c", {1, 4}).weight("w", {16, 8}).weight("b", {16}).ints("axis1", {1});
    b.node("gates", "Gemm", {"x", "w", "b"}, {{"transB", 1}});
    const char *gate[] = {"i", "o", "f", "g"};
    for (int k = 0; k < 4; k++) {
        const std::string s = std::string("slice_") + gate[k];
        b.ints(s + ".start", {4 * k}).ints(s + ".end", {4 * k + 4});
        b.node(s, "Slice", {"gates", s + ".start", s + ".end", "axis1"});
        b.node(gate[k], k == 3 ? "Tanh" : "Sigmoid", {s});
    }
    return b.node("fc", "Mul", {"f", "c"})
        .node("ig", "Mul", {"i", "g"})
        .node("c_next", "Add", {"fc", "ig"})
        .node("tanh_c", "Tanh", {"c_next"})
        .node("h_next", "Mul", {"o", "tanh_c"})
        .output("h_next")
        .output("c_next")
        .load();
}

// --- Expected groups on small graphs ----------------------------------------------------------------

TEST(Planner, ChainUnderEachBuiltInRuleSet) {
    Graph g = conv_relu_pool("chain");
    FusedGraph x86 = plan(g, {"x86"});
    EXPECT_EQ(groups_of(x86), (Groups{{"conv", "relu", "pool"}})) << plan_table(x86);
    EXPECT_EQ(x86.groups[0].master, "conv");
    EXPECT_EQ(x86.groups[0].placement.at("pool"), Placement::Output);
    EXPECT_EQ(x86.groups[0].placement.at("conv"), Placement::ComputeAt);
    EXPECT_EQ(x86.groups[0].placement.at("relu"), Placement::Inline);
    EXPECT_EQ(x86.rules, std::vector<std::string>{"x86"});

    // Relay's FuseOps: the pool (out-fusable itself) starts its own group.
    FusedGraph tvm = plan(g, {"tvm"});
    EXPECT_EQ(groups_of(tvm), (Groups{{"conv", "relu"}, {"pool"}})) << plan_table(tvm);
    EXPECT_EQ(group_with(tvm, "conv").master, "conv");
    EXPECT_EQ(group_with(tvm, "relu").placement.at("relu"), Placement::Output);

    FusedGraph none = plan(g, {"none"});
    EXPECT_EQ(groups_of(none), (Groups{{"conv"}, {"relu"}, {"pool"}})) << plan_table(none);
}

TEST(Planner, TvmGroupsConvBiasReluMaxpoolAsRelayDoes) {
    // The bias as its own (broadcasting) Add, as Relay sees conv2d + bias_add + relu + max_pool2d.
    Graph g = ModelBuilder("tvm_cbrm")
                  .input("x", {1, 4, 8, 8})
                  .weight("w", {4, 4, 3, 3})
                  .weight("bias", {4, 1, 1})
                  .node("conv", "Conv", {"x", "w"}, {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}})
                  .node("bias_add", "Add", {"conv", "bias"})
                  .node("relu", "Relu", {"bias_add"})
                  .node("pool", "MaxPool", {"relu"}, {{"kernel_shape", {2, 2}}, {"strides", {2, 2}}})
                  .output("pool")
                  .load();
    FusedGraph tvm = plan(g, {"tvm"});
    EXPECT_EQ(groups_of(tvm), (Groups{{"conv", "bias_add", "relu"}, {"pool"}})) << plan_table(tvm);
    FusedGraph x86 = plan(g, {"x86"});
    EXPECT_EQ(groups_of(x86), (Groups{{"conv", "bias_add", "relu", "pool"}})) << plan_table(x86);
}

TEST(Planner, DiamondFusesWhenEveryPathAllowsIt) {
    Graph g = diamond("diamond_groups");
    // x86: a window op joins a conv-led group only as the group's output (rules/README.md), and here
    // the Add reads the pool, so the conv cannot take the pool branch and so takes neither.
    FusedGraph x86 = plan(g, {"x86"});
    EXPECT_EQ(groups_of(x86), (Groups{{"conv"}, {"relu", "pool", "add"}})) << plan_table(x86);
    // tvm: conv cannot take the window branch, so it takes neither; the branches join at the Add.
    FusedGraph tvm = plan(g, {"tvm"});
    EXPECT_EQ(groups_of(tvm), (Groups{{"conv"}, {"relu", "pool", "add"}})) << plan_table(tvm);
    EXPECT_EQ(group_with(tvm, "add").master, "pool");
    FusedGraph none = plan(g, {"none"});
    EXPECT_EQ(none.groups.size(), 4u);
}

TEST(Planner, ElementwiseDiamondFusesWhole) {
    // conv -> {relu, sigmoid} -> add: every path is elementwise, so the diamond is one group.
    Graph g = ModelBuilder("diamond_ew")
                  .input("x", {1, 4, 8, 8})
                  .conv("conv", "x", 4, 4)
                  .node("relu", "Relu", {"conv"})
                  .node("sig", "Sigmoid", {"conv"})
                  .node("add", "Add", {"relu", "sig"})
                  .output("add")
                  .load();
    for (const char *r : {"x86", "tvm"}) {
        FusedGraph f = plan(g, {r});
        EXPECT_EQ(groups_of(f), (Groups{{"conv", "relu", "sig", "add"}})) << r << "\n" << plan_table(f);
    }
}

TEST(Planner, DiamondWithABlockedPathDoesNotFuseTheProducer) {
    // conv1 feeds a Relu and a second Conv that rejoin: conv1 -> conv2 is not allowed, so conv1 may not
    // take the Relu either (its value is needed by conv2 outside the group anyway).
    Graph g = ModelBuilder("diamond_blocked")
                  .input("x", {1, 4, 8, 8})
                  .conv("conv1", "x", 4, 4)
                  .node("relu", "Relu", {"conv1"})
                  .conv("conv2", "conv1", 4, 4)
                  .node("add", "Add", {"relu", "conv2"})
                  .output("add")
                  .load();
    FusedGraph x86 = plan(g, {"x86"});
    EXPECT_EQ(groups_of(x86), (Groups{{"conv1"}, {"relu", "conv2", "add"}})) << plan_table(x86);
    EXPECT_EQ(group_with(x86, "add").master, "conv2");
    FusedGraph tvm = plan(g, {"tvm"});
    EXPECT_EQ(group_with(tvm, "conv1").nodes, std::vector<std::string>{"conv1"}) << plan_table(tvm);
}

TEST(Planner, BranchesThatNeverRejoinAreGroupBoundaries) {
    Graph g = ModelBuilder("branches")
                  .input("x", {1, 4, 8, 8})
                  .conv("conv", "x", 4, 4)
                  .node("relu", "Relu", {"conv"})
                  .node("sig", "Sigmoid", {"conv"})
                  .output("relu")
                  .output("sig")
                  .load();
    for (const char *rules : {"x86", "tvm", "none"}) {
        FusedGraph f = plan(g, {rules});
        EXPECT_EQ(groups_of(f), (Groups{{"conv"}, {"relu"}, {"sig"}})) << rules << "\n" << plan_table(f);
    }
}

TEST(Planner, MultiConsumerProducerFusesWhenItsConsumersRejoin) {
    // relu feeds sigmoid and tanh, which meet again in a Mul.
    Graph g = ModelBuilder("multi_consumer")
                  .input("x", {1, 4, 8, 8})
                  .conv("conv", "x", 4, 4)
                  .node("relu", "Relu", {"conv"})
                  .node("sig", "Sigmoid", {"relu"})
                  .node("tanh", "Tanh", {"relu"})
                  .node("mul", "Mul", {"sig", "tanh"})
                  .output("mul")
                  .load();
    for (const char *rules : {"x86", "tvm"}) {
        FusedGraph f = plan(g, {rules});
        EXPECT_EQ(groups_of(f), (Groups{{"conv", "relu", "sig", "tanh", "mul"}})) << rules << "\n" << plan_table(f);
        // relu is read twice inside the group and by nobody outside: not an output.
        EXPECT_NE(f.groups[0].placement.at("relu"), Placement::Output);
    }
    EXPECT_EQ(plan(g, {"none"}).groups.size(), 5u);
}

// A Relu feeding a 3x3 and a 1x1 convolution whose results are added.
Graph two_convs(const std::string &name) {
    return ModelBuilder(name)
        .input("x", {1, 4, 8, 8})
        .node("relu", "Relu", {"x"})
        .conv("conv_a", "relu", 4, 4)
        .conv("conv_b", "relu", 4, 4, 1)
        .node("add", "Add", {"conv_a", "conv_b"})
        .output("add")
        .load();
}

// A Concat feeding three convolution branches and a pool, concatenated again (Inception-style).
Graph inception_block(const std::string &name) {
    return ModelBuilder(name)
        .input("a", {1, 2, 6, 6})
        .input("b", {1, 2, 6, 6})
        .node("concat_in", "Concat", {"a", "b"}, {{"axis", 1}})
        .conv("b1x1", "concat_in", 4, 2, 1)
        .conv("b3x3", "concat_in", 4, 2, 3)
        .conv("b5x5", "concat_in", 4, 2, 5)
        .node("pool", "MaxPool", {"concat_in"}, {{"kernel_shape", {3, 3}}, {"strides", {1, 1}}, {"pads", {1, 1, 1, 1}}})
        .node("concat_out", "Concat", {"b1x1", "b3x3", "b5x5", "pool"}, {{"axis", 1}})
        .output("concat_out")
        .load();
}

TEST(Planner, NoBuiltInRuleSetPutsTwoComplexOpsInOneGroup) {
    // src/planner/rules/README.md: "No built-in set lets two complex-out-fusable ops share a group".
    // A Relu feeding two convolutions whose results are added (a ResNet block with a projection
    // shortcut, an Inception branch): the Relu's post-dominator is the Add, and every vertex between
    // is a kind x86 lets an elementwise group absorb (elementwise -> complex-out-fusable is "inline").
    Graph diamond_graph = two_convs("two_convs");
    // The same through an injective producer in the second phase: an Inception-style block, a Concat
    // feeding three convolution branches and a pool that are concatenated again.
    Graph inception = inception_block("inception");
    for (const Graph *g : {&diamond_graph, &inception}) {
        for (const char *rules : {"x86", "tvm", "none"}) {
            FusedGraph f = plan(*g, {rules});
            for (const FusedGroup &grp : f.groups) {
                int complex = 0;
                for (const std::string &n : grp.nodes) complex += f.graph.find_node(n)->op == "Conv";
                EXPECT_LE(complex, 1) << g->name << " " << rules << ": group " << grp.name << " holds " << complex
                                      << " convolutions\n"
                                      << plan_table(f);
            }
        }
    }
}

TEST(Planner, ResidualAddWithOperandFromOutsideTheGroup) {
    // conv1 -> relu1 -> conv2 -> add(conv2, relu1) -> relu2: relu1 is handed out by the first group
    // and read again by the Add in the second.
    Graph g = ModelBuilder("residual")
                  .input("x", {1, 4, 8, 8})
                  .conv("conv1", "x", 4, 4)
                  .node("relu1", "Relu", {"conv1"})
                  .conv("conv2", "relu1", 4, 4)
                  .node("add", "Add", {"conv2", "relu1"})
                  .node("relu2", "Relu", {"add"})
                  .output("relu2")
                  .load();
    for (const char *rules : {"x86", "tvm"}) {
        FusedGraph f = plan(g, {rules});
        EXPECT_EQ(groups_of(f), (Groups{{"conv1", "relu1"}, {"conv2", "add", "relu2"}})) << rules << "\n"
                                                                                         << plan_table(f);
        EXPECT_EQ(group_with(f, "relu1").placement.at("relu1"), Placement::Output) << rules;
        EXPECT_EQ(group_with(f, "add").master, "conv2") << rules;
        EXPECT_EQ(f.groups.front().nodes.front(), "conv1") << "groups must be in dependence order";
    }
    // The identity shortcut straight from the model input (models/resnet_block.json's shape).
    Graph id = ModelBuilder("residual_input")
                   .input("x", {1, 4, 8, 8})
                   .conv("conv", "x", 4, 4)
                   .node("add", "Add", {"conv", "x"})
                   .node("relu", "Relu", {"add"})
                   .output("relu")
                   .load();
    EXPECT_EQ(groups_of(plan(id, {"x86"})), (Groups{{"conv", "add", "relu"}}));
    EXPECT_EQ(groups_of(plan(id, {"tvm"})), (Groups{{"conv", "add", "relu"}}));
}

TEST(Planner, SplitAndConcat) {
    Graph g = split_concat("split_concat_groups");
    // x86 keeps a Concat in a group of its own (for the executor to compute it in place); the Split's
    // readers, whose only reader is the Concat (their post-dominator), then stay apart too.
    FusedGraph x86 = plan(g, {"x86"});
    EXPECT_EQ(groups_of(x86), (Groups{{"concat"}, {"conv", "split"}, {"relu"}, {"sig"}})) << plan_table(x86);
    EXPECT_EQ(x86.groups[0].master, "conv");
    // tvm: a conv takes no injective consumer; the injective ops and their elementwise neighbours fuse.
    FusedGraph tvm = plan(g, {"tvm"});
    EXPECT_EQ(groups_of(tvm), (Groups{{"conv"}, {"split", "relu", "sig", "concat"}})) << plan_table(tvm);
    EXPECT_EQ(plan(g, {"none"}).groups.size(), 5u);

    // Concat of two activations feeding a conv: x86 lets injective ops feed a conv, tvm does not; a
    // Concat neither (x86: opaque_ops).
    Graph c = ModelBuilder("concat_conv")
                  .input("a", {1, 2, 6, 6})
                  .input("b", {1, 2, 6, 6})
                  .node("relu_a", "Relu", {"a"})
                  .node("relu_b", "Relu", {"b"})
                  .node("concat", "Concat", {"relu_a", "relu_b"}, {{"axis", 1}})
                  .conv("conv", "concat", 4, 4)
                  .output("conv")
                  .load();
    FusedGraph cx = plan(c, {"x86"});
    EXPECT_EQ(groups_of(cx), (Groups{{"relu_a"}, {"relu_b"}, {"concat"}, {"conv"}})) << plan_table(cx);
    RuleSet fused = load_rules("x86");
    fused.opaque_ops.clear();
    FusedGraph cf = plan_fusion(c, {fused});
    EXPECT_EQ(groups_of(cf), (Groups{{"relu_a", "relu_b", "concat", "conv"}})) << plan_table(cf);
    EXPECT_EQ(cf.groups[0].master, "conv");
    FusedGraph ct = plan(c, {"tvm"});
    EXPECT_EQ(groups_of(ct), (Groups{{"relu_a", "relu_b", "concat"}, {"conv"}})) << plan_table(ct);
    EXPECT_EQ(group_with(ct, "concat").master, "concat");
}

TEST(Planner, LstmLikeSliceFanOut) {
    Graph g = lstm_like("lstm_like_groups");
    // x86: the Gemm's post-dominator is h_next; everything on the way is fusable, and c_next (a model
    // output also used inside) does not cut the group (multi_output).
    FusedGraph x86 = plan(g, {"x86"});
    ASSERT_EQ(x86.groups.size(), 1u) << plan_table(x86);
    EXPECT_EQ(x86.groups[0].master, "gates");
    EXPECT_EQ(x86.groups[0].placement.at("c_next"), Placement::Output);
    EXPECT_EQ(x86.groups[0].placement.at("h_next"), Placement::Output);
    // tvm: no multi-output groups, so c_next ends a group and the Gemm takes no injective consumer.
    FusedGraph tvm = plan(g, {"tvm"});
    EXPECT_EQ(group_with(tvm, "gates").nodes, std::vector<std::string>{"gates"}) << plan_table(tvm);
    EXPECT_EQ(groups_of(tvm), (Groups{{"gates"},
                                      {"slice_i", "i", "slice_f", "f", "slice_g", "g", "fc", "ig", "c_next"},
                                      {"slice_o", "o", "tanh_c", "h_next"}}))
        << plan_table(tvm);
    for (const FusedGroup &grp : tvm.groups) {
        // No group hands out c_next and also uses it.
        if (std::count(grp.nodes.begin(), grp.nodes.end(), "c_next")) {
            EXPECT_EQ(std::count(grp.nodes.begin(), grp.nodes.end(), "tanh_c"), 0);
        }
    }
    EXPECT_EQ(plan(g, {"none"}).groups.size(), g.nodes.size());
}

TEST(Planner, OverlappingPoolWindowsFuseWithTheirConv) {
    // MaxPool 3x3 stride 2 pads 1: neighbouring windows overlap, so a tile of the pool needs conv
    // values shared with the next tile.
    Graph g =
        ModelBuilder("overlap")
            .input("x", {1, 4, 9, 9})
            .conv("conv", "x", 4, 4)
            .node("relu", "Relu", {"conv"})
            .node("pool", "MaxPool", {"relu"}, {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}})
            .output("pool")
            .load();
    FusedGraph f = plan(g, {"x86"});
    EXPECT_EQ(groups_of(f), (Groups{{"conv", "relu", "pool"}})) << plan_table(f);
    expect_matches(f, unfused_baseline(g), "overlapping maxpool, x86");
}

// conv -> maxpool -> relu -> averagepool (the pool before the activation, as in LeNet-style models).
Graph pool_chain(const std::string &name = "pool_chain") {
    return ModelBuilder(name)
        .input("x", {1, 4, 8, 8})
        .conv("conv", "x", 4, 4)
        .node("pool", "MaxPool", {"conv"}, {{"kernel_shape", {2, 2}}, {"strides", {2, 2}}})
        .node("relu", "Relu", {"pool"})
        .node("pool2", "AveragePool", {"relu"}, {{"kernel_shape", {2, 2}}, {"strides", {2, 2}}})
        .output("pool2")
        .load();
}

TEST(Planner, WindowJoinsAComplexGroupOnlyAsItsOutput) {
    // src/planner/rules/README.md: "window_fusion: window ops (MaxPool, AveragePool) may join a
    // complex-out-fusable group as its output". So no member of a conv-led group may read a pool of
    // that group (and a group holds at most one window op).
    Graph g = pool_chain("window_output");
    FusedGraph f = plan(g, {"x86"});
    for (const FusedGroup &grp : f.groups) {
        if (find_op(f.graph.find_node(grp.master)->op)->kind != PatternKind::ComplexOutFusable) continue;
        std::set<std::string> members(grp.nodes.begin(), grp.nodes.end());
        for (const std::string &n : grp.nodes) {
            if (find_op(f.graph.find_node(n)->op)->kind != PatternKind::Window) continue;
            for (const std::string &m : grp.nodes) {
                const auto &in = f.graph.find_node(m)->inputs;
                EXPECT_EQ(std::count(in.begin(), in.end(), n), 0)
                    << "window '" << n << "' is not the output of conv-led group " << grp.name << ": '" << m
                    << "' reads it\n"
                    << plan_table(f);
            }
        }
    }
    // The conv does take the first pool.
    EXPECT_EQ(group_with(f, "pool").master, "conv") << plan_table(f);
}

TEST(Planner, HandMadeGraphsRunAndMatchUnderEveryRuleSet) {
    std::vector<Graph> graphs = {conv_relu_pool("crp_run"),        diamond("diamond_run"),
                                 split_concat("split_concat_run"), lstm_like("lstm_like_run"),
                                 pool_chain("pool_chain_run"),     two_convs("two_convs_run"),
                                 inception_block("inception_run")};
    for (const Graph &g : graphs) {
        Baseline base = unfused_baseline(g);
        std::set<json> done = {groups_json(singleton_groups(g))};  // plans already run
        for (const auto &rounds : std::vector<std::vector<std::string>>{{"x86"}, {"tvm"}, {"none"}, {"tvm", "x86"}}) {
            FusedGraph f = plan(g, rounds);
            if (done.insert(groups_json(f)).second) expect_matches(f, base, g.name + " " + json(rounds).dump());
        }
    }
}

// --- Rule-set options ---------------------------------------------------------------------------------

TEST(PlannerOptions, MaxGroupOps) {
    Graph g = ModelBuilder("max_ops")
                  .input("x", {1, 4, 8, 8})
                  .conv("conv", "x", 4, 4)
                  .node("relu", "Relu", {"conv"})
                  .node("sig", "Sigmoid", {"relu"})
                  .node("tanh", "Tanh", {"sig"})
                  .output("tanh")
                  .load();
    EXPECT_EQ(plan(g, {"x86"}).groups.size(), 1u);
    FusedGraph f = plan_fusion(g, {custom_rules("max_ops_2", {{"max_group_ops", 2}})});
    EXPECT_EQ(groups_of(f), (Groups{{"conv", "relu"}, {"sig", "tanh"}})) << plan_table(f);
    FusedGraph one = plan_fusion(g, {custom_rules("max_ops_1", {{"max_group_ops", 1}})});
    EXPECT_EQ(one.groups.size(), 4u) << plan_table(one);
}

TEST(PlannerOptions, MaxGroupInputs) {
    // Each Add brings in one more model input; weights do not count.
    Graph g = ModelBuilder("max_inputs")
                  .input("x1", {1, 4, 8, 8})
                  .input("x2", {1, 4, 8, 8})
                  .input("x3", {1, 4, 8, 8})
                  .conv("conv", "x1", 4, 4)
                  .node("add", "Add", {"conv", "x2"})
                  .node("add2", "Add", {"add", "x3"})
                  .output("add2")
                  .load();
    EXPECT_EQ(plan(g, {"x86"}).groups.size(), 1u);
    FusedGraph f = plan_fusion(g, {custom_rules("max_inputs_2", {{"max_group_inputs", 2}})});
    EXPECT_EQ(groups_of(f), (Groups{{"conv", "add"}, {"add2"}})) << plan_table(f);
    FusedGraph one = plan_fusion(g, {custom_rules("max_inputs_1", {{"max_group_inputs", 1}})});
    EXPECT_EQ(one.groups.size(), 3u) << plan_table(one);
}

TEST(PlannerOptions, WindowFusionOff) {
    Graph g = conv_relu_pool("window_off");
    FusedGraph f = plan_fusion(g, {custom_rules("no_window", {{"window_fusion", false}})});
    EXPECT_EQ(groups_of(f), (Groups{{"conv", "relu"}, {"pool"}})) << plan_table(f);
}

TEST(PlannerOptions, MultiOutputOff) {
    // relu is a model output and also feeds the pool.
    Graph g = ModelBuilder("multi_output")
                  .input("x", {1, 4, 8, 8})
                  .conv("conv", "x", 4, 4)
                  .node("relu", "Relu", {"conv"})
                  .node("pool", "MaxPool", {"relu"}, {{"kernel_shape", {2, 2}}, {"strides", {2, 2}}})
                  .output("pool")
                  .output("relu")
                  .load();
    FusedGraph on = plan(g, {"x86"});
    EXPECT_EQ(groups_of(on), (Groups{{"conv", "relu", "pool"}})) << plan_table(on);
    EXPECT_EQ(on.groups[0].placement.at("relu"), Placement::Output);
    FusedGraph off = plan_fusion(g, {custom_rules("single_output", {{"multi_output", false}})});
    EXPECT_EQ(groups_of(off), (Groups{{"conv", "relu"}, {"pool"}})) << plan_table(off);
    Baseline base = unfused_baseline(g);
    expect_matches(on, base, "multi_output on");
    expect_matches(off, base, "multi_output off");
}

TEST(PlannerOptions, OpaqueOps) {
    Graph g = conv_relu_pool("opaque_ops");
    FusedGraph f = plan_fusion(g, {custom_rules("opaque_relu", {{"opaque_ops", {"Relu"}}})});
    EXPECT_EQ(groups_of(f), (Groups{{"conv"}, {"relu"}, {"pool"}})) << plan_table(f);
    FusedGraph p = plan_fusion(g, {custom_rules("opaque_pool", {{"opaque_ops", {"MaxPool"}}})});
    EXPECT_EQ(groups_of(p), (Groups{{"conv", "relu"}, {"pool"}})) << plan_table(p);
}

TEST(PlannerOptions, OpaqueNodes) {
    // Only the named node is opaque, not every node of its op type.
    Graph g = ModelBuilder("opaque_nodes")
                  .input("x", {1, 4, 8, 8})
                  .conv("conv1", "x", 4, 4)
                  .node("relu1", "Relu", {"conv1"})
                  .conv("conv2", "relu1", 4, 4)
                  .node("relu2", "Relu", {"conv2"})
                  .output("relu2")
                  .load();
    EXPECT_EQ(groups_of(plan(g, {"x86"})), (Groups{{"conv1", "relu1"}, {"conv2", "relu2"}}));
    FusedGraph f = plan_fusion(g, {custom_rules("opaque_relu2", {{"opaque_nodes", {"relu2"}}})});
    EXPECT_EQ(groups_of(f), (Groups{{"conv1", "relu1"}, {"conv2"}, {"relu2"}})) << plan_table(f);
    FusedGraph c = plan_fusion(g, {custom_rules("opaque_conv1", {{"opaque_nodes", {"conv1"}}})});
    // relu1 may still lead into conv2 (x86: elementwise -> complex-out-fusable).
    EXPECT_EQ(groups_of(c), (Groups{{"conv1"}, {"relu1", "conv2", "relu2"}})) << plan_table(c);
}

TEST(PlannerOptions, StopAfter) {
    Graph g = conv_relu_pool("stop_after");
    FusedGraph r = plan_fusion(g, {custom_rules("stop_relu", {{"stop_after", {"relu"}}})});
    EXPECT_EQ(groups_of(r), (Groups{{"conv", "relu"}, {"pool"}})) << plan_table(r);
    FusedGraph c = plan_fusion(g, {custom_rules("stop_conv", {{"stop_after", {"conv"}}})});
    EXPECT_EQ(groups_of(c), (Groups{{"conv"}, {"relu", "pool"}})) << plan_table(c);
    // In a diamond, a stop on one branch keeps the producer from taking the rejoining paths.
    Graph d = diamond("stop_after_diamond");
    FusedGraph s = plan_fusion(d, {custom_rules("stop_relu_diamond", {{"stop_after", {"relu"}}})});
    for (const FusedGroup &grp : s.groups) {
        std::set<std::string> nodes(grp.nodes.begin(), grp.nodes.end());
        EXPECT_FALSE(nodes.count("relu") && nodes.count("add")) << plan_table(s);
    }
}

TEST(PlannerOptions, NameListsMayNameFoldedNodes) {
    // Rule sets name nodes as the user wrote them, like plan files do. A BatchNormalization that
    // simplify() folded into its conv is still the user's "bn": stop_after ["bn"] must keep relu out of
    // the group that holds bn, and opaque_nodes ["bn"] must keep the conv+bn from fusing.
    Graph g = ModelBuilder("folded_names")
                  .input("x", {1, 4, 6, 6})
                  .conv("conv", "x", 4, 4)
                  .bn("bn", "conv", 4)
                  .node("relu", "Relu", {"bn"})
                  .output("relu")
                  .load();
    FusedGraph x86 = plan(g, {"x86"});
    ASSERT_EQ(x86.groups.size(), 1u);
    ASSERT_EQ(x86.groups[0].placement.at("bn"), Placement::Folded) << "test bug: bn should be folded";
    FusedGraph stop = plan_fusion(g, {custom_rules("stop_bn", {{"stop_after", {"bn"}}})});
    EXPECT_EQ(groups_of(stop), (Groups{{"conv"}, {"relu"}})) << plan_table(stop);
    FusedGraph opaque = plan_fusion(g, {custom_rules("opaque_bn", {{"opaque_nodes", {"bn"}}})});
    EXPECT_EQ(groups_of(opaque), (Groups{{"conv"}, {"relu"}})) << plan_table(opaque);
}

TEST(PlannerOptions, DeferInjective) {
    // A transposed input and a conv meet in an Add. With tvm's rules an injective group cannot take a
    // conv and a conv cannot take an injective op, so whoever fuses with the Add first keeps it: the
    // conv when injective groups wait for the second phase, the Transpose (earlier in topological
    // order) otherwise.
    Graph g = ModelBuilder("defer")
                  .input("x", {1, 4, 6, 6})
                  .node("t", "Transpose", {"x"}, {{"perm", {0, 1, 3, 2}}})
                  .conv("conv", "x", 4, 4)
                  .node("add", "Add", {"t", "conv"})
                  .output("add")
                  .load();
    ASSERT_EQ(g.nodes[0].name, "t");
    FusedGraph defer = plan_fusion(g, {custom_rules("defer", {{"defer_injective", true}}, "tvm")});
    EXPECT_EQ(groups_of(defer), (Groups{{"t"}, {"conv", "add"}})) << plan_table(defer);
    FusedGraph eager = plan_fusion(g, {custom_rules("nodefer", {{"defer_injective", false}}, "tvm")});
    EXPECT_EQ(groups_of(eager), (Groups{{"t", "add"}, {"conv"}})) << plan_table(eager);
    EXPECT_EQ(groups_of(plan(g, {"tvm"})), groups_of(defer));
}

// A cheap producer read by two groups: x -> neg -> {exp -> e_out, conv -> c_out}.
Graph shared_cheap_producer(const std::string &name) {
    return ModelBuilder(name)
        .input("x", {1, 4, 6, 6})
        .node("neg", "Relu", {"x"})
        .node("sig", "Sigmoid", {"neg"})
        .conv("conv", "neg", 4, 4)
        .output("sig")
        .output("conv")
        .load();
}

TEST(PlannerOptions, RecomputeCopiesASharedCheapGroupIntoEachReader) {
    for (Graph g : {two_convs("recompute_two_convs"), shared_cheap_producer("recompute_branches")}) {
        SCOPED_TRACE(g.name);
        FusedGraph off = plan_fusion(g, {custom_rules("no_recompute_" + g.name, {{"recompute", false}})});
        EXPECT_TRUE(groups_of(off).count({"relu"}) || groups_of(off).count({"neg"}))
            << "without recompute the shared producer is a group boundary\n"
            << plan_table(off);
        RuleSet rules = load_rules("x86");  // recomputes
        FusedGraph on = plan_fusion(g, {rules});
        EXPECT_EQ(on.groups.size(), off.groups.size() - 1) << plan_table(on);
        const std::string shared = g.name == "recompute_two_convs" ? "relu" : "neg";
        int copies = 0;
        for (const FusedGroup &grp : on.groups) {
            auto it = grp.placement.find(shared);
            if (it == grp.placement.end()) continue;
            EXPECT_EQ(it->second, Placement::Recompute) << grp.name << "\n" << plan_table(on);
            EXPECT_NE(grp.master, shared);
            copies++;
        }
        EXPECT_EQ(copies, 2) << plan_table(on);
        EXPECT_NE(plan_table(on).find(shared + " recompute"), std::string::npos) << plan_table(on);
        // The drawing shows each copy as its own dashed node inside its reader's cluster.
        const std::string dot = plan_dot(on);
        for (const FusedGroup &grp : on.groups) {
            if (grp.placement.count(shared))
                EXPECT_NE(dot.find("\"" + shared + "@" + grp.name + "\""), std::string::npos) << dot;
        }
        EXPECT_NE(dot.find("dashed"), std::string::npos) << dot;
        Baseline base = unfused_baseline(g);
        expect_matches(off, base, "recompute off");
        expect_matches(on, base, "recompute on");
        // A plan file keeps the copies; a further round keeps the plan as it is.
        const std::string path = tmp_path("recompute_" + g.name + ".plan.json");
        write_plan(path, on);
        EXPECT_EQ(groups_json(read_plan(path, on.graph)), groups_json(on));
        EXPECT_EQ(groups_json(plan_round(on, rules)), groups_json(on));
        // Without recompute, a round undoes the copies: the producer is one group again.
        EXPECT_EQ(groups_of(plan_round(on, load_rules("tvm"))), groups_of(plan(g, {"tvm"})));
    }
}

TEST(PlannerOptions, RecomputeLeavesModelOutputsExpensiveOpsAndStopsAlone) {
    RuleSet rules = custom_rules("recompute_limits", {{"recompute", true}});
    // The shared producer is itself a model output: one group must compute it anyway.
    Graph out = ModelBuilder("recompute_output")
                    .input("x", {1, 4, 6, 6})
                    .node("neg", "Relu", {"x"})
                    .node("sig", "Sigmoid", {"neg"})
                    .conv("conv", "neg", 4, 4)
                    .output("sig")
                    .output("conv")
                    .output("neg")
                    .load();
    EXPECT_EQ(groups_of(plan_fusion(out, {rules})), groups_of(plan(out, {"x86"})));
    // A conv read by two groups is never copied.
    Graph conv = ModelBuilder("recompute_conv")
                     .input("x", {1, 4, 6, 6})
                     .conv("conv", "x", 4, 4)
                     .conv("conv_a", "conv", 4, 4)
                     .conv("conv_b", "conv", 4, 4)
                     .output("conv_a")
                     .output("conv_b")
                     .load();
    EXPECT_EQ(plan_fusion(conv, {rules}).groups.size(), 3u);
    // stop_after and opaque names keep the group.
    Graph g = shared_cheap_producer("recompute_stop");
    FusedGraph stop = plan_fusion(g, {custom_rules("recompute_stop", {{"recompute", true}, {"stop_after", {"neg"}}})});
    EXPECT_TRUE(groups_of(stop).count({"neg"})) << plan_table(stop);
    FusedGraph opaque =
        plan_fusion(g, {custom_rules("recompute_opaque", {{"recompute", true}, {"opaque_nodes", {"neg"}}})});
    EXPECT_TRUE(groups_of(opaque).count({"neg"})) << plan_table(opaque);
    // max_group_ops: a reader that would grow past the limit keeps the producer a group.
    FusedGraph small = plan_fusion(g, {custom_rules("recompute_small", {{"recompute", true}, {"max_group_ops", 1}})});
    EXPECT_EQ(small.groups.size(), 3u) << plan_table(small);
}

TEST(PlannerOptions, SiblingProductsShareAGroup) {
    // Two products meeting in an Add (an RNN cell's x W + h U) join one group; a third product that
    // reads their result (a chain) and a product of another shape (broadcast into the Add) stay out.
    Graph g = ModelBuilder("siblings")
                  .input("x", {1, 16})
                  .input("h", {1, 16})
                  .weight("w", {16, 16})
                  .weight("u", {16, 16})
                  .weight("v", {16, 16})
                  .weight("z", {1, 16})
                  .node("xw", "Gemm", {"x", "w"}, {{"transB", 1}})
                  .node("hu", "Gemm", {"h", "u"}, {{"transB", 1}})
                  .node("add", "Add", {"xw", "hu"})
                  .node("t", "Tanh", {"add"})
                  .node("next", "Gemm", {"t", "v"}, {{"transB", 1}})
                  .node("q", "Gemm", {"x", "v"}, {{"transB", 1}})
                  .node("narrow", "Gemm", {"h", "z"}, {{"transB", 1}})
                  .node("add2", "Add", {"q", "narrow"})
                  .output("next")
                  .output("add2")
                  .load();
    FusedGraph on = plan(g, {"x86"});
    EXPECT_TRUE(group_with(on, "hu").name == group_with(on, "xw").name) << plan_table(on);
    EXPECT_EQ(group_with(on, "add").name, group_with(on, "xw").name) << plan_table(on);
    EXPECT_NE(group_with(on, "next").name, group_with(on, "xw").name) << "a chain is no sibling\n" << plan_table(on);
    EXPECT_NE(group_with(on, "narrow").name, group_with(on, "q").name) << plan_table(on);
    EXPECT_EQ(group_with(on, "add2").name, group_with(on, "q").name) << plan_table(on);
    FusedGraph off = plan_fusion(g, {custom_rules("no_siblings", {{"sibling_products", false}})});
    EXPECT_NE(group_with(off, "hu").name, group_with(off, "xw").name) << plan_table(off);
    EXPECT_NE(group_with(plan(g, {"tvm"}), "hu").name, group_with(plan(g, {"tvm"}), "xw").name);
    Baseline base = unfused_baseline(g);
    expect_matches(on, base, "siblings");
    expect_matches(off, base, "no siblings");
}

TEST(PlannerOptions, PointwiseConvJoinsTheDepthwiseConvReadingIt) {
    // MobileNet's expand (1x1 + BN + ReLU) joins the 3x3 depthwise conv reading it, which leads the
    // group; the project conv after the depthwise one does not (a 1x1 reads every channel), nor does a
    // pointwise conv whose value is also read elsewhere, nor one before a strided depthwise conv
    // where the expanded value fits the machine model's private cache.
    auto block = [](const std::string &name, int stride, bool shared, int size = 10, int images = 1) {
        ModelBuilder b(name);
        b.input("x", {images, 8, size, size})
            .conv("expand", "x", 8, 24, 1)
            .bn("bn", "expand", 24)
            .node("relu", "Relu", {"bn"});
        b.weight("dw.w", {24, 1, 3, 3})
            .node("dw", "Conv", {"relu", "dw.w"},
                  {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}, {"strides", {stride, stride}}, {"group", 24}})
            .node("dw_relu", "Relu", {"dw"})
            .conv("project", "dw_relu", 24, 8, 1);
        if (shared) b.node("side", "Sigmoid", {"relu"}).output("side");
        return b.output("project").load();
    };
    const Graph g = block("pw_dw", 1, false);
    FusedGraph on = plan(g, {"x86"});
    EXPECT_EQ(groups_of(on), (Groups{{"expand", "relu", "dw", "dw_relu"}, {"project"}})) << plan_table(on);
    EXPECT_EQ(group_with(on, "dw").master, "dw");
    EXPECT_EQ(group_with(on, "dw").placement.at("expand"), Placement::ComputeAt);
    FusedGraph off = plan_fusion(g, {custom_rules("no_pw_dw", {{"pointwise_into_depthwise", false}})});
    EXPECT_EQ(off.groups.size(), 3u) << plan_table(off);
    EXPECT_EQ(plan(g, {"tvm"}).groups.size(), 3u);
    for (const Graph &other : {block("pw_dw_s2", 2, false), block("pw_dw_shared", 1, true)}) {
        FusedGraph p = plan(other, {"x86"});
        EXPECT_NE(group_with(p, "expand").name, group_with(p, "dw").name) << other.name << "\n" << plan_table(p);
    }
    Baseline base = unfused_baseline(g);
    expect_matches(on, base, "pointwise into depthwise");
    expect_matches(off, base, "apart");
    // Strided: joins where the expanded value (24 channels of 11 x 11, 11.6 KB) exceeds cache_bytes,
    // and computes what the graph does (odd rows: the last output row reads the bottom pad).
    const Graph s2 = block("pw_dw_s2_odd", 2, false, 11);
    nlohmann::json machine = to_json(MachineModel{});
    machine["cache_bytes"] = 8192;
    machine["shared_cache_bytes"] = 8192;
    FusedGraph small_cache = plan_fusion(s2, {custom_rules("small_cache", {{"cost_model", machine}})});
    EXPECT_EQ(group_with(small_cache, "expand").name, group_with(small_cache, "dw").name) << plan_table(small_cache);
    EXPECT_EQ(group_with(small_cache, "dw").master, "dw");
    expect_matches(small_cache, unfused_baseline(s2), "strided pointwise into depthwise");
    FusedGraph x86 = plan(s2, {"x86"});
    EXPECT_NE(group_with(x86, "expand").name, group_with(x86, "dw").name) << plan_table(x86);
    // What counts is one image's value: 2 images of 24 x 7 x 7 (4.7 KB each, 9.4 KB in all) stay
    // apart; 2 of 24 x 11 x 11 join, and compute what the graph does.
    const Graph batch_small = block("pw_dw_s2_b2", 2, false, 7, 2),
                batch_large = block("pw_dw_s2_b2_11", 2, false, 11, 2);
    FusedGraph small_planes = plan_fusion(batch_small, {custom_rules("small_cache_b2", {{"cost_model", machine}})});
    EXPECT_NE(group_with(small_planes, "expand").name, group_with(small_planes, "dw").name) << plan_table(small_planes);
    FusedGraph large_planes = plan_fusion(batch_large, {custom_rules("small_cache_b2", {{"cost_model", machine}})});
    EXPECT_EQ(group_with(large_planes, "expand").name, group_with(large_planes, "dw").name) << plan_table(large_planes);
    expect_matches(large_planes, unfused_baseline(batch_large), "strided pointwise into depthwise, 2 images");
    // A strided 1x1 is no pointwise feed, even where the cache would make a strided merge pay: its
    // output pixel reads another input pixel, which conv_dw's flat producer cannot compute.
    const Graph strided_expand =
        ModelBuilder("pw_s2_dw")
            .input("x", {1, 8, 22, 22})
            .weight("e.w", {24, 8, 1, 1})
            .node("expand", "Conv", {"x", "e.w"}, {{"kernel_shape", {1, 1}}, {"strides", {2, 2}}})
            .node("relu", "Relu", {"expand"})
            .weight("dw.w", {24, 1, 3, 3})
            .node("dw", "Conv", {"relu", "dw.w"}, {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}, {"group", 24}})
            .output("dw")
            .load();
    FusedGraph strided = plan_fusion(strided_expand, {custom_rules("small_cache_s2", {{"cost_model", machine}})});
    EXPECT_NE(group_with(strided, "expand").name, group_with(strided, "dw").name) << plan_table(strided);
    expect_matches(strided, unfused_baseline(strided_expand), "strided expand apart");
}

// A squeeze-and-excitation block: the Mul of the activation by its per-channel gate joins the conv
// reading it, which applies the scale as it reads its input (a prologue), rather than the gate's group
// storing the scaled activation for the conv to read again. At odd sizes, for a narrow conv and for a
// deep one (64 -> 128 channels, 2 images), each computes what the graph does.
TEST(PlannerOptions, SqueezeExciteScaleJoinsTheConvReadingIt) {
    struct Case {
        int channels, out, h, w, images;
    };
    for (const Case c : {Case{24, 16, 9, 19, 1}, Case{64, 128, 7, 9, 2}}) {
        const std::string name = "se_" + std::to_string(c.channels) + "_" + std::to_string(c.out);
        const Graph g = ModelBuilder(name)
                            .input("x", {c.images, 8, c.h, c.w})
                            .conv("conv", "x", 8, c.channels)
                            .node("act", "Relu", {"conv"})
                            .node("squeeze", "GlobalAveragePool", {"act"})
                            .conv("fc1", "squeeze", c.channels, 8, 1)
                            .node("fc1_relu", "Relu", {"fc1"})
                            .conv("fc2", "fc1_relu", 8, c.channels, 1)
                            .node("gate", "Sigmoid", {"fc2"})
                            .node("scale", "Mul", {"act", "gate"})
                            .conv("project", "scale", c.channels, c.out, 1)
                            .output("project")
                            .load();
        const FusedGraph x86 = plan(g, {"x86"});
        EXPECT_EQ(group_with(x86, "scale").name, group_with(x86, "project").name) << name << "\n" << plan_table(x86);
        EXPECT_EQ(group_with(x86, "project").master, "project");
        EXPECT_NE(group_with(x86, "gate").name, group_with(x86, "scale").name) << name;
        EXPECT_NE(group_with(x86, "gate").why.find("reads (a prologue)"), std::string::npos)
            << group_with(x86, "gate").why;
        Executor ex(x86);
        for (const GroupInfo &info : ex.groups()) {
            if (info.master == "project")
                EXPECT_EQ(info.schedule_template.rfind("conv_", 0), 0u) << info.schedule_template;
        }
        // Without the cost model the rules alone decide, as before.
        const FusedGraph uncosted = plan_fusion(g, {custom_rules("se_uncosted", {{"cost_model", false}})});
        const Baseline base = unfused_baseline(g);
        expect_matches(x86, base, name + " scale in its reader");
        expect_matches(uncosted, base, name + " no cost model");
    }
}

// --- Rounds -----------------------------------------------------------------------------------------

TEST(PlannerRounds, TvmThenX86MergesFurther) {
    Graph g = load_model(kModels + "conv_bias_relu_maxpool.json");
    FusedGraph tvm = plan(g, {"tvm"});
    EXPECT_EQ(groups_of(tvm), (Groups{{"conv", "relu"}, {"pool"}})) << plan_table(tvm);
    FusedGraph both = plan(g, {"tvm", "x86"});
    EXPECT_EQ(groups_of(both), (Groups{{"conv", "relu", "pool"}})) << plan_table(both);
    EXPECT_EQ(both.rules, (std::vector<std::string>{"tvm", "x86"}));
    // plan_round on the tvm plan is the same as planning both rounds at once.
    EXPECT_EQ(groups_json(plan_round(tvm, load_rules("x86"))), groups_json(both));
    // Here the two rounds end where x86 alone does.
    FusedGraph x86 = plan(g, {"x86"});
    EXPECT_EQ(groups_json(both), groups_json(x86));
}

TEST(PlannerRounds, RoundsOnlyMergeGroups) {
    std::vector<Graph> graphs = {diamond("rounds_diamond"), split_concat("rounds_split"), lstm_like("rounds_lstm")};
    for (const Graph &g : graphs) {
        FusedGraph first = plan(g, {"tvm"});
        FusedGraph second = plan_round(first, load_rules("x86"));
        for (const FusedGroup &a : first.groups) {
            const FusedGroup &b = group_with(second, a.nodes.front());
            for (const std::string &n : a.nodes) {
                EXPECT_NE(std::find(b.nodes.begin(), b.nodes.end(), n), b.nodes.end())
                    << g.name << ": '" << n << "' left the group of '" << a.nodes.front() << "'";
            }
        }
    }
}

TEST(PlannerRounds, PlanRoundIsPureAndIdempotent) {
    std::vector<Graph> graphs;
    for (const char *m :
         {"conv_bn_relu", "conv_bias_relu_maxpool", "resnet_block", "rnn_cell", "lstm_cell", "mlp_softmax"}) {
        graphs.push_back(load_model(kModels + m + ".json"));
    }
    graphs.push_back(diamond("pure_diamond"));
    graphs.push_back(split_concat("pure_split"));
    for (const Graph &g : graphs) {
        for (const std::string &r : builtin_rule_names()) {
            RuleSet rules = load_rules(r);
            FusedGraph start = singleton_groups(simplify(g));
            FusedGraph a = plan_round(start, rules), b = plan_round(start, rules);
            EXPECT_EQ(plan_to_json(a), plan_to_json(b)) << g.name << " " << r;
            // The input is not modified.
            EXPECT_EQ(plan_to_json(start), plan_to_json(singleton_groups(simplify(g)))) << g.name << " " << r;
            // Planning a planned graph again with the same rules changes no group, master or placement.
            FusedGraph again = plan_round(a, rules);
            EXPECT_EQ(groups_json(again), groups_json(a)) << g.name << " " << r << "\n"
                                                          << plan_table(a) << plan_table(again);
        }
    }
}

TEST(PlannerRounds, PlanRoundTakesAnyFusedGraph) {
    // plan_round is public and takes plain data. Groups given in an order other than the topological
    // one, or without masters (check_plan fills them in), must plan like the checked graph or be an
    // hfuse::Error, never hang or throw std::out_of_range.
    Graph g = lstm_like("any_order");
    FusedGraph start = singleton_groups(simplify(g));
    const Groups expected = groups_of(plan_round(start, load_rules("x86")));

    FusedGraph no_masters = start;
    for (FusedGroup &grp : no_masters.groups) grp.master.clear();
    try {
        EXPECT_EQ(groups_of(plan_round(no_masters, load_rules("x86"))), expected);
    } catch (const Error &) {
        // a clear error is fine
    } catch (const std::exception &e) {
        ADD_FAILURE() << "groups without masters: " << typeid(e).name() << ": " << e.what();
    }

    // Reversed group order. Run in a child process with an alarm: the planner may never return.
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    FusedGraph reversed = start;
    std::reverse(reversed.groups.begin(), reversed.groups.end());
    EXPECT_EXIT(
        {
            alarm(5);
            bool same = false;
            try {
                same = groups_of(plan_round(reversed, load_rules("x86"))) == expected;
            } catch (const Error &) {
                same = true;  // rejected with a clear error: fine
            }
            std::exit(same ? 0 : 1);
        },
        testing::ExitedWithCode(0), "")
        << "plan_round on groups in reverse topological order: killed by SIGALRM = it never returned";
}

// --- The bundled models -----------------------------------------------------------------------------

TEST(PlannerModels, X86DefaultPlans) {
    auto x86 = [](const std::string &model) { return plan(load_model(kModels + model + ".json"), {"x86"}); };
    for (const char *m : {"conv_bn_relu", "dwconv_bn_relu", "conv3x3_bn_relu"}) {
        FusedGraph f = x86(m);
        ASSERT_EQ(f.groups.size(), 1u) << m << "\n" << plan_table(f);
        // The BatchNormalization was folded into the conv and is listed with it as "folded".
        const FusedGroup &grp = f.groups[0];
        EXPECT_EQ(grp.placement.at("bn"), Placement::Folded) << m;
        json j = plan_to_json(f);
        EXPECT_EQ(j["groups"][0]["placement"]["bn"], "folded") << m;
        json nodes = j["groups"][0]["nodes"];
        EXPECT_NE(std::find(nodes.begin(), nodes.end(), "bn"), nodes.end()) << m << ": " << j.dump();
        EXPECT_EQ(grp.master, std::string(m) == "dwconv_bn_relu" ? "dwconv" : "conv");
    }
    FusedGraph cbrm = x86("conv_bias_relu_maxpool");
    EXPECT_EQ(groups_of(cbrm), (Groups{{"conv", "relu", "pool"}})) << plan_table(cbrm);

    FusedGraph res = x86("resnet_block");
    EXPECT_EQ(groups_of(res), (Groups{{"conv1", "relu1"}, {"conv2", "add", "relu2"}})) << plan_table(res);
    EXPECT_EQ(group_with(res, "conv1").placement.at("bn1"), Placement::Folded);
    EXPECT_EQ(group_with(res, "conv2").placement.at("bn2"), Placement::Folded);

    FusedGraph rnn = x86("rnn_cell");
    FusedGraph lstm = x86("lstm_cell");
    FusedGraph mlp = x86("mlp_softmax");
    EXPECT_LE(mlp.groups.size(), 2u) << plan_table(mlp);
    // The cells' two products meet in the gates' Add: one kernel (sibling_products). The MLP's two
    // Gemms form a chain and stay apart.
    EXPECT_EQ(rnn.groups.size(), 1u) << plan_table(rnn);
    EXPECT_EQ(lstm.groups.size(), 1u) << plan_table(lstm);
    for (const FusedGroup &grp : mlp.groups) {
        int gemms = 0;
        for (const std::string &n : grp.nodes) gemms += mlp.graph.find_node(n)->op == "Gemm";
        EXPECT_LE(gemms, 1) << plan_table(mlp);
    }
}

TEST(PlannerModels, NoneIsOneGroupPerOp) {
    for (const char *m : {"conv_bn_relu", "conv_bias_relu_maxpool", "resnet_block", "lstm_cell", "mlp_softmax"}) {
        Graph g = load_model(kModels + std::string(m) + ".json");
        FusedGraph f = plan(g, {"none"});
        EXPECT_EQ(f.groups.size(), f.graph.nodes.size()) << m;
        for (const FusedGroup &grp : f.groups) EXPECT_EQ(grp.nodes.size(), 1u) << m;
    }
}

class PlannerModelRuns : public testing::TestWithParam<std::string> {};

TEST_P(PlannerModelRuns, EveryBuiltInPlanMatchesUnfused) {
    Graph g = load_model(kModels + GetParam() + ".json");
    Baseline base = unfused_baseline(g);
    std::set<json> done;  // rule sets that give the same plan need not compile it twice
    for (const auto &rounds : std::vector<std::vector<std::string>>{{"x86"}, {"tvm"}, {"none"}, {"tvm", "x86"}}) {
        std::string what = GetParam();
        for (const auto &r : rounds) what += " " + r;
        FusedGraph f = plan(g, rounds);
        if (done.insert(groups_json(f)).second) expect_matches(f, base, what);
    }
}

INSTANTIATE_TEST_SUITE_P(PlannerModels, PlannerModelRuns,
                         testing::Values("conv_bn_relu", "dwconv_bn_relu", "conv3x3_bn_relu", "conv_bias_relu_maxpool",
                                         "resnet_block", "rnn_cell", "lstm_cell", "mlp_softmax"));

// --- Random legal partitions and random graphs ------------------------------------------------------

// Whether a node's value is needed outside `group` (a model output or read by a node outside).
bool live_out(const Graph &g, const std::string &node, const std::set<std::string> &group) {
    const Node *n = g.find_node(node);
    for (const std::string &v : n->outputs) {
        if (std::count(g.outputs.begin(), g.outputs.end(), v)) return true;
        for (const Node &c : g.nodes) {
            if (!group.count(c.name) && std::count(c.inputs.begin(), c.inputs.end(), v)) return true;
        }
    }
    return false;
}

// A random partition of g's nodes (each node joins the group of a random producer, a random earlier
// group, or starts a new one) with random legal placements; check_plan decides whether it is legal.
FusedGraph random_partition(const Graph &g, std::mt19937 &rng) {
    std::map<std::string, int> group_of;
    std::vector<std::vector<std::string>> groups;
    for (const Node &n : g.nodes) {
        std::vector<int> choices;
        for (const std::string &v : n.inputs) {
            if (const Node *p = g.producer(v)) choices.push_back(group_of.at(p->name));
        }
        int r = std::uniform_int_distribution<int>(0, 9)(rng);
        int k;
        if (r < 6 && !choices.empty()) {
            k = choices[std::uniform_int_distribution<size_t>(0, choices.size() - 1)(rng)];
        } else if (r < 7 && !groups.empty()) {
            k = std::uniform_int_distribution<int>(0, static_cast<int>(groups.size()) - 1)(rng);
        } else {
            k = static_cast<int>(groups.size());
            groups.emplace_back();
        }
        groups[k].push_back(n.name);
        group_of[n.name] = k;
    }
    FusedGraph f;
    f.graph = g;
    for (const auto &nodes : groups) {
        FusedGroup grp;
        grp.nodes = nodes;
        std::set<std::string> members(nodes.begin(), nodes.end());
        for (const std::string &n : nodes) {
            if (live_out(g, n, members)) continue;
            bool complex = find_op(g.find_node(n)->op)->kind == PatternKind::ComplexOutFusable;
            int p = std::uniform_int_distribution<int>(complex ? 1 : 0, 3)(rng);
            if (p < 3) grp.placement[n] = p == 0 ? Placement::Inline : p == 1 ? Placement::ComputeAt : Placement::Root;
        }
        f.groups.push_back(grp);
    }
    return check_plan(std::move(f));
}

TEST(PlannerRandom, RandomLegalPartitionsRunAndMatch) {
    std::vector<Graph> graphs = {
        diamond("random_diamond"), split_concat("random_split"), lstm_like("random_lstm"),
        ModelBuilder("random_residual")
            .input("x", {1, 4, 6, 6})
            .conv("conv1", "x", 4, 4)
            .bn("bn1", "conv1", 4)
            .node("relu1", "Relu", {"bn1"})
            .conv("conv2", "relu1", 4, 4)
            .node("add", "Add", {"conv2", "relu1"})
            .node("pool", "AveragePool", {"add"}, {{"kernel_shape", {2, 2}}, {"strides", {2, 2}}})
            .output("pool")
            .output("relu1")
            .load()};
    std::mt19937 rng(20240611);
    const int kPerGraph = 2;  // each partition JIT-compiles one pipeline per group
    for (const Graph &g : graphs) {
        Baseline base = unfused_baseline(g);
        int accepted = 0, rejected = 0;
        std::set<json> seen;
        for (int attempt = 0; attempt < 200 && accepted < kPerGraph; attempt++) {
            FusedGraph f;
            try {
                f = random_partition(g, rng);
            } catch (const Error &) {
                rejected++;
                continue;
            }
            if (f.groups.size() == g.nodes.size() || !seen.insert(groups_json(f)).second) continue;
            accepted++;
            expect_matches(f, base, g.name + " random partition");
        }
        EXPECT_EQ(accepted, kPerGraph) << g.name << ": not enough legal random partitions (" << rejected
                                       << " rejected)";
    }
}

// Random DAGs of same-shape ops (plus Split/Concat pairs); every rule set must give a legal plan that
// respects the rule set's limits.
Graph random_graph(int index, std::mt19937 &rng) {
    ModelBuilder b("random_graph_" + std::to_string(index));
    b.input("x", {1, 4, 6, 6}).input("y", {1, 4, 6, 6});
    std::vector<std::string> values = {"x", "y"};
    std::map<std::string, int> uses;
    auto pick = [&]() {
        // Prefer recent values, so chains form.
        int n = static_cast<int>(values.size());
        int lo = std::max(0, n - 4);
        std::string v = values[std::uniform_int_distribution<int>(
            std::uniform_int_distribution<int>(0, 3)(rng) ? lo : 0, n - 1)(rng)];
        uses[v]++;
        return v;
    };
    const int num = std::uniform_int_distribution<int>(4, 9)(rng);
    for (int i = 0; i < num; i++) {
        const std::string n = "n" + std::to_string(i);
        switch (std::uniform_int_distribution<int>(0, 10)(rng)) {
        case 0: b.node(n, "Relu", {pick()}); break;
        case 1: b.node(n, "Sigmoid", {pick()}); break;
        case 2: b.node(n, "Add", {pick(), pick()}); break;
        case 3: b.node(n, "Mul", {pick(), pick()}); break;
        case 4:
        case 5: b.conv(n, pick(), 4, 4, std::uniform_int_distribution<int>(0, 1)(rng) ? 3 : 1); break;
        case 6:
            b.node(n, "MaxPool", {pick()}, {{"kernel_shape", {3, 3}}, {"strides", {1, 1}}, {"pads", {1, 1, 1, 1}}});
            break;
        case 7: b.node(n, "Transpose", {pick()}, {{"perm", {0, 1, 3, 2}}}); break;
        case 8: b.node(n, "Softmax", {pick()}, {{"axis", 1}}); break;
        case 9: b.bn(n, pick(), 4); break;
        default: {
            b.node(n + "_split", "Split", {pick()}, {{"axis", 1}}, {n + "_a", n + "_b"});
            b.node(n + "_relu", "Relu", {n + "_a"});
            b.node(n, "Concat", {n + "_b", n + "_relu"}, {{"axis", 1}});
            break;
        }
        }
        values.push_back(n);
    }
    // Every unused value is an output; sometimes a used one too.
    for (size_t i = 2; i < values.size(); i++) {
        if (!uses[values[i]] || std::uniform_int_distribution<int>(0, 5)(rng) == 0) b.output(values[i]);
    }
    return b.load();
}

void expect_respects(const FusedGraph &f, const RuleSet &rules, const std::string &what) {
    const Graph &g = f.graph;
    for (const FusedGroup &grp : f.groups) {
        std::set<std::string> members(grp.nodes.begin(), grp.nodes.end());
        EXPECT_LE((int)grp.nodes.size(), rules.max_group_ops) << what;
        std::set<std::string> inputs;
        int complex = 0;
        bool window = false;
        for (const std::string &n : grp.nodes) {
            const Node *node = g.find_node(n);
            complex += find_op(node->op)->kind == PatternKind::ComplexOutFusable;
            window = window || find_op(node->op)->kind == PatternKind::Window;
            for (const std::string &v : node->inputs) {
                const Node *p = v.empty() ? nullptr : g.producer(v);
                if (!v.empty() && !g.is_weight(v) && (!p || !members.count(p->name))) inputs.insert(v);
            }
            if (grp.placement.at(n) == Placement::Recompute) {
                EXPECT_TRUE(rules.recompute) << what << ": '" << n << "' recomputed\n" << plan_table(f);
                EXPECT_LE(find_op(node->op)->kind, PatternKind::Injective) << what << ": '" << n << "' recomputed";
            }
            if (grp.nodes.size() > 1) {
                EXPECT_FALSE(rules.opaque_ops.count(node->op) || rules.opaque_nodes.count(n))
                    << what << ": opaque '" << n << "' fused\n"
                    << plan_table(f);
            }
            if (rules.stop_after.count(n)) {
                for (const Node &c : g.nodes) {
                    bool reads = std::count(c.inputs.begin(), c.inputs.end(), node->outputs[0]) > 0;
                    EXPECT_FALSE(reads && members.count(c.name))
                        << what << ": '" << c.name << "' fused after stop_after '" << n << "'\n"
                        << plan_table(f);
                }
            }
            if (!rules.multi_output && std::count(g.outputs.begin(), g.outputs.end(), n)) {
                for (const Node &c : g.nodes) {
                    EXPECT_FALSE(members.count(c.name) && std::count(c.inputs.begin(), c.inputs.end(), n))
                        << what << ": model output '" << n << "' also used inside its group\n"
                        << plan_table(f);
                }
            }
        }
        EXPECT_LE((int)inputs.size(), rules.max_group_inputs) << what << "\n" << plan_table(f);
        if (rules.rules.empty()) EXPECT_EQ(grp.nodes.size(), 1u) << what;
        if (rules.source.rfind("built-in", 0) == 0) {
            EXPECT_LE(complex, 1) << what << ": two complex-out-fusable ops in group " << grp.name << "\n"
                                  << plan_table(f);
        }
        if (!rules.window_fusion && complex > 0) EXPECT_FALSE(window) << what << "\n" << plan_table(f);
    }
}

TEST(PlannerRandom, RandomGraphsGiveLegalPlansUnderEveryRuleSet) {
    std::mt19937 rng(7);
    std::vector<RuleSet> rule_sets;
    for (const std::string &r : builtin_rule_names()) rule_sets.push_back(load_rules(r));
    rule_sets.push_back(custom_rules("fuzz_limits", {{"max_group_ops", 3}, {"max_group_inputs", 2}}));
    rule_sets.push_back(custom_rules("fuzz_flags", {{"window_fusion", false}, {"multi_output", false}}));
    rule_sets.push_back(custom_rules(
        "fuzz_names", {{"opaque_ops", {"Sigmoid"}}, {"opaque_nodes", {"n2"}}, {"stop_after", {"n1", "n4"}}}));
    // Everything may fuse with everything: only convexity and the limits hold the planner back.
    json all = json::array();
    for (const char *k : {"elementwise", "broadcast", "injective", "reduction", "complex-out-fusable", "window"}) {
        all.push_back(
            {{"producer", k},
             {"consumers", {"elementwise", "broadcast", "injective", "reduction", "complex-out-fusable", "window"}},
             {"placement", "root"}});
    }
    rule_sets.push_back(custom_rules("fuzz_all", {{"fuse", all}, {"max_group_ops", 6}}));
    rule_sets.push_back(custom_rules("fuzz_recompute", {{"recompute", true}}));
    rule_sets.push_back(custom_rules("fuzz_recompute_tvm", {{"recompute", true}, {"max_group_ops", 4}}, "tvm"));
    int executed = 0;
    for (int i = 0; i < 150; i++) {
        Graph g = random_graph(i, rng);
        std::unique_ptr<Baseline> base;
        for (const RuleSet &rules : rule_sets) {
            const std::string what = g.name + " under " + rules.name;
            FusedGraph f;
            try {
                f = plan_fusion(g, {rules});
            } catch (const Error &e) {
                ADD_FAILURE() << what << ": planning failed: " << e.what();
                continue;
            }
            expect_respects(f, rules, what);
            // Execute a sample (JIT compiling is the slow part).
            if (i % 50 == 0 && (rules.name == "x86" || rules.name == "fuzz_all" || rules.name == "fuzz_recompute")) {
                if (!base) base = std::make_unique<Baseline>(unfused_baseline(g));
                expect_matches(f, *base, what);
                executed++;
            }
        }
    }
    EXPECT_GT(executed, 0);
}

// ---- The cost model (hfuse/fusion_cost.h) ---------------------------------------------------------

Graph conv_relu_pool_window(int k, int s) {
    return ModelBuilder("crp_k" + std::to_string(k) + "s" + std::to_string(s))
        .input("x", {1, 8, 32, 32})
        .conv("conv", "x", 8, 8)
        .node("relu", "Relu", {"conv"})
        .node("pool", "MaxPool", {"relu"}, {{"kernel_shape", {k, k}}, {"strides", {s, s}}})
        .output("pool")
        .load();
}

TEST(FusionCost, PricesWhatAGroupKeepsAndRecomputes) {
    const MachineModel m;
    const std::map<std::string, Placement> placement = {{"conv", Placement::ComputeAt}, {"relu", Placement::Inline}};
    const int64_t plane_bytes = 8 * 32 * 32 * 4;  // the conv's value and the ReLU's
    // A 2x2 stride-2 pool: the conv per tile, its value and the ReLU's never stored, nothing twice.
    const Graph two = simplify(conv_relu_pool_window(2, 2));
    MergePrice p = price_nodes(two, {"conv", "relu", "pool"}, placement, m);
    EXPECT_EQ(p.kept_bytes, 2 * plane_bytes);
    EXPECT_EQ(p.recompute_flops, 0);
    EXPECT_TRUE(p.pays());
    EXPECT_NE(p.why().find("keeps 64.0 KiB out of memory"), std::string::npos) << p.why();
    // A 3x3 stride-2 pool overlaps: the conv at root (its value stored), the ReLU inlined into the
    // pool runs again on each tile of 4 pool rows' halo: 9 input rows for 8, 1/8 more of it.
    const Graph three = simplify(conv_relu_pool_window(3, 2));
    p = price_nodes(three, {"conv", "relu", "pool"}, placement, m);
    EXPECT_EQ(p.kept_bytes, plane_bytes);
    EXPECT_DOUBLE_EQ(p.recompute_flops, 8 * 32 * 32 / 8.0);
    // A part alone keeps what only it reads; a merge adds the difference.
    const MergePrice part = price_nodes(three, {"conv", "relu"}, placement, m);
    EXPECT_EQ(part.kept_bytes, plane_bytes);
    EXPECT_EQ((p - part).kept_bytes, 0);
    EXPECT_FALSE((p - part).pays());
    EXPECT_TRUE((p - part).close()) << "a few hundred FLOPs in a conv's group";

    // Copies of a shared group: a ReLU of 64 KiB in 3 readers pays, a Sigmoid of it does not.
    const Graph shared = ModelBuilder("shared_gate")
                             .input("x", {1, 16, 32, 32})
                             .node("relu", "Relu", {"x"})
                             .node("sig", "Sigmoid", {"x"})
                             .output("relu")
                             .output("sig")
                             .load();
    const MergePrice relu = price_recompute(shared, {"relu"}, {"relu"}, 3, m);
    const MergePrice sig = price_recompute(shared, {"sig"}, {"sig"}, 3, m);
    EXPECT_EQ(relu.kept_bytes, 16 * 32 * 32 * 4);
    EXPECT_DOUBLE_EQ(sig.recompute_flops, 2 * 16 * 32 * 32 * kTranscendentalFlops);
    EXPECT_TRUE(relu.pays());
    EXPECT_FALSE(sig.pays());
    EXPECT_FALSE(sig.close());
}

// Three convs reading one gate, a Relu or a Sigmoid.
Graph gate_into_three_convs(const std::string &gate) {
    return ModelBuilder("gate_" + gate)
        .input("x", {1, 16, 32, 32})
        .node("gate", gate, {"x"})
        .conv("conv_a", "gate", 16, 16)
        .conv("conv_b", "gate", 16, 16, 1)
        .conv("conv_c", "gate", 16, 16, 1)
        .node("ab", "Add", {"conv_a", "conv_b"})
        .node("abc", "Add", {"ab", "conv_c"})
        .output("abc")
        .load();
}

TEST(PlannerOptions, CostModelDeclinesRecomputeCopiesThatCostMoreThanTheySave) {
    for (const std::string gate : {"Relu", "Sigmoid"}) {
        SCOPED_TRACE(gate);
        const Graph g = gate_into_three_convs(gate);
        const Baseline base = unfused_baseline(g);
        const FusedGraph costed = plan_fusion(g, {load_rules("x86")});
        const FusedGraph free = plan_fusion(g, {custom_rules("x86_no_cost_" + gate, {{"cost_model", false}})});
        auto copies = [](const FusedGraph &f) {
            int n = 0;
            for (const FusedGroup &grp : f.groups) n += is_recompute_copy(grp, "gate");
            return n;
        };
        EXPECT_EQ(copies(free), 3) << plan_table(free);
        EXPECT_EQ(copies(costed), gate == "Relu" ? 3 : 0) << plan_table(costed);
        if (gate == "Sigmoid") {
            const FusedGroup *own = nullptr;
            for (const FusedGroup &grp : costed.groups) {
                if (grp.nodes == std::vector<std::string>{"gate"}) own = &grp;
            }
            ASSERT_NE(own, nullptr) << plan_table(costed);
            EXPECT_NE(own->why.find("not recomputed in its 3 readers: keeps 64.0 KiB out of memory"), std::string::npos)
                << own->why;
            EXPECT_EQ(own->why.find("not recomputed"), own->why.rfind("not recomputed")) << "said twice: " << own->why;
            EXPECT_NE(plan_table(costed).find("why: not recomputed in its 3 readers"), std::string::npos)
                << plan_table(costed);
            // The reason is kept in the plan file, and read back as written.
            const std::string path = tmp_path("cost_why.plan.json");
            write_plan(path, costed);
            const FusedGraph back = read_plan(path, costed.graph);
            for (size_t i = 0; i < back.groups.size(); i++) EXPECT_EQ(back.groups[i].why, costed.groups[i].why);
            std::remove(path.c_str());
        }
        expect_matches(costed, base, "cost model");
        expect_matches(free, base, "no cost model");
    }
}

// An expand (1x1) + ReLU + 3x3 depthwise block of E channels at H x W.
// With `gate`, a Sigmoid after the depthwise conv.
Graph expand_depthwise(int E, int H, int W, bool gate = false) {
    ModelBuilder b("expand_dw_" + std::to_string(E) + "_" + std::to_string(W));
    b.input("x", {1, 16, H, W}).conv("expand", "x", 16, E, 1).node("relu", "Relu", {"expand"});
    b.weight("dw.w", {E, 1, 3, 3});
    b.node("dw", "Conv", {"relu", "dw.w"}, {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}, {"group", E}});
    if (gate) b.node("gate", "Sigmoid", {"dw"});
    return b.output(gate ? "gate" : "dw").load();
}

// A depthwise conv computed with its pointwise producer (conv_dw) vectorizes the plane along rows; rows
// narrower than the vectors leave lanes idle that conv_cv would fill apart with channels.
TEST(FusionCost, DepthwiseWithItsProducerPricesTheLanesItLeavesIdle) {
    const std::map<std::string, Placement> placement = {{"expand", Placement::ComputeAt}, {"relu", Placement::Inline}};
    const std::set<std::string> group = {"expand", "relu", "dw"};
    MachineModel m;  // vector_lanes 0: 16
    // 7 wide: vectors narrowed to 4 lanes, two a row (8 for 7): 7/32 of 16-lane vectors used.
    const Graph narrow = simplify(expand_depthwise(64, 7, 7));
    MergePrice p = price_nodes(narrow, group, placement, m);
    EXPECT_NEAR(p.idle_lane_fraction, 1 - 7.0 / 32, 1e-9);
    const double plane_flops = 2.0 * 9 * 64 * 49 + 64 * 49;  // the taps, the ReLU
    // The producer, flat over the 49 positions in tiles of 2 vectors of 16: 49 of 64 lanes.
    EXPECT_NEAR(p.producer_idle_lane_fraction, 1 - 49.0 / 64, 1e-9);
    const double producer_ns = node_flops(narrow, *narrow.find_node("expand")) / m.flops_per_ns * (64.0 / 49 - 1);
    EXPECT_GT(producer_ns, 0);
    EXPECT_NEAR(p.idle_ns, plane_flops / m.flops_per_ns * (32.0 / 7 - 1) + producer_ns, 1e-6);
    EXPECT_NE(p.why().find("leaves 78% of the depthwise conv's vector lanes idle and 23% of its producer's"),
              std::string::npos)
        << p.why();
    EXPECT_EQ(price_nodes(narrow, {"dw"}, placement, m).idle_ns, 0) << "apart: nothing idle";
    EXPECT_EQ(price_nodes(narrow, {"expand", "relu"}, placement, m).idle_ns, 0) << "apart: nothing idle";
    // The depthwise conv's elementwise epilogue counts whether or not it is in the group yet.
    const double gated = plane_flops + 64 * 49 * kTranscendentalFlops;
    const Graph with_gate = simplify(expand_depthwise(64, 7, 7, true));
    EXPECT_NEAR(price_nodes(with_gate, group, placement, m).idle_ns,
                gated / m.flops_per_ns * (32.0 / 7 - 1) + producer_ns, 1e-6);
    EXPECT_NEAR(price_nodes(with_gate, {"expand", "relu", "dw", "gate"}, placement, m).idle_ns,
                gated / m.flops_per_ns * (32.0 / 7 - 1) + producer_ns, 1e-6);
    // AVX2's 8 lanes: 4 of them, two a row: 7/16 used; the producer's tiles of 2 vectors of 8: 49 of 64.
    m.vector_lanes = 8;
    EXPECT_NEAR(price_nodes(narrow, group, placement, m).idle_lane_fraction, 1 - 7.0 / 16, 1e-9);
    EXPECT_NEAR(price_nodes(narrow, group, placement, m).producer_idle_lane_fraction, 1 - 49.0 / 64, 1e-9);
    m.vector_lanes = 0;
    // Rows of whole vectors on a plane of whole tiles, or channels that would not fill whole vectors
    // apart either: nothing idle.
    EXPECT_EQ(price_nodes(simplify(expand_depthwise(64, 4, 112)), group, placement, m).idle_ns, 0);
    EXPECT_EQ(price_nodes(simplify(expand_depthwise(24, 7, 7)), group, placement, m).idle_ns, 0);
    // Rows of whole vectors, but 48 positions in tiles of 32: only the producer's lanes idle.
    const Graph short_plane = simplify(expand_depthwise(64, 3, 16));
    const MergePrice s = price_nodes(short_plane, group, placement, m);
    EXPECT_EQ(s.idle_lane_fraction, 0);
    EXPECT_NEAR(s.producer_idle_lane_fraction, 0.25, 1e-9);
    EXPECT_NEAR(s.idle_ns, node_flops(short_plane, *short_plane.find_node("expand")) / m.flops_per_ns * (4.0 / 3 - 1),
                1e-6);
    EXPECT_NE(s.why().find("leaves 25% of the depthwise conv's producer's vector lanes idle"), std::string::npos)
        << s.why();
    // The planner: at 7x7 the pointwise conv stays apart (the lanes cost more than the 12 KiB kept in
    // cache), and says why; on wide planes (3.1 MiB kept) and channels no vector divides, it joins.
    const RuleSet x86 = load_rules("x86");
    const FusedGraph apart = plan_fusion(expand_depthwise(64, 7, 7), {x86});
    ASSERT_EQ(apart.groups.size(), 2u);
    EXPECT_NE(apart.groups[0].why.find("not merged with 'dw'"), std::string::npos) << apart.groups[0].why;
    EXPECT_NE(apart.groups[0].why.find("lanes idle"), std::string::npos) << apart.groups[0].why;
    EXPECT_EQ(plan_fusion(expand_depthwise(64, 112, 112), {x86}).groups.size(), 1u);
    EXPECT_EQ(plan_fusion(expand_depthwise(24, 7, 7), {x86}).groups.size(), 1u);
    // A target's lanes fill a rule set's open ones, and leave a rule set's own alone.
    std::vector<RuleSet> rounds = {x86, x86};
    rounds[1].machine.vector_lanes = 4;
    set_target_lanes(rounds, 8);
    EXPECT_EQ(rounds[0].machine.vector_lanes, 8);
    EXPECT_EQ(rounds[1].machine.vector_lanes, 4);
}

// Attention's scores: queries [heads, tokens, 32] times the keys transposed to [heads, 32, tokens]
// (contiguous along K as laid), then a Softmax.
Graph attention_scores(int64_t queries, const std::string &name) {
    ModelBuilder b(name);
    b.input("q", {4, queries, 32}).input("k", {4, 24, 32});
    b.node("kt", "Transpose", {"k"}, {{"perm", {0, 2, 1}}});
    b.node("scores", "MatMul", {"q", "kt"}).node("softmax", "Softmax", {"scores"}, {{"axis", -1}});
    return b.output("softmax").load();
}

TEST(FusionCost, TransposedOperandMaterialisedWhereItsCopyCostsLessThanDotProducts) {
    const Halide::Target host = Halide::get_host_target();
    const RuleSet x86 = load_rules("x86");
    // 24 queries read each key: the 12 KiB copy is cheaper than the dot products; the product reads
    // B along N (gemm_nv).
    const Graph many = attention_scores(24, "scores_24");
    const OperandCopyPrice price = price_operand_copy(simplify(many), *many.find_node("scores"), x86.machine);
    EXPECT_EQ(price.bytes, 4 * 24 * 32 * 4);
    EXPECT_TRUE(price.pays()) << price.copy_ns << " " << price.saved_ns;
    FusedGraph f = with_default_schedules(plan_fusion(many, {x86}), host);
    const FusedGroup &g = group_with(f, "scores");
    EXPECT_EQ(g.placement.at("kt"), Placement::Root);
    EXPECT_NE(g.why.find("materialises 'kt'"), std::string::npos) << g.why;
    EXPECT_EQ(g.schedule.value("template", ""), "gemm_nv");
    expect_matches(f, unfused_baseline(many), "24 queries");
    // A second round keeps the placement and says why again.
    const FusedGraph twice = plan_fusion(many, {x86, x86});
    EXPECT_EQ(group_with(twice, "scores").placement.at("kt"), Placement::Root);
    EXPECT_NE(group_with(twice, "scores").why.find("materialises 'kt'"), std::string::npos);
    // One query reads each key once: the copy would double B's traffic; dot products stay.
    const Graph one = attention_scores(1, "scores_1");
    EXPECT_FALSE(price_operand_copy(simplify(one), *one.find_node("scores"), x86.machine).pays());
    f = with_default_schedules(plan_fusion(one, {x86}), host);
    EXPECT_EQ(group_with(f, "scores").placement.at("kt"), Placement::Inline);
    EXPECT_EQ(group_with(f, "scores").schedule.value("template", ""), "gemm_dot");
    expect_matches(f, unfused_baseline(one), "1 query");
    // Without a cost model nothing is priced: inlined, as the rules place it.
    f = plan_fusion(many, {custom_rules("x86_uncosted", {{"cost_model", false}})});
    EXPECT_EQ(group_with(f, "scores").placement.at("kt"), Placement::Inline);
}

TEST(FusionRules, CostModelErrorsNameTheField) {
    auto error_of = [](const json &cost_model) {
        try {
            custom_rules("bad_cost", {{"cost_model", cost_model}});
        } catch (const Error &e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    json m = to_json(MachineModel{});
    EXPECT_NE(error_of(true).find("cost_model"), std::string::npos) << error_of(true);
    json bad = m;
    bad["flops_per_ns"] = -1;
    EXPECT_NE(error_of(bad).find("cost_model.flops_per_ns"), std::string::npos) << error_of(bad);
    bad = m;
    bad.erase("memory_bytes_per_ns");
    EXPECT_NE(error_of(bad).find("cost_model.memory_bytes_per_ns"), std::string::npos) << error_of(bad);
    bad = m;
    bad["l3"] = 1;
    EXPECT_NE(error_of(bad).find("cost_model.l3"), std::string::npos) << error_of(bad);
    bad = m;
    bad["shared_cache_bytes"] = 1024;
    EXPECT_NE(error_of(bad).find("cost_model.shared_cache_bytes"), std::string::npos) << error_of(bad);
    for (const json &lanes : {json(12), json(0), json(128), json(8.5), json("16")}) {
        bad = m;
        bad["vector_lanes"] = lanes;
        EXPECT_NE(error_of(bad).find("cost_model.vector_lanes"), std::string::npos) << error_of(bad);
    }
    bad = m;
    bad["vector_lanes"] = 8;
    EXPECT_EQ(error_of(bad), "no error");
    EXPECT_EQ(to_json(custom_rules("lanes", {{"cost_model", bad}}).machine)["vector_lanes"], 8);
    EXPECT_EQ(error_of(m), "no error");
    EXPECT_EQ(error_of(false), "no error");
    // The built-in x86 set prices; its JSON form round-trips.
    const RuleSet x86 = load_rules("x86");
    EXPECT_TRUE(x86.cost_model);
    EXPECT_TRUE(parse_rules(to_json(x86), "again").cost_model);
}

}  // namespace
}  // namespace hfuse
