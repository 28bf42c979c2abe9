// Attention lowered as one computation (FlashAttention's recurrence, Dao et al. 2022): for each query,
// the keys are taken a block at a time; a block's scores x_j give its maximum m_b, p_j = exp(x_j - m_b),
// their sum l_b and sum_j p_j v_j; a running state (acc, m, l) absorbs each block,
//   m' = max(m, m_b),  acc' = acc e^(m - m') + (sum_j p_j v_j) e^(m_b - m'),  l' = l e^(m - m') + l_b e^(m_b - m'),
// and the output is acc / l. The scores of one block of keys are all that exists at a time: the
// Sq x Sk matrix of scores (and of probabilities) is never stored. Masked scores of -inf are exact
// (a block or a prefix of blocks wholly masked adds nothing); a row masked entirely gives 0 / 0, as
// Softmax's 0 / 0 does.
#pragma once

#include "hfuse/op_registry.h"

namespace hfuse::ops {

// The Funcs lower_online_attention returns in Lowered::stages, by index, for the attention template.
enum AttentionStage {
    kAttentionValues = 0,   // V copied per (batch, head), keys clamped to [0, Sk): (d, j, batch...)
    kAttentionBlockMax,     // m_b: (i, kb, batch...), one update over the block's keys
    kAttentionProbs,        // p_j = exp(x_j - m_b): (jj, i, kb, batch...), jj the key within block kb
    kAttentionBlockSum,     // l_b: (i, kb, batch...)
    kAttentionBlockValues,  // sum_j p_j v_j: (d, i, kb, batch...)
    kAttentionState,        // (acc, m, l) per (d, i, batch...): one update over the blocks kb; undefined
                            // where the keys are one block (the output is then sum p_j v_j / l_b)
    kAttentionStages
};

// The scores product's B operand (K^T [..., D, Sk], a Func (j, k, batch...)) read through a copy whose
// keys are clamped to [0, keys): the template computes the scores of whole vectors of keys, past the
// last one (or before the first, where there are fewer keys than a vector). Returned as a Func to hand the scores
// product in place of B; the template places it.
Halide::Func clamped_keys(const LowerContext &ctx, const Halide::Func &b, int64_t keys);

// The output product of an attention (ctx: its node, A the Softmax's output, B = V) computed from
// `scores`, the Softmax's input (x(j, i, batch...) of shape `scores_shape`), in blocks of `key_block`
// keys. outputs[0] is the attention's output (d, i, batch...); stages as AttentionStage.
Lowered lower_online_attention(const LowerContext &ctx, const Halide::Func &scores, const Shape &scores_shape,
                               int key_block);

}  // namespace hfuse::ops
