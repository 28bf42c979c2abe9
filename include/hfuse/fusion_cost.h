// The fusion planner's cost model: what putting ops into one group saves and what it costs, priced
// from shapes alone in nanoseconds of one core of a machine the rule set describes ("cost_model").
//
// Saved: every value produced and read only inside the group (not a model output, not at root) is
// neither written to memory nor read back: its bytes twice, at the bandwidth of the level it would
// live in (the core's cache if it fits in half of it, the shared cache likewise, else memory).
// Cost: recomputation, as the composer places things. Ops inlined into a pool whose windows overlap
// run again on each tile's halo rows: with tiles of kTileRows output rows, (rows - 1) x stride +
// window input rows per rows x stride (a ReLU before a 3x3 stride-2 pool: 12.5% more ReLU). A conv or
// gemm read by such a pool is computed at root by the composer (the pool after it): nothing runs
// twice, and its value still goes through memory inside the group. A cheap group copied into each of
// its k readers ("recompute") runs k times. Transcendental ops (Sigmoid, Tanh, Exp, Erf, Log, Pow,
// Sqrt, Div, Softmax, HardSwish) count kTranscendentalFlops an element; recomputed work runs at
// kRecomputeEfficiency of the FMA peak. A pointwise conv computed per task of the depthwise conv it
// feeds (conv_dw's producer) has the plane's work (the depthwise taps, the epilogues between and
// after, the one after counted before it joins: the rules put it there) vectorized along the rows, as
// conv_dw does: vectors narrowed to the row (down to 4 lanes), with 16 lanes halved (down to 8) until
// they divide it; of 16 lanes, rows of 7, 14 and 28 fill 22%, 44% and 44%, of AVX2's 8 lanes 44%, 88%
// and 88%. The producer itself runs flat over the plane's positions in tiles of 2 vectors of the
// target's lanes (narrowed to the plane): 49 positions (7x7) fill 77% of 64 lanes, 196 (14x14) 88%.
// Apart, conv_cv puts whole vectors of channels in the lanes; the lanes left idle price that work
// again (MergePrice::idle_ns) at the FMA peak. MobileNet-V2's 7x7 blocks at batch 8 (160 -> 960,
// Zen 5, AVX-512, 2 threads, --measure-undecided): one group 0.57-0.75 ms, apart 0.41-0.46.
// EfficientNet-B0's blocks, Sapphire Rapids, AVX-512, 2 threads, interleaved, the expand + depthwise
// group against the two apart: 7x7 with 1152 channels 5x5 0.48 -> 0.24 ms, 14x14 with 672 5x5 0.53 ->
// 0.36, 14x14 with 480 3x3 0.24 -> 0.21, 28x28 with 240 5x5 0.44 -> 0.38-0.44, 56x56 with 144 3x3
// 0.53 -> 0.55.
//
//   MergePrice p = price_nodes(graph, {"conv", "relu", "pool"}, placements, rules.machine);
//   p.pays();    // recompute_ns + idle_ns <= saved_ns
//   p.why();     // "keeps 3.1 MiB out of memory (~196 us); recomputes nothing"
//
// The numbers rank choices, they do not predict times. Where saved and cost are within
// kCloseFactor of each other, or differ by less than kCloseShare of the group's own work, the model
// cannot tell (close()); the planner then keeps what the rules allow, and the reason says so.
#pragma once

#include "hfuse/graph.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace hfuse {

enum class Placement;

// One core of the target (the ratios between groups matter, not the thread count).
struct MachineModel {
    double flops_per_ns = 96;               // FMA peak: lanes x 2 FMA ports x 2 FLOPs x GHz (16 x 2 x 2 x 1.5)
    int64_t cache_bytes = 1 << 20;          // the core's last private cache (L2)
    double cache_bytes_per_ns = 32;         // its bandwidth
    int64_t shared_cache_bytes = 8 << 20;   // the core's share of the shared cache (L3)
    double shared_cache_bytes_per_ns = 16;  // its bandwidth
    double memory_bytes_per_ns = 8;         // the core's share of memory bandwidth
    // Float lanes a vector; 0 (a rule set without "vector_lanes"): the planning target's, which the
    // CLI sets (set_target_lanes in hfuse/fusion_rules.h), 16 (AVX-512's) where nothing does.
    int vector_lanes = 0;
};

constexpr int kTileRows = 4;                   // output rows of a window consumer's tile, as priced
constexpr double kTranscendentalFlops = 20;    // a Sigmoid, Exp, ... element, in FLOPs
constexpr double kRecomputeEfficiency = 0.25;  // of the FMA peak, for recomputed (elementwise, conv) work
// The model cannot tell saved from cost (close()) when they are within kCloseFactor of each other or
// differ by less than kCloseShare of the group's own work.
constexpr double kCloseFactor = 2;
constexpr double kCloseShare = 0.05;

struct MergePrice {
    int64_t kept_bytes = 0;      // values kept out of memory
    double saved_ns = 0;         // their write and read-back
    double recompute_flops = 0;  // work done again
    double recompute_ns = 0;
    double work_ns = 0;  // the group's own work: its FLOPs at half the FMA peak (a merge: the merged group's)
    // Work a template does with vector lanes idle that it would fill apart: a depthwise conv computed
    // with its pointwise producer (conv_dw, vectors along rows) over rows narrower than its vectors,
    // against channels in the lanes apart (conv_cv); see price_nodes.
    double idle_lane_fraction = 0;           // of the depthwise conv's lanes
    double producer_idle_lane_fraction = 0;  // of its producer's
    double idle_ns = 0;
    double cost_ns() const { return recompute_ns + idle_ns; }
    bool pays() const { return cost_ns() <= saved_ns; }
    bool close() const;
    // "keeps 3.1 MiB out of memory (~196 us); recomputes 14.5 MFLOP (~19 us)".
    std::string why() const;
    MergePrice &operator+=(const MergePrice &part);       // parts priced together (work_ns kept)
    MergePrice operator-(const MergePrice &parts) const;  // what a merge adds to its parts' prices
};

// The price of the nodes `nodes` of `g` as one group, their placements `placement` (a node absent
// from it counts as computed in the group, not at root).
MergePrice price_nodes(const Graph &g, const std::set<std::string> &nodes,
                       const std::map<std::string, Placement> &placement, const MachineModel &m);

// The price of copying `copied` (a cheap group handing out `handed_out`) into each of `readers`
// groups instead of computing it once and reading its values from memory.
MergePrice price_recompute(const Graph &g, const std::set<std::string> &copied, const std::set<std::string> &handed_out,
                           int readers, const MachineModel &m);

// Efficiencies (of the FMA peak) the templates reach on a product: gemm_nv (vectors along N, B read
// contiguous along N) and gemm_dot (dot products along K, for B contiguous along K). gemm_dot on
// attention's Q K^T (64 tokens, 8 heads of 64, Zen 4, AVX-512) ran at 14-20%.
constexpr double kGemmEfficiency = 0.5;
constexpr double kDotEfficiency = 0.2;

// Materialising the operand `product` (a MatMul) reads through a transpose that leaves it contiguous
// along K (attention's K^T, inlined): the copy writes and reads B once; the product then runs at
// gemm_nv's efficiency instead of gemm_dot's.
struct OperandCopyPrice {
    int64_t bytes = 0;
    double copy_ns = 0, saved_ns = 0;
    bool pays() const { return saved_ns > copy_ns; }
    // "materialises 'T' (128.0 KiB, ~8 us): 'MatMul' reads it along N, ~131 us less than dot products".
    std::string why(const std::string &transpose, const std::string &product) const;
};
OperandCopyPrice price_operand_copy(const Graph &g, const Node &product, const MachineModel &m);

// The rule set's "cost_model" object: {"flops_per_ns", "cache_bytes", "cache_bytes_per_ns",
// "shared_cache_bytes", "shared_cache_bytes_per_ns", "memory_bytes_per_ns"}, every field a positive
// number (shared_cache_bytes at least cache_bytes), and optionally "vector_lanes" (a power of two from
// 1 to 64; absent: the planning target's); throws an Error naming the field.
MachineModel parse_machine_model(const nlohmann::json &j, const std::string &field);
nlohmann::json to_json(const MachineModel &m);

// "3.1 MiB", "12.0 KiB", "96 B".
std::string human_bytes(int64_t bytes);

}  // namespace hfuse
