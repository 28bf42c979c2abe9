#!/usr/bin/env python3
"""Renders hfuse_bench results (Google Benchmark JSON) as a Markdown table and an SVG bar chart.

    build/bin/hfuse_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \\
        --benchmark_out=results.json --benchmark_out_format=json
    python3 bench/plot.py results.json -o results.svg     # table on stdout, chart in results.svg

Each benchmark WORKLOAD/IMPL contributes its median (the "median" aggregate when the run had
repetitions, else the median of its runs); `--stat min` takes the "min" aggregate instead (hfuse_bench
computes it: steadier than the median when the machine's neighbours are busy). The chart shows GFLOP/s per workload, one bar per
implementation, with the measured FMA peak as a dashed line. Standard library only.
"""
import argparse
import json
import math
import statistics
import sys
from xml.sax.saxutils import escape

UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
PEERS = ("onednn", "eigen")
COLORS = ["#1f77b4", "#aec7e8", "#2ca02c", "#98df8a", "#d62728", "#9467bd", "#8c564b", "#e377c2"]


def load(path, stat="median"):
    """{(workload, impl): {"ms", "gflops", "share", "groups", "error"}} and the run's context."""
    with open(path) as f:
        doc = json.load(f)
    runs = {}
    context = doc.get("context", {})
    peak_name = f"peak/fma/threads:{context.get('threads', '')}"
    peak_samples, round_trips = [], []
    for b in doc["benchmarks"]:
        # UseRealTime() appends "/real_time" to every name.
        name = b.get("run_name", b["name"]).replace("/real_time", "")
        kind = b.get("run_type", "iteration")
        # The peak and the cores' round trip, interleaved with the workloads: their repetitions (or
        # their min and max) sample the machine's speed and the cores' distance through the run.
        sample = kind != "aggregate" or b.get("aggregate_name") in ("min", "max")
        if sample and name == peak_name and "GFLOP/s" in b:
            peak_samples.append(b["GFLOP/s"])
        if sample and name.startswith("machine/core_round_trip") and "round_trip_ns" in b:
            round_trips.append(b["round_trip_ns"])
        if kind == "aggregate":
            if b.get("aggregate_name") not in (stat, "median"):
                continue
            kind = "median" if b["aggregate_name"] == "median" else "aggregate"
        runs.setdefault(name, {"aggregate": [], "iteration": [], "median": []})
        runs[name][kind].append(b)
    if stat != "median" and not any(k["aggregate"] for k in runs.values()):
        sys.exit(f"{path}: no '{stat}' aggregates (hfuse_bench with --benchmark_repetitions=N, N > 1)")
    results = {}
    for name, kinds in runs.items():
        if "/" not in name or name.startswith(("peak/", "machine/")):
            continue
        workload, impl = name.split("/", 1)
        if stat == "median":
            kinds["aggregate"] = kinds["median"]
        rows = kinds["aggregate"] or kinds["iteration"]
        errors = [r.get("error_message", "error") for r in rows if r.get("error_occurred")]
        rows = [r for r in rows if not r.get("error_occurred")]
        if not rows:
            results[(workload, impl)] = {"error": errors[0] if errors else "no result"}
            continue
        # Rates from the median rows, scaled to the chosen time (a "min" aggregate of a rate is the
        # slowest repetition's rate, not the fastest's).
        rate_rows = kinds["median"] or rows
        med = lambda key, rs=rows: statistics.median(r[key] for r in rs if key in r) if any(key in r for r in rs) else None
        ms_of = lambda rs: statistics.median(r["real_time"] * UNIT_MS[r.get("time_unit", "ns")] for r in rs)
        ms = ms_of(rows)
        scale = ms_of(rate_rows) / ms
        rate = lambda key: med(key, rate_rows) * scale if med(key, rate_rows) is not None else None
        results[(workload, impl)] = {
            "ms": ms,
            "gflops": rate("GFLOP/s"),
            "share": rate("peak_share"),
            "groups": med("groups"),
            "compile_ms": med("compile_ms"),
            "group_compile_max_ms": med("group_compile_max_ms"),
        }
    if peak_samples:
        context = dict(context, peak_samples=peak_samples)
    if round_trips:
        context = dict(context, round_trips=round_trips)
    return results, context


# hfuse_bench's registration order; --benchmark_enable_random_interleaving shuffles the JSON.
WORKLOAD_ORDER = ["conv_bn_relu", "conv3x3_bn_relu", "conv_bias_relu_maxpool", "resnet_block", "dwconv_bn_relu",
                  "mobilenet_v2_block", "rnn_cell", "lstm_cell", "mlp_softmax"]
WORKLOAD_ORDER += [w + "_b8" for w in WORKLOAD_ORDER[:6]]


def impl_rank(impl):
    if impl in PEERS or impl == "onednn_winograd":
        return (4, impl)
    order = {"hfuse_fused": 0, "hfuse_unfused": 1}
    return (order.get(impl, 2 if impl.endswith("_groups") else 3), impl)


def workloads_of(results):
    names = set(w for w, _ in results)
    return [w for w in WORKLOAD_ORDER if w in names] + sorted(names - set(WORKLOAD_ORDER))


def impls_of(results):
    return sorted(set(i for _, i in results), key=impl_rank)


def fmt_time(ms):
    return f"{ms:#.3g} ms" if ms >= 0.1 else f"{ms * 1e3:#.3g} us"


def peak_drift(start, samples):
    """Lines on how the FMA peak moved during the run: a shared machine's neighbours can slow it for
    minutes (seen on a Zen 5 VM: 440 GFLOP/s, then 262 for a while, every workload slower with it), and
    then only ratios of measurements close in time mean much."""
    if not samples:
        return []
    low, high = min(samples + [start]), max(samples + [start])
    lines = [f"FMA peak sampled during the run (peak/fma, interleaved): {min(samples):.1f} to "
             f"{max(samples):.1f} GFLOP/s."]
    if low < 0.9 * high:
        lines.append(f"**Warning: the machine's speed changed during the run** (the lowest peak {low:.1f} is "
                     f"{low / high:.0%} of the highest): this run mixes fast and slow spells; measure again.")
    return lines


def core_distance(start, samples):
    """Lines on the cores' distance through the run (machine/core_round_trip, interleaved): a VM's
    vCPUs can share one L3 for a while (a Zen 4 VM: 52-58 ns), then sit on two core complexes
    (280-335 ns), where the MobileNet-V2 block's 2 threads took a third longer (0.27 -> 0.37 ms)
    while the FMA peak did not move."""
    if not samples:
        return []
    low, high = min(samples + [start]), max(samples + [start])
    lines = [f"A cache line's round trip between the cores: {start:.0f} ns at start-up, {min(samples):.0f} to "
             f"{max(samples):.0f} ns sampled during the run (machine/core_round_trip, interleaved)."]
    if high > 2 * low:
        lines.append(f"**Warning: the cores moved apart or together during the run** (a cache line's round trip "
                     f"{low:.0f} to {high:.0f} ns): multi-threaded workloads ran in both states, compare only "
                     "measurements of one; measure again.")
    return lines


def table(results, context):
    workloads = workloads_of(results)
    impls = impls_of(results)
    hfuse = [i for i in impls if i.startswith("hfuse_")]
    lines = []
    peak = context.get("fma_peak_gflops")
    if peak and float(peak) > 0:
        isa = context.get("fma_peak_isa")
        lines.append(f"Measured FMA peak: {float(peak):.1f} GFLOP/s with {context.get('threads', '?')} threads "
                     f"({float(context.get('fma_peak_gflops_1_thread', 0)):.1f} on one)"
                     + (f" on {isa} vectors" if isa else "") + ".")
        if "halide_target" in context:
            onednn = f"; oneDNN's ISA {context['onednn_isa']}" if "onednn_isa" in context else ""
            lines.append(f"Halide target `{context['halide_target']}`{onednn}.")
        lines.extend(peak_drift(float(peak), context.get("peak_samples", [])))
        if "core_round_trip_ns" in context:
            lines.extend(core_distance(float(context["core_round_trip_ns"]), context.get("round_trips", [])))
        lines.append("")
    head = ["workload"] + [i.replace("hfuse_", "") for i in hfuse] + ["peer", "fused GFLOP/s (peak)",
                                                                         "peer GFLOP/s (peak)", "peer / fused time"]
    blocked_io = "hfuse_fused_blocked_io" in hfuse
    if blocked_io:
        head.append("peer / fused_blocked_io time")
    winograd = any(i == "onednn_winograd" for i in impls)
    if winograd:
        head.append("onednn_winograd / fused time")
    head.append("fused JIT compile (slowest group)")
    lines.append("| " + " | ".join(head) + " |")
    lines.append("| --- |" + " ---: |" * (len(head) - 1))
    for w in workloads:
        row = [w]
        for i in hfuse:
            r = results.get((w, i), {})
            cell = fmt_time(r["ms"]) if "ms" in r else ("error" if "error" in r else "")
            if r.get("groups"):
                cell += f" ({r['groups']:.0f}g)"
            row.append(cell)
        peer = next((p for p in PEERS if (w, p) in results), None)
        p = results.get((w, peer), {})
        f = results.get((w, "hfuse_fused"), {})
        row.append(f"{peer} {fmt_time(p['ms'])}" if "ms" in p else (peer or ""))
        for r in (f, p):
            row.append(f"{r['gflops']:.1f} ({100 * r['share']:.0f}%)" if r.get("gflops") and r.get("share") else "")
        # > 1: hfuse fused is faster than the peer.
        row.append(f"{p['ms'] / f['ms']:.2f}x" if "ms" in p and "ms" in f else "")
        if blocked_io:
            b = results.get((w, "hfuse_fused_blocked_io"), {})
            row.append(f"{p['ms'] / b['ms']:.2f}x" if "ms" in p and "ms" in b else "")
        if winograd:
            o = results.get((w, "onednn_winograd"), {})
            row.append(f"{o['ms'] / f['ms']:.2f}x" if "ms" in o and "ms" in f else "")
        row.append(f"{f['compile_ms'] / 1e3:.2f} s ({f['group_compile_max_ms'] / 1e3:.2f} s)"
                   if f.get("compile_ms") is not None and f.get("group_compile_max_ms") is not None else "")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def nice_step(top, ticks=5):
    """A round grid step (1, 2, 2.5 or 5 times a power of ten) giving about `ticks` lines up to `top`."""
    raw = top / ticks
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def svg(results, context):
    workloads = workloads_of(results)
    impls = impls_of(results)
    peak = float(context.get("fma_peak_gflops", 0) or 0)
    step = nice_step(max([r.get("gflops") or 0 for r in results.values()] + [peak, 1]))
    top = step * math.ceil(max([r.get("gflops") or 0 for r in results.values()] + [peak, 1]) * 1.05 / step)
    bar, gap, left, height, plot_top = 11, 18, 60, 320, 40
    group_w = bar * len(impls) + gap
    plot_right = left + group_w * len(workloads)
    width = plot_right + 130  # room for the last workload's slanted name
    y = lambda v: plot_top + height * (1 - v / top)
    legend_y = plot_top + height + 110
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{legend_y + 16 * ((len(impls) + 3) // 4) + 10}" '
           'font-family="sans-serif" font-size="11">',
           '<rect width="100%" height="100%" fill="#fff"/>',
           f'<text x="{left}" y="20" font-size="14">GFLOP/s per workload, {escape(context.get("threads", "?"))} '
           'threads (higher is better)</text>']
    v = 0.0
    while v <= top + 1e-9:  # grid
        out.append(f'<line x1="{left}" x2="{plot_right}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
        v += step
    if peak:
        out.append(f'<line x1="{left}" x2="{plot_right}" y1="{y(peak):.1f}" y2="{y(peak):.1f}" stroke="#000" '
                   'stroke-dasharray="5,4"/>')
        out.append(f'<text x="{plot_right}" y="{y(peak) - 4:.1f}" text-anchor="end">measured FMA peak '
                   f'{peak:.0f}</text>')
    for wi, w in enumerate(workloads):
        x0 = left + gap / 2 + wi * group_w
        for ii, i in enumerate(impls):
            r = results.get((w, i), {})
            if not r.get("gflops"):
                continue
            x = x0 + ii * bar
            out.append(f'<rect x="{x:.1f}" y="{y(r["gflops"]):.1f}" width="{bar - 1}" '
                       f'height="{y(0) - y(r["gflops"]):.1f}" fill="{COLORS[ii % len(COLORS)]}">'
                       f'<title>{escape(w)}/{escape(i)}: {r["gflops"]:.1f} GFLOP/s, {fmt_time(r["ms"])}</title></rect>')
        lx, ly = x0 + 4, y(0) + 14
        out.append(f'<text x="{lx:.1f}" y="{ly:.1f}" transform="rotate(30 {lx:.1f} {ly:.1f})">{escape(w)}</text>')
    for ii, i in enumerate(impls):  # legend
        lx, ly = left + (ii % 4) * 190, legend_y + (ii // 4) * 16
        out.append(f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" fill="{COLORS[ii % len(COLORS)]}"/>')
        out.append(f'<text x="{lx + 14}" y="{ly}">{escape(i)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", help="Google Benchmark JSON (--benchmark_out_format=json)")
    ap.add_argument("-o", "--output", help="write the SVG chart here")
    ap.add_argument("--stat", choices=["median", "min"], default="median",
                    help="the aggregate each cell shows (min: hfuse_bench's minimum over the repetitions)")
    args = ap.parse_args()
    results, context = load(args.results, args.stat)
    if not results:
        sys.exit(f"{args.results}: no WORKLOAD/IMPL benchmarks")
    print(table(results, context))
    if args.output:
        with open(args.output, "w") as f:
            f.write(svg(results, context))


if __name__ == "__main__":
    main()
