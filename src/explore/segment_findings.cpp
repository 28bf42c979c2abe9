#include "explore/segment_findings.h"

#include "explore/cost_model.h"
#include "explore/segments.h"
#include "hfuse/tuning_record.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

namespace hfuse::explore {
namespace {

using nlohmann::json;

std::string fmt(const char *f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

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

// The schedule parameters of best's groups in `s` that differ from the default's group with the
// same nodes (or, the fusion being other, the same master).
std::vector<std::string> schedule_changes(const Graph &g, const Segment &s, const FusedGraph &best,
                                          const FusedGraph &def, const std::map<std::string, int> &index) {
    std::vector<std::string> out;
    for (const FusedGroup &b : best.groups) {
        if (index.at(b.master) < s.begin || index.at(b.master) >= s.end) continue;
        const FusedGroup *match = nullptr;
        for (const FusedGroup &d : def.groups) {
            if (d.nodes == b.nodes) match = &d;
        }
        for (const FusedGroup &d : def.groups) {
            if (!match && d.master == b.master) match = &d;
        }
        if (!match) continue;
        const std::string what =
            g.find_node(b.master)->op + " (node " + std::to_string(index.at(b.master) - s.begin) + ")";
        const json &x = b.schedule, &y = match->schedule;
        if (x.value("template", "") != y.value("template", "")) {
            out.push_back(what + ": template " + y.value("template", std::string("-")) + " -> " +
                          x.value("template", std::string("-")));
            continue;
        }
        for (const auto &kv : x.items()) {
            if (kv.key() == "why") continue;
            const json other = y.contains(kv.key()) ? y[kv.key()] : json();
            if (other != kv.value())
                out.push_back(what + ": " + kv.key() + " " + (other.is_null() ? "-" : other.dump()) + " -> " +
                              kv.value().dump());
        }
    }
    return out;
}

std::string cell(std::string s) {
    std::string o;
    for (char c : s) o += c == '|' ? std::string("\\|") : c == '\n' ? std::string(" ") : std::string(1, c);
    return o;
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
    std::map<std::string, size_t> seen;
    for (const Segment &s : segments) {
        if (auto it = seen.find(s.signature); it != seen.end()) {
            out[it->second].occurrences++;
            continue;
        }
        seen[s.signature] = out.size();
        SegmentFindings f;
        f.occurrences = 1;
        for (int i = s.begin; i < s.end; i++) f.nodes.push_back(g.nodes[i].name);
        std::string def_key, best_key;
        if (def) {
            Grouping d = grouping_of(g, s, def_owner);
            f.default_grouping = d.text;
            f.default_groups = d.groups;
            f.default_bytes = bytes_out(def_cost, def_plan, s, index);
            def_key = d.key;
        }
        if (best) {
            Grouping b = grouping_of(g, s, best_owner);
            f.best_grouping = b.text;
            f.best_groups = b.groups;
            f.best_bytes = bytes_out(best_cost, best_plan, s, index);
            best_key = b.key;
            if (def) f.schedule_changes = schedule_changes(g, s, best_plan, def_plan, index);
        }
        std::map<std::string, SegmentChoice> by_key;
        for (const auto &[e, owner] : timed) {
            Grouping gr = grouping_of(g, s, owner);
            SegmentChoice &c = by_key[gr.key];
            c.grouping = gr.text;
            c.candidates++;
            if (c.best_ms == 0 || e->ranked_ms() < c.best_ms) c.best_ms = e->ranked_ms();
            c.is_default = gr.key == def_key;
            c.is_best = gr.key == best_key;
        }
        for (auto &kv : by_key) f.choices.push_back(kv.second);
        std::stable_sort(f.choices.begin(), f.choices.end(),
                         [](const SegmentChoice &a, const SegmentChoice &b) { return a.best_ms < b.best_ms; });
        out.push_back(std::move(f));
    }
    return out;
}

json to_json(const SegmentFindings &f) {
    json choices = json::array();
    for (const SegmentChoice &c : f.choices) {
        choices.push_back({{"grouping", c.grouping},
                           {"candidates", c.candidates},
                           {"best_ms", c.best_ms},
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
         "each distinct segment once. *Groupings timed*: the groupings of the segment among the candidates "
         "scheduled by the templates, each with the fastest whole-network time of the candidates that have it "
         "(the other segments as those candidates had them) and how many there were; **bold** is best_plan.json's, "
         "*(default)* the default plan's. *Between groups*: the bytes the segment's groups hand out, by the "
         "cost estimate (the sum of its groups' outputs; a fusion keeps its intermediates out of memory).\n\n";
    s += "| segment | times | default | best_plan.json | between groups | groupings timed | what changed |\n"
         "| --- | --- | --- | --- | --- | --- | --- |\n";
    for (const SegmentFindings &f : findings) {
        std::string name = "`" + f.nodes.front() + "`" + (f.nodes.size() > 1 ? " ... `" + f.nodes.back() + "`" : "") +
                           " (" + std::to_string(f.nodes.size()) + " nodes)";
        std::string timed;
        for (const SegmentChoice &c : f.choices) {
            std::string t = c.grouping + ": " + fmt("%.4g ms", c.best_ms) + " (" + std::to_string(c.candidates) + ")";
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
        s += "| " + cell(name) + " | " + std::to_string(f.occurrences) + " | " + cell(f.default_grouping) + " | " +
             cell(f.best_grouping) + " | " + fmt("%.2f", f.default_bytes / 1e6) + " -> " +
             fmt("%.2f MB", f.best_bytes / 1e6) + " | " + cell(timed) + " | " + cell(changed) + " |\n";
    }
    return s + "\n";
}

}  // namespace hfuse::explore
