#!/usr/bin/python3
"""Exports the development network set (issue 40): torchvision networks with seeded random weights and
randomised BatchNorm statistics, as ONNX (opset 13, input "input", output "output") with a seeded
uniform [-1, 1] input and PyTorch's eager output beside each, for bench/dev_networks.py (and
regnet_y_3_2gf, with inception_v3 the compile-time networks of bench/compile_time.py).

    /usr/bin/python3 tools/make_dev_networks.py [--out build/dev_networks] [--nets resnet18,vgg16_bn] [--force]

Per network NAME (the table NETS below; batch 1 at 224x224 but inception_v3 at 299x299, and the
batch-8 entries mobilenet_v2_b8 and resnet18_b8) it writes NAME.onnx, NAME.input.f32 and NAME.torch.f32
(raw little-endian float32) into --out, and lists every network there in manifest.json (name,
torchvision model, batch, input and output shapes, max |output|). A network whose three files exist
is skipped unless --force. The files are large (vgg16_bn's .onnx is over 500 MB): keep them out of git.

build_model(name) is the construction both this script and bench/dev_networks.py use (for PyTorch
frozen), so the weights, statistics and input are the same numbers in both: torch.manual_seed(seed)
before the torchvision constructor, then BatchNorm statistics and the input from a torch.Generator
seeded seed + 1 (randomize_batchnorm of tools/onnx_acceptance.py).
"""
import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
import torch
import torchvision

warnings.filterwarnings("ignore")
TOOLS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(TOOLS)
sys.path.insert(0, TOOLS)
from onnx_acceptance import randomize_batchnorm, save_f32  # noqa: E402

DEFAULT_OUT = os.path.join(ROOT, "build", "dev_networks")

# name -> torchvision constructor, its keyword arguments, batch, input size, seed. Seeds are fixed per
# network (not by position in a --nets list), so a subset exports the same numbers.
NETS = {
    "resnext50_32x4d": ("resnext50_32x4d", {}, 1, 224, 4001),
    "wide_resnet50_2": ("wide_resnet50_2", {}, 1, 224, 4002),
    "mobilenet_v3_large": ("mobilenet_v3_large", {}, 1, 224, 4003),
    "regnet_y_800mf": ("regnet_y_800mf", {}, 1, 224, 4004),
    "inception_v3": ("inception_v3", {"aux_logits": False, "init_weights": True}, 1, 299, 4005),
    "shufflenet_v2_x0_5": ("shufflenet_v2_x0_5", {}, 1, 224, 4006),
    "squeezenet1_0": ("squeezenet1_0", {}, 1, 224, 4007),
    "vgg16_bn": ("vgg16_bn", {}, 1, 224, 4008),
    "mobilenet_v2": ("mobilenet_v2", {}, 1, 224, 4009),
    "resnet18": ("resnet18", {}, 1, 224, 4010),
    "mobilenet_v2_b8": ("mobilenet_v2", {}, 8, 224, 4011),
    "resnet18_b8": ("resnet18", {}, 8, 224, 4012),
    # Compile-time acceptance network of the kernel cache (bench/compile_time.py).
    "regnet_y_3_2gf": ("regnet_y_3_2gf", {}, 1, 224, 4013),
}


def input_shape(name):
    _, _, batch, size, _ = NETS[name]
    return [batch, 3, size, size]


def build_model(name):
    """(model in eval mode, input) for network `name`: the same numbers on every call."""
    arch, kwargs, batch, size, seed = NETS[name]
    torch.manual_seed(seed)
    model = getattr(torchvision.models, arch)(**kwargs)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        randomize_batchnorm(model, gen)
    model.eval()
    x = torch.rand(batch, 3, size, size, generator=gen) * 2 - 1
    return model, x


def paths(out, name):
    return {k: os.path.join(out, "%s.%s" % (name, ext)) for k, ext in
            (("onnx", "onnx"), ("input", "input.f32"), ("torch", "torch.f32"))}


def export(name, out):
    """Writes NAME.onnx, NAME.input.f32 and NAME.torch.f32; returns its manifest entry."""
    arch, kwargs, batch, _, seed = NETS[name]
    model, x = build_model(name)
    with torch.no_grad():
        y = model(x)
    p = paths(out, name)
    torch.onnx.export(model, x, p["onnx"], opset_version=13, input_names=["input"], output_names=["output"])
    save_f32(p["input"], x)
    save_f32(p["torch"], y)
    return entry(name, list(y.shape), y.abs().max().item())


def entry(name, output_shape, max_abs):
    arch, kwargs, batch, _, seed = NETS[name]
    p = paths("", name)
    return {"name": name, "torchvision_model": arch, "kwargs": kwargs, "seed": seed, "batch": batch,
            "input_shape": input_shape(name), "output_shape": output_shape, "output_max_abs": max_abs,
            "onnx": p["onnx"], "input": p["input"], "torch_output": p["torch"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT, help="output directory (default build/dev_networks)")
    ap.add_argument("--nets", default="", help="comma-separated subset (default: all): " + ",".join(NETS))
    ap.add_argument("--force", action="store_true", help="export networks whose files already exist too")
    a = ap.parse_args()
    names = [n for n in a.nets.split(",") if n] if a.nets else list(NETS)
    unknown = [n for n in names if n not in NETS]
    if unknown:
        ap.error("unknown networks %s (have: %s)" % (", ".join(unknown), ", ".join(NETS)))
    os.makedirs(a.out, exist_ok=True)
    manifest_path = os.path.join(a.out, "manifest.json")
    manifest = {}
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = {n["name"]: n for n in json.load(f).get("networks", [])}
    for name in names:
        p = paths(a.out, name)
        if not a.force and all(os.path.exists(f) for f in p.values()):
            if name not in manifest:  # files from an earlier run without its manifest entry
                y = np.fromfile(p["torch"], dtype="<f4")
                manifest[name] = entry(name, [NETS[name][2], y.size // NETS[name][2]], float(np.abs(y).max()))
            print("%s: present, skipped (--force to export again)" % name, flush=True)
            continue
        t0 = time.time()
        manifest[name] = export(name, a.out)
        print("%s: exported in %.1f s (%.0f MB), output %s, max |output| %.4g" % (
            name, time.time() - t0, os.path.getsize(p["onnx"]) / 1e6, manifest[name]["output_shape"],
            manifest[name]["output_max_abs"]), flush=True)
    ordered = [manifest[n] for n in NETS if n in manifest] + [v for n, v in manifest.items() if n not in NETS]
    with open(manifest_path, "w") as f:
        json.dump({"format": "hfuse-dev-networks", "torch": torch.__version__,
                   "torchvision": torchvision.__version__, "opset": 13, "networks": ordered}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
