#include "halide_util.h"

#include "hfuse/error.h"

#include <cctype>
#include <climits>

namespace hfuse::ops {

std::vector<Halide::Var> make_vars(int rank, const std::string &prefix) {
    std::vector<Halide::Var> vars;
    for (int i = 0; i < rank; i++) vars.emplace_back(prefix + std::to_string(i));
    return vars;
}

std::vector<Halide::Expr> as_exprs(const std::vector<Halide::Var> &vars) {
    return std::vector<Halide::Expr>(vars.begin(), vars.end());
}

Halide::Func constant_exterior_by_dim(const Halide::Func &source, const Halide::Expr &value,
                                      const Halide::Region &bounds) {
    const std::vector<Halide::Var> args = source.args();
    if (bounds.size() > args.size()) {
        throw Error("internal: constant_exterior_by_dim: " + std::to_string(bounds.size()) + " bounds for " +
                    source.name() + "'s " + std::to_string(args.size()) + " dims");
    }
    // Reads clamped into bounds through Halide's repeat_edge (a Func of its own, inlined unless an
    // autoscheduler schedules it: Adams2019 schedules the two as it did Halide's constant_exterior).
    const Halide::Func edge = Halide::BoundaryConditions::repeat_edge(source, bounds);
    Halide::Expr e = edge(args);
    // Innermost dim's test innermost; each false (in bounds) `likely`, as Halide's is.
    for (size_t i = 0; i < bounds.size(); i++) {
        const Halide::Range &b = bounds[i];
        if (!b.min.defined() && !b.extent.defined()) continue;
        e = Halide::select(args[i] < b.min || args[i] >= b.min + b.extent, value, Halide::likely(e));
    }
    Halide::Func bounded("constant_exterior");
    bounded(args) = e;
    return bounded;
}

Shape broadcast_shapes(const Shape &a, const Shape &b, const std::string &field) {
    size_t rank = std::max(a.size(), b.size());
    Shape out(rank);
    for (size_t i = 0; i < rank; i++) {
        // Align trailing dims; missing leading dims act as 1.
        int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
        int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
        if (da != db && da != 1 && db != 1) {
            fail_field(field, "shapes [" + to_string(a) + "] and [" + to_string(b) + "] do not broadcast");
        }
        out[i] = da == 1 ? db : da;
    }
    return out;
}

std::vector<Halide::Expr> broadcast_coords(const Shape &in, const std::vector<Halide::Expr> &out) {
    // Halide order: position k of `in` (innermost first) lines up with position k of `out`.
    int rank = static_cast<int>(in.size());
    std::vector<Halide::Expr> coords(rank);
    for (int k = 0; k < rank; k++) {
        int64_t extent = in[rank - 1 - k];
        coords[k] = extent == 1 ? Halide::Expr(0) : out[k];
    }
    return coords;
}

namespace {
thread_local ConstantParams *open_constant_params = nullptr;
}

ConstantParams::ConstantParams() {
    if (open_constant_params) throw Error("internal: ConstantParams opened twice on one thread");
    open_constant_params = this;
}

ConstantParams::~ConstantParams() {
    open_constant_params = nullptr;
}

Halide::Func constant_func(const Halide::Buffer<float> &values, const std::string &name) {
    Halide::Func f(name);
    std::vector<Halide::Var> vars = make_vars(values.dimensions(), name + "_d");
    if (ConstantParams *open = open_constant_params) {
        Halide::ImageParam p(Halide::Float(32), values.dimensions(), name + "_param");
        for (int k = 0; k < values.dimensions(); k++) {
            p.dim(k).set_bounds(values.dim(k).min(), values.dim(k).extent()).set_stride(values.dim(k).stride());
        }
        open->params.push_back(p);
        open->values.push_back(values);
        f(vars) = p(as_exprs(vars));
    } else {
        f(vars) = values(as_exprs(vars));
    }
    return f;
}

Halide::Expr float_bits(uint32_t bits) {
    return Halide::reinterpret(Halide::Float(32), Halide::Expr(bits));
}

Halide::Expr vector_exp(const Halide::Expr &x) {
    // fast_exp is nonsense outside the float range (its 2^k overflows past 88): below -87 the true
    // value is (nearly) denormal, above log(FLT_MAX) it overflows, and between 88 and that limit it is
    // e^(x - 1) * e.
    const Halide::Expr underflows = (x < -87.0f);
    const Halide::Expr overflows = (x > 88.7228394f);
    const Halide::Expr near_limit = (x > 88.0f);
    const Halide::Expr e = Halide::fast_exp(Halide::clamp(x, -87.0f, 88.0f));
    const Halide::Expr top = Halide::fast_exp(Halide::clamp(x, 88.0f, 88.7228394f) - 1.0f) * 2.71828183f;
    return Halide::select(underflows, 0.0f, overflows, float_bits(0x7f800000), near_limit, top, e);
}

Halide::Expr vector_exp_nonpositive(const Halide::Expr &x) {
    return Halide::select(x < -87.0f, 0.0f, Halide::fast_exp(Halide::max(x, -87.0f)));
}

Halide::Expr vector_log(const Halide::Expr &x) {
    // fast_log is accurate on positive finite floats alone.
    const Halide::Expr inf = float_bits(0x7f800000), nan = float_bits(0x7fc00000);
    return Halide::select(x > 0.0f && x < inf, Halide::fast_log(x), x == 0.0f, -inf, x == inf, inf, nan);
}

Halide::Expr vector_erf(const Halide::Expr &x) {
    // Below |x| = 0.5 its Taylor series to x^9 (the next term, x^11 / 1320, is below 4e-7 there and
    // keeps the error relative near 0); above, Abramowitz and Stegun's 7.1.26 (absolute error
    // 1.5e-7) on |x|, odd. erf is +-1 in float beyond |x| = 4 (the exp underflows to 0 first).
    const Halide::Expr a = Halide::abs(x), x2 = x * x;
    const Halide::Expr series =
        1.12837917f * x * (1.0f + x2 * (-1.0f / 3 + x2 * (1.0f / 10 + x2 * (-1.0f / 42 + x2 * (1.0f / 216)))));
    const Halide::Expr t = 1.0f / (1.0f + 0.3275911f * a);
    const Halide::Expr poly =
        t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    const Halide::Expr tail = 1.0f - poly * vector_exp_nonpositive(-x2);
    return Halide::select(a < 0.5f, series, x < 0.0f, -tail, tail);
}

Halide::Expr vector_tanh(const Halide::Expr &x) {
    // tanh(x) = 1 - 2 / (exp(2x) + 1): exact limits +-1, and no cancellation worse than 1e-7 absolute.
    Halide::Expr c = Halide::clamp(x, -10.0f, 10.0f);
    return 1.0f - 2.0f / (Halide::fast_exp(2.0f * c) + 1.0f);
}

Halide::Expr vector_sigmoid(const Halide::Expr &x) {
    return 1.0f / (1.0f + Halide::fast_exp(Halide::clamp(-x, -87.0f, 88.0f)));
}

int to_int(int64_t v, const std::string &field) {
    if (v > INT_MAX || v < INT_MIN) fail_field(field, "value " + std::to_string(v) + " does not fit in 32 bits");
    return static_cast<int>(v);
}

}  // namespace hfuse::ops

#include "hfuse/op_registry.h"

namespace hfuse::ops {

std::string func_name(const LowerContext &ctx, const std::string &suffix) {
    // Halide reserves '.' and '$' in names; ONNX node names often contain '/', '.', ':'.
    std::string s = ctx.node.name + (suffix.empty() ? "" : "_" + suffix);
    for (char &c : s) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
    }
    if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "n_" + s;
    return Halide::Internal::unique_name(s);
}

}  // namespace hfuse::ops
