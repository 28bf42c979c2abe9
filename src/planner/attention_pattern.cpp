#include "planner/attention_pattern.h"

#include "hfuse/attributes.h"
#include "hfuse/fused_graph.h"
#include "hfuse/op_registry.h"

#include <algorithm>

namespace hfuse::planner {
namespace {

constexpr size_t kMaxScoreOps = 8;

// How many nodes read `value`, and whether the model returns it.
bool read_once_inside(const Graph &g, const std::string &value) {
    if (std::find(g.outputs.begin(), g.outputs.end(), value) != g.outputs.end()) return false;
    int readers = 0;
    for (const Node &n : g.nodes) readers += static_cast<int>(std::count(n.inputs.begin(), n.inputs.end(), value));
    return readers == 1;
}

// Whether `shape` broadcasts to `to` (numpy rules) without widening it.
bool broadcasts_to(const Shape &shape, const Shape &to) {
    if (shape.size() > to.size()) return false;
    for (size_t i = 0; i < shape.size(); i++) {
        const int64_t d = shape[shape.size() - 1 - i];
        if (d != 1 && d != to[to.size() - 1 - i]) return false;
    }
    return true;
}

bool softmax_over_last_axis(const Graph &g, const Node &n) {
    if (n.op != "Softmax" || n.inputs.size() != 1) return false;
    const int64_t rank = static_cast<int64_t>(g.type_of(n.outputs[0]).shape.size());
    int64_t axis = Attributes(n.attrs).get_int("axis", -1);
    if (axis < 0) axis += rank;
    return rank >= 2 && axis == rank - 1;
}

}  // namespace

std::vector<const Node *> AttentionPattern::nodes() const {
    std::vector<const Node *> out = {scores};
    out.insert(out.end(), score_ops.begin(), score_ops.end());
    out.push_back(softmax);
    out.push_back(output);
    return out;
}

std::optional<AttentionPattern> match_attention(const Graph &g, const Node &output) {
    if (output.op != "MatMul" || output.inputs.size() != 2) return std::nullopt;
    AttentionPattern a;
    a.output = &output;
    a.softmax = g.producer(output.inputs[0]);
    if (!a.softmax || !softmax_over_last_axis(g, *a.softmax) || !read_once_inside(g, output.inputs[0])) {
        return std::nullopt;
    }
    const Shape scores = g.type_of(a.softmax->outputs[0]).shape;  // [batch..., Sq, Sk]
    const size_t rank = scores.size();
    // V [..., Sk, Dv], its batch dims broadcast to the scores' (the output's batch dims are the scores').
    const Shape &v = g.type_of(output.inputs[1]).shape;
    if (v.size() < 2 || v[v.size() - 2] != scores.back()) return std::nullopt;
    const Shape v_batch(v.begin(), v.end() - 2), batch(scores.begin(), scores.end() - 2);
    if (!broadcasts_to(v_batch, batch)) return std::nullopt;

    // Back from the Softmax through the score ops to the product. Each value on the way holds the
    // same scores: [..., Sq, Sk], as many (a Reshape may regroup the batch dims: Swin's mask is added
    // per window, [B, windows, heads, Sq, Sk]).
    auto holds_scores = [&](const std::string &value) {
        const Shape &s = g.type_of(value).shape;
        return s.size() >= 2 && s[s.size() - 2] == scores[rank - 2] && s.back() == scores.back() &&
               num_elements(s) == num_elements(scores);
    };
    std::string value = a.softmax->inputs[0];
    for (;;) {
        const Node *p = g.producer(value);
        if (!p || !holds_scores(value) || !read_once_inside(g, value)) return std::nullopt;
        if (p->op == "MatMul") {
            a.scores = p;
            break;
        }
        if (a.score_ops.size() == kMaxScoreOps) return std::nullopt;
        std::string previous;
        if (p->op == "Reshape") {
            previous = p->inputs[0];
        } else {
            const PatternKind kind = find_op(p->op)->kind;
            if (kind != PatternKind::Elementwise && kind != PatternKind::Broadcast) return std::nullopt;
            // The one input on the path back to the product (two such inputs: ambiguous, not matched).
            const Shape &shape = g.type_of(p->outputs[0]).shape;
            for (const std::string &in : p->inputs) {
                if (in.empty()) continue;
                const Node *q = g.producer(in);
                const bool on_path =
                    q && holds_scores(in) &&
                    (q->op == "MatMul" || q->op == "Reshape" || find_op(q->op)->kind == PatternKind::Elementwise ||
                     find_op(q->op)->kind == PatternKind::Broadcast);
                if (on_path) {
                    if (!previous.empty()) return std::nullopt;
                    previous = in;
                } else if (!broadcasts_to(g.type_of(in).shape, shape)) {
                    return std::nullopt;
                }
            }
        }
        if (previous.empty()) return std::nullopt;
        a.score_ops.insert(a.score_ops.begin(), p);
        value = previous;
    }
    const Shape &q = g.type_of(a.scores->inputs[0]).shape, &k = g.type_of(a.scores->inputs[1]).shape;
    if (q.size() < 2 || k.size() < 2 || q.size() > rank || k.size() > rank) return std::nullopt;
    return a;
}

std::vector<AttentionPattern> find_attentions(const Graph &graph) {
    std::vector<AttentionPattern> out;
    for (const Node &n : graph.nodes) {
        if (auto a = match_attention(graph, n)) out.push_back(*a);
    }
    return out;
}

}  // namespace hfuse::planner
