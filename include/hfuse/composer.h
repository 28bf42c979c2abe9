// The schedule composer's public face: the schedule parameters of a plan. Each group's "schedule"
// names its template (simple, conv_xv, conv_dw, conv_flat, conv_cv, gemm_nv, gemm_dot, pool, reduction,
// attention: see schedules/README.md) and that template's parameters (tile sizes, vector width, reduction split,
// parallel split), chosen from the master's kind, the shapes and the target (vector width, vector
// registers); a plan file that carries them pins them.
//
//   FusedGraph plan = with_default_schedules(plan_fusion(g, {load_rules("x86")}), host_target);
//   plan.groups[0].schedule["tile_c"] = 6;   // then run it, or write_plan() it
#pragma once

#include "hfuse/fused_graph.h"

#include <Halide.h>
#include <nlohmann/json.hpp>

namespace hfuse {

// The template and parameters the composer would choose for `group`. A group no template fits gets
// {"template": "simple", ..., "why": "<the reason>"}.
nlohmann::json default_schedule_params(const Graph &graph, const FusedGroup &group, const Halide::Target &target);

// Fills every group's "schedule" that is still empty with the defaults; then, its readers' schedules
// known, a conv group whose readers would all take its output channel-blocked, one of them copying
// it so otherwise, takes the defaults of a conv whose output is read blocked (conv_cv: its tiles
// stored as they lie, the reader's copy gone; schedules/README.md).
FusedGraph with_default_schedules(FusedGraph plan, const Halide::Target &target);

// Checks each group's schedule (but a backend's) as the executor and compiled models use it: lowers
// and composes the group for `target`, compiling nothing. Throws the first misfit's Error, located by
// in_group() (a plan file's: "p.json: group 'g0': node 'conv' (Conv): field 'schedule.tile_positions':
// 99 is outside [1, 16] for these shapes"). `hfuse plan` checks its plans so.
void check_schedules(const FusedGraph &plan, const Halide::Target &target);

}  // namespace hfuse
