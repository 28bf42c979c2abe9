// oneDNN used the way an expert inference user would: each primitive created with
// memory::format_tag::any so it picks its own (blocked) layouts, BatchNormalization folded into the
// convolution's weights and bias, ReLU and residual sums fused as post-ops, weights and the network
// input reordered once at set-up. run() executes only what an inference call must: the primitives and
// the reorders between them that their chosen layouts require.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <string>
#include <unordered_map>
#include <vector>

namespace hfuse::bench {

// A 2-D convolution, BatchNormalization already folded into w and b.
struct ConvLayer {
    dnnl::memory::dims src, dst;  // NCHW
    dnnl::memory::dims weights;   // OIHW, I per group
    int groups = 1;
    dnnl::memory::dims strides, pad_l, pad_r;  // (H, W)
    std::vector<float> w, b;                   // w row-major OIHW; b per output channel
};

// The activation a convolution applies as a post-op (after the residual sum, if any).
enum class Activation { None, Relu, Relu6 };

class DnnlNet {
public:
    // With `winograd`, 3x3 stride-1 convolutions ask for oneDNN's Winograd (algorithm::
    // convolution_winograd; 2.6 has F(2x2, 3x3) and F(4x4, 3x3) for AVX-512 fp32); others, and shapes
    // it declines, stay direct. implementations() names what each primitive got.
    explicit DnnlNet(bool winograd = false);

    // The network input: a plain NCHW tensor holding `data`. Primitives reading it in another layout
    // get a copy reordered once, outside run(): the input is the same on every run.
    dnnl::memory input(const dnnl::memory::dims &dims, const float *data);

    // Appends a convolution of `src` with `act` as a post-op; with `residual`, the residual is added
    // before the activation by a sum post-op (dst = act(conv + residual)). A sum post-op accumulates
    // into dst, so run() first copies the residual there (a reorder of identical layouts).
    dnnl::memory conv(const dnnl::memory &src, const ConvLayer &layer, Activation act,
                      const dnnl::memory *residual = nullptr);

    // Appends a max pooling primitive (inference: no workspace) reading `src` in its layout.
    dnnl::memory max_pool(const dnnl::memory &src, const dnnl::memory::dims &kernel, const dnnl::memory::dims &strides,
                          const dnnl::memory::dims &pad_l, const dnnl::memory::dims &pad_r);

    // One inference: every appended step, then waits for the stream.
    void run();

    // `m` reordered to plain row-major (NCHW) floats; not part of run().
    std::vector<float> to_plain(const dnnl::memory &m);

    // The implementations oneDNN chose, one per primitive ("jit:avx2, jit:avx2").
    const std::string &implementations() const { return impls_; }

private:
    // `m` in layout `want`: itself, a copy reordered now (constants: the input, weights), or a copy
    // reordered by a step of run().
    dnnl::memory in_layout(const dnnl::memory &m, const dnnl::memory::desc &want);
    dnnl::memory constant(const dnnl::memory::desc &desc, const float *data);

    struct Step {
        dnnl::primitive primitive;
        std::unordered_map<int, dnnl::memory> args;
    };

    dnnl::engine engine_;
    dnnl::stream stream_;
    std::vector<Step> steps_;
    std::vector<dnnl::memory> constants_;
    // Reordered copies of constants, so the input is reordered once however many primitives read it.
    std::vector<std::pair<dnnl::memory, dnnl::memory>> reordered_;
    std::string impls_;
    bool winograd_ = false;
};

}  // namespace hfuse::bench
