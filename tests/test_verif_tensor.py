"""Entry points of the tensor engine's cocotb bench: Icarus at small sizes, Verilator at a mid
size, and the full 128x128 engine on Verilator in the slow tier (``make test-slow``)."""

import pytest

from tlm.tensor.config import EngineConfig
from verif.common.runner import ROOT, run
from verif.common.toolchain import have_simulator
from verif.tensor.build import build_engine
from verif.tensor.run import bench_env, rerun
from verif.tensor.signals import config_from_env

#: ld:mv:ready pattern triples every run goes through: full rate, idle producers,
#: backpressure, and random of all three.
PATTERNS = ",".join(
    [
        "always:always:always",
        "1of2:3of4:always",
        "always:always:3of4",
        "always:always:1of4",
        "random:random:random",
    ]
)


#: Random patterns, and the periodic ones PATTERNS leaves out, on every stream.
IDLE_PATTERNS = "random:random:random,3of4:1of4:1of2,1of4:1of2:3of4"


def run_bench(
    sim, rows, cols, seed, *, ops, max_n, patterns=PATTERNS, fmt="int8", status_bits=None
):
    if not have_simulator(sim):
        pytest.fail(f"{sim} is not installed: run `make setup`")
    cfg = EngineConfig(rows, cols, fmt, **({"status_bits": status_bits} if status_bits else {}))
    simbuild = build_engine(sim, cfg)
    run(
        simbuild,
        "verif.tensor.bench",
        rerun=rerun(sim, cfg, seed, ops=ops, max_n=max_n, patterns=patterns),
        env=bench_env(cfg, ops=ops, max_n=max_n, patterns=patterns)
        | {"SEED": seed, "PYTHONPATH": ROOT},
        test_dir=simbuild.build_dir / f"run-{rows}x{cols}-{fmt}-{seed}",
    )


@pytest.mark.sim
@pytest.mark.parametrize(
    "rows,cols", [(1, 1), (1, 4), (3, 5), (4, 4), (8, 3)], ids=lambda v: str(v)
)
def test_icarus(rows, cols, seed):
    run_bench("icarus", rows, cols, seed, ops=10, max_n=16)


@pytest.mark.sim
@pytest.mark.parametrize("rows,cols", [(32, 32), (16, 24)], ids=lambda v: str(v))
def test_verilator(rows, cols, seed):
    run_bench("verilator", rows, cols, seed, ops=16, max_n=96)


@pytest.mark.sim
@pytest.mark.slow
def test_verilator_128(seed):
    run_bench("verilator", 128, 128, seed, ops=12, max_n=512)


@pytest.mark.sim
@pytest.mark.slow
def test_verilator_128_bf16(seed):
    """The full engine in BF16: every result bit for bit, under all five pattern triples."""
    run_bench("verilator", 128, 128, seed, ops=6, max_n=256, fmt="bf16")


@pytest.mark.sim
@pytest.mark.slow
def test_verilator_128_every_format(seed):
    """The full engine elaborated with every format, formats chosen per op (misuse too)."""
    run_bench(
        "verilator",
        128,
        128,
        seed,
        ops=8,
        max_n=64,
        fmt="all",
        patterns="always:always:always,random:random:random",
    )


@pytest.mark.sim
@pytest.mark.parametrize(
    "sim,fmt,rows,cols",
    [
        ("icarus", "bf16", 3, 2),
        ("icarus", "fp8_e4m3", 2, 3),
        ("verilator", "fp16", 6, 4),
    ],
)
def test_floating_point_formats(sim, fmt, rows, cols, seed):
    """The engine elaborated for one floating-point format: results bit for bit; random
    patterns, then the periodic ones no triple of PATTERNS uses (tensor.patterns coverage)."""
    run_bench(sim, rows, cols, seed, ops=6, max_n=8, patterns=IDLE_PATTERNS, fmt=fmt)


@pytest.mark.sim
def test_counters_saturate(seed):
    """Misuse counters of one bit: each kind of misuse comes again once its counter is full,
    and RTL and model hold it there (the counters' saturation, never reached by 16-bit
    counters in a run; 40 ops a pattern triple make every kind twice for every seed tried,
    on the model alone, 40 of 40)."""
    run_bench("icarus", 3, 2, seed, ops=40, max_n=6, fmt="bf16,fp16,tf32", status_bits=1)


@pytest.mark.sim
@pytest.mark.parametrize(
    "sim,fmt,rows,cols",
    [
        ("icarus", "all", 3, 2),
        ("icarus", "bf16,fp16,tf32", 2, 2),
        ("verilator", "all", 8, 8),
        ("verilator", "fp8_e4m3,fp8_e5m2,bf16", 5, 3),
    ],
)
def test_formats_chosen_per_op(sim, fmt, rows, cols, seed):
    """One engine elaborated with a set of formats: every op picks its own (per LoadStationary
    and MultiplyMoving), misuse of format codes included, results bit for bit."""
    run_bench(sim, rows, cols, seed, ops=12, max_n=8, fmt=fmt)


#: Column 0 of the sum op: 2 - 2**-24 (a tie) rounds up to 2.0, a carry into the exponent.
_TIE = [0x40000000, 0x3FFFFFFF, 0x3FFFFFFF, 0x40000000, 0x40000000]
#: Column 1: -2 + v, v of SUM_MOVING: -1.0, -0.5, -0.9921875, then -2.0 (the gaps of 31, 41).
_NEGATIVE = [0xBF800000, 0xBF000000, 0xBF7E0000, 0xC0000000, 0xC0000000]


@pytest.mark.parametrize(
    "fmt,bits",
    [
        # TF32: the product op rounds up to 2**-130, a carry through 19 kept bits
        ("bf16,fp16,tf32", _TIE + _NEGATIVE + [0x80000] * 2),
        # FP32: 2 - 2**-45 rounds up to 2.0, a carry through all 24
        ("fp32", _TIE + _NEGATIVE + [0x40000000] * 2),
        ("fp16", _TIE[:3] + _NEGATIVE[:3]),  # FP16 holds neither 2**-30 nor 2**-40
        ("int8", []),
    ],
)
def test_rounding_ops_reach_their_corners(fmt, bits):
    """The directed ops of run 0 give the binary32 results their docstring names (checked on
    the model), so that they keep reaching the corners they are there for."""
    import numpy as np

    from tlm.tensor import matmul
    from verif.tensor.stimulus import rounding_ops

    got = []
    for op in rounding_ops(EngineConfig(2, 2, fmt)):
        out = matmul(op.stationary, op.moving, fmt=tuple(f.name for f in op.fmt))
        got += np.asarray(out, np.float32).view(np.uint32).ravel().tolist()
    assert got == bits


def test_config_from_env():
    """The benches' engine from ``TE_*``: defaults when unset or empty, the stage counts of a
    pipelined engine when given (what ``make bench`` sends for ``PIPELINED_FLOAT``)."""
    assert config_from_env({}) == EngineConfig(4, 4)
    assert config_from_env({"TE_PE_STAGES": "", "TE_STATUS_BITS": ""}) == EngineConfig(4, 4)
    env = {"TE_ROWS": "8", "TE_COLS": "2", "TE_FORMAT": "all", "TE_STATUS_BITS": "4"}
    env |= {"TE_PE_STAGES": "11", "TE_DECODE_STAGES": "2"}
    cfg = config_from_env(env)
    assert cfg == EngineConfig(8, 2, "all", status_bits=4, pe_stages=11, decode_stages=2)
    assert cfg.latency == 8 * 6 + 5 + 2 + 2
