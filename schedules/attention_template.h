// Schedule template for a group holding an attention (planner/attention_pattern.h) lowered as one
// computation with an online softmax (src/ops/attention_lowering.h).
//
// The output O(d, i, batch...) is computed at root in tiles of query_tile queries (all Dv channels),
// Q's rows for the tile copied first (what its producers compute, a scale or a slice of a fused
// projection, once per element). Per tile, for each block of key_block keys: the scores S = Q K^T (a
// register tile of tile_vectors vectors of keys x the tile's queries, each step of the depth a
// broadcast of Q times a vector of K^T), their maximum and sum, p = exp(x - m_b) and p V
// (tile_vectors vectors of channels x the queries); the running state (acc, m, l) of the tile's
// queries absorbs the block (with one block there is no state: the output is p V / sum p). K^T and V
// are copied once per (batch, head) ("parallel": "heads": the heads are the parallel tasks, each
// taking its query tiles in turn) or once per query tile ("query_tiles": every tile of every head a
// task; for one head or few). The scores never leave the first-level cache.
//
// Parameters: vector_width, query_tile, tile_vectors, key_block (a multiple of the vector width;
// the default, Sk rounded up to whole vectors up to 256, makes the keys of ViT, Swin and a 64-token
// encoder one block), parallel ("heads" or "query_tiles").
//
// AVX-512 (Zen 4), 2 threads, in the networks (hfuse run --profile, 3 rounds, each plan's groups
// holding the attentions' nodes summed): a 64-token encoder's 4 attentions (8 heads of 64) 0.36 ms
// against 0.51 ms apart (scores + Softmax, then P V: 1.41x), vit_b_32's 12 (50 tokens, 12 heads)
// 1.29 against 1.78 ms (1.38x), swin_t's 12 (49-token windows, heads of 32) 4.35 against 5.69 ms
// (1.31x). Alone (8 heads of 64, 64 tokens): 0.065 ms, 57% of the FMA peak; at 1024 tokens (the keys
// in 4 blocks of 256, the online softmax rescaling between them) 12.8 ms, 74% of the peak, 1.62x the
// same ops apart (hfuse bench --against, interleaved). With AVX2 code (vectors of 8, tiles of 6
// queries) the encoder's 4 attentions take 0.36 ms against 0.64 apart.
#pragma once

#include "hfuse/tensor.h"

#include <Halide.h>
#include <nlohmann/json.hpp>

namespace hfuse::schedules {

struct AttentionGroupShape {
    Shape scores;       // [batch..., Sq, Sk]
    Shape output;       // [batch..., Sq, Dv]
    int64_t depth = 1;  // the scores product's reduction (Q's last dim)
};

// The Funcs of ops::lower_online_attention and the scores product, by role.
struct AttentionFuncs {
    Halide::Func output;   // (d, i, batch...): pure, computed at root by the template
    Halide::Func scores;   // the scores product (j, i, batch...), one update over the depth
    Halide::Func keys;     // the copy of K^T it reads (j, k, batch...)
    Halide::Func queries;  // the copy of Q it reads (k, i, batch...)
    Halide::Func values, block_max, probs, block_sum, block_values, state;
};

nlohmann::json attention_default_params(const AttentionGroupShape &shape, const Halide::Target &target);

// The keys per block `params` ask for, checked against the shape (the lowering needs it).
int attention_key_block(const AttentionGroupShape &shape, const nlohmann::json &params, const Halide::Target &target);

void schedule_attention(const AttentionFuncs &funcs, const AttentionGroupShape &shape, const nlohmann::json &params,
                        const Halide::Target &target);

}  // namespace hfuse::schedules
