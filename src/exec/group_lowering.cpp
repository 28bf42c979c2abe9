#include "group_lowering.h"

#include "hfuse/error.h"
#include "ops/halide_util.h"

#include <cctype>

namespace hfuse::exec {
namespace {

// A Func over an ImageParam with every dim pinned to the value's static shape, dense row-major.
Halide::Func bind_param(Halide::ImageParam &param, const Shape &shape, const std::string &name) {
    const int rank = static_cast<int>(shape.size());
    int stride = 1;
    for (int k = 0; k < rank; k++) {
        int extent = static_cast<int>(shape[rank - 1 - k]);
        param.dim(k).set_bounds(0, extent).set_stride(stride);
        stride *= extent;
    }
    Halide::Func f(name + "_in");
    std::vector<Halide::Var> vars = ops::make_vars(rank);
    f(vars) = param(ops::as_exprs(vars));
    return f;
}

std::string halide_name(const std::string &value) {
    std::string s = "v_" + value;
    for (char &c : s) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
    }
    return Halide::Internal::unique_name(s);
}

}  // namespace

WeightBuffers make_weight_buffers(const Graph &graph) {
    WeightBuffers out;
    for (const auto &kv : graph.weights) {
        if (kv.second.type.dtype != DType::Float32) continue;  // int64 weights are read at lowering time
        out[kv.first] = tensor_from_data(kv.second.type.shape, kv.second.f32.data());
    }
    return out;
}

LoweredGroup lower_group(const Graph &graph, const std::vector<const Node *> &nodes,
                         const std::set<std::string> &live_out, const WeightBuffers &weights) {
    LoweredGroup group;
    std::map<std::string, Halide::Func> boundary;  // inputs and weights, as Funcs

    auto func_for = [&](const std::string &value) -> Halide::Func {
        if (auto it = group.values.find(value); it != group.values.end()) return it->second;
        if (auto it = boundary.find(value); it != boundary.end()) return it->second;
        Halide::Func f;
        if (graph.is_weight(value)) {
            auto w = weights.find(value);
            if (w == weights.end()) return Halide::Func();  // int64: ops read the Constant instead
            f = ops::constant_func(w->second, halide_name(value));
        } else {
            const TensorType &t = graph.type_of(value);
            Halide::ImageParam param(Halide::Float(32), t.rank(), halide_name(value));
            f = bind_param(param, t.shape, param.name());
            group.input_values.push_back(value);
            group.params.push_back(param);
        }
        boundary[value] = f;
        return f;
    };

    for (const Node *n : nodes) {
        const OpSchema *op = find_op(n->op);
        LowerContext ctx{*n, Attributes(n->attrs), {}, {}, {}, {}};
        for (const std::string &v : n->inputs) {
            if (v.empty()) {
                ctx.inputs.emplace_back();
                ctx.input_types.push_back(nullptr);
                ctx.constants.push_back(nullptr);
                continue;
            }
            ctx.inputs.push_back(func_for(v));
            ctx.input_types.push_back(&graph.type_of(v));
            ctx.constants.push_back(graph.is_weight(v) ? &graph.weights.at(v) : nullptr);
        }
        for (const std::string &v : n->outputs) ctx.output_types.push_back(graph.type_of(v));
        Lowered lowered;
        try {
            lowered = op->lower(ctx);
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

    // Pipeline outputs must be distinct Funcs: an op that passes its input through (Identity) shares a
    // Func with its producer, so such a value gets a copy stage of its own.
    std::set<std::string> used_names;
    for (const Node *n : nodes) {
        for (const std::string &v : n->outputs) {
            if (!live_out.count(v)) continue;
            Halide::Func f = group.values.at(v);
            if (!used_names.insert(f.name()).second) {
                Halide::Func copy(halide_name(v));
                std::vector<Halide::Var> vars = ops::make_vars(graph.type_of(v).rank());
                copy(vars) = f(ops::as_exprs(vars));
                f = copy;
            }
            const Shape &shape = graph.type_of(v).shape;
            const int rank = static_cast<int>(shape.size());
            int stride = 1;
            for (int k = 0; k < rank; k++) {
                int extent = static_cast<int>(shape[rank - 1 - k]);
                f.output_buffer().dim(k).set_bounds(0, extent).set_stride(stride);
                stride *= extent;
            }
            group.output_values.push_back(v);
            group.output_funcs.push_back(f);
        }
    }
    return group;
}

}  // namespace hfuse::exec
