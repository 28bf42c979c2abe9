#include "compose/composer.h"

#include "hfuse/error.h"
#include "planner/graph_util.h"
#include "schedules/conv_template.h"
#include "schedules/default_schedule.h"

#include <set>

namespace hfuse::compose {

// What a conv template needs to know about a group, or nothing if the group is not conv-led with a
// single output downstream of the conv (only elementwise ops, then optionally one pool, after it).
struct ConvGroup {
    const Node *conv = nullptr;
    std::string tile_value;  // the group output the conv is computed per tile of
    schedules::ConvGroupShape shape;
};

bool find_conv_group(const Graph &g, const FusedGroup &grp, ConvGroup &out) {
    const Node *m = g.find_node(grp.master);
    if (!m || m->op != "Conv" || g.type_of(m->outputs[0]).rank() != 4 || !grp.backend.empty()) return false;
    // Walk the single-consumer chain from the conv to the group's output.
    planner::NodeGraph ng(g);
    std::set<int> members;
    for (const std::string &n : grp.nodes) members.insert(ng.index.at(n));
    auto handed_out = [&](int n) {
        auto it = grp.placement.find(g.nodes[n].name);
        return it != grp.placement.end() && it->second == Placement::Output;
    };
    int cur = ng.index.at(m->name);
    int stride_x = 1, stride_y = 1;
    for (;;) {
        if (handed_out(cur)) break;
        std::vector<int> inside;
        for (int c : ng.consumers[cur]) {
            if (members.count(c)) inside.push_back(c);
        }
        if (inside.size() != 1) return false;
        cur = inside[0];
        const Node &n = g.nodes[cur];
        PatternKind k = find_op(n.op)->kind;
        if (n.op == "MaxPool" || n.op == "AveragePool") {
            if (stride_x != 1) return false;  // one window consumer
            std::vector<int64_t> strides = Attributes(n.attrs).get_ints("strides", {1, 1});
            if (strides.size() != 2) return false;
            stride_y = static_cast<int>(strides[0]);
            stride_x = static_cast<int>(strides[1]);
        } else if (k != PatternKind::Elementwise && k != PatternKind::Broadcast) {
            return false;
        }
    }
    // Only one value may leave the group, and it must be the end of that chain.
    int live = 0;
    for (int n : members) live += handed_out(n);
    if (live != 1) return false;
    out.conv = m;
    out.tile_value = g.nodes[cur].outputs[0];
    out.shape.input = g.type_of(m->inputs[0]).shape;
    out.shape.weight = g.type_of(m->inputs[1]).shape;
    out.shape.output = g.type_of(m->outputs[0]).shape;
    out.shape.group = static_cast<int>(Attributes(m->attrs).get_int("group", 1));
    out.shape.tile_output = g.type_of(out.tile_value).shape;
    out.shape.tile_stride_x = stride_x;
    out.shape.tile_stride_y = stride_y;
    return true;
}

namespace {

// The simple schedule: inlined members stay inline (Halide's default), every other member and every
// group output is its own root stage. Members with a reduction cannot be inlined and are rooted too.
void schedule_by_placement(const Graph &g, const FusedGroup &plan, exec::LoweredGroup &group,
                           const Halide::Target &target) {
    std::set<std::string> done;
    auto root = [&](Halide::Func f, const Shape &shape) {
        if (done.insert(f.name()).second) schedules::schedule_root_stage(f, shape, target);
    };
    for (exec::LoweredNode &ln : group.nodes) {
        Placement p = plan.placement.count(ln.node->name) ? plan.placement.at(ln.node->name) : Placement::Root;
        for (size_t i = 0; i < ln.node->outputs.size(); i++) {
            Halide::Func f = ln.funcs.outputs[i];
            bool inlined = p == Placement::Inline || p == Placement::Recompute;
            if (!inlined || f.has_update_definition()) root(f, g.type_of(ln.node->outputs[i]).shape);
        }
        for (Halide::Func &s : ln.funcs.stages) {
            if (done.insert(s.name()).second) schedules::schedule_root_intermediate(s, target);
        }
    }
    for (size_t i = 0; i < group.output_funcs.size(); i++) {
        root(group.output_funcs[i], g.type_of(group.output_values[i]).shape);
    }
}

}  // namespace

void compose_group(const Graph &g, const FusedGroup &grp, exec::LoweredGroup &lowered, const Halide::Target &target) {
    nlohmann::json params = grp.schedule.empty() ? hfuse::default_schedule_params(g, grp, target) : grp.schedule;
    const std::string tmpl = params.value("template", "simple");
    ConvGroup cg;
    if (tmpl == "simple" || !find_conv_group(g, grp, cg)) {
        if (tmpl != "simple") {
            throw Error("template '" + tmpl + "' needs a conv-led group with one output").at_field("schedule.template");
        }
        schedule_by_placement(g, grp, lowered, target);
        return;
    }
    const exec::LoweredNode *conv = nullptr;
    for (const exec::LoweredNode &ln : lowered.nodes) {
        if (ln.node == cg.conv) conv = &ln;
    }
    Halide::Func conv_func = conv->funcs.outputs[0];
    auto padded = conv->funcs.parts.find("padded_input");
    Halide::Func padded_func = padded == conv->funcs.parts.end() ? Halide::Func() : padded->second;
    cg.shape.padded = padded_func.defined();
    // The conv is computed per tile of the group's output; when the conv is that output itself, the
    // pipeline output becomes a copy stage for it to be computed at.
    size_t out = 0;
    while (lowered.output_values[out] != cg.tile_value) out++;
    // The tile loop must enclose every stage of the Funcs computed in it, so an output with a
    // reduction of its own (the conv itself, a pool) is tiled through a pure copy.
    Halide::Func tile = lowered.output_funcs[out];
    std::vector<Halide::Func> per_tile;
    if (tile.has_update_definition()) {
        Halide::Func inner = tile;
        tile = Halide::Func(inner.name() + "_tile");
        tile(inner.args()) = inner(inner.args());
        exec::pin_output_shape(tile, g.type_of(cg.tile_value).shape);
        lowered.output_funcs[out] = tile;
        if (inner.name() != conv_func.name()) per_tile.push_back(inner);
    }
    try {
        schedules::schedule_conv(tile, conv_func, padded_func, per_tile, cg.shape, params, target);
    } catch (Error &e) {
        throw e.at_node(cg.conv->name, cg.conv->op);
    }
}

}  // namespace hfuse::compose

namespace hfuse {

nlohmann::json default_schedule_params(const Graph &g, const FusedGroup &grp, const Halide::Target &target) {
    compose::ConvGroup cg;
    if (compose::find_conv_group(g, grp, cg)) {
        // Whether the conv reads outside its input is known once lowered; for the parameters only the
        // shapes matter.
        return schedules::conv_default_params(cg.shape, target);
    }
    return {{"template", "simple"}};
}

FusedGraph with_default_schedules(FusedGraph plan, const Halide::Target &target) {
    for (FusedGroup &grp : plan.groups) {
        if (grp.schedule.empty()) grp.schedule = default_schedule_params(plan.graph, grp, target);
    }
    return plan;
}

}  // namespace hfuse
