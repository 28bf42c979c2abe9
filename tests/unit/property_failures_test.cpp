// The reduced failures the property test found (tests/data/property_failures/, one directory each,
// README.md there says what failed): each recorded plan either runs and matches the reference — per
// group and as one pipeline — or, where the fix was to refuse it, is refused with the same message;
// and each model planned afresh matches the reference.
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/fused_graph.h"
#include "hfuse/fusion_rules.h"
#include "hfuse/model_io.h"
#include "hfuse/model_pipeline.h"
#include "hfuse/planner.h"
#include "hfuse/reference.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <map>

namespace hfuse {
namespace {

const std::string kDir = std::string(HFUSE_SOURCE_DIR) + "/tests/data/property_failures/";

// Plans whose fix was to refuse them, and what the refusal says.
const std::map<std::string, std::string> kRefused = {
    {"dwconv_maxpool", "conv_dw takes no window consumer"},
    {"vector_width_9", "is not a power of two"},
    {"pool_vector_width_17", "is not a power of two"},
};

void expect_matches(const Graph &g, const std::map<std::string, TensorBuffer> &out, const test::ModelInputs &in,
                    const std::string &what) {
    auto expected = reference::run(g, in.reference);
    for (const std::string &v : g.outputs) {
        auto cmp = reference::compare(out.at(v).data(), expected.at(v).data.data(), expected.at(v).data.size());
        EXPECT_LE(cmp.relative(), 1e-4) << what << ": " << v << ": max abs error " << cmp.max_abs_error << " at scale "
                                        << cmp.scale;
    }
}

class PropertyFailure : public testing::TestWithParam<std::string> {};

TEST_P(PropertyFailure, StaysFixed) {
    const std::string dir = kDir + GetParam() + "/";
    Graph g = load_model(dir + "model.json");
    test::ModelInputs in = test::make_inputs(g);
    expect_matches(g, Executor(plan_fusion(g, {load_rules("x86")})).run(in.buffers), in, "planned afresh");
    auto refused = kRefused.find(GetParam());
    try {
        FusedGraph recorded = read_plan_for_model(dir + "plan.json", g);
        expect_matches(g, Executor(recorded).run(in.buffers), in, "the recorded plan");
        expect_matches(g, ModelPipeline(recorded).run(in.buffers), in, "the recorded plan as one pipeline");
        EXPECT_EQ(refused, kRefused.end()) << "the recorded plan should be refused";
    } catch (const Error &e) {
        ASSERT_NE(refused, kRefused.end()) << e.what();
        EXPECT_NE(std::string(e.what()).find(refused->second), std::string::npos) << e.what();
    }
}

INSTANTIATE_TEST_SUITE_P(Recorded, PropertyFailure,
                         testing::Values("conv_nopad_maxpool", "dwconv_maxpool", "dwconv_2x2_scalar",
                                         "matmul_slice_rows", "softmax_rank1", "vector_width_9", "softmax_tail",
                                         "pool_vector_width_17"));

}  // namespace
}  // namespace hfuse
