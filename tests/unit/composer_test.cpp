// The schedule composer: template choice from shapes, every template variant computing what the
// reference computes (odd sizes, pools after convs, depthwise), and bad parameters rejected.
#include "hfuse/composer.h"
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/model_io.h"
#include "hfuse/planner.h"
#include "hfuse/random.h"
#include "hfuse/reference.h"

#include "test_util.h"

#include <gtest/gtest.h>

#include <fstream>

namespace hfuse {
namespace {

const Halide::Target kTarget = Halide::get_jit_target_from_environment();

// conv (C->K, k x k, stride s, pad p, group g) + relu [+ pool (pk, ps)] on N x C x H x W.
Graph conv_model(int C, int H, int W, int K, int k, int s, int p, int g, int pool_k = 0, int pool_s = 0) {
    std::string pool = pool_k
                           ? R"(, {"name": "pool", "op": "MaxPool", "inputs": ["relu"], "attrs": {"kernel_shape": [)" +
                                 std::to_string(pool_k) + ", " + std::to_string(pool_k) + R"(], "strides": [)" +
                                 std::to_string(pool_s) + ", " + std::to_string(pool_s) + R"(], "pads": [1, 1, 1, 1]}})"
                           : "";
    std::string text = R"({"format": "hfuse-model", "version": 1, "name": "c",
      "inputs": [{"name": "x", "shape": [1, )" +
                       std::to_string(C) + ", " + std::to_string(H) + ", " + std::to_string(W) + R"(]}],
      "weights": {"w": {"shape": [)" +
                       std::to_string(K) + ", " + std::to_string(C / g) + ", " + std::to_string(k) + ", " +
                       std::to_string(k) + R"(], "uniform": [-0.3, 0.3], "seed": 1},
                  "b": {"shape": [)" +
                       std::to_string(K) + R"(], "uniform": [-0.3, 0.3], "seed": 2}},
      "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w", "b"], "attrs": {"kernel_shape": [)" +
                       std::to_string(k) + ", " + std::to_string(k) + R"(], "strides": [)" + std::to_string(s) + ", " +
                       std::to_string(s) + R"(], "pads": [)" + std::to_string(p) + ", " + std::to_string(p) + ", " +
                       std::to_string(p) + ", " + std::to_string(p) + R"(], "group": )" + std::to_string(g) + R"(}},
                {"name": "relu", "op": "Relu", "inputs": ["conv"]})" +
                       pool + R"(],
      "outputs": [")" + std::string(pool_k ? "pool" : "relu") +
                       R"("]})";
    std::string path = testing::TempDir() + "/composer_model.json";
    std::ofstream(path) << text;
    return load_model(path);
}

// Runs `plan` and expects every output within 1e-4 of the reference (float32 sums of <= 9*C terms).
void expect_matches_reference(const FusedGraph &plan) {
    SCOPED_TRACE("schedule " + plan.groups[0].schedule.dump());
    test::expect_plan_matches_reference(plan, 1e-4);
}

FusedGraph fused_plan(const Graph &g) {
    return with_default_schedules(plan_fusion(g, {load_rules("x86")}), kTarget);
}

TEST(Composer, ChoosesTemplatesFromShapes) {
    const int vw = kTarget.natural_vector_size<float>();
    EXPECT_EQ(fused_plan(conv_model(16, 20, 20, 16, 3, 1, 1, 1)).groups[0].schedule["template"], "conv_xv");
    auto one = fused_plan(conv_model(16, 12, 20, 24, 1, 1, 0, 1)).groups[0].schedule;
    EXPECT_EQ(one["reduction_order"], "ci,kx,ky");
    EXPECT_EQ(one["tile_x_vectors"], 20 >= 2 * vw ? 2 : 1);
    EXPECT_EQ(fused_plan(conv_model(16, 14, 14, 16, 3, 1, 1, 16)).groups[0].schedule["template"], "conv_dw");
    // Narrower than one vector: no template fits, the simple schedule runs.
    EXPECT_EQ(fused_plan(conv_model(8, 5, 5, 8, 3, 1, 1, 1)).groups[0].schedule["template"], "simple");
    // A pool after the conv is the tile: one pooled row per tile, stride-2 conv rows.
    auto pooled = fused_plan(conv_model(8, 18, 18, 12, 3, 1, 1, 1, 2, 2)).groups[0].schedule;
    EXPECT_EQ(pooled["template"], "conv_xv");
    EXPECT_EQ(pooled["tile_y"], 2);
}

TEST(Composer, EveryConvTemplateVariantMatchesTheReference) {
    // Odd sizes, channels not a multiple of the tile, strides, groups.
    for (const Graph &g : {conv_model(7, 23, 29, 10, 3, 1, 1, 1), conv_model(12, 17, 33, 18, 3, 2, 1, 1),
                           conv_model(8, 19, 21, 12, 3, 1, 1, 2), conv_model(16, 9, 26, 24, 1, 1, 0, 1)}) {
        FusedGraph plan = fused_plan(g);
        for (const char *order : {"kx,ci,ky", "ci,kx,ky", "kx,ky,ci"}) {
            for (auto [nx, ny, nc] :
                 {std::tuple{1, 3, 4}, std::tuple{1, 2, 6}, std::tuple{2, 1, 6}, std::tuple{1, 1, 1}}) {
                if (8 * nx > g.type_of("relu").shape[3]) continue;
                plan.groups[0].schedule = {{"template", "conv_xv"}, {"vector_width", 8}, {"tile_x_vectors", nx},
                                           {"tile_y", ny},          {"tile_c", nc},      {"reduction_order", order}};
                expect_matches_reference(plan);
            }
        }
    }
}

TEST(Composer, PoolAfterConvIsTheTile) {
    // 2x2 stride 2 and overlapping 3x3 stride 2 windows (pads 1), odd sizes.
    for (const Graph &g : {conv_model(8, 18, 34, 12, 3, 1, 1, 1, 2, 2), conv_model(6, 31, 37, 10, 3, 1, 1, 1, 3, 2)}) {
        FusedGraph plan = fused_plan(g);
        ASSERT_EQ(plan.groups.size(), 1u);
        EXPECT_EQ(plan.groups[0].schedule["template"], "conv_xv");
        expect_matches_reference(plan);
    }
}

TEST(Composer, DepthwiseAndSimpleTemplatesMatchTheReference) {
    expect_matches_reference(fused_plan(conv_model(24, 14, 14, 24, 3, 1, 1, 24)));
    expect_matches_reference(fused_plan(conv_model(20, 11, 17, 20, 3, 2, 1, 20)));
    expect_matches_reference(fused_plan(conv_model(8, 5, 5, 8, 3, 1, 1, 1)));
}

TEST(Composer, BadParametersNameTheField) {
    FusedGraph plan = fused_plan(conv_model(16, 20, 20, 16, 3, 1, 1, 1));
    auto expect_error = [&](nlohmann::json params, const std::string &field) {
        FusedGraph p = plan;
        p.groups[0].schedule = params;
        try {
            Executor ex(p);
            ADD_FAILURE() << "accepted " << params.dump();
        } catch (const Error &e) {
            EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("node 'conv'"), std::string::npos) << e.what();
        }
    };
    auto with = [&](const char *key, nlohmann::json value) {
        nlohmann::json p = plan.groups[0].schedule;
        p[key] = value;
        return p;
    };
    expect_error(with("tile_c", 0), "schedule.tile_c");
    expect_error(with("tile_x_vectors", 5), "schedule.tile_x_vectors");
    expect_error(with("reduction_order", "ky,kx"), "schedule.reduction_order");
    expect_error(with("template", "winograd"), "schedule.template");
}

}  // namespace
}  // namespace hfuse
