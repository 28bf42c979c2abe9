// Every bundled workload in models/ runs unfused and matches the independent reference evaluator.
#include "hfuse/executor.h"
#include "hfuse/model_io.h"
#include "hfuse/random.h"
#include "hfuse/reference.h"

#include "test_util.h"

#include <gtest/gtest.h>

namespace hfuse {
namespace {

class BundledModel : public testing::TestWithParam<std::string> {};

TEST_P(BundledModel, UnfusedMatchesReference) {
    Graph g = load_model(std::string(HFUSE_SOURCE_DIR) + "/models/" + GetParam() + ".json");
    test::ModelInputs in = test::make_inputs(g);
    const auto &inputs = in.buffers;
    Executor ex(g, Executor::unfused_partition(g));
    auto actual = ex.run(inputs);
    auto expected = reference::run(g, in.reference);
    for (const std::string &out : g.outputs) {
        ASSERT_EQ(shape_of(actual.at(out)), expected.at(out).shape);
        auto cmp =
            reference::compare(actual.at(out).data(), expected.at(out).data.data(), expected.at(out).data.size());
        // 1e-4 of the output's scale: float32 dot products of up to 1152 terms (3x3x128) summed in a
        // different order differ by ~sqrt(K) ulp, far below this.
        EXPECT_LE(cmp.relative(), 1e-4) << out << ": max abs error " << cmp.max_abs_error << " at scale " << cmp.scale;
        EXPECT_GT(cmp.scale, 1e-3) << out << ": output is (nearly) all zero; the comparison would prove nothing";
    }
    // A second run reuses the compiled pipelines and intermediate buffers and must give the same result.
    auto again = ex.run(inputs);
    for (const std::string &out : g.outputs) {
        auto cmp = reference::compare(again.at(out).data(), actual.at(out).data(), actual.at(out).number_of_elements());
        EXPECT_EQ(cmp.max_abs_error, 0.0) << out;
    }
}

INSTANTIATE_TEST_SUITE_P(Models, BundledModel,
                         testing::Values("conv_bn_relu", "dwconv_bn_relu", "conv3x3_bn_relu", "conv_bias_relu_maxpool",
                                         "resnet_block", "rnn_cell", "lstm_cell", "mlp_softmax"));

}  // namespace
}  // namespace hfuse
