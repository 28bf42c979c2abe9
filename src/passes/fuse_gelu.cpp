// fuse_gelu(): exact GELU as exporters write it before opset 20 --
//   0.5 * x * (1 + Erf(x / sqrt(2)))  (Div by sqrt(2) or Mul by its inverse; the products in either
//   order and nesting) -- becomes one Gelu node: one elementwise op where there were six.
#include "hfuse/passes.h"
#include "rewrite_util.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace hfuse {
namespace {

bool near(float v, double want) {
    return std::abs(double(v) - want) <= 1e-6 * std::abs(want);
}

bool is_scalar(const Graph &g, const std::string &value, double want) {
    float v = 0;
    return passes::float_scalar(g, value, &v) && near(v, want);
}

struct GeluMatch {
    std::vector<size_t> nodes;  // every node of the pattern
    std::string x, out;
};

// The pattern around the Erf g.nodes[i], every intermediate read by the pattern alone.
std::optional<GeluMatch> match_gelu(const Graph &g, size_t i) {
    const Node &erf = g.nodes[i];
    if (erf.op != "Erf") return std::nullopt;
    const int scaled = passes::producer_index(g, erf.inputs[0]);
    if (scaled < 0 || passes::sole_reader(g, erf.inputs[0]) != static_cast<int>(i)) return std::nullopt;
    const Node &s = g.nodes[scaled];
    GeluMatch m;
    if (s.op == "Div" && is_scalar(g, s.inputs[1], std::sqrt(2.0))) {
        m.x = s.inputs[0];
    } else if (s.op == "Mul" && is_scalar(g, s.inputs[1], std::sqrt(0.5))) {
        m.x = s.inputs[0];
    } else if (s.op == "Mul" && is_scalar(g, s.inputs[0], std::sqrt(0.5))) {
        m.x = s.inputs[1];
    } else {
        return std::nullopt;
    }
    const int add = passes::sole_reader(g, erf.outputs[0]);
    if (add < 0 || g.nodes[add].op != "Add" || !is_scalar(g, passes::other_input(g.nodes[add], erf.outputs[0]), 1.0))
        return std::nullopt;
    const std::string one_plus = g.nodes[add].outputs[0];
    const int mul = passes::sole_reader(g, one_plus);
    if (mul < 0 || g.nodes[mul].op != "Mul") return std::nullopt;
    const std::string other = passes::other_input(g.nodes[mul], one_plus);
    m.nodes = {static_cast<size_t>(scaled), i, static_cast<size_t>(add), static_cast<size_t>(mul)};
    if (other == m.x) {
        // Mul(x, 1 + erf) then Mul(., 0.5).
        const int half = passes::sole_reader(g, g.nodes[mul].outputs[0]);
        if (half < 0 || g.nodes[half].op != "Mul" ||
            !is_scalar(g, passes::other_input(g.nodes[half], g.nodes[mul].outputs[0]), 0.5))
            return std::nullopt;
        m.nodes.push_back(static_cast<size_t>(half));
        m.out = g.nodes[half].outputs[0];
        return m;
    }
    // Mul(Mul(x, 0.5), 1 + erf).
    const int half = passes::producer_index(g, other);
    if (half < 0 || g.nodes[half].op != "Mul" || passes::sole_reader(g, other) != mul ||
        passes::other_input(g.nodes[half], m.x).empty() || !is_scalar(g, passes::other_input(g.nodes[half], m.x), 0.5))
        return std::nullopt;
    m.nodes.push_back(static_cast<size_t>(half));
    m.out = g.nodes[mul].outputs[0];
    return m;
}

}  // namespace

Graph fuse_gelu(Graph g) {
    for (size_t i = 0; i < g.nodes.size();) {
        std::optional<GeluMatch> m = match_gelu(g, i);
        if (!m) {
            i++;
            continue;
        }
        Node gelu;
        gelu.op = "Gelu";
        gelu.inputs = {m->x};
        gelu.outputs = {m->out};
        passes::replace_pattern(g, m->nodes, i, std::move(gelu));
        // The pattern's first node (its scaling of x) may come before the Erf: scan again from there.
        i = std::min(i, *std::min_element(m->nodes.begin(), m->nodes.end()));
    }
    return prepare(std::move(g));
}

}  // namespace hfuse
