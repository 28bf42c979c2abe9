// Merges the planner's cost model could not price (FusedGroup::undecided), decided by measuring them:
// each such group is timed against its parts apart, both plans compiled and profiled in one process,
// alternated, and the faster kept, with both times in the group's "why".
//
//   FusedGraph plan = plan_fusion(g, {load_rules("x86")});
//   MeasuredMerges m = measure_undecided_merges(plan);
//   Executor ex(with_default_schedules(m.plan, Halide::get_jit_target_from_environment()));
//
// The plan is measured on this machine, with Halide's JIT target and thread count: write it out
// (`hfuse plan --measure-undecided -o plan.json`) to run or compile the same decisions elsewhere.
#pragma once

#include "hfuse/executor.h"
#include "hfuse/fused_graph.h"

#include <string>
#include <vector>

namespace hfuse {

struct UndecidedMeasureOptions {
    ExecutorOptions executor;  // how both plans run (templates or an autoscheduler, layouts, kernel cache)
    int chunks = 5;            // alternations of the two plans
    int runs = 4;              // profiled runs of each plan per chunk
    // Apart must be faster by this share of the merged group's time to undo the rules' merge: times of
    // one group move by a few percent between chunks.
    double margin = 0.03;
};

struct UndecidedMeasurement {
    std::string group;              // the merged group's name in the plan measured
    std::vector<std::string> part;  // the nodes the merge joined (FusedGroup::undecided)
    double merged_ms = 0;           // median of the group's time
    double apart_ms = 0;            // median of the two groups' summed time
    bool split = false;             // apart kept
};

struct MeasuredMerges {
    FusedGraph plan;  // `planned` with the groups measured faster apart split, every group's schedule as it was
    std::vector<UndecidedMeasurement> measured;
    std::vector<std::string> notes;  // undecided merges not measured, and why
};

// Measures each group of `planned` with an undecided merge (its first one: one alternative a group)
// against its two parts apart, in one plan with every such group split; a split check_plan refuses
// (a path leaving a part and coming back) stays merged, said in `notes`. Groups without an undecided
// merge keep their nodes. Throws an Error if a plan cannot be compiled or run.
MeasuredMerges measure_undecided_merges(const FusedGraph &planned, const UndecidedMeasureOptions &options = {});

}  // namespace hfuse
