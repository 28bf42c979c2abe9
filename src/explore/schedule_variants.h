// Varying the templates' parameters: the plans one step away from a plan (one parameter of one group
// changed: an integer by +-1 or x2 / /2, a choice to another value, a flag flipped; a parameter the
// plan leaves out, from the value its template then runs with, e.g. conv_xv's "reduction_unroll" 1 -> 2, as
// schedules::conv_absent_params gives it), each checked by lowering and scheduling its group in
// process (no JIT compilation), so a variant the composer rejects never spends the budget.
// Parameters and their ranges are the templates' own (schedules/README.md).
#pragma once

#include "hfuse/fused_graph.h"

#include <Halide.h>
#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace hfuse::explore {

// A neighbour: group `group`'s schedule replaced by `schedule`, the rest of the plan as it was (a
// variant holds no copy of the plan: a network's plan has hundreds of neighbours).
struct ScheduleVariant {
    size_t group = 0;
    nlohmann::json schedule;
    std::string description;  // "g0.tile_c 4->6"

    // Group i's schedule in the variant of `plan`.
    const nlohmann::json &schedule_of(const FusedGraph &plan, size_t i) const {
        return i == group ? schedule : plan.groups[i].schedule;
    }
    FusedGraph applied_to(FusedGraph plan) const {
        plan.groups[group].schedule = schedule;
        return plan;
    }
};

class VariantChecker {
public:
    // `graph`: the rewritten model with its weights (the groups are lowered for real).
    VariantChecker(const Graph &graph, const Halide::Target &target);
    ~VariantChecker();
    // "" if the composer schedules group `group` of `plan` as its "schedule" says, else why not.
    std::string check(const FusedGraph &plan, const std::string &group) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The neighbours of `plan` (over the checker's graph), those the checker accepts, in an order
// shuffled by `seed`.
std::vector<ScheduleVariant> schedule_neighbours(const FusedGraph &plan, const VariantChecker &checker,
                                                 const Halide::Target &target, uint64_t seed);

}  // namespace hfuse::explore
