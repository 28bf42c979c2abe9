// enumerate_plans(): the legal partitions of a graph into fused groups (see hfuse/planner.h).
//
// A breadth-first search over partitions, from every node its own group: a partition's successors
// merge two of its groups, kept when check_plan accepts the result. Every legal partition is reached:
// build its groups one at a time in the order check_plan gives them (a topological order of the
// groups), each one node at a time in topological order. Each intermediate partition is legal: a
// prefix of a convex group in topological order is convex (a path leaving it and coming back would
// pass through a later node of the group, or leave the group itself), and the groups stay acyclic.
#include "hfuse/error.h"
#include "hfuse/planner.h"

#include <algorithm>
#include <deque>
#include <set>

namespace hfuse {
namespace {

using IndexPartition = std::vector<std::vector<int>>;  // node indices; groups sorted, by their first node

IndexPartition canonical(IndexPartition p) {
    for (auto &grp : p) std::sort(grp.begin(), grp.end());
    std::sort(p.begin(), p.end());
    return p;
}

// The partition as a plan, or nothing if check_plan rejects it.
bool to_plan(const Graph &g, const IndexPartition &p, FusedGraph &out) {
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

}  // namespace

std::vector<FusedGraph> enumerate_plans(const Graph &graph, const PlanEnumeration &options) {
    const int n = static_cast<int>(graph.nodes.size());
    std::vector<FusedGraph> plans;
    if (n == 0) return plans;
    IndexPartition start;
    for (int i = 0; i < n; i++) start.push_back({i});
    std::set<IndexPartition> seen = {start};
    std::deque<IndexPartition> queue = {start};
    while (!queue.empty() && plans.size() < options.limit) {
        IndexPartition p = queue.front();
        queue.pop_front();
        FusedGraph plan;
        if (!to_plan(graph, p, plan)) continue;
        plans.push_back(std::move(plan));
        for (size_t i = 0; i < p.size(); i++) {
            for (size_t j = i + 1; j < p.size(); j++) {
                if (static_cast<int>(p[i].size() + p[j].size()) > options.max_group_ops) continue;
                IndexPartition q;
                for (size_t k = 0; k < p.size(); k++) {
                    if (k != i && k != j) q.push_back(p[k]);
                }
                std::vector<int> merged = p[i];
                merged.insert(merged.end(), p[j].begin(), p[j].end());
                q.push_back(merged);
                q = canonical(std::move(q));
                // Only legal partitions are expanded further (checked when dequeued).
                if (seen.insert(q).second) queue.push_back(std::move(q));
            }
        }
    }
    return plans;
}

}  // namespace hfuse
