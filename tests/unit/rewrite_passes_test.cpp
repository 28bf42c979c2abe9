// The rewrites run before fusion planning (fold_constants, remove_identities, fold_batchnorm,
// drop_padding_taps, fuse_layer_norm, fuse_gelu, simplify):
// each case checks the structure of the rewritten graph and that it computes the same model outputs
// as the original, both run through the unfused Halide executor.
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/model_io.h"
#include "hfuse/passes.h"
#include "hfuse/random.h"
#include "hfuse/reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <tuple>

namespace hfuse {
namespace {

using Strings = std::vector<std::string>;
using nlohmann::json;

// Small graphs built in code; build() prepares them as the passes expect.
class Builder {
public:
    Builder &input(const std::string &name, Shape shape) {
        g_.inputs.push_back({name, std::move(shape)});
        return *this;
    }
    Builder &weight(const std::string &name, Shape shape, double lo = -1, double hi = 1) {
        Constant k;
        k.f32 = uniform_values(num_elements(shape), lo, hi, seed_++);
        k.type = {DType::Float32, std::move(shape)};
        g_.weights[name] = std::move(k);
        return *this;
    }
    Builder &ints(const std::string &name, std::vector<int64_t> values) {
        Constant k;
        k.type = {DType::Int64, {static_cast<int64_t>(values.size())}};
        k.i64 = std::move(values);
        g_.weights[name] = std::move(k);
        return *this;
    }
    Builder &node(const std::string &name, const std::string &op, Strings inputs, json attrs = json::object(),
                  Strings outputs = {}) {
        Node n;
        n.name = name;
        n.op = op;
        n.inputs = std::move(inputs);
        n.attrs = std::move(attrs);
        n.outputs = std::move(outputs);
        g_.nodes.push_back(std::move(n));
        return *this;
    }
    // A BatchNormalization over `channels` with its parameters as weights "<name>.scale" etc.
    Builder &batchnorm(const std::string &name, const std::string &x, int64_t channels) {
        weight(name + ".scale", {channels}, 0.5, 1.5).weight(name + ".bias", {channels}, -0.5, 0.5);
        weight(name + ".mean", {channels}, -0.5, 0.5).weight(name + ".var", {channels}, 0.5, 1.5);
        // A non-default epsilon, so a fold that ignores the attribute shows.
        return node(name, "BatchNormalization", {x, name + ".scale", name + ".bias", name + ".mean", name + ".var"},
                    {{"epsilon", 1e-3}});
    }
    Graph build(Strings outputs) {
        g_.name = "rewrite_test";
        g_.outputs = std::move(outputs);
        return prepare(g_);
    }

private:
    Graph g_;
    uint64_t seed_ = 1;
};

const Node &node_named(const Graph &g, const std::string &name) {
    const Node *n = g.find_node(name);
    if (!n) throw std::runtime_error("no node '" + name + "' in the rewritten graph");
    return *n;
}

int count_op(const Graph &g, const std::string &op) {
    int count = 0;
    for (const Node &n : g.nodes) count += n.op == op;
    return count;
}

Strings node_names(const Graph &g) {
    Strings names;
    for (const Node &n : g.nodes) names.push_back(n.name);
    return names;
}

// Runs both graphs on the same seeded inputs through the unfused executor and compares every model
// output. 1e-5 of the output's scale: the rewritten graph runs the same Halide definitions with the same
// summation order, so it differs from the original only by rounding each folded weight to float32 once
// (2^-24 relative) and by where the per-channel scale and shift are applied: a few ulp of the
// accumulated terms. Measured: at most 1.4e-6 (conv3x3_bn_relu, 576-term dot products), about 2e-7 on
// the small graphs; a wrong fold (a channel mixed up, transB ignored, beta applied twice, the 1e-3
// epsilon dropped) is off by 1e-4 or more.
void expect_same_outputs(const Graph &before, const Graph &after) {
    ASSERT_EQ(after.outputs, before.outputs);
    ASSERT_EQ(after.inputs.size(), before.inputs.size());
    std::map<std::string, TensorBuffer> inputs;
    for (size_t i = 0; i < before.inputs.size(); i++) {
        const GraphInput &in = before.inputs[i];
        EXPECT_EQ(after.inputs[i].name, in.name);
        EXPECT_EQ(after.inputs[i].shape, in.shape);
        std::vector<float> data = uniform_values(num_elements(in.shape), -1, 1, 2000 + i);
        inputs[in.name] = tensor_from_data(in.shape, data.data());
    }
    Executor original(before, Executor::unfused_partition(before));
    Executor rewritten(after, Executor::unfused_partition(after));
    std::map<std::string, TensorBuffer> expected = original.run(inputs), actual = rewritten.run(inputs);
    for (const std::string &out : before.outputs) {
        const TensorBuffer &e = expected.at(out), &a = actual.at(out);
        ASSERT_EQ(shape_of(a), shape_of(e)) << out;
        reference::Comparison cmp = reference::compare(a.data(), e.data(), e.number_of_elements());
        EXPECT_LE(cmp.relative(), 1e-5) << out << ": max abs error " << cmp.max_abs_error << " at scale " << cmp.scale;
        EXPECT_GT(cmp.scale, 1e-3) << out << ": output is (nearly) all zero; the comparison would prove nothing";
    }
}

// BN(x)[c] = x * s[c] + (B[c] - mean[c] * s[c]), s = scale / sqrt(var + eps), from the graph's weights.
struct Affine {
    std::vector<double> mul, shift;
};
Affine batchnorm_affine(const Graph &g, const std::string &bn) {
    const Node &n = node_named(g, bn);
    const double eps = n.attrs.value("epsilon", 1e-5);
    const auto &scale = g.weights.at(n.inputs[1]).f32, &bias = g.weights.at(n.inputs[2]).f32,
               &mean = g.weights.at(n.inputs[3]).f32, &var = g.weights.at(n.inputs[4]).f32;
    Affine a;
    for (size_t c = 0; c < scale.size(); c++) {
        a.mul.push_back(scale[c] / std::sqrt(var[c] + eps));
        a.shift.push_back(bias[c] - mean[c] * a.mul.back());
    }
    return a;
}

// ---- fold_batchnorm -------------------------------------------------------------------------------

TEST(RewriteFoldBatchNorm, ConvWithoutBias) {
    Graph before = Builder()
                       .input("x", {1, 3, 9, 7})
                       .weight("w", {6, 3, 3, 3})
                       .node("conv", "Conv", {"x", "w"}, {{"kernel_shape", {3, 3}}, {"pads", {1, 0, 2, 1}}})
                       .batchnorm("bn", "conv", 6)
                       .node("relu", "Relu", {"bn"})
                       .build({"relu"});
    Graph after = fold_batchnorm(before);

    EXPECT_EQ(node_names(after), (Strings{"conv", "relu"}));
    const Node &conv = node_named(after, "conv");
    EXPECT_EQ(conv.inputs, (Strings{"x", "conv.w_folded", "conv.b_folded"}));
    EXPECT_EQ(conv.outputs, Strings{"bn"});  // the BN's value: its readers are untouched
    EXPECT_EQ(conv.absorbed, Strings{"bn"});
    EXPECT_EQ(node_named(after, "relu").inputs, Strings{"bn"});
    // The replaced parameters are read by nothing else, so they are gone.
    for (const char *w : {"w", "bn.scale", "bn.bias", "bn.mean", "bn.var"}) EXPECT_FALSE(after.is_weight(w)) << w;
    EXPECT_EQ(after.weights.size(), 2u);

    // W'[c, ...] = W[c, ...] * s[c]; b'[c] = shift[c].
    const Affine bn = batchnorm_affine(before, "bn");
    const std::vector<float> &w = before.weights.at("w").f32, &w2 = after.weights.at("conv.w_folded").f32;
    ASSERT_EQ(w2.size(), w.size());
    for (size_t k = 0; k < w.size(); k++) EXPECT_FLOAT_EQ(w2[k], w[k] * bn.mul[k / 27]) << k;
    EXPECT_EQ(after.weights.at("conv.b_folded").type.shape, Shape{6});
    for (int c = 0; c < 6; c++) EXPECT_FLOAT_EQ(after.weights.at("conv.b_folded").f32[c], bn.shift[c]) << c;

    expect_same_outputs(before, after);
}

TEST(RewriteFoldBatchNorm, ConvWithBiasSharingWeightsWithAnotherConv) {
    // conv2 reads the same W and bias: the fold must not change what conv2 sees.
    Graph before = Builder()
                       .input("x", {2, 4, 6, 5})
                       .weight("w", {5, 4, 3, 3})
                       .weight("b", {5})
                       .node("conv1", "Conv", {"x", "w", "b"}, {{"kernel_shape", {3, 3}}, {"strides", {2, 1}}})
                       .batchnorm("bn", "conv1", 5)
                       .node("conv2", "Conv", {"x", "w", "b"}, {{"kernel_shape", {3, 3}}})
                       .build({"bn", "conv2"});
    Graph after = fold_batchnorm(before);

    EXPECT_EQ(count_op(after, "BatchNormalization"), 0);
    EXPECT_EQ(node_named(after, "conv1").inputs, (Strings{"x", "conv1.w_folded", "conv1.b_folded"}));
    EXPECT_EQ(node_named(after, "conv1").outputs, Strings{"bn"});
    EXPECT_EQ(node_named(after, "conv2").inputs, (Strings{"x", "w", "b"}));
    EXPECT_EQ(after.weights.at("w").f32, before.weights.at("w").f32);
    EXPECT_EQ(after.weights.at("b").f32, before.weights.at("b").f32);
    EXPECT_FALSE(after.is_weight("bn.scale"));

    const Affine bn = batchnorm_affine(before, "bn");
    for (int c = 0; c < 5; c++) {
        EXPECT_FLOAT_EQ(after.weights.at("conv1.b_folded").f32[c],
                        before.weights.at("b").f32[c] * bn.mul[c] + bn.shift[c]);
    }
    expect_same_outputs(before, after);
}

TEST(RewriteFoldBatchNorm, GroupedDepthwiseAndOneDimensionalConv) {
    struct Case {
        Shape x, w;
        json attrs;
    };
    const std::vector<Case> cases = {
        {{1, 6, 9, 8}, {9, 2, 3, 3}, {{"kernel_shape", {3, 3}}, {"group", 3}, {"dilations", {2, 1}}}},
        {{1, 8, 7, 7}, {8, 1, 3, 3}, {{"kernel_shape", {3, 3}}, {"group", 8}, {"pads", {1, 1, 1, 1}}}},
        {{2, 4, 6, 6}, {8, 1, 3, 3}, {{"kernel_shape", {3, 3}}, {"group", 4}, {"strides", {2, 2}}}},  // multiplier 2
        {{1, 3, 11}, {4, 3, 3}, {{"kernel_shape", {3}}, {"pads", {1, 2}}}},
    };
    for (const Case &c : cases) {
        SCOPED_TRACE("x " + to_string(c.x) + ", w " + to_string(c.w) + ", " + c.attrs.dump());
        Graph before = Builder()
                           .input("x", c.x)
                           .weight("w", c.w)
                           .weight("b", {c.w[0]})
                           .node("conv", "Conv", {"x", "w", "b"}, c.attrs)
                           .batchnorm("bn", "conv", c.w[0])
                           .node("out", "Sigmoid", {"bn"})
                           .build({"out"});
        Graph after = fold_batchnorm(before);
        EXPECT_EQ(node_names(after), (Strings{"conv", "out"}));
        EXPECT_EQ(node_named(after, "conv").attrs, c.attrs);
        expect_same_outputs(before, after);
    }
}

TEST(RewriteFoldBatchNorm, ChainOfBatchNormsFoldsIntoOneConv) {
    Graph before = Builder()
                       .input("x", {1, 3, 6, 6})
                       .weight("w", {4, 3, 1, 1})
                       .node("conv", "Conv", {"x", "w"}, {{"kernel_shape", {1, 1}}})
                       .batchnorm("bn1", "conv", 4)
                       .batchnorm("bn2", "bn1", 4)
                       .build({"bn2"});
    Graph after = fold_batchnorm(before);
    EXPECT_EQ(node_names(after), Strings{"conv"});
    EXPECT_EQ(node_named(after, "conv").absorbed, (Strings{"bn1", "bn2"}));
    EXPECT_EQ(node_named(after, "conv").outputs, Strings{"bn2"});
    // The intermediate folded weights were dropped, so the final ones reuse the plain fresh names.
    EXPECT_EQ(node_named(after, "conv").inputs, (Strings{"x", "conv.w_folded", "conv.b_folded"}));
    EXPECT_EQ(after.weights.size(), 2u);
    expect_same_outputs(before, after);
}

TEST(RewriteFoldBatchNorm, Gemm) {
    constexpr int64_t M = 5, K = 7, N = 6;
    struct Case {
        int trans_a, trans_b;
        std::optional<Shape> c;  // C's shape; absent: no C
        double alpha, beta;
        Shape folded_c;  // the expected shape of C'
    };
    const std::vector<Case> cases = {
        {0, 0, std::nullopt, 1.0, 1.0, {N}}, {0, 1, std::nullopt, 0.5, 1.0, {N}},
        {0, 0, Shape{}, 1.5, 0.75, {N}},     {0, 1, Shape{N}, 1.0, 2.0, {N}},
        {1, 0, Shape{1}, 1.0, -0.5, {N}},    {1, 1, Shape{M, N}, 0.8, 1.3, {M, N}},
        {0, 0, Shape{1, N}, 1.0, 0.5, {N}},  {0, 1, Shape{M, 1}, 1.2, 1.5, {M, N}},
        {0, 1, Shape{1, 1}, 1.0, 1.0, {N}},  {0, 1, Shape{M, N}, 1.0, 0.0, {N}},  // beta = 0: C does not contribute
    };
    for (const Case &c : cases) {
        SCOPED_TRACE("transA " + std::to_string(c.trans_a) + ", transB " + std::to_string(c.trans_b) + ", C " +
                     (c.c ? "[" + to_string(*c.c) + "]" : "absent") + ", alpha " + std::to_string(c.alpha) + ", beta " +
                     std::to_string(c.beta));
        Builder b;
        b.input("a", c.trans_a ? Shape{K, M} : Shape{M, K}).weight("B", c.trans_b ? Shape{N, K} : Shape{K, N});
        Strings inputs = {"a", "B"};
        if (c.c) {
            b.weight("C", *c.c);
            inputs.push_back("C");
        }
        json attrs = {{"transA", c.trans_a}, {"transB", c.trans_b}, {"alpha", c.alpha}, {"beta", c.beta}};
        Graph before = b.node("gemm", "Gemm", inputs, attrs).batchnorm("bn", "gemm", N).build({"bn"});
        Graph after = fold_batchnorm(before);

        EXPECT_EQ(node_names(after), Strings{"gemm"});
        const Node &gemm = node_named(after, "gemm");
        EXPECT_EQ(gemm.inputs, (Strings{"a", "gemm.w_folded", "gemm.b_folded"}));
        EXPECT_EQ(gemm.attrs.at("beta").get<double>(), 1.0);
        EXPECT_EQ(gemm.attrs.at("alpha").get<double>(), c.alpha);
        EXPECT_EQ(gemm.attrs.at("transB").get<int>(), c.trans_b);
        EXPECT_EQ(gemm.absorbed, Strings{"bn"});
        EXPECT_EQ(after.weights.at("gemm.b_folded").type.shape, c.folded_c);
        expect_same_outputs(before, after);
    }
}

// Each graph has a BatchNormalization that must stay; fold_batchnorm leaves the graph as it was.
void expect_not_folded(const Graph &before) {
    Graph after = fold_batchnorm(before);
    EXPECT_EQ(node_names(after), node_names(before));
    EXPECT_EQ(count_op(after, "BatchNormalization"), 1);
    for (const Node &n : after.nodes) {
        EXPECT_EQ(n.inputs, node_named(before, n.name).inputs) << n.name;
        EXPECT_TRUE(n.absorbed.empty()) << n.name;
    }
    EXPECT_EQ(after.weights.size(), before.weights.size());
    expect_same_outputs(before, after);
}

Builder conv_for_bn() {
    Builder b;
    b.input("x", {1, 3, 5, 5}).weight("w", {4, 3, 3, 3});
    return b.node("conv", "Conv", {"x", "w"}, {{"kernel_shape", {3, 3}}});
}

TEST(RewriteFoldBatchNorm, NotFoldedWhenConvOutputHasAnotherReader) {
    expect_not_folded(conv_for_bn().batchnorm("bn", "conv", 4).node("relu", "Relu", {"conv"}).build({"bn", "relu"}));
}

TEST(RewriteFoldBatchNorm, NotFoldedWhenConvOutputIsAModelOutput) {
    expect_not_folded(conv_for_bn().batchnorm("bn", "conv", 4).build({"bn", "conv"}));
}

TEST(RewriteFoldBatchNorm, NotFoldedWhenConvWeightIsComputed) {
    Builder b;
    b.input("x", {1, 3, 5, 5}).weight("w_hwio", {3, 3, 3, 4});
    b.node("w", "Transpose", {"w_hwio"}, {{"perm", {3, 2, 0, 1}}});
    Graph before =
        b.node("conv", "Conv", {"x", "w"}, {{"kernel_shape", {3, 3}}}).batchnorm("bn", "conv", 4).build({"bn"});
    expect_not_folded(before);

    // simplify folds the Transpose first, and then the BatchNormalization.
    Graph simplified = simplify(before);
    EXPECT_EQ(node_names(simplified), Strings{"conv"});
    EXPECT_EQ(node_named(simplified, "conv").absorbed, Strings{"bn"});
    EXPECT_EQ(simplified.weights.size(), 2u);
    expect_same_outputs(before, simplified);
}

TEST(RewriteFoldBatchNorm, NotFoldedWhenBatchNormParameterIsComputed) {
    Builder b = conv_for_bn();
    b.input("scale", {4}).weight("bias", {4}).weight("mean", {4}).weight("var", {4}, 0.5, 1.5);
    expect_not_folded(b.node("bn", "BatchNormalization", {"conv", "scale", "bias", "mean", "var"}).build({"bn"}));
}

TEST(RewriteFoldBatchNorm, NotFoldedAfterOtherOps) {
    Builder b;
    b.input("x", {1, 4, 5, 5}).node("relu", "Relu", {"x"});
    expect_not_folded(b.batchnorm("bn", "relu", 4).build({"bn"}));

    Builder m;  // MatMul computes what a Gemm does, but only Conv and Gemm fold
    m.input("x", {3, 5}).weight("w", {5, 4}).node("mm", "MatMul", {"x", "w"});
    expect_not_folded(m.batchnorm("bn", "mm", 4).build({"bn"}));
}

// ---- remove_identities ------------------------------------------------------------------------------

TEST(RewriteRemoveIdentities, ChainIsAbsorbedByTheProducer) {
    Graph before = conv_for_bn()
                       .node("id1", "Identity", {"conv"})
                       .node("id2", "Identity", {"id1"})
                       .node("relu", "Relu", {"id2"})
                       .node("sig", "Sigmoid", {"id1"})
                       .build({"relu", "sig"});
    // As if an earlier rewrite had merged a node into id2: its absorbed list moves along with it.
    for (Node &n : before.nodes) {
        if (n.name == "id2") n.absorbed = {"earlier"};
    }
    Graph after = remove_identities(before);
    EXPECT_EQ(node_names(after), (Strings{"conv", "relu", "sig"}));
    EXPECT_EQ(node_named(after, "relu").inputs, Strings{"conv"});
    EXPECT_EQ(node_named(after, "sig").inputs, Strings{"conv"});
    EXPECT_EQ(node_named(after, "conv").absorbed, (Strings{"id1", "id2", "earlier"}));
    expect_same_outputs(before, after);
}

TEST(RewriteRemoveIdentities, IdentityOfModelInputOrWeightDisappears) {
    Graph before = Builder()
                       .input("x", {2, 3})
                       .weight("w", {2, 3})
                       .node("idx", "Identity", {"x"})
                       .node("idw", "Identity", {"w"})
                       .node("add", "Add", {"idx", "idw"})
                       .build({"add"});
    Graph after = remove_identities(before);
    EXPECT_EQ(node_names(after), Strings{"add"});
    EXPECT_EQ(node_named(after, "add").inputs, (Strings{"x", "w"}));
    EXPECT_TRUE(node_named(after, "add").absorbed.empty());
    expect_same_outputs(before, after);
}

TEST(RewriteRemoveIdentities, IdentityProducingAModelOutputRenamesTheProducer) {
    Graph before = Builder()
                       .input("x", {1, 4, 3, 3})
                       .node("relu", "Relu", {"x"})
                       .node("id1", "Identity", {"relu"})
                       .node("id2", "Identity", {"id1"}, json::object(), {"y"})
                       .node("sig", "Sigmoid", {"relu"})
                       .node("tanh", "Tanh", {"y"})
                       .build({"y", "sig", "tanh"});
    Graph after = remove_identities(before);
    EXPECT_EQ(count_op(after, "Identity"), 0);
    const Node &relu = node_named(after, "relu");
    EXPECT_EQ(relu.outputs, Strings{"y"});
    EXPECT_EQ(relu.absorbed, (Strings{"id1", "id2"}));
    EXPECT_EQ(node_named(after, "sig").inputs, Strings{"y"});
    EXPECT_EQ(node_named(after, "tanh").inputs, Strings{"y"});
    expect_same_outputs(before, after);
}

TEST(RewriteRemoveIdentities, IdentityKeptWhenItsOutputCannotBeRenamed) {
    // Model outputs copying a model input, a weight, or a value that is itself a model output.
    Graph before = Builder()
                       .input("x", {2, 5})
                       .weight("w", {2, 5})
                       .node("relu", "Relu", {"x"})
                       .node("copy_relu", "Identity", {"relu"})
                       .node("copy_x", "Identity", {"x"})
                       .node("copy_w", "Dropout", {"w"})
                       .build({"relu", "copy_relu", "copy_x", "copy_w"});
    Graph after = remove_identities(before);
    EXPECT_EQ(node_names(after), node_names(before));
    for (const Node &n : after.nodes) EXPECT_TRUE(n.absorbed.empty()) << n.name;
    expect_same_outputs(before, after);

    // fold_constants does not fold copy_w either: model outputs stay computed by nodes.
    EXPECT_EQ(node_names(fold_constants(before)), node_names(before));
}

TEST(RewriteRemoveIdentities, Dropout) {
    Graph before = conv_for_bn()
                       .weight("ratio", {}, 0.2, 0.4)
                       .ints("training_mode", {0})
                       .node("drop", "Dropout", {"conv", "ratio", "training_mode"})
                       .node("relu", "Relu", {"drop"})
                       .build({"relu"});
    Graph after = remove_identities(before);
    EXPECT_EQ(node_names(after), (Strings{"conv", "relu"}));
    EXPECT_EQ(node_named(after, "relu").inputs, Strings{"conv"});
    EXPECT_EQ(node_named(after, "conv").absorbed, Strings{"drop"});
    EXPECT_FALSE(after.is_weight("ratio"));
    EXPECT_FALSE(after.is_weight("training_mode"));
    expect_same_outputs(before, after);
}

TEST(RewriteRemoveIdentities, DropoutWithComputedRatioDropsTheRatioNodes) {
    // The node computing the (ignored) ratio would be left reading into nothing: it goes too.
    Graph before = conv_for_bn()
                       .input("r", {1})
                       .node("ratio", "Sigmoid", {"r"})
                       .node("drop", "Dropout", {"conv", "ratio"})
                       .node("relu", "Relu", {"drop"})
                       .build({"relu"});
    Graph after = remove_identities(before);
    EXPECT_EQ(node_names(after), (Strings{"conv", "relu"}));
    EXPECT_TRUE(after.is_input("r"));
    expect_same_outputs(before, after);
}

// ---- fold_constants ----------------------------------------------------------------------------------

TEST(RewriteFoldConstants, TransposeOfWeightFeedingConv) {
    Graph before = Builder()
                       .input("x", {1, 3, 6, 6})
                       .weight("w_hwio", {3, 3, 3, 5})
                       .weight("b", {5})
                       .node("w", "Transpose", {"w_hwio"}, {{"perm", {3, 2, 0, 1}}})
                       .node("conv", "Conv", {"x", "w", "b"}, {{"kernel_shape", {3, 3}}})
                       .build({"conv"});
    Graph after = fold_constants(before);
    EXPECT_EQ(node_names(after), Strings{"conv"});
    EXPECT_EQ(node_named(after, "conv").inputs, (Strings{"x", "w", "b"}));
    EXPECT_FALSE(after.is_weight("w_hwio"));
    const Constant &w = after.weights.at("w");
    EXPECT_EQ(w.type, (TensorType{DType::Float32, {5, 3, 3, 3}}));
    const std::vector<float> &src = before.weights.at("w_hwio").f32;
    for (int o = 0; o < 5; o++)
        for (int i = 0; i < 3; i++)
            for (int h = 0; h < 3; h++)
                for (int x = 0; x < 3; x++) {
                    ASSERT_EQ(w.f32[((o * 3 + i) * 3 + h) * 3 + x], src[((h * 3 + x) * 3 + i) * 5 + o]);
                }
    expect_same_outputs(before, after);
}

TEST(RewriteFoldConstants, ChainOfConstantNodes) {
    // Reshape (int64 shape) -> Transpose -> Sigmoid, all constant, feeding a MatMul.
    Graph before = Builder()
                       .input("x", {2, 3})
                       .weight("flat", {12})
                       .ints("shape", {4, 3})
                       .node("r", "Reshape", {"flat", "shape"})
                       .node("t", "Transpose", {"r"}, {{"perm", {1, 0}}})
                       .node("s", "Sigmoid", {"t"})
                       .node("mm", "MatMul", {"x", "s"})
                       .build({"mm"});
    Graph after = fold_constants(before);
    EXPECT_EQ(node_names(after), Strings{"mm"});
    EXPECT_EQ(after.weights.size(), 1u);  // flat, shape, r and t are read by nothing any more
    const Constant &s = after.weights.at("s");
    EXPECT_EQ(s.type.shape, (Shape{3, 4}));
    const std::vector<float> &flat = before.weights.at("flat").f32;
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 4; j++) {
            EXPECT_NEAR(s.f32[i * 4 + j], 1 / (1 + std::exp(-flat[j * 3 + i])), 1e-6) << i << "," << j;
        }
    }
    expect_same_outputs(before, after);
}

TEST(RewriteFoldConstants, MultiOutputNodeBecomesOneWeightPerOutput) {
    Graph before = Builder()
                       .input("x", {4, 3})
                       .weight("w", {4, 6})
                       .node("split", "Split", {"w"}, {{"axis", 1}}, {"w_a", "w_b"})
                       .node("add", "Add", {"x", "w_a"})
                       .node("mul", "Mul", {"add", "w_b"})
                       .build({"mul"});
    Graph after = fold_constants(before);
    EXPECT_EQ(node_names(after), (Strings{"add", "mul"}));
    ASSERT_TRUE(after.is_weight("w_a") && after.is_weight("w_b"));
    const std::vector<float> &w = before.weights.at("w").f32;
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 3; j++) {
            EXPECT_EQ(after.weights.at("w_a").f32[i * 3 + j], w[i * 6 + j]);
            EXPECT_EQ(after.weights.at("w_b").f32[i * 3 + j], w[i * 6 + 3 + j]);
        }
    }
    expect_same_outputs(before, after);
}

TEST(RewriteFoldConstants, NodeProducingAModelOutputIsNotFolded) {
    Graph before = Builder()
                       .input("x", {3, 2})
                       .weight("w", {2, 3})
                       .node("t", "Transpose", {"w"}, {{"perm", {1, 0}}})
                       .node("r", "Relu", {"w"})
                       .node("rt", "Transpose", {"r"}, {{"perm", {1, 0}}})
                       .node("add", "Add", {"x", "rt"})
                       .build({"t", "add"});
    Graph after = fold_constants(before);
    EXPECT_EQ(node_names(after), (Strings{"t", "add"}));
    EXPECT_TRUE(after.is_weight("w"));  // still read by t
    EXPECT_TRUE(after.is_weight("rt"));
    EXPECT_FALSE(after.is_weight("r"));
    expect_same_outputs(before, after);
}

// ---- simplify ------------------------------------------------------------------------------------------

TEST(RewriteRemoveDeadNodes, UnreadNodesAndTheirWeightsGo) {
    // dead_a feeds only dead_b, which nobody reads; its weight goes with it. A dead node's input that
    // something else reads (x, kept) stays.
    Graph before = Builder()
                       .input("x", {1, 2, 3, 3})
                       .weight("only_dead", {1, 2, 3, 3})
                       .node("kept", "Relu", {"x"})
                       .node("dead_a", "Add", {"x", "only_dead"})
                       .node("dead_b", "Sigmoid", {"dead_a"})
                       .build({"kept"});
    Graph after = remove_dead_nodes(before);
    EXPECT_EQ(node_names(after), (Strings{"kept"}));
    EXPECT_TRUE(after.weights.empty());
    expect_same_outputs(before, after);
    // simplify() records them as removed, so a plan may still name them.
    Graph simplified = simplify(before);
    EXPECT_NE(std::find(simplified.removed.begin(), simplified.removed.end(), "dead_b"), simplified.removed.end());
}

TEST(RewriteRemoveDeadNodes, DeadNodesRunAsWrittenToo) {
    // Unsimplified (as `hfuse run --unfused` runs a model), a dead node's group has nothing to hand
    // out: the executor skips it instead of compiling an empty pipeline.
    Graph g =
        Builder().input("x", {1, 2, 3, 3}).node("kept", "Relu", {"x"}).node("dead", "Sigmoid", {"x"}).build({"kept"});
    std::vector<float> data = uniform_values(18, -1, 1, 5);
    Executor ex(g, Executor::unfused_partition(g));
    EXPECT_EQ(ex.num_groups(), 1);
    auto out = ex.run({{"x", tensor_from_data({1, 2, 3, 3}, data.data())}});
    for (int i = 0; i < 18; i++) EXPECT_EQ(out.at("kept").data()[i], std::max(data[i], 0.0f)) << i;
}

// ---- fuse_layer_norm ----

// LayerNorm over `axes` of "x" as PyTorch writes it before opset 17, ending in "y"; `square` Pow or
// Mul, the affine part optional.
Builder layer_norm_pattern(Shape shape, json axes, const std::string &square, bool affine,
                           const std::string &mean_op = "ReduceMean") {
    Builder b;
    b.input("x", shape);
    b.weight("two", {}, 2, 2).weight("eps", {1}, 1e-3, 1e-3);
    const json mean_attrs = mean_op == "ReduceMean" ? json{{"axes", axes}} : json::object();
    b.node("mean", mean_op, {"x"}, mean_attrs).node("sub", "Sub", {"x", "mean"});
    if (square == "Pow") {
        b.node("square", "Pow", {"sub", "two"});
    } else {
        b.node("square", "Mul", {"sub", "sub"});
    }
    b.node("var", mean_op, {"square"}, mean_attrs).node("add_eps", "Add", {"var", "eps"});
    b.node("sqrt", "Sqrt", {"add_eps"})
        .node("div", "Div", {"sub", "sqrt"}, json::object(), affine ? Strings{} : Strings{"y"});
    if (affine) {
        const Shape normalized(shape.end() - static_cast<long>(axes.size()), shape.end());
        b.weight("gamma", normalized, 0.5, 1.5).weight("beta", normalized, -0.5, 0.5);
        b.node("scale", "Mul", {"gamma", "div"}).node("shift", "Add", {"scale", "beta"}, json::object(), {"y"});
    }
    return b;
}

TEST(RewriteFuseLayerNorm, PyTorchPatternBecomesOneNode) {
    const Graph before = layer_norm_pattern({2, 5, 24}, {-1}, "Pow", true).build({"y"});
    const Graph after = fuse_layer_norm(before);
    ASSERT_EQ(after.nodes.size(), 1u);
    const Node &ln = after.nodes[0];
    EXPECT_EQ(ln.op, "LayerNormalization");
    EXPECT_EQ(ln.inputs, (Strings{"x", "gamma", "beta"}));
    EXPECT_EQ(ln.attrs.value("axis", 0), 2);
    EXPECT_FLOAT_EQ(ln.attrs.value("epsilon", 0.0f), 1e-3f);
    EXPECT_FALSE(after.is_weight("two") || after.is_weight("eps"));
    expect_same_outputs(before, after);
}

TEST(RewriteFuseLayerNorm, SquareAsMulNoAffineSeveralAxesAndGlobalPool) {
    for (const auto &[shape, axes, square, affine, mean_op] :
         std::vector<std::tuple<Shape, json, std::string, bool, std::string>>{
             {{3, 7}, json{1}, "Mul", false, "ReduceMean"},
             {{2, 3, 4, 5}, json{-2, -1}, "Pow", true, "ReduceMean"},
             {{2, 3, 4, 5}, json{3, 2, 1}, "Mul", true, "ReduceMean"},
             {{2, 6, 9}, json::array(), "Pow", true, "GlobalAveragePool"}}) {
        SCOPED_TRACE(axes.dump() + " " + square + " " + mean_op);
        const json reduce_axes = mean_op == "GlobalAveragePool" ? json{2} : axes;
        const Graph before = layer_norm_pattern(shape, reduce_axes, square, affine, mean_op).build({"y"});
        const Graph after = fuse_layer_norm(before);
        ASSERT_EQ(count_op(after, "LayerNormalization"), 1);
        EXPECT_EQ(after.nodes.size(), 1u);
        expect_same_outputs(before, after);
    }
}

TEST(RewriteFuseLayerNorm, NotFusedWhereAnIntermediateIsReadElsewhereOrTheAxesAreNotTrailing) {
    {
        Builder b = layer_norm_pattern({2, 5, 8}, {-1}, "Pow", true);
        const Graph g = b.node("other", "Relu", {"sub"}).build({"y", "other"});
        EXPECT_EQ(count_op(fuse_layer_norm(g), "LayerNormalization"), 0);
    }
    {
        const Graph g = layer_norm_pattern({2, 5, 8}, {1}, "Pow", false).build({"y"});
        EXPECT_EQ(count_op(fuse_layer_norm(g), "LayerNormalization"), 0);
    }
    {
        // A square that is not one (Pow by 3).
        Builder b;
        b.input("x", {2, 8}).weight("three", {}, 3, 3).weight("eps", {}, 1e-5, 1e-5);
        b.node("mean", "ReduceMean", {"x"}, {{"axes", {-1}}}).node("sub", "Sub", {"x", "mean"});
        b.node("cube", "Pow", {"sub", "three"}).node("var", "ReduceMean", {"cube"}, {{"axes", {-1}}});
        b.node("add", "Add", {"var", "eps"}).node("sqrt", "Sqrt", {"add"});
        const Graph g = b.node("div", "Div", {"sub", "sqrt"}, json::object(), {"y"}).build({"y"});
        EXPECT_EQ(count_op(fuse_layer_norm(g), "LayerNormalization"), 0);
    }
}

TEST(RewriteFuseLayerNorm, ScaleOverOtherDimsStaysAMul) {
    // gamma [5, 1] scales rows, not the normalized dim: the LayerNorm takes no Scale, the Mul stays.
    Builder b = layer_norm_pattern({2, 5, 8}, {-1}, "Pow", false);
    const Graph before = b.weight("rows", {5, 1}).node("m", "Mul", {"y", "rows"}, json::object(), {"z"}).build({"z"});
    const Graph after = fuse_layer_norm(before);
    EXPECT_EQ(count_op(after, "LayerNormalization"), 1);
    EXPECT_EQ(count_op(after, "Mul"), 1);
    expect_same_outputs(before, after);
}

// ---- fuse_gelu ----

TEST(RewriteFuseGelu, EveryNestingBecomesOneNode) {
    for (int form = 0; form < 3; form++) {
        SCOPED_TRACE(form);
        Builder b;
        b.input("x", {2, 3, 17});
        b.weight("sqrt2", {}, std::sqrt(2.0), std::sqrt(2.0)).weight("inv_sqrt2", {1}, std::sqrt(0.5), std::sqrt(0.5));
        b.weight("one", {}, 1, 1).weight("half", {}, 0.5, 0.5);
        if (form == 1) {
            b.node("scaled", "Mul", {"inv_sqrt2", "x"});
        } else {
            b.node("scaled", "Div", {"x", "sqrt2"});
        }
        b.node("erf", "Erf", {"scaled"}).node("plus", "Add", {"one", "erf"});
        if (form == 2) {
            b.node("hx", "Mul", {"half", "x"}).node("y", "Mul", {"hx", "plus"});
        } else {
            b.node("xp", "Mul", {"x", "plus"}).node("y", "Mul", {"xp", "half"});
        }
        const Graph before = b.build({"y"});
        const Graph after = fuse_gelu(before);
        ASSERT_EQ(after.nodes.size(), 1u);
        EXPECT_EQ(after.nodes[0].op, "Gelu");
        EXPECT_EQ(after.nodes[0].inputs, Strings{"x"});
        EXPECT_FALSE(after.is_weight("one") || after.is_weight("half") ||
                     after.is_weight(form == 1 ? "inv_sqrt2" : "sqrt2"));
        expect_same_outputs(before, after);
    }
}

TEST(RewriteFuseGelu, NotFusedWithOtherConstantsOrSharedValues) {
    auto pattern = [](double half, bool share_erf) {
        Builder b;
        b.input("x", {4, 9}).weight("sqrt2", {}, std::sqrt(2.0), std::sqrt(2.0)).weight("one", {}, 1, 1);
        b.weight("half", {}, half, half);
        b.node("scaled", "Div", {"x", "sqrt2"}).node("erf", "Erf", {"scaled"}).node("plus", "Add", {"erf", "one"});
        b.node("xp", "Mul", {"x", "plus"}).node("y", "Mul", {"xp", "half"});
        if (share_erf) b.node("e2", "Relu", {"erf"});
        return b.build(share_erf ? Strings{"y", "e2"} : Strings{"y"});
    };
    EXPECT_EQ(count_op(fuse_gelu(pattern(0.6, false)), "Gelu"), 0);
    EXPECT_EQ(count_op(fuse_gelu(pattern(0.5, true)), "Gelu"), 0);
    EXPECT_EQ(count_op(fuse_gelu(pattern(0.5, false)), "Gelu"), 1);
}

// ---- drop_padding_taps ---------------------------------------------------------------------------

// A conv of `x` [1, c, h, w] by weight "w" (with a bias) and the given attributes, then a Relu.
Graph dilated_conv(Shape x, Shape w, json attrs) {
    Builder b;
    b.input("x", x).weight("w", w).weight("b", {w[0]});
    b.node("conv", "Conv", {"x", "w", "b"}, std::move(attrs)).node("relu", "Relu", {"conv"});
    return b.build({"relu"});
}

TEST(RewriteDropPaddingTaps, AtrousRatesPastTheMapBecomeOneByOne) {
    // DeepLab's pyramid on a 7x7 map: rate 12 and 24 reach past it from the centre tap.
    for (int64_t rate : {7, 12, 24}) {
        Graph before =
            dilated_conv({1, 6, 7, 7}, {5, 6, 3, 3},
                         {{"kernel_shape", {3, 3}}, {"pads", {rate, rate, rate, rate}}, {"dilations", {rate, rate}}});
        Graph after = drop_padding_taps(before);
        const Node &conv = node_named(after, "conv");
        EXPECT_EQ(after.type_of(conv.inputs[1]).shape, (Shape{5, 6, 1, 1})) << rate;
        EXPECT_EQ(conv.attrs["pads"], json({0, 0, 0, 0}));
        EXPECT_EQ(conv.attrs["dilations"], json({1, 1}));
        EXPECT_EQ(conv.attrs["kernel_shape"], json({1, 1}));
        EXPECT_FALSE(after.is_weight("w"));  // the 3x3 weight went with its last reader
        // The kept weight is the centre tap's.
        const std::vector<float> &w = before.weights.at("w").f32, &kept = after.weights.at(conv.inputs[1]).f32;
        for (int64_t i = 0; i < 5 * 6; i++) ASSERT_EQ(kept[i], w[i * 9 + 4]);
        expect_same_outputs(before, after);
    }
}

TEST(RewriteDropPaddingTaps, OneAxisOneSideStridesAndGroups) {
    // Width: taps 1 and 2 read past the end only (pads 0 and 10); height: a 3x3 with pad 1 keeps all.
    Graph before =
        dilated_conv({1, 4, 6, 4}, {4, 2, 3, 3}, {{"pads", {1, 0, 1, 10}}, {"dilations", {1, 5}}, {"group", 2}});
    Graph after = drop_padding_taps(before);
    const Node &conv = node_named(after, "conv");
    EXPECT_EQ(after.type_of(conv.inputs[1]).shape, (Shape{4, 2, 3, 1}));
    EXPECT_EQ(conv.attrs["pads"], json({1, 0, 1, 0}));
    expect_same_outputs(before, after);
    // Stride 2: rate 6 on 5 rows, outputs at 0, 2, 4: only the centre tap reads inside.
    before =
        dilated_conv({1, 3, 5, 5}, {4, 3, 3, 3}, {{"pads", {6, 6, 6, 6}}, {"dilations", {6, 6}}, {"strides", {2, 2}}});
    after = drop_padding_taps(before);
    EXPECT_EQ(after.type_of(node_named(after, "conv").inputs[1]).shape, (Shape{4, 3, 1, 1}));
    expect_same_outputs(before, after);
}

TEST(RewriteDropPaddingTaps, BandsOfDifferentLiveTapsBecomeConvsOverSlices) {
    // Rate 12 on 14x14: rows 0-1 read kernel rows 1-2, rows 2-11 row 1, rows 12-13 rows 0-1; the same
    // for columns. 18 x 18 tap-positions of 42 x 42: nine convs, joined by Concats.
    Graph before = dilated_conv({1, 96, 14, 14}, {64, 96, 3, 3}, {{"pads", {12, 12, 12, 12}}, {"dilations", {12, 12}}});
    Graph after = drop_padding_taps(before);
    EXPECT_EQ(count_op(after, "Conv"), 9);
    EXPECT_EQ(count_op(after, "Concat"), 4);                 // three rows, then the rows
    const Node &corner = node_named(after, "conv/band0_0");  // outputs [0, 2) x [0, 2): taps 1-2 x 1-2
    EXPECT_EQ(after.type_of(corner.inputs[1]).shape, (Shape{64, 96, 2, 2}));
    EXPECT_EQ(after.type_of(corner.outputs[0]).shape, (Shape{1, 64, 2, 2}));
    const Node &centre = node_named(after, "conv/band1_1");  // [2, 12) x [2, 12): the centre tap alone
    EXPECT_EQ(after.type_of(centre.inputs[1]).shape, (Shape{64, 96, 1, 1}));
    EXPECT_EQ(centre.attrs["pads"], json({0, 0, 0, 0}));
    expect_same_outputs(before, after);
    // Bands along the rows only (the columns' pad-1 bands would save too little to split them).
    before = dilated_conv({1, 96, 14, 14}, {64, 96, 3, 3}, {{"pads", {12, 1, 12, 1}}, {"dilations", {12, 1}}});
    after = drop_padding_taps(before);
    EXPECT_EQ(count_op(after, "Conv"), 3);
    EXPECT_EQ(count_op(after, "Slice"), 1);  // the middle band reads rows 2-11 alone
    expect_same_outputs(before, after);
    // Too few channels for the pieces to pay: one conv of the live taps (all of them here).
    before = dilated_conv({1, 4, 14, 14}, {4, 4, 3, 3}, {{"pads", {12, 12, 12, 12}}, {"dilations", {12, 12}}});
    EXPECT_EQ(count_op(drop_padding_taps(before), "Conv"), 1);
}

TEST(RewriteDropPaddingTaps, KeptWhereEveryTapReadsTheInputOrTheWeightIsComputed) {
    // Rate 4 on 7x7: the outer taps read the input for the outer outputs.
    Graph before = dilated_conv({1, 2, 7, 7}, {3, 2, 3, 3}, {{"pads", {4, 4, 4, 4}}, {"dilations", {4, 4}}});
    Graph after = drop_padding_taps(before);
    EXPECT_EQ(node_named(after, "conv").inputs[1], "w");
    EXPECT_EQ(after.type_of("w").shape, (Shape{3, 2, 3, 3}));
    // A weight computed by a node is left to fold_constants first.
    Builder b;
    b.input("x", {1, 2, 5, 5}).weight("w_t", {2, 3, 3, 3});
    b.node("w", "Transpose", {"w_t"}, {{"perm", {1, 0, 2, 3}}});
    b.node("conv", "Conv", {"x", "w"}, {{"pads", {8, 8, 8, 8}}, {"dilations", {8, 8}}});
    Graph computed = b.build({"conv"});
    EXPECT_EQ(node_named(drop_padding_taps(computed), "conv").inputs[1], "w");
}

TEST(RewriteSimplify, AllRewritesTogether) {
    // A computed conv weight, an Identity between the Conv and the BN, a Dropout after it.
    Builder b;
    b.input("x", {1, 3, 8, 8}).weight("w_hwio", {3, 3, 3, 6});
    b.node("w", "Transpose", {"w_hwio"}, {{"perm", {3, 2, 0, 1}}});
    b.node("conv", "Conv", {"x", "w"}, {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}});
    b.node("id", "Identity", {"conv"}).batchnorm("bn", "id", 6).node("drop", "Dropout", {"bn"});
    Graph before = b.node("relu", "Relu", {"drop"}).build({"relu"});
    Graph after = simplify(before);
    EXPECT_EQ(node_names(after), (Strings{"conv", "relu"}));
    EXPECT_EQ(node_named(after, "conv").absorbed, (Strings{"id", "bn", "drop"}));
    EXPECT_EQ(node_named(after, "relu").inputs, Strings{"bn"});
    EXPECT_EQ(after.weights.size(), 2u);
    expect_same_outputs(before, after);
}

class RewriteBundledModel : public testing::TestWithParam<std::string> {};

TEST_P(RewriteBundledModel, SimplifyKeepsOutputsAndNamesEverySourceNode) {
    Graph before = load_model(std::string(HFUSE_SOURCE_DIR) + "/models/" + GetParam() + ".json");
    Graph after = simplify(before);
    // Every node of the model is still a node or absorbed by one (no bundled model has constant nodes).
    std::set<std::string> named;
    for (const Node &n : after.nodes) {
        named.insert(n.name);
        named.insert(n.absorbed.begin(), n.absorbed.end());
    }
    for (const Node &n : before.nodes) EXPECT_TRUE(named.count(n.name)) << n.name;
    const std::set<std::string> with_bn = {"conv_bn_relu", "dwconv_bn_relu", "conv3x3_bn_relu", "resnet_block"};
    if (with_bn.count(GetParam())) EXPECT_EQ(count_op(after, "BatchNormalization"), 0);
    if (GetParam() == "resnet_block") {
        EXPECT_EQ(node_names(after), (Strings{"conv1", "relu1", "conv2", "add", "relu2"}));
        EXPECT_EQ(node_named(after, "conv2").absorbed, Strings{"bn2"});
    }
    expect_same_outputs(before, after);
}

INSTANTIATE_TEST_SUITE_P(Rewrite, RewriteBundledModel,
                         testing::Values("conv_bn_relu", "dwconv_bn_relu", "conv3x3_bn_relu", "conv_bias_relu_maxpool",
                                         "resnet_block", "rnn_cell", "lstm_cell", "mlp_softmax"));

}  // namespace
}  // namespace hfuse
