// hfuse bench MODEL: time whole-model runs under a plan; --compare times the default plan against the
// unfused model in the same process, interleaved, so both see the same machine conditions; --profile
// then times each group of the plan and sets it against the machine's FMA peak.
#include "cli_common.h"
#include "hfuse/model_io.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

namespace hfuse::cli {
namespace {

struct BenchOptions {
    ModelArg model;
    PlanChoice plan;
    int runs = 20;
    bool json = false, compare = false, profile = false;
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

Timed build(const FusedGraph &plan, const ExecutorOptions &options) {
    auto t0 = std::chrono::steady_clock::now();
    Executor ex(plan, options);
    double compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return {std::move(ex), compile_ms, {}};
}

int bench(const BenchOptions &o) {
    Graph g = o.model.load();
    auto inputs = load_inputs(g, {}, true);
    if (!o.compare) {
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
            std::printf(
                "%s, plan %s (%d groups), schedule %s: median %.4f ms, min %.4f ms over %d runs; compile %.0f ms",
                g.name.c_str(), o.plan.describe().c_str(), t.executor.num_groups(), o.plan.schedule().c_str(), med,
                best, o.runs, t.compile_ms);
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
    PlanChoice unfused;
    unfused.unfused = true;
    unfused.parallel_runtime = o.plan.parallel_runtime;
    Timed fused = build(o.plan.make(g), o.plan.options()), base = build(unfused.make(g), unfused.options());
    std::vector<std::string> fallbacks = report_fallbacks(fused.executor);
    const auto fused_inputs = pack_inputs(fused.executor, inputs);
    // Interleave in chunks so slow drifts of the machine affect both alike.
    const int chunk = std::max(1, o.runs / 5);
    for (int done = 0; done < o.runs; done += chunk) {
        int n = std::min(chunk, o.runs - done);
        for (Timed *t : {&fused, &base}) {
            std::vector<double> ms = time_runs(t->executor, t == &fused ? fused_inputs : inputs, n);
            t->ms.insert(t->ms.end(), ms.begin(), ms.end());
        }
    }
    double f = median(fused.ms), u = median(base.ms);
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
        if (profiled) add_profile_json(j, *profiled);
        std::printf("%s\n", j.dump().c_str());
    } else {
        std::printf(
            "%s: fused (%s, %d groups, schedule %s) %.4f ms, unfused (%d groups) %.4f ms: speedup %.2fx (medians of "
            "%d runs)\n",
            g.name.c_str(), o.plan.describe().c_str(), fused.executor.num_groups(), o.plan.schedule().c_str(), f,
            base.executor.num_groups(), u, u / f, o.runs);
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
    cmd->add_option("--runs", o->runs, "timed runs after one warm-up run")->check(CLI::Range(1, 100000));
    cmd->add_flag("--json", o->json, "print one JSON object");
    cmd->add_flag("--compare", o->compare, "also time the unfused model, interleaved, and print the speedup");
    cmd->add_flag(
        "--profile", o->profile,
        "after the timed runs, time each group of the plan as `run --profile` does (--runs more runs) "
        "and measure the FMA peak of --threads threads: print the table, or with --json add "
        "\"group_profile\": [{name, master, template, ops, flops, ms, share, gflops, peak_share, cold_compile_ms}], "
        "\"profile_ms\", \"threads\", \"fma_peak_gflops\" and \"fma_peak_isa\"");
    return {cmd, [o] { return bench(*o); }};
}

}  // namespace hfuse::cli
