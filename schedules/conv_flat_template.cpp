// conv_flat: a stride-1 conv over the flattened rows of its padded input (schedules/conv_template.h).
#include "hfuse/error.h"
#include "schedules/conv_schedule_util.h"
#include "schedules/schedule_params.h"

#include <algorithm>
#include <string>

namespace hfuse::schedules::conv_util {

using Halide::Func;
using Halide::RVar;
using Halide::Var;

// conv_flat: a stride-1 conv lowered over the flattened rows of its padded input (`flat`, (q, c, n),
// q = y * Wp + x). T is tiled by blocks of block_rows whole rows x channel_block channels, one
// parallel task each; per tile_c channels of a block, a strip of `flat` over the block's rows (the
// Wp - W columns past each row but the last computed and dropped) is computed by register tiles of
// tile_x_vectors vectors x tile_c channels, which shift inwards at the strip's end, so rows of any
// width tile by whole vectors; the epilogue reads the strip. The padded input is materialised at root.
void schedule_flat(Func tile, Func flat, Func padded, const ConvGroupShape &s, const nlohmann::json &p, int vw) {
    const int64_t tw = s.tile_output[3], th = s.tile_output[2], tc = s.tile_output[1];
    const int nx = get_int(p, "tile_x_vectors", 1, 16), nc = get_int(p, "tile_c", 1, 64);
    const int rows = get_int(p, "block_rows", 1, static_cast<int>(th));
    const int cb = get_int(p, "channel_block", 1, static_cast<int>(tc));
    if (s.pooled || s.tile_stride_x != 1 || s.tile_stride_y != 1) {
        fail_field("schedule.template", "conv_flat takes no window consumer");
    }
    if (s.flat_width < tw) fail_field("schedule.template", "conv_flat needs a 2-D conv with stride 1 and one group");
    if (int64_t{vw} * nx > (rows - 1) * s.flat_width + tw) {
        fail_field("schedule.tile_x_vectors", "exceeds a block's pixels");
    }
    if (nc > cb) fail_field("schedule.tile_c", "exceeds schedule.channel_block");

    Dims t(tile);
    Var yo("yo"), yi("yi"), cbo("cbo"), cbi("cbi"), co("co"), ci("ci"), task("task");
    const auto inwards = Halide::TailStrategy::ShiftInwards;
    tile.split(t.y, yo, yi, rows, inwards)
        .split(t.c, cbo, cbi, cb, inwards)
        .split(cbi, co, ci, nc, inwards)
        .reorder(t.x, yi, ci, co, yo, cbo, t.n)
        .fuse(yo, cbo, task)
        // Every image's blocks one parallel loop (as every conv template): no join between images, and
        // under a static schedule a thread keeps whole images, their input read by one core. 1x1
        // 128->256 at 28x28, batch 8, 2 threads: 1.20 -> 1.13 ms; conv_bias_relu_maxpool and the
        // MobileNet-V2 block at batch 8 2-6% faster.
        .fuse(task, t.n, task)
        .parallel(task);
    vectorize_rows(tile, t.x, tw, vw);

    // Per tile_c channels (the strip's channels are one register tile's).
    Func strip = flat.in();
    strip.compute_at(tile, co);
    schedule_flat_register_tiles(strip, flat, vw, nx, nc);
    unroll_reduction(flat.update(), flat.rvars(0)[0], p, s.weight[1]);
    if (padded.defined()) padded_at_root(padded, flat, vw);
}

}  // namespace hfuse::schedules::conv_util
