#!/usr/bin/python3
"""hfuse's groups beside ONNX Runtime's kernels on one ONNX model: where hfuse loses its time.

Runs `hfuse plan` and `hfuse run --profile` (each group's median time) and `bench/ort_peer.js
--profile` (each ONNX Runtime kernel's median time, from its profiler, graph optimisations 'all'),
both at the same thread count, and sets each hfuse group beside the ONNX Runtime kernels computing the
same ONNX nodes. ONNX Runtime names a kernel after the node it started from or the value it writes
(a fused Conv + Relu is named after the Relu's output, an NCHWc conv gets "_nchwc", a fusion adds
"/<Name>Fusion/"), so each kernel is matched through the ONNX graph to a node, then to the hfuse
group holding that node. Kernels with no ONNX node (NCHWc reorders) are listed apart: they are
ONNX Runtime's cost of its blocked layout.

    /usr/bin/python3 bench/compare_groups.py MODEL.onnx --input X.f32 [--threads 2] [--runs 20]
        [--hfuse build/bin/hfuse] [--plan-args '--rules x86'] [--top 25] [--json OUT]

Profiles are taken with both sides' per-kernel timers on: compare them on a quiet machine, and use
`bench/dev_networks.py` for whole-model times.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stdout))
    return p.stdout


def parse_profile(text):
    """hfuse run --profile's group rows: name -> ms."""
    groups = {}
    for line in text.splitlines():
        m = re.match(r"\s+(g\d+)\s+.*?\s(\d+\.\d+)\s+\d+\.\d+%", line)
        if m:
            groups[m.group(1)] = float(m.group(2))
    return groups


def onnx_node_of(kernel, nodes, producer):
    """The ONNX node an ONNX Runtime kernel name stands for, or None (a reorder it added)."""
    candidates = [kernel, kernel.rstrip("/")]
    fusion = re.match(r"(.*?)/\w+Fusion/?$", kernel)
    if fusion:
        candidates.append(fusion.group(1))
    for c in list(candidates):
        for suffix in ("_nchwc",):
            if c.endswith(suffix):
                candidates.append(c[: -len(suffix)])
    for c in candidates:
        if c in nodes:
            return c
        if c in producer:
            return producer[c]
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--input", required=True, help="raw float32 input for both")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--hfuse", default=os.path.join(ROOT, "build", "bin", "hfuse"))
    ap.add_argument("--plan-args", default="")
    ap.add_argument("--top", type=int, default=25, help="rows: the groups losing most to ONNX Runtime")
    ap.add_argument("--json", help="write every row here")
    a = ap.parse_args()
    plan_args = shlex.split(a.plan_args)

    model = onnx.load(a.model, load_external_data=False)
    nodes = {n.name for n in model.graph.node}
    producer = {out: n.name for n in model.graph.node for out in n.output}

    with tempfile.TemporaryDirectory() as tmp:
        plan_path = os.path.join(tmp, "plan.json")
        run([a.hfuse, "plan", a.model, "-o", plan_path] + plan_args)
        plan = json.load(open(plan_path))
        prof = run([a.hfuse, "run", a.model, "--input", a.input, "--profile", "--runs", str(a.runs),
                    "--threads", str(a.threads), "--plan", plan_path])
        ort_path = os.path.join(tmp, "ort.json")
        run(["node", os.path.join(ROOT, "bench", "ort_peer.js"), a.model, "--input", a.input, "--threads",
             str(a.threads), "--runs", str(a.runs), "--profile", ort_path])
        ort = json.load(open(ort_path))

    hfuse_ms = parse_profile(prof)
    group_of = {}
    for g in plan["groups"]:
        for n in g["nodes"]:
            group_of.setdefault(n, g["name"])
    rows = {g["name"]: {"group": g["name"], "master": g["master"],
                        "template": (g.get("schedule") or {}).get("template", ""),
                        "hfuse_ms": hfuse_ms.get(g["name"], 0.0), "ort_ms": 0.0, "ort_kernels": []}
            for g in plan["groups"]}
    unmatched = []
    for k in ort["nodes"]:
        node = onnx_node_of(k["name"], nodes, producer)
        group = group_of.get(node) if node else None
        if group is None:
            unmatched.append(k)
            continue
        rows[group]["ort_ms"] += k["ms"]
        rows[group]["ort_kernels"].append(k["op"])

    ordered = sorted(rows.values(), key=lambda r: r["hfuse_ms"] - r["ort_ms"], reverse=True)
    print("%-6s %-10s %-58s %9s %9s %8s  %s" % ("group", "template", "master", "hfuse ms", "ORT ms", "diff", "ORT kernels"))
    for r in ordered[: a.top]:
        print("%-6s %-10s %-58s %9.4f %9.4f %+8.4f  %s" % (
            r["group"], r["template"], r["master"][-58:], r["hfuse_ms"], r["ort_ms"], r["hfuse_ms"] - r["ort_ms"],
            "+".join(r["ort_kernels"])))
    h_total = sum(r["hfuse_ms"] for r in rows.values())
    o_total = sum(r["ort_ms"] for r in rows.values())
    u_total = sum(k["ms"] for k in unmatched)
    print("groups: hfuse %.3f ms, ORT %.3f ms in the same nodes, + %.3f ms in %d kernels of its own (%s); %d threads" % (
        h_total, o_total, u_total, len(unmatched), ", ".join(sorted({k["op"] for k in unmatched})) or "-", a.threads))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": ordered, "unmatched": unmatched, "threads": a.threads}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
