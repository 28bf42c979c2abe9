// The position view (src/compose/position_view.h): which groups have one, the view's graph, groups
// lowered and composed on it computing what the reference computes (executor and whole-model
// pipeline, odd sizes, a batch, a residual, broadcast operands, groups before and after it), and plans
// asking for a view a group does not have refused naming the field and the node.
#include "compose/position_view.h"
#include "compose/composer.h"
#include "hfuse/composer.h"
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/model_io.h"
#include "hfuse/model_pipeline.h"
#include "hfuse/passes.h"
#include "hfuse/planner.h"

#include "test_util.h"

#include <gtest/gtest.h>
#include <algorithm>

namespace hfuse {
namespace {

using json = nlohmann::json;
using test::model_node;

// AVX2 defaults whatever the host (as composer_test.cpp): the plans still run on the host.
const Halide::Target kTarget("x86-64-linux-avx-avx2-f16c-fma-sse41");

Graph model(const std::vector<json> &inputs, const json &weights, const std::vector<json> &nodes,
            const std::vector<std::string> &outputs) {
    return prepare(parse_model({{"format", "hfuse-model"},
                                {"version", 1},
                                {"name", "pv"},
                                {"inputs", inputs},
                                {"weights", weights},
                                {"nodes", nodes},
                                {"outputs", outputs}},
                               ".", "position_view_test"));
}

json uniform(const std::vector<int64_t> &shape, int seed) {
    return {{"shape", shape}, {"uniform", {-0.5, 0.5}}, {"seed", seed}};
}

json conv(const std::string &name, const std::string &in, const std::string &w, json attrs = json::object()) {
    attrs["kernel_shape"] = attrs.value("kernel_shape", json{1, 1});
    return {{"name", name}, {"op", "Conv"}, {"inputs", {in, w, "b"}}, {"attrs", attrs}};
}

// x [N, 12, H, W] -> 1x1 conv 12->12 -> + x -> BatchNormalization -> * s [1, 12, 1, 1] -> Relu: a
// bottleneck's tail (the BatchNormalization after the Add, so that no pass folds it into the conv).
Graph residual_tail(int N, int H, int W) {
    const int C = 12;
    return model({{{"name", "x"}, {"shape", {N, C, H, W}}}},
                 {{"w", uniform({C, C, 1, 1}, 1)},
                  {"b", uniform({C}, 2)},
                  {"bn.scale", uniform({C}, 3)},
                  {"bn.bias", uniform({C}, 4)},
                  {"bn.mean", uniform({C}, 5)},
                  {"bn.var", {{"shape", {C}}, {"uniform", {0.5, 1.5}}, {"seed", 6}}},
                  {"s", uniform({1, C, 1, 1}, 7)}},
                 {conv("conv", "x", "w"), model_node("add", "Add", {"conv", "x"}),
                  model_node("bn", "BatchNormalization", {"add", "bn.scale", "bn.bias", "bn.mean", "bn.var"}),
                  model_node("mul", "Mul", {"bn", "s"}), model_node("relu", "Relu", {"mul"})},
                 {"relu"});
}

FusedGraph fused_plan(const Graph &g) {
    return with_default_schedules(plan_fusion(g, {load_rules("x86")}), kTarget);
}

FusedGroup &group_of(FusedGraph &plan, const std::string &master) {
    for (FusedGroup &grp : plan.groups) {
        if (grp.master == master) return grp;
    }
    throw Error("no group led by " + master);
}

// The executor and one whole-model pipeline run `plan`; every output within 1e-4 of the reference.
void expect_matches_reference(const FusedGraph &plan) {
    SCOPED_TRACE(plan_to_json(plan).dump());
    test::expect_plan_matches_reference(plan, 1e-4);
    test::expect_pipeline_matches_reference(plan, 1e-4);
}

TEST(PositionView, ViewGraphHasThePlaneAsOneRow) {
    const Graph g = residual_tail(2, 7, 13);
    FusedGraph plan = fused_plan(g);
    const FusedGroup &grp = group_of(plan, "conv");
    ASSERT_EQ(grp.nodes, (std::vector<std::string>{"conv", "add", "bn", "mul", "relu"}));
    EXPECT_EQ(compose::position_view_blocker(g, grp), "");
    const Graph view = compose::position_view(g, grp);
    EXPECT_EQ(view.nodes.size(), 5u);
    EXPECT_EQ(view.type_of("x").shape, (Shape{2, 12, 1, 91}));
    EXPECT_EQ(view.type_of("relu").shape, (Shape{2, 12, 1, 91}));
    EXPECT_EQ(view.type_of("w").shape, (Shape{12, 12, 1, 1}));  // the kernel's dims are no plane
    EXPECT_EQ(view.type_of("s").shape, (Shape{1, 12, 1, 1}));
    EXPECT_EQ(view.weights.at("s").type.shape, (Shape{1, 12, 1, 1}));
    ASSERT_EQ(view.inputs.size(), 1u);
    EXPECT_EQ(view.inputs[0].name, "x");
    EXPECT_EQ(view.inputs[0].shape, (Shape{2, 12, 1, 91}));
    EXPECT_EQ(view.outputs, (std::vector<std::string>{"relu"}));
    EXPECT_EQ(view.source, g.source);
    EXPECT_EQ(compose::as_position_row({4, 7, 13}, {7, 13}), (Shape{4, 1, 91}));
    EXPECT_EQ(compose::as_position_row({7, 12}, {7, 13}), (Shape{7, 12}));
}

TEST(PositionView, GroupsOnTheViewMatchTheReference) {
    // 13 and 9 wide (1.6 and 1.1 vectors), a batch of 2, a residual, a per-channel and a broadcast
    // operand; the defaults, then conv_xv's tiles and conv_flat on the view, any vector width.
    int ran = 0;
    for (const Graph &g : {residual_tail(2, 7, 13), residual_tail(1, 10, 9)}) {
        FusedGraph plan = fused_plan(g);
        FusedGroup &grp = group_of(plan, "conv");
        EXPECT_EQ(grp.schedule["template"], "conv_xv") << grp.schedule.dump();
        EXPECT_EQ(grp.schedule["flatten_positions"], true);
        EXPECT_EQ(grp.schedule["tile_y"], 1);
        expect_matches_reference(plan);
        for (auto [vw, nx, nc] : {std::tuple{8, 2, 6}, std::tuple{8, 1, 5}, std::tuple{4, 3, 4}, std::tuple{8, 3, 12},
                                  std::tuple{16, 1, 1}}) {
            for (const char *loop : {"outer", "inner"}) {
                grp.schedule = {{"template", "conv_xv"},
                                {"flatten_positions", true},
                                {"vector_width", vw},
                                {"tile_x_vectors", nx},
                                {"tile_y", 1},
                                {"tile_c", nc},
                                {"reduction_order", "ci,kx,ky"},
                                {"channel_loop", loop}};
                if (ran % 3) grp.schedule["row_tasks"] = 1 + ran % 3;  // the row in 1-3 parallel tasks
                expect_matches_reference(plan);
                ran++;
            }
        }
        grp.schedule = {{"template", "conv_flat"},
                        {"flatten_positions", true},
                        {"vector_width", 8},
                        {"tile_x_vectors", 2},
                        {"tile_c", 6},
                        {"block_rows", 1},
                        {"channel_block", 6}};
        expect_matches_reference(plan);
        // Off again: conv_flat over (x, y), in blocks of 2 rows.
        grp.schedule["flatten_positions"] = false;
        grp.schedule["block_rows"] = 2;
        expect_matches_reference(plan);
    }
    EXPECT_EQ(ran, 20);
}

TEST(PositionView, ViewedGroupBetweenOthers) {
    // A Sigmoid's group before (read as a row), a pool's group after (reading a plane), each image's
    // planes 11 x 6; singleton groups, and the conv with its Relu.
    const Graph g =
        model({{{"name", "x"}, {"shape", {3, 5, 11, 6}}}}, {{"w", uniform({9, 5, 1, 1}, 1)}, {"b", uniform({9}, 2)}},
              {model_node("pre", "Sigmoid", {"x"}),
               conv("conv", "pre", "w"),
               model_node("relu", "Relu", {"conv"}),
               {{"name", "pool"},
                {"op", "MaxPool"},
                {"inputs", {"relu"}},
                {"attrs", {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}}}}},
              {"pool"});
    for (bool singletons : {true, false}) {
        FusedGraph plan = singletons ? with_default_schedules(singleton_groups(g), kTarget) : fused_plan(g);
        FusedGroup &grp = group_of(plan, "conv");
        if (!compose::position_view_blocker(g, grp).empty()) {
            EXPECT_FALSE(singletons) << "the conv alone has a view";
            continue;  // the pool in the conv's group (RefusesGroupsWithoutOne)
        }
        grp.schedule = {{"template", "conv_xv"}, {"flatten_positions", true},
                        {"vector_width", 8},     {"tile_x_vectors", 2},
                        {"tile_y", 1},           {"tile_c", 4}};
        expect_matches_reference(plan);
    }
}

TEST(PositionView, PipelineReturnsTheRowInTheCallersBuffer) {
    // A whole-model pipeline returns a viewed group's output as its row, the caller's buffer reshaped
    // (ModelArgument::stored_shape), once: returned a second time it is a copy, and a later group (the
    // Sigmoid's, singleton groups) reads its plane. 2 images of 5 x 7 planes.
    const Graph g =
        model({{{"name", "x"}, {"shape", {2, 6, 5, 7}}}}, {{"w", uniform({10, 6, 1, 1}, 1)}, {"b", uniform({10}, 2)}},
              {conv("conv", "x", "w"), model_node("post", "Sigmoid", {"conv"})}, {"conv", "post", "conv"});
    FusedGraph plan = with_default_schedules(singleton_groups(g), kTarget);
    group_of(plan, "conv").schedule = {{"template", "conv_xv"}, {"flatten_positions", true},
                                       {"vector_width", 8},     {"tile_x_vectors", 2},
                                       {"tile_y", 1},           {"tile_c", 4}};
    ModelPipeline mp(plan);
    std::vector<Shape> stored;
    for (const ModelArgument &a : mp.arguments()) stored.push_back(a.stored_shape);
    EXPECT_EQ(stored, (std::vector<Shape>{{2, 6, 5, 7}, {2, 10, 1, 35}, {2, 10, 5, 7}, {2, 10, 5, 7}}));
    test::ModelInputs in = test::make_inputs(g);
    test::expect_outputs_match_reference(g, in, mp.run(in.buffers), 1e-4);
}

// Expects the executor to refuse `plan` naming `field`, node `node` and saying `why`.
void expect_refused(const FusedGraph &plan, const std::string &node, const std::string &why,
                    const std::string &field = "schedule.flatten_positions") {
    try {
        Executor ex(plan);
        ADD_FAILURE() << "accepted " << plan_to_json(plan).dump();
    } catch (const Error &e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(field), std::string::npos) << what;
        EXPECT_NE(what.find("node '" + node + "'"), std::string::npos) << what;
        EXPECT_NE(what.find(why), std::string::npos) << what;
    }
}

TEST(PositionView, RefusesGroupsWithoutOne) {
    const std::vector<json> x = {{{"name", "x"}, {"shape", {1, 4, 6, 10}}}};
    const json w1 = {{"w", uniform({4, 4, 1, 1}, 1)}, {"b", uniform({4}, 2)}};
    const json w3 = {{"w", uniform({4, 4, 3, 3}, 1)}, {"b", uniform({4}, 2)}};
    struct Case {
        Graph g;
        std::string why;
    };
    const std::vector<Case> cases = {
        {model(x, w3, {conv("conv", "x", "w", {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}})}, {"conv"}),
         "'conv' (Conv) is no 1x1, stride-1, unpadded conv"},
        {model(x, w1, {conv("conv", "x", "w", {{"strides", {2, 2}}})}, {"conv"}), "'conv' (Conv) is no 1x1"},
        {model(x, w1, {conv("conv", "x", "w", {{"pads", {1, 0, 1, 0}}})}, {"conv"}), "'conv' (Conv) is no 1x1"},
        // Numpy broadcasting of a [10] operand runs along the rows: the row would change it.
        {model(x, {{"w", uniform({4, 4, 1, 1}, 1)}, {"b", uniform({4}, 2)}, {"r", uniform({10}, 3)}},
               {conv("conv", "x", "w"), model_node("add", "Add", {"conv", "r"})}, {"add"}),
         "'add' (Add) broadcasts 'r' [10]"},
        {model(x, {{"w", uniform({4, 4, 1, 1}, 1)}, {"b", uniform({4}, 2)}, {"p", uniform({1, 4, 6, 10}, 3)}},
               {conv("conv", "x", "w"), model_node("add", "Add", {"conv", "p"})}, {"add"}),
         "'add' (Add) reads 'p', a constant over the plane"},
    };
    for (const Case &c : cases) {
        FusedGraph plan = fused_plan(c.g);
        ASSERT_EQ(plan.groups.size(), 1u);
        EXPECT_NE(compose::position_view_blocker(c.g, plan.groups[0]).find(c.why), std::string::npos) << c.why;
        EXPECT_FALSE(plan.groups[0].schedule.value("flatten_positions", false)) << plan.groups[0].schedule.dump();
        plan.groups[0].schedule["flatten_positions"] = true;
        expect_refused(plan, "conv", c.why);
    }
    FusedGraph plan = fused_plan(residual_tail(1, 4, 10));
    group_of(plan, "conv").schedule["flatten_positions"] = "yes";
    expect_refused(plan, "conv", "expected true or false");
}

TEST(PositionView, DefaultsByTheInputsSize) {
    // On the view of a 1x1 conv: channel tiles outside the row's tiles (the input read once per
    // channel tile from L2), the channel tiles the tasks, while the input is at most 256 KB on AVX2
    // (512 KB with AVX-512); above, channel tiles inside the row's tiles, the row's 49 tiles in 10
    // tasks (asking for 8 would make 7).
    auto pointwise = [](int C, int K, int HW) {
        return model({{{"name", "x"}, {"shape", {1, C, HW, HW}}}},
                     {{"w", uniform({K, C, 1, 1}, 1)}, {"b", uniform({K}, 2)}},
                     {conv("conv", "x", "w"), model_node("relu", "Relu", {"conv"})}, {"relu"});
    };
    const Graph quarter = pointwise(64, 256, 28);  // 196 KB
    const json outside = fused_plan(quarter).groups[0].schedule;
    EXPECT_EQ(outside["flatten_positions"], true) << outside.dump();
    EXPECT_EQ(outside["channel_loop"], "outer");
    EXPECT_FALSE(outside.contains("row_tasks"));
    expect_matches_reference(fused_plan(quarter));
    const Graph small = pointwise(128, 256, 28);  // 392 KB
    const json row = fused_plan(small).groups[0].schedule;
    EXPECT_EQ(row["flatten_positions"], true) << row.dump();
    EXPECT_EQ(row["channel_loop"], "inner");
    EXPECT_EQ(row["row_tasks"], 10);
    expect_matches_reference(fused_plan(small));
    const Halide::Target avx512("x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41");
    const json wide = with_default_schedules(plan_fusion(small, {load_rules("x86")}), avx512).groups[0].schedule;
    EXPECT_EQ(wide["flatten_positions"], true) << wide.dump();
    EXPECT_EQ(wide["channel_loop"], "outer");
    EXPECT_FALSE(wide.contains("row_tasks"));
    // As MobileNet-V2's project conv, 144->24, at 52x52 (6.5 vectors a row): 1.5 MB of input. On AVX2
    // on its view too, the channel tiles inside, the row in 8 tasks (conv_flat's tiles lost to the
    // view there at every size measured); with AVX-512 conv_flat stays (no faster on the view there,
    // measured at 56x56).
    const Graph large = pointwise(144, 24, 52);
    FusedGraph plan = fused_plan(large);
    const json on_view = plan.groups[0].schedule;
    EXPECT_EQ(on_view["template"], "conv_xv") << on_view.dump();
    EXPECT_EQ(on_view["flatten_positions"], true);
    EXPECT_EQ(on_view["channel_loop"], "inner");
    EXPECT_EQ(on_view["row_tasks"], 8);
    expect_matches_reference(plan);
    const json flat = with_default_schedules(plan_fusion(large, {load_rules("x86")}), avx512).groups[0].schedule;
    EXPECT_EQ(flat["template"], "conv_flat") << flat.dump();
    EXPECT_FALSE(flat.contains("flatten_positions"));
    // row_tasks: at most the row's tiles (2704 positions, 2 vectors of 8 a tile: 169).
    plan.groups[0].schedule["row_tasks"] = 170;
    expect_refused(plan, "conv", "", "schedule.row_tasks");
}

TEST(PositionView, DefaultsSplitAnotherGroupsValueByPositions) {
    // The same 1x1 64->256 at 28x28 as DefaultsByTheInputsSize's "quarter", reading a value a conv of
    // another group made rather than the model's input: on AVX2 and AVX-512 alike the channel tiles
    // inside the row's tiles, the row in 4 tasks (whole blocks of positions: each core reads the
    // positions it computed in the group before, as that group split its rows).
    const Graph g = model({{{"name", "x"}, {"shape", {1, 8, 28, 28}}}},
                          {{"w0", uniform({64, 8, 3, 3}, 1)},
                           {"b0", uniform({64}, 2)},
                           {"w", uniform({256, 64, 1, 1}, 3)},
                           {"b", uniform({256}, 4)}},
                          {{{"name", "pre"},
                            {"op", "Conv"},
                            {"inputs", {"x", "w0", "b0"}},
                            {"attrs", {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}}}},
                           model_node("pre_relu", "Relu", {"pre"}),
                           conv("conv", "pre_relu", "w"),
                           model_node("relu", "Relu", {"conv"})},
                          {"relu"});
    const Halide::Target avx512("x86-64-linux-avx-avx2-avx512-avx512_skylake-f16c-fma-sse41");
    for (const Halide::Target &target : {kTarget, avx512}) {
        FusedGraph plan = with_default_schedules(plan_fusion(g, {load_rules("x86")}), target);
        const FusedGroup &grp = group_of(plan, "conv");
        ASSERT_EQ(std::count(grp.nodes.begin(), grp.nodes.end(), "pre"), 0) << plan_to_json(plan).dump();
        EXPECT_EQ(grp.schedule["flatten_positions"], true) << grp.schedule.dump();
        EXPECT_EQ(grp.schedule["channel_loop"], "inner") << grp.schedule.dump();
        EXPECT_EQ(grp.schedule["row_tasks"], 4) << grp.schedule.dump();
        if (target == kTarget) expect_matches_reference(plan);
    }
}

TEST(PositionView, ReshapedBuffersShareTheData) {
    TensorBuffer b(5, 3, 2, 1);  // W, H, C, N
    for (int i = 0; i < 30; i++) b.data()[i] = static_cast<float>(i);
    TensorBuffer row = compose::reshaped(b, {1, 2, 1, 15});
    ASSERT_EQ(row.dimensions(), 4);
    EXPECT_EQ(row.dim(0).extent(), 15);
    EXPECT_EQ(row.dim(1).extent(), 1);
    EXPECT_EQ(row.dim(2).stride(), 15);
    EXPECT_EQ(row.data(), b.data());
    EXPECT_EQ(row(7, 0, 1, 0), b(2, 1, 1, 0));
    EXPECT_THROW(compose::reshaped(b, {1, 2, 1, 14}), Error);
    TensorBuffer strided = b.copy();
    strided.crop(0, 1, 3);
    EXPECT_THROW(compose::reshaped(strided, {1, 2, 1, 9}), Error);
    // Dims that do not line up with the buffer's: 5 x 6 elements as 3 x 10 (the same count).
    EXPECT_THROW(compose::reshaped(b, {1, 1, 10, 3}), Error);
    // Planes further apart than their size (a paged value's): rows merge, channels keep their stride.
    std::vector<float> paged(2 * 64 + 15);
    halide_dimension_t dims[] = {{0, 5, 1}, {0, 3, 5}, {0, 2, 64}, {0, 1, 128}};
    TensorBuffer planes(paged.data(), 4, dims);
    planes(4, 2, 1, 0) = 7.0f;
    TensorBuffer rows = compose::reshaped(planes, {1, 2, 1, 15});
    EXPECT_EQ(rows.dim(0).stride(), 1);
    EXPECT_EQ(rows.dim(2).stride(), 64);
    EXPECT_EQ(rows.dim(2).extent(), 2);
    EXPECT_EQ(rows(14, 0, 1, 0), 7.0f);
    EXPECT_THROW(compose::reshaped(planes, {1, 1, 1, 30}), Error);  // across the gap between planes
}

}  // namespace
}  // namespace hfuse
