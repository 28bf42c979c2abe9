// The default schedule of each group (default_schedule_params, with_default_schedules in
// include/hfuse/composer.h): its template and parameters, chosen from the group's facts
// (compose/group_facts.h) and, for a plan, from what its neighbours' schedules tell (whether its
// readers read its output channel-blocked, whether its input was just made), with the facts that
// decided it in "why".
#include "hfuse/composer.h"

#include "compose/composer.h"
#include "compose/group_facts.h"
#include "compose/position_view.h"
#include "exec/value_layout.h"
#include "hfuse/error.h"
#include "planner/graph_util.h"
#include "schedules/attention_template.h"
#include "schedules/conv_partition.h"
#include "schedules/conv_template.h"
#include "schedules/default_schedule.h"
#include "schedules/gemm_template.h"
#include "schedules/pool_template.h"
#include "schedules/reduction_template.h"
#include "schedules/schedule_params.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace hfuse {

namespace {

// What the plan around a group tells its defaults (schedules::ConvGroupShape's fields of these
// names), found by with_default_schedules from its neighbours' schedules.
struct PlanFacts {
    bool output_read_blocked = false;
    bool input_read_blocked = false;
    bool input_just_made = false;
    // The conv's input is the value of a node of another group (the position view's graph has it as
    // an input of its own).
    bool input_made = false;
    // The whole model's weights outgrow the shared cache (weights_outgrow_shared_cache): a fact of the
    // model, found once for the plan (the position view's graph holds the group's weights alone).
    bool weights_from_memory = false;
};

// Whether `g`'s weights outgrow the shared cache `target` is assumed to have, so that every run reads
// them from memory (schedules::ConvGroupShape::weights_from_memory).
bool weights_outgrow_shared_cache(const Graph &g, const Halide::Target &target) {
    int64_t bytes = 0;
    for (const auto &[name, constant] : g.weights)
        bytes += num_elements(constant.type.shape) * (constant.type.dtype == DType::Int64 ? 8 : 4);
    return bytes > schedules::target_traits(target).shared_cache_bytes;
}

// The value `grp`'s master reads first (a conv's input), or null when the master has no inputs.
const std::string *master_input(const Graph &g, const FusedGroup &grp) {
    const Node *master = g.find_node(grp.master);
    return master && !master->inputs.empty() ? &master->inputs[0] : nullptr;
}

// The node making the value `grp`'s master reads first where that node is in another group; null for
// a model input or weight, or a value the group computes itself (an inlined prologue).
const Node *input_made_by_another_group(const Graph &g, const FusedGroup &grp) {
    const std::string *input = master_input(g, grp);
    const Node *in = input ? g.producer(*input) : nullptr;
    if (!in || std::find(grp.nodes.begin(), grp.nodes.end(), in->name) != grp.nodes.end()) return nullptr;
    return in;
}

nlohmann::json defaults_for_shapes(const Graph &g, const FusedGroup &grp, const Halide::Target &target,
                                   const PlanFacts &facts) {
    compose::GroupFacts a = compose::analyse_group(g, grp);
    a.conv.output_read_blocked = facts.output_read_blocked;
    a.conv.input_read_blocked = facts.input_read_blocked;
    a.conv.input_just_made = facts.input_just_made;
    a.conv.input_made = a.conv.input_made || facts.input_made;
    a.conv.weights_from_memory = facts.weights_from_memory;
    nlohmann::json p;
    switch (a.family) {
    case compose::Family::Conv:
        p = schedules::conv_default_params(a.conv, target);
        if (a.conv_root && p.value("template", "") != "simple") {
            p["compute"] = "root";
            p["why"] = "the conv at root, the rest by the simple schedule: " + a.why;
        }
        break;
    case compose::Family::Gemm: p = schedules::gemm_default_params(a.gemm, target); break;
    case compose::Family::Pool: p = schedules::pool_default_params(a.pool, target); break;
    case compose::Family::Reduction: p = schedules::reduction_default_params(a.reduction, target); break;
    case compose::Family::Attention: p = schedules::attention_default_params(a.attention_shape, target); break;
    case compose::Family::None: break;
    }
    if (!p.is_object() || p.value("template", "") == "simple") {
        // The simple schedule, deliberately: the group is injective/elementwise-led (its template), or
        // the master's template does not fit, and "why" says so.
        nlohmann::json s = schedules::simple_params(schedules::root_schedule_defaults(target));
        const std::string why = p.is_object() ? p.value("why", a.why) : a.why;
        if (!why.empty()) s["why"] = why;
        return s;
    }
    return p;
}

// The group's defaults, given what the plan around it tells (e.g. whether every reader of its output
// would read it channel-blocked).
nlohmann::json defaults_with_readers(const Graph &g, const FusedGroup &grp, const Halide::Target &target,
                                     const PlanFacts &facts) {
    nlohmann::json p = defaults_for_shapes(g, grp, target, facts);
    // A pointwise conv whose rows tile badly by (x, y) (conv_flat's): on its group's position view,
    // conv_xv's register tiles run along all positions and the epilogue is stored from the
    // accumulators, where conv_flat's go through its strip (compose/position_view.h). (Rows of whole
    // vectors keep conv_xv over (x, y): not measured on the view.)
    const Node *master = g.find_node(grp.master);
    if (p.value("template", "") == "conv_flat" && !p.contains("compute") && master &&
        planner::is_pointwise_conv(g, *master) && g.type_of(master->outputs[0]).shape[2] > 1 &&
        compose::position_view_blocker(g, grp).empty()) {
        // On AVX-512 targets only where an image's input fits a core's L2 (1 MB): with more, the view
        // ran no faster than conv_flat (MobileNet-V2's project conv, 144->24 at 56x56, Zen 5, 2
        // threads, its block: 0.20-0.21 ms either way, batch 8 likewise; its producer's row bands,
        // which a view's dense planes cannot read, are then worth more: Sapphire Rapids, 0.92x).
        // Sapphire Rapids, 2 threads, in the networks (bench --against --profile, 2-4 rounds, the
        // changed groups summed): RegNet-Y 3.2GF's 1x1 216->216 at 28x28 (677 KB) 1.14-1.31x,
        // SqueezeNet's squeezes 1.09x, GoogLeNet's 192->64 at 28x28 1.10x. On AVX2 targets at any
        // size: past 256 KB the view's channel tiles go inside its row tiles (conv_xv_one_row_defaults),
        // so the image streams through once, and the view beat conv_flat on every group measured
        // (Zen 3, 2 threads, in the networks: RegNet-Y 3.2GF's 216->216 at 28x28 1.34x, Inception-V3's
        // 192->64 at 35x35 1.27x, MobileNet-V2's 144->24 at 56x56 1.25x, its batch 8 1.08x; one
        // thread, 1x1 128->256 at 28x28 alone 0.550 ms against 0.579).
        const Shape &in = g.type_of(master->inputs[0]).shape;
        const int64_t image_bytes = num_elements(in) / in[0] * 4;
        const bool fits = !schedules::target_traits(target).avx512 || image_bytes <= (int64_t{1} << 20);
        PlanFacts view_facts;
        view_facts.input_made = input_made_by_another_group(g, grp) != nullptr;
        view_facts.weights_from_memory = facts.weights_from_memory;
        nlohmann::json row = defaults_for_shapes(compose::position_view(g, grp), grp, target, view_facts);
        if (row.value("template", "") == "conv_xv" && fits) {
            row["flatten_positions"] = true;
            const std::string why = row.value("why", "");
            row["why"] = "on its position view, all positions as one row" + (why.empty() ? "" : ": " + why);
            return row;
        }
    }
    // A conv on a 1x1 plane whose gate multiplies a larger plane in the group (a squeeze-and-
    // excitation block's fc2 + Sigmoid + Mul): the conv at root, the rest by the simple schedule,
    // which vectorizes along rows (28 wide: a vector and a scalar tail of 12); on the position view
    // along all the plane's positions at once.
    if (p.value("compute", "") == "root" && master && g.type_of(master->outputs[0]).rank() == 4) {
        const Shape &out = g.type_of(master->outputs[0]).shape;
        if (out[2] == 1 && out[3] == 1 && compose::group_plane(g, grp) != Shape{1, 1} &&
            compose::position_view_blocker(g, grp).empty()) {
            p["flatten_positions"] = true;
        }
    }
    return p;
}

// Whether every group reading the value `producer` hands out (its only one) would read it
// channel-blocked, as their schedules in `plan` place them, were the producer to store it so, and
// one of them would otherwise copy it blocked (a conv naming an input_block): the copy then goes.
// Not for a conv whose input is computed in its group (an inlined prologue: conv_cv evaluates it
// per broadcast; DenseNet-121's BN + ReLU + 1x1s, 64-256 -> 128 at 56x56, ran 20-40% slower).
bool output_read_blocked(const FusedGraph &plan, const FusedGroup &producer, const Halide::Target &target) {
    const Graph &g = plan.graph;
    const std::string *input = master_input(g, producer);
    if (!input) return false;
    if (const Node *in = g.producer(*input);
        in && std::find(producer.nodes.begin(), producer.nodes.end(), in->name) != producer.nodes.end())
        return false;
    const std::set<std::string> out = handed_out_values(plan, producer);
    if (out.size() != 1) return false;
    const std::string &v = *out.begin();
    if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end() || g.type_of(v).shape.size() != 4)
        return false;
    bool copied = false;
    for (const FusedGroup &grp : plan.groups) {
        if (&grp == &producer) continue;
        std::optional<compose::BlockedExchange> reader;  // analysed only for a group that reads v
        for (const std::string &name : grp.nodes) {
            const Node *n = g.find_node(name);
            if (std::find(n->inputs.begin(), n->inputs.end(), v) == n->inputs.end()) continue;
            if (!reader) reader = compose::blocked_exchange(g, grp, target);
            if (!compose::reads_blocked(*reader, *n, v)) return false;
            copied = copied || (n->name == reader->conv && reader->input_block > 0);
        }
    }
    return copied;
}

// Whether every group reading the value `producer` hands out is a conv group whose conv reads it as its
// input: their tasks are blocks of rows, so conv_dw's two bands of rows (each thread writes the rows its
// own tasks of the reader read back) pay. A reader that splits the value by channels instead (the
// squeeze-excite's global pool and Mul) reads half of it from the other core's cache, and the bands
// recompute the producer's halo rows for nothing: MobileNet-V3's expand + depthwise groups (120
// channels at 28x28, 2 threads) took 0.13-0.15 ms in bands and 0.09-0.14 without, the global pool
// after them 0.009 and 0.004-0.006; the whole network 5.57 and 4.80 ms (6 alternated rounds).
bool readers_split_rows(const FusedGraph &plan, const FusedGroup &producer) {
    const Graph &g = plan.graph;
    const std::set<std::string> out = handed_out_values(plan, producer);
    if (out.size() != 1) return false;
    const std::string &v = *out.begin();
    if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) return false;
    for (const FusedGroup &grp : plan.groups) {
        if (&grp == &producer) continue;
        for (const std::string &name : grp.nodes) {
            const Node *n = g.find_node(name);
            if (std::find(n->inputs.begin(), n->inputs.end(), v) == n->inputs.end()) continue;
            const std::string tmpl = grp.schedule.is_object() ? grp.schedule.value("template", "") : "";
            const bool conv_reader = tmpl == "conv_cv" || tmpl == "conv_xv" || tmpl == "conv_flat";
            if (!conv_reader || name != grp.master || n->inputs[0] != v) return false;
        }
    }
    return true;
}

// Whether the input of `grp`'s master conv comes from a conv_cv group that stores it channel-blocked
// for `grp` alone: that group computes it per tile (not at root, not on its position view, which
// hands out rows), hands out that value alone, and `grp` is its only reader.
bool input_stored_blocked_for(const FusedGraph &plan, const FusedGroup &grp) {
    const Graph &g = plan.graph;
    const Node *in = input_made_by_another_group(g, grp);
    if (!in) return false;
    const std::string &v = *master_input(g, grp);
    for (const FusedGroup &producer : plan.groups) {
        if (std::find(producer.nodes.begin(), producer.nodes.end(), in->name) == producer.nodes.end()) continue;
        const nlohmann::json &p = producer.schedule;
        try {
            if (!p.is_object() || p.value("template", "") != "conv_cv" || p.contains("compute") ||
                compose::flattens_positions(p) || handed_out_values(plan, producer) != std::set<std::string>{v})
                return false;
        } catch (const Error &) {
            return false;  // compose_group reports it, naming the field
        }
        for (const FusedGroup &other : plan.groups) {
            if (&other == &grp || &other == &producer) continue;
            for (const std::string &name : other.nodes) {
                const Node *n = g.find_node(name);
                if (std::find(n->inputs.begin(), n->inputs.end(), v) != n->inputs.end()) return false;
            }
        }
        return true;
    }
    return false;
}

// Whether the conv of plan.groups[i], a conv_cv group copying its input channel-blocked
// (input_block), reads a planar value the group right before it computed, not a Concat's
// (schedules::ConvGroupShape::input_just_made).
bool input_just_made(const FusedGraph &plan, size_t i, const exec::ValueLayouts &layouts) {
    const FusedGroup &grp = plan.groups[i];
    const nlohmann::json &p = grp.schedule;
    if (i == 0 || !p.is_object() || p.value("template", "") != "conv_cv" || p.contains("compute") ||
        p.value("input_block", 0) == 0)
        return false;
    const Graph &g = plan.graph;
    const std::string *input = master_input(g, grp);
    if (!input) return false;
    const std::string &v = *input;
    const Node *in = g.producer(v);
    if (!in || in->op == "Concat" || !exec::layout_of(layouts, v).planar()) return false;
    const std::vector<std::string> &before = plan.groups[i - 1].nodes;
    return std::find(before.begin(), before.end(), in->name) != before.end();
}

}  // namespace

nlohmann::json default_schedule_params(const Graph &g, const FusedGroup &grp, const Halide::Target &target) {
    PlanFacts model;
    model.weights_from_memory = weights_outgrow_shared_cache(g, target);
    return defaults_with_readers(g, grp, target, model);
}

FusedGraph with_default_schedules(FusedGraph plan, const Halide::Target &target) {
    PlanFacts model;  // what the whole model tells every group
    model.weights_from_memory = weights_outgrow_shared_cache(plan.graph, target);
    std::vector<size_t> filled;
    std::map<size_t, PlanFacts> facts;  // the filled groups' facts found so far
    for (size_t i = 0; i < plan.groups.size(); i++) {
        FusedGroup &grp = plan.groups[i];
        if (!grp.schedule.empty()) continue;
        grp.schedule = defaults_with_readers(plan.graph, grp, target, model);
        facts[i] = model;
        filled.push_back(i);
    }
    // A depthwise conv on conv_dw whose input a conv_cv group stores for it alone: conv_cv's, reading
    // it channel-blocked in place (schedules::depthwise_takes_cv). Not where the producer would have to
    // turn conv_cv for it: the expand convs before the stride-2 depthwise convs of MobileNet-V2 and
    // MnasNet (16-40 input channels at 28x28 to 112x112) ran slower on conv_cv than on conv_xv by more
    // than their depthwise convs gained (Sapphire Rapids, AVX-512, 2 threads, in the network,
    // interleaved: MobileNet-V2's 24->144 at 56x56 0.140 -> 0.210 ms, its depthwise 0.071 -> 0.090),
    // where behind a conv_cv producer each depthwise gained (MobileNet-V3's 5x5 on 672 channels at
    // 14x14 0.109 -> 0.032 ms, MnasNet's 0.081 -> 0.029, EfficientNet-B0's 0.155 -> 0.067,
    // MobileNet-V2's 3x3 stride 2 on 576 0.034 -> 0.018).
    for (size_t i : filled) {
        FusedGroup &grp = plan.groups[i];
        if (grp.schedule.value("template", "") != "conv_dw" || grp.schedule.contains("producer_tile_c") ||
            grp.schedule.contains("compute") || !input_stored_blocked_for(plan, grp))
            continue;
        PlanFacts f = facts[i];
        f.input_read_blocked = true;
        nlohmann::json p = defaults_for_shapes(plan.graph, grp, target, f);
        if (p.value("template", "") != "conv_cv") continue;
        grp.schedule = p;
        facts[i] = f;
    }
    // Group i's defaults given one more fact about the plan around it, taken where they are conv_cv's.
    auto take_cv_defaults_with = [&](size_t i, bool PlanFacts::*fact) {
        PlanFacts f = facts[i];
        f.*fact = true;
        nlohmann::json p = defaults_with_readers(plan.graph, plan.groups[i], target, f);
        if (p.value("template", "") != "conv_cv") return;
        plan.groups[i].schedule = p;
        facts[i] = f;
    };
    // Then, with its readers' schedules known: a conv group whose readers would all read its output
    // channel-blocked, given the defaults for that (conv_cv, its tiles stored as they lie). The
    // readers keep theirs, chosen from shapes alone (a producer comes before its readers).
    for (size_t i : filled) {
        const std::string tmpl = plan.groups[i].schedule.value("template", "");
        if ((tmpl == "conv_xv" || tmpl == "conv_flat") && output_read_blocked(plan, plan.groups[i], target))
            take_cv_defaults_with(i, &PlanFacts::output_read_blocked);
    }
    // Then a conv_cv group whose input a conv_cv group now stores for it alone: its defaults for
    // reading that input channel-blocked (its register tile fitting the registers, so that the blocks
    // are read unrolled; ResNeXt-50's 1x1s after its grouped 3x3s).
    for (size_t i : filled) {
        const FusedGroup &grp = plan.groups[i];
        if (grp.schedule.value("template", "") == "conv_cv" && !grp.schedule.contains("compute") &&
            !facts[i].input_read_blocked && input_stored_blocked_for(plan, grp))
            take_cv_defaults_with(i, &PlanFacts::input_read_blocked);
    }
    // Then a conv_cv group whose input the plan stores channel-blocked though other groups read it too
    // (exec::choose_value_layouts: every reader can read it so; a bottleneck block's output, read by
    // the next block's first 1x1 and by that block's residual Add), or whose conv runs at root (a
    // network's last conv before its global pool, after a conv_cv), where its defaults, chosen for a
    // planar input, have a register tile that does not fit the registers: the template then reads the
    // blocks channel by channel (schedules::register_tile_fits). Its defaults for the blocked input
    // instead, kept where the input stays blocked under them. Zen 3, AVX2, 2 threads: three ResNeXt-50
    // layer4 blocks, the 1x1 2048->1024 at 7x7 after a block (3 x 4 tiles) 2.32-2.49 ms, with the
    // defaults for its blocked input (3 x 3) 1.74-1.80, the same conv reading the planar model input
    // 1.95; in ResNeXt-50, layer4.1's 2.43 -> 1.82 ms; MobileNet-V2 at batch 8, its 320->1280 at 7x7
    // at root before the pool, 4.92-4.95 -> 2.86-3.19 ms. The same defaults for groups whose tiles fit
    // (they change only the input copy) moved ResNeXt-50's and RegNet-Y 800MF's 1x1s 0.97-1.02x.
    if (!filled.empty()) {
        std::map<size_t, std::pair<nlohmann::json, PlanFacts>> before;
        const schedules::TargetTraits tt = schedules::target_traits(target);
        const auto tile_fits = [&](const nlohmann::json &p) {
            return schedules::register_tile_fits({p.value("tile_positions", 1), p.value("tile_c_vectors", 1)},
                                                 p.value("vector_width", tt.vector_width), tt);
        };
        const auto input_stored_blocked = [&](const exec::ValueLayouts &layouts, size_t i) {
            const std::string *input = master_input(plan.graph, plan.groups[i]);
            return input && exec::layout_of(layouts, *input).block > 0;
        };
        try {
            // The layouts only where a group could take the defaults (none under AVX-512: its tiles fit).
            std::vector<size_t> candidates;
            for (size_t i : filled) {
                const nlohmann::json &p = plan.groups[i].schedule;
                if (p.value("template", "") == "conv_cv" && !schedules::conv_cv_winograd(p) &&
                    !facts[i].input_read_blocked && !tile_fits(p))
                    candidates.push_back(i);
            }
            const exec::ValueLayouts layouts =
                candidates.empty() ? exec::ValueLayouts{} : exec::choose_value_layouts(plan, target);
            for (size_t i : candidates) {
                if (!input_stored_blocked(layouts, i)) continue;
                before[i] = {plan.groups[i].schedule, facts[i]};
                take_cv_defaults_with(i, &PlanFacts::input_read_blocked);
            }
            if (!before.empty()) {
                const exec::ValueLayouts after = exec::choose_value_layouts(plan, target);
                for (const auto &[i, old] : before) {
                    if (input_stored_blocked(after, i)) continue;
                    plan.groups[i].schedule = old.first;
                    facts[i] = old.second;
                }
            }
        } catch (const Error &) {
            // A schedule of the plan's own is wrong: compose_group reports it, naming the field.
        }
    }
    for (size_t i : filled) {
        FusedGroup &grp = plan.groups[i];
        if (grp.schedule.contains("row_bands") && !readers_split_rows(plan, grp)) grp.schedule.erase("row_bands");
    }
    // Last, with every group's layout known: a conv_cv group reading a planar value the group right
    // before it made, which it may read in place (schedules::conv_cv_input_copy_block). Only for 32
    // vector registers, where the template's rule applies.
    if (filled.empty() || schedules::target_traits(target).vector_registers < 32) return plan;
    exec::ValueLayouts layouts;
    try {
        layouts = exec::choose_value_layouts(plan, target);
    } catch (const Error &) {
        return plan;  // a schedule of the plan's own is wrong: compose_group reports it, naming the field
    }
    for (size_t i : filled) {
        if (!input_just_made(plan, i, layouts)) continue;
        PlanFacts f = facts[i];
        f.input_just_made = true;
        nlohmann::json p = defaults_with_readers(plan.graph, plan.groups[i], target, f);
        if (p.value("template", "") == "conv_cv") plan.groups[i].schedule = p;
    }
    return plan;
}

}  // namespace hfuse
