// lower_model(): a plan's groups as one pipeline's Funcs (see model_lowering.h).
#include "exec/model_lowering.h"

#include "compose/composer.h"
#include "hfuse/error.h"
#include "ops/halide_util.h"

#include <map>
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

namespace {

// `f` (a value in its model shape, Halide order (x, y, ...)) read as its position view's row: (q, 0,
// ...) is (q % W, q / W, ...), `width` being W. The ops of a viewed group read their inputs so.
Halide::Func as_row(const Halide::Func &f, int64_t width, int rank) {
    Halide::Func row(Halide::Internal::unique_name(f.name() + "_row"));
    std::vector<Halide::Var> v = ops::make_vars(rank);
    std::vector<Halide::Expr> at = ops::as_exprs(v);
    const Halide::Expr w = static_cast<int>(width);
    at[0] = v[0] % w;
    at[1] = v[0] / w + v[1];
    row(v) = f(at);
    return row;
}

// The inverse: `row` (a value on its position view) read in the model's shape, (x, y, ...) at
// (x + y * W, 0, ...). The groups after a viewed one read its outputs so.
Halide::Func as_plane(const Halide::Func &row, int64_t width, int rank) {
    Halide::Func plane(Halide::Internal::unique_name(row.name() + "_plane"));
    std::vector<Halide::Var> v = ops::make_vars(rank);
    std::vector<Halide::Expr> at = ops::as_exprs(v);
    at[0] = v[0] + v[1] * static_cast<int>(width);
    at[1] = 0;
    plane(v) = row(at);
    return plane;
}

}  // namespace

LoweredModel lower_model(const FusedGraph &plan, const BoundValues &inputs, const WeightBuffers &weights,
                         const Halide::Target &target, bool templates, RowOutputs rows) {
    const Graph &g = plan.graph;
    BoundValues bound = inputs;
    for (const GraphInput &in : g.inputs) {
        if (!bound.count(in.name)) throw Error("internal: no Func for model input '" + in.name + "'");
    }
    std::set<std::string> handed_between;  // values one group hands to another (or returns)
    // Values a group on its position view hands out: its output Funcs and their shapes there.
    std::map<std::string, std::pair<Halide::Func, Shape>> stored_as_row;
    // Values between conv_cv groups handed over channel-blocked, as the Executor stores them, but with
    // no halo: a Func computed at root is computed over everything its readers read, so a halo would
    // be computed (wrongly), not zero. A padded reader copies its input block for block (dense), where
    // a planar value cost its producer a transpose and the reader a gather per vector. Paged planar
    // values are the Executor's allocation (Halide allocates these): dense here.
    ValueLayouts layouts;
    if (templates) {
        for (auto &[value, layout] : choose_value_layouts(plan, target)) {
            if (!layout.planar()) layouts[value] = {layout.block, 0, 0};
        }
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
        // The templates lower and compose a group on its position view where its schedule says so:
        // it reads its inputs, and the groups after it its outputs, through index maps.
        Graph view;
        const Graph *lowered_on = &g;
        if (templates) {
            try {
                lowered_on = &compose::group_graph(g, grp, target, view);
            } catch (Error &e) {
                throw in_group(e, plan, grp);
            }
        }
        const Graph &lg = *lowered_on;
        const bool viewed = &lg != &g;
        BoundValues group_bound = bound;
        if (viewed) {
            for (const GraphInput &in : lg.inputs) {
                const Shape &shape = g.type_of(in.name).shape;
                if (in.shape != shape && bound.count(in.name)) {
                    group_bound[in.name] = as_row(bound.at(in.name), shape.back(), static_cast<int>(shape.size()));
                }
            }
        }
        std::vector<const Node *> nodes;
        for (const std::string &name : grp.nodes) nodes.push_back(lg.find_node(name));
        LoweredGroup lowered;
        try {
            lowered = lower_group(lg, nodes, live_out, weights, group_bound,
                                  templates ? compose::op_lowerings(lg, grp, target) : OpLowerings{}, layouts);
        } catch (Error &e) {
            throw in_group(e, plan, grp);  // the templates' forms read the schedule (op_lowerings)
        }
        if (!lowered.params.empty()) {
            throw Error("internal: group " + grp.name + " reads '" + lowered.input_values[0] +
                        "', which no earlier group computes")
                .in_file(g.source);
        }
        if (templates) {
            try {
                compose::compose_group(lg, grp, lowered, target);
            } catch (Error &e) {
                throw in_group(e, plan, grp);
            }
        }
        for (size_t i = 0; i < lowered.output_values.size(); i++) {
            const std::string &v = lowered.output_values[i];
            const Shape &shape = g.type_of(v).shape;
            if (viewed && lg.type_of(v).shape != shape) {
                stored_as_row[v] = {lowered.output_funcs[i], lg.type_of(v).shape};
                bound[v] = as_plane(lowered.output_funcs[i], shape.back(), static_cast<int>(shape.size()));
            } else {
                bound[v] = lowered.output_funcs[i];
            }
            handed_between.insert(v);
        }
    }

    LoweredModel model;
    model.layouts = layouts;
    std::set<std::string> output_names;
    std::vector<bool> returned_row;  // per output: the row itself, not a copy of it
    for (const std::string &v : g.outputs) {
        Shape shape = g.type_of(v).shape;
        Halide::Func f = bound.at(v);
        auto row = stored_as_row.find(v);
        const bool as_row =
            rows == RowOutputs::AsRows && row != stored_as_row.end() && !output_names.count(row->second.first.name());
        if (as_row) {
            f = row->second.first;
            shape = row->second.second;
        } else if (g.is_input(v) || !output_names.insert(f.name()).second) {
            // Pipeline outputs must be distinct Funcs, and not an input's wrapper.
            f = pure_copy(f, static_cast<int>(shape.size()), halide_name(v, "out_"));
        }
        output_names.insert(f.name());
        pin_output_shape(f, shape);
        model.outputs.push_back(f);
        model.output_shapes.push_back(shape);
        returned_row.push_back(as_row);
    }
    if (templates) {
        // Each group keeps its own loop nests: what it hands out is materialised.
        // A handed value is computed over its whole shape, as in its own group's pipeline: a
        // consumer that reads part of it (a Slice) must not shrink the region the template tiles, or
        // shifted tiles read before their input.
        // A value stored as a row is computed at root there; its plane view, read by the next groups,
        // inlines (a model output is the row itself with RowOutputs::AsRows, else a copy of it).
        for (const std::string &v : handed_between) {
            auto row = stored_as_row.find(v);
            Halide::Func f = row == stored_as_row.end() ? bound.at(v) : row->second.first;
            f.compute_root();
            const std::vector<halide_dimension_t> dims = row == stored_as_row.end()
                                                             ? interior_dims(g.type_of(v).shape, layout_of(layouts, v))
                                                             : interior_dims(row->second.second, ValueLayout{});
            const std::vector<Halide::Var> args = f.args();
            for (size_t k = 0; k < args.size(); k++) f.bound(args[k], dims[k].min, dims[k].extent);
        }
        for (size_t i = 0; i < model.outputs.size(); i++) {
            Halide::Func &f = model.outputs[i];
            f.compute_root();
            if (stored_as_row.count(g.outputs[i]) && !returned_row[i]) {
                // A copy of the row (the generators; an output returned twice): along x in vectors, the
                // planes in parallel (unscheduled, the copy of 1x1 128->256 at 28x28 took longer than
                // the conv). Not schedules::schedule_root_stage: its guarded tail on 28-wide rows made
                // that model 0.163-0.168 ms compiled, against 0.144-0.154 with the last vector shifted
                // inwards.
                const Shape &shape = g.type_of(g.outputs[i]).shape;
                const std::vector<Halide::Var> a = f.args();
                const int vw = target.natural_vector_size<float>();
                f.vectorize(
                    a[0], vw,
                    shape.back() >= vw ? Halide::TailStrategy::ShiftInwards : Halide::TailStrategy::GuardWithIf);
                Halide::Var planes = a.size() > 2 ? a[2] : a.back();
                for (size_t k = 3; k < a.size(); k++) f.fuse(planes, a[k], planes);
                f.parallel(planes);
            }
        }
    }
    return model;
}

}  // namespace hfuse::exec
