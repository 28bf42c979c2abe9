// Internal to the reference evaluator: the per-op functions behind reference::eval_node.
#pragma once

#include "hfuse/attributes.h"
#include "hfuse/reference.h"

#include <string>
#include <vector>

namespace hfuse::reference::detail {

struct OpArgs {
    const Node &node;
    Attributes attrs;
    // Non-null for every present input, weights included (int64 weights converted to float).
    std::vector<const RefTensor *> inputs;
    std::vector<const Constant *> constants;  // non-null where the input is a weight
    int num_outputs;

    bool has(int i) const { return i < static_cast<int>(inputs.size()) && inputs[i] != nullptr; }
    // A required input; throws an Error naming it if it is left out.
    const RefTensor &in(int i) const;
    // The values of an int64 weight input (Reshape's shape, Slice's starts, ...).
    const std::vector<int64_t> &ints(int i, const std::string &what) const;
    // The one value of an optional scalar input (Clip's min/max, Pad's constant_value), or `fallback`.
    float scalar(int i, const std::string &what, float fallback) const;
};

using OpFn = std::vector<RefTensor> (*)(const OpArgs &);

// nullptr for op types the reference does not know.
OpFn find_op_fn(const std::string &op);

}  // namespace hfuse::reference::detail
