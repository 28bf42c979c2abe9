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
#include "planner/graph_util.h"

#include <algorithm>
#include <deque>
#include <set>

namespace hfuse {
namespace {

using planner::IndexPartition;

}  // namespace

std::vector<FusedGraph> enumerate_plans(const Graph &graph, const PlanEnumeration &options) {
    const int n = static_cast<int>(graph.nodes.size());
    std::vector<FusedGraph> plans;
    if (n == 0) return plans;
    IndexPartition start;
    for (int i = 0; i < n; i++) start.push_back({i});
    std::set<IndexPartition> seen = {start};
    std::deque<IndexPartition> queue = {start};
    const size_t max_partitions =
        options.max_partitions ? options.max_partitions : std::max<size_t>(64 * options.limit, (size_t{1} << 22) / n);
    bool complete = true;
    while (!queue.empty()) {
        if (plans.size() >= options.limit || seen.size() > max_partitions) {
            complete = false;
            break;
        }
        IndexPartition p = queue.front();
        queue.pop_front();
        FusedGraph plan;
        if (!planner::partition_to_plan(graph, p, plan)) continue;
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
                q = planner::canonical(std::move(q));
                // Only legal partitions are expanded further (checked when dequeued).
                if (seen.insert(q).second) queue.push_back(std::move(q));
            }
        }
    }
    if (options.complete) *options.complete = complete;
    return plans;
}

}  // namespace hfuse
