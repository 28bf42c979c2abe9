#include "hfuse/op_registry.h"

#include "hfuse/error.h"
#include "op_families.h"

#include <algorithm>
#include <map>

namespace hfuse {
namespace {

const std::map<std::string, OpSchema> &op_schemas() {
    static const std::map<std::string, OpSchema> ops = [] {
        std::vector<OpSchema> list;
        ops::register_conv_ops(list);
        ops::register_pool_ops(list);
        ops::register_elementwise_ops(list);
        ops::register_normalization_ops(list);
        ops::register_linalg_ops(list);
        ops::register_shape_ops(list);
        std::map<std::string, OpSchema> by_name;
        for (OpSchema &s : list) by_name.emplace(s.name, std::move(s));
        return by_name;
    }();
    return ops;
}

}  // namespace

const char *to_string(PatternKind kind) {
    switch (kind) {
    case PatternKind::Elementwise: return "elementwise";
    case PatternKind::Broadcast: return "broadcast";
    case PatternKind::Injective: return "injective";
    case PatternKind::Reduction: return "reduction";
    case PatternKind::ComplexOutFusable: return "complex-out-fusable";
    case PatternKind::Window: return "window";
    case PatternKind::Opaque: return "opaque";
    }
    return "?";
}

const Constant &InferContext::constant(int i, const std::string &what) const {
    if (i >= (int)constants.size() || constants[i] == nullptr) {
        fail_field(what, "must be a constant (a weight), not a computed value");
    }
    return *constants[i];
}

InferContext make_infer_context(const Graph &graph, const Node &node) {
    InferContext ctx{node, Attributes(node.attrs), {}, {}, static_cast<int>(node.outputs.size())};
    for (const std::string &v : node.inputs) {
        if (v.empty()) {
            ctx.inputs.push_back(nullptr);
            ctx.constants.push_back(nullptr);
            continue;
        }
        ctx.inputs.push_back(&graph.type_of(v));
        ctx.constants.push_back(graph.is_weight(v) ? &graph.weights.at(v) : nullptr);
    }
    return ctx;
}

double node_flops(const Graph &graph, const Node &node) {
    const OpSchema *op = find_op(node.op);
    if (!op) throw Error("unknown op '" + node.op + "'").at_node(node.name, node.op).at_field("op");
    std::vector<TensorType> outputs;
    for (const std::string &v : node.outputs) outputs.push_back(graph.type_of(v));
    return op->flops ? op->flops(make_infer_context(graph, node), outputs) : 0.0;
}

double graph_flops(const Graph &graph) {
    double flops = 0;
    for (const Node &n : graph.nodes) flops += node_flops(graph, n);
    return flops;
}

const OpSchema *find_op(const std::string &op) {
    auto it = op_schemas().find(op);
    return it == op_schemas().end() ? nullptr : &it->second;
}

std::vector<const OpSchema *> all_ops() {
    std::vector<const OpSchema *> out;
    for (const auto &kv : op_schemas()) out.push_back(&kv.second);
    return out;
}

}  // namespace hfuse
