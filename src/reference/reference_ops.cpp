// The reference op implementations: plain loops over row-major data, arithmetic in double (rounded to
// float32 once per output value), Eigen for the matrix products. Written from the ONNX opset-13 spec,
// independently of the Halide definitions in src/ops, so the two can be checked against each other.
#include "reference/reference_ops.h"

#include "hfuse/error.h"

#include <Eigen/Dense>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

namespace hfuse::reference::detail {

const RefTensor &OpArgs::in(int i) const {
    if (!has(i)) fail_field("input " + std::to_string(i), "is required but left out");
    return *inputs[i];
}

const std::vector<int64_t> &OpArgs::ints(int i, const std::string &what) const {
    const Constant *c = i < static_cast<int>(constants.size()) ? constants[i] : nullptr;
    if (c == nullptr || c->type.dtype != DType::Int64) fail_field(what, "must be an int64 weight");
    return c->i64;
}

float OpArgs::scalar(int i, const std::string &what, float fallback) const {
    if (!has(i)) return fallback;
    if (inputs[i]->data.size() != 1) {
        fail_field(what, "must hold exactly one value, got shape [" + to_string(inputs[i]->shape) + "]");
    }
    return inputs[i]->data[0];
}

namespace {

using Strides = std::vector<int64_t>;
using MatrixD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// ---- shared helpers: shapes, strided walks, broadcasting ----

RefTensor zeros(Shape shape) {
    RefTensor t;
    t.data.assign(static_cast<size_t>(num_elements(shape)), 0.0f);
    t.shape = std::move(shape);
    return t;
}

int rank(const RefTensor &t) {
    return static_cast<int>(t.shape.size());
}

int64_t dims_product(const Shape &shape, int begin, int end) {
    int64_t n = 1;
    for (int d = begin; d < end; d++) n *= shape[d];
    return n;
}

Strides strides_of(const Shape &shape) {
    Strides s(shape.size(), 1);
    for (int d = static_cast<int>(shape.size()) - 2; d >= 0; d--) s[d] = s[d + 1] * shape[d + 1];
    return s;
}

int64_t ceil_div(int64_t a, int64_t b) {  // b > 0
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

// Visits every index of `shape` in row-major order while K operands each keep an offset that moves by
// strides[k][d] per step along dim d: f(flat output index, offsets). Transpose, Slice, Split and
// broadcasting are all such walks.
template <size_t K, typename F>
void walk(const Shape &shape, const std::array<Strides, K> &strides, std::array<int64_t, K> offsets, F &&f) {
    const int r = static_cast<int>(shape.size());
    const int64_t n = num_elements(shape);
    std::vector<int64_t> idx(r, 0);
    for (int64_t i = 0; i < n; i++) {
        f(i, offsets);
        for (int d = r - 1; d >= 0; d--) {
            for (size_t k = 0; k < K; k++) offsets[k] += strides[k][d];
            if (++idx[d] < shape[d]) break;
            for (size_t k = 0; k < K; k++) offsets[k] -= strides[k][d] * shape[d];
            idx[d] = 0;
        }
    }
}

// A copy of the strided view (base offset, per-dim strides) of `in` with shape `shape`.
RefTensor gather(const RefTensor &in, Shape shape, int64_t base, const Strides &strides) {
    RefTensor out = zeros(std::move(shape));
    walk<1>(out.shape, {strides}, {base},
            [&](int64_t i, const std::array<int64_t, 1> &o) { out.data[i] = in.data[o[0]]; });
    return out;
}

// numpy broadcasting of two shapes (aligned at the innermost dim).
Shape broadcast_shapes(const Shape &a, const Shape &b, const std::string &field) {
    const size_t r = std::max(a.size(), b.size());
    Shape out(r);
    for (size_t i = 0; i < r; i++) {
        int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
        int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
        if (da != db && da != 1 && db != 1) {
            fail_field(field, "shapes [" + to_string(a) + "] and [" + to_string(b) + "] do not broadcast");
        }
        out[r - 1 - i] = da == 1 ? db : da;
    }
    return out;
}

// Strides that read `shape` as if broadcast to `out`: 0 along dims where it has extent 1 or is missing.
Strides broadcast_strides(const Shape &shape, const Shape &out) {
    Strides own = strides_of(shape), s(out.size(), 0);
    const size_t lead = out.size() - shape.size();
    for (size_t d = 0; d < shape.size(); d++) s[lead + d] = shape[d] == 1 ? 0 : own[d];
    return s;
}

template <typename F>
RefTensor map_unary(const RefTensor &x, F f) {
    RefTensor out{x.shape, std::vector<float>(x.data.size())};
    for (size_t i = 0; i < x.data.size(); i++) out.data[i] = static_cast<float>(f(static_cast<double>(x.data[i])));
    return out;
}

// The binary arithmetic ops and Max, Min, Sum, Mean: `f` folded over the inputs left to right, each
// step broadcast (numpy); Mean divides the sum by their number.
template <typename F>
std::vector<RefTensor> map_variadic(const OpArgs &a, F f, bool mean = false) {
    RefTensor acc = a.in(0);
    for (size_t k = 1; k < a.inputs.size(); k++) {
        const RefTensor &y = a.in(static_cast<int>(k));
        RefTensor out = zeros(broadcast_shapes(acc.shape, y.shape, "input " + std::to_string(k)));
        walk<2>(out.shape, {broadcast_strides(acc.shape, out.shape), broadcast_strides(y.shape, out.shape)}, {0, 0},
                [&](int64_t i, const std::array<int64_t, 2> &o) {
                    out.data[i] = static_cast<float>(f(double(acc.data[o[0]]), double(y.data[o[1]])));
                });
        acc = std::move(out);
    }
    if (mean) {
        for (float &v : acc.data) v = static_cast<float>(double(v) / double(a.inputs.size()));
    }
    return {acc};
}

Eigen::Map<const MatrixF> as_matrix(const float *data, int64_t rows, int64_t cols) {
    return Eigen::Map<const MatrixF>(data, rows, cols);
}

// ---- sliding windows (Conv, MaxPool, AveragePool) ----

// The geometry of a sliding window along one spatial dim.
struct Window {
    int64_t in = 1, kernel = 1, stride = 1, dilation = 1, pad_begin = 0, pad_end = 0, out = 1;

    // Input coordinate of tap t of the window for output o (may fall in the padding).
    int64_t tap(int64_t o, int64_t t) const { return o * stride - pad_begin + t * dilation; }
};

// 1-D windows are lifted to 2-D with a leading dim of extent 1, so the loops only handle 2-D.
using Windows = std::array<Window, 2>;

// Reads strides, dilations, pads and auto_pad for a window over the spatial dims (2..) of `x`.
Windows window_geometry(const Attributes &a, const Shape &x, const std::vector<int64_t> &kernel, bool ceil_mode) {
    const int ns = static_cast<int>(x.size()) - 2;
    if (ns < 1 || ns > 2) fail_field("input 0 (X)", "expects rank 3 or 4 (1-D or 2-D), got [" + to_string(x) + "]");
    if (static_cast<int>(kernel.size()) != ns) fail_field("kernel_shape", "must have one entry per spatial dim");
    const std::vector<int64_t> ones(ns, 1);
    std::vector<int64_t> strides = a.get_ints("strides", ones), dilations = a.get_ints("dilations", ones);
    std::vector<int64_t> pads = a.get_ints("pads", std::vector<int64_t>(2 * ns, 0));
    const std::string auto_pad = a.get_string("auto_pad", "NOTSET");
    if (static_cast<int>(strides.size()) != ns) fail_field("strides", "must have one entry per spatial dim");
    if (static_cast<int>(dilations.size()) != ns) fail_field("dilations", "must have one entry per spatial dim");
    if (static_cast<int>(pads.size()) != 2 * ns) fail_field("pads", "must have two entries per spatial dim");

    Windows w;
    for (int i = 0; i < ns; i++) {
        Window &d = w[2 - ns + i];
        d.in = x[2 + i];
        d.kernel = kernel[i];
        d.stride = strides[i];
        d.dilation = dilations[i];
        if (d.kernel < 1 || d.stride < 1 || d.dilation < 1)
            fail_field("kernel_shape", "kernel/strides/dilations must be positive");
        const int64_t extent = (d.kernel - 1) * d.dilation + 1;
        if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
            d.out = ceil_div(d.in, d.stride);
            const int64_t total = std::max<int64_t>(0, (d.out - 1) * d.stride + extent - d.in);
            d.pad_begin = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
            d.pad_end = total - d.pad_begin;
            continue;
        }
        if (auto_pad == "NOTSET") {
            d.pad_begin = pads[i];
            d.pad_end = pads[ns + i];
        } else if (auto_pad != "VALID") {
            fail_field("auto_pad", "unknown value '" + auto_pad + "'");
        }
        const int64_t span = d.in + d.pad_begin + d.pad_end - extent;
        if (span < 0) fail_field("kernel_shape", "window is larger than the padded input");
        if (!ceil_mode) {
            d.out = span / d.stride + 1;
        } else {
            d.out = ceil_div(span, d.stride) + 1;
            // The last window must start inside the input or its leading padding (PyTorch, onnxruntime).
            if ((d.out - 1) * d.stride >= d.in + d.pad_begin) d.out--;
        }
    }
    return w;
}

// [N, C, out...] with the original (unlifted) spatial rank of `x`.
Shape window_output_shape(const Shape &x, int64_t channels, const Windows &w) {
    Shape out{x[0], channels};
    for (size_t i = 4 - x.size(); i < 2; i++) out.push_back(w[i].out);
    return out;
}

// Calls f(value) for each tap of window (oh, ow) inside the input plane: padding never contributes.
template <typename F>
void for_each_tap(const float *plane, const Windows &w, int64_t oh, int64_t ow, F &&f) {
    for (int64_t th = 0; th < w[0].kernel; th++) {
        const int64_t ih = w[0].tap(oh, th);
        if (ih < 0 || ih >= w[0].in) continue;
        for (int64_t tw = 0; tw < w[1].kernel; tw++) {
            const int64_t iw = w[1].tap(ow, tw);
            if (iw >= 0 && iw < w[1].in) f(plane[ih * w[1].in + iw]);
        }
    }
}

// Applies reduce(plane, oh, ow) -> value to every output position of every (n, c) plane.
template <typename Reduce>
RefTensor pool(const RefTensor &x, const Windows &w, Reduce &&reduce) {
    RefTensor out = zeros(window_output_shape(x.shape, x.shape[1], w));
    const int64_t planes = x.shape[0] * x.shape[1], in_plane = w[0].in * w[1].in;
    float *o = out.data.data();
    for (int64_t p = 0; p < planes; p++) {
        const float *plane = x.data.data() + p * in_plane;
        for (int64_t oh = 0; oh < w[0].out; oh++) {
            for (int64_t ow = 0; ow < w[1].out; ow++) *o++ = static_cast<float>(reduce(plane, oh, ow));
        }
    }
    return out;
}

// ---- ops ----

std::vector<RefTensor> conv(const OpArgs &a) {
    const RefTensor &x = a.in(0), &wt = a.in(1);
    const RefTensor *bias = a.has(2) ? &a.in(2) : nullptr;
    if (rank(x) < 3) fail_field("input 0 (X)", "expects rank 3 or 4 (1-D or 2-D), got [" + to_string(x.shape) + "]");
    if (rank(wt) != rank(x)) fail_field("input 1 (W)", "must have the rank of X");
    const std::vector<int64_t> kernel = a.attrs.get_ints("kernel_shape", Shape(wt.shape.begin() + 2, wt.shape.end()));
    if (kernel != Shape(wt.shape.begin() + 2, wt.shape.end())) fail_field("kernel_shape", "does not match W");
    const Windows w = window_geometry(a.attrs, x.shape, kernel, false);
    const int64_t group = a.attrs.get_int("group", 1);
    const int64_t n_batch = x.shape[0], channels = x.shape[1], m_out = wt.shape[0], cg = wt.shape[1];
    if (group < 1 || channels != cg * group || m_out % group != 0) {
        fail_field("group", "X has " + std::to_string(channels) + " channels, W expects " + std::to_string(cg) +
                                " per group, group = " + std::to_string(group));
    }
    if (bias != nullptr && static_cast<int64_t>(bias->data.size()) != m_out)
        fail_field("input 2 (B)", "must have M values");

    RefTensor out = zeros(window_output_shape(x.shape, m_out, w));
    const int64_t mg = m_out / group, taps = w[0].kernel * w[1].kernel, k = cg * taps;
    const int64_t in_plane = w[0].in * w[1].in, out_plane = w[0].out * w[1].out;
    // im2col in tiles of whole output rows, to bound the column buffer for large inputs.
    const int64_t tile_rows = std::max<int64_t>(1, 8192 / w[1].out);
    MatrixD col;
    for (int64_t gi = 0; gi < group; gi++) {
        const MatrixD wg = as_matrix(wt.data.data() + gi * mg * k, mg, k).cast<double>();
        for (int64_t n = 0; n < n_batch; n++) {
            const float *xg = x.data.data() + (n * channels + gi * cg) * in_plane;
            for (int64_t oh0 = 0; oh0 < w[0].out; oh0 += tile_rows) {
                const int64_t rows = std::min(tile_rows, w[0].out - oh0), cols = rows * w[1].out;
                col.setZero(k, cols);
                for (int64_t c = 0; c < cg; c++) {
                    for (int64_t th = 0; th < w[0].kernel; th++) {
                        for (int64_t tw = 0; tw < w[1].kernel; tw++) {
                            const int64_t row = c * taps + th * w[1].kernel + tw;
                            for (int64_t oh = oh0; oh < oh0 + rows; oh++) {
                                const int64_t ih = w[0].tap(oh, th);
                                if (ih < 0 || ih >= w[0].in) continue;
                                for (int64_t ow = 0; ow < w[1].out; ow++) {
                                    const int64_t iw = w[1].tap(ow, tw);
                                    if (iw < 0 || iw >= w[1].in) continue;
                                    col(row, (oh - oh0) * w[1].out + ow) = xg[c * in_plane + ih * w[1].in + iw];
                                }
                            }
                        }
                    }
                }
                const MatrixD y = wg * col;
                for (int64_t m = 0; m < mg; m++) {
                    const int64_t oc = gi * mg + m;
                    const double b = bias != nullptr ? bias->data[oc] : 0.0;
                    float *dst = out.data.data() + (n * m_out + oc) * out_plane + oh0 * w[1].out;
                    for (int64_t j = 0; j < cols; j++) dst[j] = static_cast<float>(y(m, j) + b);
                }
            }
        }
    }
    return {out};
}

std::vector<RefTensor> max_pool(const OpArgs &a) {
    if (a.num_outputs > 1) fail_field("outputs", "the Indices output is not supported");
    const RefTensor &x = a.in(0);
    const Windows w =
        window_geometry(a.attrs, x.shape, a.attrs.get_ints("kernel_shape"), a.attrs.get_int("ceil_mode", 0) != 0);
    return {pool(x, w, [&](const float *plane, int64_t oh, int64_t ow) {
        double m = -std::numeric_limits<double>::infinity();
        for_each_tap(plane, w, oh, ow, [&](float v) { m = std::max<double>(m, v); });
        return m;
    })};
}

std::vector<RefTensor> average_pool(const OpArgs &a) {
    const RefTensor &x = a.in(0);
    const Windows w =
        window_geometry(a.attrs, x.shape, a.attrs.get_ints("kernel_shape"), a.attrs.get_int("ceil_mode", 0) != 0);
    const bool include_pad = a.attrs.get_int("count_include_pad", 0) != 0;
    // Divisor per dim: taps inside the input, or (count_include_pad) inside [-pad_begin, in + pad_end), so
    // taps only reachable through ceil_mode are never counted.
    std::array<std::vector<int64_t>, 2> counts;
    for (int i = 0; i < 2; i++) {
        const int64_t lo = include_pad ? -w[i].pad_begin : 0, hi = include_pad ? w[i].in + w[i].pad_end : w[i].in;
        for (int64_t o = 0; o < w[i].out; o++) {
            int64_t n = 0;
            for (int64_t t = 0; t < w[i].kernel; t++) n += w[i].tap(o, t) >= lo && w[i].tap(o, t) < hi;
            counts[i].push_back(n);
        }
    }
    return {pool(x, w, [&](const float *plane, int64_t oh, int64_t ow) {
        double sum = 0;
        for_each_tap(plane, w, oh, ow, [&](float v) { sum += v; });
        return sum / static_cast<double>(counts[0][oh] * counts[1][ow]);
    })};
}

// Reduces each (n, c) plane over all spatial dims; output [N, C, 1, ...].
template <typename Reduce>
std::vector<RefTensor> global_pool(const OpArgs &a, Reduce &&reduce) {
    const RefTensor &x = a.in(0);
    if (rank(x) < 2) fail_field("input 0 (X)", "expects rank >= 2");
    Shape shape(x.shape.size(), 1);
    shape[0] = x.shape[0];
    shape[1] = x.shape[1];
    RefTensor out = zeros(shape);
    const int64_t plane = dims_product(x.shape, 2, rank(x));
    for (size_t p = 0; p < out.data.size(); p++) {
        out.data[p] = static_cast<float>(reduce(x.data.data() + p * plane, plane));
    }
    return {out};
}

std::vector<RefTensor> batch_norm(const OpArgs &a) {
    const RefTensor &x = a.in(0);
    if (a.attrs.get_int("training_mode", 0) != 0) fail_field("training_mode", "only inference is supported");
    if (rank(x) < 2) fail_field("input 0 (X)", "expects rank >= 2");
    const double eps = a.attrs.get_float("epsilon", 1e-5f);
    const int64_t channels = x.shape[1], inner = dims_product(x.shape, 2, rank(x));
    const char *names[] = {"", "input 1 (scale)", "input 2 (B)", "input 3 (input_mean)", "input 4 (input_var)"};
    for (int i = 1; i <= 4; i++) {
        if (static_cast<int64_t>(a.in(i).data.size()) != channels)
            fail_field(names[i], "must have one value per channel");
    }
    RefTensor out = zeros(x.shape);
    for (int64_t i = 0; i < static_cast<int64_t>(x.data.size()); i++) {
        const int64_t c = i / inner % channels;
        const double scale = a.in(1).data[c] / std::sqrt(double(a.in(4).data[c]) + eps);
        out.data[i] = static_cast<float>((x.data[i] - double(a.in(3).data[c])) * scale + a.in(2).data[c]);
    }
    return {out};
}

std::vector<RefTensor> softmax(const OpArgs &a) {
    const RefTensor &x = a.in(0);
    const int axis = normalize_axis(a.attrs.get_int("axis", -1), rank(x), "axis");
    const int64_t len = x.shape[axis], inner = dims_product(x.shape, axis + 1, rank(x));
    const int64_t outer = dims_product(x.shape, 0, axis);
    RefTensor out = zeros(x.shape);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t in = 0; in < inner; in++) {
            const int64_t base = o * len * inner + in;
            double mx = -std::numeric_limits<double>::infinity(), sum = 0;
            for (int64_t j = 0; j < len; j++) mx = std::max<double>(mx, x.data[base + j * inner]);
            for (int64_t j = 0; j < len; j++) sum += std::exp(x.data[base + j * inner] - mx);
            for (int64_t j = 0; j < len; j++) {
                out.data[base + j * inner] = static_cast<float>(std::exp(x.data[base + j * inner] - mx) / sum);
            }
        }
    }
    return {out};
}

// LayerNormalization: per row of the dims from `axis` on, in double, the mean then the variance.
std::vector<RefTensor> layer_norm(const OpArgs &a) {
    const RefTensor &x = a.in(0);
    const int axis = normalize_axis(a.attrs.get_int("axis", -1), rank(x), "axis");
    const double eps = a.attrs.get_float("epsilon", 1e-5f);
    const Shape normalized(x.shape.begin() + axis, x.shape.end());
    const int64_t len = dims_product(x.shape, axis, rank(x)), rows = dims_product(x.shape, 0, axis);
    // Scale and B laid over one row (broadcast to the normalized dims).
    auto row_of = [&](int i) {
        std::vector<double> v(len, i == 1 ? 1.0 : 0.0);
        if (!a.has(i)) return v;
        const RefTensor &p = a.in(i);
        Shape shape = p.shape;  // leading 1s beyond the normalized dims dropped
        while (shape.size() > normalized.size() && shape.front() == 1) shape.erase(shape.begin());
        if (shape.size() > normalized.size())
            fail_field("inputs", "Scale or B does not broadcast to the normalized dims");
        const Strides s = broadcast_strides(shape, normalized);
        const Strides own = strides_of(normalized);
        for (int64_t j = 0; j < len; j++) {
            int64_t at = 0, rest = j;
            for (size_t d = 0; d < normalized.size(); d++) {
                at += (rest / own[d]) * s[d];
                rest %= own[d];
            }
            v[j] = p.data[at];
        }
        return v;
    };
    const std::vector<double> scale = row_of(1), bias = row_of(2);
    RefTensor out = zeros(x.shape);
    for (int64_t r = 0; r < rows; r++) {
        const float *row = x.data.data() + r * len;
        double mean = 0, var = 0;
        for (int64_t j = 0; j < len; j++) mean += row[j];
        mean /= double(len);
        for (int64_t j = 0; j < len; j++) var += (row[j] - mean) * (row[j] - mean);
        var /= double(len);
        const double inv = 1.0 / std::sqrt(var + eps);
        for (int64_t j = 0; j < len; j++)
            out.data[r * len + j] = static_cast<float>((row[j] - mean) * inv * scale[j] + bias[j]);
    }
    return {out};
}

// Gelu: x * Phi(x), exactly (erf) or by tanh's approximation.
std::vector<RefTensor> gelu(const OpArgs &a) {
    const std::string mode = a.attrs.get_string("approximate", "none");
    if (mode != "none" && mode != "tanh")
        fail_field("approximate", "must be \"none\" or \"tanh\", got \"" + mode + "\"");
    const bool tanh_form = mode == "tanh";
    return {map_unary(a.in(0), [tanh_form](double x) {
        if (tanh_form) return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
        return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    })};
}

std::vector<RefTensor> gemm(const OpArgs &a) {
    const RefTensor &ta = a.in(0), &tb = a.in(1);
    if (rank(ta) != 2 || rank(tb) != 2) fail_field("inputs", "A and B must be matrices");
    const bool trans_a = a.attrs.get_int("transA", 0) != 0, trans_b = a.attrs.get_int("transB", 0) != 0;
    MatrixD ma = as_matrix(ta.data.data(), ta.shape[0], ta.shape[1]).cast<double>();
    MatrixD mb = as_matrix(tb.data.data(), tb.shape[0], tb.shape[1]).cast<double>();
    if (trans_a) ma.transposeInPlace();
    if (trans_b) mb.transposeInPlace();
    if (ma.cols() != mb.rows()) fail_field("inputs", "inner dimensions of A and B differ");
    const MatrixD y = double(a.attrs.get_float("alpha", 1.0f)) * (ma * mb);
    RefTensor out = zeros({y.rows(), y.cols()});
    std::vector<double> acc(y.data(), y.data() + y.size());
    if (a.has(2)) {
        const RefTensor &c = a.in(2);
        const double beta = a.attrs.get_float("beta", 1.0f);
        if (broadcast_shapes(c.shape, out.shape, "input 2 (C)") != out.shape)
            fail_field("input 2 (C)", "does not broadcast to [M, N]");
        walk<1>(out.shape, {broadcast_strides(c.shape, out.shape)}, {0},
                [&](int64_t i, const std::array<int64_t, 1> &o) { acc[i] += beta * c.data[o[0]]; });
    }
    std::transform(acc.begin(), acc.end(), out.data.begin(), [](double v) { return static_cast<float>(v); });
    return {out};
}

std::vector<RefTensor> matmul(const OpArgs &a) {
    const RefTensor &ta = a.in(0), &tb = a.in(1);
    if (rank(ta) < 1 || rank(tb) < 1) fail_field("inputs", "MatMul needs inputs of rank >= 1");
    // numpy: a 1-D A is a row vector, a 1-D B a column vector; that dim is dropped from the result.
    Shape sa = ta.shape, sb = tb.shape;
    if (sa.size() == 1) sa.insert(sa.begin(), 1);
    if (sb.size() == 1) sb.push_back(1);
    const int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
    if (sb[sb.size() - 2] != k) fail_field("inputs", "inner dimensions of A and B differ");
    const Shape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
    const Shape batch = broadcast_shapes(batch_a, batch_b, "inputs");
    Strides stride_a = broadcast_strides(batch_a, batch), stride_b = broadcast_strides(batch_b, batch);
    for (int64_t &s : stride_a) s *= m * k;
    for (int64_t &s : stride_b) s *= k * n;
    Shape shape = batch;
    if (ta.shape.size() > 1) shape.push_back(m);
    if (tb.shape.size() > 1) shape.push_back(n);
    RefTensor out = zeros(shape);
    walk<2>(batch, {stride_a, stride_b}, {0, 0}, [&](int64_t i, const std::array<int64_t, 2> &o) {
        const MatrixD y = as_matrix(ta.data.data() + o[0], m, k).cast<double>() *
                          as_matrix(tb.data.data() + o[1], k, n).cast<double>();
        for (int64_t j = 0; j < m * n; j++) out.data[i * m * n + j] = static_cast<float>(y.data()[j]);
    });
    return {out};
}

RefTensor reshaped(const RefTensor &x, Shape shape) {
    return {std::move(shape), x.data};
}

std::vector<RefTensor> flatten(const OpArgs &a) {
    const RefTensor &x = a.in(0);
    int64_t axis = a.attrs.get_int("axis", 1);
    if (axis < 0) axis += rank(x);
    if (axis < 0 || axis > rank(x)) fail_field("axis", "out of range for rank " + std::to_string(rank(x)));
    const int split_at = static_cast<int>(axis);
    return {reshaped(x, {dims_product(x.shape, 0, split_at), dims_product(x.shape, split_at, rank(x))})};
}

std::vector<RefTensor> expand(const OpArgs &a) {
    const RefTensor &x = a.in(0);
    const std::vector<int64_t> &s = a.ints(1, "input 1 (shape)");
    RefTensor out = zeros(broadcast_shapes(x.shape, Shape(s.begin(), s.end()), "input 1 (shape)"));
    walk<1>(out.shape, {broadcast_strides(x.shape, out.shape)}, {0},
            [&](int64_t i, const std::array<int64_t, 1> &o) { out.data[i] = x.data[o[0]]; });
    return {out};
}

std::vector<RefTensor> reshape(const OpArgs &a) {
    const RefTensor &x = a.in(0);
    Shape shape = a.ints(1, "input 1 (shape)");
    const bool allow_zero = a.attrs.get_int("allowzero", 0) != 0;
    int infer = -1;
    int64_t known = 1;
    for (size_t d = 0; d < shape.size(); d++) {
        if (shape[d] == 0 && !allow_zero) {
            if (d >= x.shape.size()) fail_field("input 1 (shape)", "0 copies a dim the input does not have");
            shape[d] = x.shape[d];
        }
        if (shape[d] == -1) {
            if (infer >= 0) fail_field("input 1 (shape)", "more than one -1");
            infer = static_cast<int>(d);
        } else if (shape[d] < 0) {
            fail_field("input 1 (shape)", "negative dim " + std::to_string(shape[d]));
        } else {
            known *= shape[d];
        }
    }
    const int64_t total = num_elements(x.shape);
    if (infer >= 0) {
        if (known == 0 || total % known != 0) fail_field("input 1 (shape)", "cannot infer the -1 dim");
        shape[infer] = total / known;
    }
    if (num_elements(shape) != total) fail_field("input 1 (shape)", "changes the number of elements");
    return {reshaped(x, shape)};
}

std::vector<RefTensor> transpose(const OpArgs &a) {
    const RefTensor &x = a.in(0);
    std::vector<int64_t> reversed(x.shape.size());
    for (size_t d = 0; d < reversed.size(); d++) reversed[d] = static_cast<int64_t>(reversed.size() - 1 - d);
    const std::vector<int64_t> perm = a.attrs.get_ints("perm", reversed);
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    std::sort(reversed.begin(), reversed.end());
    if (sorted != reversed) fail_field("perm", "is not a permutation of the input dims");
    const Strides in_strides = strides_of(x.shape);
    Shape shape(perm.size());
    Strides strides(perm.size());
    for (size_t d = 0; d < perm.size(); d++) {
        shape[d] = x.shape[perm[d]];
        strides[d] = in_strides[perm[d]];
    }
    return {gather(x, shape, 0, strides)};
}

std::vector<RefTensor> concat(const OpArgs &a) {
    const RefTensor &first = a.in(0);
    const int axis = normalize_axis(a.attrs.get_int("axis"), rank(first), "axis");
    Shape shape = first.shape;
    shape[axis] = 0;
    for (size_t i = 0; i < a.inputs.size(); i++) {
        const RefTensor &t = a.in(static_cast<int>(i));
        for (int d = 0; d < rank(first); d++) {
            if (rank(t) != rank(first) || (d != axis && t.shape[d] != first.shape[d])) {
                fail_field("input " + std::to_string(i), "shape [" + to_string(t.shape) + "] does not match input 0");
            }
        }
        shape[axis] += t.shape[axis];
    }
    RefTensor out = zeros(shape);
    const int64_t outer = dims_product(shape, 0, axis), inner = dims_product(shape, axis + 1, rank(first));
    float *dst = out.data.data();
    for (int64_t o = 0; o < outer; o++) {
        for (const RefTensor *t : a.inputs) {
            const int64_t chunk = t->shape[axis] * inner;
            dst = std::copy_n(t->data.data() + o * chunk, chunk, dst);
        }
    }
    return {out};
}

std::vector<RefTensor> split(const OpArgs &a) {
    const RefTensor &x = a.in(0);
    const int axis = normalize_axis(a.attrs.get_int("axis", 0), rank(x), "axis");
    const int64_t dim = x.shape[axis];
    std::vector<int64_t> sizes;
    if (a.has(1)) {
        sizes = a.ints(1, "input 1 (split)");
    } else {
        if (dim % a.num_outputs != 0) fail_field("axis", "dim is not divisible by the number of outputs");
        sizes.assign(a.num_outputs, dim / a.num_outputs);
    }
    int64_t total = 0;
    for (int64_t s : sizes) total += s;
    if (static_cast<int>(sizes.size()) != a.num_outputs || total != dim) {
        fail_field("input 1 (split)", "sizes must match the outputs and sum to the split dim");
    }
    const Strides strides = strides_of(x.shape);
    std::vector<RefTensor> outs;
    int64_t offset = 0;
    for (int64_t s : sizes) {
        Shape shape = x.shape;
        shape[axis] = s;
        outs.push_back(gather(x, shape, offset * strides[axis], strides));
        offset += s;
    }
    return outs;
}

std::vector<RefTensor> slice(const OpArgs &a) {
    const RefTensor &x = a.in(0);
    const std::vector<int64_t> &starts = a.ints(1, "input 1 (starts)"), &ends = a.ints(2, "input 2 (ends)");
    const size_t n = starts.size();
    std::vector<int64_t> axes(n), steps(n, 1);
    for (size_t j = 0; j < n; j++) axes[j] = static_cast<int64_t>(j);
    if (a.has(3)) axes = a.ints(3, "input 3 (axes)");
    if (a.has(4)) steps = a.ints(4, "input 4 (steps)");
    if (ends.size() != n || axes.size() != n || steps.size() != n)
        fail_field("inputs", "starts/ends/axes/steps lengths differ");
    Shape shape = x.shape;
    Strides strides = strides_of(x.shape);
    int64_t base = 0;
    std::vector<bool> seen(x.shape.size(), false);
    for (size_t j = 0; j < n; j++) {
        const int ax = normalize_axis(axes[j], rank(x), "input 3 (axes)");
        if (seen[ax]) fail_field("input 3 (axes)", "repeats axis " + std::to_string(ax));
        seen[ax] = true;
        const int64_t step = steps[j], dim = x.shape[ax];
        if (step == 0) fail_field("input 4 (steps)", "must not be 0");
        int64_t start = starts[j] < 0 ? starts[j] + dim : starts[j];
        int64_t end = ends[j] < 0 ? ends[j] + dim : ends[j];
        // ONNX clamping: forwards to [0, dim]; backwards start to [0, dim-1] and end to [-1, dim-1].
        start = step > 0 ? std::clamp<int64_t>(start, 0, dim) : std::clamp<int64_t>(start, 0, dim - 1);
        end = step > 0 ? std::clamp<int64_t>(end, 0, dim) : std::clamp<int64_t>(end, -1, dim - 1);
        // Elements in the range, without overflow for steps near INT64_MIN/MAX (the span is at most
        // dim, so |step| may saturate at INT64_MAX).
        const int64_t span = step > 0 ? end - start : start - end;
        const int64_t magnitude = step > 0 ? step : (step == INT64_MIN ? INT64_MAX : -step);
        const int64_t count = span > 0 ? 1 + (span - 1) / magnitude : 0;
        shape[ax] = count;
        base += start * strides[ax];
        strides[ax] *= count > 1 ? step : 1;  // with one element the step is never taken
    }
    return {gather(x, shape, base, strides)};
}

std::vector<RefTensor> pad(const OpArgs &a) {
    const RefTensor &x = a.in(0);
    const std::vector<int64_t> &pads = a.ints(1, "input 1 (pads)");
    const float value = a.scalar(2, "input 2 (constant_value)", 0.0f);
    const std::string mode = a.attrs.get_string("mode", "constant");
    const int r = rank(x);
    if (static_cast<int>(pads.size()) != 2 * r) fail_field("input 1 (pads)", "must have 2 * rank values");
    if (mode != "constant" && mode != "reflect" && mode != "edge") fail_field("mode", "unknown mode '" + mode + "'");
    // Per dim, the input coordinate each output coordinate reads (-1: the constant). Negative pads crop.
    Shape shape(r);
    std::vector<std::vector<int64_t>> source(r);
    for (int d = 0; d < r; d++) {
        const int64_t dim = x.shape[d], begin = pads[d];
        shape[d] = dim + begin + pads[r + d];
        if (shape[d] < 0) fail_field("input 1 (pads)", "crops more than the whole dim");
        for (int64_t o = 0; o < shape[d]; o++) {
            int64_t i = o - begin;
            if (i < 0 || i >= dim) {
                if (mode == "constant") {
                    i = -1;
                } else if (mode == "edge") {
                    i = std::clamp<int64_t>(i, 0, dim - 1);
                } else if (dim == 1) {
                    i = 0;
                } else {  // reflect without repeating the edge: period 2 * (dim - 1)
                    const int64_t period = 2 * (dim - 1);
                    i = ((i % period) + period) % period;
                    if (i >= dim) i = period - i;
                }
            }
            source[d].push_back(i);
        }
    }
    RefTensor out = zeros(shape);
    const Strides strides = strides_of(x.shape);
    std::vector<int64_t> idx(r, 0);
    for (float &v : out.data) {
        int64_t offset = 0;
        bool inside = true;
        for (int d = 0; d < r; d++) {
            const int64_t i = source[d][idx[d]];
            inside = inside && i >= 0;
            offset += i * strides[d];
        }
        v = inside ? x.data[offset] : value;
        for (int d = r - 1; d >= 0 && ++idx[d] == shape[d]; d--) idx[d] = 0;
    }
    return {out};
}

// ReduceMean, ReduceSum, ReduceMax, ReduceMin over `axes` (every axis when absent), reduced dims kept
// as 1 or dropped.
std::vector<RefTensor> reduce(const OpArgs &a, const std::string &op) {
    const RefTensor &x = a.in(0);
    const int r = rank(x);
    std::vector<bool> reduced(r, !a.attrs.has("axes"));
    for (int64_t axis : a.attrs.get_ints("axes", {})) reduced[normalize_axis(axis, r, "axes")] = true;
    const bool keep = a.attrs.get_int("keepdims", 1) != 0;
    Shape kept_shape = x.shape;  // the output with every reduced dim 1
    int64_t n = 1;
    for (int d = 0; d < r; d++) {
        if (reduced[d]) {
            kept_shape[d] = 1;
            n *= x.shape[d];
        }
    }
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> acc(num_elements(kept_shape), op == "ReduceMax" ? -inf : op == "ReduceMin" ? inf : 0.0);
    const Strides out_strides = strides_of(kept_shape);
    std::vector<int64_t> idx(r, 0);
    for (size_t i = 0; i < x.data.size(); i++) {
        int64_t o = 0;
        for (int d = 0; d < r; d++) o += reduced[d] ? 0 : idx[d] * out_strides[d];
        const double v = x.data[i];
        acc[o] = op == "ReduceMax" ? std::max(acc[o], v) : op == "ReduceMin" ? std::min(acc[o], v) : acc[o] + v;
        for (int d = r - 1; d >= 0 && ++idx[d] == x.shape[d]; d--) idx[d] = 0;
    }
    Shape shape;
    for (int d = 0; d < r; d++) {
        if (!reduced[d] || keep) shape.push_back(kept_shape[d]);
    }
    RefTensor out = zeros(shape);
    for (size_t i = 0; i < acc.size(); i++) out.data[i] = static_cast<float>(op == "ReduceMean" ? acc[i] / n : acc[i]);
    return {out};
}

// Resize (opset 19's coordinate transformations; nearest, linear and cubic), written after the spec's
// reference: each axis in turn is interpolated in one dimension, the n nearest points of the
// edge-padded input weighted by the mode's coefficients of the distance ratio in (0, 1].
// Coordinates are float, as onnxruntime computes them, so nearest ties break as there.
std::vector<RefTensor> resize(const OpArgs &a) {
    const RefTensor &x = a.in(0);
    const int r = rank(x);
    const std::string mode = a.attrs.get_string("mode", "nearest");
    const std::string ctm = a.attrs.get_string("coordinate_transformation_mode", "half_pixel");
    const std::string rounding = a.attrs.get_string("nearest_mode", "round_prefer_floor");
    const double cubic_a = a.attrs.get_float("cubic_coeff_a", -0.75f);
    const bool exclude_outside = a.attrs.get_int("exclude_outside", 0) != 0;
    const bool antialias = a.attrs.get_int("antialias", 0) != 0 && mode != "nearest";
    const double extrapolation = a.attrs.get_float("extrapolation_value", 0.0f);
    std::vector<float> scale(r);
    Shape shape(r);
    if (a.has(3)) {
        const std::vector<int64_t> &sizes = a.ints(3, "input 3 (sizes)");
        for (int d = 0; d < r; d++) {
            shape[d] = sizes.at(d);
            scale[d] = float(shape[d]) / float(x.shape[d]);
        }
    } else {
        const RefTensor &s = a.in(2);
        for (int d = 0; d < r; d++) {
            scale[d] = s.data.at(d);
            shape[d] = static_cast<int64_t>(std::floor(double(x.shape[d]) * scale[d]));
        }
    }
    const bool crop = ctm == "tf_crop_and_resize";
    auto original = [&](int d, int64_t o) {
        const float xo = float(o), in_len = float(x.shape[d]), out_len = float(shape[d]), s = scale[d];
        if (ctm == "asymmetric") return xo / s;
        if (ctm == "half_pixel") return (xo + 0.5f) / s - 0.5f;
        if (ctm == "half_pixel_symmetric") {
            const float adjustment = out_len / (s * in_len), center = in_len / 2;
            return center * (1 - adjustment) + (xo + 0.5f) / s - 0.5f;
        }
        if (ctm == "pytorch_half_pixel") return out_len > 1 ? (xo + 0.5f) / s - 0.5f : 0.0f;
        if (ctm == "tf_half_pixel_for_nn") return (xo + 0.5f) / s;
        if (ctm == "align_corners") return out_len == 1 ? 0.0f : xo * (in_len - 1) / (out_len - 1);
        if (crop) {
            const float start = a.in(1).data.at(d), end = a.in(1).data.at(d + r);
            return out_len > 1 ? start * (in_len - 1) + xo * (end - start) * (in_len - 1) / (out_len - 1)
                               : 0.5f * (start + end) * (in_len - 1);
        }
        fail_field("coordinate_transformation_mode", "unknown '" + ctm + "'");
    };
    // The coefficients of the points left of and right of a coordinate whose fraction is `ratio`.
    auto coefficients = [&](double ratio, double s) {
        std::vector<double> c;
        if (mode == "nearest") {
            const bool right = ratio == 1.0                       ? true
                               : rounding == "round_prefer_floor" ? ratio > 0.5
                               : rounding == "round_prefer_ceil"  ? ratio >= 0.5
                                                                  : rounding == "ceil";
            return std::vector<double>{right ? 0.0 : 1.0, right ? 1.0 : 0.0};
        }
        if (!antialias || s > 1) s = 1;
        const bool linear = mode == "linear";
        const int start = static_cast<int>(std::floor((linear ? -1 : -2) / s)) + 1;
        double sum = 0;
        for (int i = start; i < 2 - start; i++) {
            const double d = std::abs((i - ratio) * s);
            double w = linear   ? std::max(0.0, 1 - d)
                       : d <= 1 ? ((cubic_a + 2) * d - (cubic_a + 3)) * d * d + 1
                       : d < 2  ? ((cubic_a * d - 5 * cubic_a) * d + 8 * cubic_a) * d - 4 * cubic_a
                                : 0.0;
            c.push_back(w);
            sum += w;
        }
        if (antialias) {
            for (double &w : c) w /= sum;
        }
        return c;
    };
    // One axis at a time: `cur` resized along d.
    RefTensor cur = x;
    for (int d = 0; d < r; d++) {
        Shape next_shape = cur.shape;
        next_shape[d] = shape[d];
        RefTensor next = zeros(next_shape);
        const int64_t in_len = cur.shape[d];
        const Strides cs = strides_of(cur.shape);
        std::vector<std::vector<std::pair<int64_t, double>>> taps(shape[d]);  // per output index
        std::vector<bool> outside(shape[d], false);
        for (int64_t o = 0; o < shape[d]; o++) {
            const float xo = original(d, o);
            outside[o] = crop && (xo < 0 || xo > float(in_len - 1));
            const double xf = std::floor(double(xo));
            const double ratio = double(xo) == xf ? 1.0 : double(xo) - xf;
            std::vector<double> c = coefficients(ratio, scale[d]);
            const int n = static_cast<int>(c.size());
            // The n nearest points of the padded input, smaller first on a tie, in ascending order.
            std::vector<int64_t> points;
            for (int64_t p = static_cast<int64_t>(xf) - n; p <= static_cast<int64_t>(xf) + n; p++) points.push_back(p);
            std::stable_sort(points.begin(), points.end(),
                             [&](int64_t p, int64_t q) { return std::abs(double(xo) - p) < std::abs(double(xo) - q); });
            points.resize(n);
            std::sort(points.begin(), points.end());
            if (exclude_outside) {
                double sum = 0;
                for (int i = 0; i < n; i++) {
                    if (points[i] < 0 || points[i] >= in_len) c[i] = 0;
                    sum += c[i];
                }
                for (double &w : c) w /= sum;
            }
            for (int i = 0; i < n; i++) {
                taps[o].push_back({std::clamp<int64_t>(points[i], 0, in_len - 1), c[i]});
            }
        }
        std::vector<int64_t> idx(r, 0);
        for (size_t i = 0; i < next.data.size(); i++) {
            int64_t base = 0;
            for (int e = 0; e < r; e++) base += (e == d ? 0 : idx[e]) * cs[e];
            double v = 0;
            for (const auto &[p, w] : taps[idx[d]]) v += w * cur.data[base + p * cs[d]];
            next.data[i] = static_cast<float>(outside[idx[d]] ? extrapolation : v);
            for (int e = r - 1; e >= 0 && ++idx[e] == next_shape[e]; e--) idx[e] = 0;
        }
        cur = std::move(next);
    }
    return {cur};
}

std::vector<RefTensor> identity(const OpArgs &a) {
    if (a.num_outputs > 1) fail_field("outputs", "the mask output is not supported");
    return {a.in(0)};
}

template <typename F>
OpFn unary() {
    return [](const OpArgs &a) { return std::vector<RefTensor>{map_unary(a.in(0), F{})}; };
}

double clamp01(double v) {
    return std::min(1.0, std::max(0.0, v));
}

struct ReluFn {
    double operator()(double x) const { return x > 0 ? x : 0.0; }
};
struct SigmoidFn {
    double operator()(double x) const { return 1.0 / (1.0 + std::exp(-x)); }
};
struct TanhFn {
    double operator()(double x) const { return std::tanh(x); }
};
struct HardSwishFn {
    double operator()(double x) const { return x * clamp01(x / 6.0 + 0.5); }
};

const std::map<std::string, OpFn> &op_table() {
    static const std::map<std::string, OpFn> table = {
        {"Conv", conv},
        {"MaxPool", max_pool},
        {"AveragePool", average_pool},
        {"GlobalAveragePool",
         [](const OpArgs &a) {
             return global_pool(a, [](const float *p, int64_t n) { return std::accumulate(p, p + n, 0.0) / n; });
         }},
        {"GlobalMaxPool",
         [](const OpArgs &a) {
             return global_pool(a, [](const float *p, int64_t n) { return double(*std::max_element(p, p + n)); });
         }},
        {"BatchNormalization", batch_norm},
        {"Relu", unary<ReluFn>()},
        {"Sigmoid", unary<SigmoidFn>()},
        {"Tanh", unary<TanhFn>()},
        {"HardSwish", unary<HardSwishFn>()},
        {"LeakyRelu",
         [](const OpArgs &a) {
             const double alpha = a.attrs.get_float("alpha", 0.01f);
             return std::vector<RefTensor>{map_unary(a.in(0), [&](double x) { return x >= 0 ? x : alpha * x; })};
         }},
        {"HardSigmoid",
         [](const OpArgs &a) {
             const double alpha = a.attrs.get_float("alpha", 0.2f), beta = a.attrs.get_float("beta", 0.5f);
             return std::vector<RefTensor>{map_unary(a.in(0), [&](double x) { return clamp01(alpha * x + beta); })};
         }},
        {"Clip",
         [](const OpArgs &a) {
             const double lo = a.scalar(1, "input 1 (min)", -std::numeric_limits<float>::infinity());
             const double hi = a.scalar(2, "input 2 (max)", std::numeric_limits<float>::infinity());
             return std::vector<RefTensor>{map_unary(a.in(0), [&](double x) { return std::min(std::max(x, lo), hi); })};
         }},
        {"Add", [](const OpArgs &a) { return map_variadic(a, [](double x, double y) { return x + y; }); }},
        {"Sub", [](const OpArgs &a) { return map_variadic(a, [](double x, double y) { return x - y; }); }},
        {"Mul", [](const OpArgs &a) { return map_variadic(a, [](double x, double y) { return x * y; }); }},
        {"Div", [](const OpArgs &a) { return map_variadic(a, [](double x, double y) { return x / y; }); }},
        {"Pow", [](const OpArgs &a) { return map_variadic(a, [](double x, double y) { return std::pow(x, y); }); }},
        // Booleans as 0 and 1, true where not 0.
        {"Equal", [](const OpArgs &a) { return map_variadic(a, [](double x, double y) { return double(x == y); }); }},
        {"Greater", [](const OpArgs &a) { return map_variadic(a, [](double x, double y) { return double(x > y); }); }},
        {"Less", [](const OpArgs &a) { return map_variadic(a, [](double x, double y) { return double(x < y); }); }},
        {"GreaterOrEqual",
         [](const OpArgs &a) { return map_variadic(a, [](double x, double y) { return double(x >= y); }); }},
        {"LessOrEqual",
         [](const OpArgs &a) { return map_variadic(a, [](double x, double y) { return double(x <= y); }); }},
        {"And",
         [](const OpArgs &a) { return map_variadic(a, [](double x, double y) { return double(x != 0 && y != 0); }); }},
        {"Or",
         [](const OpArgs &a) { return map_variadic(a, [](double x, double y) { return double(x != 0 || y != 0); }); }},
        {"Xor",
         [](const OpArgs &a) {
             return map_variadic(a, [](double x, double y) { return double((x != 0) != (y != 0)); });
         }},
        {"Not",
         [](const OpArgs &a) {
             return std::vector<RefTensor>{map_unary(a.in(0), [](double x) { return double(x == 0); })};
         }},
        {"Where",
         [](const OpArgs &a) {
             const RefTensor &c = a.in(0), &x = a.in(1), &y = a.in(2);
             RefTensor out =
                 zeros(broadcast_shapes(broadcast_shapes(c.shape, x.shape, "input 1 (X)"), y.shape, "input 2 (Y)"));
             walk<3>(out.shape,
                     {broadcast_strides(c.shape, out.shape), broadcast_strides(x.shape, out.shape),
                      broadcast_strides(y.shape, out.shape)},
                     {0, 0, 0}, [&](int64_t i, const std::array<int64_t, 3> &o) {
                         out.data[i] = c.data[o[0]] != 0.0f ? x.data[o[1]] : y.data[o[2]];
                     });
             return std::vector<RefTensor>{out};
         }},
        {"Max",
         [](const OpArgs &a) {
             // NaN wins, as in numpy's maximum (std::max would keep whichever came first).
             return map_variadic(a, [](double x, double y) { return std::isnan(x) || x > y ? x : y; });
         }},
        {"Min",
         [](const OpArgs &a) {
             return map_variadic(a, [](double x, double y) { return std::isnan(x) || x < y ? x : y; });
         }},
        {"Sum", [](const OpArgs &a) { return map_variadic(a, [](double x, double y) { return x + y; }); }},
        {"Mean",
         [](const OpArgs &a) {
             return map_variadic(
                 a, [](double x, double y) { return x + y; }, true);
         }},
        {"Erf",
         [](const OpArgs &a) {
             return std::vector<RefTensor>{map_unary(a.in(0), [](double x) { return std::erf(x); })};
         }},
        {"Sqrt",
         [](const OpArgs &a) {
             return std::vector<RefTensor>{map_unary(a.in(0), [](double x) { return std::sqrt(x); })};
         }},
        {"Reciprocal",
         [](const OpArgs &a) { return std::vector<RefTensor>{map_unary(a.in(0), [](double x) { return 1.0 / x; })}; }},
        {"Exp",
         [](const OpArgs &a) {
             return std::vector<RefTensor>{map_unary(a.in(0), [](double x) { return std::exp(x); })};
         }},
        {"Log",
         [](const OpArgs &a) {
             return std::vector<RefTensor>{map_unary(a.in(0), [](double x) { return std::log(x); })};
         }},
        {"Neg",
         [](const OpArgs &a) { return std::vector<RefTensor>{map_unary(a.in(0), [](double x) { return -x; })}; }},
        {"Abs",
         [](const OpArgs &a) {
             return std::vector<RefTensor>{map_unary(a.in(0), [](double x) { return std::abs(x); })};
         }},
        {"Softmax", softmax},
        {"LayerNormalization", layer_norm},
        {"Gelu", gelu},
        {"Gemm", gemm},
        {"MatMul", matmul},
        {"Flatten", flatten},
        {"Reshape", reshape},
        {"Expand", expand},
        {"Transpose", transpose},
        {"Concat", concat},
        {"Split", split},
        {"Slice", slice},
        {"Pad", pad},
        {"Identity", identity},
        {"Dropout", identity},
        {"ReduceMean", [](const OpArgs &a) { return reduce(a, "ReduceMean"); }},
        {"ReduceSum", [](const OpArgs &a) { return reduce(a, "ReduceSum"); }},
        {"ReduceMax", [](const OpArgs &a) { return reduce(a, "ReduceMax"); }},
        {"ReduceMin", [](const OpArgs &a) { return reduce(a, "ReduceMin"); }},
        {"Resize", resize},
    };
    return table;
}

}  // namespace

OpFn find_op_fn(const std::string &op) {
    const auto &table = op_table();
    auto it = table.find(op);
    return it == table.end() ? nullptr : it->second;
}

}  // namespace hfuse::reference::detail
