// The CLI's execution flags end to end: --autoschedule, --whole, --parallel-runtime, bench's JSON
// record of them, and run --profile and bench --profile.
#include "test_util.h"

#include "hfuse/model_io.h"
#include "hfuse/op_registry.h"

#include <Halide.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

#include <regex>
#include <sstream>

namespace hfuse {
namespace {

using Result = test::CommandResult;
using test::kModels;

// The last line of `out` that parses as a JSON object.
nlohmann::json last_json(const std::string &out) {
    std::istringstream in(out);
    nlohmann::json j;
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line[0] == '{') j = nlohmann::json::parse(line);
    }
    return j;
}

TEST(CliExec, RunAdams2019Checks) {
    // The default beam search (one pass of 32 states) on the LSTM cell's groups.
    Result r = test::run_cli("run " + kModels + "lstm_cell.json --autoschedule adams2019 --check");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("check 'h_next' against the reference"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("MISMATCH"), std::string::npos) << r.out;
}

TEST(CliExec, RunWholeMullapudi2016Checks) {
    Result r = test::run_cli("run " + kModels + "resnet_block.json --whole --autoschedule mullapudi2016 --check");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find(": ok"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("note:"), std::string::npos) << r.out;
}

TEST(CliExec, RunWholeWithTemplatesChecks) {
    Result r = test::run_cli("run " + kModels + "lstm_cell.json --whole --check");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(r.out.find("MISMATCH"), std::string::npos) << r.out;
}

TEST(CliExec, BenchJsonRecordsTheSchedule) {
    Result r = test::run_cli("bench " + kModels + "conv_bn_relu.json --json --autoschedule li2018 --runs 2");
    ASSERT_EQ(r.code, 0) << r.out;
    nlohmann::json j = last_json(r.out);
    ASSERT_TRUE(j.is_object()) << r.out;
    EXPECT_EQ(j["schedule"], "li2018");
    EXPECT_EQ(j["whole"], false);
    EXPECT_EQ(j["plan"], "x86");
    EXPECT_EQ(j["runs"], 2);
    EXPECT_EQ(j["fallback_groups"], nlohmann::json::array());
    EXPECT_GT(j["median_ms"].get<double>(), 0);

    r = test::run_cli("bench " + kModels + "rnn_cell.json --json --whole --runs 2");
    j = last_json(r.out);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(j["schedule"], "templates");
    EXPECT_EQ(j["whole"], true);
    EXPECT_EQ(j["plan"], "whole");
    EXPECT_EQ(j["groups"], 1);
    EXPECT_EQ(j["intermediate_bytes"], 0);

    // The slowest group's compile, within the whole compile (JIT: from the kernel cache, a group's
    // time is its load, and no JIT runtime is built).
    r = test::run_cli("bench " + kModels + "resnet_block.json --json --runs 1 --no-cache");
    j = last_json(r.out);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_GT(j["group_compile_max_ms"].get<double>(), 0);
    EXPECT_LE(j["group_compile_max_ms"].get<double>(), j["compile_ms"].get<double>());
    // A fresh process: its executor compiled Halide's shared runtime too, in no group's time.
    EXPECT_GT(j["runtime_compile_ms"].get<double>(), 0);
    EXPECT_LE(j["group_compile_max_ms"].get<double>() + j["runtime_compile_ms"].get<double>(),
              j["compile_ms"].get<double>());
    const std::string slowest = j["group_compile_max"];
    EXPECT_TRUE(slowest == "g0" || slowest == "g1") << slowest;
}

TEST(CliExec, PlanarStoresEveryValueDense) {
    // resnet_block: conv1's output, read by conv2 (pads 1), stored channel-blocked unless --planar.
    Result r = test::run_cli("bench " + kModels + "resnet_block.json --json --runs 1");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(last_json(r.out)["blocked_values"], 1);
    r = test::run_cli("bench " + kModels + "resnet_block.json --json --runs 1 --planar");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(last_json(r.out)["blocked_values"], 0);
    r = test::run_cli("run " + kModels + "resnet_block.json --profile --runs 1 --planar --check");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(test::contains(r.out, "0 of the values passed between groups stored channel-blocked")) << r.out;
}

TEST(CliExec, ConcatsInPlaceUnlessCopyConcats) {
    // Two convs of one input concatenated (an Inception module's shape): the Concat's group is
    // computed in place, its template named so; --copy-concats has its group copy, checked alike.
    const std::string model = testing::TempDir() + "/hfuse_cli_exec_test_" + std::to_string(getpid()) + "_cat.json";
    {
        std::ofstream f(model);
        f << R"({"format": "hfuse-model", "version": 1, "name": "cat",
          "inputs": [{"name": "x", "shape": [1, 8, 9, 7]}],
          "weights": {"w1": {"shape": [4, 8, 1, 1], "uniform": [-0.3, 0.3], "seed": 1},
                      "w3": {"shape": [6, 8, 3, 3], "uniform": [-0.3, 0.3], "seed": 2},
                      "w": {"shape": [5, 10, 1, 1], "uniform": [-0.3, 0.3], "seed": 3}},
          "nodes": [{"name": "a", "op": "Conv", "inputs": ["x", "w1"], "attrs": {"kernel_shape": [1, 1]}},
                    {"name": "b", "op": "Conv", "inputs": ["x", "w3"], "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}},
                    {"name": "cat", "op": "Concat", "inputs": ["a", "b"], "attrs": {"axis": 1}},
                    {"name": "y", "op": "Conv", "inputs": ["cat", "w"], "attrs": {"kernel_shape": [1, 1]}}],
          "outputs": ["y"]})";
    }
    auto template_of_cat = [](const std::string &out) {
        const nlohmann::json j = last_json(out);
        for (const nlohmann::json &g : j["group_profile"]) {
            if (g["master"] == "cat") return g["template"].get<std::string>();
        }
        return std::string("(no group)");
    };
    Result r = test::run_cli("bench " + model + " --json --runs 1 --profile --threads 1");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(template_of_cat(r.out), "in_place") << r.out;
    r = test::run_cli("bench " + model + " --json --runs 1 --profile --threads 1 --copy-concats");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(template_of_cat(r.out), "in_place") << r.out;
    for (const char *flag : {"", " --copy-concats"}) {
        r = test::run_cli("run " + model + " --runs 1 --check" + flag);
        EXPECT_EQ(r.code, 0) << flag << "\n" << r.out;
    }
    std::remove(model.c_str());
}

TEST(CliExec, BlockedIoTakesTheInputAndReturnsTheOutputStored) {
    // resnet_block's input (read by conv1, padded, and by conv2's residual Add) and output, stored
    // channel-blocked; packed before and unpacked after the runs, so --check sees NCHW.
    Result r = test::run_cli("run " + kModels + "resnet_block.json --profile --runs 1 --blocked-io --check");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(test::contains(r.out, "model input 'input' taken stored blocked 8, halo 1x1")) << r.out;
    // The output has no reader naming a block: in the host's vectors.
    const int vw = Halide::get_jit_target_from_environment().natural_vector_size<float>();
    EXPECT_TRUE(test::contains(r.out, "model output 'relu2' taken stored blocked " + std::to_string(vw) + ", halo 0x0"))
        << r.out;
    EXPECT_TRUE(test::contains(r.out, "check 'relu2' against the reference")) << r.out;
    r = test::run_cli("bench " + kModels + "resnet_block.json --json --runs 1 --blocked-io --compare");
    ASSERT_EQ(r.code, 0) << r.out;
    r = test::run_cli("bench " + kModels + "resnet_block.json --json --runs 1 --blocked-io");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(last_json(r.out)["blocked_io"], true);
    EXPECT_EQ(last_json(r.out)["blocked_values"], 3);
    r = test::run_cli("run " + kModels + "resnet_block.json --blocked-io --planar");
    EXPECT_NE(r.code, 0);
    EXPECT_TRUE(test::contains(r.out, "--planar excludes --blocked-io")) << r.out;
}

TEST(CliExec, ParallelRuntimeIsChosenRecordedAndChecked) {
    for (const char *runtime : {"auto", "openmp", "halide"}) {
        Result r = test::run_cli("bench " + kModels +
                                 "conv_bias_relu_maxpool.json --json --runs 1 --parallel-runtime " + runtime);
        ASSERT_EQ(r.code, 0) << r.out;
        EXPECT_EQ(last_json(r.out)["parallel_runtime"], runtime);
        r = test::run_cli("run " + kModels + "conv_bias_relu_maxpool.json --check --parallel-runtime " +
                          std::string(runtime));
        ASSERT_EQ(r.code, 0) << r.out;
        EXPECT_EQ(r.out.find("MISMATCH"), std::string::npos) << r.out;
    }
    Result r = test::run_cli("bench " + kModels + "conv_bias_relu_maxpool.json --json --runs 1");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(last_json(r.out)["parallel_runtime"], "auto");
    r = test::run_cli("run " + kModels + "rnn_cell.json --parallel-runtime tbb", true);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_TRUE(test::contains(r.out, "--parallel-runtime")) << r.out;
    EXPECT_TRUE(test::contains(r.out, "tbb")) << r.out;
}

TEST(CliExec, BenchCompareWithAnAutoscheduler) {
    Result r =
        test::run_cli("bench " + kModels + "rnn_cell.json --compare --json --autoschedule mullapudi2016 --runs 2");
    ASSERT_EQ(r.code, 0) << r.out;
    nlohmann::json j = last_json(r.out);
    EXPECT_EQ(j["schedule"], "mullapudi2016");
    EXPECT_GT(j["speedup"].get<double>(), 0);
}

TEST(CliExec, FallbackIsSaid) {
    Result r = test::run_cli("bench " + kModels + "mlp_softmax.json --json --autoschedule li2018 --runs 1");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("hfuse: note: group g1"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Atomic predicated store"), std::string::npos) << r.out;
    EXPECT_EQ(last_json(r.out)["fallback_groups"], nlohmann::json::array({"g1"})) << r.out;
}

TEST(CliExec, RunProfilePrintsEveryGroup) {
    Result r = test::run_cli("run " + kModels + "resnet_block.json --unfused --profile --runs 3 --threads 1");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("profile: median of 3 runs"), std::string::npos) << r.out;
    // The FMA peak of the one thread runs use, on the vectors of Halide's target.
    EXPECT_TRUE(
        std::regex_search(r.out, std::regex(R"(\nFMA peak 1 thread: [0-9.]+ GFLOP/s \((avx512f|avx2\+fma)\)\n)")) ||
        test::contains(r.out, "FMA peak: not measured"))
        << r.out;
    // One line per node of the graph as written, in execution order: name, master, template, ops, ms,
    // share, GFLOP/s, share of the peak, what compiling its kernel cost (ms).
    const std::regex row(
        R"(\n  (g\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+[0-9.]+\s+[0-9.]+%\s+[0-9.]+\s+([0-9.]+%|-)\s+[0-9]+(?=\n))");
    std::vector<std::string> masters, ops, templates;
    for (std::sregex_iterator it(r.out.begin(), r.out.end(), row), end; it != end; ++it) {
        masters.push_back((*it)[2]);
        templates.push_back((*it)[3]);
        ops.push_back((*it)[4]);
    }
    EXPECT_EQ(masters, (std::vector<std::string>{"conv1", "bn1", "relu1", "conv2", "bn2", "add", "relu2"})) << r.out;
    EXPECT_EQ(ops, (std::vector<std::string>{"Conv", "BatchNormalization", "Relu", "Conv", "BatchNormalization", "Add",
                                             "Relu"}))
        << r.out;
    ASSERT_EQ(templates.size(), 7u) << r.out;
    EXPECT_EQ(templates[0].rfind("conv_", 0), 0u) << r.out;
    EXPECT_EQ(templates[1], "simple") << r.out;
}

TEST(CliExec, BenchProfileNamesEachGroupsTemplateFlopsAndShare) {
    // conv_bias_relu_maxpool: one group (conv, relu and pool), planned by x86.
    const std::string model = kModels + "conv_bias_relu_maxpool.json";
    Result r = test::run_cli("bench " + model + " --json --runs 2 --profile --threads 1");
    ASSERT_EQ(r.code, 0) << r.out;
    nlohmann::json j = last_json(r.out);
    ASSERT_TRUE(j["group_profile"].is_array()) << r.out;
    const nlohmann::json &groups = j["group_profile"];
    EXPECT_EQ(j["groups"], groups.size()) << r.out;  // still the number of groups
    EXPECT_EQ(j["threads"], 1) << r.out;             // the peak of the threads hfuse ran with
    if (!j["fma_peak_gflops"].is_null()) EXPECT_GT(j["fma_peak_gflops"].get<double>(), 0) << r.out;
    double flops = 0, share = 0;
    for (const nlohmann::json &g : groups) {
        EXPECT_FALSE(g["template"].get<std::string>().empty()) << g;
        EXPECT_FALSE(g["ops"].get<std::string>().empty()) << g;
        EXPECT_GT(g["flops"].get<double>(), 0) << g;
        EXPECT_GT(g["ms"].get<double>(), 0) << g;
        EXPECT_GT(g["gflops"].get<double>(), 0) << g;
        EXPECT_NEAR(g["gflops"].get<double>(), g["flops"].get<double>() / g["ms"].get<double>() * 1e-6, 1e-9) << g;
        if (!j["fma_peak_gflops"].is_null()) EXPECT_GT(g["peak_share"].get<double>(), 0) << g;
        EXPECT_GT(g["cold_compile_ms"].get<double>(), 0) << g;  // compiled now, or when stored
        flops += g["flops"].get<double>();
        share += g["share"].get<double>();
    }
    ASSERT_FALSE(groups.empty()) << r.out;
    EXPECT_EQ(groups[0]["master"], "conv");
    EXPECT_EQ(groups[0]["template"].get<std::string>().rfind("conv_", 0), 0u) << groups[0];
    EXPECT_EQ(groups[0]["ops"].get<std::string>().rfind("Conv+Relu", 0), 0u) << groups[0];
    // Every node's FLOPs once (no recomputed copies in this plan), and the groups take the run.
    EXPECT_DOUBLE_EQ(flops, graph_flops(load_model(model)));
    EXPECT_GT(share, 0.5) << r.out;
    EXPECT_LE(share, 1.05) << r.out;

    // Without --profile, no per-group runs (hfuse explore's candidates stay cheap).
    r = test::run_cli("bench " + model + " --json --runs 1");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_FALSE(last_json(r.out).contains("group_profile")) << r.out;
    // The table in text, with --compare too (of the fused plan).
    r = test::run_cli("bench " + model + " --runs 1 --profile --compare");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(test::contains(r.out, "speedup")) << r.out;
    EXPECT_TRUE(test::contains(r.out, "profile: median of 1 runs")) << r.out;
    EXPECT_TRUE(test::contains(r.out, "FMA peak")) << r.out;
}

TEST(CliExec, RunProfileOfAPlan) {
    Result r = test::run_cli("run " + kModels + "resnet_block.json --profile");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("profile: median of 10 runs"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("conv1"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("conv2"), std::string::npos) << r.out;
}

TEST(CliExec, BadAutoschedulerIsUsageError) {
    Result r = test::run_cli("run " + kModels + "rnn_cell.json --autoschedule adams2020", true);
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("--autoschedule"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("adams2020"), std::string::npos) << r.out;
    r = test::run_cli("bench " + kModels + "rnn_cell.json --autoschedule", true);
    EXPECT_EQ(r.code, 2) << r.out;
}

TEST(CliExec, WholeExcludesOtherPlanChoices) {
    for (const char *other : {"--unfused", "--rules x86", "--plan p.json"}) {
        Result r = test::run_cli("run " + kModels + "rnn_cell.json --whole " + other, true);
        EXPECT_EQ(r.code, 2) << other << ": " << r.out;
        EXPECT_NE(r.out.find("excludes"), std::string::npos) << other << ": " << r.out;
    }
    Result r = test::run_cli("run " + kModels + "rnn_cell.json --profile --runs 0", true);
    EXPECT_EQ(r.code, 2) << r.out;
}

TEST(CliExec, PlanWholeWritesOneGroup) {
    Result r = test::run_cli("plan " + kModels + "resnet_block.json --whole");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("whole"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace hfuse
