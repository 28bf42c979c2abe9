// fold_batchnorm(): an inference BatchNormalization is a per-channel affine map y = x * mul[c] + shift[c];
// after a Conv or Gemm with constant parameters it folds into new weights and bias of that node.
#include "hfuse/attributes.h"
#include "hfuse/passes.h"
#include "rewrite_util.h"

#include <cmath>

namespace hfuse {
namespace {

// mul = scale / sqrt(var + eps), shift = B - mean * mul, per channel, in double.
struct ChannelAffine {
    std::vector<double> mul, shift;
};

ChannelAffine batchnorm_affine(const Graph &g, const Node &bn) {
    const double eps = Attributes(bn.attrs).get_float("epsilon", 1e-5f);
    const std::vector<float> &scale = g.weights.at(bn.inputs[1]).f32, &bias = g.weights.at(bn.inputs[2]).f32,
                             &mean = g.weights.at(bn.inputs[3]).f32, &var = g.weights.at(bn.inputs[4]).f32;
    ChannelAffine a;
    for (size_t c = 0; c < scale.size(); c++) {
        a.mul.push_back(scale[c] / std::sqrt(double(var[c]) + eps));
        a.shift.push_back(bias[c] - mean[c] * a.mul.back());
    }
    return a;
}

// A float32 weight of the given shape, zero-filled.
Constant zeros(Shape shape) {
    Constant k;
    k.f32.assign(num_elements(shape), 0.0f);
    k.type = {DType::Float32, std::move(shape)};
    return k;
}

bool has_input(const Node &n, size_t i) {
    return i < n.inputs.size() && !n.inputs[i].empty();
}

// Index of the Conv or Gemm that `bn` can fold into, or -1: every parameter on both sides is a weight,
// and the BN is the only reader of the producer's output, which is not a model output either.
int fold_target(const Graph &g, const Node &bn) {
    if (bn.op != "BatchNormalization") return -1;
    for (size_t i = 1; i <= 4; i++) {
        if (!passes::float_weight(g, bn.inputs[i])) return -1;
    }
    const std::string &x = bn.inputs[0];
    if (passes::is_model_output(g, x) || passes::count_uses(g, x) != 1) return -1;
    const int p = passes::producer_index(g, x);
    if (p < 0) return -1;
    const Node &n = g.nodes[p];
    if (n.op != "Conv" && n.op != "Gemm") return -1;
    if (!passes::float_weight(g, n.inputs[1])) return -1;
    if (has_input(n, 2) && !passes::float_weight(g, n.inputs[2])) return -1;
    return p;
}

// The new inputs 1 and 2 of the Conv or Gemm.
struct FoldedParams {
    Constant weight, bias;
};

// Conv: W'[c, ...] = W[c, ...] * mul[c], b'[c] = b[c] * mul[c] + shift[c] (b = 0 without bias).
// Output channel c of a grouped or depthwise Conv also reads only W[c, ...], so groups need no care.
FoldedParams fold_into_conv(const Graph &g, const Node &conv, const ChannelAffine &bn) {
    const Constant &w = g.weights.at(conv.inputs[1]);
    const Constant *b = has_input(conv, 2) ? &g.weights.at(conv.inputs[2]) : nullptr;
    const int64_t channels = w.type.shape[0], per_channel = num_elements(w.type.shape) / channels;
    Constant w2 = zeros(w.type.shape), b2 = zeros({channels});
    for (int64_t c = 0; c < channels; c++) {
        for (int64_t k = c * per_channel; k < (c + 1) * per_channel; k++) {
            w2.f32[k] = static_cast<float>(w.f32[k] * bn.mul[c]);
        }
        b2.f32[c] = static_cast<float>((b ? double(b->f32[c]) : 0.0) * bn.mul[c] + bn.shift[c]);
    }
    return {std::move(w2), std::move(b2)};
}

// Gemm: Y[m, n] = alpha * sum_k A'[m, k] * B'[k, n] + beta * C[m, n], with BN channel n. Scaling column n
// of B' scales the alpha term; the new C' = beta * C * mul[n] + shift[n] with beta = 1. C' is [N]
// unless C varies along M (a rank-2 C with M rows), then [M, N]. Sets beta = 1 on `gemm`.
FoldedParams fold_into_gemm(const Graph &g, Node &gemm, const ChannelAffine &bn) {
    const Attributes attrs(gemm.attrs);
    const bool trans_b = attrs.get_int("transB", 0) != 0;
    const double beta = attrs.get_float("beta", 1.0f);
    const Shape &y = g.type_of(gemm.outputs[0]).shape;
    const int64_t rows = y[0], cols = y[1];

    const Constant &b = g.weights.at(gemm.inputs[1]);  // [K, N], or [N, K] with transB
    const int64_t k_dim = num_elements(b.type.shape) / cols;
    Constant b2 = zeros(b.type.shape);
    for (size_t i = 0; i < b.f32.size(); i++) {
        const int64_t n = trans_b ? int64_t(i) / k_dim : int64_t(i) % cols;
        b2.f32[i] = static_cast<float>(b.f32[i] * bn.mul[n]);
    }

    // The lowering skips C when beta is 0, so C contributes nothing then.
    const Constant *c = has_input(gemm, 2) && beta != 0.0 ? &g.weights.at(gemm.inputs[2]) : nullptr;
    const Shape c_shape = c ? c->type.shape : Shape{};
    const bool per_row = c_shape.size() == 2 && c_shape[0] != 1;
    const int64_t c_cols = c_shape.empty() ? 1 : c_shape.back();  // 1 or N: C broadcasts to [M, N]
    Constant c2 = zeros(per_row ? Shape{rows, cols} : Shape{cols});
    for (int64_t m = 0; m < (per_row ? rows : 1); m++) {
        for (int64_t n = 0; n < cols; n++) {
            const double cv = c ? c->f32[(per_row ? m : 0) * c_cols + (c_cols == 1 ? 0 : n)] : 0.0;
            c2.f32[m * cols + n] = static_cast<float>(beta * cv * bn.mul[n] + bn.shift[n]);
        }
    }
    gemm.attrs["beta"] = 1.0;
    return {std::move(b2), std::move(c2)};
}

}  // namespace

Graph fold_batchnorm(Graph g) {
    for (size_t i = 0; i < g.nodes.size();) {
        const int p = fold_target(g, g.nodes[i]);
        if (p < 0) {
            i++;
            continue;
        }
        Node &target = g.nodes[p];
        const Node &bn = g.nodes[i];
        const ChannelAffine affine = batchnorm_affine(g, bn);
        FoldedParams folded =
            target.op == "Conv" ? fold_into_conv(g, target, affine) : fold_into_gemm(g, target, affine);

        // The replaced parameters (all weights) go if nothing else reads them; before the new ones are
        // named, so a second BN folded into the same node reuses the names.
        std::vector<std::string> orphaned(target.inputs.begin() + 1, target.inputs.end());
        orphaned.insert(orphaned.end(), bn.inputs.begin() + 1, bn.inputs.end());
        target.inputs.resize(3);
        target.inputs[1] = target.inputs[2] = "";
        // The target now computes the BN's value, so its readers and model outputs are untouched.
        target.outputs[0] = bn.outputs[0];
        passes::absorb(target, bn);
        g.nodes.erase(g.nodes.begin() + i);   // the target (p < i, topological order) stays put
        passes::drop_if_unused(g, orphaned);  // only weights: no node moves

        // Fresh names: the old parameters may be shared with other nodes and are never overwritten.
        Node &folded_node = g.nodes[p];
        folded_node.inputs[1] = passes::fresh_value_name(g, folded_node.name + ".w_folded");
        g.weights[folded_node.inputs[1]] = std::move(folded.weight);
        folded_node.inputs[2] = passes::fresh_value_name(g, folded_node.name + ".b_folded");
        g.weights[folded_node.inputs[2]] = std::move(folded.bias);
    }
    return prepare(std::move(g));
}

}  // namespace hfuse
