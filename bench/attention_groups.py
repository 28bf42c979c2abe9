#!/usr/bin/python3
"""Attention as one group against the same network planned without it.

For each network, two plans of the same rewritten graph: the default (`x86` rules, whose `attention`
rule joins MatMul(Q, K^T), the score ops, Softmax and MatMul(P, V) into one group computed with an
online softmax) and the `x86` rules with `"attention": false` (the scores with their Softmax, and the
product with V, apart). In rounds, alternately:
  - `hfuse bench MODEL --plan ATTENTION --against APART --json`: the whole network, interleaved;
  - `hfuse bench MODEL --plan P --profile --json` for each plan: the groups holding the attentions'
    nodes, their times summed (the attention groups against the groups the same nodes form apart).

    /usr/bin/python3 bench/attention_groups.py [--dir build/transformer_networks]
        [--nets transformer_encoder,vit_b_32,swin_t] [--rounds 3] [--runs 20] [--threads 2]
        [--json OUT] [--md OUT]

Networks: tools/make_dev_networks.py --set transformers. Medians and ranges over the rounds.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

from cli_runner import last_json, run as run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def attention_nodes(plan):
    nodes = set()
    for g in plan["groups"]:
        if g.get("schedule", {}).get("template") == "attention":
            nodes |= set(g["nodes"])
    return nodes


def groups_holding(plan, nodes):
    return {g["name"] for g in plan["groups"] if nodes & set(g["nodes"])}


def summary(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "rounds": xs}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.join(ROOT, "build", "transformer_networks"))
    ap.add_argument("--nets", default="transformer_encoder,vit_b_32,swin_t")
    ap.add_argument("--hfuse", default=os.path.join(ROOT, "build", "bin", "hfuse"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json")
    ap.add_argument("--md")
    args = ap.parse_args()

    with open(os.path.join(ROOT, "src", "planner", "rules", "x86.json")) as f:
        rules = json.load(f)
    rules["name"] = "x86-attention-apart"
    rules["attention"] = False
    tmp = tempfile.mkdtemp(prefix="attention_groups_")
    apart_rules = os.path.join(tmp, "x86_attention_apart.json")
    with open(apart_rules, "w") as f:
        json.dump(rules, f)

    common = ["--threads", str(args.threads), "--runs", str(args.runs)]
    results = {}
    for net in args.nets.split(","):
        model = os.path.join(args.dir, net + ".onnx")
        paths = {"attention": os.path.join(tmp, net + ".attention.json"), "apart": os.path.join(tmp, net + ".apart.json")}
        run_cli([args.hfuse, "plan", model, "-o", paths["attention"]])
        run_cli([args.hfuse, "plan", model, "--rules", apart_rules, "-o", paths["apart"]])
        plans = {k: json.load(open(p)) for k, p in paths.items()}
        nodes = attention_nodes(plans["attention"])
        if not nodes:
            print("%s: no attention group" % net, file=sys.stderr)
            continue
        held = {k: groups_holding(plans[k], nodes) for k in plans}
        whole = {"attention": [], "apart": []}
        groups = {"attention": [], "apart": []}
        for _ in range(args.rounds):
            d = last_json(run_cli([args.hfuse, "bench", model, "--plan", paths["attention"], "--against", paths["apart"],
                               "--json"] + common))
            whole["attention"].append(d["plan_ms"])
            whole["apart"].append(d["against_ms"])
            for kind in ("attention", "apart"):
                d = last_json(run_cli([args.hfuse, "bench", model, "--plan", paths[kind], "--profile", "--json"] + common))
                groups[kind].append(sum(g["ms"] for g in d["group_profile"] if g["name"] in held[kind]))
        results[net] = {
            "attention_groups": len(held["attention"]),
            "apart_groups": len(held["apart"]),
            "groups_ms": {k: summary(v) for k, v in groups.items()},
            "network_ms": {k: summary(v) for k, v in whole.items()},
            "groups_speedup": statistics.median(groups["apart"]) / statistics.median(groups["attention"]),
            "network_speedup": statistics.median(whole["apart"]) / statistics.median(whole["attention"]),
        }
        r = results[net]
        print("%s: %d attention groups %.3f ms, apart %d groups %.3f ms (%.2fx); network %.2f against %.2f ms (%.2fx)"
              % (net, r["attention_groups"], r["groups_ms"]["attention"]["median"], r["apart_groups"],
                 r["groups_ms"]["apart"]["median"], r["groups_speedup"], r["network_ms"]["attention"]["median"],
                 r["network_ms"]["apart"]["median"], r["network_speedup"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if args.md:
        with open(args.md, "w") as f:
            f.write("| net | attention groups ms | apart ms | speedup | network ms | apart ms | speedup |\n")
            f.write("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
            for net, r in results.items():
                g, w = r["groups_ms"], r["network_ms"]
                f.write("| %s | %.3f (%.3f-%.3f) | %.3f (%.3f-%.3f) | %.2fx | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) | %.2fx |\n"
                        % (net, g["attention"]["median"], g["attention"]["min"], g["attention"]["max"],
                           g["apart"]["median"], g["apart"]["min"], g["apart"]["max"], r["groups_speedup"],
                           w["attention"]["median"], w["attention"]["min"], w["attention"]["max"],
                           w["apart"]["median"], w["apart"]["min"], w["apart"]["max"], r["network_speedup"]))


if __name__ == "__main__":
    main()
