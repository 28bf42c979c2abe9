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
its input, the layout a producer chose for its readers): beside the ops of the `--rules none` plan
a group can look slow for what the plan does around it. So a group slower than its ops apart is
then judged in its own plan's context: the plan again with that one group split into its ops (every
group's schedule the default for that plan, as the planner would have left them), both timed in the
same alternating rounds, and the group together with its neighbours (the groups writing its inputs
and those reading its outputs, found in the ONNX graph) set beside the same neighbours and its ops
in the split plan. It FAILS only when that window is slower too: by more than --tol of its ops' time
in the split plan plus --abs-tol-ms, and in every round (the two plans alternate within a round);
otherwise the report names it as slower alone and gives the window's times.
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


def split_plan(plan, unfused_ops, group):
    """`plan` with `group` split into its ops (the `--rules none` plan's groups of its nodes, named
    GROUP.0, GROUP.1, ...) and no group's schedule given: each the default for the split plan."""
    nodes = set(next(g for g in plan["groups"] if g["name"] == group)["nodes"])
    groups = []
    for g in plan["groups"]:
        if g["name"] != group:
            groups.append({k: v for k, v in g.items() if k not in ("schedule", "why")})
            continue
        ops = [u for u in unfused_ops["groups"] if u["nodes"][0] in nodes]
        for i, u in enumerate(ops):
            groups.append({"name": "%s.%d" % (group, i), "master": u["master"], "nodes": u["nodes"],
                           "placement": u["placement"]})
    return dict(plan, groups=groups)


def neighbours(model, plan):
    """group name -> the other groups writing its inputs or reading its outputs, from the ONNX graph
    (a node the rewrites removed, in no group, passes its data input through)."""
    import onnx  # a peer (tools/install_deps.sh --peers), as the networks themselves are
    graph = onnx.load(model, load_external_data=False).graph
    group_of = {}
    for g in plan["groups"]:
        for n in g["nodes"]:
            group_of.setdefault(n, set()).add(g["name"])
    writer = {}  # value -> the groups computing it
    for node in graph.node:  # topological order
        if node.name in group_of:
            ws = group_of[node.name]
        else:
            ws = set()
            for v in node.input[:1]:
                ws |= writer.get(v, set())
        for v in node.output:
            writer[v] = ws
    near = {g["name"]: set() for g in plan["groups"]}
    for node in graph.node:
        for reader in group_of.get(node.name, ()):
            for v in node.input:
                for w in writer.get(v, ()):
                    if w != reader:
                        near[reader].add(w)
                        near[w].add(reader)
    return near


def judge_window(fused, split, split_ops, tol, abs_tol):
    """Whether a group's window (times per round, the two plans alternated within a round) is slower
    fused than split beyond noise: by more than --tol of the group's own ops plus --abs-tol-ms (not of
    the whole window, whose neighbours would widen the tolerance), and in every round."""
    extra = [f - s for f, s in zip(fused, split)]
    return statistics.median(extra) > tol * statistics.median(split_ops) + abs_tol and min(extra) > 0


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

    def group_times(model, plan_path):
        """Each group's median ms in one `hfuse bench --profile` of `plan_path`."""
        d = last_json(run_cli([args.hfuse, "bench", model, "--plan", plan_path, "--profile", "--json"] + common))
        return {g["name"]: g["ms"] for g in d["group_profile"]}

    times = {net: {"fused": [], "unfused_ops": [], "net_fused": [], "net_unfused": []} for net in nets}
    for r in range(args.rounds):
        for net in nets:
            model, plans, _ = setups[net]
            order = ("fused", "unfused_ops") if r % 2 == 0 else ("unfused_ops", "fused")
            for kind in order:
                path = os.path.join(tmp, "%s.%s.json" % (net, kind))
                times[net][kind].append(group_times(model, path))
            d = last_json(run_cli([args.hfuse, "bench", model, "--compare", "--json"] + shlex.split(args.plan_args) +
                              common))
            times[net]["net_fused"].append(d["fused_ms"])
            times[net]["net_unfused"].append(d["unfused_ms"])
            print("round %d/%d %s: %.2f ms fused, %.2f ms unfused" % (r + 1, args.rounds, net, d["fused_ms"],
                                                                      d["unfused_ms"]), file=sys.stderr)

    # Each fused group's times per round beside its ops' as separate groups; those slower alone are
    # then judged in their own plan's context (see the module's doc).
    apart = {}  # (net, group) -> (fused ms per round, its ops' ms per round)
    suspects = {}
    for net in nets:
        _, plans, single = setups[net]
        ops_of = group_ops(plans["fused"])
        for g in plans["fused"]["groups"]:
            if len(g["nodes"]) < 2:
                continue
            fused = [rnd[g["name"]] for rnd in times[net]["fused"]]
            unfused = [sum(share * rnd[single[n]] for n, share in ops_of[g["name"]])
                       for rnd in times[net]["unfused_ops"]]
            apart[(net, g["name"])] = (fused, unfused)
            if judge(fused, unfused, args.tol, args.abs_tol_ms):
                suspects.setdefault(net, []).append(g["name"])
    # (net, group) -> (its neighbours, per round: the window fused, split, and its ops alone split)
    in_context = {}
    for net, groups in suspects.items():
        model, plans, _ = setups[net]
        near = neighbours(model, plans["fused"])
        paths = {}
        for name in groups:
            paths[name] = os.path.join(tmp, "%s.split.%s.json" % (net, name))
            with open(paths[name], "w") as f:
                json.dump(split_plan(plans["fused"], plans["unfused_ops"], name), f)
        fused_path = os.path.join(tmp, "%s.fused.json" % net)
        rounds = {name: ([], [], []) for name in groups}  # fused window, split window, split ops alone
        for r in range(args.rounds):
            for name in groups:
                order = ((fused_path, 0), (paths[name], 1)) if r % 2 == 0 else ((paths[name], 1), (fused_path, 0))
                for path, side in order:
                    ms = group_times(model, path)
                    own = [name] if side == 0 else [k for k in ms if k.startswith(name + ".")]
                    rounds[name][side].append(sum(ms[k] for k in own + sorted(near[name])))
                    if side == 1:
                        rounds[name][2].append(sum(ms[k] for k in own))
            print("round %d/%d %s: %d groups in their plan's context" % (r + 1, args.rounds, net, len(groups)),
                  file=sys.stderr)
        for name in groups:
            in_context[(net, name)] = (sorted(near[name]),) + rounds[name]

    report = {"rounds": args.rounds, "runs": args.runs, "threads": args.threads, "tol": args.tol,
              "abs_tol_ms": args.abs_tol_ms, "plan_args": args.plan_args, "networks": []}
    failures = 0
    md = ["| network | fused ms | unfused ms | fused groups | slower beyond noise |", "| --- | --- | --- | --- | --- |"]
    details, alone = [], []
    for net in nets:
        plans = setups[net][1]
        t = times[net]
        entry = {"name": net, "fused_ms": t["net_fused"], "unfused_ms": t["net_unfused"], "groups": []}
        entry["network_slower"] = judge(t["net_fused"], t["net_unfused"], args.tol, 0.0)
        failures += entry["network_slower"]
        for g in plans["fused"]["groups"]:
            if len(g["nodes"]) < 2:
                continue
            fused, unfused = apart[(net, g["name"])]
            row = {"group": g["name"], "master": g["master"], "template": g.get("schedule", {}).get("template", ""),
                   "ops": len(g["nodes"]), "fused_ms": fused, "unfused_ops_ms": unfused,
                   "slower_alone": judge(fused, unfused, args.tol, args.abs_tol_ms), "slower": False}
            line = "- %s %s (%s, %s, %d ops): %.3f ms fused, %.3f ms as separate ops" % (
                net, g["name"], g["master"], row["template"], row["ops"], statistics.median(fused),
                statistics.median(unfused))
            if row["slower_alone"]:
                window, wf, ws, ops_ms = in_context[(net, g["name"])]
                row.update(window=window, window_fused_ms=wf, window_split_ms=ws, split_ops_ms=ops_ms,
                           slower=judge_window(wf, ws, ops_ms, args.tol, args.abs_tol_ms))
                line += "; with %s, %.3f ms fused, %.3f ms split in its plan" % (
                    ", ".join(window) if window else "no neighbours", statistics.median(wf), statistics.median(ws))
                (details if row["slower"] else alone).append(line)
                failures += row["slower"]
            entry["groups"].append(row)
        slow = [r["group"] for r in entry["groups"] if r["slower"]]
        md.append("| %s | %.2f | %.2f | %d | %s |" % (
            net, statistics.median(t["net_fused"]), statistics.median(t["net_unfused"]), len(entry["groups"]),
            ("network, " if entry["network_slower"] else "") + (", ".join(slow) if slow else "none")))
        report["networks"].append(entry)
    if alone:
        md += ["", "Groups slower than their ops apart but not in their own plan's context (the window of the group "
               "and its neighbours against the plan with the group split):"] + alone
    slower = ["Groups slower than their ops apart and in their own plan's context:"] + details if details else []
    text = "\n".join(md + [""] + slower)
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
