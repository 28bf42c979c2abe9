#pragma once

// How conv_cv divides a direct conv's work, and what a division costs. A division is a register tile
// (positions x vectors of output channels) and a task size (blocks of output rows x output channels,
// one parallel task each). Its price, in FLOPs at the FMA peak:
//   - the FLOPs computed: the conv's own, times the positions and channels computed over those wanted
//     (a register tile or a block that does not divide its extent shifts inwards and recomputes the
//     overlap), times the tile's loads per FMA (np broadcasts and nc weight vectors for np x nc FMAs,
//     a load ~1.8 FMAs' time in this loop), times the threads' idle share while the last tasks run
//     (averaged over 2 and 4 threads: plans do not fix the thread count);
//   - the bytes each task reads again: every block of channels reads its rows' input, every block of
//     rows its channels' weights; a quarter of a FLOP a byte from a core's L2 (an operand within 1 MB:
//     streamed in beside the FMAs), 4 from the shared cache beyond it.
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

struct CvPartition {
    ChannelTile tile;
    int64_t rows = 1;           // output rows a task ("block_rows")
    int64_t channel_block = 1;  // output channels a task ("channel_block")
};

// The loads a register tile pays per FMA, as a factor on its FMAs' time: 1 + 1.8 x (np + nc) / (np x nc).
double register_tile_cost(const ChannelTile &tile);

// The price of `partition` for the direct conv `s` (not Winograd, no pool after it), in FLOPs at the
// FMA peak, with vectors of `vector_width` lanes.
double cv_partition_cost(const ConvGroupShape &s, const CvPartition &partition, int vector_width);

// The cheapest partition of the direct conv `s` over register tiles `tiles` (each fitting the
// target's registers), every number of rows and every channel block of whole tiles; `current` where
// none is priced at least 10% below it (the model's error: within it, the measured defaults stay).
CvPartition cheapest_cv_partition(const ConvGroupShape &s, const CvPartition &current,
                                  const std::vector<ChannelTile> &tiles, int vector_width);

}  // namespace hfuse::schedules
