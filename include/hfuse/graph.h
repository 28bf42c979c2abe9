// The model graph: ONNX-style nodes over named values (model inputs, weights, node outputs).
// A Graph is plain data; passes (src/passes) are functions from Graph to Graph.
#pragma once

#include "hfuse/tensor.h"

#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

namespace hfuse {

struct Node {
    std::string name;                  // unique among nodes
    std::string op;                    // ONNX op type, e.g. "Conv"
    std::vector<std::string> inputs;   // value names; "" marks an optional input that is left out
    std::vector<std::string> outputs;  // value names; {name} unless the node lists its own (Split)
    nlohmann::json attrs = nlohmann::json::object();
    // Source-model nodes that rewrites merged into this one (a BatchNormalization folded into this
    // Conv, a removed Identity), so plans can still name every node of the model the user wrote.
    std::vector<std::string> absorbed;
};

// Node names per group; every node in exactly one group.
using Partition = std::vector<std::vector<std::string>>;

struct GraphInput {
    std::string name;
    Shape shape;  // float32
};

struct Graph {
    std::string name;
    std::string source;  // the file it came from, used in error messages ("" when built in code)
    std::vector<GraphInput> inputs;
    std::map<std::string, Constant> weights;
    std::vector<Node> nodes;  // in topological order once validate() has run
    std::vector<std::string> outputs;

    // Source-model nodes the rewrites removed with no node standing for them (folded to constants, an
    // Identity of a model input), so a plan naming them can still be read.
    std::vector<std::string> removed;

    // The type of every value (inputs, weights, node outputs), filled by infer_shapes().
    std::map<std::string, TensorType> types;

    bool is_weight(const std::string &value) const { return weights.count(value) != 0; }
    bool is_input(const std::string &value) const;
    // The node producing a value, or nullptr for inputs and weights.
    const Node *producer(const std::string &value) const;
    const Node *find_node(const std::string &name) const;
    // Throws an Error if shapes have not been inferred for this value.
    const TensorType &type_of(const std::string &value) const;
};

// The nodes of `graph` named in `nodes` (shapes inferred) as a graph of their own, in graph order: the
// values they read from other nodes or the graph's inputs as its inputs, the weights they read, the
// values read by the other nodes (or returned by the graph) as its outputs; names, types and the
// nodes' absorbed lists as in `graph`.
Graph subgraph(const Graph &graph, const std::set<std::string> &nodes);

}  // namespace hfuse
