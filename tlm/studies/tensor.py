"""``trnsim tensor``: what one ``nc_matmul`` costs on a tensor engine (exact for the RTL).

The engine's size and clock come from the chip preset (``--preset``, ``--choose
tensor.freq_hz=core_nki2``) unless given; the op cost is :func:`tlm.tensor.matmul_cycles`,
which the cycle-exact model and the RTL benches check.

Examples
--------
>>> from tlm.studies import run_study
>>> r = run_study("tensor", n=[512], format="fp32").results
>>> r.series[0].cycles                          # FP32 streams at a quarter of the rate
2048
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ..tensor import MAX_N, EngineConfig, matmul_cycles
from ..tensor.cost import MODES
from .preset import PresetInputs
from .protocol import InputError, Results, Study, format_field, register

__all__ = ["TensorInputs", "TensorResults", "TensorPoint", "tensor_study"]


class TensorInputs(PresetInputs):
    """Inputs of ``trnsim tensor``."""

    format: str = format_field("bf16", description="operand format of the op (fp32: 1/4 rate)")
    k: int = Field(128, ge=1, description="contraction size K (stationary and moving rows)")
    m: int = Field(128, ge=1, description="stationary free size M (columns used)")
    n: list[int] = Field(
        default_factory=lambda: [512],
        min_length=1,
        description=f"moving free size N, or a list for a sweep (each 1..{MAX_N})",
        json_schema_extra={"allowed": f"a comma-separated list of integers in 1..{MAX_N}"},
    )
    mode: Literal[MODES] = Field(
        "back_to_back",
        description="alone on an idle engine, back to back with new stationaries, or reusing one",
    )
    rows: int | None = Field(None, ge=1, description="PE rows (default: the preset's)")
    cols: int | None = Field(None, ge=1, description="PE columns (default: the preset's)")
    clock_hz: float | None = Field(
        None, gt=0, description="engine clock in Hz (default: the preset's tensor.freq_hz)"
    )

    def resolve(self) -> TensorInputs:
        t = self.spec.tensor
        done = self.model_copy(
            update={
                "rows": t.rows if self.rows is None else self.rows,
                "cols": t.cols if self.cols is None else self.cols,
                "clock_hz": t.freq_hz if self.clock_hz is None else self.clock_hz,
            }
        )
        for name, size, limit in (("k", done.k, done.rows), ("m", done.m, done.cols)):
            if size > limit:
                raise InputError(name, size, f"an integer in 1..{limit} (the engine's size)")
        for size in done.n:
            if not 1 <= size <= MAX_N:
                raise InputError("n", size, f"integers in 1..{MAX_N} (one PSUM bank of FP32)")
        return done


class TensorPoint(BaseModel):
    """One op of the sweep."""

    n: int
    cycles: int
    time_s: float
    pe_utilisation_fraction: float
    achieved_flop_per_s: float


class TensorResults(Results):
    """The engine's peak at this format and clock, and the op at each N."""

    peak_flop_per_s: float = Field(description="2 x rows x cols x clock at this format's rate")
    series: list[TensorPoint] = Field(default_factory=list, exclude=True)


def tensor_study(inputs: TensorInputs) -> TensorResults:
    """Cost of ``nc_matmul(stationary[k, m], moving[k, n])`` for each ``n``."""
    cfg = EngineConfig(inputs.rows, inputs.cols, "all")
    pes = cfg.rows * cfg.cols
    points = []
    for n in inputs.n:
        cycles = matmul_cycles(inputs.k, inputs.m, n, cfg=cfg, mode=inputs.mode, fmt=inputs.format)
        macs = inputs.k * inputs.m * n
        time_s = cycles / inputs.clock_hz
        points.append(
            TensorPoint(
                n=n,
                cycles=cycles,
                time_s=time_s,
                pe_utilisation_fraction=macs / (cycles * pes),
                achieved_flop_per_s=2 * macs / time_s,
            )
        )
    reuse = MAX_N / matmul_cycles(
        cfg.rows, cfg.cols, MAX_N, cfg=cfg, mode="reuse", fmt=inputs.format
    )
    peak = 2 * pes * inputs.clock_hz * reuse
    return TensorResults(peak_flop_per_s=peak, series=points)


STUDY = register(
    Study(
        "tensor",
        TensorInputs,
        tensor_study,
    )
)
