#include "planner/graph_util.h"

#include "hfuse/attributes.h"
#include "hfuse/error.h"

#include <algorithm>

namespace hfuse::planner {

NodeGraph::NodeGraph(const Graph &g)
    : graph(&g), producers(g.nodes.size()), consumers(g.nodes.size()), is_model_output(g.nodes.size(), false) {
    std::map<std::string, int> producer_of;
    for (size_t i = 0; i < g.nodes.size(); i++) {
        index[g.nodes[i].name] = static_cast<int>(i);
        for (const std::string &v : g.nodes[i].outputs) producer_of[v] = static_cast<int>(i);
    }
    for (size_t i = 0; i < g.nodes.size(); i++) {
        for (const std::string &v : g.nodes[i].inputs) {
            auto it = producer_of.find(v);
            if (it == producer_of.end()) continue;
            producers[i].push_back(it->second);
            consumers[it->second].push_back(static_cast<int>(i));
        }
    }
    for (auto *lists : {&producers, &consumers}) {
        for (auto &l : *lists) {
            std::sort(l.begin(), l.end());
            l.erase(std::unique(l.begin(), l.end()), l.end());
        }
    }
    for (const std::string &v : g.outputs) {
        if (auto it = producer_of.find(v); it != producer_of.end()) is_model_output[it->second] = true;
    }
}

int kind_rank(PatternKind kind) {
    switch (kind) {
    case PatternKind::Elementwise: return 0;
    case PatternKind::Broadcast: return 1;
    case PatternKind::Injective: return 2;
    case PatternKind::Reduction: return 3;
    case PatternKind::Window: return 4;
    case PatternKind::ComplexOutFusable: return 5;
    case PatternKind::Opaque: return 6;
    }
    return 6;
}

bool is_cheap(PatternKind kind) {
    return kind == PatternKind::Elementwise || kind == PatternKind::Broadcast || kind == PatternKind::Injective;
}

bool is_pointwise_conv(const Graph &g, const Node &n) {
    if (n.op != "Conv" || n.inputs.size() < 2) return false;
    const Attributes a(n.attrs);
    const Shape &w = g.type_of(n.inputs[1]).shape;
    const std::vector<int64_t> pads = a.get_ints("pads", {});
    return w.size() == 4 && w[2] == 1 && w[3] == 1 && a.get_int("group", 1) == 1 &&
           a.get_ints("strides", {1, 1}) == std::vector<int64_t>{1, 1} &&
           a.get_string("auto_pad", "NOTSET") == "NOTSET" &&
           std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
}

bool is_padded_depthwise_conv(const Graph &g, const Node &n) {
    if (n.op != "Conv" || n.inputs.empty()) return false;
    const Attributes a(n.attrs);
    const Shape &in = g.type_of(n.inputs[0]).shape, &out = g.type_of(n.outputs[0]).shape;
    const std::vector<int64_t> pads = a.get_ints("pads", {});
    return in.size() == 4 && out.size() == 4 && in[1] > 1 && a.get_int("group", 1) == in[1] && out[1] == in[1] &&
           a.get_string("auto_pad", "NOTSET") == "NOTSET" && pads.size() == 4 && (pads[0] > 0 || pads[1] > 0);
}

PointwiseFeed pointwise_feed(const NodeGraph &ng, int dw) {
    const Graph &g = *ng.graph;
    const Node &d = g.nodes[dw];
    if (!is_padded_depthwise_conv(g, d)) return {};
    const Shape &shape = g.type_of(d.inputs[0]).shape;
    PointwiseFeed feed;
    std::set<int> seen;
    std::vector<int> stack;
    const Node *first = g.producer(d.inputs[0]);
    if (!first) return {};
    stack.push_back(ng.index.at(first->name));
    while (!stack.empty()) {
        const int i = stack.back();
        stack.pop_back();
        if (!seen.insert(i).second) continue;
        const Node &n = g.nodes[i];
        if (n.outputs.size() != 1 || ng.is_model_output[i] || g.type_of(n.outputs[0]).shape != shape) return {};
        if (n.op == "Conv") {
            // One pointwise conv ends every path.
            if (!is_pointwise_conv(g, n) || (feed.conv >= 0 && feed.conv != i)) return {};
            feed.conv = i;
            continue;
        }
        const PatternKind k = effective_kind(g, n);
        if (k != PatternKind::Elementwise && k != PatternKind::Broadcast) return {};
        feed.between.insert(i);
        for (const std::string &v : n.inputs) {
            if (v.empty() || g.is_weight(v)) continue;
            const Node *p = g.producer(v);
            if (!p) return {};  // a model input: not from the conv
            stack.push_back(ng.index.at(p->name));
        }
    }
    if (feed.conv < 0) return {};
    // Everything in the feed is read only inside it or by the depthwise conv.
    for (int i : seen) {
        for (int c : ng.consumers[i]) {
            if (c != dw && !feed.between.count(c)) return {};
        }
    }
    return feed;
}

bool is_live_out(const NodeGraph &ng, int node, const std::set<int> &group) {
    if (ng.is_model_output[node]) return true;
    for (int c : ng.consumers[node]) {
        if (!group.count(c)) return true;
    }
    return false;
}

bool reaches(const NodeGraph &ng, int from, int to) {
    // Nodes are topologically sorted: a path only climbs in index, so stop above `to`.
    std::vector<bool> seen(ng.consumers.size(), false);
    std::vector<int> stack = {from};
    while (!stack.empty()) {
        int u = stack.back();
        stack.pop_back();
        if (u == to) return true;
        if (u > to || seen[u]) continue;
        seen[u] = true;
        stack.insert(stack.end(), ng.consumers[u].begin(), ng.consumers[u].end());
    }
    return false;
}

IndexPartition canonical(IndexPartition p) {
    for (auto &grp : p) std::sort(grp.begin(), grp.end());
    std::sort(p.begin(), p.end());
    return p;
}

bool partition_to_plan(const Graph &g, const IndexPartition &p, FusedGraph &out) {
    FusedGraph f;
    f.graph = g;
    f.rewritten = true;
    for (const auto &nodes : p) {
        FusedGroup grp;
        for (int n : nodes) grp.nodes.push_back(g.nodes[n].name);
        f.groups.push_back(std::move(grp));
    }
    try {
        out = check_plan(std::move(f));
        return true;
    } catch (const Error &) {
        return false;
    }
}

Graph without_weight_values(const Graph &g) {
    Graph out;
    out.name = g.name;
    out.source = g.source;
    out.inputs = g.inputs;
    for (const auto &[name, c] : g.weights) out.weights[name].type = c.type;
    out.nodes = g.nodes;
    out.outputs = g.outputs;
    out.removed = g.removed;
    out.types = g.types;
    return out;
}

}  // namespace hfuse::planner
