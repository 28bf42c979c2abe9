// conv_cv: the conv channel-blocked, output channels in vector lanes, direct or Winograd
// (schedules/conv_template.h).
#include "hfuse/error.h"
#include "ops/window_util.h"
#include "schedules/conv_partition.h"
#include "schedules/conv_schedule_util.h"
#include "schedules/schedule_params.h"

#include <algorithm>
#include <string>

namespace hfuse::schedules::conv_util {

using Halide::Func;
using Halide::RVar;
using Halide::Var;

namespace {

void schedule_winograd_stages(Func tile, Var task, const WinogradFuncs &wino, int m, int np, int nc, int vw,
                              int input_block);
Func schedule_cv_input(Func reader, Func tile, Var task, Func padded, const ConvGroupShape &s, int wino_m, int vw,
                       int input_block, bool per_task);

}  // namespace

// conv_cv: the conv lowered channel-blocked (`blocked`, (cv, p, cb, n): output channel cb * vw + cv at
// the flattened output position p = y * W + x), output channels in vector lanes, the input broadcast.
// T is tiled by blocks of block_rows rows x channel_block channels, one parallel task each, with the
// epilogue along x; per task `blocked` is computed over the block's positions and channel blocks by
// register tiles of tile_positions positions x tile_c_vectors vectors (shifting inwards at the
// block's ends; in passes rounded up: past the end the lowering reads inside the last row, and packs
// zero weights past the last channel), the reduction over the input channels split by ci_block (the
// block's weights stay in L1/L2 while every position tile reads them). Any stride and row width tiles
// without idle lanes; the weights were packed for tile_c_vectors at lowering (compose::op_lowerings).
// The padded input is materialised at root, planar or channel-blocked (input_block); a pool after the
// conv is computed per task.
void schedule_cv(Func tile, Func blocked, Func padded, const std::vector<Func> &per_tile, const ConvGroupShape &s,
                 const nlohmann::json &p, int vw, const TargetTraits &tt, const WinogradFuncs &wino) {
    const int64_t tw = s.tile_output[3], th = s.tile_output[2], tc = s.tile_output[1];
    // The input channels a block of vw output channels reduces over (a grouped conv: its groups').
    const int cin = static_cast<int>(ops::blocked_groups(s.input[1], s.output[1], s.group, vw).span);
    const int np = get_int(p, "tile_positions", 1, 16), nc = get_int(p, "tile_c_vectors", 1, 16);
    const int rows = get_int(p, "block_rows", 1, static_cast<int>(th));
    const int cb = get_int(p, "channel_block", 1, static_cast<int>(tc));
    const int ci_block = get_int(p, "ci_block", 1, cin);
    const int input_block = conv_cv_input_block(p);
    // Where the padded input copy is made: at root, in one parallel pass, or per task, the rows the
    // task reads (its block's and the window's reach past it, made again by the neighbouring task).
    const bool per_task = conv_input_per_task(p);
    const int wino_m = conv_cv_winograd_tile(p);  // 0: the direct conv
    const bool winograd = wino_m > 0;
    // Rows padded to whole register tiles (the lowering's rows_padded): a task's positions, whole rows
    // from a row's first, then span whole tiles, rounded up past its last row's end.
    const bool in_rows = conv_cv_rows_padded(p), rows_padded = in_rows && s.output[3] % np != 0;
    if (winograd && in_rows)
        fail_field("schedule.position_tiles", "\"in_rows\" is for the direct conv; Winograd tiles its own way");
    if (!s.constant_weights) fail_field("schedule.template", "conv_cv needs constant weights");
    if (winograd) {
        if (!winograd_fits(s))
            fail_field("schedule.algorithm", "winograd needs a 3x3 conv with stride 1, dilation 1 and one group");
        if (!wino.input.defined() || !wino.product.defined())
            throw Error("internal: conv_cv's winograd needs the conv lowered in that form (compose::op_lowerings)");
        // Register tiles of m x m output tiles; one pass: the transformed input of a task's tiles is
        // made once.
        if (np > ops::winograd_tiles(s.output[3], wino_m))
            fail_field("schedule.tile_positions", "exceeds a row's Winograd tiles");
        if (ci_block != cin) fail_field("schedule.ci_block", "winograd reduces over the input channels in one pass");
    } else if (np > rows * tw) {
        fail_field("schedule.tile_positions", "exceeds a block's positions");
    }
    if (int64_t{nc} * vw >= cb + vw) fail_field("schedule.tile_c_vectors", "exceeds schedule.channel_block");
    if (cin % ci_block != 0) {
        fail_field("schedule.ci_block", std::to_string(ci_block) + " does not divide the " + std::to_string(cin) +
                                            " input channels a block reduces over");
    }

    Var yo("yo"), yi("yi"), co("co"), ci("ci"), task("task");
    const auto inwards = Halide::TailStrategy::ShiftInwards;
    // NCHW T along x, the epilogue gathering from `blocked`; T stored channel-blocked, (bi, x, y, cb,
    // n), a vector of a block's channels per position, read from `blocked` as they lie.
    const bool stored_blocked = s.output_block > 0;
    if (stored_blocked && (tile.dimensions() != 5 || cb % s.output_block != 0))
        throw Error("internal: conv_cv's blocked output needs a 5-D tile and whole blocks per task");
    const std::vector<Var> a = tile.args();
    const size_t k = stored_blocked ? 1 : 0;  // T's x, y, channels (or blocks of them), n: args k.. k + 3
    std::vector<Halide::VarOrRVar> order = {a[k], yi, ci, yo, co, a[k + 3]};
    if (stored_blocked) order.insert(order.begin(), a[0]);
    tile.split(a[k + 1], yo, yi, rows, inwards)
        .split(a[k + 2], co, ci, stored_blocked ? cb / s.output_block : cb, inwards)
        .reorder(order)
        .fuse(yo, co, task)
        .fuse(task, a[k + 3], task)
        .parallel(task);
    // NCHW T in squares of vw positions x vw channels where whole squares fit: vw vectors along x,
    // one per channel, from vw vectors of channels, one per position (a transpose in registers;
    // along x alone, each vector is a gather across vw positions of `blocked`: 3x3 64->64 at
    // 128x128, AVX-512, 2 threads: 3.57 -> 3.36 ms).
    const bool squares = !stored_blocked && conv_cv_tile_from_lanes(s, cb, vw);
    if (stored_blocked) {
        tile.vectorize(a[0]);
    } else if (squares) {
        Var xo("xo"), xi("xi"), cio("cio"), cii("cii");
        tile.split(a[0], xo, xi, vw, inwards)
            .split(ci, cio, cii, vw)
            .reorder(xi, cii, xo, yi, cio, task)
            .vectorize(xi)
            .unroll(cii);
    } else {
        vectorize_rows(tile, a[0], tw, vw);
    }
    // A pool after the conv: per task over its rows, reading the task's `blocked` (the conv rows its
    // windows need; overlapping windows recompute a row at a task's edge). Channels innermost and in
    // vector lanes, as `blocked` holds them, where T is stored blocked (T then takes them as they
    // lie) or read in squares; else along x into NCHW T.
    if (stored_blocked || squares) {
        const auto guard = Halide::TailStrategy::GuardWithIf;  // a task's channels need not be whole vectors
        for (Func f : per_tile) {
            Dims d(f);
            f.compute_at(tile, task)
                .reorder_storage(d.c, d.x, d.y, d.n)
                .reorder(d.c, d.x, d.y, d.n)
                .vectorize(d.c, vw, guard);
            for (int i = 0; i < f.num_update_definitions(); i++) {
                std::vector<Halide::VarOrRVar> order = {d.c};
                for (const RVar &rv : f.rvars(i)) order.push_back(rv);
                order.insert(order.end(), {d.x, d.y, d.n});
                f.update(i).reorder(order).vectorize(d.c, vw, guard);
            }
        }
    } else {
        schedule_per_tile(per_tile, tile, task, std::min<int>(vw, static_cast<int>(tw)),
                          Halide::TailStrategy::GuardWithIf);
    }

    if (winograd) {
        schedule_winograd_stages(tile, task, wino, wino_m, np, nc, vw, input_block);
        schedule_cv_input(wino.input_rows, tile, task, padded, s, wino_m, vw, input_block, per_task);
        return;
    }
    const Var bv = blocked.args()[0], bp = blocked.args()[1], bc = blocked.args()[2];
    std::vector<RVar> r = blocked.rvars(0);  // (ci, kx, ky)
    Var po("po"), pi("pi"), cbo("cbo"), cbi("cbi");
    const auto up = Halide::TailStrategy::RoundUp;
    Halide::Stage u = blocked.update();
    // In one pass over the input channels, `blocked` is computed per register tile of the task's
    // buffer (its wrapper): the accumulators start at zero in registers and are stored once, where
    // the buffer, zeroed first (a memset of the task's rows), was loaded into them per tile (3.3% of
    // the samples of the 3x3 64->64 at 128x128, compiled, AVX-512; the inner loop's share 87.3 ->
    // 89.7%, its address arithmetic 241 -> 236 instructions per 8 channels; one thread, 5
    // alternations, medians 6.29-6.53 -> 6.19-6.24 ms; 2 threads within the machine's noise). In
    // passes (ci_block), the buffer holds them from one pass to the next.
    const bool one_pass = ci_block == cin;
    Var ti = pi, tci = cbi;  // the register tile's positions and channel vectors in the update
    if (one_pass) {
        Func task_buffer = blocked.in();
        task_buffer.compute_at(tile, task)
            .split(bp, po, pi, np, rows_padded ? up : inwards)
            .split(bc, cbo, cbi, nc, inwards)
            .reorder(bv, pi, cbi, po, cbo)
            .vectorize(bv, vw)
            .unroll(pi)
            .unroll(cbi);
        blocked.compute_at(task_buffer, po).vectorize(bv, vw).unroll(bp).unroll(bc);
        ti = bp;
        tci = bc;
    } else {
        blocked.compute_at(tile, task).vectorize(bv, vw);
        u.split(bp, po, pi, np, up).split(bc, cbo, cbi, nc, up);
    }
    // The input channels of one pass, innermost. Read channel-blocked, they go by whole blocks, each
    // unrolled, where the tile's accumulators, broadcasts and weight vectors all fit in the registers:
    // a broadcast's address is then the position's pointer plus a constant, not the channel's block
    // and lane recomputed per channel (five shifts, masks and adds for 20 FMAs). AVX-512 5 x 4 tiles,
    // Zen 5, 2 threads, 4-5 alternations, medians: 64->64 at 56x56 + 2x2 pool (cbrm) 0.628-0.637 ->
    // 0.612-0.626 ms, resnet_block 1.32-1.37 -> 1.26-1.36, its batch 8 11.1-11.8 -> 10.6-11.1; one
    // thread 1-3%. Where they do not fit (AVX2's 3 x 4 tile: 19 vectors, 16 registers) LLVM spilled
    // an accumulator across the unrolled channels: 2x slower. Planar, unrolling 8 channels ran 12%
    // slower (a register per plane).
    RVar rc = r[0], rco("rco"), rci("rci"), rcb("rcb"), rcl("rcl");
    std::vector<Halide::VarOrRVar> update_order = {bv, ti, tci};
    if (!one_pass) {
        u.split(r[0], rco, rci, ci_block);
        rc = rci;
    }
    const bool tile_fits = register_tile_fits({np, nc}, vw, tt);
    // The blocks read: the copy's, or those another group stored the input in (read in place, or
    // copied block for block), by whole stored blocks: ResNeXt-50's layer3 1x1s after its grouped
    // 3x3s (conv_cv, their output stored blocked), AVX-512, 2 threads, in the network, 4 rounds:
    // read planar 1.15-1.18 ms, stored blocks channel by channel 1.24-1.29, by whole blocks
    // 0.95-0.98 (the network 56.2 -> 50.6 ms).
    const int read_block = conv_cv_read_block(input_block, s);
    const bool by_blocks = tile_fits && read_block > 1 && ci_block % read_block == 0;
    if (by_blocks) {
        u.split(rc, rcb, rcl, read_block).unroll(rcl);
        update_order.insert(update_order.end(), {rcl, rcb});
    } else {
        update_order.push_back(rc);
        if (ci_block <= 4) u.unroll(rc);
    }
    update_order.insert(update_order.end(), {r[1], r[2]});
    if (!one_pass) update_order.insert(update_order.end(), {po, cbo, rco});
    u.reorder(update_order).vectorize(bv, vw).unroll(ti).unroll(tci);
    Func copy = schedule_cv_input(blocked, tile, task, padded, s, 0, vw, input_block, per_task);
    // In passes, the copy per task is made per pass, the pass's channels: bounds inference at the task
    // took the rows the task's positions read, not those its register tiles rounded up past them
    // read (the next row's first positions, computed and dropped), which the conv then read
    // uninitialised: denormals among them cost FMA microcode assists (Inception-V3's 1x7 160->160 at
    // 17x17, 4 passes, 1 row a task: 0.6 ms in some processes, 6 ms in most; AVX-512, 2 threads).
    if (per_task && !one_pass && copy.defined()) copy.compute_at(blocked, rco);
}

namespace {

// conv_cv's input copy (`padded`, undefined if none), read by `reader` (the direct conv, or Winograd
// F(wino_m x wino_m, 3x3)'s input transform along y): at root or per task. Returns the Func scheduled
// (`padded` or its wrapper; undefined if none).
Func schedule_cv_input(Func reader, Func tile, Var task, Func padded, const ConvGroupShape &s, int wino_m, int vw,
                       int input_block, bool per_task) {
    if (!padded.defined()) return Func();
    // The padded input's plane: what the windows read of it, halo included (and Winograd's tiles
    // rounded up).
    const int64_t over_x = wino_m > 0 ? ops::winograd_overreach(s.output[3], wino_m) : 0;
    const int64_t over_y = wino_m > 0 ? ops::winograd_overreach(s.output[2], wino_m) : 0;
    int64_t plane_x = (s.output[3] - 1) * s.stride_x + (s.weight[3] - 1) * s.dilation_x + 1 + over_x;
    int64_t plane_y = (s.output[2] - 1) * s.stride_y + (s.weight[2] - 1) * s.dilation_y + 1 + over_y;
    // A strided pointwise conv's blocked copy of a planar input holds its strided positions alone
    // (ops::subsampling_pointwise): the output's plane.
    if (conv_cv_copy_subsamples(input_block, s)) {
        plane_x = s.output[3];
        plane_y = s.output[2];
    }
    Func in;
    Var in_y;
    // A copy of an input another group stored blocked (its halo too narrow for the windows) is
    // blocked as that storage is, whatever input_block says.
    if (input_block == 0 && padded.dimensions() == 5) input_block = s.input_stored_block;
    if (input_block > 0) {
        // The channel-blocked copy (input_block, x, y, blocks, n), in one pass parallel over rows
        // (a row of every block a task): per position a vector of a block's channels.
        if (padded.dimensions() != 5)
            throw Error("internal: conv_cv's input_block needs the input copy lowered blocked");
        in = padded;
        const std::vector<Var> a = in.args();
        // Per task, a block's rows inside the block (storage order): each plane read, and the copy
        // written, as one stream over the task's rows rather than a row's 512 bytes per plane at a
        // time. Zen 5, 2 threads, 6 alternations, medians: 3x3 64->64 at 128x128 3.20 -> 3.13 ms,
        // conv_bias_relu_maxpool 0.625 -> 0.611, resnet_block 1.21 either way (minima alike). At
        // root, rows outermost: the parallel loop.
        const Var outer = per_task ? a[3] : a[2], inner = per_task ? a[2] : a[3];
        in.reorder(a[0], a[1], inner, outer, a[4]);
        if (per_task) {
            in.compute_at(tile, task);
        } else {
            in.compute_root().parallel(a[2]);
        }
        // Read from a planar input (not from blocks another group stored), a vector of a block's
        // channels at one position takes a float from each of input_block planes. Instead, squares
        // of input_block positions x channels: a vector along x from each plane, transposed in
        // registers (an 8 x 8 transpose of AVX vectors for blocks of 8). resnet_block's first conv
        // (planar model input), AVX-512, Zen 5, share of its task's samples in the conv's inner loop:
        // 85.6% -> 91.6% (the copy's vinsertps gathers were 7%; 16 lanes transposing 2 positions' blocks
        // at a time, 86.5%). In time, within the machine's noise: 2 threads, 8 alternations, medians,
        // 3x3 64->64 at 128x128 3.23 -> 3.18 ms (its copy waits on memory either way), resnet_block
        // 1.28 -> 1.28.
        const bool from_planar = s.input_stored_block == 0;
        if (from_planar && (input_block == 4 || input_block == 8 || input_block == 16) && input_block <= vw &&
            plane_x >= input_block) {
            Var xo("xo"), xi("xi");
            in.bound(a[0], 0, input_block)
                .split(a[1], xo, xi, input_block, Halide::TailStrategy::ShiftInwards)
                .reorder(xi, a[0], xo, inner, outer, a[4])
                .vectorize(xi)
                .unroll(a[0]);
        } else if (input_block >= 4) {
            in.vectorize(a[0], std::min(input_block, vw), Halide::TailStrategy::GuardWithIf);
        }
        in_y = a[2];
    } else {
        if (padded.dimensions() != 4) throw Error("internal: conv_cv's planar input copy lowered blocked");
        if (per_task) {
            in = padded.in(reader);
            in.compute_at(tile, task).vectorize(Dims(in).x, vw, Halide::TailStrategy::GuardWithIf);
        } else {
            in = padded_at_root(padded, reader, vw);
        }
        in_y = Dims(in).y;
    }
    if (per_task) return in;  // the task's few rows: the row added below is for a root copy's planes
    // The inner loop reads ci_block channels of a few rows: planes (or blocks of them) a multiple of
    // 512 bytes apart map them to few L1 sets. One more row breaks that (256->256 at 14x14, 16x16
    // planes, 2 threads: 1.51 -> 1.30 ms).
    // (Only where the windows reach past the input's rows: then the padded input is zero there.)
    if (plane_x * plane_y % 128 == 0 && plane_y > s.input[2]) in.bound_extent(in_y, static_cast<int>(plane_y + 1));
    return in;
}

// conv_cv's Winograd F(m x m, 3x3) stages per task (see lower_winograd_conv in src/ops/conv_ops.cpp):
// the task's input tiles transformed (per tile and vector of input channels, along y then along x, the
// (m + 2)^2 unrolled: 1.0-1.1 s to compile a 64->64 group at m = 4 where transforming each e from the
// tile took 1.6-1.8, LLVM deduplicating its n^4 loads), their products with the transformed weights
// per e by register tiles of np tiles x nc channel vectors (accumulators in registers, stored once
// into the task's buffer, the wrapper; e outermost, so the weights of one e, 16 KB for 64 -> 64, stay
// in L1 while the task's tiles stream by), and the output transform over m x m blocks of (x, y)
// aligned to the tiles (x % m and y % m, which pick the output of the m x m, constants; along x per
// tile, then along y), a vector of output channels at a time, which T's epilogue reads. F(2x2, 3x3),
// AVX-512, Zen 5, 2 threads, prototype against the direct conv_cv (blocked I/O): 3x3 64->64 at 56x56
// 0.62 -> 0.28 ms (1 or 2 tile rows a task alike; tiles of 4 x 4 vectors 0.283, 5 x 4 0.309, 6 x 4
// 0.347); at 128x128 3.1 -> 1.64 ms; oneDNN's Winograd (jit_fp32_wino_2x3 / jit_wino_4x3) 0.29 and
// 1.53 ms.
void schedule_winograd_stages(Func tile, Var task, const WinogradFuncs &wino, int m, int np, int nc, int vw,
                              int input_block) {
    const auto inwards = Halide::TailStrategy::ShiftInwards;
    Func out = wino.output, product = wino.product, input = wino.input, output_columns = wino.output_columns,
         input_rows = wino.input_rows;
    {
        const std::vector<Var> a = out.args();  // (cv, x, y, cb, n)
        Var xo("xo"), xi("xi"), yo("yo"), yi("yi");
        out.compute_at(tile, task)
            .align_bounds(a[1], m)
            .align_bounds(a[2], m)
            .split(a[1], xo, xi, m, Halide::TailStrategy::RoundUp)
            .split(a[2], yo, yi, m, Halide::TailStrategy::RoundUp)
            .reorder(a[0], xi, yi, xo, yo, a[3], a[4])
            .vectorize(a[0], vw)
            .unroll(xi)
            .unroll(yi);
        // The tile's products transformed along x, n x m vectors, per tile (xo).
        const std::vector<Var> c = output_columns.args();  // (cv, t, a, q, cb, n)
        output_columns.compute_at(out, xo)
            .reorder(c[0], c[3], c[2], c[1], c[4], c[5])
            .vectorize(c[0], vw)
            .unroll(c[3])
            .unroll(c[2]);
    }
    {
        const std::vector<Var> a = product.args();  // (cv, t, e, cb, n)
        Var to("to"), ti("ti"), cbo("cbo"), cbi("cbi");
        Func task_buffer = product.in();
        task_buffer.compute_at(tile, task)
            .split(a[1], to, ti, np, inwards)
            .split(a[3], cbo, cbi, nc, inwards)
            .reorder(a[0], ti, cbi, to, cbo, a[2], a[4])
            .vectorize(a[0], vw)
            .unroll(ti)
            .unroll(cbi);
        product.compute_at(task_buffer, to).vectorize(a[0], vw).unroll(a[1]).unroll(a[3]);
        const RVar r = product.rvars(0)[0];
        product.update().reorder(a[0], a[1], a[3], r, a[2], a[4]).vectorize(a[0], vw).unroll(a[1]).unroll(a[3]);
    }
    {
        const std::vector<Var> a = input.args();  // (ci, t, e, n)
        // A vector of a block's channels (dense loads from the channel-blocked input), else of a
        // plane's (gathers).
        const int lanes = input_block >= 4 ? std::min(input_block, vw) : vw;
        // Per tile and vector of channels (cio), the tile transformed along y (n x n vectors, loaded
        // once each), then along x. Stored (ci, e, t): a tile's n x n vectors are contiguous. Stored
        // (ci, t, e), tasks of 32 tiles of 64 channels put them 8 KB apart, in one set of L1 (3x3
        // 64->64 at 128x128, Zen 5, 2 threads: 1.9 ms against 1.4 when the transform took one e at a
        // time, 1.25-1.35 stored this way).
        Var cio("cio"), cii("cii");
        input.compute_at(tile, task)
            .split(a[0], cio, cii, lanes, Halide::TailStrategy::GuardWithIf)
            .reorder(cii, a[2], cio, a[1], a[3])
            .reorder_storage(a[0], a[2], a[1], a[3])
            .vectorize(cii)
            .unroll(a[2]);
        const std::vector<Var> r = input_rows.args();  // (ci, t, i, a, n)
        input_rows.compute_at(input, cio)
            .reorder(r[0], r[2], r[3], r[1], r[4])
            .vectorize(r[0], lanes, Halide::TailStrategy::GuardWithIf)
            .unroll(r[2])
            .unroll(r[3]);
    }
}

}  // namespace

}  // namespace hfuse::schedules::conv_util
