#include "hfuse/plan_report.h"

#include "hfuse/fusion_cost.h"

#include <algorithm>
#include <iomanip>
#include <set>
#include <sstream>

namespace hfuse {
namespace {

// Text inside a Graphviz quoted string: quotes and backslashes escaped (a bare backslash would start
// one of dot's \n, \l, \r line breaks).
std::string esc(const std::string &s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out;
}

std::string q(const std::string &s) {
    return "\"" + esc(s) + "\"";
}

// A node's id in the drawing: its name, or name@group for a group's recomputed copy.
std::string dot_id(const FusedGroup &grp, const std::string &node) {
    return is_recompute_copy(grp, node) ? node + "@" + grp.name : node;
}

}  // namespace

std::string plan_table(const FusedGraph &f) {
    std::ostringstream os;
    std::string rules;
    for (const auto &r : f.rules) rules += (rules.empty() ? "" : ", ") + r;
    os << "plan for '" << f.graph.name << "' (rules: " << (rules.empty() ? "none given" : rules)
       << "): " << f.groups.size() << (f.groups.size() == 1 ? " group, " : " groups, ") << f.graph.nodes.size()
       << " ops";
    // The rewrites change the count (`info` counts the model's nodes; max_group_ops counts these).
    size_t folded = 0;
    for (const Node &n : f.graph.nodes) folded += n.absorbed.size();
    const size_t removed = f.graph.removed.size();
    if (folded + removed > 0) {
        os << " (the model's " << f.graph.nodes.size() + folded + removed << " nodes after rewrites: " << folded
           << " folded into others, " << removed << " removed; max_group_ops counts ops)";
    }
    os << "\n\n";
    // Columns as wide as their longest entry (group and node names are the user's).
    int name_w = 6, master_w = 14;
    for (const FusedGroup &grp : f.groups) {
        name_w = std::max(name_w, static_cast<int>(grp.name.size()));
        master_w = std::max(master_w, static_cast<int>(grp.master.size()));
    }
    auto row = [&](const std::string &name, const std::string &master, const std::string &saved) {
        std::ostringstream r;
        r << std::left << std::setw(name_w) << name << " " << std::setw(master_w) << master << " " << std::setw(10)
          << saved << " ";
        return r.str();
    };
    os << row("group", "master", "saved") << "members (placement)\n";
    int64_t total = 0;
    for (const FusedGroup &grp : f.groups) {
        int64_t saved = intermediate_bytes_saved(f, grp);
        total += saved;
        std::string members;
        for (const std::string &n : grp.nodes) {
            members += (members.empty() ? "" : ", ") + n + " " + to_string(grp.placement.at(n));
            for (const std::string &a : f.graph.find_node(n)->absorbed) members += ", " + a + " folded";
        }
        if (!grp.backend.empty()) members += "   [backend " + grp.backend + "]";
        os << row(grp.name, grp.master, saved ? human_bytes(saved) : "-") << members << "\n";
        if (!grp.why.empty()) os << row("", "", "") << "why: " << grp.why << "\n";
        // The schedule's template, and why the defaults chose it (or why no template fits).
        const nlohmann::json &s = grp.schedule;
        if (s.is_object() && s.contains("template") && s["template"].is_string()) {
            os << row("", "", "") << "schedule: " << s["template"].get<std::string>();
            if (s.contains("why") && s["why"].is_string()) os << " (" << s["why"].get<std::string>() << ")";
            os << "\n";
        }
    }
    os << "\nintermediates kept out of memory: " << human_bytes(total) << "\n";
    return os.str();
}

std::string plan_dot(const FusedGraph &f) {
    const Graph &g = f.graph;
    std::ostringstream os;
    os << "digraph " << q(g.name) << " {\n  rankdir=TB;\n  node [shape=box, style=rounded, fontname=Helvetica];\n";
    for (const GraphInput &in : g.inputs)
        os << "  " << q("in:" + in.name) << " [shape=ellipse, label=" << q(in.name) << "];\n";
    for (const FusedGroup &grp : f.groups) {
        // The group's schedule template where the plan has one (an attention group shows "attention").
        const std::string tmpl = grp.schedule.is_object() ? grp.schedule.value("template", "") : "";
        os << "  subgraph " << q("cluster_" + grp.name) << " {\n    label="
           << q(grp.name + (grp.backend.empty() ? "" : " [" + grp.backend + "]") +
                (tmpl.empty() ? "" : " (" + tmpl + ")"))
           << "; style=filled; color=lightgrey;\n";
        for (const std::string &n : grp.nodes) {
            const Node *node = g.find_node(n);
            const Placement p = grp.placement.at(n);
            std::string label = esc(n) + "\\n" + node->op + " (" + to_string(p) + ")";
            for (const std::string &a : node->absorbed) label += "\\n+ " + esc(a) + " (folded)";
            os << "    " << q(dot_id(grp, n)) << " [label=\"" << label << "\", fillcolor=white, style=\"rounded,filled"
               << (p == Placement::Recompute ? ",dashed" : "") << "\""
               << (n == grp.master ? ", peripheries=2, penwidth=2" : "") << "];\n";
        }
        os << "  }\n";
    }
    // Edges into every copy of a node: from the reading group's own copy of the producer if it has
    // one, else from the producer's owner.
    for (const FusedGroup &grp : f.groups) {
        const std::set<std::string> held(grp.nodes.begin(), grp.nodes.end());
        for (const std::string &name : grp.nodes) {
            std::set<std::string> seen;
            for (const std::string &v : g.find_node(name)->inputs) {
                if (v.empty() || g.is_weight(v) || !seen.insert(v).second) continue;
                const Node *p = g.producer(v);
                std::string from = !p ? "in:" + v : held.count(p->name) ? dot_id(grp, p->name) : p->name;
                os << "  " << q(from) << " -> " << q(dot_id(grp, name)) << ";\n";
            }
        }
    }
    for (const std::string &o : g.outputs) {
        const Node *p = g.producer(o);
        os << "  " << q("out:" + o) << " [shape=ellipse, label=" << q(o) << "];\n";
        os << "  " << q(p ? p->name : "in:" + o) << " -> " << q("out:" + o) << ";\n";
    }
    os << "}\n";
    return os.str();
}

}  // namespace hfuse
