// `hfuse plan` and `hfuse run --plan/--rules/--unfused` end to end: the table, plan files, the Graphviz
// drawing, and exit codes.
#include "hfuse/model_io.h"

#include "test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

namespace hfuse {
namespace {
using test::contains;
using test::read_file;

using Result = test::CommandResult;
using test::kCbrm;
using test::kModels;
using test::tmp_path;

TEST(CliPlan, PrintsTheTable) {
    Result r = test::run_cli("plan " + kCbrm);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "plan for 'conv_bias_relu_maxpool' (rules: x86): 1 group, 3 ops")) << r.out;
    EXPECT_TRUE(contains(r.out, "master")) << r.out;
    EXPECT_TRUE(contains(r.out, "conv compute_at, relu inline, pool output")) << r.out;
    EXPECT_TRUE(contains(r.out, "intermediates kept out of memory")) << r.out;

    r = test::run_cli("plan " + kCbrm + " --rules tvm");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "(rules: tvm): 2 groups")) << r.out;
    r = test::run_cli("plan " + kCbrm + " --rules tvm --rules x86");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "(rules: tvm, x86): 1 group")) << r.out;
    r = test::run_cli("plan " + kCbrm + " --rules none");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "3 groups")) << r.out;

    // A folded BatchNormalization is shown with its conv.
    r = test::run_cli("plan " + kModels + "conv_bn_relu.json");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "bn folded")) << r.out;
    // The count of ops is after the rewrites, and says so where they changed it.
    EXPECT_TRUE(contains(r.out,
                         "2 ops (the model's 3 nodes after rewrites: 1 folded into others, 0 removed; "
                         "max_group_ops counts ops)"))
        << r.out;
}

TEST(CliPlan, RuleNodeNamesTheModelLacksAreNoted) {
    const std::string rules = tmp_path("typo.rules.json");
    std::ofstream(rules) << R"({"format": "hfuse-rules", "version": 1, "name": "typo",
        "fuse": [{"producer": "elementwise", "consumers": ["elementwise"], "placement": "inline"}],
        "opaque_nodes": ["conv", "cnov"], "stop_after": ["rleu"]})";
    Result r = test::run_cli("plan " + kCbrm + " --rules " + rules, true);
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "hfuse: note: rules " + rules +
                                    ": opaque_nodes names 'cnov', which model "
                                    "'conv_bias_relu_maxpool' has no node of"))
        << r.out;
    EXPECT_TRUE(contains(r.out, "stop_after names 'rleu'")) << r.out;
    EXPECT_FALSE(contains(r.out, "names 'conv'")) << r.out;
}

TEST(CliPlan, WrittenPlanRunsToTheSameBytes) {
    const std::string plan = tmp_path("cbrm.plan.json"), o1 = tmp_path("o1.f32"), o2 = tmp_path("o2.f32");
    Result r = test::run_cli("plan " + kCbrm + " -o " + plan);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "plan written to " + plan)) << r.out;
    nlohmann::json j = nlohmann::json::parse(read_file(plan));
    EXPECT_EQ(j["format"], "hfuse-plan");
    EXPECT_EQ(j["groups"].size(), 1u);

    r = test::run_cli("run " + kCbrm + " --plan " + plan + " --output " + o1);
    ASSERT_EQ(r.code, 0) << r.out;
    r = test::run_cli("run " + kCbrm + " --output " + o2);
    ASSERT_EQ(r.code, 0) << r.out;
    const std::string a = read_file(o1), b = read_file(o2);
    EXPECT_EQ(a.size(), 64u * 28 * 28 * 4);
    EXPECT_TRUE(a == b) << "outputs differ";

    // The plan also passes --check against the reference.
    r = test::run_cli("run " + kCbrm + " --plan " + plan + " --check");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "ok")) << r.out;
}

TEST(CliPlan, WrittenToStdoutAlone) {
    // -o - and -o /dev/stdout: the JSON alone on stdout (redirected to a file here), the same bytes as
    // -o FILE writes; the table on stderr.
    const std::string file = tmp_path("file.plan.json");
    ASSERT_EQ(test::run_cli("plan " + kCbrm + " -o " + file).code, 0);
    for (const std::string &out : {"-", "/dev/stdout"}) {
        const std::string got = tmp_path("stdout.plan.json"), said = tmp_path("stderr.txt");
        Result r = test::run_command("{ " + std::string(HFUSE_CLI) + " plan " + kCbrm + " -o " + out + " > " + got +
                                     " 2> " + said + "; }");
        ASSERT_EQ(r.code, 0) << out << ": " << r.out;
        EXPECT_EQ(read_file(got), read_file(file)) << out;
        EXPECT_TRUE(contains(read_file(said), "plan for 'conv_bias_relu_maxpool'")) << out << ": " << read_file(said);
    }
    Result help = test::run_cli("plan --help");
    EXPECT_TRUE(contains(help.out, "- (or /dev/stdout) prints it alone on stdout")) << help.out;
}

TEST(CliPlan, PlanWithFoldedNodesRunsBack) {
    const std::string plan = tmp_path("resnet.plan.json");
    Result r = test::run_cli("plan " + kModels + "resnet_block.json --rules tvm -o " + plan);
    ASSERT_EQ(r.code, 0) << r.out;
    r = test::run_cli("run " + kModels + "resnet_block.json --plan " + plan + " --check");
    EXPECT_EQ(r.code, 0) << r.out;
}

TEST(CliPlan, UnfusedPlanFileRunsBack) {
    // `plan --unfused -o` writes the graph as written (the BatchNormalization its own group); `run
    // --plan` maps plans onto the simplified graph, where bn was folded into conv. The written plan
    // must be accepted by `run --plan` (or `plan --unfused -o` must refuse to write one).
    const std::string plan = tmp_path("unfused.plan.json");
    Result r = test::run_cli("plan " + kModels + "conv_bn_relu.json --unfused -o " + plan);
    ASSERT_EQ(r.code, 0) << r.out;
    r = test::run_cli("run " + kModels + "conv_bn_relu.json --plan " + plan + " --check");
    EXPECT_EQ(r.code, 0) << r.out;
}

TEST(CliPlan, DotDrawingHasClusters) {
    const std::string dot = tmp_path("resnet.dot"), svg = tmp_path("resnet.svg");
    Result r = test::run_cli("plan " + kModels + "resnet_block.json --dot " + dot);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "(render: dot -Tsvg " + dot + " -o " + svg + ")")) << r.out;
    const std::string text = read_file(dot);
    EXPECT_TRUE(contains(text, "digraph")) << text;
    EXPECT_TRUE(contains(text, "subgraph \"cluster_g0\"")) << text;
    EXPECT_TRUE(contains(text, "subgraph \"cluster_g1\"")) << text;
    EXPECT_FALSE(contains(text, "cluster_g2")) << text;
    EXPECT_TRUE(contains(text, "peripheries=2")) << "masters are marked: " << text;
    EXPECT_TRUE(contains(text, "bn1 (folded)")) << text;

    if (std::system("command -v dot >/dev/null 2>&1") != 0) GTEST_SKIP() << "graphviz `dot` is not installed";
    Result d = test::run_command("dot -Tsvg " + dot + " -o " + svg);
    EXPECT_EQ(d.code, 0) << d.out << "\n" << text;
    EXPECT_TRUE(contains(read_file(svg), "<svg")) << d.out;
    // Every bundled model and rule set draws.
    for (const char *m : {"lstm_cell", "mlp_softmax", "conv_bn_relu"}) {
        for (const char *rules : {"x86", "tvm"}) {
            const std::string f = tmp_path(std::string(m) + "_" + rules + ".dot");
            ASSERT_EQ(test::run_cli("plan " + kModels + m + ".json --rules " + rules + " --dot " + f).code, 0);
            Result rd = test::run_command("dot -Tsvg " + f + " -o " + svg);
            EXPECT_EQ(rd.code, 0) << m << " " << rules << ": " << rd.out;
        }
    }
}

TEST(CliPlan, DotEscapesNames) {
    // Node names are free-form strings (ONNX exports use "/layer1/conv/Conv"); quotes and backslashes
    // in them must not break the drawing.
    const std::string model = tmp_path("names.json"), dot = tmp_path("names.dot"), svg = tmp_path("names.svg");
    std::ofstream(model) << R"({"format": "hfuse-model", "version": 1, "name": "we\"ird",
      "inputs": [{"name": "in:put", "shape": [1, 2, 4, 4]}],
      "weights": {"w": {"shape": [2, 2, 1, 1], "uniform": [-0.5, 0.5], "seed": 1}},
      "nodes": [{"name": "/layer1/conv \"a\"", "op": "Conv", "inputs": ["in:put", "w"], "attrs": {"kernel_shape": [1, 1]}},
                {"name": "re\\lu", "op": "Relu", "inputs": ["/layer1/conv \"a\""]}],
      "outputs": ["re\\lu"]})";
    Result r = test::run_cli("plan " + model + " --dot " + dot);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(read_file(dot), "cluster_g0"));
    if (std::system("command -v dot >/dev/null 2>&1") != 0) GTEST_SKIP() << "graphviz `dot` is not installed";
    Result d = test::run_command("dot -Tsvg " + dot + " -o " + svg);
    EXPECT_EQ(d.code, 0) << d.out << "\n" << read_file(dot);
}

TEST(CliPlan, PlanWithRulesIsAUsageError) {
    const std::string plan = tmp_path("usage.plan.json");
    ASSERT_EQ(test::run_cli("plan " + kCbrm + " -o " + plan).code, 0);
    Result r = test::run_cli("run " + kCbrm + " --plan " + plan + " --rules x86");
    EXPECT_EQ(r.code, 2) << r.out;
    r = test::run_cli("run " + kCbrm + " --plan " + plan + " --unfused");
    EXPECT_EQ(r.code, 2) << r.out;
    r = test::run_cli("plan " + kCbrm + " --plan " + plan + " --rules tvm");
    EXPECT_EQ(r.code, 2) << r.out;
    r = test::run_cli("run " + kCbrm + " --rules x86 --unfused");
    EXPECT_EQ(r.code, 2) << r.out;
}

TEST(CliPlan, BadPlanFileIsOneLineNamingIt) {
    const std::string plan = tmp_path("bad.plan.json");
    std::ofstream(plan) << R"({"format": "hfuse-plan", "version": 1,
        "groups": [{"nodes": ["conv", "pool"]}, {"nodes": ["relu"]}]})";
    Result r = test::run_cli("run " + kCbrm + " --plan " + plan, true);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_EQ(r.out.rfind("hfuse: error: " + plan + ": ", 0), 0u) << r.out;
    EXPECT_TRUE(contains(r.out, "not convex")) << r.out;

    std::ofstream(plan)
        << R"({"format": "hfuse-plan", "version": 1, "groups": [{"nodes": ["conv", "relu", "pool", "nope"]}]})";
    r = test::run_cli("run " + kCbrm + " --plan " + plan, true);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_EQ(r.out, "hfuse: error: " + plan + ": field 'groups[0].nodes': unknown node 'nope'\n");

    std::ofstream(plan) << "not json";
    r = test::run_cli("run " + kCbrm + " --plan " + plan, true);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_TRUE(contains(r.out, plan)) << r.out;

    r = test::run_cli("run " + kCbrm + " --plan " + tmp_path("nonexistent.plan.json"), true);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_TRUE(contains(r.out, tmp_path("nonexistent.plan.json"))) << r.out;
}

// A plan file of the conv+bias+relu+maxpool model (one group, g0, led by 'conv' on conv_cv) with
// `edit` applied to that group's schedule; its path.
std::string plan_with_schedule(const std::string &name, const std::function<void(nlohmann::json &)> &edit) {
    const std::string plan = tmp_path(name);
    EXPECT_EQ(test::run_cli("plan " + kCbrm + " -o " + plan).code, 0);
    nlohmann::json j = nlohmann::json::parse(read_file(plan));
    EXPECT_EQ(j["groups"][0]["schedule"]["template"], "conv_cv");
    edit(j["groups"][0]["schedule"]);
    std::ofstream(plan) << j.dump(2);
    return plan;
}

TEST(CliPlan, ScheduleErrorsNameThePlanFileAndTheGroup) {
    // Parameters read while lowering (op_lowerings: conv_cv's tile_positions) and while composing,
    // missing or out of range, and an unknown template: each command that composes the plan says
    // the plan file, the group, the node and the field, in one line.
    const std::string at = ": group 'g0': node 'conv' (Conv): field 'schedule.";
    struct Case {
        std::string file;
        std::function<void(nlohmann::json &)> edit;
        std::string error;
    };
    const std::vector<Case> cases = {
        {"range.plan.json", [](nlohmann::json &s) { s["tile_positions"] = 99; },
         "tile_positions': 99 is outside [1, 16] for these shapes"},
        {"missing.plan.json", [](nlohmann::json &s) { s.erase("tile_c_vectors"); },
         "tile_c_vectors': missing (expected an integer)"},
        {"template.plan.json", [](nlohmann::json &s) { s["template"] = "nope"; }, "template': unknown template 'nope'"},
        {"type.plan.json", [](nlohmann::json &s) { s["block_rows"] = "x"; }, "block_rows': expected an integer"},
    };
    for (const Case &c : cases) {
        const std::string plan = plan_with_schedule(c.file, c.edit);
        for (const std::string &cmd : std::vector<std::string>{"run", "bench --runs 1", "explain",
                                                               "compile -o " + tmp_path("lib") + " --name m"}) {
            Result r = test::run_cli(cmd + " " + kCbrm + " --plan " + plan, true);
            EXPECT_EQ(r.code, 1) << cmd << ": " << r.out;
            EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << cmd << ": " << r.out;
            EXPECT_EQ(r.out.rfind("hfuse: error: " + plan + at + c.error, 0), 0u) << cmd << ": " << r.out;
        }
    }
}

TEST(CliPlan, PlanChecksThePlanFilesSchedules) {
    // As run, bench, explain and compile do: the same error, and no plan printed or written.
    const std::string plan =
        plan_with_schedule("checked.plan.json", [](nlohmann::json &s) { s["tile_positions"] = 99; });
    const std::string out = tmp_path("checked.out.json");
    Result r = test::run_cli("plan " + kCbrm + " --plan " + plan + " -o " + out);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_EQ(r.out, "hfuse: error: " + plan +
                         ": group 'g0': node 'conv' (Conv): field 'schedule.tile_positions': 99 is outside [1, 16] "
                         "for these shapes\n");
    EXPECT_FALSE(std::ifstream(out).good());
    // A good plan file is shown and written as before.
    const std::string good = plan_with_schedule("good.plan.json", [](nlohmann::json &) {});
    r = test::run_cli("plan " + kCbrm + " --plan " + good + " -o " + out);
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "plan written to " + out)) << r.out;
}

TEST(CliPlan, BadRulesFileIsOneLineNamingIt) {
    const std::string rules = tmp_path("bad.rules.json");
    std::ofstream(rules) << R"({"format": "hfuse-rules", "version": 1, "name": "bad",
        "fuse": [{"producer": "elementwise", "consumers": ["elementwise"], "placement": "sideways"}]})";
    Result r = test::run_cli("plan " + kCbrm + " --rules " + rules, true);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
    EXPECT_TRUE(contains(r.out, rules)) << r.out;
    EXPECT_TRUE(contains(r.out, "fuse[0].placement")) << r.out;
    r = test::run_cli("plan " + kCbrm + " --rules nosuchrules", true);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_TRUE(contains(r.out, "nosuchrules")) << r.out;
}

}  // namespace
}  // namespace hfuse
