// Lowering a whole plan into Funcs of one pipeline: each group lowered as the executor lowers it
// (exec::lower_group), reading earlier groups' values as their Funcs, and scheduled by the composer;
// values handed from one group to another are computed at root, so the groups keep their boundaries,
// and stored as the Executor stores them (channel-blocked between conv_cv groups, see value_layout.h).
// ModelPipeline (AOT, `hfuse compile`) and the Halide generators in generators/ both build on it:
//
//   exec::BoundValues inputs = {{"x", x_func}};           // one Func per model input
//   exec::LoweredModel m = exec::lower_model(plan, inputs, weights, target, /*templates=*/true);
//   Halide::Pipeline p(m.outputs);                        // the model's outputs, in model order
#pragma once

#include "exec/group_lowering.h"
#include "hfuse/fused_graph.h"

#include <Halide.h>

#include <vector>

namespace hfuse::exec {

// How lower_model returns a model output that a group computes on its position view
// (compose/position_view.h), as a row (W * H, 1, C, N) of the model's (W, H, C, N):
enum class RowOutputs {
    Copied,  // copied into the model's shape (the generators: their outputs have the model's shapes)
    AsRows,  // the row itself: the caller hands its dense buffer reshaped (no pass over the output)
};

struct LoweredModel {
    // One Func per model output, in model order: distinct Funcs (a copy where two outputs are the same
    // value or an output is a model input), each with its output buffer pinned to output_shapes.
    std::vector<Halide::Func> outputs;
    // The shape (ONNX order) each output's buffer has: the model's, or with RowOutputs::AsRows the
    // row [N, C, 1, H * W] of an output computed on a position view.
    std::vector<Shape> output_shapes;
    // The values handed between groups channel-blocked (with no halo; see value_layout.h).
    ValueLayouts layouts;
};

// The model's inputs read from `params` (one per graph input, in order): each pinned to its static
// shape (dense, row-major) and wrapped in a pure Func of its own, as lower_model wants them.
BoundValues bind_inputs(const Graph &graph, const std::vector<Halide::ImageParam> &params);

// `inputs` holds a Func for every model input. With `templates`, every group is scheduled by the
// composer (its template parameters from the plan, else the defaults for `target`); without, the
// Funcs stay unscheduled for an autoscheduler. `rows` says how outputs computed on a position view
// are returned (only the templates lower groups on a view). Throws an Error naming the group for a group claimed
// by a backend (its extern functions exist only in the process that registered them).
LoweredModel lower_model(const FusedGraph &plan, const BoundValues &inputs, const WeightBuffers &weights,
                         const Halide::Target &target, bool templates, RowOutputs rows = RowOutputs::Copied);

}  // namespace hfuse::exec
