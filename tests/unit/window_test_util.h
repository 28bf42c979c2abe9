// Helpers shared by conv_ops_test.cpp and pool_ops_test.cpp.
#pragma once

#include "hfuse/op_registry.h"
#include "hfuse/passes.h"
#include "op_test_util.h"

#include <algorithm>

namespace hfuse::test {

// The inferred shape of the single node's output.
inline Shape output_shape(const OpCase &c) {
    return prepare(make_single_op_graph(c)).type_of("op").shape;
}

// The op's FLOP count for the single-node graph of `c`.
inline double op_flops(const OpCase &c) {
    Graph g = prepare(make_single_op_graph(c));
    const Node &n = g.nodes[0];
    std::vector<const TensorType *> inputs;
    std::vector<const Constant *> constants;
    for (const std::string &in : n.inputs) {
        inputs.push_back(in.empty() ? nullptr : &g.type_of(in));
        constants.push_back(g.is_weight(in) ? &g.weights.at(in) : nullptr);
    }
    InferContext ctx{n, Attributes(n.attrs), inputs, constants, 1};
    return find_op(c.op)->flops(ctx, {g.type_of("op")});
}

// A random input extent along one spatial dim such that a window spanning `window` cells fits once
// `pads` cells are added: tight fits, odd and even sizes.
inline int64_t random_extent(Rng &rng, int64_t window, int64_t pads) {
    return std::max<int64_t>(1, window - pads + rng.uniform_int(0, 6));
}

}  // namespace hfuse::test
