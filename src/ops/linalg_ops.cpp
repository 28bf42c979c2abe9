// Gemm and MatMul. The output Func is an update definition over an RDom on K (init, then `+=`), so
// schedules can split, reorder and vectorize the reduction.
#include "halide_util.h"
#include "hfuse/error.h"
#include "op_families.h"

namespace hfuse::ops {
namespace {

using Halide::Expr;
using Halide::Func;

std::string shape_str(const Shape &s) {
    return "[" + to_string(s) + "]";
}

// out(args) = init; out(args) += product, where `product` reads the inputs at reduction index k.
Func accumulate(const LowerContext &ctx, const std::vector<Expr> &args, const Expr &init, const Expr &product) {
    Func out(func_name(ctx));
    out(args) = init;
    out(args) += product;
    return out;
}

// ---- Gemm: Y = alpha * A' * B' + beta * C ----------------------------------------------------------

struct GemmDims {
    bool trans_a, trans_b;
    int64_t m, n, k;
};

GemmDims gemm_dims(const Attributes &attrs, const TensorType &a, const TensorType &b) {
    if (a.rank() != 2) fail_field("input 0 (A)", "must have rank 2, got shape " + shape_str(a.shape));
    if (b.rank() != 2) fail_field("input 1 (B)", "must have rank 2, got shape " + shape_str(b.shape));
    GemmDims d;
    d.trans_a = attrs.get_int("transA", 0) != 0;
    d.trans_b = attrs.get_int("transB", 0) != 0;
    d.m = a.shape[d.trans_a ? 1 : 0];
    d.k = a.shape[d.trans_a ? 0 : 1];
    d.n = b.shape[d.trans_b ? 0 : 1];
    int64_t kb = b.shape[d.trans_b ? 1 : 0];
    if (kb != d.k) {
        fail_field("input 1 (B)", "inner dimensions do not match: A " + shape_str(a.shape) +
                                      " (transA=" + std::to_string(d.trans_a) + ") has K=" + std::to_string(d.k) +
                                      ", B " + shape_str(b.shape) + " (transB=" + std::to_string(d.trans_b) +
                                      ") has K=" + std::to_string(kb));
    }
    return d;
}

// A constant B -- Gemm's stored [N, K] (transB=1, every fully connected layer of ONNX exports; `n_major`)
// or MatMul's [K, N] (a linear layer exported as MatMul) -- packed [K, N] once, at compile time, in
// panels of `panel` columns (GemmLowering; 0: one panel): packed(x % panel, k, x / panel) = B's column
// x at row k, zero past the last column. Consecutive outputs' weights
// are then adjacent, so a batch-1 product is vectors of B times broadcasts of A (gemm_nv) instead of
// dot products summed across lanes (gemm_dot), and a register tile of `panel` columns streams one
// contiguous panel. AVX-512, Zen 5, rnn_cell (two 128x128 products + tanh) compiled, medians of
// 200000 runs: dot products 1.15 us, packed in one panel 0.87 (then bound by streaming B's 128 KB
// from L2), in panels of 16 columns 0.98; the LSTM cell (2 x 512x128) compiled 4.8 -> 2.6 us. The
// MLP's 784->256 in 2 tasks: one panel of 256 columns no faster than serial (each task's half rows
// pull in the other half), panels of the task's 128 columns as fast as 3 tasks of dot products.
Halide::Buffer<float> packed_panels(const Constant &b, int64_t k64, int64_t n64, bool n_major, int panel) {
    const int n = to_int(n64, "input 1 (B)"), k = to_int(k64, "input 1 (B)");
    if (b.f32.size() != static_cast<size_t>(n) * k) fail_field("input 1 (B)", "a constant B must be float32");
    if (panel <= 0 || panel > n) panel = n;
    Halide::Buffer<float> packed(panel, k, (n + panel - 1) / panel);
    packed.fill(0.0f);
    const float *w = b.f32.data();
    for (int x = 0; x < n; x++) {
        for (int r = 0; r < k; r++) {
            packed(x % panel, r, x / panel) = n_major ? w[int64_t(x) * k + r] : w[int64_t(r) * n + x];
        }
    }
    return packed;
}

// The constant B's value at (column n, row k), read from its panels (GemmLowering's panel columns).
Expr packed_b(const LowerContext &ctx, int64_t k_extent, int64_t n_extent, bool n_major, const Expr &n, const Expr &k) {
    Halide::Buffer<float> packed =
        packed_panels(*ctx.constants[1], k_extent, n_extent, n_major, ctx.gemm_lowering.panel);
    const int panel = packed.dim(0).extent();
    return constant_func(packed, func_name(ctx, "packed_b"))(n % panel, k, n / panel);
}

std::vector<TensorType> infer_gemm(const InferContext &ctx) {
    ctx.attrs.get_float("alpha", 1.0f);  // type-check
    ctx.attrs.get_float("beta", 1.0f);
    GemmDims d = gemm_dims(ctx.attrs, *ctx.inputs[0], *ctx.inputs[1]);
    Shape out = {d.m, d.n};
    if (ctx.has_input(2)) {
        // C broadcasts unidirectionally: its trailing-aligned dims are 1 or equal to Y's.
        const Shape &c = ctx.inputs[2]->shape;
        bool ok = c.size() <= 2;
        for (size_t i = 0; ok && i < c.size(); i++) {
            int64_t target = out[2 - c.size() + i];
            ok = c[i] == 1 || c[i] == target;
        }
        if (!ok) {
            fail_field("input 2 (C)", "shape " + shape_str(c) + " does not broadcast to the output " + shape_str(out));
        }
    }
    return {{DType::Float32, out}};
}

Lowered lower_gemm(const LowerContext &ctx) {
    const float alpha = ctx.attrs.get_float("alpha", 1.0f), beta = ctx.attrs.get_float("beta", 1.0f);
    GemmDims d = gemm_dims(ctx.attrs, *ctx.input_types[0], *ctx.input_types[1]);
    std::vector<Expr> args = as_exprs(make_vars(2));  // (n, m): Halide order of Y's (M, N)
    const Expr &n = args[0], &m = args[1];
    Halide::RDom k(0, to_int(d.k, "input 0 (A)"), func_name(ctx, "k"));

    Expr a = d.trans_a ? ctx.inputs[0](m, k) : ctx.inputs[0](k, m);
    Expr b;
    if (d.trans_b && ctx.constants[1]) {
        b = packed_b(ctx, d.k, d.n, true, n, k);
    } else {
        b = d.trans_b ? ctx.inputs[1](k, n) : ctx.inputs[1](n, k);
    }
    // alpha scales A's element inside the update: invariant across n, so no extra pass over Y.
    Expr product = alpha == 1.0f ? a * b : (alpha * a) * b;

    Expr init = 0.0f;
    if (ctx.has_input(2) && beta != 0.0f) {
        Expr c = ctx.inputs[2](broadcast_coords(ctx.input_types[2]->shape, args));
        init = beta == 1.0f ? c : beta * c;
    }
    return {{accumulate(ctx, args, init, product)}, {}, {}};
}

double gemm_flops(const InferContext &ctx, const std::vector<TensorType> &outputs) {
    GemmDims d = gemm_dims(ctx.attrs, *ctx.inputs[0], *ctx.inputs[1]);
    double mn = static_cast<double>(d.m) * static_cast<double>(d.n);
    return 2.0 * mn * static_cast<double>(d.k) + (ctx.has_input(2) ? mn : 0.0);
}

// ---- MatMul: numpy matmul ---------------------------------------------------------------------------

struct MatMulDims {
    bool a_vector, b_vector;  // 1-D operand: promoted to a matrix, the added dim removed from Y
    Shape a_batch, b_batch;   // leading (batch) dims of each operand
    int64_t k;
    Shape out;
};

MatMulDims matmul_dims(const TensorType &a, const TensorType &b) {
    if (a.rank() < 1) fail_field("input 0 (A)", "must have rank >= 1, got a scalar");
    if (b.rank() < 1) fail_field("input 1 (B)", "must have rank >= 1, got a scalar");
    MatMulDims d;
    d.a_vector = a.rank() == 1;
    d.b_vector = b.rank() == 1;
    d.k = a.shape.back();
    int64_t kb = d.b_vector ? b.shape[0] : b.shape[b.rank() - 2];
    if (kb != d.k) {
        fail_field("input 1 (B)", "inner dimensions do not match: A " + shape_str(a.shape) +
                                      " has K=" + std::to_string(d.k) + ", B " + shape_str(b.shape) +
                                      " has K=" + std::to_string(kb));
    }
    d.a_batch = d.a_vector ? Shape{} : Shape(a.shape.begin(), a.shape.end() - 2);
    d.b_batch = d.b_vector ? Shape{} : Shape(b.shape.begin(), b.shape.end() - 2);
    try {
        d.out = broadcast_shapes(d.a_batch, d.b_batch, "input 1 (B)");
    } catch (const Error &) {
        fail_field("input 1 (B)",
                   "batch dimensions do not broadcast: A " + shape_str(a.shape) + ", B " + shape_str(b.shape));
    }
    if (!d.a_vector) d.out.push_back(a.shape[a.rank() - 2]);
    if (!d.b_vector) d.out.push_back(b.shape.back());
    return d;
}

std::vector<TensorType> infer_matmul(const InferContext &ctx) {
    return {{DType::Float32, matmul_dims(*ctx.inputs[0], *ctx.inputs[1]).out}};
}

Lowered lower_matmul(const LowerContext &ctx) {
    MatMulDims d = matmul_dims(*ctx.input_types[0], *ctx.input_types[1]);
    std::vector<Expr> args = as_exprs(make_vars(static_cast<int>(d.out.size())));
    Halide::RDom k(0, to_int(d.k, "input 0 (A)"), func_name(ctx, "k"));

    // Y's Halide args are (n if B is a matrix, m if A is a matrix, batch dims innermost first).
    size_t next = 0;
    Expr n = d.b_vector ? Expr() : args[next++];
    Expr m = d.a_vector ? Expr() : args[next++];
    std::vector<Expr> batch(args.begin() + next, args.end());

    auto operand_args = [&](Expr first, Expr second, const Shape &operand_batch, bool vector) {
        if (vector) return std::vector<Expr>{k};
        std::vector<Expr> out = {first, second};
        for (const Expr &e : broadcast_coords(operand_batch, batch)) out.push_back(e);
        return out;
    };
    Expr a = ctx.inputs[0](operand_args(k, m, d.a_batch, d.a_vector));
    Expr b;
    if (ctx.constants.size() > 1 && ctx.constants[1] && !d.b_vector && d.b_batch.empty() &&
        ctx.gemm_lowering.panel > 0) {
        // A constant matrix B [K, N] (a linear layer exported as MatMul) in panels of the register
        // tile's columns, as Gemm's: the tile's k loop then streams one contiguous panel, where B's rows
        // lie N floats apart.
        b = packed_b(ctx, d.k, ctx.input_types[1]->shape.back(), false, n, k);
    } else {
        b = ctx.inputs[1](operand_args(n, k, d.b_batch, d.b_vector));
    }
    return {{accumulate(ctx, args, 0.0f, a * b)}, {}, {}};
}

double matmul_flops(const InferContext &ctx, const std::vector<TensorType> &outputs) {
    return 2.0 * static_cast<double>(num_elements(outputs[0].shape)) * static_cast<double>(ctx.inputs[0]->shape.back());
}

}  // namespace

void register_linalg_ops(std::vector<OpSchema> &ops) {
    OpSchema gemm;
    gemm.name = "Gemm";
    gemm.kind = PatternKind::ComplexOutFusable;
    gemm.min_inputs = 2;
    gemm.max_inputs = 3;
    gemm.attributes = {"alpha", "beta", "transA", "transB"};
    gemm.infer = infer_gemm;
    gemm.lower = lower_gemm;
    gemm.flops = gemm_flops;
    ops.push_back(std::move(gemm));

    OpSchema matmul;
    matmul.name = "MatMul";
    matmul.kind = PatternKind::ComplexOutFusable;
    matmul.min_inputs = matmul.max_inputs = 2;
    matmul.infer = infer_matmul;
    matmul.lower = lower_matmul;
    matmul.flops = matmul_flops;
    ops.push_back(std::move(matmul));
}

}  // namespace hfuse::ops
