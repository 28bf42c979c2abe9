#!/usr/bin/env python3
"""Writes the bundled fusion workloads in models/ (hfuse JSON model format, version 1).

Weights are generated from seeds ("uniform" + "seed"), so the files stay small; ranges follow PyTorch's
default initialisation (±1/sqrt(fan_in)) so activations keep a realistic scale through the graph.
conv_bias_relu_maxpool keeps its conv weight in a raw float32 file to exercise that path too.
Run from the repository root: python3 tools/make_models.py
"""
import json
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(__file__))
from hfuse_weights import uniform_values  # noqa: E402  (same generator as the C++ loader)

MODELS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models")


class Model:
    def __init__(self, name, doc):
        self.m = {"format": "hfuse-model", "version": 1, "name": name, "doc": doc,
                  "inputs": [], "weights": {}, "nodes": [], "outputs": []}
        self.seed = 1

    def input(self, name, shape):
        self.m["inputs"].append({"name": name, "shape": shape})
        return name

    def weight(self, name, shape, lo, hi):
        self.m["weights"][name] = {"shape": shape, "uniform": [lo, hi], "seed": self.seed}
        self.seed += 1
        return name

    def ints(self, name, values):
        self.m["weights"][name] = {"shape": [len(values)], "dtype": "int64", "values": values}
        return name

    def node(self, name, op, inputs, **attrs):
        n = {"name": name, "op": op, "inputs": inputs}
        if attrs:
            n["attrs"] = attrs
        self.m["nodes"].append(n)
        return name

    def conv(self, name, x, cin, cout, k, stride=1, pad=None, group=1, bias=False):
        pad = k // 2 if pad is None else pad
        bound = 1 / math.sqrt(cin // group * k * k)
        inputs = [x, self.weight(name + ".w", [cout, cin // group, k, k], -bound, bound)]
        if bias:
            inputs.append(self.weight(name + ".b", [cout], -bound, bound))
        return self.node(name, "Conv", inputs, kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad] * 4, group=group)

    def bn(self, name, x, c):
        return self.node(name, "BatchNormalization", [
            x, self.weight(name + ".scale", [c], 0.5, 1.5), self.weight(name + ".bias", [c], -0.5, 0.5),
            self.weight(name + ".mean", [c], -0.5, 0.5), self.weight(name + ".var", [c], 0.5, 1.5)],
            epsilon=1e-5)

    def gemm(self, name, x, k, n, bias=True):
        bound = 1 / math.sqrt(k)
        inputs = [x, self.weight(name + ".w", [n, k], -bound, bound)]
        if bias:
            inputs.append(self.weight(name + ".b", [n], -bound, bound))
        return self.node(name, "Gemm", inputs, transB=1)

    def save(self, outputs):
        self.m["outputs"] = outputs
        path = os.path.join(MODELS, self.m["name"] + ".json")
        with open(path, "w") as f:
            f.write(dumps_readable(self.m))
        print("wrote", path)


def dumps_readable(model):
    """JSON with one input, weight or node per line: compact enough to read and diff by eye."""
    one = lambda v: json.dumps(v, separators=(", ", ": "))
    lines = []
    for key, value in model.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            body = ",\n".join("    " + one(v) for v in value)
            lines.append('  "%s": [\n%s\n  ]' % (key, body))
        elif isinstance(value, dict) and value:
            body = ",\n".join("    %s: %s" % (json.dumps(k), one(v)) for k, v in value.items())
            lines.append('  "%s": {\n%s\n  }' % (key, body))
        else:
            lines.append('  "%s": %s' % (key, one(value)))
    return "{\n" + ",\n".join(lines) + "\n}\n"


def conv_bn_relu():
    m = Model("conv_bn_relu", "1x1 conv 128->256 + BatchNormalization + Relu at 28x28")
    x = m.input("input", [1, 128, 28, 28])
    m.node("relu", "Relu", [m.bn("bn", m.conv("conv", x, 128, 256, 1), 256)])
    m.save(["relu"])


def dwconv_bn_relu():
    m = Model("dwconv_bn_relu", "depthwise 3x3 conv on 512 channels + BatchNormalization + Relu at 14x14")
    x = m.input("input", [1, 512, 14, 14])
    m.node("relu", "Relu", [m.bn("bn", m.conv("dwconv", x, 512, 512, 3, group=512), 512)])
    m.save(["relu"])


def conv3x3_bn_relu():
    m = Model("conv3x3_bn_relu", "3x3 conv 64->64 + BatchNormalization + Relu at 128x128")
    x = m.input("input", [1, 64, 128, 128])
    m.node("relu", "Relu", [m.bn("bn", m.conv("conv", x, 64, 64, 3), 64)])
    m.save(["relu"])


def conv_bias_relu_maxpool():
    m = Model("conv_bias_relu_maxpool", "3x3 conv 64->64 with bias + Relu + 2x2 stride-2 MaxPool at 56x56")
    x = m.input("input", [1, 64, 56, 56])
    bound = 1 / math.sqrt(64 * 9)
    wfile = "conv_bias_relu_maxpool.w.f32"
    with open(os.path.join(MODELS, wfile), "wb") as f:
        f.write(struct.pack("<%df" % (64 * 64 * 9), *uniform_values(64 * 64 * 9, -bound, bound, 7)))
    m.m["weights"]["conv.w"] = {"shape": [64, 64, 3, 3], "file": wfile}
    conv = m.node("conv", "Conv", [x, "conv.w", m.weight("conv.b", [64], -bound, bound)],
                  kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    relu = m.node("relu", "Relu", [conv])
    m.node("pool", "MaxPool", [relu], kernel_shape=[2, 2], strides=[2, 2])
    m.save(["pool"])


def resnet_block():
    m = Model("resnet_block", "ResNet basic block: conv3x3-bn-relu-conv3x3-bn + identity, relu; 64 channels at 56x56")
    x = m.input("input", [1, 64, 56, 56])
    h = m.node("relu1", "Relu", [m.bn("bn1", m.conv("conv1", x, 64, 64, 3), 64)])
    h = m.bn("bn2", m.conv("conv2", h, 64, 64, 3), 64)
    m.node("relu2", "Relu", [m.node("add", "Add", [h, x])])
    m.save(["relu2"])


def rnn_cell():
    m = Model("rnn_cell", "Elman RNN cell, hidden 128: h' = tanh(x W^T + b + h U^T)")
    x, h = m.input("x", [1, 128]), m.input("h", [1, 128])
    s = m.node("add", "Add", [m.gemm("xw", x, 128, 128), m.gemm("hu", h, 128, 128, bias=False)])
    m.node("h_next", "Tanh", [s])
    m.save(["h_next"])


def lstm_cell():
    m = Model("lstm_cell", "LSTM cell, hidden 128, ONNX gate order i,o,f,c; gates split with Slice")
    x, h, c = m.input("x", [1, 128]), m.input("h", [1, 128]), m.input("c", [1, 128])
    gates = m.node("gates", "Add", [m.gemm("xw", x, 128, 512), m.gemm("hr", h, 128, 512, bias=False)])
    axes = m.ints("axis1", [1])
    act = {}
    for i, (gate, op) in enumerate([("i", "Sigmoid"), ("o", "Sigmoid"), ("f", "Sigmoid"), ("g", "Tanh")]):
        sl = m.node("slice_" + gate, "Slice", [gates, m.ints("start_" + gate, [128 * i]),
                                               m.ints("end_" + gate, [128 * (i + 1)]), axes])
        act[gate] = m.node(gate, op, [sl])
    c_next = m.node("c_next", "Add", [m.node("fc", "Mul", [act["f"], c]), m.node("ig", "Mul", [act["i"], act["g"]])])
    m.node("h_next", "Mul", [act["o"], m.node("tanh_c", "Tanh", [c_next])])
    m.save(["h_next", "c_next"])


def mlp_softmax():
    m = Model("mlp_softmax", "MLP on a 28x28 image: Flatten, 784->256 + Relu, 256->10, Softmax")
    x = m.input("input", [1, 1, 28, 28])
    h = m.node("relu", "Relu", [m.gemm("fc1", m.node("flatten", "Flatten", [x], axis=1), 784, 256)])
    m.node("softmax", "Softmax", [m.gemm("fc2", h, 256, 10)], axis=-1)
    m.save(["softmax"])


if __name__ == "__main__":
    for make in (conv_bn_relu, dwconv_bn_relu, conv3x3_bn_relu, conv_bias_relu_maxpool, resnet_block,
                 rnn_cell, lstm_cell, mlp_softmax):
        make()
