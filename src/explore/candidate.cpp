#include "explore/candidate.h"

#include <map>

#include <algorithm>
#include <cstdio>

namespace hfuse::explore {
namespace {

using nlohmann::json;

json number_or_null(double v) {
    return std::isnan(v) ? json(nullptr) : json(v);
}

double number_from(const json &j, const char *key) {
    return j.contains(key) && j[key].is_number() ? j[key].get<double>() : NAN;
}

}  // namespace

double Evaluation::ranked_ms() const {
    if (confirm_ms.empty()) return median_ms;
    std::vector<double> v = confirm_ms;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

json canonical_plan(const json &plan, bool keep_schedule, bool keep_rewritten) {
    std::vector<json> groups;
    for (const json &g : plan.at("groups")) {
        std::vector<std::string> nodes = g.at("nodes").get<std::vector<std::string>>();
        std::sort(nodes.begin(), nodes.end());
        json c = {{"nodes", nodes}, {"placement", g.value("placement", json::object())}};
        if (g.contains("backend")) c["backend"] = g["backend"];
        if (keep_schedule && g.contains("schedule")) {
            json s = g["schedule"];
            if (s.is_object()) s.erase("why");  // an explanation, not a parameter
            c["schedule"] = s;
        }
        groups.push_back(c);
    }
    std::sort(groups.begin(), groups.end(),
              [](const json &a, const json &b) { return a["nodes"].dump() < b["nodes"].dump(); });
    json out = {{"groups", groups}};
    if (keep_rewritten) out["rewritten"] = plan.value("rewritten", true);
    return out;
}

std::string hash_hex(const std::string &text) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char ch : text) {
        h ^= ch;
        h *= 1099511628211ull;
    }
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

void assign_key(Candidate &c, bool rewrites_matter) {
    // An autoscheduler ignores the templates' parameters and the placements are still the plan's.
    json id = {{"plan", canonical_plan(c.plan, c.schedule == "templates" && !c.whole, rewrites_matter)},
               {"schedule", c.schedule},
               {"whole", c.whole}};
    c.key = hash_hex(id.dump());
}

std::vector<ParameterChange> parameter_changes(const json &plan, const json &against) {
    std::vector<ParameterChange> out;
    for (const json &ga : plan.at("groups")) {
        const json *match = nullptr;
        for (const json &gb : against.at("groups")) {
            if (ga.at("nodes") == gb.at("nodes")) match = &gb;
        }
        for (const json &gb : against.at("groups")) {
            if (!match && ga.contains("master") && ga["master"] == gb.value("master", json())) match = &gb;
        }
        if (!match) continue;
        const json sa = ga.value("schedule", json::object()), sb = match->value("schedule", json::object());
        if (sa.value("template", "") != sb.value("template", "")) {
            out.push_back({&ga, "template " + sb.value("template", std::string("-")) + " -> " +
                                    sa.value("template", std::string("-"))});
            continue;
        }
        for (const auto &kv : sa.items()) {
            if (kv.key() == "why") continue;
            const json other = sb.contains(kv.key()) ? sb[kv.key()] : json();
            if (other != kv.value())
                out.push_back(
                    {&ga, kv.key() + " " + (other.is_null() ? "-" : other.dump()) + " -> " + kv.value().dump()});
        }
    }
    return out;
}

std::string plan_summary(const json &plan) {
    std::string s;
    for (const json &g : plan.at("groups")) {
        std::string members;
        for (const json &n : g.at("nodes")) members += (members.empty() ? "" : " ") + n.get<std::string>();
        s += (s.empty() ? "[" : " [") + members + "]";
    }
    return s;
}

std::string partition_key(const json &plan) {
    std::vector<std::vector<std::string>> groups;
    for (const json &g : plan.at("groups")) {
        std::vector<std::string> nodes = g.at("nodes").get<std::vector<std::string>>();
        std::sort(nodes.begin(), nodes.end());
        groups.push_back(nodes);
    }
    std::sort(groups.begin(), groups.end());
    return json(groups).dump();
}

json params_of(const Candidate &c) {
    if (c.schedule != "templates") {
        return {{"autoscheduler", c.schedule}, {"scope", c.whole ? "whole pipeline" : "each group"}};
    }
    json p = json::object();
    for (const json &g : c.plan.at("groups")) {
        json s = g.value("schedule", json::object());
        if (s.is_object()) s.erase("why");
        p[g.value("name", "?")] = s;
    }
    return p;
}

json to_json(const Evaluation &e) {
    const Candidate &c = e.candidate;
    return {{"id", e.id},
            {"key", c.key},
            {"plan", c.plan},
            {"plan_summary", plan_summary(c.plan)},
            {"schedule", c.schedule},
            {"whole", c.whole},
            {"params", params_of(c)},
            {"variant", c.variant},
            {"baselines", c.baselines},
            {"origin", c.origin},
            {"groups", c.groups},
            {"estimate_ms", c.estimate_ms},
            {"bytes_between_groups", c.bytes_between_groups},
            {"gflop", c.gflop},
            {"compile_s", number_or_null(e.compile_s)},
            {"cached_groups", e.cached_groups},
            {"cached_cold_s", number_or_null(e.cached_cold_s)},
            {"median_ms", number_or_null(e.median_ms)},
            {"min_ms", number_or_null(e.min_ms)},
            {"wall_s", number_or_null(e.wall_s)},
            {"confirm_ms", e.confirm_ms},
            {"fallback_groups", e.fallback_groups},
            {"group_ms", e.group_ms},
            {"against_key", e.against_key},
            {"against_ms", number_or_null(e.against_ms)},
            {"against_group_ms", e.against_group_ms},
            {"peak_rss_mb", number_or_null(e.peak_rss_mb)},
            {"status", e.status},
            {"error", e.error}};
}

Evaluation evaluation_from_json(const json &j) {
    Evaluation e;
    Candidate &c = e.candidate;
    c.key = j.at("key").get<std::string>();
    c.plan = j.at("plan");
    c.schedule = j.at("schedule").get<std::string>();
    c.whole = j.value("whole", false);
    c.variant = j.value("variant", "");
    c.baselines = j.value("baselines", std::vector<std::string>{});
    c.origin = j.value("origin", "");
    c.groups = j.value("groups", 0);
    c.estimate_ms = number_from(j, "estimate_ms");
    c.bytes_between_groups = j.value("bytes_between_groups", int64_t(0));
    c.gflop = number_from(j, "gflop");
    e.id = j.value("id", -1);
    e.status = j.at("status").get<std::string>();
    e.error = j.value("error", "");
    e.compile_s = number_from(j, "compile_s");
    e.cached_groups = j.value("cached_groups", -1);
    e.cached_cold_s = number_from(j, "cached_cold_s");
    e.median_ms = number_from(j, "median_ms");
    e.min_ms = number_from(j, "min_ms");
    e.wall_s = number_from(j, "wall_s");
    e.confirm_ms = j.value("confirm_ms", std::vector<double>{});
    e.fallback_groups = j.value("fallback_groups", std::vector<std::string>{});
    e.group_ms = j.value("group_ms", std::map<std::string, double>{});
    e.against_key = j.value("against_key", "");
    e.against_ms = number_from(j, "against_ms");
    e.against_group_ms = j.value("against_group_ms", std::map<std::string, double>{});
    e.peak_rss_mb = number_from(j, "peak_rss_mb");
    return e;
}

}  // namespace hfuse::explore
