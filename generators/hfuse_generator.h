// The common part of hfuse's Halide generators (generators/README.md): a generator describes an hfuse
// graph (a named fused kernel built from its GeneratorParams, or a model file) and how to plan it; the
// base class turns that graph into the Generator's Inputs and Outputs (in configure(), since their
// number and ranks depend on the graph) and its pipeline, lowered and scheduled exactly as the JIT
// executor does it (exec::lower_model: the same composer and templates).
//
//   class MyKernel : public hfuse::gen::HfuseGenerator<MyKernel> {
//   public:
//       GeneratorParam<int> channels{"channels", 64};
//       hfuse::Graph build_graph() override { ... a prepared graph whose inputs are the kernel's ... }
//   };
//   HALIDE_REGISTER_GENERATOR(MyKernel, my_kernel)
//
// Every graph input becomes an Input<Buffer<float>> and every graph output an Output<Buffer<float>>, in
// graph order, named after the value (made a C identifier: argument_names()); each is pinned to its
// static shape (dense, extents the ONNX shape reversed), so the compiled function refuses a buffer of
// another shape with a non-zero return code. Weights of the graph are baked in as constants.
//
// With auto_schedule=true (add_halide_library's AUTOSCHEDULER), the Funcs stay unscheduled and every
// Input and Output gets estimates equal to its static shape, for the autoscheduler Halide then runs.
#pragma once

#include "hfuse/fused_graph.h"
#include "hfuse/graph.h"

#include <Halide.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace hfuse::gen {

// What the tests ask a generator (created through Halide's GeneratorRegistry with the same
// GeneratorParams as the build used): the graph it compiles and the plan it lowers.
class GraphSource {
public:
    virtual ~GraphSource() = default;
    // The graph the generated function computes (prepared: validated, shapes inferred): its inputs are
    // the function's inputs and its outputs the function's outputs, in order. Runs the generator's
    // configure() if it has not run (GeneratorParams cannot be read before); a bad GeneratorParam or
    // model throws an Error here.
    virtual const Graph &graph() = 0;
    // The plan the generator lowers for `target`.
    FusedGraph fused_plan(const Halide::Target &target) { return build_plan(graph(), target); }

protected:
    // The graph, from the GeneratorParams (called from configure()).
    virtual Graph build_graph() = 0;
    // The plan: by default the x86 rule set over the graph, with the composer's default schedule
    // parameters for `target` (default_plan()).
    virtual FusedGraph build_plan(const Graph &graph, const Halide::Target &target);
};

// The C parameter names of the generated function: c_argument_names() (hfuse/model_pipeline.h), which
// ModelPipeline uses too, also kept clear of the GeneratorParams of hfuse's generators ("target",
// "auto_schedule", "machine_params", "model", "plan", "rules").
std::vector<std::string> argument_names(const Graph &graph);

// The plan every generator uses unless it says otherwise: plan_fusion with the x86 rules, then the
// composer's default schedule parameters.
FusedGraph default_plan(const Graph &graph, const Halide::Target &target);

// A prepared graph from a model in hfuse's JSON format built in code (`source` names it in errors).
Graph graph_from_json(const nlohmann::json &model, const std::string &source);

// Lowers `plan` (over `model`, or over its rewritten form) with the inputs of `model` read from
// `inputs` (one per input, in order) and returns one Func per output of `model`, in order: scheduled
// by the composer when `templates`, else unscheduled. Pins every input to its static shape; sets
// estimates on the inputs when `estimates`.
std::vector<Halide::Func> lower_plan(const FusedGraph &plan, const Graph &model,
                                     const std::vector<Halide::ImageParam> &inputs, const Halide::Target &target,
                                     bool templates, bool estimates);

// Estimates for a buffer of ONNX shape `shape`: [0, extent) in every Halide dim (shape reversed).
Halide::Region estimates_for(const Shape &shape);

// Reports an error while building a kernel (a bad GeneratorParam or model) on stderr as one line,
// "hfuse generator: error: <what>", and exits with 1 instead of crashing with an uncaught exception.
[[noreturn]] void fail_generator(const std::string &what);

template <typename T>
class HfuseGenerator : public Halide::Generator<T>, public GraphSource {
public:
    const Graph &graph() override {
        in_process_ = true;
        this->ensure_configure_has_been_called();
        return graph_;
    }

    void configure() {
        try {
            graph_ = build_graph();
            names_ = argument_names(graph_);
        } catch (const std::exception &e) {
            if (in_process_) throw;
            fail_generator(e.what());
        }
        size_t k = 0;
        for (const GraphInput &in : graph_.inputs) {
            inputs_.push_back(this->template add_input<Halide::Buffer<float>>(names_[k++], (int)in.shape.size()));
        }
        for (const std::string &v : graph_.outputs) {
            outputs_.push_back(this->template add_output<Halide::Buffer<float>>(names_[k++], graph_.type_of(v).rank()));
        }
    }

    void generate() {
        const Halide::Target target = this->get_target();
        const bool autoschedule = this->get_auto_schedule();
        std::vector<Halide::Func> funcs;
        try {
            FusedGraph fused = build_plan(graph_, target);
            std::vector<Halide::ImageParam> params;
            for (auto *in : inputs_) params.push_back(*in);
            funcs = lower_plan(fused, graph_, params, target, !autoschedule, autoschedule);
        } catch (const std::exception &e) {
            fail_generator(e.what());
        }
        for (size_t i = 0; i < outputs_.size(); i++) {
            *outputs_[i] = funcs[i];
            if (autoschedule) outputs_[i]->set_estimates(estimates_for(graph_.type_of(graph_.outputs[i]).shape));
        }
    }

private:
    bool in_process_ = false;  // asked through graph(): errors are thrown, not reported and exited on
    Graph graph_;
    std::vector<std::string> names_;
    std::vector<Halide::GeneratorInput<Halide::Buffer<float>> *> inputs_;
    std::vector<Halide::GeneratorOutput<Halide::Buffer<float>> *> outputs_;
};

}  // namespace hfuse::gen
