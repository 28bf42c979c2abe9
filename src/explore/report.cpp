#include "explore/report.h"
#include "explore/text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace hfuse::explore {
namespace {

using nlohmann::json;

std::string mb(int64_t bytes) {
    return fmt("%.2f MB", bytes / 1e6);
}

const Evaluation *find_key(const std::vector<Evaluation> &rows, const std::string &key) {
    for (const Evaluation &e : rows) {
        if (e.candidate.key == key) return &e;
    }
    return nullptr;
}

const Evaluation *find_baseline(const std::vector<Evaluation> &rows, const std::string &label,
                                const std::string &schedule = "") {
    for (const Evaluation &e : rows) {
        const auto &b = e.candidate.baselines;
        if (std::find(b.begin(), b.end(), label) != b.end() && (schedule.empty() || e.candidate.schedule == schedule))
            return &e;
    }
    return nullptr;
}

std::string describe(const Evaluation &e) {
    std::string s = e.candidate.schedule;
    if (e.candidate.whole)
        s += " (whole model, one pipeline)";
    else if (e.candidate.schedule != "templates")
        s += " (each group)";
    if (!e.fallback_groups.empty()) {
        std::string groups;
        for (const std::string &g : e.fallback_groups) groups += (groups.empty() ? "" : ", ") + g;
        s += "; templates for " + groups + " (the autoscheduler's schedule failed)";
    }
    return s;
}

std::string baseline_name(const Candidate &c) {
    std::string name;
    for (const std::string &b : c.baselines) {
        std::string n = b == "whole" ? "whole+" + c.schedule : b;
        name += (name.empty() ? "" : ", ") + n;
    }
    return name;
}

// The groups of `plan` as sets of the plan file's node names.
std::set<std::set<std::string>> groups_of(const json &plan) {
    std::set<std::set<std::string>> out;
    for (const json &g : plan.at("groups")) {
        std::set<std::string> nodes;
        for (const json &n : g.at("nodes")) nodes.insert(n.get<std::string>());
        out.insert(nodes);
    }
    return out;
}

std::string group_text(const json &nodes) {
    std::string s;
    for (const json &n : nodes) s += (s.empty() ? "" : " ") + n.get<std::string>();
    return "[" + s + "]";
}

// Template parameters of `a` that differ from `b`'s (parameter_changes), each with its group's nodes.
std::vector<std::string> param_differences(const json &a, const json &b) {
    std::vector<std::string> out;
    for (const ParameterChange &c : parameter_changes(a, b))
        out.push_back(group_text((*c.group)["nodes"]) + " " + c.text);
    return out;
}

void why_section(std::string &s, const ReportInput &in, const Evaluation &best, const Evaluation *def) {
    s += "## Why it won\n\n";
    const json &bp = best.candidate.plan;
    auto bc = in.costs.find(best.candidate.key);
    if (best.candidate.whole) {
        s += "- Halide's " + best.candidate.schedule +
             " autoscheduler, given the whole model as one pipeline, made every fusion and schedule choice "
             "itself (its choices are in its schedule, not in a plan).\n";
    }
    if (def && def->candidate.key != best.candidate.key) {
        const auto bg = groups_of(bp), dg = groups_of(def->candidate.plan);
        if (bg == dg && !best.candidate.whole) {
            s += "- Same fusion as the default plan (" + std::to_string(bg.size()) + " groups: " + plan_summary(bp) +
                 ").\n";
        } else if (!best.candidate.whole) {
            s += "- Fuses differently from the default plan: " + std::to_string(bg.size()) + " groups " +
                 plan_summary(bp) + " against " + std::to_string(dg.size()) + " " + plan_summary(def->candidate.plan) +
                 ".";
            std::vector<std::string> only_best;
            for (const json &g : bp.at("groups")) {
                std::set<std::string> nodes;
                std::string text;
                for (const json &n : g.at("nodes")) {
                    nodes.insert(n.get<std::string>());
                    text += (text.empty() ? "" : " ") + n.get<std::string>();
                }
                if (!dg.count(nodes)) only_best.push_back("[" + text + "]");
            }
            if (!only_best.empty()) {
                s += " Its own groups: ";
                for (size_t i = 0; i < only_best.size(); i++) s += (i ? ", " : "") + only_best[i];
                s += ".";
            }
            s += "\n";
        }
        auto dc = in.costs.find(def->candidate.key);
        if (bc != in.costs.end() && dc != in.costs.end() && !best.candidate.whole) {
            const int64_t b = bc->second.bytes_between_groups, d = dc->second.bytes_between_groups;
            s += "- Values passed between groups through memory (cost model): " + mb(b) + " against the default's " +
                 mb(d) +
                 (b < d   ? " (" + mb(d - b) + " less)"
                  : b > d ? " (" + mb(b - d) + " more)"
                          : "") +
                 "; estimated " + fmt("%.3g", bc->second.ms) + " ms against " + fmt("%.3g", dc->second.ms) + " ms.\n";
        }
        if (best.candidate.schedule == "templates" && !best.candidate.whole) {
            std::vector<std::string> diff = param_differences(bp, def->candidate.plan);
            if (!diff.empty()) {
                s += "- Template parameters that differ from the default plan's (same group, or the group of "
                     "the same master):";
                for (const std::string &d : diff) s += " `" + d + "`;";
                s.back() = '.';
                s += "\n";
            } else if (groups_of(bp) == groups_of(def->candidate.plan)) {
                s += "- Same parameters too: the two are the same plan within timing noise.\n";
            }
        } else if (!best.candidate.whole) {
            s += "- Scheduled by Halide's " + best.candidate.schedule + " autoscheduler, group by group.\n";
        }
        const double ratio = def->ranked_ms() / best.ranked_ms();
        auto dc2 = in.costs.find(def->candidate.key);
        if (bc != in.costs.end() && dc2 != in.costs.end() && !best.candidate.whole && ratio > 1 &&
            bc->second.bytes_between_groups > dc2->second.bytes_between_groups) {
            s += "- It passes more data through memory than the default yet measured faster: what it gains is "
                 "in how its groups are scheduled (the parameters above), not in traffic; the cost estimate, "
                 "which sees only traffic and FLOPs, ranked it behind.\n";
        }
        s += "- Measured: " + fmt("%.4g", best.ranked_ms()) + " ms against the default's " +
             fmt("%.4g", def->ranked_ms()) + " ms (" + fmt("%.2fx", ratio) + ")" +
             (ratio < 1.03 ? ": within a few percent, i.e. timing noise on this machine may decide the order" : "") +
             ".\n";
    } else if (def) {
        s += "- The default plan (the x86 rules, the composer's parameters) is the best candidate found.\n";
    }
    if (bc != in.costs.end() && !best.candidate.whole) {
        s += "\nThe best candidate's groups (cost model):\n\n"
             "| group | members | schedule | GFLOP | MB in | MB weights | MB out | estimated ms |\n"
             "| --- | --- | --- | --- | --- | --- | --- | --- |\n";
        const json &groups = bp.at("groups");
        for (size_t i = 0; i < bc->second.groups.size() && i < groups.size(); i++) {
            const GroupCost &g = bc->second.groups[i];
            json sched = groups[i].value("schedule", json::object());
            sched.erase("why");
            std::string members;
            for (const json &n : groups[i].at("nodes")) members += (members.empty() ? "" : " ") + n.get<std::string>();
            s += "| " + g.name + " | " + table_cell(members) + " | " +
                 table_cell(best.candidate.schedule == "templates" ? sched.dump() : best.candidate.schedule) + " | " +
                 fmt("%.3g", g.flops / 1e9) + " | " + fmt("%.2f", g.bytes_in / 1e6) + " | " +
                 fmt("%.2f", g.bytes_weights / 1e6) + " | " + fmt("%.2f", g.bytes_out / 1e6) + " | " +
                 fmt("%.3g", g.ms) + " |\n";
        }
    }
    s += "\n";
}

// Ranks of `v` from 1 (smallest), ties sharing their mean rank.
std::vector<double> ranks(const std::vector<double> &v) {
    std::vector<size_t> order(v.size());
    for (size_t i = 0; i < v.size(); i++) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
    std::vector<double> r(v.size());
    for (size_t i = 0; i < order.size();) {
        size_t k = i;
        while (k + 1 < order.size() && v[order[k + 1]] == v[order[i]]) k++;
        for (size_t m = i; m <= k; m++) r[order[m]] = (i + k) / 2.0 + 1;
        i = k + 1;
    }
    return r;
}

// The cost model (cost_model.h) against the measurements: the plans timed with the templates'
// default parameters, ranked by estimate and by measured time, and Spearman's rank correlation of the
// two (1: the same order; 0: none). Empty below 3 such plans.
void cost_model_section(std::string &s, const std::vector<Evaluation> &rows) {
    std::vector<const Evaluation *> plans;
    for (const Evaluation &e : rows) {
        const Candidate &c = e.candidate;
        if (e.status == "ok" && c.schedule == "templates" && !c.whole && c.variant.empty() && c.estimate_ms > 0 &&
            std::isfinite(e.ranked_ms()) && (c.origin == "baseline" || c.origin == "plans"))
            plans.push_back(&e);
    }
    if (plans.size() < 3) return;
    std::vector<double> est, got;
    for (const Evaluation *e : plans) {
        est.push_back(e->candidate.estimate_ms);
        got.push_back(e->ranked_ms());
    }
    const std::vector<double> re = ranks(est), rg = ranks(got);
    const double n = static_cast<double>(plans.size()), mean = (n + 1) / 2;
    double cov = 0, ve = 0, vg = 0;
    for (size_t i = 0; i < plans.size(); i++) {
        cov += (re[i] - mean) * (rg[i] - mean);
        ve += (re[i] - mean) * (re[i] - mean);
        vg += (rg[i] - mean) * (rg[i] - mean);
    }
    const double rho = ve > 0 && vg > 0 ? cov / std::sqrt(ve * vg) : 0;
    s += "## The cost model against the measurements\n\n" + std::to_string(plans.size()) +
         " plans timed with the templates' default parameters: Spearman's rank correlation of the cost "
         "estimate with the measured time " +
         fmt("%.2f", rho) + " (1: the same order, 0: none, -1: reversed).\n\n";
    s += "| measured rank | estimated rank | groups | measured ms | estimated ms |\n| ---: | ---: | ---: | ---: | ---: "
         "|\n";
    std::vector<size_t> by_measured(plans.size());
    for (size_t i = 0; i < plans.size(); i++) by_measured[i] = i;
    std::stable_sort(by_measured.begin(), by_measured.end(), [&](size_t a, size_t b) { return rg[a] < rg[b]; });
    for (size_t k = 0; k < by_measured.size() && k < 12; k++) {
        const size_t i = by_measured[k];
        s += "| " + fmt("%g", rg[i]) + " | " + fmt("%g", re[i]) + " | " + std::to_string(plans[i]->candidate.groups) +
             " | " + fmt("%.4g", got[i]) + " | " + fmt("%.4g", est[i]) + " |\n";
    }
    s += "\n";
}

// "## Group parameters": what the group search (group_search.h) tried for each class of alike groups,
// each variant's time for the class over the default schedule's, timed in one process.
void group_search_section(std::string &s, const json &search) {
    if (!search.is_object() || search.value("classes", json::array()).empty()) return;
    const double gain = search.value("min_gain", 0.0);
    s += "## Group parameters\n\nEach round varied one schedule parameter in every class of alike groups of the "
         "default plan and was timed against the default plan in one process (`hfuse bench --plan ROUND --against "
         "DEFAULT --profile`: each group beside the default's, alternately). *Time* is the class's groups' time "
         "over the default's (below 1: faster). A class's fastest variant goes into the search's plan if it took "
         "at most " +
         fmt("%.2f", 1 - gain) +
         " of the default's time in its round; that plan is timed against the default the same way, and composed "
         "again without the variants that did not pay there (at most three times). *Kept*: in the last plan so "
         "timed" +
         (search.value("plan", json()).is_string() ? " (candidate " + search["plan"].get<std::string>() + ")"
                                                   : std::string(" (no class did)")) +
         ".\n\n| class | groups | tried | fastest variant | time | kept (time in that plan) |\n"
         "| --- | --- | --- | --- | --- | --- |\n";
    for (const json &c : search["classes"]) {
        const json trials = c.value("trials", json::array());
        const json *fastest = nullptr;
        for (const json &t : trials) {
            if (!fastest || t.value("ratio", 0.0) < fastest->value("ratio", 0.0)) fastest = &t;
        }
        std::string groups;
        for (const json &g : c.value("groups", json::array()))
            groups += (groups.empty() ? "" : " ") + g.get<std::string>();
        const json kept = c.value("kept", json()), in_plan = c.value("ratio_in_plan", json());
        s += "| " + table_cell(c.value("class", std::string())) + " | " + groups + " | " +
             std::to_string(trials.size()) + " | " +
             (fastest ? table_cell(fastest->value("variant", std::string())) + " | " +
                            fmt("%.3f", fastest->value("ratio", 0.0))
                      : std::string(" | ")) +
             " | " +
             (kept.is_string() ? table_cell(kept.get<std::string>()) +
                                     (in_plan.is_number() ? fmt(" (%.3f)", in_plan.get<double>()) : "")
              : in_plan.is_number() ? fmt("no (%.3f)", in_plan.get<double>())
                                    : "no") +
             " |\n";
    }
    s += "\n";
}

}  // namespace

std::string markdown_report(const ReportInput &in) {
    const json &h = in.header;
    const json machine = h.value("machine", json::object()), options = h.value("options", json::object());
    std::string s = "# hfuse explore: " + h.value("model", std::string("?")) + "\n\n";
    s += "Model `" + h.value("model_file", std::string("?")) + "`; machine: " + machine.value("cpu", std::string("?")) +
         ", " + std::to_string(machine.value("cores", 0)) + " cores, Halide target `" +
         machine.value("target", std::string("?")) + "`.\n";
    std::string sources;
    for (const json &x : options.value("schedules", json::array()))
        sources += (sources.empty() ? "" : ", ") + x.get<std::string>();
    s += "Budget " + std::to_string(options.value("budget", 0)) + ", seed " + std::to_string(options.value("seed", 0)) +
         ", " + std::to_string(options.value("jobs", 1)) + " job(s), " + std::to_string(options.value("runs", 0)) +
         " timed runs per candidate, timeout " + fmt("%g", options.value("timeout_s", 0.0)) +
         " s; schedule sources: " + sources + ".\n";
    const json space = h.value("plan_space", json::object());
    s += space.value("exhaustive", false)
             ? "Plan space: all " + std::to_string(space.value("plans", 0)) + " legal plans enumerated.\n"
             : "Plan space: more than " + std::to_string(space.value("exhaustive_limit", 0)) +
                   " legal plans; the graph cut into " + std::to_string(space.value("segments", 0)) + " segments (" +
                   std::to_string(space.value("distinct_segments", 0)) + " distinct, each searched once), " +
                   std::to_string(space.value("plans", 0)) + " plans composed from their best choices.\n";

    int ok = 0, err = 0, to = 0;
    std::set<std::string> plans, partitions, used;
    for (const Evaluation &e : in.rows) {
        ok += e.status == "ok";
        err += e.status == "error";
        to += e.status == "timeout";
        if (e.status == "ok") used.insert(e.candidate.schedule);
        plans.insert(canonical_plan(e.candidate.plan, true, true).dump());
        partitions.insert(partition_key(e.candidate.plan));
    }
    std::string used_text;
    for (const std::string &u : used) used_text += (used_text.empty() ? "" : ", ") + u;
    s += "\nEvaluated " + std::to_string(in.rows.size()) + " candidates: " + std::to_string(ok) + " ok, " +
         std::to_string(err) + " error, " + std::to_string(to) + " timeout; " + std::to_string(plans.size()) +
         " distinct plan files (" + std::to_string(partitions.size()) + " distinct groupings of the nodes); " +
         "schedule sources that ran: " + used_text + ".\n\n";

    const Evaluation *best = find_key(in.rows, in.best_key);
    const Evaluation *best_plan = find_key(in.rows, in.best_plan_key);
    const Evaluation *def = find_baseline(in.rows, "default");
    if (best) {
        s += "## Best\n\n";
        s += "**" + table_cell(plan_summary(best->candidate.plan)) + "**, scheduled by " + describe(*best) +
             (best->candidate.variant.empty() ? "" : " (" + best->candidate.variant + ")") + ": **" +
             fmt("%.4g", best->ranked_ms()) + " ms**" +
             (best->confirm_ms.empty() ? ""
                                       : " (median of " + std::to_string(best->confirm_ms.size()) +
                                             " confirmation rounds, timed alternately with the baselines)") +
             ".\n\n";
        s += "| | plan | schedule | median ms | vs best | timed |\n| --- | --- | --- | --- | --- | --- |\n";
        auto row = [&](const std::string &what, const Evaluation *e) {
            if (!e) return;
            s += "| " + what + " | " + table_cell(plan_summary(e->candidate.plan)) + " | " + describe(*e) + " | " +
                 (e->status == "ok"
                      ? fmt("%.4g", e->ranked_ms()) + " | " + fmt("%.2fx", e->ranked_ms() / best->ranked_ms())
                      : e->status + " | ") +
                 " | " +
                 (e->confirm_ms.empty() ? "own run only"
                                        : "confirmed, " + std::to_string(e->confirm_ms.size()) + " rounds") +
                 " |\n";
        };
        row("best", best);
        if (best_plan && best_plan != best) row("best_plan.json", best_plan);
        row("default (x86 rules)", def);
        row("--rules tvm", find_baseline(in.rows, "tvm"));
        row("unfused", find_baseline(in.rows, "unfused"));
        for (const char *a : {"mullapudi2016", "adams2019", "li2018"}) {
            row(std::string("--whole --autoschedule ") + a, find_baseline(in.rows, "whole", a));
        }
        s += "\n";
        if (best_plan) {
            s += "`best_plan.json` is " +
                 std::string(best_plan == best ? "this candidate" : "the fastest candidate a plan file can express") +
                 ", schedule parameters included: `hfuse run|bench|compile MODEL --plan best_plan.json` and "
                 "`hfuse_add_model(... PLAN best_plan.json)` take it as is.";
            if (best_plan != best) {
                s += " The fastest candidate overall is scheduled by " + describe(*best) +
                     ", which a plan file cannot say (the plan format has no autoscheduler field); reproduce it with "
                     "`hfuse bench MODEL " +
                     std::string(best->candidate.whole ? "--whole"
                                                       : "--plan candidates/" + best->candidate.key + ".plan.json") +
                     " --autoschedule " + best->candidate.schedule + "`.";
            }
            s += "\n\n";
        }
        why_section(s, in, *best, def);
    } else {
        s += "No candidate ran successfully: see the errors below.\n\n";
    }

    s += segment_section(in.segments);
    group_search_section(s, h.value("group_search", json()));
    cost_model_section(s, in.rows);
    s += "## Candidates\n\nThe confirmed ones first (by their confirmation rounds), then the rest by median; "
         "failures last. `median ms` is the candidate's own run, `confirmed ms` the median of the confirmation "
         "rounds. `baseline` names the reference points; plans are the groups as the plan file lists them.\n\n";
    s += "| # | plan | schedule | variant | groups | compile s | median ms | confirmed ms | status | baseline |\n"
         "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
    std::vector<const Evaluation *> order;
    for (const Evaluation &e : in.rows) order.push_back(&e);
    std::stable_sort(order.begin(), order.end(), [](const Evaluation *a, const Evaluation *b) {
        bool ao = a->status == "ok", bo = b->status == "ok";
        if (ao != bo) return ao;
        bool ac = !a->confirm_ms.empty(), bc = !b->confirm_ms.empty();
        if (ac != bc) return ac;
        return ao && a->ranked_ms() < b->ranked_ms();
    });
    for (const Evaluation *e : order) {
        const Candidate &c = e->candidate;
        std::string mark = c.key == in.best_key ? " **best**" : c.key == in.best_plan_key ? " (best_plan.json)" : "";
        s += "| " + std::to_string(e->id) + " | " + table_cell(plan_summary(c.plan)) + " | " + describe(*e) + " | " +
             table_cell(c.variant) + " | " + std::to_string(c.groups) + " | " +
             (std::isnan(e->compile_s) ? "" : fmt("%.2f", e->compile_s)) + " | " +
             (e->status == "ok" ? fmt("%.4g", e->median_ms) : "") + " | " +
             (e->confirm_ms.empty() ? "" : fmt("%.4g", e->ranked_ms())) + mark + " | " + e->status + " | " +
             table_cell(baseline_name(c)) + " |\n";
    }
    std::string failures;
    for (const Evaluation &e : in.rows) {
        if (e.status == "ok") continue;
        failures += "- #" + std::to_string(e.id) + " " + plan_summary(e.candidate.plan) + ", " + describe(e) + ": " +
                    e.status + ": " + e.error + "\n";
    }
    if (!failures.empty()) s += "\n## Failures\n\n" + failures;
    s += "\n## Plot\n\n![time against number of groups](plot.svg)\n\n";
    s += "## Notes\n\n";
    s += "- Times are medians of each candidate's timed runs in its own process (`hfuse bench --json`); the best "
         "few and the baselines are timed again, alternately, and ranked by those. Other load on the machine "
         "shows up as noise; differences of a few percent are not significant.\n";
    if (options.value("jobs", 1) > 1) {
        s += "- With --jobs " + std::to_string(options.value("jobs", 1)) +
             " candidates were timed at the same time and shared the cores: their times are higher and noisier "
             "than alone (the confirmation rounds run one at a time).\n";
    }
    for (const std::string &n : in.notes) s += "- " + n + "\n";
    return s;
}

}  // namespace hfuse::explore
