#!/usr/bin/env python3
"""The composer issue's fusion figure: `hfuse bench MODEL --compare` on the six workloads, in rounds.

Each round runs every model once (fused and unfused interleaved in one process); the table keeps,
per model, the median over rounds of each column, and the geometric mean of the speedups.

    bench/fusion_speedup.py --hfuse build/bin/hfuse --rounds 3 [--json out.json]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (model, runs per round): enough runs for ~0.1 s of timing each.
WORKLOADS = [
    ("conv_bn_relu", 40),
    ("dwconv_bn_relu", 400),
    ("rnn_cell", 5000),
    ("lstm_cell", 3000),
    ("conv3x3_bn_relu", 15),
    ("conv_bias_relu_maxpool", 30),
]


def bench(hfuse, model, runs, extra):
    cmd = [hfuse, "bench", os.path.join(ROOT, "models", model + ".json"), "--compare", "--json",
           "--runs", str(runs)] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hfuse", default=os.path.join(ROOT, "build", "bin", "hfuse"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", help="write the per-round results here")
    ap.add_argument("extra", nargs="*", help="more arguments for hfuse bench (e.g. --threads 1)")
    a = ap.parse_args()
    rows = {m: [] for m, _ in WORKLOADS}
    for r in range(a.rounds):
        for model, runs in WORKLOADS:
            rows[model].append(bench(a.hfuse, model, runs, a.extra))
            print(f"round {r + 1}: {model}: speedup {rows[model][-1]['speedup']:.2f}", file=sys.stderr)
    print("| model | fused | groups | unfused | groups | speedup (median of rounds) | speedups per round |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    speedups = []
    for model, _ in WORKLOADS:
        rs = rows[model]
        f = statistics.median(x["fused_ms"] for x in rs)
        u = statistics.median(x["unfused_ms"] for x in rs)
        s = statistics.median(x["speedup"] for x in rs)
        speedups.append(s)
        per = ", ".join(f"{x['speedup']:.2f}" for x in rs)
        print(f"| {model} | {f:.4f} ms | {rs[0]['fused_groups']} | {u:.4f} ms | {rs[0]['unfused_groups']} | "
              f"{s:.2f}x | {per} |")
    geo = math.exp(sum(map(math.log, speedups)) / len(speedups))
    print(f"\ngeometric mean of the speedups: {geo:.3f}x; slowest: {min(speedups):.2f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rounds": rows, "geomean": geo}, f, indent=1)


if __name__ == "__main__":
    main()
