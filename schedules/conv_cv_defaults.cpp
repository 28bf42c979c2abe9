// conv_cv's default parameters, chosen from a conv group's shape (schedules::ConvGroupShape) and the
// target, each choice with the measurements behind it: the direct conv's register tiles, tasks, input
// copy and reduction passes, the Winograd form's, and conv_cv's for a depthwise conv
// (conv_defaults_internal.h; which template a group takes is conv_choice.cpp).
#include "ops/window_util.h"
#include "schedules/conv_defaults_internal.h"
#include "schedules/conv_partition.h"
#include "schedules/conv_schedule_util.h"
#include "schedules/schedule_params.h"

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

namespace hfuse::schedules {

// Whether the weights are the smaller operand: per input channel, cout x taps weights against the
// output's positions (as a GEMM's M against its N). Each block of output channels then rereads the
// input for little weight reuse, so the tasks split the positions, every channel in one block.
bool weights_smaller_than_positions(const ConvGroupShape &s) {
    return s.output[1] * s.weight[2] * s.weight[3] <= s.output[2] * s.output[3];
}

namespace {

using conv_util::winograd_fits;

// 16 channels each way and planes of at least 14x14 (with 32 vector registers, at least 28 tiles of
// 4x4 or 256 input channels: see winograd_wins). AVX-512, Zen 5, 2 threads, relu epilogue,
// planar I/O, 3 alternations, minima, direct -> F(2x2, 3x3): 64->64 at 56x56 0.58 -> 0.36 ms,
// 128->128 at 28x28 0.58 -> 0.41, 32->32 at 112x112 0.63 -> 0.47, 16->16 at 56x56 0.066 -> 0.055,
// 256->256 at 14x14 0.59 -> 0.56; 512->512 at 7x7 0.60 -> 0.91: 16 tiles, each of its 16 MB of
// transformed weights (16 floats per pair of channels, the direct conv's 9) read for 16 tiles (F(4x4,
// 3x3): 1.6 ms, 36 floats for 4 tiles).
bool winograd_wins(const ConvGroupShape &s, const TargetTraits &tt) {
    if (!winograd_fits(s) || !s.constant_weights || s.input[1] < 16 || s.output[1] < 16 || s.output[2] < 14 ||
        s.output[3] < 14) {
        return false;
    }
    // F(4x4, 3x3)'s transformed weights, 4x the direct conv's, serve an image's tiles: fewer than 28
    // of them (below 24x24) pay for them only over many input channels, against a direct conv whose
    // tiles of a row's 7 positions x 3 vectors fit 32 registers. Sapphire Rapids, AVX-512, 2 threads,
    // in the networks: GoogLeNet's 3x3s at 14x14 (16 tiles), 96-160 -> 208-320, direct 1.22-1.42x
    // faster than Winograd in whole planes (the net 1.12x), DenseNet-121's 128 -> 32 1.43x;
    // ResNet-18's 256 -> 256 alike either way. Under an AVX2 target (16 registers) the two nets ran
    // 0.96-0.99x direct: Winograd stays there.
    const int64_t tiles = ops::winograd_tiles(s.output[3], 4) * ops::winograd_tiles(s.output[2], 4);
    return tiles >= 28 || s.input[1] >= 256 || tt.vector_registers < 32;
}

// Winograd's parameters over conv_cv's direct defaults `p`, F(m x m, 3x3): register tiles of 4
// tiles x 4 channel vectors with 32 registers (16 accumulators, 4 weight vectors, a broadcast; 5 or
// 6 tiles, or 3, were slower at m = 4 too), 3 x 4 with 16 as the direct conv's; the input copy
// channel-blocked (the input transform's vector loads); tasks of whole tile rows (m conv rows), at
// least 28 tiles where the height has them, then fewer while their transformed input and products,
// (m + 2)^2 floats per tile and channel each, pass 512 KB (L2).
// m = 4 is the default up to 256 input channels: 4x fewer products than the direct conv to m = 2's
// 2.25x, for transforms of 6x6 tiles with small integer coefficients and rounding errors several
// times larger (2e-6 to 1e-5 of the output's scale in the tests and bench workloads, within 1.1e-6
// at m = 2). Zen 5, 2 threads, relu epilogue, medians of 3-5 alternations, m = 2 -> 4: 64->64 at
// 128x128 2.11 -> 1.66 ms, at 56x56 0.390 -> 0.309; 128->128 at 28x28 0.466 -> 0.366; 256->256 at
// 14x14 (16 rows computed for 14) 0.683 -> 0.578; 32->32 at 112x112 0.493 -> 0.467; 16->16 at 56x56
// 0.055 -> 0.056. Compile time 0.96 -> 1.62 s for the first (LLVM on the unrolled 6x6 transforms;
// 1.0-1.1 s at m = 4 with the transforms one axis at a time).
void winograd_defaults(nlohmann::json &p, const ConvGroupShape &s, const TargetTraits &tt) {
    const int64_t cin = s.input[1], channel_block = p["channel_block"].get<int64_t>();
    // F(4x4, 3x3) while a task's transformed weights (36 floats per pair of channels), which its few
    // tiles reuse, stay within 3 MB (256 input channels by 64 output channels); beyond, streamed from
    // L3, F(2x2, 3x3)'s 16 floats do better. 512->512 at 14x14 F(4x4) 4.84 ms, F(2x2) 3.02; at 28x28
    // 11.8 and 8.4 (VGG-11's); 256->256 at 28x28 1.83 and 1.88.
    const int m = 36 * cin * channel_block * 4 <= 3 * 1024 * 1024 ? 4 : 2;
    const int64_t tiles_x = ops::winograd_tiles(s.output[3], m), points = (m + 2) * (m + 2);
    p["algorithm"] = "winograd";
    p["winograd_tile"] = m;
    p["tile_positions"] = std::min<int64_t>(tt.vector_registers >= 32 ? 4 : 3, tiles_x);
    p["ci_block"] = cin;
    // Blocks of 8 (vectors of 8 for the input transform) rather than 16: as fast (AVX-512, Zen 5,
    // conv_bias_relu_maxpool 0.339 -> 0.325 ms, 3x3 64->64 at 128x128 1.98 -> 1.91, medians) and half
    // the compile time (2.4 -> 1.0 s for the former: LLVM on the 16 x 16 transposes from the planes).
    p["input_block"] = cin % 8 == 0 ? 8 : (cin % 4 == 0 ? 4 : 0);
    const int64_t bytes_per_tile = points * (cin + channel_block) * 4;  // transformed input and products
    // Rows of T (the conv's, or a stride-2 pool's after it): the direct defaults' rounded up to whole
    // tile rows (a task of one conv row would compute m) or all.
    const int64_t stride = s.tile_stride_y, hout = std::max<int64_t>(s.tile_output[2], 1);
    const int64_t step = m / std::gcd<int64_t>(m, stride);  // T rows per whole tile row
    auto tiles = [&](int64_t rows) { return ops::winograd_tiles(rows * stride, m) * tiles_x; };
    int64_t rows = p["block_rows"].get<int64_t>();
    rows = std::min<int64_t>((rows + step - 1) / step * step, hout);
    // Then at least kMinTiles tiles a task where the height has them, over the direct defaults' 8
    // tasks and the budget: a task reads its transformed weights once for its tiles, 4 / tiles bytes
    // per product whatever the channels and m, from L2 or, past 1 MB, L3. Not below 4 tasks in all
    // (the images' tasks are one parallel loop), nor an odd number below 8: one of 2 threads would
    // wait. Zen 5, 2 threads, medians of 5 alternations, tiles a task before -> after: 128->128 at
    // 28x28 14 -> 28, 0.406 -> 0.322 ms; 256->256 at 14x14 8 -> 16, 0.611 -> 0.499; 512->512 at 14x14
    // 14 -> 28 (F(2x2)) 2.85 -> 2.48; at 28x28 14 -> 28, 7.93 -> 7.30; + 2x2 max pool: 128->128 at
    // 28x28 7 -> 28, 0.387 -> 0.346; conv_bias_relu_maxpool (64->64 at 56x56) at batch 8 14 -> 28,
    // 2.59 -> 2.27 (at batch 1, 7 tasks, compiled: 0.316 against 0.297 ms, so kept at 14 tiles).
    // Then whole tile rows fewer while over the budget, down to kMinTiles; but where the whole
    // plane's data is no more than a task's transformed weights, the plane stays one block of rows:
    // each more block streams those weights again, and in a network they come from memory (the other
    // layers' weights pass through the caches between runs). Sapphire Rapids, AVX-512, 2 threads, in
    // the networks (bench --against --profile, 2 rounds): Wide ResNet-50's 512->512 at 14x14 (F(2x2),
    // 2 MB of weights a task, 1.8 MB of data) in 2 blocks 3.9-5.8 ms, in one 3.1-4.0 (the direct conv
    // 4.7; alone, its weights staying in L3, all three alike); VGG-16's alike 1.07-1.54x, its 256->512
    // at 28x28 (F(4x4)) 1.19-1.21x. Planes of more data (56x56; 512 channels at 28x28) kept the budget:
    // larger blocks there ran 4-15% slower.
    // kOddTasksFrom: from that many tasks on, an odd count (one thread's extra task) is accepted.
    // A block of rows that does not divide the height shifts inwards and computes the overlap again:
    // larger blocks are taken only where they compute at most 15% more tiles in all than the fewest
    // yet (GoogLeNet's 3x3s at 14x14, four tile rows: blocks of 12 rows computed six, 1.15-1.19x
    // slower than blocks of 8; 28 rows in blocks of 8, 8 tile rows for 7, kept).
    constexpr int64_t kMinTiles = 28, kMinTasks = 4, kOddTasksFrom = 8;
    const int64_t channel_tasks = (s.output[1] + channel_block - 1) / channel_block;
    auto tasks = [&](int64_t rows) { return s.output[0] * ((hout + rows - 1) / rows) * channel_tasks; };
    auto computed = [&](int64_t rows) { return (hout + rows - 1) / rows * tiles(rows); };
    int64_t fewest = computed(rows);
    for (int64_t more = rows + step; rows < hout && tiles(rows) < kMinTiles; more += step) {
        more = std::min<int64_t>(more, hout);
        const int64_t n = tasks(more);
        if (n < kMinTasks || (n % 2 == 1 && n < kOddTasksFrom)) break;
        fewest = std::min(fewest, computed(more));
        if (computed(more) * 100 <= fewest * 115) rows = more;
        if (more == hout) break;
    }
    const int64_t task_weight_bytes = points * cin * channel_block * 4;
    const int64_t whole_plane_tasks = tasks(hout);
    if (tiles(hout) * bytes_per_tile <= task_weight_bytes && whole_plane_tasks >= kMinTasks &&
        (whole_plane_tasks % 2 == 0 || whole_plane_tasks >= kOddTasksFrom)) {
        rows = hout;
    } else {
        while (rows > step && tiles(rows) * bytes_per_tile > 512 * 1024 && tiles((rows - 1) / step * step) >= kMinTiles)
            rows = (rows - 1) / step * step;
    }
    p["block_rows"] = rows;
}

}  // namespace

// conv_cv's register tile across channels, chosen by a small cost model: per useful FMA, the
// channels computed over those wanted (a tile that does not divide the output's vectors is shifted
// inwards at the last task and recomputes the overlap: 160 channels by tiles of 64 compute 192), times
// the loads a tile pays per FMA (np broadcasts and nc weight vectors for np * nc FMAs), weighted as
// measured: AVX-512, 2 threads, 1x7 160->160 at 17x17 (10 vectors), 5 x 4 (computing 12) 0.624 ms,
// 4 x 5 0.539, 5 x 2 0.649 (so a load costs ~1.8 FMAs' time in this loop), and, where the context
// prices spills, those of a tile that does not fit the registers (register_tile_cost: AVX2's 3 x 4
// tile needs 19 of 16). Candidates: 4, 3 and 2 vectors at the target's positions (5 with 32
// registers, else 3), 5 vectors at 4 positions with 32 registers, and 4 vectors at the most
// positions that fit where the target's do not (AVX2's 2 x 4: 64 or 128 channels, 8 or 16 vectors,
// no longer computed by 3 x 3 tiles as 9 or 18; Zen 3, 2 threads, in the networks, the changed
// groups summed: MobileNet-V2's 1x1s to 64 channels 1.21x, batch 8 1.26x, ResNeXt-50's and Wide
// ResNet-50's 1.14-1.17x, ResNet-18's and -34's 1.09-1.15x, Inception-V3's 17 groups 1.02x). 4 on
// a tie (the tile measured most). Only where the channels are whole vectors: the tail of a partial
// vector is computed anyway.
ChannelTile conv_cv_channel_tile(int64_t cout, const TileContext &context) {
    const int vw = context.vector_width, np = context.registers >= 32 ? 5 : 3;
    const int64_t blocks = (cout + vw - 1) / vw;
    ChannelTile best{np, static_cast<int>(std::min<int64_t>(4, blocks))};
    if (cout % vw != 0 || blocks <= 3) return best;
    auto cost = [&](ChannelTile t) {
        const double computed = static_cast<double>((blocks + t.vectors - 1) / t.vectors * t.vectors) / blocks;
        return computed * register_tile_cost(t, context);
    };
    std::vector<ChannelTile> candidates = {{np, 3}, {np, 2}};
    if (context.registers >= 32) candidates.push_back({4, 5});
    if (const ChannelTile four = fitting_tile(4, context.registers); four.positions < np) candidates.push_back(four);
    for (const ChannelTile &t : candidates) {
        if (cost(t) < cost(best) - 1e-9) best = t;
    }
    return best;
}

namespace {

// The most positions, at most 16, of a register tile of nc channel vectors that fits the registers
// (register_tile_fits). RegNet-Y 800MF's grouped 3x3s (16 channels a group), Zen 3, AVX2, 2 threads,
// in the network: 5 x 2 tiles (17 registers of 16) 0.30-0.45 ms, 4 x 2 0.16-0.29, 1.2-1.8x faster.
int most_tile_positions(int nc, const TargetTraits &tt) {
    return fitting_tile(nc, tt.vector_registers).positions;
}

// The most positions a register tile of nc channel vectors holds that divide a row of `width`
// outputs, where that is at least 4; else 0. Such a tile lies within a row, so its positions' input
// addresses are the tile's plus constants (see lower_blocked_conv); across rows each is computed per
// tap.
int row_tile_positions(int64_t width, int nc, const TargetTraits &tt) {
    const int divisor = static_cast<int>(largest_divisor_at_most(width, most_tile_positions(nc, tt)));
    return divisor >= 4 ? divisor : 0;
}

// conv_cv's register tile for a grouped conv: up to 4 vectors of one group's channels (tiles across
// groups share no broadcasts), and positions that divide the output's row where it has such a
// divisor of at least 4 that fits the registers (most_tile_positions), else as many as fit. A tile
// within a row has its positions' addresses the tile's plus constants (see lower_blocked_conv);
// across rows each is computed per tap, in vector registers on the FMA ports. RegNet's 3x3s with 16
// channels a group, AVX-512, one thread, the conv alone: 144 channels at 28x28 in 14-position tiles
// (2 a row) 0.193 ms, 8 positions 0.367 (conv_xv 0.218); 320 at 14x14, 14 positions 0.11, 8
// positions 0.175 (conv_xv 0.22); 784 at 7x7, 7 positions 0.086, 15 0.160.
ChannelTile grouped_channel_tile(const ConvGroupShape &s, const TargetTraits &tt) {
    const int nc = static_cast<int>(largest_divisor_at_most(s.output[1] / s.group / tt.vector_width, 4));
    const int in_row = row_tile_positions(s.output[3], nc, tt);
    return {in_row > 0 ? in_row : most_tile_positions(nc, tt), nc};
}

// conv_cv's rows a task of `height` rows, with `channel_tasks` blocks of channels each: enough for 8
// tasks; better, the most rows that divide the height (a block that does not recomputes rows it
// shares) into at least 8 tasks, an even number of them (two threads end together). Zen 5, 2 threads,
// blocked I/O: conv_bias_relu_maxpool's 28 pooled rows by 4 (7 tasks) 0.67 ms, by 3 (10, the last
// recomputing) 0.63, by 2 (14) 0.58; 128->128 at 28x28 by 7 (x 2 channel tasks) 0.585, by 3 0.63.
int64_t rows_for_tasks(int64_t height, int64_t channel_tasks) {
    const int64_t row_blocks = std::min<int64_t>(height, (8 + channel_tasks - 1) / channel_tasks);
    int64_t rows = (height + row_blocks - 1) / row_blocks;
    for (int64_t r = rows; r >= 1; r--) {
        const int64_t tasks = height / r * channel_tasks;
        if (height % r == 0 && tasks >= 8 && tasks % 2 == 0) return r;
    }
    return rows;
}

// Blocks of rows of a pool whose windows overlap along y (T's rows reach more conv rows than their
// stride): a block computes the conv rows its windows reach, (rows - 1) x stride + reach, so the rows
// at a block's edge twice. Priced by the conv rows the busiest thread computes, as conv_partition.h
// prices tasks, at 2 and 4 threads alike; the most rows on a tie. Zen 5, AVX-512, 2 threads, conv +
// ReLU + 3x3 stride-2 max pool alone, 3 alternations, medians, pooled rows a task 5 / 7 / 10 / 14:
// SqueezeNet 1.1's 3x3 stride-2 3->64 to 55x55 0.166 / 0.156 / 0.163 / 0.151 ms, ResNet's 7x7 to
// 56x56 0.634 / 0.580 / 0.614 / 0.566, SqueezeNet 1.0's 7x7 3->96 to 54x54 0.92 / 0.85 / 0.89 / 0.83
// (rows_for_tasks, for whole divisors, took 7, 7 and 3).
int64_t overlapping_pool_rows(const ConvGroupShape &s, int64_t height, int64_t channel_tasks) {
    int64_t best = 1;
    double best_rows = 0;
    for (int64_t rows = 1; rows <= height; rows++) {
        const int64_t tasks = ceil_div(height, rows) * channel_tasks * s.tile_output[0];
        const int64_t conv_rows = (rows - 1) * s.tile_stride_y + s.tile_reach_y;
        double busiest = 0;
        for (const int threads : {2, 4}) busiest += static_cast<double>(ceil_div(tasks, threads) * conv_rows) / 2;
        if (rows == 1 || busiest <= best_rows) {
            best = rows;
            best_rows = busiest;
        }
    }
    return best;
}

// A short reduction (fewer input channels than a block of 8, a stem's 3) does few FMAs per tap for
// the address work of each position: tiles within a row, as for grouped convs. Sapphire Rapids,
// AVX-512, 2 threads, in the networks (bench --against --profile, 2-4 alternations): stride-2 3x3
// stems to 112x112, 3->16 in 5-position tiles 0.19-0.21 ms, 14 positions 0.16-0.19; 3->32, 5
// positions 0.27-0.29, 8 positions 0.24-0.25; ResNet-18's 7x7 3->64, 5 positions 1.29-1.71 ms, 4
// positions 1.14-1.46.
// Where no tile size divides the row, every row padded to whole tiles (*rows_padded: the positions
// past the row computed from a zero-extended copy of the input and dropped) where the conv does
// enough work per input value for that copy to pay (as conv_cv_input_copy_block's rule), with the
// tile that pads least. SqueezeNet's 7x7 stride-2 3->96 to 109x109, Sapphire Rapids, AVX-512, 2
// threads, in the network: 5-position tiles across rows 2.29-2.30 ms, within rows of 110 1.95-1.99
// (4 positions, rows of 112, 1.99). Inception-V3's 3x3 stride-2 3->32 to 149x149 (144 FLOPs an
// input value): 0.53-0.54 ms either way, 0.57-0.59 with the copy.
ChannelTile short_reduction_tile(const ConvGroupShape &s, ChannelTile ct, double flops_per_input,
                                 const TargetTraits &tt, bool *rows_padded) {
    const int in_row = row_tile_positions(s.output[3], ct.vectors, tt);
    if (in_row > 0) {
        ct.positions = in_row;
    } else if (flops_per_input >= 400 && s.output[3] > ct.positions) {
        int64_t least = 0;
        for (int np = 4; np <= most_tile_positions(ct.vectors, tt); np++) {
            const int64_t padded = ceil_div(s.output[3], np) * np;
            if (least == 0 || padded <= least) {  // ties: the larger tile
                least = padded;
                ct.positions = np;
            }
        }
        *rows_padded = least > s.output[3];
    }
    return ct;
}

// Winograd's channels a task: at least 64, whole register tiles of them, as AVX-512's 4 vectors: a
// task transforms its input tiles once for all its output channels, and AVX2's 4 vectors of 8 did
// that twice as often (Zen 5 under an AVX2 target, 2 threads, medians of 4 alternations, 32 -> 64
// channels: 3x3 64->64 at 128x128 2.77 -> 2.22 ms, conv_bias_relu_maxpool 0.590 -> 0.494,
// resnet_block 1.33 -> 0.97, 128->128 at 28x28 0.621 -> 0.515, 512->512 at 14x14 4.53 -> 3.97).
// With tiles of 3 vectors (48 channels), the least multiple of them from 64 that divides the
// channels (96 -> one task of 96), else 64 where that divides (AVX2's 32 -> 64).
int64_t winograd_channel_block(int64_t channel_block, int64_t cout) {
    if (channel_block >= 64 || cout < 64) return channel_block;
    for (int64_t m = channel_block; m <= std::min<int64_t>(cout, 2 * 64); m += channel_block) {
        if (m >= 64 && cout % m == 0) return m;
    }
    return 64 % channel_block == 0 ? 64 : channel_block;
}

// The register tiles the cost model prices beside the rules' tile `rules`: at its positions 1 to 4
// channel vectors (4 also at the most positions that fit, where its positions do not), and with 32
// registers 4 x 5 (at least 5 vectors of channels) and, where the positions read the input in its
// order (`input_order`), 7 positions x 1 to 3 vectors (else each position's address is a register
// of its own: see conv_cv_defaults).
std::vector<ChannelTile> priced_cv_tiles(const ConvGroupShape &s, const ChannelTile &rules, bool input_order,
                                         const TargetTraits &tt) {
    const int positions = rules.positions;
    const int64_t cout = s.output[1], vw = tt.vector_width;
    std::vector<ChannelTile> tiles;
    const int64_t channel_vectors = (cout + vw - 1) / vw;
    const int most_vectors = static_cast<int>(std::min<int64_t>(channel_vectors, 4));
    for (int nc = 1; nc <= most_vectors; nc++) tiles.push_back({positions, nc});
    if (const ChannelTile four = fitting_tile(4, tt.vector_registers); most_vectors == 4 && four.positions < positions)
        tiles.push_back(four);
    if (tt.vector_registers >= 32 && cout >= 5 * vw) tiles.push_back({4, 5});
    if (tt.vector_registers >= 32 && input_order) {
        for (int nc = 1; nc <= std::min(most_vectors, 3); nc++) tiles.push_back({7, nc});
        // A tile of all the channels where they are 5 to 8 vectors that the rules' tile does not
        // divide (7 vectors in tiles of 4 compute 8): 3 positions x 7 vectors for 112 channels.
        // Zen 4, 2 threads, in the networks (bench --against --profile, 3 rounds, the changed
        // groups summed), 1x1s to 112 channels at 14x14 in 5 x 4 tiles before: EfficientNet-B0's
        // 672->112 1.11-1.15x, MobileNet-V3's 1.12-1.13x, GoogLeNet's 1.09-1.12x. (Offering every
        // tile of up to 8 vectors moved 101 groups of 13 networks 0.94-1.15x.)
        if (channel_vectors >= 5 && channel_vectors <= 8 && channel_vectors % rules.vectors != 0) {
            const int nc = static_cast<int>(channel_vectors);
            tiles.push_back({most_tile_positions(nc, tt), nc});
        }
    }
    // Where the positions do not read the input in its order, tiles of a row's positions where that
    // many divide it (each position the tile's address plus a constant, see lower_blocked_conv),
    // within the register budget; measured with 32 registers only. (Pointwise convs read in
    // order; given these too, Inception-V3's 1x1 2048->192 at 8x8 took 4 x 4 tiles, 0.8x.)
    for (int nc = 1; tt.vector_registers >= 32 && !input_order && nc <= most_vectors; nc++) {
        const int in_row = row_tile_positions(s.output[3], nc, tt);
        if (in_row > 0 && in_row != positions) tiles.push_back({in_row, nc});
    }
    return tiles;
}

// Whether a pointwise conv (a strided one too: its copy holds the positions it reads alone) reads its
// planar input in place, just made by the group right before it (ConvGroupShape::input_just_made),
// rather than through a blocked copy ("planar streams" below):
// the copy pays where the planes stream in from L3 or memory, not where they are still in the
// caches, and then costs a pass; so where an image's input is at most 512 KB (half a core's L2 on
// this machine, as conv_xv's one-row rule). Zen 4, AVX-512, 2 threads, in the networks (bench
// --against --profile, 2 rounds, each group's median): MobileNet-V2's seven 14x14 project convs
// after their depthwise convs 1.07-1.15x, RegNet-Y 800MF's 1x1s after the squeeze-excitation's
// scaling 0.99-1.40x (seven of eleven 1.14-1.18x), MnasNet's 0.99-1.14x, EfficientNet-B0's
// 0.88-1.05x, GoogLeNet's after a pool 0.97-1.06x, MobileNet-V3's 80-channel projects 0.94-0.95x.
// Larger inputs: Inception-V3's 1x1s after its pools (0.9-1.4 MB) 0.93-0.94x summed, SqueezeNet's
// first squeeze (746 KB) 0.92-0.95x. Reading a Concat's value in place was slower: DenseNet-121's 35
// 1x1s 0.81-0.97x, SqueezeNet's squeeze convs 0.73-0.86x (hence the fact excludes them). Measured
// with 32 vector registers only (AVX2's conv_cv reduces in passes of 64 channels).
bool reads_just_made_in_place(const ConvGroupShape &s, bool input_order, const TargetTraits &tt) {
    const int64_t image_bytes = 4 * s.input[1] * s.input[2] * s.input[3];
    return s.input_just_made && (input_order || s.subsampling_pointwise) && s.group == 1 && !s.padded &&
           tt.vector_registers >= 32 && image_bytes <= 512 * 1024;
}

// The padded or copied input's block (0: planar, no copy unless padded). A padded input is copied
// anyway: channel-blocked, by 8 (3x3 convs of ResNet-18, 2 threads: 64->64 at 56x56 1.34 -> 1.28 ms,
// 128->128 at 28x28 1.36 -> 1.28, 256->256 at 14x14 1.35 -> 1.29, stride 2 64->128 0.75 -> 0.70;
// AVX-512, Zen 5: 128->128 at 28x28 blocks of 4, 8 and 16 alike). Unpadded, the copy costs a pass
// over the input, and pays where the conv does enough work per input value: read planar, a register
// tile's positions (other than a 1x1 stride-1 conv's, the input's own order) are each a row and
// column apart, and LLVM computes their addresses in vector registers in the inner loop, on the FMA
// ports; from blocks they are the position's pointer plus constants. Sapphire Rapids, AVX-512, 2
// threads, FLOPs per input value (2 x cout x taps / strides): 1x1 stride 2 256->512 at 28x28 (256)
// 0.238 -> 0.263 ms; 512->1024 (512) 1.66 -> 1.29; 3x3 stride 2 64->128 at 57x57 (576) 0.67 -> 0.56;
// 1x1 stride 2 1024->2048 at 14x14 (1024) 1.60 -> 1.06; Inception-V3's 3x3 stride 2 288->384 (1728)
// 4.31 -> 3.65. (Not for Winograd, whose input transform reads the input: Inception-V3's unpadded
// 3x3 32->32 at 149x149 0.99 -> 1.18 ms in the network.)
// A 1x1 conv reading a planar input of many channels over a plane of 14x14 or more: each input
// channel is a stream of its own (a tile's broadcasts for the next channel are a plane away),
// more streams than the prefetchers follow; from a blocked copy one. Sapphire Rapids, 2 threads,
// in the networks (bench --against --profile), the copy per task: SqueezeNet's squeeze convs,
// 256-512 -> 32-64 at 27x27, 1.4-1.6x; EfficientNet-B0's 80-112 -> 480-672 at 14x14 1.16-1.20x,
// 480 -> 80 1.10-1.16x, 672 -> 112 0.90-1.06x. (At 7x7 a plane is 3 cache lines: 1152 -> 192
// 0.83-0.88x, the copy made per channel task; for 16 output channels the copy, a pass over the
// input for 32 FLOPs a value, costs more than it saves: GoogLeNet's 480 -> 16 at 14x14 0.62x.)
// A strided pointwise conv's copy holds the positions it reads alone (conv_cv_copy_subsamples), in
// its order: as a stride-1 pointwise conv's, it pays where the planes stream. Zen 3, AVX2, 2 threads,
// 1x1 stride 2 + BN + ReLU alone, planar in and out, 4 alternations, medians, read planar -> copied:
// 144->320 from 28x28 0.184 -> 0.146 ms, 64->144 from 56x56 0.181 -> 0.166, 64->128 0.137 -> 0.117,
// 128->256 from 28x28 0.132 -> 0.104, 256->512 from 56x56 2.00 -> 1.69 (the whole plane copied:
// 1.80); also to 7x7, not taken (as the stride-1 rule): 320->784 from 14x14 0.227 -> 0.194,
// 256->512 0.102 -> 0.096.
// An input the group computes (a prologue: BN + ReLU, a squeeze-and-excitation scale) is computed
// once per value into the copy, rather than per broadcast, once per block of output channels.
// Zen 5, AVX-512, 2 threads, in the networks (run --profile, 4 alternations, medians): DenseNet-121's
// BN + ReLU + 1x1s 4.11 -> 3.82 ms in all (with conv_choice's deep rule taking them), the first
// block's 64-channel one 0.20 -> 0.23.
// Blocks of 8 where a group's first input channel starts one, for whole blocks per unrolled step.
// No copy where a pointwise conv reads a planar input the group right before it made
// (reads_just_made_in_place).
int conv_cv_input_copy_block(const ConvGroupShape &s, int64_t cin, int64_t group_inputs, bool input_order,
                             bool winograd, double flops_per_input, const TargetTraits &tt) {
    const bool copied_in_order = input_order || s.subsampling_pointwise;  // conv_cv_copy_subsamples
    if (reads_just_made_in_place(s, input_order, tt)) return 0;
    const int64_t cout = s.output[1];
    const bool planar_streams =
        copied_in_order && s.input_stored_block == 0 && cin >= 64 && cout >= 32 && s.output[2] * s.output[3] >= 14 * 14;
    const bool copy_pays =
        s.padded || planar_streams || s.input_in_group || (!input_order && !winograd && flops_per_input >= 400);
    return copy_pays && group_inputs % 8 == 0 ? 8 : 0;
}

// The input channels a pass of the reduction takes. In one pass with AVX-512's 32 vector registers:
// passes of up to 64 channels, meant to keep a pass's input rows in L1 for a window's taps, store and
// reload every accumulator between passes. Zen 4, AVX-512, 2 threads, in the networks (bench
// --against --profile, 2-3 rounds, the changed groups summed), 1x1 convs: ResNeXt-50 1.03-1.04x
// (the network 1.03-1.04x), Wide ResNet-50 1.02-1.04x, Inception-V3 1.06-1.07x, MobileNet-V2
// 1.07-1.12x (batch 8 1.09-1.19x), MobileNet-V3 1.05-1.06x, MnasNet 1.09-1.10x, SqueezeNet 1.05x,
// EfficientNet-B0 1.04-1.05x, DenseNet-121 1.03-1.16x, RegNet-Y 3.2GF 1.03-1.05x, GoogLeNet
// 1.01-1.03x, RegNet-Y 800MF 1.00-1.01x; then the 3x3 and 1x7/7x1 (direct, strided or not):
// Inception-V3's 1.03-1.04x, Wide ResNet-50's 1.04-1.11x, ResNet-18's 1.01-1.03x, GoogLeNet's
// 1.04-1.07x, DenseNet-121's 1.17-1.19x. Under an AVX2 target (16 registers, tiles whose channels
// are not unrolled by blocks) on the same machine one pass was slower: ResNeXt-50's 1x1s
// 0.82-0.86x, MobileNet-V2's 0.78-0.94x. A pass read by blocks (`read_block`: the input copied or
// stored channel-blocked) takes whole blocks, unrolled, only where the blocks divide it
// (schedule_cv's by_blocks): else passes of whole blocks, at least 32 channels, or one pass.
// RegNet-Y 3.2GF's 1x1s over 72 and 216 channels (passes of 36 and 54 read channel by channel),
// Zen 3, AVX2, 2 threads, in the network (bench --against --profile, 2 rounds): one pass 1.53-1.77x
// (the seven groups 8.4-8.6 -> 5.0-5.1 ms). One pass everywhere its accumulators pass half the L1 ran 0.68-0.93x on
// ResNeXt-50's, Wide ResNet-50's and MobileNet-V2's 1x1s over 256-1024 channels. (With 32 registers
// the cost model then takes passes where a tile's weights for all channels pass half the L2:
// conv_partition.h.)
int64_t conv_cv_ci_block(int64_t cin, int64_t read_block, const TargetTraits &tt) {
    if (tt.vector_registers >= 32) return cin;
    const int64_t pass = largest_divisor_at_most(cin, 64);
    if (read_block <= 1 || pass % read_block == 0) return pass;
    for (int64_t whole = 64 / read_block * read_block; whole >= 32; whole -= read_block) {
        if (cin % whole == 0) return whole;
    }
    return cin;
}

// Whether the blocked copy is made per task (the rows the task reads, halo included, made again by
// every channel task of the rows) rather than at root: where that copies each input row at most 3
// times. At root, in one pass parallel over rows, a task reads rows the other core copied. Zen 5, 2
// threads, one of the machine's slow spells (interleaved, minima): conv_bias_relu_maxpool (rows
// copied 1.5 times) 0.73 -> 0.61 ms, resnet_block (1.3) 1.35 -> 1.27, 3x3 128->128 at 28x28 (2
// channel tasks, 2.6) 0.67 -> 0.63, 64->64 at 128x128 (1.1) 3.23 -> 3.22; 256->256 at 14x14 (4
// channel tasks, 5.1) 0.63 -> 0.68, kept at root. In a quiet spell alike (cbrm 0.594 either way,
// resnet_block 1.16 at root, 1.15 per task).
bool input_copy_per_task(const ConvGroupShape &s, int64_t rows, int64_t channel_tasks) {
    const int64_t conv_rows = rows * s.tile_stride_y;
    const int64_t in_rows = (conv_rows - 1) * s.stride_y + (s.weight[2] - 1) * s.dilation_y + 1;
    return channel_tasks * in_rows <= 3 * conv_rows * s.stride_y;
}

}  // namespace

// conv_cv's defaults: register tiles of positions x 4 vectors of channels: AVX2, 3 positions (12
// accumulators, 3 broadcasts and a weight vector fill the 16 registers; reading a blocked input,
// 3 x 3, which fits with all its weight vectors: conv_cv_channel_tile); AVX-512, 5 (20 + 5 + 4 of
// the 32; Zen 5, 2 threads, relu epilogue, blocked I/O: 128->128 at 28x28 3 x 8 0.87 ms, 4 x 4 0.62,
// 5 x 4 0.59 (87% of peak), 6 x 4 0.76, 2 x 8 1.28, 3 x 6 1.13; 512->512 at 7x7 3 x 8 0.94, 5 x 4
// 0.71; 256->256 at 14x14 0.82, 4 x 4 0.69, 5 x 4 0.70; 64->64 at 128x128 3 x 4 4.11, 5 x 4 3.06;
// the weights of a 5 x 4 tile's input channel stay 256 bytes); a task per register tile of channels,
// rows enough for 8 tasks; the reduction in passes of at most 64 input channels (the largest divisor;
// AVX2: at 56x56, 64 channels in one pass 1.31 ms, two of 32 1.33-1.40; at 7-28 wide 16, 32 and 64
// alike). AVX2, quiet machine, 2 threads, 3x3 convs of ResNet-18 (prototype, relu epilogue): 512->512
// at 7x7 passes of 16/32/64 channels 1.38/1.36/1.39 ms (83% of peak); 256->256 at 14x14 1.29 ms (87%);
// 128->128 at 28x28 1.34 ms (84%); 64->64 at 56x56 1.28 ms (88%), rows of 4 or 8 alike; stride 2
// 256->512 14x14 -> 7x7 0.71 ms (79%). Tiles of 6 or 7 positions ran at half speed (each position's
// address is a register of its own: spills), 2 x 6 at 59%.
// The rules (tile, channel block, rows), then the cost model's partition where it prices one 10%
// below theirs, then the input copy, the reduction's passes and where the copy is made.
nlohmann::json conv_cv_defaults(const ConvGroupShape &shape, const TargetTraits &tt) {
    // An input a conv_cv group will store for this one alone (input_read_blocked) is read as stored,
    // in blocks of a vector.
    ConvGroupShape s = shape;
    if (s.input_read_blocked && s.input_stored_block == 0) s.input_stored_block = tt.vector_width;
    // Blocks of rows of T: the conv's output, or a pool's after it.
    const int64_t cout = s.output[1], hout = s.tile_output[2];
    const int vw = tt.vector_width;
    const ops::BlockedGroups groups = ops::blocked_groups(s.input[1], cout, s.group, vw);
    const int64_t cin = groups.span;
    const bool grouped = s.group > 1;  // grouped_takes_cv: a task's channels read their groups' inputs alone
    // Whether the positions read the input in its own order (a 1x1 stride-1 conv): a tile's input
    // addresses are then the first position's plus constants wherever the tile lies.
    const bool input_order = s.weight[2] == 1 && s.weight[3] == 1 && s.stride_x == 1 && s.stride_y == 1;
    const double flops_per_input =
        2.0 * static_cast<double>(cout * s.weight[2] * s.weight[3]) / static_cast<double>(s.stride_x * s.stride_y);
    bool rows_padded = false;
    const bool winograd = winograd_wins(s, tt);
    const int input_block =
        conv_cv_input_copy_block(s, cin, groups.group_inputs, input_order, winograd, flops_per_input, tt);
    // Tiles that do not fit the registers are priced for their spills (register_tile_cost) where they
    // read a blocked input, or a planar one out of its order (strided, or a window's taps). Not for a
    // pointwise stride-1 conv reading planar, where 3 x 4 ran as fast as fitting tiles or faster
    // (Zen 3, AVX2, 2 threads, in the networks, 3 x 4 -> 3 x 3, the groups summed: Inception-V3's 1x1
    // 2048->192 at 8x8 0.75-0.77x, ShuffleNet's 96->96 at 7x7 0.81-0.83x, ResNeXt-50's 2048->512 at
    // 7x7 0.87x), nor for stems (fewer than 8 input channels, unrolled: ResNet-18's 7x7 3->64 0.83x,
    // SqueezeNet's 3->96 0.88x), nor Winograd's tiles (they read the transformed input:
    // schedule_winograd_stages).
    const int read_block = conv_cv_read_block(input_block, s);
    const bool blocked_read = read_block > 0;
    // Weights streamed from L2 or beyond are priced, and passes chosen to keep them in L2, with 32
    // registers only (conv_partition.h; with 16 conv_cv_ci_block's passes of at most 64 channels
    // keep them there). With 16, a tile of 2 positions x 2 vectors, its weights in L1, was priced
    // below 2 x 4 streaming them, and ran 0.69-0.72x as fast (Inception-V3's 1x7 and 7x1 160->192
    // at 17x17, AVX2 code on Zen 5, 2 threads, in the network).
    const bool prices_caches = tt.vector_registers >= 32;
    int64_t ci_block = conv_cv_ci_block(cin, read_block, tt);  // the pass the model prices, unless it picks one
    const TileContext tiles{vw,
                            tt.vector_registers,
                            !winograd && cin >= 8 && (blocked_read || !input_order),
                            ci_block,
                            prices_caches ? tt.l1_data_bytes : 0,
                            prices_caches ? tt.l2_bytes : 0,
                            std::max(read_block, 1),
                            prices_caches && s.weights_from_memory ? kWeightFromMemoryFlopsPerByte : 0.0};
    ChannelTile ct = grouped ? grouped_channel_tile(s, tt) : conv_cv_channel_tile(cout, tiles);
    const bool stem = !grouped && !winograd && cin < 8;  // a short reduction: a stem's 3 channels
    if (stem && !input_order) ct = short_reduction_tile(s, ct, flops_per_input, tt, &rows_padded);
    int64_t channel_block = std::min<int64_t>(int64_t{ct.vectors} * vw, cout);
    if (winograd) channel_block = winograd_channel_block(channel_block, cout);
    // Every output channel in one block where the weights are the smaller operand
    // (weights_smaller_than_positions): each block of channels reads the task's input rows again, so
    // the tasks split the positions alone. Direct convs (Winograd's blocks are above). Sapphire Rapids, AVX-512, 2
    // threads, in the networks (run --profile, 3 alternations, medians): 1x1 768->192 at 17x17 (Inception-V3's,
    // conv_cv) 64-channel blocks 0.65 ms, one block 0.58; MobileNet-V2's 576->96 at 14x14 0.28 -> 0.16, MobileNet-V3's
    // 672->112 0.36 -> 0.26. Where the weights are the larger (ResNet-18's 1x1 256->512 stride 2 to 7x7: 0.12 -> 0.20
    // ms; 3x3 384->384 at 8x8 0.36 -> 0.41) the blocks stay.
    if (!winograd && !grouped && weights_smaller_than_positions(s)) channel_block = cout;
    int64_t rows = s.pooled && s.tile_reach_y > s.tile_stride_y
                       ? overlapping_pool_rows(s, hout, ceil_div(cout, channel_block))
                       : rows_for_tasks(hout, ceil_div(cout, channel_block));
    std::string partition_why;  // the cost model's, where it overrode the rules
    // The rules above, measured on large planes, priced against every other division of the work
    // (schedules/conv_partition.h), which wins where it is priced 10% below: on small planes their
    // blocks of rows shift inwards and their tasks split unevenly (EfficientNet-B0's 1x1 1152->192 at
    // 7x7 in 3 blocks of 3 rows, 9 tasks: 1.45x faster in 4 tasks of all 49 positions x 48 channels).
    // Direct convs of at least 8 input channels with no pool after them (stems and Winograd have
    // tiles of their own above) and at least 1 MFLOP (below, a parallel loop's start, which the
    // model does not price, is the time: SqueezeNet-style 1x1s on a 1x1 plane).
    const int64_t conv_flops =
        2 * s.output[0] * cout * s.output[2] * s.output[3] * s.weight[1] * s.weight[2] * s.weight[3];
    if (!grouped && !winograd && cin >= 8 && !s.pooled && s.tile_stride_x == 1 && s.tile_stride_y == 1 &&
        conv_flops >= 1'000'000) {
        const CvPartition rules{ct, rows, channel_block, ci_block};
        const CvPartition chosen = cheapest_cv_partition(s, rules, priced_cv_tiles(s, ct, input_order, tt), tiles);
        if (chosen.tile.positions != ct.positions || chosen.tile.vectors != ct.vectors || chosen.rows != rows ||
            chosen.channel_block != channel_block || chosen.pass_channels != ci_block) {
            char why[192];
            std::snprintf(why, sizeof why,
                          "tiles, rows, channel block and passes priced %.1f MFLOP against the rules' %.1f "
                          "(schedules/conv_partition.h%s)",
                          cv_partition_cost(s, chosen, tiles) / 1e6, cv_partition_cost(s, rules, tiles) / 1e6,
                          prices_first_reads(s, tiles) ? "; the weights read from memory" : "");
            partition_why = why;
        }
        ct = chosen.tile;
        rows = chosen.rows;
        channel_block = chosen.channel_block;
        ci_block = chosen.pass_channels;
    }
    const int64_t block_positions = rows * s.tile_output[3];
    // A task running every channel tile over a row or two (the weights the smaller operand, above)
    // with 16 registers, a 1x1 reading its input channel-blocked: 2 x 4 tiles where 3 x 3 tiles would
    // compute 5% more positions than they (a row of 14: 15). The two pay 6 loads for 8 and for 9
    // FMAs, which the cost model prices apart (kLoadCost) but which ran alike where they compute alike
    // (Zen 3, AVX2, 2 threads, 1x1 576->576 at 14x14). Zen 3, AVX2, 2 threads: alone, 672->112 and
    // 480->112 at 14x14 (a row a task) 0.29-0.34 -> 0.25-0.27 ms and 0.21-0.24 -> 0.20; in the
    // networks (bench --against --profile, 2 rounds), MobileNet-V2's three 576->96 at 14x14 1.17-1.21x,
    // at batch 8 1.00-1.18x, MobileNet-V3's 480->112 and 672->112 1.08-1.10x. Where the positions
    // tile alike the two went either way: over two rows of 28 (57 positions against 56) RegNet-Y
    // 800MF's 144->320 1.11-1.16x, ResNeXt-50's and Wide ResNet-50's 1x1s 1.00-1.04x, RegNet-Y 3.2GF's
    // 216->576 0.97-0.99x; Inception-V3's 768->128 at 17x17 over 3 rows (51 against 52) 0.90-0.97x.
    if (!grouped && !winograd && input_order && blocked_read && tt.vector_registers < 32 && channel_block == cout &&
        ct.positions == 3 && ct.vectors == 3) {
        const ChannelTile two = fitting_tile(4, tt.vector_registers);
        auto computed = [&](const ChannelTile &t) { return ceil_div(block_positions, t.positions) * t.positions; };
        if (computed(ct) >= 1.05 * static_cast<double>(computed(two))) ct = two;
    }
    nlohmann::json p = {{"template", "conv_cv"},
                        {"vector_width", vw},
                        {"tile_positions", std::min<int64_t>(ct.positions, block_positions)},  // 2 positions: 2
                        {"tile_c_vectors", ct.vectors},
                        {"block_rows", rows},
                        {"channel_block", channel_block},
                        {"ci_block", ci_block},
                        {"input_block", input_block}};
    // A stem's padded planar copy (fewer than 8 input channels, each value read by many taps and
    // output channels) per task under the same bound: at root it is one more pass over the image
    // (600 KB at 224x224) whose rows the tasks then read back from L2 or memory. Zen 3, AVX2, 2
    // threads, in the networks, explore's group search (bench --against --profile), the stem's time
    // per task over at root: ResNet-18's 7x7 3->64 0.83, MobileNet-V3's 3x3 stride-2 3->16 0.79,
    // MobileNet-V2's 3->32 0.88, RegNet-Y 800MF's 0.82, ShuffleNet-V2's 3->24 0.89.
    const bool stem_copy = stem && input_block == 0 && s.padded;
    if ((input_block > 0 || stem_copy) && input_copy_per_task(s, rows, (cout + channel_block - 1) / channel_block))
        p["input_at"] = "task";
    if (rows_padded) p["position_tiles"] = "in_rows";
    if (winograd) winograd_defaults(p, s, tt);
    std::string why = partition_why;
    if (reads_just_made_in_place(s, input_order, tt))
        why += std::string(why.empty() ? "" : "; ") +
               "reads its planar input in place, just made by the group before (no blocked copy)";
    if (!why.empty()) p["why"] = why;
    return p;
}

// conv_cv's defaults for a depthwise conv: register tiles of positions within a row (their addresses
// the tile's plus constants; the largest divisor of the row up to 8, else 8) x 2 vectors of channels
// where they divide (np x nc accumulators + nc weight vectors; each tap's input an FMA's memory
// operand), a task per block of rows x channels as conv_cv's (at least 8, an even number), input
// blocks of one vector (a lane's channel at one load).
nlohmann::json conv_cv_depthwise_defaults(const ConvGroupShape &s, const TargetTraits &tt) {
    const int vw = tt.vector_width;
    const int64_t cout = s.output[1], hout = s.tile_output[2], wout = s.tile_output[3];
    const int nc = (cout / vw) % 2 == 0 ? 2 : 1;
    const int64_t row_divisor = largest_divisor_at_most(wout, 8);
    const int64_t np = std::min<int64_t>(row_divisor >= 4 ? row_divisor : 8, tt.vector_registers / nc - 2);
    const int64_t channel_block = int64_t{nc} * vw;
    const int64_t rows = rows_for_tasks(hout, (cout + channel_block - 1) / channel_block);
    return {{"template", "conv_cv"}, {"vector_width", vw}, {"tile_positions", std::min<int64_t>(np, rows * wout)},
            {"tile_c_vectors", nc},  {"block_rows", rows}, {"channel_block", channel_block},
            {"ci_block", 1},         {"input_block", vw}};
}

}  // namespace hfuse::schedules
