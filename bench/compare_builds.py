#!/usr/bin/python3
"""Two hfuse builds on one model: the groups whose default schedules differ, and their times.

Plans the model with each build (`hfuse plan`), lists the groups whose schedule (or membership) differs,
then alternates `hfuse run --profile` of the two builds ROUNDS times and prints each changed group's
median over the rounds (each a median of --runs runs), their sum, and the whole run's. A change to a
template's defaults touches a few groups of a network; their own times move far less with the
machine's spells than whole-network times do, so compare those first, and whole networks with
`dev_networks.py`.

    /usr/bin/python3 bench/compare_builds.py OLD_HFUSE NEW_HFUSE MODEL.onnx --input X.f32
        [--rounds 3] [--runs 20] [--threads 2] [--json OUT]

Build the old binary from a worktree (`git worktree add /tmp/old REV`, then build its `hfuse_cli`).
"""
import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stdout))
    return p.stdout


def plan_groups(hfuse, model, work, tag):
    path = "%s/%s.plan.json" % (work, tag)
    run([hfuse, "plan", model, "-o", path])
    with open(path) as f:
        return {g["name"]: g for g in json.load(f)["groups"]}


def profile(hfuse, model, inp, runs, threads):
    """run --profile: group name -> ms, and the whole run's ms."""
    out = run([hfuse, "run", model, "--input", inp, "--profile", "--runs", str(runs), "--threads", str(threads)])
    groups, total = {}, None
    for line in out.splitlines():
        m = re.match(r"\s+(g\d+)\s+.*?\s(\d+\.\d+)\s+\d+\.\d+%", line)
        if m:
            groups[m.group(1)] = float(m.group(2))
        m = re.match(r"profile: median of \d+ runs: ([\d.]+) ms", line)
        if m:
            total = float(m.group(1))
    return groups, total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("model")
    ap.add_argument("--input", required=True, help="raw float32 input for hfuse run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write the per-group medians here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        old_plan = plan_groups(a.old, a.model, work, "old")
        new_plan = plan_groups(a.new, a.model, work, "new")
    if old_plan.keys() != new_plan.keys() or any(old_plan[g]["nodes"] != new_plan[g]["nodes"] for g in old_plan):
        sys.exit("the builds group the model differently: compare whole runs with dev_networks.py")
    changed = [g for g in old_plan if old_plan[g]["schedule"] != new_plan[g]["schedule"]]
    print("%d of %d groups differ" % (len(changed), len(old_plan)))
    times = {"old": {}, "new": {}}
    totals = {"old": [], "new": []}
    for _ in range(a.rounds):
        for tag, hfuse in (("old", a.old), ("new", a.new)):
            groups, total = profile(hfuse, a.model, a.input, a.runs, a.threads)
            for g in changed:
                times[tag].setdefault(g, []).append(groups.get(g, float("nan")))
            totals[tag].append(total)
    rows = []
    for g in changed:
        old_ms, new_ms = statistics.median(times["old"][g]), statistics.median(times["new"][g])
        diff = {k: v for k, v in new_plan[g]["schedule"].items() if old_plan[g]["schedule"].get(k) != v}
        rows.append({"group": g, "master": new_plan[g]["master"], "old_ms": old_ms, "new_ms": new_ms, "new_params": diff})
        print("%-6s %-44s %8.4f %8.4f  %s" % (g, new_plan[g]["master"][-44:], old_ms, new_ms, json.dumps(diff)))
    old_sum, new_sum = sum(r["old_ms"] for r in rows), sum(r["new_ms"] for r in rows)
    print("changed groups: old %.3f ms, new %.3f ms; whole run: old %.2f ms, new %.2f ms (medians of %d rounds)"
          % (old_sum, new_sum, statistics.median(totals["old"]), statistics.median(totals["new"]), a.rounds))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"groups": rows, "old_total_ms": totals["old"], "new_total_ms": totals["new"]}, f, indent=1)


if __name__ == "__main__":
    main()
