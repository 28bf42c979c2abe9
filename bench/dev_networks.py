#!/usr/bin/python3
"""hfuse beside ONNX Runtime and PyTorch frozen on the development network set (issue 40).

The networks are those tools/make_dev_networks.py exported (its manifest.json in --dir): torchvision
nets with seeded random weights, as ONNX, with an input and PyTorch's eager output beside each.

1. Correctness: `hfuse run NAME.onnx --input NAME.input.f32 --output FILE --threads T` against
   NAME.torch.f32: max abs diff / max |PyTorch output| <= 1e-3, else the row is a mismatch. ONNX
   Runtime's output (bench/ort_peer.js) is checked the same way, as a sanity check of the files, and so
   is PyTorch frozen: torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.script(model))), the
   model rebuilt by make_dev_networks.build_model (torch.jit.trace instead of script where scripting
   fails; the JSON says which). A network hfuse cannot import or run is reported in its row as
   "hfuse: <its first error line>", and the run goes on.
2. Timing, interleaved in rounds (--rounds R): per round and network, in turn, `hfuse bench NAME.onnx
   --runs N --json --threads T` (its median_ms, over N runs after one warm-up, of generated inputs;
   also compile_ms and groups), `node bench/ort_peer.js NAME.onnx --runs N --threads T` (CPU EP,
   optimisation level 'all', T intra-op threads, sequential; its median_ms) and PyTorch frozen
   (torch.set_num_threads(T), median of N calls after --warmup). N is --runs, or by default chosen per
   network from ONNX Runtime's time in step 1 so one measurement takes about --budget seconds (at
   least 5 runs).
3. Report: a Markdown table (printed; --md FILE writes it) with each time the median over rounds (and
   the range over rounds), the speed ratios ORT ms / hfuse ms and PyTorch ms / hfuse ms (> 1: hfuse
   faster) and their geometric means, and ORT / hfuse per round: the median (and range) over rounds of
   the ratio of the two times of one round, measured seconds apart, which a slow spell of the machine
   lasting a round moves less than it moves the ratio of the medians; --json FILE every figure per round, the CPU (lscpu model name,
   avx2/avx512f), load averages and versions; --svg FILE a bar chart of the two ratios per network.

    tools/install_deps.sh --peers                     # PyTorch, onnx, Node.js and onnxruntime-node
    /usr/bin/python3 tools/make_dev_networks.py       # build/dev_networks/
    /usr/bin/python3 bench/dev_networks.py [--threads 2] [--rounds 3] [--nets resnet18,vgg16_bn]
        [--md out.md] [--json out.json] [--svg out.svg] [--plan-args '--rules FILE'] [--measure-undecided]

Exit status: 0 when every network ran in hfuse and matched PyTorch (and ONNX Runtime and PyTorch
frozen matched too); 1 otherwise (every network is still reported).
"""
import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

warnings.filterwarnings("ignore")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
# numpy, torch and make_dev_networks (build_model: the same seeded networks) come with the peers
# (tools/install_deps.sh --peers): imported by main() once the arguments are read, so that --help
# works without them.
np = torch = make_dev_networks = None
DEFAULT_DIR = os.path.join(ROOT, "build", "dev_networks")  # make_dev_networks.DEFAULT_OUT

TOLERANCE = 1e-3
TIMEOUT_S = 3600
ORT_PEER = os.path.join(ROOT, "bench", "ort_peer.js")


# ---- helpers ------------------------------------------------------------------------------------------------


class Failed(Exception):
    """A command that failed: .line is its first error line, .text all it printed."""

    def __init__(self, line, text):
        super().__init__(line)
        self.line, self.text = line, text


def run_cmd(cmd):
    """stdout of cmd; Failed with its first error line when it fails."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise Failed("timed out after %d s" % TIMEOUT_S, "")
    if p.returncode != 0:
        lines = [l.strip() for l in p.stderr.splitlines() if l.strip()]
        tagged = [l for l in lines if l.startswith(("hfuse:", "ort_peer:"))]
        if tagged:
            line = tagged[0]
        elif lines:
            line = lines[0]
        elif p.returncode < 0:
            line = "killed by signal %d" % -p.returncode
        else:
            line = "exit status %d, no message" % p.returncode
        raise Failed(line, "$ %s\n%s%s" % (" ".join(map(shlex.quote, cmd)), p.stdout, p.stderr))
    return p.stdout


def last_json(out):
    return json.loads(out.strip().splitlines()[-1])


def read_f32(path):
    return np.fromfile(path, dtype="<f4")


def rel_error(got, want):
    """max |got - want| / max |want| (inf when the sizes differ or a value is not finite)."""
    if got.size != want.size:
        return math.inf
    scale = float(np.abs(want).max()) or 1.0
    d = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max())
    return d / scale if math.isfinite(d) else math.inf


def median_range(xs):
    return (statistics.median(xs), min(xs), max(xs)) if xs else (None, None, None)


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def cpu_info():
    info = {"model_name": "unknown", "flags": {}}
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout
    except OSError:
        return info
    flags = set()
    for line in out.splitlines():
        k, _, v = line.partition(":")
        if k.strip() == "Model name":
            info["model_name"] = v.strip()
        elif k.strip() == "Flags":
            flags = set(v.split())
    info["flags"] = {f: f in flags for f in ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "amx_tile")}
    return info


def versions(a):
    v = {"torch": torch.__version__, "python": sys.version.split()[0]}
    try:
        import torchvision
        v["torchvision"] = torchvision.__version__
    except ImportError:
        pass
    try:
        v["node"] = run_cmd([a.node, "--version"]).strip()
    except (Failed, OSError):
        v["node"] = None
    try:
        v["hfuse_commit"] = run_cmd(["git", "-C", ROOT, "rev-parse", "HEAD"]).strip()
        v["hfuse_tree_dirty"] = bool(run_cmd(["git", "-C", ROOT, "status", "--porcelain", "-uno"]).strip())
    except (Failed, OSError):
        v["hfuse_commit"] = None
    try:
        v["hfuse_binary_mtime"] = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.path.getmtime(a.hfuse)))
    except OSError:
        pass
    return v


# ---- the three implementations ------------------------------------------------------------------------------


def hfuse_check(a, net, out_file):
    run_cmd([a.hfuse, "run", net["onnx"], "--input", net["input"], "--output", out_file, "--threads",
             str(a.threads)] + net["plan"])
    return rel_error(read_f32(out_file), net["want"])


def hfuse_bench(a, net, runs):
    return last_json(run_cmd([a.hfuse, "bench", net["onnx"], "--runs", str(runs), "--json", "--threads",
                              str(a.threads)] + net["plan"]))


def ort_run(a, net, runs, warmup, out_file=None):
    cmd = [a.node, ORT_PEER, net["onnx"], "--input", net["input"], "--threads", str(a.threads), "--runs",
           str(runs), "--warmup", str(warmup)]
    if out_file:
        cmd += ["--output", out_file]
    return last_json(run_cmd(cmd))


def torch_frozen(name):
    """(frozen module, input, 'script' or 'trace', why script failed or None)."""
    model, x = make_dev_networks.build_model(name)
    with torch.no_grad():
        try:
            frozen = torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.script(model)))
            return frozen, x, "script", None
        except Exception as e:  # noqa: BLE001  (TorchScript raises many kinds)
            why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            traced = torch.jit.trace(model, x, check_trace=False)
            return torch.jit.optimize_for_inference(torch.jit.freeze(traced)), x, "trace", why


def time_torch(module, x, runs, warmup):
    with torch.no_grad():
        for _ in range(warmup):
            module(x)
        ms = []
        for _ in range(runs):
            t0 = time.perf_counter()
            module(x)
            ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms), min(ms)


# ---- report -------------------------------------------------------------------------------------------------


def fmt_ms(v):
    if v is None:
        return "-"
    return "%.3f" % v if v < 1 else "%.2f" % v if v < 100 else "%.1f" % v


def fmt_range(med, lo, hi, rounds):
    if med is None:
        return "-"
    return fmt_ms(med) if rounds < 2 else "%s (%s-%s)" % (fmt_ms(med), fmt_ms(lo), fmt_ms(hi))


def fmt_ratio(r):
    return "-" if r is None else "%.2fx" % r


def markdown(rows, meta):
    out = ["| net | batch | match (rel. err) | hfuse ms | ORT ms | PyTorch frozen ms | ORT / hfuse | "
           "ORT / hfuse per round | PyTorch / hfuse | hfuse groups | hfuse compile s |",
           "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        if r.get("hfuse_error"):
            e = r["hfuse_error"]
            match = (e if e.startswith("hfuse:") else "hfuse: " + e).replace("|", "\\|")[:160]
        elif r.get("hfuse_rel_err") is not None:
            match = ("yes %.1e" if r["hfuse_match"] else "**NO** %.1e") % r["hfuse_rel_err"]
        else:
            match = "-"
        notes = []
        if r.get("ort_error"):
            notes.append("ORT: " + r["ort_error"])
        elif r.get("ort_match") is False:
            notes.append("ORT **NO** %.1e" % r["ort_rel_err"])
        if r.get("torch_error"):
            notes.append("PyTorch: " + r["torch_error"])
        elif r.get("torch_match") is False:
            notes.append("PyTorch frozen **NO** %.1e" % r["torch_frozen_rel_err"])
        if notes:
            match += " (" + "; ".join(n.replace("|", "\\|")[:120] for n in notes) + ")"
        torch_ms = fmt_range(r["torch_ms"], r["torch_ms_min"], r["torch_ms_max"], meta["rounds"])
        if r.get("torch_mode") == "trace" and r["torch_ms"] is not None:
            torch_ms += " (traced)"
        per_round = r.get("ratio_ort_rounds") or []
        per_round_text = fmt_ratio(r.get("ratio_ort_per_round"))
        if len(per_round) > 1:
            per_round_text += " (%.2f-%.2f)" % (min(per_round), max(per_round))
        out.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["net"], r["batch"], match,
            fmt_range(r["hfuse_ms"], r["hfuse_ms_min"], r["hfuse_ms_max"], meta["rounds"]),
            fmt_range(r["ort_ms"], r["ort_ms_min"], r["ort_ms_max"], meta["rounds"]), torch_ms,
            fmt_ratio(r["ratio_ort"]), per_round_text, fmt_ratio(r["ratio_torch"]), r.get("groups", "-"),
            "-" if r.get("compile_ms") is None else "%.1f" % (r["compile_ms"] / 1e3)))
    g_ort, g_torch = meta["geomean_ratio_ort"], meta["geomean_ratio_torch"]
    g_round = meta.get("geomean_ratio_ort_per_round")
    out.append("| **geometric mean** | | | | | | %s | %s | %s | | |" % tuple(
        "**%s**" % fmt_ratio(g) if g else "-" for g in (g_ort, g_round, g_torch)))
    out.append("")
    out.append("%s (avx2 %s, avx512f %s), %d threads for all three, %d round%s (each time the median over rounds "
               "of a median of N runs%s), load average %.2f at start, %.2f at end; hfuse %s (plan %s), "
               "ONNX Runtime %s (onnxruntime-node, CPU EP), PyTorch %s frozen (optimize_for_inference). "
               "Ratios: peer ms / hfuse ms, > 1 when hfuse is faster; per round: the median (range) over "
               "rounds of the ratio of one round's two times; match: max abs diff / max |PyTorch "
               "output| <= %.0e." % (
                   meta["cpu"]["model_name"], "yes" if meta["cpu"]["flags"].get("avx2") else "no",
                   "yes" if meta["cpu"]["flags"].get("avx512f") else "no", meta["threads"], meta["rounds"],
                   "" if meta["rounds"] == 1 else "s", ", range over rounds in brackets" if meta["rounds"] > 1 else "",
                   meta["load_average_start"][0], meta["load_average_end"][0],
                   (meta["versions"].get("hfuse_commit") or "?")[:10], " ".join(meta["plan_args"]) or "default",
                   meta["versions"].get("onnxruntime") or "?", meta["versions"]["torch"], TOLERANCE))
    return "\n".join(out) + "\n"


def svg_chart(rows, meta):
    """A grouped bar chart of the two speed ratios per network, a dashed line at 1.0 (standard library)."""
    series = [("ratio_ort", "ORT ms / hfuse ms", "#4878d0"), ("ratio_torch", "PyTorch frozen ms / hfuse ms", "#ee854a")]
    rows = rows + [{"net": "geometric mean", "ratio_ort": meta["geomean_ratio_ort"],
                    "ratio_torch": meta["geomean_ratio_torch"]}]
    vals = [r[k] for r in rows for k, _, _ in series if r.get(k)]
    top = max([1.2] + [v * 1.12 for v in vals])
    step = next(s for s in (0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10, 20, 50, 100) if top / s <= 8)
    top = math.ceil(top / step) * step
    bar, gap, left, right, head, foot, height = 22, 26, 64, 24, 70, 120, 300
    group = bar * len(series) + gap
    width = max(660, left + right + group * max(1, len(rows)))
    total_h = head + height + foot

    def y(v):
        return head + height * (1 - v / top)

    s = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
         'font-family="sans-serif" font-size="11">' % (width, total_h, width, total_h),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="20" font-size="14" font-weight="bold">hfuse speed relative to ONNX Runtime and PyTorch '
         'frozen (%d threads)</text>' % (left, meta["threads"]),
         '<text x="%d" y="36" fill="#555">%s; bars above the dashed line: hfuse faster</text>' % (
             left, _esc(meta["cpu"]["model_name"]))]
    lx = left
    for _, label, colour in series:
        s.append('<rect x="%d" y="46" width="12" height="12" fill="%s"/>' % (lx, colour))
        s.append('<text x="%d" y="56">%s</text>' % (lx + 16, _esc(label)))
        lx += 16 + 7 * len(label) + 24
    t = 0.0
    while t <= top + 1e-9:
        s.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (left, width - right, y(t), y(t)))
        s.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>' % (left - 6, y(t) + 4, round(t, 3)))
        t += step
    s.append('<text x="14" y="%.1f" transform="rotate(-90 14 %.1f)" text-anchor="middle">speed ratio</text>' % (
        head + height / 2, head + height / 2))
    for i, r in enumerate(rows):
        x0 = left + i * group + gap / 2
        for j, (k, _, colour) in enumerate(series):
            x = x0 + j * bar
            v = r.get(k)
            if v:
                s.append('<rect x="%.1f" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s %s: %.2f</title>'
                         '</rect>' % (x, y(v), bar - 2, y(0) - y(v), colour, _esc(r["net"]), k, v))
                s.append('<text x="%.1f" y="%.1f" text-anchor="middle" font-size="9">%.2f</text>' % (
                    x + (bar - 2) / 2, y(v) - 3, v))
            else:
                s.append('<text x="%.1f" y="%.1f" text-anchor="middle" font-size="9" fill="#c00">%s</text>' % (
                    x + (bar - 2) / 2, y(0) - 3, "fail" if r.get("hfuse_error") else "n/a"))
        cx = x0 + bar * len(series) / 2
        s.append('<text x="%.1f" y="%.1f" text-anchor="end" transform="rotate(-40 %.1f %.1f)">%s</text>' % (
            cx, y(0) + 14, cx, y(0) + 14, _esc(r["net"])))
    s.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#333"/>' % (left, width - right, y(0), y(0)))
    s.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#c00" stroke-dasharray="6 4" stroke-width="1.5"/>' % (
        left, width - right, y(1), y(1)))
    s.append('</svg>')
    return "\n".join(s) + "\n"


def _esc(t):
    return str(t).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# ---- main ---------------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hfuse", default=os.path.join(ROOT, "build", "bin", "hfuse"))
    ap.add_argument("--node", default="node", help="the Node.js binary for bench/ort_peer.js")
    ap.add_argument("--dir", default=DEFAULT_DIR,
                    help="the networks: tools/make_dev_networks.py's --out (default build/dev_networks)")
    ap.add_argument("--nets", default="", help="comma-separated subset of the manifest's networks (default: all)")
    ap.add_argument("--threads", type=int, default=2, help="threads for all three (default %(default)s)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds (default %(default)s; 0: check only)")
    ap.add_argument("--runs", type=int, default=0, help="timed runs per measurement (default: about --budget s, >= 5)")
    ap.add_argument("--budget", type=float, default=1.5, help="seconds per measurement for the automatic --runs")
    ap.add_argument("--warmup", type=int, default=3, help="ORT and PyTorch runs before timing (hfuse bench: one)")
    ap.add_argument("--plan-args", default="", help="plan flags for hfuse run and bench, e.g. '--rules FILE'")
    ap.add_argument("--measure-undecided", action="store_true",
                    help="plan each network once with hfuse plan --measure-undecided (and --plan-args), then run "
                         "and time that plan file")
    ap.add_argument("--work", default=None, help="directory for output files (default: a temporary one)")
    ap.add_argument("--md", help="write the Markdown table here")
    ap.add_argument("--json", help="write every figure (per round too) here")
    ap.add_argument("--svg", help="write a bar chart of the speed ratios here")
    a = ap.parse_args()
    global np, torch, make_dev_networks
    import numpy as np
    import torch
    import make_dev_networks
    a.plan = shlex.split(a.plan_args)

    manifest_path = os.path.join(a.dir, "manifest.json")
    if not os.path.exists(manifest_path):
        ap.error("no %s: run /usr/bin/python3 tools/make_dev_networks.py first" % manifest_path)
    with open(manifest_path) as f:
        manifest = {n["name"]: n for n in json.load(f)["networks"]}
    names = [n for n in a.nets.split(",") if n] if a.nets else list(manifest)
    unknown = [n for n in names if n not in manifest]
    if unknown:
        ap.error("not in %s: %s (have: %s)" % (manifest_path, ", ".join(unknown), ", ".join(manifest)))
    if not os.access(a.hfuse, os.X_OK):
        ap.error("no hfuse binary at %s (--hfuse)" % a.hfuse)
    if not os.path.isdir(os.path.join(ROOT, "bench", "node_modules", "onnxruntime-node")):
        ap.error("no bench/node_modules/onnxruntime-node: run tools/install_deps.sh --peers")
    torch.set_num_threads(a.threads)
    work = a.work or tempfile.mkdtemp(prefix="hfuse_dev_networks_")
    os.makedirs(work, exist_ok=True)
    load_start = os.getloadavg()
    ver = versions(a)
    ok = True

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    # 1. Check every network: hfuse, ORT, PyTorch frozen against PyTorch's eager output.
    rows, nets = [], {}
    for name in names:
        m = manifest[name]
        net = {"onnx": os.path.join(a.dir, m["onnx"]), "input": os.path.join(a.dir, m["input"]),
               "want": read_f32(os.path.join(a.dir, m["torch_output"]))}
        nets[name] = net
        r = {"net": name, "torchvision_model": m["torchvision_model"], "batch": m["batch"],
             "input_shape": m["input_shape"], "output_max_abs": m["output_max_abs"],
             "hfuse_ms_rounds": [], "hfuse_min_ms_rounds": [], "ort_ms_rounds": [], "ort_min_ms_rounds": [],
             "torch_ms_rounds": [], "torch_min_ms_rounds": [], "load_average_rounds": []}
        rows.append(r)
        net["plan"] = a.plan
        if a.measure_undecided:
            # Once per network: run and bench then take the plan file, measured decisions and all.
            plan_file = os.path.join(work, name + ".plan.json")
            t0 = time.time()
            try:
                run_cmd([a.hfuse, "plan", net["onnx"], "--measure-undecided", "-o", plan_file, "--threads",
                         str(a.threads)] + a.plan)
                net["plan"] = ["--plan", plan_file]
                with open(plan_file) as f:
                    whys = [g.get("why", "") for g in json.load(f)["groups"]]
                r["undecided_split"] = sum("split from" in w for w in whys) // 2
                r["undecided_kept"] = sum("kept as one" in w for w in whys)
                log("%s: measured undecided merges in %.1f s: %d split, %d kept as one" % (
                    name, time.time() - t0, r["undecided_split"], r["undecided_kept"]))
            except Failed as e:
                r["measure_error"], ok = e.line, False
                log("%s: hfuse plan --measure-undecided failed: %s" % (name, e.text.strip()))
        t0 = time.time()
        try:
            r["hfuse_rel_err"] = hfuse_check(a, net, os.path.join(work, name + ".hfuse.f32"))
            r["hfuse_match"] = r["hfuse_rel_err"] <= TOLERANCE
            r["hfuse_run_s"] = time.time() - t0
            log("%s: hfuse run: relative error %.2e (%s), %.1f s" % (
                name, r["hfuse_rel_err"], "ok" if r["hfuse_match"] else "MISMATCH", r["hfuse_run_s"]))
        except Failed as e:
            r["hfuse_error"], r["hfuse_error_text"], r["hfuse_match"] = e.line, e.text, False
            log("%s: hfuse run failed: %s" % (name, e.text.strip()))
        ok = ok and r["hfuse_match"]
        try:
            o = ort_run(a, net, 3, 1, os.path.join(work, name + ".ort.f32"))
            r["ort_rel_err"] = rel_error(read_f32(os.path.join(work, name + ".ort.f32")), net["want"])
            r["ort_match"] = r["ort_rel_err"] <= TOLERANCE
            r["ort_check_ms"] = o["median_ms"]
            ver["onnxruntime"] = o["ort_version"]
            log("%s: ORT: relative error %.2e (%s), %.2f ms" % (
                name, r["ort_rel_err"], "ok" if r["ort_match"] else "MISMATCH", o["median_ms"]))
        except Failed as e:
            r["ort_error"], r["ort_match"] = e.line, False
            log("%s: ORT failed: %s" % (name, e.text.strip()))
        ok = ok and r["ort_match"]
        try:
            frozen, x, mode, why = torch_frozen(name)
            r["torch_mode"], r["torch_script_error"] = mode, why
            with torch.no_grad():
                y = frozen(x)
            if isinstance(y, tuple):  # scripted inception_v3 returns InceptionOutputs(logits, aux=None)
                y = y[0]
            r["torch_frozen_rel_err"] = rel_error(y.detach().contiguous().numpy().reshape(-1), net["want"])
            r["torch_match"] = r["torch_frozen_rel_err"] <= TOLERANCE
            net["frozen"], net["x"] = frozen, x
            log("%s: PyTorch frozen (%s%s): relative error %.2e (%s)" % (
                name, mode, ", script failed: " + why if why else "", r["torch_frozen_rel_err"],
                "ok" if r["torch_match"] else "MISMATCH"))
        except Exception as e:  # noqa: BLE001
            r["torch_error"], r["torch_match"] = (str(e).strip().splitlines() or [type(e).__name__])[0], False
            log("%s: PyTorch frozen failed: %s" % (name, e))
        ok = ok and r["torch_match"]
        per_ms = r.get("ort_check_ms") or r.get("hfuse_run_s", 1.0) * 1e3 / 10
        r["runs"] = a.runs or max(5, min(2000, int(math.ceil(a.budget * 1e3 / max(per_ms, 1e-3)))))

    # 2. Time, interleaved: per round, every network: hfuse bench, ORT, PyTorch frozen.
    for rnd in range(a.rounds):
        for r in rows:
            name, net, n = r["net"], nets[r["net"]], r["runs"]
            r["load_average_rounds"].append(os.getloadavg()[0])
            msg = []
            if not r.get("hfuse_error"):
                try:
                    b = hfuse_bench(a, net, n)
                    r["hfuse_ms_rounds"].append(b["median_ms"])
                    r["hfuse_min_ms_rounds"].append(b["min_ms"])
                    r.setdefault("compile_ms_rounds", []).append(b["compile_ms"])
                    r.update(groups=b["groups"], plan=b["plan"], schedule=b.get("schedule"),
                             fallback_groups=b.get("fallback_groups", []),
                             group_compile_max_ms=b.get("group_compile_max_ms"),
                             group_compile_max=b.get("group_compile_max"),
                             intermediate_bytes=b.get("intermediate_bytes"))
                    msg.append("hfuse %s ms (compile %.1f s)" % (fmt_ms(b["median_ms"]), b["compile_ms"] / 1e3))
                except Failed as e:
                    r["hfuse_error"], r["hfuse_error_text"] = e.line, e.text
                    ok = False
                    msg.append("hfuse bench failed: %s" % e.line)
            if not r.get("ort_error"):
                try:
                    o = ort_run(a, net, n, a.warmup)
                    r["ort_ms_rounds"].append(o["median_ms"])
                    r["ort_min_ms_rounds"].append(o["min_ms"])
                    msg.append("ORT %s ms" % fmt_ms(o["median_ms"]))
                except Failed as e:
                    r["ort_error"] = e.line
                    ok = False
                    msg.append("ORT failed: %s" % e.line)
            if "frozen" in net:
                t_med, t_min = time_torch(net["frozen"], net["x"], n, a.warmup)
                r["torch_ms_rounds"].append(t_med)
                r["torch_min_ms_rounds"].append(t_min)
                msg.append("PyTorch frozen %s ms" % fmt_ms(t_med))
                time.sleep(0.5)  # let PyTorch's OpenMP workers stop spinning before the next process starts
            log("round %d: %s (%d runs): %s" % (rnd + 1, name, n, ", ".join(msg)))

    for r in rows:
        for k in ("hfuse", "ort", "torch"):
            r[k + "_ms"], r[k + "_ms_min"], r[k + "_ms_max"] = median_range(r[k + "_ms_rounds"])
        r["compile_ms"] = statistics.median(r["compile_ms_rounds"]) if r.get("compile_ms_rounds") else None
        h = r["hfuse_ms"] if not r.get("hfuse_error") else None
        r["ratio_ort"] = r["ort_ms"] / h if h and r["ort_ms"] else None
        # Only where both ran in every round, so that the ratios pair times of one round.
        both = len(r["hfuse_ms_rounds"]) == len(r["ort_ms_rounds"]) and not r.get("hfuse_error")
        r["ratio_ort_rounds"] = [o / t for t, o in zip(r["hfuse_ms_rounds"], r["ort_ms_rounds"])] if both else []
        r["ratio_ort_per_round"] = statistics.median(r["ratio_ort_rounds"]) if r["ratio_ort_rounds"] else None
        r["ratio_torch"] = r["torch_ms"] / h if h and r["torch_ms"] else None

    # 3. Report.
    load_end = os.getloadavg()
    plan_args = a.plan + (["--measure-undecided"] if a.measure_undecided else [])
    meta = {"threads": a.threads, "rounds": a.rounds, "plan_args": plan_args, "tolerance": TOLERANCE,
            "cpu": cpu_info(), "load_average_start": load_start, "load_average_end": load_end,
            "versions": ver, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "hfuse": os.path.abspath(a.hfuse),
            "dir": os.path.abspath(a.dir), "budget_s": a.budget, "warmup": a.warmup,
            "geomean_ratio_ort": geomean([r["ratio_ort"] for r in rows]),
            "geomean_ratio_ort_per_round": geomean([r["ratio_ort_per_round"] for r in rows]),
            "geomean_ratio_torch": geomean([r["ratio_torch"] for r in rows])}
    md = markdown(rows, meta)
    print(md, end="")
    if a.md:
        with open(a.md, "w") as f:
            f.write(md)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(meta, ok=ok, networks=rows), f, indent=1)
    if a.svg:
        with open(a.svg, "w") as f:
            f.write(svg_chart(rows, meta))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
