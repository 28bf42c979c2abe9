// The schedule composer: schedules one lowered group. The master's template (schedules/) tiles the
// group's output and computes the master per tile; elementwise epilogues stay inlined into the tile,
// a window consumer (pool) becomes the tiled output. Groups no template covers yet get the simple
// schedule: inlined members inline, everything else its own root stage.
//
// The parameters a template uses are recorded in the plan ("schedule"), so a plan file pins them and
// an explorer can vary them; default_schedule_params() computes them from shapes and target alone.
#pragma once

#include "exec/group_lowering.h"
#include "hfuse/composer.h"
#include "hfuse/fused_graph.h"

#include <Halide.h>
#include <nlohmann/json.hpp>

namespace hfuse::compose {

// Schedules the group; may replace group.output_funcs (with copies that tile the master's output).
void compose_group(const Graph &graph, const FusedGroup &group, exec::LoweredGroup &lowered,
                   const Halide::Target &target);

}  // namespace hfuse::compose
