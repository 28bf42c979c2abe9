// The CLI's execution flags end to end: --autoschedule, --whole, --parallel-runtime, bench's JSON
// record of them, and run --profile.
#include "test_util.h"

#include <Halide.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <regex>
#include <sstream>

namespace hfuse {
namespace {

using Result = test::CommandResult;

const std::string kModels = std::string(HFUSE_SOURCE_DIR) + "/models/";

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

    // The slowest group's compile, within the whole compile.
    r = test::run_cli("bench " + kModels + "resnet_block.json --json --runs 1");
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
    Result r = test::run_cli("run " + kModels + "resnet_block.json --unfused --profile --runs 3");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("profile: median of 3 runs"), std::string::npos) << r.out;
    // One line per node of the graph as written, in execution order: name, master, members, ms, share.
    const std::regex row(R"(\n  (g\d+)\s+(\S+)\s+1\s+[0-9.]+\s+[0-9.]+%)");
    std::vector<std::string> masters;
    for (std::sregex_iterator it(r.out.begin(), r.out.end(), row), end; it != end; ++it) masters.push_back((*it)[2]);
    EXPECT_EQ(masters, (std::vector<std::string>{"conv1", "bn1", "relu1", "conv2", "bn2", "add", "relu2"})) << r.out;
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
