// Constant evaluation for the ONNX importer (onnx_import.cpp): the shape arithmetic exporters emit
// (Shape -> Gather -> Unsqueeze -> Concat, Cast, Slice, ...) is computed on hfuse Constants at import.
// Constants here are float32, or int64 for every integer and bool type; unlike weights they may be
// empty (a Shape of a scalar, Resize's unused roi). Problems throw an Error naming the field.
#pragma once

#include "hfuse/tensor.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace hfuse::onnx_io {

int64_t count(const Shape &s);  // 0 when a dim is 0
int64_t count(const Constant &c);
bool is_int(const Constant &c);
double as_double(const Constant &c, int64_t i);
Constant make_ints(Shape shape, std::vector<int64_t> values);
Constant make_floats(Shape shape, std::vector<float> values);
// The values as int64 (shape-like operands: axes, pads, starts, ...).
std::vector<int64_t> ints_of(const Constant &c);
std::string list_ints(const std::vector<int64_t> &v);  // "[1, 2, 3]"

// A possibly negative axis resolved against `rank`.
int axis_in(int64_t axis, int64_t rank, const std::string &field);

// numpy broadcasting of the inputs; f gets one value per input. The result is int64 if `int_result`.
Constant elementwise(const std::vector<const Constant *> &in, bool int_result,
                     const std::function<double(const std::vector<double> &)> &f, const std::string &field);

// Output shapes of Unsqueeze, Squeeze (all extent-1 dims without axes) and Reshape (0 copies unless
// allowzero, -1 infers).
Shape unsqueezed(const Shape &in, std::vector<int64_t> axes);
Shape squeezed(const Shape &in, const std::optional<std::vector<int64_t>> &axes);
Shape reshaped(const Shape &in, const std::vector<int64_t> &spec, bool allowzero);
Constant with_shape(Constant c, Shape shape);

// Slice's operands, axes resolved (one entry per sliced axis).
struct SliceArgs {
    std::vector<int64_t> starts, ends, axes, steps;
};
Constant fold_slice(const Constant &x, const SliceArgs &s);
Constant fold_transpose(const Constant &x, std::vector<int64_t> perm);  // empty perm: reverse
Constant fold_concat(const std::vector<const Constant *> &parts, int64_t axis);
Constant fold_gather(const Constant &data, const Constant &indices, int64_t axis);
// ONNX's ScatterND: data with the slices `indices` names replaced by (or, with a reduction "add",
// "mul", "max", "min", combined with) `updates`.
Constant fold_scatter_nd(const Constant &data, const Constant &indices, const Constant &updates,
                         const std::string &reduction);
// ONNX's Cast: to float32, or to an integer type (truncating) or bool (nonzero) held as int64.
Constant fold_cast(const Constant &x, bool to_float, bool to_bool);

}  // namespace hfuse::onnx_io
