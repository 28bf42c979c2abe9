// `hfuse compile`: every bundled model compiled ahead of time, called from a plain C++ program
// (tests/aot/caller.cpp, built by `g++ caller.cpp NAME.a -ldl -lpthread` against nothing but the
// files hfuse wrote), matches the reference evaluator and the JIT executor; a wrongly shaped buffer
// makes the call return non-zero with Halide's message naming the buffer; bad arguments are errors.
#include "hfuse/executor.h"
#include "hfuse/fusion_rules.h"
#include "hfuse/model_io.h"
#include "hfuse/planner.h"
#include "hfuse/reference.h"

#include "test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace hfuse {
namespace {

namespace fs = std::filesystem;

const std::string kModels = std::string(HFUSE_SOURCE_DIR) + "/models/";
const std::string kCaller = std::string(HFUSE_SOURCE_DIR) + "/tests/aot/caller.cpp";

std::string work_dir(const std::string &name) {
    std::string dir = testing::TempDir() + "/hfuse_aot_" + std::to_string(getpid()) + "_" + name;
    fs::remove_all(dir);
    fs::create_directories(dir);
    return dir;
}

// "W,H,C,N": a tensor's extents as the compiled function takes them (the ONNX shape reversed).
std::string extents(const Shape &shape) {
    std::string s;
    for (auto it = shape.rbegin(); it != shape.rend(); ++it) s += (s.empty() ? "" : ",") + std::to_string(*it);
    return s;
}

struct Compiled {
    std::string dir, caller;
};

// hfuse compile, then the caller built with the plain compiler command against DIR only.
Compiled compile_model(const std::string &model, const std::string &name, const std::string &flags = "") {
    Compiled c{work_dir(name), ""};
    test::CommandResult r =
        test::run_cli("compile " + kModels + model + ".json -o " + c.dir + " --name " + name + " " + flags);
    EXPECT_EQ(r.code, 0) << r.out;
    for (const char *f : {".a", ".h"}) EXPECT_TRUE(fs::exists(c.dir + "/" + name + f)) << r.out;
    c.caller = c.dir + "/caller";
    std::string cmd = std::string(HFUSE_CXX) + " -std=c++17 -O2 -I " + c.dir + " -DMODEL_HEADER='\"" + name +
                      ".h\"' -DMODEL_ARGV=" + name + "_argv " + kCaller + " " + c.dir + "/" + name +
                      ".a -ldl -lpthread -o " + c.caller;
    test::CommandResult b = test::run_command(cmd);
    EXPECT_EQ(b.code, 0) << cmd << "\n" << b.out;
    return c;
}

std::vector<float> read_floats(const std::string &path, size_t n) {
    std::vector<float> v(n);
    std::ifstream in(path, std::ios::binary);
    in.read(reinterpret_cast<char *>(v.data()), sizeof(float) * n);
    EXPECT_TRUE(in) << "cannot read " << n << " floats from " << path;
    return v;
}

class AotModel : public testing::TestWithParam<std::string> {};

TEST_P(AotModel, PlainCallerMatchesReferenceAndJit) {
    const std::string model = GetParam();
    Graph g = load_model(kModels + model + ".json");
    Compiled c = compile_model(model, model);
    test::ModelInputs in = test::make_inputs(g);
    std::string args;
    for (const GraphInput &gi : g.inputs) {
        std::string file = c.dir + "/in_" + gi.name + ".f32";
        write_f32_file(file, in.buffers.at(gi.name).data(), num_elements(gi.shape));
        args += " in:" + extents(gi.shape) + ":" + file;
    }
    for (size_t i = 0; i < g.outputs.size(); i++) {
        args += " out:" + extents(g.type_of(g.outputs[i]).shape) + ":" + c.dir + "/out" + std::to_string(i) + ".f32";
    }
    test::CommandResult r = test::run_command(c.caller + args);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("rc 0"), std::string::npos) << r.out;

    auto expected = reference::run(g, in.reference);
    Executor jit(plan_fusion(g, {load_rules("x86")}));
    auto jit_out = jit.run(in.buffers);
    for (size_t i = 0; i < g.outputs.size(); i++) {
        const std::string &v = g.outputs[i];
        std::vector<float> actual =
            read_floats(c.dir + "/out" + std::to_string(i) + ".f32", expected.at(v).data.size());
        auto ref = reference::compare(actual.data(), expected.at(v).data.data(), actual.size());
        EXPECT_LE(ref.relative(), 1e-4) << v << ": max abs error " << ref.max_abs_error << " at scale " << ref.scale;
        EXPECT_GT(ref.scale, 1e-3) << v << ": (nearly) all zero; the comparison would prove nothing";
        auto same = reference::compare(actual.data(), jit_out.at(v).data(), actual.size());
        EXPECT_LE(same.relative(), 1e-5) << v << " against the JIT executor";
    }

    // One input a row short: refused with Halide's message, nothing written.
    const GraphInput &first = g.inputs[0];
    Shape wrong = first.shape;
    wrong.back() -= 1;
    std::string bad_args = args;
    bad_args.replace(bad_args.find(" in:" + extents(first.shape)), 4 + extents(first.shape).size(),
                     " in:" + extents(wrong));
    test::CommandResult bad = test::run_command(c.caller + bad_args);
    EXPECT_EQ(bad.code, 1) << bad.out;
    EXPECT_NE(bad.out.find("Error: Input buffer " + g.inputs[0].name), std::string::npos) << bad.out;
    EXPECT_EQ(bad.out.find("rc 0"), std::string::npos) << bad.out;
}

INSTANTIATE_TEST_SUITE_P(Models, AotModel,
                         testing::Values("conv_bn_relu", "dwconv_bn_relu", "conv3x3_bn_relu", "conv_bias_relu_maxpool",
                                         "resnet_block", "rnn_cell", "lstm_cell", "mlp_softmax"));

TEST(AotCompile, HeaderNamesTheModelsTensors) {
    Compiled c = compile_model("rnn_cell", "cell", "--rules tvm");
    std::ifstream in(c.dir + "/cell.h");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string h = ss.str();
    EXPECT_NE(h.find("static inline int cell(struct halide_buffer_t *x, struct halide_buffer_t *h, struct "
                     "halide_buffer_t *h_next)"),
              std::string::npos)
        << h.substr(0, 3000);
    EXPECT_NE(h.find("//   input  x ['x'] shape [1x128]"), std::string::npos);
    EXPECT_NE(h.find("//   output h_next ['h_next'] shape [1x128]"), std::string::npos);
    for (const char *f : {"HalideBuffer.h", "HalideRuntime.h"}) EXPECT_TRUE(fs::exists(c.dir + "/" + f)) << f;
}

TEST(AotCompile, CrossCompilesForOtherTargets) {
    // Built, not run: AVX-512 (not on this machine) and 64-bit ARM.
    for (const char *target : {"x86-64-linux-avx512_skylake", "arm-64-linux"}) {
        std::string dir = work_dir(std::string("cross_") + target);
        test::CommandResult r = test::run_cli("compile " + kModels + "conv_bias_relu_maxpool.json -o " + dir +
                                              " --name cbrm --target " + target);
        EXPECT_EQ(r.code, 0) << r.out;
        EXPECT_GT(fs::file_size(dir + "/cbrm.a"), 10000u) << target;
        EXPECT_NE(r.out.find(target), std::string::npos) << r.out;
    }
}

TEST(AotCompile, DepfileListsTheModelsFiles) {
    std::string dir = work_dir("depfile");
    test::CommandResult r = test::run_cli("compile " + kModels + "conv_bias_relu_maxpool.json -o " + dir +
                                          " --name cbrm --depfile " + dir + "/cbrm.d");
    ASSERT_EQ(r.code, 0) << r.out;
    std::ifstream in(dir + "/cbrm.d");
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(ss.str().find(dir + "/cbrm.a:"), 0u) << ss.str();
    EXPECT_NE(ss.str().find("conv_bias_relu_maxpool.json"), std::string::npos) << ss.str();
    EXPECT_NE(ss.str().find("conv_bias_relu_maxpool.w.f32"), std::string::npos) << ss.str();
}

TEST(AotCompile, BadArgumentsAreClearErrors) {
    std::string dir = work_dir("bad");
    struct Case {
        std::string args;
        int code;
        std::vector<std::string> says;
    };
    const std::vector<Case> cases = {
        {"--name 9lives", 2, {"--name '9lives'", "C identifier"}},
        {"--name int", 2, {"--name 'int'"}},
        {"--name ok --target x86-64-nowhere", 2, {"--target 'x86-64-nowhere'", "Halide target"}},
        {"--name ok --plan /nonexistent/plan.json", 1, {"/nonexistent/plan.json"}},
    };
    for (const Case &c : cases) {
        test::CommandResult r =
            test::run_cli("compile " + kModels + "rnn_cell.json -o " + dir + " " + c.args, /*stderr_only=*/true);
        EXPECT_EQ(r.code, c.code) << c.args << "\n" << r.out;
        for (const std::string &s : c.says) EXPECT_NE(r.out.find(s), std::string::npos) << c.args << "\n" << r.out;
    }
    test::CommandResult missing = test::run_cli("compile /nonexistent/m.json -o " + dir + " --name m", true);
    EXPECT_EQ(missing.code, 1);
    EXPECT_NE(missing.out.find("/nonexistent/m.json"), std::string::npos) << missing.out;
}

}  // namespace
}  // namespace hfuse
