// BatchNormalization (inference), Softmax, LayerNormalization and ReduceMean/Sum/Max/Min, checked against the
// reference evaluator.
#include <limits>

#include "op_test_util.h"

namespace hfuse::test {
namespace {

using nlohmann::json;

// Relative to the output scale: BN is a few float32 operations per element; Softmax sums at most a
// few dozen exp() terms (each within a few ulp), so errors stay near 1e-6; 1e-4 leaves ample margin.
constexpr double kTol = 1e-4;

// BN parameters for C channels; the variance is positive, as a trained model's is.
std::vector<InputSpec> bn_inputs(InputSpec x, int64_t c) {
    return {std::move(x), weight({c}, 0.5, 1.5), weight({c}), weight({c}), weight({c}, 0.1, 2.0)};
}

TEST(NormalizationOps, BatchNormRanks) {
    Rng rng(303);
    for (int rank = 2; rank <= 5; rank++) {
        Shape s;
        for (int i = 0; i < rank; i++) s.push_back(rng.uniform_int(0, 3) * 2 + 1);
        check_op({"BatchNormalization", {}, bn_inputs(activation(s), s[1])}, kTol);
    }
}

TEST(NormalizationOps, BatchNormAttributesAndComputedParameters) {
    check_op({"BatchNormalization",
              {{"epsilon", 1e-2}, {"momentum", 0.99}, {"training_mode", 0}},
              bn_inputs(activation({2, 7, 5, 3}), 7)},
             kTol);
    // Scale, bias and mean computed at run time (not foldable weights); the variance stays positive.
    check_op({"BatchNormalization",
              {},
              {activation({3, 5, 9}), activation({5}), activation({5}), activation({5}), weight({5}, 0.1, 2.0)}},
             kTol);
}

TEST(NormalizationOps, SoftmaxEveryAxis) {
    const Shape s4 = {3, 5, 7, 9};
    for (int axis = -4; axis < 4; axis++) check_op({"Softmax", {{"axis", axis}}, {activation(s4)}}, kTol);
    const Shape s3 = {5, 1, 11};
    for (int axis = 0; axis < 3; axis++) check_op({"Softmax", {{"axis", axis}}, {activation(s3)}}, kTol);
}

TEST(NormalizationOps, SoftmaxDefaultAxis) {
    check_op({"Softmax", {}, {activation({13})}}, kTol);
    check_op({"Softmax", {}, {activation({3, 37})}}, kTol);
    // Large logits overflow exp() unless the max is subtracted first.
    check_op({"Softmax", {}, {weight({5, 17}, -300, 300)}}, kTol);
}

TEST(NormalizationOps, ReduceMeanAxesAndKeepdims) {
    const Shape s = {3, 5, 7, 4};
    // Single axes (negative too), pairs, the spatial dims, every axis (axes absent); kept and dropped.
    const std::vector<std::vector<int64_t>> axes = {{0}, {1}, {-1}, {2}, {1, 3}, {-2, -1}, {0, 1, 2, 3}};
    for (int keep = 0; keep <= 1; keep++) {
        for (const auto &a : axes) check_op({"ReduceMean", {{"axes", a}, {"keepdims", keep}}, {activation(s)}}, kTol);
        check_op({"ReduceMean", {{"keepdims", keep}}, {activation(s)}}, kTol);
    }
    check_op({"ReduceMean", json::object(), {activation({2, 9, 1})}}, kTol);  // default: every axis, kept
    Rng rng(41);
    for (int t = 0; t < 4; t++) {
        const int rank = rng.uniform_int(1, 4);
        Shape shape;
        std::vector<int64_t> reduce;
        for (int i = 0; i < rank; i++) {
            shape.push_back(rng.uniform_int(1, 6));
            if (rng.coin()) reduce.push_back(rng.coin() ? i : i - rank);
        }
        if (reduce.empty()) reduce.push_back(0);
        check_op({"ReduceMean", {{"axes", reduce}, {"keepdims", rng.uniform_int(0, 1)}}, {activation(shape)}}, kTol);
    }
}

TEST(NormalizationOps, ReduceSumMaxMin) {
    const Shape s = {3, 5, 7, 4};
    for (const char *op : {"ReduceSum", "ReduceMax", "ReduceMin"}) {
        SCOPED_TRACE(op);
        check_op({op, {{"axes", {-1}}, {"keepdims", 1}}, {activation(s)}}, kTol);
        check_op({op, {{"axes", {0, 2}}, {"keepdims", 0}}, {activation(s)}}, kTol);
        check_op({op, {{"keepdims", 0}}, {activation({2, 9, 1})}}, kTol);  // every axis, to a scalar
    }
    // All negative: a max that starts at 0 instead of the lowest float would show.
    check_op({"ReduceMax", {{"axes", {1}}}, {weight({4, 6}, -3, -1)}}, kTol);
    check_op({"ReduceMin", {{"axes", {1}}}, {weight({4, 6}, 1, 3)}}, kTol);
    // A row of infinities: the max of -inf alone is -inf, not the lowest finite float.
    const float inf = std::numeric_limits<float>::infinity();
    check_op({"ReduceMax", {{"axes", {1}}}, {weight_values({2, 3}, {-inf, -inf, -inf, -inf, 2, -inf})}}, kTol);
    check_op({"ReduceMin", {{"axes", {1}}}, {weight_values({2, 3}, {inf, inf, inf, 1, inf, inf})}}, kTol);
}

// LayerNormalization over the last axis (the reduction template's rows, odd widths for the vector
// tails) and over several trailing dims (the simple schedule), Scale and B of every broadcast form,
// B left out, a computed Scale.
TEST(NormalizationOps, LayerNormAxesAndParameters) {
    check_op({"LayerNormalization", {}, {activation({3, 37}), weight({37}), weight({37})}}, kTol);
    check_op({"LayerNormalization", {{"epsilon", 0.1}}, {activation({2, 5, 16}), weight({16}), weight({1, 16})}}, kTol);
    check_op({"LayerNormalization", {{"axis", 2}}, {activation({2, 3, 4, 5}), weight({4, 5}), weight({1, 5})}}, kTol);
    check_op({"LayerNormalization", {{"axis", -3}}, {activation({2, 3, 4, 5}), weight({3, 1, 5})}}, kTol);
    check_op({"LayerNormalization", {{"axis", 0}}, {activation({3, 7}), weight({1})}}, kTol);
    check_op({"LayerNormalization", {}, {activation({1, 9, 33}), activation({33}), activation({1, 1, 33})}}, kTol);
    check_op({"LayerNormalization", {}, {activation({5}), weight({5}), weight({})}}, kTol);
}

TEST(NormalizationOps, Errors) {
    expect_op_error({"LayerNormalization", {}, {activation({2, 3, 4}), weight({3})}}, "input 1 (Scale)");
    expect_op_error({"LayerNormalization", {{"axis", 2}}, {activation({2, 3, 4}), weight({4}), weight({2, 4})}},
                    "input 2 (B)");
    expect_op_error({"LayerNormalization", {{"axis", 3}}, {activation({2, 3, 4}), weight({4})}}, "out of range");
    expect_op_error({"LayerNormalization", {{"stash_type", 0}}, {activation({2, 4}), weight({4})}}, "stash_type");
    expect_op_error({"BatchNormalization", {}, bn_inputs(activation({2, 3, 4}), 4)}, "must have shape [3]");
    expect_op_error(
        {"BatchNormalization", {}, {activation({2, 3}), weight({3}), weight({1, 3}), weight({3}), weight({3}, 0.1, 1)}},
        "input 2 (B)");
    expect_op_error({"BatchNormalization", {}, bn_inputs(activation({3}), 3)}, "rank >= 2");
    expect_op_error({"BatchNormalization", {{"training_mode", 1}}, bn_inputs(activation({2, 3}), 3)}, "training_mode");
    expect_op_error({"Softmax", {{"axis", 4}}, {activation({2, 3, 4, 5})}}, "axis 4 is out of range for rank 4");
    expect_op_error({"Softmax", {{"axis", -3}}, {activation({2, 3})}}, "out of range");
    expect_op_error({"ReduceMean", {{"axes", {0, 2}}}, {activation({2, 3})}}, "out of range");
    expect_op_error({"ReduceMean", {{"axes", {1, -1}}}, {activation({2, 3})}}, "given twice");
    expect_op_error({"ReduceMean", {{"keepdims", 2}}, {activation({2, 3})}}, "must be 0 or 1");
}

}  // namespace
}  // namespace hfuse::test
