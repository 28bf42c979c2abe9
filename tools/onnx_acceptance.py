#!/usr/bin/python3
"""ONNX acceptance run: torchvision's resnet18, mobilenet_v2, squeezenet1_1 and vgg11 exported by
PyTorch's ONNX exporter (224x224, opset 13, seeded random weights and BatchNorm statistics), each run
by `hfuse run` on the .onnx file and compared with PyTorch (1e-3 of the output's scale), then timed by
`hfuse bench` next to PyTorch frozen with torch.jit.optimize_for_inference at the same thread count,
in the same run; `hfuse compile resnet18.onnx` is built into a plain C++ caller (tests/aot/caller.cpp)
and checked against PyTorch too.

    apt-get install python3-torch python3-torchvision python3-onnx
    /usr/bin/python3 tools/onnx_acceptance.py [--hfuse build/bin/hfuse] [--threads 2] [--runs 20]

Exit code 1 if a network does not match PyTorch. Prints one table row per network.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings

try:
    import torch
    import torchvision
except ImportError:  # the peers (tools/install_deps.sh --peers): main() says so; --help works without them
    torch = torchvision = None

warnings.filterwarnings("ignore")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
NETS = ["resnet18", "mobilenet_v2", "squeezenet1_1", "vgg11"]


def randomize_batchnorm(model, gen):
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.rand(c, generator=gen) * 0.2 - 0.1)
            m.running_var.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
            m.bias.data.copy_(torch.rand(c, generator=gen) * 0.2 - 0.1)


def save_f32(path, t):
    t.detach().contiguous().numpy().astype("<f4").tofile(path)


def read_f32(path):
    import numpy
    return torch.from_numpy(numpy.fromfile(path, dtype="<f4"))


def run(cmd, **kw):
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if p.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stdout))
    return p.stdout, time.time() - t0


def time_torch(model, x, runs):
    with torch.no_grad():
        for _ in range(3):
            model(x)
        ms = []
        for _ in range(runs):
            t0 = time.perf_counter()
            model(x)
            ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hfuse", default=os.path.join(ROOT, "build", "bin", "hfuse"))
    ap.add_argument("--work", default="/tmp/hfuse_onnx_acceptance")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--nets", nargs="*", default=NETS)
    ap.add_argument("--no-compile", action="store_true", help="skip hfuse compile of resnet18")
    ap.add_argument("--plan-args", default="", help="plan flags for hfuse run/bench/compile, e.g. '--rules tvm'")
    a = ap.parse_args()
    if torch is None:
        sys.exit("onnx_acceptance.py needs torch and torchvision: tools/install_deps.sh --peers, "
                 "then run it with /usr/bin/python3")
    plan = a.plan_args.split()
    os.makedirs(a.work, exist_ok=True)
    torch.set_num_threads(a.threads)
    hf = [a.hfuse]
    rows, ok = [], True
    for i, name in enumerate(a.nets):
        torch.manual_seed(i)
        gen = torch.Generator().manual_seed(100 + i)
        model = getattr(torchvision.models, name)()
        randomize_batchnorm(model, gen)
        model.eval()
        x = torch.rand(1, 3, 224, 224, generator=gen) * 2 - 1
        with torch.no_grad():
            y = model(x)
        onnx_path = os.path.join(a.work, name + ".onnx")
        torch.onnx.export(model, x, onnx_path, opset_version=13, input_names=["input"], output_names=["output"])
        x_path, out_path = os.path.join(a.work, name + ".input.f32"), os.path.join(a.work, name + ".hfuse.f32")
        save_f32(x_path, x)

        _, run_s = run(hf + ["run", onnx_path, "--input", x_path, "--output", out_path, "--threads", str(a.threads)] +
                       plan)
        got = read_f32(out_path)
        scale = y.abs().max().item()
        rel = (got - y.flatten()).abs().max().item() / scale
        match = rel <= 1e-3
        ok = ok and match

        frozen = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.script(model)))
        torch_ms = [time_torch(frozen, x, a.runs)]
        out, _ = run(hf + ["bench", onnx_path, "--runs", str(a.runs), "--json", "--threads", str(a.threads)] + plan)
        bench = json.loads(out.strip().splitlines()[-1])
        torch_ms.append(time_torch(frozen, x, a.runs))  # before and after: the better of the two
        row = {"net": name, "relative_error": rel, "match": match, "hfuse_ms": bench["median_ms"],
               "torch_frozen_ms": min(torch_ms), "torch_eager_ms": time_torch(model, x, a.runs),
               "hfuse_compile_ms": bench["compile_ms"], "groups": bench["groups"], "plan": bench["plan"],
               "group_compile_max_ms": bench.get("group_compile_max_ms", 0.0),
               "hfuse_run_s": run_s, "load_average": os.getloadavg()[0]}
        row["speedup"] = row["torch_frozen_ms"] / row["hfuse_ms"]

        if name == "resnet18" and not a.no_compile:
            lib = os.path.join(a.work, "lib_resnet18")
            _, row["aot_compile_s"] = run(hf + ["compile", onnx_path, "-o", lib, "--name", "resnet18"] + plan)
            caller = os.path.join(lib, "caller")
            run(["g++", "-std=c++17", "-O2", "-I", lib, "-DMODEL_HEADER=\"resnet18.h\"", "-DMODEL_ARGV=resnet18_argv",
                 os.path.join(ROOT, "tests", "aot", "caller.cpp"), os.path.join(lib, "resnet18.a"), "-ldl", "-lpthread",
                 "-o", caller])
            aot_out = os.path.join(a.work, "resnet18.aot.f32")
            out, _ = run([caller, "--runs", str(a.runs), "in:224,224,3,1:" + x_path, "out:1000,1:" + aot_out])
            aot_rel = (read_f32(aot_out) - y.flatten()).abs().max().item() / scale
            row["aot_relative_error"] = aot_rel
            row["aot_caller"] = out.strip().splitlines()[-1]
            ok = ok and aot_rel <= 1e-3
        rows.append(row)
        print(json.dumps(row), flush=True)

    print("\n%-14s %9s %5s %9s %13s %12s %8s %10s %14s" % ("net", "rel.err", "match", "hfuse ms", "torch frozen",
                                                            "torch eager", "speedup", "compile s", "slowest group"))
    for r in rows:
        print("%-14s %9.2e %5s %9.2f %13.2f %12.2f %7.2fx %10.1f %12.2f s" % (
            r["net"], r["relative_error"], "yes" if r["match"] else "NO", r["hfuse_ms"], r["torch_frozen_ms"],
            r["torch_eager_ms"], r["speedup"], r["hfuse_compile_ms"] / 1e3, r["group_compile_max_ms"] / 1e3))
    print("threads %d, medians of %d runs, hfuse plan %s; torch %s; speedup = torch frozen / hfuse" % (
        a.threads, a.runs, rows[0]["plan"] if rows else "-", torch.__version__))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
