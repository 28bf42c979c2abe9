// conv_xv's default parameters, chosen from a conv group's shape (schedules::ConvGroupShape) and the
// target, with the measurements behind them: register tiles, a pool's strips, one row's tasks
// (conv_defaults_internal.h).
#include "schedules/conv_defaults_internal.h"
#include "schedules/schedule_params.h"

#include <algorithm>
#include <string>

namespace hfuse::schedules {
namespace {

// A register tile of up to `nc` output channels that reads one group's input channels: for a grouped
// conv, the largest divisor of a group's outputs within `nc`. A tile across two groups shares no input
// loads between its channels (RegNet's 3x3 with 16 channels a group, 144 channels, 2 threads, AVX-512:
// 12-channel tiles 0.42 ms at 28x28, 0.79 ms stride 2 from 56x56; 8 channels 0.27 and 0.40 ms; ONNX
// Runtime 0.24 and 0.33 ms in the same run).
int group_channel_tile(const ConvGroupShape &s, int nc) {
    const int64_t cout = s.output[1], tile = std::min<int64_t>(nc, cout);
    return static_cast<int>(s.group > 1 ? largest_divisor_at_most(cout / s.group, tile) : tile);
}

// The first-level data TLB's entries (Zen 3 and 4: 64; Intel's cores since Skylake: 64 or 96).
constexpr int64_t kL1TlbEntries = 64;
// The first-level data cache (Zen 3 and 4: 32 KB; Zen 5 and Intel's recent cores: 48 KB) and its lines.
constexpr int64_t kL1DataBytes = 32 << 10, kCacheLineBytes = 64;

// conv_xv's register tile: vectors along x, rows, channels.
struct XvTile {
    int x_vectors, rows, channels;
};

// conv_xv under a pool: strips of the pool's output (all rows, strip_c channels: a divisor of the
// channels, a multiple of the register tile's), the conv's register tile `t` within a strip as
// without the pool. Per register tile instead, a 2x2 stride-2 pool forces an even row count: 3x3
// 64->64 at 56x56 (conv_bias_relu_maxpool), one Zen 3 core, two engineers compiling beside it (so
// slow, but interleaved): 2 rows x 6 channels 2.78-2.80 ms (min of 40 runs), strips of 8 channels
// with 3 x 4 tiles 2.73-2.78 ms, the unfused model 2.74-2.77 ms.
nlohmann::json conv_xv_pool_strips(const ConvGroupShape &s, XvTile t, const std::string &order, int vw, int budget) {
    const int64_t cout = s.output[1], th = s.tile_output[2];
    const int ny = static_cast<int>(std::min<int64_t>(t.rows, (th - 1) * s.tile_stride_y + 1));
    const int nc = group_channel_tile(s, t.channels);
    int strip_c = static_cast<int>(std::min<int64_t>(cout, 2 * nc));
    for (int d = 8 * budget; d >= nc; d--) {
        if (cout % d == 0 && d % nc == 0) {
            strip_c = d;
            break;
        }
    }
    nlohmann::json p = {
        {"template", "conv_xv"}, {"vector_width", vw}, {"tile_x_vectors", t.x_vectors}, {"tile_y", ny},
        {"tile_c", nc},          {"strip_c", strip_c}, {"channel_loop", "inner"},       {"reduction_order", order}};
    // Few channel strips: split the rows too, for parallel tasks (a padded input only; see
    // schedule_xv_strips).
    const int64_t tasks = (cout + strip_c - 1) / strip_c;
    if (tasks < 4 && s.padded && th >= 2) {
        const int64_t row_strips = std::min<int64_t>(th, (4 + tasks - 1) / tasks);
        const int64_t strip_y = (th + row_strips - 1) / row_strips;
        if ((strip_y - 1) * s.tile_stride_y + 1 >= ny) p["strip_y"] = strip_y;
    }
    return p;
}

// conv_xv over one row of positions (`one_row`, a pointwise group's position view): where the
// channel tiles go, and the row's tasks.
void conv_xv_one_row_defaults(nlohmann::json &p, const ConvGroupShape &s, const TargetTraits &tt, XvTile t, int vw) {
    const int64_t cout = s.output[1], tw = s.tile_output[3];
    // Another group's value (not a model input), which in a network that group wrote split by rows:
    // channel tiles inside the row's tiles, the row in tasks of whole blocks of positions, so that a
    // task reads only its positions' input and each core what it wrote. Channel tiles outside, every
    // task read every position, half of them from the other core's cache. Zen 5, 2 threads,
    // SqueezeNet 1.1's expand 1x1s 16->64 at 55x55 in the network (run --profile, 3 rounds): outside
    // in 2 tasks 0.052 ms, inside in 8 tasks 0.027 (the whole net 1.02-1.07x); in a spell where the
    // cores shared their lines cheaply 0.027 against 0.024 inside in 2 or 4 tasks, 0.025 in 8.
    // A model input (no core wrote it): channel tiles outside while an image's input stays in L2
    // (every channel tile reads it again); else inside, so that a tile's input stays in L1 while the
    // channel tiles read it and the weights stream instead. Zen 5, 2 threads, medians: 1x1 128->256
    // at 28x28 (392 KB of input) outside 0.133 ms, inside in 2 tasks 0.134 (0.96x in another
    // spell), 4 tasks 0.90x, 8 tasks 0.166; MobileNet-V2's project conv 144->24 at 56x56 (1.7 MB)
    // outside 0.41 ms (its block), inside 0.20-0.21 (conv_flat 0.205). Zen 3 (512 KB of L2, AVX2),
    // one thread, 1x1 128->256 at 28x28: outside 0.614 ms, inside 0.545 (93% of the peak; 2 threads
    // 0.37 -> 0.31, noisy): the input, 77% of the L2, did not stay there beside the weights and the
    // output. So on AVX2 targets only an input of up to half of 512 KB keeps the channel tiles
    // outside; with AVX-512 (Zen 5, 1 MB) up to 512 KB.
    const int64_t input_budget = tt.vector_registers >= 32 ? 512 * 1024 : 256 * 1024;
    // An input the group computes (a prologue) reads another group's value too, and is computed per
    // tile of positions (schedule_xv_per_tile): channel tiles inside compute it once per position.
    const bool read_made = s.input_made || s.input_in_group;
    const bool inner = read_made || s.input[1] * tw * 4 > input_budget;
    p["channel_loop"] = inner ? "inner" : "outer";
    // The row in as few tasks as give, with the channel tiles outside and the images, at least 8
    // (4 splitting another group's value by positions: each thread a contiguous share of them on 2 or 4
    // threads), an even number below twice that. Counted as the schedule splits the row: blocks of
    // ceil(tiles / row_tasks) tiles, so asking for 8 of 49 tiles makes 7 (one thread computes 4 of
    // them). Zen 3, 2 threads, 128->256 at 28x28, channel tiles inside: 7 tasks 0.308 ms, 10 tasks
    // 0.276, 2 0.280.
    const int64_t others = (inner ? 1 : (cout + t.channels - 1) / t.channels) * s.output[0],
                  tiles = (tw + vw * t.x_vectors - 1) / (vw * t.x_vectors), least = read_made ? 4 : 8;
    auto made = [&](int64_t asked) {
        const int64_t per_task = (tiles + asked - 1) / asked;
        return (tiles + per_task - 1) / per_task;
    };
    auto enough = [&](int64_t n) {
        return n >= tiles || (others * n >= least && (others * n >= 2 * least || others * n % 2 == 0));
    };
    int64_t asked = 1;
    while (!enough(made(asked))) asked++;
    // Named by the count it makes where asking for that count makes it too.
    const int64_t count = made(asked), tasks = made(count) == count ? count : asked;
    if (tasks > 1) p["row_tasks"] = tasks;
}

// The pages a conv_xv register tile of `rows` rows touches in one pass over its input channels, read
// planar, where a plane spans a page (4 KB) or more: one per channel and row. 0 for smaller planes,
// whose channels share pages.
int64_t pages_per_channel_pass(const ConvGroupShape &s, int64_t rows) {
    const int64_t plane_bytes = s.input[2] * s.input[3] * 4;
    return plane_bytes >= 4096 ? s.input[1] / s.group * rows : 0;
}

}  // namespace

// conv_xv's defaults: register tiles of x vectors x rows x channels, or strips of a pool's output.
// A pointwise conv whose tile's pass over the input channels touches more pages than the L1 TLB holds
// (pages_per_channel_pass) copies its task's input rows first, each row's channels together
// ("input_at": "task"): the pass then reads a few contiguous rows. Zen 3, AVX2, 2 threads, in the
// networks (bench --against --profile, 2-3 rounds, 2 rows x 6 channels): MobileNet-V2's 96->24 at
// 56x56 1.12-1.24x, 144->24 + Add 1.05-1.32x (0.86x once at batch 8), ResNeXt-50's and Wide
// ResNet-50's 64->128/256 at 56x56 1.07-1.19x, SqueezeNet's 96->16 and 128->16 at 55x55 0.91-1.02x;
// RegNet-Y 800MF's 64->64 at 56x56 (128 pages) 0.93-0.96x. Planes under a page share pages between
// channels: MobileNet-V3's and RegNet-Y 800MF's 1x1s at
// 28x28 (one row of 784 positions in 10 tasks) ran 0.86-0.97x with the copy.
nlohmann::json conv_xv_defaults(const ConvGroupShape &s, const TargetTraits &tt, int vw) {
    const int64_t cout = s.output[1], hout = s.output[2];
    const int budget = register_budget(tt);
    // Register tiles that keep accumulators + operands within 16 vector registers (AVX2):
    // 1x1 kernels reuse no input across taps: 2 rows x 6 channels (128->256 at 28x28 on 2 cores:
    // 2x6 0.39 ms, 1 row x 2 vectors x 6 0.42 ms, 1x12 0.47 ms, 3x4 0.50 ms); otherwise 3 rows x 4
    // channels. AVX-512's 32 registers take twice the channels (24 accumulators; chosen by the same
    // budget, not measured: no AVX-512 machine here).
    const bool one_by_one = s.weight[2] == 1 && s.weight[3] == 1;
    const std::string order = one_by_one ? "ci,kx,ky" : "kx,ci,ky";
    int nx = 1, ny = one_by_one ? 2 : 3, nc = (one_by_one ? 6 : 4) * budget;
    const int64_t tw = s.tile_output[3], th = s.tile_output[2];
    const bool one_row = one_by_one && th == 1 && !s.pooled && s.tile_stride_x == 1 && tw >= 2 * vw;
    if (one_row) {
        // One row of positions (a pointwise group's position view, src/compose/position_view.h):
        // conv_flat's register tile, 2 vectors x 8 channels (6 with 16 registers). 1x1 128->256 at
        // 28x28 as 1 x 784, Zen 5, 2 threads: 1 x 12 0.146-0.166 ms, 2 x 8 0.130-0.137 ms.
        nx = 2;
        nc = budget > 1 ? 8 : 6;
    }
    // Whether tiles of `rows` rows (the last shifting inwards) compute at most 5% more rows than the height.
    auto rows_fit = [&](int64_t rows) { return ceil_div(hout, rows) * rows <= hout * 105 / 100; };
    // 3-row tiles over-compute a height like 7, 14 or 28 by 7-29%: 2 rows x 6 channels there (3x3
    // 512->512 at 7x7 with 4 lanes: 3x4 7.7 ms, 2x6 6.4 ms).
    if (ny == 3 && !rows_fit(3)) {
        ny = 2;
        nc = 6 * budget;
    }
    if (s.pooled && vw <= (tw - 1) * s.tile_stride_x + 1)
        return conv_xv_pool_strips(s, {nx, ny, nc}, order, vw, budget);
    if (s.tile_stride_x > 1 || s.tile_stride_y > 1) {
        nx = 1;
        ny = s.tile_stride_y;  // one row of T per tile
        nc = 6 * budget;
    }
    // Shrink to fit small outputs (tiles shift inwards at edges, so they must not exceed the extent).
    while (nx > 1 && vw * nx / s.tile_stride_x > tw) nx--;
    if (vw * nx / s.tile_stride_x > tw || vw * nx % s.tile_stride_x) {
        return {{"template", "simple"}, {"why", "output tile does not fit"}};
    }
    ny = std::max<int>(s.tile_stride_y, std::min<int64_t>(ny, th * s.tile_stride_y));
    nc = group_channel_tile(s, nc);
    if (s.group == 1 && !one_row && s.tile_stride_y == 1) {
        // The last channel tile and the last row tile shift inwards, recomputing what they overlap.
        // Of the tiles with as many accumulators or fewer and at least two thirds of the channels
        // (each keeps 1-2 operand loads per 4 FMAs, so the FMAs bound them alike), the one that
        // computes the fewest channel-rows, the larger channel tile on a tie, taken for 5% fewer or
        // more; more rows only where the input lines a tile's pass reads and all the weights fill at
        // most half the L1 (the rest for the output rows and what streams past), so that they stay
        // there while the channel tiles read them again. 16 channels in tiles of 12 compute 24, in 2
        // of 8 x 3 rows 16. MobileNet-V2's 1x1 32->16 and MobileNet-V3's 16->16 at 112x112: AVX-512
        // (Zen 4, 2 threads, in the networks, bench --against --profile, 3 rounds), 2 rows x 12
        // channels -> 3 x 8 1.04-1.09x and 1.08-1.11x, MnasNet's 1.02-1.09x; AVX2 (Zen 3, alike), 2 x
        // 6 -> 3 x 4 1.14-1.32x (batch 8 1.23-1.29x; with the copy of input_at the 3 rows bring) and
        // 1.03-1.21x. SqueezeNet's 128->16 and 128->32 at 54x54 (3 rows of 128 input lines and the
        // weights: 32-40 KB) ran 0.76-1.03x, 0.97x in the median; its 96->16 (24 KB) 0.92-1.13x.
        const int accumulators = ny * nc;
        auto computed = [&](int rows, int channels) {
            return ceil_div(hout, rows) * rows * ceil_div(cout, channels) * channels;
        };
        auto stays_in_l1 = [&](int rows) {
            const int64_t input_rows = (rows - 1) * s.tile_stride_y + s.weight[2];
            const int64_t weights = s.weight[0] * s.weight[1] * s.weight[2] * s.weight[3] * 4;
            return s.weight[1] * input_rows * kCacheLineBytes + weights <= kL1DataBytes / 2;
        };
        int best_c = nc, best_y = ny;
        for (int c = nc - 1; 3 * c >= 2 * nc; c--) {
            const int rows = static_cast<int>(std::min<int64_t>(accumulators / c, th));
            if (rows > ny && !stays_in_l1(rows)) continue;
            if (computed(rows, c) < computed(best_y, best_c)) best_c = c, best_y = rows;
        }
        if (computed(best_y, best_c) * 20 > computed(ny, nc) * 19) best_c = nc, best_y = ny;
        nc = best_c;
        ny = best_y;
    }
    // Channel tiles inside the spatial tiles, unless too few rows of tiles are left to run in parallel
    // (one core, two engineers compiling beside it, interleaved, min of 100 runs: 1x1 128->256 at 28x28
    // 0.775 -> 0.652 ms (the input, 392 KB, no longer streams from L2 once per channel tile); 3x3
    // 64->64 at 128x128 14.7-14.9 -> 14.3-14.8 ms; at 56x56 2.81-2.87 -> 2.62-2.65 ms).
    const int64_t row_tiles = (th + ny / s.tile_stride_y - 1) / (ny / s.tile_stride_y);
    nlohmann::json p = {{"template", "conv_xv"},
                        {"vector_width", vw},
                        {"tile_x_vectors", nx},
                        {"tile_y", ny},
                        {"tile_c", nc},
                        {"channel_loop", row_tiles >= 4 ? "inner" : "outer"},
                        {"reduction_order", order}};
    if (one_row) conv_xv_one_row_defaults(p, s, tt, {nx, ny, nc}, vw);
    if (one_by_one && pages_per_channel_pass(s, ny) > kL1TlbEntries) p["input_at"] = "task";
    return p;
}

}  // namespace hfuse::schedules
