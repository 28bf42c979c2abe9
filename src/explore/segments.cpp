#include "explore/segments.h"

#include "hfuse/error.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <sstream>

namespace hfuse::explore {
namespace {

// A cut before node `at`: the one value crossing it and how many nodes read it.
struct Cut {
    int at = 0;
    int readers = 0;
};

// Every single-value cut of the topological order: between nodes at - 1 and at (0 < at < n) where
// exactly one value made before `at` is read from `at` on or is a graph output.
std::vector<Cut> single_value_cuts(const Graph &g) {
    const int n = static_cast<int>(g.nodes.size());
    std::map<std::string, int> made_at, last_read;
    std::map<std::string, int> readers;
    for (int i = 0; i < n; i++) {
        for (const std::string &v : g.nodes[i].outputs) made_at[v] = i;
        for (const std::string &v : g.nodes[i].inputs) {
            if (v.empty() || !made_at.count(v)) continue;           // graph inputs and weights cross no cut
            if (last_read.count(v) && last_read[v] == i) continue;  // Mul(x, x): one reader
            last_read[v] = i;
            readers[v]++;
        }
    }
    for (const std::string &v : g.outputs) {
        if (made_at.count(v)) last_read[v] = n;  // read after the last node
    }
    // live[at]: the values made before `at` and read from `at` on, counted by a sweep.
    std::vector<int> delta(n + 2, 0);
    for (const auto &[v, end] : last_read) {
        const int from = made_at.at(v) + 1, to = end;  // live across cuts from..to
        if (from > to) continue;
        delta[from]++;
        delta[to + 1]--;
    }
    std::vector<Cut> cuts;
    int live = 0;
    for (int at = 1; at < n; at++) {
        live += delta[at];
        if (live != 1) continue;
        // Find the value: made before `at`, read from `at` on.
        for (const auto &[v, end] : last_read) {
            if (made_at.at(v) < at && end >= at) {
                cuts.push_back({at, readers[v] + (std::count(g.outputs.begin(), g.outputs.end(), v) ? 1 : 0)});
                break;
            }
        }
    }
    return cuts;
}

}  // namespace

std::string nodes_signature(const Graph &g, const std::vector<int> &nodes) {
    std::map<std::string, int> local;
    std::ostringstream os;
    auto name = [&](const std::string &v) {
        auto [it, fresh] = local.emplace(v, static_cast<int>(local.size()));
        (void)fresh;
        return "v" + std::to_string(it->second);
    };
    for (int i : nodes) {
        const Node &n = g.nodes[i];
        os << n.op << " " << n.attrs.dump() << " (";
        for (const std::string &v : n.inputs) {
            if (v.empty()) {
                os << "_ ";
                continue;
            }
            const TensorType &t = g.type_of(v);
            if (g.is_weight(v)) {
                const Constant &c = g.weights.at(v);
                os << "w" << to_string(t.shape) << (c.i64.empty() ? "" : ":");
                for (int64_t x : c.i64) os << x << ",";
                os << " ";
            } else {
                os << name(v) << ":" << to_string(t.shape) << " ";
            }
        }
        os << ") -> (";
        for (const std::string &v : n.outputs) os << name(v) << ":" << to_string(g.type_of(v).shape) << " ";
        os << ")\n";
    }
    return os.str();
}

std::vector<Segment> cut_segments(const Graph &g, int max_nodes) {
    if (max_nodes < 1) throw Error("internal: cut_segments needs max_nodes >= 1");
    const int n = static_cast<int>(g.nodes.size());
    const std::vector<Cut> cuts = single_value_cuts(g);
    std::vector<int> bounds = {0};
    // Cuts whose value several nodes read first; then, within a segment still too long, single-reader
    // cuts as evenly as the segment allows (at most max_nodes apart where cuts exist).
    std::vector<int> strong;
    for (const Cut &c : cuts) {
        if (c.readers >= 2) strong.push_back(c.at);
    }
    strong.push_back(n);
    for (int next : strong) {
        int from = bounds.back();
        while (next - from > max_nodes) {
            int best = -1;  // the furthest cut within max_nodes of `from`
            for (const Cut &c : cuts) {
                if (c.at > from && c.at <= from + max_nodes && c.at < next) best = c.at;
            }
            if (best < 0) break;  // no cut inside: the segment stays longer
            bounds.push_back(best);
            from = best;
        }
        if (next > bounds.back()) bounds.push_back(next);
    }
    std::vector<Segment> segments;
    for (size_t i = 0; i + 1 < bounds.size(); i++) {
        Segment s;
        s.begin = bounds[i];
        s.end = bounds[i + 1];
        std::vector<int> nodes(s.end - s.begin);
        std::iota(nodes.begin(), nodes.end(), s.begin);
        s.signature = nodes_signature(g, nodes);
        segments.push_back(std::move(s));
    }
    return segments;
}

Graph segment_graph(const Graph &g, const Segment &s) {
    std::set<std::string> nodes;
    for (int i = s.begin; i < s.end; i++) nodes.insert(g.nodes[i].name);
    return subgraph(g, nodes);
}

}  // namespace hfuse::explore
