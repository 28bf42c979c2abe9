#!/usr/bin/python3
"""The fusion guard: no fused group is slower than the unfused ops it replaces, beyond noise.

For each network, two plans of the same rewritten graph: the default plan (or --plan-args) and
`--rules none` (every op its own group). In rounds, alternately, `hfuse bench PLAN --profile --json`
times each group of each plan. A fused group is set beside the ops it holds, each timed as its own
group under `--rules none` (an op a plan recomputes in several groups counts once, shared among them).
A group FAILS when its median is more than --tol (relative) plus --abs-tol-ms above the sum of its
ops' medians and even its fastest round is slower than their slowest (the ranges do not overlap).

Whole networks too: `hfuse bench MODEL --compare --json` (default plan against `--unfused`: every
op its own stage, no graph rewrites), in the same rounds; a network FAILS when its fused median is
above its unfused one by more than --tol and the ranges do not overlap.

    /usr/bin/python3 bench/fusion_guard.py [--dir build/dev_networks] [--nets resnet18,vgg16_bn]
        [--rounds 3] [--threads 2] [--tol 0.15] [--abs-tol-ms 0.01] [--json OUT] [--md OUT]

Per-group times are each group's median time within whole runs (`bench --profile`, as `run --profile`
times them), so a group's time includes the state its neighbours leave (caches, which core wrote
its input): a group can be slow because of what runs before it. The guard names the group; read
its neighbours' times too before blaming the fusion.
Exit status: 0 when nothing fails, 1 when a group or a network fails (all are reported), 2 on error.
"""
import argparse
import json
import os
import shlex
import statistics
import sys
import tempfile

from cli_runner import last_json, run as run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def group_ops(plan):
    """group name -> [(node, share)]: a node recomputed in k groups counts 1/k in each."""
    copies = {}
    for g in plan["groups"]:
        for n in g["nodes"]:
            copies[n] = copies.get(n, 0) + 1
    return {g["name"]: [(n, 1.0 / copies[n]) for n in g["nodes"]] for g in plan["groups"]}


def judge(fused, unfused, tol, abs_tol):
    """Whether `fused` (times over rounds) is slower than `unfused` beyond noise."""
    fm, um = statistics.median(fused), statistics.median(unfused)
    return fm > um * (1 + tol) + abs_tol and min(fused) > max(unfused)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hfuse", default=os.path.join(ROOT, "build", "bin", "hfuse"))
    ap.add_argument("--dir", default=os.path.join(ROOT, "build", "dev_networks"))
    ap.add_argument("--nets", help="comma-separated names (default: every network of --dir's manifest.json)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20, help="timed runs per plan and round (also per group)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tol", type=float, default=0.15)
    ap.add_argument("--abs-tol-ms", type=float, default=0.01)
    ap.add_argument("--plan-args", default="", help="planner options for the fused plan, e.g. '--rules x86'")
    ap.add_argument("--json")
    ap.add_argument("--md")
    args = ap.parse_args()
    if args.rounds < 2:
        sys.exit("fusion_guard: --rounds must be at least 2 (noise is judged from the range over rounds)")

    if args.nets:
        nets = args.nets.split(",")
    else:
        with open(os.path.join(args.dir, "manifest.json")) as f:
            manifest = json.load(f)
        entries = manifest["networks"] if isinstance(manifest, dict) else manifest
        nets = [e["name"] if isinstance(e, dict) else e for e in entries]

    tmp = tempfile.mkdtemp(prefix="hfuse_guard_")
    common = ["--threads", str(args.threads), "--runs", str(args.runs)]
    setups = {}
    for net in nets:
        model = os.path.join(args.dir, net + ".onnx")
        if not os.path.exists(model):
            sys.exit("fusion_guard: %s: no such model (tools/make_dev_networks.py writes them)" % model)
        plans = {}
        for kind, extra in (("fused", shlex.split(args.plan_args)), ("unfused_ops", ["--rules", "none"])):
            path = os.path.join(tmp, "%s.%s.json" % (net, kind))
            run_cli([args.hfuse, "plan", model, "-o", path] + extra)
            with open(path) as f:
                plans[kind] = json.load(f)
        fused_nodes = {n for g in plans["fused"]["groups"] for n in g["nodes"]}
        single = {g["nodes"][0]: g["name"] for g in plans["unfused_ops"]["groups"]}
        if fused_nodes != set(single):
            sys.exit("fusion_guard: %s: the two plans hold different nodes (rewrites differ)" % net)
        setups[net] = (model, plans, single)
        print("%s: %d groups fused, %d ops" % (net, len(plans["fused"]["groups"]), len(single)), file=sys.stderr)

    times = {net: {"fused": [], "unfused_ops": [], "net_fused": [], "net_unfused": []} for net in nets}
    for r in range(args.rounds):
        for net in nets:
            model, plans, _ = setups[net]
            order = ("fused", "unfused_ops") if r % 2 == 0 else ("unfused_ops", "fused")
            for kind in order:
                path = os.path.join(tmp, "%s.%s.json" % (net, kind))
                d = last_json(run_cli([args.hfuse, "bench", model, "--plan", path, "--profile", "--json"] + common))
                times[net][kind].append({g["name"]: g["ms"] for g in d["group_profile"]})
            d = last_json(run_cli([args.hfuse, "bench", model, "--compare", "--json"] + shlex.split(args.plan_args) +
                              common))
            times[net]["net_fused"].append(d["fused_ms"])
            times[net]["net_unfused"].append(d["unfused_ms"])
            print("round %d/%d %s: %.2f ms fused, %.2f ms unfused" % (r + 1, args.rounds, net, d["fused_ms"],
                                                                      d["unfused_ms"]), file=sys.stderr)

    report = {"rounds": args.rounds, "runs": args.runs, "threads": args.threads, "tol": args.tol,
              "abs_tol_ms": args.abs_tol_ms, "plan_args": args.plan_args, "networks": []}
    failures = 0
    md = ["| network | fused ms | unfused ms | fused groups | slower beyond noise |", "| --- | --- | --- | --- | --- |"]
    details = []
    for net in nets:
        _, plans, single = setups[net]
        t = times[net]
        entry = {"name": net, "fused_ms": t["net_fused"], "unfused_ms": t["net_unfused"], "groups": []}
        entry["network_slower"] = judge(t["net_fused"], t["net_unfused"], args.tol, 0.0)
        failures += entry["network_slower"]
        for g in plans["fused"]["groups"]:
            if len(g["nodes"]) < 2:
                continue
            ops = group_ops(plans["fused"])[g["name"]]
            fused = [rnd[g["name"]] for rnd in t["fused"]]
            unfused = [sum(share * rnd[single[n]] for n, share in ops) for rnd in t["unfused_ops"]]
            row = {"group": g["name"], "master": g["master"], "template": g.get("schedule", {}).get("template", ""),
                   "ops": len(g["nodes"]), "fused_ms": fused, "unfused_ops_ms": unfused,
                   "slower": judge(fused, unfused, args.tol, args.abs_tol_ms)}
            entry["groups"].append(row)
            if row["slower"]:
                failures += 1
                details.append("- %s %s (%s, %s, %d ops): %.3f ms fused, %.3f ms as separate ops" % (
                    net, g["name"], g["master"], row["template"], row["ops"], statistics.median(fused),
                    statistics.median(unfused)))
        slow = [r["group"] for r in entry["groups"] if r["slower"]]
        md.append("| %s | %.2f | %.2f | %d | %s |" % (
            net, statistics.median(t["net_fused"]), statistics.median(t["net_unfused"]), len(entry["groups"]),
            ("network, " if entry["network_slower"] else "") + (", ".join(slow) if slow else "none")))
        report["networks"].append(entry)
    text = "\n".join(md + [""] + (["Groups slower than their ops apart:"] + details if details else []))
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
