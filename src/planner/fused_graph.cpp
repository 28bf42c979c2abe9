#include "hfuse/fused_graph.h"

#include "hfuse/attributes.h"
#include "hfuse/error.h"
#include "hfuse/model_io.h"
#include "hfuse/passes.h"
#include "planner/graph_util.h"

#include <algorithm>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

namespace hfuse {
namespace {

using nlohmann::json;

std::string quoted_list(const std::vector<std::string> &names) {
    std::string s;
    for (const auto &n : names) s += (s.empty() ? "'" : ", '") + n + "'";
    return s;
}

// The placement a member gets when neither the planner nor the plan file says otherwise.
Placement default_placement(const Graph &g, const Node &n, bool live_out) {
    if (live_out) return Placement::Output;
    switch (find_op(n.op)->kind) {
    case PatternKind::ComplexOutFusable: return Placement::ComputeAt;
    case PatternKind::Reduction: return Placement::Root;  // inlining would redo the reduction per use
    default: return Placement::Inline;
    }
}

// A path that leaves `group` from one of `exits` (the nodes whose values the group hands out) and
// comes back, or empty if the group is convex.
std::vector<std::string> non_convex_path(const planner::NodeGraph &ng, const std::set<int> &group,
                                         const std::set<int> &exits) {
    // Walk forward from the group's external consumers; reaching the group again means a way out and back.
    std::map<int, int> parent;
    std::vector<int> stack;
    for (int n : exits) {
        for (int c : ng.consumers[n]) {
            if (!group.count(c) && !parent.count(c)) {
                parent[c] = n;
                stack.push_back(c);
            }
        }
    }
    while (!stack.empty()) {
        int u = stack.back();
        stack.pop_back();
        for (int c : ng.consumers[u]) {
            if (group.count(c)) {
                // Back from u along parents to the node that left the group: exit -> ... -> u -> c.
                std::vector<std::string> path = {ng.graph->nodes[c].name};
                for (int v = u;; v = parent[v]) {
                    path.push_back(ng.graph->nodes[v].name);
                    if (group.count(parent[v])) {
                        path.push_back(ng.graph->nodes[parent[v]].name);
                        break;
                    }
                }
                std::reverse(path.begin(), path.end());
                return path;
            }
            if (!parent.count(c)) {
                parent[c] = u;
                stack.push_back(c);
            }
        }
    }
    return {};
}

}  // namespace

PatternKind effective_kind(const Graph &g, const Node &n) {
    PatternKind kind = find_op(n.op)->kind;
    if (kind != PatternKind::Broadcast) return kind;
    const Shape &out = g.type_of(n.outputs[0]).shape;
    for (const std::string &v : n.inputs) {
        if (!v.empty() && !g.is_weight(v) && g.type_of(v).shape != out) return kind;
    }
    return PatternKind::Elementwise;
}

bool is_recompute_copy(const FusedGroup &grp, const std::string &node) {
    auto it = grp.placement.find(node);
    return it != grp.placement.end() && it->second == Placement::Recompute;
}

FusedGraph singleton_groups(const Graph &graph) {
    FusedGraph f;
    f.graph = graph;
    for (const Node &n : graph.nodes) {
        FusedGroup grp;
        grp.master = n.name;
        grp.nodes = {n.name};
        f.groups.push_back(grp);
    }
    return check_plan(std::move(f));
}

FusedGraph check_plan(FusedGraph f) {
    const Graph &g = f.graph;
    planner::NodeGraph ng(g);
    try {
        const int num = static_cast<int>(f.groups.size());
        auto label = [&](int k) { return f.groups[k].name.empty() ? "#" + std::to_string(k) : f.groups[k].name; };
        auto is_copy = [&](int k, const std::string &n) { return is_recompute_copy(f.groups[k], n); };

        // Every node in exactly one group, or recomputed ("recompute") in several and owned by at most one.
        std::vector<std::set<int>> held(num);  // node indices each group computes
        std::map<int, std::vector<int>> holders;
        for (int i = 0; i < num; i++) {
            FusedGroup &grp = f.groups[i];
            if (grp.nodes.empty()) fail_field("groups[" + std::to_string(i) + "]", "a group needs at least one node");
            for (const std::string &n : grp.nodes) {
                if (!g.find_node(n)) fail_field("groups[" + std::to_string(i) + "].nodes", "unknown node '" + n + "'");
                if (!held[i].insert(ng.index.at(n)).second) {
                    fail_field("groups", "node '" + n + "' is listed twice in group " + label(i));
                }
                holders[ng.index.at(n)].push_back(i);
            }
        }
        std::vector<std::string> missing;
        std::vector<int> owner(g.nodes.size(), -1);  // the group that hands a node's values out, -1 if none
        for (size_t idx = 0; idx < g.nodes.size(); idx++) {
            const std::string &n = g.nodes[idx].name;
            if (!holders.count(idx)) {
                missing.push_back(n);
                continue;
            }
            for (int i : holders[idx]) {
                if (is_copy(i, n)) continue;
                if (owner[idx] >= 0) {
                    fail_field("groups", "node '" + n + "' is in two groups (" + label(owner[idx]) + " and " +
                                             label(i) +
                                             "); to recompute it in one of them, place it \"recompute\" there");
                }
                owner[idx] = i;
            }
        }
        if (!missing.empty()) fail_field("groups", "nodes in no group: " + quoted_list(missing));

        // Recomputed copies: cheap ops, read where they are copied, never the only source of a model
        // output; every value a group reads from outside has a group that hands it out.
        for (int i = 0; i < num; i++) {
            for (int idx : held[i]) {
                const Node &node = g.nodes[idx];
                if (!is_copy(i, node.name)) continue;
                const std::string field = "groups." + label(i) + ".placement." + node.name;
                PatternKind k = find_op(node.op)->kind;
                if (!planner::is_cheap(k)) {
                    fail_field(field, "only elementwise, broadcast and injective ops can be recomputed; '" + node.name +
                                          "' is a " + node.op + " (" + to_string(k) + ")");
                }
                if (std::none_of(ng.consumers[idx].begin(), ng.consumers[idx].end(),
                                 [&](int c) { return held[i].count(c); })) {
                    fail_field(field, "'" + node.name + "' is recomputed in group " + label(i) +
                                          ", but nothing in that group reads it");
                }
                if (owner[idx] < 0 && ng.is_model_output[idx]) {
                    fail_field(field, "the model returns '" + node.name +
                                          "', so one group must compute it as its own (not \"recompute\")");
                }
            }
            for (int c : held[i]) {
                for (int p : ng.producers[c]) {
                    if (held[i].count(p) || owner[p] >= 0) continue;
                    fail_field("groups." + label(i),
                               "'" + g.nodes[c].name + "' reads '" + g.nodes[p].name +
                                   "', which no group hands out (every group holding it recomputes it): "
                                   "recompute it in group " +
                                   label(i) + " too, or let one group own it");
                }
            }
        }

        // Convex groups, then an order of groups that respects every edge.
        for (int i = 0; i < num; i++) {
            std::set<int> exits;  // copies hand nothing out
            for (int idx : held[i]) {
                if (!is_copy(i, g.nodes[idx].name)) exits.insert(idx);
            }
            std::vector<std::string> path = non_convex_path(ng, held[i], exits);
            if (!path.empty()) {
                const FusedGroup &grp = f.groups[i];
                std::string via;
                for (size_t k = 1; k + 1 < path.size(); k++) via += (via.empty() ? "" : " -> ") + path[k];
                fail_field("groups", "group " + (grp.name.empty() ? quoted_list(grp.nodes) : grp.name) +
                                         " is not convex: a path leaves it at '" + path.front() +
                                         "' and comes back at '" + path.back() + "' through " + via);
            }
        }
        std::vector<std::set<int>> deps(num);
        for (int i = 0; i < num; i++) {
            for (int c : held[i]) {
                for (int p : ng.producers[c]) {
                    if (!held[i].count(p)) deps[i].insert(owner[p]);
                }
            }
        }
        std::vector<int> order, state(num, 0);
        std::function<void(int)> visit = [&](int i) {
            if (state[i] == 2) return;
            if (state[i] == 1) {
                fail_field("groups", "groups depend on each other in a cycle (through the group of '" +
                                         f.groups[i].nodes.front() + "'); split them differently");
            }
            state[i] = 1;
            for (int d : deps[i]) visit(d);
            state[i] = 2;
            order.push_back(i);
        };
        for (int i = 0; i < num; i++) visit(i);

        // A node's values leave its owning group if the model returns them or a group without a copy reads them.
        std::vector<std::set<int>> live_out(num);
        for (int i = 0; i < num; i++) {
            for (int idx : held[i]) {
                if (owner[idx] != i) continue;
                bool read_elsewhere = std::any_of(ng.consumers[idx].begin(), ng.consumers[idx].end(), [&](int c) {
                    return std::any_of(holders[c].begin(), holders[c].end(),
                                       [&](int j) { return j != i && !held[j].count(idx); });
                });
                if (ng.is_model_output[idx] || read_elsewhere) live_out[i].insert(idx);
            }
        }

        std::vector<FusedGroup> ordered;
        std::vector<std::set<int>> ordered_live;
        for (int i : order) {
            ordered.push_back(std::move(f.groups[i]));
            ordered_live.push_back(std::move(live_out[i]));
        }
        f.groups = std::move(ordered);
        live_out = std::move(ordered_live);

        std::set<std::string> names;
        for (const FusedGroup &grp : f.groups) {
            if (!grp.name.empty() && !names.insert(grp.name).second) {
                fail_field("groups", "two groups are named '" + grp.name + "'");
            }
        }
        int next_name = 0;
        for (size_t i = 0; i < f.groups.size(); i++) {
            FusedGroup &grp = f.groups[i];
            while (grp.name.empty()) {
                std::string candidate = "g" + std::to_string(next_name++);
                if (names.insert(candidate).second) grp.name = candidate;
            }
            // Members in graph (topological) order.
            std::set<std::string> members(grp.nodes.begin(), grp.nodes.end());
            grp.nodes.clear();
            for (const Node &n : g.nodes) {
                if (members.count(n.name)) grp.nodes.push_back(n.name);
            }
            auto copy = [&](const std::string &n) { return is_recompute_copy(grp, n); };

            // The master: the owned member of the highest kind (earliest on a tie) unless the plan names one.
            auto rank = [&](const std::string &n) { return planner::kind_rank(find_op(g.find_node(n)->op)->kind); };
            std::string best;
            for (const std::string &n : grp.nodes) {
                if (!copy(n) && (best.empty() || rank(n) > rank(best))) best = n;
            }
            if (best.empty()) {
                fail_field("groups." + grp.name, "every member is recomputed: a group must compute a node of its own");
            }
            if (grp.master.empty()) grp.master = best;
            if (!members.count(grp.master)) {
                fail_field("groups." + grp.name + ".master", "'" + grp.master + "' is not a member of the group");
            }
            if (copy(grp.master)) {
                fail_field("groups." + grp.name + ".master",
                           "'" + grp.master + "' is recomputed in the group and cannot lead it");
            }
            if (rank(grp.master) < rank(best)) {
                fail_field("groups." + grp.name + ".master",
                           "'" + grp.master + "' cannot lead the group: '" + best + "' (" +
                               to_string(find_op(g.find_node(best)->op)->kind) + ") outranks it");
            }
            for (const std::string &n : grp.nodes) {
                const Node *node = g.find_node(n);
                if (grp.nodes.size() > 1 && find_op(node->op)->kind == PatternKind::Opaque) {
                    fail_field("groups." + grp.name, "'" + n + "' is opaque and cannot be fused");
                }
            }

            // Placements: given ones are checked, missing ones derived; folded source nodes listed.
            std::map<std::string, Placement> given = std::move(grp.placement);
            grp.placement.clear();
            for (const std::string &n : grp.nodes) {
                const Node *node = g.find_node(n);
                const bool live = live_out[i].count(ng.index.at(n)) > 0;
                Placement p = default_placement(g, *node, live);
                if (auto it = given.find(n); it != given.end()) {
                    const std::string field = "groups." + grp.name + ".placement." + n;
                    if (live && it->second != Placement::Output) {
                        fail_field(field,
                                   "must be output: its value is used outside the group or returned by the model");
                    }
                    if (!live && it->second == Placement::Output) {
                        p = Placement::Root;  // "output" on an internal value means: materialise it
                    } else if (it->second == Placement::Folded) {
                        fail_field(field, "only nodes a rewrite merged away are 'folded'");
                    } else if (it->second == Placement::Inline &&
                               find_op(node->op)->kind == PatternKind::ComplexOutFusable) {
                        fail_field(field,
                                   "a " + node->op + " has a reduction and cannot be inlined; use compute_at or root");
                    } else {
                        p = it->second;
                    }
                    given.erase(it);
                }
                grp.placement[n] = p;
                for (const std::string &a : node->absorbed) {
                    grp.placement[a] = Placement::Folded;
                    given.erase(a);
                }
            }
            if (!given.empty()) {
                fail_field("groups." + grp.name + ".placement", "'" + given.begin()->first + "' is not in the group");
            }
        }
    } catch (Error &e) {
        throw e.in_file(g.source);
    }
    return f;
}

json plan_to_json(const FusedGraph &f) {
    json groups = json::array();
    for (const FusedGroup &grp : f.groups) {
        json nodes = json::array(), placement = json::object();
        for (const std::string &n : grp.nodes) {
            nodes.push_back(n);
            for (const std::string &a : f.graph.find_node(n)->absorbed) nodes.push_back(a);
        }
        for (const auto &kv : grp.placement) placement[kv.first] = to_string(kv.second);
        json j = {{"name", grp.name}, {"master", grp.master}, {"nodes", nodes}, {"placement", placement}};
        if (!grp.backend.empty()) j["backend"] = grp.backend;
        if (!grp.schedule.empty()) j["schedule"] = grp.schedule;
        if (!grp.why.empty()) j["why"] = grp.why;
        groups.push_back(j);
    }
    return {{"format", "hfuse-plan"},   {"version", 1},    {"model", f.graph.name}, {"rules", f.rules},
            {"rewritten", f.rewritten}, {"groups", groups}};
}

FusedGraph plan_from_json(const json &plan, const Graph &graph, const std::string &source) {
    FusedGraph f;
    f.graph = graph;
    f.source = source;
    try {
        if (!plan.is_object()) fail("expected a JSON object");
        if (!plan.contains("format") || plan["format"] != "hfuse-plan") fail_field("format", "expected \"hfuse-plan\"");
        if (!plan.contains("version") || plan["version"] != 1) fail_field("version", "expected 1");
        if (!plan.contains("groups") || !plan["groups"].is_array()) fail_field("groups", "expected a list of groups");
        // Plans are over the rewritten graph unless they say otherwise (--unfused plans do).
        f.rewritten = !plan.contains("rewritten") || plan["rewritten"] != false;
        if (plan.contains("rules") && plan["rules"].is_array()) {
            for (const json &r : plan["rules"]) {
                if (r.is_string()) f.rules.push_back(r.get<std::string>());
            }
        }
        // Source-model names a rewrite merged away resolve to the node that absorbed them; names it
        // removed outright are accepted and skipped.
        const std::set<std::string> removed(graph.removed.begin(), graph.removed.end());
        std::map<std::string, std::string> absorbed_by;
        for (const Node &n : graph.nodes) {
            for (const std::string &a : n.absorbed) absorbed_by[a] = n.name;
        }
        for (size_t i = 0; i < plan["groups"].size(); i++) {
            const json &jg = plan["groups"][i];
            const std::string field = "groups[" + std::to_string(i) + "]";
            if (!jg.is_object() || !jg.contains("nodes") || !jg["nodes"].is_array()) {
                fail_field(field, "expected an object with a list of \"nodes\"");
            }
            for (const auto &kv : jg.items()) {
                static const std::set<std::string> known = {"name",    "master",   "nodes", "placement",
                                                            "backend", "schedule", "why"};
                if (!known.count(kv.key())) fail_field(field + "." + kv.key(), "unknown key in a plan group");
            }
            FusedGroup grp;
            if (jg.contains("name")) grp.name = jg["name"].get<std::string>();
            std::set<std::string> listed;
            for (const json &n : jg["nodes"]) {
                if (!n.is_string()) fail_field(field + ".nodes", "expected node names");
                listed.insert(n.get<std::string>());
            }
            for (const std::string &n : listed) {
                if (auto it = absorbed_by.find(n); it != absorbed_by.end()) {
                    if (!listed.count(it->second)) {
                        fail_field(field + ".nodes", "'" + n + "' was folded into '" + it->second +
                                                         "' by a rewrite: list '" + it->second + "' in the same group");
                    }
                    continue;
                }
                if (removed.count(n)) continue;  // a rewrite removed it: nothing left to place
                if (!graph.find_node(n)) fail_field(field + ".nodes", "unknown node '" + n + "'");
                grp.nodes.push_back(n);
            }
            if (jg.contains("master")) {
                std::string m = jg["master"].get<std::string>();
                grp.master = absorbed_by.count(m) ? absorbed_by[m] : m;
            }
            if (jg.contains("placement")) {
                if (!jg["placement"].is_object())
                    fail_field(field + ".placement", "expected an object node -> placement");
                for (const auto &kv : jg["placement"].items()) {
                    if (!kv.value().is_string())
                        fail_field(field + ".placement." + kv.key(), "expected a placement name");
                    Placement p = parse_placement(kv.value().get<std::string>(), field + ".placement." + kv.key());
                    if (absorbed_by.count(kv.key()) || removed.count(kv.key())) continue;  // implied
                    grp.placement[kv.key()] = p;
                }
            }
            if (jg.contains("backend")) grp.backend = jg["backend"].get<std::string>();
            if (jg.contains("schedule")) grp.schedule = jg["schedule"];
            if (jg.contains("why")) {
                if (!jg["why"].is_string()) fail_field(field + ".why", "expected a string");
                grp.why = jg["why"].get<std::string>();
            }
            f.groups.push_back(std::move(grp));
        }
    } catch (Error &e) {
        throw e.in_file(source);
    } catch (const json::exception &e) {
        throw Error(std::string("malformed plan: ") + e.what()).in_file(source);
    }
    FusedGraph checked;
    try {
        checked = check_plan(std::move(f));
    } catch (Error &e) {
        throw Error(e.message()).at_field(e.field()).in_file(source);  // report against the plan file
    }
    return checked;
}

FusedGraph read_plan(const std::string &path, const Graph &graph) {
    return plan_from_json(read_json_file(path, "plan file"), graph, path);
}

FusedGraph read_plan_for_model(const std::string &path, const Graph &model) {
    json j = read_json_file(path, "plan file");
    bool rewritten = !j.is_object() || !j.contains("rewritten") || j["rewritten"] != false;
    return plan_from_json(j, rewritten ? simplify(model) : model, path);
}

void write_plan(const std::string &path, const FusedGraph &fused) {
    std::ofstream out(path);
    if (!out) throw Error("cannot write plan file").in_file(path);
    out << plan_to_json(fused).dump(2) << "\n";
}

Error &in_group(Error &e, const FusedGraph &plan, const FusedGroup &group) {
    e.in_group(group.name);
    if (const Node *master = plan.graph.find_node(group.master)) e.at_node(master->name, master->op);
    const bool schedule = e.field() == "schedule" || e.field().rfind("schedule.", 0) == 0;
    if (schedule && !plan.source.empty()) return e.moved_to_file(plan.source);
    return e.in_file(plan.graph.source);
}

std::set<std::string> handed_out_values(const FusedGraph &f, const FusedGroup &grp) {
    const Graph &g = f.graph;
    auto owns = [&](const std::string &n) { return !is_recompute_copy(grp, n); };
    std::set<std::string> out;
    const std::set<std::string> returned(g.outputs.begin(), g.outputs.end());
    for (const std::string &n : grp.nodes) {
        if (!owns(n)) continue;
        for (const std::string &v : g.find_node(n)->outputs) {
            if (returned.count(v)) out.insert(v);
        }
    }
    const std::set<std::string> mine(grp.nodes.begin(), grp.nodes.end());
    for (const FusedGroup &other : f.groups) {
        if (other.name == grp.name) continue;
        const std::set<std::string> theirs(other.nodes.begin(), other.nodes.end());
        for (const std::string &c : other.nodes) {
            for (const std::string &v : g.find_node(c)->inputs) {
                const Node *p = v.empty() ? nullptr : g.producer(v);
                if (p && mine.count(p->name) && owns(p->name) && !theirs.count(p->name)) out.insert(v);
            }
        }
    }
    return out;
}

const Node *k_contiguous_transpose(const Graph &g, const FusedGroup &grp, const Node &product) {
    if (product.op != "MatMul" || product.inputs.size() < 2) return nullptr;
    const Node *t = g.producer(product.inputs[1]);
    if (!t || t->op != "Transpose" || std::find(grp.nodes.begin(), grp.nodes.end(), t->name) == grp.nodes.end())
        return nullptr;
    const std::vector<int64_t> perm = Attributes(t->attrs).get_ints("perm", {});
    const int64_t r = static_cast<int64_t>(perm.size());
    return r >= 2 && perm[r - 2] == r - 1 ? t : nullptr;
}

int64_t intermediate_bytes_saved(const FusedGraph &f, const FusedGroup &grp) {
    int64_t bytes = 0;
    for (const std::string &n : grp.nodes) {
        Placement p = grp.placement.at(n);
        if (p != Placement::Inline && p != Placement::ComputeAt && p != Placement::Recompute) continue;
        for (const std::string &v : f.graph.find_node(n)->outputs) bytes += 4 * num_elements(f.graph.type_of(v).shape);
    }
    return bytes;
}

}  // namespace hfuse
