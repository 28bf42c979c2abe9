// Data-movement ops (ONNX opset 13): Expand, Flatten, Reshape, Transpose, Concat, Split, Slice, Identity,
// Dropout (inference), Pad and Resize. Every output element reads one input element (a few, for Resize
// linear and cubic), so all of them are Injective with no FLOPs (Resize: its multiply-adds); each
// Halide definition maps output coordinates to input coordinates using the static shapes.
//
// Shape-like inputs (Reshape's shape, Slice's starts, Pad's pads, ...) are constants, so the checks
// and the derived parameters live in one "plan" function per op, used by both infer and lower.
#include "halide_util.h"
#include "hfuse/error.h"
#include "op_families.h"
#include "resize_sampling.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <optional>

namespace hfuse::ops {
namespace {

using Halide::Expr;
using Halide::Func;
using Halide::Var;

std::string input_field(int i, const std::string &name) {
    return "input " + std::to_string(i) + " (" + name + ")";
}

std::string list(const std::vector<int64_t> &values) {
    std::string s = "[";
    for (size_t i = 0; i < values.size(); i++) s += (i ? ", " : "") + std::to_string(values[i]);
    return s + "]";
}

// What infer and lower both know about a node, so plan functions serve both.
struct Operands {
    const Attributes &attrs;
    const std::vector<const TensorType *> &types;  // nullptr where an optional input is left out
    const std::vector<const Constant *> &constants;
    int num_outputs;

    explicit Operands(const InferContext &c)
        : attrs(c.attrs), types(c.inputs), constants(c.constants), num_outputs(c.num_outputs) {}
    explicit Operands(const LowerContext &c)
        : attrs(c.attrs),
          types(c.input_types),
          constants(c.constants),
          num_outputs(static_cast<int>(c.output_types.size())) {}

    const Shape &shape(int i) const { return types[i]->shape; }
    int num_inputs() const { return static_cast<int>(types.size()); }

    // Constant input i checked to have `dtype` (validate() makes every present constant input a weight);
    // nullptr when the optional input is left out.
    const Constant *constant(int i, const std::string &name, DType dtype) const {
        const Constant *k = i < (int)constants.size() ? constants[i] : nullptr;
        if (k && k->type.dtype != dtype) {
            fail_field(input_field(i, name),
                       std::string("expects ") + to_string(dtype) + " values, got " + to_string(k->type.dtype));
        }
        return k;
    }

    // The values of a 1-D int64 constant input (starts, pads, ...); nullopt when it is left out.
    std::optional<std::vector<int64_t>> ints(int i, const std::string &name) const {
        const Constant *k = constant(i, name, DType::Int64);
        if (!k) return std::nullopt;
        if (k->type.rank() != 1) {
            fail_field(input_field(i, name), "expects a 1-D tensor, got shape [" + to_string(k->type.shape) + "]");
        }
        return k->i64;
    }

    // The value of a one-element constant input; nullopt when it is left out.
    std::optional<double> scalar(int i, const std::string &name, DType dtype) const {
        const Constant *k = constant(i, name, dtype);
        if (!k) return std::nullopt;
        if (num_elements(k->type.shape) != 1) {
            fail_field(input_field(i, name), "expects a single value, got shape [" + to_string(k->type.shape) + "]");
        }
        return dtype == DType::Int64 ? static_cast<double>(k->i64[0]) : k->f32[0];
    }
};

OpSchema injective_op(const std::string &name, int min_inputs, int max_inputs, std::vector<std::string> attributes,
                      std::vector<int> constant_inputs = {}) {
    OpSchema s;
    s.name = name;
    s.kind = PatternKind::Injective;
    s.min_inputs = min_inputs;
    s.max_inputs = max_inputs;
    s.attributes = std::move(attributes);
    s.constant_inputs = std::move(constant_inputs);
    s.flops = [](const InferContext &, const std::vector<TensorType> &) { return 0.0; };
    return s;
}

std::vector<TensorType> float_output(const Shape &shape) {
    return {TensorType{DType::Float32, shape}};
}

// ---- Halide helpers: coordinates are handled in ONNX dim order and reversed only at the Func boundary.

struct OutputCoords {
    std::vector<Var> vars;   // Halide order
    std::vector<Expr> onnx;  // ONNX order: onnx[i] indexes dim i
};

OutputCoords output_coords(int rank) {
    OutputCoords c{make_vars(rank), std::vector<Expr>(rank)};
    for (int i = 0; i < rank; i++) c.onnx[i] = c.vars[halide_arg(i, rank)];
    return c;
}

Expr call(const Func &f, const std::vector<Expr> &onnx_coords) {
    return f(std::vector<Expr>(onnx_coords.rbegin(), onnx_coords.rend()));
}

Func define(const LowerContext &ctx, const OutputCoords &c, const Expr &value, const std::string &suffix = "") {
    Func f(func_name(ctx, suffix));
    f(c.vars) = value;
    return f;
}

Lowered single_output(Func f) {
    return Lowered{{std::move(f)}, {}, {}};
}

Expr int_expr(int64_t v) {
    return Expr(to_int(v, "index"));
}

// ---- Expand: numpy broadcasting of the input to a shape (its dims, or the input's where they are 1).

Shape expand_shape(const Operands &op) {
    const std::vector<int64_t> shape = op.ints(1, "shape").value();
    for (int64_t d : shape) {
        if (d < 1)
            fail_field(input_field(1, "shape"),
                       "has dim " + std::to_string(d) + " in " + list(shape) + "; hfuse requires positive dims");
    }
    return broadcast_shapes(op.shape(0), Shape(shape.begin(), shape.end()), input_field(1, "shape"));
}

// ---- Flatten and Reshape: same element order, new shape.

Shape flatten_shape(const Operands &op) {
    const Shape &in = op.shape(0);
    const int rank = static_cast<int>(in.size());
    int64_t axis = op.attrs.get_int("axis", 1);
    if (axis < -rank || axis > rank) {
        fail_field("axis", "axis " + std::to_string(axis) + " is out of range [" + std::to_string(-rank) + ", " +
                               std::to_string(rank) + "] for rank " + std::to_string(rank));
    }
    if (axis < 0) axis += rank;
    Shape outer(in.begin(), in.begin() + axis), inner(in.begin() + axis, in.end());
    return {num_elements(outer), num_elements(inner)};
}

Shape reshape_shape(const Operands &op) {
    const Shape &in = op.shape(0);
    const std::string field = input_field(1, "shape");
    const std::vector<int64_t> shape = op.ints(1, "shape").value();
    const int64_t allowzero = op.attrs.get_int("allowzero", 0);
    if (allowzero != 0 && allowzero != 1) fail_field("allowzero", "must be 0 or 1, got " + std::to_string(allowzero));
    const bool has_zero = std::count(shape.begin(), shape.end(), 0) > 0;
    const auto minus_ones = std::count(shape.begin(), shape.end(), -1);
    if (minus_ones > 1) fail_field(field, "has more than one -1 in " + list(shape));
    if (allowzero && has_zero) {
        fail_field(field, minus_ones ? "with allowzero=1, 0 and -1 cannot be combined in " + list(shape)
                                     : "with allowzero=1, the 0 in " + list(shape) +
                                           " makes an empty tensor; hfuse requires positive dims");
    }

    const int64_t total = num_elements(in);
    Shape out(shape.size());
    int inferred = -1;
    int64_t known = 1;  // product of every output dim but the inferred one
    for (size_t i = 0; i < shape.size(); i++) {
        int64_t v = shape[i];
        if (v == -1) {
            inferred = static_cast<int>(i);
            continue;
        }
        if (v < -1) {
            fail_field(field, "value " + std::to_string(v) + " in " + list(shape) +
                                  " is negative; only -1 (inferred) is allowed");
        }
        if (v == 0) {
            // allowzero=0: 0 copies the input dim at the same index.
            if (i >= in.size()) {
                fail_field(field, "the 0 at index " + std::to_string(i) + " in " + list(shape) +
                                      " copies an input dim, but the input has rank " + std::to_string(in.size()));
            }
            v = in[i];
        }
        if (v > total || known > total / v) {
            fail_field(field, list(shape) + " needs more elements than the input [" + to_string(in) + "] has (" +
                                  std::to_string(total) + ")");
        }
        known *= v;
        out[i] = v;
    }
    if (inferred >= 0) {
        if (total % known != 0) {
            fail_field(field, "cannot infer the -1 in " + list(shape) + ": the other dims (" + std::to_string(known) +
                                  " elements) do not divide the input's " + std::to_string(total) + " elements");
        }
        out[inferred] = total / known;
    } else if (known != total) {
        fail_field(field, list(shape) + " has " + std::to_string(known) + " elements, the input [" + to_string(in) +
                              "] has " + std::to_string(total));
    }
    return out;
}

// Input coordinates (ONNX order) that the output coordinates `oc` of a row-major reshape read. Dims are
// matched from the innermost outwards into groups with equal products, so dims a reshape keeps (and any
// pure split of an input dim) are addressed without division; only merged input dims need / and %.
std::vector<Expr> reshape_coords(const Shape &in, const Shape &out, const std::vector<Expr> &oc) {
    std::vector<Expr> ic(in.size(), Expr(0));  // extent-1 input dims always read index 0
    int i = static_cast<int>(in.size()) - 1, o = static_cast<int>(out.size()) - 1;
    while (true) {
        while (i >= 0 && in[i] == 1) i--;
        while (o >= 0 && out[o] == 1) o--;
        if (i < 0 || o < 0) break;  // equal products: the other side has only extent-1 dims left
        const int i_last = i, o_last = o;
        int64_t in_size = in[i], out_size = out[o];
        while (in_size != out_size) {
            if (in_size < out_size) {
                in_size *= in[--i];
            } else {
                out_size *= out[--o];
            }
        }
        if (i == i_last && o == o_last) {
            ic[i] = oc[o];
        } else {
            // Flat index within the group, then decomposed over the group's input dims.
            Expr flat;
            int64_t stride = 1;
            for (int k = o_last; k >= o; k--) {
                if (out[k] == 1) continue;
                Expr term = stride == 1 ? oc[k] : oc[k] * int_expr(stride);
                flat = flat.defined() ? flat + term : term;
                stride *= out[k];
            }
            stride = 1;
            for (int k = i_last; k >= i; k--) {
                if (in[k] == 1) continue;
                Expr c = stride == 1 ? flat : flat / int_expr(stride);
                stride *= in[k];
                // The group's outermost dim needs no modulo: the flat index is below the group size.
                ic[k] = stride == in_size ? c : c % int_expr(in[k]);
            }
        }
        i--;
        o--;
    }
    return ic;
}

Lowered lower_reshape(const LowerContext &ctx) {
    const Shape &out = ctx.output_types[0].shape;
    OutputCoords c = output_coords(static_cast<int>(out.size()));
    return single_output(define(ctx, c, call(ctx.inputs[0], reshape_coords(ctx.input_types[0]->shape, out, c.onnx))));
}

// ---- Transpose

std::vector<int64_t> transpose_perm(const Operands &op) {
    const int rank = static_cast<int>(op.shape(0).size());
    std::vector<int64_t> reversed(rank);
    std::iota(reversed.rbegin(), reversed.rend(), 0);
    std::vector<int64_t> perm = op.attrs.get_ints("perm", reversed);
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> identity(rank);
    std::iota(identity.begin(), identity.end(), 0);
    if (sorted != identity) {
        fail_field("perm", list(perm) + " is not a permutation of 0.." + std::to_string(rank - 1) +
                               " (the input's rank is " + std::to_string(rank) + ")");
    }
    return perm;
}

// ---- Concat

struct ConcatPlan {
    int axis;
    Shape out;
    std::vector<int64_t> begin;  // where each input starts along the axis
};

ConcatPlan concat_plan(const Operands &op) {
    const Shape &first = op.shape(0);
    ConcatPlan p{normalize_axis(op.attrs.get_int("axis"), static_cast<int>(first.size()), "axis"), first, {}};
    p.out[p.axis] = 0;
    for (int i = 0; i < op.num_inputs(); i++) {
        const Shape &s = op.shape(i);
        if (s.size() != first.size()) {
            fail_field(input_field(i, "inputs"),
                       "has rank " + std::to_string(s.size()) + ", input 0 has rank " + std::to_string(first.size()));
        }
        for (size_t d = 0; d < s.size(); d++) {
            if ((int)d != p.axis && s[d] != first[d]) {
                fail_field(input_field(i, "inputs"), "shape [" + to_string(s) + "] differs from input 0's [" +
                                                         to_string(first) + "] in dim " + std::to_string(d) +
                                                         ", which is not the concat axis " + std::to_string(p.axis));
            }
        }
        p.begin.push_back(p.out[p.axis]);
        p.out[p.axis] += s[p.axis];
    }
    return p;
}

Lowered lower_concat(const LowerContext &ctx) {
    const ConcatPlan p = concat_plan(Operands(ctx));
    OutputCoords c = output_coords(static_cast<int>(p.out.size()));
    const int n = static_cast<int>(ctx.inputs.size());
    if (n == 1) return single_output(define(ctx, c, call(ctx.inputs[0], c.onnx)));
    // A select chain over the axis; each input's index is clamped so bounds inference (which does not
    // see the select conditions) never asks for elements outside the input.
    Expr value;
    for (int i = n - 1; i >= 0; i--) {
        std::vector<Expr> coords = c.onnx;
        const int64_t extent = ctx.input_types[i]->shape[p.axis];
        coords[p.axis] = Halide::clamp(coords[p.axis] - int_expr(p.begin[i]), 0, int_expr(extent - 1));
        Expr v = call(ctx.inputs[i], coords);
        value = i == n - 1 ? v : Halide::select(c.onnx[p.axis] < int_expr(p.begin[i + 1]), v, value);
    }
    return single_output(define(ctx, c, value));
}

// ---- Split

struct SplitPlan {
    int axis;
    std::vector<int64_t> sizes;
};

SplitPlan split_plan(const Operands &op) {
    const Shape &in = op.shape(0);
    SplitPlan p{normalize_axis(op.attrs.get_int("axis", 0), static_cast<int>(in.size()), "axis"), {}};
    const int64_t dim = in[p.axis];
    const int n = op.num_outputs;
    const std::string field = input_field(1, "split");
    if (std::optional<std::vector<int64_t>> split = op.ints(1, "split")) {
        p.sizes = *split;
        if ((int)p.sizes.size() != n) {
            fail_field(field, "has " + std::to_string(p.sizes.size()) + " sizes for " + std::to_string(n) + " outputs");
        }
        int64_t sum = 0;
        for (int64_t s : p.sizes) {
            if (s <= 0)
                fail_field(field, list(p.sizes) + " has a size that is not positive; hfuse requires positive dims");
            sum += std::min(s, dim + 1);  // capped so huge values cannot overflow the sum
        }
        if (sum != dim) {
            fail_field(field, "sizes " + list(p.sizes) + " do not add up to dim " + std::to_string(p.axis) + " (" +
                                  std::to_string(dim) + ")");
        }
    } else {
        if (dim % n != 0) {
            fail_field("outputs", "cannot split dim " + std::to_string(p.axis) + " (" + std::to_string(dim) +
                                      ") into " + std::to_string(n) + " equal parts; give the split input");
        }
        p.sizes.assign(n, dim / n);
    }
    return p;
}

std::vector<TensorType> infer_split(const InferContext &ctx) {
    const SplitPlan p = split_plan(Operands(ctx));
    std::vector<TensorType> outs;
    for (int64_t s : p.sizes) {
        outs.push_back({DType::Float32, ctx.inputs[0]->shape});
        outs.back().shape[p.axis] = s;
    }
    return outs;
}

Lowered lower_split(const LowerContext &ctx) {
    const SplitPlan p = split_plan(Operands(ctx));
    OutputCoords c = output_coords(ctx.input_types[0]->rank());
    Lowered l;
    int64_t begin = 0;
    for (size_t k = 0; k < p.sizes.size(); k++) {
        std::vector<Expr> coords = c.onnx;
        if (begin) coords[p.axis] = coords[p.axis] + int_expr(begin);
        l.outputs.push_back(define(ctx, c, call(ctx.inputs[0], coords), std::to_string(k)));
        begin += p.sizes[k];
    }
    return l;
}

// ---- Slice

struct SliceAxis {
    int64_t start = 0, step = 1;  // input index = start + step * output index
};

struct SlicePlan {
    Shape out;
    std::vector<SliceAxis> axes;  // one per input dim
};

SlicePlan slice_plan(const Operands &op) {
    const Shape &in = op.shape(0);
    const int rank = static_cast<int>(in.size());
    const std::vector<int64_t> starts = op.ints(1, "starts").value(), ends = op.ints(2, "ends").value();
    const size_t n = starts.size();
    std::vector<int64_t> default_axes(n);
    std::iota(default_axes.begin(), default_axes.end(), 0);
    const std::vector<int64_t> axes = op.ints(3, "axes").value_or(default_axes);
    const std::vector<int64_t> steps = op.ints(4, "steps").value_or(std::vector<int64_t>(n, 1));
    auto check_length = [n](int i, const std::string &name, size_t size) {
        if (size != n) {
            fail_field(input_field(i, name),
                       "has " + std::to_string(size) + " values, starts has " + std::to_string(n));
        }
    };
    check_length(2, "ends", ends.size());
    check_length(3, "axes", axes.size());
    check_length(4, "steps", steps.size());

    SlicePlan p{in, std::vector<SliceAxis>(rank)};
    std::vector<bool> seen(rank, false);
    for (size_t j = 0; j < n; j++) {
        const int a = normalize_axis(axes[j], rank, input_field(3, "axes"));
        if (seen[a])
            fail_field(input_field(3, "axes"), "axis " + std::to_string(a) + " appears twice in " + list(axes));
        seen[a] = true;
        const int64_t dim = in[a], step = steps[j];
        if (step == 0)
            fail_field(input_field(4, "steps"), "step 0 for axis " + std::to_string(a) + " (steps must be nonzero)");
        // Negative indices count from the end (no overflow: dim > 0); then clamp as ONNX does.
        int64_t start = starts[j] < 0 ? starts[j] + dim : starts[j];
        int64_t end = ends[j] < 0 ? ends[j] + dim : ends[j];
        int64_t count;
        if (step > 0) {
            start = std::clamp<int64_t>(start, 0, dim);
            end = std::clamp<int64_t>(end, 0, dim);
            count = end > start ? 1 + (end - start - 1) / step : 0;
        } else {
            start = std::clamp<int64_t>(start, 0, dim - 1);
            end = std::clamp<int64_t>(end, -1, dim - 1);
            const int64_t magnitude = step == INT64_MIN ? INT64_MAX : -step;
            count = start > end ? 1 + (start - end - 1) / magnitude : 0;
        }
        if (count == 0) {
            fail_field(input_field(1, "starts"), "the slice of axis " + std::to_string(a) + " (dim " +
                                                     std::to_string(dim) + ") from " + std::to_string(starts[j]) +
                                                     " to " + std::to_string(ends[j]) + " with step " +
                                                     std::to_string(step) + " is empty; hfuse requires positive dims");
        }
        p.out[a] = count;
        // With one element the step is irrelevant; otherwise |step| < dim, so it fits Halide's int32.
        p.axes[a] = {start, count == 1 ? 1 : step};
    }
    return p;
}

Lowered lower_slice(const LowerContext &ctx) {
    const SlicePlan p = slice_plan(Operands(ctx));
    OutputCoords c = output_coords(static_cast<int>(p.out.size()));
    std::vector<Expr> coords = c.onnx;
    for (size_t a = 0; a < coords.size(); a++) {
        const SliceAxis &s = p.axes[a];
        if (s.step != 1) coords[a] = coords[a] * int_expr(s.step);
        if (s.start != 0) coords[a] = coords[a] + int_expr(s.start);
    }
    return single_output(define(ctx, c, call(ctx.inputs[0], coords)));
}

// ---- Identity and Dropout

std::vector<TensorType> infer_dropout(const InferContext &ctx) {
    const Operands op(ctx);
    if (ctx.num_outputs > 1) {
        fail_field("outputs",
                   "the mask output (output 1) is not supported: hfuse runs inference only, where "
                   "Dropout is the identity and has no mask");
    }
    // ONNX's training_mode is a bool; hfuse represents it as int64.
    std::optional<double> training = op.scalar(2, "training_mode", DType::Int64);
    if (training && *training != 0) {
        fail_field(input_field(2, "training_mode"), "must be false (0): hfuse runs inference only");
    }
    return {*ctx.inputs[0]};
}

Lowered lower_copy(const LowerContext &ctx) {
    OutputCoords c = output_coords(ctx.input_types[0]->rank());
    return single_output(define(ctx, c, call(ctx.inputs[0], c.onnx)));
}

// ---- Pad

enum class PadMode { Constant, Reflect, Edge };

struct PadPlan {
    PadMode mode;
    float value;
    std::vector<int64_t> begin, end;  // per dim; negative values crop
    Shape out;
};

PadPlan pad_plan(const Operands &op) {
    const Shape &in = op.shape(0);
    const int rank = static_cast<int>(in.size());
    const std::string mode = op.attrs.get_string("mode", "constant");
    PadPlan p;
    if (mode == "constant") {
        p.mode = PadMode::Constant;
    } else if (mode == "reflect") {
        p.mode = PadMode::Reflect;
    } else if (mode == "edge") {
        p.mode = PadMode::Edge;
    } else {
        fail_field("mode", "must be constant, reflect or edge, got '" + mode + "'");
    }
    p.value = static_cast<float>(op.scalar(2, "constant_value", DType::Float32).value_or(0.0));

    const std::string field = input_field(1, "pads");
    const std::vector<int64_t> pads = op.ints(1, "pads").value();
    if ((int)pads.size() != 2 * rank) {
        fail_field(field, "has " + std::to_string(pads.size()) + " values; a rank-" + std::to_string(rank) +
                              " input needs " + std::to_string(2 * rank) + " (all begins, then all ends)");
    }
    p.begin.assign(pads.begin(), pads.begin() + rank);
    p.end.assign(pads.begin() + rank, pads.end());
    p.out = in;
    for (int a = 0; a < rank; a++) {
        const int64_t b = p.begin[a], e = p.end[a], dim = in[a];
        if (std::max(std::abs(b), std::abs(e)) > kMaxTensorElements) {
            fail_field(field, list(pads) + " has a value too large in magnitude for a tensor dim");
        }
        const std::string where = "pads (" + std::to_string(b) + ", " + std::to_string(e) + ") on axis " +
                                  std::to_string(a) + " (dim " + std::to_string(dim) + ")";
        p.out[a] = dim + b + e;
        if (p.out[a] <= 0)
            fail_field(field, where + " leave " + std::to_string(p.out[a]) + " elements; hfuse requires positive dims");
        // Negative pads crop first; reflect and edge then extend what is left.
        const int64_t kept = dim + std::min<int64_t>(b, 0) + std::min<int64_t>(e, 0);
        if (p.mode != PadMode::Constant && kept <= 0) {
            fail_field(field, where + " crop every element, leaving nothing for " + mode + " padding to repeat");
        }
        if (p.mode == PadMode::Reflect && std::max(b, e) >= kept) {
            fail_field(field, where + ": reflect padding must be smaller than the dim it mirrors (" +
                                  std::to_string(kept) + ")");
        }
    }
    return p;
}

Lowered lower_pad(const LowerContext &ctx) {
    const PadPlan p = pad_plan(Operands(ctx));
    const Shape &in = ctx.input_types[0]->shape;
    OutputCoords c = output_coords(static_cast<int>(in.size()));
    std::vector<Expr> coords(in.size());
    Expr inside;  // undefined: no constant-padded axis yet
    auto require = [&inside](const Expr &cond) { inside = inside.defined() ? inside && cond : cond; };
    for (size_t a = 0; a < in.size(); a++) {
        const int64_t b = p.begin[a], e = p.end[a];
        Expr x = b == 0 ? c.onnx[a] : c.onnx[a] - int_expr(b);
        coords[a] = x;
        if (b <= 0 && e <= 0) continue;  // only cropped: every index is inside the input
        // The input range left after cropping; all bounds are static so bounds inference stays exact.
        Expr lo = int_expr(std::max<int64_t>(-b, 0)), hi = int_expr(in[a] - 1 - std::max<int64_t>(-e, 0));
        switch (p.mode) {
        case PadMode::Constant:
            if (b > 0) require(x >= 0);
            if (e > 0) require(x < int_expr(in[a]));
            coords[a] = Halide::clamp(x, lo, hi);
            break;
        case PadMode::Edge: coords[a] = Halide::clamp(x, lo, hi); break;
        case PadMode::Reflect: {
            // One mirror per side suffices (pad < dim); the clamp only informs bounds inference.
            Expr m = b > 0 ? Halide::select(x < lo, 2 * lo - x, x) : x;
            if (e > 0) m = Halide::select(m > hi, 2 * hi - m, m);
            coords[a] = Halide::clamp(m, lo, hi);
            break;
        }
        }
    }
    Expr value = call(ctx.inputs[0], coords);
    if (inside.defined()) value = Halide::select(inside, value, Halide::Expr(p.value));
    return single_output(define(ctx, c, value));
}

// ---- Resize: per axis, the input indices and weights each output index reads (resize_sampling.h),
// computed once from the static shapes.

struct ResizePlan {
    Shape out;
    std::vector<ResizeAxisSampling> axes;
    float extrapolation_value = 0.0f;  // where tf_crop_and_resize maps outside the input
};

ResizePlan resize_plan(const Operands &op) {
    const Shape &in = op.shape(0);
    const int rank = static_cast<int>(in.size());
    ResizeOptions options;
    options.mode = op.attrs.get_string("mode", "nearest");
    options.transform = op.attrs.get_string("coordinate_transformation_mode", "half_pixel");
    options.nearest_mode = op.attrs.get_string("nearest_mode", "round_prefer_floor");
    options.cubic_coeff_a = op.attrs.get_float("cubic_coeff_a", -0.75f);
    const int64_t exclude = op.attrs.get_int("exclude_outside", 0), antialias = op.attrs.get_int("antialias", 0);
    if (exclude != 0 && exclude != 1) fail_field("exclude_outside", "must be 0 or 1, got " + std::to_string(exclude));
    if (antialias != 0 && antialias != 1) fail_field("antialias", "must be 0 or 1, got " + std::to_string(antialias));
    options.exclude_outside = exclude == 1;
    options.antialias = antialias == 1;

    const Constant *roi = op.num_inputs() > 1 ? op.constant(1, "roi", DType::Float32) : nullptr;
    const Constant *scales = op.num_inputs() > 2 ? op.constant(2, "scales", DType::Float32) : nullptr;
    std::optional<std::vector<int64_t>> sizes = op.num_inputs() > 3 ? op.ints(3, "sizes") : std::nullopt;
    if ((scales != nullptr) == sizes.has_value()) {
        fail_field(input_field(2, "scales"), "exactly one of scales and sizes must be given");
    }
    const bool crop = options.transform == "tf_crop_and_resize";
    if (crop && (!roi || roi->type.rank() != 1 || (int)roi->f32.size() != 2 * rank)) {
        fail_field(input_field(1, "roi"), "tf_crop_and_resize needs a start and an end per input dim (" +
                                              std::to_string(2 * rank) + " values)");
    }
    std::vector<float> scale(rank);
    ResizePlan p;
    p.out = in;
    p.extrapolation_value = op.attrs.get_float("extrapolation_value", 0.0f);
    if (scales) {
        if ((int)scales->f32.size() != rank || scales->type.rank() != 1) {
            fail_field(input_field(2, "scales"), "needs one value per input dim (" + std::to_string(rank) +
                                                     "), got shape [" + to_string(scales->type.shape) + "]");
        }
        for (int a = 0; a < rank; a++) {
            scale[a] = scales->f32[a];
            if (!(scale[a] > 0)) fail_field(input_field(2, "scales"), "scales must be positive");
            p.out[a] = static_cast<int64_t>(std::floor(static_cast<double>(in[a]) * scale[a]));
            if (p.out[a] < 1) {
                fail_field(input_field(2, "scales"), "scale " + std::to_string(scale[a]) + " leaves dim " +
                                                         std::to_string(a) + " (" + std::to_string(in[a]) + ") empty");
            }
        }
    } else {
        if ((int)sizes->size() != rank) {
            fail_field(input_field(3, "sizes"),
                       "needs one value per input dim (" + std::to_string(rank) + "), got " + list(*sizes));
        }
        for (int a = 0; a < rank; a++) {
            if ((*sizes)[a] < 1 || (*sizes)[a] > kMaxTensorElements) {
                fail_field(input_field(3, "sizes"), "sizes must be positive, got " + list(*sizes));
            }
            p.out[a] = (*sizes)[a];
            scale[a] = static_cast<float>(p.out[a]) / static_cast<float>(in[a]);
        }
    }
    if (num_elements(p.out) > kMaxTensorElements) fail_field("output", "the resized tensor is too large");
    for (int a = 0; a < rank; a++) {
        const float roi_start = crop ? roi->f32[a] : 0.0f, roi_end = crop ? roi->f32[a + rank] : 1.0f;
        p.axes.push_back(resize_axis_sampling(in[a], p.out[a], scale[a], options, roi_start, roi_end));
    }
    return p;
}

// The axis a Resize interpolates first, into a stage, when it interpolates (several taps) along two
// or more (the innermost of them); -1 when it reads its input in one step.
int staged_axis(const ResizePlan &p) {
    int last = -1, interpolated = 0;
    for (size_t a = 0; a < p.axes.size(); a++) {
        if (p.axes[a].taps > 1) {
            interpolated++;
            last = static_cast<int>(a);
        }
    }
    return interpolated >= 2 ? last : -1;
}

// The multiply-adds of the taps (none for nearest), as lower_resize computes them: the staged axis
// (staged_axis) over the input's other extents, then the rest.
double resize_flops(const ResizePlan &p, const Shape &in) {
    double taps = 1;
    for (const ResizeAxisSampling &s : p.axes) taps *= s.taps;
    if (taps == 1) return 0.0;
    const int staged = staged_axis(p);
    if (staged < 0) return 2 * taps * static_cast<double>(num_elements(p.out));
    Shape stage = in;
    stage[staged] = p.out[staged];
    const double staged_taps = p.axes[staged].taps;
    return 2 * staged_taps * static_cast<double>(num_elements(stage)) +
           2 * (taps / staged_taps) * static_cast<double>(num_elements(p.out));
}

// How one axis of a Resize reads its input: arithmetic (o / k: integer upsampling, or the identity)
// or tables of taps.
struct ResizeAxisLowering {
    int64_t k = 0;  // > 0: o reads o / k, weight 1
    int taps = 1;
    bool weighted = false;  // the taps carry weights (not a copy)
    Func index, weight, inside;

    // The input coordinates and weights (undefined: 1) of the taps output coordinate `o` reads.
    void taps_of(const Expr &o, int64_t in, std::vector<Expr> &indices, std::vector<Expr> &weights) const {
        indices.clear();
        weights.clear();
        if (k > 0) {
            indices.push_back(k == 1 ? o : o / int_expr(k));
            weights.push_back(Expr());
            return;
        }
        for (int j = 0; j < taps; j++) {
            // The clamp tells bounds inference what the table holds.
            indices.push_back(Halide::clamp(index(o, j), 0, int_expr(in - 1)));
            weights.push_back(weighted ? weight(o, j) : Expr());
        }
    }
};

// The sum, over every combination of the axes' taps, of the weighted reads of `f` (bilinear: 4).
Expr sum_of_taps(const Func &f, const std::vector<std::vector<Expr>> &index,
                 const std::vector<std::vector<Expr>> &weight) {
    const size_t rank = index.size();
    Expr value;
    std::vector<size_t> tap(rank, 0);
    while (true) {
        std::vector<Expr> coords(rank);
        Expr w;
        for (size_t a = 0; a < rank; a++) {
            coords[a] = index[a][tap[a]];
            const Expr &wa = weight[a][tap[a]];
            if (wa.defined()) w = w.defined() ? w * wa : wa;
        }
        Expr term = call(f, coords);
        if (w.defined()) term = w * term;
        value = value.defined() ? value + term : term;
        int a = static_cast<int>(rank) - 1;
        for (; a >= 0 && ++tap[a] == index[a].size(); a--) tap[a] = 0;
        if (a < 0) return value;
    }
}

Lowered lower_resize(const LowerContext &ctx) {
    const ResizePlan p = resize_plan(Operands(ctx));
    const Shape &in = ctx.input_types[0]->shape;
    const int rank = static_cast<int>(in.size());
    std::vector<ResizeAxisLowering> axes(rank);
    Var x("x"), t("t");
    for (int a = 0; a < rank; a++) {
        const ResizeAxisSampling &s = p.axes[a];
        ResizeAxisLowering &l = axes[a];
        const int out = static_cast<int>(s.out);
        const int64_t k = s.out / in[a];
        if (k >= 1 && s.out == k * in[a] && s.is_integer_upsampling(k)) {
            l.k = k;
            continue;
        }
        const std::string axis = std::to_string(a);
        Halide::Buffer<int32_t> index_table(out, s.taps);
        Halide::Buffer<float> weight_table(out, s.taps);
        for (int o = 0; o < out; o++) {
            for (int j = 0; j < s.taps; j++) {
                index_table(o, j) = s.index[o * s.taps + j];
                weight_table(o, j) = s.weight[o * s.taps + j];
            }
        }
        l.taps = s.taps;
        l.weighted = !s.is_copy();
        l.index = Func(func_name(ctx, "index" + axis));
        l.weight = Func(func_name(ctx, "weight" + axis));
        l.index(x, t) = index_table(x, t);
        l.weight(x, t) = weight_table(x, t);
        if (!s.inside.empty()) {
            Halide::Buffer<uint8_t> inside_table(out);
            for (int o = 0; o < out; o++) inside_table(o) = s.inside[o];
            l.inside = Func(func_name(ctx, "inside" + axis));
            l.inside(x) = inside_table(x);
        }
    }
    OutputCoords c = output_coords(rank);
    std::vector<std::vector<Expr>> index(rank), weight(rank);
    for (int a = 0; a < rank; a++) axes[a].taps_of(c.onnx[a], in[a], index[a], weight[a]);
    Lowered lowered;
    Func source = ctx.inputs[0];
    if (const int last = staged_axis(p); last >= 0) {
        // Separable: the innermost interpolated axis first, into a stage the executors materialise,
        // then the others read it (bilinear upsampling of 14x14 to 224x224: 2 reads a row of the
        // stage, 4 an output, where the product of the taps read 4 of the input an output, gathered).
        OutputCoords sc = output_coords(rank);
        std::vector<std::vector<Expr>> stage_index(rank), stage_weight(rank);
        for (int a = 0; a < rank; a++) {
            if (a == last) {
                axes[a].taps_of(sc.onnx[a], in[a], stage_index[a], stage_weight[a]);
            } else {
                stage_index[a] = {sc.onnx[a]};
                stage_weight[a] = {Expr()};
            }
        }
        Func stage = define(ctx, sc, sum_of_taps(source, stage_index, stage_weight), "along" + std::to_string(last));
        lowered.stages.push_back(stage);
        source = stage;
        index[last] = {c.onnx[last]};
        weight[last] = {Expr()};
    }
    Expr value = sum_of_taps(source, index, weight);
    Expr inside;  // undefined: every output maps inside the input
    for (int a = 0; a < rank; a++) {
        if (!axes[a].inside.defined()) continue;
        const Expr here = axes[a].inside(c.onnx[a]) != 0;
        inside = inside.defined() ? inside && here : here;
    }
    if (inside.defined()) value = Halide::select(inside, value, Halide::Expr(p.extrapolation_value));
    lowered.outputs.push_back(define(ctx, c, value));
    return lowered;
}

}  // namespace

void register_shape_ops(std::vector<OpSchema> &ops) {
    OpSchema flatten = injective_op("Flatten", 1, 1, {"axis"});
    flatten.infer = [](const InferContext &ctx) { return float_output(flatten_shape(Operands(ctx))); };
    flatten.lower = lower_reshape;
    ops.push_back(std::move(flatten));

    OpSchema reshape = injective_op("Reshape", 2, 2, {"allowzero"}, {1});
    reshape.infer = [](const InferContext &ctx) { return float_output(reshape_shape(Operands(ctx))); };
    reshape.lower = lower_reshape;
    ops.push_back(std::move(reshape));

    OpSchema expand = injective_op("Expand", 2, 2, {}, {1});
    expand.infer = [](const InferContext &ctx) { return float_output(expand_shape(Operands(ctx))); };
    expand.lower = [](const LowerContext &ctx) {
        const Shape out = expand_shape(Operands(ctx));
        std::vector<Expr> args = as_exprs(make_vars(static_cast<int>(out.size())));
        Func f(func_name(ctx));
        f(args) = ctx.inputs[0](broadcast_coords(ctx.input_types[0]->shape, args));
        return Lowered{{f}, {}, {}};
    };
    ops.push_back(std::move(expand));

    OpSchema transpose = injective_op("Transpose", 1, 1, {"perm"});
    transpose.infer = [](const InferContext &ctx) {
        const std::vector<int64_t> perm = transpose_perm(Operands(ctx));
        Shape out;
        for (int64_t d : perm) out.push_back(ctx.inputs[0]->shape[d]);
        return float_output(out);
    };
    transpose.lower = [](const LowerContext &ctx) {
        const std::vector<int64_t> perm = transpose_perm(Operands(ctx));
        OutputCoords c = output_coords(static_cast<int>(perm.size()));
        std::vector<Expr> coords(perm.size());
        for (size_t k = 0; k < perm.size(); k++) coords[perm[k]] = c.onnx[k];  // output dim k is input dim perm[k]
        return single_output(define(ctx, c, call(ctx.inputs[0], coords)));
    };
    ops.push_back(std::move(transpose));

    OpSchema concat = injective_op("Concat", 1, -1, {"axis"});
    concat.infer = [](const InferContext &ctx) { return float_output(concat_plan(Operands(ctx)).out); };
    concat.lower = lower_concat;
    ops.push_back(std::move(concat));

    OpSchema split = injective_op("Split", 1, 2, {"axis"}, {1});
    split.max_outputs = -1;
    split.infer = infer_split;
    split.lower = lower_split;
    ops.push_back(std::move(split));

    OpSchema slice = injective_op("Slice", 3, 5, {}, {1, 2, 3, 4});
    slice.infer = [](const InferContext &ctx) { return float_output(slice_plan(Operands(ctx)).out); };
    slice.lower = lower_slice;
    ops.push_back(std::move(slice));

    OpSchema identity = injective_op("Identity", 1, 1, {});
    identity.infer = [](const InferContext &ctx) { return std::vector<TensorType>{*ctx.inputs[0]}; };
    identity.lower = lower_copy;
    ops.push_back(std::move(identity));

    // Inputs: data, ratio (ignored at inference), training_mode. The mask output is accepted by the
    // schema only so that infer can reject it with a message saying why.
    OpSchema dropout = injective_op("Dropout", 1, 3, {"seed"}, {2});
    dropout.max_outputs = 2;
    dropout.infer = infer_dropout;
    dropout.lower = lower_copy;
    ops.push_back(std::move(dropout));

    OpSchema pad = injective_op("Pad", 2, 3, {"mode"}, {1, 2});
    pad.infer = [](const InferContext &ctx) { return float_output(pad_plan(Operands(ctx)).out); };
    pad.lower = lower_pad;
    ops.push_back(std::move(pad));

    // Inputs: X, roi (tf_crop_and_resize only), scales, sizes.
    OpSchema resize = injective_op("Resize", 1, 4,
                                   {"antialias", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
                                    "extrapolation_value", "mode", "nearest_mode"},
                                   {1, 2, 3});
    resize.infer = [](const InferContext &ctx) { return float_output(resize_plan(Operands(ctx)).out); };
    resize.flops = [](const InferContext &ctx, const std::vector<TensorType> &) {
        return resize_flops(resize_plan(Operands(ctx)), ctx.inputs[0]->shape);
    };
    resize.lower = lower_resize;
    ops.push_back(std::move(resize));
}

}  // namespace hfuse::ops
