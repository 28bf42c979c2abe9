// conv_flat's default parameters, chosen from a conv group's shape (schedules::ConvGroupShape) and
// the target's vectors, with the measurements behind them (conv_defaults_internal.h).
#include "schedules/conv_defaults_internal.h"
#include "schedules/schedule_params.h"

#include <algorithm>
#include <utility>

namespace hfuse::schedules {

// conv_flat's defaults: 2 vectors x 5 channels (x 8 with AVX-512's 32 registers; why below), as
// conv_xv's 1x1 tiles (1 vector x 12 channels: 0.45 ms against 0.32 ms at 28x28; 3 x 4: 0.39 ms); blocks of the rows
// that waste the fewest lanes (a register tile shifts inwards at a strip's end, a block at the plane's),
// fewer rows on a tie (28 wide: 4 rows, 0.317 ms; 2 rows 0.303, 14 rows 0.314, 1 row 0.327 ms).
// Returns the parameters and the share of computed lanes that are used.
std::pair<nlohmann::json, double> conv_flat_defaults(const ConvGroupShape &s, int vw, int budget) {
    const int64_t cout = s.output[1], hout = s.output[2], wout = s.output[3], pitch = s.flat_width;
    const int nx = (hout - 1) * pitch + wout >= 2 * vw ? 2 : 1;
    // AVX-512: 2 vectors x 8, not 12 (Zen 5, 1x1 128->256 at 28x28 in 8 tasks: 0.141 -> 0.129 ms;
    // 3 x 8 0.132, 4 x 4 0.138, 1 x 16 0.140, 2 x 10 0.187). AVX2: 2 x 5. Its 2 x 6 tile (12
    // accumulators, 2 input vectors and a broadcast: 15 of 16 registers) had LLVM keep an accumulator
    // on the stack, stored and reloaded every input channel (1x1 192->32 at 28x28); 2 x 5 and 2 x 4
    // do not. Zen 3, 2 threads, in the networks (bench --against --profile, 1-3 rounds, 2 x 6 -> 2 x
    // 5): MobileNet-V2's 192->32 + Add at 28x28 1.27-1.69x (batch 8 0.98x), RegNet-Y 3.2GF's five
    // conv_flat groups 1.49x, Inception-V3's 1x1s at 35x35 1.00-1.08x, ShuffleNet's 0.96-0.99x
    // (0.05-0.08 ms groups).
    const int nc = static_cast<int>(std::min<int64_t>(budget > 1 ? 8 : 5, cout));
    const int64_t tile_pixels = vw * nx;
    // Where the images are too few to be the tasks and the weights are the smaller operand (cout x
    // taps against the output's positions, as conv_cv's channel blocks), every channel in one block
    // and the tasks at least 8 blocks of rows: each channel block reads the task's input rows again,
    // and with the channels split between the cores each core reads the channels the other wrote
    // (MobileNet-V2's 192->32 at 28x28 + residual Add, in the network, 2 threads: 4 blocks of 8
    // channels over all 28 rows 0.129 ms, 14 blocks of 2 rows of all 32 channels 0.084, 7 of 4 rows
    // 0.089; one thread 0.095). With 8 images, a core's tasks are its images: channel blocks stay (the
    // same network at batch 8: 0.51 ms in 4 blocks of 8 channels, 0.57 in one).
    // (The share of used lanes that is returned, which conv_xv's is weighed against, is that of the
    // best blocks of rows whatever their number.)
    const bool by_rows = s.output[0] < 8 && weights_smaller_than_positions(s);
    auto best_rows_of = [&](int64_t min_row_blocks) {
        std::pair<int64_t, double> best = {hout, 0.0};  // rows, share of used lanes
        for (int64_t rows = 1; rows <= hout; rows++) {
            const int64_t strip = (rows - 1) * pitch + wout;
            if (strip < tile_pixels || (hout + rows - 1) / rows < min_row_blocks) continue;
            const int64_t computed = (strip + tile_pixels - 1) / tile_pixels * tile_pixels;
            const double use = static_cast<double>(rows * wout) / computed * hout / ((hout + rows - 1) / rows * rows);
            if (use > best.second + 1e-9) best = {rows, use};
        }
        return best;
    };
    const std::pair<int64_t, double> unconstrained = best_rows_of(1);
    const double best_use = unconstrained.second;
    const int64_t best_rows = by_rows ? best_rows_of(std::min<int64_t>(8, hout)).first : unconstrained.first;
    // At least 8 parallel tasks, so that no thread of a few waits long for the last (1x1 at 28x28: 7
    // blocks of 4 rows, with 2 channel blocks 0.317 -> 0.286 ms on 2 threads), in as few channel blocks
    // as that takes: a block that does not divide the channels shifts inwards and recomputes, and each
    // block reads the input again (3x3 128->128 at 28x28, 4 row blocks: 3 channel blocks of 48 1.62 ms,
    // 2 of 66 1.48 ms, 1 of 128 1.47 ms).
    const int64_t row_blocks = (hout + best_rows - 1) / best_rows;
    int64_t channel_block = cout;
    if (row_blocks < 8 && !by_rows) {
        // Blocks of whole register tiles; of those giving 8 tasks, the one recomputing the fewest
        // channels (SqueezeNet's 16 in 2 blocks of 12 would compute 24, in 3 of 6 18: 9.7 against
        // 7.0 ms for the net), with 1% a block for reading the input again.
        double best_cost = 1e9;
        for (int64_t cb = nc; cb <= cout + nc - 1; cb += nc) {
            const int64_t blocks = (cout + cb - 1) / cb;
            if (row_blocks * blocks < 8 && cb > nc) continue;
            const double cost = static_cast<double>(blocks * std::min(cb, cout)) / cout + 0.01 * blocks;
            if (cost < best_cost) {
                best_cost = cost;
                channel_block = std::min(cb, cout);
            }
        }
    }
    return {{{"template", "conv_flat"},
             {"vector_width", vw},
             {"tile_x_vectors", nx},
             {"tile_c", nc},
             {"block_rows", best_rows},
             {"channel_block", channel_block}},
            best_use};
}

}  // namespace hfuse::schedules
