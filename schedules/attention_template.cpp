#include "schedules/attention_template.h"

#include "hfuse/error.h"
#include "schedules/schedule_params.h"

#include <algorithm>

namespace hfuse::schedules {
namespace {

using Halide::Func;
using Halide::RVar;
using Halide::Stage;
using Halide::Var;
using Halide::VarOrRVar;

// One block of keys while they fit this many (Sk rounded up to whole vectors): its scores and
// probabilities for a tile of 14 queries take 14 KB each, within a first-level cache.
constexpr int64_t kMaxKeyBlock = 256;
// Register tiles above this many accumulators spill and take long to compile.
constexpr int kMaxAttentionAccumulators = 64;
// Heads (times batch) from which they alone are the parallel tasks.
constexpr int64_t kHeadTasks = 4;

struct AttentionParams {
    int vw, tq, tv, key_block;
    bool heads;
};

int64_t batch_of(const Shape &s) {
    int64_t b = 1;
    for (size_t i = 0; i + 2 < s.size(); i++) b *= s[i];
    return b;
}

AttentionParams read_params(const AttentionGroupShape &s, const nlohmann::json &p, const Halide::Target &target) {
    check_param_keys(p, {"vector_width", "query_tile", "tile_vectors", "key_block", "parallel"});
    const int64_t sq = s.output[s.output.size() - 2], sk = s.scores.back();
    AttentionParams r;
    r.vw = vector_width_param(p, target, true);
    r.tq = param_int(p, "query_tile", 1, sq);
    r.tv = param_int(p, "tile_vectors", 1, 16);
    if (r.tv * r.tq > kMaxAttentionAccumulators) {
        fail_field("schedule.query_tile", "a register tile of " + std::to_string(r.tv * r.tq) +
                                              " accumulators exceeds " + std::to_string(kMaxAttentionAccumulators));
    }
    r.key_block = param_int(p, "key_block", r.vw, ceil_div(sk, r.vw) * r.vw);
    if (r.key_block % r.vw != 0) {
        fail_field("schedule.key_block", "must be a multiple of the vector width " + std::to_string(r.vw) + ", got " +
                                             std::to_string(r.key_block));
    }
    r.heads = param_choice(p, "parallel", {"heads", "query_tiles"}) == "heads";
    if (r.heads && s.output.size() < 3) fail_field("schedule.parallel", "\"heads\" needs batch or head dims");
    return r;
}

// `f`'s innermost arg in vectors of vw (whole vectors where it is at least one wide).
void vectorize_inner(Func f, int64_t extent, int vw) {
    if (extent >= vw) f.vectorize(f.args()[0], vw);
}

// A reduction along a block of keys (its max, its sum) in vector lanes, reduced across them per
// vector. (Its lanes kept apart across the block by rfactor, and reduced once, ran no faster for
// blocks of 4 vectors and took three times as long to compile.)
void schedule_block_reduction(Func f, const Halide::LoopLevel &at, int vw) {
    f.compute_at(at);
    RVar r = f.rvars(0)[0], ro("ro"), ri("ri");
    f.update().split(r, ro, ri, vw).atomic().vectorize(ri);
}

// A product per register tile of tv vectors x the tile's rows (arg 1): arg 0 vectorized, the rows
// unrolled, its reduction inside the tile's loops.
void schedule_product(Func f, const Halide::LoopLevel &at, const AttentionParams &p) {
    std::vector<Var> a = f.args();
    f.compute_at(at).vectorize(a[0], p.vw);
    Stage u = f.update();
    RVar k = f.rvars(0)[0];
    Var xo("xo"), xi("xi");
    u.split(a[0], xo, xi, p.tv * p.vw);
    std::vector<VarOrRVar> order = {xi, a[1], k, xo};
    for (size_t i = 2; i < a.size(); i++) order.push_back(a[i]);
    u.reorder(order).vectorize(xi, p.vw).unroll(xi).unroll(a[1]);
}

}  // namespace

nlohmann::json attention_default_params(const AttentionGroupShape &s, const Halide::Target &target) {
    const TargetTraits tt = target_traits(target);
    const int vw = tt.vector_width;
    const int64_t sq = s.output[s.output.size() - 2], sk = s.scores.back(), dv = s.output.back();
    // Two vectors of keys (or channels) by as many queries as the registers hold, balanced over the
    // query tiles as gemm_nv's rows are.
    const int64_t tv = std::max<int64_t>(1, std::min<int64_t>(2, ceil_div(std::max(sk, dv), vw)));
    const int64_t most = std::max<int64_t>(1, std::min<int64_t>(sq, (tt.vector_registers - 4) / tv));
    const int64_t tq = ceil_div(sq, ceil_div(sq, most));
    const int64_t whole = ceil_div(sk, vw) * vw;
    const int64_t key_block = std::min(whole, std::max<int64_t>(vw, kMaxKeyBlock / vw * vw));
    const bool heads = s.output.size() >= 3 && batch_of(s.output) >= kHeadTasks;
    return {{"template", "attention"}, {"vector_width", vw},     {"query_tile", tq},
            {"tile_vectors", tv},      {"key_block", key_block}, {"parallel", heads ? "heads" : "query_tiles"}};
}

int attention_key_block(const AttentionGroupShape &s, const nlohmann::json &params, const Halide::Target &target) {
    return read_params(s, params, target).key_block;
}

void schedule_attention(const AttentionFuncs &funcs, const AttentionGroupShape &s, const nlohmann::json &params,
                        const Halide::Target &target) {
    const AttentionParams p = read_params(s, params, target);
    AttentionFuncs f = funcs;  // handles: scheduling changes the Funcs themselves
    const int64_t dv = s.output.back();
    Func out = f.output;
    std::vector<Var> a = out.args();  // d, i, batch...
    Var qo("qo"), qi("qi"), d_o("d_o"), d_i("d_i");
    out.split(a[1], qo, qi, p.tq);
    std::vector<VarOrRVar> order;
    if (dv >= p.vw) {
        out.split(a[0], d_o, d_i, p.vw).vectorize(d_i);
        order = {d_i, d_o, qi, qo};
    } else {
        order = {a[0], qi, qo};
    }
    for (size_t i = 2; i < a.size(); i++) order.push_back(a[i]);
    out.reorder(order);
    // The batch and head dims as one loop.
    Var heads = a.size() > 2 ? a[2] : Var();
    for (size_t i = 3; i < a.size(); i++) {
        Var fused(heads.name() + "_" + a[i].name());
        out.fuse(heads, a[i], fused);
        heads = fused;
    }
    Var tile = qo, copies = qo;
    if (p.heads) {
        out.parallel(heads);
        copies = heads;
    } else {
        if (a.size() > 2) {
            Var fused("tile");
            out.fuse(qo, heads, fused);
            tile = copies = fused;
        }
        out.parallel(tile);
    }
    f.keys.compute_at(out, copies);
    vectorize_inner(f.keys, ceil_div(s.scores.back(), p.vw) * p.vw, p.vw);
    f.values.compute_at(out, copies);
    vectorize_inner(f.values, dv, p.vw);

    f.queries.compute_at(out, tile);
    vectorize_inner(f.queries, s.depth, p.vw);

    // The state per tile of queries, one update per block of keys; the block's Funcs inside it (per
    // tile, where the keys are one block and there is no state).
    Halide::LoopLevel block(out, tile);
    if (f.state.defined()) {
        f.state.compute_at(out, tile);
        std::vector<Var> sa = f.state.args();
        RVar rb = f.state.rvars(0)[0];
        std::vector<VarOrRVar> state_order = {sa[0], sa[1], rb};
        for (size_t i = 2; i < sa.size(); i++) state_order.push_back(sa[i]);
        Stage su = f.state.update();
        su.reorder(state_order);
        if (dv >= p.vw) {
            f.state.vectorize(sa[0], p.vw);
            su.vectorize(sa[0], p.vw);
        }
        block = Halide::LoopLevel(f.state, rb);
    }
    schedule_product(f.scores, block, p);
    schedule_block_reduction(f.block_max, block, p.vw);
    f.probs.compute_at(block).vectorize(f.probs.args()[0], p.vw);
    schedule_block_reduction(f.block_sum, block, p.vw);
    schedule_product(f.block_values, block, p);
}

}  // namespace hfuse::schedules
