// The common part of hfuse's generators (see hfuse_generator.h).
#include "hfuse_generator.h"

#include "exec/group_lowering.h"
#include "exec/model_lowering.h"
#include "hfuse/composer.h"
#include "hfuse/error.h"
#include "hfuse/model_io.h"
#include "hfuse/model_pipeline.h"
#include "hfuse/passes.h"
#include "hfuse/planner.h"
#include "ops/halide_util.h"

#include <cctype>
#include <cstdlib>
#include <iostream>
#include <set>

namespace hfuse::gen {

FusedGraph GraphSource::build_plan(const Graph &graph, const Halide::Target &target) {
    return default_plan(graph, target);
}

FusedGraph default_plan(const Graph &graph, const Halide::Target &target) {
    return with_default_schedules(plan_fusion(graph, {load_rules("x86")}), target);
}

Graph graph_from_json(const nlohmann::json &model, const std::string &source) {
    return prepare(parse_model(model, ".", source));
}

std::vector<std::string> argument_names(const Graph &graph) {
    // GeneratorParams of hfuse's generators cannot also name an argument.
    return c_argument_names(graph, {"target", "auto_schedule", "machine_params", "model", "plan", "rules"});
}

Halide::Region estimates_for(const Shape &shape) {
    Halide::Region r;
    for (auto it = shape.rbegin(); it != shape.rend(); ++it) r.emplace_back(0, static_cast<int>(*it));
    return r;
}

std::vector<Halide::Func> lower_plan(const FusedGraph &plan, const Graph &model,
                                     const std::vector<Halide::ImageParam> &inputs, const Halide::Target &target,
                                     bool templates, bool estimates) {
    const Graph &g = model;
    if (inputs.size() != g.inputs.size()) throw Error("internal: one Input per model input expected");
    if (plan.graph.outputs != g.outputs) throw Error("internal: the plan's outputs are not the model's");
    if (estimates) {
        for (size_t i = 0; i < inputs.size(); i++) {
            Halide::ImageParam p = inputs[i];
            p.set_estimates(estimates_for(g.inputs[i].shape));
        }
    }
    const exec::BoundValues bound = exec::bind_inputs(g, inputs);
    return exec::lower_model(plan, bound, exec::make_weight_buffers(plan.graph), target, templates).outputs;
}

void fail_generator(const std::string &what) {
    std::cerr << "hfuse generator: error: " << what << "\n";
    std::exit(1);
}

}  // namespace hfuse::gen
