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

// --- Rewrites run before fusion planning (each takes and returns a prepared graph) ---

// Replaces every node whose inputs are all weights by a weight holding its value (evaluated with the
// Halide executor). Model outputs stay computed by nodes.
Graph fold_constants(Graph graph);

// Removes Identity and Dropout (inference) nodes, rewiring consumers to their input; the removed
// node's name goes to the `absorbed` list of the node that now produces the value.
Graph remove_identities(Graph graph);

// Folds a BatchNormalization that follows a Conv or Gemm with constant weights (and constant BN
// parameters), whose output feeds only that BatchNormalization, into the weights and bias. Other
// BatchNormalizations stay: they lower to a per-channel scale+shift (one multiply-add per element).
Graph fold_batchnorm(Graph graph);

// Drops the kernel taps of each 2-D Conv (constant weights, explicit pads) that read only zero padding
// -- a dilation reaching past the input: taps dead for every output go (DeepLab's 3x3s of rate 24 and
// 36 on a 14x14 map become 1x1s); where bands of outputs read different taps and the bands halve the
// work, the conv is split into one conv per band pair over a Slice of the input, joined by Concats.
// The outputs stay the same values.
Graph drop_padding_taps(Graph graph);

// Removes nodes whose values no node reads and the model does not return (and weights only they read).
Graph remove_dead_nodes(Graph graph);

// Replaces LayerNorm written as ReduceMean, Sub, Pow (or Mul), ReduceMean, Add, Sqrt, Div [, Mul by a
// weight] [, Add of a weight] over trailing axes by one LayerNormalization node (the pattern's
// intermediates read by the pattern alone, its epsilon, scale and bias weights).
Graph fuse_layer_norm(Graph graph);

// Replaces exact GELU written as Div(x, sqrt 2) (or Mul by 1 / sqrt 2), Erf, Add 1, and the products
// with x and 0.5 by one Gelu node.
Graph fuse_gelu(Graph graph);

// The pre-planning pipeline: remove_dead_nodes, fold_constants, remove_identities, fold_batchnorm,
// drop_padding_taps, fuse_layer_norm, fuse_gelu.
Graph simplify(Graph graph);

}  // namespace hfuse
