"""The shipped calibrations (tlm/costs/data/<preset>.json) against the chip TLM they were made
from.

A change to the chip model, the GEMM kernel or a preset that changes a GEMM's time makes its
cache stale: these tests re-run grid points and fail, saying how to rebuild it.
"""

import json

import pytest

from tlm.costs.calibrate import (
    CHECK_MAX_ERROR,
    CHECK_MEAN_ERROR,
    CHECK_SHAPES,
    check,
    measure_gemm,
)
from tlm.costs.grid import AXES, FORMATS, data_path, grid_times
from tlm.presets import PRESETS

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

REBUILD = (
    "the chip TLM no longer gives the cached time: rebuild tlm/costs/data/{0}.json with "
    "`make calibrate PRESET={0}` (tools/calibrate_costs.py) and commit it"
)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize(
    ("m", "n", "k", "fmt", "cores"),
    [
        (64, 512, 256, "bf16", "all"),
        (4, 1024, 2048, "fp8", "all"),
        (256, 128, 64, "bf16", "one"),
    ],
)
def test_cache_matches_the_chip_tlm_exactly(preset, m, n, k, fmt, cores):
    data = json.loads(data_path(preset).read_text())
    at = AXES["m"].index(m), AXES["n"].index(n), AXES["k"].index(k)
    stored = grid_times(data, fmt, cores)[at]
    measured = measure_gemm(preset, m, n, k, FORMATS[fmt], cores)
    why = REBUILD.format(preset)
    assert measured == stored, (
        f"{preset} {m}x{n}x{k} {fmt} {cores}: {measured!r} != {stored!r}; {why}"
    )


def check_rows(shapes):
    rows = check("trn2", shapes)
    for r in rows:
        print(
            f"{r['m']}x{r['n']}x{r['k']}: TLM {r['tlm_s'] * 1e6:.2f} us, estimate "
            f"{r['estimate_s'] * 1e6:.2f} us, error {r['error']:+.2%} ({r['basis']})"
        )
    return rows


#: The cheap shapes of CHECK_SHAPES (each well under a second of simulation).
QUICK = [s for s in CHECK_SHAPES if s[0] * s[1] * s[2] <= 2**32]


def test_estimates_off_the_grid_against_the_tlm():
    """Interpolation between grid points, the kernel's block balance and the steady-state
    extrapolation, against the chip TLM run at each shape: within the documented bound."""
    for r in check_rows(QUICK):
        assert abs(r["error"]) <= CHECK_MAX_ERROR, r


@pytest.mark.slow
def test_estimates_on_every_check_shape():
    """All of CHECK_SHAPES (up to 8192^3, about two minutes): the mean and max of
    docs/costs.md's table."""
    errors = [abs(r["error"]) for r in check_rows(CHECK_SHAPES)]
    assert sum(errors) / len(errors) <= CHECK_MEAN_ERROR
    assert max(errors) <= CHECK_MAX_ERROR


@pytest.mark.slow
def test_extrapolation_on_a_big_gemm():
    """One real big run beyond the grid in every dimension (8192 x 8192 x 16384, BF16:
    131,072 matmuls, about a minute) against the steady-state extrapolation."""
    (r,) = check_rows([(8192, 8192, 16384)])
    assert abs(r["error"]) <= CHECK_MAX_ERROR


@pytest.mark.parametrize(("shared", "table"), [("fp16", "bf16"), ("fp8_e5m2", "fp8_e4m3")])
def test_formats_sharing_a_table_time_alike_on_the_tlm(shared, table):
    """FP16 uses BF16's table and E5M2 E4M3's: the chip TLM times them identically."""
    assert measure_gemm("trn2", 200, 700, 300, shared) == measure_gemm("trn2", 200, 700, 300, table)
