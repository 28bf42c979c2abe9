#!/usr/bin/python3
"""Exports the development network set (issue 40): torchvision networks with seeded random weights and
randomised BatchNorm statistics, as ONNX (opset 13, input "input", output "output") with a seeded
uniform [-1, 1] input and PyTorch's eager output beside each, for bench/dev_networks.py (and
regnet_y_3_2gf, with inception_v3 the compile-time networks of bench/compile_time.py).

    /usr/bin/python3 tools/make_dev_networks.py [--out build/dev_networks] [--nets resnet18,vgg16_bn] [--force]
    /usr/bin/python3 tools/make_dev_networks.py --set transformers     # build/transformer_networks/

Per network NAME (the table NETS below; batch 1 at 224x224 but inception_v3 at 299x299, and the
batch-8 entries mobilenet_v2_b8 and resnet18_b8) it writes NAME.onnx, NAME.input.f32 and NAME.torch.f32
(raw little-endian float32) into --out, and lists every network there in manifest.json (name,
torchvision model, batch, input and output shapes, max |output|). A network whose three files exist
is skipped unless --force. The files are large (vgg16_bn's .onnx is over 500 MB): keep them out of git.

--set transformers exports issue 41's set instead (TRANSFORMERS below: a torch.nn.TransformerEncoder of
d 512, 8 heads, 4 layers, feed-forward 2048, GELU on 64 tokens at opset 13, vit_b_32 and swin_t at
opset 14, DeepLabV3 on MobileNet-V3 with its bilinear upsampling at opset 13)
into build/transformer_networks; `bench/dev_networks.py --dir build/transformer_networks` times them.

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
    # Shares resnet18's residual blocks (same ops and shapes, other weights): a tuning record made on
    # one applies to the other (`hfuse explore`'s tuning.json, `--tuned`).
    "resnet34": ("resnet34", {}, 1, 224, 4014),
}


def transformer_encoder():
    """issue 41's encoder: d 512, 8 heads, 4 layers, feed-forward 2048, GELU, batch first."""
    layer = torch.nn.TransformerEncoderLayer(512, 8, dim_feedforward=2048, dropout=0.0, activation="gelu",
                                             batch_first=True)
    return torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)


class SegmentationOutput(torch.nn.Module):
    """A torchvision segmentation net's "out" (its forward returns a dict)."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x)["out"]


def deeplabv3_mobilenet_v3_large():
    """torchvision's DeepLabV3 on MobileNet-V3 (21 classes, no auxiliary head): bilinear Resize."""
    seg = torchvision.models.segmentation
    return SegmentationOutput(seg.deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, aux_loss=False))


# The transformer set (--set transformers, issue 41): name -> constructor (torchvision's name or a
# function), its keyword arguments, input shape, opset, seed.
TRANSFORMERS = {
    "transformer_encoder": (transformer_encoder, {}, [1, 64, 512], 13, 4101),
    "vit_b_32": ("vit_b_32", {}, [1, 3, 224, 224], 14, 4102),
    "swin_t": ("swin_t", {}, [1, 3, 224, 224], 14, 4103),
    "deeplabv3_mobilenet_v3_large": (deeplabv3_mobilenet_v3_large, {}, [1, 3, 224, 224], 13, 4104),
}
SETS = {"dev": NETS, "transformers": TRANSFORMERS}


def spec(name):
    """(constructor, kwargs, input shape, opset, seed) of network `name`, from either set."""
    if name in TRANSFORMERS:
        return TRANSFORMERS[name]
    arch, kwargs, batch, size, seed = NETS[name]
    return arch, kwargs, [batch, 3, size, size], 13, seed


def input_shape(name):
    return spec(name)[2]


def build_model(name):
    """(model in eval mode, input) for network `name`: the same numbers on every call. In the
    transformer set, parameters a constructor leaves all zero (vit's classifier head, the biases) are
    drawn uniform in [-0.05, 0.05], so the output checks something."""
    arch, kwargs, shape, _, seed = spec(name)
    torch.manual_seed(seed)
    model = getattr(torchvision.models, arch)(**kwargs) if isinstance(arch, str) else arch(**kwargs)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        randomize_batchnorm(model, gen)
        for p in model.parameters() if name in TRANSFORMERS else []:
            if p.numel() > 0 and p.abs().max() == 0:
                p.copy_(torch.rand(p.shape, generator=gen) * 0.1 - 0.05)
    model.eval()
    x = torch.rand(*shape, generator=gen) * 2 - 1
    return model, x


def paths(out, name):
    return {k: os.path.join(out, "%s.%s" % (name, ext)) for k, ext in
            (("onnx", "onnx"), ("input", "input.f32"), ("torch", "torch.f32"))}


def export(name, out):
    """Writes NAME.onnx, NAME.input.f32 and NAME.torch.f32; returns its manifest entry."""
    model, x = build_model(name)
    with torch.no_grad():
        y = model(x)
    p = paths(out, name)
    torch.onnx.export(model, x, p["onnx"], opset_version=spec(name)[3], input_names=["input"],
                      output_names=["output"])
    save_f32(p["input"], x)
    save_f32(p["torch"], y)
    return entry(name, list(y.shape), y.abs().max().item())


def entry(name, output_shape, max_abs):
    arch, kwargs, shape, opset, seed = spec(name)
    p = paths("", name)
    model = arch if isinstance(arch, str) else arch.__name__
    return {"name": name, "torchvision_model": model, "kwargs": kwargs, "seed": seed, "batch": shape[0],
            "input_shape": shape, "opset": opset, "output_shape": output_shape, "output_max_abs": max_abs,
            "onnx": p["onnx"], "input": p["input"], "torch_output": p["torch"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", choices=sorted(SETS), default="dev",
                    help="dev: the development set (issue 40); transformers: issue 41's (default out "
                         "build/transformer_networks)")
    ap.add_argument("--out", help="output directory (default build/dev_networks)")
    ap.add_argument("--nets", default="", help="comma-separated subset (default: all of the set): " +
                    ",".join(list(NETS) + list(TRANSFORMERS)))
    ap.add_argument("--force", action="store_true", help="export networks whose files already exist too")
    a = ap.parse_args()
    table = SETS[a.set]
    a.out = a.out or (DEFAULT_OUT if a.set == "dev" else os.path.join(ROOT, "build", "transformer_networks"))
    names = [n for n in a.nets.split(",") if n] if a.nets else list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        ap.error("unknown networks %s (have: %s)" % (", ".join(unknown), ", ".join(table)))
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
                batch = input_shape(name)[0]
                manifest[name] = entry(name, [batch, y.size // batch], float(np.abs(y).max()))
            print("%s: present, skipped (--force to export again)" % name, flush=True)
            continue
        t0 = time.time()
        manifest[name] = export(name, a.out)
        print("%s: exported in %.1f s (%.0f MB), output %s, max |output| %.4g" % (
            name, time.time() - t0, os.path.getsize(p["onnx"]) / 1e6, manifest[name]["output_shape"],
            manifest[name]["output_max_abs"]), flush=True)
    ordered = [manifest[n] for n in table if n in manifest] + [v for n, v in manifest.items() if n not in table]
    with open(manifest_path, "w") as f:
        json.dump({"format": "hfuse-dev-networks", "torch": torch.__version__,
                   "torchvision": torchvision.__version__, "opset": 13 if a.set == "dev" else None,
                   "networks": ordered}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
