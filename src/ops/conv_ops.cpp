// Conv (ONNX opset 13), and the sliding-window geometry it shares with the pools (window_util.h).
#include "window_util.h"

#include "halide_util.h"
#include "hfuse/error.h"
#include "op_families.h"

#include <algorithm>
#include <functional>

namespace hfuse::ops {

using Halide::Expr;
using Halide::Func;
using Halide::RDom;
using Halide::Var;

// ---------------------------------------------------------------------------------------------
// Window geometry (declared in window_util.h, also used by pool_ops.cpp)

std::string list_to_string(const std::vector<int64_t> &values) {
    std::string s = "[";
    for (size_t i = 0; i < values.size(); i++) s += (i ? ", " : "") + std::to_string(values[i]);
    return s + "]";
}

namespace {

// strides / dilations: one value >= 1 per spatial dim, all 1 when absent.
std::vector<int64_t> per_dim_factors(const Attributes &attrs, const std::string &name, size_t spatial) {
    std::vector<int64_t> v = attrs.get_ints(name, std::vector<int64_t>(spatial, 1));
    if (v.size() != spatial) {
        fail_field(name,
                   "expects " + std::to_string(spatial) + " values (one per spatial dim), got " + list_to_string(v));
    }
    for (int64_t f : v) {
        if (f < 1) fail_field(name, "must be >= 1, got " + list_to_string(v));
        to_int(f, name);
    }
    return v;
}

}  // namespace

bool WindowGeometry::reads_outside(int i) const {
    int64_t last_window_end = (output[i] - 1) * strides[i] - pads_begin[i] + extent(i);
    return pads_begin[i] > 0 || last_window_end > input[i];
}

int64_t WindowGeometry::reach(int i) const {
    const int64_t last_window_end = (output[i] - 1) * strides[i] - pads_begin[i] + extent(i);
    return std::max<int64_t>({pads_begin[i], last_window_end - input[i], 0});
}

bool subsampling_pointwise(const WindowGeometry &g) {
    bool strided = false;
    for (int i = 0; i < g.spatial_rank(); i++) {
        if (g.kernel[i] != 1 || g.reach(i) != 0) return false;
        strided = strided || g.strides[i] > 1;
    }
    return strided;
}

int64_t winograd_tiles(int64_t output, int m) {
    return (output + m - 1) / m;
}

int64_t winograd_overreach(int64_t output, int m) {
    return winograd_tiles(output, m) * m - output;
}

BlockedGroups blocked_groups(int64_t input_channels, int64_t output_channels, int64_t group, int lanes) {
    BlockedGroups b;
    b.groups = group;
    b.group_inputs = input_channels / group;
    b.group_outputs = output_channels / group;
    b.groups_per_block = 1;
    if (group > 1 && b.group_inputs == 1 && b.group_outputs == 1) {
        b.own_channel = true;
        b.span = 1;
        return b;
    }
    for (int64_t first = 0; first < output_channels; first += lanes) {
        const int64_t last = std::min(first + lanes, output_channels) - 1;
        b.groups_per_block = std::max(b.groups_per_block, last / b.group_outputs - first / b.group_outputs + 1);
    }
    b.span = b.groups_per_block * b.group_inputs;
    return b;
}

int64_t BlockedGroups::first_input(int64_t b, int lanes) const {
    if (own_channel) return b * lanes;  // lane i: channel first + i
    return std::min(b * lanes / group_outputs, groups - groups_per_block) * group_inputs;
}

Halide::Expr BlockedGroups::first_input(const Halide::Expr &b, int lanes) const {
    if (groups == 1) return 0;
    if (own_channel) return b * lanes;
    const Halide::Expr g =
        Halide::min(b * lanes / static_cast<int>(group_outputs), static_cast<int>(groups - groups_per_block));
    return g * static_cast<int>(group_inputs);
}

int window_spatial_rank(const TensorType &x) {
    if (x.rank() != 3 && x.rank() != 4) {
        fail_field("input 0 (X)",
                   "expects rank 3 (N x C x L) or 4 (N x C x H x W), got shape [" + to_string(x.shape) + "]");
    }
    return x.rank() - 2;
}

WindowGeometry resolve_window(const Attributes &attrs, const Shape &input, const std::vector<int64_t> &kernel,
                              bool ceil_mode, const std::string &kernel_field) {
    const size_t spatial = input.size();
    WindowGeometry g;
    g.input = input;
    g.kernel = kernel;
    g.strides = per_dim_factors(attrs, "strides", spatial);
    g.dilations = per_dim_factors(attrs, "dilations", spatial);  // absent for AveragePool: 1s
    g.pads_begin.assign(spatial, 0);
    g.pads_end.assign(spatial, 0);

    std::string auto_pad = attrs.get_string("auto_pad", "NOTSET");
    if (auto_pad != "NOTSET" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER" && auto_pad != "VALID") {
        fail_field("auto_pad", "must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '" + auto_pad + "'");
    }
    if (auto_pad != "NOTSET" && attrs.has("pads")) {
        fail_field("pads", "cannot be given together with auto_pad '" + auto_pad + "'");
    }
    if (auto_pad == "NOTSET") {
        std::vector<int64_t> pads = attrs.get_ints("pads", std::vector<int64_t>(2 * spatial, 0));
        if (pads.size() != 2 * spatial) {
            fail_field("pads", "expects " + std::to_string(2 * spatial) + " values (begins then ends of " +
                                   std::to_string(spatial) + " spatial dims), got " + list_to_string(pads));
        }
        for (int64_t p : pads) {
            if (p < 0) fail_field("pads", "must be non-negative, got " + list_to_string(pads));
            to_int(p, "pads");
        }
        std::copy(pads.begin(), pads.begin() + spatial, g.pads_begin.begin());
        std::copy(pads.begin() + spatial, pads.end(), g.pads_end.begin());
    } else if (auto_pad != "VALID") {
        // SAME_*: pad just enough for ceil(in / stride) outputs; the odd cell goes at the end for
        // SAME_UPPER and at the beginning for SAME_LOWER.
        for (size_t i = 0; i < spatial; i++) {
            int64_t out = (input[i] + g.strides[i] - 1) / g.strides[i];
            int64_t total = std::max<int64_t>(0, (out - 1) * g.strides[i] + g.extent(i) - input[i]);
            g.pads_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
            g.pads_end[i] = total - g.pads_begin[i];
        }
    }

    g.output.resize(spatial);
    for (size_t i = 0; i < spatial; i++) {
        int64_t padded = input[i] + g.pads_begin[i] + g.pads_end[i];
        to_int(padded, "pads");
        if (padded < g.extent(i)) {
            fail_field(kernel_field, "kernel larger than padded input in spatial dim " + std::to_string(i) +
                                         ": the window spans " + std::to_string(g.extent(i)) + " cells (kernel " +
                                         std::to_string(kernel[i]) + ", dilation " + std::to_string(g.dilations[i]) +
                                         "), the padded input has " + std::to_string(padded));
        }
        int64_t span = padded - g.extent(i), s = g.strides[i];
        int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
        // As PyTorch and onnxruntime: in ceil mode the last window must start inside the input or the
        // begin padding, not in the end padding alone.
        if (ceil_mode && (out - 1) * s >= input[i] + g.pads_begin[i]) out--;
        g.output[i] = out;
    }
    return g;
}

namespace {

// pad_spatial's boundary: `x` reading `value` outside the input along the first `dims` spatial dims
// (outermost first) where the windows read outside it; `x` itself where they read outside none.
Func pad_outer_spatial(const Func &x, const Shape &x_shape, const WindowGeometry &g, const Expr &value, int dims) {
    const int rank = static_cast<int>(x_shape.size());
    Halide::Region bounds(rank);  // an undefined Range leaves that dim unbounded
    bool any = false;
    for (int i = 0; i < dims; i++) {
        if (!g.reads_outside(i)) continue;
        bounds[halide_arg(2 + i, rank)] = Halide::Range(0, to_int(x_shape[2 + i], "input 0 (X)"));
        any = true;
    }
    return any ? constant_exterior_by_dim(x, value, bounds) : x;
}

// pad_spatial as the pad value everywhere, then the input's rows written over it in whole vectors of
// `lanes` (ConvLowering::padding_fill_lanes), a row's last vector shifted inwards: an update over the
// innermost dim, its first RVar the lanes, the other dims pure and tested as pad_spatial tests them
// (one test a row, the same for every lane). Only where the rows read outside the input.
Func pad_spatial_filled(const Func &x, const Shape &x_shape, const WindowGeometry &g, const Expr &value, int lanes,
                        const std::string &name) {
    const int rank = static_cast<int>(x_shape.size()), spatial = g.spatial_rank();
    if (!g.reads_outside(spatial - 1)) return pad_outer_spatial(x, x_shape, g, value, spatial);
    const Func rows = pad_outer_spatial(x, x_shape, g, value, spatial - 1);
    const int width = to_int(x_shape[rank - 1], "input 0 (X)");
    lanes = std::min(lanes, width);
    RDom r({{0, lanes}, {0, (width + lanes - 1) / lanes}}, name + "_x");  // (lane, vector)
    const std::vector<Var> args = x.args();
    std::vector<Expr> at(args.begin(), args.end());
    at[0] = Halide::min(r[1] * lanes, width - lanes) + r[0];
    Func padded(name);
    padded(args) = value;
    padded(at) = rows(at);
    return padded;
}

}  // namespace

Func pad_spatial(const Func &x, const Shape &x_shape, const WindowGeometry &g, const Expr &value) {
    return pad_outer_spatial(x, x_shape, g, value, g.spatial_rank());
}

RDom window_rdom(const WindowGeometry &g, Halide::Region leading, const std::string &name) {
    const int spatial = g.spatial_rank();
    for (int j = 0; j < spatial; j++) leading.emplace_back(0, to_int(g.kernel[spatial - 1 - j], "kernel_shape"));
    return RDom(leading, name);
}

std::vector<Expr> window_input_args(const WindowGeometry &g, const std::vector<Var> &out, const RDom &r,
                                    int first_offset, const Expr &channel) {
    const int spatial = g.spatial_rank();
    std::vector<Expr> args;
    for (int j = 0; j < spatial; j++) {  // Halide order: innermost spatial dim first
        int i = spatial - 1 - j;
        args.push_back(out[j] * static_cast<int>(g.strides[i]) - static_cast<int>(g.pads_begin[i]) +
                       r[first_offset + j] * static_cast<int>(g.dilations[i]));
    }
    args.push_back(channel);
    args.push_back(out[spatial + 1]);  // batch
    return args;
}

// ---------------------------------------------------------------------------------------------
// Conv

namespace {

struct ConvShape {
    int64_t batch, c_in, c_out, group;
    WindowGeometry g;
    Shape output;
};

ConvShape conv_shape(const Attributes &attrs, const TensorType &x, const TensorType &w, const TensorType *b) {
    ConvShape c;
    window_spatial_rank(x);  // checks X's rank
    if (w.rank() != x.rank()) {
        fail_field("input 1 (W)", "expects rank " + std::to_string(x.rank()) +
                                      " (C_out x C_in/group x kernel) like X, got shape [" + to_string(w.shape) + "]");
    }
    c.batch = x.shape[0];
    c.c_in = x.shape[1];
    c.c_out = w.shape[0];
    c.group = attrs.get_int("group", 1);
    if (c.group < 1) fail_field("group", "must be >= 1, got " + std::to_string(c.group));
    if (w.shape[1] * c.group != c.c_in) {
        fail_field("input 1 (W)", "expects W.shape[1] * group == " + std::to_string(c.c_in) +
                                      " (X's channels), got W.shape[1] = " + std::to_string(w.shape[1]) +
                                      " with group " + std::to_string(c.group));
    }
    if (c.c_out % c.group != 0) {
        fail_field("input 1 (W)", "output channels " + std::to_string(c.c_out) + " are not divisible by group " +
                                      std::to_string(c.group));
    }
    if (b && b->shape != Shape{c.c_out}) {
        fail_field("input 2 (B)", "expects shape [" + std::to_string(c.c_out) + "], got [" + to_string(b->shape) + "]");
    }
    std::vector<int64_t> kernel(w.shape.begin() + 2, w.shape.end());
    if (attrs.has("kernel_shape") && attrs.get_ints("kernel_shape") != kernel) {
        fail_field("kernel_shape", list_to_string(attrs.get_ints("kernel_shape")) +
                                       " does not match W's spatial dims " + list_to_string(kernel));
    }
    Shape x_spatial(x.shape.begin() + 2, x.shape.end());
    c.g = resolve_window(attrs, x_spatial, kernel, /*ceil_mode=*/false,
                         attrs.has("kernel_shape") ? "kernel_shape" : "input 1 (W)");
    c.output = {c.batch, c.c_out};
    c.output.insert(c.output.end(), c.g.output.begin(), c.g.output.end());
    check_shape(c.output, "output 0 (Y)");
    return c;
}

ConvShape conv_shape(const InferContext &ctx) {
    return conv_shape(ctx.attrs, *ctx.inputs[0], *ctx.inputs[1], ctx.has_input(2) ? ctx.inputs[2] : nullptr);
}

// A 2-D conv with stride 1 and one group: its window slides along the rows of the padded input.
bool is_flattenable(const ConvShape &c) {
    return c.group == 1 && c.g.spatial_rank() == 2 && c.g.strides[0] == 1 && c.g.strides[1] == 1;
}

// The conv over the flattened rows of its padded input: flat(q, co, n) with q = y * Wp + x, Wp the
// padded input's width, each tap at q + ky * dy * Wp + kx * dx; the output is a view of flat. Rows of
// any width then tile by whole vectors (28 wide: 3.5 AVX2 vectors per row tiled by (x, y); 98 per
// 28x28 plane flat), at the cost of the Wp - W columns computed past each row and dropped (none for a
// pointwise conv, 2 of 9 for a padded 3x3 at 7x7). With the input's strides pinned (a group input, or
// the padded input materialised at root) the address of (tap % Wp, tap / Wp) simplifies back to
// tap: dense vector loads.
Lowered lower_flat_conv(const LowerContext &ctx, const ConvShape &c) {
    const Shape &in = ctx.input_types[0]->shape;
    const int wp = to_int(in[3] + c.g.pads_begin[1] + c.g.pads_end[1], "pads");
    const int pad_x = static_cast<int>(c.g.pads_begin[1]), pad_y = static_cast<int>(c.g.pads_begin[0]);
    const int dx = static_cast<int>(c.g.dilations[1]), dy = static_cast<int>(c.g.dilations[0]);
    const bool pointwise =
        c.g.kernel[0] == 1 && c.g.kernel[1] == 1 && wp == in[3] && pad_y == 0 && c.g.pads_end[0] == 0;
    Func x = ctx.inputs[0];
    if (!pointwise) {
        // Zero outside the input, padding or not: the dropped columns of the last rows read past it.
        Halide::Region bounds(4);
        bounds[0] = Halide::Range(0, to_int(in[3], "input 0 (X)"));
        bounds[1] = Halide::Range(0, to_int(in[2], "input 0 (X)"));
        x = constant_exterior_by_dim(ctx.inputs[0], 0.0f, bounds);
    }
    std::vector<Var> v = make_vars(4);  // x, y, co, n
    Var q("q");
    RDom r = window_rdom(c.g, {{0, to_int(c.c_in, "input 0 (X)")}}, func_name(ctx, "r"));  // (ci, kx, ky)
    Expr tap = q + r[2] * (dy * wp) + r[1] * dx;
    Func flat(func_name(ctx, "flat"));
    flat(q, v[2], v[3]) = ctx.has_input(2) ? ctx.inputs[2](v[2]) : Expr(0.0f);
    flat(q, v[2], v[3]) += x(tap % wp - pad_x, tap / wp - pad_y, r[0], v[3]) * ctx.inputs[1](r[1], r[2], r[0], v[2]);
    Func out(func_name(ctx));
    out(v) = flat(v[0] + v[1] * wp, v[2], v[3]);
    Lowered lowered{{out}, {}, {}};
    lowered.parts["flat"] = flat;
    if (!pointwise) lowered.parts["padded_input"] = x;
    return lowered;
}

// How a channel-blocked conv (conv_cv, direct or Winograd) reads its input X at (ci, x, y, n), x
// and y in the unpadded input's coordinates, its windows reaching `extra_x` / `extra_y` columns and
// rows further than the conv's own (a Winograd tile rounded up past an odd output): in place from
// blocks another group stored with a zero halo that covers them; else through `copy`, the padded
// copy (block for block from stored blocks, planar or channel-blocked by the lowering's input_block
// from a planar input), undefined where the planar input needs no padding.
// Reads input channel ci at (x, y, n); where ci is block * lanes + lane with the storage's blocks
// `lanes` wide (a depthwise conv's lane reading its own channel), `block` and `lane` index the storage
// directly: a vector of lanes is then one dense load, not a gather through ci % lanes and ci / lanes.
struct ConvInputReader {
    std::function<Expr(Expr ci, Expr x, Expr y, Expr n)> at;
    int block = 0;  // the storage's channels a block (0: planar)
    Func storage;   // channel-blocked storage (bi, x, y, cb, n), where block > 0
    Expr operator()(Expr ci, Expr x, Expr y, Expr n) const { return at(ci, x, y, n); }
    Expr lane(const Expr &lane, const Expr &cb, int lanes, const Expr &x, const Expr &y, const Expr &n) const {
        if (block == lanes) return storage(lane, x, y, cb, n);
        return at(cb * lanes + lane, x, y, n);
    }
};
ConvInputReader conv_input_reader(const LowerContext &ctx, const ConvShape &c, int extra_x, int extra_y, Func &copy) {
    const int cin = to_int(c.c_in, "input 0 (X)");
    const int ib = ctx.conv_lowering.input_block;
    if (ib && cin % ib != 0) {
        fail_field("schedule.input_block",
                   std::to_string(ib) + " does not divide the " + std::to_string(cin) + " input channels");
    }
    const BlockedInput *stored = ctx.blocked_input(0);
    if (stored && ib != 0 && ib != stored->block) {
        throw Error("internal: conv_cv reads blocks of " + std::to_string(ib) + " from an input stored in blocks of " +
                    std::to_string(stored->block));
    }
    const Shape &xs = ctx.input_types[0]->shape;
    const Halide::Region plane = {{0, to_int(xs[3], "input 0 (X)")}, {0, to_int(xs[2], "input 0 (X)")}};
    if (stored && c.g.reach(1) + extra_x <= stored->halo_x && c.g.reach(0) + extra_y <= stored->halo_y) {
        // Stored channel-blocked with a zero halo its windows stay in: read in place, no copy.
        const Func f = stored->func;
        const int b = stored->block;
        return {[f, b](Expr ci, Expr x, Expr y, Expr n) { return f(ci % b, x, y, ci / b, n); }, b, f};
    }
    if (stored) {
        // Stored blocked without the halo its windows reach (values inside one whole-model pipeline,
        // see exec::lower_model): the padded copy, block for block, dense loads and stores.
        const int b = stored->block;
        copy = constant_exterior_by_dim(
            stored->func, 0.0f,
            {Halide::Range(), plane[0], plane[1], Halide::Range(), Halide::Range()});  // an undefined Range: unbounded
        const Func f = copy;
        return {[f, b](Expr ci, Expr x, Expr y, Expr n) { return f(ci % b, x, y, ci / b, n); }, b, f};
    }
    // Zero outside the input: where the conv's windows reach, and past it where a rounded-up
    // Winograd tile reads further.
    const Func x = extra_x || extra_y ? constant_exterior_by_dim(ctx.inputs[0], 0.0f, plane)
                                      : pad_spatial(ctx.inputs[0], xs, c.g, 0.0f);
    if (ib) {
        // Consecutive input channels adjacent: the inner loop's broadcasts walk one block of lines
        // rather than a plane apiece (3x3 64->64 at 56x56: 1.34 -> 1.28 ms). A strided pointwise conv
        // reads every sx-th column of every sy-th row: the copy holds those alone, (bx, by) the
        // output's position, and the conv reads it in its own order.
        const bool subsampled = subsampling_pointwise(c.g);
        const int sx = subsampled ? static_cast<int>(c.g.strides[1]) : 1;
        const int sy = subsampled ? static_cast<int>(c.g.strides[0]) : 1;
        Var bi("bi"), bx("bx"), by("by"), icb("icb"), bn("n");  // channel icb * ib + bi at (bx * sx, by * sy)
        copy = Func(func_name(ctx, "blocked_input"));
        copy(bi, bx, by, icb, bn) = x(bx * sx, by * sy, icb * ib + bi, bn);
        const Func f = copy;
        return {[f, ib, sx, sy](Expr ci, Expr x, Expr y, Expr n) { return f(ci % ib, x / sx, y / sy, ci / ib, n); }, ib,
                f};
    }
    if (x.name() != ctx.inputs[0].name()) copy = x;
    return {[x](Expr ci, Expr ix, Expr iy, Expr n) { return x(ix, iy, ci, n); }, 0, Func()};
}

// conv_cv's form: blocked(cv, p, cb, n) is output channel cb * lanes + cv at the flattened output
// position p = y * W + x; per tap a register tile loads `tile` weight vectors and broadcasts one input
// value per position, so rows of any width and any stride tile with no lane wasted. The weights are
// packed here, once, as (cv, cb % tile, ci, kx, ky, cb / tile): a register tile's weight vectors for
// one tap are adjacent, one stream (3x3 512->512 at 7x7, 2 threads: 1.45 ms with the blocks apart,
// 4 streams 576 KB apart aliasing in L1; 1.39 ms packed). Channels past the last are zero weights,
// plus one spare tile of blocks for a channel block shifted inwards and rounded up. A position past
// the last (a register tile rounded up) reads inside the last row, in bounds. An input another group
// stored channel-blocked with a zero halo (ctx.blocked_input) is read in place: no padded copy; one
// stored blocked with too small a halo is copied padded block for block.
Lowered lower_blocked_conv(const LowerContext &ctx, const ConvShape &c) {
    const Constant *weights = ctx.constants[1];
    if (!weights) fail_field("schedule.template", "conv_cv needs constant weights; input 1 (W) is computed");
    const int lanes = ctx.conv_lowering.lanes, tile = ctx.conv_lowering.tile_blocks;
    if (lanes < 1 || tile < 1) throw Error("internal: a channel-blocked conv needs lanes and tile_blocks >= 1");
    const int cout = to_int(c.c_out, "input 1 (W)");
    const int kh = to_int(c.g.kernel[0], "input 1 (W)"), kw = to_int(c.g.kernel[1], "input 1 (W)");
    const BlockedGroups groups = blocked_groups(c.c_in, c.c_out, c.group, lanes);
    const int span = to_int(groups.span, "input 0 (X)"), group_in = static_cast<int>(groups.group_inputs);
    const int blocks = (cout + lanes - 1) / lanes, tiles = (blocks + tile - 1) / tile + 1;
    Halide::Buffer<float> packed(lanes, tile, span, kw, kh, tiles);
    packed.fill(0.0f);
    const float *w = weights->f32.data();  // OIHW, group_in input channels a row
    for (int co = 0; co < cout; co++) {
        const int b = co / lanes;
        if (groups.own_channel) {  // its one input channel: the lane's own
            for (int ky = 0; ky < kh; ky++) {
                for (int kx = 0; kx < kw; kx++)
                    packed(co % lanes, b % tile, 0, kx, ky, b / tile) = w[(int64_t(co) * kh + ky) * kw + kx];
            }
            continue;
        }
        // The block's input channel i is channel first + i of the input: weighted where it is in
        // co's group, zero elsewhere.
        const int first = static_cast<int>(groups.first_input(b, lanes));
        const int group_first = static_cast<int>(co / groups.group_outputs) * group_in;
        for (int i = 0; i < span; i++) {
            const int ci = first + i - group_first;
            if (ci < 0 || ci >= group_in) continue;
            for (int ky = 0; ky < kh; ky++) {
                for (int kx = 0; kx < kw; kx++) {
                    packed(co % lanes, b % tile, i, kx, ky, b / tile) =
                        w[((int64_t(co) * group_in + ci) * kh + ky) * kw + kx];
                }
            }
        }
    }
    Func wq = constant_func(packed, func_name(ctx, "packed_w"));

    const int wo = to_int(c.g.output[1], "output 0 (Y)"), ho = to_int(c.g.output[0], "output 0 (Y)");
    const int sx = static_cast<int>(c.g.strides[1]), sy = static_cast<int>(c.g.strides[0]);
    const int dx = static_cast<int>(c.g.dilations[1]), dy = static_cast<int>(c.g.dilations[0]);
    const int pad_x = static_cast<int>(c.g.pads_begin[1]), pad_y = static_cast<int>(c.g.pads_begin[0]);
    Var cv("cv"), p("p"), cb("cb"), n("n");
    RDom r = window_rdom(c.g, {{0, span}}, func_name(ctx, "r"));  // (i: input channel first + i, kx, ky)
    // Positions past the last stay in the last row. (Clamping the position instead, LLVM computed
    // the taps' addresses in vector registers in the inner loop: 3x3 64->64 at 56x56 15% slower.)
    // Where a register tile's positions divide the row, p is taken apart by tiles, t = p / np: a
    // tile's p = t * np + i (i unrolled) is then the tile's row and column plus i, each position's
    // address the tile's plus a constant. Taken apart by rows, each tile position's address is
    // computed on its own, per tap, in vector registers on the FMA ports.
    // With rows_padded, rows of wp positions, the row rounded up to whole tiles: the wp - wo positions
    // past each row read a zero-extended input (the copy reaches that much further) and are dropped.
    const int np = ctx.conv_lowering.tile_positions;
    const int wp = ctx.conv_lowering.rows_padded && np > 1 ? (wo + np - 1) / np * np : wo;
    Expr ox = p % wp, oy = Halide::min(p / wp, ho - 1);
    if (np > 1 && wp % np == 0) {
        const Expr t = p / np;
        ox = t % (wp / np) * np + p % np;
        oy = Halide::min(t / (wp / np), ho - 1);
    }
    const Expr ix = ox * sx - pad_x + r[1] * dx, iy = oy * sy - pad_y + r[2] * dy;
    Func input_copy;
    const ConvInputReader read = conv_input_reader(ctx, c, (wp - wo) * sx, 0, input_copy);
    // A depthwise conv's lane reads its own channel (past the last, the last: its weights are zero).
    const Expr input = !groups.own_channel ? read(groups.first_input(cb, lanes) + r[0], ix, iy, n)
                       : cout % lanes == 0 ? read.lane(cv, cb, lanes, ix, iy, n)
                                           : read(Halide::min(cb * lanes + cv, cout - 1), ix, iy, n);
    Func blocked(func_name(ctx, "blocked"));
    blocked(cv, p, cb, n) = 0.0f;
    blocked(cv, p, cb, n) += wq(cv, cb % tile, r[0], r[1], r[2], cb / tile) * input;
    std::vector<Var> v = make_vars(4);  // x, y, co, n
    Func out(func_name(ctx));
    Expr value = blocked(v[2] % lanes, v[0] + v[1] * wp, v[2] / lanes, v[3]);
    out(v) = ctx.has_input(2) ? value + ctx.inputs[2](v[2]) : value;
    Lowered lowered{{out}, {}, {}};
    lowered.parts["blocked"] = blocked;
    if (input_copy.defined()) lowered.parts["padded_input"] = input_copy;
    return lowered;
}

// A sum of terms with constant coefficients, the zero ones left out and the ones of +-1 unscaled:
// the Winograd transforms as adds and subtracts.
Expr linear_combination(const std::vector<std::pair<float, Expr>> &terms) {
    Expr sum;
    for (const auto &[k, e] : terms) {
        if (k == 0.0f) continue;
        if (!sum.defined()) {
            sum = k == 1.0f ? e : (k == -1.0f ? -e : k * e);
        } else {
            sum = k == 1.0f ? sum + e : (k == -1.0f ? sum - e : sum + k * e);
        }
    }
    return sum.defined() ? sum : Expr(0.0f);
}

// sum over i of coefficients[i] * at(i), i in [0, n): one row of a Winograd transform applied along one
// axis of a tile, as adds and subtracts where the coefficients are +-1.
Expr transform_row(const float *coefficients, int n, const std::function<Expr(int i)> &at) {
    std::vector<std::pair<float, Expr>> terms;
    for (int i = 0; i < n; i++) {
        if (coefficients[i] != 0.0f) terms.push_back({coefficients[i], at(i)});
    }
    return linear_combination(terms);
}

// Winograd F(m x m, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2016):
// an m x m output tile from an n x n input tile, n = m + 2, with n * n products per input channel
// where the direct conv makes 9 * m * m: B^T (n x n) transforms the input tile, G (n x 3) the
// weights, A^T (m x n) the products back. m = 2 (points 0, 1, -1): 2.25x fewer products, the
// transforms adds and subtracts; m = 4 (points 0, 1, -1, 2, -2): 4x fewer, its transforms with
// small integer coefficients and rounding errors a few times larger.
struct WinogradMatrices {
    int m;
    const float *bt, *g, *at;  // row-major: n x n, n x 3, m x n
    int n() const { return m + 2; }
};
// clang-format off
constexpr float kWinograd2Bt[4 * 4] = {1,  0, -1,  0,
                                       0,  1,  1,  0,
                                       0, -1,  1,  0,
                                       0,  1,  0, -1};
constexpr float kWinograd2G[4 * 3] = {1,     0,    0,
                                      0.5f,  0.5f, 0.5f,
                                      0.5f, -0.5f, 0.5f,
                                      0,     0,    1};
constexpr float kWinograd2At[2 * 4] = {1, 1,  1,  0,
                                       0, 1, -1, -1};
constexpr float kWinograd4Bt[6 * 6] = {4,  0, -5,  0, 1, 0,
                                       0, -4, -4,  1, 1, 0,
                                       0,  4, -4, -1, 1, 0,
                                       0, -2, -1,  2, 1, 0,
                                       0,  2, -1, -2, 1, 0,
                                       0,  4,  0, -5, 0, 1};
constexpr float kWinograd4G[6 * 3] = { 1.0f / 4,   0,          0,
                                      -1.0f / 6,  -1.0f / 6,  -1.0f / 6,
                                      -1.0f / 6,   1.0f / 6,  -1.0f / 6,
                                       1.0f / 24,  1.0f / 12,  1.0f / 6,
                                       1.0f / 24, -1.0f / 12,  1.0f / 6,
                                       0,          0,          1};
constexpr float kWinograd4At[4 * 6] = {1, 1,  1, 1,  1, 0,
                                       0, 1, -1, 2, -2, 0,
                                       0, 1,  1, 4,  4, 0,
                                       0, 1, -1, 8, -8, 1};
// clang-format on

WinogradMatrices winograd_matrices(int m) {
    if (m == 2) return {2, kWinograd2Bt, kWinograd2G, kWinograd2At};
    if (m == 4) return {4, kWinograd4Bt, kWinograd4G, kWinograd4At};
    throw Error("internal: Winograd F(m x m, 3x3) for m = 2 or 4, not " + std::to_string(m));
}

// conv_cv's Winograd form (a 3x3 conv, stride and dilation 1, one group, constant weights), F(m x m,
// 3x3) with n = m + 2:
//  - wino_input_rows(ci, t, i, a, n): B^T d, the input tile d of tile t (flattened, t = ty * TX + tx
//    over the ceil(W/m) x ceil(H/m) output tiles; past the last, in the last row) transformed along
//    y, at row a and column i;
//  - wino_input(ci, t, e, n): that transformed along x, B^T d B, at e = n * row + column of the n x n;
//  - wino_product(cv, t, e, cb, n): per e, the product with the transformed weights U = G g G^T
//    (packed here, once, as (cv, cb, ci, e): output channel cb * lanes + cv, zero past the last),
//    a reduction over the input channels as conv_cv's direct one is over channels and taps;
//  - wino_output_columns(cv, t, a, q, cb, n): M A, tile t's n x n products M transformed along x, at
//    row a and column q;
//  - wino_output(cv, x, y, cb, n): that transformed along y, A^T M A, the output at (x, y) (which of
//    the m x m by x % m and y % m: a schedule aligns x and y to m and unrolls);
// the conv's output (with the bias) a view of wino_output. A tile rounded up past an output not a
// multiple of m reads columns or rows past the windows' reach (winograd_overreach): zero.
Lowered lower_winograd_conv(const LowerContext &ctx, const ConvShape &c) {
    if (c.g.kernel[0] != 3 || c.g.kernel[1] != 3 || c.g.strides[0] != 1 || c.g.strides[1] != 1 ||
        c.g.dilations[0] != 1 || c.g.dilations[1] != 1) {
        fail_field("schedule.algorithm", "winograd needs a 3x3 conv with stride 1 and dilation 1");
    }
    const Constant *weights = ctx.constants[1];
    if (!weights) fail_field("schedule.template", "conv_cv needs constant weights; input 1 (W) is computed");
    const int lanes = ctx.conv_lowering.lanes;
    if (lanes < 1) throw Error("internal: a channel-blocked conv needs lanes >= 1");
    const WinogradMatrices wm = winograd_matrices(ctx.conv_lowering.winograd_tile);
    const int tm = wm.m, tn = wm.n();
    const int cin = to_int(c.c_in, "input 0 (X)"), cout = to_int(c.c_out, "input 1 (W)");
    const int blocks = (cout + lanes - 1) / lanes;
    Halide::Buffer<float> packed(lanes, blocks, cin, tn * tn);
    packed.fill(0.0f);
    const float *w = weights->f32.data();  // OIHW
    std::vector<double> gg(tn * 3);        // G g, in double: G's sixths and twenty-fourths
    for (int co = 0; co < cout; co++) {
        for (int ci = 0; ci < cin; ci++) {
            const float *g = w + (int64_t(co) * cin + ci) * 9;  // g[ky * 3 + kx]
            for (int a = 0; a < tn; a++) {
                for (int kx = 0; kx < 3; kx++) {
                    double sum = 0.0;
                    for (int ky = 0; ky < 3; ky++) sum += double(wm.g[a * 3 + ky]) * g[ky * 3 + kx];
                    gg[a * 3 + kx] = sum;
                }
            }
            for (int a = 0; a < tn; a++) {
                for (int b = 0; b < tn; b++) {
                    double u = 0.0;  // (G g G^T)[a][b]
                    for (int kx = 0; kx < 3; kx++) u += gg[a * 3 + kx] * wm.g[b * 3 + kx];
                    packed(co % lanes, co / lanes, ci, tn * a + b) = static_cast<float>(u);
                }
            }
        }
    }
    Func u = constant_func(packed, func_name(ctx, "wino_weights"));

    const int wo = to_int(c.g.output[1], "output 0 (Y)"), ho = to_int(c.g.output[0], "output 0 (Y)");
    const int tiles_x = static_cast<int>(winograd_tiles(wo, tm)), tiles_y = static_cast<int>(winograd_tiles(ho, tm));
    const int pad_x = static_cast<int>(c.g.pads_begin[1]), pad_y = static_cast<int>(c.g.pads_begin[0]);
    Func input_copy;
    const ConvInputReader read = conv_input_reader(ctx, c, static_cast<int>(winograd_overreach(c.g.output[1], tm)),
                                                   static_cast<int>(winograd_overreach(c.g.output[0], tm)), input_copy);

    // Both transforms one axis after the other: n^3 terms rather than n^4, each input read once per
    // tile rather than once per e it feeds (F(4x4, 3x3), 64->64: the group compiled in 1.6-1.8 s
    // with the input transform in one step, 1.0-1.1 s in two).
    Var ci("ci"), t("t"), e("e"), i("i"), a("a"), q("q"), cv("cv"), cb("cb"), x("x"), y("y"), n("n");
    const Expr tx = t % tiles_x, ty = Halide::min(t / tiles_x, tiles_y - 1);
    // wino_input_rows(ci, t, i, a, n): row a of B^T d, at column i of the tile.
    std::vector<Expr> rows;
    for (int k = 0; k < tn; k++) {
        rows.push_back(transform_row(wm.bt + k * tn, tn,
                                     [&](int j) { return read(ci, tm * tx - pad_x + i, tm * ty - pad_y + j, n); }));
    }
    Func v_rows(func_name(ctx, "wino_input_rows"));
    v_rows(ci, t, i, a, n) = Halide::mux(a, rows);
    std::vector<Expr> transformed;  // B^T d B at e = n * a + b: column b of B applied to row a of B^T d
    for (int ka = 0; ka < tn; ka++) {
        for (int kb = 0; kb < tn; kb++) {
            transformed.push_back(transform_row(wm.bt + kb * tn, tn, [&](int k) { return v_rows(ci, t, k, ka, n); }));
        }
    }
    Func v(func_name(ctx, "wino_input"));
    v(ci, t, e, n) = Halide::mux(e, transformed);

    RDom r(0, cin, func_name(ctx, "r"));
    Func m(func_name(ctx, "wino_product"));
    m(cv, t, e, cb, n) = 0.0f;
    m(cv, t, e, cb, n) += u(cv, cb, r, e) * v(r, t, e, n);

    // wino_output_columns(cv, t, a, q, cb, n): column q of M A, at row a of the tile's products M.
    std::vector<Expr> columns;
    for (int k = 0; k < tm; k++) {
        columns.push_back(transform_row(wm.at + k * tn, tn, [&](int b) { return m(cv, t, tn * a + b, cb, n); }));
    }
    Func m_columns(func_name(ctx, "wino_output_columns"));
    m_columns(cv, t, a, q, cb, n) = Halide::mux(q, columns);
    const Expr tile = y / tm * tiles_x + x / tm;
    std::vector<Expr> transformed_back;  // A^T M A at (x, y): row y % m of A^T applied to column x % m of M A
    for (int p = 0; p < tm; p++) {
        transformed_back.push_back(
            transform_row(wm.at + p * tn, tn, [&](int k) { return m_columns(cv, tile, k, x % tm, cb, n); }));
    }
    Func wino_output(func_name(ctx, "wino_output"));
    wino_output(cv, x, y, cb, n) = Halide::mux(y % tm, transformed_back);

    std::vector<Var> o = make_vars(4);  // x, y, co, n
    Func out(func_name(ctx));
    const Expr value = wino_output(o[2] % lanes, o[0], o[1], o[2] / lanes, o[3]);
    out(o) = ctx.has_input(2) ? value + ctx.inputs[2](o[2]) : value;
    Lowered lowered{{out}, {}, {}};
    lowered.parts["wino_input_rows"] = v_rows;
    lowered.parts["wino_input"] = v;
    lowered.parts["wino_product"] = m;
    lowered.parts["wino_output_columns"] = m_columns;
    lowered.parts["wino_output"] = wino_output;
    if (input_copy.defined()) lowered.parts["padded_input"] = input_copy;
    return lowered;
}

Lowered lower_conv(const LowerContext &ctx) {
    const ConvShape c = conv_shape(ctx.attrs, *ctx.input_types[0], *ctx.input_types[1],
                                   ctx.has_input(2) ? ctx.input_types[2] : nullptr);
    switch (ctx.conv_lowering.form) {
    case ConvLowering::Form::Flat:
        if (!is_flattenable(c))
            fail_field("schedule.template", "conv_flat needs a 2-D conv with stride 1 and one group");
        return lower_flat_conv(ctx, c);
    case ConvLowering::Form::ChannelBlocked:
        if (c.g.spatial_rank() != 2) fail_field("schedule.template", "conv_cv needs a 2-D conv");
        if (ctx.conv_lowering.winograd_tile > 0) {
            if (c.group != 1) fail_field("schedule.algorithm", "winograd needs a conv with one group");
            return lower_winograd_conv(ctx, c);
        }
        return lower_blocked_conv(ctx, c);
    case ConvLowering::Form::Direct: break;
    }
    const int spatial = c.g.spatial_rank();
    const int rank = spatial + 2;
    std::vector<Var> v = make_vars(rank);
    const Var &co = v[halide_arg(1, rank)];
    const int c_in_per_group = static_cast<int>(c.c_in / c.group);
    const int c_out_per_group = static_cast<int>(c.c_out / c.group);

    const Shape &xs = ctx.input_types[0]->shape;
    const int fill = ctx.conv_lowering.padding_fill_lanes;
    Func x = fill > 0 ? pad_spatial_filled(ctx.inputs[0], xs, c.g, 0.0f, fill, func_name(ctx, "padded"))
                      : pad_spatial(ctx.inputs[0], xs, c.g, 0.0f);
    const Func &w = ctx.inputs[1];
    // r[0] is the input channel within the group, listed first so that a schedule can keep the
    // channel loop innermost; r[1...] are the kernel offsets, innermost spatial dim first.
    RDom r = window_rdom(c.g, {{0, c_in_per_group}}, func_name(ctx, "r"));
    Expr ci = c.group == 1 ? Expr(r[0]) : co / c_out_per_group * c_in_per_group + r[0];

    std::vector<Expr> w_args;  // OIHW in Halide order: (kw, kh, ci within group, co)
    for (int j = 0; j < spatial; j++) w_args.push_back(r[1 + j]);
    w_args.push_back(r[0]);
    w_args.push_back(co);

    Func out(func_name(ctx));
    out(v) = ctx.has_input(2) ? ctx.inputs[2](co) : Expr(0.0f);
    Lowered lowered{{out}, {}, {}};
    if (ctx.conv_lowering.deinterleave_x) {
        // The filled plane is the pad value everywhere outside the input, so every phase may read
        // as far as bounds inference takes it; an unfilled one would be read past the input's edge.
        if (fill == 0 || spatial != 2 || c.g.strides[1] == 1 || !c.g.reads_outside(1))
            fail_field("schedule.deinterleave_x", "needs a 2-D depthwise conv strided across with a filled plane");
        const int sx = static_cast<int>(c.g.strides[1]), px = static_cast<int>(c.g.pads_begin[1]),
                  dx = static_cast<int>(c.g.dilations[1]);
        Var u("u"), phase("phase");
        Func phases(func_name(ctx, "phases"));
        phases(u, phase, v[1], v[2], v[3]) = x(u * sx + phase - px, v[1], v[2], v[3]);
        std::vector<Expr> args = window_input_args(c.g, v, r, 1, ci);
        const Expr tap = r[1] * dx;
        args[0] = v[0] + tap / sx;
        args.insert(args.begin() + 1, tap % sx);
        out(v) += phases(args) * w(w_args);
        lowered.parts["phases"] = phases;
    } else {
        out(v) += x(window_input_args(c.g, v, r, 1, ci)) * w(w_args);
    }
    if (x.name() != ctx.inputs[0].name()) lowered.parts["padded_input"] = x;
    lowered.parts["conv_input"] = x;  // what the conv reads, padded or not: conv_xv may copy it per task
    return lowered;
}

double conv_flops(const InferContext &ctx, const std::vector<TensorType> &outputs) {
    const ConvShape c = conv_shape(ctx);
    double out_elements = static_cast<double>(num_elements(outputs[0].shape));
    double macs_per_output = static_cast<double>(c.c_in / c.group) * num_elements(c.g.kernel);
    return 2 * out_elements * macs_per_output + (ctx.has_input(2) ? out_elements : 0);
}

}  // namespace

void register_conv_ops(std::vector<OpSchema> &ops) {
    OpSchema conv;
    conv.name = "Conv";
    conv.kind = PatternKind::ComplexOutFusable;
    conv.min_inputs = 2;
    conv.max_inputs = 3;
    conv.attributes = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"};
    conv.infer = [](const InferContext &ctx) {
        return std::vector<TensorType>{{DType::Float32, conv_shape(ctx).output}};
    };
    conv.lower = lower_conv;
    conv.flops = conv_flops;
    ops.push_back(std::move(conv));
}

}  // namespace hfuse::ops
