// simplify(): the rewrites run before fusion planning. Constants fold first so that a weight computed
// by nodes (a Transpose of a weight) is a weight when fold_batchnorm looks for one, and identities go
// before fold_batchnorm so an Identity between a Conv and its BatchNormalization does not block the fold.
// The pattern fusions come last, when their constants (an epsilon, sqrt 2) are weights.
#include "hfuse/passes.h"

#include <set>

namespace hfuse {
namespace {

// Every source-model node name a graph still accounts for: its nodes, what they absorbed, what
// rewrites removed.
std::set<std::string> source_names(const Graph &g) {
    std::set<std::string> names(g.removed.begin(), g.removed.end());
    for (const Node &n : g.nodes) {
        names.insert(n.name);
        names.insert(n.absorbed.begin(), n.absorbed.end());
    }
    return names;
}

}  // namespace

Graph simplify(Graph graph) {
    const std::set<std::string> before = source_names(graph);
    Graph out = fuse_gelu(fuse_layer_norm(
        drop_padding_taps(fold_batchnorm(remove_identities(fold_constants(remove_dead_nodes(std::move(graph))))))));
    // Names that no node stands for any more are recorded, so plans may still list them.
    const std::set<std::string> after = source_names(out);
    for (const std::string &n : before) {
        if (!after.count(n)) out.removed.push_back(n);
    }
    return out;
}

}  // namespace hfuse
