"""The binary32 adder in Amaranth's simulator against numpy float32 addition."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.fp import Float32Adder
from tlm.formats import CANONICAL_NAN_BITS, FLOAT_FORMATS
from verif.tensor.fp_operands import edge_operands


def reference(a, b):
    va, vb = np.array([a, b], np.uint32).view(np.float32)
    with np.errstate(all="ignore"):
        s = np.float32(va + vb)
    if np.isnan(s):
        return CANONICAL_NAN_BITS
    return int(np.array([s], np.float32).view(np.uint32)[0])


def check(pairs, seed=None):
    dut = Float32Adder()
    bad = []

    async def bench(ctx):
        for a, b in pairs:
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            got, want = ctx.get(dut.s), reference(a, b)
            if got != want and len(bad) < 8:
                bad.append(f"{a:#010x} + {b:#010x}: RTL {got:#010x}, numpy {want:#010x}")

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, f"(seed {seed}) " + "; ".join(bad)


SPECIAL = [
    0x00000000,
    0x80000000,
    0x3F800000,
    0xBF800000,
    0x7F800000,
    0xFF800000,
    0x7FC00000,
    0xFFC12345,
    0x00000001,
    0x80000001,
    0x007FFFFF,
    0x00800000,
    0x7F7FFFFF,
    0xFF7FFFFF,
    0x4B800000,
    0x33800000,
    0x33800001,
    0xB3800000,
    0x34000000,
]


def test_special_values_every_pair():
    check([(a, b) for a in SPECIAL for b in SPECIAL])


def test_ties_and_cancellation():
    one, ulp_half = 0x3F800000, 0x33800000  # 1.0 and 2**-24: a tie, rounds to even (1.0)
    pairs = [
        (one, ulp_half),
        (0x3F800001, ulp_half),  # tie rounds up to even
        (one, 0xBF7FFFFF),
        (0x4B800000, 0x3F800000),
        (0x4B800001, 0x3F800000),
        (0x00800000, 0x80000001),
        (0x7F7FFFFF, 0x73800000),
        (0x7F7FFFFF, 0x73000000),
    ]
    check(pairs + [(b, a) for a, b in pairs])


@pytest.mark.parametrize("salt", range(3))
def test_edge_biased_random(salt, seed):
    rng = np.random.default_rng(seed + salt)
    fmt = FLOAT_FORMATS["fp32"]
    a = edge_operands(fmt, rng, 4000)
    b = edge_operands(fmt, rng, 4000)
    # Near cancellations: b close to -a.
    near = [(x, ((x ^ 0x80000000) + int(rng.integers(-3, 4))) & 0xFFFFFFFF) for x in a[:1000]]
    check(list(zip(a, b, strict=True)) + near, seed)
