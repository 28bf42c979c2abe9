// Small helpers shared by op definitions: the ONNX-dims <-> Halide-args convention and broadcasting.
#pragma once

#include "hfuse/tensor.h"

#include <Halide.h>

#include <string>
#include <vector>

namespace hfuse::ops {

// Pure Vars for a tensor of the given rank, in Halide order: vars[0] is the innermost ONNX dim.
std::vector<Halide::Var> make_vars(int rank, const std::string &prefix = "d");

std::vector<Halide::Expr> as_exprs(const std::vector<Halide::Var> &vars);

// The Halide argument position of ONNX dim `dim` in a tensor of rank `rank`.
inline int halide_arg(int dim, int rank) {
    return rank - 1 - dim;
}

// The ONNX/numpy broadcast of two shapes; throws an Error naming `field` if they are incompatible.
Shape broadcast_shapes(const Shape &a, const Shape &b, const std::string &field);

// Coordinates into an input of shape `in` when the output (rank >= in.size()) is indexed by `out`
// (Halide order). Broadcast dims (extent 1) read index 0.
std::vector<Halide::Expr> broadcast_coords(const Shape &in, const std::vector<Halide::Expr> &out);

// A Func defined over a weight's values (it is inlined into users). The Buffer is captured by the
// Func, i.e. compiled into the pipeline, unless a ConstantParams is open on this thread.
Halide::Func constant_func(const Halide::Buffer<float> &values, const std::string &name);

// While one is open on a thread, constant_func() there reads each constant through an ImageParam of
// the buffer's exact dims (so the code refuses any other buffer and folds its strides) and records
// the pair: the compiled code then depends on the constants' shapes, not their values, and groups
// that differ only in their weights share one compiled pipeline (the executor binds each group's own
// buffers before it runs). Not nestable.
class ConstantParams {
public:
    ConstantParams();
    ~ConstantParams();
    ConstantParams(const ConstantParams &) = delete;
    ConstantParams &operator=(const ConstantParams &) = delete;

    // In the order constant_func() was called: deterministic for a deterministic lowering.
    std::vector<Halide::ImageParam> params;
    std::vector<Halide::Buffer<float>> values;
};

// An IEEE float constant by its bits (infinities, NaN): Halide's simplifier keeps it as it is.
Halide::Expr float_bits(uint32_t bits);

// exp and tanh that vectorize. Halide::exp and Halide::tanh call libm once per lane (tanh of 128
// floats took 2 us, more than the 128x128 GEMM before it); these use Halide::fast_exp (a polynomial,
// relative error ~1e-6) on an argument clamped to where it is accurate. exp(x) for x < -87 is 0, above
// 88.73 (float's largest) +inf; tanh(x) is +-1 beyond |x| = 10 in float.
Halide::Expr vector_exp(const Halide::Expr &x);
// vector_exp for x <= 0 alone (x - max(x), as softmax takes it): the same values there, half the work.
Halide::Expr vector_exp_nonpositive(const Halide::Expr &x);
Halide::Expr vector_tanh(const Halide::Expr &x);
// The logistic function 1 / (1 + e^-x) on one fast_exp: vector_exp computes two and selects between
// them for the exact edges of e^x, which the logistic does not need. Its argument is clamped to
// [-87, 88], where fast_exp is accurate (at the infinities it is NaN): below x = -88 the logistic is
// then 6e-39 for values smaller still, above x = 87 it rounds to 1.
Halide::Expr vector_sigmoid(const Halide::Expr &x);
// log and erf that vectorize, as accurate (relative error ~1e-6; erf's absolute error below 1e-6).
// log follows C's at the edges: log(0) = -inf, log(+inf) = +inf, NaN below 0 and for NaN.
Halide::Expr vector_log(const Halide::Expr &x);
Halide::Expr vector_erf(const Halide::Expr &x);

// `source` reading `value` outside `bounds` (an undefined Range leaves that dim unbounded), as
// Halide::BoundaryConditions::constant_exterior, but tested one dim at a time. Halide's one test,
// (x < 0 || y < 0 || ...), cannot be solved for a loop over x inside the loop over y, so no loop was
// partitioned: a padded copy vectorized along x read every vector through a select and a gather of
// clamped lanes. Tested per dim, the y loop splits off its padding rows and the x loop its edge
// vectors, and the interior is dense loads (conv_cv's blocked copy of a planar input, 3x3 64->128
// stride 2 at 56x56, Sapphire Rapids, 2 threads, interleaved: the group 0.64-0.76 -> 0.47-0.49 ms).
Halide::Func constant_exterior_by_dim(const Halide::Func &source, const Halide::Expr &value,
                                      const Halide::Region &bounds);

// Checked narrowing for extents and offsets used in Halide expressions.
int to_int(int64_t v, const std::string &field);

}  // namespace hfuse::ops

namespace hfuse {
struct LowerContext;
}

namespace hfuse::ops {
// A unique, readable Halide Func name for a stage of the node being lowered.
std::string func_name(const LowerContext &ctx, const std::string &suffix = "");
}  // namespace hfuse::ops
