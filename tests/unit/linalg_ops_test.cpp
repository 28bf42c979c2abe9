// Gemm and MatMul, checked against the reference evaluator (Eigen).
#include "op_test_util.h"

namespace hfuse::test {
namespace {

// Relative to the output scale: each output is a float32 sum of K <= ~40 products, whose rounding
// error is a few 1e-7 relative; summation order differs from Eigen's, so 1e-4 leaves ample margin.
constexpr double kTol = 1e-4;

int64_t odd(Rng &rng, int lo, int hi) {
    return rng.uniform_int(lo / 2, (hi - 1) / 2) * 2 + 1;
}

// A matrix for Gemm: (rows, cols), stored transposed when `trans` is set.
Shape gemm_operand(int64_t rows, int64_t cols, bool trans) {
    return trans ? Shape{cols, rows} : Shape{rows, cols};
}

TEST(LinalgOps, GemmTransposesAndBias) {
    Rng rng(404);
    const int64_t m = odd(rng, 3, 17), n = odd(rng, 3, 17), k = odd(rng, 3, 33);
    // Every trans combination, each with a different C broadcast and alpha/beta.
    struct Case {
        int trans_a, trans_b;
        InputSpec c;
        double alpha, beta;
    };
    const std::vector<Case> cases = {
        {0, 0, missing(), 1.0, 1.0},        {0, 1, weight({m, n}), 1.0, 1.0},     {1, 0, weight({n}), 0.5, 2.0},
        {1, 1, weight({}), -1.5, 0.25},     {0, 0, weight({m, 1}), 2.0, -1.0},    {0, 1, weight({1, n}), 1.0, 0.0},
        {1, 0, activation({1}), 0.75, 1.0}, {1, 1, activation({m, n}), 1.0, 3.0}, {0, 0, weight({1, 1}), -0.5, -0.5},
    };
    for (const Case &c : cases) {
        check_op({"Gemm",
                  {{"transA", c.trans_a}, {"transB", c.trans_b}, {"alpha", c.alpha}, {"beta", c.beta}},
                  {activation(gemm_operand(m, k, c.trans_a)), weight(gemm_operand(k, n, c.trans_b)), c.c}},
                 kTol);
    }
}

TEST(LinalgOps, GemmShapes) {
    // Fully connected layer (B a weight, transposed), vector-like shapes, and both operands computed.
    check_op({"Gemm", {{"transB", 1}}, {activation({1, 37}), weight({11, 37}), weight({11})}}, kTol);
    check_op({"Gemm", {}, {activation({1, 1}), activation({1, 1})}}, kTol);
    check_op({"Gemm", {}, {weight({7, 1}), activation({1, 9}), activation({9})}}, kTol);
}

TEST(LinalgOps, MatMulShapes) {
    Rng rng(505);
    const int64_t m = odd(rng, 3, 11), n = odd(rng, 3, 11), k = odd(rng, 3, 21);
    check_op({"MatMul", {}, {activation({m, k}), weight({k, n})}}, kTol);                  // 2-D x 2-D
    check_op({"MatMul", {}, {activation({k}), activation({k, n})}}, kTol);                 // 1-D x 2-D
    check_op({"MatMul", {}, {activation({m, k}), activation({k})}}, kTol);                 // 2-D x 1-D
    check_op({"MatMul", {}, {activation({k}), weight({k})}}, kTol);                        // dot product
    check_op({"MatMul", {}, {activation({k}), activation({3, k, n})}}, kTol);              // 1-D x batched
    check_op({"MatMul", {}, {activation({2, 3, m, k}), activation({k})}}, kTol);           // batched x 1-D
    check_op({"MatMul", {}, {activation({2, 3, m, k}), weight({k, n})}}, kTol);            // batch x shared
    check_op({"MatMul", {}, {weight({m, k}), activation({3, k, n})}}, kTol);               // shared x batch
    check_op({"MatMul", {}, {activation({2, 1, m, k}), activation({3, k, n})}}, kTol);     // both broadcast
    check_op({"MatMul", {}, {activation({3, 1, m, k}), activation({1, 5, k, n})}}, kTol);  // both broadcast
}

// Linear layers as transformers export them: a constant B [K, N] packed in the register tile's
// panels (N not a multiple of the panel: a zero-padded last one), rows in M or, where M is 1, in the
// batch dim before it (a seq-first [S, 1, D] input), the tile order chosen by B's size; shapes large
// enough for gemm_nv's 14-row tiles and several parallel tasks, odd so edge tiles shift inwards.
TEST(LinalgOps, MatMulLinearLayers) {
    check_op({"MatMul", {}, {activation({37, 1, 45}), weight({45, 83})}}, kTol);          // [S, 1, K]: rows in S
    check_op({"MatMul", {}, {activation({2, 29, 45}), weight({45, 83})}}, kTol);          // [B, S, K]
    check_op({"MatMul", {}, {activation({31, 45}), weight({45, 200})}}, kTol);            // B larger: rows inner
    check_op({"MatMul", {}, {activation({3, 5, 1, 19}), weight({19, 40})}}, kTol);        // rows in 5, batch 3
    check_op({"MatMul", {}, {activation({33, 1, 21}), activation({33, 21, 48})}}, kTol);  // batched B, M = 1
}

TEST(LinalgOps, Errors) {
    expect_op_error({"Gemm", {}, {activation({3, 4}), activation({5, 6})}}, "inner dimensions do not match");
    expect_op_error({"Gemm", {{"transA", 1}}, {activation({3, 4}), activation({4, 6})}}, "has K=4");
    expect_op_error({"Gemm", {}, {activation({2, 3, 4}), activation({4, 6})}}, "rank 2");
    expect_op_error({"Gemm", {}, {activation({3, 4}), activation({4, 6}), weight({3})}}, "does not broadcast");
    expect_op_error({"Gemm", {}, {activation({3, 4}), activation({4, 6}), weight({1, 3, 6})}}, "input 2 (C)");
    expect_op_error({"MatMul", {}, {activation({3, 4}), activation({5, 6})}}, "inner dimensions do not match");
    expect_op_error({"MatMul", {}, {activation({5}), activation({4})}}, "K=5");
    expect_op_error({"MatMul", {}, {activation({2, 3, 4}), activation({3, 4, 6})}}, "batch dimensions");
    expect_op_error({"MatMul", {}, {activation({}), activation({4})}}, "rank >= 1");
}

}  // namespace
}  // namespace hfuse::test
