// ModelPipeline: a whole plan as one Halide pipeline (the form `hfuse compile` writes), run here by
// JIT: every bundled model under the x86, tvm and unfused plans matches the independent reference and
// the per-group Executor; shapes are pinned; argument names and order follow the model.
#include "hfuse/model_pipeline.h"
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/fusion_rules.h"
#include "hfuse/model_io.h"
#include "hfuse/passes.h"
#include "hfuse/planner.h"
#include "hfuse/reference.h"

#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace hfuse {
namespace {

using nlohmann::json;
using test::kModels;

FusedGraph plan_named(const Graph &g, const std::string &rules) {
    if (rules == "unfused") return singleton_groups(g);
    return plan_fusion(g, {load_rules(rules)});
}

void expect_close(const TensorBuffer &actual, const float *expected, size_t n, double tolerance,
                  const std::string &what) {
    auto cmp = reference::compare(actual.data(), expected, n);
    EXPECT_LE(cmp.relative(), tolerance) << what << ": max abs error " << cmp.max_abs_error << " at scale "
                                         << cmp.scale;
    EXPECT_GT(cmp.scale, 1e-3) << what << ": (nearly) all zero; the comparison would prove nothing";
}

class ModelPipelineModels : public testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(ModelPipelineModels, MatchesReferenceAndExecutor) {
    const auto &[model, rules] = GetParam();
    Graph g = load_model(kModels + model + ".json");
    FusedGraph plan = plan_named(g, rules);
    test::ModelInputs in = test::make_inputs(g);
    ModelPipeline mp(plan);
    auto actual = mp.run(in.buffers);
    auto expected = reference::run(g, in.reference);
    Executor ex(plan);
    auto jit = ex.run(in.buffers);
    for (const std::string &out : g.outputs) {
        ASSERT_EQ(shape_of(actual.at(out)), expected.at(out).shape) << out;
        expect_close(actual.at(out), expected.at(out).data.data(), expected.at(out).data.size(), 1e-4,
                     out + " against the reference");
        // Same Funcs, same schedules: the executor's result to float rounding of a different bounds split.
        expect_close(actual.at(out), jit.at(out).data(), jit.at(out).number_of_elements(), 1e-5,
                     out + " against the executor");
    }
}

INSTANTIATE_TEST_SUITE_P(Models, ModelPipelineModels,
                         testing::Combine(testing::Values("conv_bn_relu", "dwconv_bn_relu", "conv3x3_bn_relu",
                                                          "conv_bias_relu_maxpool", "resnet_block", "rnn_cell",
                                                          "lstm_cell", "mlp_softmax"),
                                          testing::Values("x86", "tvm", "unfused")),
                         [](const auto &info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

// A model whose output is also read inside, returned twice, and an input returned as is.
Graph awkward_outputs() {
    json j = {{"format", "hfuse-model"},
              {"version", 1},
              {"name", "awkward"},
              {"inputs", {{{"name", "x.0"}, {"shape", {1, 3, 5, 7}}}, {{"name", "int"}, {"shape", {1, 3, 5, 7}}}}},
              {"nodes",
               {{{"name", "a"}, {"op", "Relu"}, {"inputs", {"x.0"}}},
                {{"name", "b"}, {"op", "Add"}, {"inputs", {"a", "int"}}},
                {{"name", "c"}, {"op", "Sigmoid"}, {"inputs", {"b"}}}}},
              {"outputs", {"a", "c", "a", "int"}}};
    return prepare(parse_model(j, ".", "awkward.json"));
}

TEST(ModelPipeline, ArgumentsFollowTheModelWithCNames) {
    Graph g = awkward_outputs();
    ModelPipeline mp(plan_fusion(g, {load_rules("x86")}));
    std::vector<std::string> names, values;
    for (const ModelArgument &a : mp.arguments()) {
        names.push_back(a.c_name);
        values.push_back(a.value);
        EXPECT_TRUE(is_c_identifier(a.c_name)) << a.c_name;
    }
    EXPECT_EQ(values, (std::vector<std::string>{"x.0", "int", "a", "c", "a", "int"}));
    // Sanitised, keyword-safe and distinct.
    EXPECT_EQ(names, (std::vector<std::string>{"x_0", "v_int", "a", "c", "a_2", "v_int_2"}));
    EXPECT_EQ(mp.halide_arguments().size(), 2u);
    test::ModelInputs in = test::make_inputs(g);
    auto out = mp.run(in.buffers);
    auto expected = reference::run(g, in.reference);
    for (const std::string &v : {"a", "c", "int"}) {
        expect_close(out.at(v), expected.at(v).data.data(), expected.at(v).data.size(), 1e-5, v);
    }
}

TEST(ModelPipeline, RefusesWrongShapes) {
    Graph g = load_model(kModels + "rnn_cell.json");
    ModelPipeline mp(plan_fusion(g, {load_rules("x86")}));
    test::ModelInputs in = test::make_inputs(g);
    in.buffers["x"] = make_tensor_buffer({1, 127});
    try {
        mp.run(in.buffers);
        FAIL() << "a [1x127] input was accepted";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("'x'"), std::string::npos) << e.what();
    }
}

TEST(ModelPipeline, WholeModelWithAnAutoscheduler) {
    Graph g = load_model(kModels + "conv_bias_relu_maxpool.json");
    ModelPipelineOptions o;
    o.schedule = ScheduleSource::Mullapudi2016;
    ModelPipeline mp(plan_fusion(g, {load_rules("x86")}), o);
    test::ModelInputs in = test::make_inputs(g);
    auto out = mp.run(in.buffers);
    auto expected = reference::run(g, in.reference);
    for (const std::string &v : g.outputs) {
        expect_close(out.at(v), expected.at(v).data.data(), expected.at(v).data.size(), 1e-4, v);
    }
}

TEST(ModelPipeline, CNames) {
    EXPECT_TRUE(is_c_identifier("conv_bias_relu_maxpool"));
    EXPECT_TRUE(is_c_identifier("_x9"));
    for (const char *bad : {"", "9x", "a-b", "a.b", "int", "class", "a b"}) EXPECT_FALSE(is_c_identifier(bad)) << bad;
}

}  // namespace
}  // namespace hfuse
