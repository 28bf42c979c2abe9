// Who runs the JIT pipelines' parallel loops: hfuse's pool, split as OpenMP's static schedule (every
// task once, each thread a fixed contiguous share, the caller the first; a failing task's status
// returned; nested loops and one thread on the caller; sleeping workers woken, another thread's loop
// meanwhile on OpenMP's threads, a forked child's loops on workers of its own), used by the executor
// and the whole-model pipeline unless they are told to use Halide's pool, with the same results
// either way.
#include "exec/parallel_runtime.h"
#include "hfuse/composer.h"
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/fusion_rules.h"
#include "hfuse/model_io.h"
#include "hfuse/model_pipeline.h"
#include "hfuse/planner.h"

#include "test_util.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace hfuse {
namespace {

using json = nlohmann::json;
using Task = int (*)(Halide::JITUserContext *, int, uint8_t *);

// The thread that ran each task of a loop over [min, min + extent), and how often each ran.
struct Record {
    int min = 0;
    std::vector<std::thread::id> thread;
    std::vector<std::atomic<int>> runs;
    explicit Record(int min, int extent) : min(min), thread(extent), runs(extent) {}
};

int record_task(Halide::JITUserContext *, int i, uint8_t *closure) {
    auto *r = reinterpret_cast<Record *>(closure);
    r->thread[i - r->min] = std::this_thread::get_id();
    r->runs[i - r->min]++;
    return 0;
}

// Restores the thread count a test changed.
struct ThreadCount {
    int saved = exec::openmp_threads();
    explicit ThreadCount(int n) { exec::set_openmp_threads(n); }
    ~ThreadCount() { exec::set_openmp_threads(saved); }
};

TEST(ParallelRuntime, EveryTaskRunsOnceEachThreadAFixedContiguousShare) {
    ThreadCount two(2);
    std::vector<std::thread::id> first;
    for (int call = 0; call < 3; call++) {
        Record r(5, 8);  // tasks 5..12
        ASSERT_EQ(exec::openmp_do_par_for(nullptr, record_task, 5, 8, reinterpret_cast<uint8_t *>(&r)), 0);
        for (int i = 0; i < 8; i++) EXPECT_EQ(r.runs[i].load(), 1) << "task " << 5 + i;
        // The caller takes the first half, one other thread the second, in every call.
        for (int i = 0; i < 4; i++) EXPECT_EQ(r.thread[i], std::this_thread::get_id()) << "task " << 5 + i;
        for (int i = 5; i < 8; i++) EXPECT_EQ(r.thread[i], r.thread[4]) << "task " << 5 + i;
        EXPECT_NE(r.thread[4], std::this_thread::get_id());
        if (call == 0) first = r.thread;
        EXPECT_EQ(r.thread, first) << "call " << call << " mapped tasks to threads differently";
    }
}

TEST(ParallelRuntime, ReturnsAFailingTasksStatusAndSkipsTheCallersLaterTasks) {
    ThreadCount two(2);
    struct Count {
        std::atomic<int> runs{0};
    } c;
    Task fail_at_3 = [](Halide::JITUserContext *, int i, uint8_t *closure) {
        reinterpret_cast<Count *>(closure)->runs++;
        return i == 3 ? -7 : 0;
    };
    EXPECT_EQ(exec::openmp_do_par_for(nullptr, fail_at_3, 0, 100, reinterpret_cast<uint8_t *>(&c)), -7);
    // The caller's share is 0..49: after task 3 fails, 4..49 are skipped; the other thread may have
    // run any of 50..99 before it saw the failure.
    EXPECT_LE(c.runs.load(), 4 + 50);
    EXPECT_GE(c.runs.load(), 4);
}

TEST(ParallelRuntime, NestedLoopsAndOneThreadRunOnTheCaller) {
    {
        ThreadCount one(1);
        Record r(0, 6);
        ASSERT_EQ(exec::openmp_do_par_for(nullptr, record_task, 0, 6, reinterpret_cast<uint8_t *>(&r)), 0);
        for (int i = 0; i < 6; i++) EXPECT_EQ(r.thread[i], std::this_thread::get_id());
    }
    ThreadCount two(2);
    // Each outer task runs an inner loop of 4 tasks: on the outer task's own thread.
    struct Outer {
        std::vector<std::thread::id> outer{2};
        std::vector<std::unique_ptr<Record>> inner;
    } o;
    o.inner.push_back(std::make_unique<Record>(0, 4));
    o.inner.push_back(std::make_unique<Record>(0, 4));
    Task outer = [](Halide::JITUserContext *, int i, uint8_t *closure) {
        auto *o = reinterpret_cast<Outer *>(closure);
        o->outer[i] = std::this_thread::get_id();
        return exec::openmp_do_par_for(nullptr, record_task, 0, 4, reinterpret_cast<uint8_t *>(o->inner[i].get()));
    };
    ASSERT_EQ(exec::openmp_do_par_for(nullptr, outer, 0, 2, reinterpret_cast<uint8_t *>(&o)), 0);
    EXPECT_NE(o.outer[0], o.outer[1]);
    for (int i = 0; i < 2; i++) {
        for (int t = 0; t < 4; t++) {
            EXPECT_EQ(o.inner[i]->runs[t].load(), 1);
            EXPECT_EQ(o.inner[i]->thread[t], o.outer[i]) << "outer task " << i << ", inner task " << t;
        }
    }
}

// The workers sleep when no loop has come for a while (HFUSE_POOL_SPINS): the next loop wakes them
// and still runs each share on its own thread.
TEST(ParallelRuntime, ALoopAfterTheWorkersSleptWakesThem) {
    ThreadCount two(2);
    for (int call = 0; call < 3; call++) {
        Record r(0, 6);
        ASSERT_EQ(exec::openmp_do_par_for(nullptr, record_task, 0, 6, reinterpret_cast<uint8_t *>(&r)), 0);
        for (int i = 0; i < 6; i++) EXPECT_EQ(r.runs[i].load(), 1) << "call " << call << ", task " << i;
        EXPECT_EQ(r.thread[0], std::this_thread::get_id());
        EXPECT_NE(r.thread[3], std::this_thread::get_id()) << "call " << call;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the workers' spinning
    }
}

// Two threads' loops at once: one runs on the pool, the other on OpenMP's threads (not serially, nor
// waiting for the first), every task of each once.
TEST(ParallelRuntime, LoopsFromTwoThreadsAtOnceEachRunEveryTaskOnce) {
    ThreadCount two(2);
    // A's tasks hold the pool until B's loop has run on two threads.
    struct Shared {
        std::atomic<bool> b_done{false};
        std::atomic<int> a_runs{0};
        Record b{0, 4};
    } sh;
    Task hold = [](Halide::JITUserContext *, int, uint8_t *closure) {
        auto *sh = reinterpret_cast<Shared *>(closure);
        sh->a_runs++;
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (!sh->b_done && std::chrono::steady_clock::now() < until) std::this_thread::yield();
        return 0;
    };
    std::thread a(
        [&] { EXPECT_EQ(exec::openmp_do_par_for(nullptr, hold, 0, 2, reinterpret_cast<uint8_t *>(&sh)), 0); });
    while (sh.a_runs.load() < 2) std::this_thread::yield();  // A's loop holds the pool and its worker
    std::thread b([&] {
        EXPECT_EQ(exec::openmp_do_par_for(nullptr, record_task, 0, 4, reinterpret_cast<uint8_t *>(&sh.b)), 0);
        sh.b_done = true;
    });
    b.join();
    a.join();
    EXPECT_EQ(sh.a_runs.load(), 2);
    for (int i = 0; i < 4; i++) EXPECT_EQ(sh.b.runs[i].load(), 1) << "task " << i;
    EXPECT_NE(sh.b.thread[0], sh.b.thread[3]) << "B's loop ran serially";
}

// More threads than cores: the workers do not spin between loops (they would hold cores the loop's
// other threads need), and every loop still runs every task once.
TEST(ParallelRuntime, MoreThreadsThanCoresRunEveryTaskOnce) {
    ThreadCount many(2 * static_cast<int>(std::thread::hardware_concurrency()) + 1);
    for (int call = 0; call < 20; call++) {
        Record r(3, 50);
        ASSERT_EQ(exec::openmp_do_par_for(nullptr, record_task, 3, 50, reinterpret_cast<uint8_t *>(&r)), 0);
        for (int i = 0; i < 50; i++) ASSERT_EQ(r.runs[i].load(), 1) << "call " << call << ", task " << 3 + i;
    }
}

// A forked child has none of its parent's workers: its loops start its own.
TEST(ParallelRuntime, AForkedChildRunsItsLoops) {
    ThreadCount two(2);
    Record warm(0, 4);  // the parent's pool started
    ASSERT_EQ(exec::openmp_do_par_for(nullptr, record_task, 0, 4, reinterpret_cast<uint8_t *>(&warm)), 0);
    Record r(0, 4);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        alarm(20);  // a loop waiting for the parent's workers would hang: SIGALRM ends it
        const int status = exec::openmp_do_par_for(nullptr, record_task, 0, 4, reinterpret_cast<uint8_t *>(&r));
        bool once = true;
        for (int i = 0; i < 4; i++) once = once && r.runs[i].load() == 1;
        _exit(status == 0 && once && r.thread[0] != r.thread[3] ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << (WIFSIGNALED(status) ? "the child's loop hung (signal " + std::to_string(WTERMSIG(status)) + ")"
                                : "the child's loop ran wrongly");
}

TEST(ParallelRuntime, NamesParseAndUnknownOnesAreRefused) {
    EXPECT_EQ(parse_parallel_runtime("auto"), ParallelRuntime::Auto);
    EXPECT_EQ(parse_parallel_runtime("openmp"), ParallelRuntime::OpenMP);
    EXPECT_EQ(parse_parallel_runtime("halide"), ParallelRuntime::Halide);
    EXPECT_EQ(ExecutorOptions{}.parallel_runtime, ParallelRuntime::Auto);
    EXPECT_EQ(ModelPipelineOptions{}.parallel_runtime, ParallelRuntime::Auto);
    try {
        parse_parallel_runtime("tbb");
        FAIL() << "accepted 'tbb'";
    } catch (const Error &e) {
        EXPECT_NE(std::string(e.what()).find("'tbb'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("auto, openmp or halide"), std::string::npos) << e.what();
    }
}

// The executor's pipelines run their loops on the runtime they were given, with the same results.
TEST(ParallelRuntime, ExecutorRunsOnTheRuntimeItIsGivenWithTheSameResults) {
    ThreadCount two(2);
    Graph g = load_model(std::string(HFUSE_SOURCE_DIR) + "/models/resnet_block.json");
    test::ModelInputs in = test::make_inputs(g);
    FusedGraph plan = plan_fusion(g, {load_rules("x86")});
    std::map<std::string, TensorBuffer> results[2];
    for (ParallelRuntime r : {ParallelRuntime::OpenMP, ParallelRuntime::Halide}) {
        ExecutorOptions o;
        o.parallel_runtime = r;
        Executor ex(with_default_schedules(plan, o.target), o);
        const uint64_t before = exec::openmp_loops_run();
        auto out = ex.run(in.buffers);
        const uint64_t loops = exec::openmp_loops_run() - before;
        for (const GroupInfo &gi : ex.groups()) EXPECT_EQ(gi.parallel_runtime, r) << gi.name;
        if (r == ParallelRuntime::OpenMP) {
            EXPECT_GE(loops, static_cast<uint64_t>(ex.num_groups())) << "every group has a parallel loop";
        } else {
            EXPECT_EQ(loops, 0u) << "Halide's pool was asked for, OpenMP ran loops";
        }
        test::expect_outputs_match_reference(g, in, out);
        results[r == ParallelRuntime::OpenMP ? 0 : 1] = std::move(out);
    }
    const TensorBuffer &a = results[0].at(g.outputs[0]), &b = results[1].at(g.outputs[0]);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size_in_bytes())) << "the two runtimes' results differ";
}

// Auto: OpenMP for a model of at least kOpenMPMinFlops, Halide's pool below, every group of a model on
// the same one (the two runtimes' threads would take turns on the same cores).
TEST(ParallelRuntime, AutoChoosesOneRuntimeByTheModelsFlops) {
    EXPECT_EQ(exec::resolve_parallel_runtime(ParallelRuntime::Auto, exec::kOpenMPMinFlops), ParallelRuntime::OpenMP);
    EXPECT_EQ(exec::resolve_parallel_runtime(ParallelRuntime::Auto, exec::kOpenMPMinFlops / 2),
              ParallelRuntime::Halide);
    for (ParallelRuntime r : {ParallelRuntime::OpenMP, ParallelRuntime::Halide}) {
        EXPECT_EQ(exec::resolve_parallel_runtime(r, 0), r);
        EXPECT_EQ(exec::resolve_parallel_runtime(r, 1e12), r);
    }
    ThreadCount two(2);
    // The MLP: a 784->256 layer (401 KFLOP) and a 256->10 one, below the line together; the MobileNet-V2
    // block (tens of MFLOP) above; a 3x3 conv (4.4 MFLOP) whose ReLU and global pool, each a group of
    // its own (no fusion), alone would be below.
    const json nodes = json::array({{{"name", "conv"},
                                     {"op", "Conv"},
                                     {"inputs", {"x", "w"}},
                                     {"attrs", {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}}}},
                                    {{"name", "relu"}, {"op", "Relu"}, {"inputs", {"conv"}}},
                                    {{"name", "gap"}, {"op", "GlobalAveragePool"}, {"inputs", {"relu"}}}});
    const json weights = {{"w", {{"shape", {16, 16, 3, 3}}, {"uniform", {-0.3, 0.3}}, {"seed", 1}}}};
    struct Case {
        Graph g;
        ParallelRuntime expected;
    };
    std::vector<Case> cases;
    cases.push_back({load_model(std::string(HFUSE_SOURCE_DIR) + "/models/mlp_softmax.json"), ParallelRuntime::Halide});
    cases.push_back(
        {load_model(std::string(HFUSE_SOURCE_DIR) + "/bench/models/mobilenet_v2_block.json"), ParallelRuntime::OpenMP});
    cases.push_back(
        {test::one_input_model("conv_gap", {1, 16, 31, 31}, nodes, {"gap"}, weights), ParallelRuntime::OpenMP});
    for (const Case &c : cases) {
        test::ModelInputs in = test::make_inputs(c.g);
        const std::string rules = c.g.name == "conv_gap" ? "none" : "x86";
        Executor ex(
            with_default_schedules(plan_fusion(c.g, {load_rules(rules)}), Halide::get_jit_target_from_environment()));
        if (c.g.name == "conv_gap") EXPECT_EQ(ex.groups().size(), 3u);
        for (const GroupInfo &gi : ex.groups())
            EXPECT_EQ(gi.parallel_runtime, c.expected) << c.g.name << " " << gi.name;
        const uint64_t before = exec::openmp_loops_run();
        auto out = ex.run(in.buffers);
        EXPECT_EQ(exec::openmp_loops_run() > before, c.expected == ParallelRuntime::OpenMP) << c.g.name;
        test::expect_outputs_match_reference(c.g, in, out);
    }
}

TEST(ParallelRuntime, WholeModelPipelineRunsOnTheRuntimeItIsGiven) {
    ThreadCount two(2);
    Graph g = load_model(std::string(HFUSE_SOURCE_DIR) + "/models/conv_bias_relu_maxpool.json");
    test::ModelInputs in = test::make_inputs(g);
    for (ParallelRuntime r : {ParallelRuntime::OpenMP, ParallelRuntime::Halide}) {
        ModelPipelineOptions o;
        o.parallel_runtime = r;
        ModelPipeline mp(plan_fusion(g, {load_rules("x86")}), o);
        const uint64_t before = exec::openmp_loops_run();
        auto out = mp.run(in.buffers);
        EXPECT_EQ(exec::openmp_loops_run() > before, r == ParallelRuntime::OpenMP) << to_string(r);
        test::expect_outputs_match_reference(g, in, out);
    }
}

}  // namespace
}  // namespace hfuse
