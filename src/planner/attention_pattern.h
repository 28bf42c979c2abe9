// Attention as a graph pattern: MatMul(Q, K^T), elementwise ops on the scores (a scale, a mask or
// bias added), Softmax over the keys, MatMul(P, V). The planner joins it into one group (the rule
// set's "attention") and the composer lowers that group with an online softmax
// (src/ops/attention_lowering.h): the two matchers are this one.
#pragma once

#include "hfuse/graph.h"

#include <optional>
#include <string>
#include <vector>

namespace hfuse::planner {

struct AttentionPattern {
    const Node *scores = nullptr;         // MatMul(Q, K^T): [batch..., Sq, Sk]
    std::vector<const Node *> score_ops;  // elementwise ops and Reshapes from the scores to the Softmax
    const Node *softmax = nullptr;        // Softmax over the last axis
    const Node *output = nullptr;         // MatMul(P, V): [batch..., Sq, Dv]

    std::vector<const Node *> nodes() const;  // every node above, in topological order
    // The value the Softmax reads: the scores after score_ops.
    const std::string &softmax_input() const { return softmax->inputs[0]; }
};

// The attention whose second product is `output`, if `output` is one: a MatMul whose A is a Softmax
// over the last axis of [batch..., Sq, Sk] scores, read by it alone; the scores a MatMul of matrices
// (rank >= 2), reaching the Softmax through at most 8 ops, each reading the previous one's value
// (read by nothing else, no model output, all of them [..., Sq, Sk] and as many): elementwise or
// broadcast ops whose other operands broadcast to their output (a scale, a mask or bias added), or
// Reshapes (regrouping the batch dims); V a matrix [..., Sk, Dv] whose batch dims broadcast to the
// scores'.
std::optional<AttentionPattern> match_attention(const Graph &graph, const Node &output);

// Every attention of `graph`.
std::vector<AttentionPattern> find_attentions(const Graph &graph);

}  // namespace hfuse::planner
