"""The binary32 adder against numpy float32 addition: its generated Verilog compiled by
Verilator and evaluated on every pair at once (:mod:`verif.common.batch_eval`: 120,000 edge-biased
pairs a run), the special values and ties also through Amaranth's own simulator."""

import numpy as np
import pytest

from hdl.fp import Float32Adder
from tlm.formats import CANONICAL_NAN_BITS, FLOAT_FORMATS
from verif.common.batch_eval import evaluate, simulate
from verif.tensor.fp_operands import edge_operand_array


def reference(a, b):
    """numpy's binary32 sums of the raw operands ``a`` and ``b`` (arrays), as bits."""
    va = np.asarray(a, np.uint64).astype(np.uint32).view(np.float32)
    vb = np.asarray(b, np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(all="ignore"):
        s = va + vb
    bits = s.view(np.uint32).astype(np.uint64)
    return np.where(np.isnan(s), np.uint64(CANONICAL_NAN_BITS), bits)


def check(pairs, seed=None):
    """The adder's Verilog (Verilator, every pair at once) against :func:`reference`."""
    a, b = (np.array(x, np.uint64) for x in zip(*pairs, strict=True))
    got = evaluate(Float32Adder(), {"a": a, "b": b}, top="fp_add")["s"]
    want = reference(a, b)
    bad = np.flatnonzero(got != want)[:8]
    assert not len(bad), f"(seed {seed}) " + "; ".join(
        f"{int(a[i]):#010x} + {int(b[i]):#010x}: RTL {int(got[i]):#010x}, "
        f"numpy {int(want[i]):#010x}"
        for i in bad
    )


def check_in_amaranth(pairs):
    """The same through Amaranth's own simulator (the Verilog is its design: a sample)."""
    a, b = (np.array(x, np.uint64) for x in zip(*pairs, strict=True))
    got = simulate(Float32Adder(), {"a": a, "b": b})["s"]
    assert got.tolist() == reference(a, b).tolist()


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
    pairs = [(a, b) for a in SPECIAL for b in SPECIAL]
    check(pairs)
    check_in_amaranth(pairs)


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
    check_in_amaranth(pairs + [(b, a) for a, b in pairs])


@pytest.mark.parametrize("salt", range(3))
def test_edge_biased_random(salt, seed):
    rng = np.random.default_rng(seed + salt)
    fmt = FLOAT_FORMATS["fp32"]
    a = edge_operand_array(fmt, rng, 100_000)
    b = edge_operand_array(fmt, rng, 100_000)
    # Near cancellations: b close to -a.
    near = (a[:20_000] ^ np.uint64(0x80000000)) + rng.integers(-3, 4, 20_000).astype(np.uint64)
    near &= np.uint64(0xFFFFFFFF)
    check(list(zip(a, b, strict=True)) + list(zip(a[:20_000], near, strict=True)), seed)
