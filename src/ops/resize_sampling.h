// Where each output index of one Resize axis reads its input, and with what weights: ONNX Resize's
// coordinate transformation (opset 19's list), then the nearest rounding, or the linear or cubic
// coefficients (stretched when antialiasing a downsampling axis; renormalised over the taps inside the
// input with exclude_outside). Coordinates are computed in float, as ONNX Runtime computes them, so
// nearest ties break the same way. Pure C++: the Halide lowering turns the tables into lookups.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hfuse::ops {

struct ResizeOptions {
    std::string mode = "nearest";          // nearest, linear, cubic
    std::string transform = "half_pixel";  // coordinate_transformation_mode
    std::string nearest_mode = "round_prefer_floor";
    float cubic_coeff_a = -0.75f;
    bool exclude_outside = false;
    bool antialias = false;  // linear and cubic only; changes only downsampling axes
};

// The coordinate transformation modes and nearest roundings ResizeOptions accepts.
const std::vector<std::string> &resize_transforms();
const std::vector<std::string> &resize_nearest_modes();

struct ResizeAxisSampling {
    int64_t out = 0;
    int taps = 1;
    std::vector<int32_t> index;   // [o * taps + t]: in [0, in), clamped as the edge-padded input reads it
    std::vector<float> weight;    // [o * taps + t]
    std::vector<uint8_t> inside;  // per output index; empty when all are (only tf_crop_and_resize leaves some out)

    // Every output index reads one input index with weight 1 (nearest, or a linear axis not resized).
    bool is_copy() const;
    // Whether output index o reads input index o / k with weight 1 (k = 1: the axis is not resized).
    bool is_integer_upsampling(int64_t k) const;
};

// `scale` is output/input as the node gives it (its scales input, or sizes / input); roi_start and
// roi_end are read only by tf_crop_and_resize. Throws an Error naming the field for an unknown mode.
ResizeAxisSampling resize_axis_sampling(int64_t in, int64_t out, float scale, const ResizeOptions &options,
                                        float roi_start = 0.0f, float roi_end = 1.0f);

}  // namespace hfuse::ops
