"""``trnsim tensor``: what one ``nc_matmul`` costs on a tensor engine (exact for the RTL).

The engine's size and clock come from the chip preset (``--preset``, ``--choose
tensor.freq_hz=core_nki2``) unless given; the op cost is :func:`tlm.tensor.matmul_cycles`,
which the cycle-exact model and the RTL benches check. MX formats (on presets that have them,
trn3) take ``R = tensor.mx_max_k / rows`` elements of K per PE row and cycle: K up to
``rows x R``, a multiple of 32, on ``ceil(K / R)`` partitions (no RTL to check: a TLM figure).

Examples
--------
>>> from tlm.studies import run_study
>>> r = run_study("tensor", n=[512], format="fp32").results
>>> r.series[0].cycles                          # FP32 streams at a quarter of the rate
2048
>>> r = run_study("tensor", preset="trn3", format="mxfp8", k=512, n=[512]).results
>>> r.series[0].cycles, round(r.peak_flop_per_s / 1e12, 1)   # four MX rows per PE
(512, 335.5)
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ..formats import MX_BLOCK, format_set, get_format
from ..tensor import MAX_N, EngineConfig, matmul_cycles
from ..tensor.cost import MODES
from .preset import PresetInputs
from .protocol import InputError, Results, Study, format_field, register

__all__ = ["TensorInputs", "TensorResults", "TensorPoint", "tensor_study"]


class TensorInputs(PresetInputs):
    """Inputs of ``trnsim tensor``."""

    format: str = format_field(
        "bf16", description="operand format of the op (fp32: 1/4 rate; MX: trn3's rows per PE)"
    )
    k: int | None = Field(
        None,
        ge=1,
        description="contraction size K (stationary and moving rows; MX: elements)",
        json_schema_extra={"unset": "the engine's rows (MX: x its elements per PE row)"},
    )
    m: int | None = Field(
        None,
        ge=1,
        description="stationary free size M (columns used)",
        json_schema_extra={"unset": "the engine's columns"},
    )
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
        self.check_format(self.format)
        t = self.spec.tensor
        done = self.model_copy(
            update={
                "rows": t.rows if self.rows is None else self.rows,
                "cols": t.cols if self.cols is None else self.cols,
                "clock_hz": t.freq_hz if self.clock_hz is None else self.clock_hz,
            }
        )
        r = done.rows_per_pe
        done = done.model_copy(
            update={
                "k": done.rows * r if self.k is None else self.k,
                "m": done.cols if self.m is None else self.m,
            }
        )
        for name, size, limit in (("k", done.k, done.rows * r), ("m", done.m, done.cols)):
            if size > limit:
                raise InputError(name, size, f"an integer in 1..{limit} (the engine's size)")
        if get_format(done.format).kind == "mx" and done.k % MX_BLOCK:
            raise InputError(
                "k",
                done.k,
                f"a multiple of {MX_BLOCK} in {MX_BLOCK}..{done.rows * r} for {done.format} "
                f"(one E8M0 scale per {MX_BLOCK} elements of K)",
            )
        for size in done.n:
            if not 1 <= size <= MAX_N:
                raise InputError("n", size, f"integers in 1..{MAX_N} (one PSUM bank of FP32)")
        return done

    @property
    def rows_per_pe(self) -> int:
        """Elements of K per PE row and cycle: the preset's for MX, else 1 (the RTL's)."""
        return self.spec.rows_per_pe(self.format) if get_format(self.format).kind == "mx" else 1


class TensorPoint(BaseModel):
    """One op of the sweep."""

    n: int
    cycles: int
    time_s: float
    pe_utilisation_fraction: float
    achieved_flop_per_s: float


class TensorResults(Results):
    """The engine's peak at this format and clock, and the op at each N."""

    peak_flop_per_s: float = Field(
        description="2 x rows x cols x clock at this format's rate (x rows per PE for MX)"
    )
    series: list[TensorPoint] = Field(default=[], exclude=True)


def tensor_study(inputs: TensorInputs) -> TensorResults:
    """Cost of ``nc_matmul(stationary[k, m], moving[k, n])`` for each ``n``."""
    formats = [*format_set("all"), get_format(inputs.format)]
    cfg = EngineConfig(inputs.rows, inputs.cols, formats)
    r = inputs.rows_per_pe
    pes = cfg.rows * cfg.cols * r
    partitions = -(-inputs.k // r)
    points = []
    for n in inputs.n:
        cycles = matmul_cycles(
            partitions, inputs.m, n, cfg=cfg, mode=inputs.mode, fmt=inputs.format
        )
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
