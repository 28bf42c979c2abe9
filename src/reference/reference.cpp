#include "hfuse/reference.h"

#include "hfuse/error.h"
#include "reference/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace hfuse::reference {
namespace {

RefTensor float_view(const Constant &c) {
    RefTensor t{c.type.shape, c.f32};
    if (c.type.dtype == DType::Int64) t.data.assign(c.i64.begin(), c.i64.end());
    return t;
}

}  // namespace

std::vector<RefTensor> eval_node(const Node &node, const std::vector<const RefTensor *> &inputs,
                                 const std::vector<const Constant *> &constants,
                                 const std::vector<TensorType> &output_types) {
    try {
        detail::OpFn fn = detail::find_op_fn(node.op);
        if (fn == nullptr) throw Error("op type '" + node.op + "' is not supported by the reference evaluator");
        // Ops see every present input as a float tensor, including weights only passed as constants.
        const size_t n = std::max(inputs.size(), constants.size());
        std::vector<RefTensor> views(n);
        detail::OpArgs args{node, Attributes(node.attrs), inputs, constants, static_cast<int>(node.outputs.size())};
        args.inputs.resize(n, nullptr);
        args.constants.resize(n, nullptr);
        for (size_t i = 0; i < n; i++) {
            if (args.inputs[i] == nullptr && args.constants[i] != nullptr) {
                views[i] = float_view(*args.constants[i]);
                args.inputs[i] = &views[i];
            }
        }
        std::vector<RefTensor> outputs = fn(args);
        // Shapes are computed here from the attributes, so this also cross-checks shape inference.
        if (!output_types.empty()) {
            if (output_types.size() != outputs.size()) {
                throw Error("shape inference gives " + std::to_string(output_types.size()) +
                            " outputs, the reference computes " + std::to_string(outputs.size()));
            }
            for (size_t i = 0; i < outputs.size(); i++) {
                if (output_types[i].shape != outputs[i].shape) {
                    throw Error("output " + std::to_string(i) + ": shape inference gives [" +
                                to_string(output_types[i].shape) + "], the reference computes [" +
                                to_string(outputs[i].shape) + "]");
                }
            }
        }
        return outputs;
    } catch (Error &e) {
        e.at_node(node.name, node.op);
        throw;
    }
}

std::map<std::string, RefTensor> run(const Graph &graph, const std::map<std::string, RefTensor> &inputs) {
    try {
        for (const GraphInput &in : graph.inputs) {
            auto it = inputs.find(in.name);
            if (it == inputs.end()) throw Error("model input '" + in.name + "' is not given");
            if (it->second.shape != in.shape || it->second.data.size() != static_cast<size_t>(num_elements(in.shape))) {
                throw Error("model input '" + in.name + "' has shape [" + to_string(it->second.shape) + "] (" +
                            std::to_string(it->second.data.size()) + " values), the model expects [" +
                            to_string(in.shape) + "]");
            }
        }
        // Node outputs are dropped after their last use, so large models do not hold every intermediate.
        std::map<std::string, size_t> last_use;
        for (size_t i = 0; i < graph.nodes.size(); i++) {
            for (const std::string &v : graph.nodes[i].inputs) last_use[v] = i;
        }
        for (const std::string &v : graph.outputs) last_use[v] = graph.nodes.size();

        std::map<std::string, RefTensor> values;  // node outputs, and float views of weights
        auto lookup = [&](const std::string &name) -> const RefTensor * {
            if (auto it = values.find(name); it != values.end()) return &it->second;
            if (auto it = inputs.find(name); it != inputs.end() && graph.is_input(name)) return &it->second;
            if (auto it = graph.weights.find(name); it != graph.weights.end()) {
                return &values.emplace(name, float_view(it->second)).first->second;
            }
            throw Error("value '" + name + "' is not defined before it is used");
        };

        for (size_t i = 0; i < graph.nodes.size(); i++) {
            const Node &node = graph.nodes[i];
            std::vector<const RefTensor *> args;
            std::vector<const Constant *> constants;
            for (const std::string &v : node.inputs) {
                args.push_back(v.empty() ? nullptr : lookup(v));
                auto w = graph.weights.find(v);
                constants.push_back(w == graph.weights.end() ? nullptr : &w->second);
            }
            std::vector<TensorType> output_types;
            for (const std::string &v : node.outputs) output_types.push_back(graph.type_of(v));
            std::vector<RefTensor> outputs = eval_node(node, args, constants, output_types);
            for (size_t j = 0; j < outputs.size(); j++) {
                if (last_use.count(node.outputs[j])) values[node.outputs[j]] = std::move(outputs[j]);  // else dead
            }
            for (const std::string &v : node.inputs) {
                if (!v.empty() && last_use[v] == i) values.erase(v);
            }
        }

        std::map<std::string, RefTensor> result;
        for (const std::string &v : graph.outputs) result[v] = *lookup(v);
        return result;
    } catch (Error &e) {
        e.in_file(graph.source);
        throw;
    }
}

Comparison compare(const float *actual, const float *expected, size_t n) {
    const double inf = std::numeric_limits<double>::infinity();
    Comparison c;
    double scale = 0;
    for (size_t i = 0; i < n; i++) {
        const double a = actual[i], e = expected[i];
        double diff;
        if (std::isfinite(e)) {
            scale = std::max(scale, std::abs(e));
            // Written so a NaN in `actual` cannot slip through a comparison that is false for NaN.
            diff = std::isfinite(a) ? std::abs(a - e) : inf;
        } else {
            diff = (a == e || (std::isnan(a) && std::isnan(e))) ? 0.0 : inf;
        }
        c.max_abs_error = std::max(c.max_abs_error, diff);
    }
    c.scale = std::max(scale, 1e-6);
    return c;
}

}  // namespace hfuse::reference
