// drop_padding_taps(): a Conv whose dilation reaches past its input (DeepLab's atrous pyramid: rates
// 12, 24 and 36 on a 14x14 feature map) has kernel taps that read only the zero padding, for every
// output position. They add nothing; the conv without them is a smaller kernel with less padding
// (a 3x3 of rate 24 on 14x14 is a 1x1), exact up to the order of the sums.
#include "hfuse/attributes.h"
#include "hfuse/passes.h"
#include "rewrite_util.h"

#include <optional>

namespace hfuse {
namespace {

// Along one spatial axis: the taps [first, last] that read the input for some output position.
struct AxisTaps {
    int64_t first = 0, last = -1, pad_begin = 0, pad_end = 0;
};

// The live taps of a kernel of k taps along an axis of `in` input and `out` output positions, or
// nothing when the smaller kernel's padding would have to be negative (a crop the Conv cannot express).
std::optional<AxisTaps> live_taps(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t dilation,
                                  int64_t pad_begin) {
    AxisTaps t;
    t.first = k;
    for (int64_t j = 0; j < k; j++) {
        // Positions read: j * dilation - pad_begin + y * stride for y in [0, out).
        const int64_t lo = j * dilation - pad_begin, hi = lo + (out - 1) * stride;
        if (hi < 0 || lo >= in) continue;
        // The first y with lo + y * stride >= 0 must still read inside.
        const int64_t y0 = lo >= 0 ? 0 : (-lo + stride - 1) / stride;
        if (y0 >= out || lo + y0 * stride >= in) continue;
        t.first = std::min(t.first, j);
        t.last = j;
    }
    if (t.last < t.first) return std::nullopt;
    t.pad_begin = pad_begin - t.first * dilation;
    const int64_t span = (t.last - t.first) * dilation + 1;
    t.pad_end = std::max<int64_t>(0, (out - 1) * stride + span - in - t.pad_begin);
    // The output extent must come out the same: floor((in + pads - span) / stride) + 1 == out.
    if (t.pad_begin < 0 || (in + t.pad_begin + t.pad_end - span) / stride + 1 != out) return std::nullopt;
    return t;
}

// Rewrites conv node `n` in place if taps drop; returns whether it did.
bool drop_taps(Graph &g, Node &n) {
    if (n.op != "Conv") return false;
    const Constant *w = passes::float_weight(g, n.inputs[1]);
    Attributes a(n.attrs);
    if (!w || a.get_string("auto_pad", "NOTSET") != "NOTSET") return false;
    const Shape &in = g.type_of(n.inputs[0]).shape, &out = g.type_of(n.outputs[0]).shape, &ws = w->type.shape;
    const int64_t spatial = static_cast<int64_t>(ws.size()) - 2;
    if (spatial < 1 || static_cast<int64_t>(in.size()) != spatial + 2) return false;
    const std::vector<int64_t> ones(spatial, 1);
    const std::vector<int64_t> strides = a.get_ints("strides", ones), dilations = a.get_ints("dilations", ones);
    const std::vector<int64_t> pads = a.get_ints("pads", std::vector<int64_t>(2 * spatial, 0));
    std::vector<AxisTaps> taps;
    bool drops = false;
    for (int64_t d = 0; d < spatial; d++) {
        std::optional<AxisTaps> t = live_taps(in[2 + d], out[2 + d], ws[2 + d], strides[d], dilations[d], pads[d]);
        if (!t) return false;
        drops = drops || t->last - t->first + 1 < ws[2 + d];
        taps.push_back(*t);
    }
    if (!drops) return false;

    Shape kept = ws;
    for (int64_t d = 0; d < spatial; d++) kept[2 + d] = taps[d].last - taps[d].first + 1;
    Constant k;
    k.type = {DType::Float32, kept};
    k.f32.reserve(num_elements(kept));
    // Row-major over kept: each index maps to the original's at the live taps' offset.
    std::vector<int64_t> idx(kept.size(), 0);
    for (int64_t i = 0; i < num_elements(kept); i++) {
        int64_t offset = 0;
        for (size_t d = 0; d < kept.size(); d++) {
            const int64_t at = d < 2 ? idx[d] : idx[d] + taps[d - 2].first;
            offset = offset * ws[d] + at;
        }
        k.f32.push_back(w->f32[offset]);
        for (int64_t d = static_cast<int64_t>(kept.size()) - 1; d >= 0 && ++idx[d] == kept[d]; d--) idx[d] = 0;
    }
    const std::string old_weight = n.inputs[1];
    const std::string name = passes::fresh_value_name(g, old_weight + "/live_taps");
    g.weights[name] = std::move(k);
    n.inputs[1] = name;
    std::vector<int64_t> new_pads(2 * spatial), new_dilations(spatial), shape(spatial);
    for (int64_t d = 0; d < spatial; d++) {
        new_pads[d] = taps[d].pad_begin;
        new_pads[spatial + d] = taps[d].pad_end;
        shape[d] = kept[2 + d];
        new_dilations[d] = shape[d] == 1 ? 1 : dilations[d];  // one tap: the dilation means nothing
    }
    n.attrs["pads"] = new_pads;
    n.attrs["dilations"] = new_dilations;
    if (n.attrs.contains("kernel_shape")) n.attrs["kernel_shape"] = shape;
    passes::drop_if_unused(g, {old_weight});
    return true;
}

}  // namespace

Graph drop_padding_taps(Graph graph) {
    bool changed = false;
    for (Node &n : graph.nodes) changed = drop_taps(graph, n) || changed;
    return changed ? prepare(std::move(graph)) : graph;
}

}  // namespace hfuse
