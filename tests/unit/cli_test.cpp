// The hfuse CLI end to end: the contract of `info`, `run` and `demo`, file formats and exit codes.
#include "hfuse/model_io.h"
#include "hfuse/random.h"

#include "hfuse/target.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

namespace hfuse {
namespace {

using Result = test::CommandResult;
using test::contains;
using test::kCbrm;
using test::kModels;
using test::tmp_path;

TEST(Cli, InfoShowsShapesKindsAndFlops) {
    Result r = test::run_cli("info " + kCbrm);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("1x64x56x56"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("1x64x28x28"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("complex-out-fusable"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("window"), std::string::npos) << r.out;
    // 2 * 64*56*56 outputs * 64*9 MACs = 231.211 MFLOP, + 0.201 for the bias
    EXPECT_NE(r.out.find("231.412"), std::string::npos) << r.out;
}

TEST(Cli, RunWritesOutputsThatMatchTheSummaryRun) {
    std::vector<float> x = uniform_values(64 * 56 * 56, -1, 1, 5);
    write_f32_file(tmp_path("in.f32"), x.data(), x.size());
    Result r = test::run_cli("run " + kCbrm + " --unfused --input " + tmp_path("in.f32") + " --output " +
                             tmp_path("out.f32") + " --threads 2 --check");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("ok"), std::string::npos) << r.out;
    std::vector<float> out = read_f32_file(tmp_path("out.f32"), 64 * 28 * 28, "output");
    // NAME=FILE form gives the same bytes.
    r = test::run_cli("run " + kCbrm + " --unfused --input input=" + tmp_path("in.f32") +
                      " --output pool=" + tmp_path("out2.f32"));
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(read_f32_file(tmp_path("out2.f32"), 64 * 28 * 28, "output"), out);
}

TEST(Cli, RunWithoutFilesPrintsSummary) {
    Result r = test::run_cli("run " + kModels + "lstm_cell.json --unfused --check");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("output 'h_next' [1x128]"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("output 'c_next' [1x128]"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("generated"), std::string::npos) << r.out;
}

TEST(Cli, BenchJsonContract) {
    Result r = test::run_cli("bench " + kModels + "rnn_cell.json --runs 3 --json");
    ASSERT_EQ(r.code, 0) << r.out;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["model"], "rnn_cell");
    EXPECT_EQ(j["plan"], "x86");
    EXPECT_EQ(j["runs"], 3);
    EXPECT_GT(j["median_ms"].get<double>(), 0.0);
    EXPECT_LE(j["min_ms"].get<double>(), j["median_ms"].get<double>());

    r = test::run_cli("bench " + kModels + "rnn_cell.json --runs 3 --json --compare");
    ASSERT_EQ(r.code, 0) << r.out;
    j = nlohmann::json::parse(r.out);
    EXPECT_NEAR(j["speedup"].get<double>(), j["unfused_ms"].get<double>() / j["fused_ms"].get<double>(), 1e-9);
    EXPECT_EQ(j["unfused_groups"], 4);
    EXPECT_EQ(j["fused_groups"], 1);  // both products and the tanh in one kernel
}

// --against times another plan file interleaved; with --profile each group is set beside the other
// plan's group computing the same nodes (the fused group has none: no group of the plan with every op
// apart holds all its nodes).
TEST(Cli, BenchAgainstAnotherPlan) {
    Result r = test::run_cli("plan " + kCbrm + " -o " + tmp_path("fused.json"));
    ASSERT_EQ(r.code, 0) << r.out;
    r = test::run_cli("plan " + kCbrm + " --rules none -o " + tmp_path("apart.json"));
    ASSERT_EQ(r.code, 0) << r.out;
    r = test::run_cli("bench " + kCbrm + " --plan " + tmp_path("fused.json") + " --against " + tmp_path("apart.json") +
                      " --runs 5 --json --profile");
    ASSERT_EQ(r.code, 0) << r.out;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["against"], tmp_path("apart.json"));
    EXPECT_NEAR(j["speedup"].get<double>(), j["against_ms"].get<double>() / j["plan_ms"].get<double>(), 1e-9);
    EXPECT_EQ(j["plan_groups"], 1);
    EXPECT_GT(j["against_groups"].get<int>(), 1);
    // The spread of the interleaved chunks' speedups, and whether a side's runs varied past 2x.
    EXPECT_LE(j["speedup_min"].get<double>(), j["speedup_max"].get<double>());
    EXPECT_TRUE(j["noisy"].is_boolean());
    ASSERT_EQ(j["group_profile"].size(), 1u);
    EXPECT_TRUE(j["group_profile"][0]["against"].is_null());  // no group of the other plan has its nodes
    // A plan against itself: every group matched by its nodes.
    r = test::run_cli("bench " + kCbrm + " --plan " + tmp_path("apart.json") + " --against " + tmp_path("apart.json") +
                      " --runs 5 --json --profile");
    ASSERT_EQ(r.code, 0) << r.out;
    j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["group_profile"].size(), j["plan_groups"].get<size_t>());
    for (const auto &g : j["group_profile"]) {
        EXPECT_EQ(g["against"], g["name"]) << g.dump();
        EXPECT_GT(g["against_ms"].get<double>(), 0.0) << g.dump();
    }
    // --against and --compare exclude each other; a missing plan file is an error naming it.
    r = test::run_cli("bench " + kCbrm + " --against " + tmp_path("apart.json") + " --compare");
    EXPECT_NE(r.code, 0) << r.out;
    r = test::run_cli("bench " + kCbrm + " --against " + tmp_path("missing.json"));
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("missing.json"), std::string::npos) << r.out;
}

TEST(Cli, BenchSaysTheSpreadAndCountsGroupsInEnglish) {
    Result r = test::run_cli("bench " + kCbrm + " --runs 10 --compare");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "fused (x86, 1 group, schedule templates)")) << r.out;
    EXPECT_TRUE(contains(r.out, "speedup per chunk of runs timed together: min ")) << r.out;
    r = test::run_cli("bench " + kCbrm + " --runs 2");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "plan x86 (1 group)")) << r.out;
}

TEST(Cli, HelpShowsDefaultsAndFlagsPlainly) {
    Result r = test::run_cli("bench --help");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "--runs INT:INT in [1 - 100000]=20")) << r.out;
    r = test::run_cli("explore --help");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "  --no-cache ")) << r.out;
    EXPECT_FALSE(contains(r.out, "{false}")) << r.out;
}

TEST(Cli, VersionNamesHfuseHalideAndTheTarget) {
    Result r = test::run_cli("--version");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "hfuse 0.1 (sources ")) << r.out;
    EXPECT_TRUE(contains(r.out, "Halide 14.")) << r.out;
    EXPECT_TRUE(contains(r.out, "default target: " + host_target().to_string())) << r.out;
    EXPECT_TRUE(contains(r.out, "CPU: ")) << r.out;
}

TEST(Cli, Demo) {
    Result r = test::run_cli("demo");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("demo: OK"), std::string::npos) << r.out;
}

TEST(CliErrors, WrongInputFileSize) {
    std::vector<float> x(100);
    write_f32_file(tmp_path("small.f32"), x.data(), x.size());
    Result r = test::run_cli("run " + kCbrm + " --input " + tmp_path("small.f32"));
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("input 'input'"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("400 bytes"), std::string::npos) << r.out;
}

TEST(CliErrors, RunChecksThePlanBeforeSayingItsInputs) {
    // A plan refused (its structure, or a group's schedule) is the only thing `run` prints.
    const std::string plan = tmp_path("run_first.plan.json");
    std::ofstream(plan)
        << R"({"format": "hfuse-plan", "version": 1, "groups": [{"nodes": ["conv", "relu", "pool", "nope"]}]})";
    Result r = test::run_cli("run " + kCbrm + " --plan " + plan);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_EQ(r.out, "hfuse: error: " + plan + ": field 'groups[0].nodes': unknown node 'nope'\n");
    std::ofstream(plan) << R"({"format": "hfuse-plan", "version": 1, "groups": [{"nodes": ["conv", "relu", "pool"],
        "schedule": {"template": "simple", "vector_width": 3}}]})";
    r = test::run_cli("run " + kCbrm + " --plan " + plan);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_TRUE(contains(r.out, "field 'schedule.vector_width'")) << r.out;
    EXPECT_FALSE(contains(r.out, "generated")) << r.out;
    // Run, it says the inputs it generated, as before.
    r = test::run_cli("run " + kCbrm);
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_EQ(r.out.rfind("input 'input' [1x64x56x56]: generated, uniform [-1, 1] seed 1000\n", 0), 0u) << r.out;
}

TEST(CliErrors, BadModelIsOneLineNonZero) {
    std::ofstream(tmp_path("bad.json"))
        << R"({"format": "hfuse-model", "version": 1, "inputs": [{"name": "x", "shape": [1, 2]}],
        "nodes": [{"name": "n", "op": "Frobnicate", "inputs": ["x"]}], "outputs": ["n"]})";
    for (const char *cmd : {"info", "run"}) {
        Result r = test::run_cli(std::string(cmd) + " " + tmp_path("bad.json"));
        EXPECT_EQ(r.code, 1) << r.out;
        EXPECT_EQ(r.out, "hfuse: error: " + tmp_path("bad.json") +
                             ": node 'n' (Frobnicate): field 'op': unknown op 'Frobnicate'\n");
    }
}

TEST(CliErrors, UsageErrorsExitTwo) {
    EXPECT_EQ(test::run_cli("").code, 2);
    EXPECT_EQ(test::run_cli("frobnicate").code, 2);
    EXPECT_EQ(test::run_cli("run").code, 2);
    EXPECT_EQ(test::run_cli("run " + kCbrm + " --threads -3").code, 2);
    Result r = test::run_cli("run " + kModels + "lstm_cell.json --input " + tmp_path("in.f32"));
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("NAME=FILE"), std::string::npos) << r.out;
    r = test::run_cli("run " + kCbrm + " --input nosuch=" + tmp_path("in.f32"));
    EXPECT_EQ(r.code, 2) << r.out;
    EXPECT_NE(r.out.find("no tensor named 'nosuch'"), std::string::npos) << r.out;
}

TEST(CliErrors, MissingModelFile) {
    Result r = test::run_cli("run /nonexistent.json");
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find("/nonexistent.json"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace hfuse
