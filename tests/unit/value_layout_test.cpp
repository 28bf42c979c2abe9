// Values passed between groups channel-blocked with a zero halo, or paged planar (exec/value_layout.h):
// which values choose_value_layouts() stores so, the storage's geometry, and that the executor computes what the
// reference does with them (odd sizes, batch 2, strides, dilation, residual epilogues) and exactly
// what it computes with every value dense, as a whole-model pipeline (ModelPipeline) does with them
// handed blocked without a halo.
#include "exec/value_layout.h"
#include "hfuse/composer.h"
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/model_io.h"
#include "hfuse/model_pipeline.h"
#include "hfuse/passes.h"
#include "hfuse/planner.h"
#include "hfuse/reference.h"

#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>

namespace hfuse {
namespace {

using nlohmann::json;
using test::kJitTarget;
using test::model_node;

json conv(const std::string &name, const std::string &in, const std::string &w, const json &attrs) {
    return {{"name", name}, {"op", "Conv"}, {"inputs", {in, w}}, {"attrs", attrs}};
}
json weight(const Shape &shape, int seed) {
    return {{"shape", shape}, {"uniform", {-0.3, 0.3}}, {"seed", seed}};
}

// Two residual stages on `c` channels (batch 2, 13x11): v0 and v2 read by a padded 3x3 and by a
// residual Add; v2 also by a stride-2 3x3 and a 1x1 stride-2 downsample; v3 by a dilated 3x3 (pads
// 2), whose output c4 the downsample's group adds (the planner makes the downsample its master);
// v4 by a 1x1 stride-2 conv before a global pool; v1 returned.
Graph two_stages(int c) {
    const json p1 = {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}};
    const json nodes = json::array(
        {conv("c0", "x", "w0", p1), model_node("v0", "Relu", {"c0"}), conv("c1", "v0", "w1", p1),
         model_node("v1", "Relu", {"c1"}), conv("c2", "v1", "w2", p1), model_node("a2", "Add", {"c2", "v0"}),
         model_node("v2", "Relu", {"a2"}),
         conv("c3", "v2", "w3", {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}, {"strides", {2, 2}}}),
         model_node("v3", "Relu", {"c3"}), conv("ds", "v2", "wd", {{"kernel_shape", {1, 1}}, {"strides", {2, 2}}}),
         conv("c4", "v3", "w4", {{"kernel_shape", {3, 3}}, {"pads", {2, 2, 2, 2}}, {"dilations", {2, 2}}}),
         model_node("a4", "Add", {"c4", "ds"}), model_node("v4", "Relu", {"a4"}),
         conv("c5", "v4", "w5", {{"kernel_shape", {1, 1}}, {"strides", {2, 2}}}),
         model_node("gap", "GlobalAveragePool", {"c5"})});
    const json m = {{"format", "hfuse-model"},
                    {"version", 1},
                    {"name", "two_stages"},
                    {"inputs", {{{"name", "x"}, {"shape", {2, c, 13, 11}}}}},
                    {"weights",
                     {{"w0", weight({c, c, 3, 3}, 1)},
                      {"w1", weight({c, c, 3, 3}, 2)},
                      {"w2", weight({c, c, 3, 3}, 3)},
                      {"w3", weight({2 * c, c, 3, 3}, 4)},
                      {"wd", weight({2 * c, c, 1, 1}, 5)},
                      {"w4", weight({2 * c, 2 * c, 3, 3}, 6)},
                      {"w5", weight({2 * c, 2 * c, 1, 1}, 7)}}},
                    {"nodes", nodes},
                    {"outputs", {"gap", "v1"}}};
    return prepare(parse_model(m, ".", "two_stages.json"));
}

// Two conv + ReLU + 2x2 max-pool stages, as VGG's (batch 2, 13x11 -> 6x5 -> 3x2): the first pool's
// output read by the second conv (pads 1), the second returned.
Graph pooled_stages() {
    const json p1 = {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}};
    const json pool = {{"kernel_shape", {2, 2}}, {"strides", {2, 2}}};
    json nodes = json::array({conv("c0", "x", "w0", p1), model_node("r0", "Relu", {"c0"}),
                              model_node("p0", "MaxPool", {"r0"}), conv("c1", "p0", "w1", p1),
                              model_node("r1", "Relu", {"c1"}), model_node("p1", "MaxPool", {"r1"})});
    nodes[2]["attrs"] = pool;
    nodes[5]["attrs"] = pool;
    const json m = {{"format", "hfuse-model"},
                    {"version", 1},
                    {"name", "pooled_stages"},
                    {"inputs", {{{"name", "x"}, {"shape", {2, 16, 13, 11}}}}},
                    {"weights", {{"w0", weight({16, 16, 3, 3}, 1)}, {"w1", weight({24, 16, 3, 3}, 2)}}},
                    {"nodes", nodes},
                    {"outputs", {"p1"}}};
    return prepare(parse_model(m, ".", "pooled_stages.json"));
}

// An inverted residual block (MobileNet-V2's): 1x1 expand c -> 3c + ReLU6, 3x3 depthwise + ReLU6, 1x1
// project 3c -> c, + the input; the planner fuses the expand into the depthwise group, whose tasks
// split each image's rows into two bands (the default for one image of 14 rows or more).
Graph inverted_residual(int n, int c, int h, int w) {
    const json nodes = json::array(
        {conv("expand", "x", "we", {{"kernel_shape", {1, 1}}}), model_node("r0", "Clip", {"expand", "lo", "hi"}),
         conv("dw", "r0", "wd", {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}, {"group", 3 * c}}),
         model_node("r1", "Clip", {"dw", "lo", "hi"}), conv("project", "r1", "wp", {{"kernel_shape", {1, 1}}}),
         model_node("y", "Add", {"project", "x"})});
    const json m = {{"format", "hfuse-model"},
                    {"version", 1},
                    {"name", "inverted_residual"},
                    {"inputs", {{{"name", "x"}, {"shape", {n, c, h, w}}}}},
                    {"weights",
                     {{"we", weight({3 * c, c, 1, 1}, 1)},
                      {"wd", weight({3 * c, 1, 3, 3}, 2)},
                      {"wp", weight({c, 3 * c, 1, 1}, 3)},
                      {"lo", {{"shape", json::array()}, {"values", {0.0}}}},
                      {"hi", {{"shape", json::array()}, {"values", {6.0}}}}}},
                    {"nodes", nodes},
                    {"outputs", {"y"}}};
    return prepare(parse_model(m, ".", "inverted_residual.json"));
}

FusedGraph default_plan(const Graph &g) {
    return with_default_schedules(plan_fusion(simplify(g), {load_rules("x86")}), kJitTarget);
}

// The group holding `node`.
FusedGroup &producer(FusedGraph &plan, const std::string &node) {
    for (FusedGroup &grp : plan.groups) {
        if (std::find(grp.nodes.begin(), grp.nodes.end(), node) != grp.nodes.end()) return grp;
    }
    throw std::runtime_error("no group holds " + node);
}

// Runs `plan` with and without blocked values, and as one whole-model pipeline (the same values
// blocked, with no halo: its padded readers copy them): all match the reference, and each other exactly
// (the same arithmetic in the same order, only the storage differs).
void expect_layouts_compute_the_same(const Graph &g, const FusedGraph &plan, size_t blocked) {
    test::ModelInputs in = test::make_inputs(g);
    Executor ex(plan);
    EXPECT_EQ(ex.value_layouts().size(), blocked);
    ModelPipeline whole(plan, {kJitTarget});
    const std::map<std::string, std::string> handed = whole.value_layouts();
    ASSERT_EQ(handed.size(), blocked);
    for (const auto &[value, layout] : ex.value_layouts()) {
        const std::string block = layout.substr(0, layout.find(','));
        EXPECT_EQ(handed.at(value), block + ", halo 0x0") << value;
    }
    ExecutorOptions dense;
    dense.blocked_layouts = false;
    Executor planar(plan, dense);
    EXPECT_TRUE(planar.value_layouts().empty());
    for (int run = 0; run < 2; run++) {  // the second run reuses the storage: halos still zero
        auto a = ex.run(in.buffers), b = planar.run(in.buffers), c = whole.run(in.buffers);
        auto expected = reference::run(g, in.reference);
        for (const std::string &out : g.outputs) {
            const TensorBuffer &x = a.at(out), &y = b.at(out), &z = c.at(out);
            ASSERT_EQ(shape_of(x), shape_of(y));
            ASSERT_EQ(shape_of(x), shape_of(z));
            EXPECT_EQ(0, std::memcmp(x.data(), y.data(), x.size_in_bytes())) << out;
            EXPECT_EQ(0, std::memcmp(x.data(), z.data(), x.size_in_bytes())) << out << " (whole-model pipeline)";
            auto cmp = reference::compare(x.data(), expected.at(out).data.data(), expected.at(out).data.size());
            EXPECT_LE(cmp.relative(), 1e-4) << out;
        }
    }
}

TEST(ValueLayout, ChoosesBlockedWhereEveryReaderTakesIt) {
    const Graph g = two_stages(16);
    FusedGraph plan = default_plan(g);
    for (const FusedGroup &grp : plan.groups) {
        if (grp.master != "gap") EXPECT_EQ(grp.schedule["template"], "conv_cv") << grp.master;
    }
    const exec::ValueLayouts l = exec::choose_value_layouts(plan, kJitTarget);
    const int vw = kJitTarget.natural_vector_size<float>();
    const int b = 8;  // the padded readers' input_block
    // v1 is returned; c4 read by an epilogue alone, v4 by an unpadded conv: in vectors of the producer.
    const exec::ValueLayouts want = {{"v0", {b, 1, 1}},
                                     {"v2", {b, 1, 1}},  // 1x1 stride 2: no reach; the stride-2 3x3: 1
                                     {"v3", {b, 2, 2}},  // dilation 2
                                     {"c4", {vw, 0, 0}},
                                     {"v4", {vw, 0, 0}}};
    if (vw == 8) {
        EXPECT_EQ(l, want);
    }
    EXPECT_EQ(exec::to_string(exec::ValueLayout{8, 2, 1}), "blocked 8, halo 2x1");
    expect_layouts_compute_the_same(g, plan, l.size());
    Executor ex(plan);
    EXPECT_EQ(ex.value_layouts().at("v3"), "blocked 8, halo 2x2");

    // A padded reader asking for a planar input keeps its input planar; the other values stay blocked.
    producer(plan, "c1").schedule["input_block"] = 0;
    const exec::ValueLayouts fewer = exec::choose_value_layouts(plan, kJitTarget);
    EXPECT_FALSE(fewer.count("v0"));
    EXPECT_TRUE(fewer.count("v2"));
    expect_layouts_compute_the_same(g, plan, fewer.size());
    // The block follows its conv reader; readers disagreeing on it: planar.
    producer(plan, "c1").schedule["input_block"] = 4;
    producer(plan, "ds").schedule["input_block"] = 4;
    const exec::ValueLayouts by4 = exec::choose_value_layouts(plan, kJitTarget);
    EXPECT_EQ(by4.at("v0"), (exec::ValueLayout{4, 1, 1}));
    EXPECT_FALSE(by4.count("v2"));
    expect_layouts_compute_the_same(g, plan, by4.size());
    // A producer whose channel tasks split a block: planar.
    producer(plan, "c1").schedule["input_block"] = 8;
    producer(plan, "c0").schedule["channel_block"] = 12;
    producer(plan, "c0").schedule["tile_c_vectors"] = 1;
    EXPECT_FALSE(exec::choose_value_layouts(plan, kJitTarget).count("v0"));
    expect_layouts_compute_the_same(g, plan, exec::choose_value_layouts(plan, kJitTarget).size());
}

TEST(ValueLayout, GroupedConvsReadAndWriteBlocks) {
    // Grouped convs by conv_cv (RegNet-like, batch 2, odd sizes) read their input blocked in place and
    // hand their output on blocked: a 3x3 in 2 groups, a stride-2 3x3 in 4, then a 1x1 over all.
    const json p1 = {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}};
    const json nodes = json::array(
        {conv("c0", "x", "w0", p1), model_node("v0", "Relu", {"c0"}),
         conv("c1", "v0", "w1", {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}, {"group", 2}}),
         model_node("v1", "Relu", {"c1"}),
         conv("c2", "v1", "w2", {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}, {"strides", {2, 2}}, {"group", 4}}),
         model_node("v2", "Relu", {"c2"}), conv("c3", "v2", "w3", {{"kernel_shape", {1, 1}}})});
    const json m = {{"format", "hfuse-model"},
                    {"version", 1},
                    {"name", "grouped"},
                    {"inputs", {{{"name", "x"}, {"shape", {2, 16, 11, 13}}}}},
                    {"weights",
                     {{"w0", weight({32, 16, 3, 3}, 1)},
                      {"w1", weight({32, 16, 3, 3}, 2)},
                      {"w2", weight({32, 8, 3, 3}, 3)},
                      {"w3", weight({16, 32, 1, 1}, 4)}}},
                    {"nodes", nodes},
                    {"outputs", {"c3"}}};
    const Graph g = prepare(parse_model(m, ".", "grouped.json"));
    FusedGraph plan = default_plan(g);
    for (const auto &[node, span] : {std::pair{"c1", 16}, std::pair{"c2", 8}}) {
        producer(plan, node).schedule = {{"template", "conv_cv"}, {"vector_width", 8}, {"tile_positions", 4},
                                         {"tile_c_vectors", 1},   {"block_rows", 2},   {"channel_block", 8},
                                         {"ci_block", span},      {"input_block", 8}};
    }
    const exec::ValueLayouts l = exec::choose_value_layouts(plan, kJitTarget);
    // The plain 3x3 (c0) and the 1x1 over 7 columns (c3) take conv_cv by default.
    ASSERT_EQ(producer(plan, "c0").schedule["template"], "conv_cv");
    ASSERT_EQ(producer(plan, "c3").schedule["template"], "conv_cv");
    EXPECT_EQ(l.at("v0"), (exec::ValueLayout{8, 1, 1}));
    EXPECT_EQ(l.at("v1"), (exec::ValueLayout{8, 1, 1}));
    EXPECT_EQ(l.at("v2").halo_x, 0);  // read by an unpadded 1x1
    expect_layouts_compute_the_same(g, plan, l.size());
}

TEST(ValueLayout, NoBlocksWhereTheyDoNotFit) {
    // 12 channels: no multiple of 8 (the convs reading them copy their input planar); the 24-channel
    // values of the second stage blocked.
    const Graph g = two_stages(12);
    const FusedGraph plan = default_plan(g);
    const exec::ValueLayouts l = exec::choose_value_layouts(plan, kJitTarget);
    EXPECT_FALSE(l.count("v0") || l.count("v2"));
    if (kJitTarget.natural_vector_size<float>() == 8) {
        EXPECT_EQ(l.size(), 3u);
        EXPECT_TRUE(l.count("v3") && l.count("c4") && l.count("v4"));
    }
    expect_layouts_compute_the_same(g, plan, l.size());
    // Every op its own group: the epilogues are groups of their own, not conv_cv.
    const Graph g16 = two_stages(16);
    const FusedGraph unfused = with_default_schedules(singleton_groups(g16), kJitTarget);
    for (const auto &[value, layout] : exec::choose_value_layouts(unfused, kJitTarget)) {
        // Only conv -> conv hand-offs qualify: a Relu group reads every conv output.
        ADD_FAILURE() << value << " stored " << exec::to_string(layout);
    }
    // The autoschedulers' groups never store blocked.
    ExecutorOptions o;
    o.schedule = ScheduleSource::Mullapudi2016;
    EXPECT_TRUE(Executor(default_plan(g16), o).value_layouts().empty());
}

// The Error `f` throws, or "" if none.
template <typename F>
std::string error_of(F f) {
    try {
        f();
    } catch (const Error &e) {
        return e.what();
    }
    return "";
}

TEST(ValueLayout, ModelInputsAndOutputsStoredOnRequest) {
    const Graph g = two_stages(16);
    const FusedGraph plan = default_plan(g);
    const exec::ValueLayouts inner = exec::choose_value_layouts(plan, kJitTarget);
    EXPECT_FALSE(inner.count("x") || inner.count("v1"));
    // x is read by a padded conv copying it in blocks of 8; v1, returned, by another (a halo of 1);
    // gap comes from a reduction group. The intermediates as before.
    const exec::ValueLayouts io = exec::choose_value_layouts(plan, kJitTarget, /*model_io=*/true);
    EXPECT_EQ(exec::layout_of(io, "x"), (exec::ValueLayout{8, 1, 1}));
    EXPECT_EQ(exec::layout_of(io, "v1"), (exec::ValueLayout{8, 1, 1}));
    EXPECT_FALSE(io.count("gap"));
    EXPECT_EQ(io.size(), inner.size() + 2);
    for (const auto &[value, layout] : inner) EXPECT_EQ(exec::layout_of(io, value), layout) << value;

    ExecutorOptions o;
    o.blocked_io = true;
    Executor ex(plan, o), dense(plan);
    EXPECT_EQ(ex.value_layouts().at("x"), "blocked 8, halo 1x1");
    // The model's input and its stored output, not the intermediates; none without blocked_io.
    EXPECT_EQ(ex.stored_io(),
              (std::map<std::string, std::string>{{"x", "blocked 8, halo 1x1"}, {"v1", "blocked 8, halo 1x1"}}));
    EXPECT_TRUE(dense.stored_io().empty());
    EXPECT_FALSE(dense.value_layouts().empty());
    test::ModelInputs in = test::make_inputs(g);
    const std::map<std::string, TensorBuffer> packed = {{"x", ex.pack_input("x", in.buffers.at("x"))}};
    ASSERT_EQ(packed.at("x").dimensions(), 5);
    for (int run = 0; run < 2; run++) {  // v1's storage is fresh each run: its halo zeroed each time
        auto stored = ex.run(packed), want = dense.run(in.buffers);
        EXPECT_EQ(stored.at("v1").dimensions(), 5);
        EXPECT_EQ(stored.at("gap").dimensions(), 4);
        for (const std::string &out : g.outputs) {
            const TensorBuffer x = ex.unpack_output(out, stored.at(out)), &y = want.at(out);
            ASSERT_EQ(shape_of(x), shape_of(y));
            EXPECT_EQ(0, std::memcmp(x.data(), y.data(), y.size_in_bytes())) << out;
        }
    }

    // run() refuses a dense x, and stored x whose halo is not zero, naming where.
    EXPECT_TRUE(test::contains(error_of([&] { ex.run(in.buffers); }), "make it with Executor::pack_input()"));
    TensorBuffer bad = packed.at("x").copy();
    bad(3, -1, 0, 1, 1) = 1.0f;  // n 1, channel 8 + 3, row 0, column -1
    EXPECT_TRUE(test::contains(error_of([&] {
                                   ex.run({{"x", bad}});
                               }),
                               "halo must be zero, but is not at [1, 11, 0, -1]"));
    bad(3, -1, 0, 1, 1) = 0.0f;
    bad(0, 11, 13, 0, 0) = 1.0f;  // the bottom-right corner of the halo
    EXPECT_TRUE(test::contains(error_of([&] { ex.run({{"x", bad}}); }), "is not at [0, 0, 13, 11]"));
    EXPECT_TRUE(test::contains(error_of([&] {
                                   ex.pack_input("x", make_tensor_buffer({2, 16, 11, 13}));
                               }),
                               "model input 'x' has shape [2x16x13x11]"));
    EXPECT_TRUE(test::contains(error_of([&] {
                                   ex.unpack_output("v1", make_tensor_buffer({2, 16, 13, 11}));
                               }),
                               "is returned stored blocked 8, halo 1x1"));
    // Where nothing is stored, pack and unpack hand the buffer back.
    const TensorBuffer same = dense.pack_input("x", in.buffers.at("x"));
    EXPECT_EQ(same.data(), in.buffers.at("x").data());
}

TEST(ValueLayout, PoolsInTheTileStoreBlocked) {
    // conv_cv computes each 2x2 pool in its tile: the pooled value handed to the next conv is stored
    // blocked with its halo, the pool vectorized over channels; with blocked_io the returned pool too.
    const Graph g = pooled_stages();
    const FusedGraph plan = default_plan(g);
    ASSERT_EQ(plan.groups.size(), 2u);
    for (const FusedGroup &grp : plan.groups) {
        EXPECT_EQ(grp.schedule["template"], "conv_cv") << grp.master;
        EXPECT_FALSE(grp.schedule.contains("compute")) << grp.master;  // the pool in the tile
    }
    const exec::ValueLayouts l = exec::choose_value_layouts(plan, kJitTarget);
    EXPECT_EQ(l, (exec::ValueLayouts{{"p0", {8, 1, 1}}}));
    expect_layouts_compute_the_same(g, plan, 1);
    ExecutorOptions o;
    o.blocked_io = true;
    Executor ex(plan, o), dense(plan);
    EXPECT_EQ(ex.value_layouts().size(), 3u);  // x, p0 and p1
    test::ModelInputs in = test::make_inputs(g);
    const TensorBuffer stored = ex.run({{"x", ex.pack_input("x", in.buffers.at("x"))}}).at("p1");
    const TensorBuffer got = ex.unpack_output("p1", stored), want = dense.run(in.buffers).at("p1");
    ASSERT_EQ(shape_of(got), shape_of(want));
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size_in_bytes()));
}

TEST(ValueLayout, CompilesForAvx512) {
    // Vectors of 16 storing blocks of 8 (the padded readers' input_block): compiled, not run (this
    // machine may lack AVX-512).
    const Halide::Target avx512 = Halide::Target("x86-64-linux-avx-avx2-fma-f16c-sse41-avx512-avx512_skylake");
    const Graph g = two_stages(16);
    FusedGraph plan = with_default_schedules(plan_fusion(simplify(g), {load_rules("x86")}), avx512);
    EXPECT_EQ(producer(plan, "c0").schedule["vector_width"], 16);
    ExecutorOptions o;
    o.target = avx512;
    const exec::ValueLayouts l = exec::choose_value_layouts(plan, avx512);
    EXPECT_EQ(l.at("v0"), (exec::ValueLayout{8, 1, 1}));
    EXPECT_EQ(l.at("c4"), (exec::ValueLayout{16, 0, 0}));  // no conv reader: the producer's vector
    EXPECT_EQ(Executor(plan, o).value_layouts().size(), l.size());
    // Pools in the tile, over 16 channels in one 16-lane vector, storing blocks of 8.
    const FusedGraph pooled =
        with_default_schedules(plan_fusion(simplify(pooled_stages()), {load_rules("x86")}), avx512);
    EXPECT_EQ(exec::choose_value_layouts(pooled, avx512), (exec::ValueLayouts{{"p0", {8, 1, 1}}}));
    o.blocked_io = true;
    // p1's 24 channels: no whole blocks of 16, stored in blocks of 8 (the producer's half vectors).
    const Executor stores_p1(pooled, o);
    EXPECT_EQ(stores_p1.value_layouts().size(), 3u);
    EXPECT_EQ(stores_p1.value_layouts().at("p1"), "blocked 8, halo 0x0");
}

TEST(ValueLayout, StorageGeometry) {
    // 8 channels innermost, the halo around each plane, dense but for one cache line between blocks of
    // planes an even number of lines apart (16 x 16 x 8 floats = 128 lines -> 129).
    const std::vector<halide_dimension_t> d = exec::storage_dims({2, 256, 14, 14}, {8, 1, 1});
    ASSERT_EQ(d.size(), 5u);
    const std::vector<std::tuple<int, int, int>> want = {
        {0, 8, 1}, {-1, 16, 8}, {-1, 16, 128}, {0, 32, 2048 + 16}, {0, 2, 32 * (2048 + 16)}};
    for (size_t k = 0; k < d.size(); k++) {
        EXPECT_EQ(std::make_tuple(d[k].min, d[k].extent, d[k].stride), want[k]) << "dim " << k;
    }
    EXPECT_EQ(exec::storage_elements({2, 256, 14, 14}, {8, 1, 1}), 2 * 32 * (2048 + 16));
    // 58 x 58 x 8 floats: 1682 lines -> 1683; halo 0, 9 x 7: not a whole number of lines.
    EXPECT_EQ(exec::storage_dims({1, 64, 56, 56}, {8, 1, 1})[3].stride, 58 * 58 * 8 + 16);
    EXPECT_EQ(exec::storage_dims({1, 16, 7, 9}, {8, 0, 0})[3].stride, 9 * 7 * 8);
    // Planar: dense NCHW.
    const std::vector<halide_dimension_t> p = exec::storage_dims({2, 3, 4, 5}, {});
    EXPECT_EQ(p[3].stride, 60);
    EXPECT_EQ(exec::storage_elements({2, 3, 4, 5}, {}), 120);
}

TEST(ValueLayout, PagedPlanarGeometry) {
    // 56 x 56 floats (12,544 bytes a plane) split at row 28: 2 pages a band, planes 4 pages apart.
    const exec::ValueLayout l = exec::paged_planar({1, 144, 56, 56}, 28);
    EXPECT_EQ(l.page_row, 28);
    EXPECT_TRUE(l.planar());
    EXPECT_FALSE(l.dense());
    EXPECT_EQ(exec::to_string(l), "planar, paged at row 28");
    const std::vector<halide_dimension_t> d = exec::storage_dims({2, 144, 56, 56}, l);
    ASSERT_EQ(d.size(), 4u);
    const std::vector<std::tuple<int, int, int>> want = {{0, 56, 1}, {0, 56, 56}, {0, 144, 4096}, {0, 2, 144 * 4096}};
    for (size_t k = 0; k < d.size(); k++) {
        EXPECT_EQ(std::make_tuple(d[k].min, d[k].extent, d[k].stride), want[k]) << "dim " << k;
    }
    EXPECT_EQ(exec::interior_dims({2, 144, 56, 56}, l)[2].stride, 4096);
    EXPECT_EQ(exec::storage_slack_bytes(l), exec::kPageBytes);
    // Wherever a 64-byte aligned block starts, the storage starts less than a page in, row 28 on a page.
    std::vector<float> memory(3 * 1024);
    for (int line = 0; line < 64; line++) {
        auto *block =
            reinterpret_cast<float *>((reinterpret_cast<uintptr_t>(memory.data()) + 63) / 64 * 64) + 16 * line;
        float *start = exec::storage_start(block, {1, 144, 56, 56}, l);
        EXPECT_GE(start, block);
        EXPECT_LT(start - block, 1024);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(start + 28 * 56) % 4096, 0u) << "line " << line;
    }
    // Each band on pages of its own: 112 x 112 split at 56 (25,088 bytes a band -> 7 pages each).
    EXPECT_EQ(exec::storage_dims({1, 8, 112, 112}, exec::paged_planar({1, 8, 112, 112}, 56))[2].stride, 14 * 1024);
    // 30 x 47 split at 15 (2,820 bytes a band -> a page each): 1.45 times the plane, paged; 28 x 28
    // (1,568 bytes a band) would take 2.6 times, 14 x 14 10 times: dense.
    EXPECT_EQ(exec::storage_dims({1, 8, 30, 47}, exec::paged_planar({1, 8, 30, 47}, 15))[2].stride, 2 * 1024);
    EXPECT_TRUE(exec::paged_planar({1, 8, 28, 28}, 14).dense());
    EXPECT_TRUE(exec::paged_planar({1, 8, 14, 14}, 7).dense());
    // Bands of unequal length: 8 + 20 rows of 56 (1,792 and 4,480 bytes): 1 + 2 pages, 1.96 times.
    EXPECT_TRUE(exec::paged_planar({1, 8, 28, 56}, 8).dense());
    EXPECT_TRUE(exec::paged_planar({1, 8, 56, 56}, 0).dense());
    // Dense: the block itself.
    EXPECT_EQ(exec::storage_start(memory.data(), {1, 8, 56, 56}, {}), memory.data());
    EXPECT_EQ(exec::storage_slack_bytes({}), 0);
}

// A depthwise group in two bands of rows hands its value to the project group paged at the bands'
// row: computed as the reference does, and exactly as with every value dense (--planar) and as the
// whole-model pipeline, which hands it dense. Odd widths, rows split evenly or not, one image or two;
// dense where the project group runs on its position view (it reads its input as dense planes), and
// by default at 30 rows (two bands would recompute 2 of the expand's 30 rows, more than 5%).
TEST(ValueLayout, PagedWhereDepthwiseBandsMeet) {
    struct Case {
        int n, h, w, row_bands;
        std::string expect;  // r1's layout, "" for dense
        bool project_viewed = false;
    };
    for (const Case &k : {Case{1, 42, 47, 0, "planar, paged at row 21"}, Case{2, 30, 47, 2, "planar, paged at row 15"},
                          Case{1, 41, 47, 0, ""}, Case{1, 30, 47, 0, ""}, Case{1, 30, 47, 1, ""},
                          Case{1, 28, 28, 2, ""}, Case{1, 42, 47, 0, "", true}}) {
        SCOPED_TRACE("n " + std::to_string(k.n) + ", " + std::to_string(k.h) + " x " + std::to_string(k.w) +
                     ", row_bands " + std::to_string(k.row_bands));
        const Graph g = inverted_residual(k.n, 8, k.h, k.w);
        FusedGraph plan = default_plan(g);
        FusedGroup &dw = producer(plan, "dw");
        ASSERT_EQ(dw.schedule.value("template", ""), "conv_dw");
        ASSERT_NE(std::find(dw.nodes.begin(), dw.nodes.end(), "expand"), dw.nodes.end());
        if (k.row_bands) dw.schedule["row_bands"] = k.row_bands;
        dw.schedule["tile_y"] = 1;  // the bands split rows, not the target's row tiles (AVX2's 2 rows)
        if (k.project_viewed) {
            producer(plan, "project").schedule = {{"template", "conv_xv"},
                                                  {"flatten_positions", true},
                                                  {"vector_width", 8},
                                                  {"tile_x_vectors", 2},
                                                  {"tile_y", 1},
                                                  {"tile_c", 8},
                                                  {"channel_loop", "inner"}};
        }
        Executor ex(plan);
        const std::map<std::string, std::string> layouts = ex.value_layouts();
        EXPECT_EQ(layouts.count("r1") ? layouts.at("r1") : "", k.expect);
        EXPECT_EQ(layouts.size(), k.expect.empty() ? 0u : 1u);
        ExecutorOptions dense;
        dense.blocked_layouts = false;
        Executor planar(plan, dense);
        EXPECT_TRUE(planar.value_layouts().empty());
        if (!k.expect.empty()) EXPECT_GT(ex.intermediate_bytes(), planar.intermediate_bytes());
        ModelPipeline whole(plan, {kJitTarget});
        EXPECT_TRUE(whole.value_layouts().empty());
        test::ModelInputs in = test::make_inputs(g);
        const auto expected = reference::run(g, in.reference).at("y");
        for (int run = 0; run < 2; run++) {
            const TensorBuffer a = ex.run(in.buffers).at("y"), b = planar.run(in.buffers).at("y"),
                               c = whole.run(in.buffers).at("y");
            EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size_in_bytes()));
            EXPECT_EQ(0, std::memcmp(a.data(), c.data(), a.size_in_bytes())) << "(whole-model pipeline)";
            EXPECT_LE(reference::compare(a.data(), expected.data.data(), expected.data.size()).relative(), 1e-4);
        }
    }
}

}  // namespace
}  // namespace hfuse
