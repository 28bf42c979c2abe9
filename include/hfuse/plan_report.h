// Human-facing views of a plan: the table `hfuse plan` prints and a Graphviz drawing.
#pragma once

#include "hfuse/fused_graph.h"

#include <string>

namespace hfuse {

// One row per group: name, master, members with their placement, bytes of intermediates saved.
std::string plan_table(const FusedGraph &fused);

// A `dot` graph: groups as clusters, masters drawn with a double border, model inputs and outputs
// as ellipses. Render with `dot -Tsvg plan.dot -o plan.svg`.
std::string plan_dot(const FusedGraph &fused);

}  // namespace hfuse
