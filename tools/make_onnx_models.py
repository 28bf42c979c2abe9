#!/usr/bin/python3
"""Regenerates the small ONNX test models in tests/data/onnx/ and PyTorch's outputs for them.

Each model is a PyTorch module with seeded random weights (BatchNorm statistics randomized too, so
folding them matters), exported by torch.onnx.export; its input (seeded uniform [-1, 1]) and PyTorch's
output are saved as raw little-endian float32 next to it, and tests/data/onnx/models.json lists them
for tests/unit/onnx_import_test.cpp, which runs each through hfuse and compares.

Needs Debian's PyTorch (torchvision for the building blocks it takes from it) and onnx:

    apt-get install python3-torch python3-torchvision python3-onnx
    /usr/bin/python3 tools/make_onnx_models.py            # writes tests/data/onnx/

The models are small on purpose (reduced widths and inputs: a few MB in all); the full-size
torchvision networks are exported and checked by tools/onnx_acceptance.py instead.
"""
import json
import os
import sys
import warnings

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torchvision.models.resnet import BasicBlock
from torchvision.models.squeezenet import Fire

warnings.filterwarnings("ignore")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "onnx")


def randomize_batchnorm(model, gen):
    """BatchNorm with non-trivial statistics and affine parameters (defaults would fold to identity)."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.rand(c, generator=gen) - 0.5)
            m.running_var.copy_(torch.rand(c, generator=gen) + 0.5)
            m.weight.data.copy_(torch.rand(c, generator=gen) + 0.5)
            m.bias.data.copy_(torch.rand(c, generator=gen) - 0.5)


class SmallResNet(nn.Module):
    """ResNet with torchvision's BasicBlock at reduced widths: stem, three stages (two downsampling
    with a 1x1 conv + BN shortcut), global pooling and a linear classifier."""

    def __init__(self, widths=(8, 16, 32), classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, padding=1, bias=False), nn.BatchNorm2d(widths[0]),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        layers, c = [], widths[0]
        for i, w in enumerate(widths):
            stride = 1 if i == 0 else 2
            down = None
            if stride != 1 or c != w:
                down = nn.Sequential(nn.Conv2d(c, w, 1, stride, bias=False), nn.BatchNorm2d(w))
            layers += [BasicBlock(c, w, stride, down), BasicBlock(w, w)]
            c = w
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


class SmallSqueezeNet(nn.Module):
    """SqueezeNet 1.1's structure with torchvision's Fire modules at reduced widths; max pools with
    ceil_mode on an odd input so the ceil windows matter."""

    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(16, 4, 8, 8), Fire(16, 4, 8, 8), nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(16, 8, 16, 16), Fire(32, 8, 16, 16))
        self.classifier = nn.Sequential(nn.Dropout(0.5), nn.Conv2d(32, classes, 1), nn.ReLU(inplace=True),
                                        nn.AdaptiveAvgPool2d(1))

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


class SmallVGG(nn.Module):
    """A VGG-style stack (conv3x3 + ReLU, max pools), adaptive average pooling to 2x2 and a classifier
    with dropout; flattened with x.view(x.size(0), -1), which exports Shape -> Gather -> Unsqueeze ->
    Concat -> Reshape (exported with a dynamic batch dim: hfuse needs --shape)."""

    def __init__(self, classes=10):
        super().__init__()
        cfg = [8, "M", 16, 16, "M", 32, 32, "M"]
        layers, c = [], 3
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(c, v, 3, padding=1), nn.ReLU(inplace=True)]
                c = v
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((2, 2))
        self.classifier = nn.Sequential(nn.Linear(c * 4, 64), nn.ReLU(True), nn.Dropout(), nn.Linear(64, classes))

    def forward(self, x):
        x = self.avgpool(self.features(x))
        return self.classifier(x.view(x.size(0), -1))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.Tanh(), nn.Linear(64, 32),
                                 nn.Sigmoid(), nn.Linear(32, 10))

    def forward(self, x):
        return torch.softmax(self.net(x), dim=1)


class OpsMix(nn.Module):
    """The ops the importer rewrites or folds, in one model: constant Pad (ConstantOfShape, Concat,
    Slice, Cast... on shapes), depthwise conv, nearest upsampling (Resize, or Upsample at opset 9),
    ReduceMean over channels and over the spatial dims, Gather/Unsqueeze/Squeeze of activations,
    arithmetic with constants, HardSwish, LeakyReLU, Sigmoid, Softmax; two outputs."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8)
        self.fc = nn.Linear(9 + 7 * 8, 10)

    def forward(self, x):  # 1 x 3 x 12 x 12
        y = F.leaky_relu(self.conv1(x), 0.1)
        y = F.pad(y, (1, 2, 0, 1))  # 13 x 15
        y = self.conv2(y)  # 7 x 8
        y = F.interpolate(y, scale_factor=2.0, mode="nearest")  # 14 x 16
        m = y.mean(1, keepdim=True)
        y = torch.cat([y, torch.sigmoid(m)], 1)  # 9 channels
        y = F.hardswish(y) * 0.5 - 0.1
        g = y.mean((2, 3))  # N x 9
        first = y[:, 1].unsqueeze(1)  # N x 1 x 14 x 16
        p = F.max_pool2d(first, 2, ceil_mode=True).squeeze(1)  # N x 7 x 8
        h = torch.cat([g, p.flatten(1)], 1) / 2.0
        return torch.softmax(self.fc(h), dim=-1), m


class MathMix(nn.Module):
    """The math ops a transformer exports: LayerNorm decomposed (ReduceMean, Sub, Pow, Sqrt, Div) and
    exact GELU (Div, Erf, Add, Mul) at opsets before 17, then Exp, Log, Abs, Neg, Reciprocal, Max, Min,
    Expand and Pow by a computed exponent."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 16)
        self.norm = nn.LayerNorm(16)
        nn.init.uniform_(self.norm.weight, 0.5, 1.5)
        nn.init.uniform_(self.norm.bias, -0.5, 0.5)
        self.token = nn.Parameter(torch.rand(1, 1, 16) - 0.5)

    def forward(self, x):  # N x 5 x 12
        h = F.gelu(self.fc(x))
        h = self.norm(h)
        a = torch.exp(-h.abs()) + torch.log(h * h + 1.0)
        b = torch.reciprocal(h.abs() + 0.5) - torch.neg(h)
        m = torch.maximum(a, b) + torch.minimum(a, torch.sqrt(h * h + 0.25))
        # Expand of a weight (a class token over the batch: folded at import) and of an activation.
        m = m + self.token.expand(x.shape[0], -1, -1) + h[:, :1, :].expand(-1, x.shape[1], -1)
        return torch.pow(a + 0.5, torch.sigmoid(m)) * 0.5


class SmallSegmentation(nn.Module):
    """A DeepLab-like head on a small backbone: a pooled branch broadcast back by bilinear Resize from
    1 x 1, the logits upsampled to the input's size by bilinear Resize (align_corners=False, a
    non-integer ratio), and a bicubic (align_corners=True) second output."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 16, 3, 2, 1), nn.Hardswish())
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(16, 8, 1), nn.ReLU())
        self.branch = nn.Conv2d(16, 8, 3, padding=2, dilation=2)
        self.head = nn.Conv2d(16, 5, 1)

    def forward(self, x):  # 1 x 3 x 30 x 26
        f = self.stem(x)  # 8 x 7
        p = F.interpolate(self.pool(f), size=f.shape[-2:], mode="bilinear", align_corners=False)
        y = self.head(torch.cat([p, torch.relu(self.branch(f))], 1))
        seg = F.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=False)
        return seg, F.interpolate(y, size=(11, 13), mode="bicubic", align_corners=True)


def small_encoder():
    """torch.nn.TransformerEncoder as the benchmark's, narrowed: d 32, 4 heads, 2 layers, GELU."""
    layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, dropout=0.0, activation="gelu", batch_first=True)
    encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    with torch.no_grad():  # the biases and LayerNorm parameters drawn too, so all of them are checked
        for name, p in encoder.named_parameters():
            scale = 1.0 if "norm" in name and name.endswith("weight") else 0.0
            p.copy_(torch.rand(p.shape) * 0.4 - 0.2 + scale)
    return encoder


def small_vit():
    from torchvision.models.vision_transformer import VisionTransformer
    vit = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64,
                            num_classes=10)
    with torch.no_grad():
        for p in vit.parameters():
            if p.abs().max() == 0:  # the head and the biases, left zero by the constructor
                p.copy_(torch.rand(p.shape) * 0.2 - 0.1)
    return vit


def small_swin():
    """Shifted windows (the mask built by Mod, ScatterND, Not, Where on shapes), patch merging."""
    from torchvision.models.swin_transformer import SwinTransformer
    return SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4],
                           num_classes=10)


def models():
    """(name, module factory, input shape, opset, export options)."""
    dyn = {"input": {0: "batch"}, "output": {0: "batch"}}
    preserve = {"training": torch.onnx.TrainingMode.PRESERVE}
    return [
        ("resnet_small", SmallResNet, [1, 3, 32, 32], 13, {}),
        ("resnet_small_bn", SmallResNet, [1, 3, 32, 32], 13, preserve),
        ("mobilenet_v2_small", lambda: torchvision.models.mobilenet_v2(width_mult=0.25, num_classes=10),
         [1, 3, 96, 96], 13, {}),
        ("squeezenet_small", SmallSqueezeNet, [1, 3, 47, 47], 13, {}),
        ("vgg_small", SmallVGG, [1, 3, 32, 32], 13, {"dynamic_axes": dyn, "shape": "input=1x3x32x32"}),
        ("mlp", MLP, [2, 64], 13, {"dynamic_axes": dyn, "shape": "input=2x64"}),
        ("mlp_opset11", MLP, [2, 64], 11, {}),
        ("mlp_ext", MLP, [2, 64], 13, {"external_data": True}),
        ("ops_mix", OpsMix, [1, 3, 12, 12], 13, {}),
        ("ops_mix_opset9", OpsMix, [1, 3, 12, 12], 9, {}),
        ("ops_mix_opset11", OpsMix, [1, 3, 12, 12], 11, {}),
        ("ops_mix_opset17", OpsMix, [1, 3, 12, 12], 17, {}),
        ("math_mix", MathMix, [2, 5, 12], 13, {}),
        ("math_mix_opset17", MathMix, [2, 5, 12], 17, {}),
        ("segmentation_small", SmallSegmentation, [1, 3, 30, 26], 13, {}),
        ("encoder_small", small_encoder, [2, 10, 32], 13, {}),
        ("encoder_small_opset17", small_encoder, [2, 10, 32], 17, {}),
        ("vit_small", small_vit, [1, 3, 32, 32], 14, {}),
        ("swin_small", small_swin, [1, 3, 32, 32], 14, {}),
    ]


def save_f32(path, t):
    t.detach().contiguous().to(torch.float32).numpy().astype("<f4").tofile(path)


def hand_built():
    """Models written with onnx.helper for what PyTorch does not export: opset-specific forms and
    corner cases. (name, ModelProto, input, [expected outputs]) with outputs computed here in torch."""
    from onnx import TensorProto, helper, numpy_helper

    gen = torch.Generator().manual_seed(7)

    def rand(*shape):
        return torch.rand(shape, generator=gen) * 2 - 1

    def model(nodes, inputs, outputs, inits, opset, ir=None):
        g = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v.numpy(), k) for k, v in inits])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="make_onnx_models")
        if ir:
            m.ir_version = ir
        return m

    def vi(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    out = []
    # Softmax before opset 13: the input flattened to 2-D at axis 1, normalised over dims 1...
    x = rand(2, 3, 4, 5)
    out.append(("softmax_axis1_opset11",
                model([helper.make_node("Softmax", ["input"], ["output"], name="softmax", axis=1)],
                      [vi("input", [2, 3, 4, 5])], [vi("output", [2, 3, 4, 5])], [], 11),
                x, [torch.softmax(x.reshape(2, 60), 1).reshape(2, 3, 4, 5)]))
    # Opset 9 forms: Split's split, Clip's min/max and Slice's starts/ends/axes as attributes.
    x = rand(1, 6, 4, 4)
    out.append(("legacy_attrs_opset9", model([
        helper.make_node("Split", ["input"], ["a", "b"], name="split", axis=1, split=[2, 4]),
        helper.make_node("Clip", ["a"], ["c"], name="clip", min=-0.2, max=0.3),
        helper.make_node("Slice", ["b"], ["s"], name="slice", starts=[1], ends=[3], axes=[1]),
        helper.make_node("Concat", ["c", "s"], ["output"], name="concat", axis=1)],
        [vi("input", [1, 6, 4, 4])], [vi("output", [1, 4, 4, 4])], [], 9),
        x, [torch.cat([x[:, :2].clamp(-0.2, 0.3), x[:, 3:5]], 1)]))
    # A graph input that is also an initializer (IR 3: every weight is listed as an input) is that constant.
    x, w = rand(1, 2, 5, 5), rand(3, 2, 3, 3)
    out.append(("initializer_input", model([
        helper.make_node("Conv", ["input", "W"], ["y"], name="conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["y"], ["output"], name="relu")],
        [vi("input", [1, 2, 5, 5]), vi("W", [3, 2, 3, 3])], [vi("output", [1, 3, 5, 5])], [("W", w)], 9, ir=3),
        x, [torch.relu(F.conv2d(x, w, padding=1))]))
    # Squeeze without axes, Gather of an activation at a scalar index, Unsqueeze with an axes input.
    x = rand(1, 4, 1, 3)
    out.append(("squeeze_gather", model([
        helper.make_node("Squeeze", ["input"], ["sq"], name="squeeze"),
        helper.make_node("Constant", [], ["idx"], name="idx", value=helper.make_tensor("i", TensorProto.INT64, [], [2])),
        helper.make_node("Gather", ["sq", "idx"], ["row"], name="gather", axis=0),
        helper.make_node("Constant", [], ["axes"], name="axes", value_ints=[0]),
        helper.make_node("Unsqueeze", ["row", "axes"], ["output"], name="unsqueeze")],
        [vi("input", [1, 4, 1, 3])], [vi("output", [1, 3])], [], 13),
        x, [x.reshape(4, 3)[2].reshape(1, 3)]))

    # Opsets 18 to 21 (beyond what the installed onnx knows, so not checked): IR 8 for 18, 9 for 19, 10 for 21.
    def ints(*v):
        return torch.tensor(v, dtype=torch.int64)

    # Opset 18: Split's num_outputs (7 channels in 3: 3, 3 and 1), ReduceMean's axes as an input (the
    # spatial dims: a GlobalAveragePool; the last dim; none: every dim; none with noop_with_empty_axes:
    # the identity), Pad's axes input (dims 2 and -1 only).
    x = rand(1, 7, 4, 5)
    a, b, c = x[:, :3], x[:, 3:6], x[:, 6:]
    s = a.mean((2, 3), keepdim=True) + b.mean(-1, keepdim=True)
    out.append(("opset18_split_reduce_pad", model([
        helper.make_node("Split", ["input"], ["a", "b", "c"], name="split", axis=1, num_outputs=3),
        helper.make_node("ReduceMean", ["a", "spatial"], ["m1"], name="mean_spatial"),
        helper.make_node("ReduceMean", ["b", "last"], ["m2"], name="mean_last", keepdims=1),
        helper.make_node("Add", ["m1", "m2"], ["s"], name="add"),
        helper.make_node("ReduceMean", ["s"], ["n"], name="mean_noop", noop_with_empty_axes=1),
        helper.make_node("ReduceMean", ["c"], ["m3"], name="mean_all"),
        helper.make_node("Add", ["n", "m3"], ["output0"], name="add_all"),
        helper.make_node("Pad", ["c", "pads", "value", "pad_axes"], ["output1"], name="pad")],
        [vi("input", [1, 7, 4, 5])], [vi("output0", [1, 3, 4, 1]), vi("output1", [1, 1, 5, 8])],
        [("spatial", ints(2, 3)), ("last", ints(-1)), ("pads", ints(1, 2, 0, 1)), ("value", torch.tensor(0.5)),
         ("pad_axes", ints(2, -1))], 18, ir=8),
        x, [s + c.mean().reshape(1, 1, 1, 1), F.pad(c, (2, 1, 1, 0), value=0.5)]))
    # Opset 19: AveragePool with dilations (of 1); Resize (nearest) with antialias, axes and
    # keep_aspect_ratio_policy: scales for dims 2 and 3 (half_pixel, round_prefer_floor: output o reads
    # o // 2), sizes for the last dim only (asymmetric, floor: o reads floor(o * 3 / 7)).
    x = rand(1, 2, 6, 6)
    p = F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)  # 3 x 3
    up = torch.tensor([o // 2 for o in range(6)])
    wide = torch.tensor([o * 3 // 7 for o in range(7)])
    out.append(("opset19_pool_resize", model([
        helper.make_node("AveragePool", ["input"], ["p"], name="pool", kernel_shape=[3, 3], strides=[2, 2],
                         pads=[1, 1, 1, 1], dilations=[1, 1], count_include_pad=0, ceil_mode=0),
        helper.make_node("Resize", ["p", "", "scales"], ["output0"], name="resize_scales", mode="nearest",
                         axes=[2, 3], antialias=0, keep_aspect_ratio_policy="stretch"),
        helper.make_node("Resize", ["p", "", "", "sizes"], ["output1"], name="resize_sizes", mode="nearest",
                         axes=[-1], coordinate_transformation_mode="asymmetric", nearest_mode="floor",
                         keep_aspect_ratio_policy="not_smaller")],
        [vi("input", [1, 2, 6, 6])], [vi("output0", [1, 2, 6, 6]), vi("output1", [1, 2, 3, 7])],
        [("scales", torch.tensor([2.0, 2.0])), ("sizes", ints(7))], 19, ir=9),
        x, [p[:, :, up][:, :, :, up], p[:, :, :, wide]]))
    # Opset 21: a conv net's ops at their opset-21 versions (Cast, Reshape, Transpose gained types).
    x, w, bias = rand(1, 3, 6, 6), rand(4, 3, 3, 3), rand(4)
    y = torch.relu(F.conv2d(x, w, bias, padding=1))
    out.append(("opset21_conv", model([
        helper.make_node("Conv", ["input", "W", "B"], ["y"], name="conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["y"], ["r"], name="relu"),
        helper.make_node("Cast", ["r"], ["f"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Reshape", ["f", "shape"], ["flat"], name="reshape"),
        helper.make_node("Transpose", ["flat"], ["output"], name="transpose", perm=[0, 2, 1])],
        [vi("input", [1, 3, 6, 6])], [vi("output", [1, 36, 4])], [("W", w), ("B", bias), ("shape", ints(1, 4, 36))],
        21, ir=10),
        x, [y.reshape(1, 4, 36).transpose(1, 2)]))
    # Opset 20's Gelu, exact and by tanh, and opset 17's LayerNormalization over two axes.
    x, g, b = rand(2, 3, 4, 5), rand(4, 5) + 1.5, rand(5)
    out.append(("gelu_layer_norm_opset20", model([
        helper.make_node("Gelu", ["input"], ["exact"], name="gelu"),
        helper.make_node("Gelu", ["input"], ["output1"], name="gelu_tanh", approximate="tanh"),
        helper.make_node("LayerNormalization", ["exact", "gamma", "beta"], ["output0"], name="ln", axis=2,
                         epsilon=1e-3)],
        [vi("input", [2, 3, 4, 5])], [vi("output0", [2, 3, 4, 5]), vi("output1", [2, 3, 4, 5])],
        [("gamma", g), ("beta", b)], 20, ir=9),
        x, [F.layer_norm(F.gelu(x), [4, 5], g, b.expand(4, 5), eps=1e-3), F.gelu(x, approximate="tanh")]))
    # Resize beyond what PyTorch exports, expected values from ONNX's own reference (interpolate_nd) and
    # PyTorch: opset 19's linear tf_crop_and_resize with roi and sizes for axes 2 and 3 only (the box
    # partly outside: extrapolation_value), and antialiased cubic downsampling with axes in reverse order
    # (PyTorch's antialias is exclude_outside's renormalised window, with A = -0.5).
    from onnx.backend.test.case.node.resize import interpolate_nd, linear_coeffs
    x = rand(1, 2, 6, 7)
    roi = [0.1, -0.2, 0.8, 1.1]  # starts of axes 2, 3, then their ends
    crop = interpolate_nd(x.numpy(), linear_coeffs, output_size=[1, 2, 5, 9],
                          roi=np.array([0, 0, roi[0], roi[1], 1, 1, roi[2], roi[3]]),
                          coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-1.0)
    out.append(("resize_crop_antialias_opset19", model([
        helper.make_node("Resize", ["input", "roi", "", "crop_sizes"], ["output0"], name="crop", mode="linear",
                         axes=[2, 3], coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-1.0),
        helper.make_node("Resize", ["input", "", "", "down_sizes"], ["output1"], name="down", mode="cubic",
                         axes=[3, 2], antialias=1, exclude_outside=1, cubic_coeff_a=-0.5)],
        [vi("input", [1, 2, 6, 7])], [vi("output0", [1, 2, 5, 9]), vi("output1", [1, 2, 4, 3])],
        [("roi", torch.tensor(roi)), ("crop_sizes", ints(5, 9)), ("down_sizes", ints(3, 4))], 19, ir=9),
        x, [torch.from_numpy(crop).float(),
            F.interpolate(x.double(), size=(4, 3), mode="bicubic", antialias=True, align_corners=False).float()]))
    # Opset 9's Upsample, linear: asymmetric coordinates (o reads o / scale), by ONNX's reference.
    x = rand(1, 2, 3, 4)
    up = interpolate_nd(x.numpy(), linear_coeffs, scale_factors=np.array([1, 1, 2, 1.5]),
                        coordinate_transformation_mode="asymmetric")
    out.append(("upsample_linear_opset9", model([
        helper.make_node("Upsample", ["input", "scales"], ["output"], name="upsample", mode="linear")],
        [vi("input", [1, 2, 3, 4])], [vi("output", [1, 2, 6, 6])], [("scales", torch.tensor([1, 1, 2, 1.5]))], 9),
        x, [torch.from_numpy(up).float()]))
    # The reductions with axes as an input: ReduceSum from opset 13, ReduceMax and ReduceMin from 18
    # (ReduceMax over the spatial dims: a GlobalMaxPool).
    x = rand(2, 3, 4, 5)
    out.append(("reduce_sum_opset13", model([
        helper.make_node("ReduceSum", ["input", "axes"], ["output"], name="sum", keepdims=0)],
        [vi("input", [2, 3, 4, 5])], [vi("output", [2, 4])], [("axes", ints(1, -1))], 13),
        x, [x.sum((1, 3))]))
    out.append(("reduce_max_min_opset18", model([
        helper.make_node("ReduceMax", ["input", "spatial"], ["output0"], name="max"),
        helper.make_node("ReduceMin", ["input", "channels"], ["output1"], name="min", keepdims=0)],
        [vi("input", [2, 3, 4, 5])], [vi("output0", [2, 3, 1, 1]), vi("output1", [2, 4, 5])],
        [("spatial", ints(2, 3)), ("channels", ints(1))], 18, ir=8),
        x, [x.amax((2, 3), keepdim=True), x.amin(1)]))
    # Einsum (opset 12) as batched matrix products: attention's scores and their product with V (the
    # attention then one group), a linear layer with an ellipsis, a matrix-vector product, a transpose.
    x = rand(2, 3, 5, 4)
    w, v = rand(4, 6), rand(6)
    e = torch.einsum("bhid,bhjd->bhij", x, x).softmax(-1)
    y = torch.einsum("...id,de->...ie", torch.einsum("bhij,bhjd->bhid", e, x), w)
    out.append(("einsum_opset12", model([
        helper.make_node("Einsum", ["input", "input"], ["s"], name="scores", equation="bhid,bhjd->bhij"),
        helper.make_node("Softmax", ["s"], ["p"], name="softmax", axis=-1),
        helper.make_node("Einsum", ["p", "input"], ["a"], name="attend", equation="bhij, bhjd -> bhid"),
        helper.make_node("Einsum", ["a", "W"], ["output0"], name="linear", equation="...id,de->...ie"),
        helper.make_node("Einsum", ["output0", "v"], ["output1"], name="matvec", equation="bhie,e->bhi"),
        helper.make_node("Einsum", ["input"], ["output2"], name="transpose", equation="bhid->bhdi")],
        [vi("input", [2, 3, 5, 4])], [vi("output0", [2, 3, 5, 6]), vi("output1", [2, 3, 5]),
                                      vi("output2", [2, 3, 4, 5])], [("W", w), ("v", v)], 12),
        x, [y, torch.einsum("bhie,e->bhi", y, v), x.transpose(2, 3)]))
    # Comparisons, logic and Where on activations (booleans as hfuse's float32 0 and 1), and Where of
    # a constant boolean mask (a causal mask's form).
    x = rand(2, 3, 4, 5)
    mask = torch.tril(torch.ones(4, 5, dtype=torch.bool))
    gt, lt = x > 0.2, x < -0.3
    w = torch.where(gt & ~lt, x, -x)
    f = TensorProto.FLOAT
    out.append(("compare_where_opset16", model([
        helper.make_node("Greater", ["input", "c02"], ["gt"], name="greater"),
        helper.make_node("Less", ["input", "cm03"], ["lt"], name="less"),
        helper.make_node("Not", ["lt"], ["nlt"], name="not"),
        helper.make_node("And", ["gt", "nlt"], ["both"], name="and"),
        helper.make_node("Neg", ["input"], ["neg"], name="neg"),
        helper.make_node("Where", ["both", "input", "neg"], ["w"], name="where"),
        helper.make_node("Equal", ["gt", "nlt"], ["eq"], name="equal"),
        helper.make_node("Mul", ["input", "c05"], ["half"], name="half"),
        helper.make_node("Where", ["eq", "w", "half"], ["output0"], name="where_eq"),
        helper.make_node("Or", ["gt", "lt"], ["either"], name="or"),
        helper.make_node("Cast", ["either"], ["output1"], name="cast_or", to=f),
        helper.make_node("GreaterOrEqual", ["input", "c0"], ["ge"], name="ge"),
        helper.make_node("LessOrEqual", ["input", "c01"], ["le"], name="le"),
        helper.make_node("Xor", ["ge", "le"], ["xor"], name="xor"),
        helper.make_node("Cast", ["xor"], ["output2"], name="cast_xor", to=f),
        helper.make_node("Where", ["mask", "input", "ninf"], ["output3"], name="where_mask")],
        [vi("input", [2, 3, 4, 5])], [vi("output0", [2, 3, 4, 5]), vi("output1", [2, 3, 4, 5]),
                                      vi("output2", [2, 3, 4, 5]), vi("output3", [2, 3, 4, 5])],
        [("c02", torch.tensor(0.2)), ("cm03", torch.tensor(-0.3)), ("c05", torch.tensor(0.5)), ("c0", torch.tensor(0.0)),
         ("c01", torch.tensor(0.1)), ("mask", mask), ("ninf", torch.tensor(float("-inf")))], 16),
        x, [torch.where(gt == ~lt, w, 0.5 * x), (gt | lt).float(), ((x >= 0) ^ (x <= 0.1)).float(),
            torch.where(mask, x, torch.tensor(float("-inf")))]))
    return out


def opset_error_models():
    """Models hfuse refuses with one error each (tests/unit/onnx_import_test.cpp checks the messages):
    name -> ModelProto."""
    from onnx import TensorProto, helper, numpy_helper
    import numpy as np

    def model(nodes, outputs, inits, opset, ir, shape=(1, 1, 4, 4)):
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="make_onnx_models")
        m.ir_version = ir
        return m

    def ints(name, *v):
        return numpy_helper.from_array(np.array(v, dtype=np.int64), name)

    float8 = TensorProto()  # float8e4m3fn (type 17, IR 9), which onnx 1.12's helpers do not know
    float8.name, float8.data_type, float8.raw_data = "w8", 17, bytes([0x38, 0x40, 0x44, 0x48])
    float8.dims.extend([4])
    return {
        "error_opset22": model([helper.make_node("Relu", ["input"], ["output"], name="relu")], ["output"], [], 22, 10),
        "error_pad_wrap_opset19": model(
            [helper.make_node("Pad", ["input", "pads"], ["output"], name="pad", mode="wrap")], ["output"],
            [ints("pads", 0, 0, 1, 1, 0, 0, 1, 1)], 19, 9),
        "error_resize_aspect_opset18": model(
            [helper.make_node("Resize", ["input", "", "", "sizes"], ["output"], name="resize", mode="nearest",
                              axes=[2, 3], keep_aspect_ratio_policy="not_larger")], ["output"],
            [ints("sizes", 8, 6)], 18, 8),
        "error_avgpool_dilations_opset19": model(
            [helper.make_node("AveragePool", ["input"], ["output"], name="pool", kernel_shape=[2, 2],
                              dilations=[2, 2])], ["output"], [], 19, 9),
        "error_split_num_outputs_opset18": model(
            [helper.make_node("Split", ["input"], ["a", "b", "c"], name="split", axis=2, num_outputs=3)],
            ["a", "b", "c"], [], 18, 8),
        "error_einsum_opset12": model(
            [helper.make_node("Einsum", ["input", "input"], ["output"], name="einsum", equation="bcij,bcjk->bc")],
            ["output"], [], 12, 7),
        "error_float8_opset21": model(
            [helper.make_node("Add", ["input", "w8"], ["output"], name="add")], ["output"], [float8], 21, 10,
            shape=(1, 4)),
    }


def main():
    os.makedirs(OUT, exist_ok=True)
    manifest = []
    for seed, (name, make, shape, opset, opts) in enumerate(models()):
        torch.manual_seed(100 + seed)
        gen = torch.Generator().manual_seed(200 + seed)
        model = make()
        randomize_batchnorm(model, gen)
        model.eval()
        x = torch.rand(shape, generator=gen) * 2 - 1
        with torch.no_grad():
            y = model(x)
        outputs = list(y) if isinstance(y, tuple) else [y]
        output_names = ["output"] if len(outputs) == 1 else ["output%d" % i for i in range(len(outputs))]
        path = os.path.join(OUT, name + ".onnx")
        torch.onnx.export(model, x, path, opset_version=opset, input_names=["input"], output_names=output_names,
                          dynamic_axes=opts.get("dynamic_axes"),
                          training=opts.get("training", torch.onnx.TrainingMode.EVAL))
        if opts.get("external_data"):
            # Every initializer in one data file beside the model.
            m = onnx.load(path)
            data = name + ".onnx.data"
            if os.path.exists(os.path.join(OUT, data)):
                os.remove(os.path.join(OUT, data))
            onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location=data,
                            size_threshold=0)
        save_f32(os.path.join(OUT, name + ".input.f32"), x)
        entry = {"name": name, "model": name + ".onnx", "opset": opset, "input": name + ".input.f32",
                 "input_shape": shape, "outputs": []}
        if "shape" in opts:
            entry["shape"] = opts["shape"]
        for out_name, out in zip(output_names, outputs):
            f = "%s.%s.f32" % (name, out_name)
            save_f32(os.path.join(OUT, f), out)
            entry["outputs"].append({"name": out_name, "shape": list(out.shape), "file": f})
        ops = sorted({n.op_type for n in onnx.load(path).graph.node})
        entry["onnx_ops"] = ops
        manifest.append(entry)
        print("%-20s opset %2d  %s" % (name, opset, " ".join(ops)))
    for name, m, x, ys in hand_built():
        if m.opset_import[0].version <= onnx.defs.onnx_opset_version():  # the opsets the installed onnx knows
            onnx.checker.check_model(m)
        onnx.save(m, os.path.join(OUT, name + ".onnx"))
        save_f32(os.path.join(OUT, name + ".input.f32"), x)
        entry = {"name": name, "model": name + ".onnx", "opset": m.opset_import[0].version,
                 "input": name + ".input.f32", "input_shape": list(x.shape), "outputs": []}
        for out, y in zip(m.graph.output, ys):
            f = "%s.%s.f32" % (name, out.name)
            save_f32(os.path.join(OUT, f), y)
            entry["outputs"].append({"name": out.name, "shape": list(y.shape), "file": f})
        entry["onnx_ops"] = sorted({n.op_type for n in m.graph.node})
        manifest.append(entry)
        print("%-20s opset %2d  %s (hand-built)" % (name, entry["opset"], " ".join(entry["onnx_ops"])))

    # Not a runnable model: every unsupported op type must be reported at once, with node names.
    from onnx import TensorProto, helper
    k = helper.make_tensor("k", TensorProto.INT64, [1], [2])
    nodes = [helper.make_node("TopK", ["input", "k"], ["v1", "i1"], name="topk_a", axis=-1),
             helper.make_node("TopK", ["v1", "k"], ["v2", "i2"], name="topk_b", axis=-1),
             helper.make_node("Relu", ["v2"], ["r"], name="relu"),
             helper.make_node("Hardmax", ["r"], ["e"], name="hardmax"),
             helper.make_node("FusedGemm", ["e", "e"], ["output"], name="fused", domain="com.microsoft")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 8])],
                          [helper.make_tensor_value_info("output", TensorProto.FLOAT, None)], [k])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
    onnx.save(m, os.path.join(OUT, "unsupported_ops.onnx"))
    for name, m in opset_error_models().items():
        onnx.save(m, os.path.join(OUT, name + ".onnx"))

    with open(os.path.join(OUT, "models.json"), "w") as f:
        json.dump({"torch": torch.__version__, "models": manifest}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
