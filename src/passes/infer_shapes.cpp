// infer_shapes(): types of every value from each op's shape inference, in topological order.
#include "hfuse/error.h"
#include "hfuse/op_registry.h"
#include "hfuse/passes.h"

namespace hfuse {

Graph infer_shapes(Graph g) {
    g.types.clear();
    for (const GraphInput &in : g.inputs) g.types[in.name] = {DType::Float32, in.shape};
    for (const auto &kv : g.weights) g.types[kv.first] = kv.second.type;

    for (const Node &n : g.nodes) {
        try {
            const OpSchema *op = find_op(n.op);
            if (!op) fail_field("op", "unknown op '" + n.op + "'");
            InferContext ctx = make_infer_context(g, n);
            std::vector<TensorType> outs = op->infer(ctx);
            if (outs.size() != n.outputs.size()) {
                fail("shape inference produced " + std::to_string(outs.size()) + " outputs for " +
                     std::to_string(n.outputs.size()) + " named outputs");
            }
            for (size_t i = 0; i < outs.size(); i++) {
                check_shape(outs[i].shape, "output '" + n.outputs[i] + "'");
                g.types[n.outputs[i]] = outs[i];
            }
        } catch (Error &e) {
            throw e.at_node(n.name, n.op).in_file(g.source);
        }
    }
    return g;
}

}  // namespace hfuse
