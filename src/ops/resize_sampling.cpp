#include "resize_sampling.h"

#include "hfuse/error.h"

#include <algorithm>
#include <cmath>

namespace hfuse::ops {

const std::vector<std::string> &resize_transforms() {
    static const std::vector<std::string> modes = {"half_pixel",        "half_pixel_symmetric", "pytorch_half_pixel",
                                                   "align_corners",     "asymmetric",           "tf_half_pixel_for_nn",
                                                   "tf_crop_and_resize"};
    return modes;
}

const std::vector<std::string> &resize_nearest_modes() {
    static const std::vector<std::string> modes = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    return modes;
}

namespace {

// The input coordinate output index o maps back to (ONNX's get_original_coordinate).
float original_coordinate(const std::string &transform, float o, float scale, float in, float out, float roi_start,
                          float roi_end) {
    if (transform == "half_pixel") return (o + 0.5f) / scale - 0.5f;
    if (transform == "half_pixel_symmetric") {
        const float adjustment = out / (scale * in), center = in / 2;
        return center * (1 - adjustment) + (o + 0.5f) / scale - 0.5f;
    }
    if (transform == "pytorch_half_pixel") return out > 1 ? (o + 0.5f) / scale - 0.5f : 0.0f;
    if (transform == "align_corners") return out == 1 ? 0.0f : o * (in - 1) / (out - 1);
    if (transform == "asymmetric") return o / scale;
    if (transform == "tf_half_pixel_for_nn") return (o + 0.5f) / scale;
    if (transform == "tf_crop_and_resize") {
        return out > 1 ? roi_start * (in - 1) + o * (roi_end - roi_start) * (in - 1) / (out - 1)
                       : 0.5f * (roi_start + roi_end) * (in - 1);
    }
    fail_field("coordinate_transformation_mode", "'" + transform + "' is not a coordinate transformation mode");
}

float nearest_index(const std::string &rounding, float x) {
    if (rounding == "floor") return std::floor(x);
    if (rounding == "ceil") return std::ceil(x);
    if (x == std::floor(x) + 0.5f) return rounding == "round_prefer_floor" ? std::floor(x) : std::ceil(x);  // a tie
    return std::round(x);
}

// Keys's cubic convolution kernel at distance d with coefficient a.
float cubic_kernel(float d, float a) {
    d = std::abs(d);
    if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
    if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
    return 0.0f;
}

}  // namespace

bool ResizeAxisSampling::is_copy() const {
    return taps == 1 && inside.empty() && std::all_of(weight.begin(), weight.end(), [](float w) { return w == 1.0f; });
}

bool ResizeAxisSampling::is_integer_upsampling(int64_t k) const {
    if (!is_copy() || k < 1) return false;
    for (int64_t o = 0; o < out; o++) {
        if (index[o] != o / k) return false;
    }
    return true;
}

ResizeAxisSampling resize_axis_sampling(int64_t in, int64_t out, float scale, const ResizeOptions &opt, float roi_start,
                                        float roi_end) {
    const std::vector<std::string> &transforms = resize_transforms();
    if (std::find(transforms.begin(), transforms.end(), opt.transform) == transforms.end()) {
        std::string known;
        for (const std::string &t : transforms) known += (known.empty() ? "" : ", ") + t;
        fail_field("coordinate_transformation_mode", "'" + opt.transform + "' is not supported (" + known + ")");
    }
    const bool nearest = opt.mode == "nearest";
    if (!nearest && opt.mode != "linear" && opt.mode != "cubic") {
        fail_field("mode", "must be nearest, linear or cubic, got '" + opt.mode + "'");
    }
    const std::vector<std::string> &roundings = resize_nearest_modes();
    if (nearest && std::find(roundings.begin(), roundings.end(), opt.nearest_mode) == roundings.end()) {
        fail_field("nearest_mode",
                   "must be round_prefer_floor, round_prefer_ceil, floor or ceil, got '" + opt.nearest_mode + "'");
    }
    const float length_in = static_cast<float>(in), length_out = static_cast<float>(out);
    const bool crop = opt.transform == "tf_crop_and_resize";
    // Antialiasing stretches the kernel by 1/scale where the axis shrinks.
    const float stretch = !nearest && opt.antialias && scale < 1 ? scale : 1.0f;
    const int first = nearest ? 0 : static_cast<int>(std::floor((opt.mode == "linear" ? -1 : -2) / stretch)) + 1;
    const int taps = nearest ? 1 : 2 - 2 * first;  // tap k in [first, first + taps), at floor(x) + k

    ResizeAxisSampling s;
    s.out = out;
    s.taps = taps;
    s.index.assign(out * taps, 0);
    s.weight.assign(out * taps, 0.0f);
    if (crop) s.inside.assign(out, 1);
    for (int64_t o = 0; o < out; o++) {
        const float x =
            original_coordinate(opt.transform, static_cast<float>(o), scale, length_in, length_out, roi_start, roi_end);
        if (crop && (x < 0 || x > length_in - 1)) s.inside[o] = 0;  // extrapolation_value; the taps stay valid
        int32_t *index = &s.index[o * taps];
        float *weight = &s.weight[o * taps];
        if (nearest) {
            index[0] = static_cast<int32_t>(std::clamp<float>(nearest_index(opt.nearest_mode, x), 0.0f, length_in - 1));
            weight[0] = 1.0f;
            continue;
        }
        const float base = std::floor(x), ratio = x - base;
        float sum = 0;
        for (int t = 0; t < taps; t++) {
            const float at = base + static_cast<float>(first + t),
                        d = (static_cast<float>(first + t) - ratio) * stretch;
            float w = opt.mode == "linear" ? std::max(0.0f, 1 - std::abs(d)) : cubic_kernel(d, opt.cubic_coeff_a);
            if (opt.exclude_outside && (at < 0 || at > length_in - 1)) w = 0;
            index[t] = static_cast<int32_t>(std::clamp<float>(at, 0.0f, length_in - 1));
            weight[t] = w;
            sum += w;
        }
        // The stretched kernels, and those cut at the edges, are renormalised to sum 1.
        if ((opt.exclude_outside || stretch != 1.0f) && sum != 0.0f) {
            for (int t = 0; t < taps; t++) weight[t] /= sum;
        }
    }
    // One tap of weight 1 per output (an axis kept as it is, or integer points): a copy.
    bool single = !nearest;
    for (int64_t o = 0; single && o < out; o++) {
        int ones = 0, zeros = 0;
        for (int t = 0; t < taps; t++) {
            ones += s.weight[o * taps + t] == 1.0f;
            zeros += s.weight[o * taps + t] == 0.0f;
        }
        single = ones == 1 && ones + zeros == taps;
    }
    if (single) {
        std::vector<int32_t> index(out);
        for (int64_t o = 0; o < out; o++) {
            for (int t = 0; t < taps; t++) {
                if (s.weight[o * taps + t] == 1.0f) index[o] = s.index[o * taps + t];
            }
        }
        s.taps = 1;
        s.index = std::move(index);
        s.weight.assign(out, 1.0f);
    }
    return s;
}

}  // namespace hfuse::ops
