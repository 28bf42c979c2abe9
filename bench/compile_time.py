#!/usr/bin/python3
"""Compile time and start-up of hfuse on networks: cold and from the kernel cache.

For each network (a name of tools/make_dev_networks.py's set in --dir, or an .onnx path), each step
one `hfuse bench NET --json --runs 1 --threads T` process, its compile_ms (the Executor's construction)
and wall time read back:

1. cold, JIT:    with --no-cache (every distinct group JIT-compiled, on every core);
2. cold, cache:  with HFUSE_CACHE_DIR a fresh, empty directory (compiled ahead of time and stored:
                 what a first run costs);
3. warm:         the same again (every group loaded from the cache: what every later run costs);
4. --baseline BIN: step 1 with another hfuse binary (an older build), for the speed-up.

With --rounds N the steps run N times, interleaved (baseline, JIT, cold, warm; then again), each
round's cold step from an empty cache of its own; the table gives medians and their range.

Then `hfuse run NET --input NET.input.f32 --output FILE` once with the warm cache and once with a
fresh one: the two outputs must be bit-identical, and the warm step must have loaded every distinct
group, else the exit status is 1. The table also says whether the JIT-compiled (--no-cache) output
is bit-identical to them.

    /usr/bin/python3 bench/compile_time.py [--dir build/dev_networks] [--nets regnet_y_3_2gf,inception_v3]
        [--threads 2] [--rounds 3] [--baseline OLD/bin/hfuse] [--json out.json] [--md out.md]

The table: per network, groups and distinct groups, compile_ms of each step, the cold speed-up over
the baseline when given, and whether cold and warm outputs are bit-identical.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_HFUSE = os.path.join(ROOT, "build", "bin", "hfuse")
DEFAULT_DIR = os.path.join(ROOT, "build", "dev_networks")


def bench(hfuse, model, threads, env, extra):
    """`hfuse bench --json --runs 1`: its JSON, plus the process's wall seconds."""
    cmd = [hfuse, "bench", model, "--json", "--runs", "1", "--threads", str(threads)] + extra
    start = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.time() - start
    if p.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(cmd), (p.stderr.strip().splitlines() or ["?"])[-1]))
    j = json.loads(p.stdout.strip().splitlines()[-1])
    j["wall_s"] = wall
    return j


def outputs(hfuse, model, inp, threads, env, path, extra):
    """`hfuse run --output PATH`: the output's bytes."""
    cmd = [hfuse, "run", model, "--output", path, "--threads", str(threads)] + extra
    if inp:
        cmd += ["--input", inp]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(cmd), (p.stderr.strip().splitlines() or ["?"])[-1]))
    with open(path, "rb") as f:
        return f.read()


def lscpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        name = next((l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Model name")), "?")
        flags = next((l for l in out.splitlines() if l.startswith("Flags")), "")
        return name + (" (AVX-512)" if "avx512f" in flags else " (AVX2)" if "avx2" in flags else "")
    except OSError:
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=DEFAULT_DIR, help="the development networks (tools/make_dev_networks.py)")
    ap.add_argument("--nets", default="regnet_y_3_2gf,inception_v3", help="names in --dir, or .onnx paths")
    ap.add_argument("--hfuse", default=DEFAULT_HFUSE)
    ap.add_argument("--baseline", default="", help="another hfuse binary timed cold (JIT) for comparison")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1, help="interleaved rounds; the table gives medians (min-max)")
    ap.add_argument("--json", default="")
    ap.add_argument("--md", default="")
    a = ap.parse_args()
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")

    rows, ok = [], True
    for net in [n for n in a.nets.split(",") if n]:
        model = net if net.endswith(".onnx") else os.path.join(a.dir, net + ".onnx")
        name = os.path.basename(model)[:-5]
        inp = os.path.join(os.path.dirname(model), name + ".input.f32")
        inp = inp if os.path.exists(inp) else ""
        row = {"network": name}
        times = {"jit_cold_ms": [], "cache_cold_ms": [], "warm_ms": [], "warm_wall_s": [], "baseline_cold_ms": []}
        with tempfile.TemporaryDirectory(prefix="hfuse_cache_") as cache:
            # Rounds interleave the steps (the machine's drift hits each alike); each round's cold
            # step starts from an empty cache of its own.
            for k in range(a.rounds):
                if a.baseline:
                    base = bench(a.baseline, model, a.threads, os.environ, [])
                    times["baseline_cold_ms"].append(base["compile_ms"])
                    row["baseline_distinct"] = base["compiled_pipelines"]
                env = dict(os.environ, HFUSE_CACHE_DIR=os.path.join(cache, "round%d" % k))
                jit = bench(a.hfuse, model, a.threads, env, ["--no-cache"])
                cold = bench(a.hfuse, model, a.threads, env, [])
                warm = bench(a.hfuse, model, a.threads, env, [])
                times["jit_cold_ms"].append(jit["compile_ms"])
                times["cache_cold_ms"].append(cold["compile_ms"])
                times["warm_ms"].append(warm["compile_ms"])
                times["warm_wall_s"].append(warm["wall_s"])
            warm_out = outputs(a.hfuse, model, inp, a.threads, env, os.path.join(cache, "warm.f32"), [])
            fresh = dict(os.environ, HFUSE_CACHE_DIR=os.path.join(cache, "fresh"))
            cold_out = outputs(a.hfuse, model, inp, a.threads, fresh, os.path.join(cache, "cold.f32"), [])
            jit_out = outputs(a.hfuse, model, inp, a.threads, env, os.path.join(cache, "jit.f32"), ["--no-cache"])
        for key, values in times.items():
            if values:
                row[key] = statistics.median(values)
                row[key + "_rounds"] = values
        row.update({"groups": jit["groups"], "distinct": jit["compiled_pipelines"],
                    "warm_hits": warm["kernel_cache"]["hits"],
                    "bit_identical": cold_out == warm_out, "jit_bit_identical": jit_out == warm_out})
        ok = ok and row["bit_identical"] and row["warm_hits"] == row["distinct"]
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)

    head = ("| network | groups | distinct | baseline cold | JIT cold | cache cold | warm (from cache) | warm process "
            "| cold / warm outputs | JIT / cached outputs |")
    lines = [head, "|" + " --- |" * 10]
    def secs(r, key):
        """The median in seconds, with the range over rounds when there were several."""
        all_ = r[key + "_rounds"]
        text = "%.1f s" % (r[key] / 1000)
        return text + (" (%.1f-%.1f)" % (min(all_) / 1000, max(all_) / 1000) if len(all_) > 1 else "")

    for r in rows:
        has_base = "baseline_cold_ms" in r
        base = "%s, %d distinct" % (secs(r, "baseline_cold_ms"), r["baseline_distinct"]) if has_base else "-"
        speed = lambda ms: (", %.1fx" % (r["baseline_cold_ms"] / ms)) if has_base else ""
        lines.append("| %s | %d | %d | %s | %s%s | %s%s | %.0f ms | %.2f s | %s | %s |" % (
            r["network"], r["groups"], r["distinct"], base, secs(r, "jit_cold_ms"), speed(r["jit_cold_ms"]),
            secs(r, "cache_cold_ms"), speed(r["cache_cold_ms"]), r["warm_ms"], r["warm_wall_s"],
            "bit-identical" if r["bit_identical"] else "DIFFER",
            "bit-identical" if r["jit_bit_identical"] else "differ"))
    table = "\n".join(lines)
    print("%s, %d threads, %d round(s): medians (min-max)\n\n%s" % (lscpu_model(), a.threads, a.rounds, table))
    if a.md:
        with open(a.md, "w") as f:
            f.write(table + "\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"cpu": lscpu_model(), "threads": a.threads, "rounds": a.rounds, "rows": rows}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
