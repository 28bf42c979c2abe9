#include "group_lowering.h"

#include "hfuse/error.h"
#include "ops/attention_lowering.h"
#include "ops/halide_util.h"

#include <cctype>
#include <set>

namespace hfuse::exec {
namespace {

// Pins a buffer's dims to `dims` (a value's storage_dims: dense NCHW pins the static shape, so the
// compiled pipeline refuses anything else and addresses fold to constants).
template <typename Dims>
void pin_dims(Dims dim, const std::vector<halide_dimension_t> &dims) {
    for (size_t k = 0; k < dims.size(); k++) {
        dim(static_cast<int>(k)).set_bounds(dims[k].min, dims[k].extent).set_stride(dims[k].stride);
    }
}

// The Funcs a group reads from outside: ImageParams for activations, constant Funcs for weights.
class Boundary {
public:
    // `bound` and `layouts` (may be null) must outlive the Boundary.
    Boundary(const Graph &g, const WeightBuffers &w, LoweredGroup &group, const BoundValues *bound = nullptr,
             const ValueLayouts *layouts = nullptr)
        : g_(g), weights_(w), group_(group), bound_(bound), layouts_(layouts) {}

    // The layout `value` crosses the group's boundary in (planar unless chosen otherwise).
    ValueLayout layout_of(const std::string &value) const {
        return layouts_ ? exec::layout_of(*layouts_, value) : ValueLayout();
    }

    // `value`'s storage if the group reads it channel-blocked (func_for first), else none.
    BlockedInput blocked_for(const std::string &value) const {
        auto it = blocked_.find(value);
        return it == blocked_.end() ? BlockedInput() : it->second;
    }

    // A Func for `value`: defined inside the group if it is, otherwise a boundary Func (an undefined
    // Func for int64 weights, which ops read as Constants).
    Halide::Func func_for(const std::string &value) {
        if (auto it = group_.values.find(value); it != group_.values.end()) return it->second;
        if (auto it = funcs_.find(value); it != funcs_.end()) return it->second;
        if (bound_) {
            if (auto it = bound_->find(value); it != bound_->end()) {
                const ValueLayout layout = layout_of(value);
                if (layout.planar()) return it->second;
                // An earlier group's Func in storage order (bi, x, y, cb, n).
                return funcs_[value] = read_blocked(value, it->second, layout, halide_name(value, "view_"));
            }
        }
        Halide::Func f;
        if (g_.is_weight(value)) {
            auto w = weights_.find(value);
            if (w == weights_.end()) return Halide::Func();
            f = ops::constant_func(w->second, halide_name(value));
        } else {
            const TensorType &t = g_.type_of(value);
            const ValueLayout layout = layout_of(value);
            Halide::ImageParam param(Halide::Float(32), layout.planar() ? t.rank() : 5, halide_name(value));
            pin_dims([&](int k) { return param.dim(k); }, storage_dims(t.shape, layout));
            if (layout.planar()) {
                f = Halide::Func(param.name() + "_in");
                std::vector<Halide::Var> vars = ops::make_vars(t.rank());
                f(vars) = param(ops::as_exprs(vars));
            } else {
                Halide::Func storage(param.name() + "_blocked");
                std::vector<Halide::Var> s = ops::make_vars(5);
                storage(s) = param(ops::as_exprs(s));
                f = read_blocked(value, storage, layout, param.name() + "_in");
            }
            group_.input_values.push_back(value);
            group_.params.push_back(param);
        }
        funcs_[value] = f;
        return f;
    }

    // Declares `value` (computed by `f`) an output of the group's pipeline.
    void add_output(const std::string &value, Halide::Func f) {
        // Pipeline outputs must be distinct Funcs: an op that passes its input through (Identity)
        // shares a Func with its producer, so such a value gets a copy stage of its own.
        if (!output_names_.insert(f.name()).second) {
            f = pure_copy(f, g_.type_of(value).rank(), halide_name(value));
        }
        const ValueLayout layout = layout_of(value);
        if (!layout.planar()) {
            // In storage order, (bi, x, y, cb, n), into the storage's interior.
            Halide::Func store(halide_name(value, "blocked_"));
            std::vector<Halide::Var> s = ops::make_vars(5);
            store(s) = f(s[1], s[2], s[3] * layout.block + s[0], s[4]);
            f = store;
            group_.layouts[value] = layout;
        }
        pin_dims([&](int k) { return f.output_buffer().dim(k); }, interior_dims(g_.type_of(value).shape, layout));
        group_.output_values.push_back(value);
        group_.output_funcs.push_back(f);
    }

private:
    // The value stored in `layout` by `storage` (bi, x, y, cb, n), as a Func `name` of (x, y, c, n); ops
    // that can read the storage itself find it through blocked_for().
    Halide::Func read_blocked(const std::string &value, Halide::Func storage, const ValueLayout &layout,
                              const std::string &name) {
        Halide::Func f(name);
        std::vector<Halide::Var> v = ops::make_vars(4);  // x, y, c, n
        const int b = layout.block;
        f(v) = storage(v[2] % b, v[0], v[1], v[2] / b, v[3]);
        blocked_[value] = {storage, b, layout.halo_x, layout.halo_y};
        group_.layouts[value] = layout;
        return f;
    }

    const Graph &g_;
    const WeightBuffers &weights_;
    LoweredGroup &group_;
    const BoundValues *bound_;
    const ValueLayouts *layouts_;
    std::map<std::string, Halide::Func> funcs_;
    std::map<std::string, BlockedInput> blocked_;
    std::set<std::string> output_names_;
};

// `n` as its group's lowerings say: an attention's products as one (ops/attention_lowering.h), the
// rest by their ops.
Lowered lower_node(const Graph &graph, const OpSchema &op, LowerContext &ctx, const OpLowerings &lowerings,
                   const LoweredGroup &group) {
    auto it = lowerings.attention.find(ctx.node.name);
    if (it == lowerings.attention.end()) return op.lower(ctx);
    const AttentionLowering &a = it->second;
    if (a.role == AttentionLowering::Role::Scores) {
        const Halide::Func keys = ops::clamped_keys(ctx, ctx.inputs[1], ctx.output_types[0].shape.back());
        // Q through a copy the template computes per tile of queries: what Q's producers compute (a
        // scale, a slice of a fused projection) once per element, not once per broadcast.
        const Halide::Func queries =
            pure_copy(ctx.inputs[0], ctx.inputs[0].dimensions(), ops::func_name(ctx, "queries"));
        ctx.inputs[0] = queries;
        ctx.inputs[1] = keys;
        Lowered lowered = op.lower(ctx);
        lowered.parts["keys"] = keys;
        lowered.parts["queries"] = queries;
        return lowered;
    }
    auto scores = group.values.find(a.softmax_input);
    if (scores == group.values.end()) {
        throw Error("internal: the attention's scores '" + a.softmax_input + "' are not computed in its group");
    }
    return ops::lower_online_attention(ctx, scores->second, graph.type_of(a.softmax_input).shape, a.key_block);
}

}  // namespace

std::string halide_name(const std::string &value, const std::string &prefix) {
    std::string s = prefix + value;
    for (char &c : s) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
    }
    return Halide::Internal::unique_name(s);
}

Halide::Func pure_copy(const Halide::Func &f, int rank, const std::string &name) {
    Halide::Func copy(name);
    std::vector<Halide::Var> vars = ops::make_vars(rank);
    copy(vars) = f(ops::as_exprs(vars));
    return copy;
}

void pin_output_shape(Halide::Func f, const Shape &shape) {
    pin_dims([&](int k) { return f.output_buffer().dim(k); }, storage_dims(shape, {}));
}

void pin_input_shape(Halide::ImageParam p, const Shape &shape) {
    pin_dims([&](int k) { return p.dim(k); }, storage_dims(shape, {}));
}

WeightBuffers make_weight_buffers(const Graph &graph) {
    WeightBuffers out;
    for (const auto &kv : graph.weights) {
        if (kv.second.type.dtype != DType::Float32) continue;  // int64 weights are read at lowering time
        out[kv.first] = tensor_from_data(kv.second.type.shape, kv.second.f32.data());
    }
    return out;
}

LoweredGroup lower_group(const Graph &graph, const std::vector<const Node *> &nodes,
                         const std::set<std::string> &live_out, const WeightBuffers &weights, const BoundValues &bound,
                         const OpLowerings &lowerings, const ValueLayouts &layouts) {
    LoweredGroup group;
    Boundary boundary(graph, weights, group, &bound, &layouts);
    for (const Node *n : nodes) {
        const OpSchema *op = find_op(n->op);
        LowerContext ctx{*n, Attributes(n->attrs), {}, {}, {}, {}, {}, {}, {}};
        if (auto it = lowerings.conv.find(n->name); it != lowerings.conv.end()) ctx.conv_lowering = it->second;
        if (auto it = lowerings.gemm.find(n->name); it != lowerings.gemm.end()) ctx.gemm_lowering = it->second;
        for (const std::string &v : n->inputs) {
            if (v.empty()) {
                ctx.inputs.emplace_back();
                ctx.input_types.push_back(nullptr);
                ctx.constants.push_back(nullptr);
                continue;
            }
            ctx.inputs.push_back(boundary.func_for(v));
            ctx.blocked_inputs.resize(ctx.inputs.size());
            ctx.blocked_inputs.back() = boundary.blocked_for(v);
            ctx.input_types.push_back(&graph.type_of(v));
            ctx.constants.push_back(graph.is_weight(v) ? &graph.weights.at(v) : nullptr);
        }
        for (const std::string &v : n->outputs) ctx.output_types.push_back(graph.type_of(v));
        Lowered lowered;
        try {
            lowered = lower_node(graph, *op, ctx, lowerings, group);
        } catch (Error &e) {
            throw e.at_node(n->name, n->op).in_file(graph.source);
        } catch (const Halide::Error &e) {
            throw Error(std::string("Halide rejected the definition: ") + e.what()).at_node(n->name, n->op);
        }
        if (lowered.outputs.size() != n->outputs.size()) {
            throw Error("lowering produced " + std::to_string(lowered.outputs.size()) + " outputs, expected " +
                        std::to_string(n->outputs.size()))
                .at_node(n->name, n->op);
        }
        for (size_t i = 0; i < n->outputs.size(); i++) group.values[n->outputs[i]] = lowered.outputs[i];
        group.nodes.push_back({n, std::move(lowered)});
    }
    for (const Node *n : nodes) {
        for (const std::string &v : n->outputs) {
            if (live_out.count(v)) boundary.add_output(v, group.values.at(v));
        }
    }
    return group;
}

LoweredGroup lower_backend_group(const Graph &graph, const std::vector<const Node *> &nodes,
                                 const std::set<std::string> &live_out, const WeightBuffers &weights,
                                 const BackendPattern &pattern) {
    LoweredGroup group;
    Boundary boundary(graph, weights, group);
    std::vector<std::string> names, ops;
    for (const Node *n : nodes) {
        names.push_back(n->name);
        ops.push_back(n->op);
    }
    // A plan file can name any pattern for any group: check it fits before trusting the backend.
    auto mismatch = [&](const std::string &why) {
        std::string chain;
        for (const std::string &op : pattern.ops) chain += (chain.empty() ? "" : " -> ") + op;
        return Error("the group does not match backend pattern '" + pattern.id() + "' (" + chain + "): " + why)
            .at_node(nodes.front()->name, nodes.front()->op)
            .in_file(graph.source);
    };
    if (ops != pattern.ops) throw mismatch("its ops differ");
    EpilogueDescriptor d;
    try {
        d = describe_epilogue(graph, names);
    } catch (const Error &e) {
        throw mismatch(e.what());
    }
    if (pattern.accepts && !pattern.accepts(graph, d)) throw mismatch("the backend does not accept it");
    const std::string &result = nodes.back()->outputs[0];
    for (const Node *n : nodes) {
        for (const std::string &v : n->outputs) {
            if (live_out.count(v) && v != result) {
                throw Error("a backend group hands out only its last value; '" + v + "' is needed outside")
                    .at_node(n->name, n->op);
            }
        }
    }
    std::map<std::string, Halide::Func> values;
    std::set<std::string> inside;
    for (const Node *n : nodes) inside.insert(n->outputs.begin(), n->outputs.end());
    for (const Node *n : nodes) {
        for (const std::string &v : n->inputs) {
            if (!v.empty() && !inside.count(v) && !values.count(v)) values[v] = boundary.func_for(v);
        }
    }
    BackendLowering lowered;
    try {
        lowered = pattern.lower(graph, d, values, graph.type_of(result));
    } catch (Error &e) {
        throw e.at_node(d.master, d.master_op).in_file(graph.source);
    } catch (const std::exception &e) {  // Halide::Error and anything else a backend throws
        throw Error(std::string("backend '") + pattern.id() + "' failed: " + e.what())
            .at_node(d.master, d.master_op)
            .in_file(graph.source);
    }
    // Halide names the group's pipeline, a function of its own, after its output Func (by the name
    // Halide gave it: a repeated name gets "$1", ...): an extern function of that name is then called
    // with the pipeline's arguments, and LLVM fails inside Halide ("Incorrect number of arguments
    // passed to called function!"), or the process crashes. Refuse any Func of the backend's named
    // like a function it calls.
    if (lowered.output.defined()) {
        std::set<std::string> symbols;
        for (const auto &kv : lowered.jit_externs) symbols.insert(kv.first);
        const auto funcs = Halide::Internal::find_transitive_calls(lowered.output.function());
        for (const auto &kv : funcs) {
            if (kv.second.has_extern_definition()) symbols.insert(kv.second.extern_function_name());
        }
        for (const auto &kv : funcs) {
            if (symbols.count(kv.first)) {
                throw Error("backend '" + pattern.id() + "' names a Halide Func '" + kv.first +
                            "' like the extern function it calls; Halide cannot tell them apart: name the Func "
                            "otherwise")
                    .at_node(d.master, d.master_op)
                    .in_file(graph.source);
            }
        }
    }
    group.values[result] = lowered.output;
    group.jit_externs = lowered.jit_externs;
    boundary.add_output(result, lowered.output);
    return group;
}

}  // namespace hfuse::exec
