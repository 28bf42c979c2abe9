// MaxPool, AveragePool and the global pools against the reference evaluator (seeded random
// geometries and named edge cases: ceil_mode, count_include_pad, dilation), their shape inference,
// FLOPs, and the errors bad attributes produce.
#include <algorithm>
#include <limits>

#include "window_test_util.h"

namespace hfuse::test {
namespace {

// A max is exact; an average is a float32 sum of at most 4 x 4 = 16 values in [-1, 1] (kernels up to
// 4x4 here, the global pools at most 13 x 13 = 169) divided by the count, summed in a different order
// than the reference: a few ulps per term, far below 1e-4 of the output scale.
constexpr double kTolerance = 1e-4;

using Ints = std::vector<int64_t>;

OpCase random_pool(const std::string &op, uint32_t seed) {
    Rng rng(seed);
    const bool max = op == "MaxPool";
    Ints kernel = {rng.uniform_int(1, 4), rng.uniform_int(1, 4)};
    Ints strides = {rng.uniform_int(1, 3), rng.uniform_int(1, 3)};
    Ints dilations(2, 1);
    if (max && rng.coin()) dilations = {rng.uniform_int(1, 3), rng.uniform_int(1, 3)};
    // Pools reject pads as large as the kernel.
    Ints pads = {rng.uniform_int(0, kernel[0] - 1), rng.uniform_int(0, kernel[1] - 1),
                 rng.uniform_int(0, kernel[0] - 1), rng.uniform_int(0, kernel[1] - 1)};
    const char *auto_pads[] = {"NOTSET", "NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
    std::string auto_pad = auto_pads[rng.uniform_int(0, 5)];

    Shape x = {rng.uniform_int(1, 2), rng.uniform_int(1, 7)};
    for (int i = 0; i < 2; i++) {
        int64_t window = (kernel[i] - 1) * dilations[i] + 1;
        if (auto_pad == "NOTSET") x.push_back(random_extent(rng, window, pads[i] + pads[2 + i]));
        if (auto_pad == "VALID") x.push_back(random_extent(rng, window, 0));
        if (auto_pad.rfind("SAME", 0) == 0) x.push_back(rng.uniform_int(1, 12));
    }

    OpCase c{
        op, {{"kernel_shape", kernel}, {"strides", strides}, {"ceil_mode", rng.uniform_int(0, 1)}}, {activation(x)}};
    if (auto_pad == "NOTSET") {
        c.attrs["pads"] = pads;
    } else {
        c.attrs["auto_pad"] = auto_pad;
    }
    if (max) c.attrs["dilations"] = dilations;
    if (!max) c.attrs["count_include_pad"] = rng.uniform_int(0, 1);
    return c;
}

class MaxPoolRandom : public ::testing::TestWithParam<int> {};
class AveragePoolRandom : public ::testing::TestWithParam<int> {};

TEST_P(MaxPoolRandom, MatchesReference) {
    check_op(random_pool("MaxPool", 2000 + GetParam()), kTolerance);
}

TEST_P(AveragePoolRandom, MatchesReference) {
    check_op(random_pool("AveragePool", 3000 + GetParam()), kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Seeds, MaxPoolRandom, ::testing::Range(0, 14));
INSTANTIATE_TEST_SUITE_P(Seeds, AveragePoolRandom, ::testing::Range(0, 14));

TEST(MaxPoolOps, OverlappingWindows) {
    // ResNet's 3x3 stride-2 pool, in floor and ceil mode.
    OpCase c{"MaxPool",
             {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}},
             {activation({2, 5, 9, 10})}};
    EXPECT_EQ(output_shape(c), (Shape{2, 5, 5, 5}));
    check_op(c, kTolerance);
    c.attrs["ceil_mode"] = 1;
    EXPECT_EQ(output_shape(c), (Shape{2, 5, 5, 6}));
    check_op(c, kTolerance);
}

TEST(MaxPoolOps, Dilated) {
    check_op({"MaxPool",
              {{"kernel_shape", {3, 2}}, {"dilations", {2, 3}}, {"pads", {1, 0, 2, 1}}},
              {activation({1, 3, 11, 10})}},
             kTolerance);
}

TEST(MaxPoolOps, PaddingNeverWins) {
    // All inputs negative: a zero pad would show up in every border output.
    check_op({"MaxPool", {{"kernel_shape", {3, 3}}, {"pads", {2, 2, 2, 2}}}, {weight({1, 2, 5, 5}, -2, -1)}},
             kTolerance);
}

TEST(MaxPoolOps, InfiniteInputs) {
    // A window of -inf alone (beside padding) is -inf, not the lowest finite float; +inf wins.
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> x(2 * 4 * 4, -inf);
    x[5] = 1.0f;
    x[16 + 10] = inf;
    check_op({"MaxPool",
              {{"kernel_shape", {2, 2}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}},
              {weight_values({1, 2, 4, 4}, x)}},
             kTolerance);
    check_op({"GlobalMaxPool", {}, {weight_values({1, 2, 4, 4}, x)}}, kTolerance);
    std::fill(x.begin(), x.end(), -inf);
    check_op({"GlobalMaxPool", {}, {weight_values({1, 2, 4, 4}, x)}}, kTolerance);
}

TEST(MaxPoolOps, CeilModeWindowsStartInsideTheInput) {
    // Input 5, kernel 2, stride 3, end pad 1: ceil((5 + 1 - 2) / 3) + 1 = 3 windows, but the third
    // would start at 6, inside the end padding alone, so it is dropped.
    OpCase dropped{"MaxPool",
                   {{"kernel_shape", {2, 2}}, {"strides", {3, 3}}, {"pads", {0, 0, 1, 1}}, {"ceil_mode", 1}},
                   {activation({1, 2, 5, 5})}};
    EXPECT_EQ(output_shape(dropped), (Shape{1, 2, 2, 2}));
    check_op(dropped, kTolerance);
    // Input 6, kernel 3, stride 2: ceil mode adds a window [4, 7) reaching one cell past the input.
    OpCase added{
        "MaxPool", {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"ceil_mode", 1}}, {activation({1, 2, 6, 6})}};
    EXPECT_EQ(output_shape(added), (Shape{1, 2, 3, 3}));
    check_op(added, kTolerance);
}

TEST(MaxPoolOps, OneDimensional) {
    OpCase c{"MaxPool",
             {{"kernel_shape", {3}}, {"strides", {2}}, {"pads", {1, 2}}, {"ceil_mode", 1}},
             {activation({2, 3, 10})}};
    EXPECT_EQ(output_shape(c), (Shape{2, 3, 6}));
    check_op(c, kTolerance);
}

TEST(AveragePoolOps, CountIncludePadWithCeilMode) {
    // Input 6, kernel 3, stride 2, pads 1: the last window [5, 8) has 1 input cell, 1 end-padding cell
    // and 1 cell that only ceil_mode adds, so it divides by 1 or by 2, never by 3.
    for (int count_include_pad : {0, 1}) {
        OpCase c{"AveragePool",
                 {{"kernel_shape", {3, 3}},
                  {"strides", {2, 2}},
                  {"pads", {1, 1, 1, 1}},
                  {"ceil_mode", 1},
                  {"count_include_pad", count_include_pad}},
                 {activation({1, 3, 6, 6})}};
        EXPECT_EQ(output_shape(c), (Shape{1, 3, 4, 4}));
        check_op(c, kTolerance);
    }
}

TEST(AveragePoolOps, AsymmetricPads) {
    for (int count_include_pad : {0, 1}) {
        check_op({"AveragePool",
                  {{"kernel_shape", {2, 3}}, {"pads", {1, 0, 0, 2}}, {"count_include_pad", count_include_pad}},
                  {activation({2, 3, 7, 6})}},
                 kTolerance);
    }
}

TEST(AveragePoolOps, SamePadsCountTowardTheDivisorOnlyWithCountIncludePad) {
    for (const char *auto_pad : {"SAME_UPPER", "SAME_LOWER"}) {
        for (int count_include_pad : {0, 1}) {
            OpCase c{"AveragePool",
                     {{"kernel_shape", {4, 3}},
                      {"strides", {2, 1}},
                      {"auto_pad", auto_pad},
                      {"count_include_pad", count_include_pad}},
                     {activation({1, 2, 7, 5})}};
            EXPECT_EQ(output_shape(c), (Shape{1, 2, 4, 5}));
            check_op(c, kTolerance);
        }
    }
}

TEST(AveragePoolOps, OneDimensional) {
    check_op({"AveragePool", {{"kernel_shape", {4}}, {"strides", {3}}, {"pads", {2, 1}}}, {activation({1, 4, 13})}},
             kTolerance);
}

TEST(GlobalPoolOps, KeepRank) {
    EXPECT_EQ(output_shape({"GlobalAveragePool", {}, {activation({2, 10, 7, 9})}}), (Shape{2, 10, 1, 1}));
    EXPECT_EQ(output_shape({"GlobalMaxPool", {}, {activation({2, 3, 11})}}), (Shape{2, 3, 1}));
}

TEST(GlobalPoolOps, MatchReference) {
    for (const char *op : {"GlobalAveragePool", "GlobalMaxPool"}) {
        check_op({op, {}, {activation({2, 10, 7, 9})}}, kTolerance);
        check_op({op, {}, {activation({1, 5, 13, 13})}}, kTolerance);
        check_op({op, {}, {activation({2, 3, 1, 1})}}, kTolerance);
        check_op({op, {}, {activation({1, 6, 11})}}, kTolerance);
    }
}

TEST(PoolOps, KindAndFlops) {
    EXPECT_EQ(find_op("MaxPool")->kind, PatternKind::Window);
    EXPECT_EQ(find_op("AveragePool")->kind, PatternKind::Window);
    EXPECT_EQ(find_op("GlobalMaxPool")->kind, PatternKind::Reduction);
    EXPECT_EQ(find_op("GlobalAveragePool")->kind, PatternKind::Reduction);
    // 2 x 2 x 2 outputs of 3 x 3 windows; the global pools read every input cell once.
    EXPECT_DOUBLE_EQ(op_flops({"MaxPool", {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}}, {activation({1, 2, 6, 6})}}),
                     72);
    EXPECT_DOUBLE_EQ(
        op_flops({"AveragePool", {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}}, {activation({1, 2, 6, 6})}}), 72);
    EXPECT_DOUBLE_EQ(op_flops({"GlobalAveragePool", {}, {activation({1, 3, 4, 5})}}), 60);
    EXPECT_DOUBLE_EQ(op_flops({"GlobalMaxPool", {}, {activation({2, 3, 4, 5})}}), 120);
}

// ---- errors ----

OpCase pool_3x3(const std::string &op, nlohmann::json attrs) {
    attrs["kernel_shape"] = {3, 3};
    return {op, std::move(attrs), {activation({1, 3, 8, 8})}};
}

TEST(PoolErrors, StorageOrderOne) {
    expect_op_error(pool_3x3("MaxPool", {{"storage_order", 1}}), "field 'storage_order'");
}

TEST(PoolErrors, IndicesOutputUnsupported) {
    OpCase c = pool_3x3("MaxPool", {});
    c.num_outputs = 2;
    expect_op_error(c, "");  // rejected by validate() against max_outputs; its wording is not ours
}

TEST(PoolErrors, MissingKernelShape) {
    expect_op_error({"MaxPool", {}, {activation({1, 3, 8, 8})}}, "field 'kernel_shape'");
}

TEST(PoolErrors, KernelShapeOfWrongLength) {
    expect_op_error({"AveragePool", {{"kernel_shape", {3}}}, {activation({1, 3, 8, 8})}},
                    "field 'kernel_shape': expects 2 values");
}

TEST(PoolErrors, ZeroStride) {
    expect_op_error(pool_3x3("MaxPool", {{"strides", {0, 1}}}), "field 'strides': must be >= 1");
    expect_op_error(pool_3x3("AveragePool", {{"strides", {2, 0}}}), "field 'strides': must be >= 1");
}

TEST(PoolErrors, BadPadsLength) {
    expect_op_error(pool_3x3("AveragePool", {{"pads", {1, 1, 1}}}), "field 'pads': expects 4 values");
}

TEST(PoolErrors, PadsAsLargeAsTheKernel) {
    expect_op_error(pool_3x3("AveragePool", {{"pads", {0, 3, 0, 0}}}), "field 'pads': must be smaller than the kernel");
}

TEST(PoolErrors, KernelLargerThanInput) {
    expect_op_error({"MaxPool", {{"kernel_shape", {5, 2}}}, {activation({1, 3, 4, 8})}},
                    "kernel larger than padded input");
    expect_op_error({"MaxPool", {{"kernel_shape", {3, 3}}, {"dilations", {1, 4}}}, {activation({1, 3, 8, 8})}},
                    "kernel larger than padded input");
}

TEST(PoolErrors, UnknownAutoPad) {
    expect_op_error(pool_3x3("MaxPool", {{"auto_pad", "same_upper"}}), "field 'auto_pad'");
}

TEST(PoolErrors, CeilModeNotABoolean) {
    expect_op_error(pool_3x3("MaxPool", {{"ceil_mode", 2}}), "field 'ceil_mode'");
    expect_op_error(pool_3x3("AveragePool", {{"count_include_pad", -1}}), "field 'count_include_pad'");
}

TEST(PoolErrors, AveragePoolHasNoDilations) {
    expect_op_error(pool_3x3("AveragePool", {{"dilations", {1, 1}}}), "dilations");
}

}  // namespace
}  // namespace hfuse::test
