// The executor: lifetime-based reuse of intermediate storage, per-group profiles, skipping groups
// nobody reads, sharing compiled pipelines between identical groups, and the whole-model plan.
#include "hfuse/executor.h"
#include "exec/buffer_plan.h"
#include "exec/jit_runtime.h"
#include "hfuse/composer.h"
#include "hfuse/error.h"
#include "hfuse/model_io.h"
#include "hfuse/op_registry.h"
#include "hfuse/passes.h"
#include "hfuse/planner.h"
#include "hfuse/random.h"

#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

namespace hfuse {
namespace {

using nlohmann::json;
using test::model_node;

// x -> relu -> sigmoid -> tanh -> relu -> sigmoid -> tanh (six values, each read only by the next op).
Graph chain_model() {
    json nodes = json::array();
    const char *ops[] = {"Relu", "Sigmoid", "Tanh", "Relu", "Sigmoid", "Tanh"};
    std::string prev = "x";
    for (int i = 0; i < 6; i++) {
        std::string n = "n" + std::to_string(i);
        nodes.push_back(model_node(n, ops[i], {prev}));
        prev = n;
    }
    return test::one_input_model("chain", {1, 8, 32, 32}, nodes, {prev});
}

// A residual block of pure ops: `a` must survive three groups until `add` reads it; `mid` is also
// returned by the model.
Graph residual_model() {
    json nodes = json::array({model_node("a", "Sigmoid", {"x"}), model_node("b", "Tanh", {"a"}),
                              model_node("c", "Relu", {"b"}), model_node("d", "Sigmoid", {"c"}),
                              model_node("mid", "Tanh", {"d"}), model_node("e", "Sigmoid", {"mid"}),
                              model_node("add", "Add", {"a", "e"}), model_node("out", "Relu", {"add"})});
    return test::one_input_model("residual", {1, 4, 16, 16}, nodes, {"out", "mid"});
}

Executor unfused(const Graph &g, bool reuse) {
    ExecutorOptions o;
    o.reuse_buffers = reuse;
    return Executor(g, Executor::unfused_partition(g), o);
}

void expect_equal_outputs(const std::map<std::string, TensorBuffer> &a, const std::map<std::string, TensorBuffer> &b) {
    ASSERT_EQ(a.size(), b.size());
    for (const auto &kv : a) {
        const TensorBuffer &x = kv.second, &y = b.at(kv.first);
        ASSERT_EQ(shape_of(x), shape_of(y)) << kv.first;
        EXPECT_EQ(0, std::memcmp(x.data(), y.data(), x.size_in_bytes())) << kv.first << " differs";
    }
}

// --- the arena layout ------------------------------------------------------------------------------

TEST(BufferPlan, ChainReusesDeadValues) {
    // Each value is read by the next group only: two slots suffice however long the chain.
    std::vector<exec::BufferRequest> r;
    for (int i = 0; i < 6; i++) r.push_back({"v" + std::to_string(i), 1000, i, i + 1});
    exec::BufferPlan p = exec::plan_buffers(r);
    EXPECT_EQ(p.arena_bytes, 2 * 1024);
    EXPECT_EQ(p.offsets.at("v0"), p.offsets.at("v2"));
    EXPECT_NE(p.offsets.at("v0"), p.offsets.at("v1"));
}

TEST(BufferPlan, DocumentedExample) {
    exec::BufferPlan p = exec::plan_buffers({{"a", 400, 0, 1}, {"b", 400, 1, 2}, {"c", 400, 2, 3}});
    EXPECT_EQ(p.offsets.at("a"), 0);
    EXPECT_EQ(p.offsets.at("b"), 448);
    EXPECT_EQ(p.offsets.at("c"), 0);
    EXPECT_EQ(p.arena_bytes, 896);
}

TEST(BufferPlan, LiveValuesNeverOverlapRandomized) {
    std::mt19937 rng(7);
    for (int trial = 0; trial < 200; trial++) {
        std::vector<exec::BufferRequest> r;
        const int n = 1 + rng() % 12;
        for (int i = 0; i < n; i++) {
            int first = rng() % 10, last = first + rng() % 5;
            r.push_back({"v" + std::to_string(i), int64_t(1 + rng() % 5000), first, last});
        }
        exec::BufferPlan p = exec::plan_buffers(r, 16);
        int64_t unshared = 0;
        for (size_t i = 0; i < r.size(); i++) {
            unshared += (r[i].bytes + 15) / 16 * 16;
            const int64_t a = p.offsets.at(r[i].value);
            EXPECT_EQ(a % 16, 0);
            EXPECT_LE(a + r[i].bytes, p.arena_bytes);
            for (size_t j = 0; j < i; j++) {
                if (r[i].first_use > r[j].last_use || r[j].first_use > r[i].last_use) continue;  // never both live
                const int64_t b = p.offsets.at(r[j].value);
                EXPECT_TRUE(a + r[i].bytes <= b || b + r[j].bytes <= a)
                    << "trial " << trial << ": " << r[i].value << " and " << r[j].value << " overlap while both live";
            }
        }
        EXPECT_LE(p.arena_bytes, unshared);
    }
}

TEST(BufferPlan, RejectsAValueReadBeforeWritten) {
    EXPECT_THROW(exec::plan_buffers({{"v", 4, 3, 1}}), Error);
}

// --- intermediates in the executor -----------------------------------------------------------------

TEST(ExecutorBuffers, ChainSharesStorageAndGivesIdenticalResults) {
    Graph g = chain_model();
    test::ModelInputs in = test::make_inputs(g);
    Executor with = unfused(g, true), without = unfused(g, false);
    auto reused = with.run(in.buffers);
    auto separate = without.run(in.buffers);
    expect_equal_outputs(reused, separate);
    test::expect_outputs_match_reference(g, in, reused);
    // Five intermediates of 32 KiB each (the sixth value is the output): two buffers' worth suffice.
    const int64_t value_bytes = 4 * 8 * 32 * 32;
    EXPECT_EQ(without.intermediate_bytes(), 5 * value_bytes);
    EXPECT_EQ(with.intermediate_bytes_unshared(), 5 * value_bytes);
    EXPECT_EQ(with.intermediate_bytes(), 2 * value_bytes);
    // Runs after the first reuse the same storage and agree.
    expect_equal_outputs(with.run(in.buffers), reused);
}

TEST(ExecutorBuffers, ResidualValueSurvivesUntilItsLastReader) {
    Graph g = residual_model();
    test::ModelInputs in = test::make_inputs(g);
    Executor with = unfused(g, true);
    auto reused = with.run(in.buffers);
    auto separate = unfused(g, false).run(in.buffers);
    expect_equal_outputs(reused, separate);
    test::expect_outputs_match_reference(g, in, reused);
    EXPECT_LT(with.intermediate_bytes(), with.intermediate_bytes_unshared());
    // `a` is live throughout, so at least two slots; `mid` is a model output and takes none.
    const int64_t value_bytes = 4 * 4 * 16 * 16;
    EXPECT_EQ(with.intermediate_bytes_unshared(), 6 * value_bytes);
    EXPECT_GE(with.intermediate_bytes(), 2 * value_bytes);
}

TEST(ExecutorBuffers, BundledModelsAgreeWithAndWithoutReuse) {
    for (const char *name : {"lstm_cell", "resnet_block"}) {
        Graph g = load_model(std::string(HFUSE_SOURCE_DIR) + "/models/" + name + ".json");
        test::ModelInputs in = test::make_inputs(g);
        Executor reused = unfused(g, true);
        auto a = reused.run(in.buffers);
        auto b = unfused(g, false).run(in.buffers);
        expect_equal_outputs(a, b);
        EXPECT_LT(reused.intermediate_bytes(), reused.intermediate_bytes_unshared()) << name;
    }
}

// --- profiles and skipped groups -------------------------------------------------------------------

TEST(ExecutorProfile, OneEntryPerGroupInRunOrder) {
    // Convolutions dominate this model's run, so the time outside groups (checking inputs, allocating
    // the output) is small next to them.
    Graph g = load_model(std::string(HFUSE_SOURCE_DIR) + "/models/resnet_block.json");
    test::ModelInputs in = test::make_inputs(g);
    Executor ex(g, Executor::unfused_partition(g));
    Profile p = ex.profile(in.buffers, 11);
    EXPECT_EQ(p.runs, 11);
    ASSERT_EQ(static_cast<int>(p.groups.size()), ex.num_groups());
    std::vector<std::string> names;
    double sum = 0;
    for (const GroupProfile &gp : p.groups) {
        names.push_back(gp.name);
        EXPECT_EQ(gp.members, 1);
        EXPECT_GT(gp.ms, 0);
        sum += gp.ms;
    }
    std::vector<std::string> run_names;
    for (const GroupInfo &gi : ex.groups()) run_names.push_back(gi.name);
    EXPECT_EQ(names, run_names);
    EXPECT_EQ(p.groups.front().master, "conv1");
    EXPECT_EQ(p.groups.back().master, "relu2");
    EXPECT_GT(p.total_ms, 0);
    // Medians of parts need not add up to the median run (a loaded machine skews them apart), so
    // no bound on `sum` here; one run's group times are checked against its wall time below.
    EXPECT_GT(sum, 0);
}

TEST(ExecutorProfile, RunReportsGroupTimes) {
    Graph g = chain_model();
    test::ModelInputs in = test::make_inputs(g);
    Executor ex(g, Executor::unfused_partition(g));
    std::vector<double> ms = {42};
    const auto start = std::chrono::steady_clock::now();
    ex.run(in.buffers, &ms);
    const double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(static_cast<int>(ms.size()), ex.num_groups());
    // Each group is timed inside the run, one after another: together they cannot exceed it.
    double sum = 0;
    for (double t : ms) sum += t;
    EXPECT_LE(sum, wall);
    EXPECT_THROW(ex.profile(in.buffers, 0), Error);
}

TEST(ExecutorGroups, GroupNobodyReadsIsSkipped) {
    // `dead` is neither returned nor read: run as written (no rewrites), its group has nothing to do.
    json nodes = json::array(
        {model_node("a", "Relu", {"x"}), model_node("dead", "Sigmoid", {"a"}), model_node("out", "Tanh", {"a"})});
    Graph g = test::one_input_model("dead", {1, 2, 4, 4}, nodes, {"out"});
    test::ModelInputs in = test::make_inputs(g);
    Executor ex(g, Executor::unfused_partition(g));
    EXPECT_EQ(ex.num_groups(), 2);
    for (const GroupInfo &gi : ex.groups()) {
        EXPECT_NE(gi.master, "dead") << "the group of 'dead' ran";
        EXPECT_EQ(gi.schedule, "templates");
        EXPECT_EQ(gi.note, "");
    }
    test::expect_outputs_match_reference(g, in, ex.run(in.buffers));
    EXPECT_EQ(ex.profile(in.buffers, 1).groups.size(), 2u);
}

TEST(ExecutorGroups, InfoNamesTemplateOpsAndFlops) {
    // resnet_block planned by x86 (BatchNormalizations folded into the convs): each group's template
    // is its plan schedule's, its ops its members', and its FLOPs add up to the rewritten graph's.
    Graph g = load_model(std::string(HFUSE_SOURCE_DIR) + "/models/resnet_block.json");
    const Halide::Target target = Halide::get_jit_target_from_environment();
    const FusedGraph plan = with_default_schedules(plan_fusion(g, {load_rules("x86")}), target);
    Executor ex(plan);
    ASSERT_EQ(ex.groups().size(), plan.groups.size());
    double flops = 0;
    for (size_t i = 0; i < plan.groups.size(); i++) {
        const GroupInfo gi = ex.groups()[i];
        const FusedGroup &grp = plan.groups[i];
        EXPECT_EQ(gi.schedule_template, grp.schedule.value("template", "?")) << gi.name;
        std::vector<std::string> ops;
        for (const std::string &n : grp.nodes) ops.push_back(plan.graph.find_node(n)->op);
        EXPECT_EQ(gi.ops, ops) << gi.name;
        EXPECT_GT(gi.flops, 0) << gi.name;
        flops += gi.flops;
    }
    EXPECT_EQ(ex.groups().front().ops.front(), "Conv");
    EXPECT_DOUBLE_EQ(flops, graph_flops(plan.graph));

    // No schedule in the plan: the default template, as the composer picked it (a conv template for
    // a Conv, the simple schedule for elementwise and broadcast ops).
    Executor unfused(g, Executor::unfused_partition(g));
    for (const GroupInfo &gi : unfused.groups()) {
        ASSERT_EQ(gi.ops.size(), 1u) << gi.name;
        if (gi.ops[0] == "Conv") {
            EXPECT_EQ(gi.schedule_template.rfind("conv_", 0), 0u) << gi.name << ": " << gi.schedule_template;
        } else {
            EXPECT_EQ(gi.schedule_template, "simple") << gi.name;
        }
        EXPECT_EQ(gi.flops, node_flops(g, *g.find_node(gi.master))) << gi.name;
    }
}

// --- sharing compiled pipelines --------------------------------------------------------------------

TEST(ExecutorCompileCache, IdenticalGroupsShareAPipeline) {
    // Three Sigmoids and two Tanhs on [1, 128] values, Muls alike: the unfused LSTM cell compiles
    // each distinct op once.
    Graph g = load_model(std::string(HFUSE_SOURCE_DIR) + "/models/lstm_cell.json");
    test::ModelInputs in = test::make_inputs(g);
    Executor ex(g, Executor::unfused_partition(g));
    EXPECT_LT(ex.num_compiled(), ex.num_groups());
    test::expect_outputs_match_reference(g, in, ex.run(in.buffers), 1e-4);
}

TEST(ExecutorCompileCache, ASchedulesWhyDoesNotSplitSharing) {
    // "why" explains a schedule and names nodes; groups alike but for it still share one pipeline.
    Graph g = load_model(std::string(HFUSE_SOURCE_DIR) + "/models/lstm_cell.json");
    const Halide::Target target = Halide::get_jit_target_from_environment();
    FusedGraph plan = with_default_schedules(plan_fusion(g, {load_rules("none")}), target);
    const int shared = Executor(plan).num_compiled();
    ASSERT_LT(shared, static_cast<int>(plan.groups.size()));
    for (FusedGroup &grp : plan.groups) grp.schedule["why"] = "explained for " + grp.master;
    Executor ex(plan);
    EXPECT_EQ(ex.num_compiled(), shared);
    test::ModelInputs in = test::make_inputs(g);
    test::expect_outputs_match_reference(g, in, ex.run(in.buffers), 1e-4);
}

TEST(ExecutorCompileCache, SameOpsWithDifferentWeightsDoNotShare) {
    json weights = {{"w1", {{"shape", {4}}, {"uniform", {-1, 1}}, {"seed", 1u}}},
                    {"w2", {{"shape", {4}}, {"uniform", {-1, 1}}, {"seed", 2u}}}};
    json nodes = json::array({model_node("m1", "Mul", {"x", "w1"}), model_node("m2", "Mul", {"m1", "w2"})});
    Graph g = test::one_input_model("weights", {1, 4}, nodes, {"m2"}, weights);
    test::ModelInputs in = test::make_inputs(g);
    Executor ex(g, Executor::unfused_partition(g));
    EXPECT_EQ(ex.num_compiled(), 2);
    test::expect_outputs_match_reference(g, in, ex.run(in.buffers));
}

TEST(ExecutorCompileCache, HalidesRuntimeIsCompiledOnceAndApart) {
    // The first executor of a process compiles Halide's shared JIT runtime before its first group
    // (exec/jit_runtime.h); later ones find it there. Under ctest this test is its own process, so
    // the first executor is this one, unless the whole binary runs.
    json nodes = json::array({model_node("r", "Relu", {"x"})});
    Graph g = test::one_input_model("relu", {1, 4}, nodes, {"r"});
    Executor first(g, Executor::unfused_partition(g)), second(g, Executor::unfused_partition(g));
    EXPECT_GE(first.runtime_compile_ms(), 0);
    EXPECT_EQ(second.runtime_compile_ms(), 0);
    EXPECT_EQ(exec::compile_jit_runtime(first.options().target), 0);
    test::ModelInputs in = test::make_inputs(g);
    test::expect_outputs_match_reference(g, in, second.run(in.buffers));
}

// --- the whole model as one group ------------------------------------------------------------------

TEST(WholeModelPlan, OneGroupOfTheRewrittenGraph) {
    Graph g = load_model(std::string(HFUSE_SOURCE_DIR) + "/models/resnet_block.json");
    FusedGraph whole = whole_model_plan(g);
    ASSERT_EQ(whole.groups.size(), 1u);
    EXPECT_TRUE(whole.rewritten);
    EXPECT_EQ(whole.groups[0].nodes.size(), whole.graph.nodes.size());
    EXPECT_LT(whole.graph.nodes.size(), g.nodes.size()) << "the BatchNormalizations should be folded";
    EXPECT_EQ(whole.groups[0].schedule.value("template", ""), "simple");
    test::expect_plan_matches_reference(whole, 1e-4, &g);

    FusedGraph as_written = whole_model_plan(g, false);
    EXPECT_FALSE(as_written.rewritten);
    EXPECT_EQ(as_written.groups[0].nodes.size(), g.nodes.size());
    test::expect_plan_matches_reference(as_written, 1e-4);
}

TEST(WholeModelPlan, MultiOutputModel) {
    Graph g = residual_model();
    FusedGraph whole = whole_model_plan(g);
    Executor ex(whole);
    EXPECT_EQ(ex.num_groups(), 1);
    EXPECT_EQ(ex.intermediate_bytes(), 0);
    test::ModelInputs in = test::make_inputs(g);
    test::expect_outputs_match_reference(g, in, ex.run(in.buffers));
}

TEST(ScheduleSource, NamesRoundTrip) {
    for (ScheduleSource s : {ScheduleSource::Templates, ScheduleSource::Mullapudi2016, ScheduleSource::Adams2019,
                             ScheduleSource::Li2018}) {
        EXPECT_EQ(parse_schedule_source(to_string(s)), s);
    }
    try {
        parse_schedule_source("adams2020");
        FAIL() << "no error";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("adams2020"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("mullapudi2016"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace hfuse
