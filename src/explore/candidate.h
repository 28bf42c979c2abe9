// A candidate of the exploration: a plan file and who schedules it, and the record of its evaluation.
// Its key (a hash of the plan's canonical form, the schedule source and --whole) identifies it across
// runs, so --resume skips what is done and two ways to reach the same plan are evaluated once.
#pragma once

#include "hfuse/fused_graph.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace hfuse::explore {

struct Candidate {
    std::string key;
    nlohmann::json plan;                 // the plan file, schedule parameters included
    std::string schedule = "templates";  // "templates" or an autoscheduler ("mullapudi2016", ...)
    bool whole = false;                  // timed as `bench --whole` (Halide makes every fusion choice)
    std::vector<std::string> baselines;  // "default", "unfused", "tvm", "whole"
    std::string origin;                  // "baseline", "plans", "autoschedule", "group_params", "segments", "user"
    std::string variant;                 // the parameters changed from the plan it came from, if any
    int groups = 0;
    double estimate_ms = 0;            // the cost model's (cost_model.h)
    int64_t bytes_between_groups = 0;  // values written by one group and read by another (or returned)
    double gflop = 0;
};

struct Evaluation {
    Candidate candidate;
    int id = -1;                 // evaluation order
    std::string status;          // "ok", "error", "timeout"
    std::string error;           // why, when not ok
    double compile_s = NAN;      // JIT compilation (and autoscheduling), from bench's compile_ms without
                                 // Halide's shared runtime (runtime_compile_ms)
    int cached_groups = -1;      // distinct groups loaded from the kernel cache (-1: not known)
    double cached_cold_s = NAN;  // what those cost to compile when they were stored
    double median_ms = NAN;      // from bench --json
    double min_ms = NAN;
    double wall_s = NAN;                       // the child's whole life: load, compile, runs
    double peak_rss_mb = NAN;                  // the child's peak resident memory
    std::vector<std::string> fallback_groups;  // groups an autoscheduler could not schedule
    std::vector<double> confirm_ms;            // medians of the confirmation rounds
    // Each group's median in its own profiled runs (`bench --profile`, candidates scheduled by the
    // templates), by group name: what a segment's groups cost under this candidate's choices.
    std::map<std::string, double> group_ms;
    // Timed against another plan in the same process (`bench --against --profile`: the group search,
    // group_search.h): that plan's key, its median and its groups' medians beside this one's.
    std::string against_key;
    double against_ms = NAN;
    std::map<std::string, double> against_group_ms;

    // median_ms, or the median of the confirmation rounds when there were some.
    double ranked_ms() const;
};

// A plan file's canonical form for identity: groups as sorted node sets with placements and (for
// the templates) their schedule, sorted; group names and the rule sets left out. `keep_rewritten`
// keeps "rewritten" (only meaningful when the rewrites change the model).
nlohmann::json canonical_plan(const nlohmann::json &plan, bool keep_schedule, bool keep_rewritten);

// 16 hex digits of a 64-bit FNV-1a hash.
std::string hash_hex(const std::string &text);

// Sets candidate.key from its plan, schedule and whole flag.
void assign_key(Candidate &c, bool rewrites_matter);

// A schedule parameter a group of plan file `plan` sets otherwise than the matching group of `against`
// (the group with the same nodes or, the fusion being other, the same master: the conv's register
// tile in a group with or without its pool). Another template is one change: "template".
struct ParameterChange {
    const nlohmann::json *group;  // the group of `plan`
    std::string text;             // "template conv_xv -> conv_cv", "block_rows 7 -> 3"
};
std::vector<ParameterChange> parameter_changes(const nlohmann::json &plan, const nlohmann::json &against);

// "[conv1 bn1 relu1] [conv2 bn2 add relu2]": the groups' nodes as in the plan file.
std::string plan_summary(const nlohmann::json &plan);
// The groups as sets of nodes only (placements and schedule aside), for counting partitions.
std::string partition_key(const nlohmann::json &plan);

// What results.json says of "params": each group's schedule for the templates, who scheduled otherwise.
nlohmann::json params_of(const Candidate &c);

nlohmann::json to_json(const Evaluation &e);
Evaluation evaluation_from_json(const nlohmann::json &j);

}  // namespace hfuse::explore
