// Conv against the reference evaluator (seeded random geometries and a few named cases), its shape
// inference, FLOPs, and the errors bad attributes and inputs produce.
#include "window_test_util.h"

namespace hfuse::test {
namespace {

// Every output is a float32 sum of at most 5 * 5 * 5 + 1 = 126 terms (C_in/group <= 5, kernels up to
// 5x5, the bias) of products of values in [-1, 1]. The reference adds them in a different order;
// the difference is a few ulps per term, i.e. around 1e-5 of the output scale at worst.
constexpr double kTolerance = 1e-4;

using Ints = std::vector<int64_t>;

OpCase random_conv(uint32_t seed) {
    Rng rng(seed);
    // Plain, grouped, or depthwise (group == C with a channel multiplier of 1 or 2).
    int group = 1, c_in_per_group = 1, c_out_per_group = 1;
    switch (rng.uniform_int(0, 2)) {
    case 0:
        c_in_per_group = rng.uniform_int(1, 5);
        c_out_per_group = rng.uniform_int(1, 7);
        break;
    case 1:
        group = rng.uniform_int(2, 3);
        c_in_per_group = rng.uniform_int(1, 3);
        c_out_per_group = rng.uniform_int(1, 3);
        break;
    default:
        group = rng.uniform_int(2, 7);
        c_out_per_group = rng.uniform_int(1, 2);
        break;
    }
    const int64_t c_out = group * c_out_per_group;
    Ints kernel = {rng.uniform_int(1, 5), rng.uniform_int(1, 5)};
    Ints strides = {rng.uniform_int(1, 3), rng.uniform_int(1, 3)};
    Ints dilations(2, 1);
    if (rng.coin()) dilations = {rng.uniform_int(1, 3), rng.uniform_int(1, 3)};
    Ints pads = {rng.uniform_int(0, 2), rng.uniform_int(0, 2), rng.uniform_int(0, 2), rng.uniform_int(0, 2)};
    const char *auto_pads[] = {"NOTSET", "NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
    std::string auto_pad = auto_pads[rng.uniform_int(0, 5)];

    Shape x = {rng.uniform_int(1, 2), group * c_in_per_group};
    for (int i = 0; i < 2; i++) {
        int64_t window = (kernel[i] - 1) * dilations[i] + 1;
        if (auto_pad == "NOTSET") x.push_back(random_extent(rng, window, pads[i] + pads[2 + i]));
        if (auto_pad == "VALID") x.push_back(random_extent(rng, window, 0));
        if (auto_pad.rfind("SAME", 0) == 0) x.push_back(rng.uniform_int(1, 12));
    }

    OpCase c{"Conv", {{"strides", strides}, {"dilations", dilations}}, {}};
    if (auto_pad == "NOTSET") {
        c.attrs["pads"] = pads;
    } else {
        c.attrs["auto_pad"] = auto_pad;
    }
    if (group > 1) c.attrs["group"] = group;
    if (rng.coin()) c.attrs["kernel_shape"] = kernel;
    c.inputs = {activation(x), weight({c_out, c_in_per_group, kernel[0], kernel[1]})};
    if (rng.coin()) c.inputs.push_back(weight({c_out}));
    return c;
}

class ConvRandom : public ::testing::TestWithParam<int> {};

TEST_P(ConvRandom, MatchesReference) {
    check_op(random_conv(1000 + GetParam()), kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Seeds, ConvRandom, ::testing::Range(0, 30));

TEST(ConvOps, StridedStemWithBias) {
    OpCase c{"Conv",
             {{"kernel_shape", {7, 7}}, {"strides", {2, 2}}, {"pads", {3, 3, 3, 3}}},
             {activation({1, 3, 17, 15}), weight({6, 3, 7, 7}), weight({6})}};
    EXPECT_EQ(output_shape(c), (Shape{1, 6, 9, 8}));
    check_op(c, kTolerance);
}

TEST(ConvOps, Pointwise) {
    check_op({"Conv", {}, {activation({2, 10, 5, 7}), weight({6, 10, 1, 1})}}, kTolerance);
}

TEST(ConvOps, DepthwiseWithMultiplier) {
    check_op({"Conv",
              {{"group", 5}, {"pads", {1, 0, 1, 2}}},
              {activation({1, 5, 9, 8}), weight({10, 1, 3, 3}), weight({10})}},
             kTolerance);
}

TEST(ConvOps, OptionalBiasLeftOut) {
    check_op({"Conv", {{"pads", {0, 1, 2, 0}}}, {activation({1, 3, 6, 5}), weight({4, 3, 2, 3}), missing()}},
             kTolerance);
}

TEST(ConvOps, SamePadsPutTheOddCellAtTheRightEnd) {
    // Input 6, kernel 4, stride 1: 3 cells of padding, 1 + 2 for SAME_UPPER and 2 + 1 for SAME_LOWER.
    for (const char *auto_pad : {"SAME_UPPER", "SAME_LOWER"}) {
        OpCase c{"Conv", {{"auto_pad", auto_pad}}, {activation({1, 2, 6, 6}), weight({3, 2, 4, 4})}};
        EXPECT_EQ(output_shape(c), (Shape{1, 3, 6, 6}));
        check_op(c, kTolerance);
    }
    OpCase strided{
        "Conv", {{"auto_pad", "SAME_UPPER"}, {"strides", {2, 3}}}, {activation({1, 1, 7, 7}), weight({1, 1, 3, 3})}};
    EXPECT_EQ(output_shape(strided), (Shape{1, 1, 4, 3}));
}

TEST(ConvOps, OneDimensional) {
    OpCase c{"Conv",
             {{"pads", {1, 2}}, {"strides", {2}}, {"dilations", {2}}},
             {activation({2, 3, 11}), weight({4, 3, 3}), weight({4})}};
    EXPECT_EQ(output_shape(c), (Shape{2, 4, 5}));
    check_op(c, kTolerance);
}

TEST(ConvOps, KindAndFlops) {
    const OpSchema *conv = find_op("Conv");
    ASSERT_NE(conv, nullptr);
    EXPECT_EQ(conv->kind, PatternKind::ComplexOutFusable);
    // 6 x 8 x 8 outputs, each 2 channels x 3 x 3 multiply-adds plus the bias.
    EXPECT_DOUBLE_EQ(op_flops({"Conv",
                               {{"group", 2}, {"pads", {1, 1, 1, 1}}},
                               {activation({1, 4, 8, 8}), weight({6, 2, 3, 3}), weight({6})}}),
                     384.0 * 2 * 18 + 384);
    EXPECT_DOUBLE_EQ(op_flops({"Conv", {}, {activation({1, 4, 8, 8}), weight({6, 4, 3, 3})}}), 216.0 * 2 * 36);
}

// ---- errors ----

OpCase conv_3x3(nlohmann::json attrs) {
    return {"Conv", std::move(attrs), {activation({1, 4, 7, 7}), weight({6, 4, 3, 3})}};
}

TEST(ConvErrors, ZeroStride) {
    expect_op_error(conv_3x3({{"strides", {1, 0}}}), "field 'strides': must be >= 1");
}

TEST(ConvErrors, StridesOfWrongLength) {
    expect_op_error(conv_3x3({{"strides", {1, 1, 1}}}), "field 'strides'");
}

TEST(ConvErrors, ZeroDilation) {
    expect_op_error(conv_3x3({{"dilations", {0, 1}}}), "field 'dilations'");
}

TEST(ConvErrors, ChannelMismatch) {
    expect_op_error({"Conv", {{"group", 2}}, {activation({1, 6, 5, 5}), weight({4, 4, 3, 3})}},
                    "field 'input 1 (W)': expects W.shape[1] * group == 6");
}

TEST(ConvErrors, OutputChannelsNotDivisibleByGroup) {
    expect_op_error({"Conv", {{"group", 2}}, {activation({1, 4, 5, 5}), weight({3, 2, 3, 3})}},
                    "not divisible by group 2");
}

TEST(ConvErrors, NonPositiveGroup) {
    expect_op_error(conv_3x3({{"group", 0}}), "field 'group'");
}

TEST(ConvErrors, BadPadsLength) {
    expect_op_error(conv_3x3({{"pads", {1, 1}}}), "field 'pads': expects 4 values");
}

TEST(ConvErrors, NegativePads) {
    expect_op_error(conv_3x3({{"pads", {1, -1, 1, 1}}}), "field 'pads': must be non-negative");
}

TEST(ConvErrors, KernelLargerThanInput) {
    expect_op_error({"Conv", {}, {activation({1, 1, 3, 3}), weight({1, 1, 5, 5})}}, "kernel larger than padded input");
    // Dilation counts: a 3x3 kernel with dilation 3 spans 7 cells.
    expect_op_error(
        {"Conv", {{"dilations", {3, 3}}, {"pads", {1, 1, 1, 1}}}, {activation({1, 1, 4, 4}), weight({1, 1, 3, 3})}},
        "kernel larger than padded input");
}

TEST(ConvErrors, UnknownAutoPad) {
    expect_op_error(conv_3x3({{"auto_pad", "SAME"}}), "field 'auto_pad'");
}

TEST(ConvErrors, AutoPadWithExplicitPads) {
    expect_op_error(conv_3x3({{"auto_pad", "VALID"}, {"pads", {0, 0, 0, 0}}}),
                    "field 'pads': cannot be given together");
}

TEST(ConvErrors, KernelShapeDisagreesWithWeight) {
    expect_op_error(conv_3x3({{"kernel_shape", {3, 2}}}), "field 'kernel_shape'");
}

TEST(ConvErrors, BiasShape) {
    expect_op_error({"Conv", {}, {activation({1, 4, 7, 7}), weight({6, 4, 3, 3}), weight({4})}}, "field 'input 2 (B)'");
}

TEST(ConvErrors, WeightRank) {
    expect_op_error({"Conv", {}, {activation({1, 4, 7, 7}), weight({6, 4, 3})}}, "field 'input 1 (W)'");
}

TEST(ConvErrors, UnsupportedInputRank) {
    expect_op_error({"Conv", {}, {activation({1, 4, 5, 5, 5}), weight({6, 4, 3, 3, 3})}}, "field 'input 0 (X)'");
}

}  // namespace
}  // namespace hfuse::test
