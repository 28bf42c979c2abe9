// hfuse explore MODEL -o DIR: which fusion plan, with which schedule, is fastest here, and why (see
// include/hfuse/explore.h for what it writes, README.md "Exploring plans and schedules").
#include "cli_common.h"
#include "hfuse/error.h"
#include "hfuse/explore.h"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <sstream>

namespace hfuse::cli {
namespace {

struct ExploreArgs {
    ExploreOptions o;
    ModelArg model;
    std::string schedules = "templates,mullapudi2016,adams2019,li2018";
};

// The hfuse binary that is running: children time each candidate with it.
std::string self_path() {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) throw Error("cannot find the hfuse binary (/proc/self/exe) to time candidates with");
    buf[n] = 0;
    return buf;
}

std::vector<ScheduleSource> parse_sources(const std::string &list) {
    std::vector<ScheduleSource> out;
    std::stringstream ss(list);
    for (std::string name; std::getline(ss, name, ',');) {
        if (name.empty()) continue;
        try {
            ScheduleSource s = parse_schedule_source(name);
            if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
        } catch (const Error &) {
            throw UsageError("--schedules: unknown schedule source '" + name +
                             "' (expected a comma-separated list of templates, mullapudi2016, adams2019, li2018)");
        }
    }
    if (out.empty()) throw UsageError("--schedules: no schedule source given");
    return out;
}

int run_explore(ExploreArgs &a) {
    ExploreOptions &o = a.o;
    o.sources = parse_sources(a.schedules);
    o.model = a.model.path;
    o.load = a.model.options();
    for (const std::string &shape : a.model.shapes) o.model_args.insert(o.model_args.end(), {"--shape", shape});
    struct stat st;
    if (!o.resume && stat((o.out_dir + "/results.json").c_str(), &st) == 0) {
        throw UsageError("-o " + o.out_dir +
                         ": holds the results of an earlier run; --resume continues it, or choose another directory");
    }
    o.hfuse_binary = self_path();
    o.progress_bar = isatty(STDERR_FILENO) != 0;
    ExploreSummary s = run_exploration(o);
    std::string sources;
    for (const std::string &x : s.sources) sources += (sources.empty() ? "" : ", ") + x;
    std::printf(
        "%d candidates (%d ok, %d error, %d timeout), %d distinct plans (%d groupings of the nodes); "
        "schedule sources that ran: %s\n",
        s.evaluated, s.ok, s.errors, s.timeouts, s.distinct_plans, s.distinct_partitions, sources.c_str());
    if (s.interrupted) {
        std::fprintf(stderr, "hfuse: explore interrupted; %s/results.json holds what finished (--resume continues)\n",
                     o.out_dir.c_str());
        return 130;
    }
    if (!s.has_best) {
        std::fprintf(stderr, "hfuse: error: no candidate ran successfully: see %s/report.md\n", o.out_dir.c_str());
        return 1;
    }
    char plan_ms[64] = "none (no candidate scheduled by the templates ran)";
    if (s.has_best_plan) std::snprintf(plan_ms, sizeof plan_ms, "%.4g ms", s.best_plan_ms);
    std::printf("best: %.4g ms (%s); best_plan.json: %s\n", s.best_ms, s.best_schedule.c_str(), plan_ms);
    if (s.out_of_time) {
        std::printf("stopped at --time-limit after %d candidates (no confirmation rounds); --resume continues\n",
                    s.evaluated);
    }
    std::printf("wrote %s/{results.json, results.csv, %splot.svg, report.md}\n", o.out_dir.c_str(),
                s.has_best_plan ? (s.has_tuning ? "best_plan.json, tuning.json, " : "best_plan.json, ") : "");
    return 0;
}

}  // namespace

Command add_explore(CLI::App &app) {
    auto *cmd = app.add_subcommand(
        "explore",
        "time candidate fusion plans x schedules (templates with varied parameters, Halide's autoschedulers) "
        "and report the fastest and why");
    auto a = std::make_shared<ExploreArgs>();
    ExploreOptions &o = a->o;
    a->model.add(cmd);
    cmd->add_option("-o,--output", o.out_dir,
                    "directory for results.json/.csv, best_plan.json, tuning.json, plot.svg, report.md")
        ->required();
    cmd->add_option("--budget", o.budget, "candidates to evaluate, the baselines included (they always run)")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    cmd->add_option("--schedules", a->schedules,
                    "comma-separated schedule sources: templates (varied parameters), mullapudi2016, adams2019, "
                    "li2018 (each group, and the whole model as a baseline)")
        ->capture_default_str();
    cmd->add_option("--jobs", o.jobs,
                    "candidates timed at once; more than 1 shares the cores between them, so their times are "
                    "higher and noisier (the final confirmation runs one at a time)")
        ->check(CLI::Range(1, 256))
        ->capture_default_str();
    cmd->add_option("--seed", o.seed, "seed of the search's and the parameter variation's random choices")
        ->capture_default_str();
    cmd->add_option(
           "--timeout-per-candidate", o.timeout_s,
           "seconds a candidate may take (compile and timed runs); then it is killed and recorded as a timeout")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    cmd->add_option("--time-limit", o.time_limit_s,
                    "seconds this run may take (0: none): past it no candidate starts, and the run ends writing "
                    "every output from the candidates done, without confirmation rounds (--resume continues)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    cmd->add_option("--max-memory", o.max_memory_mb,
                    "MB of address space a candidate's process may take (0: no bound); one that needs more is "
                    "recorded as an error saying so, and the exploration goes on (whole-model autoscheduler "
                    "baselines can need tens of GB)")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    cmd->add_option("--autoschedule-max-memory", o.autoschedule_max_memory_mb,
                    "MB of address space a candidate an autoscheduler schedules may take (0: --max-memory's "
                    "bound only); the smaller bound applies")
        ->check(CLI::NonNegativeNumber)
        ->capture_default_str();
    cmd->add_option("--autoschedule-timeout", o.autoschedule_timeout_s,
                    "seconds a candidate an autoscheduler schedules may take; the smaller of this and "
                    "--timeout-per-candidate applies")
        ->check(CLI::PositiveNumber)
        ->capture_default_str();
    cmd->add_flag("--resume", o.resume, "continue an interrupted run in DIR: finished candidates are not run again");
    // A callback, not "!--no-cache" into o.kernel_cache: CLI11 would show that as "--no-cache{false}".
    cmd->add_flag_callback(
        "--no-cache", [&o] { o.kernel_cache = false; },
        "compile every candidate's groups afresh instead of loading those an earlier candidate (or run) "
        "compiled from the kernel cache");
    cmd->add_option("--runs", o.runs, "timed runs per candidate, after one warm-up run")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    cmd->add_option("--confirm", o.confirm_rounds,
                    "rounds re-timing the fastest candidates and the baselines alternately before choosing (0: none)")
        ->check(CLI::Range(0, 100))
        ->capture_default_str();
    cmd->add_option("--plan", o.extra_plans, "also evaluate this plan file (repeatable)")->allow_extra_args(false);
    return {cmd, [a] { return run_explore(*a); }};
}

}  // namespace hfuse::cli
