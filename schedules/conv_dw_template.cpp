// conv_dw: a depthwise conv by channel blocks, its pointwise producer per task (schedules/conv_template.h).
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

// conv_dw's pointwise producer `flat` ((q, c, n), q = y * W + x) per task of `tile`: the task's channels
// over the whole plane, by register tiles of nx vectors of vw positions x nc channels (shifting inwards
// at the plane's and the block's ends), the reduction over its input channels inside, as conv_flat's.
void schedule_dw_producer(Func flat, Func tile, Var task, const ConvGroupShape &s, const nlohmann::json &p,
                          int natural_vw, int cb) {
    const int vw = param_int_or(p, "producer_vector_width", 1, 64, natural_vw);
    require_power_of_two("producer_vector_width", vw);
    const int nx = get_int(p, "producer_tile_x_vectors", 1, 16), nc = get_int(p, "producer_tile_c", 1, 64);
    if (int64_t{vw} * nx > s.input[2] * s.input[3]) {
        fail_field("schedule.producer_tile_x_vectors", "exceeds the plane's positions");
    }
    if (nc > cb) fail_field("schedule.producer_tile_c", "exceeds schedule.channel_block");
    Func strip = flat.in();
    strip.compute_at(tile, task);
    schedule_flat_register_tiles(strip, flat, vw, nx, nc);
}

}  // namespace

void schedule_dw(Func tile, Func conv, Func padded, Func phases, const ConvGroupShape &s, const nlohmann::json &p,
                 int vw, Func producer, int producer_vw) {
    const int ny = get_int(p, "tile_y", 1, 64), cb = get_int(p, "channel_block", 1, 4096);
    if (s.pooled) fail_field("schedule.template", "conv_dw takes no window consumer");
    if (vw > s.tile_output[3]) fail_field("schedule.vector_width", "wider than the output's rows");
    if (ny > s.tile_output[2]) fail_field("schedule.tile_y", "more rows than the output has");
    if (cb > s.tile_output[1]) fail_field("schedule.channel_block", "more channels than the output has");
    const bool has_producer = producer.defined();
    for (const char *key : {"producer_vector_width", "producer_tile_x_vectors", "producer_tile_c"}) {
        if (!has_producer && p.contains(key)) {
            fail_field(std::string("schedule.") + key,
                       "the group has no pointwise conv computed per task of the depthwise conv");
        }
    }
    if (has_producer && !padded.defined())
        throw Error("internal: conv_dw computes a producer only for a padded depthwise conv");
    // Each tile's vectors along a row are independent chains of FMAs, one per tap: more of them hide
    // the FMA latency where a tile is one vector and few rows.
    const int nx = int_or_absent(p, "tile_x_vectors", 1, 16);
    if (int64_t{vw} * nx > s.tile_output[3]) fail_field("schedule.tile_x_vectors", "wider than the output's rows");
    const int64_t row_tiles = (s.tile_output[2] + ny - 1) / ny;
    const int bands = int_or_absent(p, "row_bands", 1, row_tiles);
    Dims t(tile), v(conv);
    Var xo("xo"), xi("xi"), xv("xv"), yo("yo"), yi("yi"), yb("yb"), co("co"), ci("ci"), task("task");
    tile.split(t.x, xo, xi, vw * nx)
        .split(xi, xi, xv, vw)
        .split(t.y, yo, yi, ny)
        .split(yo, yb, yo, static_cast<int>((row_tiles + bands - 1) / bands), Halide::TailStrategy::ShiftInwards)
        .split(t.c, co, ci, cb)
        .reorder(xv, xi, yi, xo, yo, ci, co, yb, t.n)
        .vectorize(xv)
        .unroll(xi)
        .unroll(yi)
        // One parallel loop over the images' bands of rows and their channel blocks, the channel
        // blocks inside: a thread's contiguous share of the tasks is whole bands, the rows a consumer
        // group's tasks (row blocks) on the same thread read.
        .fuse(co, yb, task)
        .fuse(task, t.n, task)
        .parallel(task);
    Var cx("cx"), cxv("cxv");
    conv.compute_at(tile, xo).split(v.x, cx, cxv, vw).vectorize(cxv).unroll(cx).unroll(v.y);
    std::vector<RVar> r = conv.rvars(0);  // (ci = one channel, kx, ky)
    conv.update()
        .split(v.x, cx, cxv, vw)
        .reorder(cxv, cx, v.y, r[0], r[1], r[2])
        .vectorize(cxv)
        .unroll(cx)
        .unroll(v.y)
        .unroll(r[1])
        .unroll(r[2]);
    if (padded.defined()) {
        // A channel's padded plane fits in L1: build it per channel rather than in one pass at root
        // (from the producer's strip, its epilogue inlined, where there is one), in whole vectors.
        // Where the rows are padded it is lowered filled (ConvLowering::padding_fill_lanes: the pad
        // value, then the input's rows over it, a row's last vector shifted inwards; the copy's
        // overlapping vectors write equal values, hence allow_race_conditions). As one select per
        // element, every vector of a 14-wide row straddled its edge and read through a gather; with
        // a guarded tail instead, the tails' masked stores (vmaskmovps, microcoded on Zen) cost as
        // much: 512 channels at 14x14, Zen 3, 2 threads, 52-59 us either way, 31-35 filled (oneDNN
        // 33-39 us in the same runs). Not scalar: with a Sigmoid in the producer's epilogue (SiLU) a
        // scalar plane cost more than the conv. Its rows start on whole vectors: without that, a
        // strided conv's loads from the plane met a Halide 14 bug (stride-2 loads given alignments
        // they do not have: an aligned vmovaps 8 bytes off, a crash;
        // Composer.StridedDepthwiseConvTilesMatchTheReference). Padded only in y, it is a select
        // per row (the same for every lane), its rows' last vectors shifted inwards.
        const bool filled = padded.has_update_definition();
        Func plane = filled ? padded : padded.in(conv);
        const Var x = plane.args()[0];
        plane.compute_at(tile, ci).align_storage(x, vw).vectorize(
            x, vw, filled ? Halide::TailStrategy::RoundUp : Halide::TailStrategy::ShiftInwards);
        if (filled) plane.update().allow_race_conditions().vectorize(plane.rvars(0)[0]);
        if (phases.defined()) {
            // Per channel, after its plane: each phase's columns one dense row (the lowering
            // refuses it unless the plane is filled, so the phases may read past the input's edge).
            const std::vector<Var> a = phases.args();  // (u, phase, y, c, n)
            phases.compute_at(tile, ci)
                .bound(a[1], 0, static_cast<int>(s.stride_x))
                .align_storage(a[0], vw)
                .reorder(a[0], a[1], a[2])
                .vectorize(a[0], vw, Halide::TailStrategy::RoundUp)
                .unroll(a[1]);
        }
        if (has_producer) schedule_dw_producer(producer, tile, task, s, p, producer_vw, cb);
    }
}

}  // namespace hfuse::schedules::conv_util
