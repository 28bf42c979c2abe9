// The named fused kernels (generators/README.md). Each builds a small hfuse graph from its
// GeneratorParams -- the data and every weight are graph inputs, so they become the kernel's Inputs,
// in the order listed -- and the base class plans, lowers and schedules it as the JIT executor does.
// Layouts are ONNX's (tensors NCHW, conv weights OIHW); a Halide buffer's extents are the shape reversed.
#include "hfuse_generator.h"

#include <map>
#include <string>
#include <vector>

namespace hfuse::gen {
namespace {

using nlohmann::json;

// The activation after a kernel's linear part: only ops of hfuse's op library.
enum class Activation { None, Relu, Relu6, LeakyRelu, Sigmoid, Tanh, HardSwish };

const std::map<std::string, Activation> kActivations = {
    {"none", Activation::None},           {"relu", Activation::Relu},
    {"relu6", Activation::Relu6},         {"leaky_relu", Activation::LeakyRelu},
    {"sigmoid", Activation::Sigmoid},     {"tanh", Activation::Tanh},
    {"hard_swish", Activation::HardSwish}};

// Builds a model in hfuse's JSON format, one node after the other.
class ModelBuilder {
public:
    explicit ModelBuilder(const std::string &name) : name_(name) {
        model_ = {{"format", "hfuse-model"},   {"version", 1},          {"name", name}, {"inputs", json::array()},
                  {"weights", json::object()}, {"nodes", json::array()}};
    }

    void input(const std::string &name, const Shape &shape) {
        model_["inputs"].push_back({{"name", name}, {"shape", shape}});
    }

    // Adds a node; returns its value's name.
    std::string node(const std::string &name, const std::string &op, const std::vector<std::string> &inputs,
                     const json &attrs = json::object()) {
        json n = {{"name", name}, {"op", op}, {"inputs", inputs}};
        if (!attrs.empty()) n["attrs"] = attrs;
        model_["nodes"].push_back(n);
        return name;
    }

    // A constant (Clip's bounds, Slice's indices): not an Input of the kernel.
    std::string scalar(const std::string &name, float value) {
        model_["weights"][name] = {{"shape", json::array()}, {"values", {value}}};
        return name;
    }
    std::string indices(const std::string &name, const std::vector<int64_t> &values) {
        model_["weights"][name] = {{"shape", {values.size()}}, {"dtype", "int64"}, {"values", values}};
        return name;
    }

    // `act` applied to `value` (the value itself for none).
    std::string activation(const std::string &value, Activation act, const std::string &name = "act") {
        switch (act) {
        case Activation::None: return value;
        case Activation::Relu: return node(name, "Relu", {value});
        case Activation::Relu6: return node(name, "Clip", {value, scalar("clip_min", 0), scalar("clip_max", 6)});
        case Activation::LeakyRelu: return node(name, "LeakyRelu", {value});
        case Activation::Sigmoid: return node(name, "Sigmoid", {value});
        case Activation::Tanh: return node(name, "Tanh", {value});
        case Activation::HardSwish: return node(name, "HardSwish", {value});
        }
        return value;
    }

    // The prepared graph returning `outputs`. With `rename_last`, the last node's value (which must be
    // the only output) is renamed to it, so the kernel's output parameter has a fixed name.
    Graph build(std::vector<std::string> outputs, const std::string &rename_last = "") {
        if (!rename_last.empty()) {
            json &last = model_["nodes"].back();
            if (outputs.size() == 1 && outputs[0] == last["name"]) outputs[0] = rename_last;
            last["name"] = rename_last;
        }
        model_["outputs"] = outputs;
        return graph_from_json(model_, name_);
    }

private:
    std::string name_;
    json model_;
};

json conv_attrs(int kernel, int stride, int pad, int group = 1) {
    return {{"kernel_shape", {kernel, kernel}},
            {"strides", {stride, stride}},
            {"pads", {pad, pad, pad, pad}},
            {"group", group}};
}

}  // namespace

// conv_bias_relu_maxpool(input, weight, bias, output):
//   output = MaxPool(activation(Conv(input, weight, bias)))
//   input [batch, in_channels, height, width], weight [out_channels, in_channels, kernel, kernel],
//   bias [out_channels]; square kernel, stride and symmetric padding; pool x pool max pooling with
//   stride pool_stride (0: the pool size), no padding.
class ConvBiasReluMaxpool : public HfuseGenerator<ConvBiasReluMaxpool> {
public:
    GeneratorParam<int> batch{"batch", 1, 1, 1 << 16};
    GeneratorParam<int> in_channels{"in_channels", 64, 1, 1 << 16};
    GeneratorParam<int> out_channels{"out_channels", 64, 1, 1 << 16};
    GeneratorParam<int> height{"height", 56, 1, 1 << 16};
    GeneratorParam<int> width{"width", 56, 1, 1 << 16};
    GeneratorParam<int> kernel{"kernel", 3, 1, 64};
    GeneratorParam<int> stride{"stride", 1, 1, 64};
    GeneratorParam<int> pad{"pad", 1, 0, 64};
    GeneratorParam<int> pool{"pool", 2, 1, 64};
    GeneratorParam<int> pool_stride{"pool_stride", 0, 0, 64};
    GeneratorParam<Activation> activation{"activation", Activation::Relu, kActivations};

    Graph build_graph() override {
        ModelBuilder m("conv_bias_relu_maxpool");
        m.input("input", {batch, in_channels, height, width});
        m.input("weight", {out_channels, in_channels, kernel, kernel});
        m.input("bias", {out_channels});
        std::string v = m.node("conv", "Conv", {"input", "weight", "bias"}, conv_attrs(kernel, stride, pad));
        v = m.activation(v, activation);
        const int p = pool, ps = pool_stride == 0 ? p : static_cast<int>(pool_stride);
        v = m.node("pool", "MaxPool", {v}, {{"kernel_shape", {p, p}}, {"strides", {ps, ps}}});
        return m.build({v}, "output");
    }
};

// conv_bn_relu(input, weight, scale, bias, mean, var, output):
//   output = activation(BatchNormalization(Conv(input, weight), scale, bias, mean, var, epsilon))
//   input [batch, in_channels, height, width], weight [out_channels, in_channels, kernel, kernel],
//   scale, bias, mean, var [out_channels]. The batch-norm parameters are Inputs, so they are not
//   folded into the weights: the kernel computes the per-channel scale and shift in the conv's epilogue.
class ConvBnRelu : public HfuseGenerator<ConvBnRelu> {
public:
    GeneratorParam<int> batch{"batch", 1, 1, 1 << 16};
    GeneratorParam<int> in_channels{"in_channels", 128, 1, 1 << 16};
    GeneratorParam<int> out_channels{"out_channels", 256, 1, 1 << 16};
    GeneratorParam<int> height{"height", 28, 1, 1 << 16};
    GeneratorParam<int> width{"width", 28, 1, 1 << 16};
    GeneratorParam<int> kernel{"kernel", 1, 1, 64};
    GeneratorParam<int> stride{"stride", 1, 1, 64};
    GeneratorParam<int> pad{"pad", 0, 0, 64};
    GeneratorParam<float> epsilon{"epsilon", 1e-5f};
    GeneratorParam<Activation> activation{"activation", Activation::Relu, kActivations};

    Graph build_graph() override {
        ModelBuilder m("conv_bn_relu");
        m.input("input", {batch, in_channels, height, width});
        m.input("weight", {out_channels, in_channels, kernel, kernel});
        for (const char *p : {"scale", "bias", "mean", "var"}) m.input(p, {out_channels});
        std::string v = m.node("conv", "Conv", {"input", "weight"}, conv_attrs(kernel, stride, pad));
        v = m.node("bn", "BatchNormalization", {v, "scale", "bias", "mean", "var"}, {{"epsilon", (float)epsilon}});
        return m.build({m.activation(v, activation)}, "output");
    }
};

// dwconv_bn_relu(input, weight, scale, bias, mean, var, output): as conv_bn_relu with a depthwise
// conv (group = channels, one filter per channel):
//   input [batch, channels, height, width], weight [channels, 1, kernel, kernel],
//   scale, bias, mean, var [channels].
class DwconvBnRelu : public HfuseGenerator<DwconvBnRelu> {
public:
    GeneratorParam<int> batch{"batch", 1, 1, 1 << 16};
    GeneratorParam<int> channels{"channels", 512, 1, 1 << 16};
    GeneratorParam<int> height{"height", 14, 1, 1 << 16};
    GeneratorParam<int> width{"width", 14, 1, 1 << 16};
    GeneratorParam<int> kernel{"kernel", 3, 1, 64};
    GeneratorParam<int> stride{"stride", 1, 1, 64};
    GeneratorParam<int> pad{"pad", 1, 0, 64};
    GeneratorParam<float> epsilon{"epsilon", 1e-5f};
    GeneratorParam<Activation> activation{"activation", Activation::Relu, kActivations};

    Graph build_graph() override {
        ModelBuilder m("dwconv_bn_relu");
        m.input("input", {batch, channels, height, width});
        m.input("weight", {channels, 1, kernel, kernel});
        for (const char *p : {"scale", "bias", "mean", "var"}) m.input(p, {channels});
        std::string v = m.node("dwconv", "Conv", {"input", "weight"}, conv_attrs(kernel, stride, pad, channels));
        v = m.node("bn", "BatchNormalization", {v, "scale", "bias", "mean", "var"}, {{"epsilon", (float)epsilon}});
        return m.build({m.activation(v, activation)}, "output");
    }
};

// dense_bias_relu(input, weight, bias, output):
//   output = activation(Gemm(input, weight, bias, transB = trans_b))
//   input [batch, in_features], weight [out_features, in_features] (trans_b, as torch.nn.Linear) or
//   [in_features, out_features], bias [out_features].
class DenseBiasRelu : public HfuseGenerator<DenseBiasRelu> {
public:
    GeneratorParam<int> batch{"batch", 1, 1, 1 << 16};
    GeneratorParam<int> in_features{"in_features", 784, 1, 1 << 20};
    GeneratorParam<int> out_features{"out_features", 256, 1, 1 << 20};
    GeneratorParam<bool> trans_b{"trans_b", true};
    GeneratorParam<Activation> activation{"activation", Activation::Relu, kActivations};

    Graph build_graph() override {
        ModelBuilder m("dense_bias_relu");
        m.input("input", {batch, in_features});
        if (trans_b) {
            m.input("weight", {out_features, in_features});
        } else {
            m.input("weight", {in_features, out_features});
        }
        m.input("bias", {out_features});
        std::string v = m.node("dense", "Gemm", {"input", "weight", "bias"}, {{"transB", trans_b ? 1 : 0}});
        return m.build({m.activation(v, activation)}, "output");
    }
};

// rnn_cell(x, h, w_ih, b, w_hh, h_next): an Elman cell,
//   h_next = activation(Gemm(x, w_ih, b, transB) + Gemm(h, w_hh, transB))
//   x [batch, input_size], h [batch, hidden_size], w_ih [hidden_size, input_size], b [hidden_size],
//   w_hh [hidden_size, hidden_size]; activation tanh by default.
class RnnCell : public HfuseGenerator<RnnCell> {
public:
    GeneratorParam<int> batch{"batch", 1, 1, 1 << 16};
    GeneratorParam<int> input_size{"input_size", 128, 1, 1 << 20};
    GeneratorParam<int> hidden_size{"hidden_size", 128, 1, 1 << 20};
    GeneratorParam<Activation> activation{"activation", Activation::Tanh, kActivations};

    Graph build_graph() override {
        ModelBuilder m("rnn_cell");
        m.input("x", {batch, input_size});
        m.input("h", {batch, hidden_size});
        m.input("w_ih", {hidden_size, input_size});
        m.input("b", {hidden_size});
        m.input("w_hh", {hidden_size, hidden_size});
        std::string xw = m.node("xw", "Gemm", {"x", "w_ih", "b"}, {{"transB", 1}});
        std::string hu = m.node("hu", "Gemm", {"h", "w_hh"}, {{"transB", 1}});
        std::string v = m.node("pre", "Add", {xw, hu});
        return m.build({m.activation(v, activation)}, "h_next");
    }
};

// lstm_cell(x, h, c, w_ih, b, w_hh, h_next, c_next): an LSTM cell with ONNX's gate order i, o, f, c
// (rows of w_ih, b and w_hh: [0, H) input gate, [H, 2H) output gate, [2H, 3H) forget gate, [3H, 4H)
// cell candidate):
//   gates = Gemm(x, w_ih, b, transB) + Gemm(h, w_hh, transB)
//   c_next = sigmoid(f) * c + sigmoid(i) * tanh(g);  h_next = sigmoid(o) * tanh(c_next)
//   x [batch, input_size], h and c [batch, hidden_size], w_ih [4 hidden_size, input_size],
//   b [4 hidden_size], w_hh [4 hidden_size, hidden_size].
class LstmCell : public HfuseGenerator<LstmCell> {
public:
    GeneratorParam<int> batch{"batch", 1, 1, 1 << 16};
    GeneratorParam<int> input_size{"input_size", 128, 1, 1 << 20};
    GeneratorParam<int> hidden_size{"hidden_size", 128, 1, 1 << 20};

    Graph build_graph() override {
        const int64_t H = hidden_size;
        ModelBuilder m("lstm_cell");
        m.input("x", {batch, input_size});
        m.input("h", {batch, H});
        m.input("c", {batch, H});
        m.input("w_ih", {4 * H, input_size});
        m.input("b", {4 * H});
        m.input("w_hh", {4 * H, H});
        m.node("xw", "Gemm", {"x", "w_ih", "b"}, {{"transB", 1}});
        m.node("hr", "Gemm", {"h", "w_hh"}, {{"transB", 1}});
        m.node("gates", "Add", {"xw", "hr"});
        m.indices("axis1", {1});
        const char *gate[] = {"i", "o", "f", "g"};
        for (int k = 0; k < 4; k++) {
            const std::string s = gate[k];
            m.node("slice_" + s, "Slice",
                   {"gates", m.indices("start_" + s, {k * H}), m.indices("end_" + s, {(k + 1) * H}), "axis1"});
            m.node(s, k == 3 ? "Tanh" : "Sigmoid", {"slice_" + s});
        }
        m.node("fc", "Mul", {"f", "c"});
        m.node("ig", "Mul", {"i", "g"});
        m.node("c_next", "Add", {"fc", "ig"});
        m.node("tanh_c", "Tanh", {"c_next"});
        m.node("h_next", "Mul", {"o", "tanh_c"});
        return m.build({"h_next", "c_next"});
    }
};

}  // namespace hfuse::gen

HALIDE_REGISTER_GENERATOR(hfuse::gen::ConvBiasReluMaxpool, conv_bias_relu_maxpool)
HALIDE_REGISTER_GENERATOR(hfuse::gen::ConvBnRelu, conv_bn_relu)
HALIDE_REGISTER_GENERATOR(hfuse::gen::DwconvBnRelu, dwconv_bn_relu)
HALIDE_REGISTER_GENERATOR(hfuse::gen::DenseBiasRelu, dense_bias_relu)
HALIDE_REGISTER_GENERATOR(hfuse::gen::RnnCell, rnn_cell)
HALIDE_REGISTER_GENERATOR(hfuse::gen::LstmCell, lstm_cell)
