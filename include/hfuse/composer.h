// The schedule composer's public face: the schedule parameters of a plan. Each group's "schedule"
// names its template and that template's parameters (tile sizes, vector width, reduction order),
// chosen from the shapes and the target; a plan file that carries them pins them.
//
//   FusedGraph plan = with_default_schedules(plan_fusion(g, {load_rules("x86")}), host_target);
//   plan.groups[0].schedule["tile_c"] = 6;   // then run it, or write_plan() it
#pragma once

#include "hfuse/fused_graph.h"

#include <Halide.h>
#include <nlohmann/json.hpp>

namespace hfuse {

nlohmann::json default_schedule_params(const Graph &graph, const FusedGroup &group, const Halide::Target &target);

// Fills every group's "schedule" that is still empty with the defaults.
FusedGraph with_default_schedules(FusedGraph plan, const Halide::Target &target);

}  // namespace hfuse
