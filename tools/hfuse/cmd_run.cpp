// hfuse run MODEL: run a model under a plan and print or write its outputs; --profile times each group
// and sets its GFLOP/s against the machine's FMA peak.
#include "cli_common.h"
#include "hfuse/model_io.h"

#include <cstdio>

namespace hfuse::cli {
namespace {

struct RunOptions {
    ModelArg model;
    std::vector<std::string> inputs, outputs;
    PlanChoice plan;
    bool check = false, profile = false;
    int runs = 10;
};

int run(const RunOptions &o) {
    Graph g = o.model.load();
    std::map<std::string, std::string> out_files = bind_files(o.outputs, g.outputs, "--output");
    // The input files read (and checked) first, then the plan checked and compiled, and only then
    // the generated inputs said: a run refused prints nothing but its error.
    std::map<std::string, TensorBuffer> inputs = load_inputs(g, o.inputs, /*quiet=*/true);
    Executor ex(o.plan.make(g), o.plan.options());
    if (out_files.empty()) say_generated_inputs(g, o.inputs);
    report_fallbacks(ex);
    const std::map<std::string, TensorBuffer> packed = pack_inputs(ex, inputs);
    auto outputs = unpack_outputs(ex, ex.run(packed));
    for (const std::string &name : g.outputs) {
        if (auto it = out_files.find(name); it != out_files.end()) {
            write_f32_file(it->second, outputs.at(name).data(), outputs.at(name).number_of_elements());
        } else if (out_files.empty()) {
            print_summary(name, outputs.at(name));
        }
    }
    if (o.profile) {
        const Profile profile = ex.profile(packed, o.runs);
        const FmaPeak peak = measure_fma_peak();  // after the runs, which it would disturb
        print_profile(profile, group_reports(ex, profile, peak), peak);
        std::printf("  %s\n", kernel_cache_summary_line(ex).c_str());
        const auto stored = ex.stored_io();
        const size_t blocked = count_layouts(ex.value_layouts()).blocked - count_layouts(stored).blocked;
        std::printf("  %zu of the values passed between groups stored channel-blocked%s\n", blocked,
                    blocked ? " (--planar: none)" : "");
        for (const auto &[value, layout] : ex.value_layouts()) {
            if (is_paged_layout(layout)) std::printf("  '%s' stored %s\n", value.c_str(), layout.c_str());
        }
        std::vector<std::string> io;  // model inputs and outputs
        for (const GraphInput &in : g.inputs) io.push_back(in.name);
        io.insert(io.end(), g.outputs.begin(), g.outputs.end());
        for (const std::string &v : o.plan.blocked_io ? io : std::vector<std::string>{}) {
            auto it = stored.find(v);
            std::printf("  model %s '%s' taken %s\n", g.is_input(v) ? "input" : "output", v.c_str(),
                        it == stored.end() ? "dense NCHW" : ("stored " + it->second).c_str());
        }
    }
    if (o.check && !check_against_reference(g, inputs, outputs)) return 1;
    return 0;
}

}  // namespace

Command add_run(CLI::App &app) {
    auto *cmd = app.add_subcommand("run", "run a model and print or write its outputs");
    auto o = std::make_shared<RunOptions>();
    o->model.add(cmd);
    o->plan.add_flags(cmd);
    o->plan.add_schedule_flags(cmd);
    o->plan.add_layout_flag(cmd);
    o->plan.add_runtime_flag(cmd);
    cmd->add_option("--input", o->inputs, "FILE or NAME=FILE: raw little-endian float32, NCHW order")
        ->allow_extra_args(false);
    cmd->add_option("--output", o->outputs, "FILE or NAME=FILE: write an output as raw float32")
        ->allow_extra_args(false);
    cmd->add_flag("--check", o->check, "compare the outputs with the reference evaluator (1e-4 of scale)");
    cmd->add_flag("--profile", o->profile,
                  "time each group (median of --runs runs after a warm-up) and print it: its template, ops, "
                  "ms, share of the run, GFLOP/s and share of the FMA peak of --threads threads (measured after "
                  "the runs)");
    cmd->add_option("--runs", o->runs, "runs --profile times (default 10)")->check(CLI::Range(1, 100000));
    return {cmd, [o] { return run(*o); }};
}

}  // namespace hfuse::cli
