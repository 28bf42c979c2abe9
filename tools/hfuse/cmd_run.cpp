// hfuse run MODEL: run a model under a plan and print or write its outputs.
#include "cli_common.h"
#include "hfuse/model_io.h"

#include <cstdio>

namespace hfuse::cli {
namespace {

struct RunOptions {
    std::string model;
    std::vector<std::string> inputs, outputs;
    PlanChoice plan;
    bool check = false;
};

int run(const RunOptions &o) {
    Graph g = load_model(o.model);
    std::map<std::string, std::string> out_files = bind_files(o.outputs, g.outputs, "--output");
    std::map<std::string, TensorBuffer> inputs = load_inputs(g, o.inputs, !out_files.empty());
    Executor ex(o.plan.make(g));
    auto outputs = ex.run(inputs);
    for (const std::string &name : g.outputs) {
        if (auto it = out_files.find(name); it != out_files.end()) {
            write_f32_file(it->second, outputs.at(name).data(), outputs.at(name).number_of_elements());
        } else if (out_files.empty()) {
            print_summary(name, outputs.at(name));
        }
    }
    if (o.check && !check_against_reference(g, inputs, outputs)) return 1;
    return 0;
}

}  // namespace

Command add_run(CLI::App &app) {
    auto *cmd = app.add_subcommand("run", "run a model and print or write its outputs");
    auto o = std::make_shared<RunOptions>();
    cmd->add_option("MODEL", o->model, "model file (.json)")->required();
    o->plan.add_flags(cmd);
    cmd->add_option("--input", o->inputs, "FILE or NAME=FILE: raw little-endian float32, NCHW order")
        ->allow_extra_args(false);
    cmd->add_option("--output", o->outputs, "FILE or NAME=FILE: write an output as raw float32")
        ->allow_extra_args(false);
    cmd->add_flag("--check", o->check, "compare the outputs with the reference evaluator (1e-4 of scale)");
    return {cmd, [o] { return run(*o); }};
}

}  // namespace hfuse::cli
