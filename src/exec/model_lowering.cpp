// lower_model(): a plan's groups as one pipeline's Funcs (see model_lowering.h).
#include "exec/model_lowering.h"

#include "compose/composer.h"
#include "hfuse/error.h"
#include "ops/halide_util.h"

#include <set>

namespace hfuse::exec {

BoundValues bind_inputs(const Graph &graph, const std::vector<Halide::ImageParam> &params) {
    if (params.size() != graph.inputs.size()) throw Error("internal: one ImageParam per model input expected");
    BoundValues bound;
    for (size_t i = 0; i < params.size(); i++) {
        const Shape &shape = graph.inputs[i].shape;
        pin_input_shape(params[i], shape);
        Halide::Func f(Halide::Internal::unique_name(params[i].name() + "_in"));
        std::vector<Halide::Var> vars = ops::make_vars(static_cast<int>(shape.size()));
        f(vars) = params[i](ops::as_exprs(vars));
        bound[graph.inputs[i].name] = f;
    }
    return bound;
}

LoweredModel lower_model(const FusedGraph &plan, const BoundValues &inputs, const WeightBuffers &weights,
                         const Halide::Target &target, bool templates) {
    const Graph &g = plan.graph;
    BoundValues bound = inputs;
    for (const GraphInput &in : g.inputs) {
        if (!bound.count(in.name)) throw Error("internal: no Func for model input '" + in.name + "'");
    }
    std::set<std::string> handed_between;  // values one group hands to another (or returns)
    // Values between conv_cv groups handed over channel-blocked, as the Executor stores them, but with
    // no halo: a Func computed at root is computed over everything its readers read, so a halo would
    // be computed (wrongly), not zero. A padded reader copies its input block for block (dense), where
    // a planar value cost its producer a transpose and the reader a gather per vector.
    ValueLayouts layouts;
    if (templates) {
        for (auto &[value, layout] : choose_value_layouts(plan, target)) layouts[value] = {layout.block, 0, 0};
    }
    for (const FusedGroup &grp : plan.groups) {
        std::set<std::string> live_out = handed_out_values(plan, grp);
        if (live_out.empty()) continue;  // nobody reads it (as in the Executor)
        const Node *master = g.find_node(grp.master);
        if (!grp.backend.empty()) {
            throw Error("group " + grp.name + " is lowered by backend pattern '" + grp.backend +
                        "', whose extern functions exist only in the process that registered them: it cannot "
                        "be part of a compiled model; plan without that backend")
                .at_node(master->name, master->op)
                .in_file(g.source);
        }
        std::vector<const Node *> nodes;
        for (const std::string &name : grp.nodes) nodes.push_back(g.find_node(name));
        LoweredGroup lowered = lower_group(g, nodes, live_out, weights, bound,
                                           templates ? compose::op_lowerings(g, grp, target) : OpLowerings{}, layouts);
        if (!lowered.params.empty()) {
            throw Error("internal: group " + grp.name + " reads '" + lowered.input_values[0] +
                        "', which no earlier group computes")
                .in_file(g.source);
        }
        if (templates) {
            try {
                compose::compose_group(g, grp, lowered, target);
            } catch (Error &e) {
                throw e.at_node(master->name, master->op).in_file(g.source);
            }
        }
        for (size_t i = 0; i < lowered.output_values.size(); i++) {
            bound[lowered.output_values[i]] = lowered.output_funcs[i];
            handed_between.insert(lowered.output_values[i]);
        }
    }

    LoweredModel model;
    model.layouts = layouts;
    std::set<std::string> output_names;
    for (const std::string &v : g.outputs) {
        const Shape &shape = g.type_of(v).shape;
        Halide::Func f = bound.at(v);
        if (g.is_input(v) || !output_names.insert(f.name()).second) {
            // Pipeline outputs must be distinct Funcs, and not an input's wrapper.
            f = pure_copy(f, static_cast<int>(shape.size()), halide_name(v, "out_"));
            output_names.insert(f.name());
        }
        pin_output_shape(f, shape);
        model.outputs.push_back(f);
    }
    if (templates) {
        // Each group keeps its own loop nests: what it hands out is materialised.
        // A handed value is computed over its whole shape, as in its own group's pipeline: a
        // consumer that reads part of it (a Slice) must not shrink the region the template tiles, or
        // shifted tiles read before their input.
        for (const std::string &v : handed_between) {
            Halide::Func f = bound.at(v);
            f.compute_root();
            const std::vector<halide_dimension_t> dims = interior_dims(g.type_of(v).shape, layout_of(layouts, v));
            const std::vector<Halide::Var> args = f.args();
            for (size_t k = 0; k < args.size(); k++) f.bound(args[k], dims[k].min, dims[k].extent);
        }
        for (Halide::Func &f : model.outputs) f.compute_root();
    }
    return model;
}

}  // namespace hfuse::exec
