#include "planner/graph_util.h"

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

}  // namespace hfuse::planner
