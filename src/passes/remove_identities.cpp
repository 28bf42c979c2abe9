// remove_identities(): Identity and inference-mode Dropout copy their input; consumers read the input
// directly and the node producing it absorbs the removed node's name.
#include "hfuse/passes.h"
#include "rewrite_util.h"

#include <algorithm>

namespace hfuse {

Graph remove_identities(Graph g) {
    std::vector<std::string> orphaned;  // Dropout's ratio and training_mode, erased if nothing else reads them
    for (size_t i = 0; i < g.nodes.size();) {
        const Node &n = g.nodes[i];
        if (n.op != "Identity" && n.op != "Dropout") {
            i++;
            continue;
        }
        const std::string in = n.inputs[0], out = n.outputs[0];
        const int p = passes::producer_index(g, in);
        if (passes::is_model_output(g, out)) {
            // The model output's name must survive, so the producer's value takes it. A model input or
            // weight cannot be renamed, and a value that is itself a model output cannot have two names:
            // then the copy stays.
            if (p < 0 || passes::is_model_output(g, in)) {
                i++;
                continue;
            }
            Node &producer = g.nodes[p];
            std::replace(producer.outputs.begin(), producer.outputs.end(), in, out);
            passes::replace_uses(g, in, out);
        } else {
            passes::replace_uses(g, out, in);
        }
        if (p >= 0) passes::absorb(g.nodes[p], n);
        orphaned.insert(orphaned.end(), n.inputs.begin() + 1, n.inputs.end());
        g.nodes.erase(g.nodes.begin() + i);
    }
    passes::drop_if_unused(g, orphaned);
    return prepare(std::move(g));
}

}  // namespace hfuse
