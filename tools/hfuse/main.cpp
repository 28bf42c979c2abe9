// The hfuse command-line tool. Exit codes: 0 success, 1 bad model/data or failed check, 2 bad usage.
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/model_io.h"
#include "hfuse/op_registry.h"
#include "hfuse/passes.h"
#include "hfuse/plan_report.h"
#include "hfuse/planner.h"
#include "hfuse/random.h"
#include "hfuse/reference.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

namespace {

using namespace hfuse;

#ifndef HFUSE_MODELS_DIR
#define HFUSE_MODELS_DIR "models"
#endif

// A usage error: reported like CLI11's own, exit code 2.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Seed of the generated data for the i-th model input when no --input is given (documented in README).
uint64_t default_input_seed(size_t index) { return 1000 + index; }

// "NAME=FILE" binds a file to a named tensor; a bare "FILE" is allowed when there is exactly one.
std::map<std::string, std::string> bind_files(const std::vector<std::string> &args, const std::vector<std::string> &names,
                                              const std::string &flag) {
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
            throw UsageError(flag + " " + a + ": the model has no tensor named '" + a.substr(0, eq) + "' (it has: " + list + ")");
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
        std::vector<float> data;
        if (auto it = files.find(in.name); it != files.end()) {
            data = read_f32_file(it->second, num_elements(in.shape), "input '" + in.name + "' [" + to_string(in.shape) + "]");
        } else {
            data = uniform_values(num_elements(in.shape), -1.0, 1.0, default_input_seed(i));
            if (!quiet) {
                std::printf("input '%s' [%s]: generated, uniform [-1, 1] seed %" PRIu64 "\n", in.name.c_str(),
                            to_string(in.shape).c_str(), default_input_seed(i));
            }
        }
        inputs[in.name] = tensor_from_data(in.shape, data.data());
    }
    return inputs;
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
        ref_inputs[kv.first] = {shape_of(kv.second),
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

int cmd_info(const std::string &path) {
    Graph g = load_model(path);
    std::printf("model '%s' (%s): %zu nodes\n", g.name.c_str(), path.c_str(), g.nodes.size());
    for (const auto &in : g.inputs) std::printf("  input  %-20s [%s]\n", in.name.c_str(), to_string(in.shape).c_str());
    for (const auto &o : g.outputs) std::printf("  output %-20s [%s]\n", o.c_str(), to_string(g.type_of(o).shape).c_str());
    std::printf("\n%-22s %-20s %-20s %-22s %12s\n", "node", "op", "kind", "output", "MFLOP");
    double total = 0;
    for (const Node &n : g.nodes) {
        double flops = node_flops(g, n);
        total += flops;
        for (size_t i = 0; i < n.outputs.size(); i++) {
            std::printf("%-22s %-20s %-20s %-22s %12.3f\n", i ? "" : n.name.c_str(), i ? "" : n.op.c_str(),
                        i ? "" : to_string(find_op(n.op)->kind), to_string(g.type_of(n.outputs[i]).shape).c_str(),
                        i ? 0.0 : flops / 1e6);
        }
    }
    int64_t weight_bytes = 0;
    for (const auto &kv : g.weights) weight_bytes += num_elements(kv.second.type.shape) * (kv.second.type.dtype == DType::Int64 ? 8 : 4);
    std::printf("\ntotal: %.3f MFLOP, %zu weights (%.1f KiB)\n", total / 1e6, g.weights.size(), weight_bytes / 1024.0);
    return 0;
}

// How `run` (and later `bench`, `compile`) choose the plan they execute.
struct PlanChoice {
    std::string plan_file;           // --plan
    std::vector<std::string> rules;  // --rules, one per round (default: x86)
    bool unfused = false;            // --unfused: the graph as written, one group per op, no rewrites

    void add_flags(CLI::App *cmd) {
        auto *p = cmd->add_option("--plan", plan_file, "run this plan file (from `hfuse plan -o`, or hand-written)");
        auto *r = cmd->add_option("--rules", rules, "plan with these rule sets, one round each: tvm, x86, none or a FILE")
                      ->allow_extra_args(false);
        auto *u = cmd->add_flag("--unfused", unfused, "every op its own stage, no graph rewrites (the baseline)");
        p->excludes(r)->excludes(u);
        r->excludes(u);
    }

    FusedGraph make(const Graph &g) const {
        if (unfused) {
            FusedGraph f = singleton_groups(g);
            f.rules = {"unfused"};
            return f;
        }
        if (!plan_file.empty()) return read_plan(plan_file, simplify(g));
        std::vector<RuleSet> rounds;
        for (const std::string &r : rules.empty() ? std::vector<std::string>{"x86"} : rules) rounds.push_back(load_rules(r));
        return plan_fusion(g, rounds);
    }
};

int cmd_plan(const std::string &model, const PlanChoice &choice, const std::string &out, const std::string &dot) {
    Graph g = load_model(model);
    FusedGraph plan = choice.make(g);
    std::printf("%s", plan_table(plan).c_str());
    if (!out.empty()) {
        write_plan(out, plan);
        std::printf("plan written to %s\n", out.c_str());
    }
    if (!dot.empty()) {
        std::ofstream f(dot);
        if (!(f << plan_dot(plan))) throw Error("cannot write '" + dot + "'");
        std::printf("graph written to %s (render: dot -Tsvg %s -o plan.svg)\n", dot.c_str(), dot.c_str());
    }
    return 0;
}

struct RunOptions {
    std::string model;
    std::vector<std::string> inputs, outputs;
    PlanChoice plan;
    bool check = false;
};

int cmd_run(const RunOptions &o) {
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

// Best time of `runs` runs after one warm-up run, in milliseconds.
double best_run_ms(Executor &ex, const std::map<std::string, TensorBuffer> &inputs, int runs) {
    using clock = std::chrono::steady_clock;
    ex.run(inputs);
    double best = 1e30;
    for (int i = 0; i < runs; i++) {
        auto s = clock::now();
        ex.run(inputs);
        best = std::min(best, std::chrono::duration<double, std::milli>(clock::now() - s).count());
    }
    return best;
}

int cmd_demo(const std::string &path) {
    std::printf("hfuse demo: %s\n\n", path.c_str());
    cmd_info(path);
    Graph g = load_model(path);
    FusedGraph plan = plan_fusion(g, {load_rules("x86")});
    std::printf("\n%s\n", plan_table(plan).c_str());
    auto inputs = load_inputs(g, {}, false);

    Executor fused(plan), unfused(singleton_groups(g));
    bool ok = true;
    for (auto *ex : {&fused, &unfused}) {
        std::printf("%s:\n", ex == &fused ? "fused (x86 plan)" : "unfused");
        ok = check_against_reference(g, inputs, ex->run(inputs)) && ok;
    }
    // Interleaved, so both see the same machine conditions.
    double fused_ms = 1e30, unfused_ms = 1e30;
    for (int round = 0; round < 3; round++) {
        fused_ms = std::min(fused_ms, best_run_ms(fused, inputs, 5));
        unfused_ms = std::min(unfused_ms, best_run_ms(unfused, inputs, 5));
    }
    std::printf("\nfused %.3f ms (%d groups), unfused %.3f ms (%d groups): %.2fx\n", fused_ms, fused.num_groups(),
                unfused_ms, unfused.num_groups(), unfused_ms / fused_ms);
    std::printf("(groups still run with the simple per-placement schedule; the schedule composer comes next)\n");
    std::printf("%s\n", ok ? "demo: OK" : "demo: FAILED");
    return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
    CLI::App app{"hfuse: operator fusion and schedule composition on Halide"};
    app.require_subcommand(1);
    int threads = 0;
    app.add_option("--threads", threads, "Halide worker threads (default: one per core)")->check(CLI::NonNegativeNumber);

    std::string info_model;
    auto *info = app.add_subcommand("info", "print the graph with inferred shapes, pattern kinds and FLOPs");
    info->add_option("MODEL", info_model, "model file (.json)")->required();

    RunOptions run_opts;
    auto *run = app.add_subcommand("run", "run a model and print or write its outputs");
    run->add_option("MODEL", run_opts.model, "model file (.json)")->required();
    run_opts.plan.add_flags(run);
    run->add_option("--input", run_opts.inputs, "FILE or NAME=FILE: raw little-endian float32, NCHW order")
        ->allow_extra_args(false);
    run->add_option("--output", run_opts.outputs, "FILE or NAME=FILE: write an output as raw float32")
        ->allow_extra_args(false);
    run->add_option("--threads", threads, "Halide worker threads (default: one per core)")->check(CLI::NonNegativeNumber);
    run->add_flag("--check", run_opts.check, "compare the outputs with the reference evaluator (1e-4 of scale)");

    std::string plan_model, plan_out, plan_dot_file;
    PlanChoice plan_choice;
    auto *plan = app.add_subcommand("plan", "plan fusion: print the groups, write the plan and a drawing");
    plan->add_option("MODEL", plan_model, "model file (.json)")->required();
    plan_choice.add_flags(plan);
    plan->add_option("-o,--output", plan_out, "write the plan as JSON (feed it back with run --plan)");
    plan->add_option("--dot", plan_dot_file, "write a Graphviz drawing: groups as clusters, masters marked");

    std::string demo_model = std::string(HFUSE_MODELS_DIR) + "/conv_bias_relu_maxpool.json";
    auto *demo = app.add_subcommand("demo", "run the bundled conv+bias+relu+maxpool model and check it");
    demo->add_option("MODEL", demo_model, "model file (default: the bundled one)");

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError &e) {
        int code = app.exit(e);
        return code == 0 ? 0 : 2;
    }
    try {
        set_num_threads(threads);
        if (*info) return cmd_info(info_model);
        if (*run) return cmd_run(run_opts);
        if (*plan) return cmd_plan(plan_model, plan_choice, plan_out, plan_dot_file);
        if (*demo) return cmd_demo(demo_model);
    } catch (const UsageError &e) {
        std::fprintf(stderr, "hfuse: %s\n", e.what());
        return 2;
    } catch (const Error &e) {
        std::fprintf(stderr, "hfuse: error: %s\n", e.what());
        return 1;
    } catch (const Halide::Error &e) {
        std::fprintf(stderr, "hfuse: Halide error: %s\n", e.what());
        return 1;
    } catch (const std::exception &e) {
        std::fprintf(stderr, "hfuse: internal error: %s\n", e.what());
        return 1;
    }
    return 0;
}
