// hfuse bench MODEL: time whole-model runs under a plan; --compare times the plan against the
// unfused model, --against against another plan file, in the same process, interleaved, so both see
// the same machine conditions; --profile then times each group of the plan and sets it against the
// machine's FMA peak (with --against, each group beside the other plan's group of the same nodes).
#include "cli_common.h"
#include "hfuse/model_io.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <set>

namespace hfuse::cli {
namespace {

struct BenchOptions {
    ModelArg model;
    PlanChoice plan;
    int runs = 20;
    bool json = false, compare = false, profile = false;
    std::string against;  // --against PLAN: the baseline, instead of the unfused model
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Timed {
    Executor executor;
    double compile_ms;
    std::vector<double> ms;
};

// The group that took longest to schedule and compile (identical groups share one compile), for the
// 2 s a group may take (issue 6).
std::optional<GroupInfo> slowest_compile(const Executor &ex) {
    std::optional<GroupInfo> slowest;
    for (const GroupInfo &g : ex.groups()) {
        if (!slowest || g.compile_ms > slowest->compile_ms) slowest = g;
    }
    return slowest;
}

// --profile: each group's median over `runs` runs (Executor::profile, as `run --profile`), after the
// whole-model timing so as not to disturb it, and the FMA peak measured after both.
struct GroupProfiling {
    Profile profile;
    FmaPeak peak;
    std::vector<GroupReport> groups;
};

GroupProfiling profile_groups(Executor &ex, const std::map<std::string, TensorBuffer> &inputs, int runs) {
    GroupProfiling gp;
    gp.profile = ex.profile(inputs, runs);
    gp.peak = measure_fma_peak();
    gp.groups = group_reports(ex, gp.profile, gp.peak);
    return gp;
}

void add_profile_json(nlohmann::json &j, const GroupProfiling &gp) {
    const bool peak = gp.peak.gflops > 0;
    j["profile_ms"] = gp.profile.total_ms;
    j["threads"] = gp.peak.threads;
    j["fma_peak_gflops"] = peak ? nlohmann::json(gp.peak.gflops) : nlohmann::json(nullptr);
    j["fma_peak_isa"] = peak ? nlohmann::json(gp.peak.isa) : nlohmann::json(nullptr);
    nlohmann::json groups = nlohmann::json::array();
    for (const GroupReport &g : gp.groups) {
        groups.push_back({{"name", g.name},
                          {"master", g.master},
                          {"template", g.schedule_template},
                          {"ops", g.ops},
                          {"flops", g.flops},
                          {"ms", g.ms},
                          {"share", g.share},
                          {"gflops", g.gflops},
                          {"peak_share", peak ? nlohmann::json(g.peak_share) : nlohmann::json(nullptr)},
                          {"cold_compile_ms", g.cold_compile_ms}});
    }
    j["group_profile"] = groups;
}

// How far an interleaved comparison can be trusted: the speedup (base / plan) of each chunk of runs
// timed together, and how widely each side's runs spread. On a busy machine a single median misleads.
struct Spread {
    double speedup_min = 0, speedup_max = 0;
    double plan_min = 0, plan_max = 0, base_min = 0, base_max = 0;
    bool noisy() const { return plan_max > 2 * plan_min || base_max > 2 * base_min; }
};

Spread spread_of(const std::vector<double> &plan, const std::vector<double> &base, int chunk) {
    Spread s;
    s.plan_min = *std::min_element(plan.begin(), plan.end());
    s.plan_max = *std::max_element(plan.begin(), plan.end());
    s.base_min = *std::min_element(base.begin(), base.end());
    s.base_max = *std::max_element(base.begin(), base.end());
    std::vector<double> speedups;
    for (size_t at = 0; at < plan.size() && at < base.size(); at += chunk) {
        const size_t end = std::min(at + chunk, std::min(plan.size(), base.size()));
        speedups.push_back(median({base.begin() + at, base.begin() + end}) /
                           median({plan.begin() + at, plan.begin() + end}));
    }
    s.speedup_min = *std::min_element(speedups.begin(), speedups.end());
    s.speedup_max = *std::max_element(speedups.begin(), speedups.end());
    return s;
}

void add_spread_json(nlohmann::json &j, const Spread &s) {
    j["speedup_min"] = s.speedup_min;
    j["speedup_max"] = s.speedup_max;
    j["noisy"] = s.noisy();
}

// " (chunks 0.94x-1.31x)" after the speedup, and on a noisy run a warning line.
void print_spread(const Spread &s, const std::string &plan, const std::string &base) {
    std::printf(
        "  speedup per chunk of runs timed together: min %.2fx, max %.2fx; runs: %s %.4f-%.4f ms, %s "
        "%.4f-%.4f ms\n",
        s.speedup_min, s.speedup_max, plan.c_str(), s.plan_min, s.plan_max, base.c_str(), s.base_min, s.base_max);
    if (s.noisy()) {
        std::printf(
            "  warning: one side's run times varied more than 2x: the machine was busy and the speedup is "
            "uncertain; time again when it is idle\n");
    }
}

Timed build(const FusedGraph &plan, const ExecutorOptions &options) {
    auto t0 = std::chrono::steady_clock::now();
    Executor ex(plan, options);
    double compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return {std::move(ex), compile_ms, {}};
}

// --against: the two plans' medians, and with --profile each group of the plan beside the group of
// the other plan (`against_groups`) computing the same nodes, both profiled in alternation (5 chunks of
// the runs each, a group's time the median of its chunks' medians).
int report_against(const BenchOptions &o, const Graph &g, Timed &plan, Timed &against,
                   const std::vector<FusedGroup> &plan_groups, const std::vector<FusedGroup> &against_groups,
                   const std::map<std::string, TensorBuffer> &plan_inputs,
                   const std::map<std::string, TensorBuffer> &against_inputs) {
    const double p = median(plan.ms), a = median(against.ms);
    const Spread spread = spread_of(plan.ms, against.ms, std::max(1, o.runs / 5));
    struct Row {
        std::string name, master, against_name;
        std::vector<double> ms, against_ms;
    };
    std::vector<Row> rows;
    if (o.profile) {
        // Groups are matched by their members (recomputed copies included): the same nodes, the same work.
        std::map<std::set<std::string>, std::string> against_by_nodes;
        for (const FusedGroup &grp : against_groups) against_by_nodes[{grp.nodes.begin(), grp.nodes.end()}] = grp.name;
        std::map<std::string, std::string> match;  // plan group -> against group
        for (const FusedGroup &grp : plan_groups) {
            const auto it = against_by_nodes.find({grp.nodes.begin(), grp.nodes.end()});
            if (it != against_by_nodes.end()) match[grp.name] = it->second;
        }
        const int chunk = std::max(1, o.runs / 5);
        std::map<std::string, size_t> row_of;
        std::map<std::string, std::vector<double>> against_group_ms;
        for (int done = 0; done < o.runs; done += chunk) {
            const int n = std::min(chunk, o.runs - done);
            for (const GroupProfile &gp : plan.executor.profile(plan_inputs, n).groups) {
                auto [it, added] = row_of.emplace(gp.name, rows.size());
                if (added) {
                    const auto m = match.find(gp.name);
                    rows.push_back({gp.name, gp.master, m == match.end() ? "" : m->second, {}, {}});
                }
                rows[it->second].ms.push_back(gp.ms);
            }
            for (const GroupProfile &gp : against.executor.profile(against_inputs, n).groups)
                against_group_ms[gp.name].push_back(gp.ms);
        }
        for (Row &r : rows) {
            if (!r.against_name.empty()) r.against_ms = against_group_ms[r.against_name];
        }
    }
    if (o.json) {
        nlohmann::json j = {{"model", g.name},
                            {"plan", o.plan.describe()},
                            {"against", o.against},
                            {"plan_ms", p},
                            {"against_ms", a},
                            {"speedup", a / p},
                            {"plan_groups", plan.executor.num_groups()},
                            {"against_groups", against.executor.num_groups()},
                            {"runs", o.runs},
                            {"plan_compile_ms", plan.compile_ms},
                            {"against_compile_ms", against.compile_ms}};
        add_spread_json(j, spread);
        if (o.profile) {
            nlohmann::json groups = nlohmann::json::array();
            for (const Row &r : rows) {
                groups.push_back(
                    {{"name", r.name},
                     {"master", r.master},
                     {"ms", median(r.ms)},
                     {"against", r.against_name.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.against_name)},
                     {"against_ms",
                      r.against_ms.empty() ? nlohmann::json(nullptr) : nlohmann::json(median(r.against_ms))}});
            }
            j["group_profile"] = groups;
        }
        std::printf("%s\n", j.dump().c_str());
        return 0;
    }
    std::printf("%s: %s (%s) %.4f ms, %s (%s) %.4f ms: speedup %.2fx (medians of %d runs, interleaved)\n",
                g.name.c_str(), o.plan.describe().c_str(), counted(plan.executor.num_groups(), "group").c_str(), p,
                o.against.c_str(), counted(against.executor.num_groups(), "group").c_str(), a, a / p, o.runs);
    print_spread(spread, "plan", "against");
    if (o.profile) {
        std::printf("  %-6s %-48s %10s %10s %7s\n", "group", "master", "ms", "against", "speedup");
        double same = 0, same_against = 0, other = 0;
        for (const Row &r : rows) {
            const double ms = median(r.ms);
            if (r.against_ms.empty()) {
                other += ms;
                std::printf("  %-6s %-48s %10.4f %10s %7s\n", r.name.c_str(), r.master.substr(0, 48).c_str(), ms, "-",
                            "");
                continue;
            }
            const double am = median(r.against_ms);
            same += ms;
            same_against += am;
            std::printf("  %-6s %-48s %10.4f %10.4f %6.2fx\n", r.name.c_str(), r.master.substr(0, 48).c_str(), ms, am,
                        am / ms);
        }
        std::printf("  groups of the same nodes in both: %.4f against %.4f ms; groups with no match: %.4f ms\n", same,
                    same_against, other);
    }
    return 0;
}

int bench(const BenchOptions &o) {
    Graph g = o.model.load();
    auto inputs = load_inputs(g, {}, true);
    if (!o.compare && o.against.empty()) {
        Timed t = build(o.plan.make(g), o.plan.options());
        std::vector<std::string> fallbacks = report_fallbacks(t.executor);
        const auto packed = pack_inputs(t.executor, inputs);
        t.ms = time_runs(t.executor, packed, o.runs);
        double med = median(t.ms), best = *std::min_element(t.ms.begin(), t.ms.end());
        const std::optional<GroupInfo> slowest = slowest_compile(t.executor);
        std::optional<GroupProfiling> profiled;
        if (o.profile) profiled = profile_groups(t.executor, packed, o.runs);
        if (o.json) {
            const LayoutCounts layouts = count_layouts(t.executor.value_layouts());
            nlohmann::json j = {{"model", g.name},
                                {"plan", o.plan.describe()},
                                {"schedule", o.plan.schedule()},
                                {"whole", o.plan.whole},
                                {"groups", t.executor.num_groups()},
                                {"fallback_groups", fallbacks},
                                {"compiled_pipelines", t.executor.num_compiled()},
                                {"intermediate_bytes", t.executor.intermediate_bytes()},
                                {"intermediate_bytes_unshared", t.executor.intermediate_bytes_unshared()},
                                {"blocked_values", layouts.blocked},
                                {"paged_values", layouts.paged},
                                {"blocked_io", o.plan.blocked_io},
                                {"parallel_runtime", o.plan.parallel_runtime},
                                {"median_ms", med},
                                {"min_ms", best},
                                {"runs", o.runs},
                                {"runs_ms", t.ms},
                                {"compile_ms", t.compile_ms},
                                {"runtime_compile_ms", t.executor.runtime_compile_ms()},
                                {"kernel_cache", kernel_cache_json(t.executor)}};
            if (slowest) {
                j["group_compile_max_ms"] = slowest->compile_ms;
                j["group_compile_max"] = slowest->name;
            }
            if (profiled) add_profile_json(j, *profiled);
            std::printf("%s\n", j.dump().c_str());
        } else {
            std::printf("%s, plan %s (%s), schedule %s: median %.4f ms, min %.4f ms over %d runs; compile %.0f ms",
                        g.name.c_str(), o.plan.describe().c_str(), counted(t.executor.num_groups(), "group").c_str(),
                        o.plan.schedule().c_str(), med, best, o.runs, t.compile_ms);
            const double runtime_ms = t.executor.runtime_compile_ms();
            if (runtime_ms > 0 || slowest) {
                std::printf(" (");
                if (runtime_ms > 0) std::printf("Halide's shared runtime %.0f ms%s", runtime_ms, slowest ? ", " : "");
                if (slowest) std::printf("slowest group %s %.0f ms", slowest->name.c_str(), slowest->compile_ms);
                std::printf(")");
            }
            std::printf("\n  %s\n", kernel_cache_summary_line(t.executor).c_str());
            if (profiled) print_profile(profiled->profile, profiled->groups, profiled->peak);
        }
        return 0;
    }
    // The baseline: the unfused model (--compare), or another plan under the same options (--against).
    PlanChoice baseline;
    if (o.against.empty()) {
        baseline.unfused = true;
    } else {
        baseline = o.plan;
        baseline.plan_file = o.against;
        baseline.rules.clear();
        baseline.unfused = baseline.whole = false;
    }
    baseline.parallel_runtime = o.plan.parallel_runtime;
    const FusedGraph fused_plan = o.plan.make(g), base_plan = baseline.make(g);
    Timed fused = build(fused_plan, o.plan.options()), base = build(base_plan, baseline.options());
    std::vector<std::string> fallbacks = report_fallbacks(fused.executor);
    const auto fused_inputs = pack_inputs(fused.executor, inputs), base_inputs = pack_inputs(base.executor, inputs);
    // Interleave in chunks so slow drifts of the machine affect both alike.
    const int chunk = std::max(1, o.runs / 5);
    for (int done = 0; done < o.runs; done += chunk) {
        int n = std::min(chunk, o.runs - done);
        for (Timed *t : {&fused, &base}) {
            std::vector<double> ms = time_runs(t->executor, t == &fused ? fused_inputs : base_inputs, n);
            t->ms.insert(t->ms.end(), ms.begin(), ms.end());
        }
    }
    double f = median(fused.ms), u = median(base.ms);
    const Spread spread = spread_of(fused.ms, base.ms, chunk);
    if (!o.against.empty())
        return report_against(o, g, fused, base, fused_plan.groups, base_plan.groups, fused_inputs, base_inputs);
    std::optional<GroupProfiling> profiled;
    if (o.profile) profiled = profile_groups(fused.executor, fused_inputs, o.runs);
    if (o.json) {
        nlohmann::json j = {{"model", g.name},
                            {"plan", o.plan.describe()},
                            {"schedule", o.plan.schedule()},
                            {"whole", o.plan.whole},
                            {"fallback_groups", fallbacks},
                            {"fused_ms", f},
                            {"unfused_ms", u},
                            {"speedup", u / f},
                            {"fused_groups", fused.executor.num_groups()},
                            {"unfused_groups", base.executor.num_groups()},
                            {"runs", o.runs},
                            {"fused_compile_ms", fused.compile_ms},
                            {"unfused_compile_ms", base.compile_ms},
                            {"kernel_cache", kernel_cache_json(fused.executor)}};
        // Halide's shared runtime, within fused_compile_ms (built first).
        j["runtime_compile_ms"] = fused.executor.runtime_compile_ms();
        add_spread_json(j, spread);
        if (profiled) add_profile_json(j, *profiled);
        std::printf("%s\n", j.dump().c_str());
    } else {
        std::printf(
            "%s: fused (%s, %s, schedule %s) %.4f ms, unfused (%s) %.4f ms: speedup %.2fx (medians of "
            "%d runs)\n",
            g.name.c_str(), o.plan.describe().c_str(), counted(fused.executor.num_groups(), "group").c_str(),
            o.plan.schedule().c_str(), f, counted(base.executor.num_groups(), "group").c_str(), u, u / f, o.runs);
        print_spread(spread, "fused", "unfused");
        if (profiled) print_profile(profiled->profile, profiled->groups, profiled->peak);
    }
    return 0;
}

}  // namespace

Command add_bench(CLI::App &app) {
    auto *cmd = app.add_subcommand("bench", "time whole-model runs (generated inputs) under a plan");
    auto o = std::make_shared<BenchOptions>();
    o->model.add(cmd);
    o->plan.add_flags(cmd);
    o->plan.add_schedule_flags(cmd);
    o->plan.add_layout_flag(cmd);
    o->plan.add_runtime_flag(cmd);
    cmd->add_option("--runs", o->runs, "timed runs after one warm-up run")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    cmd->add_flag("--json", o->json, "print one JSON object");
    auto *compare =
        cmd->add_flag("--compare", o->compare, "also time the unfused model, interleaved, and print the speedup");
    cmd->add_option("--against", o->against,
                    "also time this plan file under the same options, interleaved, and print the speedup; with "
                    "--profile, each group beside the group of the other plan computing the same nodes")
        ->excludes(compare);
    cmd->add_flag(
        "--profile", o->profile,
        "after the timed runs, time each group of the plan as `run --profile` does (--runs more runs) "
        "and measure the FMA peak of --threads threads: print the table, or with --json add "
        "\"group_profile\": [{name, master, template, ops, flops, ms, share, gflops, peak_share, cold_compile_ms}], "
        "\"profile_ms\", \"threads\", \"fma_peak_gflops\" and \"fma_peak_isa\"");
    return {cmd, [o] { return bench(*o); }};
}

}  // namespace hfuse::cli
