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

// A partition held as each node's group, the groups numbered in canonical order (by their first
// node): n ints. As an IndexPartition (n small vectors) the search's partitions took ten times the
// memory: a 191-node network's first expansion (18,000 partitions) grew the process by 735 MB.
using Labels = std::vector<int>;

Labels labels_of(const IndexPartition &canonical_partition, int n) {
    Labels labels(n);
    for (size_t k = 0; k < canonical_partition.size(); k++) {
        for (int node : canonical_partition[k]) labels[node] = static_cast<int>(k);
    }
    return labels;
}

IndexPartition partition_of(const Labels &labels) {
    IndexPartition p;
    for (size_t i = 0; i < labels.size(); i++) {
        if (static_cast<size_t>(labels[i]) >= p.size()) p.resize(labels[i] + 1);
        p[labels[i]].push_back(static_cast<int>(i));
    }
    return p;
}

}  // namespace

std::vector<FusedGraph> enumerate_plans(const Graph &graph, const PlanEnumeration &options) {
    const int n = static_cast<int>(graph.nodes.size());
    std::vector<FusedGraph> plans;
    if (n == 0) return plans;
    Labels start(n);
    for (int i = 0; i < n; i++) start[i] = i;
    // The queue points into `seen` (a set's elements stay where they are).
    std::set<Labels> seen = {start};
    std::deque<const Labels *> queue = {&*seen.begin()};
    const size_t max_partitions =
        options.max_partitions ? options.max_partitions : std::max<size_t>(64 * options.limit, (size_t{1} << 22) / n);
    bool complete = true;
    while (!queue.empty()) {
        if (plans.size() >= options.limit || seen.size() > max_partitions) {
            complete = false;
            break;
        }
        const IndexPartition p = partition_of(*queue.front());
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
                // Only legal partitions are expanded further (checked when dequeued).
                const auto [it, added] = seen.insert(labels_of(planner::canonical(std::move(q)), n));
                if (added) queue.push_back(&*it);
            }
        }
    }
    if (options.complete) *options.complete = complete;
    return plans;
}

}  // namespace hfuse
