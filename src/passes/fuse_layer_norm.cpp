// fuse_layer_norm(): LayerNorm as exporters write it before opset 17 --
//   mean = ReduceMean(x, axes) (or GlobalAveragePool), d = Sub(x, mean), var = the same mean of
//   Pow(d, 2) or Mul(d, d),
//   y = Div(d, Sqrt(Add(var, eps))) [, Mul(y, gamma)] [, Add(., beta)]
// over trailing axes, keepdims -- becomes one LayerNormalization node, which the planner sees as one
// reduction over rows (two passes over a row in cache) rather than nine ops and four intermediates.
#include "hfuse/attributes.h"
#include "hfuse/passes.h"
#include "rewrite_util.h"

#include <algorithm>
#include <optional>

namespace hfuse {
namespace {

// The axis a mean with kept dims over the trailing dims [axis, rank) starts at, or nullopt: a
// ReduceMean, or the GlobalAveragePool the importer makes of one over the dims from 2 on.
std::optional<int64_t> trailing_mean_axis(const Graph &g, const Node &n) {
    if (n.op == "GlobalAveragePool" && g.type_of(n.inputs[0]).shape.size() >= 3) return 2;
    if (n.op != "ReduceMean") return std::nullopt;
    const Attributes a(n.attrs);
    if (a.get_int("keepdims", 1) != 1 || !a.has("axes")) return std::nullopt;
    const int64_t rank = static_cast<int64_t>(g.type_of(n.inputs[0]).shape.size());
    std::vector<int64_t> axes = a.get_ints("axes");
    for (int64_t &x : axes) x = x < 0 ? x + rank : x;
    std::sort(axes.begin(), axes.end());
    if (axes.empty() || axes.back() != rank - 1) return std::nullopt;
    for (size_t i = 1; i < axes.size(); i++) {
        if (axes[i] != axes[i - 1] + 1) return std::nullopt;
    }
    return axes.front();
}

// A float weight that broadcasts to the normalized dims alone (its dims beyond them are 1).
bool normalized_parameter(const Graph &g, const std::string &value, int64_t normalized_rank) {
    const Constant *k = passes::float_weight(g, value);
    if (!k) return false;
    const Shape &s = k->type.shape;
    for (size_t d = 0; d + normalized_rank < s.size(); d++) {
        if (s[d] != 1) return false;
    }
    return true;
}

struct LayerNormMatch {
    std::vector<size_t> nodes;  // every node of the pattern; the last one computes its value
    std::string x, scale, bias, out;
    int64_t axis = 0;
    float epsilon = 0;
};

// The pattern starting at the ReduceMean g.nodes[i], every intermediate read by the pattern alone.
std::optional<LayerNormMatch> match_layer_norm(const Graph &g, size_t i) {
    const Node &mean = g.nodes[i];
    const std::optional<int64_t> axis = trailing_mean_axis(g, mean);
    if (!axis) return std::nullopt;
    LayerNormMatch m;
    m.x = mean.inputs[0];
    m.axis = *axis;
    const int64_t normalized_rank = static_cast<int64_t>(g.type_of(m.x).shape.size()) - *axis;
    const int sub = passes::sole_reader(g, mean.outputs[0]);
    if (sub < 0 || g.nodes[sub].op != "Sub" || g.nodes[sub].inputs != std::vector<std::string>{m.x, mean.outputs[0]})
        return std::nullopt;
    const std::string d = g.nodes[sub].outputs[0];
    // d's readers: the square and the Div.
    int square = -1, div = -1;
    for (size_t k = 0; k < g.nodes.size(); k++) {
        const Node &n = g.nodes[k];
        if (std::find(n.inputs.begin(), n.inputs.end(), d) == n.inputs.end()) continue;
        float e = 0;
        if ((n.op == "Pow" && n.inputs[0] == d && passes::float_scalar(g, n.inputs[1], &e) && e == 2.0f) ||
            (n.op == "Mul" && n.inputs.size() == 2 && n.inputs[0] == d && n.inputs[1] == d)) {
            if (square >= 0) return std::nullopt;
            square = static_cast<int>(k);
        } else if (n.op == "Div" && n.inputs[0] == d && n.inputs[1] != d) {
            if (div >= 0) return std::nullopt;
            div = static_cast<int>(k);
        } else {
            return std::nullopt;
        }
    }
    if (square < 0 || div < 0 || passes::is_model_output(g, d)) return std::nullopt;
    const int var = passes::sole_reader(g, g.nodes[square].outputs[0]);
    if (var < 0 || trailing_mean_axis(g, g.nodes[var]) != axis) return std::nullopt;
    const int add = passes::sole_reader(g, g.nodes[var].outputs[0]);
    if (add < 0 || g.nodes[add].op != "Add" ||
        !passes::float_scalar(g, passes::other_input(g.nodes[add], g.nodes[var].outputs[0]), &m.epsilon))
        return std::nullopt;
    const int sqrt = passes::sole_reader(g, g.nodes[add].outputs[0]);
    if (sqrt < 0 || g.nodes[sqrt].op != "Sqrt") return std::nullopt;
    if (passes::sole_reader(g, g.nodes[sqrt].outputs[0]) != div || g.nodes[div].inputs[1] != g.nodes[sqrt].outputs[0])
        return std::nullopt;
    m.nodes = {i,
               static_cast<size_t>(sub),
               static_cast<size_t>(square),
               static_cast<size_t>(var),
               static_cast<size_t>(add),
               static_cast<size_t>(sqrt),
               static_cast<size_t>(div)};
    // The affine part: Mul by a weight, then Add of a weight, each optional.
    std::string y = g.nodes[div].outputs[0];
    for (const char *op : {"Mul", "Add"}) {
        const int next = passes::sole_reader(g, y);
        if (next < 0 || g.nodes[next].op != op) continue;
        const std::string p = passes::other_input(g.nodes[next], y);
        if (p.empty() || !normalized_parameter(g, p, normalized_rank)) continue;
        (std::string(op) == "Mul" ? m.scale : m.bias) = p;
        m.nodes.push_back(static_cast<size_t>(next));
        y = g.nodes[next].outputs[0];
    }
    m.out = y;
    return m;
}

}  // namespace

Graph fuse_layer_norm(Graph g) {
    for (size_t i = 0; i < g.nodes.size();) {
        std::optional<LayerNormMatch> m = match_layer_norm(g, i);
        if (!m) {
            i++;
            continue;
        }
        Node ln;
        ln.op = "LayerNormalization";
        if (m->scale.empty()) {
            m->scale = passes::fresh_value_name(g, g.nodes[i].name + ".scale");
            Constant one;
            one.type = {DType::Float32, {1}};
            one.f32 = {1.0f};
            g.weights[m->scale] = std::move(one);
        }
        ln.inputs = {m->x, m->scale};
        if (!m->bias.empty()) ln.inputs.push_back(m->bias);
        ln.outputs = {m->out};
        ln.attrs = {{"axis", m->axis}, {"epsilon", m->epsilon}};
        passes::replace_pattern(g, m->nodes, i, std::move(ln));
        // Nodes before i are unchanged (the pattern starts at i), so the scan goes on from there.
    }
    return prepare(std::move(g));
}

}  // namespace hfuse
