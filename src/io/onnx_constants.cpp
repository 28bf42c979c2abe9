// Constant evaluation for the ONNX importer; see onnx_constants.h.
#include "io/onnx_constants.h"

#include "hfuse/error.h"

#include <algorithm>

namespace hfuse::onnx_io {

std::string list_ints(const std::vector<int64_t> &v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); i++) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
}

int64_t count(const Shape &s) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    return n;
}

int64_t count(const Constant &c) {
    return count(c.type.shape);
}

bool is_int(const Constant &c) {
    return c.type.dtype == DType::Int64;
}

double as_double(const Constant &c, int64_t i) {
    return is_int(c) ? static_cast<double>(c.i64[i]) : c.f32[i];
}

Constant make_ints(Shape shape, std::vector<int64_t> values) {
    Constant c;
    c.type = {DType::Int64, std::move(shape)};
    c.i64 = std::move(values);
    return c;
}

Constant make_floats(Shape shape, std::vector<float> values) {
    Constant c;
    c.type = {DType::Float32, std::move(shape)};
    c.f32 = std::move(values);
    return c;
}

// The values of a constant as int64 (shape-like operands: axes, pads, starts, ...).
std::vector<int64_t> ints_of(const Constant &c) {
    if (is_int(c)) return c.i64;
    std::vector<int64_t> v;
    for (float f : c.f32) v.push_back(static_cast<int64_t>(f));
    return v;
}

namespace {

std::vector<int64_t> strides_of(const Shape &s) {
    std::vector<int64_t> st(s.size(), 1);
    for (int i = static_cast<int>(s.size()) - 2; i >= 0; i--) st[i] = st[i + 1] * s[i + 1];
    return st;
}

// out[i] = in[source[i]] for an output of shape `shape`.
Constant pick(const Constant &in, Shape shape, const std::vector<int64_t> &source) {
    Constant c;
    c.type = {in.type.dtype, std::move(shape)};
    for (int64_t s : source) {
        if (is_int(in)) {
            c.i64.push_back(in.i64[s]);
        } else {
            c.f32.push_back(in.f32[s]);
        }
    }
    return c;
}

// Calls f(index, coords) for every element of `shape` in row-major order.
template <typename F>
void for_each_index(const Shape &shape, F &&f) {
    const int64_t n = count(shape);
    std::vector<int64_t> coord(shape.size(), 0);
    for (int64_t i = 0; i < n; i++) {
        f(i, coord);
        for (int d = static_cast<int>(shape.size()) - 1; d >= 0; d--) {
            if (++coord[d] < shape[d]) break;
            coord[d] = 0;
        }
    }
}

Shape broadcast(const Shape &a, const Shape &b, const std::string &field) {
    const size_t r = std::max(a.size(), b.size());
    Shape out(r);
    for (size_t i = 0; i < r; i++) {
        int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
        int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
        if (da != db && da != 1 && db != 1) {
            fail_field(field, "shapes " + list_ints(a) + " and " + list_ints(b) + " do not broadcast");
        }
        out[i] = da == 1 ? db : da;
    }
    return out;
}

// The flat index into a tensor of shape `in` broadcast to `coord` (an index of the broadcast shape).
int64_t broadcast_index(const Shape &in, const std::vector<int64_t> &coord) {
    const size_t off = coord.size() - in.size();
    int64_t idx = 0;
    for (size_t i = 0; i < in.size(); i++) idx = idx * in[i] + (in[i] == 1 ? 0 : coord[i + off]);
    return idx;
}

}  // namespace

// Elementwise op over broadcast operands; the result is int64 when both are, else float32.
Constant elementwise(const std::vector<const Constant *> &in, bool int_result,
                     const std::function<double(const std::vector<double> &)> &f, const std::string &field) {
    Shape shape = in[0]->type.shape;
    for (size_t i = 1; i < in.size(); i++) shape = broadcast(shape, in[i]->type.shape, field);
    Constant out;
    out.type = {int_result ? DType::Int64 : DType::Float32, shape};
    std::vector<double> args(in.size());
    for_each_index(shape, [&](int64_t, const std::vector<int64_t> &coord) {
        for (size_t k = 0; k < in.size(); k++) args[k] = as_double(*in[k], broadcast_index(in[k]->type.shape, coord));
        double v = f(args);
        if (int_result) {
            out.i64.push_back(static_cast<int64_t>(v));
        } else {
            out.f32.push_back(static_cast<float>(v));
        }
    });
    return out;
}

int axis_in(int64_t axis, int64_t rank, const std::string &field) {
    if (axis < -rank || axis >= rank) {
        fail_field(field, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
    }
    return static_cast<int>(axis < 0 ? axis + rank : axis);
}

Shape unsqueezed(const Shape &in, std::vector<int64_t> axes) {
    const int64_t rank = static_cast<int64_t>(in.size() + axes.size());
    std::vector<bool> inserted(rank, false);
    for (int64_t a : axes) {
        int k = axis_in(a, rank, "axes");
        if (inserted[k]) fail_field("axes", "axis " + std::to_string(a) + " is given twice");
        inserted[k] = true;
    }
    Shape out;
    size_t j = 0;
    for (int64_t i = 0; i < rank; i++) out.push_back(inserted[i] ? 1 : in[j++]);
    return out;
}

Shape squeezed(const Shape &in, const std::optional<std::vector<int64_t>> &axes) {
    std::vector<bool> drop(in.size(), false);
    if (axes) {
        for (int64_t a : *axes) {
            int k = axis_in(a, static_cast<int64_t>(in.size()), "axes");
            if (in[k] != 1) fail_field("axes", "dim " + std::to_string(a) + " of " + list_ints(in) + " is not 1");
            drop[k] = true;
        }
    } else {
        for (size_t i = 0; i < in.size(); i++) drop[i] = in[i] == 1;
    }
    Shape out;
    for (size_t i = 0; i < in.size(); i++) {
        if (!drop[i]) out.push_back(in[i]);
    }
    return out;
}

// Reshape's shape operand resolved against the input's element count (0 copies, -1 infers).
Shape reshaped(const Shape &in, const std::vector<int64_t> &spec, bool allowzero) {
    Shape out;
    int infer = -1;
    int64_t known = 1;
    for (size_t i = 0; i < spec.size(); i++) {
        int64_t d = spec[i];
        if (d == 0 && !allowzero) {
            if (i >= in.size())
                fail_field("input 1 (shape)", "0 at position " + std::to_string(i) + " has no input dim to copy");
            d = in[i];
        }
        if (d == -1) {
            if (infer >= 0) fail_field("input 1 (shape)", "more than one -1 in " + list_ints(spec));
            infer = static_cast<int>(i);
            out.push_back(1);
            continue;
        }
        if (d < 0) fail_field("input 1 (shape)", "invalid dim " + std::to_string(d) + " in " + list_ints(spec));
        known *= d;
        out.push_back(d);
    }
    if (infer >= 0) {
        if (known == 0 || count(in) % known != 0) {
            fail_field("input 1 (shape)", list_ints(spec) + " does not fit " + std::to_string(count(in)) + " elements");
        }
        out[infer] = count(in) / known;
    }
    if (count(out) != count(in)) {
        fail_field("input 1 (shape)", list_ints(spec) + " has " + std::to_string(count(out)) + " elements, the input " +
                                          list_ints(in) + " " + std::to_string(count(in)));
    }
    return out;
}

Constant with_shape(Constant c, Shape shape) {
    c.type.shape = std::move(shape);
    return c;
}

Constant fold_slice(const Constant &x, const SliceArgs &s) {
    const Shape &in = x.type.shape;
    std::vector<int64_t> start(in.size(), 0), step(in.size(), 1);
    Shape out = in;
    for (size_t k = 0; k < s.axes.size(); k++) {
        const int a = static_cast<int>(s.axes[k]);
        const int64_t d = in[a], st = s.steps[k];
        if (st == 0) fail_field("steps", "a step is 0");
        int64_t b = s.starts[k] < 0 ? s.starts[k] + d : s.starts[k];
        int64_t e = s.ends[k] < 0 ? s.ends[k] + d : s.ends[k];
        if (st > 0) {
            b = std::clamp<int64_t>(b, 0, d);
            e = std::clamp<int64_t>(e, 0, d);
            out[a] = e > b ? (e - b + st - 1) / st : 0;
        } else {
            b = std::clamp<int64_t>(b, 0, d - 1);
            e = std::clamp<int64_t>(e, -1, d - 1);
            out[a] = b > e ? (b - e - st - 1) / -st : 0;
        }
        start[a] = b;
        step[a] = st;
    }
    const std::vector<int64_t> strides = strides_of(in);
    std::vector<int64_t> source;
    for_each_index(out, [&](int64_t, const std::vector<int64_t> &c) {
        int64_t idx = 0;
        for (size_t i = 0; i < in.size(); i++) idx += (start[i] + c[i] * step[i]) * strides[i];
        source.push_back(idx);
    });
    return pick(x, out, source);
}

Constant fold_transpose(const Constant &x, std::vector<int64_t> perm) {
    const Shape &in = x.type.shape;
    if (perm.empty()) {
        for (int64_t i = static_cast<int64_t>(in.size()) - 1; i >= 0; i--) perm.push_back(i);
    }
    if (perm.size() != in.size())
        fail_field("perm", list_ints(perm) + " does not fit rank " + std::to_string(in.size()));
    Shape out;
    for (int64_t p : perm) out.push_back(in[axis_in(p, static_cast<int64_t>(in.size()), "perm")]);
    const std::vector<int64_t> strides = strides_of(in);
    std::vector<int64_t> source;
    for_each_index(out, [&](int64_t, const std::vector<int64_t> &c) {
        int64_t idx = 0;
        for (size_t i = 0; i < perm.size(); i++) idx += c[i] * strides[perm[i]];
        source.push_back(idx);
    });
    return pick(x, out, source);
}

Constant fold_concat(const std::vector<const Constant *> &parts, int64_t axis_attr) {
    const Shape &first = parts[0]->type.shape;
    const int axis = axis_in(axis_attr, static_cast<int64_t>(first.size()), "axis");
    const bool ints = std::all_of(parts.begin(), parts.end(), [](const Constant *c) { return is_int(*c); });
    Shape out = first;
    out[axis] = 0;
    for (const Constant *p : parts) {
        if (p->type.shape.size() != first.size()) fail_field("inputs", "inputs of different ranks");
        out[axis] += p->type.shape[axis];
    }
    Constant c;
    c.type = {ints ? DType::Int64 : DType::Float32, out};
    const int64_t outer = count(Shape(first.begin(), first.begin() + axis));
    for (int64_t o = 0; o < outer; o++) {
        for (const Constant *p : parts) {
            const int64_t block = count(Shape(p->type.shape.begin() + axis, p->type.shape.end()));
            for (int64_t i = 0; i < block; i++) {
                if (ints) {
                    c.i64.push_back(p->i64[o * block + i]);
                } else {
                    c.f32.push_back(static_cast<float>(as_double(*p, o * block + i)));
                }
            }
        }
    }
    return c;
}

Constant fold_gather(const Constant &data, const Constant &indices, int64_t axis_attr) {
    const Shape &in = data.type.shape;
    const int axis = axis_in(axis_attr, static_cast<int64_t>(in.size()), "axis");
    Shape out(in.begin(), in.begin() + axis);
    out.insert(out.end(), indices.type.shape.begin(), indices.type.shape.end());
    out.insert(out.end(), in.begin() + axis + 1, in.end());
    const int64_t outer = count(Shape(in.begin(), in.begin() + axis));
    const int64_t inner = count(Shape(in.begin() + axis + 1, in.end()));
    std::vector<int64_t> source;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t k : ints_of(indices)) {
            if (k < -in[axis] || k >= in[axis]) {
                fail_field("input 1 (indices)",
                           "index " + std::to_string(k) + " is out of range for dim " + std::to_string(in[axis]));
            }
            if (k < 0) k += in[axis];
            for (int64_t i = 0; i < inner; i++) source.push_back((o * in[axis] + k) * inner + i);
        }
    }
    return pick(data, out, source);
}

Constant fold_scatter_nd(const Constant &data, const Constant &indices, const Constant &updates,
                         const std::string &reduction) {
    const Shape &in = data.type.shape, &ix = indices.type.shape;
    if (ix.empty() || ix.back() < 1 || ix.back() > static_cast<int64_t>(in.size())) {
        fail_field("input 1 (indices)",
                   "its last dim must be in [1, " + std::to_string(in.size()) + "], got shape [" + to_string(ix) + "]");
    }
    const size_t k = static_cast<size_t>(ix.back());
    Shape expected(ix.begin(), ix.end() - 1);
    expected.insert(expected.end(), in.begin() + k, in.end());
    if (updates.type.shape != expected) {
        fail_field("input 2 (updates)", "has shape [" + to_string(updates.type.shape) + "], indices and data need [" +
                                            to_string(expected) + "]");
    }
    if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" && reduction != "min") {
        fail_field("reduction", "must be none, add, mul, max or min, got '" + reduction + "'");
    }
    Constant out = data;
    const bool ints = is_int(data);
    if (ints != is_int(updates)) fail_field("input 2 (updates)", "must have the element type of data");
    const int64_t slice = count(Shape(in.begin() + k, in.end())), n = count(Shape(ix.begin(), ix.end() - 1));
    const std::vector<int64_t> where = ints_of(indices);
    for (int64_t u = 0; u < n; u++) {
        int64_t offset = 0;
        for (size_t d = 0; d < k; d++) {
            int64_t i = where[u * k + d];
            if (i < -in[d] || i >= in[d]) {
                fail_field("input 1 (indices)",
                           "index " + std::to_string(i) + " is out of range for dim " + std::to_string(in[d]));
            }
            offset = offset * in[d] + (i < 0 ? i + in[d] : i);
        }
        for (int64_t e = 0; e < slice; e++) {
            const double a = as_double(out, offset * slice + e), b = as_double(updates, u * slice + e);
            const double v = reduction == "add"   ? a + b
                             : reduction == "mul" ? a * b
                             : reduction == "max" ? std::max(a, b)
                             : reduction == "min" ? std::min(a, b)
                                                  : b;
            if (ints) {
                out.i64[offset * slice + e] = static_cast<int64_t>(v);
            } else {
                out.f32[offset * slice + e] = static_cast<float>(v);
            }
        }
    }
    return out;
}

Constant fold_cast(const Constant &x, bool to_float, bool to_bool) {
    Constant c;
    c.type.shape = x.type.shape;
    const int64_t n = count(x);
    if (to_float) {
        c.type.dtype = DType::Float32;
        for (int64_t i = 0; i < n; i++) c.f32.push_back(static_cast<float>(as_double(x, i)));
    } else {
        c.type.dtype = DType::Int64;
        for (int64_t i = 0; i < n; i++) {
            double v = as_double(x, i);
            c.i64.push_back(to_bool ? int64_t(v != 0) : static_cast<int64_t>(v));
        }
    }
    return c;
}

}  // namespace hfuse::onnx_io
