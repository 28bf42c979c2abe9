#include "ops/attention_lowering.h"

#include "halide_util.h"
#include "hfuse/error.h"

namespace hfuse::ops {

using Halide::Expr;
using Halide::Func;
using Halide::Var;

Func clamped_keys(const LowerContext &ctx, const Func &b, int64_t keys) {
    Func copy(func_name(ctx, "keys"));
    std::vector<Var> v = make_vars(b.dimensions());
    std::vector<Expr> at = as_exprs(v);
    at[0] = Halide::clamp(at[0], 0, to_int(keys - 1, "input 1 (B)"));
    copy(v) = b(at);
    return copy;
}

Lowered lower_online_attention(const LowerContext &ctx, const Func &scores, const Shape &scores_shape, int key_block) {
    const Shape &out = ctx.output_types[0].shape;  // [batch..., Sq, Dv]
    const Shape &v_shape = ctx.input_types[1]->shape;
    const int rank = static_cast<int>(out.size());
    if (rank < 2 || scores_shape.size() != out.size() || key_block < 1) {
        throw Error("internal: attention of output " + to_string(out) + " over scores " + to_string(scores_shape));
    }
    const int keys = to_int(scores_shape.back(), "input 0 (A)");
    const int dv = to_int(out.back(), "input 1 (B)");
    const int blocks = (keys + key_block - 1) / key_block;
    const Expr neg_inf = float_bits(0xff800000u);

    std::vector<Var> vars = make_vars(rank);  // (d, i, batch...)
    const Var d = vars[0], i = vars[1];
    const std::vector<Expr> batch(vars.begin() + 2, vars.end());
    const Var jj("jj"), kb("kb");
    auto with = [](std::vector<Expr> head, const std::vector<Expr> &tail) {
        head.insert(head.end(), tail.begin(), tail.end());
        return head;
    };
    const Shape v_batch(v_shape.begin(), v_shape.end() - 2);
    const std::vector<Expr> v_at = broadcast_coords(v_batch, batch);

    // V per (batch, head), its keys and channels clamped: the template computes whole vectors of both
    // (shifted inwards where fewer than a vector).
    Func values(func_name(ctx, "values"));
    std::vector<Var> vv = make_vars(static_cast<int>(v_shape.size()));
    std::vector<Expr> v_in = as_exprs(vv);
    v_in[0] = Halide::clamp(v_in[0], 0, dv - 1);
    v_in[1] = Halide::clamp(v_in[1], 0, keys - 1);
    values(vv) = ctx.inputs[1](v_in);

    // Key jj of block kb: its score (clamped into range; past the last key it is masked out).
    auto key = [&](const Expr &block, const Expr &in_block) { return block * key_block + in_block; };
    auto score = [&](const Expr &j, const Expr &row) { return scores(with({Halide::min(j, keys - 1), row}, batch)); };

    Halide::RDom r(0, key_block, func_name(ctx, "rj"));
    Func block_max(func_name(ctx, "block_max"));
    const std::vector<Expr> row_block = with({i, kb}, batch);
    block_max(row_block) = neg_inf;
    block_max(row_block) =
        Halide::max(block_max(row_block), Halide::select(key(kb, r) < keys, score(key(kb, r), i), neg_inf));

    // Relative to the block's maximum (0 where the block is wholly masked: its p_j are all 0).
    Func probs(func_name(ctx, "probs"));
    const Expr m_b = block_max(row_block);
    const Expr m_ref = Halide::select(m_b == neg_inf, 0.0f, m_b);
    probs(with({jj, i, kb}, batch)) =
        Halide::select(key(kb, jj) < keys, vector_exp_nonpositive(score(key(kb, jj), i) - m_ref), 0.0f);

    Func block_sum(func_name(ctx, "block_sum"));
    block_sum(row_block) = 0.0f;
    block_sum(row_block) += probs(with({r, i, kb}, batch));

    Func block_values(func_name(ctx, "block_values"));
    const std::vector<Expr> at_block = with({d, i, kb}, batch);
    block_values(at_block) = 0.0f;
    block_values(at_block) +=
        probs(with({r, i, kb}, batch)) * values(with({d, Halide::min(key(kb, r), keys - 1)}, v_at));

    Func output(func_name(ctx));
    Lowered lowered;
    lowered.stages.resize(kAttentionStages);
    lowered.stages[kAttentionValues] = values;
    lowered.stages[kAttentionBlockMax] = block_max;
    lowered.stages[kAttentionProbs] = probs;
    lowered.stages[kAttentionBlockSum] = block_sum;
    lowered.stages[kAttentionBlockValues] = block_values;
    lowered.outputs = {output};
    if (blocks == 1) {
        // All keys in one block: its sums are the softmax's, no state to carry.
        output(vars) = block_values(with({d, i, 0}, batch)) / block_sum(with({i, 0}, batch));
        return lowered;
    }

    // The running state, one update per block of keys (each reads its own (d, i) alone).
    Func state(func_name(ctx, "state"));
    const std::vector<Expr> at = as_exprs(vars);
    state(at) = Halide::Tuple(0.0f, neg_inf, 0.0f);
    Halide::RDom rb(0, blocks, func_name(ctx, "kb"));
    const Expr acc = state(at)[0], m = state(at)[1], l = state(at)[2];
    const std::vector<Expr> row_at = with({i, rb}, batch);
    const Expr mb = block_max(row_at);
    const Expr m_new = Halide::max(m, mb);
    // exp(m - m') is 0 while nothing is accumulated (m = -inf); exp(m_b - m') is 0 for a masked block.
    const Expr keep = vector_exp_nonpositive(m - Halide::select(m_new == neg_inf, 0.0f, m_new));
    const Expr take = Halide::select(mb == neg_inf, 0.0f, vector_exp_nonpositive(mb - m_new));
    state(at) = Halide::Tuple(acc * keep + block_values(with({d, i, rb}, batch)) * take, m_new,
                              l * keep + block_sum(row_at) * take);

    output(vars) = state(at)[0] / state(at)[2];
    lowered.stages[kAttentionState] = state;
    return lowered;
}

}  // namespace hfuse::ops
