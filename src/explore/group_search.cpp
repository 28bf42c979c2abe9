#include "explore/group_search.h"

#include "explore/segments.h"
#include "hfuse/error.h"
#include "hfuse/fusion_rules.h"

#include <algorithm>

namespace hfuse::explore {

using nlohmann::json;

namespace {

// Equal for groups computing the same function of the same shapes, placed and scheduled alike.
std::string class_key(const FusedGraph &plan, const FusedGroup &grp, const std::map<std::string, int> &index) {
    std::vector<int> nodes;
    for (const std::string &n : grp.nodes) {
        const auto it = index.find(n);
        if (it == index.end()) throw Error("internal: group " + grp.name + " holds node " + n + " the graph lacks");
        nodes.push_back(it->second);
    }
    std::string key = nodes_signature(plan.graph, nodes);
    for (size_t i = 0; i < grp.nodes.size(); i++) {
        const auto p = grp.placement.find(grp.nodes[i]);
        key += std::to_string(i) + (grp.nodes[i] == grp.master ? "*" : "") + ":" +
               (p == grp.placement.end() ? "-" : to_string(p->second)) + " ";
    }
    json schedule = grp.schedule;
    schedule.erase("why");
    return key + schedule.dump();
}

}  // namespace

std::vector<GroupClass> group_classes(const FusedGraph &plan, const std::vector<ScheduleVariant> &neighbours) {
    std::map<std::string, int> index;
    for (size_t i = 0; i < plan.graph.nodes.size(); i++) index[plan.graph.nodes[i].name] = static_cast<int>(i);
    std::map<size_t, std::vector<const ScheduleVariant *>> by_group;
    for (const ScheduleVariant &v : neighbours) by_group[v.group].push_back(&v);

    std::vector<GroupClass> classes;
    std::map<std::string, size_t> class_of;
    for (size_t gi = 0; gi < plan.groups.size(); gi++) {
        const FusedGroup &grp = plan.groups[gi];
        if (!grp.backend.empty() || !grp.schedule.is_object()) continue;
        const std::string key = class_key(plan, grp, index);
        const auto it = class_of.find(key);
        if (it != class_of.end()) {
            classes[it->second].groups.push_back(gi);
            continue;
        }
        if (!by_group.count(gi)) continue;  // nothing to vary (later alike groups have none either)
        GroupClass c;
        c.groups = {gi};
        for (const ScheduleVariant *v : by_group[gi]) c.variants.push_back(*v);
        class_of[key] = classes.size();
        classes.push_back(std::move(c));
    }
    for (GroupClass &c : classes) {
        const FusedGroup &first = plan.groups[c.groups[0]];
        const Node *master = plan.graph.find_node(first.master);
        c.label = first.name + (c.groups.size() > 1 ? " (" + std::to_string(c.groups.size()) + " alike)" : "") + ": " +
                  (master ? master->op + " " : "") + first.master;
    }
    return classes;
}

std::optional<FusedGraph> round_plan(const FusedGraph &base, const std::vector<GroupClass> &classes, size_t round,
                                     std::vector<std::string> *changes) {
    FusedGraph plan = base;
    bool varied = false;
    for (const GroupClass &c : classes) {
        if (round >= c.variants.size()) continue;
        const ScheduleVariant &v = c.variants[round];
        for (size_t gi : c.groups) plan.groups[gi].schedule = v.schedule;
        if (changes)
            changes->push_back(v.description +
                               (c.groups.size() > 1 ? " (x" + std::to_string(c.groups.size()) + ")" : ""));
        varied = true;
    }
    if (!varied) return std::nullopt;
    return plan;
}

std::optional<GroupTimes> group_times(const Evaluation &e) {
    if (e.status != "ok" || e.against_group_ms.empty()) return std::nullopt;
    GroupTimes t;
    for (const auto &[name, ms] : e.group_ms) {
        const auto a = e.against_group_ms.find(name);
        if (a != e.against_group_ms.end()) t.ms[name] = {ms, a->second};
    }
    return t;
}

std::optional<double> class_ratio(const GroupClass &c, const FusedGraph &plan, const GroupTimes &times) {
    double ms = 0, against = 0;
    for (size_t gi : c.groups) {
        const auto it = times.ms.find(plan.groups[gi].name);
        if (it == times.ms.end()) return std::nullopt;
        ms += it->second.first;
        against += it->second.second;
    }
    if (!(against > 0) || !(ms > 0)) return std::nullopt;
    return ms / against;
}

std::map<size_t, size_t> winning_variants(const std::vector<std::vector<GroupTrial>> &trials, double min_gain) {
    std::map<size_t, size_t> winners;
    for (size_t ci = 0; ci < trials.size(); ci++) {
        const GroupTrial *best = nullptr;
        for (const GroupTrial &t : trials[ci]) {
            if (!best || t.ratio < best->ratio) best = &t;
        }
        if (best && best->ratio <= 1 - min_gain) winners[ci] = best->round;
    }
    return winners;
}

FusedGraph with_variants(const FusedGraph &base, const std::vector<GroupClass> &classes,
                         const std::map<size_t, size_t> &winners) {
    FusedGraph plan = base;
    for (const auto &[ci, vi] : winners) {
        for (size_t gi : classes.at(ci).groups) plan.groups[gi].schedule = classes[ci].variants.at(vi).schedule;
    }
    return plan;
}

}  // namespace hfuse::explore
