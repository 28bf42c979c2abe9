// Unary activations and math (Relu, LeakyRelu, Clip, Sigmoid, Tanh, HardSigmoid, HardSwish, Erf,
// Sqrt, Reciprocal, Exp, Log, Neg, Abs, Gelu, Not), the binary arithmetic ops with numpy broadcasting (Add,
// Sub, Mul, Div; Pow apart, for its constant exponents), comparisons and logic (Equal, Greater, Less,
// GreaterOrEqual, LessOrEqual, And, Or, Xor: booleans as float32 0 and 1), Where, and the variadic
// ones (Max, Min, Sum, Mean). Each
// family is a table: one entry per op holding only its formula, sharing a single schema builder.
#include "halide_util.h"
#include "hfuse/error.h"
#include "op_families.h"

#include <optional>

namespace hfuse::ops {
namespace {

using Halide::Expr;
using Halide::Func;

// Every op here counts one FLOP per output element, transcendental or not.
double one_per_element(const InferContext &, const std::vector<TensorType> &outputs) {
    return static_cast<double>(num_elements(outputs[0].shape));
}

// ---- unary activations ----------------------------------------------------------------------------

// Clip's bound `i` (1 = min, 2 = max): absent, or a float weight holding exactly one value.
// Shared by infer (which reports problems) and lower (which reads the value).
std::optional<float> clip_bound(bool present, const std::vector<const Constant *> &constants, int i) {
    if (!present) return std::nullopt;
    const std::string field = i == 1 ? "input 1 (min)" : "input 2 (max)";
    const Constant *k = i < (int)constants.size() ? constants[i] : nullptr;
    if (k == nullptr) fail_field(field, "must be a constant (a weight), not a computed value");
    if (k->type.dtype != DType::Float32) {
        fail_field(field, std::string("must be float32, got ") + to_string(k->type.dtype));
    }
    if (k->type.rank() > 1 || k->f32.size() != 1) {
        fail_field(field,
                   "must hold a single value (rank 0 or shape [1]), got shape [" + to_string(k->type.shape) + "]");
    }
    return k->f32[0];
}

Expr clip(const Expr &x, const LowerContext &ctx) {
    // max with min first, then min with max: when min > max every value becomes max, as ONNX specifies.
    Expr y = x;
    if (auto lo = clip_bound(ctx.has_input(1), ctx.constants, 1)) y = Halide::max(y, *lo);
    if (auto hi = clip_bound(ctx.has_input(2), ctx.constants, 2)) y = Halide::min(y, *hi);
    return y;
}

void check_clip(const InferContext &ctx) {
    for (int i = 1; i <= 2; i++) clip_bound(ctx.has_input(i), ctx.constants, i);
}

struct UnaryOp {
    const char *name;
    std::vector<std::string> attributes;
    Expr (*formula)(const Expr &x, const LowerContext &ctx);
    int max_inputs = 1;
    std::vector<int> constant_inputs = {};
    void (*check)(const InferContext &ctx) = nullptr;  // extra validation beyond arity and types
    std::vector<std::string> string_attributes = {};   // not type-checked as floats (check() does)
};

// Gelu (opset 20): x * Phi(x), Phi the standard normal CDF, exactly through erf ("none") or by
// tanh's approximation ("tanh").
bool gelu_tanh(const Attributes &attrs) {
    const std::string mode = attrs.get_string("approximate", "none");
    if (mode != "none" && mode != "tanh")
        fail_field("approximate", "must be \"none\" or \"tanh\", got \"" + mode + "\"");
    return mode == "tanh";
}

Expr gelu(const Expr &x, const LowerContext &ctx) {
    if (gelu_tanh(ctx.attrs)) return 0.5f * x * (1.0f + vector_tanh(0.797884561f * (x + 0.044715f * x * x * x)));
    return 0.5f * x * (1.0f + vector_erf(x * 0.707106781f));
}

const std::vector<UnaryOp> &unary_ops() {
    static const std::vector<UnaryOp> table = {
        {"Relu", {}, [](const Expr &x, const LowerContext &) { return Halide::max(x, 0.0f); }},
        {"LeakyRelu",
         {"alpha"},
         [](const Expr &x, const LowerContext &ctx) {
             return Halide::select(x < 0.0f, ctx.attrs.get_float("alpha", 0.01f) * x, x);
         }},
        {"Clip", {}, clip, 3, {1, 2}, check_clip},
        {"Sigmoid", {}, [](const Expr &x, const LowerContext &) { return vector_sigmoid(x); }},
        {"Tanh", {}, [](const Expr &x, const LowerContext &) { return vector_tanh(x); }},
        {"HardSigmoid",
         {"alpha", "beta"},
         [](const Expr &x, const LowerContext &ctx) {
             Expr alpha = ctx.attrs.get_float("alpha", 0.2f), beta = ctx.attrs.get_float("beta", 0.5f);
             return Halide::clamp(alpha * x + beta, 0.0f, 1.0f);
         }},
        {"HardSwish",
         {},
         [](const Expr &x, const LowerContext &) { return x * Halide::clamp(x * (1.0f / 6.0f) + 0.5f, 0.0f, 1.0f); }},
        {"Erf", {}, [](const Expr &x, const LowerContext &) { return vector_erf(x); }},
        {"Sqrt", {}, [](const Expr &x, const LowerContext &) { return Halide::sqrt(x); }},
        {"Reciprocal", {}, [](const Expr &x, const LowerContext &) { return 1.0f / x; }},
        {"Exp", {}, [](const Expr &x, const LowerContext &) { return vector_exp(x); }},
        {"Log", {}, [](const Expr &x, const LowerContext &) { return vector_log(x); }},
        {"Neg", {}, [](const Expr &x, const LowerContext &) { return -x; }},
        {"Abs", {}, [](const Expr &x, const LowerContext &) { return Halide::abs(x); }},
        {"Gelu", {}, gelu, 1, {}, [](const InferContext &ctx) { gelu_tanh(ctx.attrs); }, {"approximate"}},
        {"Not", {}, [](const Expr &x, const LowerContext &) { return Halide::select(x == 0.0f, 1.0f, 0.0f); }},
    };
    return table;
}

OpSchema unary_schema(const UnaryOp &op) {
    OpSchema s;
    s.name = op.name;
    s.kind = PatternKind::Elementwise;
    s.max_inputs = op.max_inputs;
    s.attributes = op.attributes;
    s.attributes.insert(s.attributes.end(), op.string_attributes.begin(), op.string_attributes.end());
    s.constant_inputs = op.constant_inputs;
    s.flops = one_per_element;
    auto check = op.check;
    s.infer = [check, attributes = op.attributes](const InferContext &ctx) {
        for (const std::string &a : attributes) ctx.attrs.get_float(a, 0.0f);  // all are floats: type-check
        if (check) check(ctx);
        return std::vector<TensorType>{*ctx.inputs[0]};
    };
    auto formula = op.formula;
    s.lower = [formula](const LowerContext &ctx) {
        std::vector<Expr> args = as_exprs(make_vars(ctx.output_types[0].rank()));
        Func out(func_name(ctx));
        out(args) = formula(ctx.inputs[0](args), ctx);
        return Lowered{{out}, {}, {}};
    };
    return s;
}

// ---- binary arithmetic with numpy broadcasting ------------------------------------------------------

struct BinaryOp {
    const char *name;
    Expr (*formula)(const Expr &a, const Expr &b);
};

// Booleans are float32 0 and 1 (hfuse computes in float32); an operand is true where it is not 0.
Expr as_float(const Expr &condition) {
    return Halide::select(condition, 1.0f, 0.0f);
}

const BinaryOp binary_ops[] = {
    {"Add", [](const Expr &a, const Expr &b) { return a + b; }},
    {"Sub", [](const Expr &a, const Expr &b) { return a - b; }},
    {"Mul", [](const Expr &a, const Expr &b) { return a * b; }},
    {"Div", [](const Expr &a, const Expr &b) { return a / b; }},
    {"Equal", [](const Expr &a, const Expr &b) { return as_float(a == b); }},
    {"Greater", [](const Expr &a, const Expr &b) { return as_float(a > b); }},
    {"Less", [](const Expr &a, const Expr &b) { return as_float(a < b); }},
    {"GreaterOrEqual", [](const Expr &a, const Expr &b) { return as_float(a >= b); }},
    {"LessOrEqual", [](const Expr &a, const Expr &b) { return as_float(a <= b); }},
    {"And", [](const Expr &a, const Expr &b) { return as_float(a != 0.0f && b != 0.0f); }},
    {"Or", [](const Expr &a, const Expr &b) { return as_float(a != 0.0f || b != 0.0f); }},
    {"Xor", [](const Expr &a, const Expr &b) { return as_float((a != 0.0f) != (b != 0.0f)); }},
};

// Where(condition, X, Y), the three broadcast together: X where the condition is not 0, else Y.
OpSchema where_schema() {
    OpSchema s;
    s.name = "Where";
    s.kind = PatternKind::Broadcast;
    s.min_inputs = s.max_inputs = 3;
    s.flops = one_per_element;
    s.infer = [](const InferContext &ctx) {
        Shape out = broadcast_shapes(ctx.inputs[0]->shape, ctx.inputs[1]->shape, "input 1 (X)");
        out = broadcast_shapes(out, ctx.inputs[2]->shape, "input 2 (Y)");
        return std::vector<TensorType>{{DType::Float32, out}};
    };
    s.lower = [](const LowerContext &ctx) {
        std::vector<Expr> args = as_exprs(make_vars(ctx.output_types[0].rank()));
        Expr in[3];
        for (int i = 0; i < 3; i++) in[i] = ctx.inputs[i](broadcast_coords(ctx.input_types[i]->shape, args));
        Func out(func_name(ctx));
        out(args) = Halide::select(in[0] != 0.0f, in[1], in[2]);
        return Lowered{{out}, {}, {}};
    };
    return s;
}

OpSchema binary_schema(const BinaryOp &op) {
    OpSchema s;
    s.name = op.name;
    s.kind = PatternKind::Broadcast;
    s.min_inputs = s.max_inputs = 2;
    s.flops = one_per_element;
    s.infer = [](const InferContext &ctx) {
        return std::vector<TensorType>{
            {DType::Float32, broadcast_shapes(ctx.inputs[0]->shape, ctx.inputs[1]->shape, "input 1 (B)")}};
    };
    auto formula = op.formula;
    s.lower = [formula](const LowerContext &ctx) {
        std::vector<Expr> args = as_exprs(make_vars(ctx.output_types[0].rank()));
        Expr a = ctx.inputs[0](broadcast_coords(ctx.input_types[0]->shape, args));
        Expr b = ctx.inputs[1](broadcast_coords(ctx.input_types[1]->shape, args));
        Func out(func_name(ctx));
        out(args) = formula(a, b);
        return Lowered{{out}, {}, {}};
    };
    return s;
}

// Pow: C's pow, broadcast. An exponent given as a weight of one value the code knows (the executor
// keys such small weights by value): the small integers and halves that models use (LayerNorm's
// square, GELU's cube, a square root) become multiplications and square roots, which vectorize
// where Halide::pow calls libm once per lane.
std::optional<Expr> pow_by_constant(const Expr &a, float e) {
    if (e == 0.0f) return Expr(1.0f);
    if (e == 1.0f) return a;
    if (e == 2.0f) return a * a;
    if (e == 3.0f) return a * a * a;
    if (e == 4.0f) return (a * a) * (a * a);
    if (e == 0.5f) return Halide::sqrt(a);
    if (e == -0.5f) return 1.0f / Halide::sqrt(a);
    if (e == -1.0f) return 1.0f / a;
    if (e == -2.0f) return 1.0f / (a * a);
    return std::nullopt;
}

OpSchema pow_schema() {
    OpSchema s = binary_schema({"Pow", [](const Expr &a, const Expr &b) { return Halide::pow(a, b); }});
    s.lower = [](const LowerContext &ctx) {
        std::vector<Expr> args = as_exprs(make_vars(ctx.output_types[0].rank()));
        Expr a = ctx.inputs[0](broadcast_coords(ctx.input_types[0]->shape, args));
        Expr b = ctx.inputs[1](broadcast_coords(ctx.input_types[1]->shape, args));
        std::optional<Expr> by_constant;
        if (const Constant *k = ctx.constants.size() > 1 ? ctx.constants[1] : nullptr; k && k->f32.size() == 1)
            by_constant = pow_by_constant(a, k->f32[0]);
        Func out(func_name(ctx));
        out(args) = by_constant ? *by_constant : Halide::pow(a, b);
        return Lowered{{out}, {}, {}};
    };
    return s;
}

// ---- variadic ops with numpy broadcasting ------------------------------------------------------------

struct VariadicOp {
    const char *name;
    Expr (*combine)(const Expr &a, const Expr &b);
    bool mean = false;  // the combination divided by the number of inputs
};

const VariadicOp variadic_ops[] = {
    {"Max", [](const Expr &a, const Expr &b) { return Halide::max(a, b); }},
    {"Min", [](const Expr &a, const Expr &b) { return Halide::min(a, b); }},
    {"Sum", [](const Expr &a, const Expr &b) { return a + b; }},
    {"Mean", [](const Expr &a, const Expr &b) { return a + b; }, true},
};

OpSchema variadic_schema(const VariadicOp &op) {
    OpSchema s;
    s.name = op.name;
    s.kind = PatternKind::Broadcast;
    s.min_inputs = 1;
    s.max_inputs = -1;
    s.flops = one_per_element;
    s.infer = [](const InferContext &ctx) {
        Shape out = ctx.inputs[0]->shape;
        for (size_t i = 1; i < ctx.inputs.size(); i++)
            out = broadcast_shapes(out, ctx.inputs[i]->shape, "input " + std::to_string(i));
        return std::vector<TensorType>{{DType::Float32, out}};
    };
    s.lower = [op](const LowerContext &ctx) {
        std::vector<Expr> args = as_exprs(make_vars(ctx.output_types[0].rank()));
        Expr e;
        for (size_t i = 0; i < ctx.inputs.size(); i++) {
            Expr v = ctx.inputs[i](broadcast_coords(ctx.input_types[i]->shape, args));
            e = e.defined() ? op.combine(e, v) : v;
        }
        if (op.mean) e = e * (1.0f / static_cast<float>(ctx.inputs.size()));
        Func out(func_name(ctx));
        out(args) = e;
        return Lowered{{out}, {}, {}};
    };
    return s;
}

}  // namespace

void register_elementwise_ops(std::vector<OpSchema> &ops) {
    for (const UnaryOp &op : unary_ops()) ops.push_back(unary_schema(op));
    for (const BinaryOp &op : binary_ops) ops.push_back(binary_schema(op));
    ops.push_back(pow_schema());
    ops.push_back(where_schema());
    for (const VariadicOp &op : variadic_ops) ops.push_back(variadic_schema(op));
}

}  // namespace hfuse::ops
