#include "compose/composer.h"

#include "compose/group_facts.h"
#include "compose/position_view.h"
#include "hfuse/error.h"
#include "ops/attention_lowering.h"
#include "ops/window_util.h"
#include "schedules/attention_template.h"
#include "schedules/conv_template.h"
#include "schedules/default_schedule.h"
#include "schedules/gemm_template.h"
#include "schedules/pool_template.h"
#include "schedules/reduction_template.h"
#include "schedules/schedule_params.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

namespace hfuse::compose {
namespace {

// The group's template parameters: the plan's, or the defaults for `target` when it gives none.
nlohmann::json group_params(const Graph &g, const FusedGroup &grp, const Halide::Target &target) {
    return grp.schedule.empty() ? default_schedule_params(g, grp, target) : grp.schedule;
}

// The Func a pool's windows read that its template may place: its padded input, else the value it
// reads where a member inlined into it computes that; undefined where it reads the group's input.
Halide::Func pool_window_input(const Graph &g, const FusedGroup &grp, const exec::LoweredGroup &lowered,
                               const exec::LoweredNode &pool) {
    if (auto it = pool.funcs.parts.find("padded_input"); it != pool.funcs.parts.end()) return it->second;
    if (!pool_input_inlined(g, grp, *pool.node)) return Halide::Func();
    auto it = lowered.values.find(pool.node->inputs[0]);
    return it == lowered.values.end() ? Halide::Func() : it->second;
}

const exec::LoweredNode &lowered_node(const exec::LoweredGroup &lowered, const Node *n) {
    for (const exec::LoweredNode &ln : lowered.nodes) {
        if (ln.node == n) return ln;
    }
    throw Error("internal: node '" + n->name + "' was not lowered with its group");
}

size_t output_index(const exec::LoweredGroup &lowered, const std::string &value) {
    for (size_t i = 0; i < lowered.output_values.size(); i++) {
        if (lowered.output_values[i] == value) return i;
    }
    throw Error("internal: '" + value + "' is not an output of its group");
}

// The group output `value` as a pure Func a template can tile: itself, or (for an output with an
// update definition, a product or a pool, or `always`) a copy that replaces it as the pipeline output.
Halide::Func pure_output(const Graph &g, exec::LoweredGroup &lowered, const std::string &value, bool always = false) {
    const size_t i = output_index(lowered, value);
    Halide::Func f = lowered.output_funcs[i];
    if (!f.has_update_definition() && !always) return f;
    Halide::Func copy(f.name() + "_tile");
    copy(f.args()) = f(f.args());
    exec::pin_output_shape(copy, g.type_of(value).shape);
    lowered.output_funcs[i] = copy;
    return copy;
}

// `f`, the Func of `value`, materialised at root through a wrapper its consumers read, bounded to the
// whole `shape` whatever part of it they read (its template's tiles must fit); if the group hands out
// `value`, it reaches the group's output through a copy (which reads the wrapper: `f` itself, if pure
// like a flat conv's view, is then inlined into the wrapper alone). For a master no epilogue is tiled with.
Halide::Func root_wrapper(const Graph &g, exec::LoweredGroup &lowered, const std::string &value, Halide::Func f,
                          const Shape &shape) {
    for (const std::string &v : lowered.output_values) {
        if (v == value) pure_output(g, lowered, value, /*always=*/true);
    }
    Halide::Func wrapper = f.in();
    const std::vector<Halide::Var> args = wrapper.args();
    for (size_t d = 0; d < args.size(); d++) wrapper.bound(args[d], 0, static_cast<int>(shape[args.size() - 1 - d]));
    wrapper.compute_root();
    return wrapper;
}

// The simple schedule: inlined members stay inline (Halide's default), every other member and every
// group output is its own root stage. Members with a reduction cannot be inlined and are rooted too.
// A global pool among them takes the reduction template's schedule, whatever the group's template
// (channels in parallel tasks, its plane summed in vector lanes): Inception-V3's GlobalAveragePool
// 2048x8x8 with its Flatten, 2 threads, as the simple schedule's root stage 0.042 ms on Sapphire Rapids
// (0.024 in a group of its own), 0.21 ms on Zen 4, where this schedule takes 0.022-0.026 ms. Funcs
// named in `done` are left alone (a template scheduled them).
void schedule_by_placement(const Graph &g, const FusedGroup &plan, exec::LoweredGroup &group,
                           const schedules::RootScheduleParams &params, std::set<std::string> done,
                           const Halide::Target &target) {
    auto root = [&](Halide::Func f, const Shape &shape) {
        if (done.insert(f.name()).second) schedules::schedule_root_stage(f, shape, params);
    };
    for (exec::LoweredNode &ln : group.nodes) {
        Placement p = plan.placement.count(ln.node->name) ? plan.placement.at(ln.node->name) : Placement::Root;
        for (size_t i = 0; i < ln.node->outputs.size(); i++) {
            Halide::Func f = ln.funcs.outputs[i];
            const bool inlined = p == Placement::Inline || p == Placement::Recompute;
            const Shape &shape = g.type_of(ln.node->outputs[i]).shape;
            if (is_global_pool(*ln.node) && !done.count(f.name())) {
                const schedules::ReductionGroupShape pool = global_pool_shape(g, *ln.node);
                Halide::Func w = root_wrapper(g, group, ln.node->outputs[i], f, shape);
                schedules::schedule_global_pool(w, f, pool, schedules::reduction_default_params(pool, target), target);
                done.insert(f.name());
                done.insert(w.name());
            } else if (ln.node->op == "Softmax" && !inlined && !shape.empty() && !done.count(f.name())) {
                // A Softmax behind a product computed at root (attention's scores): its stages per row,
                // as in a group of its own, rather than the simple schedule's root stages. Transformer
                // encoder (64 tokens, 8 heads), Zen 4, 2 threads: scores + softmax 0.24 -> 0.155 ms a
                // layer, the encoder 0.93x -> 0.97-0.98x ONNX Runtime.
                const schedules::ReductionGroupShape r = axis_reduction_shape(g, *ln.node);
                Halide::Func w = root_wrapper(g, group, ln.node->outputs[i], f, shape);
                schedules::schedule_softmax(w, ln.funcs.stages, r, schedules::reduction_default_params(r, target),
                                            target);
                done.insert(f.name());
                done.insert(w.name());
                for (const Halide::Func &st : ln.funcs.stages) done.insert(st.name());
            } else if (!inlined || f.has_update_definition()) {
                root(f, shape);
            }
        }
        for (Halide::Func &s : ln.funcs.stages) {
            if (done.insert(s.name()).second) schedules::schedule_root_intermediate(s, params);
        }
    }
    for (size_t i = 0; i < group.output_funcs.size(); i++) {
        root(group.output_funcs[i], g.type_of(group.output_values[i]).shape);
    }
}

// The names of the chain's Funcs (inlined into the tile) and of everything else a template placed.
std::set<std::string> chain_funcs(const GroupFacts &a, const exec::LoweredGroup &lowered) {
    std::set<std::string> done;
    for (const exec::LoweredNode &ln : lowered.nodes) {
        if (ln.node == a.master || a.chain.count(ln.node->name)) {
            for (const Halide::Func &f : ln.funcs.outputs) done.insert(f.name());
        }
    }
    return done;
}

// The MaxPool/AveragePool on a conv's chain (analyse_conv allows one), or nullptr.
const exec::LoweredNode *pool_on_chain(const GroupFacts &a, const exec::LoweredGroup &lowered) {
    for (const exec::LoweredNode &ln : lowered.nodes) {
        if (a.chain.count(ln.node->name) && (ln.node->op == "MaxPool" || ln.node->op == "AveragePool")) return &ln;
    }
    return nullptr;
}

void compose_conv(const Graph &g, const FusedGroup &grp, const GroupFacts &a, exec::LoweredGroup &lowered,
                  const nlohmann::json &params, const schedules::RootScheduleParams &rest,
                  const Halide::Target &target) {
    const exec::LoweredNode &conv = lowered_node(lowered, a.master);
    Halide::Func conv_func = conv.funcs.outputs[0];
    // conv_flat and conv_cv schedule the conv lowered in their form; its output Func, a view, is inlined.
    Halide::Func scheduled = conv_func;
    const std::string tmpl = params.value("template", "");
    if (tmpl == "conv_flat" || tmpl == "conv_cv") {
        const char *part =
            tmpl == "conv_flat" ? "flat" : (schedules::conv_cv_winograd(params) ? "wino_output" : "blocked");
        auto it = conv.funcs.parts.find(part);
        if (it == conv.funcs.parts.end()) {
            fail_field("schedule.template", tmpl + " needs the conv lowered as its \"" + part +
                                                "\" (lower_group's lowerings, from compose::op_lowerings)");
        }
        scheduled = it->second;
    }
    auto padded = conv.funcs.parts.find("padded_input");
    Halide::Func padded_func = padded == conv.funcs.parts.end() ? Halide::Func() : padded->second;
    schedules::ConvGroupShape shape = a.conv;
    shape.padded = padded_func.defined();
    if (auto it = lowered.layouts.find(a.master->inputs[0]); it != lowered.layouts.end()) {
        shape.input_stored_block = it->second.block;
    }
    // conv_dw's pointwise producer, lowered flat, and everything it places (its view and epilogue inlined).
    Halide::Func producer;
    std::set<std::string> producer_funcs;
    if (a.producer && tmpl == "conv_dw") {
        const exec::LoweredNode &p = lowered_node(lowered, a.producer);
        auto flat = p.funcs.parts.find("flat");
        if (flat == p.funcs.parts.end()) {
            throw Error("internal: conv_dw's producer '" + a.producer->name +
                        "' was not lowered flat (compose::op_lowerings)");
        }
        producer = flat->second;
        for (const exec::LoweredNode &ln : lowered.nodes) {
            if (ln.node != a.producer && !a.producer_chain.count(ln.node->name)) continue;
            for (const Halide::Func &f : ln.funcs.outputs) producer_funcs.insert(f.name());
        }
    } else {
        shape.producer_input_channels = 0;
    }
    if (a.conv_root && params.value("compute", "") != "root") {
        fail_field("schedule.compute", "must be \"root\": " + a.why);
    }
    if (params.contains("compute")) {
        // At root over its whole output by its template; the rest of the group (also an epilogue it
        // could have been tiled with: conv_cv's conv before a pool) by the simple schedule, but for a
        // pool on the chain.
        schedules::param_choice(params, "compute", {"root"});
        Halide::Func wrapper = root_wrapper(g, lowered, a.master->outputs[0], conv_func, a.conv.output);
        schedules::schedule_conv(wrapper, scheduled, padded_func, {}, schedules::conv_at_root(shape), params, target,
                                 producer, conv.funcs.parts);
        std::set<std::string> done = {conv_func.name(), wrapper.name()};
        if (const exec::LoweredNode *pool = a.conv.pooled ? pool_on_chain(a, lowered) : nullptr) {
            // By the pool template's defaults (3x3 stride 2 over 64x112x112, the ResNet stem's: 0.19 ms,
            // the simple schedule 0.33 ms), the epilogues after it inlined.
            Halide::Func tile = pure_output(g, lowered, a.tile_value);
            const schedules::PoolGroupShape pool_shape = pool_group_shape(g, *pool->node, g.type_of(a.tile_value).shape,
                                                                          pool_input_inlined(g, grp, *pool->node));
            schedules::schedule_pool(tile, pool->funcs.outputs[0], pool_window_input(g, grp, lowered, *pool),
                                     pool_shape, schedules::pool_default_params(pool_shape, target), target);
            done = chain_funcs(a, lowered);
            done.insert({tile.name(), wrapper.name()});
        }
        done.insert(producer_funcs.begin(), producer_funcs.end());
        schedule_by_placement(g, grp, lowered, rest, done, target);
        return;
    }
    // The tile loop must enclose every stage of the Funcs computed in it, so an output with a
    // reduction of its own (the conv itself, a pool) is tiled through a pure copy; a pool on the
    // chain is computed per tile too.
    if (auto it = lowered.layouts.find(a.tile_value); it != lowered.layouts.end()) {
        if (tmpl != "conv_cv") throw Error("internal: only conv_cv's tile stores blocked");
        shape.output_block = it->second.block;
    }
    Halide::Func tile = pure_output(g, lowered, a.tile_value);
    std::vector<Halide::Func> per_tile;
    for (const exec::LoweredNode &ln : lowered.nodes) {
        if (!a.chain.count(ln.node->name)) continue;
        for (const Halide::Func &f : ln.funcs.outputs) {
            if (f.has_update_definition()) per_tile.push_back(f);
        }
    }
    schedules::schedule_conv(tile, scheduled, padded_func, per_tile, shape, params, target, producer, conv.funcs.parts);
    std::set<std::string> done = chain_funcs(a, lowered);
    done.insert(tile.name());
    done.insert(producer_funcs.begin(), producer_funcs.end());
    schedule_by_placement(g, grp, lowered, rest, done, target);
}

// The attention's output computed at root by its template (a wrapper its readers read), from the
// Funcs lower_online_attention made; its scores product and their clamped K^T placed by it too. The
// Softmax and the ops between are not computed (the group was lowered by op_lowerings()); the rest
// of the group (Q, K, V's producers, the output's readers) by the simple schedule.
void compose_attention(const Graph &g, const FusedGroup &grp, const GroupFacts &a, exec::LoweredGroup &lowered,
                       const nlohmann::json &params, const schedules::RootScheduleParams &rest,
                       const Halide::Target &target) {
    const exec::LoweredNode &scores = lowered_node(lowered, a.attention->scores);
    const exec::LoweredNode &out = lowered_node(lowered, a.attention->output);
    if (out.funcs.stages.size() != ops::kAttentionStages || !scores.funcs.parts.count("keys") ||
        !scores.funcs.parts.count("queries")) {
        throw Error("internal: group " + grp.name + " was not lowered for the attention template");
    }
    schedules::AttentionFuncs f;
    f.output = root_wrapper(g, lowered, out.node->outputs[0], out.funcs.outputs[0], a.attention_shape.output);
    f.scores = scores.funcs.outputs[0];
    f.keys = scores.funcs.parts.at("keys");
    f.queries = scores.funcs.parts.at("queries");
    f.values = out.funcs.stages[ops::kAttentionValues];
    f.block_max = out.funcs.stages[ops::kAttentionBlockMax];
    f.probs = out.funcs.stages[ops::kAttentionProbs];
    f.block_sum = out.funcs.stages[ops::kAttentionBlockSum];
    f.block_values = out.funcs.stages[ops::kAttentionBlockValues];
    f.state = out.funcs.stages[ops::kAttentionState];
    schedules::schedule_attention(f, a.attention_shape, params, target);
    std::set<std::string> done = {f.output.name(), f.scores.name(), f.keys.name(), f.queries.name()};
    for (const Node *n : a.attention->nodes()) {
        const exec::LoweredNode &ln = lowered_node(lowered, n);
        for (const Halide::Func &x : ln.funcs.outputs) done.insert(x.name());
        for (const Halide::Func &x : ln.funcs.stages) done.insert(x.name());
    }
    schedule_by_placement(g, grp, lowered, rest, done, target);
}

}  // namespace

OpLowerings op_lowerings(const Graph &g, const FusedGroup &grp, const Halide::Target &target) {
    OpLowerings forms;
    if (!grp.backend.empty()) return forms;
    const nlohmann::json params = group_params(g, grp, target);
    if (!params.is_object()) return forms;  // compose_group reports it
    const std::string tmpl = params.value("template", "");
    const Node *master = g.find_node(grp.master);
    ConvLowering l;
    try {
        if (tmpl == "conv_dw") {
            // Its padded planes filled (the pad value, then the input's rows over it, in whole vectors);
            // its pointwise producer, computed per task, runs flat (as conv_flat): rows of any width
            // tile by whole vectors, and the planes read it densely.
            ConvLowering dw;
            dw.padding_fill_lanes = schedules::vector_width_param(params, target, true);
            dw.deinterleave_x = schedules::param_bool_or(params, "deinterleave_x", false);
            forms.conv[grp.master] = dw;
            const GroupFacts a = analyse_group(g, grp);
            if (a.family != Family::Conv || !a.producer) return forms;
            l.form = ConvLowering::Form::Flat;
            forms.conv[a.producer->name] = l;
        } else if (tmpl == "conv_flat") {
            l.form = ConvLowering::Form::Flat;
            forms.conv[grp.master] = l;
        } else if (tmpl == "conv_cv") {
            // The weights are packed for the register tile: its parameters are needed now.
            l.form = ConvLowering::Form::ChannelBlocked;
            l.lanes = schedules::vector_width_param(params, target, true);
            l.tile_blocks = schedules::param_int(params, "tile_c_vectors", 1, 16);
            l.tile_positions = schedules::param_int(params, "tile_positions", 1, 16);
            l.input_block = schedules::conv_cv_input_block(params);
            l.winograd_tile = schedules::conv_cv_winograd_tile(params);
            l.rows_padded = schedules::conv_cv_rows_padded(params);
            forms.conv[grp.master] = l;
        } else if (tmpl == "attention") {
            const GroupFacts a = analyse_group(g, grp);
            if (a.family != Family::Attention) return forms;
            AttentionLowering al;
            al.key_block = schedules::attention_key_block(a.attention_shape, params, target);
            forms.attention[a.attention->scores->name] = al;
            al.role = AttentionLowering::Role::Output;
            al.softmax_input = a.attention->softmax_input();
            forms.attention[a.attention->output->name] = al;
        } else if (tmpl == "gemm_nv") {
            // A constant B packed in panels of the register tile's columns, for every product the
            // tile computes.
            const GroupFacts a = analyse_group(g, grp);
            if (a.family != Family::Gemm) return forms;
            GemmLowering gl;
            gl.panel = schedules::vector_width_param(params, target, true) *
                       schedules::param_int(params, "tile_x_vectors", 1, std::numeric_limits<int>::max());
            for (const Node *product : a.products) forms.gemm[product->name] = gl;
        }
    } catch (Error &e) {
        if (master) e.at_node(master->name, master->op);
        throw;
    }
    return forms;
}

BlockedExchange blocked_exchange(const Graph &g, const FusedGroup &grp, const Halide::Target &target) {
    BlockedExchange e;
    if (!grp.backend.empty()) return e;
    const nlohmann::json params = group_params(g, grp, target);
    if (!params.is_object() || params.value("template", "") != "conv_cv") return e;
    // A group on its position view reads and writes its values planar (as rows).
    try {
        if (flattens_positions(params)) return e;
    } catch (const Error &) {
        return e;  // compose_group reports it, naming the field
    }
    const GroupFacts a = analyse_group(g, grp);
    if (a.family != Family::Conv) return e;  // compose_group reports the misfit
    const Node &conv = *a.master;
    const Shape &in = g.type_of(conv.inputs[0]).shape;
    ops::WindowGeometry geo;
    int winograd_tile = 0;
    try {
        e.vector_width = schedules::vector_width_param(params, target, true);
        e.channel_block = schedules::param_int(params, "channel_block", 1, std::numeric_limits<int>::max());
        e.input_block = schedules::conv_cv_input_block(params);
        winograd_tile = schedules::conv_cv_winograd_tile(params);
        const Attributes attrs(conv.attrs);
        const Shape &w = g.type_of(conv.inputs[1]).shape;
        geo = ops::resolve_window(attrs, Shape(in.begin() + 2, in.end()), std::vector<int64_t>(w.begin() + 2, w.end()),
                                  /*ceil_mode=*/false, "kernel_shape");
    } catch (const Error &) {
        return BlockedExchange();  // compose_group reports it, naming the field
    }
    e.conv = conv.name;
    e.reach_y = static_cast<int>(geo.reach(0));
    e.reach_x = static_cast<int>(geo.reach(1));
    if (winograd_tile > 0) {
        e.reach_y += static_cast<int>(ops::winograd_overreach(geo.output[0], winograd_tile));
        e.reach_x += static_cast<int>(ops::winograd_overreach(geo.output[1], winograd_tile));
    }
    if (a.conv_root || params.contains("compute")) return e;
    e.output = a.tile_value;
    e.epilogue = a.chain;
    return e;
}

bool reads_blocked(const BlockedExchange &reader, const Node &node, const std::string &value) {
    if (reader.epilogue.count(node.name)) return true;
    const bool as_input = node.name == reader.conv && std::count(node.inputs.begin(), node.inputs.end(), value) == 1 &&
                          node.inputs[0] == value;
    const bool padded = reader.reach_x > 0 || reader.reach_y > 0;
    return as_input && (reader.input_block > 0 || !padded);
}

RowBandSplit row_band_split(const Graph &g, const FusedGroup &grp, const Halide::Target &target) {
    if (!grp.backend.empty()) return {};
    const nlohmann::json params = group_params(g, grp, target);
    if (!params.is_object() || params.value("template", "") != "conv_dw" || params.contains("compute")) return {};
    try {
        if (flattens_positions(params)) return {};
        const GroupFacts a = analyse_group(g, grp);
        if (a.family != Family::Conv || a.conv_root) return {};
        return {a.tile_value, schedules::conv_dw_band_row(a.conv, params)};
    } catch (const Error &) {
        return {};  // compose_group reports it, naming the field
    }
}

void compose_group(const Graph &g, const FusedGroup &grp, exec::LoweredGroup &lowered, const Halide::Target &target) {
    const nlohmann::json params = group_params(g, grp, target);
    const Node *master = g.find_node(grp.master);
    try {
        if (!params.is_object()) fail_field("schedule", "expected an object, got " + params.dump());
        const Shape master_shape = master ? g.type_of(master->outputs[0]).shape : Shape{};
        if (flattens_positions(params) && (master_shape.size() != 4 || master_shape[2] != 1)) {
            throw Error("internal: group " + grp.name + " flattens its positions: compose it on group_graph()");
        }
        if (!params.contains("template") || !params["template"].is_string()) {
            fail_field("schedule.template", "missing (expected the name of a template)");
        }
        const std::string tmpl = params["template"].get<std::string>();
        const Family want = family_of_template(tmpl);
        if (want == Family::None) {
            schedule_by_placement(g, grp, lowered, schedules::read_simple_params(params, target), {}, target);
            return;
        }
        const GroupFacts a = analyse_group(g, grp);
        if (a.family != want) {
            fail_field("schedule.template", "template '" + tmpl + "' needs " + family_needs(want) +
                                                (a.why.empty() ? "" : " whose epilogue it can tile; here " + a.why));
        }
        // Members outside the template's reach (producers computed in the group, other outputs) get
        // the simple schedule with the target's defaults.
        const schedules::RootScheduleParams rest = schedules::root_schedule_defaults(target);
        switch (want) {
        case Family::Conv: compose_conv(g, grp, a, lowered, params, rest, target); return;
        case Family::Gemm: {
            std::vector<Halide::Func> products;
            std::set<std::string> done;
            for (const Node *n : a.products) products.push_back(lowered_node(lowered, n).funcs.outputs[0]);
            if (schedules::gemm_computed_per_tile(a.gemm, params)) {
                Halide::Func tile = pure_output(g, lowered, a.tile_value);
                schedules::schedule_gemm(tile, products, a.gemm, params, target);
                done = chain_funcs(a, lowered);
                done.insert(tile.name());
                for (const Halide::Func &f : products) done.insert(f.name());
            } else {
                // Each product materialised at root by its own tiles (a wrapper its consumers read);
                // a product the group hands out reaches the output through a copy.
                for (size_t i = 0; i < products.size(); i++) {
                    Halide::Func wrapper =
                        root_wrapper(g, lowered, a.products[i]->outputs[0], products[i], a.gemm.output);
                    schedules::schedule_gemm(wrapper, {products[i]}, a.gemm, params, target);
                    done.insert(products[i].name());
                    done.insert(wrapper.name());
                }
            }
            schedule_by_placement(g, grp, lowered, rest, done, target);
            return;
        }
        case Family::Pool: {
            Halide::Func pool = lowered_node(lowered, a.master).funcs.outputs[0];
            Halide::Func tile = pure_output(g, lowered, a.tile_value);
            schedules::schedule_pool(tile, pool, pool_window_input(g, grp, lowered, lowered_node(lowered, a.master)),
                                     a.pool, params, target);
            std::set<std::string> done = chain_funcs(a, lowered);
            done.insert(tile.name());
            schedule_by_placement(g, grp, lowered, rest, done, target);
            return;
        }
        case Family::Reduction: {
            const exec::LoweredNode &ln = lowered_node(lowered, a.master);
            Halide::Func tile = pure_output(g, lowered, a.tile_value);
            std::set<std::string> done = chain_funcs(a, lowered);
            if (a.reduction.global_pool) {
                schedules::schedule_global_pool(tile, ln.funcs.outputs[0], a.reduction, params, target);
            } else {
                schedules::schedule_softmax(tile, ln.funcs.stages, a.reduction, params, target);
                for (const Halide::Func &s : ln.funcs.stages) done.insert(s.name());
            }
            done.insert(tile.name());
            schedule_by_placement(g, grp, lowered, rest, done, target);
            return;
        }
        case Family::Attention: compose_attention(g, grp, a, lowered, params, rest, target); return;
        case Family::None: break;
        }
    } catch (Error &e) {
        if (master) e.at_node(master->name, master->op);
        throw;
    }
}

const Graph &group_graph(const Graph &g, const FusedGroup &grp, const Halide::Target &target, Graph &view) {
    if (!grp.backend.empty()) return g;
    const nlohmann::json params = group_params(g, grp, target);
    const Node *master = g.find_node(grp.master);
    try {
        if (!flattens_positions(params)) return g;
        if (std::string why = position_view_blocker(g, grp); !why.empty()) {
            fail_field("schedule.flatten_positions", "the group cannot run on its positions as one row: " + why);
        }
    } catch (Error &e) {
        if (master) e.at_node(master->name, master->op);
        throw;
    }
    view = position_view(g, grp);
    return view;
}

void lower_and_compose(const Graph &g, const FusedGraph &plan, const FusedGroup &grp,
                       const exec::WeightBuffers &weights, const Halide::Target &target) {
    if (!grp.backend.empty()) return;
    const std::set<std::string> live_out = handed_out_values(plan, grp);
    if (live_out.empty()) return;
    Graph view;
    const Graph &lg = group_graph(g, grp, target, view);
    std::vector<const Node *> nodes;
    for (const std::string &n : grp.nodes) nodes.push_back(lg.find_node(n));
    exec::LoweredGroup lowered = exec::lower_group(lg, nodes, live_out, weights, {}, op_lowerings(lg, grp, target));
    compose_group(lg, grp, lowered, target);
}

}  // namespace hfuse::compose

namespace hfuse {

void check_schedules(const FusedGraph &plan, const Halide::Target &target) {
    const exec::WeightBuffers weights = exec::make_weight_buffers(plan.graph);
    for (const FusedGroup &grp : plan.groups) {
        try {
            compose::lower_and_compose(plan.graph, plan, grp, weights, target);
        } catch (Error &e) {
            throw in_group(e, plan, grp);
        } catch (const Halide::Error &e) {
            std::string why = e.what();  // one line
            std::replace(why.begin(), why.end(), '\n', ' ');
            while (!why.empty() && why.back() == ' ') why.pop_back();
            Error error("Halide rejected the group's schedule: " + why);
            throw in_group(error, plan, grp);
        }
    }
}

}  // namespace hfuse
