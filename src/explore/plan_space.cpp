#include "explore/plan_space.h"

#include "explore/segments.h"
#include "hfuse/composer.h"
#include "hfuse/error.h"
#include "hfuse/planner.h"
#include "planner/graph_util.h"

#include <algorithm>
#include <map>
#include <set>

namespace hfuse::explore {
namespace {

using planner::IndexPartition;

// check_plan copies the graph for every plan it checks: without the large float weights (which
// neither legality, the composer's defaults nor the cost model read) that copy is cheap.
Graph without_large_weights(Graph g) {
    for (auto &kv : g.weights) {
        if (kv.second.f32.size() > 1024) {
            kv.second.f32.clear();
            kv.second.f32.shrink_to_fit();
        }
    }
    return g;
}

RankedPlan rank(FusedGraph plan, const Halide::Target &target) {
    RankedPlan r;
    r.plan = with_default_schedules(std::move(plan), target);
    r.cost = estimate_plan(r.plan, target);
    return r;
}

// Producer -> consumer edges between nodes, by index.
std::vector<std::pair<int, int>> node_edges(const Graph &g, const std::map<std::string, int> &index) {
    std::map<std::string, int> producer;
    for (size_t i = 0; i < g.nodes.size(); i++) {
        for (const std::string &v : g.nodes[i].outputs) producer[v] = static_cast<int>(i);
    }
    std::set<std::pair<int, int>> edges;
    for (size_t i = 0; i < g.nodes.size(); i++) {
        for (const std::string &v : g.nodes[i].inputs) {
            if (auto it = producer.find(v); it != producer.end()) edges.insert({it->second, static_cast<int>(i)});
        }
    }
    return {edges.begin(), edges.end()};
}

std::vector<RankedPlan> beam_search(const Graph &g, const Halide::Target &target, const PlanSpaceOptions &o) {
    std::map<std::string, int> index;
    for (size_t i = 0; i < g.nodes.size(); i++) index[g.nodes[i].name] = static_cast<int>(i);
    const std::vector<std::pair<int, int>> edges = node_edges(g, index);
    SeededRandom rng(o.seed);

    IndexPartition start;
    for (size_t i = 0; i < g.nodes.size(); i++) start.push_back({static_cast<int>(i)});
    FusedGraph first;
    std::vector<RankedPlan> visited;
    if (!planner::partition_to_plan(g, start, first)) return visited;
    visited.push_back(rank(first, target));
    std::set<IndexPartition> seen = {start};
    std::vector<IndexPartition> beam = {start};
    while (!beam.empty() && visited.size() < o.max_plans) {
        std::vector<std::pair<IndexPartition, RankedPlan>> next;
        for (const IndexPartition &p : beam) {
            std::vector<int> group_of(g.nodes.size());
            for (size_t k = 0; k < p.size(); k++) {
                for (int n : p[k]) group_of[n] = static_cast<int>(k);
            }
            // Merge the two groups at the ends of each edge between groups ("fusible edges").
            std::set<std::pair<int, int>> pairs;
            for (const auto &e : edges) {
                int a = group_of[e.first], b = group_of[e.second];
                if (a != b) pairs.insert({std::min(a, b), std::max(a, b)});
            }
            for (const auto &ab : pairs) {
                if (static_cast<int>(p[ab.first].size() + p[ab.second].size()) > o.max_group_ops) continue;
                IndexPartition q;
                for (size_t k = 0; k < p.size(); k++) {
                    if (static_cast<int>(k) != ab.first && static_cast<int>(k) != ab.second) q.push_back(p[k]);
                }
                std::vector<int> merged = p[ab.first];
                merged.insert(merged.end(), p[ab.second].begin(), p[ab.second].end());
                q.push_back(merged);
                q = planner::canonical(std::move(q));
                if (!seen.insert(q).second) continue;
                FusedGraph plan;
                if (!planner::partition_to_plan(g, q, plan)) continue;
                next.emplace_back(q, rank(std::move(plan), target));
            }
        }
        if (next.empty()) break;
        std::stable_sort(next.begin(), next.end(),
                         [](const auto &a, const auto &b) { return a.second.cost.ms < b.second.cost.ms; });
        beam.clear();
        const size_t keep = std::min<size_t>(std::max(1, o.beam_width - 1), next.size());
        for (size_t i = 0; i < keep; i++) beam.push_back(next[i].first);
        if (next.size() > keep) beam.push_back(next[keep + rng.below(next.size() - keep)].first);  // diversity
        for (auto &n : next) visited.push_back(std::move(n.second));
    }
    return visited;
}

// A segment's plans, best estimate first, as partitions of its own node indices (0 = the segment's
// first node): every legal plan when there are at most o.exhaustive_limit, else a beam search's.
std::vector<IndexPartition> segment_choices(const Graph &sub, const Halide::Target &target, const PlanSpaceOptions &o) {
    bool complete = false;
    PlanEnumeration enumeration;
    enumeration.limit = o.exhaustive_limit + 1;
    enumeration.max_group_ops = o.max_group_ops;
    enumeration.complete = &complete;
    std::vector<RankedPlan> ranked;
    std::vector<FusedGraph> all = enumerate_plans(sub, enumeration);
    if (complete && all.size() <= o.exhaustive_limit) {
        for (FusedGraph &p : all) ranked.push_back(rank(std::move(p), target));
    } else {
        PlanSpaceOptions inner = o;
        inner.max_plans = o.segment_max_plans;
        ranked = beam_search(sub, target, inner);
    }
    std::stable_sort(ranked.begin(), ranked.end(), [](const RankedPlan &a, const RankedPlan &b) {
        if (a.cost.ms != b.cost.ms) return a.cost.ms < b.cost.ms;
        return a.plan.groups.size() < b.plan.groups.size();
    });
    std::map<std::string, int> index;
    for (size_t i = 0; i < sub.nodes.size(); i++) index[sub.nodes[i].name] = static_cast<int>(i);
    std::vector<IndexPartition> choices;
    for (const RankedPlan &r : ranked) {
        if (static_cast<int>(choices.size()) >= o.segment_choices) break;
        IndexPartition q;
        for (const FusedGroup &grp : r.plan.groups) {
            std::vector<int> members;
            for (const std::string &n : grp.nodes) members.push_back(index.at(n));
            q.push_back(members);
        }
        choices.push_back(planner::canonical(std::move(q)));
    }
    return choices;
}

// Plans composed from the segments' own searches (segments.h): every segment at its best estimate,
// then, per signature, all its segments at their 2nd, 3rd ... choice with the rest at their best.
// Identical segments are searched once. Fusions across a cut are not searched.
std::vector<RankedPlan> segment_search(const Graph &g, const std::vector<Segment> &segments,
                                       const Halide::Target &target, const PlanSpaceOptions &o, PlanSpace &space) {
    std::map<std::string, std::vector<IndexPartition>> choices;  // by signature
    for (const Segment &seg : segments) {
        if (!choices.count(seg.signature)) choices[seg.signature] = segment_choices(segment_graph(g, seg), target, o);
    }
    space.segments = static_cast<int>(segments.size());
    space.distinct_segments = static_cast<int>(choices.size());
    auto compose = [&](const std::string &varied, size_t k) {
        IndexPartition whole;
        for (const Segment &seg : segments) {
            const std::vector<IndexPartition> &c = choices.at(seg.signature);
            if (c.empty()) {  // no legal plan found alone: its nodes unfused
                for (int i = seg.begin; i < seg.end; i++) whole.push_back({i});
                continue;
            }
            const IndexPartition &p = c[seg.signature == varied ? k : 0];
            for (const std::vector<int> &grp : p) {
                std::vector<int> members;
                for (int i : grp) members.push_back(seg.begin + i);
                whole.push_back(members);
            }
        }
        return planner::canonical(std::move(whole));
    };
    std::map<std::string, std::pair<std::string, int>> first_and_count;  // by signature: first node, occurrences
    for (const Segment &seg : segments) {
        auto &fc = first_and_count[seg.signature];
        if (fc.second++ == 0) fc.first = g.nodes[seg.begin].name;
    }
    std::vector<RankedPlan> plans;
    std::set<IndexPartition> seen;
    auto add = [&](IndexPartition q, const std::string &label) {
        if (!seen.insert(q).second) return;
        FusedGraph plan;
        if (!planner::partition_to_plan(g, q, plan)) return;
        plans.push_back(rank(std::move(plan), target));
        plans.back().segment_choice = label;
    };
    add(compose("", 0), "");
    for (const auto &[signature, c] : choices) {
        const auto &[first, count] = first_and_count.at(signature);
        for (size_t k = 1; k < c.size(); k++) {
            add(compose(signature, k), "segment '" + first + "'" +
                                           (count > 1 ? " (x" + std::to_string(count) + ")" : "") + ": its choice " +
                                           std::to_string(k + 1) + " of " + std::to_string(c.size()));
        }
    }
    return plans;
}

}  // namespace

uint64_t SeededRandom::next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

PlanSpace plan_space(const Graph &graph, const Halide::Target &target, const PlanSpaceOptions &o) {
    const Graph g = without_large_weights(graph);
    PlanSpace space;
    std::vector<RankedPlan> plans;
    bool complete = false;
    PlanEnumeration enumeration;
    enumeration.limit = o.exhaustive_limit + 1;
    enumeration.max_group_ops = o.max_group_ops;
    enumeration.complete = &complete;
    std::vector<FusedGraph> all = enumerate_plans(g, enumeration);
    if (complete && all.size() <= o.exhaustive_limit) {
        space.exhaustive = true;
        for (FusedGraph &p : all) plans.push_back(rank(std::move(p), target));
    } else if (const std::vector<Segment> segments = cut_segments(g, o.max_segment_nodes); segments.size() > 1) {
        plans = segment_search(g, segments, target, o, space);
    } else {
        plans = beam_search(g, target, o);  // one segment: its own search's plans, all of them
    }
    // The best estimate of each group count first, then the rest by estimate (ties: fewer groups).
    std::stable_sort(plans.begin(), plans.end(), [](const RankedPlan &a, const RankedPlan &b) {
        if (a.cost.ms != b.cost.ms) return a.cost.ms < b.cost.ms;
        return a.plan.groups.size() < b.plan.groups.size();
    });
    std::set<size_t> counts;
    std::vector<RankedPlan> firsts, rest;
    for (RankedPlan &r : plans) {
        (counts.insert(r.plan.groups.size()).second ? firsts : rest).push_back(std::move(r));
    }
    for (RankedPlan &r : firsts) space.plans.push_back(std::move(r));
    for (RankedPlan &r : rest) space.plans.push_back(std::move(r));
    // The plans hold the light graph: callers write them as plan files (names only), never run them.
    return space;
}

}  // namespace hfuse::explore
