#include "hfuse/fusion_rules.h"

#include "hfuse/error.h"
#include "hfuse/model_io.h"

#include <fstream>
#include <map>
#include <sstream>

namespace hfuse {

const std::map<std::string, std::string> &builtin_rule_files();  // generated from rules/*.json

namespace {

using nlohmann::json;

const std::vector<std::pair<PatternKind, std::string>> kKinds = {
    {PatternKind::Elementwise, "elementwise"},
    {PatternKind::Broadcast, "broadcast"},
    {PatternKind::Injective, "injective"},
    {PatternKind::Reduction, "reduction"},
    {PatternKind::ComplexOutFusable, "complex-out-fusable"},
    {PatternKind::Window, "window"},
    {PatternKind::Opaque, "opaque"}};

const std::vector<std::pair<Placement, std::string>> kPlacements = {
    {Placement::Inline, "inline"}, {Placement::ComputeAt, "compute_at"}, {Placement::Root, "root"},
    {Placement::Output, "output"}, {Placement::Folded, "folded"},        {Placement::Recompute, "recompute"}};

template <typename T>
std::string names_of(const std::vector<std::pair<T, std::string>> &table) {
    std::string s;
    for (const auto &e : table) s += (s.empty() ? "" : ", ") + e.second;
    return s;
}

bool get_bool(const json &j, const std::string &key, bool fallback) {
    if (!j.contains(key)) return fallback;
    if (!j[key].is_boolean()) fail_field(key, "expected true or false, got " + j[key].dump());
    return j[key].get<bool>();
}

int get_positive(const json &j, const std::string &key, int fallback) {
    if (!j.contains(key)) return fallback;
    if (!j[key].is_number_integer() || j[key].get<int64_t>() < 1 || j[key].get<int64_t>() > 1000000) {
        fail_field(key, "expected a positive integer, got " + j[key].dump());
    }
    return j[key].get<int>();
}

std::set<std::string> get_names(const json &j, const std::string &key) {
    std::set<std::string> out;
    if (!j.contains(key)) return out;
    if (!j[key].is_array()) fail_field(key, "expected a list of names, got " + j[key].dump());
    for (const json &e : j[key]) {
        if (!e.is_string()) fail_field(key, "expected names (strings), got " + e.dump());
        out.insert(e.get<std::string>());
    }
    return out;
}

}  // namespace

const char *to_string(Placement p) {
    for (const auto &e : kPlacements) {
        if (e.first == p) return e.second.c_str();
    }
    return "?";
}

Placement parse_placement(const std::string &name, const std::string &field) {
    for (const auto &e : kPlacements) {
        if (e.second == name) return e.first;
    }
    fail_field(field, "unknown placement '" + name + "' (expected one of: " + names_of(kPlacements) + ")");
}

PatternKind parse_pattern_kind(const std::string &name, const std::string &field) {
    for (const auto &e : kKinds) {
        if (e.second == name) return e.first;
    }
    fail_field(field, "unknown pattern kind '" + name + "' (expected one of: " + names_of(kKinds) + ")");
}

const FusionRule *RuleSet::find(PatternKind producer, PatternKind consumer) const {
    for (const FusionRule &r : rules) {
        if (r.producer == producer && r.consumer == consumer) return &r;
    }
    return nullptr;
}

RuleSet parse_rules(const json &j, const std::string &source) {
    try {
        if (!j.is_object()) fail("expected a JSON object");
        for (const auto &kv : j.items()) {
            // clang-format off
            static const std::set<std::string> known = {
                "format", "version", "name", "doc", "fuse", "max_group_ops", "max_group_inputs", "window_fusion",
                "multi_output", "defer_injective", "recompute", "sibling_products", "pointwise_into_depthwise",
                "attention", "cost_model", "opaque_ops", "opaque_nodes", "stop_after"};
            // clang-format on
            if (!known.count(kv.key())) fail_field(kv.key(), "unknown key in a rule set");
        }
        if (!j.contains("format") || j["format"] != "hfuse-rules") fail_field("format", "expected \"hfuse-rules\"");
        if (!j.contains("version") || j["version"] != 1) fail_field("version", "expected 1");
        RuleSet r;
        r.source = source;
        if (!j.contains("name") || !j["name"].is_string()) fail_field("name", "expected a string");
        r.name = j["name"].get<std::string>();
        if (j.contains("fuse")) {
            if (!j["fuse"].is_array()) fail_field("fuse", "expected a list of rules");
            for (size_t i = 0; i < j["fuse"].size(); i++) {
                const json &e = j["fuse"][i];
                const std::string f = "fuse[" + std::to_string(i) + "]";
                if (!e.is_object() || !e.contains("producer") || !e.contains("consumers") || !e.contains("placement") ||
                    !e["producer"].is_string() || !e["consumers"].is_array() || !e["placement"].is_string()) {
                    fail_field(f, "expected {\"producer\": KIND, \"consumers\": [KIND, ...], \"placement\": P}");
                }
                for (const auto &kv : e.items()) {
                    if (kv.key() != "producer" && kv.key() != "consumers" && kv.key() != "placement") {
                        fail_field(f + "." + kv.key(),
                                   "unknown key in a rule (expected producer, consumers, placement)");
                    }
                }
                PatternKind producer = parse_pattern_kind(e["producer"].get<std::string>(), f + ".producer");
                Placement placement = parse_placement(e["placement"].get<std::string>(), f + ".placement");
                if (producer == PatternKind::ComplexOutFusable && placement == Placement::Inline) {
                    fail_field(f + ".placement",
                               "complex-out-fusable ops have a reduction and cannot be inlined; "
                               "use compute_at or root");
                }
                if (placement != Placement::Inline && placement != Placement::ComputeAt &&
                    placement != Placement::Root) {
                    fail_field(f + ".placement", "a rule places the producer inline, compute_at or root");
                }
                for (const json &c : e["consumers"]) {
                    if (!c.is_string()) fail_field(f + ".consumers", "expected kind names");
                    PatternKind consumer = parse_pattern_kind(c.get<std::string>(), f + ".consumers");
                    if (producer == PatternKind::Opaque || consumer == PatternKind::Opaque) {
                        fail_field(f, "opaque ops never fuse");
                    }
                    if (r.find(producer, consumer)) {
                        fail_field(
                            f, std::string("a second rule for ") + to_string(producer) + " -> " + to_string(consumer));
                    }
                    r.rules.push_back({producer, consumer, placement});
                }
            }
        }
        r.max_group_ops = get_positive(j, "max_group_ops", r.max_group_ops);
        r.max_group_inputs = get_positive(j, "max_group_inputs", r.max_group_inputs);
        r.window_fusion = get_bool(j, "window_fusion", r.window_fusion);
        r.multi_output = get_bool(j, "multi_output", r.multi_output);
        r.defer_injective = get_bool(j, "defer_injective", r.defer_injective);
        r.recompute = get_bool(j, "recompute", r.recompute);
        r.sibling_products = get_bool(j, "sibling_products", r.sibling_products);
        r.pointwise_into_depthwise = get_bool(j, "pointwise_into_depthwise", r.pointwise_into_depthwise);
        r.attention = get_bool(j, "attention", r.attention);
        if (j.contains("cost_model")) {
            // false, or the machine: {"flops_per_ns": ..., "cache_bytes": ..., ...}
            if (!j["cost_model"].is_boolean() || j["cost_model"].get<bool>()) {
                r.machine = parse_machine_model(j["cost_model"], "cost_model");
                r.cost_model = true;
            }
        }
        r.opaque_ops = get_names(j, "opaque_ops");
        r.opaque_nodes = get_names(j, "opaque_nodes");
        r.stop_after = get_names(j, "stop_after");
        for (const std::string &op : r.opaque_ops) {
            if (!find_op(op)) fail_field("opaque_ops", "unknown op '" + op + "'");
        }
        return r;
    } catch (Error &e) {
        throw e.in_file(source);
    }
}

RuleSet load_rules(const std::string &name_or_path) {
    auto builtin = builtin_rule_files().find(name_or_path);
    if (builtin != builtin_rule_files().end()) {
        return parse_rules(json::parse(builtin->second), "built-in rules '" + name_or_path + "'");
    }
    if (!std::ifstream(name_or_path)) {
        std::string names;
        for (const auto &n : builtin_rule_names()) names += (names.empty() ? "" : ", ") + n;
        throw Error("no such rule-set file, and not a built-in rule set (" + names + ")").in_file(name_or_path);
    }
    return parse_rules(read_json_file(name_or_path, "rule-set file"), name_or_path);
}

json to_json(const RuleSet &r) {
    json j = {{"format", "hfuse-rules"}, {"version", 1}, {"name", r.name}};
    std::map<std::pair<PatternKind, Placement>, json> grouped;
    for (const FusionRule &rule : r.rules) grouped[{rule.producer, rule.placement}].push_back(to_string(rule.consumer));
    j["fuse"] = json::array();
    for (const auto &kv : grouped) {
        j["fuse"].push_back({{"producer", to_string(kv.first.first)},
                             {"consumers", kv.second},
                             {"placement", to_string(kv.first.second)}});
    }
    j["max_group_ops"] = r.max_group_ops;
    j["max_group_inputs"] = r.max_group_inputs;
    j["window_fusion"] = r.window_fusion;
    j["multi_output"] = r.multi_output;
    j["defer_injective"] = r.defer_injective;
    j["recompute"] = r.recompute;
    j["sibling_products"] = r.sibling_products;
    j["pointwise_into_depthwise"] = r.pointwise_into_depthwise;
    j["attention"] = r.attention;
    j["cost_model"] = r.cost_model ? to_json(r.machine) : json(false);
    j["opaque_ops"] = r.opaque_ops;
    j["opaque_nodes"] = r.opaque_nodes;
    j["stop_after"] = r.stop_after;
    return j;
}

std::vector<std::string> unknown_rule_nodes(const RuleSet &rules, const Graph &model) {
    std::vector<std::string> notes;
    for (const auto &[field, names] :
         {std::pair<const char *, const std::set<std::string> *>{"opaque_nodes", &rules.opaque_nodes},
          {"stop_after", &rules.stop_after}}) {
        for (const std::string &n : *names) {
            if (!model.find_node(n)) {
                notes.push_back("rules " + rules.source + ": " + field + " names '" + n + "', which model '" +
                                model.name + "' has no node of");
            }
        }
    }
    return notes;
}

std::vector<std::string> builtin_rule_names() {
    std::vector<std::string> names;
    for (const auto &kv : builtin_rule_files()) names.push_back(kv.first);
    return names;
}

}  // namespace hfuse
