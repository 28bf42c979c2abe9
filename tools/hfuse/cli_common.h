// Pieces shared by the hfuse commands: binding tensors to files, choosing a plan, checking and timing.
#pragma once

#include "hfuse/executor.h"
#include "hfuse/fused_graph.h"
#include "hfuse/graph.h"
#include "hfuse/model_io.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace hfuse::cli {

// A usage error: reported like CLI11's own, exit code 2.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A subcommand: its CLI11 parser and what runs when it is chosen (returns the exit code).
struct Command {
    CLI::App *app;
    std::function<int()> run;
};

Command add_cache(CLI::App &app);
Command add_info(CLI::App &app);
Command add_plan(CLI::App &app);
Command add_explain(CLI::App &app);
Command add_run(CLI::App &app);
Command add_bench(CLI::App &app);
Command add_demo(CLI::App &app);
Command add_compile(CLI::App &app);
Command add_explore(CLI::App &app);
Command add_import(CLI::App &app);

// The MODEL argument (.json or .onnx) and --shape NAME=DIMS (repeatable), which fixes the shape of a
// model input with dynamic dims (ONNX); shared by the commands that load a model.
struct ModelArg {
    std::string path;
    std::vector<std::string> shapes;

    void add(CLI::App *cmd);
    LoadOptions options() const;  // a malformed --shape is a UsageError
    Graph load() const { return load_model(path, options()); }
};

// "NAME=FILE" binds a file to a named tensor; a bare "FILE" is allowed when there is exactly one.
std::map<std::string, std::string> bind_files(const std::vector<std::string> &args,
                                              const std::vector<std::string> &names, const std::string &flag);

// Model inputs from --input arguments; generated (and said on stdout unless quiet) where none is given.
std::map<std::string, TensorBuffer> load_inputs(const Graph &g, const std::vector<std::string> &args, bool quiet);
// Says on stdout, one line each, the model inputs load_inputs generates for `args` (those it names no
// file for): their shape and seed.
void say_generated_inputs(const Graph &g, const std::vector<std::string> &args);
// Dense NCHW model inputs as `ex` takes them, and its outputs made dense NCHW (ExecutorOptions::blocked_io).
std::map<std::string, TensorBuffer> pack_inputs(const Executor &ex, const std::map<std::string, TensorBuffer> &nchw);
std::map<std::string, TensorBuffer> unpack_outputs(const Executor &ex,
                                                   const std::map<std::string, TensorBuffer> &stored);

void print_summary(const std::string &name, const TensorBuffer &b);

// The target a --target flag names (a Halide target string; "host..." without the features this CPU
// lacks, as host_target()); a UsageError naming the flag for anything else.
Halide::Target parse_target_flag(const std::string &text);

// "1 group", "3 groups": `n` and `noun`, plural unless n is 1.
std::string counted(long n, const std::string &noun);

// Compares executor outputs with the independent reference evaluator; true when all are within 1e-4.
bool check_against_reference(const Graph &g, const std::map<std::string, TensorBuffer> &inputs,
                             const std::map<std::string, TensorBuffer> &outputs);

// How `plan`, `run` and `bench` choose the plan they execute, and (`run`, `bench`) who schedules it.
struct PlanChoice {
    std::string plan_file;           // --plan
    std::vector<std::string> rules;  // --rules, one per round (default: x86)
    bool unfused = false;            // --unfused: the graph as written, one group per op, no rewrites
    bool whole = false;              // --whole: the rewritten model as one group (whole_model_plan)
    std::string autoschedule;        // --autoschedule: a Halide autoscheduler; "" = hfuse's templates
    bool planar = false;             // --planar: every intermediate dense NCHW (ExecutorOptions::blocked_layouts)
    bool blocked_io = false;         // --blocked-io: model inputs and outputs stored too (ExecutorOptions::blocked_io)
    bool copy_concats = false;       // --copy-concats: no Concat in place (ExecutorOptions::concat_in_place)
    std::string parallel_runtime = "auto";  // --parallel-runtime (ExecutorOptions::parallel_runtime)
    bool no_cache = false;                  // --no-cache (ExecutorOptions::kernel_cache)
    bool measure_undecided = false;         // --measure-undecided (measure_undecided_merges)
    std::vector<std::string> tuned;         // --tuned: tuning records applied to the plan (apply_tuning)

    void add_flags(CLI::App *cmd);  // --plan, --rules, --unfused, --whole, --measure-undecided, --tuned
    // --autoschedule; `what` says what the autoscheduler schedules (each group, or the whole pipeline).
    void add_schedule_flags(CLI::App *cmd, const std::string &what = "each group");
    void add_layout_flag(CLI::App *cmd);   // --planar, --blocked-io, --copy-concats
    void add_runtime_flag(CLI::App *cmd);  // --parallel-runtime, --no-cache
    // The plan, its schedule parameters chosen for `target` (default: the JIT target).
    FusedGraph make(const Graph &g) const;
    FusedGraph make(const Graph &g, const Halide::Target &target) const;
    ExecutorOptions options() const;
    // `planned` with its undecided merges measured (--measure-undecided), said on stderr; `target`
    // must be the JIT target.
    FusedGraph measured(FusedGraph planned, const Halide::Target &target) const;
    // `planned` regrouped by the --tuned records (apply_tuning), said on stderr.
    FusedGraph tuned_plan(FusedGraph planned, const Halide::Target &target) const;
    std::string describe() const;  // "x86", "tvm+x86", "x86, tuned", "plan.json", "unfused", "whole"
    std::string schedule() const;  // "templates" or the autoscheduler's name
};

// How many of Executor::value_layouts() are stored channel-blocked ("blocked ...") and how many paged
// planar ("planar, paged at row ...").
struct LayoutCounts {
    size_t blocked = 0, paged = 0;
};
LayoutCounts count_layouts(const std::map<std::string, std::string> &layouts);
// Whether a layout as Executor::value_layouts() names it is paged planar.
bool is_paged_layout(const std::string &layout);

// Says on stderr which groups an autoscheduler could not schedule (GroupInfo::note); returns their names.
std::vector<std::string> report_fallbacks(const Executor &ex);
// What the kernel cache did (Executor::kernel_cache_stats): {enabled, dir, hits, stored,
// hit_cold_compile_ms, notes}, and the same as one line of text.
nlohmann::json kernel_cache_json(const Executor &ex);
std::string kernel_cache_summary_line(const Executor &ex);

// Run times in milliseconds of `runs` runs after one warm-up run.
std::vector<double> time_runs(Executor &ex, const std::map<std::string, TensorBuffer> &inputs, int runs);

// The FMA peak of the threads runs use (num_threads()), on the vectors of Halide's JIT target
// (fma_kernel_for_target): measured when called, in a few tens of milliseconds; gflops 0 and isa ""
// where the target has neither AVX-512 nor AVX2 + FMA.
struct FmaPeak {
    std::string isa;
    int threads = 0;
    double gflops = 0;
};
FmaPeak measure_fma_peak();

// A group of a profile, with what the executor knows of it (GroupInfo): `run --profile` and
// `bench --profile` list them.
struct GroupReport {
    std::string name, master;
    std::string schedule_template;  // GroupInfo::schedule_template
    std::string ops;                // its members' op types joined by '+': "Conv+Relu+MaxPool"
    double flops = 0;
    double ms = 0;          // median over the profiled runs
    double share = 0;       // of the median run (Profile::total_ms)
    double gflops = 0;      // flops / ms
    double peak_share = 0;  // gflops / the FMA peak's (0 without a peak)
    // What compiling its kernel cost when it was compiled (from the kernel cache: when stored);
    // groups sharing one kernel each show it.
    double cold_compile_ms = 0;
};
std::vector<GroupReport> group_reports(const Executor &ex, const Profile &p, const FmaPeak &peak);
// The profile's header, the peak's line and a row per group in execution order.
void print_profile(const Profile &p, const std::vector<GroupReport> &groups, const FmaPeak &peak);

}  // namespace hfuse::cli
