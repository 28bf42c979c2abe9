#include "compose/group_facts.h"

#include "hfuse/error.h"
#include "ops/window_util.h"
#include "planner/graph_util.h"

#include <algorithm>
#include <functional>

namespace hfuse::compose {

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

namespace {

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
void find_pointwise_producer(const Graph &g, const FusedGroup &grp, const Members &mem, GroupFacts &a) {
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

void analyse_conv(const Graph &g, const FusedGroup &grp, GroupFacts &a) {
    const Node *m = a.master;
    if (g.type_of(m->outputs[0]).rank() != 4) {
        a.why = "not a 2-D conv";
        return;
    }
    Members mem(g, grp);
    const Shape conv_shape = g.type_of(m->outputs[0]).shape;
    int stride_x = 1, stride_y = 1;
    bool pooled = false, pool_overlaps = false;
    int64_t reach_y = 1;
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
            const std::vector<int64_t> dilations = pool.get_ints("dilations", {1, 1});
            pool_overlaps = window != strides || pool.get_string("auto_pad", "NOTSET") != "NOTSET" ||
                            std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; }) ||
                            dilations != std::vector<int64_t>{1, 1};
            pooled = true;
            if (!window.empty()) reach_y = (window[0] - 1) * (dilations.empty() ? 1 : dilations[0]) + 1;
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
        reach_y = 1;
    }
    a.family = Family::Conv;
    a.tile_value = g.nodes[end].outputs[0];
    a.conv.input = g.type_of(m->inputs[0]).shape;
    a.conv.weight = g.type_of(m->inputs[1]).shape;
    a.conv.output = conv_shape;
    a.conv.group = static_cast<int>(Attributes(m->attrs).get_int("group", 1));
    a.conv.constant_weights = g.is_weight(m->inputs[1]);
    if (const Node *in = g.producer(m->inputs[0])) {
        a.conv.input_in_group = mem.in.count(mem.ng.index.at(in->name)) > 0;
        a.conv.input_made = !a.conv.input_in_group;
    }
    a.conv.tile_output = g.type_of(a.tile_value).shape;
    a.conv.output_planar = std::find(g.outputs.begin(), g.outputs.end(), a.tile_value) != g.outputs.end();
    for (int c : mem.ng.consumers[end]) a.conv.output_planar = a.conv.output_planar || g.nodes[c].op == "Concat";
    a.conv.tile_stride_x = stride_x;
    a.conv.tile_stride_y = stride_y;
    a.conv.pooled = pooled;
    a.conv.pool_overlaps = pool_overlaps;
    a.conv.tile_reach_y = static_cast<int>(reach_y);
    // Known to read outside the input (so its padded input is materialised): a leading pad. Other
    // padding (auto_pad, trailing pads a window may never reach) counts as none here.
    const Attributes attrs(m->attrs);
    const std::vector<int64_t> pads = attrs.get_ints("pads", {});
    const bool explicit_pads = attrs.get_string("auto_pad", "NOTSET") == "NOTSET" && pads.size() == 4;
    a.conv.padded = explicit_pads && (pads[0] > 0 || pads[1] > 0);
    a.conv.padded_x = explicit_pads && pads[1] > 0;
    const std::vector<int64_t> strides = attrs.get_ints("strides", {1, 1});
    const std::vector<int64_t> dilations = attrs.get_ints("dilations", {1, 1});
    if (strides.size() == 2 && dilations.size() == 2) {
        a.conv.stride_y = static_cast<int>(strides[0]);
        a.conv.stride_x = static_cast<int>(strides[1]);
        a.conv.dilation_y = static_cast<int>(dilations[0]);
        a.conv.dilation_x = static_cast<int>(dilations[1]);
    }
    if (a.conv.weight.size() == 4) {
        const Shape &in = a.conv.input;
        const ops::WindowGeometry w = ops::resolve_window(attrs, Shape(in.begin() + 2, in.end()),
                                                          {a.conv.weight[2], a.conv.weight[3]}, false, "kernel_shape");
        a.conv.subsampling_pointwise = ops::subsampling_pointwise(w);
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

void analyse_gemm(const Graph &g, const FusedGroup &grp, GroupFacts &a) {
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

}  // namespace

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

bool pool_input_inlined(const Graph &g, const FusedGroup &grp, const Node &pool) {
    const Node *producer = g.producer(pool.inputs[0]);
    if (!producer) return false;
    auto it = grp.placement.find(producer->name);
    return it != grp.placement.end() && (it->second == Placement::Inline || it->second == Placement::Recompute);
}

namespace {

void analyse_pool(const Graph &g, const FusedGroup &grp, GroupFacts &a) {
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

void analyse_reduction(const Graph &g, const FusedGroup &grp, GroupFacts &a) {
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
bool analyse_attention(const Graph &g, const FusedGroup &grp, GroupFacts &a) {
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

}  // namespace

GroupFacts analyse_group(const Graph &g, const FusedGroup &grp) {
    GroupFacts a;
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

}  // namespace hfuse::compose
