// `hfuse compile`: every bundled model compiled ahead of time, called from a plain C++ program
// (tests/aot/caller.cpp, built by `g++ -fopenmp caller.cpp NAME.a -ldl -lpthread` against nothing but
// the files hfuse wrote), matches the reference evaluator and the JIT executor, on hfuse_runtime.h's
// allocator and (for models of at least 1 MFLOP) OpenMP's loops; a wrongly shaped buffer makes the
// call return non-zero with Halide's message naming the buffer; bad arguments are errors.
#include "exec/parallel_runtime.h"
#include "hfuse/executor.h"
#include "hfuse/fusion_rules.h"
#include "hfuse/model_io.h"
#include "hfuse/op_registry.h"
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

using test::kModels;
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
    std::string dir, name, caller;
    std::string build_output;    // the compiler's, building the caller
    std::string compile_output;  // hfuse compile's
};

// The caller built with the plain compiler command against c.dir only, with `caller_flags`.
void build_caller(Compiled &c, const std::string &caller_flags) {
    c.caller = c.dir + "/caller";
    std::string cmd = std::string(HFUSE_CXX) + " -std=c++17 -O2 " + caller_flags + " -I " + c.dir +
                      " -DMODEL_HEADER='\"" + c.name + ".h\"' -DMODEL_ARGV=" + c.name + "_argv " + kCaller + " " +
                      c.dir + "/" + c.name + ".a -ldl -lpthread -o " + c.caller;
    test::CommandResult b = test::run_command(cmd);
    EXPECT_EQ(b.code, 0) << cmd << "\n" << b.out;
    c.build_output = b.out;
}

// hfuse compile with `flags`, then the caller built with `caller_flags`.
Compiled compile_model(const std::string &model, const std::string &name, const std::string &flags = "",
                       const std::string &caller_flags = "-fopenmp") {
    Compiled c{work_dir(name), name, "", "", ""};
    test::CommandResult r =
        test::run_cli("compile " + kModels + model + ".json -o " + c.dir + " --name " + name + " " + flags);
    EXPECT_EQ(r.code, 0) << r.out;
    c.compile_output = r.out;
    for (const char *f : {".a", ".h"}) EXPECT_TRUE(fs::exists(c.dir + "/" + name + f)) << r.out;
    build_caller(c, caller_flags);
    return c;
}

// The caller's arguments for `g`: its inputs (made by test::make_inputs, written to c.dir) and outputs.
std::string caller_arguments(const Graph &g, const Compiled &c, const test::ModelInputs &in) {
    std::string args;
    for (const GraphInput &gi : g.inputs) {
        std::string file = c.dir + "/in_" + gi.name + ".f32";
        write_f32_file(file, in.buffers.at(gi.name).data(), num_elements(gi.shape));
        args += " in:" + extents(gi.shape) + ":" + file;
    }
    for (size_t i = 0; i < g.outputs.size(); i++) {
        args += " out:" + extents(g.type_of(g.outputs[i]).shape) + ":" + c.dir + "/out" + std::to_string(i) + ".f32";
    }
    return args;
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
    EXPECT_EQ(c.build_output.find("warning"), std::string::npos) << c.build_output;
    // resnet_block's groups hand the value between its convs channel-blocked (its second conv copies
    // the blocks padded); the other models have no such value.
    const std::string blocked = "handed between groups channel-blocked: 1 value: relu1 (blocked 8)";
    EXPECT_EQ(c.compile_output.find(model == "resnet_block" ? blocked : "channel-blocked") != std::string::npos,
              model == "resnet_block")
        << c.compile_output;
    test::ModelInputs in = test::make_inputs(g);
    const std::string args = caller_arguments(g, c, in);
    test::CommandResult r = test::run_command(c.caller + args);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("rc 0"), std::string::npos) << r.out;
    // hfuse_runtime.h's allocator; OpenMP's loops where the model is large enough to gain from them.
    const bool openmp = graph_flops(g) >= exec::kOpenMPMinFlops;
    EXPECT_NE(r.out.find(std::string("runtime malloc hfuse parallel ") + (openmp ? "openmp" : "halide")),
              std::string::npos)
        << r.out;

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

    // One input a row short: refused by NAME before the pipeline runs, naming it, nothing written.
    const GraphInput &first = g.inputs[0];
    Shape wrong = first.shape;
    wrong.back() -= 1;
    std::string bad_args = args;
    bad_args.replace(bad_args.find(" in:" + extents(first.shape)), 4 + extents(first.shape).size(),
                     " in:" + extents(wrong));
    test::CommandResult bad = test::run_command(c.caller + bad_args);
    EXPECT_EQ(bad.code, 1) << bad.out;
    EXPECT_NE(bad.out.find("the input buffer "), std::string::npos) << bad.out;
    auto spaced = [](std::string s) {
        for (size_t at = s.find(','); at != std::string::npos; at = s.find(',', at + 2)) s.insert(at + 1, " ");
        return s;
    };
    EXPECT_NE(bad.out.find("['" + first.name + "'] has extents (" + spaced(extents(wrong)) +
                           "), but the model needs (" + spaced(extents(first.shape)) + ") from 0"),
              std::string::npos)
        << bad.out;
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
    for (const char *f : {"HalideBuffer.h", "HalideRuntime.h", "hfuse_runtime.h"}) {
        EXPECT_TRUE(fs::exists(c.dir + "/" + f)) << f;
    }
}

// conv_bn_relu's group runs on its position view: its output goes to conv_bn_relu_pipeline as the row
// [1, 256, 1, 784], the caller's [1, 256, 28, 28] viewed so by NAME (AotModel checks its values). A
// buffer of other extents or rank is refused naming it and the extents it needs; a bounds query is
// answered with the dense shapes.
TEST(AotCompile, AnOutputComputedAsARowIsTheCallersBufferViewed) {
    Compiled c = compile_model("conv_bn_relu", "cbr");
    const std::string h = test::read_file(c.dir + "/cbr.h");
    EXPECT_NE(h.find("//   output relu ['relu'] shape [1x256x28x28] (cbr_pipeline takes it as [1x256x1x784])"),
              std::string::npos)
        << h.substr(0, 3000);
    const std::string in = c.dir + "/in.f32";
    write_f32_file(in, std::vector<float>(28 * 28 * 128, 0.5f).data(), 28 * 28 * 128);
    const std::string out = ":" + c.dir + "/out.f32";
    test::CommandResult r = test::run_command(c.caller + " in:28,28,128,1:" + in + " out:28,28,256,1" + out);
    EXPECT_EQ(r.code, 0) << r.out;
    for (const auto &[extents, error] : std::vector<std::pair<std::string, std::string>>{
             {"784,1,256,1",
              "Error: cbr: the output buffer relu ['relu'] has extents (784, 1, 256, 1), but the model needs "
              "(28, 28, 256, 1) from 0"},
             {"28,27,256,1", "has extents (28, 27, 256, 1)"},
             {"28,28,255,1", "has extents (28, 28, 255, 1)"},
             {"28,28,256", "has extents (28, 28, 256), but the model needs (28, 28, 256, 1)"}}) {
        test::CommandResult bad = test::run_command(c.caller + " in:28,28,128,1:" + in + " out:" + extents + out);
        EXPECT_EQ(bad.code, 1) << extents << "\n" << bad.out;
        EXPECT_NE(bad.out.find(error), std::string::npos) << extents << "\n" << bad.out;
    }
    test::CommandResult q = test::run_command(c.caller + " --query in:28,28,128,1:" + in + " out:28,28,256,1" + out);
    EXPECT_EQ(q.code, 0) << q.out;
    EXPECT_NE(q.out.find("query 0: 0,28,1 0,28,28 0,128,784 0,1,100352\n"), std::string::npos) << q.out;
    EXPECT_NE(q.out.find("query 1: 0,28,1 0,28,28 0,256,784 0,1,200704\n"), std::string::npos) << q.out;
}

// Values named as NAME's locals (rc, hfuse_pass, ...) get other C names, so the header compiles; the
// output, on its group's position view (17 x 7 planes: wider than a vector of 8 or 16 lanes and no
// whole number of them, so the default plan takes the view under AVX2 and AVX-512 alike), matches
// the reference.
TEST(AotCompile, ArgumentsNamedAsTheEntryPointsLocals) {
    Compiled c{work_dir("locals"), "locals", "", "", ""};
    const std::string model = c.dir + "/locals.json";
    std::ofstream(model) << R"({"format": "hfuse-model", "version": 1, "name": "locals",
        "inputs": [{"name": "rc", "shape": [1, 16, 7, 17]}],
        "weights": {"w": {"shape": [24, 16, 1, 1], "uniform": [-0.5, 0.5], "seed": 1},
                    "b": {"shape": [24], "uniform": [-0.5, 0.5], "seed": 2}},
        "nodes": [{"name": "hfuse_pass", "op": "Conv", "inputs": ["rc", "w", "b"], "attrs": {"kernel_shape": [1, 1]}}],
        "outputs": ["hfuse_pass"]})";
    test::CommandResult r = test::run_cli("compile " + model + " -o " + c.dir + " --name locals");
    ASSERT_EQ(r.code, 0) << r.out;
    const std::string h = test::read_file(c.dir + "/locals.h");
    EXPECT_NE(h.find("//   input  rc_2 ['rc'] shape [1x16x7x17]"), std::string::npos) << h.substr(0, 2000);
    EXPECT_NE(h.find("//   output hfuse_pass_2 ['hfuse_pass'] shape [1x24x7x17] (locals_pipeline takes it as "
                     "[1x24x1x119])"),
              std::string::npos)
        << h.substr(0, 2000);
    build_caller(c, "-fopenmp");
    Graph g = load_model(model);
    test::ModelInputs in = test::make_inputs(g);
    test::CommandResult run = test::run_command(c.caller + caller_arguments(g, c, in));
    ASSERT_EQ(run.code, 0) << run.out;
    auto expected = reference::run(g, in.reference);
    std::vector<float> actual = read_floats(c.dir + "/out0.f32", expected.at("hfuse_pass").data.size());
    auto cmp = reference::compare(actual.data(), expected.at("hfuse_pass").data.data(), actual.size());
    EXPECT_LE(cmp.relative(), 1e-5) << "max abs error " << cmp.max_abs_error;
    EXPECT_GT(cmp.scale, 1e-3);
}

// What NAME.h installs at start-up, by the caller's flags and `hfuse compile --parallel-runtime`.
TEST(AotRuntime, TheHeaderInstallsTheAllocatorAndTheLoopsAsAsked) {
    const Graph cbrm = load_model(kModels + "conv_bias_relu_maxpool.json");  // 70 MFLOP: OpenMP
    const Graph rnn = load_model(kModels + "rnn_cell.json");                 // 66 KFLOP: Halide's pool
    struct Case {
        std::string model, compile_flags, caller_flags, runtime;
        bool warns;
    };
    const std::vector<Case> cases = {
        {"conv_bias_relu_maxpool", "", "", "malloc hfuse parallel halide", true},  // no -fopenmp: warned
        {"conv_bias_relu_maxpool", "", "-fopenmp -DHFUSE_HALIDE_THREAD_POOL", "malloc hfuse parallel halide", false},
        {"conv_bias_relu_maxpool", "", "-DHFUSE_HALIDE_THREAD_POOL", "malloc hfuse parallel halide", false},
        {"conv_bias_relu_maxpool", "", "-fopenmp -DHFUSE_KEEP_HALIDE_RUNTIME", "malloc halide parallel halide", false},
        {"conv_bias_relu_maxpool", "--parallel-runtime halide", "-fopenmp", "malloc hfuse parallel halide", false},
        {"rnn_cell", "--parallel-runtime openmp", "-fopenmp", "malloc hfuse parallel openmp", false},
        {"rnn_cell", "--parallel-runtime auto", "", "malloc hfuse parallel halide", false},
    };
    int k = 0;
    for (const Case &t : cases) {
        SCOPED_TRACE(t.model + " compiled with '" + t.compile_flags + "', called built with '" + t.caller_flags + "'");
        const Graph &g = t.model == "rnn_cell" ? rnn : cbrm;
        Compiled c = compile_model(t.model, "m" + std::to_string(k++), t.compile_flags, t.caller_flags);
        EXPECT_EQ(c.build_output.find("compile with -fopenmp, or define HFUSE_HALIDE_THREAD_POOL") != std::string::npos,
                  t.warns)
            << c.build_output;
        test::ModelInputs in = test::make_inputs(g);
        test::CommandResult r = test::run_command(c.caller + caller_arguments(g, c, in));
        ASSERT_EQ(r.code, 0) << r.out;
        EXPECT_NE(r.out.find("runtime " + t.runtime), std::string::npos) << r.out;
        auto expected = reference::run(g, in.reference);
        const std::string &v = g.outputs[0];
        std::vector<float> actual = read_floats(c.dir + "/out0.f32", expected.at(v).data.size());
        EXPECT_LE(reference::compare(actual.data(), expected.at(v).data.data(), actual.size()).relative(), 1e-4);
    }
}

// On hfuse's allocator a compiled model's warm runs reuse their buffers: Halide's default one gave
// glibc back the per-task blocks of the conv + bias + relu + max-pool, ~100 page faults a run. Over
// 100 runs: the cache matches blocks by size, and where tasks' blocks differ in size (as edge tasks'
// can) a thread can once take the size another one then misses, which mallocs one more set
// of fresh blocks, cached from then on: once in about half of the processes, ~90 pages for its 14
// tasks (4.5 a run over 20 runs), ~200 for 7 tasks of 8 conv rows (9.9; 2 over 100 runs).
TEST(AotRuntime, WarmRunsFaultNoPagesIn) {
    const Graph g = load_model(kModels + "conv_bias_relu_maxpool.json");
    test::ModelInputs in = test::make_inputs(g);
    auto faults_per_run = [&](const std::string &caller_flags) {
        Compiled c = compile_model("conv_bias_relu_maxpool", "faults", "", caller_flags);
        test::CommandResult r = test::run_command(c.caller + " --runs 100" + caller_arguments(g, c, in));
        EXPECT_EQ(r.code, 0) << r.out;
        const size_t at = r.out.find("faults_per_run ");
        EXPECT_NE(at, std::string::npos) << r.out;
        return at == std::string::npos ? -1.0 : std::stod(r.out.substr(at + 15));
    };
    const double hfuse = faults_per_run("-fopenmp"), halide = faults_per_run("-fopenmp -DHFUSE_KEEP_HALIDE_RUNTIME");
    EXPECT_LT(hfuse, 8) << "Halide's allocator: " << halide;
    RecordProperty("faults_per_run_halide_allocator", std::to_string(halide));
}

// A C program may install its own allocator after start-up: the model then runs on it, every block
// freed by the allocator that made it. The headers are C too.
TEST(AotRuntime, AProgramsOwnAllocatorReplacesHfuses) {
    Compiled c = compile_model("conv_bias_relu_maxpool", "cbrm", "", "-fopenmp");
    const std::string program = c.dir + "/own_allocator.c";
    std::ofstream(program) << R"(#include "cbrm.h"
#include <stdio.h>
#include <stdlib.h>
static int mallocs, frees;
/* called from the loop's threads */
static void *my_malloc(void *uc, size_t n) { __sync_fetch_and_add(&mallocs, 1); return halide_default_malloc(uc, n); }
static void my_free(void *uc, void *p) { __sync_fetch_and_add(&frees, 1); halide_default_free(uc, p); }
int main(void) {
    static float in[64 * 56 * 56], out[64 * 28 * 28];
    struct halide_dimension_t din[4] = {{0, 56, 1, 0}, {0, 56, 56, 0}, {0, 64, 56 * 56, 0}, {0, 1, 64 * 56 * 56, 0}};
    struct halide_dimension_t dout[4] = {{0, 28, 1, 0}, {0, 28, 28, 0}, {0, 64, 28 * 28, 0}, {0, 1, 64 * 28 * 28, 0}};
    struct halide_buffer_t bin = {0}, bout = {0};
    bin.host = (uint8_t *)in; bin.type.code = halide_type_float; bin.type.bits = 32; bin.type.lanes = 1;
    bin.dimensions = 4; bin.dim = din;
    bout = bin; bout.host = (uint8_t *)out; bout.dim = dout;
    for (int i = 0; i < 64 * 56 * 56; i++) in[i] = (float)(i % 7) - 3.0f;
    halide_set_custom_malloc(my_malloc);
    halide_set_custom_free(my_free);
    int rc = cbrm(&bin, &bout);
    printf("rc %d mallocs %d frees %d\n", rc, mallocs, frees);
    return rc != 0 || mallocs == 0 || mallocs != frees;
}
)";
    const std::string exe = c.dir + "/own_allocator";
    std::string cmd = std::string(HFUSE_CC) + " -std=c99 -O2 -fopenmp -I " + c.dir + " " + program + " " + c.dir +
                      "/cbrm.a -ldl -lpthread -lm -o " + exe;
    test::CommandResult b = test::run_command(cmd);
    ASSERT_EQ(b.code, 0) << cmd << "\n" << b.out;
    test::CommandResult r = test::run_command(exe);
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("rc 0 mallocs "), std::string::npos) << r.out;
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

TEST(AotCompile, EmitsHalidesViewsBesideTheLibrary) {
    // cbrm under the x86 plan: the conv computed inside the pool's tiles, all in one pipeline.
    std::string dir = work_dir("emit");
    test::CommandResult r = test::run_cli("compile " + kModels + "conv_bias_relu_maxpool.json -o " + dir +
                                          " --name cbrm --emit stmt,html,assembly,llvm");
    ASSERT_EQ(r.code, 0) << r.out;
    for (const char *f : {".a", ".h", ".stmt", ".stmt.html", ".s", ".ll"}) {
        EXPECT_TRUE(fs::exists(dir + "/cbrm" + f)) << f << "\n" << r.out;
        EXPECT_NE(r.out.find(dir + "/cbrm" + f), std::string::npos) << f << "\n" << r.out;
    }
    const std::string stmt = test::read_file(dir + "/cbrm.stmt");
    EXPECT_NE(stmt.find("produce "), std::string::npos) << stmt.substr(0, 2000);
    EXPECT_NE(test::read_file(dir + "/cbrm.s").find("cbrm_pipeline"), std::string::npos);
    EXPECT_NE(test::read_file(dir + "/cbrm.ll").find("define "), std::string::npos);
    EXPECT_NE(test::read_file(dir + "/cbrm.stmt.html").find("<head>"), std::string::npos);
    r = test::run_cli("compile " + kModels + "conv_bias_relu_maxpool.json -o " + dir + " --name cbrm --emit pdf", true);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("--emit"), std::string::npos) << r.out;
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
