// conv_dw's default parameters, chosen from a depthwise conv group's shape (schedules::ConvGroupShape)
// and the target, with the measurements behind them (conv_defaults_internal.h).
#include "schedules/conv_defaults_internal.h"
#include "schedules/schedule_params.h"

#include <algorithm>

namespace hfuse::schedules {

// conv_dw's defaults for the depthwise conv `s` (and its pointwise producer, where the group has one),
// with vectors of `vw` lanes narrowed to its rows.
nlohmann::json conv_dw_defaults(const ConvGroupShape &s, const TargetTraits &tt, int vw) {
    const int64_t cout = s.output[1], wout = s.output[3], hout = s.output[2];
    const int budget = register_budget(tt);
    // Channel blocks are the parallel tasks: at least 8 of them, the largest block dividing the
    // channels (MobileNet-V2's 3x3 on 144 channels at 56x56, 2 threads: blocks of 64, 3 tasks
    // of which the last shifts inwards, 0.155 ms; of 36 0.078, 18 0.081, 8 0.082 ms).
    // AVX-512 (Zen 5, 2 threads, BN + ReLU): vectors that divide the row, not below 8 (144
    // channels at 56x56: 16 lanes, 3.5 a row, 0.145 ms; 8 lanes 0.11 ms), but for a strided
    // conv whose row computes as many lanes either way (each tap's vector gathers every other
    // column: 2 loads and a shuffle, fewer by whole vectors; 56 -> 28 wide: 2 vectors of 16 or
    // 4 of 8 for 32 lanes; Sapphire Rapids, 2 threads, in the networks: EfficientNet-B0's 5x5 on
    // 144 channels + SiLU 1.18x faster, MobileNet-V2's 3x3 on 144 + ReLU6 1.20x, MobileNet-V3's
    // 1.22x, MnasNet's 1.09x; at stride 1, 28 wide, 0.88-1.11x), one row a tile: 2-row tiles of
    // 8 lanes ran at a third of the speed (512 channels at 14x14: 0.050 ms, 1 row 0.018; the
    // same schedule for AVX2 0.020). AVX2 keeps 2 rows (0.370 against 0.380 ms for
    // MobileNet-V2's block).
    // A kernel 5 or more rows tall without a producer takes 2 rows a tile with AVX-512 too, each input
    // row loaded once for both (30 loads for 50 FMAs in a 5x5 tile, against 50), in vectors as wide as
    // the row allows (dividing it or not). Zen 4, 2 threads, in the networks (bench --against
    // --profile, 3 rounds, against 1 row of 8 lanes; these groups swing up to 2x between processes):
    // MnasNet's 5x5 stride 2 at 28x28 and at 14x14 (8 lanes), summed, 1.23-1.58x; MobileNet-V3's 5x5
    // stride 2 at 28x28 1.28-1.56x; EfficientNet-B0's 5x5 on 240 channels at 28x28 + SiLU 0.94-1.28x.
    // With a producer computed per task (MnasNet's and MobileNet-V3's 5x5 at 28x28: 0.96-1.04x, one
    // round) and for 3x3 kernels (0.92-1.07x, one round) it gained nothing; 4 rows a tile was no better.
    const bool tall = s.weight[2] >= 5 && s.producer_input_channels == 0;
    int dw_vw = vw;
    const bool avx512 = tt.avx512;  // measured there only (AArch64 has as many registers)
    auto row_lanes = [&](int lanes) { return (wout + lanes - 1) / lanes * lanes; };
    auto halve = [&](int lanes) {
        if (lanes > wout) return true;
        if (tall) return false;
        return s.stride_x > 1 ? row_lanes(lanes / 2) < row_lanes(lanes) : wout % lanes != 0;
    };
    while (avx512 && dw_vw > 8 && halve(dw_vw)) dw_vw /= 2;
    nlohmann::json p = {{"template", "conv_dw"},
                        {"vector_width", dw_vw},
                        {"tile_y", std::min<int64_t>(avx512 && !tall ? 1 : 2, hout)},
                        {"channel_block", largest_divisor_at_most(cout, cout / 8)}};
    // A conv strided across whose taps reuse each input column several times (kernel taps per input
    // element, kx * ky / (sx * sy), of 4 or more: 5x5 stride 2 6.25) reads its plane deinterleaved,
    // each phase's columns one dense row made per channel, rather than gathering every other column
    // with 2 loads and a shuffle per tap; for 2.25 (3x3 stride 2) the copy costs more than the
    // shuffles save. Needs the plane filled (a pad across), and vectors of 8 lanes or more (rows of 7
    // in vectors of 4, AVX2 code on Zen 5, in MobileNet-V3, MnasNet and EfficientNet-B0: 0.93-0.96x).
    // 2 threads, BN + ReLU, medians of 2 alternations of 500 runs: Zen 5, AVX-512, 5x5 stride 2 on
    // 72 channels 56 -> 28: 0.037 -> 0.031 ms; 480 channels 28 -> 14: 0.081 -> 0.066; 3x3 stride 2
    // on 96 channels 112 -> 56: 0.117 -> 0.151, 144 at 56 -> 28: 0.047 -> 0.048. AVX2 code on Zen 5:
    // 72 at 56 -> 28 (with 2 vectors a tile, below) 0.041 -> 0.037, 96 at 112 0.125 -> 0.149. Zen 3,
    // AVX2: 72 at 56 -> 28 1.34x.
    const double taps_per_input =
        static_cast<double>(s.weight[2] * s.weight[3]) / (static_cast<double>(s.stride_x) * s.stride_y);
    const bool deinterleave =
        s.stride_x > 1 && s.padded_x && s.producer_input_channels == 0 && taps_per_input >= 4 && dw_vw >= 8;
    if (deinterleave) p["deinterleave_x"] = true;
    // With AVX2's 16 registers a tile of one vector and 2 rows is 2 chains of FMAs, one per tap:
    // 2 vectors across give 4, for kernels 5 or more wide (stride 1, or deinterleaved: the strided
    // gathers' shuffles are the bound otherwise), where the row takes an even number of vectors.
    // AVX2 code on Zen 5, 2 threads: 5x5 on 72 channels at 28x28 0.027 -> 0.025 ms; Zen 3, 0.051 ->
    // 0.040. With AVX-512 (one row of up to 16 lanes) 2 vectors across were slower: 0.018 -> 0.024.
    const int64_t row_vectors = (wout + dw_vw - 1) / dw_vw;
    if (!avx512 && s.weight[3] >= 5 && s.producer_input_channels == 0 && (s.stride_x == 1 || deinterleave) &&
        row_vectors % 2 == 0 && 2 * dw_vw <= wout) {
        p["tile_x_vectors"] = 2;
    }
    const int64_t images = s.output[0];
    if (s.producer_input_channels > 0) {
        // The pointwise producer per task, flat over the plane, by conv_flat's register tiles of
        // 2 vectors x up to 8 channels (6 with 16 registers) dividing the block. Blocks: the largest
        // dividing the channels into an even number of at least 4 tasks whose producer values stay
        // within 512 KB (MobileNet-V2's block, 144 channels at 56x56, Zen 5, 2 threads, slow spell,
        // whole block: 4 blocks of 36 by 6 channels 0.250 ms, 6 of 24 by 8 0.253-0.256, 8 of 18 by
        // 6 0.264, 9 of 16 0.274, 2 of 72 0.285, 3 of 48 0.311; unfused 0.33-0.36).
        const int64_t plane = s.input[2] * s.input[3];
        for (int64_t cb = cout; cb >= 1; cb--) {
            const int64_t tasks = cout / cb * images;
            if (cout % cb == 0 && tasks >= 4 && tasks % 2 == 0 && cb * plane * 4 <= 512 * 1024) {
                p["channel_block"] = cb;
                break;
            }
        }
        int pvw = tt.vector_width;
        while (pvw > 4 && plane < pvw) pvw /= 2;
        const int64_t cb = p["channel_block"].get<int64_t>();
        p["producer_vector_width"] = pvw;
        p["producer_tile_x_vectors"] = plane >= 2 * pvw ? 2 : 1;
        p["producer_tile_c"] = largest_divisor_at_most(cb, budget > 1 ? 8 : 6);
        // One image: tasks in two bands of rows, so that each of two threads writes the rows the
        // consumer's tasks (row blocks, on OpenMP's static schedule the same thread's) read back,
        // rather than half the channels of every row, which the other core then reads from its
        // cache. A band recomputes the producer's halo rows. MobileNet-V2's block at 56x56 (Zen 5,
        // 2 threads, medians): 0.26 -> 0.20 ms (4 bands 0.21); 14x14, 96->576: 0.35 -> 0.34; at
        // 7x7 bands cost (0.20 -> 0.25), at batch 8 too (1.79 -> 1.89 ms: the images already
        // split so), and without a producer (512 channels at 14x14: 20 -> 25 us). The two bands
        // recompute kernel height - 1 of the producer's rows: bands only where that is at most 5% of
        // them. Zen 4, AVX-512, 2 threads, in the networks (bench --against --profile, 3 rounds, the
        // groups summed), one band against two: 3x3 at 14x14 (14% recomputed; MobileNet-V2's six,
        // MobileNet-V3's three, MnasNet's two) 1.09-1.22x, with MnasNet's 5x5 at 28x28 (14%) 1.15x,
        // MobileNet-V2's three 3x3 at 28x28 (one strided from 56: 4-7%) 1.01-1.10x; at 56x56 (4%)
        // 0.84-1.08x (MnasNet's three 0.90-1.00x).
        const double recomputed = static_cast<double>(s.weight[2] - 1) / s.input[2];
        if (images == 1 && hout >= 14 && recomputed <= 0.05) p["row_bands"] = 2;
    } else if (images == 1 && hout >= 56) {
        // Without a producer the bands recompute nothing: where a group before it split its rows (a
        // stem conv_cv's blocks of rows), each thread reads the band it wrote, and the readers that
        // take rows (the plan keeps the bands only for those: readers_split_rows) read it there.
        // Zen 5, AVX-512, 2 threads, in the networks (compare_builds, 4 rounds): the first 3x3 at
        // 112x112, MnasNet's on 32 channels 0.124 -> 0.097 ms (its 1x1 reader 0.110 -> 0.093, bench
        // --profile, 3 rounds), MobileNet-V3's on 16 0.077 -> 0.067, MobileNet-V2's on 32 0.128 ->
        // 0.130. Smaller planes lost: MnasNet's 5x5 stride 2 to 28x28 0.049 -> 0.055 ms, and 512
        // channels at 14x14 20 -> 25 us.
        p["row_bands"] = 2;
    }
    return p;
}

}  // namespace hfuse::schedules
