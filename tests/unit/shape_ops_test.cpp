// Data-movement ops (src/ops/shape_ops.cpp) against the reference evaluator: randomized seeded shapes
// plus the ONNX corner cases (negative axes and indices, clamping, huge bounds, negative steps,
// cropping pads), and one test per rejected input.
#include "op_test_util.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace hfuse::test {
namespace {

using nlohmann::json;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

Shape random_shape(Rng &rng, int rank, int max_dim = 4) {
    Shape s(rank);
    for (int64_t &d : s) d = rng.uniform_int(1, max_dim);
    return s;
}

std::vector<int64_t> random_permutation(Rng &rng, int n) {
    std::vector<int64_t> p(n);
    std::iota(p.begin(), p.end(), 0);
    for (int i = n - 1; i > 0; i--) std::swap(p[i], p[rng.uniform_int(0, i)]);
    return p;
}

OpCase reshape_case(const Shape &in, std::vector<int64_t> shape, json attrs = json::object()) {
    return {"Reshape", std::move(attrs), {activation(in), ints(std::move(shape))}};
}

// ---- Flatten

// Expand: the input broadcast to a shape of higher rank, 1s in either taking the other's dim.
TEST(ShapeOpsExpand, Broadcasts) {
    check_op({"Expand", json::object(), {activation({3, 1, 5}), ints({2, 3, 4, 5})}});
    check_op({"Expand", json::object(), {activation({3, 4, 5}), ints({1, 1, 5})}});  // shape's 1s keep the input's
    check_op({"Expand", json::object(), {activation({1}), ints({3, 7})}});
    check_op({"Expand", json::object(), {activation({2, 1}), ints({2, 9})}});
    expect_op_error({"Expand", json::object(), {activation({3, 2}), ints({3, 4})}}, "do not broadcast");
    expect_op_error({"Expand", json::object(), {activation({3}), ints({0, 3})}}, "positive dims");
}

TEST(ShapeOpsFlatten, RandomShapesAndAxes) {
    Rng rng(11);
    for (int t = 0; t < 5; t++) {
        const int rank = rng.uniform_int(1, 4);
        const int axis = rng.uniform_int(-rank, rank);
        check_op({"Flatten", {{"axis", axis}}, {activation(random_shape(rng, rank))}});
    }
}

TEST(ShapeOpsFlatten, DefaultAndExtremeAxes) {
    check_op({"Flatten", json::object(), {activation({2, 3, 4, 5})}});  // axis 1: the classifier-head case
    check_op({"Flatten", {{"axis", 0}}, {activation({2, 3, 4})}});      // (1, 24)
    check_op({"Flatten", {{"axis", 3}}, {activation({2, 3, 4})}});      // axis == rank: (24, 1)
    check_op({"Flatten", {{"axis", -3}}, {activation({2, 3, 4})}});
}

// ---- Reshape

TEST(ShapeOpsReshape, ZeroAndMinusOne) {
    check_op(reshape_case({2, 3, 4}, {6, -1}));
    check_op(reshape_case({2, 3, 4}, {0, 12}));     // 0 copies dim 0
    check_op(reshape_case({2, 3, 4}, {0, 0, -1}));  // 0s and -1 together
    check_op(reshape_case({2, 3, 4}, {-1}));
    check_op(reshape_case({2, 3, 4}, {4, 3, 2}, {{"allowzero", 1}}));  // allowzero=1 without zeros
}

TEST(ShapeOpsReshape, DimGroupings) {
    check_op(reshape_case({2, 3, 4, 5}, {2, 3, 20}));    // merge the innermost dims
    check_op(reshape_case({2, 12}, {2, 3, 4}));          // split the innermost dim
    check_op(reshape_case({4, 6}, {3, 8}));              // groups that do not line up
    check_op(reshape_case({1, 3, 1, 4}, {3, 4, 1}));     // extent-1 dims dropped and added
    check_op(reshape_case({6}, {1, 2, 1, 3}));           // extent-1 dims inside a group
    check_op(reshape_case({2, 3, 5}, {5, 3, 2}));        // same elements, no common dims
    check_op(reshape_case({1, 8, 3, 3}, {1, 2, 4, 9}));  // channel split with spatial merge
}

TEST(ShapeOpsReshape, RandomFactorizations) {
    Rng rng(23);
    for (int t = 0; t < 5; t++) {
        const Shape in = random_shape(rng, rng.uniform_int(1, 4));
        // Factor the element count into random dims, then maybe replace one with -1 or a copying 0.
        int64_t left = num_elements(in);
        std::vector<int64_t> shape;
        while (left > 1 && shape.size() < 4) {
            std::vector<int64_t> divisors;
            for (int64_t d = 1; d <= left; d++) {
                if (left % d == 0) divisors.push_back(d);
            }
            const int64_t d = divisors[rng.uniform_int(0, static_cast<int>(divisors.size()) - 1)];
            shape.push_back(d);
            left /= d;
        }
        shape.push_back(left);
        const int k = rng.uniform_int(0, static_cast<int>(shape.size()) - 1);
        if (rng.coin()) {
            shape[k] = -1;
        } else if (k < (int)in.size() && shape[k] == in[k]) {
            shape[k] = 0;
        }
        check_op(reshape_case(in, shape));
    }
}

// ---- Transpose

TEST(ShapeOpsTranspose, RandomPermutations) {
    Rng rng(37);
    for (int t = 0; t < 5; t++) {
        const int rank = rng.uniform_int(1, 5);
        check_op({"Transpose",
                  {{"perm", random_permutation(rng, rank)}},
                  {activation(random_shape(rng, rank, rank > 4 ? 3 : 4))}});
    }
}

TEST(ShapeOpsTranspose, DefaultPermReverses) {
    check_op({"Transpose", json::object(), {activation({2, 3, 4})}});
    check_op({"Transpose", {{"perm", {0, 2, 3, 1}}}, {activation({1, 3, 4, 5})}});  // NCHW -> NHWC
}

// ---- Concat

TEST(ShapeOpsConcat, OneToFourInputsWithWeights) {
    Rng rng(41);
    for (int n = 1; n <= 4; n++) {
        for (int t = 0; t < 2; t++) {
            const int rank = rng.uniform_int(1, 4);
            const int axis = rng.uniform_int(-rank, rank - 1);
            const Shape base = random_shape(rng, rank);
            std::vector<InputSpec> inputs;
            for (int i = 0; i < n; i++) {
                Shape s = base;
                s[axis < 0 ? axis + rank : axis] = rng.uniform_int(1, 3);
                inputs.push_back(i > 0 && rng.coin() ? weight(s) : activation(s));
            }
            check_op({"Concat", {{"axis", axis}}, inputs});
        }
    }
}

// ---- Split

TEST(ShapeOpsSplit, EqualParts) {
    OpCase c{"Split", json::object(), {activation({6, 4})}};
    c.num_outputs = 3;
    check_op(c);
    c = {"Split", {{"axis", -1}}, {activation({2, 3, 4})}};
    c.num_outputs = 2;
    check_op(c);
    c = {"Split", {{"axis", 1}}, {activation({2, 3})}};  // a single output is a copy
    check_op(c);
}

TEST(ShapeOpsSplit, ExplicitSizes) {
    Rng rng(53);
    for (int t = 0; t < 4; t++) {
        const int rank = rng.uniform_int(1, 3);
        const int axis = rng.uniform_int(0, rank - 1);
        const int outputs = rng.uniform_int(2, 4);
        std::vector<int64_t> sizes(outputs);
        for (int64_t &s : sizes) s = rng.uniform_int(1, 3);
        Shape shape = random_shape(rng, rank);
        shape[axis] = std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
        OpCase c{"Split", {{"axis", rng.coin() ? axis : axis - rank}}, {activation(shape), ints(sizes)}};
        c.num_outputs = outputs;
        check_op(c);
    }
}

TEST(ShapeOpsSplit, LeftOutSplitInput) {
    OpCase c{"Split", {{"axis", 0}}, {activation({4, 3}), missing()}};
    c.num_outputs = 2;
    check_op(c);
}

// ---- Slice

OpCase slice_case(const Shape &in, std::vector<int64_t> starts, std::vector<int64_t> ends,
                  std::vector<int64_t> axes = {}, std::vector<int64_t> steps = {}) {
    OpCase c{"Slice", json::object(), {activation(in), ints(std::move(starts)), ints(std::move(ends))}};
    const bool has_steps = !steps.empty();
    if (!axes.empty()) c.inputs.push_back(ints(std::move(axes)));
    if (has_steps) {
        if (c.inputs.size() == 3) c.inputs.push_back(missing());  // steps without axes
        c.inputs.push_back(ints(std::move(steps)));
    }
    return c;
}

TEST(ShapeOpsSlice, PositiveSteps) {
    check_op(slice_case({5, 6}, {1, 2}, {4, 5}));                        // axes and steps omitted
    check_op(slice_case({4, 5, 6}, {1}, {3}));                           // fewer starts than dims
    check_op(slice_case({4, 5, 6}, {-3}, {-1}, {-1}));                   // negative indices and axis
    check_op(slice_case({4, 5, 6}, {0, 1}, {kMax, 5}, {2, 0}, {2, 3}));  // INT64_MAX end, unsorted axes
    check_op(slice_case({4, 5}, {-100, 2}, {100, 3}, {0, 1}));           // clamped both ways
    check_op(slice_case({4, 7}, {1}, {7}, {}, {3}));                     // steps without axes
    check_op(slice_case({3, 6}, {1}, {kMax}, {1}, {100}));               // a step beyond the dim: one element
}

TEST(ShapeOpsSlice, NegativeSteps) {
    check_op(slice_case({3, 5}, {-1}, {kMin}, {1}, {-1}));                 // full reverse
    check_op(slice_case({3, 6}, {4}, {0}, {1}, {-2}));                     // end excluded
    check_op(slice_case({4, 6}, {100, -2}, {-100, 0}, {1, 0}, {-3, -1}));  // clamped to dim-1 and -1
    check_op(slice_case({2, 5}, {kMax}, {kMin}, {-1}, {-100}));            // a step beyond the dim: one element
    check_op(slice_case({2, 3, 4}, {2, -1}, {0, kMin}, {0, 2}, {-1, -2}));
}

// Steps of INT64_MAX / INT64_MIN select one element (both the op and the reference must count the
// range without overflowing).
TEST(ShapeOpsSlice, Int64ExtremeSteps) {
    check_op(slice_case({3, 6}, {1}, {kMax}, {1}, {kMax}));
    check_op(slice_case({2, 5}, {kMax}, {kMin}, {-1}, {kMin}));
}

TEST(ShapeOpsSlice, RandomNonEmpty) {
    Rng rng(67);
    for (int t = 0; t < 6; t++) {
        const int rank = rng.uniform_int(1, 4);
        const Shape in = random_shape(rng, rank, 6);
        std::vector<int64_t> starts, ends, axes, steps;
        for (int64_t a : random_permutation(rng, rank)) {
            if (rng.uniform_int(0, 3) == 0) continue;  // leave some dims whole
            const int64_t d = in[a];
            int64_t step = rng.uniform_int(1, 3) * (rng.coin() ? 1 : -1);
            const int64_t start = rng.uniform_int(0, static_cast<int>(d) - 1);
            // A non-empty end on the step's side of start; -1 with a negative step means "through 0".
            int64_t end = step > 0 ? rng.uniform_int(static_cast<int>(start) + 1, static_cast<int>(d) + 2)
                                   : rng.uniform_int(-1, static_cast<int>(start) - 1);
            if (end == -1)
                end = -d - 1 - rng.uniform_int(0, 2);
            else if (end < d && rng.coin())
                end -= d;  // the same index counted from the end
            starts.push_back(rng.coin() ? start : start - d);
            ends.push_back(end);
            axes.push_back(rng.coin() ? a : a - rank);
            steps.push_back(step);
        }
        if (starts.empty()) continue;
        check_op(slice_case(in, starts, ends, axes, steps));
    }
}

// ---- Identity and Dropout

TEST(ShapeOpsIdentity, CopiesInput) {
    check_op({"Identity", json::object(), {activation({2, 3, 4})}});
    check_op({"Identity", json::object(), {activation({7})}});
}

TEST(ShapeOpsDropout, InferenceIsIdentity) {
    check_op({"Dropout", json::object(), {activation({2, 5})}});
    check_op({"Dropout", {{"seed", 3}}, {activation({3, 4}), weight_values({}, {0.25f}), ints({0})}});
    check_op({"Dropout", json::object(), {activation({3}), missing(), ints({0})}});
}

// ---- Pad

OpCase pad_case(const std::string &mode, const Shape &in, std::vector<int64_t> pads) {
    return {"Pad", {{"mode", mode}}, {activation(in), ints(std::move(pads))}};
}

TEST(ShapeOpsPad, Constant) {
    OpCase c = pad_case("constant", {2, 3}, {1, 0, 2, 1});
    c.inputs.push_back(weight_values({}, {0.5f}));
    check_op(c);
    check_op({"Pad", json::object(), {activation({2, 3, 4}), ints({-1, 2, 0, 1, -1, 1})}});  // default mode
    check_op(pad_case("constant", {1, 2, 3, 3}, {0, 0, 1, 1, 0, 0, 1, 1}));
    check_op(pad_case("constant", {3, 4}, {-2, -1, 0, -2}));  // crop only
}

TEST(ShapeOpsPad, Reflect) {
    check_op(pad_case("reflect", {3, 4}, {2, 1, 2, 3}));    // pads up to dim-1
    check_op(pad_case("reflect", {4, 5}, {-1, 2, 1, -2}));  // mirror inside the cropped range
    check_op(pad_case("reflect", {1, 2, 3, 3}, {0, 0, 1, 1, 0, 0, 1, 1}));
    check_op(pad_case("reflect", {5}, {-2, 1}));  // crop one side, mirror the other
}

TEST(ShapeOpsPad, Edge) {
    check_op(pad_case("edge", {2, 3, 4}, {0, 1, 3, 1, 0, 2}));
    check_op(pad_case("edge", {4, 3}, {-2, 2, 1, -1}));
    check_op(pad_case("edge", {1, 4}, {3, 0, 2, 5}));  // pads larger than the dim
}

TEST(ShapeOpsPad, RandomPads) {
    Rng rng(71);
    for (const std::string mode : {"constant", "reflect", "edge"}) {
        for (int t = 0; t < 2; t++) {
            const int rank = rng.uniform_int(1, 4);
            const Shape in = random_shape(rng, rank);
            std::vector<int64_t> pads(2 * rank);
            for (int a = 0; a < rank; a++) {
                // Crop at most one element per side, keeping at least one; reflect pads stay below what is kept.
                int64_t b = in[a] > 2 ? rng.uniform_int(-1, 2) : rng.uniform_int(0, 2);
                int64_t e = in[a] > 2 ? rng.uniform_int(-1, 2) : rng.uniform_int(0, 2);
                if (mode == "reflect") {
                    const int64_t kept = in[a] + std::min<int64_t>(b, 0) + std::min<int64_t>(e, 0);
                    b = std::min(b, kept - 1);
                    e = std::min(e, kept - 1);
                }
                pads[a] = b;
                pads[a + rank] = e;
            }
            check_op(pad_case(mode, in, pads));
        }
    }
}

// ---- Resize (nearest)

OpCase resize_scales(const Shape &in, std::vector<float> scales, json attrs = json::object()) {
    const int64_t n = static_cast<int64_t>(scales.size());
    return {"Resize", std::move(attrs), {activation(in), missing(), weight_values({n}, std::move(scales))}};
}

OpCase resize_sizes(const Shape &in, std::vector<int64_t> sizes, json attrs = json::object()) {
    return {"Resize", std::move(attrs), {activation(in), missing(), missing(), ints(std::move(sizes))}};
}

TEST(ShapeOpsResize, IntegerUpsamplingAsPyTorchExportsIt) {
    const json torch = {
        {"mode", "nearest"}, {"coordinate_transformation_mode", "asymmetric"}, {"nearest_mode", "floor"}};
    check_op(resize_scales({1, 3, 5, 7}, {1, 1, 2, 2}, torch));
    check_op(resize_scales({2, 2, 3, 4}, {1, 1, 3, 2}, torch));
    check_op(resize_sizes({1, 2, 4, 4}, {1, 2, 8, 12}, torch));
}

TEST(ShapeOpsResize, EveryCoordinateTransformAndRounding) {
    // Non-integer ratios up and down, by scales and by sizes, so ties and clamping at both ends occur;
    // each (transform, rounding) pair takes one of the three cases in turn (each case costs a JIT).
    int k = 0;
    for (const char *transform :
         {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"}) {
        for (const char *rounding : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
            const json attrs = {{"coordinate_transformation_mode", transform}, {"nearest_mode", rounding}};
            switch (k++ % 3) {
            case 0: check_op(resize_sizes({1, 2, 5, 7}, {1, 2, 8, 3}, attrs)); break;
            case 1: check_op(resize_scales({1, 1, 6, 4}, {1, 1, 0.5f, 2.5f}, attrs)); break;
            default: check_op(resize_sizes({1, 1, 4, 3}, {1, 1, 1, 7}, attrs)); break;  // an output dim of 1
            }
        }
    }
    check_op(resize_scales({2, 3, 4}, {1, 1, 1.5f}));  // defaults: half_pixel, round_prefer_floor; rank 3
    check_op(resize_scales({4, 5}, {2, 0.6f}));        // rank 2, both dims resized
}

// ---- Resize (linear, cubic)

OpCase resize_crop(const Shape &in, std::vector<float> roi, std::vector<int64_t> sizes, json attrs) {
    const int64_t n = static_cast<int64_t>(roi.size());
    attrs["coordinate_transformation_mode"] = "tf_crop_and_resize";
    return {"Resize", std::move(attrs), {activation(in), weight_values({n}, std::move(roi)), missing(), ints(sizes)}};
}

TEST(ShapeOpsResize, LinearAndCubicEveryCoordinateTransform) {
    // Up and down by non-integer ratios, by sizes and by scales, an output dim of 1: each transform
    // takes the three cases in turn across the two modes (each case costs a JIT).
    int k = 0;
    for (const char *mode : {"linear", "cubic"}) {
        for (const char *transform : {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                      "asymmetric", "tf_half_pixel_for_nn"}) {
            const json attrs = {{"mode", mode}, {"coordinate_transformation_mode", transform}};
            switch (k++ % 3) {
            case 0: check_op(resize_sizes({1, 2, 5, 7}, {1, 2, 9, 3}, attrs)); break;
            case 1: check_op(resize_scales({1, 1, 6, 4}, {1, 1, 0.7f, 2.5f}, attrs)); break;
            default: check_op(resize_sizes({1, 1, 4, 3}, {1, 1, 1, 8}, attrs)); break;
            }
        }
        // tf_crop_and_resize: a crop box partly outside the input, so both extrapolation values occur.
        json crop = {{"mode", mode}, {"extrapolation_value", k % 2 ? 0.0 : -3.5}};
        check_op(resize_crop({1, 2, 6, 7}, {0, 0, 0.2f, -0.3f, 1, 1, 0.9f, 1.25f}, {1, 2, 5, 9}, crop));
    }
}

TEST(ShapeOpsResize, CubicCoefficientExcludeOutsideAndAntialias) {
    check_op(resize_sizes({1, 2, 6, 5}, {1, 2, 11, 4},
                          {{"mode", "cubic"}, {"cubic_coeff_a", -0.5}, {"exclude_outside", 1}}));
    // Antialiasing stretches the kernel only along the axes that shrink (here H by 0.4, W grows).
    check_op(resize_sizes({1, 2, 15, 6}, {1, 2, 6, 9}, {{"mode", "linear"}, {"antialias", 1}}));
    check_op(resize_sizes({1, 3, 13, 12}, {1, 3, 4, 5}, {{"mode", "cubic"}, {"antialias", 1}, {"exclude_outside", 1}}));
    // Rank 3 and 5 (linear over one axis and trilinear), and batch and channels resized too.
    check_op(resize_scales({2, 3, 7}, {1, 1, 1.75f}, {{"mode", "linear"}}));
    check_op(resize_sizes({1, 2, 3, 4, 5}, {1, 2, 5, 7, 3},
                          {{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}}));
    check_op(resize_sizes({2, 3, 4, 4}, {3, 2, 4, 4}, {{"mode", "linear"}}));
}

// ---- errors

TEST(ShapeOpsErrors, Resize) {
    expect_op_error(resize_scales({1, 1, 4, 4}, {1, 1, 2, 2}, {{"mode", "area"}}), "must be nearest, linear or cubic");
    expect_op_error(resize_scales({1, 1, 4, 4}, {1, 1, 2, 2}, {{"coordinate_transformation_mode", "tf_crop"}}),
                    "not supported");
    expect_op_error(
        resize_scales({1, 1, 4, 4}, {1, 1, 2, 2}, {{"coordinate_transformation_mode", "tf_crop_and_resize"}}),
        "a start and an end per input dim");
    expect_op_error(resize_scales({1, 1, 4, 4}, {1, 1, 2, 2}, {{"mode", "linear"}, {"antialias", 2}}), "antialias");
    expect_op_error(resize_scales({1, 1, 4, 4}, {1, 1, 2, 2}, {{"exclude_outside", -1}}), "exclude_outside");
    expect_op_error(resize_scales({1, 1, 4, 4}, {1, 1, 2, 2}, {{"nearest_mode", "round"}}), "nearest_mode");
    expect_op_error(resize_scales({1, 1, 4, 4}, {1, 2, 2}), "one value per input dim");
    expect_op_error(resize_scales({1, 1, 4, 4}, {1, 1, 0.1f, 1}), "empty");
    expect_op_error(resize_scales({1, 1, 4, 4}, {1, 1, -2, 1}), "positive");
    expect_op_error(resize_sizes({1, 1, 4, 4}, {1, 1, 0, 4}), "positive");
    expect_op_error({"Resize", json::object(), {activation({1, 1, 4, 4})}}, "exactly one of scales and sizes");
    expect_op_error({"Resize",
                     json::object(),
                     {activation({1, 1, 4, 4}), missing(), weight_values({4}, {1, 1, 2, 2}), ints({1, 1, 8, 8})}},
                    "exactly one of scales and sizes");
    expect_op_error({"Resize", json::object(), {activation({1, 1, 4, 4}), missing(), activation({4})}},
                    "must be a weight");
}

TEST(ShapeOpsErrors, Flatten) {
    expect_op_error({"Flatten", {{"axis", 4}}, {activation({2, 3, 4})}}, "out of range");
    expect_op_error({"Flatten", {{"axis", -4}}, {activation({2, 3, 4})}}, "out of range");
}

TEST(ShapeOpsErrors, Reshape) {
    expect_op_error(reshape_case({2, 3, 4}, {-1, -1, 2}), "more than one -1");
    expect_op_error(reshape_case({2, 3, 4}, {5, 4}), "has 20 elements, the input [2x3x4] has 24");
    expect_op_error(reshape_case({2, 3, 4}, {100, 100}), "needs more elements");
    expect_op_error(reshape_case({2, 3, 4}, {-2, -12}), "is negative");
    expect_op_error(reshape_case({2, 3, 4}, {5, -1}), "cannot infer the -1");
    expect_op_error(reshape_case({2, 3, 4}, {0, -1}, {{"allowzero", 1}}), "0 and -1 cannot be combined");
    expect_op_error(reshape_case({2, 3, 4}, {0, 24}, {{"allowzero", 1}}), "hfuse requires positive dims");
    expect_op_error(reshape_case({24}, {1, 0}), "copies an input dim, but the input has rank 1");
    expect_op_error(reshape_case({24}, {24}, {{"allowzero", 2}}), "must be 0 or 1");
    expect_op_error({"Reshape", json::object(), {activation({4}), weight_values({2}, {2, 2})}}, "int64");
}

TEST(ShapeOpsErrors, Transpose) {
    expect_op_error({"Transpose", {{"perm", {0, 0, 1}}}, {activation({2, 3, 4})}}, "not a permutation");
    expect_op_error({"Transpose", {{"perm", {1, 0}}}, {activation({2, 3, 4})}}, "not a permutation");
    expect_op_error({"Transpose", {{"perm", {0, 1, 3}}}, {activation({2, 3, 4})}}, "not a permutation");
}

TEST(ShapeOpsErrors, Concat) {
    expect_op_error({"Concat", json::object(), {activation({2, 3}), activation({2, 3})}},
                    "required attribute is missing");
    expect_op_error({"Concat", {{"axis", 2}}, {activation({2, 3}), activation({2, 3})}}, "out of range");
    expect_op_error({"Concat", {{"axis", 0}}, {activation({2, 3}), activation({2, 3, 1})}}, "has rank 3");
    expect_op_error({"Concat", {{"axis", 0}}, {activation({2, 3}), weight({2, 4})}}, "differs from input 0");
}

TEST(ShapeOpsErrors, Split) {
    OpCase c{"Split", {{"axis", 1}}, {activation({2, 5})}};
    c.num_outputs = 2;
    expect_op_error(c, "equal parts");
    c.inputs.push_back(ints({2, 2}));
    expect_op_error(c, "do not add up");
    c.inputs.back() = ints({1, 1, 3});
    expect_op_error(c, "has 3 sizes for 2 outputs");
    c.inputs.back() = ints({0, 5});
    expect_op_error(c, "hfuse requires positive dims");
    c.inputs.back() = ints({kMax, 5});
    expect_op_error(c, "do not add up");
}

TEST(ShapeOpsErrors, Slice) {
    expect_op_error(slice_case({4, 5}, {0}, {4}, {0}, {0}), "steps must be nonzero");
    expect_op_error(slice_case({4, 5}, {0, 1}, {4, 3}, {1, -1}), "appears twice");
    expect_op_error(slice_case({4, 5}, {3}, {1}), "hfuse requires positive dims");             // empty forward
    expect_op_error(slice_case({4, 5}, {1}, {3}, {0}, {-1}), "hfuse requires positive dims");  // empty backward
    expect_op_error(slice_case({4, 5}, {kMax}, {kMax}), "hfuse requires positive dims");       // both clamp to 4
    expect_op_error(slice_case({4, 5}, {0, 0}, {1}), "has 1 values, starts has 2");
    expect_op_error(slice_case({4, 5}, {0}, {1}, {2}), "out of range");
}

TEST(ShapeOpsErrors, Dropout) {
    OpCase mask{"Dropout", json::object(), {activation({2, 3})}};
    mask.num_outputs = 2;
    expect_op_error(mask, "mask output");
    expect_op_error({"Dropout", json::object(), {activation({2, 3}), missing(), ints({1})}}, "inference only");
    expect_op_error({"Dropout", json::object(), {activation({2, 3}), missing(), activation({1})}}, "must be a weight");
}

TEST(ShapeOpsErrors, Pad) {
    expect_op_error(pad_case("constant", {2, 3}, {1, 1, 1}), "needs 4");
    expect_op_error(pad_case("reflect", {2, 3}, {0, 3, 0, 0}), "smaller than the dim");
    expect_op_error(pad_case("reflect", {4, 3}, {-2, 0, 2, 0}), "smaller than the dim");  // 2 kept after cropping
    expect_op_error(pad_case("constant", {2, 3}, {0, -2, 0, -1}), "hfuse requires positive dims");
    expect_op_error(pad_case("edge", {2, 3}, {0, -3, 0, 1}), "crop every element");
    expect_op_error(pad_case("wrap", {2, 3}, {0, 1, 0, 1}), "must be constant, reflect or edge");
    OpCase two_values = pad_case("constant", {2, 3}, {0, 1, 0, 1});
    two_values.inputs.push_back(weight_values({2}, {1, 2}));
    expect_op_error(two_values, "single value");
}

}  // namespace
}  // namespace hfuse::test
