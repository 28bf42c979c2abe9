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

}  // namespace hfuse
