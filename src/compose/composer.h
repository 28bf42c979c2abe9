// The schedule composer: schedules one lowered group. The template of the master's kind (schedules/,
// listed in schedules/README.md) tiles the group's output and computes the master per tile:
// Conv -> conv_xv / conv_dw / conv_flat / conv_cv, Gemm/MatMul -> gemm_nv / gemm_dot, MaxPool/AveragePool -> pool,
// Softmax/GlobalAverage/MaxPool -> reduction. Elementwise epilogues stay inlined into the tile, a pool
// after a conv becomes the tiled output. Injective/elementwise-led groups, and groups no template fits
// (the defaults then say why), get the simple schedule: inlined members inline, everything else its
// own root stage. Members a template does not reach (producers inside the group, other outputs) get
// the simple schedule too, but for a pointwise conv feeding a depthwise master, which conv_dw
// computes per task (lowered flat: see op_lowerings).
//
// The parameters a template uses are recorded in the plan ("schedule"), so a plan file pins them and
// an explorer can vary them; default_schedule_params() computes them from shapes and target alone. A
// schedule that does not fit (unknown template or parameter, a value out of range, a template of
// another kind) is an Error naming "schedule.<param>" and the master node.
#pragma once

#include "exec/group_lowering.h"
#include "hfuse/composer.h"
#include "hfuse/fused_graph.h"

#include <Halide.h>
#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>

namespace hfuse::compose {

// The graph `group` is lowered (exec::lower_group, with op_lowerings) and composed on: `graph` itself,
// or, when its schedule (given, or the default) says "flatten_positions", the group's position view
// (position_view.h), built into `view`; its values' buffers are then reshaped to the view's shapes.
// Throws an Error naming schedule.flatten_positions and the master if the group has no such view.
const Graph &group_graph(const Graph &graph, const FusedGroup &group, const Halide::Target &target, Graph &view);

// The ops of `group` its schedule (given, or the default) needs lowered in another form than the
// direct one (conv_flat's flattened rows, conv_cv's channel blocks with packed weights, gemm_nv's
// panels of a constant B): pass them to exec::lower_group before compose_group.
OpLowerings op_lowerings(const Graph &graph, const FusedGroup &group, const Halide::Target &target);

// What a group, as its schedule (given, or the default) places it, can read and write channel-blocked
// (exec/value_layout.h): the facts exec::choose_value_layouts() decides from.
struct BlockedExchange {
    // conv_cv tiling the conv's epilogue (a pool on it included): the value it hands out (its only
    // one), which it can store channel-blocked in any block dividing both `vector_width` and
    // `channel_block`.
    std::string output;
    int vector_width = 0, channel_block = 0;
    // conv_cv: its conv (the master), whose input X it reads by blocks of `input_block` channels (0:
    // planar), and how far the conv's windows reach past X's edges (its pads, or less where a stride
    // never reaches the end).
    std::string conv;
    int input_block = 0;
    int reach_x = 0, reach_y = 0;
    // conv_cv tiling the conv's epilogue: the epilogue's nodes, which read what they read from outside
    // the group (a residual Add's other operand) per output element, as the tile stores it.
    std::set<std::string> epilogue;
};
BlockedExchange blocked_exchange(const Graph &graph, const FusedGroup &group, const Halide::Target &target);

// Whether `reader` (a group's BlockedExchange) can read `value` channel-blocked where its node `node`
// reads it: as its conv's input X (by the blocks it names, or unpadded, any block), or in its
// epilogue.
bool reads_blocked(const BlockedExchange &reader, const Node &node, const std::string &value);

// A group whose parallel tasks split each image's rows of the value it hands out into two even bands
// (conv_dw with "row_bands": 2): that value and the first row of the second band, where
// exec::choose_value_layouts() starts a page in each plane. {"", 0} for any other group.
struct RowBandSplit {
    std::string value;
    int64_t row = 0;
};
RowBandSplit row_band_split(const Graph &graph, const FusedGroup &group, const Halide::Target &target);

// Schedules the group; may replace group.output_funcs (with copies that tile the master's output).
void compose_group(const Graph &graph, const FusedGroup &group, exec::LoweredGroup &lowered,
                   const Halide::Target &target);

// Lowers `group` of `plan` (over `graph`, whose weights are `weights`) as its schedule needs it
// (group_graph, op_lowerings) and composes it, compiling nothing: throws the Error (or
// Halide::Error) a schedule that does not fit meets, unlocated (in_group() locates it). Nothing for a
// backend's group or one whose values nobody reads.
void lower_and_compose(const Graph &graph, const FusedGraph &plan, const FusedGroup &group,
                       const exec::WeightBuffers &weights, const Halide::Target &target);

}  // namespace hfuse::compose
