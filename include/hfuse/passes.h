// Graph passes: functions from Graph to Graph. The front end runs validate() then infer_shapes().
#pragma once

#include "hfuse/graph.h"

namespace hfuse {

// Checks names, op types, arity, attribute names, that every input is defined, that outputs exist,
// and that the graph is acyclic; returns the graph with nodes in a stable topological order.
// Throws an Error naming the node and field of the first problem; a cycle names the nodes on it.
Graph validate(Graph graph);

// Fills graph.types for every value using each op's shape inference (and its attribute checks).
Graph infer_shapes(Graph graph);

// validate + infer_shapes.
Graph prepare(Graph graph);

}  // namespace hfuse
