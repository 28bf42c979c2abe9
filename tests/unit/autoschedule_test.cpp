// Halide's autoschedulers instead of hfuse's templates: every bundled model, scheduled per group of
// its x86 plan and as one whole-model pipeline, by each autoscheduler, matches the unfused executor.
// Each case runs in its own process under ctest, so ctest -j parallelizes them.
//
// Adams2019 runs greedily here (HL_BEAM_SIZE=1 unless set): its default beam of 32 takes 17-27 s on
// each conv model, the greedy search about 1 s, through the same plugin, estimates and cost model.
// The CLI tests (cli_exec_test.cpp) run the default beam on a small model.
#include "exec/autoschedule.h"
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/model_io.h"
#include "hfuse/planner.h"
#include "hfuse/reference.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <cstdlib>
#include <tuple>
#include <vector>

namespace hfuse {
namespace {

using Case = std::tuple<std::string, ScheduleSource, bool>;  // model, autoscheduler, whole model

class Autoschedule : public testing::TestWithParam<Case> {
protected:
    static void SetUpTestSuite() { setenv("HL_BEAM_SIZE", "1", 0); }
};

TEST_P(Autoschedule, MatchesUnfused) {
    const auto &[model, source, whole] = GetParam();
    Graph g = load_model(std::string(HFUSE_SOURCE_DIR) + "/models/" + model + ".json");
    test::ModelInputs in = test::make_inputs(g);
    auto expected = Executor(g, Executor::unfused_partition(g)).run(in.buffers);

    ExecutorOptions options;
    options.schedule = source;
    Executor ex(whole ? whole_model_plan(g) : plan_fusion(g, {load_rules("x86")}), options);
    if (whole) EXPECT_EQ(ex.num_groups(), 1);
    for (const GroupInfo &gi : ex.groups()) {
        if (gi.note.empty()) {
            EXPECT_EQ(gi.schedule, to_string(source)) << gi.name;
            EXPECT_EQ(gi.schedule_template, to_string(source)) << gi.name;
            continue;
        }
        // The one known fallback: Li2018 vectorizes Softmax's 10-wide reduction with an atomic
        // predicated store, which Halide 14 cannot compile (halide/Halide#4298).
        EXPECT_EQ(gi.schedule, "templates");
        // The template's name (a gemm template for the Gemm + Softmax group, gemm_nv or gemm_dot as the
        // host's target has it; simple for the whole model).
        EXPECT_TRUE(gi.schedule_template == "gemm_dot" || gi.schedule_template == "gemm_nv" ||
                    gi.schedule_template == "simple")
            << gi.schedule_template;
        EXPECT_TRUE(source == ScheduleSource::Li2018 && model == "mlp_softmax") << gi.name << ": " << gi.note;
        EXPECT_NE(gi.note.find("Atomic predicated store"), std::string::npos) << gi.note;
    }
    auto actual = ex.run(in.buffers);
    for (const std::string &out : g.outputs) {
        ASSERT_EQ(shape_of(actual.at(out)), shape_of(expected.at(out))) << out;
        auto cmp =
            reference::compare(actual.at(out).data(), expected.at(out).data(), expected.at(out).number_of_elements());
        EXPECT_LE(cmp.relative(), 1e-4) << out << ": max abs error " << cmp.max_abs_error << " at scale " << cmp.scale;
    }
}

std::string case_name(const testing::TestParamInfo<Case> &info) {
    return std::get<0>(info.param) + "_" + to_string(std::get<1>(info.param)) +
           (std::get<2>(info.param) ? "_whole" : "_per_group");
}

// The conv models plan as one group holding the whole rewritten model (checked below), the same
// pipeline as whole_model_plan gives: they run whole only.
const std::vector<std::string> kSingleGroupModels = {"conv_bn_relu", "dwconv_bn_relu", "conv3x3_bn_relu",
                                                     "conv_bias_relu_maxpool"};
// The rest run both ways. The x86 plans of the cells are one group too (sibling products), but not the
// whole graph's order of nodes; resnet_block and mlp_softmax plan as several groups (checked below).
const std::vector<std::string> kMultiGroupModels = {"resnet_block", "rnn_cell", "lstm_cell", "mlp_softmax"};
const ScheduleSource kAutoschedulers[] = {ScheduleSource::Mullapudi2016, ScheduleSource::Adams2019,
                                          ScheduleSource::Li2018};

INSTANTIATE_TEST_SUITE_P(Whole, Autoschedule,
                         testing::Combine(testing::ValuesIn(kSingleGroupModels), testing::ValuesIn(kAutoschedulers),
                                          testing::Values(true)),
                         case_name);
INSTANTIATE_TEST_SUITE_P(WholeAndPerGroup, Autoschedule,
                         testing::Combine(testing::ValuesIn(kMultiGroupModels), testing::ValuesIn(kAutoschedulers),
                                          testing::Bool()),
                         case_name);

TEST(AutoscheduleModels, ConvModelsPlanAsOneWholeGroup) {
    for (const std::string &model : kSingleGroupModels) {
        Graph g = load_model(std::string(HFUSE_SOURCE_DIR) + "/models/" + model + ".json");
        FusedGraph plan = plan_fusion(g, {load_rules("x86")});
        ASSERT_EQ(plan.groups.size(), 1u) << model;
        EXPECT_EQ(plan.groups[0].nodes, whole_model_plan(g).groups[0].nodes) << model;
    }
    for (const std::string &model : {"resnet_block", "mlp_softmax"}) {
        Graph g = load_model(std::string(HFUSE_SOURCE_DIR) + "/models/" + model + ".json");
        EXPECT_GT(plan_fusion(g, {load_rules("x86")}).groups.size(), 1u) << model;
    }
}

TEST(AutoschedulePlugins, FoundAndNamed) {
    for (ScheduleSource s : {ScheduleSource::Mullapudi2016, ScheduleSource::Adams2019, ScheduleSource::Li2018}) {
        std::string path = exec::autoscheduler_plugin_path(s);
        struct stat st;
        EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
        EXPECT_NE(path.find(std::string("libautoschedule_") + to_string(s) + ".so"), std::string::npos) << path;
    }
    EXPECT_EQ(exec::autoscheduler_name(ScheduleSource::Adams2019), "Adams2019");
    EXPECT_THROW(exec::autoscheduler_name(ScheduleSource::Templates), Error);
    EXPECT_EQ(exec::autoscheduler_parallelism(3), 3);
    EXPECT_GE(exec::autoscheduler_parallelism(0), 1);
}

TEST(AutoscheduleFallback, OffMakesTheHalideFailureAnError) {
    Graph g = load_model(std::string(HFUSE_SOURCE_DIR) + "/models/mlp_softmax.json");
    ExecutorOptions options;
    options.schedule = ScheduleSource::Li2018;
    options.fallback_to_templates = false;
    try {
        Executor ex(whole_model_plan(g), options);
        FAIL() << "no error";
    } catch (const Error &e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("Li2018"), std::string::npos) << what;
        EXPECT_NE(what.find("group 'whole'"), std::string::npos) << what;
        EXPECT_NE(what.find("mlp_softmax.json"), std::string::npos) << what;
    }
}

TEST(AutoscheduleCache, IdenticalGroupsAreAutoscheduledOnce) {
    Graph g = load_model(std::string(HFUSE_SOURCE_DIR) + "/models/lstm_cell.json");
    ExecutorOptions options;
    options.schedule = ScheduleSource::Mullapudi2016;
    Executor ex(g, Executor::unfused_partition(g), options);
    EXPECT_LT(ex.num_compiled(), ex.num_groups());
    test::ModelInputs in = test::make_inputs(g);
    auto actual = ex.run(in.buffers);
    auto expected = reference::run(g, in.reference);
    for (const std::string &out : g.outputs) {
        auto cmp =
            reference::compare(actual.at(out).data(), expected.at(out).data.data(), expected.at(out).data.size());
        EXPECT_LE(cmp.relative(), 1e-4) << out;
    }
}

}  // namespace
}  // namespace hfuse
