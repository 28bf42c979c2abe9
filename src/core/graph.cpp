#include "hfuse/graph.h"

#include "hfuse/error.h"

#include <algorithm>

namespace hfuse {

bool Graph::is_input(const std::string &value) const {
    return std::any_of(inputs.begin(), inputs.end(), [&](const GraphInput &i) { return i.name == value; });
}

const Node *Graph::producer(const std::string &value) const {
    for (const Node &n : nodes) {
        if (std::find(n.outputs.begin(), n.outputs.end(), value) != n.outputs.end()) return &n;
    }
    return nullptr;
}

const Node *Graph::find_node(const std::string &node_name) const {
    for (const Node &n : nodes) {
        if (n.name == node_name) return &n;
    }
    return nullptr;
}

const TensorType &Graph::type_of(const std::string &value) const {
    auto it = types.find(value);
    if (it == types.end())
        throw Error("no type known for value '" + value + "' (run infer_shapes first)").in_file(source);
    return it->second;
}

Graph subgraph(const Graph &g, const std::set<std::string> &nodes) {
    Graph sub;
    sub.name = g.name;
    sub.source = g.source;
    std::set<std::string> made;
    for (const Node &n : g.nodes) {
        if (!nodes.count(n.name)) continue;
        for (const std::string &v : n.inputs) {
            if (v.empty() || made.count(v) || sub.types.count(v)) continue;
            sub.types[v] = g.type_of(v);
            if (g.is_weight(v)) {
                sub.weights[v] = g.weights.at(v);
            } else {
                sub.inputs.push_back({v, g.type_of(v).shape});
            }
        }
        for (const std::string &v : n.outputs) {
            made.insert(v);
            sub.types[v] = g.type_of(v);
        }
        sub.nodes.push_back(n);
    }
    std::set<std::string> read_outside(g.outputs.begin(), g.outputs.end());
    for (const Node &n : g.nodes) {
        if (!nodes.count(n.name)) read_outside.insert(n.inputs.begin(), n.inputs.end());
    }
    for (const Node &n : sub.nodes) {
        for (const std::string &v : n.outputs) {
            if (read_outside.count(v)) sub.outputs.push_back(v);
        }
    }
    return sub;
}

}  // namespace hfuse
