// Tests of the reference evaluator itself: against PyTorch (tests/data/torch_reference.json, made by
// tools/make_reference_data.py), on hand-computed cases PyTorch cannot express, and its compare().
#include "hfuse/reference.h"
#include "hfuse/error.h"
#include "hfuse/random.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>

namespace hfuse::reference {
namespace {

using nlohmann::json;

// Runs a single node whose inputs are either float tensors (activations), float weights or int64 weights.
struct NodeCase {
    Node node;
    std::vector<RefTensor> tensors;
    std::vector<Constant> constants;
    std::vector<bool> is_weight;

    explicit NodeCase(std::string op, json attrs = json::object()) {
        node.name = "n";
        node.op = std::move(op);
        node.attrs = std::move(attrs);
        node.outputs = {"y"};
    }
    NodeCase &input(Shape shape, std::vector<float> data, bool weight = false) {
        node.inputs.push_back("in" + std::to_string(node.inputs.size()));
        constants.push_back({{DType::Float32, shape}, data, {}});
        tensors.push_back({std::move(shape), std::move(data)});
        is_weight.push_back(weight);
        return *this;
    }
    NodeCase &ints(std::vector<int64_t> values) {
        node.inputs.push_back("in" + std::to_string(node.inputs.size()));
        constants.push_back({{DType::Int64, {static_cast<int64_t>(values.size())}}, {}, values});
        tensors.push_back({});
        is_weight.push_back(true);
        return *this;
    }
    NodeCase &missing() {
        node.inputs.push_back("");
        constants.push_back({});
        tensors.push_back({});
        is_weight.push_back(false);
        return *this;
    }
    // int64 weights are passed only as constants: eval_node must make its own view of them.
    std::vector<RefTensor> eval(const std::vector<TensorType> &output_types = {}) const {
        std::vector<const RefTensor *> inputs;
        std::vector<const Constant *> consts;
        for (size_t i = 0; i < node.inputs.size(); i++) {
            const bool present = !node.inputs[i].empty(), i64 = constants[i].type.dtype == DType::Int64;
            inputs.push_back(present && !i64 ? &tensors[i] : nullptr);
            consts.push_back(present && is_weight[i] ? &constants[i] : nullptr);
        }
        return eval_node(node, inputs, consts, output_types);
    }
};

// ---- against PyTorch ----

// Why 1e-5: the expected values are torch's float64 results rounded to float32, and the reference also
// computes in double and rounds once, so a correct reference is within ~1 float32 ulp (1.2e-7 relative)
// of them; the JSON text keeps 9 significant digits, which identifies a float32 exactly. 1e-5 leaves
// ~100x room for libm differences in exp/tanh, while any semantic mistake (a wrong pad, divisor,
// index or clamp) moves some output by a sizeable fraction of the scale.
constexpr double kTorchTolerance = 1e-5;

TEST(ReferenceTorch, MatchesPyTorch) {
    const std::string path = HFUSE_SOURCE_DIR "/tests/data/torch_reference.json";
    std::ifstream file(path);
    ASSERT_TRUE(file) << "cannot open " << path << " (make it with tools/make_reference_data.py)";
    const json cases = json::parse(file);
    ASSERT_GE(cases.size(), 100u);

    double worst = 0;
    std::string worst_case;
    std::set<std::string> ops;
    for (size_t ci = 0; ci < cases.size(); ci++) {
        const json &c = cases[ci];
        const std::string label =
            "case " + std::to_string(ci) + ": " + c.at("op").get<std::string>() + " " + c.at("attrs").dump();
        SCOPED_TRACE(label);
        NodeCase nc(c.at("op").get<std::string>(), c.at("attrs"));
        ops.insert(nc.node.op);
        for (const json &in : c.at("inputs")) {
            if (in.is_null()) {
                nc.missing();
            } else if (in.at("dtype") == "int64") {
                nc.ints(in.at("data").get<std::vector<int64_t>>());
            } else {
                nc.input(in.at("shape").get<Shape>(), in.at("data").get<std::vector<float>>(),
                         in.at("is_weight").get<bool>());
            }
        }
        std::vector<TensorType> types;
        nc.node.outputs.clear();
        for (const json &out : c.at("outputs")) {
            nc.node.outputs.push_back("out" + std::to_string(types.size()));
            types.push_back({DType::Float32, out.at("shape").get<Shape>()});
        }
        std::vector<RefTensor> got;
        try {
            got = nc.eval(types);  // also checks each output shape against the torch shape
        } catch (const Error &e) {
            ADD_FAILURE() << e.what();
            continue;
        }
        ASSERT_EQ(got.size(), types.size());
        for (size_t j = 0; j < got.size(); j++) {
            const std::vector<float> expected = c.at("outputs")[j].at("data").get<std::vector<float>>();
            ASSERT_EQ(got[j].data.size(), expected.size());
            const Comparison cmp = compare(got[j].data.data(), expected.data(), expected.size());
            EXPECT_LE(cmp.relative(), kTorchTolerance)
                << "output " << j << ": max abs error " << cmp.max_abs_error << " at scale " << cmp.scale;
            if (cmp.relative() > worst) {
                worst = cmp.relative();
                worst_case = label;
            }
        }
    }
    std::cout << "[ reference ] " << cases.size() << " PyTorch cases, worst relative error " << worst << " ("
              << worst_case << ")\n";

    // The data must keep covering every op the reference implements.
    for (const char *op : {"Conv",          "BatchNormalization",
                           "Relu",          "LeakyRelu",
                           "Clip",          "Sigmoid",
                           "Tanh",          "HardSigmoid",
                           "HardSwish",     "Add",
                           "Sub",           "Mul",
                           "Div",           "MaxPool",
                           "AveragePool",   "GlobalAveragePool",
                           "GlobalMaxPool", "Gemm",
                           "MatMul",        "Softmax",
                           "Flatten",       "Reshape",
                           "Transpose",     "Concat",
                           "Split",         "Slice",
                           "Identity",      "Dropout",
                           "Pad",           "Erf",
                           "Sqrt",          "Reciprocal",
                           "Exp",           "Log",
                           "Neg",           "Abs",
                           "Pow",           "Max",
                           "Min",           "Sum",
                           "Mean"}) {
        EXPECT_TRUE(ops.count(op)) << op << " has no PyTorch case";
    }
}

// ---- hand-computed cases: ONNX rules that PyTorch does not expose directly ----

std::vector<float> iota(int n, float start = 1) {
    std::vector<float> v(n);
    for (int i = 0; i < n; i++) v[i] = start + i;
    return v;
}

TEST(ReferenceOps, CeilModeDropsWindowStartingInEndPadding) {
    // in 4, pads (0, 2), k 2, s 2: ceil gives 3 windows, but the third would start at 4 >= in + pad_begin.
    // (torch on an explicitly padded input of 6 would keep it: the rule uses the begin pad only.)
    json attrs = {{"kernel_shape", {2}}, {"strides", {2}}, {"pads", {0, 2}}, {"ceil_mode", 1}};
    std::vector<RefTensor> y = NodeCase("MaxPool", attrs).input({1, 1, 4}, iota(4)).eval();
    EXPECT_EQ(y[0].shape, (Shape{1, 1, 2}));
    EXPECT_EQ(y[0].data, (std::vector<float>{2, 4}));
}

TEST(ReferenceOps, AveragePoolDivisorIgnoresCeilOnlyCells) {
    // in 5, k 2, s 2, pads (0, 0), ceil: windows [0,1], [2,3], [4,5]; cell 5 is outside the padded range.
    for (int include_pad : {0, 1}) {
        json attrs = {{"kernel_shape", {2}}, {"strides", {2}}, {"ceil_mode", 1}, {"count_include_pad", include_pad}};
        std::vector<RefTensor> y = NodeCase("AveragePool", attrs).input({1, 1, 5}, iota(5)).eval();
        EXPECT_EQ(y[0].data, (std::vector<float>{1.5f, 3.5f, 5.0f})) << "count_include_pad " << include_pad;
    }
    // With an end pad of 1, cell 5 is padding: counted only with count_include_pad.
    for (int include_pad : {0, 1}) {
        json attrs = {{"kernel_shape", {2}},
                      {"strides", {2}},
                      {"pads", {0, 1}},
                      {"ceil_mode", 1},
                      {"count_include_pad", include_pad}};
        std::vector<RefTensor> y = NodeCase("AveragePool", attrs).input({1, 1, 5}, iota(5)).eval();
        EXPECT_EQ(y[0].data, (std::vector<float>{1.5f, 3.5f, include_pad ? 2.5f : 5.0f}));
    }
}

TEST(ReferenceOps, MaxPoolPaddingNeverWins) {
    json attrs = {{"kernel_shape", {2, 2}}, {"pads", {1, 1, 1, 1}}, {"strides", {2, 2}}};
    std::vector<RefTensor> y = NodeCase("MaxPool", attrs).input({1, 1, 2, 2}, {-4, -3, -2, -1}).eval();
    EXPECT_EQ(y[0].data, (std::vector<float>{-4, -3, -2, -1}));
}

TEST(ReferenceOps, ConvSameLowerPutsExtraPadFirst) {
    // 1-D, k 2, stride 1, input 3: total pad 1, before the data for SAME_LOWER, after it for SAME_UPPER.
    for (std::string mode : {"SAME_LOWER", "SAME_UPPER"}) {
        json attrs = {{"kernel_shape", {2}}, {"auto_pad", mode}};
        std::vector<RefTensor> y =
            NodeCase("Conv", attrs).input({1, 1, 3}, {1, 2, 3}).input({1, 1, 2}, {1, 10}, true).eval();
        EXPECT_EQ(y[0].data, mode == "SAME_LOWER" ? (std::vector<float>{10, 21, 32}) : (std::vector<float>{21, 32, 3}));
    }
}

TEST(ReferenceOps, ReshapeAllowZero) {
    // allowzero=0: a 0 copies the input dim; the data is unchanged either way.
    std::vector<RefTensor> y = NodeCase("Reshape").input({2, 3, 4}, iota(24)).ints({0, 4, -1}).eval();
    EXPECT_EQ(y[0].shape, (Shape{2, 4, 3}));
    EXPECT_EQ(y[0].data, iota(24));
}

TEST(ReferenceOps, PadReflectBeyondOneDimension) {
    // reflect repeats with period 2 * (dim - 1): [1 2 3] padded by 4 on the left is 1 2 3 2 | 1 2 3.
    std::vector<RefTensor> y = NodeCase("Pad", {{"mode", "reflect"}}).input({3}, {1, 2, 3}).ints({4, 0}).eval();
    EXPECT_EQ(y[0].data, (std::vector<float>{1, 2, 3, 2, 1, 2, 3}));
}

TEST(ReferenceOps, Errors) {
    EXPECT_THROW(NodeCase("NoSuchOp").input({1}, {1}).eval(), Error);
    try {
        NodeCase("NoSuchOp").input({1}, {1}).eval();
    } catch (const Error &e) {
        EXPECT_EQ(e.node(), "n");
    }
    // A shape inference result that disagrees with the reference is reported, not silently used.
    EXPECT_THROW(NodeCase("Relu").input({2}, {1, 2}).eval({{DType::Float32, {3}}}), Error);
    EXPECT_THROW(NodeCase("Add").input({2}, {1, 2}).input({3}, {1, 2, 3}).eval(), Error);
    EXPECT_THROW(NodeCase("Reshape").input({2}, {1, 2}).ints({3}).eval(), Error);
    EXPECT_THROW(NodeCase("Slice").input({2}, {1, 2}).ints({0}).ints({1}).missing().ints({0}).eval(), Error);
}

// ---- compare() ----

TEST(ReferenceCompare, ErrorAndScale) {
    const float expected[] = {1, -4, 2};
    const float actual[] = {1.5f, -4, 2};
    Comparison c = compare(actual, expected, 3);
    EXPECT_DOUBLE_EQ(c.max_abs_error, 0.5);
    EXPECT_DOUBLE_EQ(c.scale, 4);
    EXPECT_DOUBLE_EQ(c.relative(), 0.125);

    const float zeros[] = {0, 0};
    const float tiny[] = {1e-7f, 0};
    c = compare(tiny, zeros, 2);
    EXPECT_DOUBLE_EQ(c.scale, 1e-6);  // the floor keeps all-zero outputs comparable
    EXPECT_NEAR(c.relative(), 0.1, 1e-6);
}

TEST(ReferenceCompare, NonFiniteActualFails) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    const float expected[] = {1, 2, 3};
    for (int at = 0; at < 3; at++) {
        for (float bad : {nan, inf, -inf}) {
            float actual[] = {1, 2, 3};
            actual[at] = bad;
            const Comparison c = compare(actual, expected, 3);
            EXPECT_TRUE(std::isinf(c.relative())) << "value " << bad << " at " << at;
            EXPECT_FALSE(c.relative() <= 1e-4);  // as tolerance checks are written
        }
    }
    // Non-finite expected values must be matched exactly; they do not affect the scale.
    const float expected_inf[] = {-inf, 2};
    const float same[] = {-inf, 2};
    const float finite[] = {-1e30f, 2};
    EXPECT_EQ(compare(same, expected_inf, 2).relative(), 0);
    EXPECT_DOUBLE_EQ(compare(same, expected_inf, 2).scale, 2);
    EXPECT_TRUE(std::isinf(compare(finite, expected_inf, 2).relative()));
}

// ---- run() ----

// x -> Conv(2x2, bias) -> Relu -> Split(axis 3) -> Mul; both the Relu output and the product are outputs.
Graph tiny_graph() {
    Graph g;
    g.name = "tiny";
    g.source = "<tiny>";
    g.inputs = {{"x", {1, 1, 3, 3}}};
    g.weights["w"] = {{DType::Float32, {1, 1, 2, 2}}, {1, 2, 3, 4}, {}};
    g.weights["b"] = {{DType::Float32, {1}}, {0.5f}, {}};
    auto node = [](std::string name, std::string op, std::vector<std::string> in, std::vector<std::string> out,
                   json attrs) {
        Node n;
        n.name = std::move(name);
        n.op = std::move(op);
        n.inputs = std::move(in);
        n.outputs = std::move(out);
        n.attrs = std::move(attrs);
        return n;
    };
    g.nodes = {node("conv", "Conv", {"x", "w", "b"}, {"conv"}, {{"kernel_shape", {2, 2}}}),
               node("relu", "Relu", {"conv"}, {"relu"}, json::object()),
               node("split", "Split", {"relu"}, {"s0", "s1"}, {{"axis", 3}}),
               node("mul", "Mul", {"s0", "s1"}, {"mul"}, json::object())};
    g.outputs = {"mul", "relu"};
    // What infer_shapes would fill in; written out so this test depends on the reference alone.
    g.types = {{"x", {DType::Float32, {1, 1, 3, 3}}},
               {"w", {DType::Float32, {1, 1, 2, 2}}},
               {"b", {DType::Float32, {1}}},
               {"conv", {DType::Float32, {1, 1, 2, 2}}},
               {"relu", {DType::Float32, {1, 1, 2, 2}}},
               {"s0", {DType::Float32, {1, 1, 2, 1}}},
               {"s1", {DType::Float32, {1, 1, 2, 1}}},
               {"mul", {DType::Float32, {1, 1, 2, 1}}}};
    return g;
}

TEST(ReferenceRun, TinyGraph) {
    // x[i][j] = 3i + j - 4, so conv = 10 x + 2*1 + 3*3 + 4*4 + 0.5 = 10 x + 27.5: {-12.5, -2.5, 17.5, 27.5}.
    const Graph g = tiny_graph();
    std::map<std::string, RefTensor> out = run(g, {{"x", {{1, 1, 3, 3}, iota(9, -4)}}});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out.at("relu").shape, (Shape{1, 1, 2, 2}));
    EXPECT_EQ(out.at("relu").data, (std::vector<float>{0, 0, 17.5f, 27.5f}));
    EXPECT_EQ(out.at("mul").shape, (Shape{1, 1, 2, 1}));
    EXPECT_EQ(out.at("mul").data, (std::vector<float>{0, 17.5f * 27.5f}));
}

TEST(ReferenceRun, BadInputsAreErrors) {
    const Graph g = tiny_graph();
    EXPECT_THROW(run(g, {}), Error);
    EXPECT_THROW(run(g, {{"x", {{1, 1, 3, 2}, iota(6)}}}), Error);
    Graph unknown = g;
    unknown.nodes[1].op = "Unknown";
    try {
        run(unknown, {{"x", {{1, 1, 3, 3}, iota(9)}}});
        ADD_FAILURE() << "expected an Error";
    } catch (const Error &e) {
        EXPECT_EQ(e.node(), "relu");
        EXPECT_EQ(e.file(), "<tiny>");
    }
}

// ---- the Python twin of hfuse::uniform_values ----

TEST(ReferenceWeights, MatchesPythonGenerator) {
    // Printed by tools/hfuse_weights.py:
    //   python3 tools/hfuse_weights.py 4 -1 1 42
    //   python3 tools/hfuse_weights.py 3 0.5 2 12345
    //   python3 tools/hfuse_weights.py 2 -3 7 18446744073709551615
    EXPECT_EQ(uniform_values(4, -1, 1, 42), (std::vector<float>{0.48312973976135254f, -0.680179238319397f,
                                                                -0.44279778003692627f, -0.3116186857223511f}));
    EXPECT_EQ(uniform_values(3, 0.5, 2, 12345),
              (std::vector<float>{0.699619472026825f, 0.8072248697280884f, 0.6793137788772583f}));
    EXPECT_EQ(uniform_values(2, -3, 7, 18446744073709551615ull),
              (std::vector<float>{5.939428806304932f, 6.125971794128418f}));
}

}  // namespace
}  // namespace hfuse::reference
