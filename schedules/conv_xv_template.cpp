// conv_xv: the conv per register tile of its output, x in vector lanes (schedules/conv_template.h).
#include "hfuse/error.h"
#include "schedules/conv_schedule_util.h"
#include "schedules/schedule_params.h"

#include <algorithm>
#include <string>

namespace hfuse::schedules::conv_util {

using Halide::Func;
using Halide::RVar;
using Halide::Var;

namespace {

// conv_xv, the conv per register tile of T: each tile of T covers nx vectors of conv columns, ny conv
// rows and nc channels, and computes exactly that part of the conv in registers. With "input_at":
// "task", the conv's input (padded, where it is) is first copied over the task's rows, stored a row's
// channels together ([y][c][x]): a tile's pass over the input channels then reads a few contiguous
// rows rather than a row of every channel's plane, a page each where planes are 4 KB or more.
void schedule_xv_per_tile(Func tile, Func conv, const std::vector<Func> &per_tile, const ConvGroupShape &s,
                          const nlohmann::json &p, int vw, Func padded, Func input, bool input_per_task) {
    const int64_t tw = s.tile_output[3], th = s.tile_output[2], tc = s.tile_output[1];
    const auto [nx, ny, nc] = register_tile(p);
    const int tx = vw * nx / s.tile_stride_x, ty = ny / s.tile_stride_y;
    if (tx < 1 || tx * s.tile_stride_x != vw * nx || tx > tw)
        fail_field("schedule.tile_x_vectors", "does not fit the output width");
    if (ty < 1 || ty * s.tile_stride_y != ny || ty > th)
        fail_field("schedule.tile_y", "does not fit the output height");
    if (nc > tc) fail_field("schedule.tile_c", "exceeds the output channels");

    // "row_tasks": a row's tiles in that many parallel tasks (a group's position view has one row,
    // and few channel tiles would leave few tasks: MobileNet-V2's project conv, 144->24 at 56x56 as
    // 1 x 3136, 3 channel tiles of 8).
    const int64_t row_tiles = (tw + tx - 1) / tx;
    const int row_tasks = int_or_absent(p, "row_tasks", 1, row_tiles);

    Dims t(tile), v(conv);
    Var xo("xo"), xi("xi"), xb("xb"), yo("yo"), yi("yi"), co("co"), ci("ci"), task("task");
    // Output tiles shift inwards at the edges (recomputing a little), so any extent >= tile works.
    // Channel tiles inside the spatial ones keep a tile's input in L1 while every channel tile uses it
    // (the weights, smaller, stream from L2); outside, the whole input streams once per channel tile.
    const bool channels_inner = channel_loop_inner(p);
    tile.split(t.x, xo, xi, tx).split(t.y, yo, yi, ty).split(t.c, co, ci, nc);
    if (channels_inner) {
        tile.reorder(xi, yi, ci, co, xo, yo, t.n);
    } else {
        tile.reorder(xi, yi, ci, xo, yo, co, t.n);
    }
    tile.vectorize(xi, std::min(vw, tx)).unroll(xi).unroll(yi).unroll(ci);
    Var rows = yo;
    if (row_tasks > 1) {
        // A row's tasks: blocks of whole tiles, the last shifting inwards; each task its rows of tiles.
        tile.split(xo, xb, xo, static_cast<int>((row_tiles + row_tasks - 1) / row_tasks),
                   Halide::TailStrategy::ShiftInwards)
            .reorder(xo, yo, xb)
            .fuse(yo, xb, task);
        rows = task;
    }
    if (channels_inner) {  // every image's tasks one parallel loop (see schedule_flat)
        tile.fuse(rows, t.n, rows).parallel(rows);
    } else {
        tile.fuse(rows, co, task).fuse(task, t.n, task).parallel(task);
    }
    const Var inner = channels_inner ? co : xo;
    // tx is a whole number of these vectors: rounding up computes nothing outside the tile.
    schedule_per_tile(per_tile, tile, inner, std::min(vw, tx), Halide::TailStrategy::RoundUp);
    conv.compute_at(tile, inner);
    schedule_accumulators(conv, padded, !per_tile.empty(), v, p, vw, s.weight[1]);
    // An input the group computes (a prologue: a squeeze-and-excitation scale, BN + ReLU), where no
    // copy or padded buffer holds it: computed per tile of positions, every channel, before the
    // channel tiles read it. Inlined, Halide evaluates it per broadcast (per output channel block),
    // folding a per-channel scale into each multiply. Zen 5, AVX-512, 2 threads, in the networks
    // (with the planner's scale-into-reader merges): RegNet-Y 800MF's 1x1 readers of SE scales mostly
    // -0.006 to -0.018 ms each.
    if (!input_per_task && !padded.defined() && input.defined() && s.input_in_group) {
        Func made = input.in(conv);
        made.compute_at(tile, xo).vectorize(Dims(made).x, vw, Halide::TailStrategy::GuardWithIf);
    }
    if (input_per_task) {
        Func copy = input.in(conv);
        Dims d(copy);
        copy.compute_at(tile, channels_inner ? rows : task)
            .reorder_storage(d.x, d.c, d.y, d.n)
            .vectorize(d.x, vw, tw >= vw ? Halide::TailStrategy::ShiftInwards : Halide::TailStrategy::GuardWithIf);
    }
}

// conv_xv with strips (for a pool after the conv): T in strips of strip_y rows x strip_c channels, one
// parallel task each; the conv over a strip's whole window materialised in a strip buffer (L1/L2),
// tiled there by the register tile, which need not divide T's rows and channels (a 2x2 pool needs
// even conv rows per tile of T; per strip any register tile fits); the pool reads the strip.
void schedule_xv_strips(Func tile, Func conv, const std::vector<Func> &per_tile, const ConvGroupShape &s,
                        const nlohmann::json &p, int vw, Func padded) {
    const int64_t tw = s.tile_output[3], th = s.tile_output[2], tc = s.tile_output[1];
    const auto [nx, ny, nc] = register_tile(p);
    const int strip_c = get_int(p, "strip_c", 1, static_cast<int>(tc));
    const int strip_y = p.contains("strip_y") ? get_int(p, "strip_y", 1, static_cast<int>(th)) : static_cast<int>(th);
    // Across row strips Halide bounds the conv's input rows by interval arithmetic, which overshoots:
    // harmless for the padded input (computed at root over those bounds), fatal for an unpadded one.
    if (strip_y < th && !padded.defined()) fail_field("schedule.strip_y", "needs a padded conv input");
    // A strip's region of the conv spans at least (n - 1) * stride + 1 conv columns and rows for n of T,
    // and strip_c channels; register tiles shift inwards within it, so they must not exceed it.
    if (vw * nx > (tw - 1) * s.tile_stride_x + 1) fail_field("schedule.tile_x_vectors", "exceeds a strip's width");
    if (ny > (strip_y - 1) * s.tile_stride_y + 1) fail_field("schedule.tile_y", "exceeds the conv rows of a strip");
    if (nc > strip_c) fail_field("schedule.tile_c", "exceeds schedule.strip_c");

    Dims t(tile), v(conv);
    Var yo("yo"), yi("yi"), co("co"), ci("ci"), task("task");
    tile.split(t.y, yo, yi, strip_y).split(t.c, co, ci, strip_c).reorder(t.x, yi, ci, yo, co, t.n);
    if (tw >= vw) tile.vectorize(t.x, vw);
    tile.fuse(yo, co, task).fuse(task, t.n, task).parallel(task);
    // Rounded up, the pool's last vector would widen the strip (and the conv) past the conv's width.
    schedule_per_tile(per_tile, tile, task, vw, Halide::TailStrategy::GuardWithIf);

    Func strip = conv.in();
    Dims sd(strip);
    Var sxo("sxo"), sxi("sxi"), syo("syo"), syi("syi"), sco("sco"), sci("sci");
    const auto inwards = Halide::TailStrategy::ShiftInwards;
    strip.compute_at(tile, task)
        .split(sd.x, sxo, sxi, vw * nx, inwards)
        .split(sd.y, syo, syi, ny, inwards)
        .split(sd.c, sco, sci, nc, inwards)
        .reorder(sxi, syi, sci, sxo, syo, sco, sd.n);
    const bool channels_inner = channel_loop_inner(p);
    if (channels_inner) strip.reorder(sxi, syi, sci, sco, sxo, syo, sd.n);
    strip.vectorize(sxi, vw).unroll(sxi).unroll(syi).unroll(sci);
    conv.compute_at(strip, channels_inner ? sco : sxo);
    // Within the strip the conv's region is a whole register tile: no tail to guard.
    schedule_accumulators(conv, padded, false, v, p, vw, s.weight[1]);
}

}  // namespace

void schedule_xv(Func tile, Func conv, Func padded, Func input, const std::vector<Func> &per_tile,
                 const ConvGroupShape &s, const nlohmann::json &p, int vw) {
    const bool per_task = conv_input_per_task(p);
    if (per_task && !input.defined())
        throw Error("internal: conv_xv's input per task needs the conv's input (\"conv_input\")");
    if (p.contains("strip_c") || p.contains("strip_y")) {
        if (per_tile.empty()) fail_field("schedule.strip_c", "strips are for a pool after the conv");
        if (p.contains("row_tasks")) fail_field("schedule.row_tasks", "strips split no rows into tasks");
        if (per_task) fail_field("schedule.input_at", "\"task\" is for register tiles of the output, not strips");
        schedule_xv_strips(tile, conv, per_tile, s, p, vw, padded);
    } else {
        schedule_xv_per_tile(tile, conv, per_tile, s, p, vw, padded, input, per_task);
    }
    if (padded.defined() && !per_task) padded_at_root(padded, conv, vw);
}

}  // namespace hfuse::schedules::conv_util
