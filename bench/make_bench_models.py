#!/usr/bin/env python3
"""Writes the benchmark-only workloads in bench/models/ (hfuse JSON models), next to the bundled ones:

  mobilenet_v2_block   MobileNet-V2 inverted residual block: 1x1 expand 24->144 + BN + ReLU6, 3x3
                       depthwise + BN + ReLU6, 1x1 project 144->24 + BN, + identity; at 56x56
  NAME_b8              the convolution workloads of models/ (and the block above) at batch 8

Weights come from seeds, as in tools/make_models.py; conv_bias_relu_maxpool's weight file is shared
with models/. Run from the repository root: python3 bench/make_bench_models.py
"""
import argparse
import copy
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import make_models  # noqa: E402

OUT = os.path.join(ROOT, "bench", "models")
BATCHED = ["conv_bn_relu", "conv3x3_bn_relu", "conv_bias_relu_maxpool", "resnet_block", "dwconv_bn_relu"]


def save(model):
    path = os.path.join(OUT, model["name"] + ".json")
    with open(path, "w") as f:
        f.write(make_models.dumps_readable(model))
    print("wrote", os.path.relpath(path, ROOT))


def mobilenet_v2_block():
    m = make_models.Model("mobilenet_v2_block", "MobileNet-V2 inverted residual block: 1x1 expand 24->144 + BN "
                          "+ ReLU6, 3x3 depthwise + BN + ReLU6, 1x1 project 144->24 + BN, + identity; at 56x56")
    x = m.input("input", [1, 24, 56, 56])
    # Clip's bounds are float32 scalar tensors (ONNX opset 11+), as PyTorch exports ReLU6.
    lo, hi = "relu6.min", "relu6.max"
    m.m["weights"][lo] = {"shape": [], "values": [0.0]}
    m.m["weights"][hi] = {"shape": [], "values": [6.0]}
    h = m.node("expand_relu6", "Clip", [m.bn("expand_bn", m.conv("expand", x, 24, 144, 1), 144), lo, hi])
    h = m.node("dw_relu6", "Clip", [m.bn("dw_bn", m.conv("dw", h, 144, 144, 3, group=144), 144), lo, hi])
    h = m.bn("project_bn", m.conv("project", h, 144, 24, 1), 24)
    m.node("add", "Add", [h, x])
    m.m["outputs"] = ["add"]
    return m.m


def batched(model, batch, base_dir):
    b = copy.deepcopy(model)
    b["name"] = model["name"] + "_b%d" % batch
    b["doc"] = model["doc"] + "; batch %d" % batch
    for i in b["inputs"]:
        i["shape"][0] = batch
    for w in b["weights"].values():
        if "file" in w:  # relative to the model file
            w["file"] = os.path.relpath(os.path.join(base_dir, w["file"]), OUT)
    return b


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    os.makedirs(OUT, exist_ok=True)
    block = mobilenet_v2_block()
    save(block)
    save(batched(block, 8, OUT))
    for name in BATCHED:
        with open(os.path.join(ROOT, "models", name + ".json")) as f:
            save(batched(json.load(f), 8, os.path.join(ROOT, "models")))


if __name__ == "__main__":
    main()
