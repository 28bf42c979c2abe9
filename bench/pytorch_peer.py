#!/usr/bin/python3
"""hfuse against PyTorch frozen on the bench workloads (issue 6: every conv workload >= 1.5x faster
than PyTorch frozen, the RNN and LSTM cells >= 3x), side by side in one run at one thread count.

Workloads: every model in models/ (conv_bn_relu, conv3x3_bn_relu, conv_bias_relu_maxpool,
resnet_block, dwconv_bn_relu, rnn_cell, lstm_cell, mlp_softmax) and in bench/models/
(mobilenet_v2_block and the batch-8 variants *_b8). Each JSON model is turned into a torch module by a
small interpreter (each node's op mapped to torch.nn.functional; weights materialised exactly as hfuse
does: "uniform" + "seed" through tools/hfuse_weights.py's generator, "values", "file"), traced, then
torch.jit.freeze + torch.jit.optimize_for_inference (as tools/onnx_acceptance.py does), with
torch.set_num_threads(T). Inputs are hfuse's generated ones (input i: uniform [-1, 1], seed 1000 + i,
as `hfuse run`/`hfuse bench` make them without --input), so both sides compute the same numbers.

1. Correctness first: `hfuse run MODEL --output NAME=FILE ... --threads T` (default plan) against the
   frozen module's output: max abs diff <= 1e-4 * max(1, max |output|), per output. A mismatch is
   reported and makes the exit status 1 (its timings are still reported, marked). `--perturb WEIGHT`
   changes one value of a weight on the PyTorch side only, to see the check fail.
2. Timing, interleaved in rounds (--rounds R): per round and workload, the frozen module (median of N
   calls from Python after warm-up, under torch.no_grad) and then `hfuse bench MODEL --runs N --json
   --threads T` (its median_ms: N runs of Executor::run after one warm-up, in a new process that
   JIT-compiles the plan first). N is --runs, or by default chosen per workload from PyTorch's time so
   one side takes about --budget seconds. Each column is the median over rounds; speedup = PyTorch
   frozen / hfuse. Both include each side's per-call overhead (the TorchScript interpreter called from
   Python; hfuse's executor called from C++).

Targets (issue 6): 1.5x for every workload with a Conv, 3x for rnn_cell and lstm_cell, none for
mlp_softmax. Prints a Markdown table; --json OUT writes every figure (per round too). --rounds 0 only
checks. Time on a quiet machine: with other work running (1-minute load average above 1 at start, said
in a warning) PyTorch's OpenMP threads stall whenever one is preempted and its figures mean little.

    /usr/bin/python3 bench/pytorch_peer.py [--hfuse build/bin/hfuse] [--threads 2] [--rounds 5]
        [--runs N] [--models conv_bn_relu,rnn_cell] [--json out.json] [--plan-args '--rules x86']

Exit status: 0 when every workload matched PyTorch (and, with --require-targets, met its target);
1 on a mismatch, a workload that cannot be mapped or run, or (with --require-targets) a missed target.
"""
import argparse
import glob
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F

warnings.filterwarnings("ignore")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from hfuse_weights import uniform_values  # noqa: E402  (hfuse's generator, bit for bit)

CELL_TARGETS = {"rnn_cell": 3.0, "lstm_cell": 3.0}
CONV_TARGET = 1.5
TOLERANCE = 1e-4
LOADED = 1.0  # a 1-minute load average above this at start: other work is running, figures are provisional


class Unmapped(Exception):
    """A model this script cannot express in torch (an op or attribute it does not map)."""


# ---- the model format: weights and inputs -------------------------------------------------------------------


def uniform_array(count, lo, hi, seed):
    """hfuse's SplitMix64 uniform values as a float32 array: a vectorised port of tools/hfuse_weights.py
    (the Python loop takes seconds for the batch-8 inputs), checked against uniform_values on a prefix."""
    i = np.arange(1, count + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = np.uint64(seed & (2**64 - 1)) + i * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float64) * (1.0 / 16777216.0)
    lo, hi = float(lo), float(hi)
    out = (lo + (hi - lo) * u).astype(np.float32)
    n = min(count, 257)
    ref = np.array(uniform_values(n, lo, hi, seed), dtype=np.float32)
    if not np.array_equal(out[:n], ref):
        raise AssertionError("vectorised generator differs from tools/hfuse_weights.py (seed %d)" % seed)
    return out


def load_weight(name, w, base_dir):
    shape = list(w["shape"])
    count = math.prod(shape)
    dtype = w.get("dtype", "float32")
    if dtype not in ("float32", "int64"):
        raise Unmapped("weight '%s': dtype %s" % (name, dtype))
    np_dtype = np.int64 if dtype == "int64" else np.float32
    if "file" in w:
        path = w["file"] if os.path.isabs(w["file"]) else os.path.join(base_dir, w["file"])
        a = np.fromfile(path, dtype="<i8" if dtype == "int64" else "<f4")
        if a.size != count:
            raise Unmapped("weight '%s': %s has %d values, shape %s needs %d" % (name, path, a.size, shape, count))
    elif "values" in w:
        a = np.array(w["values"], dtype=np_dtype)
    elif "uniform" in w:
        lo, hi = w["uniform"]
        a = uniform_array(count, lo, hi, int(w["seed"]))
    else:
        raise Unmapped("weight '%s' has no file, values or uniform" % name)
    return a.astype(np_dtype).reshape(shape)


def default_inputs(model):
    """The inputs `hfuse run`/`hfuse bench` generate without --input (tools/hfuse/cli_common.*):
    input i is uniform [-1, 1] with seed 1000 + i."""
    return [torch.from_numpy(uniform_array(math.prod(i["shape"]), -1.0, 1.0, 1000 + k).reshape(i["shape"]))
            for k, i in enumerate(model["inputs"])]


# ---- the interpreter: hfuse JSON (ONNX semantics) to torch ------------------------------------------------------


def _ints(attrs, key, default):
    return [int(v) for v in attrs.get(key, default)]


def _spatial_pads(attrs, x, kernel, strides, dilations):
    """ONNX pads [b0, b1, ..., e0, e1, ...] (or auto_pad) as (begins, ends)."""
    n = len(kernel)
    auto = attrs.get("auto_pad", "NOTSET")
    if auto == "NOTSET":
        pads = _ints(attrs, "pads", [0] * (2 * n))
        return pads[:n], pads[n:]
    if auto == "VALID":
        return [0] * n, [0] * n
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise Unmapped("auto_pad %s" % auto)
    begins, ends = [], []
    for d in range(n):
        size = x.shape[2 + d]
        total = max(0, (-(-size // strides[d]) - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1 - size)
        b = total // 2 if auto == "SAME_UPPER" else total - total // 2
        begins.append(b)
        ends.append(total - b)
    return begins, ends


def _pad_arg(begins, ends):
    """F.pad's argument (last dim first) for ONNX begin/end pads."""
    out = []
    for b, e in zip(reversed(begins), reversed(ends)):
        out += [b, e]
    return out


def op_conv(x, w, b=None, attrs=None):
    n = x.dim() - 2
    if n not in (1, 2, 3):
        raise Unmapped("Conv with %d spatial dims" % n)
    kernel = list(w.shape[2:])
    strides = _ints(attrs, "strides", [1] * n)
    dilations = _ints(attrs, "dilations", [1] * n)
    begins, ends = _spatial_pads(attrs, x, kernel, strides, dilations)
    if begins != ends:
        x = F.pad(x, _pad_arg(begins, ends))
        begins = [0] * n
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[n]
    return conv(x, w, b, strides, begins, dilations, int(attrs.get("group", 1)))


def op_pool(kind, x, attrs):
    n = x.dim() - 2
    if n != 2:
        raise Unmapped("%s with %d spatial dims" % (kind, n))
    kernel = _ints(attrs, "kernel_shape", [])
    strides = _ints(attrs, "strides", [1] * n)
    dilations = _ints(attrs, "dilations", [1] * n)
    ceil = bool(attrs.get("ceil_mode", 0))
    begins, ends = _spatial_pads(attrs, x, kernel, strides, dilations)
    if kind == "MaxPool":
        if begins != ends or any(b > k // 2 for b, k in zip(begins, kernel)):
            x = F.pad(x, _pad_arg(begins, ends), value=-math.inf)
            begins = [0] * n
        return F.max_pool2d(x, kernel, strides, begins, dilations, ceil_mode=ceil)
    if dilations != [1] * n:
        raise Unmapped("AveragePool with dilations")
    if begins != ends:
        raise Unmapped("AveragePool with asymmetric pads")
    return F.avg_pool2d(x, kernel, strides, begins, ceil_mode=ceil,
                        count_include_pad=bool(attrs.get("count_include_pad", 0)))


def op_gemm(a, b, c=None, attrs=None):
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if attrs.get("transA", 0):
        a = a.t()
    if attrs.get("transB", 0) and alpha == 1.0 and (c is None or (beta == 1.0 and c.dim() <= 1)):
        return F.linear(a, b, c)  # what nn.Linear runs (and what the frozen-graph passes know)
    y = a @ (b.t() if attrs.get("transB", 0) else b)
    if alpha != 1.0:
        y = y * alpha
    if c is not None and beta != 0.0:
        y = y + (c if beta == 1.0 else c * beta)
    return y


def op_slice(x, starts, ends, axes=None, steps=None):
    """ONNX Slice with constant operands: negative starts/ends count from the end, then clamp."""
    starts, ends = starts.tolist(), ends.tolist()
    axes = list(range(len(starts))) if axes is None else axes.tolist()
    steps = [1] * len(starts) if steps is None else steps.tolist()
    for s, e, a, st in zip(starts, ends, axes, steps):
        a %= x.dim()
        d = x.shape[a]
        if st <= 0:
            raise Unmapped("Slice with step %d" % st)
        s, e = min(max(s + d if s < 0 else s, 0), d), min(max(e + d if e < 0 else e, 0), d)
        if st == 1:
            x = x.narrow(a, s, max(0, e - s))
        else:
            index = [slice(None)] * x.dim()
            index[a] = slice(s, e, st)
            x = x[tuple(index)]
    return x


def op_reshape(x, shape, attrs):
    shape = shape.tolist()
    if not attrs.get("allowzero", 0):
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return x.reshape(shape)


def op_flatten(x, attrs):
    axis = int(attrs.get("axis", 1))
    axis = axis + x.dim() if axis < 0 else axis
    if axis == 0:
        return x.reshape(1, -1)
    if axis == x.dim():
        return x.reshape(-1, 1)
    if axis == 1:
        return x.flatten(1)
    return x.flatten(axis).flatten(0, axis - 1)


def op_clip(x, lo=None, hi=None):
    lo = None if lo is None else float(lo)
    hi = None if hi is None else float(hi)
    if lo is not None and hi is not None:
        return F.hardtanh(x, lo, hi)  # ReLU6 is hardtanh(0, 6) in torch
    return torch.clamp(x, lo, hi)


def run_node(op, args, attrs):
    """One node: `args` are tensors (weights as tensors too; None for an input left out)."""
    a = attrs
    if op == "Conv":
        return op_conv(args[0], args[1], args[2] if len(args) > 2 else None, a)
    if op == "BatchNormalization":
        x, scale, bias, mean, var = args
        return F.batch_norm(x, mean, var, scale, bias, False, 0.0, float(a.get("epsilon", 1e-5)))
    if op in ("MaxPool", "AveragePool"):
        return op_pool(op, args[0], a)
    if op == "GlobalAveragePool":
        return args[0].mean(dim=list(range(2, args[0].dim())), keepdim=True)
    if op == "GlobalMaxPool":
        return torch.amax(args[0], dim=list(range(2, args[0].dim())), keepdim=True)
    if op == "Gemm":
        return op_gemm(args[0], args[1], args[2] if len(args) > 2 else None, a)
    if op == "MatMul":
        return torch.matmul(args[0], args[1])
    if op in ("Add", "Sub", "Mul", "Div"):
        return {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div}[op](args[0], args[1])
    if op == "Relu":
        return F.relu(args[0])
    if op == "LeakyRelu":
        return F.leaky_relu(args[0], float(a.get("alpha", 0.01)))
    if op == "Sigmoid":
        return torch.sigmoid(args[0])
    if op == "Tanh":
        return torch.tanh(args[0])
    if op == "HardSigmoid":
        return torch.clamp(args[0] * float(a.get("alpha", 0.2)) + float(a.get("beta", 0.5)), 0.0, 1.0)
    if op == "HardSwish":
        return F.hardswish(args[0])
    if op == "Clip":
        return op_clip(args[0], args[1] if len(args) > 1 else None, args[2] if len(args) > 2 else None)
    if op == "Softmax":
        return F.softmax(args[0], dim=int(a.get("axis", -1)))
    if op == "Flatten":
        return op_flatten(args[0], a)
    if op == "Reshape":
        return op_reshape(args[0], args[1], a)
    if op == "Transpose":
        perm = _ints(a, "perm", list(reversed(range(args[0].dim()))))
        return args[0].permute(perm)
    if op == "Concat":
        return torch.cat([t for t in args if t is not None], dim=int(a["axis"]))
    if op == "Slice":
        return op_slice(*[t for t in args])
    if op in ("Identity", "Dropout"):
        return args[0]
    if op == "ReduceMean":
        axes = _ints(a, "axes", list(range(args[0].dim())))
        return args[0].mean(dim=axes, keepdim=bool(a.get("keepdims", 1)))
    raise Unmapped("op %s" % op)


class JsonModel(torch.nn.Module):
    """An hfuse JSON model as a torch module. Float weights are buffers (frozen into constants by
    torch.jit.freeze); int64 weights (Slice's starts, Reshape's shape, ...) are Python values, baked into
    the trace as ONNX semantics want them constant."""

    def __init__(self, model, base_dir, perturb=None):
        super().__init__()
        self.inputs = [i["name"] for i in model["inputs"]]
        self.outputs = list(model["outputs"])
        self.nodes = model["nodes"]
        self.consts = {}
        self.float_names = {}
        for k, (name, w) in enumerate(model["weights"].items()):
            a = load_weight(name, w, base_dir)
            if name == perturb:
                if a.dtype != np.float32:
                    raise SystemExit("--perturb %s: not a float weight" % name)
                a = a.copy()
                a.reshape(-1)[0] += 0.01  # one value off by 1e-2: the check must see it
            if a.dtype == np.float32:
                self.float_names[name] = "w%d" % k
                self.register_buffer("w%d" % k, torch.from_numpy(a.copy()))
            else:
                self.consts[name] = torch.from_numpy(a.copy())
        known = set(self.inputs) | set(model["weights"])
        self.order = []  # nodes in topological order (the format allows any order)
        pending = list(self.nodes)
        while pending:
            ready = [n for n in pending if all(i == "" or i in known for i in n["inputs"])]
            if not ready:
                raise Unmapped("cycle or dangling input among %s" % [n["name"] for n in pending])
            for n in ready:
                self.order.append(n)
                known.update(n.get("outputs", [n["name"]]))
            pending = [n for n in pending if n not in ready]

    def forward(self, *xs):
        values = dict(zip(self.inputs, xs))
        for name, attr in self.float_names.items():
            values[name] = getattr(self, attr)
        values.update(self.consts)
        for n in self.order:
            args = [None if i == "" else values[i] for i in n["inputs"]]
            while args and args[-1] is None:
                args.pop()
            outs = n.get("outputs", [n["name"]])
            y = run_node(n["op"], args, n.get("attrs", {}))
            if len(outs) != 1:
                raise Unmapped("%s with %d outputs" % (n["op"], len(outs)))
            values[outs[0]] = y
        res = tuple(values[o] for o in self.outputs)
        return res[0] if len(res) == 1 else res


def frozen_module(model, base_dir, inputs, perturb=None):
    eager = JsonModel(model, base_dir, perturb).eval()
    with torch.no_grad():
        traced = torch.jit.trace(eager, tuple(inputs), check_trace=False)
        frozen = torch.jit.optimize_for_inference(torch.jit.freeze(traced))
    return eager, frozen


def as_tuple(y):
    return y if isinstance(y, tuple) else (y,)


# ---- running hfuse and timing ---------------------------------------------------------------------------------


def run_cmd(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        raise RuntimeError("failed (%d): %s\n%s" % (p.returncode, " ".join(map(shlex.quote, cmd)), p.stdout))
    return p.stdout


def hfuse_outputs(a, path, model, work):
    files = {o: os.path.join(work, "%s.%s.hfuse.f32" % (model["name"], o.replace("/", "_")))
             for o in model["outputs"]}
    cmd = [a.hfuse, "run", path, "--threads", str(a.threads)] + a.plan
    for o, f in files.items():
        cmd += ["--output", "%s=%s" % (o, f)]
    run_cmd(cmd)
    return {o: torch.from_numpy(np.fromfile(f, dtype="<f4")) for o, f in files.items()}


def compare(got, want):
    """Per output: max abs diff, scale (max |PyTorch output|), pass at 1e-4 * max(1, scale)."""
    rows = []
    for name, w in want.items():
        g, w = got[name], w.detach().reshape(-1).float()
        if g.numel() != w.numel():
            rows.append({"output": name, "max_abs_diff": math.inf, "scale": 0.0, "ok": False,
                         "note": "hfuse wrote %d values, PyTorch has %d" % (g.numel(), w.numel())})
            continue
        diff = (g - w).abs().max().item() if w.numel() else 0.0
        scale = w.abs().max().item() if w.numel() else 0.0
        ok = math.isfinite(diff) and diff <= TOLERANCE * max(1.0, scale)
        rows.append({"output": name, "max_abs_diff": diff, "scale": scale, "ok": ok})
    return rows


def time_torch(module, inputs, runs, warmup):
    with torch.no_grad():
        for _ in range(warmup):
            module(*inputs)
        ms = []
        for _ in range(runs):
            t0 = time.perf_counter()
            module(*inputs)
            ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms), min(ms)


def auto_runs(module, inputs, budget):
    """Runs so that one side takes about `budget` seconds per round, from PyTorch's time (5 to 5000)."""
    with torch.no_grad():
        for _ in range(3):
            module(*inputs)
        t0, n = time.perf_counter(), 0
        while n < 3 or (time.perf_counter() - t0 < 0.05 and n < 1000):
            module(*inputs)
            n += 1
        per = (time.perf_counter() - t0) / n
    return max(5, min(5000, int(budget / per)))


def hfuse_bench(a, path, runs):
    out = run_cmd([a.hfuse, "bench", path, "--runs", str(runs), "--json", "--threads", str(a.threads)] + a.plan)
    return json.loads(out.strip().splitlines()[-1])


# ---- workloads --------------------------------------------------------------------------------------------------


def workloads():
    """name -> path: hfuse models in models/ and bench/models/ (files that are not models are skipped)."""
    found = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "models", "*.json"))) + \
            sorted(glob.glob(os.path.join(ROOT, "bench", "models", "*.json"))):
        try:
            with open(path) as f:
                m = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(m, dict) and m.get("format") == "hfuse-model":
            found[os.path.splitext(os.path.basename(path))[0]] = path
    return found


def target_of(name, model):
    if name in CELL_TARGETS:
        return CELL_TARGETS[name]
    if any(n["op"] == "Conv" for n in model["nodes"]):
        return CONV_TARGET
    return None


def fmt_ms(ms):
    if ms is None:
        return "-"
    return "%.2f us" % (ms * 1e3) if ms < 0.1 else "%.3f ms" % ms if ms < 10 else "%.1f ms" % ms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hfuse", default=os.path.join(ROOT, "build", "bin", "hfuse"),
                    help="the hfuse binary (default: build/bin/hfuse of this checkout)")
    ap.add_argument("--models", default="", help="comma-separated workload names (default: all); --list shows them")
    ap.add_argument("--list", action="store_true", help="list the workloads and exit")
    ap.add_argument("--threads", type=int, default=os.cpu_count(),
                    help="threads for both: hfuse --threads, torch.set_num_threads (default: every core, %(default)s)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default %(default)s)")
    ap.add_argument("--runs", type=int, default=0,
                    help="timed runs per side, round and workload (default: about --budget seconds of PyTorch)")
    ap.add_argument("--budget", type=float, default=0.2, help="seconds per side and round for the automatic --runs")
    ap.add_argument("--warmup", type=int, default=10, help="PyTorch calls before timing (default %(default)s)")
    ap.add_argument("--plan-args", default="", help="plan flags for hfuse run and bench, e.g. '--rules tvm'")
    ap.add_argument("--json", help="write every figure (per round too) to this file")
    ap.add_argument("--work", default=None, help="directory for hfuse's output files (default: a temporary one)")
    ap.add_argument("--perturb", metavar="WEIGHT",
                    help="add 1e-2 to the first value of this weight on the PyTorch side, in every selected "
                         "workload that has it (its check must then fail)")
    ap.add_argument("--require-targets", action="store_true", help="exit status 1 when a target is not met")
    a = ap.parse_args()
    a.plan = shlex.split(a.plan_args)

    available = workloads()
    if a.list:
        for name, path in available.items():
            print(name, os.path.relpath(path, ROOT))
        return 0
    names = [n for n in a.models.split(",") if n] if a.models else list(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        ap.error("unknown workloads %s (have: %s)" % (", ".join(unknown), ", ".join(available)))
    if a.perturb:
        has = [n for n in names if a.perturb in json.load(open(available[n]))["weights"]]
        if not has:
            ap.error("--perturb: no selected workload has a weight '%s'" % a.perturb)
    if not os.access(a.hfuse, os.X_OK):
        ap.error("no hfuse binary at %s (--hfuse)" % a.hfuse)
    torch.set_num_threads(a.threads)
    work = a.work or tempfile.mkdtemp(prefix="hfuse_pytorch_peer_")
    os.makedirs(work, exist_ok=True)
    load_start = os.getloadavg()

    # 1. Build and check every workload.
    rows, ok = [], True
    for name in names:
        path = available[name]
        with open(path) as f:
            model = json.load(f)
        row = {"workload": name, "model": os.path.relpath(path, ROOT), "target": target_of(name, model),
               "hfuse_ms_rounds": [], "torch_ms_rounds": [], "hfuse_min_ms_rounds": [], "torch_min_ms_rounds": []}
        rows.append(row)
        try:
            inputs = default_inputs(model)
            eager, frozen = frozen_module(model, os.path.dirname(path), inputs, a.perturb)
            with torch.no_grad():
                want = dict(zip(model["outputs"], as_tuple(frozen(*inputs))))
                want_eager = dict(zip(model["outputs"], as_tuple(eager(*inputs))))
            got = hfuse_outputs(a, path, model, work)
        except Unmapped as e:
            row.update(status="not mapped", error=str(e))
            print("%s: cannot map to torch: %s" % (name, e), file=sys.stderr)
            ok = False
            continue
        except RuntimeError as e:
            row.update(status="hfuse failed" if str(e).startswith("failed (") else "torch failed", error=str(e))
            print("%s: %s" % (name, e), file=sys.stderr)
            ok = False
            continue
        row["check"] = compare(got, want)
        row["check_eager"] = compare(got, want_eager)
        row["match"] = all(c["ok"] for c in row["check"])
        row["status"] = "ok" if row["match"] else "MISMATCH"
        ok = ok and row["match"]
        for c in row["check"]:
            print("%s: output %s: max abs diff %.3g at scale %.3g (limit %.3g): %s" % (
                name, c["output"], c["max_abs_diff"], c["scale"], TOLERANCE * max(1.0, c["scale"]),
                "ok" if c["ok"] else "MISMATCH"), file=sys.stderr, flush=True)
        if a.rounds > 0:
            row["runs"] = a.runs or auto_runs(frozen, inputs, a.budget)
            row["_module"], row["_inputs"] = frozen, inputs
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)

    # 2. Time, interleaved: per round, every workload: PyTorch frozen, then hfuse bench.
    timed = [r for r in rows if "_module" in r]
    for rnd in range(a.rounds):
        for r in timed:
            path = available[r["workload"]]
            try:
                t_med, t_min = time_torch(r["_module"], r["_inputs"], r["runs"], a.warmup)
                b = hfuse_bench(a, path, r["runs"])
            except RuntimeError as e:
                r.update(status="hfuse failed", error=str(e))
                print("%s: %s" % (r["workload"], e), file=sys.stderr)
                ok = False
                continue
            r["torch_ms_rounds"].append(t_med)
            r["torch_min_ms_rounds"].append(t_min)
            r["hfuse_ms_rounds"].append(b["median_ms"])
            r["hfuse_min_ms_rounds"].append(b["min_ms"])
            r.update(groups=b["groups"], plan=b["plan"], hfuse_compile_ms=b["compile_ms"],
                     group_compile_max_ms=b.get("group_compile_max_ms", 0.0),
                     fallback_groups=b.get("fallback_groups", []))
            print("round %d: %s: hfuse %s, PyTorch frozen %s (%d runs)" % (
                rnd + 1, r["workload"], fmt_ms(b["median_ms"]), fmt_ms(r["torch_ms_rounds"][-1]), r["runs"]),
                file=sys.stderr, flush=True)
    for r in rows:
        r.pop("_module", None)
        r.pop("_inputs", None)
        hs, ts = r["hfuse_ms_rounds"], r["torch_ms_rounds"]
        n = min(len(hs), len(ts))
        r["hfuse_ms"] = statistics.median(hs) if hs else None
        r["torch_frozen_ms"] = statistics.median(ts) if ts else None
        r["speedup"] = r["torch_frozen_ms"] / r["hfuse_ms"] if hs and ts else None
        r["speedup_rounds"] = [t / h for h, t in zip(hs[:n], ts[:n])]
        r["met"] = None if r["target"] is None or r["speedup"] is None else r["speedup"] >= r["target"]
        if a.require_targets and r["met"] is False:
            ok = False

    # 3. Report.
    print("| workload | hfuse | groups | PyTorch frozen | speedup | per round | target | met | check (max diff / scale) |")
    print("| --- | ---: | ---: | ---: | ---: | --- | ---: | --- | --- |")
    for r in rows:
        if "check" in r:
            worst = max(r["check"], key=lambda c: c["max_abs_diff"] / max(1.0, c["scale"]))
            check = "%s %.1e / %.3g" % ("ok" if r["match"] else "**MISMATCH**", worst["max_abs_diff"], worst["scale"])
        else:
            check = "**%s**: %s" % (r["status"], r.get("error", "").splitlines()[0][:80])
        target = "-" if r["target"] is None else "%.1fx" % r["target"]
        met = "-" if r["met"] is None else ("yes" if r["met"] else "**no**")
        per = ", ".join("%.2f" % s for s in r["speedup_rounds"]) or "-"
        speed = "-" if r["speedup"] is None else "%.2fx" % r["speedup"]
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["workload"], fmt_ms(r["hfuse_ms"]), r.get("groups", "-"), fmt_ms(r["torch_frozen_ms"]), speed, per,
            target, met, check))
    load_end = os.getloadavg()
    loaded = load_start[0] > LOADED
    if loaded:
        print("\nWARNING: load average %.2f at start (%d cores): other work was running, so these figures are "
              "provisional. PyTorch's OpenMP threads stall whenever one is preempted (its conv timings then come out "
              "near multiples of 4 ms), which inflates its side far more than hfuse's." % (
                  load_start[0], os.cpu_count()))
    print("\nthreads %d, %d rounds (each cell the median over rounds of a median of N runs; N per workload in the "
          "JSON), hfuse plan %s; torch %s (frozen + optimize_for_inference); speedup = PyTorch frozen / hfuse; "
          "load average %.2f at start, %.2f at end" % (
              a.threads, a.rounds, " ".join(a.plan) or "x86 (default)", torch.__version__, load_start[0],
              load_end[0]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"threads": a.threads, "rounds": a.rounds, "plan_args": a.plan, "torch": torch.__version__,
                       "hfuse": os.path.abspath(a.hfuse), "load_average_start": load_start,
                       "load_average_end": load_end, "loaded": loaded, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                       "tolerance": TOLERANCE, "workloads": rows}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
