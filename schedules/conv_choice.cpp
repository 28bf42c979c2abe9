// Which conv template a conv group takes, chosen from its shape (schedules::ConvGroupShape) and the
// target, each choice with the measurements behind it, and its default parameters from that
// template's defaults (conv_<name>_defaults.cpp): conv_default_params in schedules/conv_template.h.
#include "schedules/conv_defaults_internal.h"
#include "schedules/conv_template.h"
#include "schedules/schedule_params.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace hfuse::schedules {

// Register tiles are sized in units of AVX2's 16 vector registers: 1 there, 2 with 32.
int register_budget(const TargetTraits &tt) {
    return std::max(1, tt.vector_registers / 16);
}

namespace {

// Whether conv_cv computes a grouped conv (not depthwise) by default: where no FLOPs are wasted, each
// group's output channels whole vectors, so that a vector's channels reduce over their one group's
// input channels (a vector spanning groups reduces over all their inputs, the others' weighted zero:
// 8 channels a group, two to a vector of 16, ran at half conv_xv's speed, 256 channels at 28x28,
// AVX-512, one thread, 0.45 against 0.24 ms; 4 a group at a quarter). With AVX2's 16 registers too:
// an AVX2 target on an AVX-512 machine, one thread, had conv_xv as fast (RegNet-like 3x3s, 16 channels
// a group, 320 at 14x14 0.27 against 0.29-0.43 ms), but on Zen 3 (AVX2), 2 threads, in the networks
// (bench --against --profile, the changed groups summed) conv_xv ran them at a third to a half of
// conv_cv's speed: RegNet-Y 3.2GF's 3x3s with 24 channels a group 1.5-3.6x faster by conv_cv (the
// network 1.16x), RegNet-Y 800MF's groups 1.30x (1.07x), ResNeXt-50's 1.47x (1.02x).
bool grouped_takes_cv(const ConvGroupShape &s, const TargetTraits &tt) {
    const int64_t cout = s.output[1];
    return s.group > 1 && !(s.group == s.input[1] && s.group == cout) && (cout / s.group) % tt.vector_width == 0 &&
           s.constant_weights && !s.pooled;
}

// Whether a depthwise conv whose input arrives channel-blocked (ConvGroupShape::input_read_blocked)
// is computed by conv_cv, each lane its own channel (ops::BlockedGroups::own_channel): every tap is
// then a dense vector load at any stride and row width. conv_dw vectorizes along x instead (a 7-wide
// row fills 7 of 16 lanes; at stride 2 each tap gathers every other column), so only where it wastes
// lanes: a stride, or rows not whole vectors (MobileNet-V2's 3x3 on 32 channels at 112x112 ran alike
// either way). Whole vectors of channels (the lanes read their own channels in place), constant
// weights (packed), no pool after it, no producer computed per task (conv_dw's).
// EfficientNet-B0's 5x5 stride-2 on 672 channels at 14x14 -> 7x7 (its expand conv_cv storing it
// blocked), Sapphire Rapids, AVX-512, 2 threads, in the network, interleaved: conv_dw (4 lanes) 0.106-
// 0.109 ms, conv_cv 0.048-0.060 (ONNX Runtime's NCHWc kernel 0.059 in its profile). Read from a
// planar input instead, the padded blocked copy cost 5x the conv (144 channels at 56x56, stride 2:
// 0.30 against conv_dw's 0.05 ms).
bool depthwise_takes_cv(const ConvGroupShape &s, const TargetTraits &tt) {
    const bool dw_wastes = s.stride_x > 1 || s.output[3] % tt.vector_width != 0;
    return dw_wastes && s.constant_weights && !s.pooled && s.producer_input_channels == 0 &&
           s.output[1] % tt.vector_width == 0 && s.weight[1] == 1;
}

// The templates conv_template_defaults chooses between for a conv group.
enum class ConvTemplate {
    Cv,           // conv_cv
    CvThenPool,   // conv_cv at root, the pool after it by its template
    Flat,         // conv_flat
    CvDepthwise,  // conv_cv, each lane its own channel
    Dw,           // conv_dw
    Xv,           // conv_xv
    Simple,       // no conv template fits
};

// A template chosen, and what its parameters start from.
struct ConvChoice {
    ConvTemplate kind;
    int vector_width = 0;        // conv_xv's and conv_dw's: the target's, narrowed to the rows
    nlohmann::json params = {};  // conv_flat's, computed to choose it
    std::string why = {};        // the facts that decided it, recorded in the plan ("why")
};

// Which template computes the conv group `s`: the decision alone, from the group's facts (shapes,
// kind, who reads its output); each template's parameters follow in its own function.
ConvChoice choose_conv_template(const ConvGroupShape &s, const TargetTraits &tt) {
    const int64_t cout = s.output[1], wout = s.output[3];
    const int budget = register_budget(tt);
    // Narrow outputs (ResNet's and MobileNet's 7x7 layers) take narrower vectors under conv_xv, down to
    // 4 lanes: half an AVX2 register still beats the simple schedule by far (3x3 512->512 at 7x7, 2
    // threads, two engineers compiling beside it: simple 50 ms, 4 lanes 6.4 ms).
    int vw = tt.vector_width;
    while (vw > 4 && wout < vw) vw /= 2;
    const bool spatial_kernel = s.weight[2] > 1 || s.weight[3] > 1;
    const bool strided = s.stride_x > 1 || s.stride_y > 1;
    // Pointwise stride-1 convs over fewer than 256 input channels keep conv_xv / conv_flat where rows
    // are a vector wide or more: conv_cv's blocked output costs a transpose they skip (MobileNet-V2's
    // 1x1s, 2 threads: 16->96 at 112x112 0.31 -> 0.70 ms, 32->192 at 28x28 0.072 -> 0.090). Narrower
    // rows waste lanes there, and conv_cv wins (at 7x7: 160->960 0.18 -> 0.12 ms, 960->320 0.29 ->
    // 0.21, 320->1280 0.45 -> 0.31).
    const bool narrow = wout < tt.vector_width;
    // A pointwise conv over many input channels too: its transpose is a small share of its work
    // (Inception-V3's 1x1s, 2 threads, in the network: 256->64 at 35x35 conv_flat 0.46 ms, conv_cv
    // 0.34; 288->64 0.53 -> 0.28; 768->192 at 17x17 0.70 -> 0.59, its channels in one block). With 32
    // vector registers, also from 64 input channels where the output is at least 128 channels of
    // whole vectors, not stored NCHW anyway (a model output or a Concat's input, which conv_cv would
    // transpose) and the input is read as stored or copied (a prologue computed once per value, into
    // conv_cv's copy, not per broadcast; in whole blocks of 8 channels). ResNet-50's 1x1s at 56x56,
    // Sapphire Rapids, AVX-512, 2 threads, in Wide ResNet-50 (bench --against --profile, 2 rounds):
    // 64->256 0.93-1.07 -> 0.78-0.85 ms, 128->256 + Add 1.38-1.74 -> 1.05-1.38, and each next
    // 256->128 (conv_cv already) 1.28-1.53 -> 0.95-1.11, its input now stored blocked; RegNet-Y
    // 800MF's 144->144 at 28x28 1.08-1.18x, their readers 1.12-1.47x; whole networks 1.00-1.06x.
    // DenseNet-121's BN + ReLU + 1x1s, copied, Zen 5, 2 threads, in the network: 4.11 -> 3.82 ms in
    // all. Slower: 1x1 128->256 + BN + ReLU at 28x28 returned as a model output 0.8x, SqueezeNet's last
    // 64->256 expand into its Concat 0.68-0.93x, its 96->16 squeezes and the 192->64 inception
    // branches 0.92-0.98x (narrow outputs), and ResNeXt-50 and RegNet-Y 800MF under an AVX2 target
    // 0.94-1.01x.
    const int64_t group_inputs = s.input[1] / s.group;
    const bool deep = group_inputs >= 256 ||
                      (group_inputs >= 64 && cout >= 128 && cout % tt.vector_width == 0 &&
                       (!s.input_in_group || group_inputs % 8 == 0) && !s.output_planar && tt.vector_registers >= 32);
    if (grouped_takes_cv(s, tt))
        return {
            ConvTemplate::Cv, vw, {}, "grouped: each vector of output channels reduces over its own group's inputs"};
    // Read blocked by conv_cv groups (s.output_read_blocked): conv_cv stores its tiles as they lie, no
    // transpose, and spares its reader the blocked copy of its input. RegNet-Y 800MF's first 1x1,
    // 32->64 at 112x112 before a grouped stride-2 3x3, AVX-512, 2 threads, in the network: conv_xv
    // 0.62 ms, conv_cv 0.50 (its reader 0.78 -> 0.41).
    if (s.group == 1 && s.constant_weights && cout >= tt.vector_width &&
        (spatial_kernel || strided || narrow || deep || s.output_read_blocked)) {
        std::string why;
        auto reason = [&why](bool holds, const std::string &text) {
            if (holds) why += (why.empty() ? "" : ", ") + text;
        };
        reason(spatial_kernel, std::to_string(s.weight[2]) + "x" + std::to_string(s.weight[3]) + " kernel");
        reason(strided, "strided");
        reason(narrow, "rows narrower than a vector");
        reason(deep, std::to_string(group_inputs) + " input channels");
        reason(s.output_read_blocked, "its readers read its output channel-blocked");
        why = "output channels in vector lanes: " + why;
        // A pool whose windows neither overlap nor pad reads the task's conv rows in the tile (VGG-11's
        // 3->64 at 224x224 + 2x2 max pool: 2.8 -> 2.27 ms; conv_bias_relu_maxpool 1.31 ms either
        // way); others too where the tile is written from vectors of channels (conv_template_defaults),
        // else after the conv at root (ResNet-18's stem, 3x3 stride-2 pool with pads, read along x:
        // 1.6 ms at root, 3.9 in the tile, its windows read through gathers across the blocked lanes).
        return {!s.pooled || !s.pool_overlaps ? ConvTemplate::Cv : ConvTemplate::CvThenPool, vw, {}, why};
    }
    // A stride-1 conv with no pool after it whose rows tile badly by (x, y) (by whole vectors, or
    // narrowed ones): flat, when that computes 5% fewer lanes (the strip costs an extra store and
    // load: 1x1 24->144 at 56x56, MobileNet's expand, 2 threads, quiet machine: conv_xv 2 rows x 6
    // channels 0.42 ms for the block, conv_flat 0.45 ms; 1x1 128->256 at 28x28: conv_xv 0.329 ms,
    // conv_flat 0.286 ms: 3.5 vectors a row, conv_xv computes 32 columns for 28).
    if (s.flat_width >= wout && !s.pooled) {
        const double xv_use =
            wout < vw ? 0.0 : static_cast<double>(wout) / ((wout + vw - 1) / vw * vw) * vw / tt.vector_width;
        auto [flat, flat_use] = conv_flat_defaults(s, tt.vector_width, budget);
        if (flat_use > 1.05 * xv_use) {
            char why[96];
            std::snprintf(why, sizeof why, "rows tile badly: %.0f%% of the lanes useful flattened, %.0f%% by rows",
                          100 * flat_use, 100 * xv_use);
            return {ConvTemplate::Flat, vw, flat, why};
        }
    }
    const bool depthwise = s.group > 1 && s.group == s.input[1] && s.group == cout;
    if (depthwise && s.input_read_blocked && depthwise_takes_cv(s, tt))
        return {
            ConvTemplate::CvDepthwise, vw, {}, "depthwise on an input stored channel-blocked for it, rows waste lanes"};
    if (wout < vw) return {ConvTemplate::Simple, vw, {}, "output narrower than one vector"};
    if (!depthwise) {
        const char *why = !s.constant_weights      ? "computed weights (conv_cv packs constant ones)"
                          : s.group > 1            ? "grouped, not whole vectors of a group's channels on this target"
                          : cout < tt.vector_width ? "fewer output channels than a vector"
                                                   : "pointwise, stride 1, rows of whole vectors: no transpose to pay";
        return {ConvTemplate::Xv, vw, {}, std::string("x in vector lanes: ") + why};
    }
    if (s.pooled) return {ConvTemplate::Simple, vw, {}, "depthwise + window"};
    return {ConvTemplate::Dw, vw, {}, "depthwise"};
}

// `p` with `why` recorded first in its "why" (the parameters' own reasons, if any, after it).
nlohmann::json with_why(nlohmann::json p, const std::string &why) {
    const std::string own = p.value("why", "");
    p["why"] = own.empty() ? why : why + "; " + own;
    return p;
}

nlohmann::json conv_template_defaults(const ConvGroupShape &s, const TargetTraits &tt) {
    const ConvChoice choice = choose_conv_template(s, tt);
    switch (choice.kind) {
    case ConvTemplate::Cv: return with_why(conv_cv_defaults(s, tt), choice.why);
    case ConvTemplate::CvThenPool: {
        // In the tile where the tile is written from vectors of channels: the pool's taps are then
        // dense vector loads of the task's conv rows (a row recomputed at a task's edge) rather than
        // gathers, and the conv's output never goes to memory. Zen 5, AVX-512, 2 threads, conv + ReLU
        // + 3x3 stride-2 max pool alone, 3 alternations, medians, at root -> in the tile: SqueezeNet
        // 1.1's 3x3 stride-2 3->64 at 224x224 0.31 -> 0.15 ms, ResNet's 7x7 stride-2 3->64 (pool
        // pads 1) 0.70 -> 0.56, SqueezeNet 1.0's 7x7 3->96 1.05 -> 0.83. Not Winograd's: its tiles
        // of 4 rows round a task's few conv rows up (in the networks: Inception-V3's 3x3s + max pool
        // at 147x147 and 71x71 1.14-1.17x the time at root, GoogLeNet's 64->192 at 56x56 1.22x).
        nlohmann::json tiled = conv_cv_defaults(s, tt);
        if (!conv_cv_winograd(tiled) && conv_cv_tile_from_lanes(s, tiled.value("channel_block", int64_t{0}),
                                                                tiled.value("vector_width", tt.vector_width)))
            return with_why(tiled, choice.why +
                                       "; the pool per task after the conv, reading its rows with channels "
                                       "in vector lanes");
        nlohmann::json p = conv_cv_defaults(conv_at_root(s), tt);
        p["compute"] = "root";
        return with_why(p, choice.why +
                               "; the pool's windows overlap or pad, and conv_cv's tile would read them through "
                               "gathers: the conv at root, the pool after it by its template");
    }
    case ConvTemplate::Flat: return with_why(choice.params, choice.why);
    case ConvTemplate::CvDepthwise: return with_why(conv_cv_depthwise_defaults(s, tt), choice.why);
    case ConvTemplate::Dw: return with_why(conv_dw_defaults(s, tt, choice.vector_width), choice.why);
    case ConvTemplate::Xv: return with_why(conv_xv_defaults(s, tt, choice.vector_width), choice.why);
    case ConvTemplate::Simple: break;
    }
    return {{"template", "simple"}, {"why", choice.why}};
}

}  // namespace

nlohmann::json conv_default_params(const ConvGroupShape &s, const Halide::Target &target) {
    const TargetTraits tt = target_traits(target);
    nlohmann::json p = conv_template_defaults(s, tt);
    // 1x1 convs over many input channels take two of them a step with 16 vector registers (where it
    // was measured; strided 1x1s too, not measured apart). Zen 3, AVX2, one thread, conv_xv unless
    // named, 1x1 + ReLU, medians of 3 alternations, not unrolled -> by 2: 144->24 at 56x56 0.271 ->
    // 0.254 ms, 384->64 at 14x14 0.125 -> 0.117, 576->96 at 14x14 0.278 -> 0.263, 256->64 at 56x56
    // 1.31 -> 1.26, 128->256 at 28x28 0.556 -> 0.541, 96->24 at 56x56 0.170 -> 0.166; conv_flat
    // 192->32 at 28x28 0.153 -> 0.126, 512->128 at 28x28 1.55 -> 1.52; below 96 channels no gain
    // (64->256 at 56x56 1.12 -> 1.13, 32->16 at 112x112 0.151 either way, 24->144 at 56x56 0.236 ->
    // 0.237); by 4 no better than by 2.
    const std::string tmpl = p.value("template", "");
    const bool one_by_one = s.weight[2] == 1 && s.weight[3] == 1;
    if ((tmpl == "conv_xv" || tmpl == "conv_flat") && one_by_one && tt.vector_registers < 32 && s.weight[1] >= 96)
        p["reduction_unroll"] = 2;
    return p;
}

}  // namespace hfuse::schedules
