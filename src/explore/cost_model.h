// A cost estimate of a plan before compiling it, to rank plans and spend the budget on promising ones:
// per group a roofline of its FLOPs (at the efficiency its schedule reaches: a conv or gemm under its
// template near peak, under the simple schedule far from it) and the bytes it moves (activations it
// reads from other groups, weights, values it hands out), plus a fixed cost per group (a pipeline
// call, its thread-pool fork and join). Machine numbers are rough (Zen 3 class, 3 GHz, ~20 GB/s):
// only the ranking matters.
#pragma once

#include "hfuse/fused_graph.h"

#include <Halide.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hfuse::explore {

struct GroupCost {
    std::string name;
    double flops = 0;
    int64_t bytes_in = 0;          // activations read from outside the group
    int64_t bytes_weights = 0;     // weights read
    int64_t bytes_out = 0;         // values handed out
    bool heavy_in_simple = false;  // a conv/gemm scheduled by the simple schedule (no template fits)
    double ms = 0;
};

struct PlanCost {
    std::vector<GroupCost> groups;
    double flops = 0;
    int64_t bytes_between_groups = 0;  // handed-out values: written once, read by each consumer group
    double ms = 0;
};

// `plan` with its "schedule" filled (with_default_schedules); a group without one counts as templated.
PlanCost estimate_plan(const FusedGraph &plan, const Halide::Target &target);

}  // namespace hfuse::explore
