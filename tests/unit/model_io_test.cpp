// Model loading, the weight generator and every bad-input error of the model format.
#include "hfuse/model_io.h"
#include "hfuse/error.h"
#include "hfuse/random.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace hfuse {
namespace {

// Writes `text` as a model file in a fresh temp dir; returns its path.
std::string write_model(const std::string &name, const std::string &text) {
    std::string path = testing::TempDir() + "/" + name + ".json";
    std::ofstream(path) << text;
    return path;
}

// A valid small model with placeholders the tests replace.
const char *kGood = R"({"format": "hfuse-model", "version": 1, "name": "small",
  "inputs": [{"name": "x", "shape": [1, 3, 8, 8]}],
  "weights": {"w": {"shape": [4, 3, 3, 3], "uniform": [-0.5, 0.5], "seed": 3},
              "b": {"shape": [4], "values": [0.1, 0.2, 0.3, 0.4]}},
  "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w", "b"], "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}},
            {"name": "relu", "op": "Relu", "inputs": ["conv"]}],
  "outputs": ["relu"]})";

std::string replace(std::string s, const std::string &from, const std::string &to) {
    auto pos = s.find(from);
    EXPECT_NE(pos, std::string::npos) << "test bug: '" << from << "' not in model";
    return pos == std::string::npos ? s : s.replace(pos, from.size(), to);
}

// Loads `text` and expects an Error whose message contains each of `needles`.
void expect_error(const std::string &name, const std::string &text, std::vector<std::string> needles) {
    std::string path = write_model(name, text);
    try {
        load_model(path);
        ADD_FAILURE() << name << ": loaded without error";
    } catch (const Error &e) {
        std::string msg = e.what();
        EXPECT_NE(msg.find(path), std::string::npos) << "message does not name the file: " << msg;
        for (const auto &n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "missing '" << n << "' in: " << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << "message is not one line: " << msg;
    }
}

TEST(ModelIo, LoadsAndInfersShapes) {
    Graph g = load_model(write_model("good", kGood));
    EXPECT_EQ(g.name, "small");
    ASSERT_EQ(g.nodes.size(), 2u);
    EXPECT_EQ(g.type_of("relu").shape, (Shape{1, 4, 8, 8}));
    EXPECT_EQ(g.weights.at("b").f32, (std::vector<float>{0.1f, 0.2f, 0.3f, 0.4f}));
    EXPECT_EQ(g.weights.at("w").f32, uniform_values(108, -0.5, 0.5, 3));
}

TEST(ModelIo, SortsNodesTopologically) {
    // Consumers listed before their producers.
    const char *text = R"({"format": "hfuse-model", "version": 1,
      "inputs": [{"name": "x", "shape": [2, 5]}],
      "nodes": [{"name": "c", "op": "Add", "inputs": ["a", "b"]},
                {"name": "b", "op": "Sigmoid", "inputs": ["a"]},
                {"name": "a", "op": "Relu", "inputs": ["x"]}],
      "outputs": ["c"]})";
    Graph g = load_model(write_model("unsorted", text));
    ASSERT_EQ(g.nodes.size(), 3u);
    EXPECT_EQ(g.nodes[0].name, "a");
    EXPECT_EQ(g.nodes[1].name, "b");
    EXPECT_EQ(g.nodes[2].name, "c");
}

TEST(ModelIo, WeightFromFile) {
    std::vector<float> w = uniform_values(108, -1, 1, 9);
    std::string dir = testing::TempDir();
    write_f32_file(dir + "/small.w.f32", w.data(), w.size());
    std::string text = replace(kGood, R"("uniform": [-0.5, 0.5], "seed": 3)", R"("file": "small.w.f32")");
    Graph g = load_model(write_model("fromfile", text));
    EXPECT_EQ(g.weights.at("w").f32, w);
}

TEST(RandomGenerator, MatchesDocumentedAlgorithm) {
    // Range and determinism; the exact values are pinned against the Python port in reference_test.
    auto a = uniform_values(1000, -2, 3, 42), b = uniform_values(1000, -2, 3, 42);
    EXPECT_EQ(a, b);
    for (float v : a) {
        EXPECT_GE(v, -2.0f);
        EXPECT_LT(v, 3.0f);
    }
    EXPECT_NE(uniform_values(4, 0, 1, 1), uniform_values(4, 0, 1, 2));
}

TEST(ModelErrors, TruncatedJson) {
    std::string text = kGood;
    expect_error("truncated", text.substr(0, text.size() / 2), {"invalid JSON"});
}

TEST(ModelErrors, NotAnHfuseModel) {
    expect_error("format", replace(kGood, R"("hfuse-model")", R"("onnx")"), {"field 'format'"});
    expect_error("version", replace(kGood, R"("version": 1)", R"("version": 2)"), {"field 'version'"});
}

TEST(ModelErrors, UnknownOp) {
    expect_error("unknown_op", replace(kGood, R"("op": "Relu")", R"("op": "Rleu")"),
                 {"node 'relu'", "field 'op'", "unknown op 'Rleu'"});
}

TEST(ModelErrors, DanglingInput) {
    expect_error("dangling", replace(kGood, R"("inputs": ["conv"])", R"("inputs": ["cnv"])"),
                 {"node 'relu'", "field 'inputs[0]'", "'cnv'"});
}

TEST(ModelErrors, Cycle) {
    std::string text = replace(kGood, R"("inputs": ["x", "w", "b"])", R"("inputs": ["relu", "w", "b"])");
    expect_error("cycle", text, {"cycle", "conv", "relu"});
}

TEST(ModelErrors, WrongWeightShape) {
    expect_error("weight_shape", replace(kGood, R"("shape": [4, 3, 3, 3])", R"("shape": [4, 2, 3, 3])"),
                 {"node 'conv'", "field 'input 1 (W)'"});
}

TEST(ModelErrors, WrongWeightSize) {
    expect_error("weight_values", replace(kGood, "[0.1, 0.2, 0.3, 0.4]", "[0.1, 0.2, 0.3]"),
                 {"field 'weights.b.values'", "3 values"});
    std::vector<float> w(100);
    write_f32_file(testing::TempDir() + "/short.f32", w.data(), w.size());
    expect_error("weight_file_size", replace(kGood, R"("uniform": [-0.5, 0.5], "seed": 3)", R"("file": "short.f32")"),
                 {"field 'weights.w.file'", "400 bytes", "expected 432"});
}

TEST(ModelErrors, MissingWeightFile) {
    expect_error("weight_file", replace(kGood, R"("uniform": [-0.5, 0.5], "seed": 3)", R"("file": "nope.f32")"),
                 {"field 'weights.w.file'", "cannot open", "nope.f32"});
}

TEST(ModelErrors, NonPositiveDims) {
    expect_error("dims", replace(kGood, "[1, 3, 8, 8]", "[1, 3, 0, 8]"), {"field 'inputs[0].shape'", "not positive"});
    expect_error("wdims", replace(kGood, R"("shape": [4])", R"("shape": [-4])"), {"field 'weights.b.shape'"});
}

TEST(ModelErrors, ZeroStrides) {
    expect_error("strides", replace(kGood, R"("pads": [1, 1, 1, 1])", R"("pads": [1, 1, 1, 1], "strides": [0, 1])"),
                 {"node 'conv'", "field 'strides'"});
}

TEST(ModelErrors, BadAttributes) {
    expect_error("attr_name", replace(kGood, R"("kernel_shape")", R"("kernel_size")"),
                 {"node 'conv'", "field 'kernel_size'", "unknown attribute"});
    expect_error("attr_type", replace(kGood, R"("kernel_shape": [3, 3])", R"("kernel_shape": "3x3")"),
                 {"node 'conv'", "field 'kernel_shape'"});
    expect_error("attr_value", replace(kGood, R"("kernel_shape": [3, 3])", R"("kernel_shape": [3, 5])"),
                 {"node 'conv'", "field 'kernel_shape'"});
}

TEST(ModelErrors, StructuralMistakes) {
    expect_error("dup_node", replace(kGood, R"("name": "relu", "op")", R"("name": "conv", "op")"), {"'conv'"});
    expect_error("unknown_key", replace(kGood, R"("attrs": {"kernel_shape")", R"("attr": {"kernel_shape")"),
                 {"node 'conv'", "field 'attr'", "unknown key"});
    expect_error("bad_output", replace(kGood, R"("outputs": ["relu"])", R"("outputs": ["rel"])"),
                 {"field 'outputs[0]'", "'rel'"});
    expect_error("arity", replace(kGood, R"("inputs": ["conv"])", R"("inputs": ["conv", "x"])"),
                 {"node 'relu'", "field 'inputs'", "expects 1 inputs, got 2"});
    expect_error("no_seed", replace(kGood, R"(, "seed": 3)", ""), {"field 'weights.w.seed'"});
    expect_error("negative_seed", replace(kGood, R"("seed": 3)", R"("seed": -3)"),
                 {"field 'weights.w.seed'", "non-negative integer"});
}

TEST(ModelIo, SeedBuiltInCodeIsASignedJsonInteger) {
    // nlohmann::json holds a literal 3 written in C++ as a signed integer, parsed text as unsigned.
    nlohmann::json model = nlohmann::json::parse(kGood);
    model["weights"]["w"]["seed"] = 3;
    ASSERT_TRUE(model["weights"]["w"]["seed"].is_number_integer() &&
                !model["weights"]["w"]["seed"].is_number_unsigned());
    Graph from_code = parse_model(model, ".", "in-memory");
    Graph from_text = parse_model(nlohmann::json::parse(kGood), ".", "text");
    EXPECT_EQ(from_code.weights.at("w").f32, from_text.weights.at("w").f32);
}

TEST(ModelErrors, MissingFile) {
    try {
        load_model("/nonexistent/model.json");
        ADD_FAILURE();
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/model.json"), std::string::npos);
    }
}

}  // namespace
}  // namespace hfuse
