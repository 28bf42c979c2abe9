// The position view of a group: a group whose every member reads each input position only at the
// output position it computes (a pointwise conv and its elementwise epilogue) computes the same on its
// tensors viewed as one row of all their positions, (N, C, H, W) as (N, C, 1, H * W): the memory is
// the same dense NCHW, only the Halide dims differ. On that row the conv's register tile runs along
// the positions without breaking at row ends, and the epilogue is applied to the accumulators and
// stored from them (conv_xv), where over (x, y) rows of 28 either waste lanes or, flattened inside
// the group (conv_flat), go through a strip buffer first.
//
// 1x1 128->256 + BN + ReLU at 28x28, Zen 5, 2 threads, interleaved: conv_flat 0.143-0.147 ms, the
// view under conv_xv 2 vectors x 8 channels 0.128-0.137 ms.
//
//   if (position_view_blocker(g, grp).empty()) {
//       Graph view = position_view(g, grp);   // the group's nodes over (N, C, 1, H * W)
//       ... lower and compose the group on `view`, hand it its values' buffers reshaped()
//   }
//
// A plan turns it on per group with "flatten_positions": true in the schedule (the defaults do for a
// pointwise conv whose rows conv_flat would tile); the other parameters then describe the view
// (tile_y 1, rows of H * W).
#pragma once

#include "hfuse/executor.h"
#include "hfuse/fused_graph.h"
#include "hfuse/graph.h"

#include <nlohmann/json.hpp>

#include <string>

namespace hfuse::compose {

// Why the group cannot run on its position view ("" when it can): a member other than a 1x1,
// stride-1, unpadded Conv, a BatchNormalization or an elementwise or binary broadcast op; an operand
// or output whose last two dims are neither the group's (H, W) (the largest of its members' outputs:
// the master's, or the plane a squeeze-and-excitation gate multiplies) nor (1, 1). (A group one row
// high has a view: itself.)
std::string position_view_blocker(const Graph &graph, const FusedGroup &group);

// The group's plane: the largest (H, W) of its members' 4-D outputs, the master's unless a member's
// is larger (a conv on a 1x1 plane whose gate multiplies a larger one: a squeeze-and-excitation
// block's last group). The master's last dims as they are where its output has fewer than two.
Shape group_plane(const Graph &graph, const FusedGroup &group);

// The group's own graph on its position view: its nodes, the weights they read, its activations
// entering as inputs, every value of the group's (H, W) with those dims as (1, H * W). Values keep
// their names; source and name are the model's, so errors still name its file.
Graph position_view(const Graph &graph, const FusedGroup &group);

// Whether a schedule asks for the view: "flatten_positions": true (false or absent: no). Throws an
// Error naming the field if it is not a boolean.
bool flattens_positions(const nlohmann::json &schedule);

// `shape` as the view has it: the last two dims (H, W) as (1, H * W) when they are `plane`, else as is.
Shape as_position_row(const Shape &shape, const Shape &plane);

// A buffer viewed as a tensor of `shape` (as many elements, ONNX order), no copy: a value's buffer as
// its view in position_view() has it. The buffer's dims that one of `shape`'s merges must be contiguous
// (a paged value's planes, exec/value_layout.h, are: the view's channel stride is the buffer's).
TensorBuffer reshaped(const TensorBuffer &buffer, const Shape &shape);

}  // namespace hfuse::compose
