#!/usr/bin/env python3
"""hfuse's deterministic weight generator, in Python (see include/hfuse/random.h).

`"uniform": [lo, hi], "seed": S` weights and default inputs in hfuse models come from this generator,
so Python tools (reference data, model builders) can reproduce them bit for bit:

    from hfuse_weights import uniform_values
    w = torch.tensor(uniform_values(64 * 3 * 3 * 3, -1, 1, seed=7)).reshape(64, 3, 3, 3)

Run it to print values: `python3 tools/hfuse_weights.py COUNT LO HI SEED`.
"""

import struct
import sys

_MASK = (1 << 64) - 1


def _round_f32(x):
    """Rounds a Python float (double) to the nearest float32, like C++ static_cast<float>."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def splitmix64(seed):
    """Yields the SplitMix64 sequence for a uint64 seed."""
    state = seed & _MASK
    while True:
        state = (state + 0x9E3779B97F4A7C15) & _MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        yield z ^ (z >> 31)


def uniform_values(count, lo, hi, seed):
    """`count` values in [lo, hi) as a list of Python floats, each exactly a float32."""
    gen = splitmix64(seed)
    lo, hi = float(lo), float(hi)
    out = []
    for _ in range(count):
        u = (next(gen) >> 40) * (1.0 / 16777216.0)  # 24 random bits: exact, u in [0, 1)
        out.append(_round_f32(lo + (hi - lo) * u))  # double arithmetic, one rounding to float32
    return out


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit("usage: hfuse_weights.py COUNT LO HI SEED")
    count, lo, hi, seed = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    for v in uniform_values(count, lo, hi, seed):
        print(repr(v))
