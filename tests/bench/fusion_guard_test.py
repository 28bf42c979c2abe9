#!/usr/bin/env python3
"""bench/fusion_guard.py's second stage (ctest Bench.FusionGuard): the plan with one group split into
its ops, which `hfuse run --check` must accept and compute right, and the verdict on a group's window.

    fusion_guard_test.py --hfuse build/bin/hfuse --scratch DIR
"""
import argparse
import json
import os
import subprocess
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import fusion_guard  # noqa: E402

ARGS = None


class JudgeWindow(unittest.TestCase):
    def test_slower_in_every_round_beyond_the_tolerance_fails(self):
        self.assertTrue(fusion_guard.judge_window([1.10, 1.12], [1.0, 1.0], [0.1, 0.1], 0.15, 0.01))

    def test_a_round_that_is_not_slower_passes(self):
        self.assertFalse(fusion_guard.judge_window([1.10, 0.99], [1.0, 1.0], [0.1, 0.1], 0.15, 0.01))

    def test_the_tolerance_is_of_the_group_ops_not_of_the_window(self):
        # 0.02 ms more in a 1 ms window: far within 15% of the window, beyond 15% of the ops' 0.05 ms
        # plus 0.01 ms; 0.015 ms more is within that.
        self.assertTrue(fusion_guard.judge_window([1.02, 1.02], [1.0, 1.0], [0.05, 0.05], 0.15, 0.01))
        self.assertFalse(fusion_guard.judge_window([1.015, 1.015], [1.0, 1.0], [0.05, 0.05], 0.15, 0.01))


class SplitPlan(unittest.TestCase):
    def plan(self, model, name, *extra):
        path = os.path.join(ARGS.scratch, name)
        subprocess.run([ARGS.hfuse, "plan", model, "-o", path] + list(extra), check=True, stdout=subprocess.DEVNULL)
        with open(path) as f:
            return json.load(f)

    def test_the_split_plan_runs_and_computes_the_model(self):
        model = os.path.join(ROOT, "models", "resnet_block.json")
        fused = self.plan(model, "fused.json")
        ops = self.plan(model, "ops.json", "--rules", "none")
        group = next(g for g in fused["groups"] if len(g["nodes"]) > 2)  # conv2 + bn2 + add + relu2
        split = fusion_guard.split_plan(fused, ops, group["name"])
        parts = [g for g in split["groups"] if g["name"].startswith(group["name"] + ".")]
        self.assertGreater(len(parts), 1)
        self.assertEqual(sorted(n for g in parts for n in g["nodes"]), sorted(group["nodes"]))
        self.assertNotIn(group["name"], [g["name"] for g in split["groups"]])
        self.assertEqual(len(split["groups"]), len(fused["groups"]) - 1 + len(parts))
        self.assertFalse(any("schedule" in g for g in split["groups"]))  # each the split plan's default
        path = os.path.join(ARGS.scratch, "split.json")
        with open(path, "w") as f:
            json.dump(split, f)
        run = subprocess.run([ARGS.hfuse, "run", model, "--plan", path, "--check", "--profile", "--runs", "2"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(run.returncode, 0, run.stdout)
        for g in parts:
            self.assertIn(g["name"], run.stdout)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--hfuse", required=True)
    ap.add_argument("--scratch", required=True)
    ARGS, rest = ap.parse_known_args()
    os.makedirs(ARGS.scratch, exist_ok=True)
    unittest.main(argv=[sys.argv[0]] + rest)
