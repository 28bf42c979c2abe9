// MaxPool, AveragePool, GlobalMaxPool, GlobalAveragePool (ONNX opset 13). All four are one window
// reduction: the global pools are a window covering the whole spatial extent.
#include "window_util.h"

#include "halide_util.h"
#include "hfuse/error.h"
#include "op_families.h"

namespace hfuse::ops {
namespace {

using Halide::Expr;
using Halide::Func;
using Halide::RDom;
using Halide::Var;

// What a pooling node computes: its window and how each window is reduced.
struct Pool {
    WindowGeometry g;
    bool max = false;
    bool count_include_pad = false;  // average only
};

bool flag(const Attributes &attrs, const std::string &name) {
    int64_t v = attrs.get_int(name, 0);
    if (v != 0 && v != 1) fail_field(name, "must be 0 or 1, got " + std::to_string(v));
    return v == 1;
}

// MaxPool and AveragePool: a required kernel_shape and the window attributes Conv also has.
Pool windowed_pool(const Attributes &attrs, const TensorType &x, bool max) {
    const int spatial = window_spatial_rank(x);
    std::vector<int64_t> kernel = attrs.get_ints("kernel_shape");
    if (static_cast<int>(kernel.size()) != spatial) {
        fail_field("kernel_shape", "expects " + std::to_string(spatial) + " values (one per spatial dim), got " +
                                       list_to_string(kernel));
    }
    for (int64_t k : kernel) {
        if (k < 1) fail_field("kernel_shape", "must be >= 1, got " + list_to_string(kernel));
        to_int(k, "kernel_shape");
    }
    Pool p;
    p.max = max;
    p.g = resolve_window(attrs, Shape(x.shape.begin() + 2, x.shape.end()), kernel, flag(attrs, "ceil_mode"),
                         "kernel_shape");
    // As onnxruntime: a pad as large as the kernel allows windows without any input cell (an average
    // over nothing). auto_pad never pads that much.
    if (attrs.has("pads")) {
        for (int i = 0; i < spatial; i++) {
            if (p.g.pads_begin[i] >= kernel[i] || p.g.pads_end[i] >= kernel[i]) {
                fail_field("pads", "must be smaller than the kernel " + list_to_string(kernel) + ", got " +
                                       list_to_string(attrs.get_ints("pads")));
            }
        }
    }
    return p;
}

Pool max_pool(const Attributes &attrs, const TensorType &x) {
    // storage_order only affects the Indices output, which is not supported.
    int64_t storage_order = attrs.get_int("storage_order", 0);
    if (storage_order != 0) {
        fail_field("storage_order", "only 0 (row major) is supported, got " + std::to_string(storage_order));
    }
    return windowed_pool(attrs, x, true);
}

Pool average_pool(const Attributes &attrs, const TensorType &x) {
    Pool p = windowed_pool(attrs, x, false);
    p.count_include_pad = flag(attrs, "count_include_pad");
    return p;
}

Pool global_pool(const TensorType &x, bool max) {
    const int spatial = window_spatial_rank(x);
    Pool p;
    p.max = max;
    p.g.input = Shape(x.shape.begin() + 2, x.shape.end());
    p.g.kernel = p.g.input;
    p.g.strides = p.g.dilations = p.g.output = std::vector<int64_t>(spatial, 1);
    p.g.pads_begin = p.g.pads_end = std::vector<int64_t>(spatial, 0);
    return p;
}

// The number of cells of output o's window along spatial dim i that an average divides by:
// those inside the input, or with count_include_pad those inside the padded input (not the cells
// past the end padding that only ceil_mode adds, as PyTorch).
Expr average_count(const WindowGeometry &g, int i, const Expr &o, bool count_include_pad) {
    // AveragePool has no dilations in opset 13: the window is [start, start + kernel).
    const int pad_begin = static_cast<int>(g.pads_begin[i]);
    const int lo = count_include_pad ? -pad_begin : 0;
    const int hi = static_cast<int>(g.input[i] + (count_include_pad ? g.pads_end[i] : 0));
    Expr start = o * static_cast<int>(g.strides[i]) - pad_begin;
    return Halide::min(start + static_cast<int>(g.kernel[i]), hi) - Halide::max(start, lo);
}

Lowered lower_pool(const LowerContext &ctx, const Pool &p) {
    const Shape &x_shape = ctx.input_types[0]->shape;
    const int rank = static_cast<int>(x_shape.size());
    const int spatial = rank - 2;
    std::vector<Var> v = make_vars(rank);
    // Padding is -inf for max so that padded cells never win, 0 for average so they add nothing.
    Expr pad_value = p.max ? Halide::Float(32).min() : Expr(0.0f);
    Func x = pad_spatial(ctx.inputs[0], x_shape, p.g, pad_value);
    RDom r = window_rdom(p.g, {}, func_name(ctx, "r"));
    Expr cell = x(window_input_args(p.g, v, r, 0, v[halide_arg(1, rank)]));

    Func out(func_name(ctx));
    if (p.max) {
        out(v) = pad_value;
        out(v) = Halide::max(out(v), cell);
    } else {
        out(v) = 0.0f;
        out(v) += cell;
        Expr count = 1;
        for (int j = 0; j < spatial; j++) count *= average_count(p.g, spatial - 1 - j, v[j], p.count_include_pad);
        out(v) = out(v) / Halide::cast<float>(count);
    }
    Lowered lowered{{out}, {}, {}};
    if (x.name() != ctx.inputs[0].name()) lowered.parts["padded_input"] = x;  // a template may place it
    return lowered;
}

using PoolFn = Pool (*)(const Attributes &, const TensorType &);

OpSchema pool_schema(const std::string &name, PatternKind kind, std::vector<std::string> attributes, PoolFn pool) {
    OpSchema s;
    s.name = name;
    s.kind = kind;
    s.attributes = std::move(attributes);  // one input, one output (MaxPool's Indices is not supported)
    s.infer = [pool](const InferContext &ctx) {
        const TensorType &x = *ctx.inputs[0];
        Shape out = {x.shape[0], x.shape[1]};
        const Shape &spatial = pool(ctx.attrs, x).g.output;
        out.insert(out.end(), spatial.begin(), spatial.end());
        return std::vector<TensorType>{{DType::Float32, out}};
    };
    s.lower = [pool](const LowerContext &ctx) { return lower_pool(ctx, pool(ctx.attrs, *ctx.input_types[0])); };
    // One operation per window cell per output.
    s.flops = [pool](const InferContext &ctx, const std::vector<TensorType> &outputs) {
        return static_cast<double>(num_elements(outputs[0].shape)) *
               num_elements(pool(ctx.attrs, *ctx.inputs[0]).g.kernel);
    };
    return s;
}

}  // namespace

void register_pool_ops(std::vector<OpSchema> &ops) {
    ops.push_back(pool_schema(
        "MaxPool", PatternKind::Window,
        {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}, max_pool));
    ops.push_back(pool_schema("AveragePool", PatternKind::Window,
                              {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"},
                              average_pool));
    ops.push_back(pool_schema("GlobalMaxPool", PatternKind::Reduction, {},
                              [](const Attributes &, const TensorType &x) { return global_pool(x, true); }));
    ops.push_back(pool_schema("GlobalAveragePool", PatternKind::Reduction, {},
                              [](const Attributes &, const TensorType &x) { return global_pool(x, false); }));
}

}  // namespace hfuse::ops
