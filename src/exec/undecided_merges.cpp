#include "hfuse/undecided_merges.h"
#include "hfuse/target.h"

#include "exec/statistics.h"
#include "hfuse/composer.h"
#include "hfuse/error.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

namespace hfuse {

namespace {

// `grp` of `g` as two groups: the nodes of `part` it owns, and the rest; each recompute copy goes to
// the sides that read it (both, or the one). Placements carry over but "output" and "folded", and
// those of nodes the other side (or the model) now reads, which check_plan derives again; schedules
// and names are chosen again. Empty when either side would own nothing.
std::vector<FusedGroup> split_group(const Graph &g, const FusedGroup &grp, const std::vector<std::string> &part) {
    const std::set<std::string> in_part(part.begin(), part.end());
    std::set<std::string> sides[2];  // joined, rest: owned nodes, then the copies they read
    for (const std::string &n : grp.nodes) {
        if (!is_recompute_copy(grp, n)) sides[in_part.count(n) ? 0 : 1].insert(n);
    }
    // The part is the producer side of its merge: what joined the group since and feeds it (a Slice
    // before a pointwise conv) goes with it, or the rest would not be convex.
    auto reads_from = [&](const std::string &reader, const std::string &producer) {
        const std::vector<std::string> &in = g.find_node(reader)->inputs, &outs = g.find_node(producer)->outputs;
        return std::any_of(in.begin(), in.end(),
                           [&](const std::string &v) { return std::find(outs.begin(), outs.end(), v) != outs.end(); });
    };
    for (bool grew = true; grew;) {
        grew = false;
        for (auto it = sides[1].begin(); it != sides[1].end();) {
            const std::string n = *it;
            const bool feeds =
                std::any_of(sides[0].begin(), sides[0].end(), [&](const std::string &j) { return reads_from(j, n); });
            if (!feeds) {
                ++it;
                continue;
            }
            it = sides[1].erase(it);
            grew = sides[0].insert(n).second;
        }
    }
    if (sides[0].empty() || sides[1].empty()) return {};
    for (std::set<std::string> &side : sides) {
        for (bool grew = true; grew;) {  // copies feed copies: until no side node reads one more
            grew = false;
            for (const std::string &c : grp.nodes) {
                if (!is_recompute_copy(grp, c) || side.count(c)) continue;
                const bool read =
                    std::any_of(side.begin(), side.end(), [&](const std::string &n) { return reads_from(n, c); });
                if (read) grew = side.insert(c).second;
            }
        }
    }
    std::vector<FusedGroup> out(2);
    for (int s = 0; s < 2; s++) {
        FusedGroup &side = out[s];
        for (const std::string &n : grp.nodes) {
            if (sides[s].count(n)) side.nodes.push_back(n);
        }
        std::set<std::string> read_elsewhere(g.outputs.begin(), g.outputs.end());
        for (const Node &n : g.nodes) {
            if (!sides[s].count(n.name)) read_elsewhere.insert(n.inputs.begin(), n.inputs.end());
        }
        for (const std::string &name : side.nodes) {
            const Node &n = *g.find_node(name);
            const bool live_out = !is_recompute_copy(grp, name) &&
                                  std::any_of(n.outputs.begin(), n.outputs.end(),
                                              [&](const std::string &v) { return read_elsewhere.count(v) > 0; });
            auto p = grp.placement.find(name);
            if (!live_out && p != grp.placement.end() && p->second != Placement::Output &&
                p->second != Placement::Folded)
                side.placement[name] = p->second;
        }
    }
    return out;
}

// `plan` with group `i` replaced by `parts`, checked; nullopt where check_plan refuses it.
std::optional<FusedGraph> with_split(const FusedGraph &plan, size_t i, const std::vector<FusedGroup> &parts) {
    FusedGraph trial = plan;
    trial.groups.erase(trial.groups.begin() + static_cast<std::ptrdiff_t>(i));
    trial.groups.insert(trial.groups.end(), parts.begin(), parts.end());
    try {
        return check_plan(std::move(trial));
    } catch (const Error &) {
        return std::nullopt;
    }
}

std::set<std::string> node_set(const FusedGroup &grp) {
    return {grp.nodes.begin(), grp.nodes.end()};
}

std::string ms_text(double ms) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f ms", ms);
    return buf;
}

}  // namespace

MeasuredMerges measure_undecided_merges(const FusedGraph &planned, const UndecidedMeasureOptions &options) {
    if (options.chunks < 1 || options.runs < 1) throw Error("internal: measure_undecided_merges needs runs");
    MeasuredMerges out;
    const FusedGraph merged = check_plan(planned);
    // Every undecided group split at its first undecided merge, one at a time (check_plan refuses a
    // split whose parts a path leaves and re-enters).
    struct Candidate {
        std::set<std::string> nodes;  // the merged group's
        std::vector<std::string> part;
        std::set<std::string> joined, rest;  // the groups apart
        std::string name;
    };
    std::vector<Candidate> candidates;
    FusedGraph apart = merged;
    for (const FusedGroup &grp : merged.groups) {
        if (grp.undecided.empty()) continue;
        if (!grp.backend.empty()) {  // a backend lowers the group whole, as its pattern matched
            out.notes.push_back(grp.name + ": kept merged, unmeasured: claimed by backend " + grp.backend);
            continue;
        }
        const std::vector<FusedGroup> parts = split_group(merged.graph, grp, grp.undecided.front());
        auto at = std::find_if(apart.groups.begin(), apart.groups.end(),
                               [&](const FusedGroup &a) { return node_set(a) == node_set(grp); });
        std::optional<FusedGraph> trial;
        if (!parts.empty() && at != apart.groups.end())
            trial = with_split(apart, static_cast<size_t>(at - apart.groups.begin()), parts);
        if (!trial) {
            out.notes.push_back(grp.name + ": kept merged, unmeasured: apart is not a legal plan");
            continue;
        }
        apart = std::move(*trial);
        candidates.push_back({node_set(grp), grp.undecided.front(), node_set(parts[0]), node_set(parts[1]), grp.name});
    }
    if (candidates.empty()) {
        out.plan = merged;
        return out;
    }

    // Both plans compiled and profiled in alternation: each group's time beside its parts'.
    const Halide::Target target = host_target();
    const FusedGraph a_plan = with_default_schedules(merged, target), b_plan = with_default_schedules(apart, target);
    Executor a(a_plan, options.executor), b(b_plan, options.executor);
    std::map<std::string, TensorBuffer> inputs;  // as `hfuse run` generates them
    for (size_t i = 0; i < merged.graph.inputs.size(); i++)
        inputs[merged.graph.inputs[i].name] = generated_input(merged.graph.inputs[i], i);
    auto names = [](const FusedGraph &f) {
        std::map<std::set<std::string>, std::string> by_nodes;
        for (const FusedGroup &grp : f.groups) by_nodes[node_set(grp)] = grp.name;
        return by_nodes;
    };
    const auto a_names = names(a_plan), b_names = names(b_plan);
    std::map<std::string, std::vector<double>> a_ms, b_ms;
    a.run(inputs);  // warm both before the first chunk
    b.run(inputs);
    for (int c = 0; c < options.chunks; c++) {
        for (const GroupProfile &gp : a.profile(inputs, options.runs).groups) a_ms[gp.name].push_back(gp.ms);
        for (const GroupProfile &gp : b.profile(inputs, options.runs).groups) b_ms[gp.name].push_back(gp.ms);
    }

    FusedGraph decided = merged;
    for (const Candidate &cand : candidates) {
        const std::vector<double> &m = a_ms[a_names.at(cand.nodes)];
        const std::vector<double> &j = b_ms[b_names.at(cand.joined)], &r = b_ms[b_names.at(cand.rest)];
        std::vector<double> sum;
        for (size_t k = 0; k < std::min(j.size(), r.size()); k++) sum.push_back(j[k] + r[k]);
        UndecidedMeasurement meas{cand.name, cand.part, exec::median(m), exec::median(sum), false};
        meas.split = meas.apart_ms < meas.merged_ms * (1 - options.margin);
        const std::string why = "measured: as one group " + ms_text(meas.merged_ms) + ", apart " +
                                ms_text(meas.apart_ms) + " (" + ms_text(exec::median(j)) + " + " +
                                ms_text(exec::median(r)) + "): " + (meas.split ? "split" : "kept as one");
        auto at = std::find_if(decided.groups.begin(), decided.groups.end(),
                               [&](const FusedGroup &g) { return node_set(g) == cand.nodes; });
        if (at == decided.groups.end()) throw Error("internal: measure_undecided_merges lost group " + cand.name);
        if (!meas.split) {
            at->why += (at->why.empty() ? "" : "; ") + why;
            at->undecided.clear();
        } else {
            std::vector<FusedGroup> parts = split_group(decided.graph, *at, cand.part);
            for (FusedGroup &p : parts) p.why = "split from " + cand.name + ", " + why;
            std::optional<FusedGraph> trial =
                with_split(decided, static_cast<size_t>(at - decided.groups.begin()), parts);
            if (!trial) throw Error("internal: measure_undecided_merges could not split " + cand.name + " again");
            decided = std::move(*trial);
        }
        out.measured.push_back(meas);
    }
    out.plan = std::move(decided);
    return out;
}

}  // namespace hfuse
