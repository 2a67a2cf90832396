"""The floating-point multiplier in Amaranth's simulator against numpy: every FP8 x FP8 pair,
and edge-biased random operands for BF16, FP16, TF32 and FP32."""

import itertools

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.fp import FloatMultiplier
from tlm.formats import CANONICAL_NAN_BITS, FLOAT_FORMATS
from verif.tensor.fp_operands import edge_operands

FP8 = ["fp8_e4m3", "fp8_e4m3fn", "fp8_e5m2"]


def value(fmt, raw):
    """The operand's value as float64 (exact), TF32 with its low 13 bits cleared."""
    if fmt.ignored_low_bits:
        raw &= 0xFFFFFFFF ^ ((1 << fmt.ignored_low_bits) - 1)
    unsigned = np.dtype(f"u{fmt.storage_bits // 8}")
    with np.errstate(invalid="ignore"):  # NaN operands convert to NaN, as they should
        return np.array([raw], unsigned).view(fmt.dtype).astype(np.float64)[0]


def reference(a_fmt, b_fmt, a, b):
    va, vb = value(a_fmt, a), value(b_fmt, b)
    with np.errstate(all="ignore"):
        if a_fmt.storage_bits + b_fmt.storage_bits <= 32:
            p = np.float32(va * vb)  # the float64 product is exact: one rounding
        else:
            p = np.float32(va) * np.float32(vb)  # IEEE binary32 multiply
    if np.isnan(p):
        return CANONICAL_NAN_BITS
    return int(np.array([p], np.float32).view(np.uint32)[0])


def check(a_fmt, b_fmt, pairs, seed=None):
    dut = FloatMultiplier(a_fmt, b_fmt)
    bad = []

    async def bench(ctx):
        for a, b in pairs:
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            got, want = ctx.get(dut.p), reference(a_fmt, b_fmt, a, b)
            if got != want and len(bad) < 8:
                bad.append(f"{a:#x} * {b:#x}: RTL {got:#010x}, numpy {want:#010x}")

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, f"{a_fmt.name} x {b_fmt.name} (seed {seed}): " + "; ".join(bad)


@pytest.mark.parametrize("a,b", list(itertools.product(FP8, FP8)))
def test_every_fp8_pair(a, b):
    check(FLOAT_FORMATS[a], FLOAT_FORMATS[b], itertools.product(range(256), range(256)))


@pytest.mark.parametrize("name", ["bf16", "fp16", "tf32", "fp32"])
def test_edge_biased_random(name, seed):
    fmt = FLOAT_FORMATS[name]
    rng = np.random.default_rng(seed)
    a, b = edge_operands(fmt, rng, 4000), edge_operands(fmt, rng, 4000)
    check(fmt, fmt, zip(a, b, strict=True), seed)


def test_format_chosen_at_run_time(seed):
    """One multiplier elaborated with every format on both sides: each product, in a random
    format pair chosen by the code ports, equals numpy's; garbage above a narrow operand's
    bits is ignored."""
    fmts = tuple(FLOAT_FORMATS.values())
    dut = FloatMultiplier(fmts, fmts)
    rng = np.random.default_rng(seed)
    bad = []

    async def bench(ctx):
        for _ in range(3000):
            i, j = rng.integers(len(fmts), size=2)
            a_fmt, b_fmt = fmts[i], fmts[j]
            a = edge_operands(a_fmt, rng, 1)[0]
            b = edge_operands(b_fmt, rng, 1)[0]
            junk = int(rng.integers(0, 1 << 32)) & ~((1 << a_fmt.storage_bits) - 1)
            ctx.set(dut.a, a | junk)
            ctx.set(dut.b, b)
            ctx.set(dut.a_code, int(i))
            ctx.set(dut.b_code, int(j))
            got, want = ctx.get(dut.p), reference(a_fmt, b_fmt, a, b)
            if got != want and len(bad) < 8:
                bad.append(
                    f"{a_fmt.name} {a:#x} * {b_fmt.name} {b:#x}: {got:#010x} != {want:#010x}"
                )

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, f"seed {seed}: " + "; ".join(bad)
