#!/usr/bin/env python3
"""Ahead-of-time against JIT, same plan: each bundled model compiled by `hfuse compile` and called
from tests/aot/caller.cpp (a plain `g++ -fopenmp` program, so the header installs OpenMP's loops for
the models of at least 1 MFLOP, as `hfuse bench` runs their groups), against `hfuse bench` (the JIT
executor), in alternating rounds; also the same library called by a caller built with
-DHFUSE_KEEP_HALIDE_RUNTIME (Halide's default allocator and thread pool). Prints a markdown table of
medians.

    bench/aot_vs_jit.py [--hfuse build/bin/hfuse] [--rounds 3] [--models a,b] [--work /tmp/dir]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["conv_bn_relu", "dwconv_bn_relu", "conv3x3_bn_relu", "conv_bias_relu_maxpool", "resnet_block",
          "rnn_cell", "lstm_cell", "mlp_softmax"]


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def model_io(header):
    """Inputs and outputs with shapes, from the comment hfuse compile writes atop the header."""
    io = {"inputs": [], "outputs": []}
    with open(header) as fh:
        for line in fh:
            if not line.startswith("//   input ") and not line.startswith("//   output "):
                continue
            kind, name, _, _, shape = line[2:].split()[:5]
            dims = [int(d) for d in shape.strip("[]").split("x")]
            io["inputs" if kind == "input" else "outputs"].append({"name": name, "shape": dims})
    return io


def runs_for(ms):
    return max(10, min(20000, int(300 / max(ms, 1e-4))))  # ~0.3 s of timing


def main():
    model_list = ARGS.models.split(",") if ARGS.models else MODELS
    work = ARGS.work or tempfile.mkdtemp(prefix="hfuse_aot_bench_")
    rows = []
    for m in model_list:
        path = os.path.join(ROOT, "models", m + ".json")
        out = os.path.join(work, m)
        run([ARGS.hfuse, "compile", path, "-o", out, "--name", m])
        callers = {}
        for runtime, flags in (("hfuse", []), ("halide", ["-DHFUSE_KEEP_HALIDE_RUNTIME"])):
            callers[runtime] = os.path.join(out, "caller_" + runtime)
            run([ARGS.cxx, "-std=c++17", "-O2", "-fopenmp"] + flags +
                ["-I", out, f'-DMODEL_HEADER="{m}.h"', f"-DMODEL_ARGV={m}_argv",
                 os.path.join(ROOT, "tests", "aot", "caller.cpp"), os.path.join(out, m + ".a"), "-ldl", "-lpthread",
                 "-o", callers[runtime]])
        info = model_io(os.path.join(out, m + ".h"))
        args = []
        for t in info["inputs"]:
            f = os.path.join(out, "in_" + t["name"] + ".f32")
            n = 1
            for d in t["shape"]:
                n *= d
            with open(f, "wb") as fh:
                fh.write(b"\0\0\0\0" * n)
            args.append("in:" + ",".join(str(d) for d in reversed(t["shape"])) + ":" + f)
        for i, t in enumerate(info["outputs"]):
            args.append("out:" + ",".join(str(d) for d in reversed(t["shape"])) + ":" + os.path.join(out, f"o{i}.f32"))
        jit0 = json.loads(run([ARGS.hfuse, "bench", path, "--runs", "5", "--json"]))["median_ms"]
        n = runs_for(jit0)
        aot, aot_halide, jit = [], [], []
        for _ in range(ARGS.rounds):
            for runtime, times in (("hfuse", aot), ("halide", aot_halide)):
                line = run([callers[runtime], "--runs", str(n)] + args).splitlines()[-1].split()
                times.append(float(line[1]))
            jit.append(json.loads(run([ARGS.hfuse, "bench", path, "--runs", str(n), "--json"]))["median_ms"])
        a, h, j = statistics.median(aot), statistics.median(aot_halide), statistics.median(jit)
        rows.append((m, a, h, j, n))
        print(f"{m}: AOT {a:.4f} ms (on Halide's runtime {h:.4f}), JIT {j:.4f} ms", file=sys.stderr)
    print("| model | AOT (one pipeline) | AOT on Halide's allocator and pool | JIT (executor) | JIT / AOT "
          "| runs per round |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for m, a, h, j, n in rows:
        print(f"| {m} | {a:.4f} ms | {h:.4f} ms | {j:.4f} ms | {j / a:.2f} | {n} |")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hfuse", default=os.path.join(ROOT, "build", "bin", "hfuse"))
    ap.add_argument("--cxx", default="g++")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--models")
    ap.add_argument("--work")
    ARGS = ap.parse_args()
    main()
