// fold_constants(): nodes whose inputs are all weights become weights, evaluated by the Halide
// executor (the reference evaluator stays an independent oracle for testing the result).
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/passes.h"
#include "rewrite_util.h"

namespace hfuse {
namespace {

bool is_foldable(const Graph &g, const Node &n) {
    bool any_input = false;
    for (const std::string &v : n.inputs) {
        if (v.empty()) continue;
        if (!g.is_weight(v)) return false;
        any_input = true;
    }
    if (!any_input) return false;
    for (const std::string &v : n.outputs) {
        // Model outputs stay computed by nodes. Every op's outputs are float32 today; a folded value
        // has to be, as Executor results are float buffers.
        if (passes::is_model_output(g, v) || g.type_of(v).dtype != DType::Float32) return false;
    }
    return true;
}

// Runs `n` alone, its weights as weights, and returns one constant per output.
std::vector<Constant> evaluate(const Graph &g, const Node &n) {
    Graph one;
    one.name = g.name;
    one.source = g.source;
    for (const std::string &v : n.inputs) {
        if (!v.empty()) one.weights[v] = g.weights.at(v);
    }
    one.nodes = {n};
    one.outputs = n.outputs;
    one = prepare(std::move(one));

    Executor ex(one, Executor::unfused_partition(one));
    std::map<std::string, TensorBuffer> results = ex.run({});
    std::vector<Constant> values;
    for (const std::string &v : n.outputs) {
        const TensorBuffer &b = results.at(v);  // dense, ONNX dims reversed: row-major memory
        Constant c;
        c.type = one.type_of(v);
        c.f32.assign(b.data(), b.data() + num_elements(c.type.shape));
        values.push_back(std::move(c));
    }
    return values;
}

}  // namespace

Graph fold_constants(Graph g) {
    // One sweep in topological order reaches a fixed point: a node's producers are visited before it,
    // so by then every constant producer has already become a weight (chains fold in one sweep).
    std::vector<Node> kept;
    std::vector<std::string> orphaned;  // inputs of folded nodes, erased below if nothing else reads them
    for (Node &n : g.nodes) {
        if (!is_foldable(g, n)) {
            kept.push_back(std::move(n));
            continue;
        }
        std::vector<Constant> values;
        try {
            values = evaluate(g, n);
        } catch (Error &e) {
            throw e.at_node(n.name, n.op).in_file(g.source);
        }
        for (size_t i = 0; i < n.outputs.size(); i++) g.weights[n.outputs[i]] = std::move(values[i]);
        orphaned.insert(orphaned.end(), n.inputs.begin(), n.inputs.end());
    }
    g.nodes = std::move(kept);
    passes::drop_if_unused(g, orphaned);
    return prepare(std::move(g));
}

}  // namespace hfuse
