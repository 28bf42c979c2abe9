// ONNX import (src/io/onnx_import.cpp): the small models of tests/data/onnx (exported by PyTorch, or
// hand-built, by tools/make_onnx_models.py) run by hfuse match PyTorch's saved outputs; constant
// subgraphs are folded and BatchNormalization is kept or folded as exported; every error path names
// the file and the node, field or initializer; the CLI takes .onnx files (and --shape), `hfuse import`
// writes a JSON model that runs the same, and `hfuse compile` of an ONNX model runs from C++.
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/fusion_rules.h"
#include "hfuse/model_io.h"
#include "hfuse/passes.h"
#include "hfuse/planner.h"
#include "hfuse/reference.h"

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

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kData = std::string(HFUSE_SOURCE_DIR) + "/tests/data/onnx/";

std::string work_dir(const std::string &name) {
    std::string dir = testing::TempDir() + "/hfuse_onnx_" + std::to_string(getpid()) + "_" + name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

const json &manifest() {
    static const json m = read_json_file(kData + "models.json", "test manifest");
    return m;
}

const json &entry(const std::string &name) {
    for (const json &e : manifest()["models"]) {
        if (e["name"] == name) return e;
    }
    throw std::runtime_error("no test model " + name);
}

// The --shape an entry needs ("input=1x3x32x32"), as load options.
LoadOptions options_for(const json &e) {
    LoadOptions o;
    if (e.contains("shape")) {
        std::string s = e["shape"];
        Shape shape;
        std::stringstream dims(s.substr(s.find('=') + 1));
        for (std::string d; std::getline(dims, d, 'x');) shape.push_back(std::stoll(d));
        o.input_shapes[s.substr(0, s.find('='))] = shape;
    }
    return o;
}

std::vector<float> file_floats(const std::string &file, const Shape &shape) {
    return read_f32_file(kData + file, num_elements(shape), file);
}

// PyTorch's outputs against `actual` (output name -> data); tolerance relative to the output's scale.
void expect_pytorch_outputs(const json &e, const std::map<std::string, const float *> &actual, double tolerance,
                            const std::string &what) {
    for (const json &o : e["outputs"]) {
        const std::vector<float> expected = file_floats(o["file"], o["shape"].get<Shape>());
        reference::Comparison c = reference::compare(actual.at(o["name"]), expected.data(), expected.size());
        EXPECT_LE(c.relative(), tolerance) << e["name"] << " output " << o["name"] << " (" << what
                                           << "): max abs error " << c.max_abs_error << " at scale " << c.scale;
        EXPECT_GT(c.scale, 1e-3) << e["name"] << ": (nearly) all zero; the comparison would prove nothing";
    }
}

// Each model through the reference evaluator; the networks also through the fused, JIT-compiled
// executor (each costs a few seconds of Halide compilation, so the opset variants skip it).
class OnnxModel : public testing::TestWithParam<std::string> {};

TEST_P(OnnxModel, MatchesPyTorch) {
    const json &e = entry(GetParam());
    Graph g = load_model(kData + e["model"].get<std::string>(), options_for(e));
    ASSERT_EQ(g.inputs.size(), 1u);
    const Shape shape = e["input_shape"].get<Shape>();
    ASSERT_EQ(g.inputs[0].shape, shape);
    std::vector<float> x = file_floats(e["input"], shape);

    auto ref = reference::run(g, {{g.inputs[0].name, {shape, x}}});
    std::map<std::string, const float *> ref_out;
    for (const auto &kv : ref) ref_out[kv.first] = kv.second.data.data();
    expect_pytorch_outputs(e, ref_out, 1e-4, "reference evaluator");

    // resnet_small_bn stands for resnet_small (the same network once its BatchNormalizations are folded).
    static const std::set<std::string> networks = {"resnet_small_bn",
                                                   "mobilenet_v2_small",
                                                   "squeezenet_small",
                                                   "vgg_small",
                                                   "mlp",
                                                   "ops_mix",
                                                   "segmentation_small",
                                                   "encoder_small",
                                                   "encoder_small_opset17",
                                                   "vit_small",
                                                   "swin_small",
                                                   "resize_crop_antialias_opset19",
                                                   "upsample_linear_opset9",
                                                   "reduce_sum_opset13",
                                                   "reduce_max_min_opset18",
                                                   "einsum_opset12",
                                                   "compare_where_opset16"};
    if (!networks.count(GetParam())) return;
    Executor ex(plan_fusion(g, {load_rules("x86")}));
    auto out = ex.run({{g.inputs[0].name, tensor_from_data(shape, x.data())}});
    std::map<std::string, const float *> jit_out;
    for (const auto &kv : out) jit_out[kv.first] = kv.second.data();
    expect_pytorch_outputs(e, jit_out, 1e-4, "fused x86 plan");
}

std::vector<std::string> model_names() {
    std::vector<std::string> names;
    for (const json &e : manifest()["models"]) names.push_back(e["name"]);
    return names;
}

INSTANTIATE_TEST_SUITE_P(Data, OnnxModel, testing::ValuesIn(model_names()),
                         [](const testing::TestParamInfo<std::string> &p) { return p.param; });

std::multiset<std::string> ops_of(const Graph &g) {
    std::multiset<std::string> ops;
    for (const Node &n : g.nodes) ops.insert(n.op);
    return ops;
}

TEST(OnnxImport, EveryFileTheManifestNamesExists) {
    // models.json and the files it names exist: a stale or partial regeneration fails here.
    for (const json &e : manifest()["models"]) {
        EXPECT_TRUE(fs::exists(kData + e["model"].get<std::string>())) << e["name"];
        for (const json &o : e["outputs"]) EXPECT_TRUE(fs::exists(kData + o["file"].get<std::string>())) << e["name"];
    }
    EXPECT_GE(manifest()["models"].size(), 12u);
}

TEST(OnnxImport, BatchNormKeptAsNodesIsFoldedBeforePlanning) {
    Graph kept = load_model(kData + "resnet_small_bn.onnx");
    Graph folded_by_exporter = load_model(kData + "resnet_small.onnx");
    EXPECT_EQ(ops_of(kept).count("BatchNormalization"), 15u);  // stem, 6 blocks x 2, 2 shortcuts
    EXPECT_EQ(ops_of(folded_by_exporter).count("BatchNormalization"), 0u);
    Graph s = simplify(kept);
    EXPECT_EQ(ops_of(s).count("BatchNormalization"), 0u);
    EXPECT_EQ(ops_of(s).count("Conv"), ops_of(folded_by_exporter).count("Conv"));
}

TEST(OnnxImport, ConstantSubgraphsAreFoldedAtImport) {
    // x.view(x.size(0), -1): Shape -> Gather -> Unsqueeze -> Concat -> Reshape becomes one Reshape
    // whose shape is a weight; Identity nodes of weights and Constant nodes become weights.
    Graph vgg = load_model(kData + "vgg_small.onnx", options_for(entry("vgg_small")));
    std::multiset<std::string> ops = ops_of(vgg);
    for (const char *op : {"Shape", "Gather", "Unsqueeze", "Concat", "Constant"}) EXPECT_EQ(ops.count(op), 0u) << op;
    ASSERT_EQ(ops.count("Reshape"), 1u);
    for (const Node &n : vgg.nodes) {
        if (n.op == "Reshape") {
            ASSERT_TRUE(vgg.is_weight(n.inputs[1]));
            EXPECT_EQ(vgg.weights.at(n.inputs[1]).i64, (std::vector<int64_t>{1, -1}));  // [x.size(0), -1]
        }
    }
    // F.pad's ConstantOfShape/Slice/Transpose/Cast chain is one Pad with constant pads; the spatial mean
    // a GlobalAveragePool; the channel mean a ReduceMean; upsampling a Resize; x[:, 1] a Slice.
    std::multiset<std::string> mix = ops_of(load_model(kData + "ops_mix.onnx"));
    for (const char *op : {"Pad", "GlobalAveragePool", "ReduceMean", "Resize", "Slice"}) {
        EXPECT_EQ(mix.count(op), 1u) << op;
    }
    for (const char *op : {"ConstantOfShape", "Cast", "Transpose", "Shape", "Constant"}) {
        EXPECT_EQ(mix.count(op), 0u) << op;
    }
    std::multiset<std::string> mbv2 = ops_of(load_model(kData + "mobilenet_v2_small.onnx"));
    EXPECT_EQ(mbv2.count("Clip"), 35u);  // ReLU6, bounds from Constant nodes
    EXPECT_EQ(mbv2.count("Constant"), 0u);
}

// ---- errors --------------------------------------------------------------------------------------

std::string load_error(const std::string &path, const LoadOptions &o = {}) {
    try {
        load_model(path, o);
    } catch (const Error &e) {
        return e.what();
    }
    ADD_FAILURE() << "no error loading " << path;
    return "";
}

void expect_contains(const std::string &text, const std::vector<std::string> &parts) {
    for (const std::string &p : parts) EXPECT_NE(text.find(p), std::string::npos) << "'" << p << "' not in: " << text;
}

TEST(OnnxImportErrors, UnsupportedOpsAreListedAllAtOnce) {
    expect_contains(load_error(kData + "unsupported_ops.onnx"),
                    {"unsupported_ops.onnx: ", "3 unsupported op types in 4 nodes", "TopK (nodes 'topk_a', 'topk_b')",
                     "Hardmax (node 'hardmax')", "com.microsoft.FusedGemm (node 'fused')"});
}

// Opsets 18 to 21 are read (opset18_split_reduce_pad, opset19_pool_resize and opset21_conv run above);
// what they add that hfuse cannot compute is refused naming the node and the field.
TEST(OnnxImportErrors, OpsetsAbove21AndWhatOpsets18To21AddThatHfuseLacks) {
    expect_contains(
        load_error(kData + "error_opset22.onnx"),
        {"error_opset22.onnx: ", "field 'opset_import'", "opset 22 is not supported", "hfuse reads opsets 9 to 21"});
    expect_contains(load_error(kData + "error_pad_wrap_opset19.onnx"),
                    {"error_pad_wrap_opset19.onnx: ", "node 'pad' (Pad): field 'mode'", "got 'wrap'"});
    expect_contains(load_error(kData + "error_resize_aspect_opset18.onnx"),
                    {"node 'resize' (Resize): field 'keep_aspect_ratio_policy'", "'not_larger' is supported only",
                     "sizes [8, 6] for dims [4, 4]"});
    expect_contains(load_error(kData + "error_avgpool_dilations_opset19.onnx"),
                    {"node 'pool' (AveragePool): field 'dilations'", "only 1s are supported", "got [2, 2]"});
    expect_contains(
        load_error(kData + "error_split_num_outputs_opset18.onnx"),
        {"node 'split' (Split): field 'num_outputs'", "dim 2 (4) into 3 parts of 2 leaves the last part empty"});
    expect_contains(load_error(kData + "error_einsum_opset12.onnx"),
                    {"node 'einsum' (Einsum): field 'equation'", "'bcij,bcjk->bc' is not a batched matrix product",
                     "index 'i' is summed within one operand"});
    expect_contains(load_error(kData + "error_float8_opset21.onnx"),
                    {"error_float8_opset21.onnx: ", "initializer 'w8'", "element type float8e4m3fn is not supported"});
}

TEST(OnnxImportErrors, TruncatedCorruptAndEmptyFiles) {
    const std::string dir = work_dir("broken");
    std::ifstream in(kData + "resnet_small.onnx", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto write = [&](const std::string &name, const std::string &data) {
        std::ofstream(dir + "/" + name, std::ios::binary) << data;
        return dir + "/" + name;
    };
    for (size_t cut : {bytes.size() / 2, bytes.size() - 1, size_t(40)}) {
        std::string path = write("truncated.onnx", bytes.substr(0, cut));
        expect_contains(load_error(path), {path + ": ", "truncated or corrupt"});
    }
    std::string corrupt = bytes;
    for (size_t i = 0; i < corrupt.size(); i += 97) corrupt[i] = static_cast<char>(corrupt[i] ^ 0x5a);
    expect_contains(load_error(write("corrupt.onnx", corrupt)), {"corrupt.onnx: "});
    expect_contains(load_error(write("text.onnx", "{\"format\": \"hfuse-model\"}")),
                    {"text.onnx: ", "not a valid ONNX model"});
    expect_contains(load_error(write("empty.onnx", "")), {"empty.onnx: ", "truncated or corrupt"});
    expect_contains(load_error(dir + "/missing.onnx"), {"missing.onnx: cannot open"});
}

TEST(OnnxImportErrors, ExternalDataMissingOrShort) {
    const std::string dir = work_dir("external");
    fs::copy_file(kData + "mlp_ext.onnx", dir + "/m.onnx");
    // The model names its data file "mlp_ext.onnx.data", relative to the model.
    expect_contains(
        load_error(dir + "/m.onnx"),
        {"m.onnx: ", "initializer '", "cannot open the external data file '" + dir + "/mlp_ext.onnx.data'"});
    std::ifstream in(kData + "mlp_ext.onnx.data", std::ios::binary);
    std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(dir + "/mlp_ext.onnx.data", std::ios::binary) << data.substr(0, data.size() - 100);
    expect_contains(load_error(dir + "/m.onnx"), {"m.onnx: ", "initializer '", "are needed at offset"});
    // The data file is one of the model's files (for build systems).
    std::vector<std::string> files = model_files(kData + "mlp_ext.onnx");
    ASSERT_EQ(files.size(), 2u);
    EXPECT_EQ(files[1], kData + "mlp_ext.onnx.data");
}

TEST(OnnxImportErrors, DynamicDimsNeedShape) {
    const std::string vgg = kData + "vgg_small.onnx";
    expect_contains(load_error(vgg),
                    {"vgg_small.onnx: ", "dynamic dims", "'input' [batch, 3, 32, 32]", "--shape input=Nx3x32x32"});
    LoadOptions o;
    o.input_shapes["input"] = {1, 3, 32, 31};
    expect_contains(load_error(vgg, o), {"vgg_small.onnx: ", "field 'inputs.input'", "fixes dim 3 at 32"});
    o.input_shapes["input"] = {1, 3, 32};
    expect_contains(load_error(vgg, o), {"--shape gives 3 dims, the model says 4"});
    o.input_shapes = {{"image", {1, 3, 32, 32}}};
    expect_contains(load_error(vgg, o), {"no input named 'image'"});
    // A static model takes a --shape that agrees with it, JSON models too.
    o.input_shapes = {{"input", {1, 3, 32, 32}}};
    EXPECT_EQ(load_model(kData + "resnet_small.onnx", o).inputs[0].shape, (Shape{1, 3, 32, 32}));
    o.input_shapes = {{"input", {2, 3, 32, 32}}};
    expect_contains(load_error(kData + "resnet_small.onnx", o), {"fixes dim 0 at 1"});
    const std::string json_model = std::string(HFUSE_SOURCE_DIR) + "/models/conv_bias_relu_maxpool.json";
    o.input_shapes = {{"input", {1, 64, 56, 56}}};
    EXPECT_NO_THROW(load_model(json_model, o));
    o.input_shapes = {{"input", {2, 64, 56, 56}}};
    expect_contains(load_error(json_model, o), {"conv_bias_relu_maxpool.json: ", "field '--shape input'", "fixes"});
}

// ---- the CLI ---------------------------------------------------------------------------------------

TEST(OnnxCli, EveryCommandTakesOnnxAndShape) {
    const json &e = entry("mlp");
    const std::string model = kData + "mlp.onnx", dir = work_dir("cli");
    test::CommandResult r = test::run_cli("info " + model + " --shape input=2x64");
    ASSERT_EQ(r.code, 0) << r.out;
    expect_contains(r.out, {"input  input", "[2x64]", "Gemm"});
    r = test::run_cli("plan " + model + " --shape input=2x64 -o " + dir + "/plan.json");
    ASSERT_EQ(r.code, 0) << r.out;
    r = test::run_cli("run " + model + " --shape input=2x64 --plan " + dir + "/plan.json --input " + kData +
                      "mlp.input.f32 --output " + dir + "/out.f32 --check");
    ASSERT_EQ(r.code, 0) << r.out;
    std::vector<float> out = read_f32_file(dir + "/out.f32", 20, "output");
    expect_pytorch_outputs(e, {{"output", out.data()}}, 1e-4, "hfuse run");
    r = test::run_cli("bench " + model + " --shape input=2x64 --runs 2 --json");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("\"median_ms\""), std::string::npos) << r.out;

    // Without --shape: exit 1 naming the input; a malformed --shape: usage, exit 2.
    r = test::run_cli("info " + model, true);
    EXPECT_EQ(r.code, 1) << r.out;
    expect_contains(r.out, {"hfuse: error: " + model + ": ", "--shape input=Nx64"});
    for (const char *bad : {"input=2xx64", "input=", "2x64", "input=2x0", "input=2x-4"}) {
        r = test::run_cli("info " + model + " --shape " + bad, true);
        EXPECT_EQ(r.code, 2) << bad << ": " << r.out;
        expect_contains(r.out, {"--shape", "NAME=DIMS"});
    }
    r = test::run_cli("info " + kData + "unsupported_ops.onnx", true);
    EXPECT_EQ(r.code, 1) << r.out;
    expect_contains(r.out, {"TopK (nodes 'topk_a', 'topk_b')"});
}

TEST(OnnxCli, ImportWritesAJsonModelThatRunsTheSame) {
    const std::string dir = work_dir("import");
    test::CommandResult r = test::run_cli("import " + kData + "resnet_small_bn.onnx -o " + dir + "/resnet.json");
    ASSERT_EQ(r.code, 0) << r.out;
    expect_contains(r.out, {"weight files beside it"});
    Graph from_json = load_model(dir + "/resnet.json");
    Graph from_onnx = load_model(kData + "resnet_small_bn.onnx");
    EXPECT_EQ(ops_of(from_json), ops_of(from_onnx));           // BatchNormalization nodes included
    EXPECT_GT(model_files(dir + "/resnet.json").size(), 20u);  // the .f32 weight files
    for (const std::string &f : model_files(dir + "/resnet.json")) EXPECT_TRUE(fs::exists(f)) << f;
    const json &e = entry("resnet_small_bn");
    const Shape shape = e["input_shape"].get<Shape>();
    std::vector<float> x = file_floats(e["input"], shape);
    auto out = reference::run(from_json, {{"input", {shape, x}}});
    expect_pytorch_outputs(e, {{"output", out.at("output").data.data()}}, 1e-4, "imported JSON");

    r = test::run_cli("import " + kData + "resnet_small.onnx -o " + dir + "/resnet.txt", true);
    EXPECT_EQ(r.code, 2) << r.out;

    // A weight holding -inf (a mask), which JSON cannot hold, goes to a file however small.
    r = test::run_cli("import " + kData + "compare_where_opset16.onnx -o " + dir + "/where.json");
    ASSERT_EQ(r.code, 0) << r.out;
    const json &w = entry("compare_where_opset16");
    const Graph where = load_model(dir + "/where.json");
    std::vector<float> wx = file_floats(w["input"], w["input_shape"].get<Shape>());
    auto wout = reference::run(where, {{"input", {w["input_shape"].get<Shape>(), wx}}});
    std::map<std::string, const float *> actual;
    for (const auto &kv : wout) actual[kv.first] = kv.second.data.data();
    expect_pytorch_outputs(w, actual, 1e-4, "imported JSON");
}

// Builds tests/aot/caller.cpp against the library `name` that `hfuse compile` wrote into `dir`, runs it
// on the entry's input (`in_dims`, `out_dims`: Halide's order, ONNX's reversed, as the caller takes
// them) and expects PyTorch's output.
void expect_compiled_library_matches(const json &e, const std::string &dir, const std::string &name,
                                     const std::string &in_dims, const std::string &out_dims, int64_t outputs) {
    const std::string caller = dir + "/caller";
    std::string cmd = std::string(HFUSE_CXX) + " -std=c++17 -O2 -I " + dir + " -DMODEL_HEADER='\"" + name +
                      ".h\"' -DMODEL_ARGV=" + name + "_argv " + HFUSE_SOURCE_DIR + "/tests/aot/caller.cpp " + dir +
                      "/" + name + ".a -ldl -lpthread -o " + caller;
    test::CommandResult b = test::run_command(cmd);
    ASSERT_EQ(b.code, 0) << cmd << "\n" << b.out;
    test::CommandResult r = test::run_command(caller + " in:" + in_dims + ":" + kData + e["input"].get<std::string>() +
                                              " out:" + out_dims + ":" + dir + "/out.f32");
    ASSERT_EQ(r.code, 0) << r.out;
    std::vector<float> out = read_f32_file(dir + "/out.f32", outputs, "output");
    expect_pytorch_outputs(e, {{"output", out.data()}}, 1e-4, "compiled library");
}

// hfuse compile of an ONNX model (weights in an external data file): a library a plain C++ program
// runs, matching PyTorch; the depfile names the data file. (tools/onnx_acceptance.py does the same
// with resnet18.)
TEST(OnnxCli, CompiledOnnxModelRunsFromCpp) {
    const json &e = entry("mlp_ext");
    const std::string dir = work_dir("compile");
    test::CommandResult r =
        test::run_cli("compile " + kData + "mlp_ext.onnx -o " + dir + " --name mlp --depfile " + dir + "/mlp.d");
    ASSERT_EQ(r.code, 0) << r.out;
    std::ifstream dep(dir + "/mlp.d");
    std::stringstream deps;
    deps << dep.rdbuf();
    expect_contains(deps.str(), {"mlp_ext.onnx \\", "mlp_ext.onnx.data"});
    expect_compiled_library_matches(e, dir, "mlp", "64,2", "10,2", 20);
}

// A transformer encoder (attention, LayerNorm, GELU) compiled ahead of time, called from plain C++.
TEST(OnnxCli, CompiledEncoderRunsFromCpp) {
    const std::string dir = work_dir("compile_encoder");
    test::CommandResult r = test::run_cli("compile " + kData + "encoder_small.onnx -o " + dir + " --name encoder");
    ASSERT_EQ(r.code, 0) << r.out;
    expect_compiled_library_matches(entry("encoder_small"), dir, "encoder", "32,10,2", "32,10,2", 2 * 10 * 32);
}

}  // namespace
}  // namespace hfuse
