"""The floating-point multiplier against numpy: every FP8 x FP8 pair, 100,000 edge-biased
random operands for each of BF16, FP16, TF32 and FP32, every format pair of the every-format
multiplier - its generated Verilog compiled by Verilator and evaluated on all the pairs at once
(:mod:`verif.common.batch_eval`), and a sample through Amaranth's own simulator."""

import functools
import itertools

import numpy as np
import pytest

from hdl.fp import FloatMultiplier
from tlm.formats import CANONICAL_NAN_BITS, FLOAT_FORMATS
from verif.common.batch_eval import Blocks, simulate
from verif.tensor.fp_operands import edge_operand_array

FP8 = ["fp8_e4m3", "fp8_e4m3fn", "fp8_e5m2"]


def value(fmt, raw):
    """The operands' values as float64 (exact), TF32 with its low 13 bits cleared."""
    raw = np.asarray(raw, dtype=np.uint64)
    if fmt.ignored_low_bits:
        raw = raw & np.uint64(0xFFFFFFFF ^ ((1 << fmt.ignored_low_bits) - 1))
    unsigned = np.dtype(f"u{fmt.storage_bits // 8}")
    with np.errstate(invalid="ignore"):  # NaN operands convert to NaN, as they should
        return raw.astype(unsigned).view(fmt.dtype).astype(np.float64)


def reference(a_fmt, b_fmt, a, b):
    """numpy's binary32 products of the raw operands ``a`` and ``b`` (arrays), as bits."""
    va, vb = value(a_fmt, a), value(b_fmt, b)
    with np.errstate(all="ignore"):
        if a_fmt.storage_bits + b_fmt.storage_bits <= 32:
            p = (va * vb).astype(np.float32)  # the float64 product is exact: one rounding
        else:
            p = va.astype(np.float32) * vb.astype(np.float32)  # IEEE binary32 multiply
    bits = p.view(np.uint32).astype(np.uint64)
    return np.where(np.isnan(p), np.uint64(CANONICAL_NAN_BITS), bits)


#: Every multiplier the checks use, in one design: one Verilator build for the file.
SAME = ["bf16", "fp16", "tf32", "fp32"]
_NAMES = [f"{a}_x_{b}" for a, b in itertools.product(FP8, FP8)] + [f"{f}_x_{f}" for f in SAME]


@functools.cache
def multipliers() -> Blocks:
    blocks = {}
    for name in _NAMES:
        a, b = name.split("_x_")
        blocks[name] = FloatMultiplier(FLOAT_FORMATS[a], FLOAT_FORMATS[b])
    fmts = tuple(FLOAT_FORMATS.values())
    blocks["all"] = FloatMultiplier(fmts, fmts)
    return Blocks(blocks)


def check(a_fmt, b_fmt, a, b, seed=None):
    """The multiplier's Verilog (Verilator, every pair at once) against :func:`reference`."""
    a, b = np.asarray(a, np.uint64), np.asarray(b, np.uint64)
    got = multipliers().evaluate(f"{a_fmt.name}_x_{b_fmt.name}", {"a": a, "b": b})["p"]
    want = reference(a_fmt, b_fmt, a, b)
    bad = np.flatnonzero(got != want)[:8]
    assert not len(bad), f"{a_fmt.name} x {b_fmt.name} (seed {seed}): " + "; ".join(
        f"{int(a[i]):#x} * {int(b[i]):#x}: RTL {int(got[i]):#010x}, numpy {int(want[i]):#010x}"
        for i in bad
    )


@pytest.mark.parametrize("a,b", list(itertools.product(FP8, FP8)))
def test_every_fp8_pair(a, b):
    grid = np.array(list(itertools.product(range(256), range(256))), np.uint64)
    check(FLOAT_FORMATS[a], FLOAT_FORMATS[b], grid[:, 0], grid[:, 1])


@pytest.mark.parametrize("name", SAME)
def test_edge_biased_random(name, seed):
    fmt = FLOAT_FORMATS[name]
    rng = np.random.default_rng(seed)
    a, b = edge_operand_array(fmt, rng, 100_000), edge_operand_array(fmt, rng, 100_000)
    check(fmt, fmt, a, b, seed)


def test_amaranth_simulator_agrees():
    """The Verilog the checks above compile is the Amaranth design: a few hundred products
    through Amaranth's own simulator equal numpy's too (every FP8 format against BF16, edges
    of each)."""
    rng = np.random.default_rng(0)
    for name in FP8:
        a_fmt, b_fmt = FLOAT_FORMATS[name], FLOAT_FORMATS["bf16"]
        a, b = edge_operand_array(a_fmt, rng, 100), edge_operand_array(b_fmt, rng, 100)
        got = simulate(FloatMultiplier(a_fmt, b_fmt), {"a": a, "b": b})["p"]
        assert got.tolist() == reference(a_fmt, b_fmt, a, b).tolist(), name


def test_format_chosen_at_run_time(seed):
    """One multiplier elaborated with every format on both sides: each product, in a random
    format pair chosen by the code ports, equals numpy's; garbage above a narrow operand's
    bits is ignored."""
    fmts = tuple(FLOAT_FORMATS.values())
    rng = np.random.default_rng(seed)
    for i, a_fmt in enumerate(fmts):
        for j, b_fmt in enumerate(fmts):
            a, b = edge_operand_array(a_fmt, rng, 5000), edge_operand_array(b_fmt, rng, 5000)
            junk = rng.integers(0, 1 << 32, size=len(a)).astype(np.uint64)
            junk &= np.uint64(0xFFFFFFFF ^ ((1 << a_fmt.storage_bits) - 1))
            codes = {"a_code": np.full(len(a), i), "b_code": np.full(len(a), j)}
            got = multipliers().evaluate("all", {"a": a | junk, "b": b, **codes})["p"]
            want = reference(a_fmt, b_fmt, a, b)
            bad = np.flatnonzero(got != want)[:4]
            assert not len(bad), f"seed {seed}: {a_fmt.name} x {b_fmt.name}: " + "; ".join(
                f"{int(a[k]):#x} * {int(b[k]):#x}: {int(got[k]):#010x} != {int(want[k]):#010x}"
                for k in bad
            )
