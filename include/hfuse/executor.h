// Runs a prepared graph (validated, shapes inferred) partitioned into groups: each group becomes one
// Halide pipeline, compiled once when the Executor is built (the distinct ones on every core at once;
// JIT, or loaded from and stored in the kernel cache with ExecutorOptions::kernel_cache), and run in
// topological order.
//
//   Graph g = load_model("models/conv_bias_relu_maxpool.json");
//   Executor ex(g, Executor::unfused_partition(g));
//   auto outputs = ex.run({{"input", input_buffer}});
//
// Each group is scheduled by hfuse's templates (the schedule composer) or, on request, by one of
// Halide's autoschedulers; whole_model_plan() makes the entire model one group, so an autoscheduler
// makes every fusion choice itself (a baseline for the planner):
//
//   ExecutorOptions opts;
//   opts.schedule = ScheduleSource::Adams2019;
//   Executor whole(whole_model_plan(g), opts);
//
// Tensors cross the API as TensorBuffers: dense Halide buffers whose extents are the ONNX dims
// reversed (NCHW (N, C, H, W) -> extents (W, H, C, N)), i.e. exactly the memory of a row-major NCHW array.
#pragma once

#include "hfuse/fused_graph.h"
#include "hfuse/graph.h"
#include "hfuse/target.h"

#include <Halide.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace hfuse {

using TensorBuffer = Halide::Buffer<float>;

TensorBuffer make_tensor_buffer(const Shape &shape);
Shape shape_of(const TensorBuffer &buffer);
// Copies a row-major array of num_elements(shape) floats into a new buffer.
TensorBuffer tensor_from_data(const Shape &shape, const float *data);
// The seed of the data hfuse generates for the i-th model input when none is given (`hfuse run`
// without --input, measure_undecided_merges), and that input: uniform in [-1, 1], shaped as `input`.
uint64_t default_input_seed(size_t index);
TensorBuffer generated_input(const GraphInput &input, size_t index);

// Who schedules each group's pipeline: hfuse's templates (the schedule composer, honouring the plan's
// placements and "schedule" parameters) or one of Halide 14's autoschedulers, which sees the group's
// Funcs unscheduled and decides everything itself. Groups a backend claimed keep the backend's lowering.
enum class ScheduleSource { Templates, Mullapudi2016, Adams2019, Li2018 };

// "templates", "mullapudi2016", "adams2019", "li2018".
const char *to_string(ScheduleSource s);
// Parses the names above; throws an Error listing them otherwise.
ScheduleSource parse_schedule_source(const std::string &name);

// Who runs the parallel loops of JIT-compiled pipelines: OpenMP's static schedule (each thread a
// fixed contiguous share of a loop's tasks, the same every run, so a core reads back from its own
// cache what it wrote; 3x3 convs 3-9% faster on 2 Zen 5 cores) or Halide's own thread pool (tasks to
// whichever thread asks next; the caller takes tasks itself, so a small loop costs little more than
// run serially, where OpenMP's fork and join cost 3.5 us on that machine). Auto: every group on OpenMP
// for a model of at least exec::kOpenMPMinFlops (1 MFLOP), on Halide's pool below (the MLP's 784->256
// layer in 3 tasks: 12.8 us a run on OpenMP, 7.2 on Halide's pool). One runtime a model: each keeps
// its idle threads waiting for work, and with both in use they take turns on the same cores
// (MobileNet-V3's squeeze-excite Mul, 0.29 MFLOP on Halide's pool between OpenMP groups, 2 threads:
// 0.08-0.11 ms a run, 0.05 with every group on OpenMP). All use set_num_threads()'s count. Libraries from
// `hfuse compile` choose theirs by the model's FLOPs the same way (ModelPipelineOptions).
enum class ParallelRuntime { Auto, OpenMP, Halide };

// "auto", "openmp", "halide".
const char *to_string(ParallelRuntime r);
// Parses the names above; throws an Error listing them otherwise.
ParallelRuntime parse_parallel_runtime(const std::string &name);

struct ExecutorOptions {
    Halide::Target target = host_target();
    ScheduleSource schedule = ScheduleSource::Templates;
    // Cores an autoscheduler plans for; <= 0: HL_NUM_THREADS if set (see set_num_threads), else every core.
    int parallelism = 0;
    // A group whose autoscheduled pipeline Halide fails to schedule or compile (Li2018 vectorizes a
    // reduction whose extent is not a multiple of the vector width with an atomic predicated store,
    // which Halide 14 cannot compile: Softmax over 10 classes) gets the templates instead, said in
    // GroupInfo::note; false makes that an Error.
    bool fallback_to_templates = true;
    // Intermediates (values passed between groups) share storage when their lifetimes do not overlap.
    bool reuse_buffers = true;
    // With the templates: a value passed between conv_cv groups that both read and write it that way
    // is stored channel-blocked (nChw8c) with a zero halo for the consumer's padding, so neither copies
    // it (ResNet-18's 3x3 convs: the consumer's padded, blocked input copy, ~5% of each); a value whose
    // producer's tasks split each image's rows into two bands (conv_dw) is stored NCHW with each band
    // of each plane on pages of its own, so that one core's prefetcher does not pull the other core's
    // lines (src/exec/value_layout.h). False: every intermediate dense NCHW. See value_layouts().
    bool blocked_layouts = true;
    // With blocked_layouts: model inputs and outputs stored channel-blocked too, by the same rule (an
    // input where a padded conv_cv reader would copy it so; an output its producer can write so), as
    // an expert oneDNN user takes the layouts its primitives pick (format_tag::any) and reorders once
    // outside the hot path. run() then takes and returns those values in their storage: make such an
    // input with pack_input() (run() refuses any other buffer, and a halo that is not zero), and read
    // such an output with unpack_output(); value_layouts() names them. False: model inputs and outputs
    // are dense NCHW.
    bool blocked_io = false;
    // A Concat that is a group of its own is computed in place where its values allow it: its inputs'
    // producers write straight into their slices of its output, and it never runs (batch 1, dense
    // intermediates; src/exec/concat_in_place.h). GroupInfo::schedule_template is then "in_place".
    // False: every Concat group copies its inputs.
    bool concat_in_place = true;
    ParallelRuntime parallel_runtime = ParallelRuntime::Auto;
    // The persistent kernel cache (src/exec/kernel_cache.h): each distinct group is looked up there by
    // everything that decides its code and loaded instead of compiled, or compiled ahead of time and
    // stored for the next process. Off by default in the library (the `hfuse` commands turn it on).
    // Groups a backend lowers with extern calls are never cached. Needs `cc` to link.
    bool kernel_cache = false;
    std::string kernel_cache_dir;  // empty: exec::default_kernel_cache_dir() ($HFUSE_CACHE_DIR, ...)
    int64_t kernel_cache_max_bytes = int64_t{2} << 30;
    // Threads that compile distinct groups at once (each group's pipeline is lowered and scheduled
    // in plan order, then compiled on one of them); <= 0: one per core.
    int compile_threads = 0;
};

// A group as the executor runs it.
struct GroupInfo {
    std::string name;       // the plan's group name
    std::string master;     // the node that leads it
    int members = 0;        // nodes it computes, recomputed copies included
    std::string schedule;   // who scheduled it: "templates", an autoscheduler ("adams2019"), "backend:<id>"
    std::string note;       // why that is not ExecutorOptions::schedule (a fallback), else empty
    double compile_ms = 0;  // scheduling and JIT-compiling its pipeline (shared by identical groups,
                            // compiled once: each of them shows that one time); Halide's shared
                            // runtime apart (Executor::runtime_compile_ms)
    ParallelRuntime parallel_runtime = ParallelRuntime::Halide;  // who runs its parallel loops (never Auto)
    // The template that scheduled it (its schedule's "template": "conv_xv", "simple", ...; the default
    // one where the plan gives none); `schedule` where an autoscheduler or a backend did ("adams2019",
    // "backend:<id>").
    std::string schedule_template;
    std::vector<std::string> ops;  // op types of its members, in plan order ("Conv", "Relu", ...)
    double flops = 0;              // node_flops() of its members, a recomputed copy counted once
    bool from_cache = false;       // loaded from the kernel cache (compile_ms is then the load's)
    double cold_compile_ms = 0;    // what compiling it cost when it was (from the cache: when stored)
};

// What the kernel cache did for an executor (ExecutorOptions::kernel_cache).
struct KernelCacheStats {
    bool enabled = false;
    std::string dir;
    int hits = 0;                    // distinct groups loaded from it
    int stored = 0;                  // distinct groups compiled and stored in it
    double hit_cold_compile_ms = 0;  // what the hits cost to compile when they were stored
    // Whether the cache's size was measured against its bound (ExecutorOptions::kernel_cache_max_bytes),
    // which reads every entry: only when this executor stored groups. And the least recently used
    // entries it then removed.
    bool bound_checked = false;
    int evicted = 0;
    // Problems, one line each (a corrupt entry removed and compiled again; the cache turned off for
    // the rest of the model because a kernel could not be linked).
    std::vector<std::string> notes;
};

// One group's share of a run (Executor::profile).
struct GroupProfile {
    std::string name;    // the plan's group name
    std::string master;  // the node that leads it
    int members = 0;     // nodes it computes, recomputed copies included
    double ms = 0;       // median over the profiled runs
};

struct Profile {
    std::vector<GroupProfile> groups;  // in execution order (groups nobody reads are not run, nor listed)
    double total_ms = 0;               // median time of the whole run
    int runs = 0;
};

class Executor {
public:
    // One group per node: the unfused baseline, every op its own root stage.
    static Partition unfused_partition(const Graph &graph);

    // Lowers and JIT-compiles every group; throws an Error if the partition or graph is unusable.
    Executor(const Graph &graph, const Partition &groups, ExecutorOptions options = {});
    // Runs a plan: each group one pipeline, members placed as the plan says, claimed groups lowered by
    // their backend. Groups identical in structure, shapes, weights, placement and schedule share one
    // compiled pipeline.
    explicit Executor(const FusedGraph &plan, ExecutorOptions options = {});
    ~Executor();
    Executor(Executor &&) noexcept;
    Executor &operator=(Executor &&) noexcept;

    const Graph &graph() const;
    const ExecutorOptions &options() const;
    // The groups that run, in execution order (a group whose values nobody reads is skipped).
    int num_groups() const;
    std::vector<GroupInfo> groups() const;
    // Distinct pipelines JIT-compiled (<= num_groups(): identical groups share one).
    int num_compiled() const;
    // Milliseconds this executor spent compiling Halide's shared runtime: the JIT's, before its first
    // group, or the kernel cache's, built ahead of time into a cache directory without one while the
    // groups compile. Once per process (0 when an earlier executor or pipeline did, or the cache had
    // it), and in no group's compile_ms.
    double runtime_compile_ms() const;
    KernelCacheStats kernel_cache_stats() const;

    // Bytes of storage held for intermediates (values passed between groups that the model does not
    // return), and what they would take with a buffer each (ExecutorOptions::reuse_buffers = false).
    int64_t intermediate_bytes() const;
    int64_t intermediate_bytes_unshared() const;

    // The values stored other than dense NCHW, and how: {"relu_3", "blocked 8, halo 1x1"} (channels in
    // blocks of 8, innermost; a zero border of 1 column and 1 row around each plane) or {"dw_relu6",
    // "planar, paged at row 28"} (NCHW, rows 0-27 and 28-55 of each plane on 4 KiB pages of their own).
    // Model inputs and outputs are among them only with ExecutorOptions::blocked_io (and never paged).
    std::map<std::string, std::string> value_layouts() const;
    // The model inputs and outputs among value_layouts(): what pack_input() and unpack_output()
    // convert (empty without ExecutorOptions::blocked_io).
    std::map<std::string, std::string> stored_io() const;

    // With ExecutorOptions::blocked_io, model input `name` as run() takes it, made from `nchw` (dense
    // NCHW, shaped as the model says): its channel-blocked storage with a zero halo, or `nchw` itself
    // where the input stays dense. Pack once and run many times:
    //
    //   ExecutorOptions opts;
    //   opts.blocked_io = true;
    //   Executor ex(plan, opts);
    //   std::map<std::string, TensorBuffer> in = {{"input", ex.pack_input("input", nchw)}};
    //   TensorBuffer out = ex.unpack_output("relu2", ex.run(in).at("relu2"));
    TensorBuffer pack_input(const std::string &name, const TensorBuffer &nchw) const;
    // Model output `name` as run() returned it, made dense NCHW (itself where it is returned so).
    TensorBuffer unpack_output(const std::string &name, const TensorBuffer &stored) const;

    // Runs the model. `inputs` holds one buffer per model input, by name, shaped as the model says
    // (stored as pack_input() makes it, with blocked_io; an Error names the input otherwise). Returns
    // the model outputs by name, in fresh buffers (stored, with blocked_io: see unpack_output()).
    // Intermediate storage is allocated once and reused by later runs. With `group_ms`, it receives
    // each group's wall time in milliseconds, in execution order.
    std::map<std::string, TensorBuffer> run(const std::map<std::string, TensorBuffer> &inputs,
                                            std::vector<double> *group_ms = nullptr);

    // Times `runs` runs (after one warm-up run): the median of each group and of the whole run.
    Profile profile(const std::map<std::string, TensorBuffer> &inputs, int runs = 10);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The whole model as one group, with no fusion decision of hfuse's: every node in a single group, pure
// ops placed inline (Halide's default), convs, gemms and reductions "root" (their own stage), and
// the simple schedule ("template": "simple") when run with ScheduleSource::Templates. Meant for an
// autoscheduler to make every fusion choice. With `rewrite` (the default, and `hfuse run --whole`) the
// group holds simplify(model), the same rewritten graph the planner starts from (BatchNormalization
// folded into its Conv, constants folded); otherwise the graph as written. Throws an Error naming an
// opaque node, which cannot share a pipeline.
FusedGraph whole_model_plan(const Graph &model, bool rewrite = true);

// Number of threads a run uses (Halide's pool or OpenMP, ExecutorOptions::parallel_runtime); n <= 0
// means one per core. Call before the first run.
void set_num_threads(int n);
// The threads a run uses: set_num_threads()'s count; until it is called, HL_NUM_THREADS if the
// environment has it, else one per core.
int num_threads();

}  // namespace hfuse
