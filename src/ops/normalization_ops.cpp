// BatchNormalization (inference), Softmax (opset 13: along one axis), LayerNormalization (opset 17)
// and ReduceMean, ReduceSum, ReduceMax, ReduceMin (axes as an attribute, as opset 13 ReduceMean has them).
#include "halide_util.h"
#include "hfuse/error.h"
#include "op_families.h"

#include <cmath>

namespace hfuse::ops {
namespace {

using Halide::Expr;
using Halide::Func;

const char *const kBatchNormParams[] = {"scale", "B", "input_mean", "input_var"};

std::vector<TensorType> infer_batch_norm(const InferContext &ctx) {
    const int64_t training_mode = ctx.attrs.get_int("training_mode", 0);
    if (training_mode != 0) {
        fail_field("training_mode",
                   "only inference (training_mode = 0) is supported, got " + std::to_string(training_mode));
    }
    ctx.attrs.get_float("epsilon", 1e-5f);  // type-check; momentum only matters in training
    ctx.attrs.get_float("momentum", 0.9f);
    const TensorType &x = *ctx.inputs[0];
    if (x.rank() < 2) {
        fail_field("input 0 (X)", "must have rank >= 2 (N, C, ...), got shape [" + to_string(x.shape) + "]");
    }
    const int64_t channels = x.shape[1];
    for (int i = 1; i <= 4; i++) {
        if (ctx.inputs[i]->shape != Shape{channels}) {
            fail_field("input " + std::to_string(i) + " (" + kBatchNormParams[i - 1] + ")",
                       "must have shape [" + std::to_string(channels) + "] (the channels of X [" + to_string(x.shape) +
                           "]), got [" + to_string(ctx.inputs[i]->shape) + "]");
        }
    }
    return {x};
}

// y = x * mul[c] + shift[c] with mul = scale / sqrt(var + eps) and shift = B - mean * mul.
Lowered lower_batch_norm(const LowerContext &ctx) {
    const float eps = ctx.attrs.get_float("epsilon", 1e-5f);
    const int rank = ctx.output_types[0].rank();
    std::vector<Expr> args = as_exprs(make_vars(rank));
    Expr c = args[halide_arg(1, rank)];

    auto weight = [&](int i) { return i < (int)ctx.constants.size() ? ctx.constants[i] : nullptr; };
    const Constant *k[4] = {weight(1), weight(2), weight(3), weight(4)};
    Expr mul, shift;
    if (k[0] && k[1] && k[2] && k[3]) {
        // The usual case (parameters are weights): fold them once here, leaving one multiply-add per element.
        const int channels = static_cast<int>(k[0]->f32.size());
        Halide::Buffer<float> mul_buf(channels), shift_buf(channels);
        for (int i = 0; i < channels; i++) {
            double m = k[0]->f32[i] / std::sqrt(double(k[3]->f32[i]) + eps);
            mul_buf(i) = static_cast<float>(m);
            shift_buf(i) = static_cast<float>(k[1]->f32[i] - k[2]->f32[i] * m);
        }
        mul = constant_func(mul_buf, func_name(ctx, "mul"))(c);
        shift = constant_func(shift_buf, func_name(ctx, "shift"))(c);
    } else {
        mul = ctx.inputs[1](c) / Halide::sqrt(ctx.inputs[4](c) + eps);
        shift = ctx.inputs[2](c) - ctx.inputs[3](c) * mul;
    }
    Func out(func_name(ctx));
    out(args) = ctx.inputs[0](args) * mul + shift;
    return {{out}, {}, {}};
}

int softmax_axis(const Attributes &attrs, int rank) {
    return normalize_axis(attrs.get_int("axis", -1), rank, "axis");
}

std::vector<TensorType> infer_softmax(const InferContext &ctx) {
    softmax_axis(ctx.attrs, ctx.inputs[0]->rank());
    return {*ctx.inputs[0]};
}

// Numerically stable: exp(x - max) / sum(exp(x - max)); the max and the sum are materialised stages.
Lowered lower_softmax(const LowerContext &ctx) {
    const TensorType &type = ctx.output_types[0];
    const int rank = type.rank();
    const int axis = softmax_axis(ctx.attrs, rank);
    const int pos = halide_arg(axis, rank);
    std::vector<Expr> args = as_exprs(make_vars(rank));

    // The reduced stages are indexed by every dim except the axis.
    std::vector<Expr> outer = args;
    outer.erase(outer.begin() + pos);
    Halide::RDom r(0, to_int(type.shape[axis], "axis"), func_name(ctx, "r"));
    std::vector<Expr> along = args;
    along[pos] = r.x;

    const Func &x = ctx.inputs[0];
    Func max_f(func_name(ctx, "max")), sum_f(func_name(ctx, "sum")), out(func_name(ctx));
    max_f(outer) = Halide::Float(32).min();
    max_f(outer) = Halide::max(max_f(outer), x(along));
    sum_f(outer) = 0.0f;
    sum_f(outer) += vector_exp_nonpositive(x(along) - max_f(outer));  // x - max <= 0
    out(args) = vector_exp_nonpositive(x(args) - max_f(outer)) / sum_f(outer);
    return {{out}, {max_f, sum_f}, {}};
}

// LayerNormalization (opset 17): over the dims from `axis` on, (x - mean) / sqrt(var + epsilon) *
// Scale + B, Scale and B broadcast to those dims. Only the first output (Y): Mean and InvStdDev are
// training outputs.
int layer_norm_axis(const Attributes &attrs, int rank) {
    if (rank == 0) fail_field("input 0 (X)", "must have rank >= 1");
    return normalize_axis(attrs.get_int("axis", -1), rank, "axis");
}

std::vector<TensorType> infer_layer_norm(const InferContext &ctx) {
    const TensorType &x = *ctx.inputs[0];
    const int axis = layer_norm_axis(ctx.attrs, x.rank());
    ctx.attrs.get_float("epsilon", 1e-5f);
    const int64_t stash = ctx.attrs.get_int("stash_type", 1);
    if (stash != 1) fail_field("stash_type", "only 1 (float32 statistics) is supported, got " + std::to_string(stash));
    const Shape normalized(x.shape.begin() + axis, x.shape.end());
    for (int i = 1; i <= 2; i++) {
        if (!ctx.has_input(i)) continue;
        const Shape &p = ctx.inputs[i]->shape;
        // Broadcast to the normalized dims alone (aligned at the innermost): any leading dims beyond
        // them must be 1.
        bool ok = true;
        for (size_t d = 0; d < p.size(); d++) {
            const size_t from_end = p.size() - 1 - d;
            if (from_end >= normalized.size()) {
                ok = ok && p[d] == 1;
            } else {
                const int64_t n = normalized[normalized.size() - 1 - from_end];
                ok = ok && (p[d] == n || p[d] == 1);
            }
        }
        if (!ok) {
            fail_field(i == 1 ? "input 1 (Scale)" : "input 2 (B)",
                       "shape [" + to_string(p) + "] does not broadcast to the normalized dims [" +
                           to_string(normalized) + "] of X [" + to_string(x.shape) + "] (axis " + std::to_string(axis) +
                           ")");
        }
    }
    return {x};
}

// Two stages as Softmax's, each a pure definition and one update over the normalized dims: the sum,
// then the sum of squared deviations from the mean (two passes: no cancellation).
Lowered lower_layer_norm(const LowerContext &ctx) {
    const TensorType &type = ctx.output_types[0];
    const int rank = type.rank();
    const int axis = layer_norm_axis(ctx.attrs, rank);
    const int k = rank - axis;  // the normalized dims are Halide args 0 .. k - 1
    const float eps = ctx.attrs.get_float("epsilon", 1e-5f);
    std::vector<Expr> args = as_exprs(make_vars(rank));
    const std::vector<Expr> outer(args.begin() + k, args.end());
    Halide::Region region;
    int64_t count = 1;
    for (int i = 0; i < k; i++) {
        const int64_t extent = type.shape[rank - 1 - i];
        region.push_back({0, to_int(extent, "input 0 (X)")});
        count *= extent;
    }
    Halide::RDom r(region, func_name(ctx, "r"));
    std::vector<Expr> along = args;
    for (int i = 0; i < k; i++) along[i] = r[i];
    const float inv_count = 1.0f / static_cast<float>(count);

    const Func &x = ctx.inputs[0];
    Func sum_f(func_name(ctx, "sum")), sq_f(func_name(ctx, "sq")), out(func_name(ctx));
    sum_f(outer) = 0.0f;
    sum_f(outer) += x(along);
    Expr mean = sum_f(outer) * inv_count;
    sq_f(outer) = 0.0f;
    Expr dev = x(along) - mean;
    sq_f(outer) += dev * dev;
    Expr y = (x(args) - mean) / Halide::sqrt(sq_f(outer) * inv_count + eps);
    y = y * ctx.inputs[1](broadcast_coords(ctx.input_types[1]->shape, args));
    if (ctx.has_input(2)) y = y + ctx.inputs[2](broadcast_coords(ctx.input_types[2]->shape, args));
    out(args) = y;
    return {{out}, {sum_f, sq_f}, {}};
}

// A reduction's reduced dims (ONNX order; all of them when `axes` is absent) and output shape.
struct ReducePlan {
    std::vector<bool> reduced;
    Shape out;
};

ReducePlan reduce_plan(const Attributes &attrs, const Shape &in) {
    const int rank = static_cast<int>(in.size());
    ReducePlan p;
    p.reduced.assign(rank, !attrs.has("axes"));
    for (int64_t a : attrs.get_ints("axes", {})) {
        int k = normalize_axis(a, rank, "axes");
        if (p.reduced[k]) fail_field("axes", "axis " + std::to_string(a) + " is given twice");
        p.reduced[k] = true;
    }
    const int64_t keepdims = attrs.get_int("keepdims", 1);
    if (keepdims != 0 && keepdims != 1) fail_field("keepdims", "must be 0 or 1, got " + std::to_string(keepdims));
    for (int i = 0; i < rank; i++) {
        if (!p.reduced[i]) {
            p.out.push_back(in[i]);
        } else if (keepdims) {
            p.out.push_back(1);
        }
    }
    return p;
}

// ReduceMean, ReduceSum, ReduceMax, ReduceMin: one update over an RDom of the reduced dims (the mean
// then divides by their count).
Lowered lower_reduce(const LowerContext &ctx, const std::string &op) {
    const Shape &in = ctx.input_types[0]->shape;
    const int rank = static_cast<int>(in.size());
    const ReducePlan p = reduce_plan(ctx.attrs, in);
    const int out_rank = ctx.output_types[0].rank();
    std::vector<Halide::Var> vars = make_vars(out_rank);
    Halide::Region region;
    int64_t count = 1;
    for (int i = rank - 1; i >= 0; i--) {  // innermost reduced dim first: r.x walks contiguous memory
        if (!p.reduced[i]) continue;
        region.push_back({0, to_int(in[i], "axes")});
        count *= in[i];
    }
    Halide::RDom r(region, func_name(ctx, "r"));
    // Input coords in ONNX order: kept dims read the output's Var, reduced dims the RDom.
    std::vector<Expr> coords(rank);
    const bool keep = out_rank == rank;
    int next_r = static_cast<int>(region.size()) - 1, next_out = 0;
    for (int i = 0; i < rank; i++) {
        if (p.reduced[i]) {
            coords[i] = r[next_r--];
            if (keep) next_out++;
        } else {
            coords[i] = vars[halide_arg(next_out++, out_rank)];
        }
    }
    std::vector<Expr> args(coords.rbegin(), coords.rend());
    Func out(func_name(ctx));
    std::vector<Expr> out_args = as_exprs(vars);
    const Expr x = ctx.inputs[0](args);
    if (op == "ReduceMax") {
        out(out_args) = Halide::Float(32).min();
        out(out_args) = Halide::max(out(out_args), x);
    } else if (op == "ReduceMin") {
        out(out_args) = Halide::Float(32).max();
        out(out_args) = Halide::min(out(out_args), x);
    } else {
        out(out_args) = 0.0f;
        out(out_args) += x;
        if (op == "ReduceMean") out(out_args) = out(out_args) / static_cast<float>(count);
    }
    return {{out}, {}, {}};
}

}  // namespace

void register_normalization_ops(std::vector<OpSchema> &ops) {
    OpSchema bn;
    bn.name = "BatchNormalization";
    bn.kind = PatternKind::Broadcast;
    bn.min_inputs = bn.max_inputs = 5;
    bn.attributes = {"epsilon", "momentum", "training_mode"};
    bn.infer = infer_batch_norm;
    bn.lower = lower_batch_norm;
    bn.flops = [](const InferContext &, const std::vector<TensorType> &outputs) {
        return 2.0 * static_cast<double>(num_elements(outputs[0].shape));
    };
    ops.push_back(std::move(bn));

    OpSchema softmax;
    softmax.name = "Softmax";
    softmax.kind = PatternKind::Reduction;
    softmax.attributes = {"axis"};
    softmax.infer = infer_softmax;
    softmax.lower = lower_softmax;
    // max, subtract + exp, sum, divide.
    softmax.flops = [](const InferContext &, const std::vector<TensorType> &outputs) {
        return 4.0 * static_cast<double>(num_elements(outputs[0].shape));
    };
    ops.push_back(std::move(softmax));

    OpSchema ln;
    ln.name = "LayerNormalization";
    ln.kind = PatternKind::Reduction;
    ln.min_inputs = 2;
    ln.max_inputs = 3;
    ln.attributes = {"axis", "epsilon", "stash_type"};
    ln.infer = infer_layer_norm;
    ln.lower = lower_layer_norm;
    // The sum, the squared deviations (subtract, multiply-add), then normalise, scale and shift.
    ln.flops = [](const InferContext &, const std::vector<TensorType> &outputs) {
        return 7.0 * static_cast<double>(num_elements(outputs[0].shape));
    };
    ops.push_back(std::move(ln));

    for (const char *op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"}) {
        OpSchema reduce;
        reduce.name = op;
        reduce.kind = PatternKind::Reduction;
        reduce.attributes = {"axes", "keepdims"};
        reduce.infer = [](const InferContext &ctx) {
            return std::vector<TensorType>{{DType::Float32, reduce_plan(ctx.attrs, ctx.inputs[0]->shape).out}};
        };
        reduce.lower = [name = std::string(op)](const LowerContext &ctx) { return lower_reduce(ctx, name); };
        // One add (or comparison) per input element.
        reduce.flops = [](const InferContext &ctx, const std::vector<TensorType> &) {
            return static_cast<double>(num_elements(ctx.inputs[0]->shape));
        };
        ops.push_back(std::move(reduce));
    }
}

}  // namespace hfuse::ops
