// whole_model_plan(): the entire model as one group, for an autoscheduler to make every fusion choice.
#include "hfuse/error.h"
#include "hfuse/executor.h"
#include "hfuse/op_registry.h"
#include "hfuse/passes.h"

#include <algorithm>

namespace hfuse {

FusedGraph whole_model_plan(const Graph &model, bool rewrite) {
    const Graph graph = rewrite ? simplify(model) : model;
    FusedGroup grp;
    grp.name = "whole";
    for (const Node &n : graph.nodes) {
        if (find_op(n.op)->kind == PatternKind::Opaque) {
            throw Error(
                "the whole model cannot be one pipeline: this node is opaque and cannot share a group; "
                "run it with a plan instead")
                .at_node(n.name, n.op)
                .in_file(graph.source);
        }
        grp.nodes.push_back(n.name);
        // Convs, gemms and reductions their own stage (Halide cannot inline a Func with an update);
        // everything else inline (Halide's default), the model's outputs the pipeline's outputs.
        PatternKind kind = find_op(n.op)->kind;
        bool returned = std::any_of(n.outputs.begin(), n.outputs.end(), [&](const std::string &v) {
            return std::find(graph.outputs.begin(), graph.outputs.end(), v) != graph.outputs.end();
        });
        if (!returned && (kind == PatternKind::ComplexOutFusable || kind == PatternKind::Reduction)) {
            grp.placement[n.name] = Placement::Root;
        }
    }
    // The simple schedule applies these placements as they are when the templates schedule the
    // group; an autoscheduler ignores them.
    grp.schedule = {{"template", "simple"}};
    FusedGraph f;
    f.graph = graph;
    if (!grp.nodes.empty()) f.groups.push_back(std::move(grp));  // rewrites may leave nothing to compute
    f.rules = {"whole"};
    f.rewritten = rewrite;
    return check_plan(std::move(f));
}

}  // namespace hfuse
