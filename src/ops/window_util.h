// Sliding-window geometry shared by Conv (conv_ops.cpp, where it is defined) and the pools
// (pool_ops.cpp): attribute checks, auto_pad, output sizes, and the Halide pieces that read a
// padded input window by window.
#pragma once

#include "hfuse/attributes.h"
#include "hfuse/tensor.h"

#include <Halide.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hfuse::ops {

// A resolved window: one entry per spatial dim, in ONNX order (H before W).
struct WindowGeometry {
    Shape input;  // spatial dims of the input
    std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end;
    Shape output;  // spatial dims of the output

    int spatial_rank() const { return static_cast<int>(input.size()); }
    // Input cells one window spans.
    int64_t extent(int i) const { return (kernel[i] - 1) * dilations[i] + 1; }
    // Whether some window reads outside [0, input[i]), so the input needs a boundary condition there.
    bool reads_outside(int i) const;
    // How far the windows read outside [0, input[i]) on either side: the leading pad, or the last
    // window's end past the input, whichever is further (0: they stay inside).
    int64_t reach(int i) const;
};

// A pointwise window (1 x 1) with a stride above 1 that reads nothing outside its input: it reads the
// input at its strided positions alone, so a copy of its input (conv_cv's blocked copy) holds those
// alone, indexed by the output's position.
bool subsampling_pointwise(const WindowGeometry &g);

// The m x m tiles of a Winograd F(m x m, 3x3) conv (conv_cv's "algorithm", m its "winograd_tile")
// along a dim with `output` cells: ceil(output / m), the last rounded up past the output.
int64_t winograd_tiles(int64_t output, int m);

// How much further than the windows' reach a Winograd F(m x m, 3x3) conv (conv_cv's "algorithm", m
// its "winograd_tile") reads along a dim with `output` cells: its m x m output tiles rounded up past
// an output not a multiple of m take that many more rows or columns of input (m = 2: one past an odd
// output). The lowering reads that far, the template's input copy spans it, and a producer storing
// the input blocked leaves a halo that wide.
int64_t winograd_overreach(int64_t output, int m);

// A conv with `group` groups computed in blocks of `lanes` output channels (conv_cv): every block reads
// the input channels of the groups its channels are in, `groups_per_block` of them at most (1 where
// the groups' output channels are a multiple of `lanes`; lanes / their number where they divide it;
// 2 for 24 a group in blocks of 16), the channels off a channel's group weighted zero. Block b
// reduces over `span` input channels from `first_input(b)`, the last blocks (and those past the
// last channel) shifted inwards so as to stay inside the input. One group: every input channel.
struct BlockedGroups {
    int64_t group_inputs = 0, group_outputs = 0;  // input / output channels a group
    int64_t groups = 1, groups_per_block = 1;
    // A depthwise conv (one input and one output channel a group): each lane reads its own channel
    // alone (output channel c reads input channel c), span 1, no channel weighted zero.
    bool own_channel = false;
    int64_t span = 0;  // input channels a block reduces over: groups_per_block * group_inputs
    // The first input channel block `b` reads.
    int64_t first_input(int64_t b, int lanes) const;
    Halide::Expr first_input(const Halide::Expr &b, int lanes) const;
};
BlockedGroups blocked_groups(int64_t input_channels, int64_t output_channels, int64_t group, int lanes);

// Checks that input 0 (X) is N x C x L or N x C x H x W; returns the number of spatial dims.
int window_spatial_rank(const TensorType &x);

// Reads and checks auto_pad, strides, dilations and pads (1s and 0s when absent) for `kernel` over
// the spatial dims `input`, and computes the output size (ceil_mode as in MaxPool/AveragePool).
// A kernel that does not fit the padded input is reported on `kernel_field`.
WindowGeometry resolve_window(const Attributes &attrs, const Shape &input, const std::vector<int64_t> &kernel,
                              bool ceil_mode, const std::string &kernel_field);

// "[1, 2, 3]", for messages.
std::string list_to_string(const std::vector<int64_t> &values);

// `x` (an N x C x spatial tensor) reading `value` outside its static bounds, bounded only in the
// spatial dims where some window reaches outside (elsewhere reads stay unguarded).
Halide::Func pad_spatial(const Halide::Func &x, const Shape &x_shape, const WindowGeometry &g,
                         const Halide::Expr &value);

// An RDom of `leading` dims followed by the window offsets, innermost (last ONNX) spatial dim first.
Halide::RDom window_rdom(const WindowGeometry &g, Halide::Region leading, const std::string &name);

// The Halide args into the padded input for the output at `out` (pure Vars, Halide order) and the
// window offsets r[first_offset...] of window_rdom(), reading channel `channel` of the same batch.
std::vector<Halide::Expr> window_input_args(const WindowGeometry &g, const std::vector<Halide::Var> &out,
                                            const Halide::RDom &r, int first_offset, const Halide::Expr &channel);

}  // namespace hfuse::ops
