// remove_dead_nodes(): nodes whose values no node reads and the model does not return compute nothing
// anyone needs (ONNX exports leave such nodes behind); they go, with weights only they read.
#include "hfuse/passes.h"
#include "rewrite_util.h"

namespace hfuse {

Graph remove_dead_nodes(Graph g) {
    std::vector<std::string> values;
    for (const Node &n : g.nodes) values.insert(values.end(), n.outputs.begin(), n.outputs.end());
    passes::drop_if_unused(g, values);
    return prepare(std::move(g));
}

}  // namespace hfuse
