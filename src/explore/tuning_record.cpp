#include "hfuse/tuning_record.h"

#include "explore/segments.h"
#include "hfuse/error.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace hfuse {
namespace {

using nlohmann::json;

// "first ... last" of a segment's nodes, for notes.
std::string segment_name(const Graph &g, const explore::Segment &s) {
    const std::string &first = g.nodes[s.begin].name;
    return s.end - s.begin == 1 ? "'" + first + "'" : "'" + first + "' ... '" + g.nodes[s.end - 1].name + "'";
}

// `plan` with the nodes of `s` taken out of their groups and grouped as `entry` says.
void regroup(FusedGraph &plan, const explore::Segment &s, const TuningEntry &entry) {
    const Graph &g = plan.graph;
    std::set<std::string> inside;
    for (int i = s.begin; i < s.end; i++) inside.insert(g.nodes[i].name);
    std::vector<FusedGroup> kept;
    for (FusedGroup &grp : plan.groups) {
        std::vector<std::string> rest;
        for (const std::string &n : grp.nodes) {
            if (!inside.count(n)) rest.push_back(n);
        }
        if (rest.size() == grp.nodes.size()) {
            kept.push_back(std::move(grp));
            continue;
        }
        if (rest.empty()) continue;
        // A group that reached across the segment's edge keeps its other nodes, as a new group.
        FusedGroup part;
        part.nodes = rest;
        for (const std::string &n : rest) {
            if (auto it = grp.placement.find(n); it != grp.placement.end() && it->second == Placement::Recompute)
                part.placement[n] = Placement::Recompute;
        }
        kept.push_back(std::move(part));
    }
    for (const TunedGroup &tg : entry.groups) {
        FusedGroup grp;
        for (int i : tg.nodes) grp.nodes.push_back(g.nodes[s.begin + i].name);
        grp.master = g.nodes[s.begin + tg.master].name;
        for (const auto &[i, p] : tg.placement) grp.placement[g.nodes[s.begin + i].name] = p;
        grp.schedule = tg.schedule;
        grp.why = "tuned on " + entry.model + " (hfuse explore)";
        kept.push_back(std::move(grp));
    }
    plan.groups = std::move(kept);
}

const json &member(const json &obj, const std::string &key, const std::string &field) {
    if (!obj.contains(key)) fail_field(field + "." + key, "missing");
    return obj[key];
}

std::string string_at(const json &obj, const std::string &key, const std::string &field) {
    const json &v = member(obj, key, field);
    if (!v.is_string()) fail_field(field + "." + key, "expected a string");
    return v.get<std::string>();
}

int index_at(const json &v, const std::string &field, size_t nodes) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= static_cast<int64_t>(nodes))
        fail_field(field, "expected an index into the entry's " + std::to_string(nodes) + " nodes");
    return v.get<int>();
}

}  // namespace

std::string tuning_target(const Halide::Target &t) {
    std::string arch = t.arch == Halide::Target::X86           ? "x86"
                       : t.arch == Halide::Target::ARM         ? "arm"
                       : t.arch == Halide::Target::POWERPC     ? "powerpc"
                       : t.arch == Halide::Target::RISCV       ? "riscv"
                       : t.arch == Halide::Target::WebAssembly ? "wasm"
                                                               : "other";
    return arch + "-" + std::to_string(t.bits) + ", " + std::to_string(t.natural_vector_size<float>()) +
           " float lanes" + (t.has_feature(Halide::Target::FMA) ? ", fma" : "");
}

bool groups_within(const json &plan, const Graph &g, int begin, int end, std::vector<TunedGroup> &out,
                   std::vector<std::string> *names) {
    std::map<std::string, int> index;
    for (int i = 0; i < static_cast<int>(g.nodes.size()); i++) index[g.nodes[i].name] = i;
    out.clear();
    if (names) names->clear();
    for (const json &grp : plan.at("groups")) {
        TunedGroup tg;
        bool outside = false;
        for (const json &n : grp.at("nodes")) {
            auto it = index.find(n.get<std::string>());
            if (it == index.end()) continue;  // folded into another node of the group
            if (it->second >= begin && it->second < end) {
                tg.nodes.push_back(it->second - begin);
            } else {
                outside = true;
            }
        }
        if (tg.nodes.empty()) continue;
        if (outside) return false;
        std::sort(tg.nodes.begin(), tg.nodes.end());
        const auto master = index.find(grp.value("master", std::string()));
        if (master == index.end()) return false;
        tg.master = master->second - begin;
        const json placement = grp.value("placement", json::object());
        for (const auto &kv : placement.items()) {
            auto it = index.find(kv.key());
            if (it == index.end() || !kv.value().is_string() || kv.value() == "folded") continue;
            tg.placement[it->second - begin] = parse_placement(kv.value().get<std::string>(), "placement");
        }
        tg.schedule = grp.value("schedule", json::object());
        out.push_back(std::move(tg));
        if (names) names->push_back(grp.value("name", std::string()));
    }
    return true;
}

std::string tuned_groups_key(const std::vector<TunedGroup> &groups) {
    std::string key;
    for (const TunedGroup &tg : groups) {
        json placement = json::object();
        for (const auto &[i, p] : tg.placement) placement[std::to_string(i)] = to_string(p);
        json schedule = tg.schedule;
        schedule.erase("why");  // an explanation, not a parameter
        key += json{tg.nodes, tg.master, placement, schedule}.dump() + ";";
    }
    return key;
}

TuningRecords tuning_records_from_plan(const FusedGraph &plan, const Halide::Target &target, double tuned_ms,
                                       double default_ms, std::vector<std::string> *notes) {
    const Graph &g = plan.graph;
    const json plan_json = plan_to_json(plan);
    TuningRecords records;
    std::map<std::string, size_t> recorded;  // signature -> entry
    std::map<std::string, int> occurrences, differing;
    std::set<std::string> crossing;
    for (const explore::Segment &s : explore::cut_segments(g, kTuningSegmentNodes)) {
        std::vector<TunedGroup> groups;
        const bool inside = groups_within(plan_json, g, s.begin, s.end, groups);
        occurrences[s.signature]++;
        if (auto it = recorded.find(s.signature); it != recorded.end()) {
            if (!inside || tuned_groups_key(groups) != tuned_groups_key(records.entries[it->second].groups))
                differing[s.signature]++;
            continue;
        }
        if (!inside) {
            if (crossing.insert(s.signature).second && notes) {
                notes->push_back("The segment " + segment_name(g, s) +
                                 " is not recorded: a group of the plan reaches across its edge.");
            }
            continue;
        }
        TuningEntry e;
        e.signature = s.signature;
        e.target = tuning_target(target);
        e.model = g.name;
        e.tuned_ms = tuned_ms;
        e.default_ms = default_ms;
        for (int i = s.begin; i < s.end; i++) e.nodes.push_back(g.nodes[i].name);
        e.groups = std::move(groups);
        recorded[s.signature] = records.entries.size();
        records.entries.push_back(std::move(e));
    }
    for (const auto &[signature, n] : differing) {
        if (!notes) break;
        const TuningEntry &e = records.entries[recorded.at(signature)];
        notes->push_back("The segment '" + e.nodes.front() + "' ... occurs " + std::to_string(occurrences[signature]) +
                         " times, and the plan groups or schedules " + std::to_string(n) +
                         " of the others differently: the record keeps the first (one choice per signature).");
    }
    return records;
}

json tuning_records_to_json(const TuningRecords &records) {
    json entries = json::array();
    for (const TuningEntry &e : records.entries) {
        json groups = json::array();
        for (const TunedGroup &tg : e.groups) {
            json placement = json::object();
            for (const auto &[i, p] : tg.placement) placement[std::to_string(i)] = to_string(p);
            groups.push_back(
                {{"nodes", tg.nodes}, {"master", tg.master}, {"placement", placement}, {"schedule", tg.schedule}});
        }
        entries.push_back({{"signature", e.signature},
                           {"target", e.target},
                           {"model", e.model},
                           {"nodes", e.nodes},
                           {"groups", groups},
                           {"tuned_ms", e.tuned_ms},
                           {"default_ms", e.default_ms}});
    }
    return {{"format", "hfuse-tuning"}, {"version", 1}, {"entries", entries}};
}

TuningRecords tuning_records_from_json(const json &j, const std::string &source) {
    TuningRecords records;
    try {
        if (!j.is_object()) fail("expected a JSON object");
        if (j.value("format", json()) != "hfuse-tuning") fail_field("format", "expected \"hfuse-tuning\"");
        if (j.value("version", json()) != 1) fail_field("version", "expected 1");
        const json &entries = member(j, "entries", "tuning");
        if (!entries.is_array()) fail_field("entries", "expected a list");
        for (size_t k = 0; k < entries.size(); k++) {
            const std::string field = "entries[" + std::to_string(k) + "]";
            const json &je = entries[k];
            if (!je.is_object()) fail_field(field, "expected an object");
            TuningEntry e;
            e.signature = string_at(je, "signature", field);
            e.target = string_at(je, "target", field);
            e.model = string_at(je, "model", field);
            const json &nodes = member(je, "nodes", field);
            if (!nodes.is_array() || nodes.empty()) fail_field(field + ".nodes", "expected a list of node names");
            for (const json &n : nodes) {
                if (!n.is_string()) fail_field(field + ".nodes", "expected node names");
                e.nodes.push_back(n.get<std::string>());
            }
            for (const char *key : {"tuned_ms", "default_ms"}) {
                const json &v = member(je, key, field);
                if (!v.is_number() || v.get<double>() < 0) fail_field(field + "." + key, "expected a time in ms");
            }
            e.tuned_ms = je["tuned_ms"].get<double>();
            e.default_ms = je["default_ms"].get<double>();
            const json &groups = member(je, "groups", field);
            if (!groups.is_array() || groups.empty()) fail_field(field + ".groups", "expected a list of groups");
            std::vector<int> times_owned(e.nodes.size(), 0);
            for (size_t gi = 0; gi < groups.size(); gi++) {
                const std::string gf = field + ".groups[" + std::to_string(gi) + "]";
                const json &jg = groups[gi];
                if (!jg.is_object()) fail_field(gf, "expected an object");
                TunedGroup tg;
                const json &members = member(jg, "nodes", gf);
                if (!members.is_array() || members.empty())
                    fail_field(gf + ".nodes", "expected a list of node indices");
                for (const json &m : members) tg.nodes.push_back(index_at(m, gf + ".nodes", e.nodes.size()));
                tg.master = index_at(member(jg, "master", gf), gf + ".master", e.nodes.size());
                if (std::find(tg.nodes.begin(), tg.nodes.end(), tg.master) == tg.nodes.end())
                    fail_field(gf + ".master", "not one of the group's nodes");
                if (jg.contains("placement")) {
                    if (!jg["placement"].is_object())
                        fail_field(gf + ".placement", "expected an object index -> placement");
                    for (const auto &kv : jg["placement"].items()) {
                        const std::string pf = gf + ".placement." + kv.key();
                        int i = -1;
                        try {
                            size_t used = 0;
                            i = std::stoi(kv.key(), &used);
                            if (used != kv.key().size()) i = -1;
                        } catch (const std::exception &) {
                        }
                        if (std::find(tg.nodes.begin(), tg.nodes.end(), i) == tg.nodes.end())
                            fail_field(pf, "expected the index of one of the group's nodes");
                        if (!kv.value().is_string()) fail_field(pf, "expected a placement name");
                        tg.placement[i] = parse_placement(kv.value().get<std::string>(), pf);
                    }
                }
                if (jg.contains("schedule")) {
                    if (!jg["schedule"].is_object()) fail_field(gf + ".schedule", "expected an object");
                    tg.schedule = jg["schedule"];
                }
                for (int i : tg.nodes) {
                    auto it = tg.placement.find(i);
                    if (it == tg.placement.end() || it->second != Placement::Recompute) times_owned[i]++;
                }
                e.groups.push_back(std::move(tg));
            }
            for (size_t i = 0; i < times_owned.size(); i++) {
                if (times_owned[i] > 1)
                    fail_field(field + ".groups", "node " + std::to_string(i) + " is in two groups");
            }
            records.entries.push_back(std::move(e));
        }
    } catch (Error &e) {
        throw e.in_file(source);
    }
    return records;
}

TuningRecords read_tuning_records(const std::string &path) {
    std::ifstream in(path);
    if (!in) throw Error("cannot open the tuning record").in_file(path);
    json j;
    try {
        j = json::parse(in);
    } catch (const json::exception &e) {
        throw Error(std::string("not valid JSON: ") + e.what()).in_file(path);
    }
    return tuning_records_from_json(j, path);
}

void write_tuning_records(const std::string &path, const TuningRecords &records) {
    std::ofstream out(path);
    if (!(out << tuning_records_to_json(records).dump(2) << "\n")) throw Error("cannot write").in_file(path);
}

TunedPlan apply_tuning(FusedGraph plan, const TuningRecords &records, const Halide::Target &target) {
    TunedPlan result;
    const std::string here = tuning_target(target);
    std::map<std::string, const TuningEntry *> by_signature;
    std::set<std::string> other_targets;
    for (const TuningEntry &e : records.entries) {
        if (e.target == here) {
            by_signature[e.signature] = &e;
        } else {
            other_targets.insert(e.target);
        }
    }
    for (const std::string &t : other_targets) {
        result.notes.push_back("entries tuned for " + t + " are not applied: this plan is for " + here);
    }
    const std::vector<explore::Segment> segments = explore::cut_segments(plan.graph, kTuningSegmentNodes);
    result.segments = static_cast<int>(segments.size());
    std::vector<std::pair<const explore::Segment *, const TuningEntry *>> matches;
    for (const explore::Segment &s : segments) {
        auto it = by_signature.find(s.signature);
        if (it == by_signature.end()) continue;
        if (it->second->nodes.size() != static_cast<size_t>(s.end - s.begin)) {
            // Equal signatures list as many nodes: the entry was edited.
            result.notes.push_back("an entry for " + segment_name(plan.graph, s) + " lists " +
                                   std::to_string(it->second->nodes.size()) + " nodes, the segment has " +
                                   std::to_string(s.end - s.begin) + ": not applied");
            continue;
        }
        matches.emplace_back(&s, it->second);
    }
    // All at once (one check); if the whole is illegal, one at a time, leaving out those that fail.
    FusedGraph all = plan;
    for (const auto &[s, e] : matches) regroup(all, *s, *e);
    try {
        result.plan = check_plan(std::move(all));
        result.applied = static_cast<int>(matches.size());
        return result;
    } catch (const Error &) {
    }
    result.plan = std::move(plan);
    for (const auto &[s, e] : matches) {
        FusedGraph trial = result.plan;
        regroup(trial, *s, *e);
        try {
            result.plan = check_plan(std::move(trial));
            result.applied++;
        } catch (const Error &err) {
            result.notes.push_back("the entry for " + segment_name(result.plan.graph, *s) +
                                   " makes an illegal plan here, not applied: " + err.what());
        }
    }
    return result;
}

}  // namespace hfuse
