// A network cut into segments, so that explore searches each segment's fusion choices on its own
// rather than the plans of the whole network (whose number grows exponentially with its size).
//
// A cut lies between two nodes of the topological order where exactly one value crosses it (the
// value between two residual blocks, a stage's output). Cuts are taken where that value has several
// readers (a fusion never spans it: the value is materialised for them all) and, where a segment would
// still exceed `max_nodes`, also at single-reader cuts (a fusion across such a cut is then not
// searched). Segments with the same signature (the same ops, attributes and shapes, wired alike;
// other weights) are the repeated blocks of a stage: their search is done once and its result
// applied to all of them.
#pragma once

#include "hfuse/graph.h"

#include <string>
#include <vector>

namespace hfuse::explore {

struct Segment {
    int begin = 0, end = 0;  // the nodes [begin, end) of the graph's topological order
    std::string signature;   // equal for segments computing the same function of the same shapes
};

// The segments of `graph` (validated, shapes inferred), in order, covering every node; one segment
// when it has no cut. `max_nodes` >= 1.
std::vector<Segment> cut_segments(const Graph &graph, int max_nodes);

// The nodes (indices into graph.nodes, in topological order), their attributes and the types of what
// they read and write, values named by their order of appearance: equal for the repeated blocks of a
// stage. Weights count by type (their values are another block's), but integer weights (shapes, axes,
// pads) by value.
std::string nodes_signature(const Graph &graph, const std::vector<int> &nodes);

// The segment's nodes as a graph of their own: the values they read from earlier nodes or the
// graph's inputs as inputs, the weights they read, the values read after the segment (or graph
// outputs) as outputs; names and types as in `graph`.
Graph segment_graph(const Graph &graph, const Segment &segment);

}  // namespace hfuse::explore
