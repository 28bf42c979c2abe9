#include "cli_common.h"

#include "hfuse/composer.h"
#include "hfuse/error.h"
#include "hfuse/fma_peak.h"
#include "hfuse/fusion_rules.h"
#include "hfuse/model_io.h"
#include "hfuse/passes.h"
#include "hfuse/planner.h"
#include "hfuse/random.h"
#include "hfuse/reference.h"
#include "hfuse/target.h"
#include "hfuse/tuning_record.h"
#include "hfuse/undecided_merges.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <thread>

namespace hfuse::cli {

// "NAME=FILE" binds a file to a named tensor; a bare "FILE" is allowed when there is exactly one.
std::map<std::string, std::string> bind_files(const std::vector<std::string> &args,
                                              const std::vector<std::string> &names, const std::string &flag) {
    std::map<std::string, std::string> out;
    for (const std::string &a : args) {
        auto eq = a.find('=');
        std::string name, file;
        if (eq != std::string::npos && std::find(names.begin(), names.end(), a.substr(0, eq)) != names.end()) {
            name = a.substr(0, eq);
            file = a.substr(eq + 1);
        } else if (eq != std::string::npos && a.find('/') > eq) {
            std::string list;
            for (const auto &n : names) list += (list.empty() ? "" : ", ") + n;
            throw UsageError(flag + " " + a + ": the model has no tensor named '" + a.substr(0, eq) +
                             "' (it has: " + list + ")");
        } else {
            if (names.size() != 1) {
                throw UsageError(flag + " " + a + ": the model has " + std::to_string(names.size()) + " of them; use " +
                                 flag + " NAME=FILE");
            }
            name = names[0];
            file = a;
        }
        if (!out.emplace(name, file).second) throw UsageError(flag + ": '" + name + "' is given twice");
    }
    return out;
}

std::map<std::string, TensorBuffer> load_inputs(const Graph &g, const std::vector<std::string> &args, bool quiet) {
    std::vector<std::string> names;
    for (const auto &in : g.inputs) names.push_back(in.name);
    std::map<std::string, std::string> files = bind_files(args, names, "--input");
    std::map<std::string, TensorBuffer> inputs;
    for (size_t i = 0; i < g.inputs.size(); i++) {
        const GraphInput &in = g.inputs[i];
        if (auto it = files.find(in.name); it != files.end()) {
            const std::vector<float> data = read_f32_file(it->second, num_elements(in.shape),
                                                          "input '" + in.name + "' [" + to_string(in.shape) + "]");
            inputs[in.name] = tensor_from_data(in.shape, data.data());
            continue;
        }
        inputs[in.name] = generated_input(in, i);
    }
    if (!quiet) say_generated_inputs(g, args);
    return inputs;
}

void say_generated_inputs(const Graph &g, const std::vector<std::string> &args) {
    std::vector<std::string> names;
    for (const auto &in : g.inputs) names.push_back(in.name);
    const std::map<std::string, std::string> files = bind_files(args, names, "--input");
    for (size_t i = 0; i < g.inputs.size(); i++) {
        const GraphInput &in = g.inputs[i];
        if (files.count(in.name)) continue;
        std::printf("input '%s' [%s]: generated, uniform [-1, 1] seed %" PRIu64 "\n", in.name.c_str(),
                    to_string(in.shape).c_str(), default_input_seed(i));
    }
}

void print_summary(const std::string &name, const TensorBuffer &b) {
    double sum = 0, abs_sum = 0;
    float lo = INFINITY, hi = -INFINITY;
    const int64_t n = b.number_of_elements();
    for (int64_t i = 0; i < n; i++) {
        float v = b.data()[i];
        sum += v;
        abs_sum += std::fabs(v);
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
    std::printf("output '%s' [%s]: sum %.6g  mean|x| %.6g  min %.6g  max %.6g\n", name.c_str(),
                to_string(shape_of(b)).c_str(), sum, abs_sum / n, lo, hi);
}

// Compares executor outputs with the independent reference evaluator; true when all are within 1e-4.
bool check_against_reference(const Graph &g, const std::map<std::string, TensorBuffer> &inputs,
                             const std::map<std::string, TensorBuffer> &outputs) {
    std::map<std::string, reference::RefTensor> ref_inputs;
    for (const auto &kv : inputs) {
        ref_inputs[kv.first] = {
            shape_of(kv.second),
            std::vector<float>(kv.second.data(), kv.second.data() + kv.second.number_of_elements())};
    }
    auto expected = reference::run(g, ref_inputs);
    bool ok = true;
    for (const std::string &name : g.outputs) {
        const auto &e = expected.at(name);
        auto cmp = reference::compare(outputs.at(name).data(), e.data.data(), e.data.size());
        bool pass = cmp.relative() <= 1e-4;
        ok = ok && pass;
        std::printf("check '%s' against the reference: max abs error %.3g at scale %.3g (relative %.2g): %s\n",
                    name.c_str(), cmp.max_abs_error, cmp.scale, cmp.relative(), pass ? "ok" : "MISMATCH");
    }
    return ok;
}

Halide::Target parse_target_flag(const std::string &text) {
    if (!Halide::Target::validate_target_string(text)) {
        throw UsageError("--target '" + text +
                         "' is not a Halide target string (e.g. host, x86-64-linux-avx2, "
                         "x86-64-linux-avx512_skylake, arm-64-linux)");
    }
    Halide::Target target(text);
    if (text.rfind("host", 0) == 0) target = runnable_here(target);  // this CPU's target: what it can run
    return target;
}

std::string counted(long n, const std::string &noun) {
    return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

void PlanChoice::add_flags(CLI::App *cmd) {
    auto *p = cmd->add_option("--plan", plan_file, "run this plan file (from `hfuse plan -o`, or hand-written)");
    auto *r = cmd->add_option("--rules", rules, "plan with these rule sets, one round each: tvm, x86, none or a FILE")
                  ->allow_extra_args(false);
    auto *u = cmd->add_flag("--unfused", unfused, "every op its own stage, no graph rewrites (the baseline)");
    auto *w = cmd->add_flag("--whole", whole,
                            "the whole (rewritten) model as one pipeline, no fusion decisions: for an autoscheduler");
    auto *m = cmd->add_flag("--measure-undecided", measure_undecided,
                            "time each merge the planner's cost model cannot price against its parts apart "
                            "(both compiled and profiled here, alternated) and keep the faster; the plan's "
                            "\"why\" gives both times");
    auto *t = cmd->add_option("--tuned", tuned,
                              "then regroup each segment of the model a tuning record (`hfuse explore`'s "
                              "tuning.json) has for this target, as it says; repeatable, later files win")
                  ->allow_extra_args(false);
    p->excludes(r)->excludes(u)->excludes(w);
    r->excludes(u)->excludes(w);
    u->excludes(w);
    m->excludes(p)->excludes(u)->excludes(w);
    t->excludes(p)->excludes(u)->excludes(w);
}

void PlanChoice::add_schedule_flags(CLI::App *cmd, const std::string &what) {
    cmd->add_option("--autoschedule", autoschedule,
                    "schedule " + what + " with a Halide autoscheduler instead of hfuse's templates")
        ->check(CLI::IsMember({"mullapudi2016", "adams2019", "li2018"}));
}

void PlanChoice::add_layout_flag(CLI::App *cmd) {
    auto *p = cmd->add_flag("--planar", planar,
                            "store every value passed between groups dense NCHW (default: conv_cv groups pass "
                            "theirs channel-blocked, with a zero border for the reader's padding, and a group "
                            "computing two bands of rows passes its value with a page starting at the second "
                            "band in each plane)");
    cmd->add_flag("--blocked-io", blocked_io,
                  "take model inputs and return model outputs channel-blocked too where conv_cv groups read or "
                  "write them (the conversions from and to NCHW done once, outside the runs, as oneDNN users do)")
        ->excludes(p);
    cmd->add_flag("--copy-concats", copy_concats,
                  "have each Concat group copy its inputs (default: a Concat in a group of its own is computed in "
                  "place where its values allow, its inputs' producers writing into its output, and copied by "
                  "memcpy where they do not; `run --profile` names them in_place and memcpy)");
}

void PlanChoice::add_runtime_flag(CLI::App *cmd) {
    cmd->add_option("--parallel-runtime", parallel_runtime,
                    "who runs each group's parallel loops: openmp (each thread a fixed share of a loop's tasks, "
                    "the same every run), halide (Halide's thread pool, tasks to whichever thread asks next) or "
                    "auto (default: openmp for every group of a model of at least 1 MFLOP, halide below)")
        ->check(CLI::IsMember({"auto", "openmp", "halide"}));
    cmd->add_flag("--no-cache", no_cache,
                  "compile every group afresh, neither loading from nor storing in the kernel cache (`hfuse cache "
                  "info`)");
}

FusedGraph PlanChoice::measured(FusedGraph planned, const Halide::Target &target) const {
    const Halide::Target host = host_target();
    // The schedules follow the vectors and ISA; features such as no_runtime do not matter here.
    const bool same = target.arch == host.arch && target.bits == host.bits && target.os == host.os &&
                      target.natural_vector_size<float>() == host.natural_vector_size<float>() &&
                      target.has_feature(Halide::Target::FMA) == host.has_feature(Halide::Target::FMA);
    if (!same) {
        throw UsageError("--measure-undecided measures on this machine's target (" + host.to_string() + "), not " +
                         target.to_string());
    }
    UndecidedMeasureOptions mo;
    mo.executor = options();
    const auto start = std::chrono::steady_clock::now();
    MeasuredMerges m = measure_undecided_merges(planned, mo);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int split = 0;
    for (const UndecidedMeasurement &u : m.measured) split += u.split;
    std::fprintf(stderr, "measured %zu undecided merges in %.1f s: %d split, %zu kept as one\n", m.measured.size(), s,
                 split, m.measured.size() - split);
    for (const std::string &n : m.notes) std::fprintf(stderr, "  %s\n", n.c_str());
    return std::move(m.plan);
}

FusedGraph PlanChoice::make(const Graph &g) const {
    return make(g, host_target());
}

FusedGraph PlanChoice::make(const Graph &g, const Halide::Target &target) const {
    FusedGraph f;
    if (whole) {
        f = whole_model_plan(g);
    } else if (unfused) {
        f = singleton_groups(g);
        f.rules = {"unfused"};
    } else if (!plan_file.empty()) {
        f = read_plan_for_model(plan_file, g);
    } else {
        std::vector<RuleSet> rounds;
        for (const std::string &r : rules.empty() ? std::vector<std::string>{"x86"} : rules) {
            rounds.push_back(load_rules(r));
            for (const std::string &n : unknown_rule_nodes(rounds.back(), g))
                std::fprintf(stderr, "hfuse: note: %s\n", n.c_str());
        }
        set_target_lanes(rounds, target.natural_vector_size<float>());
        f = plan_fusion(g, rounds);
        if (measure_undecided) f = measured(std::move(f), target);
        if (!tuned.empty()) f = tuned_plan(std::move(f), target);
    }
    // Record the schedule parameters (a plan file's own are kept), so `plan -o` pins them.
    return with_default_schedules(std::move(f), target);
}

FusedGraph PlanChoice::tuned_plan(FusedGraph planned, const Halide::Target &target) const {
    TuningRecords records;
    for (const std::string &path : tuned) {
        TuningRecords more = read_tuning_records(path);
        records.entries.insert(records.entries.end(), more.entries.begin(), more.entries.end());
    }
    TunedPlan t = apply_tuning(std::move(planned), records, target);
    std::fprintf(stderr, "tuned: %d of the model's %d segments regrouped by %zu tuning entries\n", t.applied,
                 t.segments, records.entries.size());
    for (const std::string &n : t.notes) std::fprintf(stderr, "  %s\n", n.c_str());
    t.plan.rules.push_back("tuned");
    return std::move(t.plan);
}

ExecutorOptions PlanChoice::options() const {
    ExecutorOptions o;
    if (!autoschedule.empty()) o.schedule = parse_schedule_source(autoschedule);
    o.blocked_layouts = !planar;
    o.concat_in_place = !copy_concats;
    o.blocked_io = blocked_io;
    o.parallel_runtime = parse_parallel_runtime(parallel_runtime);
    o.kernel_cache = !no_cache;
    return o;
}

std::string PlanChoice::schedule() const {
    return autoschedule.empty() ? "templates" : autoschedule;
}

std::string PlanChoice::describe() const {
    if (whole) return "whole";
    if (unfused) return "unfused";
    if (!plan_file.empty()) return plan_file;
    std::string s;
    for (const std::string &r : rules.empty() ? std::vector<std::string>{"x86"} : rules)
        s += (s.empty() ? "" : "+") + r;
    return tuned.empty() ? s : s + ", tuned";
}

LayoutCounts count_layouts(const std::map<std::string, std::string> &layouts) {
    LayoutCounts n;
    for (const auto &[value, layout] : layouts) {
        if (layout.rfind("blocked", 0) == 0) n.blocked++;
        if (is_paged_layout(layout)) n.paged++;
    }
    return n;
}

bool is_paged_layout(const std::string &layout) {
    return layout.rfind("planar, paged", 0) == 0;
}

nlohmann::json kernel_cache_json(const Executor &ex) {
    const KernelCacheStats s = ex.kernel_cache_stats();
    return {{"enabled", s.enabled},
            {"dir", s.dir},
            {"hits", s.hits},
            {"stored", s.stored},
            {"hit_cold_compile_ms", s.hit_cold_compile_ms},
            {"notes", s.notes}};
}

std::string kernel_cache_summary_line(const Executor &ex) {
    const KernelCacheStats s = ex.kernel_cache_stats();
    if (!s.enabled) return "kernel cache off";
    char line[256];
    std::snprintf(line, sizeof line,
                  "kernel cache: %d of %d distinct groups loaded (%.0f ms to compile cold), %d stored", s.hits,
                  ex.num_compiled(), s.hit_cold_compile_ms, s.stored);
    return line;
}

std::vector<std::string> report_fallbacks(const Executor &ex) {
    for (const std::string &n : ex.kernel_cache_stats().notes) std::fprintf(stderr, "hfuse: note: %s\n", n.c_str());
    std::vector<std::string> names;
    for (const GroupInfo &g : ex.groups()) {
        if (g.note.empty()) continue;
        std::fprintf(stderr, "hfuse: note: group %s (%s): %s\n", g.name.c_str(), g.master.c_str(), g.note.c_str());
        names.push_back(g.name);
    }
    return names;
}

std::map<std::string, TensorBuffer> pack_inputs(const Executor &ex, const std::map<std::string, TensorBuffer> &nchw) {
    std::map<std::string, TensorBuffer> out;
    for (const auto &[name, b] : nchw) out[name] = ex.pack_input(name, b);
    return out;
}

std::map<std::string, TensorBuffer> unpack_outputs(const Executor &ex,
                                                   const std::map<std::string, TensorBuffer> &stored) {
    std::map<std::string, TensorBuffer> out;
    for (const auto &[name, b] : stored) out[name] = ex.unpack_output(name, b);
    return out;
}

std::vector<double> time_runs(Executor &ex, const std::map<std::string, TensorBuffer> &inputs, int runs) {
    using clock = std::chrono::steady_clock;
    ex.run(inputs);
    std::vector<double> ms;
    for (int i = 0; i < runs; i++) {
        auto s = clock::now();
        ex.run(inputs);
        ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - s).count());
    }
    return ms;
}

FmaPeak measure_fma_peak() {
    FmaPeak peak;
    peak.threads = num_threads();
    if (const FmaKernel *kernel = fma_kernel_for_target(host_target())) {
        peak.isa = kernel->isa;
        // After the runs, OpenMP's idle workers spin before they sleep (libgomp: 300,000 spins, some
        // 15 ms on Sapphire Rapids), on the cores the bursts measure: 170 against 330 GFLOP/s for 2
        // threads there. Let them sleep first.
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        // The best of 10 bursts of ~3 ms (AVX-512 at 3 GHz), 20 ms apart: a yardstick, not bench/'s
        // careful figure. Bursts back to back after the sleep still measured half the peak in one
        // --profile of four on Zen 4 (2 vCPUs: a burst thread sharing a core with another process).
        for (int burst = 0; burst < 10; burst++) {
            if (burst > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
            peak.gflops = std::max(peak.gflops, measure_fma_peak_gflops(*kernel, peak.threads, 1, 1'000'000));
        }
    }
    return peak;
}

std::vector<GroupReport> group_reports(const Executor &ex, const Profile &p, const FmaPeak &peak) {
    const std::vector<GroupInfo> info = ex.groups();
    if (info.size() != p.groups.size()) throw Error("internal: the profile is not of this executor's groups");
    std::vector<GroupReport> out;
    for (size_t i = 0; i < info.size(); i++) {
        const GroupInfo &gi = info[i];
        const GroupProfile &gp = p.groups[i];
        GroupReport r;
        r.name = gp.name;
        r.master = gp.master;
        r.schedule_template = gi.schedule_template;
        for (const std::string &op : gi.ops) r.ops += (r.ops.empty() ? "" : "+") + op;
        r.flops = gi.flops;
        r.ms = gp.ms;
        r.share = p.total_ms > 0 ? gp.ms / p.total_ms : 0;
        r.gflops = gp.ms > 0 ? gi.flops / (gp.ms * 1e6) : 0;
        r.peak_share = peak.gflops > 0 ? r.gflops / peak.gflops : 0;
        r.cold_compile_ms = gi.from_cache ? gi.cold_compile_ms : gi.compile_ms;
        out.push_back(r);
    }
    return out;
}

namespace {

// `ops` cut to at most `width` characters at a '+', saying how many ops there are: "Conv+Add+... (12 ops)".
std::string shorten_ops(const std::string &ops, size_t width) {
    if (ops.size() <= width) return ops;
    const std::string suffix = "+... (" + std::to_string(std::count(ops.begin(), ops.end(), '+') + 1) + " ops)";
    size_t cut = 0;  // the longest prefix of whole ops that leaves room for the suffix
    for (size_t plus = ops.find('+'); plus != std::string::npos && plus + suffix.size() <= width;
         plus = ops.find('+', plus + 1))
        cut = plus;
    return cut ? ops.substr(0, cut) + suffix : suffix.substr(1);
}

}  // namespace

void print_profile(const Profile &p, const std::vector<GroupReport> &groups, const FmaPeak &peak) {
    constexpr size_t kOpsWidth = 32;
    size_t name_width = 5, master_width = 6, template_width = 8, ops_width = 3;
    for (const GroupReport &g : groups) {
        name_width = std::max(name_width, g.name.size());
        master_width = std::max(master_width, g.master.size());
        template_width = std::max(template_width, g.schedule_template.size());
        ops_width = std::max(ops_width, shorten_ops(g.ops, kOpsWidth).size());
    }
    double sum = 0;
    for (const GroupProfile &g : p.groups) sum += g.ms;
    std::printf("profile: median of %d runs: %.4f ms a run, %.4f ms in its %zu groups\n", p.runs, p.total_ms, sum,
                p.groups.size());
    if (peak.gflops > 0) {
        std::printf("FMA peak %d thread%s: %.1f GFLOP/s (%s)\n", peak.threads, peak.threads == 1 ? "" : "s",
                    peak.gflops, peak.isa.c_str());
    } else {
        std::printf("FMA peak: not measured (Halide's target has neither AVX-512 nor AVX2 + FMA)\n");
    }
    std::printf("  %-*s  %-*s  %-*s  %-*s  %10s  %6s  %8s  %7s  %10s\n", int(name_width), "group", int(master_width),
                "master", int(template_width), "template", int(ops_width), "ops", "ms", "share", "GFLOP/s", "of peak",
                "compile ms");
    for (const GroupReport &g : groups) {
        char peak_share[16] = "-";
        if (peak.gflops > 0) std::snprintf(peak_share, sizeof peak_share, "%.1f%%", 100.0 * g.peak_share);
        std::printf("  %-*s  %-*s  %-*s  %-*s  %10.4f  %5.1f%%  %8.1f  %7s  %10.0f\n", int(name_width), g.name.c_str(),
                    int(master_width), g.master.c_str(), int(template_width), g.schedule_template.c_str(),
                    int(ops_width), shorten_ops(g.ops, kOpsWidth).c_str(), g.ms, 100.0 * g.share, g.gflops, peak_share,
                    g.cold_compile_ms);
    }
}

}  // namespace hfuse::cli
