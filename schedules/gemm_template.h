// Schedule templates for a group led by a Gemm or MatMul (the product P(x, y, batch...) = init +
// sum_k A(k, y) * B(x, k), x the output's innermost dim). P is computed per register tile of the
// tile Func T — the group's output with the elementwise epilogue (bias, activation, the gates of an
// RNN/LSTM cell) inlined, or, when the epilogue is no single elementwise chain, P's own root copy —
// so a batch-1 GEMM cell with its epilogue becomes one loop over output tiles.
//
//  gemm_nv   x vectorized: a tile of tile_x_vectors vectors x tile_y rows of accumulators, each step
//            of k a broadcast of A(k, y) times a vector of B(x..x+vw, k). For B contiguous along x
//            (Gemm transB=0, MatMul, and a constant B of Gemm transB=1, which the lowering packs
//            [K, N] at compile time).
//  gemm_dot  k vectorized: each output of the tile_x x tile_y tile is a dot product of two rows
//            contiguous along k, accumulated in vw lanes (rfactor) and summed across lanes once.
//            For a computed B stored [N, K] (Gemm transB=1 with B an input or another op's output),
//            where gemm_nv would gather B with stride K.
//
// Measured on the Zen 3 (AVX2; FMA peak 103.7 GFLOP/s per core), batch 1, B stored [N, K], the
// group's pipeline alone (min of 15 x 2000 runs):
//   rnn_cell  128x128 (33 KFLOP):   simple 3.2 us (10 GFLOP/s), gemm_dot 0.75 us (44 GFLOP/s; B 64 KB, L2)
//   lstm_cell 512x128 (131 KFLOP):  simple 12.7 us (10 GFLOP/s), gemm_dot 3.0 us (44), 2 tasks 2.4 us (54)
//   mlp fc1   256x784 (401 KFLOP):  simple 38 us (11 GFLOP/s), gemm_dot 10.8 us (37; B 800 KB, L3),
//                                   2 tasks 6.1-6.9 us (58-66)
//   transB=0, M=N=K=512 (standalone): gemm_nv 6x2 tile 0.53 ms on one core (63 GFLOP/s).
// Batch-1 cells are bound by streaming B (2 FLOP per 4-byte element), so the register tile only has
// to reuse A and hide the FMA latency; parallelism pays only above 0.3 MFLOP (parallel_tasks:
// kParallelFlops in gemm_template.cpp).
//
// Parameters: vector_width, tile_x_vectors (gemm_nv) or tile_x (gemm_dot), tile_y, unroll_k (the
// reduction loop split and its inner part unrolled), parallel_tasks (1: serial; n: the tile loop cut
// into n parallel tasks), compute ("tile": per tile of the group output; "root": P materialised
// at root by its own tiles, the rest of the group by the simple schedule) and tile_order
// ("columns_inner", the default: a row tile's column tiles in turn; "rows_inner": a panel of columns
// through every row tile, so a B larger than A streams in once), and for gemm_nv k_block (the
// product computed per panel of columns, every row, its reduction in blocks of k_block outermost:
// a block of B stays in the first-level cache while every row tile takes it).
//
// The rows tile_y counts are M's, or where M is 1 the batch dim before it (a seq-first transformer's
// [S, 1, D] input times a weight [D, N] is S rows). A constant B, Gemm's [N, K] and MatMul's [K, N]
// alike, is packed at compile time in panels of the tile's columns (src/ops/linalg_ops.cpp). A
// transformer encoder layer (d 512, 8 heads, feed-forward 2048, 64 tokens), AVX-512, 2 threads, in
// the network: the feed-forward 512 -> 2048 + GELU 1.69 -> 0.87 ms packed, the [64, 1, 512] input
// projection 1.24 -> 0.60 ms with its 64 rows tiled.
#pragma once

#include "hfuse/tensor.h"

#include <Halide.h>
#include <nlohmann/json.hpp>

namespace hfuse::schedules {

struct GemmGroupShape {
    Shape output;               // the product's shape, ONNX order: [batch..., M, N] (rank >= 1)
    int64_t k = 1;              // the reduction length (the largest over the group's products)
    bool k_contiguous = false;  // the operand indexed by x is contiguous along k: dot products vectorize
    int products = 1;           // Gemm/MatMul members computed per tile (the master and siblings)
    bool chain = true;          // the epilogue is one elementwise chain to the group's single output
};

// The parameters the composer records in the plan ("schedule").
nlohmann::json gemm_default_params(const GemmGroupShape &shape, const Halide::Target &target);

// Whether `params` ask for P per tile of the group output ("tile") or at root ("root"); checks the
// field against the shape.
bool gemm_computed_per_tile(const GemmGroupShape &shape, const nlohmann::json &params);

// Schedules every product in `products` (Funcs shaped as `shape.output`, with one update over k)
// per register tile of `tile` (same shape; a pure Func). Throws an Error naming "schedule.<param>" if
// `params` do not fit the shapes.
void schedule_gemm(Halide::Func tile, const std::vector<Halide::Func> &products, const GemmGroupShape &shape,
                   const nlohmann::json &params, const Halide::Target &target);

}  // namespace hfuse::schedules
