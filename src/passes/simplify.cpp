// simplify(): the rewrites run before fusion planning. Constants fold first so that a weight computed
// by nodes (a Transpose of a weight) is a weight when fold_batchnorm looks for one, and identities go
// before fold_batchnorm so an Identity between a Conv and its BatchNormalization does not block the fold.
#include "hfuse/passes.h"

namespace hfuse {

Graph simplify(Graph graph) {
    return fold_batchnorm(remove_identities(fold_constants(std::move(graph))));
}

}  // namespace hfuse
