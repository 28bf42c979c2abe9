// The persistent kernel cache (src/exec/kernel_cache.h) and what it rests on: constants read through
// parameters, so that groups differing only in weights share code; parallel compilation; hits and
// misses across executors and processes; the key's inputs; corrupt, truncated and foreign entries;
// eviction; `hfuse cache` and --no-cache.
#include "exec/kernel_cache.h"
#include "exec/parallel_runtime.h"
#include "hfuse/composer.h"
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/kernel_cache.h"
#include "hfuse/model_io.h"
#include "hfuse/passes.h"
#include "hfuse/planner.h"

#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace hfuse {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A fresh, empty directory under the test's scratch directory.
std::string fresh_dir(const std::string &name) {
    const fs::path d = fs::path(::testing::TempDir()) / ("kernel_cache_" + name);
    fs::remove_all(d);
    fs::create_directories(d);
    return d.string();
}

json conv(const std::string &name, const std::string &in, const std::string &w, const std::string &b) {
    return {{"name", name},
            {"op", "Conv"},
            {"inputs", {in, w, b}},
            {"attrs", {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}}}};
}

// x [1, 16, 20, 20] -> conv 3x3 -> relu -> conv 3x3 (same shapes, other weights) -> relu -> clip.
// `seed` seeds the weights; `clip_max` is Clip's upper bound (a small weight, read into the code).
Graph two_convs(uint64_t seed = 1, float clip_max = 4.0f) {
    auto weight = [&](const Shape &shape, uint64_t s) {
        return json{{"shape", shape}, {"uniform", {-0.3, 0.3}}, {"seed", seed * 10 + s}};
    };
    json weights = {{"w1", weight({16, 16, 3, 3}, 1)},
                    {"b1", weight({16}, 2)},
                    {"w2", weight({16, 16, 3, 3}, 3)},
                    {"b2", weight({16}, 4)},
                    {"lo", {{"shape", json::array()}, {"values", {0.0}}}},
                    {"hi", {{"shape", json::array()}, {"values", {clip_max}}}}};
    json nodes = json::array({conv("c1", "x", "w1", "b1"),
                              {{"name", "r1"}, {"op", "Relu"}, {"inputs", {"c1"}}},
                              conv("c2", "r1", "w2", "b2"),
                              {{"name", "r2"}, {"op", "Relu"}, {"inputs", {"c2"}}},
                              {{"name", "y"}, {"op", "Clip"}, {"inputs", {"r2", "lo", "hi"}}}});
    json j = {{"format", "hfuse-model"}, {"version", 1},
              {"name", "two_convs"},     {"inputs", {{{"name", "x"}, {"shape", {1, 16, 20, 20}}}}},
              {"weights", weights},      {"nodes", nodes},
              {"outputs", {"y"}}};
    return prepare(parse_model(j, ".", "two_convs.json"));
}

// Each conv its own group (conv + relu), the Clip apart. With every value stored planar (options()),
// the two conv groups differ in their weights only.
FusedGraph conv_plan(const Graph &g) {
    return with_default_schedules(
        check_plan([&] {
            FusedGraph f;
            f.graph = g;
            for (std::vector<std::string> nodes : {std::vector<std::string>{"c1", "r1"}, {"c2", "r2"}, {"y"}}) {
                FusedGroup grp;
                grp.nodes = nodes;
                f.groups.push_back(grp);
            }
            return f;
        }()),
        Halide::get_jit_target_from_environment());
}

// Values between groups dense NCHW: else the first conv reads the model's input planar and the second
// its producer's channel-blocked storage, and their code differs.
ExecutorOptions options() {
    ExecutorOptions o;
    o.blocked_layouts = false;
    return o;
}

ExecutorOptions cached(const std::string &dir) {
    ExecutorOptions o = options();
    o.kernel_cache = true;
    o.kernel_cache_dir = dir;
    return o;
}

void expect_bit_identical(const TensorBuffer &a, const TensorBuffer &b) {
    ASSERT_EQ(shape_of(a), shape_of(b));
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size_in_bytes()));
}

TEST(ConstantParams, GroupsDifferingOnlyInWeightsShareCode) {
    Graph g = two_convs();
    test::ModelInputs in = test::make_inputs(g);
    Executor ex(conv_plan(g), options());
    EXPECT_EQ(ex.num_groups(), 3);
    EXPECT_EQ(ex.num_compiled(), 2);  // the two conv groups share one pipeline, each with its own weights
    test::expect_outputs_match_reference(g, in, ex.run(in.buffers), 1e-4);
}

TEST(ConstantParams, SmallConstantsReadIntoTheCodeAreKeyed) {
    // Clip's bound is read into the code while lowering: other bounds must not share a pipeline.
    Graph g = two_convs(1, 0.25f);
    test::ModelInputs in = test::make_inputs(g);
    const std::string dir = fresh_dir("clip");
    Executor first(conv_plan(two_convs(1, 4.0f)), cached(dir));
    Executor second(conv_plan(g), cached(dir));
    EXPECT_EQ(second.kernel_cache_stats().hits, 1);    // the convs' one pipeline
    EXPECT_EQ(second.kernel_cache_stats().stored, 1);  // the Clip with its other bound
    test::expect_outputs_match_reference(g, in, second.run(in.buffers), 1e-4);
}

TEST(ParallelCompile, OneThreadAndManyGiveTheSameResults) {
    Graph g = two_convs();
    test::ModelInputs in = test::make_inputs(g);
    ExecutorOptions one = options();
    one.compile_threads = 1;
    ExecutorOptions many = options();
    many.compile_threads = 4;
    Executor a(conv_plan(g), one), b(conv_plan(g), many);
    expect_bit_identical(a.run(in.buffers).at("y"), b.run(in.buffers).at("y"));
    test::expect_outputs_match_reference(g, in, b.run(in.buffers), 1e-4);
}

TEST(KernelCache, MissStoresHitLoadsAndResultsAreBitIdentical) {
    Graph g = two_convs();
    test::ModelInputs in = test::make_inputs(g);
    const std::string dir = fresh_dir("hit");
    Executor cold(conv_plan(g), cached(dir));
    KernelCacheStats s = cold.kernel_cache_stats();
    EXPECT_TRUE(s.enabled);
    EXPECT_EQ(s.dir, dir);
    EXPECT_EQ(s.hits, 0);
    EXPECT_EQ(s.stored, 2);
    EXPECT_TRUE(s.notes.empty());
    Executor warm(conv_plan(g), cached(dir));
    s = warm.kernel_cache_stats();
    EXPECT_EQ(s.hits, 2);
    EXPECT_EQ(s.stored, 0);
    EXPECT_GT(s.hit_cold_compile_ms, 0);
    for (const GroupInfo &gi : warm.groups()) {
        EXPECT_TRUE(gi.from_cache) << gi.name;
        EXPECT_FALSE(gi.schedule_template.empty()) << gi.name;
        EXPECT_GT(gi.cold_compile_ms, 0) << gi.name;
    }
    const TensorBuffer y = cold.run(in.buffers).at("y");
    expect_bit_identical(y, warm.run(in.buffers).at("y"));
    test::expect_outputs_match_reference(g, in, warm.run(in.buffers), 1e-4);
    EXPECT_EQ(kernel_cache_summary(dir).entries, 2);
}

TEST(KernelCache, OtherWeightsHitAndComputeWithTheirOwn) {
    const std::string dir = fresh_dir("weights");
    Executor first(conv_plan(two_convs(1)), cached(dir));
    Graph g = two_convs(2);
    test::ModelInputs in = test::make_inputs(g);
    Executor second(conv_plan(g), cached(dir));
    EXPECT_EQ(second.kernel_cache_stats().hits, 2);
    test::expect_outputs_match_reference(g, in, second.run(in.buffers), 1e-4);
}

TEST(KernelCache, KeyChangesWithScheduleParametersAndTarget) {
    Graph g = two_convs();
    test::ModelInputs in = test::make_inputs(g);
    const std::string dir = fresh_dir("key");
    Executor first(conv_plan(g), cached(dir));

    // Another schedule of the first conv group: that group misses (the second conv's, no longer the
    // same, and the Clip's hit).
    FusedGraph other = conv_plan(g);
    ASSERT_TRUE(other.groups[0].schedule.contains("template"));
    other.groups[0].schedule = json{{"template", "simple"}};
    Executor scheduled(other, cached(dir));
    EXPECT_EQ(scheduled.kernel_cache_stats().hits, 2);
    EXPECT_EQ(scheduled.kernel_cache_stats().stored, 1);
    test::expect_outputs_match_reference(g, in, scheduled.run(in.buffers), 1e-4);

    // Another target: every group misses.
    ExecutorOptions o = cached(dir);
    const Halide::Target host = Halide::get_jit_target_from_environment();
    o.target = host.has_feature(Halide::Target::AVX512) ? host.without_feature(Halide::Target::AVX512_Skylake)
                                                              .without_feature(Halide::Target::AVX512_Cannonlake)
                                                              .without_feature(Halide::Target::AVX512_SapphireRapids)
                                                              .without_feature(Halide::Target::AVX512)
                                                        : host.without_feature(Halide::Target::AVX2);
    ASSERT_NE(o.target.to_string(), host.to_string());
    Executor retargeted(conv_plan(g), o);
    EXPECT_EQ(retargeted.kernel_cache_stats().hits, 0);
    test::expect_outputs_match_reference(g, in, retargeted.run(in.buffers), 1e-4);
}

TEST(KernelCache, AutoscheduledGroupsHitInTheNextExecutor) {
    // Adams2019's first use sets HL_NUM_PASSES (exec::load_autoscheduler): the keys must not change
    // with it, or a group keyed before and looked up after would miss.
    unsetenv("HL_NUM_PASSES");
    json j = {
        {"format", "hfuse-model"},
        {"version", 1},
        {"name", "pointwise"},
        {"inputs", {{{"name", "x"}, {"shape", {1, 8, 16, 16}}}}},
        {"weights", json::object()},
        {"nodes",
         {{{"name", "r"}, {"op", "Relu"}, {"inputs", {"x"}}}, {{"name", "s"}, {"op", "Sigmoid"}, {"inputs", {"r"}}}}},
        {"outputs", {"s"}}};
    Graph g = prepare(parse_model(j, ".", "pointwise.json"));
    test::ModelInputs in = test::make_inputs(g);
    ExecutorOptions o = cached(fresh_dir("adams"));
    o.schedule = ScheduleSource::Adams2019;
    Executor first(g, Executor::unfused_partition(g), o);
    EXPECT_EQ(first.kernel_cache_stats().stored, 2);
    Executor second(g, Executor::unfused_partition(g), o);
    EXPECT_EQ(second.kernel_cache_stats().hits, 2);
    EXPECT_EQ(second.groups()[0].schedule, "adams2019");
    test::expect_outputs_match_reference(g, in, second.run(in.buffers), 1e-4);
}

TEST(KernelCache, OneEntryServesEitherParallelRuntime) {
    // The loop runtime is chosen per call (the kernel's user context), not compiled in.
    Graph g = two_convs();
    test::ModelInputs in = test::make_inputs(g);
    const std::string dir = fresh_dir("runtime");
    ExecutorOptions halide = cached(dir), openmp = cached(dir);
    halide.parallel_runtime = ParallelRuntime::Halide;
    openmp.parallel_runtime = ParallelRuntime::OpenMP;
    Executor a(conv_plan(g), halide);
    Executor b(conv_plan(g), openmp);
    EXPECT_EQ(b.kernel_cache_stats().hits, 2);
    const uint64_t loops = exec::openmp_loops_run();
    const TensorBuffer y = b.run(in.buffers).at("y");
    EXPECT_GT(exec::openmp_loops_run(), loops);
    expect_bit_identical(y, a.run(in.buffers).at("y"));
    test::expect_outputs_match_reference(g, in, b.run(in.buffers), 1e-4);
}

// The library file of each entry in `dir`.
std::vector<fs::path> libraries(const std::string &dir) {
    std::vector<fs::path> out;
    for (const auto &e : fs::directory_iterator(fs::path(dir) / "k")) out.push_back(e.path() / "kernel.so");
    std::sort(out.begin(), out.end());
    return out;
}

void expect_recovers(const std::string &dir, const std::string &why) {
    Graph g = two_convs();
    test::ModelInputs in = test::make_inputs(g);
    Executor again(conv_plan(g), cached(dir));
    const KernelCacheStats s = again.kernel_cache_stats();
    EXPECT_EQ(s.hits, 1);
    EXPECT_EQ(s.stored, 1);
    ASSERT_EQ(s.notes.size(), 1u);
    EXPECT_TRUE(test::contains(s.notes[0], why)) << s.notes[0];
    test::expect_outputs_match_reference(g, in, again.run(in.buffers), 1e-4);
    Executor after(conv_plan(g), cached(dir));  // stored again, whole
    EXPECT_EQ(after.kernel_cache_stats().hits, 2);
    EXPECT_TRUE(after.kernel_cache_stats().notes.empty());
}

TEST(KernelCache, CorruptEntryIsReportedAndCompiledAgain) {
    const std::string dir = fresh_dir("corrupt");
    { Executor first(conv_plan(two_convs()), cached(dir)); }
    const fs::path lib = libraries(dir)[0];
    std::fstream f(lib, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(lib) / 2));
    f.put('\x5a');
    f.close();
    expect_recovers(dir, "corrupt");
}

TEST(KernelCache, TruncatedEntryIsReportedAndCompiledAgain) {
    const std::string dir = fresh_dir("truncated");
    { Executor first(conv_plan(two_convs()), cached(dir)); }
    const fs::path lib = libraries(dir)[0];
    fs::resize_file(lib, fs::file_size(lib) / 3);
    expect_recovers(dir, "truncated");
}

TEST(KernelCache, ForeignEntryIsReportedAndCompiledAgain) {
    const std::string dir = fresh_dir("foreign");
    { Executor first(conv_plan(two_convs()), cached(dir)); }
    std::ofstream(libraries(dir)[0].parent_path() / "meta.json") << "{\"format\": 7}";
    expect_recovers(dir, "not an hfuse kernel cache entry");
}

TEST(KernelCache, EvictsLeastRecentlyUsedBeyondItsBound) {
    const std::string dir = fresh_dir("evict");
    { Executor first(conv_plan(two_convs()), cached(dir)); }
    ASSERT_EQ(kernel_cache_summary(dir).entries, 2);
    // A bound below one entry: the next executor stores its own Clip and keeps the entries it used,
    // so nothing of its own goes, and stays correct.
    ExecutorOptions tight = cached(dir);
    tight.kernel_cache_max_bytes = 1;
    Graph g = two_convs(1, 0.5f);
    test::ModelInputs in = test::make_inputs(g);
    Executor second(conv_plan(g), tight);
    EXPECT_EQ(second.kernel_cache_stats().stored, 1);
    // The old Clip entry (used by nobody here) is gone; the convs and the new Clip stay.
    EXPECT_EQ(kernel_cache_summary(dir).entries, 3 - 1);
    test::expect_outputs_match_reference(g, in, second.run(in.buffers), 1e-4);
    Executor third(conv_plan(two_convs()), cached(dir));
    EXPECT_EQ(third.kernel_cache_stats().hits, 1);
    EXPECT_EQ(third.kernel_cache_stats().stored, 1);
}

TEST(KernelCache, OnlyAnExecutorThatStoredMeasuresTheBound) {
    // Measuring the cache reads every entry (1.4 s for 14,000): an executor that only loads, which
    // cannot have grown the cache, neither measures nor evicts, even beyond the bound.
    const std::string dir = fresh_dir("load_only");
    {
        Executor first(conv_plan(two_convs()), cached(dir));
        EXPECT_TRUE(first.kernel_cache_stats().bound_checked);
        EXPECT_EQ(first.kernel_cache_stats().evicted, 0);
    }
    { Executor other_clip(conv_plan(two_convs(1, 0.5f)), cached(dir)); }
    ASSERT_EQ(kernel_cache_summary(dir).entries, 3);
    ExecutorOptions tight = cached(dir);
    tight.kernel_cache_max_bytes = 1;
    Executor loads(conv_plan(two_convs()), tight);
    EXPECT_EQ(loads.kernel_cache_stats().hits, 2);
    EXPECT_EQ(loads.kernel_cache_stats().stored, 0);
    EXPECT_FALSE(loads.kernel_cache_stats().bound_checked);
    EXPECT_EQ(loads.kernel_cache_stats().evicted, 0);
    EXPECT_EQ(kernel_cache_summary(dir).entries, 3);
    // One that stores does: it keeps the conv it loaded and the Clip it stored, and removes the two
    // Clips it did not use.
    Graph g = two_convs(1, 0.25f);
    test::ModelInputs in = test::make_inputs(g);
    Executor stores(conv_plan(g), tight);
    EXPECT_EQ(stores.kernel_cache_stats().hits, 1);
    EXPECT_EQ(stores.kernel_cache_stats().stored, 1);
    EXPECT_TRUE(stores.kernel_cache_stats().bound_checked);
    EXPECT_EQ(stores.kernel_cache_stats().evicted, 2);
    EXPECT_EQ(kernel_cache_summary(dir).entries, 2);
    test::expect_outputs_match_reference(g, in, stores.run(in.buffers), 1e-4);
}

TEST(KernelCache, ClearRemovesEverything) {
    const std::string dir = fresh_dir("clear");
    { Executor first(conv_plan(two_convs()), cached(dir)); }
    EXPECT_EQ(clear_kernel_cache(dir), 2);
    EXPECT_EQ(kernel_cache_summary(dir).entries, 0);
    EXPECT_EQ(kernel_cache_summary(dir).bytes, 0);
}

TEST(KernelCacheCli, TwoProcessesFillOneCacheAtOnce) {
    const std::string dir = fresh_dir("processes");
    const std::string model = std::string(HFUSE_SOURCE_DIR) + "/models/resnet_block.json";
    const std::string run =
        "HFUSE_CACHE_DIR=" + dir + " " + HFUSE_CLI + " run " + model + " --threads 1 --output " + dir;
    test::CommandResult both =
        test::run_command("(" + run + "/a.f32 > " + dir + "/a.log 2>&1 & " + run + "/b.f32 > " + dir +
                          "/b.log 2>&1 & wait %1 && wait %2) && cat " + dir + "/a.log " + dir + "/b.log");
    ASSERT_EQ(both.code, 0) << both.out;
    EXPECT_FALSE(test::contains(both.out, "note")) << both.out;
    const int entries = kernel_cache_summary(dir).entries;
    EXPECT_GT(entries, 0);
    EXPECT_EQ(test::read_file(dir + "/a.f32"), test::read_file(dir + "/b.f32"));
    EXPECT_FALSE(test::read_file(dir + "/a.f32").empty());
    // A third finds every group there.
    test::CommandResult warm = test::run_command("HFUSE_CACHE_DIR=" + dir + " " + HFUSE_CLI + " bench " + model +
                                                 " --runs 1 --json --threads 1");
    ASSERT_EQ(warm.code, 0) << warm.out;
    const json j = json::parse(warm.out);
    EXPECT_EQ(j.at("kernel_cache").at("hits").get<int>(), j.at("compiled_pipelines").get<int>());
    EXPECT_EQ(j.at("kernel_cache").at("stored").get<int>(), 0);
    EXPECT_EQ(kernel_cache_summary(dir).entries, entries);
}

TEST(KernelCacheCli, CorruptRuntimeLibraryIsBuiltAgain) {
    // The shared runtime is checked before it is loaded, as the entries are (once per process, hence
    // through the CLI).
    const std::string dir = fresh_dir("runtime_library");
    const std::string run = "HFUSE_CACHE_DIR=" + dir + " " + HFUSE_CLI + " run " + std::string(HFUSE_SOURCE_DIR) +
                            "/models/conv_bias_relu_maxpool.json --check";
    ASSERT_EQ(test::run_command(run).code, 0);
    fs::path library;
    for (const auto &e : fs::directory_iterator(dir)) {
        if (e.path().extension() == ".so") library = e.path();
    }
    ASSERT_FALSE(library.empty());
    fs::resize_file(library, fs::file_size(library) / 2);
    test::CommandResult r = test::run_command(run);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(test::contains(r.out, "fails its check; built again")) << r.out;
    EXPECT_TRUE(test::contains(r.out, ": ok")) << r.out;
    test::CommandResult again = test::run_command(run);
    EXPECT_FALSE(test::contains(again.out, "note")) << again.out;
}

TEST(KernelCacheCli, BuildingTheRuntimeIsTheRuntimesTimeNotAGroups) {
    // In a new cache directory the first group stored builds the cache's shared Halide runtime (once
    // per process, hence through the CLI): runtime_compile_ms, not the group's compile_ms.
    const std::string dir = fresh_dir("runtime_time");
    const std::string bench = "HFUSE_CACHE_DIR=" + dir + " " + HFUSE_CLI + " bench " + test::kCbrm + " --runs 1 --json";
    test::CommandResult cold = test::run_command(bench);
    ASSERT_EQ(cold.code, 0) << cold.out;
    json j = json::parse(cold.out);
    ASSERT_EQ(j.at("kernel_cache").at("stored").get<int>(), 1) << cold.out;
    const double runtime_ms = j.at("runtime_compile_ms").get<double>();
    EXPECT_GT(runtime_ms, 0) << cold.out;
    EXPECT_LE(j.at("group_compile_max_ms").get<double>() + runtime_ms, j.at("compile_ms").get<double>()) << cold.out;
    // The next process loads the runtime the first one left in the cache: nothing to build.
    test::CommandResult warm = test::run_command(bench);
    ASSERT_EQ(warm.code, 0) << warm.out;
    j = json::parse(warm.out);
    EXPECT_EQ(j.at("kernel_cache").at("hits").get<int>(), 1) << warm.out;
    EXPECT_EQ(j.at("runtime_compile_ms").get<double>(), 0) << warm.out;  // loaded from the cache
}

TEST(KernelCacheCli, NoCacheNeitherLoadsNorStores) {
    const std::string dir = fresh_dir("nocache");
    const std::string model = std::string(HFUSE_SOURCE_DIR) + "/models/conv_bias_relu_maxpool.json";
    test::CommandResult r = test::run_command("HFUSE_CACHE_DIR=" + dir + " " + HFUSE_CLI + " bench " + model +
                                              " --runs 1 --json --no-cache");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_FALSE(json::parse(r.out).at("kernel_cache").at("enabled").get<bool>());
    EXPECT_EQ(kernel_cache_summary(dir).entries, 0);
    test::CommandResult info = test::run_command("HFUSE_CACHE_DIR=" + dir + " " + HFUSE_CLI + " cache info --json");
    ASSERT_EQ(info.code, 0) << info.out;
    EXPECT_EQ(json::parse(info.out).at("entries").get<int>(), 0);
    test::CommandResult filled = test::run_command("HFUSE_CACHE_DIR=" + dir + " " + HFUSE_CLI + " run " + model);
    ASSERT_EQ(filled.code, 0) << filled.out;
    info = test::run_command("HFUSE_CACHE_DIR=" + dir + " " + HFUSE_CLI + " cache info");
    ASSERT_EQ(info.code, 0) << info.out;
    EXPECT_TRUE(test::contains(info.out, "kernel cache " + dir + ": 1 compiled group, ")) << info.out;
    test::CommandResult clear = test::run_command("HFUSE_CACHE_DIR=" + dir + " " + HFUSE_CLI + " cache clear");
    ASSERT_EQ(clear.code, 0) << clear.out;
    EXPECT_EQ(clear.out, "kernel cache " + dir + ": removed 1 compiled group\n");
}

}  // namespace
}  // namespace hfuse
