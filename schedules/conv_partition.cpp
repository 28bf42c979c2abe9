#include "schedules/conv_partition.h"

#include <algorithm>
#include <vector>

namespace hfuse::schedules {
namespace {

constexpr double kLoadCost = 1.8;                // a tile's load, in FMAs' time (conv_cv_channel_tile)
constexpr double kChannelStepCost = 12;          // an input channel and tap, where a tile does not fit
constexpr int64_t kCoreCacheBytes = 1 << 20;     // an operand read again from the core's L2 up to this
constexpr double kCoreCacheFlopsPerByte = 0.25;  // FLOPs at peak per byte read again from L2
constexpr double kSharedCacheFlopsPerByte = 4;   // ... and from the shared cache
constexpr double kCheaperBy = 0.9;               // the model's error
constexpr double kStreamedWeightByteCost = 2.7 / 64;  // a weight byte from L2 beyond L1, in FMAs' time
constexpr int64_t kL1ForTheInput = 8;                 // 1/8 of L1 left to the input's lines beside the weights
constexpr double kSharedStreamedWeightByteCost = 5.5 / 64;  // ... from the shared cache beyond half the L2
constexpr double kPassCost = 12;  // an accumulator stored and reloaded between passes, in FMAs' time

// The share of `threads` x the longest thread's time that is work, inverted: 1 when the tasks split
// evenly, (ceil(tasks / threads) x threads) / tasks otherwise.
double idle_factor(int64_t tasks, int threads) {
    return static_cast<double>(ceil_div(tasks, threads) * threads) / static_cast<double>(tasks);
}

int64_t pass_channels(const CvPartition &partition, const TileContext &context, int64_t cin_per_group) {
    if (partition.pass_channels > 0) return partition.pass_channels;
    return context.pass_channels > 0 ? context.pass_channels : cin_per_group;
}

// The passes a partition of tiles of `tile_channels` may take: the context's, and where it prices the
// L2, the longest of whole pass_steps dividing the channels whose tile weights fit half of it.
std::vector<int64_t> pass_candidates(const ConvGroupShape &s, int64_t tile_channels, const TileContext &context) {
    const int64_t cin_per_group = s.weight[1], taps = s.weight[2] * s.weight[3];
    std::vector<int64_t> passes = {pass_channels(CvPartition{}, context, cin_per_group)};
    if (context.l2_bytes <= 0) return passes;
    const int64_t step = std::max<int64_t>(context.pass_step, 1);
    for (int64_t pass = cin_per_group / step * step; pass >= step; pass -= step) {
        if (cin_per_group % pass != 0 || pass * taps * tile_channels * 4 > context.l2_bytes / 2) continue;
        if (pass < passes[0]) passes.push_back(pass);
        break;
    }
    return passes;
}

double reread_flops(int64_t bytes, int64_t times) {
    const double per_byte = bytes <= kCoreCacheBytes ? kCoreCacheFlopsPerByte : kSharedCacheFlopsPerByte;
    return static_cast<double>(bytes) * static_cast<double>(times) * per_byte;
}

// What the threads pay to read first what their tasks read (conv_partition.h): each thread's share of
// the tasks is contiguous (OpenMP's static split: the first tasks % threads threads take one more),
// the tasks numbered rows fastest, then channel blocks, then images. A thread reads the weights of
// every channel block among its tasks, at `weight_flops_per_byte`, and the input rows of every block
// of rows, from the shared cache: `in_rows(k)` input rows for k consecutive blocks of rows (their
// windows overlap, so a thread reads the rows between two of its blocks once).
template <typename InRows>
double first_read_flops(int64_t images, int64_t row_blocks, int64_t channel_blocks, double block_weight_bytes,
                        double input_row_bytes, const InRows &in_rows, double weight_flops_per_byte, int threads) {
    const int64_t tasks = images * row_blocks * channel_blocks;
    const int64_t share = tasks / threads, more = tasks % threads;
    double flops = 0;
    for (int64_t t = 0, begin = 0; t < threads; t++) {
        const int64_t end = begin + share + (t < more ? 1 : 0);
        if (end > begin) {
            // The (image, channel block) pairs the share spans, consecutive.
            const int64_t pairs = (end - 1) / row_blocks - begin / row_blocks + 1;
            double rows = 0;  // input rows, image by image: all of an image's once the share spans its blocks
            for (int64_t n = begin / (row_blocks * channel_blocks); n * row_blocks * channel_blocks < end; n++) {
                const int64_t first = std::max(begin, n * row_blocks * channel_blocks);
                const int64_t last = std::min(end, (n + 1) * row_blocks * channel_blocks);
                rows += static_cast<double>(in_rows(std::min(row_blocks, last - first)));
            }
            flops += static_cast<double>(std::min(channel_blocks, pairs)) * block_weight_bytes * weight_flops_per_byte +
                     rows * input_row_bytes * kSharedCacheFlopsPerByte;
        }
        begin = end;
    }
    return flops;
}

}  // namespace

bool register_tile_fits(const ChannelTile &tile, int registers) {
    return tile.positions * tile.vectors + tile.positions + tile.vectors <= registers;
}

bool register_tile_fits(const ChannelTile &tile, int vector_width, const TargetTraits &tt) {
    return register_tile_fits(tile, tt.vector_registers / std::max(1, vector_width / tt.vector_width));
}

ChannelTile fitting_tile(int vectors, int registers) {
    int positions = 16;
    while (positions > 1 && !register_tile_fits({positions, vectors}, registers)) positions--;
    return {positions, vectors};
}

double register_tile_cost(const ChannelTile &tile, const TileContext &context) {
    const double fmas = tile.positions * tile.vectors;
    const double loads = kLoadCost * (tile.positions + tile.vectors) / fmas;
    const bool per_channel = context.prices_spills && !register_tile_fits(tile, context.registers);
    const double addresses = per_channel ? kChannelStepCost / fmas : 0.0;
    return 1 + loads + addresses;
}

bool prices_first_reads(const ConvGroupShape &s, const TileContext &context) {
    return context.first_read_weight_flops_per_byte > 0 &&
           s.weight[1] * s.weight[2] * s.weight[3] > s.output[0] * s.output[2] * s.output[3];
}

namespace {

// cv_partition_cost in two parts: what the model priced before first reads (within kCheaperBy of
// each other, the current partition stays) and the first reads, where the context prices them.
struct PartitionCost {
    double in_core = 0, first_reads = 0;
};

PartitionCost partition_cost(const ConvGroupShape &s, const CvPartition &partition, const TileContext &context) {
    const int vector_width = context.vector_width;
    const int64_t images = s.output[0], cout = s.output[1], hout = s.output[2], wout = s.output[3];
    const int64_t cin_per_group = s.weight[1], taps = s.weight[2] * s.weight[3];
    const double flops = 2.0 * static_cast<double>(images * cout * hout * wout * cin_per_group * taps);

    const int64_t rows = std::min(partition.rows, hout);
    const int64_t row_blocks = ceil_div(hout, rows);
    const int64_t block_positions = rows * wout;
    const ChannelTile tile{static_cast<int>(std::min<int64_t>(partition.tile.positions, block_positions)),
                           partition.tile.vectors};
    const double positions =
        static_cast<double>(row_blocks * ceil_div(block_positions, tile.positions) * tile.positions) /
        static_cast<double>(hout * wout);
    const int64_t tile_channels = int64_t{tile.vectors} * vector_width;
    const int64_t channel_block = std::min(partition.channel_block, cout);
    const int64_t channel_blocks = ceil_div(cout, channel_block);
    const double channels =
        static_cast<double>(channel_blocks * ceil_div(channel_block, tile_channels) * tile_channels) /
        static_cast<double>(cout);
    const int64_t tasks = row_blocks * channel_blocks * images;
    const double idle = (idle_factor(tasks, 2) + idle_factor(tasks, 4)) / 2;
    // A tile's weights for one pass, kept in L1 (or L2) across the task's tiles of positions where
    // they fit.
    const int64_t pass = std::min(pass_channels(partition, context, cin_per_group), cin_per_group);
    const int64_t tile_weight_bytes = pass * taps * tile_channels * 4;
    double byte_cost = 0;
    if (context.l2_bytes > 0 && tile_weight_bytes > context.l2_bytes / 2)
        byte_cost = kSharedStreamedWeightByteCost;
    else if (context.l1_bytes > 0 && tile_weight_bytes > context.l1_bytes - context.l1_bytes / kL1ForTheInput)
        byte_cost = kStreamedWeightByteCost;
    const double weights_streamed = byte_cost * vector_width * 4 / static_cast<double>(tile.positions);
    const int64_t passes = ceil_div(cin_per_group, pass);
    const double reloads =
        static_cast<double>(passes - 1) / static_cast<double>(passes) * kPassCost / static_cast<double>(pass * taps);
    const double compute =
        flops * positions * channels * (register_tile_cost(tile, context) + weights_streamed + reloads) * idle;

    const int64_t input_bytes = s.input[1] * s.input[2] * s.input[3] * 4;
    const int64_t weight_bytes = cout * cin_per_group * taps * 4;
    const double traffic =
        reread_flops(input_bytes, channel_blocks * images) + reread_flops(weight_bytes, row_blocks * images);
    if (!prices_first_reads(s, context)) return {compute + traffic, 0};
    // The input rows k consecutive blocks of output rows read, their window's reach included.
    const auto in_rows = [&](int64_t k) {
        return std::min(s.input[2],
                        (k * rows * s.tile_stride_y - 1) * s.stride_y + (s.weight[2] - 1) * s.dilation_y + 1);
    };
    const double input_row_bytes =
        static_cast<double>(input_bytes) / static_cast<double>(std::max<int64_t>(s.input[2], 1));
    const double block_weight_bytes =
        static_cast<double>(weight_bytes) * static_cast<double>(channel_block) / static_cast<double>(cout);
    double first_reads = 0;
    for (const int threads : {2, 4}) {
        first_reads += first_read_flops(images, row_blocks, channel_blocks, block_weight_bytes, input_row_bytes,
                                        in_rows, context.first_read_weight_flops_per_byte, threads) /
                       2;
    }
    return {compute + traffic, first_reads};
}

}  // namespace

double cv_partition_cost(const ConvGroupShape &s, const CvPartition &partition, const TileContext &context) {
    const PartitionCost cost = partition_cost(s, partition, context);
    return cost.in_core + cost.first_reads;
}

CvPartition cheapest_cv_partition(const ConvGroupShape &s, const CvPartition &current,
                                  const std::vector<ChannelTile> &tiles, const TileContext &context) {
    const int vector_width = context.vector_width;
    const int64_t cout = s.output[1], hout = s.output[2];
    // Every channel in one block where the current one is (conv_cv_defaults: where the weights are
    // the smaller operand): this model prices the input each block reads again as a few FLOPs a
    // byte, yet splitting such channels ran slower than that (EfficientNet-B0's 1x1 672->112 at
    // 14x14: 2 x 2 tasks of 7 rows x 64 channels 0.73x as fast as 14 tasks of a row). Not where the
    // weights' first reads are priced (from memory): each thread then reads only its blocks'.
    const bool blocks_fixed = current.channel_block >= cout && !prices_first_reads(s, context);
    CvPartition best = current;
    // The margin on the in-core part only: first reads that differ move a choice by what they differ.
    const PartitionCost current_cost = partition_cost(s, current, context);
    double best_cost = kCheaperBy * current_cost.in_core + current_cost.first_reads;
    for (const ChannelTile &tile : tiles) {
        const int64_t tile_channels = int64_t{tile.vectors} * vector_width;
        for (const int64_t pass : pass_candidates(s, tile_channels, context)) {
            for (int64_t rows = 1; rows <= hout; rows++) {
                for (int64_t block = blocks_fixed ? cout : tile_channels; block < cout + tile_channels;
                     block += tile_channels) {
                    const CvPartition candidate{tile, rows, std::min(block, cout), pass};
                    if (tile_channels >= candidate.channel_block + vector_width) continue;  // a tile past the block
                    const PartitionCost priced = partition_cost(s, candidate, context);
                    const double cost = priced.in_core + priced.first_reads;
                    if (cost < best_cost) {
                        best_cost = cost;
                        best = candidate;
                    }
                }
            }
        }
    }
    return best;
}

}  // namespace hfuse::schedules
