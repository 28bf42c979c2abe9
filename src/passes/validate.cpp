// validate(): structural checks of a graph and a stable topological order of its nodes.
#include "hfuse/error.h"
#include "hfuse/op_registry.h"
#include "hfuse/passes.h"

#include <algorithm>
#include <map>
#include <set>

namespace hfuse {
namespace {

std::string join(const std::vector<std::string> &items, const std::string &sep) {
    std::string s;
    for (const auto &i : items) s += (s.empty() ? "" : sep) + i;
    return s;
}

void check_node(const Graph &g, const Node &n, const OpSchema &op, const std::map<std::string, int> &producer) {
    const int num_inputs = static_cast<int>(n.inputs.size());
    if (num_inputs < op.min_inputs || (op.max_inputs >= 0 && num_inputs > op.max_inputs)) {
        std::string expected = op.max_inputs < 0 ? "at least " + std::to_string(op.min_inputs)
                               : op.min_inputs == op.max_inputs
                                   ? std::to_string(op.min_inputs)
                                   : std::to_string(op.min_inputs) + " to " + std::to_string(op.max_inputs);
        fail_field("inputs", "expects " + expected + " inputs, got " + std::to_string(num_inputs));
    }
    const int num_outputs = static_cast<int>(n.outputs.size());
    if (num_outputs < op.min_outputs || (op.max_outputs >= 0 && num_outputs > op.max_outputs)) {
        fail_field("outputs", "this op produces " +
                                  (op.max_outputs == op.min_outputs ? std::to_string(op.min_outputs)
                                                                    : "at least " + std::to_string(op.min_outputs)) +
                                  " output(s), the node lists " + std::to_string(num_outputs));
    }
    for (const auto &kv : n.attrs.items()) {
        if (std::find(op.attributes.begin(), op.attributes.end(), kv.key()) == op.attributes.end()) {
            fail_field(kv.key(), "unknown attribute for " + n.op + " (accepted: " +
                                     (op.attributes.empty() ? "none" : join(op.attributes, ", ")) + ")");
        }
    }
    for (int i = 0; i < num_inputs; i++) {
        const std::string &v = n.inputs[i];
        const std::string field = "inputs[" + std::to_string(i) + "]";
        bool must_be_constant =
            std::find(op.constant_inputs.begin(), op.constant_inputs.end(), i) != op.constant_inputs.end();
        if (v.empty()) {
            if (i < op.min_inputs) fail_field(field, "required input is left out");
            continue;
        }
        if (!g.is_input(v) && !g.is_weight(v) && !producer.count(v)) {
            fail_field(field, "'" + v + "' is not a model input, a weight or a node output");
        }
        if (must_be_constant && !g.is_weight(v)) {
            fail_field(field, "'" + v + "' must be a weight (a constant), not a computed value");
        }
        if (!must_be_constant && g.is_weight(v) && g.weights.at(v).type.dtype != DType::Float32) {
            fail_field(field, "'" + v + "' is int64; this input takes float32 data");
        }
    }
}

// Kahn's algorithm, always taking the earliest ready node in file order, so a graph that is already
// sorted keeps its order. What remains when nothing is ready lies on (or behind) a cycle.
std::vector<Node> topological_order(const Graph &g, const std::map<std::string, int> &producer) {
    const int n = static_cast<int>(g.nodes.size());
    std::vector<int> pending(n, 0);
    std::vector<std::vector<int>> consumers(n);
    for (int i = 0; i < n; i++) {
        std::set<int> deps;
        for (const std::string &v : g.nodes[i].inputs) {
            auto it = producer.find(v);
            if (it != producer.end()) deps.insert(it->second);
        }
        pending[i] = static_cast<int>(deps.size());
        for (int d : deps) consumers[d].push_back(i);
    }
    std::set<int> ready;
    for (int i = 0; i < n; i++) {
        if (pending[i] == 0) ready.insert(i);
    }
    std::vector<Node> order;
    while (!ready.empty()) {
        int i = *ready.begin();
        ready.erase(ready.begin());
        order.push_back(g.nodes[i]);
        for (int c : consumers[i]) {
            if (--pending[c] == 0) ready.insert(c);
        }
    }
    if ((int)order.size() != n) {
        // Walk back from a stuck node through stuck producers until a node repeats: that is a cycle.
        int start = 0;
        while (pending[start] == 0) start++;
        std::vector<int> path;
        std::map<int, size_t> seen;
        int cur = start;
        while (!seen.count(cur)) {
            seen[cur] = path.size();
            path.push_back(cur);
            for (const std::string &v : g.nodes[cur].inputs) {
                auto it = producer.find(v);
                if (it != producer.end() && pending[it->second] > 0) {
                    cur = it->second;
                    break;
                }
            }
        }
        std::vector<std::string> cycle;
        for (size_t k = seen[cur]; k < path.size(); k++) cycle.push_back(g.nodes[path[k]].name);
        std::reverse(cycle.begin(), cycle.end());
        cycle.push_back(cycle.front());
        throw Error("the graph has a cycle: " + join(cycle, " -> ")).at_node(g.nodes[cur].name, g.nodes[cur].op);
    }
    return order;
}

}  // namespace

Graph validate(Graph g) {
    try {
        // Every value name is defined once: inputs, weights and node outputs share one namespace.
        std::map<std::string, std::string> defined;  // value -> what defines it
        auto define = [&](const std::string &v, const std::string &what) {
            if (v.empty()) fail("empty value name in " + what);
            auto [it, fresh] = defined.emplace(v, what);
            if (!fresh) fail("'" + v + "' is defined twice: by " + it->second + " and by " + what);
        };
        for (const GraphInput &in : g.inputs) {
            check_shape(in.shape, "inputs." + in.name + ".shape");
            define(in.name, "model input '" + in.name + "'");
        }
        for (const auto &kv : g.weights) define(kv.first, "weight '" + kv.first + "'");

        std::map<std::string, int> producer;  // value -> node index
        std::set<std::string> node_names;
        for (size_t i = 0; i < g.nodes.size(); i++) {
            Node &n = g.nodes[i];
            if (n.name.empty()) fail_field("nodes[" + std::to_string(i) + "].name", "a node needs a name");
            if (!node_names.insert(n.name).second) {
                throw Error("two nodes are named '" + n.name + "'").at_node(n.name, n.op).at_field("name");
            }
            if (n.outputs.empty()) n.outputs = {n.name};
            for (const std::string &v : n.outputs) {
                define(v, "node '" + n.name + "'");
                producer[v] = static_cast<int>(i);
            }
        }
        for (const Node &n : g.nodes) {
            const OpSchema *op = find_op(n.op);
            try {
                if (!op) fail_field("op", "unknown op '" + n.op + "'");
                check_node(g, n, *op, producer);
            } catch (Error &e) {
                throw e.at_node(n.name, n.op);
            }
        }
        for (size_t i = 0; i < g.outputs.size(); i++) {
            if (!producer.count(g.outputs[i]) && !g.is_input(g.outputs[i])) {
                fail_field("outputs[" + std::to_string(i) + "]", "'" + g.outputs[i] + "' is not produced by any node");
            }
        }
        g.nodes = topological_order(g, producer);
    } catch (Error &e) {
        throw e.in_file(g.source);
    }
    return g;
}

Graph prepare(Graph graph) {
    return infer_shapes(validate(std::move(graph)));
}

}  // namespace hfuse
