#include "compose/composer.h"

#include "compose/position_view.h"
#include "exec/value_layout.h"
#include "hfuse/error.h"
#include "ops/attention_lowering.h"
#include "ops/window_util.h"
#include "planner/attention_pattern.h"
#include "planner/graph_util.h"
#include "schedules/attention_template.h"
#include "schedules/conv_template.h"
#include "schedules/default_schedule.h"
#include "schedules/gemm_template.h"
#include "schedules/pool_template.h"
#include "schedules/reduction_template.h"
#include "schedules/schedule_params.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>

namespace hfuse::compose {
namespace {

// The template families, each led by its kind of master.
enum class Family { None, Conv, Gemm, Pool, Reduction, Attention };

bool is_global_pool(const Node &n) {
    return n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool";
}

// The reduction template's shape for global pool `n`: its output, each channel's plane reduced.
schedules::ReductionGroupShape global_pool_shape(const Graph &g, const Node &n) {
    schedules::ReductionGroupShape r;
    r.output = g.type_of(n.outputs[0]).shape;
    r.global_pool = true;
    const Shape &in = g.type_of(n.inputs[0]).shape;
    for (size_t i = 2; i < in.size(); i++) r.reduced *= in[i];
    return r;
}

// A reduction along one axis (Softmax, LayerNormalization over the last axis) of rank >= 1: its
// output, the Halide arg of its axis and that axis's extent.
schedules::ReductionGroupShape axis_reduction_shape(const Graph &g, const Node &n) {
    schedules::ReductionGroupShape r;
    r.output = g.type_of(n.outputs[0]).shape;
    const int rank = static_cast<int>(r.output.size());
    int64_t axis = Attributes(n.attrs).get_int("axis", -1);
    if (axis < 0) axis += rank;
    r.axis_arg = rank - 1 - static_cast<int>(axis);
    r.reduced = r.output[axis];
    return r;
}

Family family_of_template(const std::string &tmpl) {
    if (tmpl == "simple") return Family::None;
    if (tmpl == "conv_xv" || tmpl == "conv_dw" || tmpl == "conv_flat" || tmpl == "conv_cv") return Family::Conv;
    if (tmpl == "gemm_nv" || tmpl == "gemm_dot") return Family::Gemm;
    if (tmpl == "pool") return Family::Pool;
    if (tmpl == "reduction") return Family::Reduction;
    if (tmpl == "attention") return Family::Attention;
    fail_field("schedule.template", "unknown template '" + tmpl +
                                        "' (expected simple, conv_xv, conv_dw, conv_flat, conv_cv, gemm_nv, gemm_dot, "
                                        "pool, reduction or attention)");
}

// The group's template parameters: the plan's, or the defaults for `target` when it gives none.
nlohmann::json group_params(const Graph &g, const FusedGroup &grp, const Halide::Target &target) {
    return grp.schedule.empty() ? default_schedule_params(g, grp, target) : grp.schedule;
}

const char *family_needs(Family f) {
    switch (f) {
    case Family::Conv: return "a group led by a 2-D Conv";
    case Family::Gemm: return "a group led by a Gemm or MatMul";
    case Family::Pool: return "a group led by a MaxPool or AveragePool";
    case Family::Reduction:
        return "a group led by a Softmax, GlobalAveragePool, GlobalMaxPool or LayerNormalization (last axis)";
    case Family::Attention:
        return "a group holding one attention (MatMul, score ops, Softmax, MatMul) whose scores and probabilities "
               "it does not hand out";
    case Family::None: break;
    }
    return "";
}

// How a group fits a template family: what the template needs to know, or why it does not fit.
struct Analysis {
    Family family = Family::None;
    std::string why;  // set when the master's family has a template that does not fit this group
    const Node *master = nullptr;
    std::string tile_value;       // the group output the master is computed per tile of ("" in gemm root mode)
    std::set<std::string> chain;  // the nodes from the master's consumer to tile_value, inlined into the tile
    schedules::ConvGroupShape conv;
    // conv: a pointwise conv of the group feeding the (depthwise) master through `producer_chain`,
    // inlined elementwise ops (conv.producer_input_channels says so too); nullptr when none.
    const Node *producer = nullptr;
    std::set<std::string> producer_chain;
    bool conv_root = false;  // conv: the group's other members are no epilogue it can tile (a reduction,
                             // a Concat, several outputs): the conv at root by its template, the rest simple
    schedules::GemmGroupShape gemm;
    std::vector<const Node *> products;  // gemm: the master and the other Gemm/MatMul members
    schedules::PoolGroupShape pool;
    schedules::ReductionGroupShape reduction;
    std::optional<planner::AttentionPattern> attention;
    schedules::AttentionGroupShape attention_shape;
};

// The members of a group and what the group hands out.
struct Members {
    planner::NodeGraph ng;
    std::set<int> in;
    std::set<int> out;  // placed "output"

    Members(const Graph &g, const FusedGroup &grp) : ng(g) {
        for (const std::string &n : grp.nodes) {
            int i = ng.index.at(n);
            in.insert(i);
            auto it = grp.placement.find(n);
            if (it != grp.placement.end() && it->second == Placement::Output) out.insert(i);
        }
    }
    std::vector<int> consumers_inside(int n) const {
        std::vector<int> r;
        for (int c : ng.consumers[n]) {
            if (in.count(c)) r.push_back(c);
        }
        return r;
    }
};

// The epilogue of `start`: every member the group computes from it, which `step` must accept in
// topological order (a chain such as BN + ReLU, or a DAG such as SiLU's x * sigmoid(x)), ending in
// the one value the group hands out; all of it is inlined into the tile of that value. Returns the
// index of that last member, or -1 with `why` set.
int follow_epilogue(const Graph &g, const Members &m, int start, const std::function<bool(const Node &)> &step,
                    std::set<std::string> &chain, std::string &why) {
    if (m.out.size() != 1) {
        why = "the group hands out " + std::to_string(m.out.size()) + " values";
        return -1;
    }
    const int end = *m.out.begin();
    if (end == start) return start;
    // Node indices are topological: visiting the smallest pending one first meets producers first.
    std::set<int> pending;
    for (int c : m.consumers_inside(start)) pending.insert(c);
    if (pending.empty()) {
        why = "'" + g.nodes[start].name + "' is not read in the group";
        return -1;
    }
    while (!pending.empty()) {
        const int cur = *pending.begin();
        pending.erase(pending.begin());
        if (!step(g.nodes[cur])) {
            why = "'" + g.nodes[cur].name + "' (" + g.nodes[cur].op + ") is no elementwise epilogue";
            return -1;
        }
        chain.insert(g.nodes[cur].name);
        const std::vector<int> inside = m.consumers_inside(cur);
        if (cur != end && inside.empty()) {
            why = "'" + g.nodes[cur].name + "' is not read in the group nor handed out";
            return -1;
        }
        if (cur == end && !inside.empty()) {
            why = "'" + g.nodes[cur].name + "' is handed out and read in the group";
            return -1;
        }
        pending.insert(inside.begin(), inside.end());
    }
    if (!chain.count(g.nodes[end].name)) {
        why = "the group hands out '" + g.nodes[end].name + "', not computed from '" + g.nodes[start].name + "'";
        return -1;
    }
    return end;
}

// An elementwise step that keeps the shape `shape` (a broadcast that widens it is no epilogue).
std::function<bool(const Node &)> elementwise_of_shape(const Graph &g, const Shape &shape) {
    return [&g, shape](const Node &n) {
        PatternKind k = find_op(n.op)->kind;
        return (k == PatternKind::Elementwise || k == PatternKind::Broadcast) && n.outputs.size() == 1 &&
               g.type_of(n.outputs[0]).shape == shape;
    };
}

// The depthwise master's pointwise feed (planner::pointwise_feed: MobileNet-V2's expand + BN + ReLU6,
// or a SiLU/HardSwish diamond, before its depthwise conv), when the group holds all of it, the conv
// placed compute_at and the ops between inlined, none handed out. The depthwise template computes it
// per task, for the task's channels. Sets a.producer and its chain.
void find_pointwise_producer(const Graph &g, const FusedGroup &grp, const Members &mem, Analysis &a) {
    const planner::PointwiseFeed feed = planner::pointwise_feed(mem.ng, mem.ng.index.at(a.master->name));
    if (feed.conv < 0) return;
    // A member without a placement is placed as the templates place it.
    auto placed = [&](int i, std::initializer_list<Placement> allowed) {
        auto it = grp.placement.find(g.nodes[i].name);
        return it == grp.placement.end() || std::find(allowed.begin(), allowed.end(), it->second) != allowed.end();
    };
    if (!mem.in.count(feed.conv) || mem.out.count(feed.conv) || !placed(feed.conv, {Placement::ComputeAt})) return;
    std::set<std::string> chain;
    for (int i : feed.between) {
        if (!mem.in.count(i) || mem.out.count(i) || !placed(i, {Placement::Inline, Placement::Recompute})) return;
        chain.insert(g.nodes[i].name);
    }
    const Node &conv = g.nodes[feed.conv];
    a.producer = &conv;
    a.producer_chain = chain;
    a.conv.producer_input_channels = g.type_of(conv.inputs[0]).shape[1];
}

void analyse_conv(const Graph &g, const FusedGroup &grp, Analysis &a) {
    const Node *m = a.master;
    if (g.type_of(m->outputs[0]).rank() != 4) {
        a.why = "not a 2-D conv";
        return;
    }
    Members mem(g, grp);
    const Shape conv_shape = g.type_of(m->outputs[0]).shape;
    int stride_x = 1, stride_y = 1;
    bool pooled = false, pool_overlaps = false;
    // Elementwise ops keep the conv's shape, then optionally one pool, then elementwise ops of its shape.
    Shape shape = conv_shape;
    auto step = [&](const Node &n) {
        if (n.op == "MaxPool" || n.op == "AveragePool") {
            if (pooled) return false;
            std::vector<int64_t> strides = Attributes(n.attrs).get_ints("strides", {1, 1});
            if (strides.size() != 2) return false;
            stride_y = static_cast<int>(strides[0]);
            stride_x = static_cast<int>(strides[1]);
            const Attributes pool(n.attrs);
            const std::vector<int64_t> window = pool.get_ints("kernel_shape", {});
            const std::vector<int64_t> pads = pool.get_ints("pads", {});
            pool_overlaps = window != strides || pool.get_string("auto_pad", "NOTSET") != "NOTSET" ||
                            std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; }) ||
                            pool.get_ints("dilations", {1, 1}) != std::vector<int64_t>{1, 1};
            pooled = true;
            shape = g.type_of(n.outputs[0]).shape;
            return true;
        }
        return elementwise_of_shape(g, shape)(n);
    };
    int end = follow_epilogue(g, mem, mem.ng.index.at(m->name), step, a.chain, a.why);
    if (end < 0) {
        // No epilogue to tile: the conv is computed at root over its whole output by its template,
        // which reads as fast as the conv alone, rather than by the simple schedule (30x slower).
        a.conv_root = true;
        a.chain.clear();
        end = mem.ng.index.at(m->name);
        shape = conv_shape;
        stride_x = stride_y = 1;
        pooled = pool_overlaps = false;
    }
    a.family = Family::Conv;
    a.tile_value = g.nodes[end].outputs[0];
    a.conv.input = g.type_of(m->inputs[0]).shape;
    a.conv.weight = g.type_of(m->inputs[1]).shape;
    a.conv.output = conv_shape;
    a.conv.group = static_cast<int>(Attributes(m->attrs).get_int("group", 1));
    a.conv.constant_weights = g.is_weight(m->inputs[1]);
    if (const Node *in = g.producer(m->inputs[0])) a.conv.input_in_group = mem.in.count(mem.ng.index.at(in->name)) > 0;
    a.conv.tile_output = g.type_of(a.tile_value).shape;
    a.conv.output_planar = std::find(g.outputs.begin(), g.outputs.end(), a.tile_value) != g.outputs.end();
    for (int c : mem.ng.consumers[end]) a.conv.output_planar = a.conv.output_planar || g.nodes[c].op == "Concat";
    a.conv.tile_stride_x = stride_x;
    a.conv.tile_stride_y = stride_y;
    a.conv.pooled = pooled;
    a.conv.pool_overlaps = pool_overlaps;
    // Known to read outside the input (so its padded input is materialised): a leading pad. Other
    // padding (auto_pad, trailing pads a window may never reach) counts as none here.
    const Attributes attrs(m->attrs);
    const std::vector<int64_t> pads = attrs.get_ints("pads", {});
    a.conv.padded =
        attrs.get_string("auto_pad", "NOTSET") == "NOTSET" && pads.size() == 4 && (pads[0] > 0 || pads[1] > 0);
    const std::vector<int64_t> strides = attrs.get_ints("strides", {1, 1});
    const std::vector<int64_t> dilations = attrs.get_ints("dilations", {1, 1});
    if (strides.size() == 2 && dilations.size() == 2) {
        a.conv.stride_y = static_cast<int>(strides[0]);
        a.conv.stride_x = static_cast<int>(strides[1]);
        a.conv.dilation_y = static_cast<int>(dilations[0]);
        a.conv.dilation_x = static_cast<int>(dilations[1]);
    }
    if (a.conv.group == 1 && strides == std::vector<int64_t>{1, 1}) {
        // Stride 1: the padded width is the output's plus the window's span beyond one column.
        a.conv.flat_width = conv_shape[3] + a.conv.dilation_x * (a.conv.weight[3] - 1);
    }
    if (!a.conv_root) find_pointwise_producer(g, grp, mem, a);
}

// Whether MatMul `n` reads B through a Transpose of its group computed as it is read (inlined), so
// contiguous along K (see k_contiguous_transpose); materialised, B is contiguous along N.
bool transposed_in_group(const Graph &g, const FusedGroup &grp, const Node &n) {
    const Node *t = k_contiguous_transpose(g, grp, n);
    if (!t) return false;
    auto p = grp.placement.find(t->name);
    return p == grp.placement.end() || p->second == Placement::Inline || p->second == Placement::Recompute;
}

// K and whether the operand indexed by the output's innermost dim is contiguous along K.
void gemm_layout(const Graph &g, const FusedGroup &grp, const Node &n, int64_t &k, bool &k_contiguous) {
    const Shape &a = g.type_of(n.inputs[0]).shape;
    if (n.op == "Gemm") {
        Attributes at(n.attrs);
        k = a[at.get_int("transA", 0) ? 0 : 1];
        // A constant B is packed [K, N] by the lowering (ops/linalg_ops.cpp): contiguous along N.
        k_contiguous = at.get_int("transB", 0) != 0 && !g.is_weight(n.inputs[1]);
    } else {  // MatMul: B [..., K, N] is contiguous along N, unless B is a vector (then x indexes A's rows)
        k = a.back();
        k_contiguous = g.type_of(n.inputs[1]).rank() == 1 || transposed_in_group(g, grp, n);
    }
}

void analyse_gemm(const Graph &g, const FusedGroup &grp, Analysis &a) {
    const Shape shape = g.type_of(a.master->outputs[0]).shape;
    if (shape.empty()) {
        a.why = "the product is a scalar";
        return;
    }
    Members mem(g, grp);
    a.gemm.output = shape;
    bool contiguous = false;
    gemm_layout(g, grp, *a.master, a.gemm.k, contiguous);
    a.gemm.k_contiguous = contiguous;
    a.products = {a.master};
    for (const std::string &name : grp.nodes) {
        const Node *n = g.find_node(name);
        if (n == a.master || (n->op != "Gemm" && n->op != "MatMul")) continue;
        if (g.type_of(n->outputs[0]).shape != shape) {
            a.why = "products '" + a.master->name + "' and '" + name + "' differ in shape";
            return;
        }
        int64_t k;
        gemm_layout(g, grp, *n, k, contiguous);
        a.gemm.k = std::max(a.gemm.k, k);
        a.products.push_back(n);
    }
    a.gemm.products = static_cast<int>(a.products.size());
    a.family = Family::Gemm;
    // Per tile of the output when the products feed one elementwise chain to the group's only output.
    std::string why;
    int end = follow_epilogue(g, mem, mem.ng.index.at(a.master->name), elementwise_of_shape(g, shape), a.chain, why);
    bool chain = end >= 0;
    for (size_t i = 1; chain && i < a.products.size(); i++) {
        int p = mem.ng.index.at(a.products[i]->name);
        for (int c : mem.consumers_inside(p)) chain = chain && a.chain.count(g.nodes[c].name);
        chain = chain && !mem.out.count(p);
    }
    a.gemm.chain = chain;
    if (chain) {
        a.tile_value = g.nodes[end].outputs[0];
    } else {
        a.chain.clear();
    }
}

// What the pool template needs of `pool`, computed per tile of a Func of shape `output`; `computed_input`:
// the value its windows read is computed by a member of its group, inlined into it. Padded as its
// lowering pads (ops::pad_spatial): where some window reads outside the input.
schedules::PoolGroupShape pool_group_shape(const Graph &g, const Node &pool, const Shape &output, bool computed_input) {
    schedules::PoolGroupShape s{output, 1};
    const Attributes attrs(pool.attrs);
    const std::vector<int64_t> kernel = attrs.get_ints("kernel_shape");
    for (int64_t k : kernel) s.window_taps *= k;
    const Shape &in = g.type_of(pool.inputs[0]).shape;
    const ops::WindowGeometry w = ops::resolve_window(attrs, Shape(in.begin() + 2, in.end()), kernel,
                                                      attrs.get_int("ceil_mode", 0) == 1, "kernel_shape");
    for (int i = 0; i < w.spatial_rank(); i++) {
        s.stride_product *= w.strides[i];
        s.padded = s.padded || w.reads_outside(i);
    }
    s.window_input = s.padded || computed_input;
    return s;
}

// Whether `pool`'s input is computed by a member of its group inlined into it (a Pad, an activation).
bool pool_input_inlined(const Graph &g, const FusedGroup &grp, const Node &pool) {
    const Node *producer = g.producer(pool.inputs[0]);
    if (!producer) return false;
    auto it = grp.placement.find(producer->name);
    return it != grp.placement.end() && (it->second == Placement::Inline || it->second == Placement::Recompute);
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

void analyse_pool(const Graph &g, const FusedGroup &grp, Analysis &a) {
    const Shape shape = g.type_of(a.master->outputs[0]).shape;
    if (shape.size() < 3) {
        a.why = "the pool has no spatial dims";
        return;
    }
    Members mem(g, grp);
    int end = follow_epilogue(g, mem, mem.ng.index.at(a.master->name), elementwise_of_shape(g, shape), a.chain, a.why);
    if (end < 0) return;
    a.family = Family::Pool;
    a.tile_value = g.nodes[end].outputs[0];
    a.pool = pool_group_shape(g, *a.master, shape, pool_input_inlined(g, grp, *a.master));
}

// A LayerNormalization over the last axis alone: its stages (the sum and the squared deviations, each
// one update along that axis) are placed as Softmax's max and sum are.
bool normalizes_last_axis(const Graph &g, const Node &n) {
    if (n.op != "LayerNormalization") return false;
    const int64_t rank = static_cast<int64_t>(g.type_of(n.outputs[0]).shape.size());
    const int64_t axis = Attributes(n.attrs).get_int("axis", -1);
    return rank > 0 && (axis == -1 || axis == rank - 1);
}

void analyse_reduction(const Graph &g, const FusedGroup &grp, Analysis &a) {
    const Shape shape = g.type_of(a.master->outputs[0]).shape;
    const int rank = static_cast<int>(shape.size());
    schedules::ReductionGroupShape &r = a.reduction;
    if (is_global_pool(*a.master)) {
        r = global_pool_shape(g, *a.master);
    } else {
        r.output = shape;
        if (rank == 0) {
            a.why = "a scalar softmax";
            return;
        }
        r = axis_reduction_shape(g, *a.master);
    }
    Members mem(g, grp);
    int end = follow_epilogue(g, mem, mem.ng.index.at(a.master->name), elementwise_of_shape(g, shape), a.chain, a.why);
    if (end < 0) return;
    a.family = Family::Reduction;
    a.tile_value = g.nodes[end].outputs[0];
}

// A group holding exactly one attention (planner::match_attention), all of it, none of its scores
// or probabilities handed out: the attention template computes it with an online softmax.
bool analyse_attention(const Graph &g, const FusedGroup &grp, Analysis &a) {
    const std::set<std::string> members(grp.nodes.begin(), grp.nodes.end());
    std::optional<planner::AttentionPattern> found;
    for (const std::string &name : grp.nodes) {
        std::optional<planner::AttentionPattern> p = planner::match_attention(g, *g.find_node(name));
        if (!p) continue;
        bool whole = true;
        for (const Node *n : p->nodes()) {
            if (!members.count(n->name)) whole = false;
            auto it = grp.placement.find(n->name);
            if (n != p->output && it != grp.placement.end() && it->second == Placement::Output) whole = false;
        }
        if (!whole) continue;
        if (found) return false;  // two attentions: each lowered as its ops
        found = p;
    }
    if (!found) return false;
    a.attention = found;
    a.attention_shape.scores = g.type_of(found->softmax_input()).shape;
    a.attention_shape.output = g.type_of(found->output->outputs[0]).shape;
    a.attention_shape.depth = g.type_of(found->scores->inputs[0]).shape.back();
    a.family = Family::Attention;
    return true;
}

Analysis analyse(const Graph &g, const FusedGroup &grp) {
    Analysis a;
    a.master = g.find_node(grp.master);
    if (!a.master) return a;
    const std::string &op = a.master->op;
    if (!grp.backend.empty()) {
        a.why = "lowered by backend " + grp.backend;
    } else if (analyse_attention(g, grp, a)) {
        return a;
    } else if (op == "Conv") {
        analyse_conv(g, grp, a);
    } else if (op == "Gemm" || op == "MatMul") {
        analyse_gemm(g, grp, a);
    } else if (op == "MaxPool" || op == "AveragePool") {
        analyse_pool(g, grp, a);
    } else if (op == "Softmax" || is_global_pool(*a.master) || normalizes_last_axis(g, *a.master)) {
        analyse_reduction(g, grp, a);
    }
    return a;
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
std::set<std::string> chain_funcs(const Analysis &a, const exec::LoweredGroup &lowered) {
    std::set<std::string> done;
    for (const exec::LoweredNode &ln : lowered.nodes) {
        if (ln.node == a.master || a.chain.count(ln.node->name)) {
            for (const Halide::Func &f : ln.funcs.outputs) done.insert(f.name());
        }
    }
    return done;
}

// The MaxPool/AveragePool on a conv's chain (analyse_conv allows one), or nullptr.
const exec::LoweredNode *pool_on_chain(const Analysis &a, const exec::LoweredGroup &lowered) {
    for (const exec::LoweredNode &ln : lowered.nodes) {
        if (a.chain.count(ln.node->name) && (ln.node->op == "MaxPool" || ln.node->op == "AveragePool")) return &ln;
    }
    return nullptr;
}

void compose_conv(const Graph &g, const FusedGroup &grp, const Analysis &a, exec::LoweredGroup &lowered,
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
void compose_attention(const Graph &g, const FusedGroup &grp, const Analysis &a, exec::LoweredGroup &lowered,
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
            // Its pointwise producer, computed per task, runs flat (as conv_flat): rows of any width
            // tile by whole vectors, and the depthwise conv's padded planes read it densely.
            const Analysis a = analyse(g, grp);
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
            const Analysis a = analyse(g, grp);
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
            const Analysis a = analyse(g, grp);
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
    const Analysis a = analyse(g, grp);
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
        const Analysis a = analyse(g, grp);
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
        const Analysis a = analyse(g, grp);
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

}  // namespace hfuse::compose

namespace hfuse {

namespace {

// What the plan around a group tells its defaults (schedules::ConvGroupShape's fields of these
// names), found by with_default_schedules from its neighbours' schedules.
struct PlanFacts {
    bool output_read_blocked = false;
    bool input_read_blocked = false;
    bool input_just_made = false;
};

nlohmann::json defaults_for_shapes(const Graph &g, const FusedGroup &grp, const Halide::Target &target,
                                   const PlanFacts &facts = {}) {
    compose::Analysis a = compose::analyse(g, grp);
    a.conv.output_read_blocked = facts.output_read_blocked;
    a.conv.input_read_blocked = facts.input_read_blocked;
    a.conv.input_just_made = facts.input_just_made;
    nlohmann::json p;
    switch (a.family) {
    case compose::Family::Conv:
        p = schedules::conv_default_params(a.conv, target);
        if (a.conv_root && p.value("template", "") != "simple") {
            p["compute"] = "root";
            p["why"] = a.why;
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
        // Only where an image's input fits a core's L2 (512 KB; 1 MB on AVX-512 targets, whose cores
        // have 1-2 MB): with more, the view ran no faster than conv_flat (MobileNet-V2's project conv,
        // 144->24 at 56x56, Zen 5, 2 threads, its block: 0.20-0.21 ms either way, batch 8 likewise;
        // its producer's row bands, which a view's dense planes cannot read, are then worth more:
        // Sapphire Rapids, 0.92x). Within it, the channel tiles inside the row's tiles too (AVX2 above
        // 256 KB): 1x1 128->256 at 28x28, Zen 3, one thread, the view 0.550 ms, conv_flat 0.579 (the
        // view with the channel tiles outside 0.624). Sapphire Rapids, AVX-512, 2 threads, in the
        // networks (bench --against --profile, 2-4 rounds, the changed groups summed): RegNet-Y
        // 3.2GF's 1x1 216->216 at 28x28 (677 KB) 1.14-1.31x, SqueezeNet's squeezes 1.09x, GoogLeNet's
        // 192->64 at 28x28 1.10x.
        const Shape &in = g.type_of(master->inputs[0]).shape;
        const int64_t image_bytes = num_elements(in) / in[0] * 4;
        const int64_t l2_bytes = schedules::target_traits(target).avx512 ? 1 << 20 : 512 * 1024;
        nlohmann::json row = defaults_for_shapes(compose::position_view(g, grp), grp, target);
        if (row.value("template", "") == "conv_xv" && image_bytes <= l2_bytes) {
            row["flatten_positions"] = true;
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
    const Node *master = g.find_node(producer.master);
    if (!master || master->inputs.empty()) return false;
    if (const Node *in = g.producer(master->inputs[0]);
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
    const Node *master = g.find_node(grp.master);
    if (!master || master->inputs.empty()) return false;
    const std::string &v = master->inputs[0];
    const Node *in = g.producer(v);
    if (!in || std::find(grp.nodes.begin(), grp.nodes.end(), in->name) != grp.nodes.end()) return false;
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
    const Node *master = g.find_node(grp.master);
    if (!master || master->inputs.empty()) return false;
    const std::string &v = master->inputs[0];
    const Node *in = g.producer(v);
    if (!in || in->op == "Concat" || !exec::layout_of(layouts, v).planar()) return false;
    const std::vector<std::string> &before = plan.groups[i - 1].nodes;
    return std::find(before.begin(), before.end(), in->name) != before.end();
}

}  // namespace

nlohmann::json default_schedule_params(const Graph &g, const FusedGroup &grp, const Halide::Target &target) {
    return defaults_with_readers(g, grp, target, {});
}

FusedGraph with_default_schedules(FusedGraph plan, const Halide::Target &target) {
    std::vector<size_t> filled;
    std::map<size_t, PlanFacts> facts;  // the filled groups' facts found so far
    for (size_t i = 0; i < plan.groups.size(); i++) {
        FusedGroup &grp = plan.groups[i];
        if (!grp.schedule.empty()) continue;
        grp.schedule = default_schedule_params(plan.graph, grp, target);
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
        PlanFacts f;
        f.input_read_blocked = true;
        nlohmann::json p = defaults_for_shapes(plan.graph, grp, target, f);
        if (p.value("template", "") != "conv_cv") continue;
        grp.schedule = p;
        facts[i] = f;
    }
    // Then, with its readers' schedules known: a conv group whose readers would all read its output
    // channel-blocked, given the defaults for that (conv_cv, its tiles stored as they lie). The
    // readers keep theirs, chosen from shapes alone (a producer comes before its readers).
    for (size_t i : filled) {
        FusedGroup &grp = plan.groups[i];
        const std::string tmpl = grp.schedule.value("template", "");
        if (tmpl != "conv_xv" && tmpl != "conv_flat") continue;
        if (!output_read_blocked(plan, grp, target)) continue;
        PlanFacts f = facts[i];
        f.output_read_blocked = true;
        nlohmann::json p = defaults_with_readers(plan.graph, grp, target, f);
        if (p.value("template", "") != "conv_cv") continue;
        grp.schedule = p;
        facts[i] = f;
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
