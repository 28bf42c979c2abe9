// Activations and broadcasting arithmetic, checked against the reference evaluator.
#include "op_test_util.h"

#include <cmath>

namespace hfuse::test {
namespace {

// Relative to the output scale: each output element is one float32 operation (or a transcendental
// function accurate to a few ulp), so anything above ~1e-6 is a real bug; 1e-4 leaves ample margin.
constexpr double kTol = 1e-4;

// A random shape of the given rank with odd sizes in [1, 9].
Shape odd_shape(Rng &rng, int rank) {
    Shape s;
    for (int i = 0; i < rank; i++) s.push_back(rng.uniform_int(0, 4) * 2 + 1);
    return s;
}

TEST(ElementwiseOps, UnaryActivations) {
    Rng rng(101);
    for (const char *op : {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish"}) {
        check_op({op, {}, {activation(odd_shape(rng, rng.uniform_int(0, 4)))}}, kTol);
    }
}

// Activations see values in [-1, 1]; weights over a wider range reach the saturated regions too.
TEST(ElementwiseOps, UnaryActivationsWideRange) {
    check_op({"HardSwish", {}, {weight({3, 5, 7}, -6, 6)}}, kTol);
    check_op({"HardSigmoid", {{"alpha", 0.7}, {"beta", 0.4}}, {weight({2, 9, 5}, -3, 3)}}, kTol);
    check_op({"LeakyRelu", {{"alpha", 0.3}}, {activation({1, 3, 5, 7})}}, kTol);
    check_op({"Sigmoid", {}, {weight({5, 11}, -40, 40)}}, kTol);
    // Past +-88, where e^-x leaves float's range (its vector form clamps the exponent's argument to
    // where fast_exp is accurate; fast_exp of an infinity is NaN), up to the infinities.
    check_op({"Sigmoid", {}, {weight({9, 61}, -1000, 1000)}}, 1e-6);
    check_op({"Sigmoid", {}, {weight_values({8}, {-INFINITY, -1e30f, -88.5f, -87.0f, 87.0f, 88.5f, 1e30f, INFINITY})}},
             1e-6);
    check_op({"Relu", {}, {weight({}, -1, -0.5)}}, kTol);
}

TEST(ElementwiseOps, ClipBounds) {
    const Shape s = {2, 3, 5, 7};
    check_op({"Clip", {}, {activation(s)}}, kTol);                                         // no bounds
    check_op({"Clip", {}, {activation(s), weight_values({}, {-0.3f})}}, kTol);             // min only
    check_op({"Clip", {}, {activation(s), missing(), weight_values({1}, {0.5f})}}, kTol);  // max only
    check_op({"Clip", {}, {activation(s), weight_values({1}, {-0.3f}), weight_values({}, {0.5f})}}, kTol);
    check_op({"Clip", {}, {activation({}), weight_values({}, {0.0f}), weight_values({}, {6.0f})}}, kTol);
    // min > max: ONNX sets every value to max.
    check_op({"Clip", {}, {activation(s), weight_values({}, {0.5f}), weight_values({}, {-0.2f})}}, kTol);
}

// Every broadcasting corner; the op rotates through Add, Sub, Mul, Div so each sees several shapes.
TEST(ElementwiseOps, BinaryBroadcasting) {
    Rng rng(202);
    const auto d = [&] { return static_cast<int64_t>(rng.uniform_int(1, 4) * 2 + 1); };  // 3..9, odd
    const int64_t n = d(), c = d(), h = d(), w = d();
    const std::vector<std::pair<InputSpec, InputSpec>> cases = {
        {activation({n, c, h, w}), activation({n, c, h, w})},  // same shape
        {activation({n, c, h, w}), weight({})},                // rank 4 vs rank 0
        {weight({}), activation({n, c, h, w})},                // rank 0 vs rank 4
        {activation({n, c, h, w}), weight({w})},               // rank 1 on the innermost dim
        {weight({w}), activation({n, c, h, w})},
        {activation({n, c, h, w}), weight({1, c, 1, 1})},  // per-channel
        {weight({1, c, 1, 1}), activation({n, c, h, w})},
        {activation({c, 1, 1}), activation({n, c, h, w})},     // lower rank, inner 1s
        {activation({n, 1, h, 1}), activation({c, 1, w})},     // both sides broadcast
        {activation({h, 1}), weight({1, w})},                  // outer product
        {activation({1}), activation({n, c, h, w})},           // shape [1] vs rank 4
        {activation({}), activation({})},                      // scalars
        {activation({1, 1, 1, 1}), activation({h})},           // all-1 operand of higher rank
        {activation({n, c, h, w}), activation({n, c, 1, w})},  // middle dim broadcast
    };
    const char *ops[] = {"Add", "Sub", "Mul", "Div"};
    for (size_t i = 0; i < cases.size(); i++) {
        check_op({ops[i % 4], {}, {cases[i].first, cases[i].second}}, kTol);
    }
    // Div by a weight bounded away from zero, so the quotient is well-conditioned everywhere.
    check_op({"Div", {}, {activation({n, c, h, w}), weight({1, c, 1, 1}, 0.5, 2.0)}}, kTol);
}

// Erf, Sqrt, Reciprocal, Exp, Log, Neg, Abs on [-1, 1] (Sqrt and Log of a negative are NaN there,
// as in the reference), then over the ranges where their vectorized forms switch formula or reach
// the float limits.
TEST(ElementwiseOps, UnaryMath) {
    Rng rng(303);
    for (const char *op : {"Erf", "Sqrt", "Reciprocal", "Exp", "Log", "Neg", "Abs"}) {
        check_op({op, {}, {activation(odd_shape(rng, rng.uniform_int(0, 4)))}}, kTol);
    }
    check_op({"Erf", {}, {weight({5, 41}, -6, 6)}}, kTol);      // the series below 0.5, the tail, +-1
    check_op({"Erf", {}, {weight({3, 17}, -0.6, 0.6)}}, 1e-6);  // relative near 0, where erf(x) ~ 1.13x
    check_op({"Exp", {}, {weight({7, 13}, -100, 100)}}, kTol);  // 0 below -87, +inf above 88.7
    check_op({"Exp", {}, {weight({7, 13}, -10, 10)}}, kTol);
    check_op({"Exp", {}, {weight_values({5}, {88.3f, 88.7f, 88.8f, -87.5f, -86.9f})}}, kTol);  // by the limits
    check_op({"Log", {}, {weight({7, 13}, 1e-6, 1e6)}}, kTol);
    check_op({"Log", {}, {weight_values({4}, {0.0f, -0.0f, INFINITY, -1.0f})}}, kTol);  // -inf, -inf, inf, NaN
    check_op({"Sqrt", {}, {weight({5, 9}, 0, 1000)}}, kTol);
    check_op({"Reciprocal", {}, {weight({5, 9}, 0.01, 100)}}, kTol);
}

// Pow by each exponent it turns into multiplications or square roots, by others (libm's pow), by an
// activation, and broadcast either way.
TEST(ElementwiseOps, Pow) {
    const Shape s = {2, 3, 5, 7};
    for (float e : {0.0f, 1.0f, 2.0f, 3.0f, 4.0f, 0.5f, -0.5f, -1.0f, -2.0f, 1.7f, -3.0f}) {
        SCOPED_TRACE(e);
        check_op({"Pow", {}, {weight(s, 0.1, 3), weight_values({}, {e})}}, kTol);
        check_op({"Pow", {}, {activation(s), weight_values({1}, {e})}}, kTol);  // negative bases
    }
    check_op({"Pow", {}, {weight(s, 0.1, 3), activation(s)}}, kTol);
    check_op({"Pow", {}, {weight({1, 3, 1, 1}, 0.5, 2), activation(s)}}, kTol);
    check_op({"Pow", {}, {activation(s), weight({7}, -2, 2)}}, kTol);
}

// Max, Min, Sum, Mean over one to four inputs, broadcast.
TEST(ElementwiseOps, Variadic) {
    const std::vector<std::vector<InputSpec>> cases = {
        {activation({3, 5})},
        {activation({2, 3, 5}), activation({2, 3, 5})},
        {activation({2, 1, 5}), weight({3, 1}), activation({5})},
        {activation({}), activation({1, 4, 1, 3}), weight({1, 1, 5, 1}), activation({3})},
    };
    for (const char *op : {"Max", "Min", "Sum", "Mean"}) {
        for (const auto &inputs : cases) check_op({op, {}, inputs}, kTol);
    }
}

TEST(ElementwiseOps, Gelu) {
    check_op({"Gelu", {}, {activation({2, 3, 5, 7})}}, kTol);
    check_op({"Gelu", {{"approximate", "none"}}, {weight({5, 41}, -8, 8)}}, kTol);
    check_op({"Gelu", {{"approximate", "tanh"}}, {weight({5, 41}, -8, 8)}}, kTol);
    check_op({"Gelu", {{"approximate", "tanh"}}, {activation({3, 17})}}, kTol);
}

TEST(ElementwiseOps, Errors) {
    expect_op_error({"Gelu", {{"approximate", "fast"}}, {activation({3})}}, "approximate");
    expect_op_error({"Max", {}, {activation({2, 3}), activation({3}), activation({2})}}, "input 2");
    expect_op_error({"Pow", {}, {activation({2, 3}), activation({4})}}, "do not broadcast");
    expect_op_error({"Add", {}, {activation({2, 3}), activation({4})}}, "do not broadcast");
    expect_op_error({"Mul", {}, {activation({2, 3, 5}), weight({2, 1})}}, "do not broadcast");
    expect_op_error({"Clip", {}, {activation({3}), activation({})}}, "must be a weight");
    expect_op_error({"Clip", {}, {activation({3}), weight({2})}}, "single value");
    expect_op_error({"Clip", {}, {activation({3}), missing(), weight({1, 1, 2})}}, "single value");
    expect_op_error({"Clip", {}, {activation({3}), ints({0})}}, "float32");
    expect_op_error({"LeakyRelu", {{"alpha", "big"}}, {activation({3})}}, "alpha");
}

}  // namespace
}  // namespace hfuse::test
