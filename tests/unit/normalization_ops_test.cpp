// BatchNormalization (inference) and Softmax, checked against the reference evaluator.
#include "op_test_util.h"

namespace hfuse::test {
namespace {

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

TEST(NormalizationOps, Errors) {
    expect_op_error({"BatchNormalization", {}, bn_inputs(activation({2, 3, 4}), 4)}, "must have shape [3]");
    expect_op_error(
        {"BatchNormalization", {}, {activation({2, 3}), weight({3}), weight({1, 3}), weight({3}), weight({3}, 0.1, 1)}},
        "input 2 (B)");
    expect_op_error({"BatchNormalization", {}, bn_inputs(activation({3}), 3)}, "rank >= 2");
    expect_op_error({"BatchNormalization", {{"training_mode", 1}}, bn_inputs(activation({2, 3}), 3)}, "training_mode");
    expect_op_error({"Softmax", {{"axis", 4}}, {activation({2, 3, 4, 5})}}, "axis 4 is out of range for rank 4");
    expect_op_error({"Softmax", {{"axis", -3}}, {activation({2, 3})}}, "out of range");
}

}  // namespace
}  // namespace hfuse::test
