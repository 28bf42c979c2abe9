// The schedule composer: template choice from the master's kind and the shapes, every template variant
// computing what the reference and the unfused run compute (odd sizes, pools after convs, depthwise,
// gemm cells, pools, softmax), parameters recorded in the plan and honoured when edited, bad
// parameters rejected naming the field, and AVX-512 defaults compiled (not run).
#include "compose/composer.h"
#include "compose/position_view.h"
#include "exec/group_lowering.h"
#include "exec/value_layout.h"
#include "hfuse/composer.h"
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/loop_nest.h"
#include "hfuse/model_io.h"
#include "hfuse/model_pipeline.h"
#include "hfuse/passes.h"
#include "hfuse/planner.h"
#include "hfuse/random.h"
#include "hfuse/reference.h"
#include "ops/window_util.h"
#include "schedules/conv_partition.h"
#include "schedules/conv_template.h"
#include "schedules/pool_template.h"

#include "test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <regex>

namespace hfuse {
namespace {

// The target whose defaults these tests pin (shapes choose templates and tiles by its vector width
// and registers): AVX2 whatever the host, so that they hold on AVX-512 machines too. The plans still
// compile and run for the host. Composer.Avx512DefaultsDifferAndCompile pins AVX-512's.
const Halide::Target kTarget("x86-64-linux-avx-avx2-f16c-fma-sse41");

// conv (C->K, k x k, stride s, pad p, group g) + relu [+ pool (pk, ps, pads pool_pad)] on N x C x H x W.
// A conv (+ Relu, + MaxPool if pool_k) model; `weights_input`: W is a model input, not a constant
// (so conv_cv, which packs constant weights, is no default).
Graph conv_model(int C, int H, int W, int K, int k, int s, int p, int g, int pool_k = 0, int pool_s = 0, int N = 1,
                 bool weights_input = false, int pool_pad = 1) {
    const std::string pp = std::to_string(pool_pad);
    std::string pool = pool_k
                           ? R"(, {"name": "pool", "op": "MaxPool", "inputs": ["relu"], "attrs": {"kernel_shape": [)" +
                                 std::to_string(pool_k) + ", " + std::to_string(pool_k) + R"(], "strides": [)" +
                                 std::to_string(pool_s) + ", " + std::to_string(pool_s) + R"(], "pads": [)" + pp +
                                 ", " + pp + ", " + pp + ", " + pp + "]}}"
                           : "";
    const std::string w_shape = "[" + std::to_string(K) + ", " + std::to_string(C / g) + ", " + std::to_string(k) +
                                ", " + std::to_string(k) + "]";
    std::string text =
        R"({"format": "hfuse-model", "version": 1, "name": "c",
      "inputs": [{"name": "x", "shape": [)" +
        std::to_string(N) + ", " + std::to_string(C) + ", " + std::to_string(H) + ", " + std::to_string(W) + "]}" +
        (weights_input ? R"(, {"name": "w", "shape": )" + w_shape + "}" : std::string()) + R"(],
      "weights": {)" +
        (weights_input ? std::string() : R"("w": {"shape": )" + w_shape + R"(, "uniform": [-0.3, 0.3], "seed": 1},)") +
        R"(
                  "b": {"shape": [)" +
        std::to_string(K) + R"(], "uniform": [-0.3, 0.3], "seed": 2}},
      "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w", "b"], "attrs": {"kernel_shape": [)" +
        std::to_string(k) + ", " + std::to_string(k) + R"(], "strides": [)" + std::to_string(s) + ", " +
        std::to_string(s) + R"(], "pads": [)" + std::to_string(p) + ", " + std::to_string(p) + ", " +
        std::to_string(p) + ", " + std::to_string(p) + R"(], "group": )" + std::to_string(g) + R"(}},
                {"name": "relu", "op": "Relu", "inputs": ["conv"]})" +
        pool + R"(],
      "outputs": [")" +
        std::string(pool_k ? "pool" : "relu") + R"("]})";
    std::string path = testing::TempDir() + "/composer_model_" + std::to_string(getpid()) + ".json";
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

// The x86 rules with Concats fused like any injective op (x86 keeps them apart, for the executor to
// compute them in place): groups holding a Concat among other members.
FusedGraph fused_plan_with_concats(const Graph &g) {
    RuleSet rules = load_rules("x86");
    rules.opaque_ops.erase("Concat");
    return with_default_schedules(plan_fusion(g, {rules}), kTarget);
}

// conv_dw's AVX-512 choices (one row a tile, vectors dividing the row) were measured on AVX-512 alone:
// they follow the ISA, not the register count, so AArch64 (as many registers) keeps the 2-row tiles.
TEST(Composer, DepthwiseDefaultsFollowTheIsa) {
    const Graph g = conv_model(144, 56, 56, 144, 3, 1, 1, 144);
    auto dw = [&](const char *target) {
        return with_default_schedules(plan_fusion(g, {load_rules("x86")}), Halide::Target(target)).groups[0].schedule;
    };
    const nlohmann::json avx2 = dw("x86-64-linux-avx-avx2-f16c-fma-sse41");
    const nlohmann::json avx512 = dw("x86-64-linux-avx-avx2-f16c-fma-sse41-avx512-avx512_skylake");
    const nlohmann::json arm = dw("arm-64-linux");
    for (const nlohmann::json *p : {&avx2, &avx512, &arm}) EXPECT_EQ((*p)["template"], "conv_dw") << p->dump();
    EXPECT_EQ(avx2["vector_width"], 8);
    EXPECT_EQ(avx2["tile_y"], 2);
    EXPECT_EQ(avx512["vector_width"], 8);  // 16 lanes do not divide the 56-wide rows
    EXPECT_EQ(avx512["tile_y"], 1);
    EXPECT_EQ(arm["vector_width"], 4);
    EXPECT_EQ(arm["tile_y"], 2);
}

// 1x1 convs over at least 96 input channels step through two of them at a time on 16-register
// targets (measured on Zen 3 under AVX2); fewer channels, spatial kernels and AVX-512 keep the loop
// rolled. conv_xv and conv_flat unrolled by counts that divide the channels and that do not match the
// reference.
TEST(Composer, PointwiseReductionsUnrollOnAvx2) {
    const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41");
    const Halide::Target avx512("x86-64-linux-avx-avx2-f16c-fma-sse41-avx512-avx512_skylake");
    auto defaults = [](const Graph &g, const Halide::Target &t) {
        return with_default_schedules(plan_fusion(g, {load_rules("x86")}), t).groups[0].schedule;
    };
    const Graph xv = conv_model(144, 6, 16, 24, 1, 1, 0, 1);     // rows of whole vectors: conv_xv
    // Rows of 3.5 vectors, 602 KB of input: on AVX2 conv_xv on its position view (conv_flat by (x, y)).
    const Graph flat = conv_model(192, 28, 28, 32, 1, 1, 0, 1);
    EXPECT_EQ(defaults(xv, avx2)["template"], "conv_xv");
    EXPECT_EQ(defaults(flat, avx2)["template"], "conv_xv");
    EXPECT_EQ(defaults(flat, avx2)["flatten_positions"], true);
    for (const Graph *g : {&xv, &flat}) {
        EXPECT_EQ(defaults(*g, avx2).value("reduction_unroll", 1), 2);
        EXPECT_FALSE(defaults(*g, avx512).contains("reduction_unroll"));
    }
    EXPECT_FALSE(defaults(conv_model(64, 6, 16, 24, 1, 1, 0, 1), avx2).contains("reduction_unroll"));
    EXPECT_FALSE(defaults(conv_model(96, 9, 9, 8, 3, 2, 1, 1), avx2).contains("reduction_unroll"));  // 3x3

    // AVX2's plans (8 lanes) run on any x86 host.
    for (const Graph &g : {xv, flat, conv_model(97, 5, 12, 10, 1, 1, 0, 1)}) {
        FusedGraph plan = with_default_schedules(plan_fusion(g, {load_rules("x86")}), avx2);
        const std::string tmpl = plan.groups[0].schedule["template"];
        EXPECT_TRUE(tmpl == "conv_xv" || tmpl == "conv_flat") << tmpl;
        for (int n : {2, 5, 64}) {
            plan.groups[0].schedule["reduction_unroll"] = n;
            expect_matches_reference(plan);
        }
    }
    // conv_flat by (x, y), as the defaults took it before the view: unrolled likewise.
    FusedGraph by_rows = with_default_schedules(plan_fusion(flat, {load_rules("x86")}), avx2);
    by_rows.groups[0].schedule = {{"template", "conv_flat"}, {"vector_width", 8}, {"tile_c", 5},
                                  {"tile_x_vectors", 2},     {"block_rows", 4},   {"channel_block", 32}};
    for (int n : {2, 5}) {
        by_rows.groups[0].schedule["reduction_unroll"] = n;
        expect_matches_reference(by_rows);
    }
}

// Expects the executor to refuse `plan` with an Error naming `field` and the node 'conv'.
void expect_conv_schedule_error(const FusedGraph &plan, const std::string &field, const std::string &node = "conv") {
    try {
        Executor ex(plan);
        ADD_FAILURE() << "accepted " << plan.groups[0].schedule.dump();
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("node '" + node + "'"), std::string::npos) << e.what();
    }
}

// Expects `params` as the schedule of fused_plan(g)'s only group to be refused naming `field`.
void expect_conv_params_error(const Graph &g, const nlohmann::json &params, const std::string &field) {
    FusedGraph plan = fused_plan(g);
    plan.groups[0].schedule = params;
    expect_conv_schedule_error(plan, field);
}

// Runs `plan` as one whole-model pipeline (a group reads the Funcs of the groups before it) and by the
// executor, and expects every output within 1e-4 of the reference.
void expect_pipeline_matches_reference(const Graph &g, const FusedGraph &plan) {
    test::expect_pipeline_matches_reference(plan, 1e-4, &g);
    test::expect_plan_matches_reference(plan, 1e-4);
}

TEST(Composer, ChoosesTemplatesFromShapes) {
    const int vw = kTarget.natural_vector_size<float>();
    // Constant weights and a window or a stride, one group: output channels in vector lanes (conv_cv),
    // for any width: 3 positions x 4 channel vectors (AVX2), a task per register tile of channels,
    // rows for 8 tasks (here 2 rows, 10 tasks: 3 rows would give 7, the last recomputing), the
    // reduction in passes of at most 64 channels, the padded input copied in blocks of 8 channels,
    // per task (its 2 rows read 4 input rows: each copied twice, not more than 3 times).
    auto cv = fused_plan(conv_model(16, 20, 24, 16, 3, 1, 1, 1)).groups[0].schedule;
    EXPECT_EQ(cv["template"], "conv_cv");
    if (vw == 8) {
        // A 3x3 stride-1 conv of at least 16 channels each way at 14x14 or more: Winograd F(4x4,
        // 3x3), register tiles of 3 4x4 tiles (AVX2), the input blocked by a vector, 4 rows a task
        // (whole tiles).
        EXPECT_EQ(cv, nlohmann::json({{"template", "conv_cv"},
                                      {"algorithm", "winograd"},
                                      {"winograd_tile", 4},
                                      {"vector_width", 8},
                                      {"tile_positions", 3},
                                      {"tile_c_vectors", 2},
                                      {"block_rows", 4},
                                      {"channel_block", 16},
                                      {"ci_block", 16},
                                      {"input_block", 8},
                                      {"input_at", "task"},
                                      {"why", "output channels in vector lanes: 3x3 kernel"}}));
        // Below 14 rows, direct.
        EXPECT_EQ(fused_plan(conv_model(16, 13, 24, 16, 3, 1, 1, 1)).groups[0].schedule,
                  nlohmann::json({{"template", "conv_cv"},
                                  {"vector_width", 8},
                                  {"tile_positions", 3},
                                  {"tile_c_vectors", 2},
                                  {"block_rows", 2},
                                  {"channel_block", 16},
                                  {"ci_block", 16},
                                  {"input_block", 8},
                                  {"input_at", "task"},
                                  {"why", "output channels in vector lanes: 3x3 kernel"}}));
        // 4 channel tasks reading each row block: each input row would be copied 4-8 times, at root
        // once. Winograd's channel blocks are 64 channels, 2 register tiles (AVX2's 4 vectors of 8).
        const FusedGraph wide_plan = fused_plan(conv_model(16, 14, 14, 256, 3, 1, 1, 1));
        const nlohmann::json &wide = wide_plan.groups[0].schedule;
        EXPECT_EQ(wide["channel_block"], 64);
        EXPECT_FALSE(wide.contains("input_at")) << wide.dump();
        expect_matches_reference(wide_plan);
        // Unpadded: no copy.
        EXPECT_FALSE(fused_plan(conv_model(16, 9, 9, 16, 3, 2, 0, 1)).groups[0].schedule.contains("input_at"));
    }
    for (const Graph &g : {conv_model(16, 12, 20, 24, 1, 2, 0, 1), conv_model(8, 9, 9, 8, 3, 2, 1, 1),
                           conv_model(8, 6, 6, 8, 3, 2, 1, 1), conv_model(8, 7, 7, 8, 3, 1, 1, 1),
                           conv_model(80, 14, 14, 16, 3, 2, 1, 1), conv_model(8, 2, 4, 8, 3, 2, 1, 1)}) {
        const FusedGraph plan = fused_plan(g);
        EXPECT_EQ(plan.groups[0].schedule["template"], "conv_cv");
        expect_matches_reference(plan);  // the last: 2 positions, a register tile of 2
    }
    EXPECT_EQ(fused_plan(conv_model(80, 14, 14, 16, 3, 2, 1, 1)).groups[0].schedule["ci_block"], 40);
    // Unpadded, the input is copied blocked where the conv does at least 400 FLOPs per input value
    // (2 x cout x taps / strides) and its positions do not read it in order: a 3x3 stride 2 to 64
    // (288) reads it planar, to 256 (1152) blocked. A 1x1 stride 2 from 16 channels reads it planar
    // (a strided pointwise conv copies as a stride-1 one does: from 64 input channels).
    EXPECT_EQ(fused_plan(conv_model(16, 12, 20, 128, 1, 2, 0, 1)).groups[0].schedule["input_block"], 0);
    EXPECT_EQ(fused_plan(conv_model(16, 13, 13, 64, 3, 2, 0, 1)).groups[0].schedule["input_block"], 0);
    const FusedGraph blocked_in = fused_plan(conv_model(16, 13, 13, 256, 3, 2, 0, 1));
    EXPECT_EQ(blocked_in.groups[0].schedule["input_block"], 8);
    expect_matches_reference(blocked_in);
    // A pointwise conv over 256 input channels: conv_cv; its weights the smaller operand (96 output
    // channels x 1 tap against 153 positions), every channel in one block. A 3x3 to 256 channels at
    // 7x7 (256 x 9 weights a channel against 49 positions): blocks of one register tile's channels.
    const FusedGraph deep = fused_plan(conv_model(256, 9, 17, 96, 1, 1, 0, 1));
    EXPECT_EQ(deep.groups[0].schedule["template"], "conv_cv");
    EXPECT_EQ(deep.groups[0].schedule["channel_block"], 96);
    // Each default says which facts chose its template.
    EXPECT_EQ(
        deep.groups[0].schedule.value("why", "").rfind("output channels in vector lanes: 256 input channels; ", 0), 0u);
    expect_matches_reference(deep);
    const nlohmann::json wide_3x3 = fused_plan(conv_model(16, 7, 7, 256, 3, 1, 1, 1)).groups[0].schedule;
    EXPECT_EQ(wide_3x3["channel_block"], wide_3x3["tile_c_vectors"].get<int>() * vw) << wide_3x3.dump();
    // A pointwise conv on conv_flat whose weights are the smaller operand (32 channels against 1400
    // positions; with AVX-512, whose position view stops at 1 MB of input): at batch 1 every channel in
    // one block and the tasks at least 8 blocks of rows; at batch 8 the images are the tasks, and
    // channel blocks stay. On AVX2 such a conv whose rows tile badly goes on its position view.
    const Halide::Target avx512("x86-64-linux-avx512_skylake");
    const Graph pointwise_wide = conv_model(192, 14, 100, 32, 1, 1, 0, 1);  // 1.1 MB, rows of 6.25 vectors
    const nlohmann::json by_rows =
        with_default_schedules(plan_fusion(pointwise_wide, {load_rules("x86")}), avx512).groups[0].schedule;
    EXPECT_EQ(by_rows["template"], "conv_flat") << by_rows.dump();
    EXPECT_EQ(by_rows["channel_block"], 32);
    EXPECT_EQ(by_rows.value("why", "").rfind("rows tile badly: ", 0), 0u) << by_rows.dump();
    EXPECT_GE((14 + by_rows["block_rows"].get<int>() - 1) / by_rows["block_rows"].get<int>(), 8) << by_rows.dump();
    const nlohmann::json batch8 =
        with_default_schedules(plan_fusion(conv_model(192, 14, 100, 32, 1, 1, 0, 1, 0, 0, 8), {load_rules("x86")}),
                               avx512)
            .groups[0]
            .schedule;
    EXPECT_EQ(batch8["template"], "conv_flat") << batch8.dump();
    EXPECT_LT(batch8["channel_block"].get<int>(), 32) << batch8.dump();
    const FusedGraph viewed = fused_plan(conv_model(192, 28, 28, 32, 1, 1, 0, 1));  // rows of 3.5 vectors
    EXPECT_EQ(viewed.groups[0].schedule["flatten_positions"], true) << viewed.groups[0].schedule.dump();
    expect_matches_reference(viewed);
    // Under a pool whose windows pad (or overlap), where conv_cv's tile is not written from vectors
    // of channels (12 channels, not whole vectors): the conv at root by conv_cv, the pool by its
    // template. (Under one that does neither, in the tile: Composer.PoolInsideAConvChain; whole
    // vectors: Composer.OverlappingPoolReadsTheConvTileFromChannelLanes.)
    auto cv_pooled = fused_plan(conv_model(8, 18, 18, 12, 3, 1, 1, 1, 2, 2)).groups[0].schedule;
    EXPECT_EQ(cv_pooled["template"], "conv_cv");
    EXPECT_EQ(cv_pooled["compute"], "root");
    EXPECT_FALSE(cv_pooled.value("why", "").empty());

    // Pointwise stride-1 convs, and convs whose weights are computed: x vectorized.
    auto one = fused_plan(conv_model(16, 12, 16, 24, 1, 1, 0, 1)).groups[0].schedule;
    EXPECT_EQ(one["template"], "conv_xv");
    EXPECT_EQ(one["reduction_order"], "ci,kx,ky");
    EXPECT_EQ(one["tile_x_vectors"], 1);
    EXPECT_EQ(one["tile_y"], 2);
    EXPECT_EQ(one.value("why", ""),
              "x in vector lanes: pointwise, stride 1, rows of whole vectors: no transpose to pay");
    // A pointwise conv whose rows are no whole number of vectors (20 wide) runs on its group's position
    // view: one row of 240 positions, conv_xv's register tiles of 2 vectors x 6 channels along it.
    if (vw == 8) {
        auto flat = fused_plan(conv_model(16, 12, 20, 24, 1, 1, 0, 1)).groups[0].schedule;
        EXPECT_EQ(flat["template"], "conv_xv");
        EXPECT_EQ(flat["flatten_positions"], true);
        EXPECT_EQ(flat["tile_x_vectors"], 2);
        EXPECT_EQ(flat["tile_y"], 1);
        EXPECT_EQ(flat["tile_c"], 6);
        EXPECT_EQ(flat["channel_loop"], "outer");
        EXPECT_EQ(flat.value("why", "").rfind("on its position view", 0), 0u) << flat.dump();
    }
    auto computed_w = [](int C, int H, int W, int K, int k, int s, int p, int g, int pool_k = 0, int pool_s = 0) {
        return fused_plan(conv_model(C, H, W, K, k, s, p, g, pool_k, pool_s, 1, true)).groups[0].schedule;
    };
    EXPECT_EQ(computed_w(16, 20, 24, 16, 3, 1, 1, 1)["template"], "conv_xv");
    EXPECT_EQ(computed_w(16, 20, 24, 16, 3, 1, 1, 1).value("why", ""),
              "x in vector lanes: computed weights (conv_cv packs constant ones)");
    EXPECT_EQ(computed_w(16, 12, 20, 24, 1, 2, 0, 1)["template"], "conv_xv");  // strided 1x1: not pointwise
    EXPECT_EQ(computed_w(16, 14, 14, 16, 3, 1, 1, 16)["template"], "conv_dw");
    EXPECT_EQ(fused_plan(conv_model(16, 14, 14, 16, 3, 1, 1, 16)).groups[0].schedule["template"], "conv_dw");
    // Narrower than one vector, strided (not flattened): narrower vectors, down to 4 lanes; below that
    // no template fits, the simple schedule runs.
    auto narrow = computed_w(8, 9, 9, 8, 3, 2, 1, 1);
    EXPECT_EQ(narrow["template"], "conv_xv");
    EXPECT_EQ(narrow["vector_width"], std::min(vw, 4));
    EXPECT_EQ(computed_w(8, 6, 6, 8, 3, 2, 1, 1)["template"], "simple");
    // Stride 1 and narrow, a padded 3x3 at 7x7 and 3x3: flat, whole vectors over the padded rows.
    for (int side : {7, 3}) {
        auto flat = computed_w(8, side, side, 8, 3, 1, 1, 1);
        EXPECT_EQ(flat["template"], "conv_flat") << side;
        EXPECT_EQ(flat["vector_width"], vw) << side;
    }
    // A height that 3-row tiles would over-compute by more than 5% (7: 9 rows) takes 2 rows x 6.
    auto seven = computed_w(16, 14, 14, 16, 3, 2, 1, 1);
    EXPECT_EQ(seven["tile_y"], 2);
    EXPECT_EQ(seven["tile_c"], 6);
    // A pool after the conv is the tile, in strips: the register tile as without the pool (3 rows x
    // 4 channels), 12 channels in strips of 4 (a divisor, a multiple of 4), 3 strips (< 4 tasks), so
    // the pool's 9 rows are split in 2 strips of 5.
    auto pooled = computed_w(8, 18, 18, 12, 3, 1, 1, 1, 2, 2);
    EXPECT_EQ(pooled["template"], "conv_xv");
    EXPECT_EQ(pooled["tile_y"], 3);
    EXPECT_EQ(pooled["tile_c"], 4);
    EXPECT_EQ(pooled["strip_c"], 4);
    EXPECT_EQ(pooled["strip_y"], 5);
}

TEST(Composer, EveryConvTemplateVariantMatchesTheReference) {
    // Odd sizes, channels not a multiple of the tile, strides, groups, a batch.
    for (const Graph &g : {conv_model(7, 23, 29, 10, 3, 1, 1, 1), conv_model(12, 17, 33, 18, 3, 2, 1, 1),
                           conv_model(8, 19, 21, 12, 3, 1, 1, 2), conv_model(16, 9, 26, 24, 1, 1, 0, 1),
                           conv_model(5, 9, 11, 10, 3, 1, 1, 1, 0, 0, 3)}) {
        FusedGraph plan = fused_plan(g);
        for (const char *order : {"kx,ci,ky", "ci,kx,ky", "kx,ky,ci"}) {
            for (auto [nx, ny, nc] :
                 {std::tuple{1, 3, 4}, std::tuple{1, 2, 6}, std::tuple{2, 1, 6}, std::tuple{1, 1, 1}}) {
                if (8 * nx > g.type_of("relu").shape[3]) continue;
                plan.groups[0].schedule = {{"template", "conv_xv"}, {"vector_width", 8}, {"tile_x_vectors", nx},
                                           {"tile_y", ny},          {"tile_c", nc},      {"reduction_order", order}};
                // Channel tiles outside (absent: the default of older plans) and inside the spatial ones.
                plan.groups[0].schedule["channel_loop"] = nx == 1 && ny == 3 ? "inner" : "outer";
                if (nx == 2) plan.groups[0].schedule.erase("channel_loop");
                expect_matches_reference(plan);
            }
        }
    }
}

TEST(Composer, ConvXvInputCopiedPerTaskMatchesTheReference) {
    // conv_xv reading a copy of its task's input rows ("input_at": "task", stored a row's channels
    // together): a pointwise conv on rows that are no whole vectors (29 wide: the copy's last vector
    // shifts inwards), a padded 3x3 (the copy is of the padded input, its border zeros made per task),
    // a strided one, a batch of 2; channel tiles inside and outside the spatial ones.
    for (const Graph &g : {conv_model(7, 23, 29, 10, 1, 1, 0, 1), conv_model(12, 17, 33, 18, 3, 1, 1, 1),
                           conv_model(9, 20, 21, 12, 3, 2, 1, 1), conv_model(16, 9, 26, 24, 1, 1, 0, 1, 0, 0, 2)}) {
        FusedGraph plan = fused_plan(g);
        for (const char *loop : {"inner", "outer"}) {
            for (auto [ny, nc] : {std::pair{2, 6}, std::pair{3, 4}}) {
                const int stride = g.find_node("conv")->attrs.at("strides").at(0).get<int>();
                plan.groups[0].schedule = {{"template", "conv_xv"}, {"vector_width", 8},
                                           {"tile_x_vectors", 1},   {"tile_y", ny * stride},
                                           {"tile_c", nc},          {"channel_loop", loop},
                                           {"input_at", "task"},    {"reduction_order", "ci,kx,ky"}};
                expect_matches_reference(plan);
            }
        }
    }
}

TEST(Composer, PointwiseConvCopiesItsInputPerTaskWhereEachChannelIsAPage) {
    // A 2-row register tile's pass over 96 input channels of 56x56 planes (12.5 KB each) touches 192
    // pages, past the L1 TLB's 64: the task's input rows are copied first. 28x28 planes (3 KB) share
    // pages; 32 channels of 112x112 touch 64 (24 output channels: 2 rows x 6 channels).
    struct Case {
        int c, h, k;
        bool copied;
    };
    for (const Case &c : {Case{96, 56, 24, true}, Case{96, 28, 24, false}, Case{32, 112, 24, false}}) {
        SCOPED_TRACE(std::to_string(c.c) + " channels at " + std::to_string(c.h));
        const FusedGraph plan = fused_plan(conv_model(c.c, c.h, c.h, c.k, 1, 1, 0, 1));
        const nlohmann::json &p = plan.groups[0].schedule;
        ASSERT_EQ(p.value("template", ""), "conv_xv") << p.dump();
        EXPECT_EQ(p.value("input_at", "root"), c.copied ? "task" : "root") << p.dump();
    }
}

TEST(Composer, FlatConvVariantsMatchTheReference) {
    // Stride-1 convs over the flattened rows of their padded input: pointwise ones 3.25, 1.5 and 0.875
    // vectors wide (batch 2), padded 3x3 and 5x5 and an unpadded 3x3 (its rows' tails read past the
    // input); channels no multiple of the tile or the block; blocks of one row to all, tiles shifting
    // inwards at a strip's end, narrower vectors.
    int ran = 0;
    for (const Graph &g : {conv_model(16, 9, 26, 24, 1, 1, 0, 1), conv_model(13, 5, 12, 10, 1, 1, 0, 1, 0, 0, 2),
                           conv_model(7, 7, 7, 20, 1, 1, 0, 1), conv_model(9, 7, 7, 14, 3, 1, 1, 1),
                           conv_model(5, 6, 10, 7, 5, 1, 2, 1), conv_model(6, 9, 11, 10, 3, 1, 0, 1, 0, 0, 2)}) {
        FusedGraph plan = fused_plan(g);
        ASSERT_EQ(plan.groups.size(), 1u);
        // The default for 7 output channels (less than a vector); the pointwise ones at least a vector
        // wide run on their position view instead (conv_xv); a window, or narrower rows, take conv_cv.
        const bool pointwise_wide = g.type_of("w").shape[3] == 1 && g.type_of("relu").shape[3] >= 8;
        const bool flat = g.type_of("w").shape[0] < 8;
        EXPECT_EQ(plan.groups[0].schedule["template"], pointwise_wide ? "conv_xv" : flat ? "conv_flat" : "conv_cv");
        EXPECT_EQ(plan.groups[0].schedule.value("flatten_positions", false), pointwise_wide);
        expect_matches_reference(plan);
        const Shape t = g.type_of("relu").shape;
        for (int rows : {1, 2, static_cast<int>(t[2])}) {
            for (auto [vw, nx, nc] :
                 {std::tuple{8, 2, 6}, std::tuple{8, 1, 7}, std::tuple{4, 3, 4}, std::tuple{8, 3, 1}}) {
                for (int cb : {nc, 9, static_cast<int>(t[1])}) {
                    const int64_t pitch =
                        g.type_of("x").shape[3] + 2 * g.find_node("conv")->attrs.at("pads").at(1).get<int>();
                    if (vw * nx > (rows - 1) * pitch + t[3] || nc > cb || cb > t[1]) continue;
                    plan.groups[0].schedule = {{"template", "conv_flat"}, {"vector_width", vw},
                                               {"tile_x_vectors", nx},    {"tile_c", nc},
                                               {"block_rows", rows},      {"channel_block", cb}};
                    expect_matches_reference(plan);
                    ran++;
                }
            }
        }
    }
    EXPECT_GE(ran, 80);
}

TEST(Composer, FlatConvReadingAnotherGroupInOnePipeline) {
    // In a whole-model pipeline the conv reads the Func of the group before it (computed at root), not
    // an ImageParam; a global pool after it puts the conv at root.
    const std::string text = R"({"format": "hfuse-model", "version": 1, "name": "flat_chain",
      "inputs": [{"name": "x", "shape": [2, 9, 5, 12]}],
      "weights": {"w": {"shape": [10, 9, 1, 1], "uniform": [-0.3, 0.3], "seed": 1},
                  "b": {"shape": [10], "uniform": [-0.3, 0.3], "seed": 2}},
      "nodes": [{"name": "pre", "op": "Sigmoid", "inputs": ["x"]},
                {"name": "conv", "op": "Conv", "inputs": ["pre", "w", "b"], "attrs": {"kernel_shape": [1, 1]}},
                {"name": "relu", "op": "Relu", "inputs": ["conv"]},
                {"name": "gap", "op": "GlobalAveragePool", "inputs": ["relu"]}],
      "outputs": ["relu", "gap"]})";
    const std::string path = testing::TempDir() + "/composer_flat_chain_" + std::to_string(getpid()) + ".json";
    std::ofstream(path) << text;
    Graph g = load_model(path);
    // Alone, the conv's group runs on its position view: it reads the Sigmoid's Func as a row, the Relu's
    // group reads its output as a plane.
    for (bool whole_conv_group : {false, true}) {
        FusedGraph plan = whole_conv_group ? fused_plan(g) : with_default_schedules(singleton_groups(g), kTarget);
        bool flat = false, row = false;
        for (const FusedGroup &grp : plan.groups) {
            flat = flat || grp.schedule.value("template", "") == "conv_flat";
            row = row || grp.schedule.value("flatten_positions", false);
        }
        EXPECT_EQ(flat, whole_conv_group);
        EXPECT_EQ(row, !whole_conv_group);
        expect_pipeline_matches_reference(g, plan);
    }
    std::remove(path.c_str());
}

TEST(Composer, FlatConvNeedsStrideOneAndOneGroup) {
    nlohmann::json p = {{"template", "conv_flat"}, {"vector_width", 8}, {"tile_x_vectors", 2}, {"tile_c", 6},
                        {"block_rows", 2},         {"channel_block", 8}};
    expect_conv_params_error(conv_model(8, 9, 10, 8, 3, 2, 1, 1), p, "schedule.template");  // strided
    expect_conv_params_error(conv_model(8, 9, 10, 8, 3, 1, 1, 2), p, "schedule.template");  // grouped
    const Graph pointwise = conv_model(8, 9, 10, 8, 1, 1, 0, 1);
    p["tile_x_vectors"] = 3;  // 24 pixels, a block of 2 rows holds 20
    expect_conv_params_error(pointwise, p, "schedule.tile_x_vectors");
    p["tile_x_vectors"] = 2;
    p["channel_block"] = 4;
    expect_conv_params_error(pointwise, p, "schedule.tile_c");
    p["channel_block"] = 8;
    p["block_rows"] = 10;
    expect_conv_params_error(pointwise, p, "schedule.block_rows");
    p["block_rows"] = 2;
    p["strip_c"] = 8;
    expect_conv_params_error(pointwise, p, "schedule.strip_c");
}

TEST(Composer, ChannelVectorConvVariantsMatchTheReference) {
    // Output channels in vector lanes over the flattened output: padded and unpadded 3x3, stride 2,
    // a 7x7 stride-2 stem on 3 channels (batch 2), an unpadded 1x1 stride 2, 16x16 padded planes (one
    // row added), output channels no multiple of a vector (20) or of the tile (24 = 3 vectors); blocks
    // of one row to all, channel blocks shifting inwards, tiles rounded up past the last position, the
    // reduction in passes that divide the input channels, narrower and wider vectors; the input copied
    // planar or channel-blocked (blocks of 1, 2, 4, 8 channels, or all: those of 4, 8 and 16 up to the
    // vector width transposed in registers from the planes, where the padded rows are that wide), at
    // root or per task.
    int ran = 0;
    for (const Graph &g : {conv_model(16, 9, 26, 24, 3, 1, 1, 1), conv_model(6, 9, 11, 10, 3, 1, 0, 1),
                           conv_model(12, 14, 13, 20, 3, 2, 1, 1), conv_model(3, 23, 21, 16, 7, 2, 3, 1, 0, 0, 2),
                           conv_model(10, 7, 9, 12, 1, 2, 0, 1), conv_model(8, 14, 14, 16, 3, 1, 1, 1)}) {
        FusedGraph plan = fused_plan(g);
        ASSERT_EQ(plan.groups.size(), 1u);
        EXPECT_EQ(plan.groups[0].schedule["template"], "conv_cv");
        expect_matches_reference(plan);
        const Shape t = g.type_of("relu").shape;
        const int cin = static_cast<int>(g.type_of("x").shape[1]), cout = static_cast<int>(t[1]);
        const int h = static_cast<int>(t[2]), w = static_cast<int>(t[3]);
        // By default channel-blocked by 8 where the input is padded (so copied anyway).
        const bool padded = g.find_node("conv")->attrs["pads"][0] != 0;
        EXPECT_EQ(plan.groups[0].schedule["input_block"], padded && cin % 8 == 0 ? 8 : 0);
        std::vector<int> input_blocks = {0, cin};
        for (int d : {8, 4, 2, 1}) {
            if (cin % d == 0) input_blocks.push_back(d);
        }
        int i = 0;
        for (int rows : {1, 2, h}) {
            for (auto [vw, np, nc] : {std::tuple{8, 3, 4}, std::tuple{8, 1, 1}, std::tuple{4, 5, 2},
                                      std::tuple{8, 2, 3}, std::tuple{16, 2, 1}}) {
                for (int cb : {nc * vw, 8, cout}) {
                    for (int ci_block : {cin, 1, cin % 2 ? cin : cin / 2}) {
                        if (np > rows * w || nc * vw >= cb + vw || cb > cout || i++ % 4) continue;
                        plan.groups[0].schedule = {{"template", "conv_cv"}, {"vector_width", vw},
                                                   {"tile_positions", np},  {"tile_c_vectors", nc},
                                                   {"block_rows", rows},    {"channel_block", cb},
                                                   {"ci_block", ci_block}};
                        // Absent (plans before it) is planar.
                        if (ran % 5) plan.groups[0].schedule["input_block"] = input_blocks[ran % input_blocks.size()];
                        // The input copy per task (the rows it reads), or at root (absent: root).
                        if (ran % 3) plan.groups[0].schedule["input_at"] = ran % 3 == 1 ? "task" : "root";
                        // Tiles within rows padded to whole tiles (absent: along the flat positions).
                        if (ran % 7 == 3) plan.groups[0].schedule["position_tiles"] = "in_rows";
                        expect_matches_reference(plan);
                        ran++;
                    }
                }
            }
        }
    }
    EXPECT_GE(ran, 60);
}

TEST(Composer, GroupedChannelVectorConvMatchesTheReference) {
    // A grouped conv by conv_cv: a block of a vector's channels reduces over the input channels of the
    // groups it spans (ops::blocked_groups). Groups of whole vectors (16 a group by 8 and 16 lanes),
    // vectors of whole groups (4 a group), and neither (12 a group by 8 lanes: a block spans one or two
    // groups, the last shifted inwards); register tiles across groups, tiles within a row (positions
    // dividing it) and across rows, strides, pads, two images; the input planar or blocked, at root or
    // per task, the reduction in one pass or several.
    int ran = 0;
    for (const Graph &g : {conv_model(32, 9, 14, 32, 3, 1, 1, 2, 0, 0, 2), conv_model(16, 11, 12, 16, 3, 2, 1, 4),
                           conv_model(24, 7, 10, 36, 3, 1, 0, 3), conv_model(48, 8, 8, 48, 1, 1, 0, 3)}) {
        FusedGraph plan = fused_plan(g);
        ASSERT_EQ(plan.groups.size(), 1u);
        const Shape t = g.type_of("relu").shape;
        const int cin = static_cast<int>(g.type_of("x").shape[1]), cout = static_cast<int>(t[1]);
        const int h = static_cast<int>(t[2]), w = static_cast<int>(t[3]);
        const int group = static_cast<int>(g.find_node("conv")->attrs["group"].get<int64_t>());
        int i = 0;
        for (auto [vw, np, nc, rows] : {std::tuple{8, w, 1, h}, std::tuple{8, w / 2, 2, 2}, std::tuple{16, 3, 1, 1},
                                        std::tuple{4, 5, 3, 3}, std::tuple{8, 7, 2, h}, std::tuple{4, 2, 1, 2}}) {
            const ops::BlockedGroups b = ops::blocked_groups(cin, cout, group, vw);
            for (int ib : {0, 8, 4}) {
                for (int ci_block : {static_cast<int>(b.span), static_cast<int>(b.group_inputs)}) {
                    const int cb = std::min(cout, nc * vw);
                    if (np < 1 || np > rows * w || b.span % ci_block || (ib && cin % ib) || i++ % 3) continue;
                    plan.groups[0].schedule = {{"template", "conv_cv"}, {"vector_width", vw}, {"tile_positions", np},
                                               {"tile_c_vectors", nc},  {"block_rows", rows}, {"channel_block", cb},
                                               {"ci_block", ci_block},  {"input_block", ib}};
                    if (ran % 3 == 1 && ib) plan.groups[0].schedule["input_at"] = "task";
                    SCOPED_TRACE(plan.groups[0].schedule.dump());
                    expect_matches_reference(plan);
                    ran++;
                }
            }
        }
    }
    EXPECT_GE(ran, 14);
}

TEST(Composer, GroupedConvTakesChannelVectorsWhereGroupsAreWholeVectors) {
    // 16 channels a group (RegNet's), AVX-512: conv_cv, a register tile of one group's vectors, its
    // positions dividing the row (14 at 28 wide; 7 at 7x7). 8 a group under 16 lanes would reduce over
    // two groups' inputs (half the FLOPs wasted): not conv_cv. Winograd is refused for grouped convs.
    const Halide::Target avx512("x86-64-linux-avx-avx2-f16c-fma-sse41-avx512-avx512_skylake");
    for (auto [size, expect_np] : {std::pair{28, 14}, std::pair{7, 7}}) {
        const Graph g = conv_model(64, size, size, 64, 3, 1, 1, 4);
        const FusedGraph plan = with_default_schedules(plan_fusion(g, {load_rules("x86")}), avx512);
        const nlohmann::json &p = plan.groups[0].schedule;
        EXPECT_EQ(p["template"], "conv_cv") << p.dump();
        EXPECT_EQ(p["tile_c_vectors"], 1) << p.dump();
        EXPECT_EQ(p["tile_positions"], expect_np) << p.dump();
        EXPECT_EQ(p["ci_block"], 16) << p.dump();
    }
    // AVX2 (16 registers) too, 2 vectors of a group's channels by 4 positions dividing the row; at 7x7,
    // whose row has no such divisor of at least 4, by the most that fit the registers: 4 (5 x 2 needs
    // 17 of them); 8 a group is a whole AVX2 vector.
    const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41");
    for (auto [size, groups, expect_nc, expect_np] :
         {std::tuple{28, 4, 2, 4}, std::tuple{7, 4, 2, 4}, std::tuple{28, 8, 1, 7}}) {
        const Graph g = conv_model(64, size, size, 64, 3, 1, 1, groups);
        const nlohmann::json p = with_default_schedules(plan_fusion(g, {load_rules("x86")}), avx2).groups[0].schedule;
        EXPECT_EQ(p["template"], "conv_cv") << p.dump();
        EXPECT_EQ(p["tile_c_vectors"], expect_nc) << p.dump();
        EXPECT_EQ(p["tile_positions"], expect_np) << p.dump();
    }
    const Graph eight = conv_model(64, 28, 28, 64, 3, 1, 1, 8);
    EXPECT_NE(with_default_schedules(plan_fusion(eight, {load_rules("x86")}), avx512).groups[0].schedule["template"],
              "conv_cv");
    nlohmann::json wino = {{"template", "conv_cv"}, {"algorithm", "winograd"}, {"winograd_tile", 2},
                           {"vector_width", 8},     {"tile_positions", 2},     {"tile_c_vectors", 1},
                           {"block_rows", 2},       {"channel_block", 8},      {"ci_block", 16}};
    expect_conv_params_error(conv_model(32, 14, 14, 32, 3, 1, 1, 2), wino, "schedule.algorithm");
}

TEST(Composer, ChannelVectorConvWithDilationAndInOnePipeline) {
    // A dilated 3x3 reading another group's Func in a whole-model pipeline (not an ImageParam), and a
    // global pool after a 3x3 that puts the conv at root; the executor runs the same plans.
    const std::string text = R"({"format": "hfuse-model", "version": 1, "name": "cv_chain",
      "inputs": [{"name": "x", "shape": [2, 9, 11, 12]}],
      "weights": {"w": {"shape": [16, 9, 3, 3], "uniform": [-0.3, 0.3], "seed": 1},
                  "b": {"shape": [16], "uniform": [-0.3, 0.3], "seed": 2},
                  "w2": {"shape": [12, 16, 3, 3], "uniform": [-0.3, 0.3], "seed": 3}},
      "nodes": [{"name": "pre", "op": "Sigmoid", "inputs": ["x"]},
                {"name": "conv", "op": "Conv", "inputs": ["pre", "w", "b"],
                 "attrs": {"kernel_shape": [3, 3], "pads": [2, 1, 2, 1], "dilations": [2, 1]}},
                {"name": "relu", "op": "Relu", "inputs": ["conv"]},
                {"name": "conv2", "op": "Conv", "inputs": ["relu", "w2"], "attrs": {"kernel_shape": [3, 3], "strides": [2, 2]}},
                {"name": "gap", "op": "GlobalAveragePool", "inputs": ["conv2"]}],
      "outputs": ["relu", "gap"]})";
    const std::string path = testing::TempDir() + "/composer_cv_chain_" + std::to_string(getpid()) + ".json";
    std::ofstream(path) << text;
    Graph g = load_model(path);
    for (bool fused : {false, true}) {
        FusedGraph plan = fused ? fused_plan(g) : with_default_schedules(singleton_groups(g), kTarget);
        int cv = 0, root = 0;
        for (const FusedGroup &grp : plan.groups) {
            cv += grp.schedule.value("template", "") == "conv_cv";
            root += grp.schedule.value("compute", "") == "root";
        }
        EXPECT_EQ(cv, 2);
        EXPECT_EQ(root, fused ? 1 : 0);
        expect_pipeline_matches_reference(g, plan);
        // Both inputs copied channel-blocked (the second, unpadded, too), in the pipeline as well.
        for (FusedGroup &grp : plan.groups) {
            if (grp.schedule.value("template", "") == "conv_cv")
                grp.schedule["input_block"] = grp.master == "conv" ? 3 : 8;
        }
        expect_pipeline_matches_reference(g, plan);
    }
    std::remove(path.c_str());
}

TEST(Composer, ChannelVectorConvReadingItsProducersBlocksTakesAFittingTile) {
    // A 1x1 256->256 at 7x7 (conv_cv: 256 input channels) reading a grouped 3x3 that conv_cv
    // stores channel-blocked for it alone (ResNeXt's conv2 -> conv3): under AVX2 its defaults read the
    // blocks as stored, no copy, with a register tile whose accumulators, weight vectors and broadcast
    // fit the 16 registers (the blocks then read unrolled; 3 x 4 needs 17). Then the plan against the
    // reference, and on an odd plane with the channels no multiple of the tile.
    for (const int size : {7, 9}) {
        const std::string text = R"({"format": "hfuse-model", "version": 1, "name": "gc",
      "inputs": [{"name": "x", "shape": [1, 256, )" +
                                 std::to_string(size) + ", " + std::to_string(size) + R"(]}],
      "weights": {"w1": {"shape": [256, 8, 3, 3], "uniform": [-0.3, 0.3], "seed": 1},
                  "w2": {"shape": [)" +
                                 std::to_string(size == 7 ? 256 : 200) +
                                 R"(, 256, 1, 1], "uniform": [-0.1, 0.1], "seed": 2}},
      "nodes": [{"name": "gconv", "op": "Conv", "inputs": ["x", "w1"],
                 "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": 32}},
                {"name": "r1", "op": "Relu", "inputs": ["gconv"]},
                {"name": "pconv", "op": "Conv", "inputs": ["r1", "w2"], "attrs": {"kernel_shape": [1, 1]}},
                {"name": "r2", "op": "Relu", "inputs": ["pconv"]}],
      "outputs": ["r2"]})";
        const std::string path = tmp_path("gc_" + std::to_string(size) + ".json");
        std::ofstream(path) << text;
        const Graph g = load_model(path);
        const FusedGraph plan = fused_plan(g);
        ASSERT_EQ(plan.groups.size(), 2u);
        const nlohmann::json &producer = plan.groups[0].schedule, &p = plan.groups[1].schedule;
        ASSERT_EQ(producer.value("template", ""), "conv_cv") << producer.dump();
        ASSERT_EQ(p.value("template", ""), "conv_cv") << p.dump();
        if (size == 7) {
            const int np = p["tile_positions"], nc = p["tile_c_vectors"];
            EXPECT_LE(np * nc + nc + 1, 16) << p.dump();
            EXPECT_EQ(p.value("input_block", -1), 0) << p.dump();
        }
        expect_pipeline_matches_reference(g, plan);
        std::remove(path.c_str());
    }
}

TEST(Composer, ChannelVectorConvReadingABlockedValueOthersReadTooTakesAFittingTile) {
    // A bottleneck block's input `a` (a conv_cv group's output) read by the block's first 1x1 and by
    // its residual Add: the plan stores it channel-blocked, as both can read it so. Under AVX2 the 1x1
    // 256->256 at 7x7, whose planar defaults take 3 x 4 tiles (19 vectors: the blocks then read channel
    // by channel), takes the defaults for its blocked input, a tile that fits the 16 registers. Then
    // the plan against the reference; also on a 5x5 plane with 200 channels in the middle.
    for (const int size : {7, 5}) {
        const int mid = size == 7 ? 256 : 200;
        const std::string text = R"({"format": "hfuse-model", "version": 1, "name": "bottleneck",
      "inputs": [{"name": "x", "shape": [1, 64, )" +
                                 std::to_string(size) + ", " + std::to_string(size) + R"(]}],
      "weights": {"w0": {"shape": [256, 64, 1, 1], "uniform": [-0.2, 0.2], "seed": 1},
                  "w1": {"shape": [)" +
                                 std::to_string(mid) +
                                 R"(, 256, 1, 1], "uniform": [-0.1, 0.1], "seed": 2},
                  "w2": {"shape": [256, )" +
                                 std::to_string(mid) +
                                 R"(, 1, 1], "uniform": [-0.1, 0.1], "seed": 3}},
      "nodes": [{"name": "c0", "op": "Conv", "inputs": ["x", "w0"], "attrs": {"kernel_shape": [1, 1]}},
                {"name": "a", "op": "Relu", "inputs": ["c0"]},
                {"name": "c1", "op": "Conv", "inputs": ["a", "w1"], "attrs": {"kernel_shape": [1, 1]}},
                {"name": "b", "op": "Relu", "inputs": ["c1"]},
                {"name": "c2", "op": "Conv", "inputs": ["b", "w2"], "attrs": {"kernel_shape": [1, 1]}},
                {"name": "sum", "op": "Add", "inputs": ["c2", "a"]},
                {"name": "out", "op": "Relu", "inputs": ["sum"]}],
      "outputs": ["out"]})";
        const std::string path = tmp_path("bottleneck_" + std::to_string(size) + ".json");
        std::ofstream(path) << text;
        const Graph g = load_model(path);
        std::remove(path.c_str());
        const FusedGraph plan = fused_plan(g);
        ASSERT_EQ(plan.groups.size(), 3u);
        const exec::ValueLayouts layouts = exec::choose_value_layouts(plan, kTarget);
        EXPECT_EQ(exec::layout_of(layouts, "a").block, 8);
        const nlohmann::json &p = plan.groups[1].schedule;
        ASSERT_EQ(plan.groups[1].master, "c1");
        ASSERT_EQ(p.value("template", ""), "conv_cv") << p.dump();
        const int np = p["tile_positions"], nc = p["tile_c_vectors"];
        EXPECT_LE(np * nc + np + nc, 16) << p.dump();
        expect_pipeline_matches_reference(g, plan);
    }
}

TEST(Composer, ChannelVectorConvAtRootReadingBlocksTakesAFittingTile) {
    // A network's head: a 1x1 320->1280 at 7x7 + ReLU + global pool (the conv at root, the rest by the
    // simple schedule) after a conv_cv group that stores its output channel-blocked for it. Under AVX2
    // the conv takes a tile that fits the 16 registers (its planar defaults, 3 x 4, read the blocks
    // channel by channel), and the plan matches the reference.
    const std::string text = R"({"format": "hfuse-model", "version": 1, "name": "head",
      "inputs": [{"name": "x", "shape": [1, 64, 7, 7]}],
      "weights": {"w0": {"shape": [320, 64, 1, 1], "uniform": [-0.2, 0.2], "seed": 1},
                  "w1": {"shape": [1280, 320, 1, 1], "uniform": [-0.1, 0.1], "seed": 2}},
      "nodes": [{"name": "c0", "op": "Conv", "inputs": ["x", "w0"], "attrs": {"kernel_shape": [1, 1]}},
                {"name": "c1", "op": "Conv", "inputs": ["c0", "w1"], "attrs": {"kernel_shape": [1, 1]}},
                {"name": "r1", "op": "Relu", "inputs": ["c1"]},
                {"name": "gap", "op": "GlobalAveragePool", "inputs": ["r1"]}],
      "outputs": ["gap"]})";
    const std::string path = tmp_path("head.json");
    std::ofstream(path) << text;
    const Graph g = load_model(path);
    std::remove(path.c_str());
    const FusedGraph plan = fused_plan(g);
    ASSERT_EQ(plan.groups.size(), 2u);
    EXPECT_EQ(exec::layout_of(exec::choose_value_layouts(plan, kTarget), "c0").block, 8);
    const nlohmann::json &p = plan.groups[1].schedule;
    ASSERT_EQ(p.value("template", ""), "conv_cv") << p.dump();
    EXPECT_EQ(p.value("compute", ""), "root") << p.dump();
    const int np = p["tile_positions"], nc = p["tile_c_vectors"];
    EXPECT_LE(np * nc + np + nc, 16) << p.dump();
    expect_pipeline_matches_reference(g, plan);
}

TEST(Composer, ChannelVectorConvOverARowOf14TakesTwoPositionTiles) {
    // MobileNet-V2's project conv, 576->96 at 14x14, reading the expand conv's channel-blocked output:
    // the weights are the smaller operand, so a task is a row of 14 positions x all 96 channels. Under
    // AVX2, 3 x 3 tiles would compute 15 positions of the 14: 2 x 4 tiles. At 17x17 over rows where
    // 3-position tiles compute no more than 2-position ones, 3 x 3 stays. Both against the reference.
    for (const int size : {14, 17}) {
        const std::string text = R"({"format": "hfuse-model", "version": 1, "name": "proj",
      "inputs": [{"name": "x", "shape": [1, 96, )" +
                                 std::to_string(size) + ", " + std::to_string(size) + R"(]}],
      "weights": {"w0": {"shape": [576, 96, 1, 1], "uniform": [-0.2, 0.2], "seed": 1},
                  "w1": {"shape": [96, 576, 1, 1], "uniform": [-0.1, 0.1], "seed": 2}},
      "nodes": [{"name": "c0", "op": "Conv", "inputs": ["x", "w0"], "attrs": {"kernel_shape": [1, 1]}},
                {"name": "a", "op": "Relu", "inputs": ["c0"]},
                {"name": "c1", "op": "Conv", "inputs": ["a", "w1"], "attrs": {"kernel_shape": [1, 1]}},
                {"name": "out", "op": "Relu", "inputs": ["c1"]}],
      "outputs": ["out"]})";
        const std::string path = tmp_path("proj_" + std::to_string(size) + ".json");
        std::ofstream(path) << text;
        const Graph g = load_model(path);
        std::remove(path.c_str());
        const FusedGraph plan = fused_plan(g);
        ASSERT_EQ(plan.groups.size(), 2u);
        const nlohmann::json &p = plan.groups[1].schedule;
        ASSERT_EQ(p.value("template", ""), "conv_cv") << p.dump();
        ASSERT_EQ(p.value("channel_block", 0), 96) << p.dump();
        const int np = p["tile_positions"], nc = p["tile_c_vectors"];
        const int64_t positions = int64_t{p["block_rows"].get<int>()} * size;
        if (size == 14) {
            EXPECT_EQ(np, 2) << p.dump();
            EXPECT_EQ(nc, 4) << p.dump();
        } else if ((positions + 2) / 3 * 3 < 1.05 * ((positions + 1) / 2 * 2)) {
            EXPECT_EQ(np, 3) << p.dump();
            EXPECT_EQ(nc, 3) << p.dump();
        }
        expect_pipeline_matches_reference(g, plan);
    }
}

TEST(Composer, PointwiseConvTakesChannelVectorsWhereItsReaderWouldCopyItBlocked) {
    // A 1x1 (conv_xv or conv_flat by its shapes) whose only reader, a padded 3x3 by conv_cv, would copy
    // its output channel-blocked: conv_cv, storing its tiles blocked, and the copy goes. With a second
    // reader that cannot read blocks (a Sigmoid of its own), or with its input computed in its group
    // (a prologue: BN + ReLU as DenseNet's), it keeps its template.
    for (int variant = 0; variant < 3; variant++) {
        const std::string pre = variant == 2 ? R"({"name": "pre", "op": "Relu", "inputs": ["x"]},)" : "";
        const std::string other = variant == 1 ? R"(, {"name": "side", "op": "Sigmoid", "inputs": ["r1"]})" : "";
        const std::string text = R"({"format": "hfuse-model", "version": 1, "name": "pw_reader",
          "inputs": [{"name": "x", "shape": [1, 16, 20, 20]}],
          "weights": {"w1": {"shape": [32, 16, 1, 1], "uniform": [-0.3, 0.3], "seed": 1},
                      "w2": {"shape": [32, 32, 3, 3], "uniform": [-0.3, 0.3], "seed": 2}},
          "nodes": [)" + pre + R"({"name": "pw", "op": "Conv", "inputs": [")" +
                                 (variant == 2 ? "pre" : "x") + R"(", "w1"], "attrs": {"kernel_shape": [1, 1]}},
                    {"name": "r1", "op": "Relu", "inputs": ["pw"]},
                    {"name": "conv", "op": "Conv", "inputs": ["r1", "w2"], "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}},
                    {"name": "r2", "op": "Relu", "inputs": ["conv"]})" +
                                 other + R"(],
          "outputs": ["r2")" + std::string(variant == 1 ? R"(, "side")" : "") +
                                 R"(]})";
        const std::string path = testing::TempDir() + "/composer_pw_reader_" + std::to_string(getpid()) + ".json";
        std::ofstream(path) << text;
        const Graph g = load_model(path);
        std::remove(path.c_str());
        const FusedGraph plan = fused_plan(g);
        std::string pw_template, reader_template;
        int reader_block = -1;
        for (const FusedGroup &grp : plan.groups) {
            if (grp.master == "pw") pw_template = grp.schedule.value("template", "");
            if (grp.master == "conv") {
                reader_template = grp.schedule.value("template", "");
                reader_block = grp.schedule.value("input_block", 0);
            }
        }
        ASSERT_EQ(reader_template, "conv_cv");
        ASSERT_GT(reader_block, 0);
        if (variant == 0) {
            EXPECT_EQ(pw_template, "conv_cv");
        } else {
            EXPECT_NE(pw_template, "conv_cv") << variant;
        }
        // Alone, its shapes give it another template.
        FusedGroup alone;
        for (const FusedGroup &grp : plan.groups) {
            if (grp.master == "pw") alone = grp;
        }
        alone.schedule = nlohmann::json();
        EXPECT_NE(default_schedule_params(g, alone, kTarget).value("template", ""), "conv_cv");
        expect_pipeline_matches_reference(g, plan);
    }
}

TEST(Composer, ChannelVectorConvPlanesOfAKilobyte) {
    // 16x16 padded planes get one more row (L1 sets), where the windows reach past the input's rows
    // (3x3, pads 1 at 14x14); with a 1x3 kernel padded only along x (16 rows read of 16) they may not:
    // the extra row would read past the input.
    for (const char *attrs :
         {R"({"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})", R"({"kernel_shape": [1, 3], "pads": [0, 1, 0, 1]})"}) {
        const bool square = std::string(attrs).find("[3, 3]") != std::string::npos;
        const std::string text = R"({"format": "hfuse-model", "version": 1, "name": "cv_planes",
          "inputs": [{"name": "x", "shape": [1, 8, )" +
                                 std::string(square ? "14" : "16") + R"(, 14]}],
          "weights": {"w": {"shape": [16, 8, )" +
                                 std::string(square ? "3, 3" : "1, 3") +
                                 R"(], "uniform": [-0.3, 0.3], "seed": 1}},
          "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w"], "attrs": )" +
                                 attrs + R"(},
                    {"name": "relu", "op": "Relu", "inputs": ["conv"]}],
          "outputs": ["relu"]})";
        const std::string path = testing::TempDir() + "/composer_cv_planes_" + std::to_string(getpid()) + ".json";
        std::ofstream(path) << text;
        FusedGraph plan = fused_plan(load_model(path));
        std::remove(path.c_str());
        EXPECT_EQ(plan.groups[0].schedule["template"], "conv_cv") << attrs;
        expect_matches_reference(plan);
    }
}

TEST(Composer, ChannelVectorConvErrorsNameTheField) {
    nlohmann::json p = {{"template", "conv_cv"}, {"vector_width", 8},   {"tile_positions", 3}, {"tile_c_vectors", 2},
                        {"block_rows", 2},       {"channel_block", 16}, {"ci_block", 8}};
    // Grouped, 8 a group: a block of 8 lanes reduces over its group's 4 input channels.
    expect_conv_params_error(conv_model(8, 9, 10, 16, 3, 1, 1, 2), p, "schedule.ci_block");
    const Graph g = conv_model(8, 9, 10, 16, 3, 1, 1, 1);
    p["ci_block"] = 3;  // does not divide 8
    expect_conv_params_error(g, p, "schedule.ci_block");
    p["ci_block"] = 8;
    p["input_block"] = 3;
    expect_conv_params_error(g, p, "schedule.input_block");
    p["input_block"] = -1;
    expect_conv_params_error(g, p, "schedule.input_block");
    p["input_block"] = 4;
    p["input_at"] = "tile";  // root or task
    expect_conv_params_error(g, p, "schedule.input_at");
    p["input_at"] = 1;
    expect_conv_params_error(g, p, "schedule.input_at");
    p.erase("input_at");
    p["tile_c_vectors"] = 3;  // 24 channels, a block holds 16
    expect_conv_params_error(g, p, "schedule.tile_c_vectors");
    p["tile_c_vectors"] = 2;
    p["tile_positions"] = 16;
    p["block_rows"] = 1;  // 10 positions
    expect_conv_params_error(g, p, "schedule.tile_positions");
    p["tile_positions"] = 3;
    p["vector_width"] = 6;
    expect_conv_params_error(g, p, "schedule.vector_width");
    p["vector_width"] = 8;
    p["tile_y"] = 2;
    expect_conv_params_error(g, p, "schedule.tile_y");

    // Weights that are an input of the model cannot be packed when lowering.
    const std::string text = R"({"format": "hfuse-model", "version": 1, "name": "cv_input_w",
      "inputs": [{"name": "x", "shape": [1, 8, 9, 10]}, {"name": "w", "shape": [16, 8, 3, 3]}],
      "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w"], "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}},
                {"name": "relu", "op": "Relu", "inputs": ["conv"]}],
      "outputs": ["relu"]})";
    const std::string path = testing::TempDir() + "/composer_cv_input_w_" + std::to_string(getpid()) + ".json";
    std::ofstream(path) << text;
    const Graph gw = load_model(path);
    EXPECT_NE(fused_plan(gw).groups[0].schedule.value("template", ""), "conv_cv");
    p.erase("tile_y");
    expect_conv_params_error(gw, p, "schedule.template");
    std::remove(path.c_str());
}

TEST(Composer, PoolAfterConvIsTheTile) {
    // 2x2 stride 2 and overlapping 3x3 stride 2 windows (pads 1), odd sizes.
    // An unpadded 1x1 conv under a padded stride-1 pool: the conv's region is no whole number of vectors.
    // (Computed weights: with constant ones the 3x3s take conv_cv at root, tested below.)
    for (const Graph &g :
         {conv_model(8, 18, 34, 12, 3, 1, 1, 1, 2, 2, 1, true), conv_model(6, 31, 37, 10, 3, 1, 1, 1, 3, 2, 1, true),
          conv_model(7, 8, 9, 14, 1, 1, 0, 1, 3, 1)}) {
        FusedGraph plan = fused_plan(g);
        ASSERT_EQ(plan.groups.size(), 1u);
        EXPECT_EQ(plan.groups[0].schedule["template"], "conv_xv");
        EXPECT_TRUE(plan.groups[0].schedule.contains("strip_c"));
        expect_matches_reference(plan);
        // Per register tile of the pool's output instead of strips: conv rows a multiple of the stride.
        const int stride = g.type_of("pool").shape[3] == g.type_of("relu").shape[3] ? 1 : 2;
        plan.groups[0].schedule = {{"template", "conv_xv"}, {"vector_width", 8}, {"tile_x_vectors", 1},
                                   {"tile_y", 2 * stride},  {"tile_c", 6},       {"reduction_order", "kx,ci,ky"}};
        expect_matches_reference(plan);
    }
}

TEST(Composer, ConvStripsUnderAPoolMatchTheReference) {
    // The conv per strip of the pool's output, register-tiled within the strip: tiles that do not
    // divide the strip (shifted inwards), one-row strips, overlapping windows, an unpadded conv, a batch.
    int ran = 0;
    for (const Graph &g : {conv_model(8, 18, 34, 12, 3, 1, 1, 1, 2, 2), conv_model(6, 31, 37, 10, 3, 1, 1, 1, 3, 2),
                           conv_model(7, 8, 9, 14, 1, 1, 0, 1, 3, 1), conv_model(5, 10, 12, 9, 3, 1, 1, 1, 2, 2, 2)}) {
        FusedGraph plan = fused_plan(g);
        const Shape t = g.type_of("pool").shape;
        for (auto [nx, ny, nc] : {std::tuple{1, 3, 4}, std::tuple{1, 2, 6}, std::tuple{2, 1, 3}, std::tuple{1, 1, 1}}) {
            for (int strip_c : {nc, 7, static_cast<int>(t[1])}) {
                for (int strip_y : {0, 1, 3}) {
                    nlohmann::json s = {
                        {"template", "conv_xv"}, {"vector_width", 8},  {"tile_x_vectors", nx},         {"tile_y", ny},
                        {"tile_c", nc},          {"strip_c", strip_c}, {"reduction_order", "kx,ci,ky"}};
                    if (strip_y) s["strip_y"] = strip_y;
                    s["channel_loop"] = (ran % 2) ? "inner" : "outer";
                    const int stride = t[3] == g.type_of("relu").shape[3] ? 1 : 2;
                    const int rows = ((strip_y ? strip_y : t[2]) - 1) * stride + 1;
                    if (strip_c > t[1] || nc > strip_c || ny > rows || 8 * nx > (t[3] - 1) * stride + 1) continue;
                    if (strip_y && g.find_node("conv")->attrs.at("pads").at(0).get<int>() == 0)
                        continue;  // needs padding
                    plan.groups[0].schedule = s;
                    expect_matches_reference(plan);
                    ran++;
                }
            }
        }
    }
    EXPECT_GE(ran, 40);
}

TEST(Composer, DepthwiseAndSimpleTemplatesMatchTheReference) {
    expect_matches_reference(fused_plan(conv_model(24, 14, 14, 24, 3, 1, 1, 24)));
    expect_matches_reference(fused_plan(conv_model(20, 11, 17, 20, 3, 2, 1, 20)));
    // Batches: one parallel loop over every image's channel blocks, channel blocks shifting inwards.
    for (int cb : {24, 5}) {
        FusedGraph batched = fused_plan(conv_model(24, 14, 14, 24, 3, 1, 1, 24, 0, 0, 3));
        ASSERT_EQ(batched.groups[0].schedule["template"], "conv_dw");
        batched.groups[0].schedule["channel_block"] = cb;
        expect_matches_reference(batched);
    }
    expect_matches_reference(fused_plan(conv_model(8, 3, 3, 8, 3, 1, 1, 1)));
    // Narrow outputs on 4-lane vectors: strided convs, depthwise, a strided 1x1 (stride-1 convs are
    // flattened instead, with whole vectors).
    // (Computed weights: with constant ones the strided convs take conv_cv.)
    for (const Graph &g :
         {conv_model(8, 9, 9, 8, 3, 2, 1, 1, 0, 0, 1, true), conv_model(32, 13, 13, 40, 3, 2, 1, 1, 0, 0, 1, true),
          conv_model(24, 7, 7, 24, 3, 1, 1, 24), conv_model(16, 12, 14, 20, 1, 2, 0, 1, 0, 0, 1, true),
          conv_model(8, 13, 13, 12, 3, 2, 1, 1, 0, 0, 1, true)}) {
        FusedGraph plan = fused_plan(g);
        EXPECT_EQ(plan.groups[0].schedule.value("vector_width", 0), std::min(kTarget.natural_vector_size<float>(), 4));
        expect_matches_reference(plan);
    }
}

TEST(Composer, BadParametersNameTheField) {
    // conv_xv's parameters, which this 3x3 no longer takes by default (conv_cv's Winograd does): each
    // bad value below is refused by the check for it, not as a parameter conv_cv does not know.
    FusedGraph plan = fused_plan(conv_model(16, 20, 24, 16, 3, 1, 1, 1));
    plan.groups[0].schedule = {{"template", "conv_xv"}, {"vector_width", 8}, {"tile_x_vectors", 1},
                               {"tile_y", 3},           {"tile_c", 4},       {"reduction_order", "kx,ci,ky"}};
    expect_matches_reference(plan);
    auto expect_error = [&](nlohmann::json params, const std::string &field) {
        FusedGraph p = plan;
        p.groups[0].schedule = params;
        expect_conv_schedule_error(p, field);
        if (params.value("template", "") == "conv_xv") {
            try {
                Executor ex(p);
            } catch (const Error &e) {
                EXPECT_EQ(std::string(e.what()).find("unknown parameter"), std::string::npos) << e.what();
            }
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
    expect_error(with("reduction_unroll", 0), "schedule.reduction_unroll");
    expect_error(with("reduction_unroll", 17), "schedule.reduction_unroll");  // past the 16 input channels
    expect_error(with("channel_loop", "sideways"), "schedule.channel_loop");
    expect_error(with("template", "winograd"), "schedule.template");
    // Strips are for a conv under a pool.
    expect_error(with("strip_c", 8), "schedule.strip_c");
}

TEST(Composer, BadStripParametersNameTheField) {
    FusedGraph plan = fused_plan(conv_model(8, 18, 34, 12, 3, 1, 1, 1, 2, 2, 1, true));  // pool output 12 x 10 x 18
    auto expect_error = [&](nlohmann::json changes, const std::string &field) {
        FusedGraph p = plan;
        p.groups[0].schedule.update(changes);
        try {
            Executor ex(p);
            ADD_FAILURE() << "accepted " << p.groups[0].schedule.dump();
        } catch (const Error &e) {
            EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
        }
    };
    expect_error({{"strip_c", 13}}, "schedule.strip_c");
    expect_error({{"strip_c", 4}, {"strip_y", 11}}, "schedule.strip_y");
    expect_error({{"strip_c", 4}, {"tile_c", 6}}, "schedule.tile_c");
    expect_error({{"strip_c", 4}, {"tile_c", 4}, {"strip_y", 1}, {"tile_y", 2}}, "schedule.tile_y");
    expect_error({{"strip_c", 4}, {"tile_c", 4}, {"tile_x_vectors", 5}}, "schedule.tile_x_vectors");
    FusedGraph unpadded = fused_plan(conv_model(7, 8, 9, 14, 1, 1, 0, 1, 3, 1));
    unpadded.groups[0].schedule.update({{"strip_c", 7}, {"strip_y", 2}, {"tile_c", 1}, {"tile_y", 1}});
    EXPECT_THROW(
        {
            try {
                Executor ex(unpadded);
            } catch (const Error &e) {
                EXPECT_NE(std::string(e.what()).find("schedule.strip_y"), std::string::npos) << e.what();
                throw;
            }
        },
        Error);
}

// --- Gemm, pool, reduction and simple templates -------------------------------------------------

using nlohmann::json;

// A model from its JSON form, loaded as a model file is.
Graph json_model(const json &m) {
    std::string path = testing::TempDir() + "/composer_json_model_" + std::to_string(getpid()) + ".json";
    std::ofstream(path) << m.dump();
    return load_model(path);
}

json uniform(const Shape &shape, int seed) {
    return {{"shape", shape}, {"uniform", {-0.5, 0.5}}, {"seed", seed}};
}

json model_json(const std::vector<std::pair<std::string, Shape>> &inputs, const json &weights, const json &nodes,
                const std::string &output) {
    json in = json::array();
    for (const auto &[name, shape] : inputs) in.push_back({{"name", name}, {"shape", shape}});
    return {{"format", "hfuse-model"}, {"version", 1},   {"name", "m"},        {"inputs", in},
            {"weights", weights},      {"nodes", nodes}, {"outputs", {output}}};
}

// A 1x1 conv (cin -> cout, + Relu) at hw x hw, optionally after a BatchNormalization + Relu prologue
// its group computes, feeding a global average pool, optionally through a Concat with the input: the
// pointwise conv's value goes to another group, which reads it planar (a conv reader would read it
// channel-blocked: output_read_blocked).
Graph pointwise_then_pool(int cin, int cout, int hw, bool prologue, bool concat = false) {
    json nodes = json::array();
    std::string in = "x";
    if (prologue) {
        nodes.push_back({{"name", "bn"},
                         {"op", "BatchNormalization"},
                         {"inputs", {"x", "s", "b", "m", "v"}},
                         {"attrs", {{"epsilon", 1e-5}}}});
        nodes.push_back({{"name", "pre"}, {"op", "Relu"}, {"inputs", {"bn"}}});
        in = "pre";
    }
    nodes.push_back({{"name", "pw"}, {"op", "Conv"}, {"inputs", {in, "w1"}}, {"attrs", {{"kernel_shape", {1, 1}}}}});
    nodes.push_back({{"name", "relu"}, {"op", "Relu"}, {"inputs", {"pw"}}});
    if (concat)
        nodes.push_back({{"name", "cat"}, {"op", "Concat"}, {"inputs", {"relu", "x"}}, {"attrs", {{"axis", 1}}}});
    nodes.push_back({{"name", "pool"}, {"op", "GlobalAveragePool"}, {"inputs", {concat ? "cat" : "relu"}}});
    json weights = {{"w1", uniform({cout, cin, 1, 1}, 1)}};
    for (const char *p : {"s", "b", "m"}) weights[p] = uniform({cin}, 3);
    weights["v"] = {{"shape", Shape{cin}}, {"uniform", {0.5, 1.5}}, {"seed", 4}};
    return json_model(model_json({{"x", {1, cin, hw, hw}}}, weights, nodes, "pool"));
}

TEST(Composer, DeepPointwiseConvHandingItsValueOnTakesChannelVectors) {
    // AVX-512: a pointwise conv over at least 64 input channels to at least 128 output channels of
    // whole vectors, its value read by another group, takes conv_cv (in a network its readers are
    // mostly conv_cv convs, which read its tiles as they lie), also where its group computes its input
    // (a prologue), which conv_cv then copies in blocks of 8 channels, computing it once per value;
    // not narrower outputs, nor a prologue of channels not in whole blocks of 8, nor with AVX2's 16
    // registers, nor where its value is stored NCHW anyway: a Concat's input, a model output
    // (Composer.ChoosesTemplatesFromShapes).
    const Halide::Target avx512("x86-64-linux-avx-avx2-f16c-fma-sse41-avx512-avx512_skylake");
    RuleSet rules = load_rules("x86");
    rules.opaque_nodes.insert("pool");  // a group of its own
    auto pw_schedule = [&](const Graph &g, const Halide::Target &t) {
        const FusedGraph plan = with_default_schedules(plan_fusion(g, {rules}), t);
        for (const FusedGroup &grp : plan.groups) {
            if (grp.master == "pw") return grp.schedule;
        }
        return json{{"template", "no group led by pw"}};
    };
    auto pw_template = [&](const Graph &g, const Halide::Target &t) { return pw_schedule(g, t).value("template", ""); };
    EXPECT_EQ(pw_template(pointwise_then_pool(64, 128, 20, false), avx512), "conv_cv");
    EXPECT_NE(pw_template(pointwise_then_pool(64, 96, 20, false), avx512), "conv_cv");
    EXPECT_NE(pw_template(pointwise_then_pool(32, 128, 20, false), avx512), "conv_cv");
    const json with_prologue = pw_schedule(pointwise_then_pool(64, 128, 20, true), avx512);
    EXPECT_EQ(with_prologue.value("template", ""), "conv_cv") << with_prologue.dump();
    EXPECT_EQ(with_prologue.value("input_block", 0), 8) << with_prologue.dump();
    EXPECT_NE(pw_template(pointwise_then_pool(68, 128, 20, true), avx512), "conv_cv");
    EXPECT_NE(pw_template(pointwise_then_pool(64, 128, 20, false, true), avx512), "conv_cv");
    EXPECT_NE(pw_template(pointwise_then_pool(64, 128, 20, false), kTarget), "conv_cv");
    // On the host, with those defaults, the two groups compute the reference (odd plane).
    for (const bool prologue : {false, true}) {
        const Graph g = pointwise_then_pool(64, 128, 19, prologue);
        const FusedGraph plan = with_default_schedules(plan_fusion(g, {rules}), avx512);
        ASSERT_EQ(plan.groups.size(), 2u);
        expect_matches_reference(plan);
    }
}

// Gemm (A [M, K], or [K, M] with transA; B [N, K] with transB, else [K, N]; bias [N]) -> activation.
// Gemm of an input `a` with `b` (a weight, or with b_computed a second model input) + bias `c` -> act.
Graph gemm_model(int M, int K, int N, bool trans_a, bool trans_b, const std::string &act = "Relu", double alpha = 1,
                 double beta = 1, bool b_computed = false) {
    json attrs = {{"transA", trans_a ? 1 : 0}, {"transB", trans_b ? 1 : 0}, {"alpha", alpha}, {"beta", beta}};
    const Shape a = trans_a ? Shape{K, M} : Shape{M, K}, b = trans_b ? Shape{N, K} : Shape{K, N};
    json weights = {{"c", uniform({N}, 2)}};
    if (!b_computed) weights["b"] = uniform(b, 1);
    std::vector<std::pair<std::string, Shape>> inputs = {{"a", a}};
    if (b_computed) inputs.push_back({"b", b});
    return json_model(model_json(inputs, weights,
                                 {{{"name", "gemm"}, {"op", "Gemm"}, {"inputs", {"a", "b", "c"}}, {"attrs", attrs}},
                                  {{"name", "act"}, {"op", act}, {"inputs", {"gemm"}}}},
                                 "act"));
}

// MatMul of an input `a` with a weight `b` -> Sigmoid.
Graph matmul_model(const Shape &a, const Shape &b) {
    return json_model(model_json({{"a", a}}, {{"b", uniform(b, 3)}},
                                 {{{"name", "mm"}, {"op", "MatMul"}, {"inputs", {"a", "b"}}},
                                  {{"name", "act"}, {"op", "Sigmoid"}, {"inputs", {"mm"}}}},
                                 "act"));
}

// A single op on one input, then Relu.
Graph unary_model(const Shape &x, const std::string &op, const json &attrs) {
    json node = {{"name", "op"}, {"op", op}, {"inputs", {"x"}}};
    if (!attrs.empty()) node["attrs"] = attrs;
    return json_model(
        model_json({{"x", x}}, json::object(), {node, {{"name", "act"}, {"op", "Relu"}, {"inputs", {"op"}}}}, "act"));
}

// What a plan must reproduce: the unfused run of the model as loaded and the reference evaluator.
struct Expected {
    test::ModelInputs in;
    std::map<std::string, TensorBuffer> unfused;
    std::map<std::string, reference::RefTensor> reference;
};

Expected expected_for(const Graph &model) {
    Expected e;
    e.in = test::make_inputs(model);
    e.unfused = Executor(singleton_groups(model)).run(e.in.buffers);
    e.reference = reference::run(model, e.in.reference);
    return e;
}

void expect_matches(const FusedGraph &plan, const Graph &model, const Expected &e) {
    std::string schedules;
    for (const FusedGroup &grp : plan.groups) schedules += grp.name + " " + grp.schedule.dump() + "; ";
    SCOPED_TRACE(schedules);
    std::map<std::string, TensorBuffer> actual = Executor(plan).run(e.in.buffers);
    for (const std::string &out : model.outputs) {
        const TensorBuffer &a = actual.at(out);
        ASSERT_EQ(shape_of(a), e.reference.at(out).shape) << "output " << out;
        const size_t n = e.reference.at(out).data.size();
        reference::Comparison vs_ref = reference::compare(a.data(), e.reference.at(out).data.data(), n);
        reference::Comparison vs_unfused = reference::compare(a.data(), e.unfused.at(out).data(), n);
        EXPECT_LE(vs_ref.relative(), 1e-4) << "output " << out << " vs the reference: " << vs_ref.max_abs_error;
        EXPECT_LE(vs_unfused.relative(), 1e-4) << "output " << out << " vs unfused: " << vs_unfused.max_abs_error;
    }
}

// The plan's group led by `master`.
FusedGroup &group_of(FusedGraph &plan, const std::string &master) {
    for (FusedGroup &grp : plan.groups) {
        if (grp.master == master) return grp;
    }
    throw std::runtime_error("no group led by " + master);
}

// Every node of `model` in one group (placements derived by check_plan), with default schedules.
FusedGraph one_group(const Graph &model) {
    FusedGraph f;
    f.graph = simplify(model);
    f.rewritten = true;
    FusedGroup grp;
    for (const Node &n : f.graph.nodes) grp.nodes.push_back(n.name);
    f.groups.push_back(grp);
    return with_default_schedules(check_plan(f), kTarget);
}

// Attention's scores: Q [heads, S, d] times the keys transposed in the group ([S, heads, d] to
// [heads, d, S], perm [1, 2, 0]; and [0, 2, 1]). B then lies contiguous along K (gemm_dot's dot
// products), where gemm_nv would gather it with stride heads * d; the plan computes the same.
TEST(Composer, MatMulOfKeysTransposedInTheGroupTakesDotProducts) {
    const int H = 3, S = 21, D = 16;
    for (const json &perm : {json{1, 2, 0}, json{0, 2, 1}}) {
        SCOPED_TRACE(perm.dump());
        const bool seq_first = perm == json{1, 2, 0};
        const json nodes = {{{"name", "kt"}, {"op", "Transpose"}, {"inputs", {"k"}}, {"attrs", {{"perm", perm}}}},
                            {{"name", "scores"}, {"op", "MatMul"}, {"inputs", {"q", "kt"}}}};
        const Shape k_shape = seq_first ? Shape{S, H, D} : Shape{H, S, D};
        const Graph g = json_model(model_json({{"q", {H, S, D}}, {"k", k_shape}}, json::object(), nodes, "scores"));
        FusedGraph plan = one_group(g);
        EXPECT_EQ(plan.groups[0].schedule.value("template", ""), "gemm_dot");
        test::expect_plan_matches_reference(plan, 1e-4);
    }
}

// The scores' Softmax in the product's group (the product at root): its stages per row by the
// reduction template's Softmax schedule, rows of 21 (a vector and a tail), the same values.
TEST(Composer, SoftmaxAfterARootProductRunsByRows) {
    const int H = 3, S = 21, D = 16;
    const json nodes = {{{"name", "kt"}, {"op", "Transpose"}, {"inputs", {"k"}}, {"attrs", {{"perm", {1, 2, 0}}}}},
                        {{"name", "scores"}, {"op", "MatMul"}, {"inputs", {"q", "kt"}}},
                        {{"name", "attn"}, {"op", "Softmax"}, {"inputs", {"scores"}}, {"attrs", {{"axis", -1}}}}};
    const Graph g = json_model(model_json({{"q", {H, S, D}}, {"k", {S, H, D}}}, json::object(), nodes, "attn"));
    FusedGraph plan = one_group(g);
    EXPECT_EQ(plan.groups[0].schedule.value("compute", ""), "root");
    test::expect_plan_matches_reference(plan, 1e-4);
}

TEST(Composer, SqueezeExcitationGateRunsOnItsPlaneAsOneRow) {
    // A squeeze-and-excitation block's last group: fc2 (a 1x1 conv on the pooled 1x1 plane) +
    // Sigmoid + Mul of the block's 9 x 11 input by the gate. The conv goes at root (the Mul is no
    // epilogue of it), and the group on its position view: the plane as one row of 99 positions,
    // the gate's (1, 1) values as they are. It computes what the unfused graph does, in one group.
    const int C = 24, S = 6;
    const json nodes = {
        {{"name", "fc2"}, {"op", "Conv"}, {"inputs", {"s", "w", "b"}}, {"attrs", {{"kernel_shape", {1, 1}}}}},
        {{"name", "gate"}, {"op", "Sigmoid"}, {"inputs", {"fc2"}}},
        {{"name", "scaled"}, {"op", "Mul"}, {"inputs", {"x", "gate"}}}};
    const Graph g = json_model(model_json({{"x", {1, C, 9, 11}}, {"s", {1, S, 1, 1}}},
                                          {{"w", uniform({C, S, 1, 1}, 1)}, {"b", uniform({C}, 2)}}, nodes, "scaled"));
    FusedGraph plan = one_group(g);
    const json &p = plan.groups[0].schedule;
    EXPECT_EQ(p.value("compute", ""), "root") << p.dump();
    EXPECT_EQ(p.value("flatten_positions", false), true) << p.dump();
    EXPECT_TRUE(compose::position_view_blocker(plan.graph, plan.groups[0]).empty());
    const Graph view = compose::position_view(plan.graph, plan.groups[0]);
    EXPECT_EQ(view.type_of("scaled").shape, (Shape{1, C, 1, 99}));
    EXPECT_EQ(view.type_of("gate").shape, (Shape{1, C, 1, 1}));
    expect_matches_reference(plan);
    // A gate of one row or column of the plane is no broadcast the row keeps: no view.
    const Graph rows =
        json_model(model_json({{"x", {1, C, 9, 11}}, {"s", {1, S, 9, 1}}},
                              {{"w", uniform({C, S, 1, 1}, 1)}, {"b", uniform({C}, 2)}}, nodes, "scaled"));
    const FusedGraph rows_plan = one_group(rows);
    EXPECT_FALSE(compose::position_view_blocker(rows_plan.graph, rows_plan.groups[0]).empty());
    EXPECT_FALSE(rows_plan.groups[0].schedule.value("flatten_positions", false));
}

TEST(Composer, ChoosesTheTemplateOfTheMasterKind) {
    const int vw = kTarget.natural_vector_size<float>();
    // Batch-1 fully connected layer, constant B stored [N, K]: packed [K, N] at compile time, so
    // vectors of B times broadcasts of A, a row of up to 8 vectors, one serial tile loop.
    json cell = fused_plan(gemm_model(1, 128, 128, false, true)).groups[0].schedule;
    EXPECT_EQ(cell["template"], "gemm_nv");
    EXPECT_EQ(cell["vector_width"], vw);
    EXPECT_EQ(cell["tile_x_vectors"], std::min(8, 128 / vw));
    EXPECT_EQ(cell["tile_y"], 1);
    EXPECT_EQ(cell["parallel_tasks"], 1);
    EXPECT_EQ(cell["compute"], "tile");
    // A computed B stored [N, K]: dot products along k.
    json dot = fused_plan(gemm_model(1, 128, 128, false, true, "Relu", 1, 1, true)).groups[0].schedule;
    EXPECT_EQ(dot["template"], "gemm_dot");
    EXPECT_EQ(dot["tile_x"], vw);
    EXPECT_EQ(dot["tile_y"], 1);
    // B stored [K, N]: x vectorized, rows blocked too.
    json nv = fused_plan(gemm_model(6, 64, 64, false, false)).groups[0].schedule;
    EXPECT_EQ(nv["template"], "gemm_nv");
    EXPECT_EQ(nv["tile_y"], 6);
    EXPECT_EQ(nv["tile_x_vectors"], std::min(2, 64 / vw));
    // Large enough to run in parallel.
    EXPECT_GT(fused_plan(gemm_model(64, 256, 256, false, false)).groups[0].schedule["parallel_tasks"], 1);
    // Rows as many as the registers hold (AVX2: 6 rows of 2 vectors), balanced over the row tiles:
    // 20 rows are 4 tiles of 5, not three of 6 and one of 2.
    EXPECT_EQ(fused_plan(gemm_model(20, 64, 64, false, false)).groups[0].schedule["tile_y"], 5);
    // The LSTM cell: the gates read the products at four offsets, so they are computed at root.
    FusedGraph lstm = fused_plan(load_model(HFUSE_SOURCE_DIR "/models/lstm_cell.json"));
    EXPECT_EQ(group_of(lstm, "xw").schedule["template"], "gemm_nv");
    EXPECT_EQ(group_of(lstm, "xw").schedule["compute"], "root");
    // The RNN cell: both products per tile of the tanh's output.
    FusedGraph rnn = fused_plan(load_model(HFUSE_SOURCE_DIR "/models/rnn_cell.json"));
    ASSERT_EQ(rnn.groups.size(), 1u);
    EXPECT_EQ(rnn.groups[0].schedule["compute"], "tile");
    EXPECT_EQ(
        fused_plan(unary_model({1, 3, 9, 17}, "MaxPool", {{"kernel_shape", {3, 3}}})).groups[0].schedule["template"],
        "pool");
    EXPECT_EQ(fused_plan(unary_model({2, 37}, "Softmax", {})).groups[0].schedule["template"], "reduction");
    EXPECT_EQ(fused_plan(unary_model({1, 4, 7, 7}, "GlobalAveragePool", {})).groups[0].schedule["template"],
              "reduction");
    // Elementwise-led: the simple schedule is its template (no "why"), with its parameters recorded.
    json ew = fused_plan(unary_model({1, 4, 7, 9}, "Sigmoid", {})).groups[0].schedule;
    EXPECT_EQ(
        ew,
        json({{"template", "simple"}, {"vector_width", vw}, {"parallel_threshold", 4096}, {"task_elements", 8192}}));
    // A template that does not fit says why.
    EXPECT_TRUE(fused_plan(conv_model(8, 6, 6, 8, 3, 2, 1, 1, 0, 0, 1, true)).groups[0].schedule.contains("why"));
}

TEST(Composer, StridedDepthwiseConvTilesMatchTheReference) {
    // 5x5 stride 2 with uneven pads on 2 channels (the property test's model 45, seed 7): per channel,
    // a padded plane with constant offsets made Halide 14 emit aligned loads 8 bytes off (a crash)
    // for 2- and 3-row tiles while the plane was built in scalars; it is built in vectors now.
    for (int width : {11, 22}) {
        const std::string text = R"({"format": "hfuse-model", "version": 1, "name": "dw_s2",
          "inputs": [{"name": "x", "shape": [1, 2, )" +
                                 std::to_string(width == 11 ? 5 : 9) + ", " + std::to_string(width) + R"(]}],
          "weights": {"w": {"shape": [2, 1, 5, 5], "uniform": [-0.3, 0.3], "seed": 1},
                      "b": {"shape": [2], "uniform": [-0.3, 0.3], "seed": 2}},
          "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w", "b"],
                     "attrs": {"group": 2, "kernel_shape": [5, 5], "pads": [2, 2, 2, 1], "strides": [2, 2]}}],
          "outputs": ["conv"]})";
        const Graph g = json_model(nlohmann::json::parse(text));
        FusedGraph plan = fused_plan(g);
        EXPECT_EQ(plan.groups[0].schedule["template"], "conv_dw");
        expect_matches_reference(plan);
        const int64_t w = g.type_of("conv").shape[3], h = g.type_of("conv").shape[2];
        // Tiles of 1 or 2 vectors across, the plane read as it is or deinterleaved by phase.
        for (int vw : {4, 8}) {
            for (int ny : {1, 2, 3}) {
                for (int nx : {1, 2}) {
                    for (bool deinterleave : {false, true}) {
                        if (vw * nx > w || ny > h) continue;
                        plan.groups[0].schedule = {{"template", "conv_dw"},
                                                   {"vector_width", vw},
                                                   {"tile_y", ny},
                                                   {"tile_x_vectors", nx},
                                                   {"deinterleave_x", deinterleave},
                                                   {"channel_block", 2}};
                        expect_matches_reference(plan);
                    }
                }
            }
        }
    }
}

Graph expand_then_depthwise(int N, int C, int E, int H, int W, int k, int s);

// A depthwise conv: C channels of H x W, k x k, strides (sy, sx), dilations (dy, dx), pads
// (top, left, bottom, right), + ReLU.
Graph depthwise_model(int C, int H, int W, int k, int sy, int sx, int dy, int dx, std::array<int, 4> pads) {
    const json m = {{"format", "hfuse-model"},
                    {"version", 1},
                    {"name", "dw"},
                    {"inputs", {{{"name", "x"}, {"shape", {1, C, H, W}}}}},
                    {"weights",
                     {{"w", {{"shape", {C, 1, k, k}}, {"uniform", {-0.3, 0.3}}, {"seed", 1}}},
                      {"b", {{"shape", {C}}, {"uniform", {-0.3, 0.3}}, {"seed", 2}}}}},
                    {"nodes",
                     {{{"name", "conv"},
                       {"op", "Conv"},
                       {"inputs", {"x", "w", "b"}},
                       {"attrs",
                        {{"group", C},
                         {"kernel_shape", {k, k}},
                         {"strides", {sy, sx}},
                         {"dilations", {dy, dx}},
                         {"pads", {pads[0], pads[1], pads[2], pads[3]}}}}},
                      {{"name", "relu"}, {"op", "Relu"}, {"inputs", {"conv"}}}}},
                    {"outputs", {"relu"}}};
    return json_model(m);
}

TEST(Composer, DeinterleavedDepthwiseConvMatchesTheReference) {
    // conv_dw reading its filled plane by phase (ConvLowering::deinterleave_x): each tap
    // phases(x + kx * d / s, kx * d % s). Strides 2 and 3 across (1 and 2 down), dilation 2, uneven
    // pads whose last window reaches past the input or not, odd widths, 1 and 2 vectors across.
    struct Case {
        int C, H, W, k, sy, sx, dy, dx;
        std::array<int, 4> pads;
    };
    int ran = 0;
    for (const Case &c : {Case{3, 9, 23, 5, 2, 2, 1, 1, {2, 2, 2, 2}}, Case{5, 8, 29, 3, 1, 3, 1, 1, {1, 1, 0, 0}},
                          Case{2, 11, 31, 3, 2, 2, 2, 2, {2, 2, 2, 1}}, Case{4, 7, 40, 7, 1, 2, 1, 1, {3, 3, 3, 3}},
                          Case{3, 6, 19, 5, 2, 3, 1, 2, {0, 4, 0, 0}}}) {
        FusedGraph plan = fused_plan(depthwise_model(c.C, c.H, c.W, c.k, c.sy, c.sx, c.dy, c.dx, c.pads));
        ASSERT_EQ(plan.groups[0].schedule["template"], "conv_dw");
        const int64_t w = plan.graph.type_of("conv").shape[3], h = plan.graph.type_of("conv").shape[2];
        SCOPED_TRACE(std::to_string(c.k) + "x" + std::to_string(c.k) + " strides " + std::to_string(c.sy) + "x" +
                     std::to_string(c.sx) + " dilation " + std::to_string(c.dx) + ", " + std::to_string(w) + " wide");
        for (int vw : {4, 8}) {
            for (int nx : {1, 2}) {
                if (vw * nx > w) continue;
                plan.groups[0].schedule = {
                    {"template", "conv_dw"}, {"vector_width", vw},     {"tile_y", std::min<int64_t>(2, h)},
                    {"tile_x_vectors", nx},  {"deinterleave_x", true}, {"channel_block", 1}};
                expect_matches_reference(plan);
                ran++;
            }
        }
    }
    EXPECT_EQ(ran, 14);
    // With a pointwise producer computed per task: its strip fills the plane the phases read.
    RuleSet rules = load_rules("x86");
    rules.machine.cache_bytes = rules.machine.shared_cache_bytes = 1024;
    FusedGraph plan =
        with_default_schedules(plan_fusion(expand_then_depthwise(1, 5, 12, 13, 21, 5, 2), {rules}), kTarget);
    ASSERT_EQ(plan.groups.size(), 1u);
    ASSERT_TRUE(plan.groups[0].schedule.contains("producer_tile_c")) << plan.groups[0].schedule.dump();
    plan.groups[0].schedule["deinterleave_x"] = true;
    expect_matches_reference(plan);
    // Refused where the plane is not filled (no pad across: the phases would read past the input's
    // edge) and at stride 1 across.
    for (const Case &c : {Case{3, 9, 23, 3, 2, 2, 1, 1, {1, 0, 1, 0}}, Case{3, 9, 23, 3, 1, 1, 1, 1, {1, 1, 1, 1}}}) {
        FusedGraph bad = fused_plan(depthwise_model(c.C, c.H, c.W, c.k, c.sy, c.sx, c.dy, c.dx, c.pads));
        bad.groups[0].schedule["deinterleave_x"] = true;
        try {
            Executor ex(bad);
            ADD_FAILURE() << "accepted " << bad.groups[0].schedule.dump();
        } catch (const Error &e) {
            EXPECT_EQ(e.field(), "schedule.deinterleave_x") << e.what();
        }
    }
}

// The plan's first group lowered and composed for `target`.
exec::LoweredGroup composed_first_group(const FusedGraph &plan, const Halide::Target &target) {
    const FusedGroup &grp = plan.groups[0];
    Graph view;
    const Graph &g = compose::group_graph(plan.graph, grp, target, view);
    std::vector<const Node *> nodes;
    for (const std::string &n : grp.nodes) nodes.push_back(g.find_node(n));
    exec::WeightBuffers weights = exec::make_weight_buffers(plan.graph);
    exec::LoweredGroup lowered =
        exec::lower_group(g, nodes, handed_out_values(plan, grp), weights, {}, compose::op_lowerings(g, grp, target));
    compose::compose_group(g, grp, lowered, target);
    return lowered;
}

// The plan's first group lowered, composed and compiled for `target`: its lowered statement (Halide's
// text form) or, with `assembly`, its assembly.
std::string compiled_group_text(const FusedGraph &plan, const Halide::Target &target, bool assembly) {
    static int count = 0;
    exec::LoweredGroup lowered = composed_first_group(plan, target);
    std::vector<Halide::Argument> args(lowered.params.begin(), lowered.params.end());
    const std::string path = testing::TempDir() + "/composer_group_" + std::to_string(getpid()) + "_" +
                             std::to_string(count++) + (assembly ? ".s" : ".stmt");
    Halide::Pipeline pipeline(lowered.output_funcs);
    if (assembly) {
        pipeline.compile_to_assembly(path, args, "group", target);
    } else {
        pipeline.compile_to_lowered_stmt(path, args, Halide::Text, target);
    }
    const std::string text = test::read_file(path);
    std::remove(path.c_str());
    return text;
}

// The schedule the composer gives the plan's first group, as sorted lines of text, one per Func and
// one per stage: where it is computed and stored, its splits and its loops (innermost first, with
// how each runs). Names Halide makes unique with counters ("b59", "relu$2$1", "v_x_3_in") are stripped
// of it, so that two compositions of one plan read alike.
std::string composed_schedule_text(const FusedGraph &plan, const Halide::Target &target) {
    namespace HI = Halide::Internal;
    const exec::LoweredGroup lowered = composed_first_group(plan, target);
    std::vector<HI::Function> outputs;
    for (const Halide::Func &f : lowered.output_funcs) outputs.push_back(f.function());
    static const std::regex counters(R"(([A-Za-z])([_$]*[0-9]+)+)");
    auto name = [](const std::string &n) { return std::regex_replace(n, counters, "$1"); };
    std::vector<std::string> lines;
    for (auto &[func_name, fn] : HI::build_environment(outputs)) {
        fn.lock_loop_levels();
        const HI::FuncSchedule &fs = fn.schedule();
        lines.push_back(name(func_name) + " compute_at " + name(fs.compute_level().to_string()) + " store_at " +
                        name(fs.store_level().to_string()));
        std::vector<HI::Definition> stages = {fn.definition()};
        for (const HI::Definition &u : fn.updates()) stages.push_back(u);
        for (size_t i = 0; i < stages.size(); i++) {
            if (!stages[i].defined()) continue;
            std::ostringstream line;
            line << name(func_name) << ".s" << i << ":";
            for (const HI::Split &sp : stages[i].schedule().splits()) {
                line << " split(" << sp.old_var << "," << sp.outer << "," << sp.inner << "," << sp.factor << ","
                     << static_cast<int>(sp.tail) << "," << static_cast<int>(sp.split_type) << ")";
            }
            for (const HI::Dim &d : stages[i].schedule().dims()) {
                line << " " << d.var << "/" << static_cast<int>(d.for_type);
            }
            lines.push_back(name(line.str()));
        }
    }
    std::sort(lines.begin(), lines.end());
    std::string out;
    for (const std::string &l : lines) out += l + "\n";
    return out;
}

TEST(Composer, LeftOutParametersRunWithTheirAbsentValues) {
    // schedules::conv_absent_params is the value each template runs an optional parameter with when a
    // plan leaves it out (and `hfuse explore` steps from it): the group's schedule with the key left
    // out is the one with the key at that value, and differs from one with another value
    // (so that the comparison can fail). Every parameter in the table is covered.
    struct Case {
        Graph graph;
        json base;                          // without the parameters below (empty: the default plan's)
        std::map<std::string, json> other;  // per parameter in the table, another value it takes
    };
    const json xv = {{"template", "conv_xv"}, {"vector_width", 8}, {"tile_x_vectors", 1}, {"tile_y", 2}, {"tile_c", 6}};
    const json flat = {{"template", "conv_flat"}, {"vector_width", 8},  {"tile_x_vectors", 2}, {"tile_c", 6},
                       {"block_rows", 3},         {"channel_block", 12}};
    std::vector<Case> cases;
    cases.push_back({conv_model(16, 9, 26, 24, 3, 1, 1, 1),
                     xv,
                     {{"reduction_unroll", 2},
                      {"row_tasks", 2},
                      {"channel_loop", "inner"},
                      {"reduction_order", "ci,kx,ky"},
                      {"input_at", "task"}}});
    cases.push_back({conv_model(16, 9, 26, 24, 1, 1, 0, 1), flat, {{"reduction_unroll", 2}}});
    cases.push_back({conv_model(8, 14, 38, 8, 5, 2, 2, 8),  // 5x5 stride 2: 7 rows of 19
                     json(),
                     {{"row_bands", 2}, {"tile_x_vectors", 2}, {"deinterleave_x", true}}});
    cases.push_back(
        {conv_model(8, 14, 14, 16, 3, 1, 1, 1),
         json(),
         {{"algorithm", "winograd"}, {"input_block", 4}, {"input_at", "task"}, {"position_tiles", "in_rows"}}});
    auto schedule = [](const FusedGraph &plan) { return composed_schedule_text(plan, kTarget); };
    std::set<std::string> covered;
    for (Case &c : cases) {
        FusedGraph plan = fused_plan(c.graph);
        ASSERT_EQ(plan.groups.size(), 1u);
        json base = c.base.is_null() ? plan.groups[0].schedule : c.base;
        const std::string tmpl = base.value("template", "");
        const std::map<std::string, json> &absent = schedules::conv_absent_params(tmpl);
        ASSERT_FALSE(absent.empty()) << tmpl;
        base.erase("why");
        base.erase("winograd_tile");  // Winograd's own, with "algorithm"
        for (const auto &[key, value] : absent) {
            if (key != "input_block") base.erase(key);  // conv_cv's input_at needs a blocked copy
        }
        for (const auto &[key, value] : absent) {
            SCOPED_TRACE(tmpl + "." + key);
            ASSERT_TRUE(c.other.count(key)) << "the table's parameter is not tested";
            covered.insert(tmpl + "." + key);
            plan.groups[0].schedule = base;
            plan.groups[0].schedule.erase(key);
            const std::string left_out = schedule(plan);
            plan.groups[0].schedule[key] = value;
            const std::string same = schedule(plan);
            plan.groups[0].schedule[key] = c.other.at(key);
            const std::string other = schedule(plan);
            // (the schedules themselves are too long for a useful message)
            EXPECT_TRUE(same == left_out) << "left out is not " << value.dump();
            EXPECT_FALSE(other == left_out) << c.other.at(key).dump() << " runs as left out";
        }
    }
    EXPECT_EQ(covered.size(), 13u);
}

// MobileNet-V2's inverted-residual head: a 1x1 conv C -> E (+ bias) and ReLU6, then a 3x3 depthwise
// conv (pad 1) and ReLU, on N x C x H x W. `extra_reader`: the ReLU6 value is also a model output.
Graph pointwise_depthwise_model(int N, int C, int E, int H, int W, bool extra_reader = false) {
    auto dims = [](std::initializer_list<int> d) {
        std::string s;
        for (int v : d) s += (s.empty() ? "" : ", ") + std::to_string(v);
        return "[" + s + "]";
    };
    const std::string text = R"({"format": "hfuse-model", "version": 1, "name": "pw_dw",
      "inputs": [{"name": "x", "shape": )" +
                             dims({N, C, H, W}) + R"(}],
      "weights": {"we": {"shape": )" +
                             dims({E, C, 1, 1}) + R"(, "uniform": [-0.5, 0.5], "seed": 1},
                  "be": {"shape": )" +
                             dims({E}) + R"(, "uniform": [-0.5, 0.5], "seed": 2},
                  "wd": {"shape": )" +
                             dims({E, 1, 3, 3}) + R"(, "uniform": [-0.4, 0.4], "seed": 3},
                  "lo": {"shape": [], "values": [0.0]}, "hi": {"shape": [], "values": [0.75]}},
      "nodes": [{"name": "expand", "op": "Conv", "inputs": ["x", "we", "be"], "attrs": {"kernel_shape": [1, 1]}},
                {"name": "relu6", "op": "Clip", "inputs": ["expand", "lo", "hi"]},
                {"name": "dw", "op": "Conv", "inputs": ["relu6", "wd"],
                 "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": )" +
                             std::to_string(E) + R"(}},
                {"name": "relu", "op": "Relu", "inputs": ["dw"]}],
      "outputs": ["relu")" + (extra_reader ? R"(, "relu6")" : "") +
                             R"(]})";
    return json_model(json::parse(text));
}

TEST(Composer, PointwiseProducerComputedPerDepthwiseTask) {
    // x86 plans the pointwise conv into the depthwise conv's group (pointwise_into_depthwise), which
    // conv_dw computes per task: odd planes, channels no block divides, batches, and every register
    // tile of the producer shifting inwards at the plane's and the block's ends.
    struct Case {
        int N, C, E, H, W;
    };
    int ran = 0;
    for (const Case &c : {Case{1, 5, 12, 13, 9}, Case{2, 3, 20, 7, 11}, Case{1, 8, 24, 14, 14}}) {
        SCOPED_TRACE(std::to_string(c.N) + "x" + std::to_string(c.C) + "->" + std::to_string(c.E) + " at " +
                     std::to_string(c.H) + "x" + std::to_string(c.W));
        FusedGraph plan = fused_plan(pointwise_depthwise_model(c.N, c.C, c.E, c.H, c.W));
        ASSERT_EQ(plan.groups.size(), 1u);
        ASSERT_EQ(plan.groups[0].master, "dw");
        ASSERT_EQ(plan.groups[0].schedule["template"], "conv_dw");
        ASSERT_TRUE(plan.groups[0].schedule.contains("producer_tile_c")) << plan.groups[0].schedule.dump();
        expect_matches_reference(plan);
        ran++;
        const json defaults = plan.groups[0].schedule;
        // (channel_block, producer_tile_c, producer_tile_x_vectors, producer_vector_width)
        for (const std::array<int, 4> &v : std::vector<std::array<int, 4>>{{c.E, 1, 1, 8},
                                                                           {c.E, 4, 3, 8},
                                                                           {7, 3, 1, 4},
                                                                           {7, 4, 3, 8},
                                                                           {4, 3, 1, 8},
                                                                           {4, 4, 3, 4},
                                                                           {5, 2, 2, 8}}) {
            plan.groups[0].schedule = defaults;
            plan.groups[0].schedule.update({{"channel_block", v[0]},
                                            {"producer_tile_c", v[1]},
                                            {"producer_tile_x_vectors", v[2]},
                                            {"producer_vector_width", v[3]}});
            expect_matches_reference(plan);
            ran++;
        }
        // Bands of rows (the default for one image of at least 14 rows): two; three (the last shifting
        // inwards on odd heights); three over 2-row tiles (bands then overlap); one per row tile.
        for (const std::array<int, 2> &b : std::vector<std::array<int, 2>>{{2, 1}, {3, 1}, {3, 2}, {c.H, 1}}) {
            plan.groups[0].schedule = defaults;
            plan.groups[0].schedule.update({{"row_bands", b[0]}, {"tile_y", b[1]}});
            expect_matches_reference(plan);
            ran++;
        }
    }
    EXPECT_EQ(ran, 36);
}

// An expand (1x1, C -> E) + ReLU feeding a k x k depthwise conv of stride s, + ReLU.
Graph expand_then_depthwise(int N, int C, int E, int H, int W, int k, int s) {
    const std::string p = std::to_string(k / 2), ks = std::to_string(k), st = std::to_string(s);
    const std::string text = R"({"format": "hfuse-model", "version": 1, "name": "expand_dw",
      "inputs": [{"name": "x", "shape": [)" +
                             std::to_string(N) + ", " + std::to_string(C) + ", " + std::to_string(H) + ", " +
                             std::to_string(W) + R"(]}],
      "weights": {"we": {"shape": [)" +
                             std::to_string(E) + ", " + std::to_string(C) +
                             R"(, 1, 1], "uniform": [-0.5, 0.5], "seed": 1},
                  "wd": {"shape": [)" +
                             std::to_string(E) + ", 1, " + ks + ", " + ks +
                             R"(], "uniform": [-0.4, 0.4], "seed": 2},
                  "bd": {"shape": [)" +
                             std::to_string(E) + R"(], "uniform": [-0.4, 0.4], "seed": 3}},
      "nodes": [{"name": "expand", "op": "Conv", "inputs": ["x", "we"], "attrs": {"kernel_shape": [1, 1]}},
                {"name": "relu6", "op": "Relu", "inputs": ["expand"]},
                {"name": "dw", "op": "Conv", "inputs": ["relu6", "wd", "bd"],
                 "attrs": {"kernel_shape": [)" +
                             ks + ", " + ks + R"(], "strides": [)" + st + ", " + st + R"(], "pads": [)" + p + ", " + p +
                             ", " + p + ", " + p + R"(], "group": )" + std::to_string(E) + R"(}},
                {"name": "relu", "op": "Relu", "inputs": ["dw"]}],
      "outputs": ["relu"]})";
    return json_model(json::parse(text));
}

TEST(Composer, StridedDepthwiseComputesItsPointwiseProducerPerTask) {
    // A strided depthwise conv joins its pointwise feed where the expanded value exceeds the machine
    // model's private cache (planner: PlannerOptions.PointwiseConvJoinsTheDepthwiseConvReadingIt); here
    // a cache of 1 KB makes every case merge. conv_dw computes the producer per task over the rows its
    // strided windows read: odd planes (the last window on the bottom pad), 5x5, batches, bands of
    // rows, and channel blocks no vector divides.
    RuleSet rules = load_rules("x86");
    rules.machine.cache_bytes = rules.machine.shared_cache_bytes = 1024;
    struct Case {
        int N, C, E, H, W, k;
    };
    int ran = 0;
    for (const Case &c : {Case{1, 5, 12, 13, 9, 3}, Case{2, 3, 20, 11, 7, 5}, Case{1, 8, 24, 28, 28, 3}}) {
        SCOPED_TRACE(std::to_string(c.N) + "x" + std::to_string(c.C) + "->" + std::to_string(c.E) + " at " +
                     std::to_string(c.H) + "x" + std::to_string(c.W) + ", " + std::to_string(c.k) + "x" +
                     std::to_string(c.k) + " stride 2");
        FusedGraph plan = with_default_schedules(
            plan_fusion(expand_then_depthwise(c.N, c.C, c.E, c.H, c.W, c.k, 2), {rules}), kTarget);
        ASSERT_EQ(plan.groups.size(), 1u);
        ASSERT_EQ(plan.groups[0].schedule["template"], "conv_dw");
        ASSERT_TRUE(plan.groups[0].schedule.contains("producer_tile_c")) << plan.groups[0].schedule.dump();
        expect_matches_reference(plan);
        ran++;
        const json defaults = plan.groups[0].schedule;
        // (channel_block, producer_tile_c, row_bands, tile_y)
        for (const std::array<int, 4> &v :
             std::vector<std::array<int, 4>>{{7, 3, 1, 1}, {c.E, 4, 2, 1}, {5, 2, 3, 2}, {4, 4, 2, 2}}) {
            plan.groups[0].schedule = defaults;
            plan.groups[0].schedule.update(
                {{"channel_block", v[0]}, {"producer_tile_c", v[1]}, {"row_bands", v[2]}, {"tile_y", v[3]}});
            expect_matches_reference(plan);
            ran++;
        }
    }
    EXPECT_EQ(ran, 15);
}

// A depthwise conv whose input a conv_cv group stores channel-blocked for it alone runs on conv_cv,
// each lane its own channel (ops::BlockedGroups::own_channel), reading the blocks in place: narrow
// rows and strides, odd sizes, 5x5, batches. Given conv_cv by hand, a depthwise conv reads a planar
// input through its padded copy, blocked or planar, over channels no vector divides.
TEST(Composer, DepthwiseOnConvCvReadsItsChannelsInTheLanes) {
    const int vw = kTarget.natural_vector_size<float>();
    struct Case {
        int N, C, E, H, W, k, s;
    };
    for (const Case &c : {Case{1, 8, 2 * vw, 7, 7, 3, 1}, Case{2, 5, 3 * vw, 13, 7, 5, 2},
                          Case{1, 256, 2 * vw, 14, 14, 5, 2}, Case{1, 12, 2 * vw, 5, 6, 3, 1}}) {
        SCOPED_TRACE(std::to_string(c.N) + "x" + std::to_string(c.C) + "->" + std::to_string(c.E) + " at " +
                     std::to_string(c.H) + "x" + std::to_string(c.W) + ", " + std::to_string(c.k) + "x" +
                     std::to_string(c.k) + " stride " + std::to_string(c.s));
        const FusedGraph plan = fused_plan(expand_then_depthwise(c.N, c.C, c.E, c.H, c.W, c.k, c.s));
        ASSERT_EQ(plan.groups.size(), 2u);
        EXPECT_EQ(plan.groups[0].schedule["template"], "conv_cv") << plan.groups[0].schedule.dump();
        const json &dw = plan.groups[1].schedule;
        EXPECT_EQ(dw["template"], "conv_cv") << dw.dump();
        EXPECT_EQ(dw["ci_block"], 1) << dw.dump();
        EXPECT_EQ(dw["input_block"], vw) << dw.dump();
        test::expect_plan_matches_reference(plan, 1e-4);
        // Other register tiles and blocks (a block of rows not dividing the height shifts inwards).
        FusedGraph edited = plan;
        edited.groups[1].schedule.update(
            {{"tile_positions", 3}, {"tile_c_vectors", 1}, {"block_rows", 2}, {"channel_block", vw}});
        test::expect_plan_matches_reference(edited, 1e-4);
    }
    // A conv_dw producer-less depthwise conv behind a conv_xv producer (wide rows) stays conv_dw.
    const FusedGraph wide = fused_plan(conv_model(2 * vw, 64, 64, 2 * vw, 3, 1, 1, 2 * vw));
    EXPECT_EQ(wide.groups[0].schedule["template"], "conv_dw");
    // Given by hand, from a planar model input: 20 channels (the last vector's lanes past them read
    // the last channel, weighted zero), stride 2, copied in blocks of 4 or planar.
    FusedGraph planar = fused_plan(conv_model(20, 9, 11, 20, 3, 2, 1, 20));
    for (int input_block : {4, 0}) {
        planar.groups[0].schedule = {{"template", "conv_cv"}, {"vector_width", vw},        {"tile_positions", 4},
                                     {"tile_c_vectors", 1},   {"block_rows", 2},           {"channel_block", vw},
                                     {"ci_block", 1},         {"input_block", input_block}};
        expect_matches_reference(planar);
    }
}

// An inverted-residual head with SiLU (x * sigmoid(x)) or HardSwish as exported at opset 13
// (x * hardsigmoid(x)) after both convs: a diamond of two ops, not a chain, on each side; a k x k
// depthwise conv. `side_input`: the expand's activation multiplies by a model input too (a feed
// conv_dw cannot compute per task).
Graph diamond_depthwise_model(int C, int E, int H, int W, int k, const std::string &gate, bool side_input = false) {
    json m = {{"format", "hfuse-model"}, {"version", 1}, {"name", "pw_dw_" + gate}};
    m["inputs"] = json::array({{{"name", "x"}, {"shape", {1, C, H, W}}}});
    if (side_input) m["inputs"].push_back({{"name", "s"}, {"shape", {1, E, H, W}}});
    m["weights"] = {{"we", {{"shape", {E, C, 1, 1}}, {"uniform", {-0.5, 0.5}}, {"seed", 1}}},
                    {"be", {{"shape", {E}}, {"uniform", {-0.5, 0.5}}, {"seed", 2}}},
                    {"wd", {{"shape", {E, 1, k, k}}, {"uniform", {-0.3, 0.3}}, {"seed", 3}}}};
    json nodes = json::array();
    auto gated = [&](const std::string &name, const std::string &in) {
        nodes.push_back({{"name", name + "_gate"}, {"op", gate}, {"inputs", {in}}});
        nodes.push_back({{"name", name}, {"op", "Mul"}, {"inputs", {in, name + "_gate"}}});
    };
    nodes.push_back(
        {{"name", "expand"}, {"op", "Conv"}, {"inputs", {"x", "we", "be"}}, {"attrs", {{"kernel_shape", {1, 1}}}}});
    gated("act1", "expand");
    std::string dw_in = "act1";
    if (side_input) {
        nodes.push_back({{"name", "side"}, {"op", "Mul"}, {"inputs", {"act1", "s"}}});
        dw_in = "side";
    }
    nodes.push_back({{"name", "dw"},
                     {"op", "Conv"},
                     {"inputs", {dw_in, "wd"}},
                     {"attrs", {{"kernel_shape", {k, k}}, {"pads", {k / 2, k / 2, k / 2, k / 2}}, {"group", E}}}});
    gated("act2", "dw");
    m["nodes"] = nodes;
    m["outputs"] = {"act2"};
    return json_model(m);
}

TEST(Composer, DiamondActivationsAroundTheDepthwiseConvAreComputedPerTask) {
    // The planner fuses the expand into the depthwise conv only where conv_dw computes it per task,
    // and conv_dw tiles the diamond epilogue: no conv is left to the simple schedule (which ran such
    // a group 3-8x slower than the convs apart).
    for (const std::string gate : {"Sigmoid", "HardSigmoid"}) {
        for (int k : {3, 5}) {
            SCOPED_TRACE(gate + " " + std::to_string(k) + "x" + std::to_string(k));
            FusedGraph plan = fused_plan(diamond_depthwise_model(5, 24, 13, 11, k, gate));
            ASSERT_EQ(plan.groups.size(), 1u);
            EXPECT_EQ(plan.groups[0].master, "dw");
            EXPECT_EQ(plan.groups[0].schedule["template"], "conv_dw");
            EXPECT_TRUE(plan.groups[0].schedule.contains("producer_tile_c")) << plan.groups[0].schedule.dump();
            EXPECT_FALSE(plan.groups[0].schedule.contains("compute")) << plan.groups[0].schedule.dump();
            expect_matches_reference(plan);
        }
    }
    // A feed with another activation operand stays apart: two conv-led groups, each on its template.
    FusedGraph side = fused_plan(diamond_depthwise_model(5, 24, 13, 11, 5, "Sigmoid", true));
    ASSERT_EQ(side.groups.size(), 2u);
    for (const FusedGroup &grp : side.groups) {
        EXPECT_NE(grp.schedule["template"], "simple") << grp.name << ": " << grp.schedule.dump();
        EXPECT_FALSE(grp.schedule.contains("compute")) << grp.name << ": " << grp.schedule.dump();
    }
    expect_matches_reference(side);
}

TEST(Composer, ChannelVectorConvUnrollsInputBlocksWhereTheTileFitsTheRegisters) {
    // Channel-blocked input: the reduction goes by whole blocks of 8 channels, each unrolled (the loop
    // over the blocks stays, the one inside them does not), where the tile's accumulators, broadcasts
    // and weight vectors fit the registers: AVX-512's 5 x 4 (29 of 32 zmm), AVX2's default 3 x 2 (11 of
    // 16 ymm); a 3 x 4 tile needs 19 of AVX2's 16 (LLVM spilled an accumulator, 2x slower), so its
    // channels stay one loop (and the defaults, which price that, do not choose it there).
    const Halide::Target avx512("x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41");
    const Graph g = conv_model(16, 13, 13, 64, 3, 1, 1, 1);  // below 14x14: direct, not Winograd
    for (auto [target, pin_3x4] : {std::pair{avx512, false}, std::pair{kTarget, false}, std::pair{kTarget, true}}) {
        FusedGraph plan = with_default_schedules(plan_fusion(g, {load_rules("x86")}), target);
        nlohmann::json &p = plan.groups[0].schedule;
        ASSERT_EQ(p["template"], "conv_cv");
        ASSERT_EQ(p["input_block"], 8);
        if (pin_3x4) {
            p["tile_positions"] = 3;
            p["tile_c_vectors"] = 4;
            p["channel_block"] = 32;
        }
        const std::string stmt = compiled_group_text(plan, target, false);
        const bool unrolled = !pin_3x4;
        EXPECT_EQ(stmt.find(".rcb") != std::string::npos, unrolled) << p.dump();
        EXPECT_EQ(stmt.find(".rcl"), std::string::npos) << p.dump();
        expect_matches_reference(plan);  // on the host's ISA
    }
}

TEST(Composer, ChannelVectorConvOfAShortReductionTilesWithinARow) {
    // A stem (3 input channels, stride 2): few FMAs a tap for each position's address, so the register
    // tile's positions divide the output's row (the tile's addresses its first position's plus
    // constants) where the register budget holds such a divisor of at least 4: 28 wide with 2 vectors
    // of 16 channels, 7 (of at most 10); 29 wide has none. With 64 input channels the cost model
    // prices the tiles, a row's 7 positions among them: 28 positions a row in tiles of 5 recompute.
    const Halide::Target avx512("x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41");
    struct Case {
        int cin, size, expect_np;
    };
    for (const Case &c : {Case{3, 56, 7}, Case{3, 58, 5}, Case{64, 56, 7}}) {
        SCOPED_TRACE("cin " + std::to_string(c.cin) + ", input " + std::to_string(c.size));
        const Graph g = conv_model(c.cin, c.size, c.size, 32, 3, 2, 1, 1);
        FusedGraph plan = with_default_schedules(plan_fusion(g, {load_rules("x86")}), avx512);
        const nlohmann::json &p = plan.groups[0].schedule;
        ASSERT_EQ(p["template"], "conv_cv") << p.dump();
        EXPECT_EQ(p["tile_c_vectors"], 2) << p.dump();
        EXPECT_EQ(p["tile_positions"], c.expect_np) << p.dump();
    }
    // AVX2: 16 channels are 2 vectors of 8, at most 5 positions: 4 of a row of 28 (29 rows); the
    // tiles within rows compute the reference.
    const FusedGraph plan = fused_plan(conv_model(3, 58, 56, 16, 3, 2, 1, 1));
    const nlohmann::json &p = plan.groups[0].schedule;
    ASSERT_EQ(p["template"], "conv_cv") << p.dump();
    EXPECT_EQ(p["tile_positions"], 4) << p.dump();
    expect_matches_reference(plan);
}

TEST(Composer, AStemCopiesItsPaddedInputPerTask) {
    // Fewer than 8 input channels, padded: the planar copy is made per task (its rows stay in cache
    // for the many taps that read them), on either target; within rows and across them, it computes
    // the reference. Unpadded, there is no copy to place.
    const Halide::Target avx512("x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41");
    struct Case {
        int cin, h, w, cout, k, stride, pad;
        bool per_task;
    };
    for (const Case &c : {Case{3, 58, 56, 16, 3, 2, 1, true}, Case{3, 37, 41, 32, 7, 2, 3, true},
                          Case{4, 30, 30, 16, 3, 1, 1, true}, Case{3, 58, 56, 16, 3, 2, 0, false}}) {
        const Graph g = conv_model(c.cin, c.h, c.w, c.cout, c.k, c.stride, c.pad, 1);
        for (const Halide::Target &t : {kTarget, avx512}) {
            SCOPED_TRACE(std::to_string(c.cin) + "->" + std::to_string(c.cout) + " " + std::to_string(c.k) + "x" +
                         std::to_string(c.k) + " on " + std::to_string(c.h) + "x" + std::to_string(c.w) + ", " +
                         t.to_string());
            const FusedGraph plan = with_default_schedules(plan_fusion(g, {load_rules("x86")}), t);
            const nlohmann::json &p = plan.groups[0].schedule;
            ASSERT_EQ(p["template"], "conv_cv") << p.dump();
            EXPECT_EQ(p.value("input_at", "root"), c.per_task ? "task" : "root") << p.dump();
            if (t == kTarget) expect_matches_reference(plan);
        }
    }
}

TEST(Composer, StridedPointwiseConvCopiesItsStridedPositionsAlone) {
    // A 1x1 stride-2 conv reading a planar input copies it channel-blocked where a stride-1 pointwise
    // conv would (64 input channels or more, an output of 14x14 or more), and the copy holds the
    // positions it reads alone: the output's plane, 14 x 15 of the input's 27 x 29.
    struct Case {
        int cin, h, w, cout, input_block;  // input_block: -1, the default's
    };
    for (const Case &c : {Case{64, 29, 27, 32, -1}, Case{16, 13, 11, 24, 8}, Case{24, 9, 30, 16, 8}}) {
        const Graph g = conv_model(c.cin, c.h, c.w, c.cout, 1, 2, 0, 1);
        FusedGraph plan = fused_plan(g);
        json &p = plan.groups[0].schedule;
        SCOPED_TRACE(std::to_string(c.cin) + "->" + std::to_string(c.cout) + " on " + std::to_string(c.h) + "x" +
                     std::to_string(c.w) + ": " + p.dump());
        ASSERT_EQ(p["template"], "conv_cv");
        if (c.input_block > 0) p["input_block"] = c.input_block;
        EXPECT_EQ(p["input_block"], 8);
        const std::string stmt = compiled_group_text(plan, kTarget, false);
        const size_t at = stmt.find("allocate conv_blocked_input");
        ASSERT_NE(at, std::string::npos) << stmt;
        const std::string line = stmt.substr(at, stmt.find('\n', at) - at);
        // (bi, x, y, ...): x the output's columns; y its rows, or a task's.
        const std::string columns = "[float32 * 8 * " + std::to_string((c.w + 1) / 2) + " * ";
        EXPECT_NE(line.find(columns), std::string::npos) << line;
        expect_matches_reference(plan);
    }
    // Strides 2 down and 3 across, 24 channels of 13 x 17: the copy 6 wide (17 / 3 rounded up), 7 tall.
    const json nodes = {{{"name", "conv"},
                         {"op", "Conv"},
                         {"inputs", {"x", "w"}},
                         {"attrs", {{"kernel_shape", {1, 1}}, {"strides", {2, 3}}}}}};
    FusedGraph plan = fused_plan(
        json_model(model_json({{"x", {1, 24, 13, 17}}}, {{"w", uniform({16, 24, 1, 1}, 3)}}, nodes, "conv")));
    json &p = plan.groups[0].schedule;
    ASSERT_EQ(p["template"], "conv_cv") << p.dump();
    p["input_block"] = 8;
    const std::string stmt = compiled_group_text(plan, kTarget, false);
    const size_t at = stmt.find("allocate conv_blocked_input");
    ASSERT_NE(at, std::string::npos) << stmt;
    EXPECT_NE(stmt.substr(at, stmt.find('\n', at) - at).find("[float32 * 8 * 6 * "), std::string::npos) << stmt;
    expect_matches_reference(plan);
}

TEST(Composer, ChannelVectorConvAccumulatesInRegistersInOnePass) {
    // In one pass over the input channels, the accumulators live per register tile (vw lanes x
    // positions x channel vectors, in registers) and the task's buffer is their wrapper; in passes,
    // the task's buffer holds them from pass to pass (zeroed first), and there is no wrapper.
    const Graph g = conv_model(16, 14, 14, 24, 3, 1, 1, 1);
    FusedGraph plan = fused_plan(g);
    json &p = plan.groups[0].schedule;
    ASSERT_EQ(p["template"], "conv_cv");
    p.erase("algorithm");  // direct (Winograd's: Composer.WinogradConvMatchesTheReference)
    p.erase("winograd_tile");
    ASSERT_EQ(p["ci_block"], 16);
    const std::string tile = "[float32 * " + std::to_string(p["vector_width"].get<int>()) + " * " +
                             std::to_string(p["tile_positions"].get<int>()) + " * " +
                             std::to_string(p["tile_c_vectors"].get<int>()) + " * 1]";  // one image
    for (int ci_block : {16, 8}) {
        SCOPED_TRACE("ci_block " + std::to_string(ci_block));
        p["ci_block"] = ci_block;
        const std::string stmt = compiled_group_text(plan, kTarget, false);
        std::string accumulators, wrapper;
        for (size_t at = stmt.find("allocate conv_blocked"); at != std::string::npos;
             at = stmt.find("allocate conv_blocked", at + 1)) {
            const std::string line = stmt.substr(at, stmt.find('\n', at) - at);
            (line.find("wrapper") != std::string::npos ? wrapper : accumulators) = line;
        }
        ASSERT_FALSE(accumulators.empty()) << stmt;
        EXPECT_EQ(accumulators.find(tile) != std::string::npos, ci_block == 16) << accumulators;
        EXPECT_EQ(!wrapper.empty(), ci_block == 16) << wrapper;
        expect_matches_reference(plan);
    }
}

// A conv_cv schedule with the Winograd form F(m x m, 3x3): register tiles of np m x m tiles x nc
// vectors.
json winograd_params(int vw, int np, int nc, int rows, int cb, int cin, int m = 2) {
    return {{"template", "conv_cv"}, {"algorithm", "winograd"}, {"winograd_tile", m},
            {"vector_width", vw},    {"tile_positions", np},    {"tile_c_vectors", nc},
            {"block_rows", rows},    {"channel_block", cb},     {"ci_block", cin}};
}

TEST(Composer, WinogradConvMatchesTheReference) {
    // F(2x2, 3x3) and F(4x4, 3x3) in turn: output widths and heights no multiple of the tile (tiles
    // rounded up past them by 1 to 3), no padding, batch 2, output channels no multiple of a vector
    // (20), a 2x2 pool in the tile (rows of T covering part tiles too) and an overlapping pool after
    // the conv at root; register tiles of 1 to 4 tiles x 1 or 2 vectors, shifting inwards at the
    // task's ends; blocks of 1, 2, 3 rows or all; channel blocks shifting inwards; the input copy
    // planar or blocked by 8 or all channels, at root or per task; vectors of 8 and 16 lanes. The
    // defaults first (F(4x4, 3x3) from 14x14 and 16 channels).
    int ran = 0, ran4 = 0;
    for (const Graph &g :
         {conv_model(16, 15, 17, 20, 3, 1, 1, 1), conv_model(16, 16, 14, 32, 3, 1, 0, 1),
          conv_model(24, 9, 11, 16, 3, 1, 1, 1, 0, 0, 2), conv_model(16, 14, 18, 16, 3, 1, 1, 1, 2, 2, 1, false, 0),
          conv_model(16, 15, 15, 16, 3, 1, 1, 1, 3, 2)}) {
        FusedGraph plan = fused_plan(g);
        ASSERT_EQ(plan.groups.size(), 1u);
        const Shape t = g.type_of("relu").shape;
        const int cin = static_cast<int>(g.type_of("x").shape[1]), cout = static_cast<int>(t[1]);
        const int h = static_cast<int>(t[2]), w = static_cast<int>(t[3]);
        json &p = plan.groups[0].schedule;
        const bool winograd = h >= 14 && w >= 14;
        EXPECT_EQ(p.value("algorithm", "direct"), winograd ? "winograd" : "direct") << p.dump();
        EXPECT_EQ(p.value("winograd_tile", 0), winograd ? 4 : 0) << p.dump();
        expect_matches_reference(plan);
        const bool root = p.contains("compute");
        // Blocks of rows of T: the conv's output, or the pool's in the tile.
        const int th = root ? h : static_cast<int>(g.type_of(g.outputs[0]).shape[2]);
        int i = 0;
        for (int rows : {1, 2, 3, th}) {
            for (auto [vw, np, nc] : {std::tuple{8, 3, 2}, std::tuple{8, 1, 1}, std::tuple{16, 4, 1},
                                      std::tuple{8, 4, 2}, std::tuple{8, 2, 1}}) {
                for (int cb : {nc * vw, cout}) {
                    if (np > (w + 1) / 2 || nc * vw >= cb + vw || cb > cout || i++ % 3) continue;
                    const int m = ran % 2 && np <= (w + 3) / 4 ? 4 : 2;
                    p = winograd_params(vw, np, nc, rows, cb, cin, m);
                    if (root) p["compute"] = "root";
                    if (ran % 4) p["input_block"] = std::vector<int>{0, 8, cin}[ran % 3];
                    if (ran % 3) p["input_at"] = ran % 3 == 1 ? "task" : "root";
                    expect_matches_reference(plan);
                    ran++;
                    ran4 += m == 4;
                }
            }
        }
    }
    EXPECT_GE(ran, 30);
    EXPECT_GE(ran4, 12);
}

TEST(Composer, WinogradAsymmetricPadsAndInOnePipeline) {
    // Pads (top 0, left 2, bottom 2, right 1) on 13x12 (output 13x13): tiles start off the input at
    // the left and run past it at the bottom and right; a second Winograd conv reads the first
    // group's Func in a whole-model pipeline (blocked, no halo: copied) and by the executor (stored
    // blocked with a halo wider than its windows reach by the rounded-up tile's). F(2x2, 3x3) and
    // F(4x4, 3x3).
    const std::string text = R"({"format": "hfuse-model", "version": 1, "name": "wino_chain",
      "inputs": [{"name": "x", "shape": [1, 16, 13, 12]}],
      "weights": {"w": {"shape": [16, 16, 3, 3], "uniform": [-0.3, 0.3], "seed": 1},
                  "b": {"shape": [16], "uniform": [-0.3, 0.3], "seed": 2},
                  "w2": {"shape": [16, 16, 3, 3], "uniform": [-0.3, 0.3], "seed": 3}},
      "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w", "b"],
                 "attrs": {"kernel_shape": [3, 3], "pads": [0, 2, 2, 1]}},
                {"name": "relu", "op": "Relu", "inputs": ["conv"]},
                {"name": "conv2", "op": "Conv", "inputs": ["relu", "w2"], "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}},
                {"name": "add", "op": "Add", "inputs": ["conv2", "relu"]}],
      "outputs": ["add"]})";
    const std::string path = testing::TempDir() + "/composer_wino_chain_" + std::to_string(getpid()) + ".json";
    std::ofstream(path) << text;
    Graph g = load_model(path);
    std::remove(path.c_str());
    FusedGraph plan = fused_plan(g);
    ASSERT_EQ(plan.groups.size(), 2u);
    for (int m : {2, 4}) {
        SCOPED_TRACE("F(" + std::to_string(m) + "x" + std::to_string(m) + ", 3x3)");
        for (FusedGroup &grp : plan.groups) {
            grp.schedule = winograd_params(8, 3, 2, m, 16, 16, m);
            grp.schedule["input_block"] = 8;
        }
        expect_pipeline_matches_reference(g, plan);
        Executor ex(plan);
        // conv2's windows reach 1 past relu's 13x13; its tiles, rounded up to 14 or 16, 1 or 3 more.
        EXPECT_EQ(ex.value_layouts().at("relu"), m == 2 ? "blocked 8, halo 2x2" : "blocked 8, halo 4x4");
    }
}

TEST(Composer, WinogradAccumulatesInRegisters) {
    // The products per register tile of np tiles x nc vectors (one e, one image), the task's buffer
    // their wrapper.
    FusedGraph plan = fused_plan(conv_model(16, 14, 14, 24, 3, 1, 1, 1));
    json &p = plan.groups[0].schedule;
    ASSERT_EQ(p.value("algorithm", ""), "winograd");
    const std::string stmt = compiled_group_text(plan, kTarget, false);
    const std::string tile = "[float32 * " + std::to_string(p["vector_width"].get<int>()) + " * " +
                             std::to_string(p["tile_positions"].get<int>()) + " * 1 * " +
                             std::to_string(p["tile_c_vectors"].get<int>()) + " * 1]";
    std::string accumulators, wrapper;
    for (size_t at = stmt.find("allocate conv_wino_product"); at != std::string::npos;
         at = stmt.find("allocate conv_wino_product", at + 1)) {
        const std::string line = stmt.substr(at, stmt.find('\n', at) - at);
        (line.find("wrapper") != std::string::npos ? wrapper : accumulators) = line;
    }
    EXPECT_NE(accumulators.find(tile), std::string::npos) << accumulators;
    EXPECT_FALSE(wrapper.empty()) << stmt;
    expect_matches_reference(plan);
}

TEST(Composer, WinogradDefaultsPickTheTileAndWholeTileRows) {
    // AVX-512 (channel blocks of 64): F(4x4, 3x3) up to 256 input channels, F(2x2, 3x3) above (a
    // task's transformed weights past 3 MB); tasks of whole tile rows, or the whole height, of at
    // least 28 tiles where the height has them (past the L2 budget: 128->128 at 28x28, 7 tiles a row,
    // 4 tile rows), the height capping them at a part tile row only at the bottom (256->256 at
    // 14x14: all 14 rows, 16 tiles), and at least 4 tasks (16->16 at 24x24, one channel block: 4 rows
    // a task, 6 tasks; 8 rows would leave 3), nor an odd number below 8 (64->64 at 36x36: 4 rows, 9
    // tiles; 8 rows would leave 5 tasks). Where the whole plane's transformed input and products are
    // no more than a task's transformed weights, the plane is one block of rows, the weights streamed
    // once (256->256 at 28x28: 2.25 MB against 2.36 MB; 512->512 at 14x14: 1.8 against 2 MB), where
    // they are more the budget holds (128->128 at 28x28: 1.35 against 1.18 MB; 64->64 at 56x56).
    const Halide::Target avx512("x86-64-linux-avx-avx2-f16c-fma-sse41-avx512-avx512_skylake");
    auto defaults = [&](int c, int hw) {
        return with_default_schedules(plan_fusion(conv_model(c, hw, hw, c, 3, 1, 1, 1), {load_rules("x86")}), avx512)
            .groups[0]
            .schedule;
    };
    struct Case {
        int c, hw, m, rows;
    };
    for (const Case &k : {Case{16, 24, 4, 4}, Case{256, 14, 4, 14}, Case{128, 28, 4, 16}, Case{256, 28, 4, 28},
                          Case{512, 14, 2, 14}, Case{64, 56, 4, 8}, Case{64, 128, 4, 4}, Case{64, 36, 4, 4}}) {
        SCOPED_TRACE(std::to_string(k.c) + " channels at " + std::to_string(k.hw));
        const json p = defaults(k.c, k.hw);
        ASSERT_EQ(p.value("algorithm", ""), "winograd") << p.dump();
        EXPECT_EQ(p.value("winograd_tile", 0), k.m) << p.dump();
        EXPECT_EQ(p.value("block_rows", 0), k.rows) << p.dump();
        const int rows = p["block_rows"].get<int>(), tiles_x = (k.hw + k.m - 1) / k.m;
        EXPECT_TRUE(rows % k.m == 0 || rows == k.hw) << p.dump();
        auto tasks = [&](int r) { return (k.hw + r - 1) / r * ((k.c + 63) / 64); };
        EXPECT_GE(tasks(rows), 4) << p.dump();
        // Fewer than 28 tiles only where more rows would leave fewer than 4 tasks, or an odd number
        // below 8.
        const int more = tasks(rows + k.m);
        EXPECT_TRUE(rows == k.hw || (rows + k.m - 1) / k.m * tiles_x >= 28 || more < 4 || (more % 2 == 1 && more < 8))
            << p.dump();
    }
    // Fewer than 28 tiles of an image (below 24x24) over fewer than 256 input channels: the direct
    // conv with 32 registers (144 channels in tiles of a row's 7 positions, priced by the cost model;
    // 16 channels, under 1 MFLOP, by the rules); Winograd under AVX2.
    for (const int c : {16, 144}) {
        const json direct = defaults(c, 14);
        EXPECT_FALSE(direct.contains("algorithm")) << direct.dump();
        if (c == 144) EXPECT_EQ(direct.value("tile_positions", 0), 7) << direct.dump();
        const json avx2 = fused_plan(conv_model(c, 14, 14, c, 3, 1, 1, 1)).groups[0].schedule;
        EXPECT_EQ(avx2.value("algorithm", ""), "winograd") << avx2.dump();
    }
}

TEST(Composer, ConvCvChannelTilesCoverTheChannelsWhole) {
    // The register tile across channels: 4 vectors where they divide the output's vectors; 3 (96
    // channels at 16 lanes) or 5 at 4 positions with 32 registers (160) where a tile of 4 would
    // recompute a shifted block; 4 where nothing divides (112), or the channels are no whole vectors
    // (72: the partial vector is computed anyway); AVX2 (16 registers) keeps 3 positions, and its 5
    // vectors of 40 channels go by 3 (48 computed) rather than by 4 (64). Reading a blocked input, a
    // tile must fit the registers to read it by whole blocks: AVX2's 3 x 4 (19 registers) gives way to
    // 3 x 3 or 3 x 2, or 2 x 4 where 3 vectors do not divide the channels (64, 128); AVX-512's tiles
    // all fit. (The defaults price the spills except for stems,
    // Winograd and pointwise stride-1 convs reading planar: below.)
    using schedules::TileContext;
    const TileContext avx512{16, 32, false}, avx2{8, 16, false}, avx512_blocked{16, 32, true},
        avx2_blocked{8, 16, true};
    struct Case {
        int channels;
        TileContext context;
        int positions, vectors;
    };
    for (const Case &k :
         {Case{64, avx512, 5, 4}, Case{48, avx512, 5, 3}, Case{96, avx512, 5, 3}, Case{160, avx512, 4, 5},
          Case{80, avx512, 4, 5}, Case{112, avx512, 5, 4}, Case{72, avx512, 5, 4}, Case{256, avx512, 5, 4},
          Case{256, avx512_blocked, 5, 4}, Case{96, avx2, 3, 4}, Case{80, avx2, 3, 4}, Case{40, avx2, 3, 3},
          Case{96, avx2_blocked, 3, 3}, Case{80, avx2_blocked, 3, 2}, Case{64, avx2_blocked, 2, 4},
          Case{128, avx2_blocked, 2, 4}}) {
        const schedules::ChannelTile t = schedules::conv_cv_channel_tile(k.channels, k.context);
        const std::string what = std::to_string(k.channels) + " channels, " + std::to_string(k.context.vector_width) +
                                 " lanes, " + (k.context.prices_spills ? "spills priced" : "spills not priced");
        EXPECT_EQ(t.positions, k.positions) << what;
        EXPECT_EQ(t.vectors, k.vectors) << what;
    }
    // The AVX2 defaults: a strided 1x1 reading planar (96 -> 96) and a 3x3 whose Winograd does not pay
    // (96 -> 96 at 7x7) take a tile that fits (3 x 3); a stride-1 1x1 reading planar (512 -> 128 at
    // 7x7) keeps 3 x 4.
    const Halide::Target avx2_target("x86-64-linux-avx-avx2-f16c-fma-sse41");
    for (auto [cin, cout, k, stride, hw, expect_nc] :
         {std::tuple{96, 96, 1, 2, 14, 3}, std::tuple{96, 96, 3, 1, 7, 3}, std::tuple{512, 128, 1, 1, 7, 4}}) {
        const json p =
            with_default_schedules(plan_fusion(conv_model(cin, hw, hw, cout, k, stride, k / 2, 1), {load_rules("x86")}),
                                   avx2_target)
                .groups[0]
                .schedule;
        ASSERT_EQ(p.value("template", ""), "conv_cv") << p.dump();
        ASSERT_FALSE(p.contains("algorithm")) << p.dump();
        if (k == 1) EXPECT_EQ(p.value("input_block", -1), 0) << p.dump();
        EXPECT_EQ(p["tile_positions"], 3) << p.dump();
        EXPECT_EQ(p["tile_c_vectors"], expect_nc) << p.dump();
    }
    // The defaults on AVX-512: each task a whole number of tiles (Winograd's at least 64 channels).
    const Halide::Target avx512_target("x86-64-linux-avx-avx2-f16c-fma-sse41-avx512-avx512_skylake");
    for (auto [c, k, hw] : {std::tuple{96, 3, 35}, std::tuple{160, 7, 17}, std::tuple{96, 5, 17}}) {
        const json p = with_default_schedules(
                           plan_fusion(conv_model(c, hw, hw, c, k, 1, k / 2, 1), {load_rules("x86")}), avx512_target)
                           .groups[0]
                           .schedule;
        const int cb = p["channel_block"].get<int>(), tile = 16 * p["tile_c_vectors"].get<int>();
        EXPECT_EQ(cb % tile, 0) << p.dump();
        EXPECT_EQ(c % cb, 0) << p.dump();
        if (p.value("algorithm", "") == "winograd") EXPECT_GE(cb, 64) << p.dump();
    }
    // And they compute the conv: tiles of 5 vectors at 4 positions and of 3 at 5, direct and
    // Winograd, at sizes no tile divides, in lanes of 8 and 16.
    int ran = 0;
    for (auto [vw, np, nc, c] :
         {std::tuple{16, 4, 5, 80}, std::tuple{8, 4, 5, 80}, std::tuple{16, 5, 3, 96}, std::tuple{8, 5, 3, 48}}) {
        for (const int k : {3, 5}) {
            FusedGraph plan = fused_plan(conv_model(24, 15, 17, c, k, 1, k / 2, 1));
            json &p = plan.groups[0].schedule;
            p["template"] = "conv_cv";
            p["vector_width"] = vw;
            p["tile_positions"] = np;
            p["tile_c_vectors"] = nc;
            p["channel_block"] = vw * nc;
            if (p.value("algorithm", "") == "winograd") p["tile_positions"] = std::min(np, 4);
            expect_matches_reference(plan);
            ran++;
        }
    }
    EXPECT_EQ(ran, 8);
}

// The default schedule, for `target`, of conv_model's one group: a k x k conv (cin -> cout, stride,
// pads k / 2, groups) at hw x hw, under the x86 rules.
json conv_defaults_for(const Halide::Target &target, int cin, int hw, int cout, int k = 1, int stride = 1,
                       int group = 1) {
    return with_default_schedules(
               plan_fusion(conv_model(cin, hw, hw, cout, k, stride, k / 2, group), {load_rules("x86")}), target)
        .groups[0]
        .schedule;
}
json avx512_conv_defaults(int cin, int hw, int cout, int k = 1, int stride = 1, int group = 1) {
    return conv_defaults_for(Halide::Target("x86-64-linux-avx-avx2-f16c-fma-sse41-avx512-avx512_skylake"), cin, hw,
                             cout, k, stride, group);
}

TEST(Composer, ConvCvDividesSmallPlanesIntoEvenWholeTasks) {
    // A 1x1 576->192 at 7x7 on AVX-512: the measured rules give 3 blocks of 3 rows (the last shifted
    // inwards, recomputing 2 rows) x 64 channels in tiles of 5 positions (25 computed for a block's
    // 21), 9 tasks; the cost model (schedules/conv_partition.h) prices 4 tasks of all 49 positions x
    // 48 channels in tiles of 7 x 3 vectors well below that. Where the weights are the smaller operand
    // (576->96 at 14x14) the channels stay in one block, a row a task, in tiles of 7 (14 a row).
    const json small = avx512_conv_defaults(576, 7, 192);
    ASSERT_EQ(small.value("template", ""), "conv_cv") << small.dump();
    EXPECT_EQ(small.value("tile_positions", 0), 7) << small.dump();
    EXPECT_EQ(small.value("tile_c_vectors", 0), 3) << small.dump();
    EXPECT_EQ(small.value("block_rows", 0), 7) << small.dump();
    EXPECT_EQ(small.value("channel_block", 0), 48) << small.dump();
    // The plan says why, with both prices.
    EXPECT_NE(small.value("why", "").find("priced"), std::string::npos) << small.dump();
    const json narrow = avx512_conv_defaults(576, 14, 96);
    ASSERT_EQ(narrow.value("template", ""), "conv_cv") << narrow.dump();
    EXPECT_EQ(narrow.value("channel_block", 0), 96) << narrow.dump();
    EXPECT_EQ(narrow.value("tile_positions", 0), 7) << narrow.dump();
    EXPECT_EQ(narrow.value("block_rows", 0), 1) << narrow.dump();

    // The model itself: recomputed rows and channels, and uneven tasks, cost; every other factor equal.
    schedules::ConvGroupShape s;
    s.input = {1, 576, 7, 7};
    s.weight = {192, 576, 1, 1};
    s.output = s.tile_output = {1, 192, 7, 7};
    const schedules::TileContext avx512{16, 32, false}, avx2{8, 16, false}, avx2_blocked{8, 16, true};
    const schedules::ChannelTile t73{7, 3};
    const double whole = schedules::cv_partition_cost(s, {t73, 7, 48}, avx512);
    EXPECT_GT(schedules::cv_partition_cost(s, {t73, 4, 48}, avx512), whole);   // rows 3-6 again, 8 tasks
    EXPECT_GT(schedules::cv_partition_cost(s, {t73, 7, 64}, avx512), whole);   // 3 blocks of 2 tiles: 64 lanes idle
    EXPECT_GT(schedules::cv_partition_cost(s, {t73, 7, 192}, avx512), whole);  // one task
    EXPECT_EQ(schedules::cheapest_cv_partition(s, {t73, 7, 48}, {{5, 4}, {7, 3}}, avx512).channel_block, 48);
    // A tile that does not fit the registers, reading a blocked input, pays for each channel's addresses.
    const schedules::ChannelTile t34{3, 4}, t33{3, 3};
    EXPECT_GT(schedules::register_tile_cost(t34, avx2_blocked), schedules::register_tile_cost(t33, avx2_blocked));
    EXPECT_LT(schedules::register_tile_cost(t34, avx2), schedules::register_tile_cost(t33, avx2));

    // And those tiles compute the conv where 7 positions divide neither a row nor a block, with
    // partial vectors of channels (40), in lanes of 8 and 16.
    for (const int vw : {8, 16}) {
        for (const int rows : {1, 3, 9}) {
            FusedGraph plan = fused_plan(conv_model(24, 9, 11, 40, 1, 1, 0, 1));
            json &p = plan.groups[0].schedule;
            p = {{"template", "conv_cv"}, {"vector_width", vw},  {"tile_positions", 7}, {"tile_c_vectors", 40 / vw},
                 {"block_rows", rows},    {"channel_block", 40}, {"ci_block", 8}};
            expect_matches_reference(plan);
        }
    }
}

TEST(Composer, ConvCvKeepsATilesWeightsInL1) {
    // A 1x1 320->320 at 14x14 (RegNet-Y 800MF's) on AVX-512 reduces over all 320 channels in one pass:
    // a tile of 5 channel vectors has 100 KB of weights, past a 48 KB L1, streamed from L2 for every
    // tile of positions. The defaults take tiles whose weights fit beside the input's lines (2
    // vectors: 40 KB, within 7/8 of the L1).
    const json p = avx512_conv_defaults(320, 14, 320);
    ASSERT_EQ(p.value("template", ""), "conv_cv") << p.dump();
    ASSERT_EQ(p.value("ci_block", 0), 320) << p.dump();
    EXPECT_LE(p.value("tile_c_vectors", 0) * 16 * 320 * 4, 42 << 10) << p.dump();
    EXPECT_NE(p.value("why", "").find("priced"), std::string::npos) << p.dump();

    // The model: the same tiles and tasks cost more where the weights do not fit; the taller tile of
    // fewer vectors wins only then.
    schedules::ConvGroupShape s;
    s.input = {1, 320, 14, 14};
    s.weight = {320, 320, 1, 1};
    s.output = s.tile_output = {1, 320, 14, 14};
    schedules::TileContext l1_48k{16, 32, false, 0, 48 << 10}, l1_1m{16, 32, false, 0, 1 << 20};
    const schedules::CvPartition wide{{4, 5}, 14, 80}, tall{{7, 2}, 7, 160};
    EXPECT_GT(schedules::cv_partition_cost(s, wide, l1_48k), schedules::cv_partition_cost(s, wide, l1_1m));
    EXPECT_EQ(schedules::cv_partition_cost(s, tall, l1_48k), schedules::cv_partition_cost(s, tall, l1_1m));
    EXPECT_GT(schedules::cv_partition_cost(s, wide, l1_48k), schedules::cv_partition_cost(s, tall, l1_48k));
    EXPECT_LT(schedules::cv_partition_cost(s, wide, l1_1m), schedules::cv_partition_cost(s, tall, l1_1m));
    // In passes of 64 channels (pass_channels) a 5-vector tile's weights fit (20 KB): cheaper than
    // streaming them, dearer than one pass in an L1 they fit by the accumulators' reloads.
    const schedules::TileContext passes{16, 32, false, 64, 48 << 10};
    EXPECT_LT(schedules::cv_partition_cost(s, wide, passes), schedules::cv_partition_cost(s, wide, l1_48k));
    EXPECT_GT(schedules::cv_partition_cost(s, wide, passes), schedules::cv_partition_cost(s, wide, l1_1m));
    // A tile filling the L1 (3 vectors: 60 KB of a 64 KB L1) leaves none to the input: streamed.
    const schedules::CvPartition three{{7, 3}, 7, 96};
    const schedules::TileContext l1_64k{16, 32, false, 0, 64 << 10};
    EXPECT_GT(schedules::cv_partition_cost(s, three, l1_64k), schedules::cv_partition_cost(s, three, l1_1m));
    // The targets' assumed L1.
    EXPECT_EQ(schedules::target_traits(Halide::Target("x86-64-linux-avx-avx2-f16c-fma-sse41-avx512-avx512_skylake"))
                  .l1_data_bytes,
              48 << 10);
    EXPECT_EQ(schedules::target_traits(Halide::Target("x86-64-linux-avx-avx2-f16c-fma-sse41")).l1_data_bytes, 32 << 10);
}

TEST(Composer, ConvCvReducesInPassesWhereATilesWeightsPassHalfTheL2) {
    // A 3x3 512->512 at 7x7 (ResNet-18's and ResNet-34's last stage) on AVX-512: in one pass, a tile
    // of 4 channel vectors has 1.2 MB of weights, past a 1 MB L2, streamed from the shared cache for
    // every tile of positions. The defaults reduce in passes of whole input blocks whose tile weights
    // fit half the L2, each pass's weights reused by the task's tiles.
    const json p = avx512_conv_defaults(512, 7, 512, 3);
    ASSERT_EQ(p.value("template", ""), "conv_cv") << p.dump();
    const int pass = p.value("ci_block", 0), vectors = p.value("tile_c_vectors", 0);
    EXPECT_LT(pass, 512) << p.dump();
    EXPECT_EQ(512 % pass, 0) << p.dump();
    EXPECT_EQ(pass % std::max(1, p.value("input_block", 0)), 0) << p.dump();
    EXPECT_LE(int64_t{pass} * 9 * vectors * 16 * 4, 512 << 10) << p.dump();
    EXPECT_NE(p.value("why", "").find("passes priced"), std::string::npos) << p.dump();
    // Where a tile's weights for all channels fit half the L2 (a 1x1 2048->512: 512 KB for 4
    // vectors; 320->320), one pass stays; under AVX2, the rules' passes of at most 64 channels.
    EXPECT_EQ(avx512_conv_defaults(2048, 7, 512).value("ci_block", 0), 2048);
    EXPECT_EQ(avx512_conv_defaults(320, 14, 320).value("ci_block", 0), 320);
    EXPECT_LE(
        conv_defaults_for(Halide::Target("x86-64-linux-avx-avx2-f16c-fma-sse41"), 512, 7, 512, 3).value("ci_block", 0),
        64);

    // The model: one pass costs more than passes keeping the weights in L2, by more than the
    // accumulators' reloads; passes priced where nothing is streamed only cost their reloads.
    schedules::ConvGroupShape s;
    s.input = {1, 512, 7, 7};
    s.weight = {512, 512, 3, 3};
    s.output = s.tile_output = {1, 512, 7, 7};
    s.padded = true;
    const schedules::TileContext caches{16, 32, false, 0, 48 << 10, 1 << 20, 8}, none{16, 32, false, 0, 0, 0, 8};
    const schedules::CvPartition one{{5, 4}, 7, 64, 512}, in_passes{{5, 4}, 7, 64, 128};
    EXPECT_GT(schedules::cv_partition_cost(s, one, caches), 1.1 * schedules::cv_partition_cost(s, in_passes, caches));
    EXPECT_LT(schedules::cv_partition_cost(s, one, none), schedules::cv_partition_cost(s, in_passes, none));
    // cheapest_cv_partition offers the passes only where the context prices the L2.
    EXPECT_EQ(schedules::cheapest_cv_partition(s, one, {{5, 4}}, caches).pass_channels, 128);
    EXPECT_EQ(schedules::cheapest_cv_partition(s, one, {{5, 4}}, none).pass_channels, 512);
    EXPECT_EQ(
        schedules::target_traits(Halide::Target("x86-64-linux-avx-avx2-f16c-fma-sse41-avx512-avx512_skylake")).l2_bytes,
        1 << 20);

    // AVX-512's passes on an odd shape (520 channels: passes of 104, 13 input blocks; 72 output
    // channels, 4.5 vectors; a 9x11 plane) against the reference, on the host.
    const Graph odd = conv_model(520, 9, 11, 72, 3, 1, 1, 1);
    FusedGraph plan = fused_plan(odd);
    plan.groups[0].schedule =
        with_default_schedules(plan_fusion(odd, {load_rules("x86")}),
                               Halide::Target("x86-64-linux-avx-avx2-f16c-fma-sse41-avx512-avx512_skylake"))
            .groups[0]
            .schedule;
    ASSERT_LT(plan.groups[0].schedule.value("ci_block", 520), 520) << plan.groups[0].schedule.dump();
    expect_matches_reference(plan);
}

// A stem's conv (3 -> 16, 3x3 stride 2) + 3x3 stride-2 pool whose windows overlap and pad, on odd
// planes: conv_cv's tile is written from vectors of channels (16 channels, whole AVX2 vectors; rows of
// 11 pooled positions, at least a vector), so the pool goes in the tile, reading the task's conv rows
// with channels in vector lanes, not at root. Its rows a task are priced by the conv rows the busiest
// thread computes: 10 pooled rows in 4 tasks of 3 (7 conv rows each; 1 row a task, as for a pool whose
// windows do not overlap, recomputes a conv row of every 3). Max pool after ReLU, max pool of the
// conv alone (its pads below any value), average pool not counting pads; batch 1 and 2. Each against
// the reference.
TEST(Composer, OverlappingPoolReadsTheConvTileFromChannelLanes) {
    for (const std::string pool : {"relu_max", "max", "average"}) {
        for (const int N : {1, 2}) {
            SCOPED_TRACE(pool + " batch " + std::to_string(N));
            json nodes = {{{"name", "conv"},
                           {"op", "Conv"},
                           {"inputs", {"x", "w", "b"}},
                           {"attrs", {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}}}}};
            std::string in = "conv";
            if (pool == "relu_max") {
                nodes.push_back({{"name", "relu"}, {"op", "Relu"}, {"inputs", {"conv"}}});
                in = "relu";
            }
            json attrs = {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}};
            if (pool == "average") attrs["count_include_pad"] = 0;
            nodes.push_back({{"name", "pool"},
                             {"op", pool == "average" ? "AveragePool" : "MaxPool"},
                             {"inputs", {in}},
                             {"attrs", attrs}});
            const Graph g = json_model(model_json(
                {{"x", {N, 3, 37, 41}}}, {{"w", uniform({16, 3, 3, 3}, 1)}, {"b", uniform({16}, 2)}}, nodes, "pool"));
            const FusedGraph plan = fused_plan(g);
            ASSERT_EQ(plan.groups.size(), 1u);
            const json &p = plan.groups[0].schedule;
            EXPECT_EQ(p.value("template", ""), "conv_cv") << p.dump();
            EXPECT_FALSE(p.contains("compute")) << p.dump();
            EXPECT_NE(p.value("why", "").find("the pool per task after the conv"), std::string::npos) << p.dump();
            EXPECT_EQ(p.value("block_rows", 0), N == 1 ? 3 : 5) << p.dump();
            expect_matches_reference(plan);
        }
    }
}

TEST(Composer, ConvCvSplitsChannelsBetweenThreadsWhereWeightsComeFromMemory) {
    // A 1x1 768->192 at 17x17 (Inception-V3's, 590 KB of weights, the smaller operand) on AVX-512:
    // every output channel in one block, the tasks blocks of rows, each thread reading all the
    // weights. Where the model's weights outgrow the shared cache, each run reads them from memory,
    // and the defaults split the channels so that each thread reads only its blocks' weights.
    const Halide::Target avx512("x86-64-linux-avx-avx2-f16c-fma-sse41-avx512-avx512_skylake");
    Graph g = conv_model(768, 17, 17, 192, 1, 1, 0, 1);
    FusedGraph plan = plan_fusion(g, {load_rules("x86")});
    const json cached = with_default_schedules(plan, avx512).groups[0].schedule;
    ASSERT_EQ(cached.value("template", ""), "conv_cv") << cached.dump();
    EXPECT_EQ(cached.value("channel_block", 0), 192) << cached.dump();
    // 64 MB more weights (a shape alone: the defaults read the weights' types, not their values).
    Constant big;
    big.type = {DType::Float32, {16 << 20}};
    plan.graph.weights["other_layers"] = big;
    const json streamed = with_default_schedules(plan, avx512).groups[0].schedule;
    ASSERT_EQ(streamed.value("template", ""), "conv_cv") << streamed.dump();
    EXPECT_LE(streamed.value("channel_block", 0), 96) << streamed.dump();
    EXPECT_NE(streamed.value("why", "").find("read from memory"), std::string::npos) << streamed.dump();

    // The model: the first reads cost a split nothing where they are not priced; priced, a thread's
    // weights (a channel block for each of its tasks' blocks) dominate: two blocks of all rows, one a
    // thread, cost less than every channel in blocks of rows, which all read every weight.
    schedules::ConvGroupShape s;
    s.input = {1, 768, 17, 17};
    s.weight = {192, 768, 1, 1};
    s.output = s.tile_output = {1, 192, 17, 17};
    const schedules::TileContext cache{16, 32, false, 0, 48 << 10, 1 << 20, 1},
        memory{16, 32, false, 0, 48 << 10, 1 << 20, 1, schedules::kWeightFromMemoryFlopsPerByte};
    const schedules::CvPartition rows{{5, 4}, 5, 192}, quarters{{7, 3}, 17, 48};
    EXPECT_GT(schedules::cv_partition_cost(s, rows, memory) - schedules::cv_partition_cost(s, rows, cache),
              schedules::cv_partition_cost(s, quarters, memory) - schedules::cv_partition_cost(s, quarters, cache));
    EXPECT_LT(schedules::cv_partition_cost(s, quarters, memory), schedules::cv_partition_cost(s, rows, memory));
    EXPECT_EQ(schedules::cheapest_cv_partition(s, rows, {{5, 4}, {5, 3}, {7, 3}}, cache).channel_block, 192);
    EXPECT_LT(schedules::cheapest_cv_partition(s, rows, {{5, 4}, {5, 3}, {7, 3}}, memory).channel_block, 192);
    EXPECT_EQ(schedules::target_traits(avx512).shared_cache_bytes, 32 << 20);
    EXPECT_TRUE(schedules::prices_first_reads(s, memory));
    EXPECT_FALSE(schedules::prices_first_reads(s, cache));

    // Where the output outweighs the weights (a 1x1 256->512 at 28x28: 512 KB of weights, 1.6 MB of
    // output), first reads are not priced, and the defaults keep their partition.
    Graph expand = conv_model(256, 28, 28, 512, 1, 1, 0, 1);
    FusedGraph expand_plan = plan_fusion(expand, {load_rules("x86")});
    const json expand_cached = with_default_schedules(expand_plan, avx512).groups[0].schedule;
    expand_plan.graph.weights["other_layers"] = big;
    const json expand_streamed = with_default_schedules(expand_plan, avx512).groups[0].schedule;
    for (const char *knob : {"template", "channel_block", "block_rows", "tile_positions", "tile_c_vectors"})
        EXPECT_EQ(expand_streamed.value(knob, json()), expand_cached.value(knob, json())) << knob;
    EXPECT_EQ(expand_streamed.value("why", "").find("read from memory"), std::string::npos) << expand_streamed.dump();
    schedules::ConvGroupShape e;
    e.input = {1, 256, 28, 28};
    e.weight = {512, 256, 1, 1};
    e.output = e.tile_output = {1, 512, 28, 28};
    EXPECT_FALSE(schedules::prices_first_reads(e, memory));

    // The split defaults on an odd shape against the reference (72 channels, 4.5 vectors, split in a
    // block of 48 and one of 24; a 9x11 plane).
    Graph odd = conv_model(200, 9, 11, 72, 1, 1, 0, 1);
    FusedGraph odd_plan = plan_fusion(odd, {load_rules("x86")});
    odd_plan.graph.weights["other_layers"] = big;
    const json split = with_default_schedules(odd_plan, avx512).groups[0].schedule;
    ASSERT_EQ(split.value("template", ""), "conv_cv") << split.dump();
    EXPECT_LT(split.value("channel_block", 0), 72) << split.dump();  // a whole block and a partial one
    FusedGraph run = fused_plan(odd);
    run.groups[0].schedule = split;
    expect_matches_reference(run);
}

TEST(Composer, StridedDepthwiseTakesWholeVectorsWhereHalvesComputeAsMany) {
    // AVX-512: a 28-wide output row computes 32 lanes in 2 vectors of 16 or 4 of 8; a stride-2 conv,
    // whose taps gather every other column, takes the fewer vectors; at stride 1 the halves stay (they
    // divide no better, and measured alike), and a 56-wide row keeps 8 lanes (56 computed, not 64).
    auto lanes = [&](int in, int stride) {
        const json p = avx512_conv_defaults(144, in, 144, 3, stride, 144);
        EXPECT_EQ(p.value("template", ""), "conv_dw") << p.dump();
        return p.value("vector_width", 0);
    };
    EXPECT_EQ(lanes(56, 2), 16);  // 28 wide
    EXPECT_EQ(lanes(28, 1), 8);   // 28 wide
    EXPECT_EQ(lanes(112, 2), 8);  // 56 wide
    EXPECT_EQ(lanes(28, 2), 8);   // 14 wide: no vector of 16
    // Vectors of 16 at stride 2 compute the conv on a row they do not divide (20 wide: the second
    // shifted inwards), 3x3 and 5x5.
    for (const int k : {3, 5}) {
        FusedGraph plan = fused_plan(conv_model(16, 9, 40, 16, k, 2, k / 2, 16));
        plan.groups[0].schedule = {{"template", "conv_dw"}, {"vector_width", 16}, {"tile_y", 1}, {"channel_block", 8}};
        expect_matches_reference(plan);
    }
}

TEST(Composer, TallDepthwiseKernelsTakeTwoRowsOfWideVectors) {
    // AVX-512: a 5x5 (or taller) depthwise conv without a producer takes 2 rows a tile (each input row
    // loaded once for both) in vectors as wide as the row allows; 3x3 keeps 1 row of vectors that
    // divide it.
    auto tile = [&](int in, int k, int stride) {
        const json p = avx512_conv_defaults(144, in, 144, k, stride, 144);
        EXPECT_EQ(p.value("template", ""), "conv_dw") << p.dump();
        return std::pair{p.value("tile_y", 0), p.value("vector_width", 0)};
    };
    EXPECT_EQ(tile(28, 5, 1), (std::pair{2, 16}));  // 28 wide: 16 lanes need not divide it
    EXPECT_EQ(tile(56, 5, 2), (std::pair{2, 16}));
    EXPECT_EQ(tile(28, 5, 2), (std::pair{2, 8}));  // 14 wide
    EXPECT_EQ(tile(28, 7, 1), (std::pair{2, 16}));
    EXPECT_EQ(tile(28, 3, 1), (std::pair{1, 8}));
    // Those tiles on odd planes: rows no vector divides, an odd row count, stride 2, 5x5 and 7x7.
    for (const auto &[h, w, k, stride] :
         {std::tuple{13, 27, 5, 1}, std::tuple{11, 37, 5, 2}, std::tuple{9, 19, 7, 1}}) {
        FusedGraph plan = fused_plan(conv_model(16, h, w, 16, k, stride, k / 2, 16));
        SCOPED_TRACE(std::to_string(h) + "x" + std::to_string(w) + ", " + std::to_string(k) + "x" + std::to_string(k) +
                     " stride " + std::to_string(stride));
        const int64_t out_w = (w - 1) / stride + 1;
        plan.groups[0].schedule = {
            {"template", "conv_dw"}, {"vector_width", out_w >= 16 ? 16 : 8}, {"tile_y", 2}, {"channel_block", 8}};
        expect_matches_reference(plan);
    }
}

TEST(Composer, DepthwiseDefaultsDeinterleaveWhereTapsReuseTheColumns) {
    // A conv strided across with 4 or more taps per input element (5x5 stride 2: 6.25) reads its plane
    // by phase, on AVX2 and AVX-512; 3x3 stride 2 (2.25) does not, nor a conv with its pointwise
    // producer in the group, nor rows of 7 in vectors of 4. AVX2 takes 2 vectors across for kernels 5
    // wide, at stride 1 or deinterleaved, where the row takes an even number of vectors.
    const Halide::Target avx512("x86-64-linux-avx-avx2-f16c-fma-sse41-avx512-avx512_skylake");
    for (const Halide::Target &t : {kTarget, avx512}) {
        SCOPED_TRACE(t.to_string());
        const bool wide = t.has_feature(Halide::Target::AVX512);
        const json s2 = conv_defaults_for(t, 72, 56, 72, 5, 2, 72);
        EXPECT_EQ(s2.value("deinterleave_x", false), true) << s2.dump();
        EXPECT_EQ(s2.value("tile_x_vectors", 1), wide ? 1 : 2) << s2.dump();
        EXPECT_EQ(conv_defaults_for(t, 480, 28, 480, 5, 2, 480).value("deinterleave_x", false), true);
        EXPECT_EQ(conv_defaults_for(t, 96, 112, 96, 3, 2, 96).value("deinterleave_x", false), false);
        EXPECT_EQ(conv_defaults_for(t, 72, 28, 72, 5, 1, 72).value("deinterleave_x", false), false);
        EXPECT_EQ(conv_defaults_for(t, 72, 28, 72, 5, 1, 72).value("tile_x_vectors", 1), wide ? 1 : 2);
        EXPECT_EQ(conv_defaults_for(t, 72, 28, 72, 3, 1, 72).value("tile_x_vectors", 1), 1);
    }
    EXPECT_EQ(conv_defaults_for(kTarget, 672, 14, 672, 5, 2, 672).value("deinterleave_x", false), false);  // 7 wide
    RuleSet rules = load_rules("x86");
    rules.machine.cache_bytes = rules.machine.shared_cache_bytes = 1024;
    const FusedGraph produced =
        with_default_schedules(plan_fusion(expand_then_depthwise(1, 8, 32, 56, 56, 5, 2), {rules}), kTarget);
    ASSERT_EQ(produced.groups.size(), 1u);
    EXPECT_TRUE(produced.groups[0].schedule.contains("producer_tile_c")) << produced.groups[0].schedule.dump();
    EXPECT_FALSE(produced.groups[0].schedule.contains("deinterleave_x")) << produced.groups[0].schedule.dump();
    // The compiled group reads its phases.
    const FusedGraph plan = fused_plan(conv_model(72, 56, 56, 72, 5, 2, 2, 72));
    EXPECT_NE(compiled_group_text(plan, kTarget, false).find("phases"), std::string::npos);
}

TEST(Composer, DepthwisePlanesAreBuiltInDenseVectors) {
    // conv_dw's padded plane per channel: the pad value, then the input's rows over it in whole
    // vectors (the last shifted inwards). No store of the group is masked (a guarded tail: vmaskmovps,
    // microcoded on Zen 3) or reads through a gather (a select per element whose vector straddles the
    // input's edge: every vector of a 14-wide row did). Rows of 14, 7 (4 lanes), 13 (5x5), stride 2,
    // and a plane built from the pointwise producer's strip; each against the reference.
    std::vector<std::pair<std::string, FusedGraph>> plans;
    for (const auto &[c, hw, k, stride] :
         {std::tuple{16, 14, 3, 1}, std::tuple{12, 7, 3, 1}, std::tuple{8, 13, 5, 1}, std::tuple{8, 28, 3, 2}}) {
        plans.emplace_back(std::to_string(c) + " channels at " + std::to_string(hw) + "x" + std::to_string(hw) + ", " +
                               std::to_string(k) + "x" + std::to_string(k) + " stride " + std::to_string(stride),
                           fused_plan(conv_model(c, hw, hw, c, k, stride, k / 2, c)));
    }
    plans.emplace_back("expand 8->24 + depthwise at 14x14", fused_plan(pointwise_depthwise_model(1, 8, 24, 14, 14)));
    for (const auto &[name, plan] : plans) {
        SCOPED_TRACE(name);
        ASSERT_EQ(plan.groups[0].schedule.value("template", ""), "conv_dw") << plan.groups[0].schedule.dump();
        exec::LoweredGroup lowered = composed_first_group(plan, kTarget);
        const std::string nest =
            loop_nest(Halide::Pipeline(lowered.output_funcs),
                      std::vector<Halide::Argument>(lowered.params.begin(), lowered.params.end()), kTarget);
        // Every store of the group (the plane's, the conv's and the producer's strip): whole vectors.
        std::istringstream lines(nest);
        int vector_stores = 0;
        for (std::string line; std::getline(lines, line);) {
            if (line.find("store ") == std::string::npos) continue;
            vector_stores += line.find("(vectors of") != std::string::npos;
            EXPECT_EQ(line.find("masked"), std::string::npos) << nest;
            EXPECT_EQ(line.find("gathered"), std::string::npos) << nest;
        }
        EXPECT_GE(vector_stores, 3) << nest;  // the plane's two stages and the conv, at least
        expect_matches_reference(plan);
    }
}

TEST(Composer, PointwiseChannelsOfSevenVectorsTakeOneTile) {
    // AVX-512: 112 output channels (7 vectors, which tiles of 4 do not divide) in tiles of 3 positions x
    // 7 vectors where their weights stay in L1 (96 input channels: 42 KB); 128 (8 vectors) keep the
    // rules' tiles of 4. Over 672 input channels a 3 x 7 tile's weights (300 KB) stream from L2 for
    // every 3 positions and the rules' 5 x 4 stays (MobileNet-V3's 672->112 at 14x14, Zen 5, in the
    // network: 0.95-1.03x either way). On odd planes the 7-vector tile matches the reference.
    const json seven = avx512_conv_defaults(96, 14, 112);
    ASSERT_EQ(seven.value("template", ""), "conv_cv") << seven.dump();
    EXPECT_EQ(seven.value("tile_c_vectors", 0), 7) << seven.dump();
    EXPECT_EQ(seven.value("tile_positions", 0), 3) << seven.dump();
    EXPECT_NE(avx512_conv_defaults(96, 14, 128).value("tile_c_vectors", 0), 8);
    EXPECT_NE(avx512_conv_defaults(672, 14, 112).value("tile_c_vectors", 0), 7);
    FusedGraph plan = fused_plan(conv_model(40, 9, 13, 112, 1, 1, 0, 1));
    plan.groups[0].schedule = {{"template", "conv_cv"}, {"vector_width", 16}, {"tile_positions", 3},
                               {"tile_c_vectors", 7},   {"block_rows", 2},    {"channel_block", 112},
                               {"ci_block", 40},        {"input_block", 0}};
    expect_matches_reference(plan);
}

TEST(Composer, ConvCvReducesInOnePassWithThirtyTwoRegisters) {
    // AVX-512: every input channel in one pass (no accumulators stored and reloaded between passes),
    // 1x1 or 3x3, strided or not, where a tile's weights fit half the L2 (else passes:
    // ConvCvReducesInPassesWhereATilesWeightsPassHalfTheL2); AVX2 keeps passes of at most 64
    // channels. One pass over many channels on an odd plane against the reference.
    for (const auto &[cin, hw, cout, k, stride] :
         {std::tuple{256, 14, 128, 1, 1}, std::tuple{80, 14, 64, 3, 2}, std::tuple{192, 17, 192, 3, 2}}) {
        const json p = avx512_conv_defaults(cin, hw, cout, k, stride);
        ASSERT_EQ(p.value("template", ""), "conv_cv") << p.dump();
        EXPECT_EQ(p["ci_block"], cin) << cin << "->" << cout << " " << k << "x" << k << ": " << p.dump();
    }
    EXPECT_EQ(fused_plan(conv_model(80, 14, 14, 16, 3, 2, 1, 1)).groups[0].schedule["ci_block"], 40);
    FusedGraph plan = fused_plan(conv_model(200, 9, 11, 32, 3, 1, 1, 1));
    plan.groups[0].schedule = {{"template", "conv_cv"}, {"vector_width", 16}, {"tile_positions", 5},
                               {"tile_c_vectors", 2},   {"block_rows", 3},    {"channel_block", 32},
                               {"ci_block", 200},       {"input_block", 8}};
    expect_matches_reference(plan);
}

TEST(Composer, ConvXvBalancesItsChannelTiles) {
    // AVX-512: 16 output channels in 2 tiles of 8 (not 12 and 12, the last shifted inwards, 24
    // computed), 3 rows where that frees the accumulators and over-computes the height by at most 5%
    // (112 rows: 114). The 3 x 8 tile on an odd plane against the reference.
    const json tall = avx512_conv_defaults(32, 112, 16);
    ASSERT_EQ(tall.value("template", ""), "conv_xv") << tall.dump();
    EXPECT_EQ(tall.value("tile_c", 0), 8) << tall.dump();
    EXPECT_EQ(tall.value("tile_y", 0), 3) << tall.dump();
    // AVX2: 2 tiles x 6 channels compute 18 of 16; 4 x 4 in 3 rows 16 (their pass over 32 input
    // channels, 3 rows of 56, is 96 pages: the input is copied per task). With 128 input channels the
    // 3 rows' input lines and the weights (32 KB) would fill the L1: 2 x 6 stays.
    const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41");
    const json narrow = conv_defaults_for(avx2, 32, 112, 16);
    ASSERT_EQ(narrow.value("template", ""), "conv_xv") << narrow.dump();
    EXPECT_EQ(narrow.value("tile_c", 0), 4) << narrow.dump();
    EXPECT_EQ(narrow.value("tile_y", 0), 3) << narrow.dump();
    EXPECT_EQ(narrow.value("input_at", ""), "task") << narrow.dump();
    const json deep = conv_defaults_for(avx2, 128, 54, 16);
    ASSERT_EQ(deep.value("template", ""), "conv_xv") << deep.dump();
    EXPECT_EQ(deep.value("tile_c", 0), 6) << deep.dump();
    EXPECT_EQ(deep.value("tile_y", 0), 2) << deep.dump();
    FusedGraph plan = fused_plan(conv_model(24, 13, 37, 16, 1, 1, 0, 1));
    plan.groups[0].schedule = {
        {"template", "conv_xv"}, {"vector_width", 16},      {"tile_x_vectors", 1},          {"tile_y", 3},
        {"tile_c", 8},           {"channel_loop", "inner"}, {"reduction_order", "ci,kx,ky"}};
    expect_matches_reference(plan);
    plan.groups[0].schedule.update({{"vector_width", 8}, {"tile_c", 4}, {"input_at", "task"}});
    expect_matches_reference(plan);
}

TEST(Composer, ChannelVectorPassesAreWholeReadBlocks) {
    // AVX2 (one pass with AVX-512): passes of at most 64 input channels, each whole blocks of the
    // channel-blocked copy it reads (so that the blocks are read unrolled): 216 channels in passes of
    // 54 would not be, and no multiple of 8 from 32 to 64 divides 216, so one pass; 256 in 4 of 64;
    // 160 in 4 of 40.
    const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41");
    for (const auto &[cin, expect] : {std::pair{216, 216}, std::pair{256, 64}, std::pair{160, 40}}) {
        const json p = conv_defaults_for(avx2, cin, 28, 64, 3, 2);
        ASSERT_EQ(p.value("template", ""), "conv_cv") << p.dump();
        ASSERT_EQ(p.value("input_block", 0), 8) << p.dump();
        EXPECT_EQ(p.value("ci_block", 0), expect) << cin << " channels: " << p.dump();
    }
}

TEST(Composer, PointwiseConvOfManyPlanarChannelsCopiesItsInputBlocked) {
    // AVX-512 defaults: a 1x1 conv reading 256 planar channels over 27x27 copies its input blocked by
    // 8 per task (one stream for the tile's broadcasts, not one per channel); at 7x7 (3 cache lines a
    // plane), for 16 output channels, or from 32 input channels it reads the input as it is.
    const json squeeze = avx512_conv_defaults(256, 27, 64);
    ASSERT_EQ(squeeze.value("template", ""), "conv_cv") << squeeze.dump();
    EXPECT_EQ(squeeze.value("input_block", 0), 8) << squeeze.dump();
    EXPECT_EQ(squeeze.value("input_at", ""), "task") << squeeze.dump();
    for (const auto &[cin, hw, cout] : {std::tuple{576, 7, 192}, std::tuple{256, 27, 16}, std::tuple{32, 27, 64}}) {
        const json p = avx512_conv_defaults(cin, hw, cout);
        EXPECT_EQ(p.value("input_block", 0), 0) << cin << "->" << cout << " at " << hw << ": " << p.dump();
    }
    // The copy per task computes the conv at sizes no tile divides.
    FusedGraph plan = fused_plan(conv_model(72, 9, 13, 40, 1, 1, 0, 1));
    for (const int rows : {1, 4, 9}) {
        plan.groups[0].schedule = {{"template", "conv_cv"}, {"vector_width", 16}, {"tile_positions", 5},
                                   {"tile_c_vectors", 3},   {"block_rows", rows}, {"channel_block", 40},
                                   {"ci_block", 24},        {"input_block", 8},   {"input_at", "task"}};
        expect_matches_reference(plan);
    }
}

// A 3x3 depthwise conv (+ ReLU) on C channels of H x W, then a 1x1 conv C -> K (+ bias): two groups,
// the second reading what the first just made.
Graph depthwise_then_pointwise_model(int C, int H, int W, int K) {
    const std::string c = std::to_string(C), k = std::to_string(K);
    const std::string text = R"({"format": "hfuse-model", "version": 1, "name": "dw_pw",
      "inputs": [{"name": "x", "shape": [1, )" +
                             c + ", " + std::to_string(H) + ", " + std::to_string(W) + R"(]}],
      "weights": {"wd": {"shape": [)" +
                             c + R"(, 1, 3, 3], "uniform": [-0.4, 0.4], "seed": 1},
                  "wp": {"shape": [)" +
                             k + ", " + c + R"(, 1, 1], "uniform": [-0.1, 0.1], "seed": 2},
                  "bp": {"shape": [)" +
                             k + R"(], "uniform": [-0.5, 0.5], "seed": 3}},
      "nodes": [{"name": "dw", "op": "Conv", "inputs": ["x", "wd"],
                 "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": )" +
                             c + R"(}},
                {"name": "relu", "op": "Relu", "inputs": ["dw"]},
                {"name": "project", "op": "Conv", "inputs": ["relu", "wp", "bp"], "attrs": {"kernel_shape": [1, 1]}}],
      "outputs": ["project"]})";
    return json_model(json::parse(text));
}

TEST(Composer, PointwiseConvReadsInPlaceWhatTheGroupBeforeMade) {
    // AVX-512 defaults: a 1x1 conv reading many planar channels copies them blocked (the rule above)
    // unless the group right before it made them and they are at most 512 KB an image (still in the
    // caches): MobileNet-V2's project conv, 384 -> 64 at 14x14 (301 KB), reads them in place and says
    // why; at 28x28 (1.2 MB) it copies. Under AVX2 (not measured) it copies. In place on an odd plane
    // against the reference.
    const Halide::Target avx512("x86-64-linux-avx-avx2-f16c-fma-sse41-avx512-avx512_skylake");
    auto project = [](const Graph &g, const Halide::Target &t) {
        const FusedGraph plan = with_default_schedules(plan_fusion(g, {load_rules("x86")}), t);
        EXPECT_EQ(plan.groups.size(), 2u);
        return plan.groups.back().schedule;
    };
    const json near = project(depthwise_then_pointwise_model(384, 14, 14, 64), avx512);
    ASSERT_EQ(near.value("template", ""), "conv_cv") << near.dump();
    EXPECT_EQ(near.value("input_block", -1), 0) << near.dump();
    EXPECT_FALSE(near.contains("input_at")) << near.dump();
    EXPECT_NE(near.value("why", "").find("in place"), std::string::npos) << near.dump();
    const json large = project(depthwise_then_pointwise_model(384, 28, 28, 64), avx512);
    ASSERT_EQ(large.value("template", ""), "conv_cv") << large.dump();
    EXPECT_EQ(large.value("input_block", 0), 8) << large.dump();
    const json avx2 = project(depthwise_then_pointwise_model(384, 14, 14, 64), kTarget);
    EXPECT_EQ(avx2.value("why", "").find("in place"), std::string::npos) << avx2.dump();
    FusedGraph odd = with_default_schedules(
        plan_fusion(depthwise_then_pointwise_model(200, 15, 13, 64), {load_rules("x86")}), avx512);
    ASSERT_EQ(odd.groups.size(), 2u);
    ASSERT_EQ(odd.groups[1].schedule.value("input_block", -1), 0) << odd.groups[1].schedule.dump();
    test::expect_plan_matches_reference(odd, 1e-4);
}

TEST(Composer, ConvCvTilesWithinRowsPaddedToWholeTiles) {
    // A stem reading its planar input, no tile size dividing its rows (SqueezeNet's 7x7 stride 2 to
    // 109 wide): every row padded to whole tiles, the size padding least (110 = 22 x 5), so each
    // tile's positions are its first's plus constants. 31 wide: 32 by 4 or 8 positions, the larger
    // tile. A 3x3 stem does too little work per input value for the zero-extended copy this needs.
    const Halide::Target avx512("x86-64-linux-avx-avx2-f16c-fma-sse41-avx512-avx512_skylake");
    auto defaults = [&](const Graph &g) {
        return with_default_schedules(plan_fusion(g, {load_rules("x86")}), avx512).groups[0].schedule;
    };
    for (const auto &[hw, np] : {std::pair{224, 5}, std::pair{67, 8}}) {
        const json p = defaults(conv_model(3, hw, hw, hw == 224 ? 96 : 32, 7, 2, 0, 1));
        ASSERT_EQ(p.value("template", ""), "conv_cv") << p.dump();
        EXPECT_EQ(p.value("position_tiles", ""), "in_rows") << p.dump();
        EXPECT_EQ(p.value("tile_positions", 0), np) << p.dump();
    }
    EXPECT_FALSE(defaults(conv_model(3, 67, 67, 32, 3, 2, 0, 1)).contains("position_tiles"));
    EXPECT_FALSE(defaults(conv_model(3, 56, 56, 32, 7, 2, 3, 1)).contains("position_tiles"));  // 28 = 7 x 4

    // Rows padded by 1 to 3 positions, padded or not, one image or two, planar or blocked input copies,
    // the reduction in one pass or several, against the reference.
    for (const Graph &g : {conv_model(3, 23, 21, 16, 7, 2, 3, 1, 0, 0, 2), conv_model(8, 13, 15, 24, 3, 1, 0, 1)}) {
        FusedGraph plan = fused_plan(g);
        const int cin = static_cast<int>(g.type_of("x").shape[1]);
        const int h = static_cast<int>(g.type_of("relu").shape[2]);
        for (const int np : {4, 5}) {
            for (const int rows : {1, 3, h}) {
                plan.groups[0].schedule = {{"template", "conv_cv"},
                                           {"vector_width", 8},
                                           {"tile_positions", np},
                                           {"tile_c_vectors", 2},
                                           {"block_rows", rows},
                                           {"channel_block", 16},
                                           {"ci_block", rows == 3 && cin == 8 ? 4 : cin},
                                           {"input_block", cin == 8 && np == 4 ? 8 : 0},
                                           {"position_tiles", "in_rows"}};
                if (rows == 1) plan.groups[0].schedule["input_at"] = "task";
                expect_matches_reference(plan);
            }
        }
    }

    // Reading an input another group stored channel-blocked, with a halo too narrow for the padded
    // rows: copied block for block. The executor and a whole-model pipeline.
    const std::string text = R"({"format": "hfuse-model", "version": 1, "name": "cv_rows",
      "inputs": [{"name": "x", "shape": [1, 16, 13, 13]}],
      "weights": {"w": {"shape": [16, 16, 3, 3], "uniform": [-0.3, 0.3], "seed": 1},
                  "w2": {"shape": [32, 16, 1, 1], "uniform": [-0.3, 0.3], "seed": 3}},
      "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w"], "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}},
                {"name": "relu", "op": "Relu", "inputs": ["conv"]},
                {"name": "conv2", "op": "Conv", "inputs": ["relu", "w2"], "attrs": {"kernel_shape": [1, 1], "strides": [2, 2]}}],
      "outputs": ["conv2"]})";
    const std::string path = testing::TempDir() + "/composer_cv_rows_" + std::to_string(getpid()) + ".json";
    std::ofstream(path) << text;
    const Graph g = load_model(path);
    FusedGraph plan = fused_plan(g);
    ASSERT_EQ(plan.groups.size(), 2u);
    ASSERT_EQ(plan.groups[0].schedule.value("template", ""), "conv_cv");
    ASSERT_EQ(plan.groups[1].schedule.value("template", ""), "conv_cv");
    plan.groups[1].schedule.update({{"tile_positions", 3}, {"position_tiles", "in_rows"}, {"input_block", 0}});
    expect_pipeline_matches_reference(g, plan);
    std::remove(path.c_str());

    // Winograd tiles its own way; the choice is one of two words.
    json wino = winograd_params(8, 3, 2, 2, 16, 16);
    wino["position_tiles"] = "in_rows";
    expect_conv_params_error(conv_model(16, 14, 14, 16, 3, 1, 1, 1), wino, "schedule.position_tiles");
    json direct = plan.groups[1].schedule;
    direct["position_tiles"] = "rows";
    expect_conv_params_error(conv_model(16, 13, 13, 32, 1, 2, 0, 1), direct, "schedule.position_tiles");
}

TEST(Composer, WinogradErrorsNameTheField) {
    const Graph g = conv_model(16, 14, 14, 16, 3, 1, 1, 1);
    json p = winograd_params(8, 3, 2, 2, 16, 16);
    p["algorithm"] = "fft";
    expect_conv_params_error(g, p, "schedule.algorithm");
    p["algorithm"] = 2;
    expect_conv_params_error(g, p, "schedule.algorithm");
    p["algorithm"] = "winograd";
    p["ci_block"] = 8;  // one pass
    expect_conv_params_error(g, p, "schedule.ci_block");
    p["ci_block"] = 16;
    p["tile_positions"] = 8;  // 7 tiles a row
    expect_conv_params_error(g, p, "schedule.tile_positions");
    p["tile_positions"] = 3;
    p["winograd_tile"] = 3;  // F(2x2, 3x3) or F(4x4, 3x3)
    expect_conv_params_error(g, p, "schedule.winograd_tile");
    p["winograd_tile"] = "4";
    expect_conv_params_error(g, p, "schedule.winograd_tile");
    p["winograd_tile"] = 4;
    p["tile_positions"] = 5;  // 4 tiles of 4 a row
    expect_conv_params_error(g, p, "schedule.tile_positions");
    p["tile_positions"] = 3;
    p["algorithm"] = "direct";  // Winograd's alone
    expect_conv_params_error(g, p, "schedule.winograd_tile");
    p["algorithm"] = "winograd";
    // 3x3 windows at stride 1, undilated.
    expect_conv_params_error(conv_model(16, 14, 14, 16, 3, 2, 1, 1), p, "schedule.algorithm");
    expect_conv_params_error(conv_model(16, 14, 14, 16, 5, 1, 2, 1), p, "schedule.algorithm");
    expect_conv_params_error(conv_model(16, 14, 14, 16, 1, 1, 0, 1), p, "schedule.algorithm");
}

TEST(Composer, PointwiseProducerStaysInsideTheParallelTasks) {
    // The expanded value is computed per task: its buffer holds the task's block of channels only,
    // never all 24 of them, over the plane's 14 x 14 positions in one band of rows, over a band's 7
    // rows and a row either side (the depthwise conv's halo; 9 x 14 positions allocated) in two.
    const Graph g = pointwise_depthwise_model(1, 8, 24, 14, 14);
    FusedGraph plan = fused_plan(g);
    FusedGroup &grp = plan.groups[0];
    const int block = grp.schedule["channel_block"].get<int>();
    ASSERT_LT(block, 24);
    for (int bands : {1, 2}) {
        SCOPED_TRACE(std::to_string(bands) + " bands");
        grp.schedule["row_bands"] = bands;
        const std::string stmt = compiled_group_text(plan, kTarget, false);
        EXPECT_NE(stmt.find("halide_do_par_for"), std::string::npos);
        const size_t at = stmt.find("allocate expand_flat");
        ASSERT_NE(at, std::string::npos) << "the producer is not lowered flat";
        const std::string line = stmt.substr(at, stmt.find('\n', at) - at);
        const std::string positions = bands == 1 ? "196" : "126";
        EXPECT_NE(line.find("[float32 * " + positions + " * " + std::to_string(block) + " * 1]"), std::string::npos)
            << line;
    }
}

// Makes a reader of model `m`'s value "relu" its output: "conv", a 1x1 conv "project" (weights "wp");
// "squeeze_excite", a global pool, a 1x1 conv (weights "wf"), a Sigmoid and a Mul of "relu" by it.
void add_relu_reader(json &m, const std::string &reader) {
    json &nodes = m["nodes"];
    if (reader == "conv") {
        nodes.push_back(
            {{"name", "project"}, {"op", "Conv"}, {"inputs", {"relu", "wp"}}, {"attrs", {{"kernel_shape", {1, 1}}}}});
        m["outputs"] = {"project"};
        return;
    }
    nodes.push_back({{"name", "gap"}, {"op", "GlobalAveragePool"}, {"inputs", {"relu"}}});
    nodes.push_back({{"name", "fc"}, {"op", "Conv"}, {"inputs", {"gap", "wf"}}, {"attrs", {{"kernel_shape", {1, 1}}}}});
    nodes.push_back({{"name", "gate"}, {"op", "Sigmoid"}, {"inputs", {"fc"}}});
    nodes.push_back({{"name", "scaled"}, {"op", "Mul"}, {"inputs", {"relu", "gate"}}});
    m["outputs"] = {"scaled"};
}

TEST(Composer, DepthwiseRowBandsOnlyWhereEveryReaderTakesRows) {
    // conv_dw's two bands of rows (each thread writing the rows it then reads) by default only where
    // every reader of its output is a conv reading it as its input (tasks of rows): not for a
    // squeeze-excite's global pool and Mul (tasks of channels) nor for a model output; and only where
    // the bands recompute at most 5% of the producer's rows (kernel height - 1 of them: 2 of 41 rows,
    // not 2 of 39).
    for (const std::string reader : {"conv", "squeeze_excite", "output", "conv_small_plane"}) {
        SCOPED_TRACE(reader);
        json m = json::parse(R"({"format": "hfuse-model", "version": 1, "name": "pw_dw_reader",
          "inputs": [{"name": "x", "shape": [1, 8, 41, 41]}],
          "weights": {"we": {"shape": [24, 8, 1, 1], "uniform": [-0.5, 0.5], "seed": 1},
                      "wd": {"shape": [24, 1, 3, 3], "uniform": [-0.4, 0.4], "seed": 2},
                      "wp": {"shape": [8, 24, 1, 1], "uniform": [-0.4, 0.4], "seed": 3},
                      "wf": {"shape": [24, 24, 1, 1], "uniform": [-0.4, 0.4], "seed": 4}},
          "nodes": [{"name": "expand", "op": "Conv", "inputs": ["x", "we"], "attrs": {"kernel_shape": [1, 1]}},
                    {"name": "relu6", "op": "Relu", "inputs": ["expand"]},
                    {"name": "dw", "op": "Conv", "inputs": ["relu6", "wd"],
                     "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": 24}},
                    {"name": "relu", "op": "Relu", "inputs": ["dw"]}],
          "outputs": ["relu"]})");
        if (reader == "conv_small_plane") m["inputs"][0]["shape"] = {1, 8, 39, 39};
        if (reader != "output") add_relu_reader(m, reader == "squeeze_excite" ? "squeeze_excite" : "conv");
        const Graph g = json_model(m);
        FusedGraph plan = fused_plan(g);
        const FusedGroup &dw = group_of(plan, "dw");
        ASSERT_EQ(dw.nodes.size(), 4u) << "the expand conv computed per task of the depthwise conv";
        EXPECT_EQ(dw.schedule.value("row_bands", 1), reader == "conv" ? 2 : 1);
        expect_pipeline_matches_reference(g, plan);
    }
}

TEST(Composer, DepthwiseWithoutProducerTakesRowBandsOnLargePlanes) {
    // Without a pointwise producer in its group, conv_dw takes two bands of rows by default on planes
    // of 56 rows or more where its readers take rows (a 1x1 conv), not on smaller planes nor for a
    // squeeze-excite's pool and Mul; every plan matches the reference.
    struct Case {
        int64_t size;
        std::string reader;
        int bands;
    };
    for (const Case &c : {Case{57, "conv", 2}, Case{57, "squeeze_excite", 1}, Case{55, "conv", 1}}) {
        SCOPED_TRACE(std::to_string(c.size) + " " + c.reader);
        json m = json::parse(R"({"format": "hfuse-model", "version": 1, "name": "dw_reader",
          "inputs": [{"name": "x", "shape": [1, 16, 8, 8]}],
          "weights": {"wd": {"shape": [16, 1, 3, 3], "uniform": [-0.4, 0.4], "seed": 2},
                      "wp": {"shape": [8, 16, 1, 1], "uniform": [-0.4, 0.4], "seed": 3},
                      "wf": {"shape": [16, 16, 1, 1], "uniform": [-0.4, 0.4], "seed": 4}},
          "nodes": [{"name": "dw", "op": "Conv", "inputs": ["x", "wd"],
                     "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": 16}},
                    {"name": "relu", "op": "Relu", "inputs": ["dw"]}],
          "outputs": ["relu"]})");
        m["inputs"][0]["shape"] = {1, 16, c.size, c.size};
        add_relu_reader(m, c.reader);
        const Graph g = json_model(m);
        FusedGraph plan = fused_plan(g);
        const FusedGroup &dw = group_of(plan, "dw");
        ASSERT_EQ(dw.schedule.value("template", ""), "conv_dw");
        EXPECT_FALSE(dw.schedule.contains("producer_tile_c"));
        EXPECT_EQ(dw.schedule.value("row_bands", 1), c.bands);
        expect_pipeline_matches_reference(g, plan);
    }
}

TEST(Composer, PointwiseProducerNeedsItsOwnReaderAndParameters) {
    // The ReLU6 value handed out too: the planner keeps the pointwise conv in a group of its own.
    FusedGraph two = fused_plan(pointwise_depthwise_model(1, 5, 12, 13, 9, true));
    EXPECT_EQ(two.groups.size(), 2u);
    for (const FusedGroup &grp : two.groups) EXPECT_FALSE(grp.schedule.contains("producer_tile_c"));
    expect_matches_reference(two);
    // Producer parameters on a depthwise group without a producer, and bad values, name the field.
    FusedGraph plan = fused_plan(conv_model(24, 14, 14, 24, 3, 1, 1, 24));
    plan.groups[0].schedule["producer_tile_c"] = 4;
    expect_conv_schedule_error(plan, "schedule.producer_tile_c");
    FusedGraph fused = fused_plan(pointwise_depthwise_model(1, 5, 12, 13, 9));
    auto expect_error = [&](const char *key, json value, const std::string &field) {
        FusedGraph p = fused;
        p.groups[0].schedule[key] = value;
        expect_conv_schedule_error(p, field, "dw");
    };
    expect_error("producer_tile_c", 13, "schedule.producer_tile_c");  // exceeds the channel block
    expect_error("producer_vector_width", 6, "schedule.producer_vector_width");
    expect_error("producer_tile_x_vectors", 16, "schedule.producer_tile_x_vectors");  // 16 x 8 > 13 x 9
    expect_error("row_bands", 0, "schedule.row_bands");
    expect_error("row_bands", 14, "schedule.row_bands");  // more bands than the 13 rows' tiles
    json missing = fused.groups[0].schedule;
    missing.erase("producer_tile_c");
    fused.groups[0].schedule = missing;
    expect_error("producer_tile_x_vectors", 1, "schedule.producer_tile_c");
}

TEST(Composer, GlobalPoolAtRootInAGroupTakesTheReductionSchedule) {
    // A global pool and its Flatten (the simple template: Flatten is no elementwise epilogue), the pool
    // handed out too or not, over odd planes, batch 2 and a channel count no vector divides.
    for (const std::string op : {"GlobalAveragePool", "GlobalMaxPool"}) {
        for (const bool hand_out : {false, true}) {
            SCOPED_TRACE(op + (hand_out ? ", the pool handed out" : ""));
            json m = json::parse(R"({"format": "hfuse-model", "version": 1, "name": "gap_flatten",
              "inputs": [{"name": "x", "shape": [2, 21, 9, 7]}],
              "nodes": [{"name": "relu", "op": "Relu", "inputs": ["x"]},
                        {"name": "pool", "op": "GlobalAveragePool", "inputs": ["relu"]},
                        {"name": "flat", "op": "Flatten", "inputs": ["pool"], "attrs": {"axis": 1}}],
              "outputs": ["flat"]})");
            m["nodes"][1]["op"] = op;
            if (hand_out) m["outputs"].push_back("pool");
            const Graph g = json_model(m);
            const FusedGraph plan = fused_plan(g);
            const FusedGroup *pool = nullptr;
            for (const FusedGroup &grp : plan.groups) {
                if (std::count(grp.nodes.begin(), grp.nodes.end(), "flat")) pool = &grp;
            }
            ASSERT_NE(pool, nullptr);
            EXPECT_TRUE(std::count(pool->nodes.begin(), pool->nodes.end(), "pool")) << "the pool with its Flatten";
            expect_pipeline_matches_reference(g, plan);
        }
    }
}

TEST(Composer, ConvWithoutATileableEpilogueRunsAtRoot) {
    // SqueezeNet's tail (conv + Relu + GlobalAveragePool + Flatten) and a fire module's expand convs
    // joined by a Concat: no epilogue the conv template can tile, so the conv runs at root by its
    // template (compute "root", saying why) and the rest by the simple schedule.
    Graph g = json_model(json::parse(R"({"format": "hfuse-model", "version": 1, "name": "sq",
      "inputs": [{"name": "x", "shape": [1, 24, 13, 11]}],
      "weights": {"w": {"shape": [20, 24, 1, 1], "uniform": [-0.3, 0.3], "seed": 1},
                  "b": {"shape": [20], "uniform": [-0.3, 0.3], "seed": 2},
                  "w1": {"shape": [12, 24, 1, 1], "uniform": [-0.3, 0.3], "seed": 3},
                  "w3": {"shape": [12, 24, 3, 3], "uniform": [-0.3, 0.3], "seed": 4}},
      "nodes": [{"name": "conv", "op": "Conv", "inputs": ["x", "w", "b"], "attrs": {"kernel_shape": [1, 1]}},
                {"name": "relu", "op": "Relu", "inputs": ["conv"]},
                {"name": "gap", "op": "GlobalAveragePool", "inputs": ["relu"]},
                {"name": "flat", "op": "Flatten", "inputs": ["gap"], "attrs": {"axis": 1}},
                {"name": "e1", "op": "Conv", "inputs": ["x", "w1"], "attrs": {"kernel_shape": [1, 1]}},
                {"name": "e3", "op": "Conv", "inputs": ["x", "w3"], "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}},
                {"name": "cat", "op": "Concat", "inputs": ["e1", "e3"], "attrs": {"axis": 1}}],
      "outputs": ["flat", "cat", "conv"]})"));
    FusedGraph plan = fused_plan_with_concats(g);
    int roots = 0;
    for (const FusedGroup &grp : plan.groups) {
        if (grp.schedule.value("compute", "") != "root") continue;
        roots++;
        // Pointwise masters (conv, e1; 11 wide) are flattened.
        const bool pointwise = grp.master == "conv" || grp.master == "e1";
        EXPECT_EQ(grp.schedule["template"], pointwise ? "conv_flat" : "conv_cv") << grp.name << " " << grp.master;
        EXPECT_FALSE(grp.schedule.value("why", "").empty()) << grp.name;  // the pool, the Concat, 2 outputs
    }
    EXPECT_EQ(roots, 2) << "the conv + pool tail and the Concat's group";
    expect_matches_reference(plan);
    // Where there is an epilogue to tile, root mode only on request; "compute" takes "root" alone.
    FusedGraph conv_relu = fused_plan(conv_model(16, 20, 24, 16, 3, 1, 1, 1));
    EXPECT_FALSE(conv_relu.groups[0].schedule.contains("compute"));
    conv_relu.groups[0].schedule["compute"] = "root";
    expect_matches_reference(conv_relu);
    conv_relu.groups[0].schedule["compute"] = "tile";
    EXPECT_THROW(Executor{conv_relu}, Error);
    // Root mode needs "compute": "root" (a plan written before it existed said "simple" instead).
    for (FusedGroup &grp : plan.groups) {
        if (grp.schedule.value("compute", "") == "root") grp.schedule.erase("compute");
    }
    try {
        Executor ex(plan);
        ADD_FAILURE() << "accepted a root-mode conv group without compute";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("schedule.compute"), std::string::npos) << e.what();
    }
}

TEST(Composer, GemmTemplatesMatchTheUnfusedRun) {
    // Odd M, N, K; every transposition; alpha and beta; a K below one vector.
    // B a weight (transB=1: packed [K, N]) and B computed (a model input, read as stored).
    for (const Graph &g : {gemm_model(3, 19, 37, false, true), gemm_model(3, 19, 37, true, false, "Tanh", 0.5, 2),
                           gemm_model(5, 40, 17, true, true), gemm_model(2, 5, 11, false, false),
                           gemm_model(3, 19, 37, false, true, "Relu", 1, 1, true),
                           gemm_model(5, 40, 17, true, true, "Tanh", 0.5, 2, true)}) {
        Expected e = expected_for(g);
        FusedGraph plan = fused_plan(g);
        ASSERT_EQ(plan.groups.size(), 1u);
        expect_matches(plan, g, e);
        const int64_t n = g.type_of("gemm").shape[1], m = g.type_of("gemm").shape[0];
        const int64_t k = g.type_of("a").shape[g.find_node("gemm")->attrs.value("transA", 0) ? 0 : 1];
        // Both variants on every layout, edited tiles, reduction splits and parallel splits.
        for (auto [vw, tx, ty, uk, tasks] : {std::tuple{8, 5, 1, 1, 1}, std::tuple{4, 1, 3, 3, 2},
                                             std::tuple{8, 8, 2, 2, 3}, std::tuple{4, 11, 1, 1, 1}}) {
            if (tx > n || ty > m || (uk - 1) * vw >= k) continue;
            plan.groups[0].schedule = {{"template", "gemm_dot"}, {"vector_width", vw}, {"tile_x", tx},
                                       {"tile_y", ty},           {"unroll_k", uk},     {"parallel_tasks", tasks},
                                       {"compute", "tile"}};
            expect_matches(plan, g, e);
            if (vw * (tx % 3 + 1) > n) continue;
            plan.groups[0].schedule = {{"template", "gemm_nv"},
                                       {"vector_width", vw},
                                       {"tile_x_vectors", tx % 3 + 1},
                                       {"tile_y", ty},
                                       {"unroll_k", uk},
                                       {"parallel_tasks", tasks},
                                       {"compute", tasks == 2 ? "root" : "tile"}};
            expect_matches(plan, g, e);
            // The reduction in blocks (one and a tail, or several), the product per panel of columns.
            plan.groups[0].schedule["k_block"] = tx % 2 ? k / 2 + 1 : 3;
            plan.groups[0].schedule["tile_order"] = "rows_inner";
            expect_matches(plan, g, e);
        }
    }
    // Blocked reductions with batch dims, rows not a multiple of the tile's, in parallel panels; and
    // the default: blocked where a panel of A and B fills a second-level cache (AVX2: 80 x 3072 floats).
    for (const Graph &g : {matmul_model({2, 7, 45}, {45, 21}), matmul_model({64, 3072}, {3072, 48})}) {
        Expected e = expected_for(g);
        FusedGraph plan = fused_plan(g);
        const bool large = g.type_of("a").shape.back() == 3072;
        EXPECT_EQ(plan.groups[0].schedule.contains("k_block"), large);
        if (!large) {
            plan.groups[0].schedule = {{"template", "gemm_nv"}, {"vector_width", 8}, {"tile_x_vectors", 1},
                                       {"tile_y", 3},           {"k_block", 8},      {"unroll_k", 1},
                                       {"parallel_tasks", 3},   {"compute", "tile"}};
        }
        expect_matches(plan, g, e);
    }
    // MatMul with batch dims (B broadcast over them), and with a vector B (x indexes A's rows).
    for (const Graph &g : {matmul_model({2, 3, 19}, {19, 21}), matmul_model({13, 19}, {19})}) {
        Expected e = expected_for(g);
        expect_matches(fused_plan(g), g, e);
    }
}

TEST(Composer, GemmCellsBecomeOneKernel) {
    // The RNN cell with both products in one group: computed per tile of h_next, gates inlined.
    Graph rnn = load_model(HFUSE_SOURCE_DIR "/models/rnn_cell.json");
    Expected e = expected_for(rnn);
    FusedGraph plan = one_group(rnn);
    EXPECT_EQ(plan.groups[0].schedule["template"], "gemm_nv");
    EXPECT_EQ(plan.groups[0].schedule["compute"], "tile");
    EXPECT_EQ(Executor(plan).num_groups(), 1);
    expect_matches(plan, rnn, e);
    // Both products' B packed in panels of the register tile's columns.
    const int tile_x =
        plan.groups[0].schedule["vector_width"].get<int>() * plan.groups[0].schedule["tile_x_vectors"].get<int>();
    const OpLowerings forms = compose::op_lowerings(plan.graph, plan.groups[0], kTarget);
    ASSERT_EQ(forms.gemm.size(), 2u);
    EXPECT_EQ(forms.gemm.at("xw").panel, tile_x);
    EXPECT_EQ(forms.gemm.at("hu").panel, tile_x);
    plan.groups[0].schedule["tile_x_vectors"] = 2;
    plan.groups[0].schedule["unroll_k"] = 2;
    expect_matches(plan, rnn, e);
    // Dot products on the packed B (strided along k) still compute the cell.
    plan.groups[0].schedule = {{"template", "gemm_dot"}, {"vector_width", 8},   {"tile_x", 16},     {"tile_y", 1},
                               {"unroll_k", 2},          {"parallel_tasks", 1}, {"compute", "tile"}};
    expect_matches(plan, rnn, e);
    // The LSTM cell in one group: both products at root, the gates and both outputs after them.
    Graph lstm = load_model(HFUSE_SOURCE_DIR "/models/lstm_cell.json");
    Expected le = expected_for(lstm);
    FusedGraph lplan = one_group(lstm);
    EXPECT_EQ(lplan.groups[0].schedule["compute"], "root");
    expect_matches(lplan, lstm, le);
    expect_matches(fused_plan(lstm), lstm, le);
}

TEST(Composer, PoolTemplateMatchesTheUnfusedRun) {
    // Overlapping and strided windows, pads, ceil_mode, count_include_pad, outputs narrower than a
    // vector, a 1-D pool.
    const json cases[] = {
        {{"shape", {1, 5, 17, 23}},
         {"op", "MaxPool"},
         {"attrs", {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}}}},
        {{"shape", {2, 3, 15, 13}},
         {"op", "AveragePool"},
         {"attrs",
          {{"kernel_shape", {2, 3}},
           {"strides", {2, 2}},
           {"pads", {0, 1, 1, 1}},
           {"ceil_mode", 1},
           {"count_include_pad", 1}}}},
        {{"shape", {1, 4, 9, 6}}, {"op", "MaxPool"}, {"attrs", {{"kernel_shape", {2, 2}}}}},
        {{"shape", {1, 4, 29}}, {"op", "AveragePool"}, {"attrs", {{"kernel_shape", {3}}, {"strides", {2}}}}},
    };
    for (const json &c : cases) {
        Graph g = unary_model(c["shape"].get<Shape>(), c["op"], c["attrs"]);
        Expected e = expected_for(g);
        FusedGraph plan = fused_plan(g);
        ASSERT_EQ(plan.groups[0].schedule["template"], "pool");
        expect_matches(plan, g, e);
        plan.groups[0].schedule["vector_width"] = 2;  // a tail on the odd rows (widths are powers of two)
        plan.groups[0].schedule["rows_per_task"] = 2;
        plan.groups[0].schedule["unroll_window"] = 0;
        expect_matches(plan, g, e);
        // Padded windows read their input computed per task by default; inlined, they test bounds.
        const bool padded = c["attrs"].contains("pads");
        EXPECT_EQ(plan.groups[0].schedule.contains("window_input"), padded) << c.dump();
        if (padded) {
            plan.groups[0].schedule["window_input"] = "inline";
            expect_matches(plan, g, e);
        }
    }
}

TEST(Composer, PoolWindowInputPerTaskMatchesTheUnfusedRun) {
    // A Pad inlined into a 3x3 AveragePool (Inception's branch pool) and a ReLU into a 3x3 MaxPool:
    // their window input per task, by tasks of bands of a plane's rows, of whole planes, and of planes
    // that do not divide the channels; batch 2, planes narrower than a vector and wider than one.
    const json pads = {{"shape", {8}}, {"dtype", "int64"}, {"values", {0, 0, 1, 1, 0, 0, 1, 1}}};
    for (const Shape &shape : {Shape{2, 7, 9, 11}, Shape{1, 5, 19, 37}}) {
        const int64_t plane_rows = shape[2];
        Graph avg = json_model(model_json(
            {{"x", shape}}, {{"pads", pads}},
            {{{"name", "pad"}, {"op", "Pad"}, {"inputs", {"x", "pads"}}},
             {{"name", "op"}, {"op", "AveragePool"}, {"inputs", {"pad"}}, {"attrs", {{"kernel_shape", {3, 3}}}}}},
            "op"));
        Graph max = json_model(model_json({{"x", shape}}, json::object(),
                                          {{{"name", "relu"}, {"op", "Relu"}, {"inputs", {"x"}}},
                                           {{"name", "op"},
                                            {"op", "MaxPool"},
                                            {"inputs", {"relu"}},
                                            {"attrs", {{"kernel_shape", {3, 3}}, {"pads", {1, 0, 1, 2}}}}}},
                                          "op"));
        // auto_pad SAME_UPPER: with a 2x2 stride-2 window over even planes no window reads outside (no
        // input to compute per task); with a 3x3 stride-1 window they do.
        const Shape even = {shape[0], shape[1], shape[2] + shape[2] % 2, shape[3] + shape[3] % 2};
        Graph same2 =
            unary_model(even, "MaxPool", {{"kernel_shape", {2, 2}}, {"strides", {2, 2}}, {"auto_pad", "SAME_UPPER"}});
        FusedGraph same2_plan = one_group(same2);
        EXPECT_FALSE(same2_plan.groups[0].schedule.contains("window_input")) << same2_plan.groups[0].schedule.dump();
        expect_matches(same2_plan, same2, expected_for(same2));
        Graph same3 = unary_model(shape, "AveragePool", {{"kernel_shape", {3, 3}}, {"auto_pad", "SAME_UPPER"}});
        FusedGraph same3_plan = one_group(same3);
        EXPECT_EQ(same3_plan.groups[0].schedule["window_input"], "task");
        expect_matches(same3_plan, same3, expected_for(same3));
        for (Graph *g : {&avg, &max}) {
            Expected e = expected_for(*g);
            FusedGraph plan = one_group(*g);
            ASSERT_EQ(plan.groups[0].schedule["template"], "pool");
            EXPECT_EQ(plan.groups[0].schedule["window_input"], "task");
            expect_matches(plan, *g, e);
            for (int64_t rows : {int64_t{2}, plane_rows, 2 * plane_rows, 3 * plane_rows}) {
                plan.groups[0].schedule["rows_per_task"] = rows;
                expect_matches(plan, *g, e);
            }
        }
    }
}

TEST(Composer, StrideOnePoolVectorsDivideTheirRowsOnAvx512) {
    // With AVX-512 a stride-1 pool's vectors are halved (not below 8) while they do not divide the row;
    // strided pools and AVX2 keep the target's lanes narrowed to the row.
    const Halide::Target avx512("x86-64-linux-avx-avx2-f16c-fma-sse41-avx512-avx512_skylake");
    const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41");
    auto lanes = [](int64_t width, int64_t strides, const Halide::Target &t) {
        schedules::PoolGroupShape s;
        s.output = {1, 288, 35, width};
        s.window_taps = 9;
        s.stride_product = strides;
        s.padded = true;
        s.window_input = true;
        return schedules::pool_default_params(s, t)["vector_width"].get<int>();
    };
    EXPECT_EQ(lanes(35, 1, avx512), 8);
    EXPECT_EQ(lanes(17, 1, avx512), 8);
    EXPECT_EQ(lanes(32, 1, avx512), 16);
    EXPECT_EQ(lanes(48, 1, avx512), 16);
    EXPECT_EQ(lanes(12, 1, avx512), 8);
    EXPECT_EQ(lanes(6, 1, avx512), 4);
    EXPECT_EQ(lanes(35, 4, avx512), 16);
    EXPECT_EQ(lanes(35, 1, avx2), 8);
    EXPECT_EQ(lanes(6, 1, avx2), 4);
}

TEST(Composer, ReductionTemplateMatchesTheUnfusedRun) {
    // Softmax on odd widths along the contiguous axis, along channels and along the outer axis;
    // global pools over odd planes.
    const json cases[] = {
        {{"shape", {3, 37}}, {"op", "Softmax"}, {"attrs", json::object()}},
        {{"shape", {2, 3, 5, 13}}, {"op", "Softmax"}, {"attrs", json::object()}},
        {{"shape", {2, 5, 3, 11}}, {"op", "Softmax"}, {"attrs", {{"axis", 1}}}},
        {{"shape", {7, 10}}, {"op", "Softmax"}, {"attrs", {{"axis", 0}}}},
        {{"shape", {29}}, {"op", "Softmax"}, {"attrs", json::object()}},
        {{"shape", {2, 5, 7, 9}}, {"op", "GlobalAveragePool"}, {"attrs", json::object()}},
        {{"shape", {1, 3, 5, 5}}, {"op", "GlobalMaxPool"}, {"attrs", json::object()}},
    };
    for (const json &c : cases) {
        Graph g = unary_model(c["shape"].get<Shape>(), c["op"], c["attrs"]);
        Expected e = expected_for(g);
        FusedGraph plan = fused_plan(g);
        ASSERT_EQ(plan.groups[0].schedule["template"], "reduction");
        expect_matches(plan, g, e);
        plan.groups[0].schedule["vector_width"] = 4;
        plan.groups[0].schedule["rows_per_task"] = 1;
        expect_matches(plan, g, e);
    }
}

TEST(Composer, PoolInsideAConvChain) {
    // conv -> relu -> pool -> sigmoid: the pool is computed per tile of the sigmoid.
    json attrs = {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}};
    Graph g = json_model(model_json({{"x", {1, 6, 13, 35}}}, {{"w", uniform({10, 6, 3, 3}, 1)}},
                                    {{{"name", "conv"}, {"op", "Conv"}, {"inputs", {"x", "w"}}, {"attrs", attrs}},
                                     {{"name", "relu"}, {"op", "Relu"}, {"inputs", {"conv"}}},
                                     {{"name", "pool"},
                                      {"op", "MaxPool"},
                                      {"inputs", {"relu"}},
                                      {"attrs", {{"kernel_shape", {2, 2}}, {"strides", {2, 2}}}}},
                                     {{"name", "act"}, {"op", "Sigmoid"}, {"inputs", {"pool"}}}},
                                    "act"));
    FusedGraph plan = one_group(g);
    // The pool's windows neither overlap nor pad: conv_cv's tasks compute the pool over their rows
    // (13 conv rows, 6 pooled: the last conv row is read by no window).
    EXPECT_EQ(plan.groups[0].schedule["template"], "conv_cv");
    EXPECT_FALSE(plan.groups[0].schedule.contains("compute"));
    const Expected e = expected_for(g);
    expect_matches(plan, g, e);
    const json cv = plan.groups[0].schedule;
    for (int rows : {1, 2, 6}) {
        for (int cb : {8, 10}) {
            plan.groups[0].schedule = cv;
            plan.groups[0].schedule["block_rows"] = rows;
            plan.groups[0].schedule["channel_block"] = cb;
            plan.groups[0].schedule["tile_c_vectors"] = 1;
            expect_matches(plan, g, e);
        }
    }
    plan.groups[0].schedule = cv;  // at root, the pool by its template
    plan.groups[0].schedule["compute"] = "root";
    expect_matches(plan, g, e);
    plan.groups[0].schedule = {{"template", "conv_xv"}, {"vector_width", 8}, {"tile_x_vectors", 1},
                               {"tile_y", 2},           {"tile_c", 6},       {"reduction_order", "kx,ci,ky"}};
    expect_matches(plan, g, e);
    // Padded and overlapping windows (2x2 and 3x3 stride 2, pads 1; a strided conv) in conv_cv's tile
    // too, when a plan asks: the windows at a task's edge reach into the next task's conv rows.
    for (const Graph &pg : {conv_model(8, 9, 10, 16, 3, 1, 1, 1, 2, 2), conv_model(8, 14, 13, 16, 3, 2, 1, 1, 3, 2)}) {
        FusedGraph pp = fused_plan(pg);
        EXPECT_EQ(pp.groups[0].schedule["compute"], "root");
        const Expected pe = expected_for(pg);
        for (int rows : {1, 3}) {
            pp.groups[0].schedule.erase("compute");
            pp.groups[0].schedule["block_rows"] = rows;
            expect_matches(pp, pg, pe);
        }
    }
    // A depthwise conv under a pool has no template: the simple schedule, saying why.
    Graph dw = conv_model(8, 12, 20, 8, 3, 1, 1, 8, 2, 2);
    FusedGraph dw_plan = fused_plan(dw);
    EXPECT_EQ(dw_plan.groups[0].schedule["template"], "simple");
    EXPECT_EQ(dw_plan.groups[0].schedule["why"], "depthwise + window");
    expect_matches(dw_plan, dw, expected_for(dw));
}

TEST(Composer, SimpleScheduleParametersAreHonoured) {
    Graph g = unary_model({1, 8, 33, 35}, "Sigmoid", {});
    Expected e = expected_for(g);
    FusedGraph plan = fused_plan(g);
    plan.groups[0].schedule = {
        {"template", "simple"}, {"vector_width", 4}, {"parallel_threshold", 0}, {"task_elements", 100}};
    expect_matches(plan, g, e);
    // "simple" forces the simple schedule on a group a template would take.
    Graph gemm = gemm_model(3, 19, 37, false, true);
    FusedGraph forced = fused_plan(gemm);
    forced.groups[0].schedule = {{"template", "simple"}};
    expect_matches(forced, gemm, expected_for(gemm));
}

TEST(Composer, BadTemplateParametersNameTheField) {
    auto expect_error = [](FusedGraph plan, const std::string &master, json params, const std::string &field) {
        group_of(plan, master).schedule = params;
        try {
            Executor ex(plan);
            ADD_FAILURE() << "accepted " << params.dump();
        } catch (const Error &e) {
            EXPECT_EQ(e.field(), field) << e.what();
            EXPECT_EQ(e.node(), master) << e.what();
        }
    };
    auto with = [](json p, const char *key, json value) {
        if (value.is_null()) {
            p.erase(key);
        } else {
            p[key] = value;
        }
        return p;
    };
    FusedGraph gemm = fused_plan(gemm_model(3, 19, 37, false, true));
    json d = gemm.groups[0].schedule;
    expect_error(gemm, "gemm", with(d, "tile_x", 0), "schedule.tile_x");
    expect_error(gemm, "gemm", with(d, "tile_x", 38), "schedule.tile_x");
    expect_error(gemm, "gemm", with(d, "tile_y", 4), "schedule.tile_y");
    expect_error(gemm, "gemm", with(d, "unroll_k", nullptr), "schedule.unroll_k");
    expect_error(gemm, "gemm", with(d, "vector_width", "8"), "schedule.vector_width");
    expect_error(gemm, "gemm", with(d, "tile_q", 3), "schedule.tile_q");
    expect_error(gemm, "gemm", with(with(with(d, "template", "gemm_nv"), "tile_x", nullptr), "tile_x_vectors", 9),
                 "schedule.tile_x_vectors");
    expect_error(gemm, "gemm", with(d, "compute", "here"), "schedule.compute");
    expect_error(gemm, "gemm", with(d, "template", "pool"), "schedule.template");
    expect_error(gemm, "gemm", with(d, "template", nullptr), "schedule.template");
    FusedGraph lstm = fused_plan(load_model(HFUSE_SOURCE_DIR "/models/lstm_cell.json"));
    expect_error(lstm, "xw", with(group_of(lstm, "xw").schedule, "compute", "tile"), "schedule.compute");
    FusedGraph pool = fused_plan(unary_model({1, 4, 9, 6}, "MaxPool", {{"kernel_shape", {2, 2}}}));
    expect_error(pool, "op", with(pool.groups[0].schedule, "vector_width", 8), "schedule.vector_width");
    expect_error(pool, "op", with(pool.groups[0].schedule, "rows_per_task", 0), "schedule.rows_per_task");
    expect_error(pool, "op", with(pool.groups[0].schedule, "template", "reduction"), "schedule.template");
    // Its windows read the group's input as it is: nothing to compute per task.
    expect_error(pool, "op", with(pool.groups[0].schedule, "window_input", "task"), "schedule.window_input");
    expect_error(pool, "op", with(pool.groups[0].schedule, "window_input", "here"), "schedule.window_input");
    FusedGraph softmax = fused_plan(unary_model({3, 37}, "Softmax", {}));
    expect_error(softmax, "op", with(softmax.groups[0].schedule, "rows_per_task", 4), "schedule.rows_per_task");
    FusedGraph ew = fused_plan(unary_model({3, 37}, "Sigmoid", {}));
    expect_error(ew, "op", with(ew.groups[0].schedule, "task_elements", 0), "schedule.task_elements");
    expect_error(ew, "op", with(ew.groups[0].schedule, "tile_x", 4), "schedule.tile_x");
    expect_error(ew, "op", with(ew.groups[0].schedule, "template", "gemm_dot"), "schedule.template");
    // conv_dw names the dimension its tile exceeds (the output is 16 channels x 14 x 14).
    FusedGraph dw = fused_plan(conv_model(16, 14, 14, 16, 3, 1, 1, 16));
    const json dwp = {{"template", "conv_dw"}, {"vector_width", 8}, {"tile_y", 1}, {"channel_block", 8}};
    expect_error(dw, "conv", with(dwp, "vector_width", 16), "schedule.vector_width");
    expect_error(dw, "conv", with(dwp, "tile_y", 15), "schedule.tile_y");
    expect_error(dw, "conv", with(dwp, "channel_block", 32), "schedule.channel_block");
    expect_error(dw, "conv", with(dwp, "tile_x_vectors", 2), "schedule.tile_x_vectors");  // 16 lanes
    expect_error(dw, "conv", with(dwp, "tile_x_vectors", 0), "schedule.tile_x_vectors");
    expect_error(dw, "conv", with(dwp, "deinterleave_x", 1), "schedule.deinterleave_x");
}

TEST(Composer, Avx512DefaultsDifferAndCompile) {
    const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41"), avx512("x86-64-linux-avx512_skylake");
    auto defaults = [](const Graph &g, const Halide::Target &t) {
        return with_default_schedules(plan_fusion(g, {load_rules("x86")}), t).groups[0].schedule;
    };
    Graph cell = gemm_model(1, 128, 128, false, true), rows = gemm_model(12, 64, 64, false, false);
    Graph dot_cell = gemm_model(1, 128, 128, false, true, "Relu", 1, 1, true);  // B computed: dot products
    // conv: 13 rows, direct (Winograd from 14: wino).
    Graph conv = conv_model(16, 13, 48, 128, 3, 1, 1, 1), wino = conv_model(16, 20, 48, 128, 3, 1, 1, 1),
          flat = conv_model(16, 12, 20, 24, 1, 1, 0, 1), xv = conv_model(16, 20, 48, 16, 3, 1, 1, 1, 0, 0, 1, true),
          pool = unary_model({1, 8, 33, 33}, "MaxPool", {{"kernel_shape", {2, 2}}});  // rows of 32
    Graph softmax = unary_model({4, 100}, "Softmax", {});
    EXPECT_EQ(defaults(cell, avx2)["vector_width"], 8);  // a row of 8 vectors either way
    EXPECT_EQ(defaults(cell, avx512)["vector_width"], 16);
    EXPECT_EQ(defaults(cell, avx512)["tile_x_vectors"], 8);
    EXPECT_EQ(defaults(dot_cell, avx2)["tile_x"], 8);
    EXPECT_EQ(defaults(dot_cell, avx512)["tile_x"], 16);
    EXPECT_EQ(defaults(rows, avx2)["tile_y"], 6);     // 6 rows x 2 vectors: 12 of 16 ymm
    EXPECT_EQ(defaults(rows, avx512)["tile_y"], 12);  // all 12 rows x 2 vectors (14 fit 32 zmm)
    // 2 x 4 reading its blocked copy: 8 + 2 + 4 of 16 ymm (3 x 3 would compute 18 vectors for 16).
    EXPECT_EQ(defaults(conv, avx2)["tile_c_vectors"], 4);
    EXPECT_EQ(defaults(conv, avx2)["tile_positions"], 2);
    EXPECT_EQ(defaults(conv, avx512)["tile_c_vectors"], 4);  // 5 positions x 4: 20 of 32 zmm
    EXPECT_EQ(defaults(conv, avx512)["tile_positions"], 5);
    EXPECT_EQ(defaults(conv, avx512)["vector_width"], 16);
    EXPECT_EQ(defaults(wino, avx2)["tile_positions"], 3);    // 3 4x4 tiles x 4: 12 + 4 + 1 of 16 ymm
    EXPECT_EQ(defaults(wino, avx512)["tile_positions"], 4);  // 4 x 4: 16 + 4 + 1 of 32 zmm
    EXPECT_EQ(defaults(wino, avx512)["algorithm"], "winograd");
    EXPECT_EQ(defaults(xv, avx2)["tile_c"], 4);
    EXPECT_EQ(defaults(xv, avx512)["tile_c"], 8);
    EXPECT_EQ(defaults(flat, avx2)["tile_c"], 6);
    EXPECT_EQ(defaults(flat, avx512)["tile_c"], 8);
    // MobileNet-V2's 192->32 at 28x28 on its position view: 2 x 6 of 16 ymm, 2 x 8 of 32 zmm.
    const Graph project = conv_model(192, 28, 28, 32, 1, 1, 0, 1);
    EXPECT_EQ(defaults(project, avx2)["template"], "conv_xv");
    EXPECT_EQ(defaults(project, avx2)["tile_c"], 6);
    EXPECT_EQ(defaults(project, avx512)["tile_c"], 8);
    EXPECT_EQ(defaults(flat, avx512)["template"], "conv_xv");  // on its position view (20 wide)
    EXPECT_EQ(defaults(flat, avx512)["flatten_positions"], true);
    EXPECT_EQ(defaults(pool, avx512)["vector_width"], 16);
    EXPECT_EQ(defaults(softmax, avx512)["vector_width"], 16);
    // Each template compiles for AVX-512 whatever the host (run where the host has it) and uses zmm registers.
    for (const Graph *g : {&cell, &dot_cell, &rows, &conv, &wino, &flat, &xv, &pool, &softmax}) {
        FusedGraph plan = with_default_schedules(plan_fusion(*g, {load_rules("x86")}), avx512);
        const FusedGroup &grp = plan.groups[0];
        const std::string text = compiled_group_text(plan, avx512, true);
        EXPECT_NE(text.find("zmm"), std::string::npos) << grp.schedule.dump();
    }
}

}  // namespace
}  // namespace hfuse
