#include "explore/segment_findings.h"

#include "exec/statistics.h"
#include "explore/cost_model.h"
#include "explore/segments.h"
#include "explore/text.h"
#include "hfuse/tuning_record.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

namespace hfuse::explore {
namespace {

using nlohmann::json;

// A plan file's groups by node index of `g`: for each node, the group that computes it (not a
// "recompute" copy); names a rewrite folded away are skipped.
std::vector<int> owners(const json &plan, const std::map<std::string, int> &index, size_t nodes) {
    std::vector<int> owner(nodes, -1);
    const json &groups = plan.at("groups");
    for (size_t k = 0; k < groups.size(); k++) {
        const json placement = groups[k].value("placement", json::object());
        for (const json &n : groups[k].at("nodes")) {
            auto it = index.find(n.get<std::string>());
            if (it == index.end()) continue;
            if (placement.value(n.get<std::string>(), std::string()) == "recompute") continue;
            owner[it->second] = static_cast<int>(k);
        }
    }
    return owner;
}

struct Grouping {
    std::string key;   // the groups as segment-local indices: "0,1|2,3,4"
    std::string text;  // "Conv+Relu | Conv+Add+Relu"
    int groups = 0;
};

Grouping grouping_of(const Graph &g, const Segment &s, const std::vector<int> &owner) {
    std::vector<int> order;  // groups by first member
    for (int i = s.begin; i < s.end; i++) {
        if (std::find(order.begin(), order.end(), owner[i]) == order.end()) order.push_back(owner[i]);
    }
    Grouping out;
    for (int grp : order) {
        std::string key, text;
        for (int i = s.begin; i < s.end; i++) {
            if (owner[i] != grp) continue;
            key += (key.empty() ? "" : ",") + std::to_string(i - s.begin);
            text += (text.empty() ? "" : "+") + g.nodes[i].op;
        }
        bool before = false, after = false;
        for (size_t i = 0; i < owner.size(); i++) {
            if (owner[i] != grp || grp < 0) continue;
            before |= static_cast<int>(i) < s.begin;
            after |= static_cast<int>(i) >= s.end;
        }
        out.key += (out.key.empty() ? "" : "|") + key;
        out.text += (out.text.empty() ? "" : " | ") + std::string(before ? "..." : "") + text + (after ? "..." : "");
        out.groups++;
    }
    return out;
}

// Bytes the groups computing a node of `s` hand out, by the cost estimate.
int64_t bytes_out(const PlanCost &cost, const FusedGraph &plan, const Segment &s,
                  const std::map<std::string, int> &index) {
    int64_t bytes = 0;
    for (size_t k = 0; k < plan.groups.size(); k++) {
        bool inside = false;
        for (const std::string &n : plan.groups[k].nodes) {
            const int i = index.at(n);
            inside |= i >= s.begin && i < s.end;
        }
        if (inside) bytes += cost.groups[k].bytes_out;
    }
    return bytes;
}

// The schedule parameters of best's groups led in `s` that differ from the default's
// (parameter_changes), each named by its master's op and index in the segment.
std::vector<std::string> schedule_changes(const Graph &g, const Segment &s, const json &best, const json &def,
                                          const std::map<std::string, int> &index) {
    std::vector<std::string> out;
    for (const ParameterChange &c : parameter_changes(best, def)) {
        const auto master = index.find(c.group->value("master", std::string()));
        if (master == index.end() || master->second < s.begin || master->second >= s.end) continue;
        out.push_back(g.nodes[master->second].op + " (node " + std::to_string(master->second - s.begin) +
                      "): " + c.text);
    }
    return out;
}

// The profiled time of the groups computing `s`'s nodes under candidate `e` (their sum), or NaN when
// a group reaches outside `s` or was not profiled; `groups` gets them.
double segment_time(const Evaluation &e, const Graph &g, const Segment &s, std::vector<TunedGroup> *groups = nullptr) {
    if (e.group_ms.empty()) return NAN;
    std::vector<TunedGroup> within;
    std::vector<std::string> names;
    if (!groups_within(e.candidate.plan, g, s.begin, s.end, within, &names)) return NAN;
    double sum = 0;
    for (const std::string &n : names) {
        auto it = e.group_ms.find(n);
        if (it == e.group_ms.end()) return NAN;
        sum += it->second;
    }
    if (groups) *groups = std::move(within);
    return sum;
}

}  // namespace

std::vector<SegmentFindings> segment_findings(const Graph &g, bool rewrites_matter, const std::vector<Evaluation> &rows,
                                              const std::string &default_key, const std::string &best_plan_key,
                                              const Halide::Target &target) {
    const std::vector<Segment> segments = cut_segments(g, kTuningSegmentNodes);
    if (segments.size() <= 1) return {};
    std::map<std::string, int> index;
    for (size_t i = 0; i < g.nodes.size(); i++) index[g.nodes[i].name] = static_cast<int>(i);

    std::vector<std::pair<const Evaluation *, std::vector<int>>> timed;  // templated, ok, over `g`
    const Evaluation *def = nullptr, *best = nullptr;
    for (const Evaluation &e : rows) {
        const Candidate &c = e.candidate;
        if ((rewrites_matter && !c.plan.value("rewritten", true)) || c.whole) continue;
        if (c.key == default_key) def = &e;
        if (c.key == best_plan_key) best = &e;
        if (e.status == "ok" && c.schedule == "templates")
            timed.emplace_back(&e, owners(c.plan, index, g.nodes.size()));
    }
    FusedGraph def_plan, best_plan;
    PlanCost def_cost, best_cost;
    if (def) {
        def_plan = plan_from_json(def->candidate.plan, g, "the default plan");
        def_cost = estimate_plan(def_plan, target);
    }
    if (best) {
        best_plan = plan_from_json(best->candidate.plan, g, "best_plan.json");
        best_cost = estimate_plan(best_plan, target);
    }
    const std::vector<int> def_owner = def ? owners(def->candidate.plan, index, g.nodes.size()) : std::vector<int>();
    const std::vector<int> best_owner = best ? owners(best->candidate.plan, index, g.nodes.size()) : std::vector<int>();

    std::vector<SegmentFindings> out;
    std::vector<std::map<std::string, SegmentChoice>> choices;  // per finding, by grouping key
    std::vector<std::map<std::string, std::vector<double>>> times;
    std::map<std::string, size_t> seen;
    for (const Segment &s : segments) {
        auto [it, first] = seen.emplace(s.signature, out.size());
        const Grouping d = def ? grouping_of(g, s, def_owner) : Grouping{};
        const Grouping b = best ? grouping_of(g, s, best_owner) : Grouping{};
        if (first) {
            SegmentFindings f;
            for (int i = s.begin; i < s.end; i++) f.nodes.push_back(g.nodes[i].name);
            if (def) {
                f.default_grouping = d.text;
                f.default_groups = d.groups;
                f.default_bytes = bytes_out(def_cost, def_plan, s, index);
            }
            if (best) {
                f.best_grouping = b.text;
                f.best_groups = b.groups;
                f.best_bytes = bytes_out(best_cost, best_plan, s, index);
                if (def) f.schedule_changes = schedule_changes(g, s, best->candidate.plan, def->candidate.plan, index);
            }
            out.push_back(std::move(f));
            choices.emplace_back();
            times.emplace_back();
        }
        SegmentFindings &f = out[it->second];
        f.occurrences++;
        const std::string &def_key = d.key, &best_key = b.key;
        for (const auto &[e, owner] : timed) {
            const Grouping gr = grouping_of(g, s, owner);
            SegmentChoice &c = choices[it->second][gr.key];
            if (first) {  // the whole-network times: once per candidate
                c.grouping = gr.text;
                c.candidates++;
                if (c.best_ms == 0 || e->ranked_ms() < c.best_ms) c.best_ms = e->ranked_ms();
                c.is_default |= gr.key == def_key;
                c.is_best |= gr.key == best_key;
            }
            const double t = segment_time(*e, g, s);
            if (!std::isnan(t)) times[it->second][gr.key].push_back(t);
        }
    }
    for (size_t k = 0; k < out.size(); k++) {
        for (auto &[key, c] : choices[k]) {
            auto t = times[k].find(key);
            if (t != times[k].end()) {
                c.segment_ms = exec::median(t->second);
                c.measured = static_cast<int>(t->second.size());
            }
            out[k].choices.push_back(c);
        }
        std::stable_sort(out[k].choices.begin(), out[k].choices.end(),
                         [](const SegmentChoice &a, const SegmentChoice &b) {
                             if (a.measured && b.measured) return a.segment_ms < b.segment_ms;
                             if (a.measured != b.measured) return a.measured > 0;
                             return a.best_ms < b.best_ms;
                         });
    }
    return out;
}

TuningRecords fastest_segment_choices(const Graph &g, bool rewrites_matter, const std::vector<Evaluation> &rows,
                                      const Halide::Target &target) {
    struct Choice {
        std::vector<TunedGroup> groups;
        std::vector<double> ms;
    };
    std::map<std::string, std::map<std::string, Choice>> by_signature;  // signature -> choice key -> ...
    std::map<std::string, std::vector<std::string>> nodes;
    for (const Segment &s : cut_segments(g, kTuningSegmentNodes)) {
        if (!nodes.count(s.signature)) {
            for (int i = s.begin; i < s.end; i++) nodes[s.signature].push_back(g.nodes[i].name);
        }
        for (const Evaluation &e : rows) {
            const Candidate &c = e.candidate;
            if (e.status != "ok" || c.schedule != "templates" || c.whole || e.group_ms.empty()) continue;
            if (rewrites_matter && !c.plan.value("rewritten", true)) continue;
            std::vector<TunedGroup> groups;
            const double t = segment_time(e, g, s, &groups);
            if (std::isnan(t)) continue;
            Choice &choice = by_signature[s.signature][tuned_groups_key(groups)];
            choice.groups = std::move(groups);
            choice.ms.push_back(t);
        }
    }
    TuningRecords records;
    for (auto &[signature, choices] : by_signature) {
        const Choice *fastest = nullptr;
        double fastest_ms = 0;
        for (auto &[key, c] : choices) {
            const double m = exec::median(c.ms);
            if (!fastest || m < fastest_ms) {
                fastest = &c;
                fastest_ms = m;
            }
        }
        TuningEntry e;
        e.signature = signature;
        e.target = tuning_target(target);
        e.model = g.name;
        e.nodes = nodes.at(signature);
        e.groups = fastest->groups;
        records.entries.push_back(std::move(e));
    }
    return records;
}

json to_json(const SegmentFindings &f) {
    json choices = json::array();
    for (const SegmentChoice &c : f.choices) {
        choices.push_back({{"grouping", c.grouping},
                           {"candidates", c.candidates},
                           {"best_ms", c.best_ms},
                           {"segment_ms", c.measured ? json(c.segment_ms) : json(nullptr)},
                           {"measured", c.measured},
                           {"default", c.is_default},
                           {"best_plan", c.is_best}});
    }
    return {
        {"nodes", f.nodes},
        {"occurrences", f.occurrences},
        {"default", {{"grouping", f.default_grouping}, {"groups", f.default_groups}, {"bytes_out", f.default_bytes}}},
        {"best_plan", {{"grouping", f.best_grouping}, {"groups", f.best_groups}, {"bytes_out", f.best_bytes}}},
        {"schedule_changes", f.schedule_changes},
        {"choices", choices}};
}

std::string segment_section(const std::vector<SegmentFindings> &findings) {
    if (findings.empty()) return "";
    std::string s = "## Per segment\n\n";
    s += "The model cut where one value crosses (the segments explore searches and `tuning.json` records), "
         "each distinct segment once. *Groupings timed*: each grouping of the segment the candidates scheduled "
         "by the templates gave it, fastest first: *own*, the median over those candidates and the segment's "
         "occurrences of its groups' profiled times summed (`bench --profile`; the number of such sums), and "
         "*whole*, the fastest whole-network time among the candidates (the other segments as they had "
         "them; how many). **Bold** is best_plan.json's grouping, *(default)* the default plan's. *Between "
         "groups*: the bytes the segment's groups hand out by the cost estimate (a fusion keeps its "
         "intermediates out of memory).\n\n";
    s += "| segment | times | default | best_plan.json | between groups | groupings timed | what changed |\n"
         "| --- | --- | --- | --- | --- | --- | --- |\n";
    for (const SegmentFindings &f : findings) {
        std::string name = "`" + f.nodes.front() + "`" + (f.nodes.size() > 1 ? " ... `" + f.nodes.back() + "`" : "") +
                           " (" + std::to_string(f.nodes.size()) + " nodes)";
        std::string timed;
        for (const SegmentChoice &c : f.choices) {
            std::string t = c.grouping + ": " +
                            (c.measured ? fmt("own %.3g ms", c.segment_ms) + " (" + std::to_string(c.measured) + "), "
                                        : std::string()) +
                            fmt("whole %.4g ms", c.best_ms) + " (" + std::to_string(c.candidates) + ")";
            if (c.is_best) t = "**" + t + "**";
            if (c.is_default) t += " *(default)*";
            timed += (timed.empty() ? "" : "<br>") + t;
        }
        std::string changed;
        if (f.default_grouping != f.best_grouping) {
            changed =
                "regrouped: " + std::to_string(f.default_groups) + " -> " + std::to_string(f.best_groups) + " groups";
        }
        for (const std::string &c : f.schedule_changes) changed += (changed.empty() ? "" : "; ") + c;
        if (changed.empty()) changed = "as the default";
        s += "| " + table_cell(name) + " | " + std::to_string(f.occurrences) + " | " + table_cell(f.default_grouping) +
             " | " + table_cell(f.best_grouping) + " | " + fmt("%.2f", f.default_bytes / 1e6) + " -> " +
             fmt("%.2f MB", f.best_bytes / 1e6) + " | " + table_cell(timed) + " | " + table_cell(changed) + " |\n";
    }
    return s + "\n";
}

}  // namespace hfuse::explore
