#!/usr/bin/python3
"""`hfuse explore` on whole networks (issue 43's acceptance): for each model, one exploration with its
wall time and peak resident memory (the explore process and every candidate it runs: the largest of
them, from wait4's rusage), then best_plan.json against the default plan, interleaved in `--rounds`
calls of `hfuse bench MODEL --plan best_plan.json --against default.json --json` (their medians
and range). With --tuned-pair SOURCE:TARGET it also times TARGET's default plan with SOURCE's
tuning.json applied (`--tuned`) against TARGET's default plan, the same way.

    /usr/bin/python3 bench/explore_networks.py /tmp/hfuse_onnx_acceptance/resnet18.onnx \\
        build/dev_networks/regnet_y_800mf.onnx --budget 64 --out /tmp/explore_networks \\
        --tuned-pair resnet18:build/dev_networks/resnet34.onnx

Prints a table and writes OUT/explore_networks.json. Models come from tools/onnx_acceptance.py
(torchvision resnet18, mobilenet_v2, squeezenet1_1) and tools/make_dev_networks.py.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_runner import last_json, run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def explore(hfuse, model, out_dir, budget, extra):
    """Runs one exploration; returns its wall seconds and peak resident MB (largest process)."""
    cmd = [hfuse, "explore", model, "-o", out_dir, "--budget", str(budget)] + extra
    log = open(out_dir + ".log", "a")
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.time() - t0
    log.close()
    if status != 0:
        sys.exit("explore_networks: failed (%d): %s (see %s.log)" % (status, " ".join(cmd), out_dir))
    return wall, usage.ru_maxrss / 1024.0


def interleaved(hfuse, model, plan_args, against, rounds, runs):
    """Medians of `rounds` calls of bench --against: plan ms, against ms and their ratios."""
    plan_ms, against_ms, ratio = [], [], []
    for _ in range(rounds):
        j = last_json(run([hfuse, "bench", model] + plan_args + ["--against", against, "--json", "--runs", str(runs)]))
        plan_ms.append(j["plan_ms"])
        against_ms.append(j["against_ms"])
        ratio.append(j["against_ms"] / j["plan_ms"])
    return {"plan_ms": statistics.median(plan_ms), "default_ms": statistics.median(against_ms),
            "speedup": statistics.median(ratio), "speedup_min": min(ratio), "speedup_max": max(ratio)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", help="model files (.onnx or .json)")
    ap.add_argument("--hfuse", default=os.path.join(ROOT, "build", "bin", "hfuse"))
    ap.add_argument("--out", default="/tmp/hfuse_explore_networks")
    ap.add_argument("--budget", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5, help="interleaved bench calls per comparison")
    ap.add_argument("--runs", type=int, default=20, help="timed runs per bench call")
    ap.add_argument("--explore-args", default="", help="more explore flags, e.g. '--schedules templates'")
    ap.add_argument("--resume", action="store_true",
                    help="continue the explorations already in --out (explore --resume: the confirmation rounds, "
                         "the choice of the best and the outputs run again with this hfuse); wall time and memory "
                         "are then those of the resumed run")
    ap.add_argument("--tuned-pair", action="append", default=[],
                    help="SOURCE:TARGET_MODEL: SOURCE's tuning.json (a model above, by name) on TARGET_MODEL")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for model in a.models:
        name = os.path.splitext(os.path.basename(model))[0]
        out_dir = os.path.join(a.out, name)
        resuming = os.path.exists(os.path.join(out_dir, "results.json"))
        if resuming and not a.resume:
            sys.exit("explore_networks: %s holds an earlier run: --resume, remove it or choose another --out" % out_dir)
        wall, peak_mb = explore(a.hfuse, model, out_dir, a.budget,
                                a.explore_args.split() + (["--resume"] if resuming else []))
        with open(os.path.join(out_dir, "results.json")) as f:
            res = json.load(f)
        default_plan = os.path.join(out_dir, "default_plan.json")
        run([a.hfuse, "plan", model, "-o", default_plan])
        row = {"model": name, "file": model, "budget": a.budget, "resumed": resuming, "wall_s": wall,
               "peak_rss_mb": peak_mb,
               "candidates": len(res["candidates"]), "segments": res["plan_space"].get("segments", 0),
               "distinct_segments": res["plan_space"].get("distinct_segments", 0),
               "regrouped_segments": sum(1 for s in res.get("segments", [])
                                         if s["default"]["grouping"] != s["best_plan"]["grouping"]),
               "explore_peak_rss_mb": res["resources"]["explore_peak_rss_mb"],
               "largest_child_peak_rss_mb": res["resources"]["largest_child_peak_rss_mb"],
               "explore_best_ms": res["best"]["ms"] if res.get("best") else None,
               "explore_best_schedule": res["best"]["schedule"] if res.get("best") else None}
        if os.path.exists(os.path.join(out_dir, "best_plan.json")):
            row["best_plan_vs_default"] = interleaved(a.hfuse, model, ["--plan", os.path.join(out_dir, "best_plan.json")],
                                                      default_plan, a.rounds, a.runs)
        rows.append(row)
        print(json.dumps(row), flush=True)
    pairs = []
    for pair in a.tuned_pair:
        source, target = pair.split(":", 1)
        tuning = os.path.join(a.out, source, "tuning.json")
        name = os.path.splitext(os.path.basename(target))[0]
        default_plan = os.path.join(a.out, name + ".default_plan.json")
        run([a.hfuse, "plan", target, "-o", default_plan])
        p = subprocess.run([a.hfuse, "plan", target, "--tuned", tuning], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        applied = next((l for l in p.stderr.splitlines() if l.startswith("tuned:")), "")
        r = {"source": source, "target": name, "applied": applied}
        r.update(interleaved(a.hfuse, target, ["--tuned", tuning], default_plan, a.rounds, a.runs))
        pairs.append(r)
        print(json.dumps(r), flush=True)
    with open(os.path.join(a.out, "explore_networks.json"), "w") as f:
        json.dump({"networks": rows, "tuned_pairs": pairs}, f, indent=1)
    print("\n%-20s %6s %8s %9s %9s %9s %11s %22s" % ("model", "cands", "wall s", "peak MB", "explore", "segments",
                                                       "regrouped", "best_plan/default"))
    for r in rows:
        b = r.get("best_plan_vs_default")
        cmp = "%.3fx (%.2f-%.2f)" % (b["speedup"], b["speedup_min"], b["speedup_max"]) if b else "-"
        print("%-20s %6d %8.0f %9.0f %9.0f %5d/%-3d %11d %22s" %
              (r["model"], r["candidates"], r["wall_s"], r["peak_rss_mb"], r["explore_peak_rss_mb"],
               r["distinct_segments"], r["segments"], r["regrouped_segments"], cmp))
    for r in pairs:
        print("%s's tuning.json on %s: %s; %.3fx the default (%.2f-%.2f)" % (r["source"], r["target"], r["applied"],
                                                                          r["speedup"], r["speedup_min"],
                                                                          r["speedup_max"]))
    print("peak MB: the largest process of the run (explore or a candidate); explore: explore's own")
    print("speedup = default plan ms / other ms, medians of %d interleaved bench calls (%d runs each)" %
          (a.rounds, a.runs))


if __name__ == "__main__":
    main()
