// hfuse_model: a whole model as one Halide pipeline (generators/README.md). The model's inputs are the
// Inputs and its outputs the Outputs, in model order, named after them (argument_names()); its weights
// are baked in as constants. Each group of the plan is lowered and scheduled as the JIT executor does
// it, and every value one group hands to another is computed at root (exec::lower_model).
#include "hfuse_generator.h"

#include "hfuse/composer.h"
#include "hfuse/error.h"
#include "hfuse/fusion_rules.h"
#include "hfuse/model_io.h"
#include "hfuse/planner.h"

#include <sstream>
#include <string>
#include <vector>

namespace hfuse::gen {

class ModelGenerator : public HfuseGenerator<ModelGenerator> {
public:
    // The model file (hfuse's JSON format; weight files relative to it). Required.
    GeneratorParam<std::string> model{"model", ""};
    // A plan file (`hfuse plan -o`, or hand-written); when given, `rules` is not used.
    GeneratorParam<std::string> plan{"plan", ""};
    // Rule sets to plan with, one round each, comma-separated: built-in names (x86, tvm, none) or files.
    GeneratorParam<std::string> rules{"rules", "x86"};

    Graph build_graph() override {
        const std::string path = model;
        if (path.empty()) throw Error("GeneratorParam 'model' must name a model file (model=path/to/model.json)");
        return load_model(path);
    }

    FusedGraph build_plan(const Graph &graph, const Halide::Target &target) override {
        const std::string plan_file = plan;
        if (!plan_file.empty()) return with_default_schedules(read_plan_for_model(plan_file, graph), target);
        std::vector<RuleSet> rounds;
        std::stringstream ss(static_cast<std::string>(rules));
        for (std::string r; std::getline(ss, r, ',');) {
            if (!r.empty()) rounds.push_back(load_rules(r));
        }
        if (rounds.empty()) throw Error("GeneratorParam 'rules' names no rule set (e.g. rules=x86)");
        return with_default_schedules(plan_fusion(graph, rounds), target);
    }
};

}  // namespace hfuse::gen

HALIDE_REGISTER_GENERATOR(hfuse::gen::ModelGenerator, hfuse_model)
