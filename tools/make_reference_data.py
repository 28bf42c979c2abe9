#!/usr/bin/env python3
"""Writes tests/data/torch_reference.json: single-op cases whose expected outputs come from PyTorch.

tests/unit/reference_test.cpp runs every case through hfuse::reference::eval_node, so the reference
evaluator (which every Halide executor is tested against) is itself checked against an independent
implementation. Needs torch (Debian's python3-torch: `/usr/bin/python3 tools/make_reference_data.py`).

Each case is {op, attrs, inputs: [{shape, dtype, is_weight, data} | null], outputs: [{shape, data}]},
attrs in ONNX naming (opset 13), null marking an optional input that is left out. Inputs are float32
values from hfuse's own generator (tools/hfuse_weights.py); torch computes in float64 on them and the
results are rounded to float32 once, so the expected values are within half an ulp of exact.
"""

import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfuse_weights import uniform_values  # noqa: E402

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
OUT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "torch_reference.json")

CASES = []
_next_seed = [100]


def rand(*shape, lo=-1.0, hi=1.0):
    """A float64 tensor holding float32 values from hfuse's generator (a fresh seed per call)."""
    _next_seed[0] += 1
    values = uniform_values(math.prod(shape), lo, hi, _next_seed[0])
    return torch.tensor(values, dtype=torch.float64).reshape(shape)


def act(t):
    return {"tensor": t, "weight": False}


def weight(t):
    return {"tensor": t, "weight": True}


def ints(*values):
    return {"ints": list(values)}


def _f32(values):
    # 9 significant digits identify a float32 exactly; short text keeps the file small.
    return [float("%.9g" % v) for v in values]


def _input(spec):
    if spec is None:
        return None
    if "ints" in spec:
        return {"shape": [len(spec["ints"])], "dtype": "int64", "is_weight": True, "data": spec["ints"]}
    t = spec["tensor"]
    return {"shape": list(t.shape), "dtype": "float32", "is_weight": spec["weight"],
            "data": _f32(t.reshape(-1).tolist())}


def case(op, attrs, inputs, outputs):
    if isinstance(outputs, torch.Tensor):
        outputs = [outputs]
    CASES.append({
        "op": op,
        "attrs": attrs,
        "inputs": [_input(s) for s in inputs],
        "outputs": [{"shape": list(o.shape), "data": _f32(o.to(torch.float32).reshape(-1).tolist())}
                    for o in outputs],
    })


def torch_pads(onnx_pads):
    """ONNX pads [b_0..b_{n-1}, e_0..e_{n-1}] to F.pad's (b_last, e_last, ..., b_0, e_0)."""
    n = len(onnx_pads) // 2
    out = []
    for d in reversed(range(n)):
        out += [onnx_pads[d], onnx_pads[n + d]]
    return tuple(out)


def same_pads(in_sizes, kernel, strides, dilations, upper):
    """ONNX auto_pad SAME_UPPER / SAME_LOWER pads, as the spec defines them."""
    begins, ends = [], []
    for i, k, s, d in zip(in_sizes, kernel, strides, dilations):
        out = -(-i // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - i)
        b = total // 2 if upper else total - total // 2
        begins.append(b)
        ends.append(total - b)
    return begins + ends


# ---------------------------------------------------------------- Conv

def conv_cases():
    conv = {1: F.conv1d, 2: F.conv2d}

    def add(x_shape, w_shape, bias, pads=None, strides=None, dilations=None, group=1, extra=None):
        x, w = rand(*x_shape), rand(*w_shape, lo=-0.5, hi=0.5)
        b = rand(w_shape[0]) if bias else None
        ns = len(x_shape) - 2
        strides = strides or [1] * ns
        dilations = dilations or [1] * ns
        pads = pads or [0] * (2 * ns)
        attrs = {"kernel_shape": list(w_shape[2:]), "strides": strides, "dilations": dilations, "group": group}
        attrs.update(extra or {"pads": pads})
        y = conv[ns](F.pad(x, torch_pads(pads)), w, b, stride=strides, dilation=dilations, groups=group)
        inputs = [act(x), weight(w)] + ([weight(b)] if bias else [])
        case("Conv", attrs, inputs, y)

    add([1, 3, 7, 6], [4, 3, 3, 3], True, pads=[1, 1, 1, 1])
    add([2, 3, 9, 8], [5, 3, 3, 2], False, strides=[2, 2])
    add([1, 3, 6, 7], [4, 3, 3, 3], True, pads=[1, 0, 2, 1])  # asymmetric
    add([1, 2, 9, 9], [3, 2, 3, 3], True, pads=[2, 2, 2, 2], dilations=[2, 2])
    add([1, 2, 10, 9], [3, 2, 3, 2], False, pads=[0, 1, 1, 0], strides=[2, 3], dilations=[2, 1])
    add([1, 4, 6, 6], [6, 2, 3, 3], True, pads=[1, 1, 1, 1], group=2)
    add([1, 4, 8, 8], [4, 1, 3, 3], True, pads=[1, 1, 1, 1], strides=[2, 2], group=4)  # depthwise
    add([2, 4, 7, 5], [8, 1, 3, 3], False, pads=[1, 1, 1, 1], group=4)  # depthwise, multiplier 2
    add([1, 4, 5, 5], [8, 4, 1, 1], True)  # pointwise
    add([1, 3, 5, 8], [2, 3, 1, 3], True, pads=[0, 1, 0, 1], strides=[1, 2])
    add([2, 3, 10], [4, 3, 3], True, pads=[1, 2], strides=[2], dilations=[2])  # 1-D
    add([1, 4, 11], [4, 2, 3], False, pads=[1, 1], group=2)  # 1-D grouped

    # auto_pad: SAME_UPPER with an odd total pad goes through torch's own 'same' (extra pad at the end).
    x, w, b = rand(1, 2, 7, 6), rand(3, 2, 4, 4, lo=-0.5, hi=0.5), rand(3)
    case("Conv", {"kernel_shape": [4, 4], "auto_pad": "SAME_UPPER"}, [act(x), weight(w), weight(b)],
         F.conv2d(x, w, b, padding="same"))
    for mode in ["SAME_UPPER", "SAME_LOWER"]:
        x, w = rand(1, 2, 9, 8), rand(3, 2, 4, 3, lo=-0.5, hi=0.5)  # odd total pads: upper != lower
        pads = same_pads([9, 8], [4, 3], [2, 2], [1, 1], mode == "SAME_UPPER")
        case("Conv", {"kernel_shape": [4, 3], "strides": [2, 2], "auto_pad": mode}, [act(x), weight(w)],
             F.conv2d(F.pad(x, torch_pads(pads)), w, stride=2))
    x, w = rand(1, 2, 8, 7), rand(3, 2, 3, 3, lo=-0.5, hi=0.5)
    case("Conv", {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "VALID"}, [act(x), weight(w)],
         F.conv2d(x, w, stride=2))


# ---------------------------------------------------------------- pools

def pool_cases():
    max_pool = {1: F.max_pool1d, 2: F.max_pool2d}
    avg_pool = {1: F.avg_pool1d, 2: F.avg_pool2d}

    def attrs_of(kernel, strides, pads, ceil, dilations=None, **extra):
        a = {"kernel_shape": kernel, "strides": strides, "pads": pads, "ceil_mode": int(ceil)}
        if dilations:
            a["dilations"] = dilations
        a.update(extra)
        return a

    def maxp(x_shape, kernel, strides, pad=0, ceil=False, dilations=None):
        """Symmetric pads through torch's own padding (so ceil_mode uses torch's rule)."""
        x = rand(*x_shape)
        ns = len(kernel)
        y = max_pool[ns](x, kernel, strides, pad, dilation=dilations or 1, ceil_mode=ceil)
        case("MaxPool", attrs_of(kernel, strides, [pad] * 2 * ns, ceil, dilations), [act(x)], y)

    maxp([1, 2, 6, 6], [2, 2], [2, 2])
    maxp([2, 3, 7, 7], [3, 3], [2, 2], pad=1)
    maxp([1, 2, 8, 8], [3, 3], [2, 2], ceil=True)
    maxp([1, 2, 5, 6], [2, 2], [2, 2], pad=1, ceil=True)  # the last ceil window would start in the end pad
    maxp([1, 2, 7, 6], [3, 3], [1, 1], pad=1, dilations=[2, 2])
    maxp([1, 2, 9, 8], [3, 3], [2, 2], pad=1, ceil=True, dilations=[2, 2])
    maxp([1, 2, 6, 9], [2, 3], [1, 2])
    maxp([2, 3, 10], [3], [2], pad=1, ceil=True)  # 1-D

    # Asymmetric pads: pad with -inf explicitly (floor mode, where explicit padding is equivalent).
    for pads in ([0, 1, 1, 0], [1, 2, 0, 1]):
        x = rand(1, 2, 6, 7)
        y = F.max_pool2d(F.pad(x, torch_pads(pads), value=-math.inf), [3, 3], [2, 2])
        case("MaxPool", attrs_of([3, 3], [2, 2], pads, False), [act(x)], y)
    for mode in ["SAME_UPPER", "SAME_LOWER"]:
        x = rand(1, 2, 5, 7)
        pads = same_pads([5, 7], [2, 3], [1, 2], [1, 1], mode == "SAME_UPPER")
        y = F.max_pool2d(F.pad(x, torch_pads(pads), value=-math.inf), [2, 3], [1, 2])
        case("MaxPool", {"kernel_shape": [2, 3], "strides": [1, 2], "auto_pad": mode}, [act(x)], y)

    def avgp(x_shape, kernel, strides, pad=0, ceil=False, include=False):
        x = rand(*x_shape)
        ns = len(kernel)
        y = avg_pool[ns](x, kernel, strides, pad, ceil_mode=ceil, count_include_pad=include)
        case("AveragePool", attrs_of(kernel, strides, [pad] * 2 * ns, ceil, count_include_pad=int(include)),
             [act(x)], y)

    avgp([1, 2, 6, 6], [2, 2], [2, 2])
    avgp([2, 2, 5, 6], [3, 3], [1, 1], pad=1, include=False)
    avgp([2, 2, 5, 6], [3, 3], [1, 1], pad=1, include=True)
    avgp([1, 2, 6, 6], [3, 3], [2, 2], pad=1, ceil=True, include=True)  # partial windows past the end pad
    avgp([1, 2, 6, 6], [3, 3], [2, 2], pad=1, ceil=True, include=False)
    avgp([1, 2, 8, 7], [3, 2], [2, 2], ceil=True, include=True)
    avgp([1, 2, 5, 6], [2, 2], [2, 2], pad=1, ceil=True, include=True)
    avgp([2, 3, 9], [3], [2], pad=1, ceil=True, include=False)  # 1-D
    avgp([2, 3, 9], [4], [3], pad=2, ceil=True, include=True)

    # Asymmetric pads: sums and counts through explicit zero padding (floor mode).
    for pads in ([1, 0, 0, 1], [2, 1, 0, 2]):
        x = rand(1, 2, 6, 5)
        tp = torch_pads(pads)
        y_incl = F.avg_pool2d(F.pad(x, tp), [3, 3], [2, 1])
        case("AveragePool", attrs_of([3, 3], [2, 1], pads, False, count_include_pad=1), [act(x)], y_incl)
        x = rand(1, 2, 6, 5)
        sums = F.avg_pool2d(F.pad(x, tp), [3, 3], [2, 1], divisor_override=1)
        counts = F.avg_pool2d(F.pad(torch.ones_like(x), tp), [3, 3], [2, 1], divisor_override=1)
        case("AveragePool", attrs_of([3, 3], [2, 1], pads, False, count_include_pad=0), [act(x)], sums / counts)

    for shape in ([2, 3, 5, 4], [2, 3, 7]):
        x = rand(*shape)
        dims = list(range(2, len(shape)))
        case("GlobalAveragePool", {}, [act(x)], x.mean(dim=dims, keepdim=True))
        x = rand(*shape)
        case("GlobalMaxPool", {}, [act(x)], x.amax(dim=dims, keepdim=True))


# ---------------------------------------------------------------- normalization, activations

def elementwise_cases():
    for shape, eps in (([2, 3, 4, 5], None), ([4, 6], None), ([2, 3, 7], 1e-3)):
        c = shape[1]
        x, scale, bias, mean, var = rand(*shape), rand(c), rand(c), rand(c), rand(c, lo=0.1, hi=2.0)
        attrs = {} if eps is None else {"epsilon": eps}
        y = F.batch_norm(x, mean, var, scale, bias, training=False, eps=eps or 1e-5)
        case("BatchNormalization", attrs, [act(x)] + [weight(t) for t in (scale, bias, mean, var)], y)

    def unary(op, fn, attrs=None, lo=-4.0, hi=4.0):
        x = rand(2, 3, 4, 5, lo=lo, hi=hi)
        case(op, attrs or {}, [act(x)], fn(x))

    unary("Relu", F.relu)
    unary("LeakyRelu", lambda x: F.leaky_relu(x, 0.01))
    unary("LeakyRelu", lambda x: F.leaky_relu(x, 0.25), {"alpha": 0.25})
    unary("Sigmoid", torch.sigmoid, lo=-10, hi=10)
    unary("Tanh", torch.tanh)
    unary("HardSigmoid", lambda x: torch.clamp(0.2 * x + 0.5, 0, 1))
    unary("HardSigmoid", lambda x: torch.clamp(0.25 * x + 0.375, 0, 1), {"alpha": 0.25, "beta": 0.375})
    unary("HardSigmoid", F.hardsigmoid, {"alpha": 1.0 / 6.0, "beta": 0.5})
    unary("HardSwish", F.hardswish, lo=-5, hi=5)
    unary("Identity", lambda x: x)
    unary("Dropout", lambda x: x)

    x = rand(2, 3, 4, 5, lo=-2, hi=2)
    lo, hi = torch.tensor(-0.5, dtype=torch.float64), torch.tensor(0.75, dtype=torch.float64)
    case("Clip", {}, [act(x), weight(lo), weight(hi)], torch.clamp(x, -0.5, 0.75))
    x = rand(2, 3, 4, 5, lo=-2, hi=2)
    case("Clip", {}, [act(x), None, weight(hi)], torch.clamp(x, max=0.75))
    x = rand(2, 3, 4, 5, lo=-2, hi=2)
    case("Clip", {}, [act(x), weight(torch.tensor([0.0], dtype=torch.float64))], torch.clamp(x, min=0.0))
    x = rand(3, 4, lo=-2, hi=2)
    case("Clip", {}, [act(x)], x)

    for shape, axis in (([2, 3, 4], -1), ([2, 3, 4], 1), ([2, 3, 4], 0), ([3, 5], None), ([2, 3, 2, 2], -3)):
        x = rand(*shape, lo=-3, hi=3)
        case("Softmax", {} if axis is None else {"axis": axis}, [act(x)],
             torch.softmax(x, -1 if axis is None else axis))

    ops = {"Add": torch.add, "Sub": torch.sub, "Mul": torch.mul, "Div": torch.div}
    for op, a_shape, b_shape, b_is_weight in (
            ("Add", [2, 3, 4, 5], [5], False),
            ("Add", [2, 3, 4, 5], [3, 1, 1], True),
            ("Add", [2, 3], [2, 3], False),
            ("Sub", [2, 1, 4, 1], [3, 1, 5], False),
            ("Sub", [1], [2, 3, 4], False),
            ("Mul", [2, 3, 4, 5], [], True),
            ("Mul", [1, 3, 1, 1], [2, 3, 4, 5], False),
            ("Div", [2, 3, 4], [3, 4], False),
            ("Div", [2, 3, 4], [1], True),
            ("Div", [4, 1], [1, 5], False)):
        a = rand(*a_shape, lo=-2, hi=2)
        b = rand(*b_shape, lo=0.5, hi=2) if op == "Div" else rand(*b_shape, lo=-2, hi=2)
        case(op, {}, [act(a), weight(b) if b_is_weight else act(b)], ops[op](a, b))


# ---------------------------------------------------------------- Gemm, MatMul

def linalg_cases():
    def gemm(m, k, n, trans_a=0, trans_b=0, alpha=None, beta=None, c_shape=None):
        a = rand(*([k, m] if trans_a else [m, k]))
        b = rand(*([n, k] if trans_b else [k, n]))
        attrs = {}
        for name, v in (("transA", trans_a), ("transB", trans_b), ("alpha", alpha), ("beta", beta)):
            if v:
                attrs[name] = v
        y = (alpha or 1.0) * ((a.T if trans_a else a) @ (b.T if trans_b else b))
        inputs = [act(a), weight(b)]
        if c_shape is not None:
            c = rand(*c_shape)
            y = y + (1.0 if beta is None else beta) * c
            inputs.append(weight(c))
        case("Gemm", attrs, inputs, y)

    gemm(3, 4, 5)
    gemm(3, 4, 5, c_shape=[5])
    gemm(3, 4, 5, trans_a=1, c_shape=[3, 1])
    gemm(3, 4, 5, trans_b=1, alpha=0.5, beta=2.0, c_shape=[3, 5])
    gemm(2, 6, 3, trans_a=1, trans_b=1, alpha=1.5, c_shape=[1, 3])
    gemm(4, 3, 2, beta=0.25, c_shape=[])
    gemm(1, 16, 10, trans_b=1, c_shape=[10])  # a classifier head

    for a_shape, b_shape, b_is_weight in (
            ([3, 4], [4, 5], True),
            ([4], [4, 5], False),
            ([3, 4], [4], False),
            ([4], [4], False),
            ([2, 1, 3, 4], [3, 4, 5], False),
            ([2, 3, 4], [4, 2], True),
            ([5], [2, 5, 3], False),
            ([2, 3, 4], [4], False)):
        a, b = rand(*a_shape), rand(*b_shape)
        case("MatMul", {}, [act(a), weight(b) if b_is_weight else act(b)], torch.matmul(a, b))


# ---------------------------------------------------------------- shape ops

def shape_cases():
    x = rand(2, 3, 4)
    case("Transpose", {"perm": [2, 0, 1]}, [act(x)], x.permute(2, 0, 1))
    x = rand(2, 3, 4, 5)
    case("Transpose", {}, [act(x)], x.permute(3, 2, 1, 0))
    x = rand(1, 3, 4, 2)
    case("Transpose", {"perm": [0, 3, 1, 2]}, [act(x)], x.permute(0, 3, 1, 2))

    for shape in ([0, -1], [4, 0, -1], [-1], [2, 2, 6]):
        x = rand(2, 3, 4)
        target = [x.shape[i] if v == 0 else v for i, v in enumerate(shape)]
        case("Reshape", {}, [act(x), ints(*shape)], x.reshape(target))
    x = rand(2, 3, 4)
    case("Reshape", {"allowzero": 1}, [act(x), ints(6, -1)], x.reshape(6, 4))

    for axis in (None, 0, 2, -1, 4):
        x = rand(2, 3, 4, 5)
        a = 1 if axis is None else axis + 4 if axis < 0 else axis
        y = x.reshape(math.prod(x.shape[:a]), -1)
        case("Flatten", {} if axis is None else {"axis": axis}, [act(x)], y)

    xs = [rand(2, 1, 3), rand(2, 4, 3), rand(2, 2, 3)]
    case("Concat", {"axis": 1}, [act(xs[0]), act(xs[1]), weight(xs[2])], torch.cat(xs, 1))
    xs = [rand(2, 3, 2), rand(2, 3, 5)]
    case("Concat", {"axis": -1}, [act(t) for t in xs], torch.cat(xs, -1))
    xs = [rand(1, 3), rand(2, 3)]
    case("Concat", {"axis": 0}, [act(t) for t in xs], torch.cat(xs, 0))

    x = rand(2, 6, 4)
    case("Split", {"axis": 1}, [act(x)], list(torch.split(x, 2, 1)))
    x = rand(2, 6, 4)
    case("Split", {"axis": 1}, [act(x), ints(1, 3, 2)], list(torch.split(x, [1, 3, 2], 1)))
    x = rand(2, 6, 4)
    case("Split", {"axis": -1}, [act(x), ints(1, 3)], list(torch.split(x, [1, 3], -1)))
    x = rand(6, 2)
    case("Split", {}, [act(x)], list(torch.split(x, 3, 0)))

    # Slice: expected values from Python slicing, whose clamping rules ONNX adopted.
    def slice_case(shape, starts, ends, axes=None, steps=None):
        x = rand(*shape)
        index = [slice(None)] * len(shape)
        for j, (s, e) in enumerate(zip(starts, ends)):
            ax = axes[j] if axes is not None else j
            index[ax] = slice(s, e, steps[j] if steps is not None else 1)
        y = torch.tensor(x.numpy()[tuple(index)].copy())
        inputs = [act(x), ints(*starts), ints(*ends)]
        if axes is not None or steps is not None:
            inputs.append(ints(*axes) if axes is not None else None)
        if steps is not None:
            inputs.append(ints(*steps))
        case("Slice", {}, inputs, y)

    slice_case([4, 5, 6], [1, 0], [3, 5], axes=[0, 2])
    slice_case([4, 5, 6], [1, 1], [-1, 1000])
    slice_case([4, 5, 6], [-1], [INT64_MIN], axes=[1], steps=[-1])  # full reverse
    slice_case([4, 5, 6], [4], [0], axes=[2], steps=[-2])
    slice_case([4, 5, 6], [-3], [INT64_MAX], axes=[-1])
    slice_case([4, 5, 6], [0, 5], [4, 0], axes=[0, 2], steps=[2, -3])
    slice_case([4, 5, 6], [10], [-100], axes=[1], steps=[-1])  # clamped both ends
    slice_case([4, 5, 6], [1, -2, 0], [4, -6, 6], steps=[2, -1, 5])
    slice_case([4, 5, 6], [2], [4], axes=[1], steps=None)

    # Pad: torch's F.pad takes the pads innermost dim first.
    def pad_case(shape, pads, mode=None, value=None):
        x = rand(*shape)
        inputs = [act(x), ints(*pads)]
        if value is not None:
            inputs.append(weight(torch.tensor(value, dtype=torch.float64)))
        n = len(shape)
        if mode in (None, "constant"):
            y = F.pad(x, torch_pads(pads), value=value or 0.0)
        else:
            # torch pads only the innermost dims in reflect/replicate mode.
            nz = [d for d in range(n) if pads[d] or pads[n + d]]
            k = n - min(nz)
            tp = torch_pads(pads[n - k:n] + pads[2 * n - k:])
            y = F.pad(x, tp, mode={"reflect": "reflect", "edge": "replicate"}[mode])
        case("Pad", {} if mode is None else {"mode": mode}, inputs, y)

    pad_case([1, 2, 4, 5], [0, 0, 1, 2, 0, 0, 2, 1], value=0.5)
    pad_case([1, 2, 4, 5], [0, 1, 1, 0, 0, 0, 0, 2])
    pad_case([1, 2, 4, 5], [0, 0, 1, 2, 0, 0, 2, 1], mode="reflect")
    pad_case([1, 2, 4, 5], [0, 0, 3, 1, 0, 0, 0, 4], mode="edge")
    pad_case([1, 2, 4, 5], [0, 0, -1, 1, 0, 0, 1, -2], mode="constant", value=-1.5)
    pad_case([2, 3, 6], [0, 0, 2, 0, 0, 3], mode="reflect")
    pad_case([2, 3, 6], [0, 0, 0, 0, 0, 5], mode="reflect")


def math_cases():
    """Erf, Sqrt, Reciprocal, Exp, Log, Neg, Abs, Pow and the variadic Max, Min, Sum, Mean (after the
    other families, so their cases keep their seeds)."""
    def unary(op, fn, lo, hi):
        x = rand(2, 3, 4, 5, lo=lo, hi=hi)
        case(op, {}, [act(x)], fn(x))

    unary("Erf", torch.erf, -4, 4)
    unary("Sqrt", torch.sqrt, 0, 9)
    unary("Reciprocal", torch.reciprocal, 0.1, 4)
    unary("Exp", torch.exp, -20, 20)
    unary("Log", torch.log, 1e-3, 1e3)
    unary("Neg", torch.neg, -4, 4)
    unary("Abs", torch.abs, -4, 4)
    x = rand(2, 3, 4, 5, lo=0.1, hi=3)
    for e in (2.0, 3.0, 0.5, -1.0, 1.7):
        case("Pow", {}, [act(x), weight(torch.tensor(e, dtype=torch.float64))], torch.pow(x, e))
    y = rand(1, 3, 1, 5, lo=-2, hi=2)
    case("Pow", {}, [act(x), act(y)], torch.pow(x, y))
    a, b, c = rand(2, 3, 4, 5), rand(3, 1, 5), rand(5)
    case("Max", {}, [act(a), act(b), weight(c)], torch.maximum(torch.maximum(a, b), c))
    case("Min", {}, [act(a), act(b), weight(c)], torch.minimum(torch.minimum(a, b), c))
    case("Sum", {}, [act(a), act(b), weight(c)], a + b + c)
    case("Mean", {}, [act(a), act(b), weight(c)], (a + b + c) / 3)
    case("Max", {}, [act(a)], a)


def resize_cases():
    """Resize linear and cubic as F.interpolate computes them (after the other families, so their cases
    keep their seeds): align_corners=False is pytorch_half_pixel (half_pixel where no output dim is 1),
    True is align_corners; bicubic is cubic with A = -0.75; antialias (bilinear, downsampling) is
    antialias with exclude_outside, the window cut at the edges and renormalised as PIL does."""
    def add(shape, size, mode, align, attrs, antialias=False):
        x = rand(*shape, lo=-2, hi=2)
        y = F.interpolate(x, size=size, mode=mode, align_corners=align, antialias=antialias)
        full = list(shape[:2]) + list(size)
        case("Resize", attrs, [act(x), None, None, ints(*full)], y)

    linear = {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}
    add([1, 2, 5, 7], [9, 4], "bilinear", False, linear)
    add([2, 3, 4, 4], [8, 8], "bilinear", False, dict(linear, coordinate_transformation_mode="half_pixel"))
    # (Not an output dim of 1: there ONNX's pytorch_half_pixel reads index 0, PyTorch the middle.)
    add([1, 2, 5, 7], [2, 11], "bilinear", False, linear)
    add([1, 2, 5, 7], [9, 3], "bilinear", True, dict(linear, coordinate_transformation_mode="align_corners"))
    cubic = {"mode": "cubic", "coordinate_transformation_mode": "half_pixel", "cubic_coeff_a": -0.75}
    add([1, 2, 6, 5], [11, 7], "bicubic", False, cubic)
    add([1, 2, 6, 5], [4, 3], "bicubic", False, cubic)
    add([1, 1, 6, 5], [9, 8], "bicubic", True, dict(cubic, coordinate_transformation_mode="align_corners"))
    x = rand(2, 3, 7, lo=-2, hi=2)
    case("Resize", dict(linear, coordinate_transformation_mode="half_pixel"), [act(x), None, None, ints(2, 3, 12)],
         F.interpolate(x, size=[12], mode="linear", align_corners=False))
    aa = {"mode": "linear", "coordinate_transformation_mode": "half_pixel", "antialias": 1, "exclude_outside": 1}
    add([1, 2, 12, 17], [5, 6], "bilinear", False, aa, antialias=True)
    add([1, 1, 9, 10], [4, 10], "bilinear", False, aa, antialias=True)
    aac = {"mode": "cubic", "coordinate_transformation_mode": "half_pixel", "antialias": 1, "exclude_outside": 1,
           "cubic_coeff_a": -0.5}
    add([1, 2, 12, 11], [5, 4], "bicubic", False, aac, antialias=True)


def reduce_cases():
    """ReduceSum, ReduceMax, ReduceMin (after the other families, so their cases keep their seeds)."""
    x = rand(2, 3, 4, 5, lo=-2, hi=2)
    for op, fn in (("ReduceSum", lambda t, d, k: t.sum(d, keepdim=k)),
                   ("ReduceMax", lambda t, d, k: t.amax(d, keepdim=k)),
                   ("ReduceMin", lambda t, d, k: t.amin(d, keepdim=k))):
        case(op, {"axes": [1, 3], "keepdims": 1}, [act(x)], fn(x, (1, 3), True))
        case(op, {"axes": [-1], "keepdims": 0}, [act(x)], fn(x, (-1,), False))


def main():
    torch.manual_seed(0)
    conv_cases()
    pool_cases()
    elementwise_cases()
    linalg_cases()
    shape_cases()
    math_cases()
    resize_cases()
    reduce_cases()
    text = json.dumps(CASES, separators=(",", ":"))
    with open(OUT_PATH, "w") as f:
        f.write(text + "\n")
    print("wrote %d cases (%d bytes) to %s" % (len(CASES), len(text) + 1, os.path.normpath(OUT_PATH)))


if __name__ == "__main__":
    main()
