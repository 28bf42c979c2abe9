// run_exploration(): the exploration's driver (see hfuse/explore.h). The candidates, in the order the budget
// takes them:
//   1. the baselines (always): the default plan (x86 rules), unfused, --rules tvm, each with the
//      templates, and --whole with each autoscheduler explored; then plan files given by the user;
//   2. plans from the plan space (plan_space.h: all of them, or composed from segments), default parameters,
//      the best estimate of each group count first (~40% of what the baselines leave);
//   3. each autoscheduler per group on the default plan, then on the best-estimated plans (~25%); one
//      whose candidate passes its bounds (--autoschedule-max-memory, --autoschedule-timeout) is given up;
//   4. the templates' parameters of the default plan varied group by group (group_search.h): each
//      round one neighbour (checked by the composer in process) for every class of alike groups,
//      timed against the default plan in one process; then the plan with each class's fastest
//      variant that paid, until the budget is spent;
//   5. if 4 runs dry, more of 2 and 3;
//   6. (the budget's last candidate) the default plan with each segment regrouped and scheduled as the
//      candidate whose groups there took the least time (bench --profile) had it.
// Then the fastest few and the baselines are timed again, alternately, the best is checked against
// the reference (`hfuse run --check`), and results, best_plan.json, plot.svg and report.md written.
#include "hfuse/explore.h"
#include "hfuse/target.h"

#include "explore/candidate.h"
#include "explore/cost_model.h"
#include "explore/evaluator.h"
#include "explore/group_search.h"
#include "explore/plan_space.h"
#include "explore/progress.h"
#include "explore/report.h"
#include "explore/results.h"
#include "explore/schedule_variants.h"
#include "explore/segment_findings.h"
#include "explore/segments.h"
#include "explore/svg_plot.h"
#include "explore/text.h"
#include "hfuse/composer.h"
#include "hfuse/error.h"
#include "hfuse/model_io.h"
#include "hfuse/passes.h"
#include "hfuse/planner.h"
#include "hfuse/tuning_record.h"

#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

namespace hfuse {
namespace {

using namespace explore;
using nlohmann::json;

constexpr int kConfirmTop = 4;  // fastest candidates re-timed (besides the best templated ones and the baselines)
// best_plan.json is another plan than the default only if that plan was faster by this much.
constexpr double kMinGain = 0.02;
// A class of alike groups keeps a variant of its schedule that took at most 1 - this of the default's
// time for them in its round and in the plan composing the winners (group_search.h).
constexpr double kGroupGain = 0.03;

bool exists(const std::string &path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

void make_dir(const std::string &path) {
    std::string partial;
    std::stringstream ss(path);
    for (std::string part; std::getline(ss, part, '/');) {
        partial += part + "/";
        if (part.empty() || part == ".") continue;
        if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
            throw Error("cannot create the output directory").in_file(path);
        }
    }
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) throw Error("not a directory").in_file(path);
}

// Whether simplify() changes the model (else a plan over the graph as written and one over the
// rewritten graph are the same plan).
bool rewrites_matter(const Graph &model, const Graph &rewritten) {
    if (model.nodes.size() != rewritten.nodes.size() || !rewritten.removed.empty()) return true;
    for (size_t i = 0; i < model.nodes.size(); i++) {
        if (model.nodes[i].name != rewritten.nodes[i].name || !rewritten.nodes[i].absorbed.empty()) return true;
    }
    return false;
}

// The last line of `text` that parses as a JSON object, or null.
json last_json_line(const std::string &text) {
    std::istringstream in(text);
    json j;
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] != '{') continue;
        try {
            j = json::parse(line);
        } catch (const json::exception &) {
        }
    }
    return j;
}

// What a failed child said: its last "hfuse: ..." line, else its last line.
std::string error_line(const std::string &err) {
    std::istringstream in(err);
    std::string last, last_hfuse;
    for (std::string line; std::getline(in, line);) {
        if (line.empty()) continue;
        last = line;
        if (line.rfind("hfuse:", 0) == 0 && line.find("note:") == std::string::npos) last_hfuse = line;
    }
    return last_hfuse.empty() ? last : last_hfuse;
}

struct Session {
    ExploreOptions o;
    Graph model, rewritten;
    Halide::Target target;
    bool rewrites = true;
    std::string dir;
    json header;
    std::vector<Evaluation> rows;
    std::set<std::string> done;  // keys evaluated (resumed ones included)
    int total = 0;
    std::unique_ptr<Progress> progress;
    bool interrupted = false;
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
    // Past --time-limit (never before the first candidate of the run has started: one result at least).
    bool out_of_time() const {
        return o.time_limit_s > 0 && evaluated_here > 0 &&
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() > o.time_limit_s;
    }
    int evaluated_here = 0;  // candidates this invocation has run (not resumed ones)

    const Graph &graph_for(const json &plan) const { return plan.value("rewritten", true) ? rewritten : model; }
    FusedGraph plan_of(const Candidate &c) const {
        return plan_from_json(c.plan, graph_for(c.plan), "candidate " + c.key);
    }

    Candidate candidate(const FusedGraph &plan, const std::string &schedule, bool whole, const std::string &origin,
                        const PlanCost *known = nullptr) const {
        Candidate c;
        c.plan = plan_to_json(plan);
        c.schedule = schedule;
        c.whole = whole;
        c.origin = origin;
        c.groups = static_cast<int>(plan.groups.size());
        PlanCost cost = known ? *known : estimate_plan(plan, target);
        c.estimate_ms = cost.ms;
        c.bytes_between_groups = cost.bytes_between_groups;
        c.gflop = cost.flops / 1e9;
        assign_key(c, rewrites);
        return c;
    }

    double best_ms() const {
        double best = 0;
        for (const Evaluation &e : rows) {
            if (e.status == "ok" && (best == 0 || e.median_ms < best)) best = e.median_ms;
        }
        return best;
    }

    void save() const { write_results(dir, header, rows); }

    std::vector<std::string> bench_argv(const Candidate &c, const std::string &plan_path) const {
        std::vector<std::string> argv = {o.hfuse_binary, "bench", o.model};
        argv.insert(argv.end(), o.model_args.begin(), o.model_args.end());
        argv.insert(argv.end(), {"--json", "--runs", std::to_string(o.runs)});
        if (!o.kernel_cache) argv.push_back("--no-cache");
        if (c.whole) {
            argv.push_back("--whole");
        } else {
            argv.push_back("--plan");
            argv.push_back(plan_path);
        }
        if (c.schedule != "templates") {
            argv.push_back("--autoschedule");
            argv.push_back(c.schedule);
        } else if (!c.whole) {
            argv.push_back("--profile");  // each group's time: the segments' measurements
        }
        return argv;
    }

    Evaluation record(const Candidate &c, const ChildResult &r) const {
        Evaluation e;
        e.candidate = c;
        e.wall_s = r.wall_s;
        e.peak_rss_mb = r.peak_rss_mb;
        json j = last_json_line(r.out);
        if (r.timed_out) {
            e.status = "timeout";
            e.error = "timed out after " + fmt("%g", timeout_for(c)) + " s (killed" +
                      (timeout_for(c) != o.timeout_s ? ": --autoschedule-timeout)" : ")");
        } else if (r.exit_code == 0 && j.is_object() && (j.contains("median_ms") || j.contains("plan_ms"))) {
            e.status = "ok";
            if (j.contains("plan_ms")) {  // timed against another plan (bench --against)
                e.median_ms = j["plan_ms"].get<double>();
                e.against_ms = j.value("against_ms", NAN);
                e.compile_s = j.value("plan_compile_ms", NAN) / 1000;
            } else {
                e.median_ms = j["median_ms"].get<double>();
                e.min_ms = j.value("min_ms", NAN);
                // Each candidate runs in a process of its own, which compiles Halide's shared runtime
                // first: the same for every candidate, so not the candidate's.
                e.compile_s = (j.value("compile_ms", NAN) - j.value("runtime_compile_ms", 0.0)) / 1000;
            }
            e.fallback_groups = j.value("fallback_groups", std::vector<std::string>{});
            for (const json &g : j.value("group_profile", json::array())) {
                if (!g.contains("name") || !g["name"].is_string()) continue;
                const std::string name = g["name"].get<std::string>();
                if (g.contains("ms") && g["ms"].is_number()) e.group_ms[name] = g["ms"].get<double>();
                if (g.contains("against_ms") && g["against_ms"].is_number())
                    e.against_group_ms[name] = g["against_ms"].get<double>();
            }
            if (j.contains("kernel_cache") && j["kernel_cache"].value("enabled", false)) {
                e.cached_groups = j["kernel_cache"].value("hits", 0);
                e.cached_cold_s = j["kernel_cache"].value("hit_cold_compile_ms", 0.0) / 1000;
            }
        } else if (out_of_memory(r, memory_bytes_for(c))) {
            e.status = "error";
            e.error = memory_bytes_for(c) != memory_bytes()
                          ? "needed more than --autoschedule-max-memory " +
                                std::to_string(o.autoschedule_max_memory_mb) + " MB (skipped)"
                          : "needed more than --max-memory " + std::to_string(o.max_memory_mb) + " MB (skipped)";
        } else {
            e.status = "error";
            e.error = error_line(r.err);
            if (e.error.empty()) {
                e.error = r.signal ? "killed by signal " + std::to_string(r.signal)
                                   : "exit code " + std::to_string(r.exit_code) + " without a result";
            }
        }
        return e;
    }

    // Evaluates the candidates of `batch` not done yet (at most what the budget leaves), o.jobs at once;
    // with `against_key`, each in one process with that candidate's plan (`bench --against --profile`).
    void evaluate(std::vector<Candidate> batch, const std::string &against_key = "") {
        std::vector<Candidate> todo;
        std::set<std::string> keys;
        for (Candidate &c : batch) {
            if (done.count(c.key) || !keys.insert(c.key).second) continue;
            if (static_cast<int>(rows.size() + todo.size()) >= total && c.origin != "baseline" && c.origin != "user")
                break;
            todo.push_back(std::move(c));
        }
        if (todo.empty() || interrupted || out_of_time()) return;
        std::vector<ChildJob> jobs;
        for (const Candidate &c : todo) {
            const std::string base = dir + "/candidates/" + c.key;
            write_file_atomically(base + ".plan.json", c.plan.dump(2) + "\n");
            std::vector<std::string> argv = bench_argv(c, base + ".plan.json");
            if (!against_key.empty())
                argv.insert(argv.end(), {"--against", dir + "/candidates/" + against_key + ".plan.json"});
            jobs.push_back({argv, base + ".out", base + ".err", memory_bytes_for(c), timeout_for(c)});
        }
        bool finished = run_children(
            jobs, o.jobs, o.timeout_s,
            [&](size_t i, const ChildResult &r) {
                Evaluation e = record(todo[i], r);
                if (!against_key.empty()) e.against_key = against_key;
                evaluated_here++;
                e.id = static_cast<int>(rows.size());
                rows.push_back(e);
                done.insert(e.candidate.key);
                save();
                std::string line = e.status == "ok"
                                       ? fmt("ok %.4g ms", e.median_ms) +
                                             (std::isnan(e.against_ms) ? "" : fmt(" (against %.4g ms)", e.against_ms)) +
                                             fmt(" (compile %.2f s)", e.compile_s)
                                       : e.status + ": " + e.error;
                // A network's plan is too long for a line: its group count, where it came from and
                // what it varies (the segment, the parameter).
                const Candidate &c = e.candidate;
                std::string from = c.origin;
                for (const std::string &b : c.baselines) from += (from == c.origin ? ": " : ", ") + b;
                line += "  " + c.schedule + (c.whole ? " --whole" : "") + "  " +
                        (c.groups <= 6 ? plan_summary(c.plan) : std::to_string(c.groups) + " groups") + "  [" + from +
                        "]" + (c.variant.empty() ? "" : "  {" + c.variant + "}");
                progress->done(line, best_ms());
            },
            [&] { progress->tick(); }, [&] { return out_of_time(); });
        if (!finished) interrupted = true;
    }

    int64_t memory_bytes() const { return o.max_memory_mb * 1024 * 1024; }
    // A candidate's bounds: an autoscheduler's are the smaller of its own and the general ones.
    int64_t memory_bytes_for(const Candidate &c) const {
        const int64_t own = o.autoschedule_max_memory_mb * 1024 * 1024;
        if (c.schedule == "templates" || own <= 0) return memory_bytes();
        return memory_bytes() > 0 ? std::min(own, memory_bytes()) : own;
    }
    double timeout_for(const Candidate &c) const {
        return c.schedule == "templates" ? o.timeout_s : std::min(o.timeout_s, o.autoschedule_timeout_s);
    }

    // One more run on its own (the confirmation rounds, the check of the best), after the bar, within
    // candidate c's bounds.
    ChildResult run_one(const std::vector<std::string> &argv, const std::string &log_base, const Candidate &c) {
        ChildResult result;
        bool finished = run_children(
            {{argv, log_base + ".out", log_base + ".err", memory_bytes_for(c), timeout_for(c)}}, 1, o.timeout_s,
            [&](size_t, const ChildResult &r) { result = r; }, nullptr);  // the bar is done by now
        if (!finished) interrupted = true;
        return result;
    }
};

// Which candidates look promising (the incumbents of the parameter search, those confirmed): by their
// fastest run, which other load on the machine disturbs less than the median (the load comes and
// goes over seconds, and a candidate's runs take a fraction of one). The best is then chosen by the
// confirmation rounds' medians.
bool promising_first(const Evaluation *a, const Evaluation *b) {
    const double x = std::isnan(a->min_ms) ? a->median_ms : a->min_ms;
    const double y = std::isnan(b->min_ms) ? b->median_ms : b->min_ms;
    return x < y;
}

const Evaluation *fastest(const std::vector<Evaluation> &rows, bool confirmed_only, bool templates_only) {
    const Evaluation *best = nullptr;
    for (const Evaluation &e : rows) {
        if (e.status != "ok" || (confirmed_only && e.confirm_ms.empty())) continue;
        if (templates_only && e.candidate.schedule != "templates") continue;
        if (!best || e.ranked_ms() < best->ranked_ms()) best = &e;
    }
    return best;
}

// Whether `e` beat `def` (the default plan) by more than noise: faster in most confirmation rounds
// (each times both, alternately) and by kMinGain in their medians; without rounds, by the medians.
bool beats(const Evaluation &e, const Evaluation &def) {
    if (e.ranked_ms() >= def.ranked_ms() * (1 - kMinGain)) return false;
    const size_t n = std::min(e.confirm_ms.size(), def.confirm_ms.size());
    if (n == 0) return true;
    size_t wins = 0;
    for (size_t i = 0; i < n; i++) wins += e.confirm_ms[i] < def.confirm_ms[i];
    return 2 * wins > n;
}

ExploreSummary summarize(const std::vector<Evaluation> &rows) {
    ExploreSummary sum;
    std::set<std::string> plans, partitions, used;
    for (const Evaluation &e : rows) {
        sum.ok += e.status == "ok";
        sum.errors += e.status == "error";
        sum.timeouts += e.status == "timeout";
        plans.insert(canonical_plan(e.candidate.plan, true, true).dump());
        partitions.insert(partition_key(e.candidate.plan));
        if (e.status == "ok") used.insert(e.candidate.schedule);
    }
    sum.evaluated = static_cast<int>(rows.size());
    sum.distinct_plans = static_cast<int>(plans.size());
    sum.distinct_partitions = static_cast<int>(partitions.size());
    sum.sources.assign(used.begin(), used.end());
    return sum;
}

// DIR/tuning.json: best_plan's grouping and schedules per segment (hfuse/tuning_record.h), for
// `--tuned` on this model or any other with the same segments.
// False (and a note) when best_plan.json is over the graph as written.
// The default plan's evaluation, when it ran successfully (nullptr otherwise).
const Evaluation *default_row(const Session &s) {
    for (const Evaluation &e : s.rows) {
        const auto &b = e.candidate.baselines;
        if (e.status == "ok" && std::find(b.begin(), b.end(), "default") != b.end()) return &e;
    }
    return nullptr;
}

bool write_tuning(const Session &s, const Evaluation &best_plan, std::vector<std::string> &notes) {
    if (s.rewrites && !best_plan.candidate.plan.value("rewritten", true)) {
        notes.push_back(
            "No tuning.json: the best plan file is over the graph as written (no rewrites), and "
            "tuning records key segments of the rewritten graph.");
        return false;
    }
    const Evaluation *def = default_row(s);
    const double default_ms = def ? def->ranked_ms() : 0;
    std::vector<std::string> left_out;
    const TuningRecords records = tuning_records_from_plan(s.plan_of(best_plan.candidate), s.target,
                                                           best_plan.ranked_ms(), default_ms, &left_out);
    write_file_atomically(s.dir + "/tuning.json", tuning_records_to_json(records).dump(2) + "\n");
    notes.push_back("tuning.json records best_plan.json's grouping and schedules for " +
                    std::to_string(records.entries.size()) +
                    " distinct segments: `hfuse plan|run|bench|compile MODEL --tuned tuning.json` applies them to any "
                    "model with the same segments on this target.");
    notes.insert(notes.end(), left_out.begin(), left_out.end());
    return true;
}

// Step 4 (group_search.h): rounds that each vary every class of alike groups of the default plan by
// one neighbour, timed against the default plan in one process, while the budget leaves three
// candidates; then the plan with each class's fastest variant that paid, timed against the default
// plan the same way, and again without those that did not pay there. Returns the key of the last
// such plan timed ("": none); says what it found in s.header["group_search"].
std::string search_group_parameters(Session &s, const FusedGraph &default_plan, std::vector<std::string> &notes) {
    const std::string def = default_row(s)->candidate.key;  // the caller checked it ran
    VariantChecker checker(s.rewritten, s.target);
    const std::vector<GroupClass> classes =
        group_classes(default_plan, schedule_neighbours(default_plan, checker, s.target, s.o.seed));
    std::vector<std::vector<GroupTrial>> trials(classes.size());
    json report = {{"against", def}, {"min_gain", kGroupGain}, {"rounds", json::array()}, {"classes", json::array()}};

    // The times of candidate `key` against the default plan, when it has them.
    auto times_of = [&](const std::string &key) -> std::optional<GroupTimes> {
        for (const Evaluation &e : s.rows) {
            if (e.candidate.key == key && e.against_key == def) return group_times(e);
        }
        return std::nullopt;
    };
    auto time_against_default = [&](const FusedGraph &plan, const std::string &variant) {
        Candidate c = s.candidate(plan, "templates", false, "group_params");
        c.variant = variant;
        const std::string key = c.key;
        if (key != def) s.evaluate({c}, def);
        return std::make_pair(key, key == def ? std::nullopt : times_of(key));
    };

    for (size_t round = 0; !s.interrupted && !s.out_of_time() && static_cast<int>(s.rows.size()) + 3 < s.total;
         round++) {
        std::vector<std::string> changes;
        const std::optional<FusedGraph> plan = round_plan(default_plan, classes, round, &changes);
        if (!plan) break;
        std::string variant = "round " + std::to_string(round + 1) + ":";
        for (const std::string &c : changes) variant += " " + c + ";";
        variant.pop_back();
        const auto [key, times] = time_against_default(*plan, variant);
        report["rounds"].push_back({{"candidate", key}, {"changes", changes}, {"timed", times.has_value()}});
        if (!times) continue;
        for (size_t ci = 0; ci < classes.size(); ci++) {
            if (round >= classes[ci].variants.size()) continue;
            if (const std::optional<double> r = class_ratio(classes[ci], *plan, *times))
                trials[ci].push_back({round, *r});
        }
    }

    // The plan of the winners, timed against the default; then again without those that did not pay
    // there (at most three compositions). The last one timed is the search's plan: whether it beats
    // the default as a whole is for the confirmation to say.
    std::map<size_t, size_t> winners = winning_variants(trials, kGroupGain), in_plan;
    std::map<size_t, double> confirmed;  // class -> its time over the default's in that plan
    std::string kept_key;
    for (int attempt = 0; attempt < 3 && !winners.empty() && !s.interrupted && !s.out_of_time(); attempt++) {
        const FusedGraph plan = with_variants(default_plan, classes, winners);
        std::string variant = "each class's fastest variant:";
        for (const auto &[ci, vi] : winners) variant += " " + classes[ci].variants[vi].description + ";";
        variant.pop_back();
        const auto [key, times] = time_against_default(plan, variant);
        if (!times) break;
        kept_key = key;
        in_plan = winners;
        confirmed.clear();
        std::map<size_t, size_t> again;
        for (const auto &[ci, vi] : winners) {
            const std::optional<double> r = class_ratio(classes[ci], plan, *times);
            if (r) confirmed[ci] = *r;
            if (r && *r <= 1 - kGroupGain) again[ci] = vi;
        }
        if (again.size() == winners.size()) break;
        winners = std::move(again);
    }
    winners = in_plan;

    for (size_t ci = 0; ci < classes.size(); ci++) {
        const GroupClass &c = classes[ci];
        json cj = {{"class", c.label}, {"groups", json::array()}, {"trials", json::array()}};
        for (size_t gi : c.groups) cj["groups"].push_back(default_plan.groups[gi].name);
        for (const GroupTrial &t : trials[ci])
            cj["trials"].push_back({{"variant", c.variants[t.round].description}, {"ratio", t.ratio}});
        cj["kept"] = winners.count(ci) ? json(c.variants[winners[ci]].description) : json(nullptr);
        cj["ratio_in_plan"] = confirmed.count(ci) ? json(confirmed[ci]) : json(nullptr);
        report["classes"].push_back(cj);
    }
    report["plan"] = kept_key.empty() ? json(nullptr) : json(kept_key);
    s.header["group_search"] = report;
    notes.push_back(
        "Group parameters: " + std::to_string(report["rounds"].size()) + " rounds over " +
        std::to_string(classes.size()) +
        " classes of alike groups, each round one variant per class timed against the default plan in one process "
        "(`bench --against --profile`); " +
        (kept_key.empty() ? std::string("no variant took ") + fmt("%.0f%%", 100 * kGroupGain) +
                                " less time than the default's schedule."
                          : std::to_string(winners.size()) + (winners.size() == 1 ? " class keeps" : " classes keep") +
                                " a variant (candidate " + kept_key + ")."));
    return kept_key;
}

}  // namespace

ExploreSummary run_exploration(const ExploreOptions &options) {
    Session s;
    s.o = options;
    const ExploreOptions &o = s.o;
    if (o.budget < 1) throw Error("must be at least 1").at_field("budget");
    if (o.jobs < 1) throw Error("must be at least 1").at_field("jobs");
    if (o.runs < 1) throw Error("must be at least 1").at_field("runs");
    if (!(o.timeout_s > 0)) throw Error("must be positive").at_field("timeout-per-candidate");
    if (o.max_memory_mb < 0) throw Error("must be 0 (no bound) or a size in MB").at_field("max-memory");
    if (o.autoschedule_max_memory_mb < 0)
        throw Error("must be 0 (no bound of its own) or a size in MB").at_field("autoschedule-max-memory");
    if (!(o.autoschedule_timeout_s > 0)) throw Error("must be positive").at_field("autoschedule-timeout");
    if (!(o.time_limit_s >= 0)) throw Error("must be 0 (no limit) or positive").at_field("time-limit");
    if (o.sources.empty()) throw Error("no schedule source to explore").at_field("schedules");
    install_interrupt_handlers();

    s.model = load_model(o.model, o.load);
    s.rewritten = simplify(s.model);
    s.rewrites = rewrites_matter(s.model, s.rewritten);
    s.target = host_target();
    s.dir = o.out_dir;
    const bool templates = std::count(o.sources.begin(), o.sources.end(), ScheduleSource::Templates) > 0;
    std::vector<std::string> autos;
    for (ScheduleSource src : o.sources) {
        if (src != ScheduleSource::Templates) autos.push_back(to_string(src));
    }

    // The output directory: fresh, or the run to resume.
    make_dir(s.dir);
    make_dir(s.dir + "/candidates");
    const std::string results_path = s.dir + "/results.json";
    if (exists(results_path)) {
        if (!o.resume) {
            throw Error("holds the results of an earlier run: --resume continues it, or choose another -o")
                .in_file(s.dir);
        }
        json old;
        s.rows = read_results(results_path, &old);
        if (old.value("model", std::string()) != s.model.name) {
            throw Error("the results there are for model '" + old.value("model", std::string()) + "', not '" +
                        s.model.name + "'")
                .in_file(results_path);
        }
        for (Evaluation &e : s.rows) {
            s.done.insert(e.candidate.key);
            e.confirm_ms.clear();  // confirmation rounds compare candidates timed together, in one session
        }
    }
    std::vector<std::string> source_names;
    for (ScheduleSource src : o.sources) source_names.push_back(to_string(src));
    s.header = {{"format", "hfuse-explore"},
                {"version", 1},
                {"model", s.model.name},
                {"model_file", o.model},
                {"machine",
                 {{"cpu", cpu_name()},
                  {"cores", std::thread::hardware_concurrency()},
                  {"target", s.target.to_string()},
                  {"threads", std::getenv("HL_NUM_THREADS") ? std::getenv("HL_NUM_THREADS") : "all cores"}}},
                {"options",
                 {{"budget", o.budget},
                  {"schedules", source_names},
                  {"jobs", o.jobs},
                  {"seed", o.seed},
                  {"timeout_s", o.timeout_s},
                  {"max_memory_mb", o.max_memory_mb},
                  {"autoschedule_max_memory_mb", o.autoschedule_max_memory_mb},
                  {"autoschedule_timeout_s", o.autoschedule_timeout_s},
                  {"runs", o.runs},
                  {"confirm_rounds", o.confirm_rounds}}}};

    // 1. Baselines and the user's plans.
    std::vector<Candidate> baselines;
    std::vector<std::string> notes;
    auto add_baseline = [&](Candidate c, const std::string &label) {
        for (Candidate &b : baselines) {
            if (b.key == c.key) {
                b.baselines.push_back(label);
                return;
            }
        }
        c.baselines = {label};
        baselines.push_back(std::move(c));
    };
    std::vector<RuleSet> x86 = {load_rules("x86")};
    set_target_lanes(x86, s.target.natural_vector_size<float>());  // as `hfuse plan` for the target
    const FusedGraph default_plan = with_default_schedules(plan_fusion(s.model, x86), s.target);
    add_baseline(s.candidate(default_plan, "templates", false, "baseline"), "default");
    FusedGraph unfused = singleton_groups(s.model);
    unfused.rules = {"unfused"};
    add_baseline(s.candidate(with_default_schedules(unfused, s.target), "templates", false, "baseline"), "unfused");
    add_baseline(s.candidate(with_default_schedules(plan_fusion(s.model, {load_rules("tvm")}), s.target), "templates",
                             false, "baseline"),
                 "tvm");
    try {
        const FusedGraph whole = with_default_schedules(whole_model_plan(s.model), s.target);
        for (const std::string &a : autos) add_baseline(s.candidate(whole, a, true, "baseline"), "whole");
    } catch (const Error &e) {
        notes.push_back(std::string("No --whole baselines: ") + e.what());
    }
    for (const std::string &path : o.extra_plans) {
        FusedGraph p = with_default_schedules(read_plan_for_model(path, s.model), s.target);
        Candidate c = s.candidate(p, "templates", false, "user");
        c.variant = "plan file " + path;
        baselines.push_back(c);
    }
    const int fixed = static_cast<int>(baselines.size());
    s.total = std::max(o.budget, fixed);
    std::set<std::string> queued;
    for (const Candidate &c : baselines) queued.insert(c.key);

    // 2. and 3.: plans with the default parameters, and the autoschedulers per group.
    PlanSpaceOptions pso;
    pso.exhaustive_limit = o.exhaustive_limit;
    pso.seed = o.seed;
    const PlanSpace space = plan_space(s.rewritten, s.target, pso);
    s.header["plan_space"] = {{"exhaustive", space.exhaustive},
                              {"plans", space.plans.size()},
                              {"exhaustive_limit", o.exhaustive_limit},
                              {"segments", space.segments},
                              {"distinct_segments", space.distinct_segments}};
    std::vector<Candidate> plan_list, auto_list;
    for (const RankedPlan &r : space.plans) {
        Candidate c = s.candidate(r.plan, "templates", false, "plans", &r.cost);
        c.variant = r.segment_choice;
        if (templates && queued.insert(c.key).second) plan_list.push_back(c);
    }
    {
        std::vector<const FusedGraph *> targets = {&default_plan};
        for (const RankedPlan &r : space.plans) targets.push_back(&r.plan);
        for (const FusedGraph *p : targets) {
            for (const std::string &a : autos) {
                Candidate c = s.candidate(*p, a, false, "autoschedule");
                if (queued.insert(c.key).second) auto_list.push_back(c);
            }
        }
    }
    // One candidate of the budget is kept for the plan composed from each segment's fastest measured
    // choice (after 5.), when the model has segments and the budget leaves room for a search before it.
    const int composed_slot =
        templates && s.total - fixed >= 3 && cut_segments(s.rewritten, kTuningSegmentNodes).size() > 1 ? 1 : 0;
    s.total -= composed_slot;
    const int rest = s.total - fixed;
    size_t plans_take = templates ? static_cast<size_t>(std::ceil(rest * 0.4)) : 0;
    size_t autos_take = autos.empty() ? 0 : templates ? static_cast<size_t>(std::ceil(rest * 0.25)) : rest;
    plans_take = std::min(plans_take, plan_list.size());
    autos_take = std::min(autos_take, auto_list.size());

    int resumed = static_cast<int>(s.rows.size());
    s.progress = std::make_unique<Progress>(o.progress_bar, s.total + composed_slot, resumed);
    if (resumed) s.progress->say("resuming: " + std::to_string(resumed) + " candidates done in " + results_path);
    s.progress->say(s.model.name + ": " + std::to_string(fixed) + " baselines, " +
                    (space.exhaustive ? "all " + std::to_string(space.plans.size()) + " legal plans"
                                      : std::to_string(space.plans.size()) + " plans composed from " +
                                            std::to_string(space.segments) + " segments (" +
                                            std::to_string(space.distinct_segments) + " distinct)") +
                    ", budget " + std::to_string(s.total + composed_slot) + " candidates");

    std::vector<Candidate> first = baselines;
    first.insert(first.end(), plan_list.begin(), plan_list.begin() + plans_take);
    s.evaluate(first);
    // The autoschedulers per group, o.jobs at a time. One whose candidate passed its bounds
    // (--autoschedule-max-memory, --autoschedule-timeout) is given up per group: its other candidates
    // there, on plans of groups as large or larger, would pass them too, and the budget goes on.
    std::set<std::string> given_up;
    auto evaluate_autos = [&](const std::vector<Candidate> &list) {
        for (size_t i = 0; i < list.size() && !s.interrupted && !s.out_of_time();) {
            std::vector<Candidate> chunk;
            for (; i < list.size() && static_cast<int>(chunk.size()) < o.jobs; i++) {
                if (!given_up.count(list[i].schedule)) chunk.push_back(list[i]);
            }
            s.evaluate(chunk);
            for (const Candidate &c : chunk) {
                for (const Evaluation &e : s.rows) {
                    const bool past_bounds =
                        e.status == "timeout" || e.error.find("--autoschedule-max-memory") != std::string::npos;
                    if (e.candidate.key != c.key || !past_bounds || !given_up.insert(c.schedule).second) continue;
                    notes.push_back(c.schedule + " per group was given up after candidate " + c.key + ": " + e.error +
                                    "; its other per-group candidates were left out.");
                }
            }
        }
    };
    evaluate_autos({auto_list.begin(), auto_list.begin() + autos_take});

    // 4. Each group's parameters against the default plan, in one process (group_search.h).
    std::string searched_key;
    if (templates && default_row(s)) searched_key = search_group_parameters(s, default_plan, notes);

    // 5. What the budget still allows: more plans and autoscheduled plans, alternately.
    {
        std::vector<Candidate> more;
        size_t i = plans_take, j = autos_take;
        while (i < plan_list.size() || j < auto_list.size()) {
            if (i < plan_list.size()) more.push_back(plan_list[i++]);
            for (; j < auto_list.size(); j++) {
                if (!given_up.count(auto_list[j].schedule)) {
                    more.push_back(auto_list[j++]);
                    break;
                }
            }
        }
        if (!s.interrupted && !s.out_of_time() && static_cast<int>(s.rows.size()) < s.total) s.evaluate(more);
    }

    // 6. The plan composed from each segment's fastest choice, by its groups' profiled times.
    s.total += composed_slot;
    std::string composed_key;
    if (composed_slot && !s.interrupted && !s.out_of_time()) {
        const TuningRecords fastest = fastest_segment_choices(s.rewritten, s.rewrites, s.rows, s.target);
        if (!fastest.entries.empty()) {
            TunedPlan t = apply_tuning(default_plan, fastest, s.target);
            Candidate c =
                s.candidate(with_default_schedules(std::move(t.plan), s.target), "templates", false, "segments");
            c.variant = "each segment's fastest measured choice (" + std::to_string(t.applied) + " of " +
                        std::to_string(t.segments) + " segments)";
            composed_key = c.key;
            for (const std::string &n : t.notes) notes.push_back("Composing the fastest segments: " + n);
            if (s.done.count(c.key)) {
                notes.push_back("The plan composed from each segment's fastest measured choice is candidate " + c.key +
                                ", timed before.");
            } else {
                s.evaluate({c});
            }
        }
    }
    s.progress->finish();

    // Confirmation: the fastest few, the best template candidates and the baselines again, alternately.
    const bool out_of_time = s.out_of_time() && static_cast<int>(s.rows.size()) < s.total;
    if (!s.interrupted && !out_of_time && o.confirm_rounds > 0) {
        std::vector<std::string> keys;
        auto add = [&](const Evaluation *e) {
            if (e && e->status == "ok" && std::find(keys.begin(), keys.end(), e->candidate.key) == keys.end())
                keys.push_back(e->candidate.key);
        };
        std::vector<const Evaluation *> ok;
        for (Evaluation &e : s.rows) {
            e.confirm_ms.clear();
            if (e.status == "ok") ok.push_back(&e);
        }
        std::stable_sort(ok.begin(), ok.end(), promising_first);
        for (int k = 0; k < kConfirmTop && k < static_cast<int>(ok.size()); k++) add(ok[k]);
        int templ = 0;
        for (const Evaluation *e : ok) {
            if (e->candidate.schedule == "templates" && templ++ < 2) add(e);
        }
        for (const Evaluation &e : s.rows) {
            const auto &b = e.candidate.baselines;
            bool is_default = std::find(b.begin(), b.end(), "default") != b.end();
            bool is_whole_mullapudi =
                std::find(b.begin(), b.end(), "whole") != b.end() && e.candidate.schedule == "mullapudi2016";
            if (is_default || is_whole_mullapudi || e.candidate.key == composed_key || e.candidate.key == searched_key)
                add(&e);
        }
        s.progress->say("confirming: timing " + std::to_string(keys.size()) + " candidates again, " +
                        std::to_string(o.confirm_rounds) + (o.confirm_rounds == 1 ? " round" : " rounds") +
                        ", one at a time");
        for (int round = 0; round < o.confirm_rounds && !s.interrupted; round++) {
            for (const std::string &key : keys) {
                Evaluation *e = nullptr;
                for (Evaluation &r : s.rows) {
                    if (r.candidate.key == key) e = &r;
                }
                const std::string base = s.dir + "/candidates/" + key;
                ChildResult r = s.run_one(s.bench_argv(e->candidate, base + ".plan.json"),
                                          base + ".confirm" + std::to_string(round), e->candidate);
                Evaluation again = s.record(e->candidate, r);
                if (again.status == "ok") e->confirm_ms.push_back(again.median_ms);
                if (s.interrupted) break;
            }
        }
        s.save();
    }

    // The best, checked against the reference; best_plan.json is the fastest templated candidate.
    ExploreSummary sum;
    const Evaluation *best = nullptr, *best_plan = nullptr;
    bool default_noted = false;  // default_note is said in report.md
    std::string default_note;
    std::map<std::string, std::vector<double>> head_to_head;  // by candidate: speedups over the default
    for (int attempt = 0; attempt < 4 && !s.interrupted; attempt++) {
        const bool confirmed = o.confirm_rounds > 0 && fastest(s.rows, true, false);
        best = fastest(s.rows, confirmed, false);
        best_plan = fastest(s.rows, confirmed && fastest(s.rows, true, true), true);
        // A plan file other than the default's must have paid for itself (kMinGain).
        const Evaluation *def = default_row(s);
        default_noted = false;
        if (best && def && best != def && !beats(*best, *def)) best = def;
        if (best_plan && def && best_plan != def && !beats(*best_plan, *def)) {
            default_noted = true;
            default_note = "No plan scheduled by the templates beat the default plan by " +
                           fmt("%.0f%%", 100 * kMinGain) +
                           " or more in most confirmation rounds (the fastest, candidate " + best_plan->candidate.key +
                           ", ran " + fmt("%.3g", best_plan->ranked_ms()) + " ms against the default's " +
                           fmt("%.3g", def->ranked_ms()) + " ms): best_plan.json is the default plan.";
            best_plan = def;
        }
        // Separate processes differ by more than the gain sought (page placement, the core they get):
        // the plan that would replace the default is timed against it in one process, interleaved. The
        // contenders: the fastest by the confirmation rounds, then the group search's plan, which was
        // timed against the default in one process already and paid there.
        if (def && o.confirm_rounds > 0) {
            std::vector<const Evaluation *> contenders;
            if (best_plan && best_plan != def) contenders.push_back(best_plan);
            for (const Evaluation &e : s.rows) {
                if (e.candidate.key == searched_key && e.status == "ok" && &e != def && &e != best_plan &&
                    e.against_ms >= (1 + kMinGain) * e.median_ms)
                    contenders.push_back(&e);
            }
            const Evaluation *kept = def;
            std::string notes_of_contenders;
            for (const Evaluation *c : contenders) {
                const std::string key = c->candidate.key;
                if (!head_to_head.count(key)) {
                    std::vector<double> speedups;
                    for (int round = 0; round < o.confirm_rounds && !s.interrupted; round++) {
                        std::vector<std::string> argv = {o.hfuse_binary, "bench", o.model};
                        argv.insert(argv.end(), o.model_args.begin(), o.model_args.end());
                        argv.insert(argv.end(), {"--json", "--runs", std::to_string(2 * o.runs), "--plan",
                                                 s.dir + "/candidates/" + key + ".plan.json", "--against",
                                                 s.dir + "/candidates/" + def->candidate.key + ".plan.json"});
                        if (!o.kernel_cache) argv.push_back("--no-cache");
                        const json j = last_json_line(
                            s.run_one(argv, s.dir + "/candidates/" + key + ".against_default" + std::to_string(round),
                                      c->candidate)
                                .out);
                        if (j.is_object() && j.contains("speedup")) speedups.push_back(j["speedup"].get<double>());
                    }
                    head_to_head[key] = speedups;
                }
                const std::vector<double> &sp = head_to_head[key];
                std::vector<double> sorted = sp;
                std::sort(sorted.begin(), sorted.end());
                const double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
                std::string list;
                for (double x : sp) list += (list.empty() ? "" : ", ") + fmt("%.3fx", x);
                const bool pays = median >= 1 + kMinGain;
                s.header["against_default"] = {{"candidate", key}, {"speedups", sp}, {"kept", pays}};
                notes_of_contenders +=
                    std::string(notes_of_contenders.empty() ? "" : " ") + "Candidate " + key +
                    (key == searched_key ? " (the group search's plan)" : "") +
                    " against the default plan in one process, interleaved (" + std::to_string(sp.size()) +
                    " calls of `hfuse bench --plan ... --against ...`): " + (list.empty() ? "no result" : list) +
                    (pays ? "; faster by " + fmt("%.0f%%", 100 * kMinGain) + " or more: best_plan.json."
                          : "; not faster by " + fmt("%.0f%%", 100 * kMinGain) + " or more.");
                if (pays) {
                    kept = c;
                    break;
                }
            }
            if (!contenders.empty()) {
                default_note = (default_noted ? default_note + " " : "") + notes_of_contenders +
                               (kept == def ? " best_plan.json is the default plan." : "");
                default_noted = true;  // the note is said either way
                if (best == best_plan && kept != best_plan) best = kept;
                best_plan = kept;
            }
        }
        std::vector<std::string> to_check;
        for (const Evaluation *e : {best_plan, best}) {
            if (e && std::find(to_check.begin(), to_check.end(), e->candidate.key) == to_check.end())
                to_check.push_back(e->candidate.key);
        }
        bool wrong = false;
        for (const std::string &key : to_check) {
            Evaluation &e = *std::find_if(s.rows.begin(), s.rows.end(),
                                          [&](const Evaluation &r) { return r.candidate.key == key; });
            const std::string base = s.dir + "/candidates/" + key;
            std::vector<std::string> argv = {o.hfuse_binary, "run", o.model};
            argv.insert(argv.end(), o.model_args.begin(), o.model_args.end());
            argv.push_back("--check");
            if (!o.kernel_cache) argv.push_back("--no-cache");
            if (e.candidate.whole) {
                argv.push_back("--whole");
            } else {
                argv.insert(argv.end(), {"--plan", base + ".plan.json"});
            }
            if (e.candidate.schedule != "templates") argv.insert(argv.end(), {"--autoschedule", e.candidate.schedule});
            ChildResult r = s.run_one(argv, base + ".check", e.candidate);
            if (s.interrupted) break;
            if (r.exit_code != 0 || r.out.find("MISMATCH") != std::string::npos) {
                e.status = "error";
                e.error = "wrong output: `hfuse run --check` failed: " +
                          (r.timed_out ? std::string("timed out") : error_line(r.err + r.out));
                s.progress->say("the best candidate " + key + " fails the check against the reference: " + e.error);
                wrong = true;
            }
        }
        s.save();
        if (!wrong) break;
    }
    if (s.interrupted) {
        s.save();
        ExploreSummary partial = summarize(s.rows);
        partial.interrupted = true;
        return partial;
    }

    // Outputs.
    bool wrote_tuning = false;
    if (best_plan) {
        json plan = best_plan->candidate.plan;
        plan["doc"] =
            "hfuse explore: the fastest plan file of " + std::to_string(s.rows.size()) + " candidates for " +
            s.model.name + " on " + cpu_name() + ": " + fmt("%.4g", best_plan->ranked_ms()) + " ms (" +
            best_plan->candidate.schedule +
            (best_plan->candidate.variant.empty() ? "" : ", " + best_plan->candidate.variant) + ")" +
            (best != best_plan && best
                 ? "; the fastest candidate overall, " + fmt("%.4g", best->ranked_ms()) + " ms, is scheduled by " +
                       best->candidate.schedule + (best->candidate.whole ? " (--whole)" : " (each group)") +
                       ", which a plan file cannot say: see report.md"
                 : "");
        write_file_atomically(s.dir + "/best_plan.json", plan.dump(2) + "\n");
        wrote_tuning = write_tuning(s, *best_plan, notes);
    }
    if (out_of_time) {
        notes.push_back("Stopped at --time-limit " + fmt("%g", o.time_limit_s) + " s after " +
                        std::to_string(s.rows.size()) + " of " + std::to_string(s.total) +
                        " candidates, without confirmation rounds: `--resume` continues from results.json.");
    }
    if (default_noted) notes.push_back(default_note);
    if (best && best != best_plan && best->candidate.schedule != "templates") {
        notes.push_back("The fastest candidate is scheduled by an autoscheduler (" + best->candidate.schedule +
                        "): the plan format has no field for that, so best_plan.json is the fastest candidate "
                        "scheduled by the templates.");
    }
    if (!space.exhaustive) {
        notes.push_back("The plan space was too large to enumerate (more than " + std::to_string(o.exhaustive_limit) +
                        " plans): the graph was cut into " + std::to_string(space.segments) +
                        " segments at values only one crosses (" + std::to_string(space.distinct_segments) +
                        " distinct; repeated blocks searched once), each segment's plans enumerated or, where "
                        "too many, proposed by a beam search (width 4, seed " +
                        std::to_string(o.seed) +
                        ") guided by the cost estimate, and whole plans composed from each segment's best few; "
                        "fusions across a cut were not searched.");
    }
    notes.push_back(
        "The cost estimate (bytes moved and FLOPs per group, a rough roofline) only orders the plans; "
        "Adams2019's learned cost model is not used for that.");
    std::string default_key;
    for (const Evaluation &e : s.rows) {
        const auto &b = e.candidate.baselines;
        if (std::find(b.begin(), b.end(), "default") != b.end()) default_key = e.candidate.key;
    }
    const std::vector<SegmentFindings> findings = segment_findings(s.rewritten, s.rewrites, s.rows, default_key,
                                                                   best_plan ? best_plan->candidate.key : "", s.target);
    s.header["segments"] = json::array();
    for (const SegmentFindings &f : findings) s.header["segments"].push_back(to_json(f));
    {
        // Peak resident memory: this process (the plan space, the results) and its largest candidate.
        rusage self{};
        rusage children{};
        getrusage(RUSAGE_SELF, &self);
        getrusage(RUSAGE_CHILDREN, &children);
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - s.started).count();
        s.header["resources"] = {{"wall_s", wall},
                                 {"explore_peak_rss_mb", self.ru_maxrss / 1024.0},
                                 {"largest_child_peak_rss_mb", children.ru_maxrss / 1024.0}};
        notes.push_back("This run took " + fmt("%.0f s", wall) + "; peak resident memory " +
                        fmt("%.0f MB", self.ru_maxrss / 1024.0) + " in explore itself and " +
                        fmt("%.0f MB", children.ru_maxrss / 1024.0) +
                        " in its largest child process (a candidate, each bounded by --max-memory).");
    }
    s.header["best"] =
        best ? json{{"key", best->candidate.key}, {"ms", best->ranked_ms()}, {"schedule", best->candidate.schedule}}
             : json(nullptr);
    s.header["best_plan"] =
        best_plan ? json{{"key", best_plan->candidate.key}, {"ms", best_plan->ranked_ms()}} : json(nullptr);
    s.save();
    write_file_atomically(s.dir + "/plot.svg", svg_plot(s.rows, best ? best->candidate.key : "",
                                                        s.model.name + ": time against groups (" + cpu_name() + ")"));
    ReportInput ri;
    ri.header = s.header;
    ri.rows = s.rows;
    ri.best_key = best ? best->candidate.key : "";
    ri.best_plan_key = best_plan ? best_plan->candidate.key : "";
    ri.notes = notes;
    ri.segments = findings;
    for (const Evaluation *e : {best, best_plan}) {
        if (e && !e->candidate.whole) ri.costs[e->candidate.key] = estimate_plan(s.plan_of(e->candidate), s.target);
    }
    for (const Evaluation &e : s.rows) {
        const auto &b = e.candidate.baselines;
        if (std::find(b.begin(), b.end(), "default") != b.end())
            ri.costs[e.candidate.key] = estimate_plan(s.plan_of(e.candidate), s.target);
    }
    write_file_atomically(s.dir + "/report.md", markdown_report(ri));

    sum = summarize(s.rows);
    sum.exhaustive = space.exhaustive;
    sum.legal_plans = space.plans.size();
    sum.out_of_time = out_of_time;
    if (best) {
        sum.has_best = true;
        sum.best_ms = best->ranked_ms();
        sum.best_key = best->candidate.key;
        sum.best_schedule = best->candidate.schedule;
    }
    if (best_plan) {
        sum.has_best_plan = true;
        sum.best_plan_ms = best_plan->ranked_ms();
        sum.has_tuning = wrote_tuning;
    }
    return sum;
}

}  // namespace hfuse
