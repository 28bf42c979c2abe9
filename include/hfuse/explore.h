// Design-space exploration: which fusion plan, with which schedule, is fastest for a model, and why.
//
// run_exploration() builds candidates — a plan file plus who schedules it (hfuse's templates, with their
// default or varied parameters, or one of Halide's autoschedulers per group; the baselines also the
// whole model as one pipeline) —, times each one in a child process (`hfuse bench --plan ... --json`:
// the same harness as `hfuse bench`, with a timeout, crash isolation and parallel jobs), and writes
// to the output directory:
//
//   results.json     {"model", "machine", "options", "candidates": [{"plan", "schedule", "params",
//                    "groups", "compile_s", "median_ms", "status", "error", ...}]}, rewritten after
//                    every candidate (so --resume can skip the finished ones)
//   results.csv      the same rows
//   best_plan.json   the fastest candidate the plan format can express, as a plan file
//   tuning.json      best_plan.json per segment, for `--tuned` on any model sharing them (tuning_record.h)
//   plot.svg         time against number of groups, baselines marked, the best highlighted
//   report.md        the table, and what fused where and why the best won
//   candidates/      every candidate's plan file and the child's stdout and stderr
//
//   ExploreOptions o;
//   o.model = "models/resnet_block.json";
//   o.out_dir = "/tmp/ex";
//   o.hfuse_binary = "/path/to/hfuse";
//   ExploreSummary s = run_exploration(o);
#pragma once

#include "hfuse/executor.h"
#include "hfuse/model_io.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hfuse {

struct ExploreOptions {
    std::string model;                    // the model file (.json or .onnx)
    LoadOptions load;                     // input shapes an ONNX model leaves dynamic
    std::vector<std::string> model_args;  // the same for the children: "--shape", "NAME=DIMS", ...
    std::string out_dir;                  // where the results go (created)
    std::string hfuse_binary;             // the hfuse CLI that times each candidate (`bench --json`)
    // Candidates to evaluate, the baselines included; the baselines run even past it.
    int budget = 24;
    // Who may schedule: Templates (default and varied parameters) and the autoschedulers, each per
    // group on a plan and on the whole model (the --whole baselines).
    std::vector<ScheduleSource> sources = {ScheduleSource::Templates, ScheduleSource::Mullapudi2016,
                                           ScheduleSource::Adams2019, ScheduleSource::Li2018};
    int jobs = 1;            // candidates timed at once (they share the cores)
    uint64_t seed = 1;       // the search's and the parameter variation's random choices
    double timeout_s = 300;  // per candidate: compile and timed runs together
    // Per candidate: the address space its process may take (MB; 0: no bound). A candidate that needs
    // more fails with an error saying so, and the exploration goes on: a whole-model autoscheduler
    // baseline took more than 13 GB on ResNet-18 (Adams2019), per group 5 GB.
    int64_t max_memory_mb = 8192;
    // Candidates an autoscheduler schedules (per group, and the --whole baselines) have bounds of their
    // own, the smaller of these and the two above: Adams2019 on a whole network can grow past any
    // machine's memory and take minutes before it does. One that passes them is recorded as skipped.
    int64_t autoschedule_max_memory_mb = 1536;
    double autoschedule_timeout_s = 120;
    // Seconds this run may take (0: no limit): past it no candidate is started and the run ends as the
    // budget would have ended it (confirmation left out), writing every output; --resume continues.
    double time_limit_s = 0;
    bool resume = false;  // continue from out_dir/results.json
    int runs = 20;        // timed runs per candidate (after one warm-up)
    // Candidates load the groups they share from the kernel cache (ExecutorOptions::kernel_cache)
    // instead of compiling each again; false: every candidate compiles all of its groups.
    bool kernel_cache = true;
    int confirm_rounds = 3;                // re-time the top candidates and baselines, alternating (0: no)
    std::vector<std::string> extra_plans;  // plan files to evaluate too (with the templates)
    size_t exhaustive_limit = 256;         // more legal plans than this: plans composed from segments
    bool progress_bar = false;             // a bar with an ETA (a terminal); otherwise one line per candidate
};

struct ExploreSummary {
    int evaluated = 0;  // candidates in results.json (resumed ones included)
    int ok = 0, errors = 0, timeouts = 0;
    int distinct_plans = 0;            // distinct plan files (partition, placements, template parameters)
    int distinct_partitions = 0;       // distinct groupings of the nodes
    std::vector<std::string> sources;  // schedule sources with at least one candidate that ran
    bool exhaustive = false;           // every legal plan was considered (else composed from segments)
    size_t legal_plans = 0;            // plans considered (all of them when exhaustive)
    bool has_best = false;
    double best_ms = 0;    // the best candidate's median (confirmed when confirm_rounds > 0)
    std::string best_key;  // its key in results.json
    std::string best_schedule;
    bool has_best_plan = false;  // best_plan.json was written
    bool has_tuning = false;     // and tuning.json (not when best_plan.json is over the graph as written)
    double best_plan_ms = 0;
    bool interrupted = false;  // SIGINT/SIGTERM stopped it (results so far are saved: --resume)
    bool out_of_time = false;  // --time-limit ended it before the budget did (every output written)
};

// Runs the exploration. Throws an Error for a bad model, an unusable output directory or bad
// options; a candidate that fails or times out is recorded, never thrown.
ExploreSummary run_exploration(const ExploreOptions &options);

}  // namespace hfuse
