#pragma once

// How conv_cv divides a direct conv's work, and what a division costs. A division is a register tile
// (positions x vectors of output channels) and a task size (blocks of output rows x output channels,
// one parallel task each). Its price, in FLOPs at the FMA peak:
//   - the FLOPs computed: the conv's own, times the positions and channels computed over those wanted
//     (a register tile or a block that does not divide its extent shifts inwards and recomputes the
//     overlap), times the tile's loads per FMA (np broadcasts and nc weight vectors for np x nc FMAs,
//     a load ~1.8 FMAs' time in this loop) and, where a tile does not fit the registers and the conv
//     is one whose spills are priced, its spills and the addresses it computes per input channel
//     (register_tile_cost), times the threads' idle share while the last tasks run (averaged over 2
//     and 4 threads: plans do not fix the thread count);
//   - the bytes each task reads again: every block of channels reads its rows' input, every block of
//     rows its channels' weights; a quarter of a FLOP a byte from a core's L2 (an operand within 1 MB:
//     streamed in beside the FMAs), 4 from the shared cache beyond it;
//   - where a register tile's weights for a pass over the input channels (the pass's channels x taps x
//     its channel vectors) exceed 7/8 of the L1 data cache (an eighth left to the input's lines), they
//     stream from L2 for every tile of positions:
//     each weight byte a tile loads then costs a further 2.7 / 64 FMAs' time (an AVX-512 vector 2.7:
//     tall tiles of few channel vectors load fewer per FMA, and their weights may fit). Zen 5
//     (48 KB L1), AVX-512, 2 threads, RegNet-Y 800MF's eight 1x1 320->320 at 14x14 in the network
//     (bench --profile, 3 rounds, summed): 4 x 5 tiles, 80 channels a task (100 KB of weights a
//     tile) 1.49-1.66 ms; 10 x 2, 32 channels (40 KB) 1.19-1.32; 4 x 5 with passes of 64 channels
//     (20 KB, the accumulators stored between passes) 1.49-1.58; 15 x 1, 16 channels 1.44-1.56. Where
//     a tile's weights fill the L1 (7 x 3 over 256 channels: 48 KB) they ran as fast as 5 x 4's or
//     slower (Wide ResNet-50's 1x1s 0.97-0.98x, ResNet-18's 256->512 stride 2 at batch 8 0.84-0.91x);
//   - where they exceed half the core's L2 (the other half left to the input rows, the task's
//     accumulators and the next pass's lines), they stream from the shared cache instead: 5.5 / 64
//     FMAs' time a byte. A reduction in passes keeps them in L2, each pass after the first storing and
//     reloading the tile's accumulators (12 FMAs' time each: a pass also zeroes, or reloads, the
//     task's buffer outside the register tile). Zen 5 (1 MB L2), AVX-512, 2 threads, ResNet-18's three
//     3x3 512->512 at 7x7 in the network (bench --profile, 5 rounds, summed), 5 x 4 tiles: one pass of
//     512 channels (1.2 MB of weights a tile) 2.64-3.67 ms, passes of 256 (590 KB) 2.31-2.87, of 128
//     (295 KB) 2.20-2.60; alone, 16 (37 KB, within L1), 32 and 64 as fast as 128. On Zen 4 (256-bit
//     FMA units, the bytes half as dear in FMAs' time) passes of 64 channels ran 0.97-0.99x one pass
//     on ResNet-18's direct 3x3s, and 0.86-0.97x on 1x1s (the accumulators' reloads).
//   - where the context prices first reads (the model's weights outgrow the shared cache, so that every
//     run reads each conv's weights from memory) and the conv's weights outweigh its output: what each
//     thread reads first, under OpenMP's static split of the tasks (a contiguous share each; averaged
//     over 2 and 4 threads): the weights of every block of channels among its tasks, 20 FLOPs a byte,
//     and the input rows its blocks of rows reach (once where consecutive blocks overlap), 4. Channels
//     split between the threads then halve each one's weights. The 10% margin of cheapest_cv_partition
//     applies to the rest of the price alone, so that first reads the candidates share move nothing.
//     Zen 5, AVX-512, 2 threads, Inception-V3 in the network (compare_builds, 5 alternated rounds): its
//     1x1s 768->192 at 17x17 (590 KB of weights) from 17 tasks of 5 rows x 192 channels to 4 of 17 rows
//     x 48 0.28-0.31 -> 0.25 ms each, its 1x3 and 3x1 384->384 at 8x8 from 64 to 96 channels a task
//     0.17 -> 0.145, the whole run 28.8 -> 27.9 ms. Where the output outweighs the weights, the split
//     ran slower: ResNeXt-50's and Wide ResNet-50's 1x1 256->512 at 28x28 (+ Add) from 4 tasks of 7
//     rows x 512 channels to 4 of 28 rows x 128 0.46-0.54 -> 0.56-0.61 ms (each task re-reads the whole
//     800 KB input, which does not stay in the L2 beside the weights and output as this model assumes).
//     Where the weights stay in the shared cache between runs (networks of 1-26 MB of weights:
//     MobileNet-V2, ShuffleNet, SqueezeNet, GoogLeNet) the same term split their small 1x1s too and they
//     ran 0.79-0.95x as fast (3 alternated rounds), so it is priced only beyond that cache.
// Sapphire Rapids, AVX-512, 2 threads, EfficientNet-B0's 1x1 1152->192 at 7x7 (+ Add), in the network,
// against 3 blocks of 3 rows x 64 channels in 5 x 4 tiles (priced 74.2 MFLOPs): 1 block of 7 rows x
// 64 channels (5 x 4; 3 tasks) 1.15x faster (priced 53.8), x 32 channels (7 x 2; 6 tasks) 1.36x
// (55.1), x 48 channels (7 x 3; 4 tasks) 1.45x (40.7). MobileNet-V3's 1x1 960->160 at 7x7 in 14
// tasks of a row x 80 channels ran 2-8% faster than in 4 tasks of 4 rows, which a FLOP a byte from
// L2 prices 14% cheaper (the weights read twice rather than 7 times), a quarter 9% (kept: within
// the model's error).

#include "schedules/conv_template.h"
#include "schedules/schedule_params.h"

namespace hfuse::schedules {

// A weight byte read first from memory, in FLOPs at the FMA peak (TileContext's first reads).
constexpr double kWeightFromMemoryFlopsPerByte = 20;

struct CvPartition {
    ChannelTile tile;
    int64_t rows = 1;           // output rows a task ("block_rows")
    int64_t channel_block = 1;  // output channels a task ("channel_block")
    int64_t pass_channels = 0;  // input channels a pass of the reduction ("ci_block"; 0: the context's)
};

// Whether a register tile's accumulators, a broadcast per position and a weight vector per channel
// vector all fit in `registers` vector registers (of the tile's width). Only then does conv_cv read a
// channel-blocked input a whole block at a time, each broadcast at the position's address plus a
// constant; otherwise channel by channel, each broadcast's block and lane computed again
// (conv_cv_template.cpp: unrolled, such a tile spilled).
bool register_tile_fits(const ChannelTile &tile, int registers);
// The same for vectors of `vector_width` lanes on `tt`'s registers (a vector wider than the target's
// takes several): the check conv_cv's template makes, and the plan's defaults predict.
bool register_tile_fits(const ChannelTile &tile, int vector_width, const TargetTraits &tt);

// The tile of `vectors` channel vectors with the most positions (at most 16) that fits `registers`.
ChannelTile fitting_tile(int vectors, int registers);

// What a register tile's price depends on besides its size.
struct TileContext {
    int vector_width = 16;       // lanes a vector
    int registers = 32;          // vector registers of that width
    bool prices_spills = false;  // a tile that does not fit the registers pays for its spills
    int64_t pass_channels = 0;   // input channels a pass of the reduction takes (0: all of a group's)
    int64_t l1_bytes = 0;        // the L1 data cache a tile's weights are kept in (0: not priced)
    int64_t l2_bytes = 0;        // the core's L2 (0: not priced, and the passes not chosen)
    int64_t pass_step = 1;       // a chosen pass takes whole multiples of this many channels (the read block)
    // FLOPs at peak a weight byte costs the first time a thread reads it in a run (0: not priced):
    // where the model's weights outgrow the shared cache, so that each run reads them from memory.
    double first_read_weight_flops_per_byte = 0;
};

// A register tile's time per FMA, as a factor on the FMA's: 1 + 1.8 x (np + nc) / (np x nc) for its
// loads, plus, where the context prices spills (conv_cv_defaults says where) and the tile does not
// fit the registers (register_tile_fits), 12 FMAs' time per input channel and tap, 12 / (np x nc):
// its values spilled and, reading a blocked input, each broadcast's block and lane computed again.
// Zen 3, AVX2 (16 registers), 2 threads, in one process: 1x1 576->576 at 14x14 read channel-blocked,
// 3 x 4 tiles (19 registers) 1.49-1.56 ms, 3 x 3 1.05-1.14, 2 x 4 1.02-1.13 (priced 3.05, 2.20 and
// 2.35); Wide ResNet-50's 3x3s in the network (stride 2 at 28x28 and 7x7, stride 1 at 7x7), 3 x 3
// 1.20-1.41x as fast as 3 x 4, 2 x 4 1.03-1.12x. Read planar, what LLVM spills varies with the loop:
// RegNet-Y 800MF's 1x1 320->784 stride 2 to 7x7, 3 x 4 0.40-0.48 ms, 4 x 3 and 5 x 2 0.49-0.53,
// 3 x 3 0.26-0.29, 2 x 4 0.29; its 144->320 stride 2 to 14x14, 3 x 4 0.20-0.21, 2 x 4 0.21.
double register_tile_cost(const ChannelTile &tile, const TileContext &context);

// conv_cv's register tile for `output_channels` (conv_cv_defaults.cpp): the cheapest of a few by
// register_tile_cost and the channels each computes past the last.
ChannelTile conv_cv_channel_tile(int64_t output_channels, const TileContext &context);

// Whether `context` prices `s`'s first reads: where it prices them at all, and the weights outweigh
// the output (the reduction, input channels x taps, longer than the images' positions). Beyond that,
// channels split between the threads re-read an input that does not stay in the core's L2 beside
// their output, which this model prices as if it did, and ran slower (above).
bool prices_first_reads(const ConvGroupShape &s, const TileContext &context);

// The price of `partition` for the direct conv `s` (not Winograd, no pool after it), in FLOPs at the
// FMA peak.
double cv_partition_cost(const ConvGroupShape &s, const CvPartition &partition, const TileContext &context);

// The cheapest partition of the direct conv `s` over register tiles `tiles`, every number of rows,
// every channel block of whole tiles and, where the context prices the L2, the reduction in one pass
// or in the longest passes (of whole `pass_step`s, dividing the channels) keeping a tile's weights in
// half the L2; `current` where none is priced at least 10% below it (the model's error: within it,
// the measured defaults stay).
CvPartition cheapest_cv_partition(const ConvGroupShape &s, const CvPartition &current,
                                  const std::vector<ChannelTile> &tiles, const TileContext &context);

}  // namespace hfuse::schedules
