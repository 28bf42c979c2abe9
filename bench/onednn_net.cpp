#include "onednn_net.h"

#include <algorithm>
#include <cstring>

namespace hfuse::bench {

using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

DnnlNet::DnnlNet(bool winograd) : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_), winograd_(winograd) {}

memory DnnlNet::constant(const memory::desc &desc, const float *data) {
    memory m(desc, engine_);
    std::memcpy(m.get_data_handle(), data, desc.get_size());
    constants_.push_back(m);
    return m;
}

memory DnnlNet::input(const memory::dims &dims, const float *data) {
    return constant(memory::desc(dims, dt::f32, dims.size() == 4 ? tag::nchw : tag::nc), data);
}

memory DnnlNet::in_layout(const memory &m, const memory::desc &want) {
    if (m.get_desc() == want) return m;
    bool is_constant =
        std::any_of(constants_.begin(), constants_.end(), [&](const memory &c) { return c.get() == m.get(); });
    if (!is_constant) {
        memory out(want, engine_);
        steps_.push_back({dnnl::reorder(m, out), {{DNNL_ARG_FROM, m}, {DNNL_ARG_TO, out}}});
        return out;
    }
    for (const auto &[from, to] : reordered_) {
        if (from.get() == m.get() && to.get_desc() == want) return to;
    }
    memory from = m, out(want, engine_);
    dnnl::reorder(from, out).execute(stream_, from, out);
    stream_.wait();
    reordered_.emplace_back(m, out);
    constants_.push_back(out);
    return out;
}

memory DnnlNet::conv(const memory &src, const ConvLayer &c, Activation act, const memory *residual) {
    memory::dims wdims = c.weights;
    tag wtag = tag::oihw;
    if (c.groups > 1) {  // oneDNN spells grouped weights (G, O/G, I/G, KH, KW)
        wdims = {c.groups, c.weights[0] / c.groups, c.weights[1], c.weights[2], c.weights[3]};
        wtag = tag::goihw;
    }
    const memory::dims bias_dims = {c.weights[0]};
    dnnl::post_ops ops;
    if (residual) ops.append_sum(1.0f);
    if (act == Activation::Relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    if (act == Activation::Relu6) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, 0.0f, 6.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    auto make_pd = [&](dnnl::algorithm algorithm) {
        dnnl::convolution_forward::desc desc(
            dnnl::prop_kind::forward_inference, algorithm, memory::desc(c.src, dt::f32, tag::any),
            memory::desc(wdims, dt::f32, tag::any), memory::desc(bias_dims, dt::f32, tag::any),
            memory::desc(c.dst, dt::f32, tag::any), c.strides, c.pad_l, c.pad_r);
        return dnnl::convolution_forward::primitive_desc(desc, attr, engine_);
    };
    const bool wino_shape =
        c.groups == 1 && c.weights[2] == 3 && c.weights[3] == 3 && c.strides[0] == 1 && c.strides[1] == 1;
    dnnl::convolution_forward::primitive_desc pd;
    if (winograd_ && wino_shape) {
        try {
            pd = make_pd(dnnl::algorithm::convolution_winograd);
        } catch (const dnnl::error &) {  // unimplemented for this shape or machine: direct, as named below
        }
    }
    if (!pd) pd = make_pd(dnnl::algorithm::convolution_direct);

    memory weights = in_layout(constant(memory::desc(wdims, dt::f32, wtag), c.w.data()), pd.weights_desc());
    memory bias = in_layout(constant(memory::desc(bias_dims, dt::f32, tag::x), c.b.data()), pd.bias_desc());
    memory s = in_layout(src, pd.src_desc());
    memory dst(pd.dst_desc(), engine_);
    if (residual) {
        memory r = in_layout(*residual, pd.dst_desc());
        steps_.push_back({dnnl::reorder(r, dst), {{DNNL_ARG_FROM, r}, {DNNL_ARG_TO, dst}}});
    }
    steps_.push_back({dnnl::convolution_forward(pd),
                      {{DNNL_ARG_SRC, s}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}}});
    impls_ += (impls_.empty() ? "" : ", ") + std::string(pd.impl_info_str());
    return dst;
}

memory DnnlNet::max_pool(const memory &src, const memory::dims &kernel, const memory::dims &strides,
                         const memory::dims &pad_l, const memory::dims &pad_r) {
    memory::dims dims = src.get_desc().dims();
    for (int i = 0; i < 2; i++) dims[2 + i] = (dims[2 + i] + pad_l[i] + pad_r[i] - kernel[i]) / strides[i] + 1;
    dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max, src.get_desc(),
                                     memory::desc(dims, dt::f32, tag::any), strides, kernel, pad_l, pad_r);
    dnnl::pooling_forward::primitive_desc pd(desc, engine_);
    memory dst(pd.dst_desc(), engine_);
    steps_.push_back({dnnl::pooling_forward(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}}});
    impls_ += (impls_.empty() ? "" : ", ") + std::string(pd.impl_info_str());
    return dst;
}

void DnnlNet::run() {
    for (Step &s : steps_) s.primitive.execute(stream_, s.args);
    stream_.wait();
}

std::vector<float> DnnlNet::to_plain(const memory &m) {
    memory::dims dims = m.get_desc().dims();
    memory from = m, plain(memory::desc(dims, dt::f32, dims.size() == 4 ? tag::nchw : tag::nc), engine_);
    dnnl::reorder(from, plain).execute(stream_, from, plain);
    stream_.wait();
    const float *p = static_cast<const float *>(plain.get_data_handle());
    return std::vector<float>(p, p + plain.get_desc().get_size() / sizeof(float));
}

}  // namespace hfuse::bench
