// Schedule templates for a group led by a 2-D Conv (NCHW, batch any; schedules/README.md describes
// each template and its parameters): the conv is computed per tile of the group's output T (its epilogue inlined,
// a pool after it as T), with a register tile of accumulators that stays in the 16 ymm registers.
//
//  conv_xv  x vectorized; tile of tile_x_vectors x-vectors x tile_y rows x tile_c output channels.
//           3x3 64->64 at 56x56: ~84% of one core's FMA peak (AVX2, Zen 3).
//  conv_dw  depthwise: x vectorized, rows unrolled, all taps unrolled, padded plane per channel block;
//           a pointwise conv feeding it computed per task, flat, for the task's channels.
//  conv_flat  a stride-1 conv lowered over the flattened rows of its padded input (Conv's "flat"
//           part, see LowerContext::flatten_spatial): blocks of whole rows, register tiles of vectors
//           of flattened pixels x channels, so narrow or odd rows (28, 13, 7 wide) waste few lanes.
//  conv_cv  output channels in vector lanes, the input broadcast (Conv's "blocked" part, weights
//           packed when lowering): register tiles of positions x channel vectors over the flattened
//           output, any stride, any row width. 3x3 convs of ResNet-18: 79-88% of peak.
//
// Each template is one file, schedules/conv_<name>_template.cpp; what they share is in
// conv_schedule_util.h; which template a group takes is conv_choice.cpp (conv_default_params), its
// parameters conv_<name>_defaults.cpp, with the register-tile and task pricing of conv_partition.h.
#pragma once

#include "hfuse/tensor.h"
#include "schedules/schedule_params.h"

#include <Halide.h>
#include <nlohmann/json.hpp>

#include <map>
#include <string>

namespace hfuse::schedules {

struct ConvGroupShape {
    Shape input, weight, output;  // the conv's NCHW input, OIHW weight, NCHW output
    int group = 1;
    bool padded = false;                       // some window reaches outside the input (for defaults:
                                               // known to, from a leading pad)
    bool padded_x = false;                     // known to read outside across: a leading pad in x
    Shape tile_output;                         // NCHW shape of T, the Func the conv is computed per tile of
    int tile_stride_x = 1, tile_stride_y = 1;  // conv pixels per T pixel (a stride-2 pool after it: 2)
    bool pooled = false;                       // a pool after the conv (T is the pool or after it)
    bool pool_overlaps = false;                // its windows differ from its strides (overlap, gaps) or pad
    int tile_reach_y = 1;                      // the conv rows one row of T reads (a pool's window along y, dilated)
    int64_t flat_width = 0;         // stride 1, one group: the padded input's width, the row pitch of the conv
                                    // flattened (conv_flat); 0 for other convs
    bool constant_weights = false;  // the weights are a constant (conv_cv packs them when lowering)
    bool input_in_group = false;    // the conv's input is computed in its group (a prologue, inlined)
    bool input_made = false;        // the conv's input is another group's value, not a model input
    // T is a model output or read by a Concat (written into its value in place): stored NCHW whatever
    // the template, so conv_cv would transpose its tiles.
    bool output_planar = false;
    int stride_y = 1, stride_x = 1, dilation_y = 1, dilation_x = 1;  // the conv's own
    bool subsampling_pointwise = false;  // a strided 1x1 reading its input only (ops::subsampling_pointwise)
    // conv_cv: T handed out channel-blocked by this many channels (src/exec/value_layout.h), its Func
    // then in storage order (bi, x, y, cb, n); 0: T is NCHW.
    int output_block = 0;
    // conv_cv: the conv's input stored channel-blocked by this many channels (read in place, or its
    // padded copy made block for block); 0: planar.
    int input_stored_block = 0;
    // For defaults: every group reading T would read it channel-blocked from a conv_cv group (a
    // conv_cv conv's input, or its epilogue), so conv_cv would hand T on as its tiles hold it, with no
    // transpose to NCHW (compose's with_default_schedules finds it).
    bool output_read_blocked = false;
    // conv_dw: the input channels of a pointwise conv in the group (1x1, stride 1, no pads, one group)
    // whose output reaches the depthwise conv through inlined elementwise ops only (MobileNet-V2's
    // expand): computed per task, the channels the task's depthwise channels read. 0: none.
    int64_t producer_input_channels = 0;
    // For defaults: the conv's input would be stored channel-blocked by its producer's group (a
    // conv_cv group whose only reader this is), so a depthwise conv_cv reads it in place (compose's
    // with_default_schedules finds it).
    bool input_read_blocked = false;
    // For defaults: the conv's input is a planar value the group right before it made (not a
    // Concat's, whose planes groups long before wrote in part), so still in the caches where it is
    // small: conv_cv may read it in place rather than copy it blocked (compose's
    // with_default_schedules finds it).
    bool input_just_made = false;
    // For defaults: the model's weights outgrow the shared cache (TargetTraits::shared_cache_bytes), so
    // every run reads this conv's weights from memory first (compose's defaults find it).
    bool weights_from_memory = false;
};

// `shape` with the conv computed alone, at root over its whole output (T = the conv's output, no
// pool): what a template sees in root mode ("compute": "root").
ConvGroupShape conv_at_root(ConvGroupShape shape);

// Whether conv_cv writes its tile T from vectors of channels: T stored channel-blocked, or NCHW in
// squares of vw positions x vw channels (whole vectors of channels a task, rows of vw or more). A
// pool after the conv then reads the task's conv rows with channels in vector lanes, each window
// tap a dense vector load at any stride and pad.
bool conv_cv_tile_from_lanes(const ConvGroupShape &shape, int64_t channel_block, int vector_width);

// conv_cv's register tile across output channels (tile_positions x tile_c_vectors); chosen by
// conv_cv_channel_tile (conv_partition.h).
struct ChannelTile {
    int positions;  // output positions a tile holds
    int vectors;    // channel vectors a tile holds
};

// The parameters the composer records in the plan ("schedule"), chosen from the shapes and target;
// {"template": "simple"} when no conv template fits (e.g. an output narrower than one vector).
nlohmann::json conv_default_params(const ConvGroupShape &shape, const Halide::Target &target);

// Applies `params` (as from conv_default_params, possibly edited by a user) to the conv Func `conv`
// computed per tile of `tile` (the group output); for conv_flat, `conv` is the flattened conv (the
// conv's output Func a view of it, inlined). `padded_input` is undefined when there is none.
// `per_tile` are Funcs between the conv and the tile that cannot be inlined (a pool with an update
// definition): computed per tile too, vectorized along x. Throws an Error naming the bad parameter
// if `params` do not fit the shapes. `producer` (conv_dw, shape.producer_input_channels > 0) is the
// pointwise producer conv lowered flat (its "flat" part, (q, c, n) with q = y * W + x).
// conv_cv with "algorithm": "winograd": `conv` is the conv's "wino_output" part, `parts` all its
// parts (lower_winograd_conv in src/ops/conv_ops.cpp), the template places each.
void schedule_conv(Halide::Func tile, Halide::Func conv, Halide::Func padded_input,
                   const std::vector<Halide::Func> &per_tile, const ConvGroupShape &shape, const nlohmann::json &params,
                   const Halide::Target &target, Halide::Func producer = Halide::Func(),
                   const std::map<std::string, Halide::Func> &parts = {});

// The parameters of a conv template that a plan may leave out, each with the value the template then
// runs with (the way plans written before the parameter existed ran); empty for other names. The
// templates read these values from here, and `hfuse explore` steps each parameter from its value, so
// the two cannot disagree. Parameters whose absent value follows from the shapes or the target
// (strip_y, producer_vector_width, vector_width) are not listed. E.g. conv_xv's
// {"reduction_unroll": 1, "row_tasks": 1, "channel_loop": "outer", "reduction_order": "kx,ci,ky"}.
const std::map<std::string, nlohmann::json> &conv_absent_params(const std::string &template_name);

// conv_dw's tasks as two bands of each image's rows ("row_bands": 2) splitting the tile's rows evenly:
// the first row of the second band (the bands are rows [0, row) and [row, 2 * row)); 0 for any other
// split, including bands that overlap (shifted inwards over an odd number of row tiles).
int64_t conv_dw_band_row(const ConvGroupShape &shape, const nlohmann::json &params);

// conv_cv's "input_block" (0..64; 0, planar, when absent), as its lowering and its template read it.
int conv_cv_input_block(const nlohmann::json &params);

// The channel blocks conv_cv's reduction reads its input in: its blocked copy's (`input_block`), or
// else those another group stored the input in (0: planar). Its passes are read block by block
// where these divide them (schedule_cv; conv_cv_defaults chooses the passes so).
int conv_cv_read_block(int input_block, const ConvGroupShape &shape);

// Whether conv_cv's blocked copy of its input (`input_block` > 0, from a planar input) holds the
// strided positions of a strided pointwise conv alone (ops::subsampling_pointwise), as the output's
// plane, which the conv then reads in its own order.
bool conv_cv_copy_subsamples(int input_block, const ConvGroupShape &shape);

// Whether conv_cv's "algorithm" is "winograd" rather than "direct" (the default).
bool conv_cv_winograd(const nlohmann::json &params);

// Whether conv_cv's or conv_xv's input is copied per task ("input_at": "task") rather than read as
// it is, or as the padded copy made at root ("root", the default).
bool conv_input_per_task(const nlohmann::json &params);

// Whether conv_cv's register tiles of positions lie within rows padded to whole tiles
// ("position_tiles": "in_rows"; ops::ConvLowering::rows_padded) rather than along the flattened
// positions ("flat", the default, where tiles lie within rows only when they divide a row).
bool conv_cv_rows_padded(const nlohmann::json &params);

// conv_cv's Winograd output tile m, F(m x m, 3x3): "winograd_tile", 2 (the default) or 4; 0 for the
// direct conv.
int conv_cv_winograd_tile(const nlohmann::json &params);

}  // namespace hfuse::schedules
