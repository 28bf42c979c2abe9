// Lowering a group of nodes to Halide Funcs: inside the group, each node's outputs feed its consumers
// directly as Funcs; values entering the group become ImageParams with the static shape of the value
// (so the compiled pipeline refuses other shapes), weights become Funcs over constant buffers.
// No schedule is applied here: that is the schedule composer's job.
#pragma once

#include "exec/value_layout.h"
#include "hfuse/executor.h"
#include "hfuse/graph.h"
#include "hfuse/op_registry.h"
#include "hfuse/planner.h"

#include <Halide.h>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace hfuse::exec {

// A unique Halide name for a model value: `prefix` + the value with every character outside
// [A-Za-z0-9_] made '_' (ONNX names often hold '/', '.', ':', which Halide reserves or rejects).
std::string halide_name(const std::string &value, const std::string &prefix = "v_");

// A pure Func named `name` that copies `f` (of `rank` dims): pipeline outputs must be distinct Funcs.
Halide::Func pure_copy(const Halide::Func &f, int rank, const std::string &name);

// Pins every dim of `f`'s output buffer to `shape`, dense row-major: the compiled pipeline then refuses
// any other buffer, and addresses fold to constants.
void pin_output_shape(Halide::Func f, const Shape &shape);
// The same for an input.
void pin_input_shape(Halide::ImageParam p, const Shape &shape);

// Weights as Halide buffers (ONNX dims reversed), converted once per graph and shared by all groups.
using WeightBuffers = std::map<std::string, TensorBuffer>;
WeightBuffers make_weight_buffers(const Graph &graph);

struct LoweredNode {
    const Node *node;
    Lowered funcs;
};

struct LoweredGroup {
    std::vector<std::string> input_values;       // activations read from outside the group, in first-use order
    std::vector<Halide::ImageParam> params;      // one per input value
    std::vector<std::string> output_values;      // values used outside the group or returned by the model
    std::vector<Halide::Func> output_funcs;      // one per output value (always distinct Funcs)
    std::map<std::string, Halide::Func> values;  // every value the group defines
    std::vector<LoweredNode> nodes;              // in topological order (empty for backend groups)
    std::map<std::string, Halide::JITExtern> jit_externs;  // extern functions a backend's Funcs call
    // Constants (weights, packed weights) read through ImageParams, with the buffers to bind to them,
    // where the group was lowered inside an ops::ConstantParams; else empty (compiled in).
    std::vector<Halide::ImageParam> constant_params;
    std::vector<TensorBuffer> constant_values;
    // The values it reads or hands out stored channel-blocked (the rest: dense NCHW). Such an input's
    // ImageParam is the storage, halo included; such an output's Func is in storage order,
    // (bi, x, y, cb, n), its buffer the storage's interior.
    ValueLayouts layouts;
};

// Values already defined as Funcs outside the group (earlier groups of one whole-model pipeline):
// the group reads them directly instead of through ImageParams.
using BoundValues = std::map<std::string, Halide::Func>;

// `nodes` are in topological order. `live_out` names the values needed after the group. Values in
// `bound` are read as those Funcs; every other activation entering the group becomes an ImageParam.
// The Convs and Gemms named in `lowerings` are lowered in that form (compose::op_lowerings() says
// which their schedules need), the others directly. Values in `layouts` (choose_value_layouts) are
// read and handed out in that storage; ops see them as their values (an op may read the storage:
// BlockedInput).
LoweredGroup lower_group(const Graph &graph, const std::vector<const Node *> &nodes,
                         const std::set<std::string> &live_out, const WeightBuffers &weights,
                         const BoundValues &bound = {}, const OpLowerings &lowerings = {},
                         const ValueLayouts &layouts = {});

// A group a backend pattern claimed: the backend builds its single output from the group's inputs.
LoweredGroup lower_backend_group(const Graph &graph, const std::vector<const Node *> &nodes,
                                 const std::set<std::string> &live_out, const WeightBuffers &weights,
                                 const BackendPattern &pattern);

}  // namespace hfuse::exec
