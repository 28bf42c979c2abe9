// Node-level views of a graph shared by the planner's pieces.
#pragma once

#include "hfuse/fused_graph.h"
#include "hfuse/graph.h"
#include "hfuse/op_registry.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace hfuse::planner {

// Producer/consumer adjacency between nodes (indices into graph.nodes, which are topologically sorted).
struct NodeGraph {
    const Graph *graph;
    std::map<std::string, int> index;                    // node name -> index
    std::vector<std::vector<int>> producers, consumers;  // distinct, ascending
    std::vector<bool> is_model_output;                   // the node produces a model output

    explicit NodeGraph(const Graph &g);
};

// Precedence for leading a group: complex-out-fusable > window > reduction > injective > broadcast >
// elementwise (opaque ops never share a group, ranked highest so they always lead their own).
int kind_rank(PatternKind kind);

// Kinds cheap enough to recompute in every reader: elementwise, broadcast, injective.
bool is_cheap(PatternKind kind);

// A Conv whose output pixel reads only its input pixel: 1x1 kernel, stride 1, no padding, one group.
bool is_pointwise_conv(const Graph &g, const Node &n);

// A 2-D depthwise Conv (one group per channel, as many outputs as inputs), any stride, with a leading
// pad: what conv_dw computes per channel from a padded plane, a pointwise producer included.
bool is_padded_depthwise_conv(const Graph &g, const Node &n);

// What feeds a padded depthwise conv that conv_dw can compute per task: a pointwise conv, and the
// elementwise ops of the depthwise input's shape between them, whose activation operands all come
// from that conv or from one another (ReLU6 and a bias as a chain; SiLU's x * sigmoid(x) and
// HardSwish's x * hardsigmoid(x) as a diamond), each read only inside the feed or by the depthwise
// conv, none a model output. The planner fuses exactly this; the composer schedules exactly this.
struct PointwiseFeed {
    int conv = -1;          // the pointwise conv, or -1 when `dw` has no such feed
    std::set<int> between;  // the elementwise ops from it to the depthwise conv
};
PointwiseFeed pointwise_feed(const NodeGraph &ng, int dw);

// Whether a value of `node` is needed outside `group` (by another node or as a model output).
bool is_live_out(const NodeGraph &ng, int node, const std::set<int> &group);

// Whether a path of producer -> consumer edges leads from node `from` to node `to`.
bool reaches(const NodeGraph &ng, int from, int to);

// `g` without its weights' values (their types kept): enough to check a plan of it (check_plan reads
// no values), so a trial merge does not copy the weights.
Graph without_weight_values(const Graph &g);

// A partition of a graph's nodes by index (indices into graph.nodes), as the plan searches
// (enumerate_plans, hfuse explore) walk them.
using IndexPartition = std::vector<std::vector<int>>;

// `p` with each group sorted and the groups sorted by their first node: one form per partition.
IndexPartition canonical(IndexPartition p);

// `p` as a plan of `g` (rewritten, groups of node names, as check_plan orders and places them), or
// false when check_plan rejects it.
bool partition_to_plan(const Graph &g, const IndexPartition &p, FusedGraph &out);

}  // namespace hfuse::planner
