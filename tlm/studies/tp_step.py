"""``trnsim tp-step``: a tensor-parallel step on a server - every chip's share of a row-parallel
GEMM on the chip model and the all-reduce of the partial sums, in one simulation sharing HBM.

``Y = X W`` with ``X`` (``m x k``) cut by columns and ``W`` (``k x n``) by rows over every
chip of ``--system``; each chip runs ``m x n x k/chips`` on the chip model, the partials are
all-reduced (``--algo``, ``auto`` by size), ``--blocks`` all-reduces overlapping the GEMM's later
blocks (1: compute, then one all-reduce). ``--values`` computes and checks the values
(:mod:`tlm.server.tensor_parallel`); ``--trace`` writes the step as Chrome/Perfetto JSON. See
docs/server.md.

Examples
--------
>>> from tlm.studies import run_study
>>> r = run_study("tp-step", values=False).results
>>> r.algorithm, r.ranks, r.gemm_alone_s < r.step_s
('mesh', 16, True)
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ..collectives import ALGOS, unfit
from ..collectives.algorithms import ALGORITHMS
from ..collectives.runtime import with_runtime
from ..core.view import DTYPE_NAMES
from ..presets import PRESETS
from ..server import tensor_parallel_step
from ..server.tensor_parallel import VALUES_MAX_MACS, output_blocks
from ..server.trace import write_step_trace
from ..system import system_names
from .collective import system_input
from .preset import PresetInputs
from .protocol import (
    MAX_GEMM_SIZE,
    InputError,
    Results,
    Study,
    format_field,
    register,
    seed_field,
    writable_path,
)

__all__ = ["TpStepInputs", "TpStepResults", "TpStepGroup", "tp_step_study"]


class TpStepInputs(PresetInputs):
    """Inputs of ``trnsim tp-step``."""

    system: str = Field(
        "server",
        description="the system: server or ultraserver of the chip preset, a system preset or "
        "file, or NxSYSTEM (every chip takes a share)",
        json_schema_extra={"allowed": system_names()},
    )
    m: int = Field(512, ge=1, le=MAX_GEMM_SIZE, description="rows of X and Y (tokens)")
    n: int = Field(512, ge=1, le=MAX_GEMM_SIZE, description="columns of W and Y")
    k: int | None = Field(
        None,
        le=MAX_GEMM_SIZE,
        description="columns of X, rows of W (default: 512 per chip)",
        json_schema_extra={"allowed": "a multiple of the system's chips", "unset": "512 x chips"},
    )
    format: str = format_field(
        "bf16", tuple(DTYPE_NAMES), description="format of X and W (Y is bf16, fp32 for fp32)"
    )
    algo: Literal[ALGOS] = Field(
        "auto", description="all-reduce algorithm; auto picks by each all-reduce's size"
    )
    blocks: int | None = Field(
        None,
        description="all-reduces the output is cut into, each started when its blocks are "
        "stored on every chip (1: no overlap)",
        json_schema_extra={
            "allowed": "an integer in 1..the GEMM's output blocks",
            "unset": "one per wave of blocks over the cores",
        },
    )
    values: bool = Field(True, description="compute and check the values (small shapes)")
    seed: int = seed_field()
    trace: str | None = Field(
        None,
        description="write a Chrome/Perfetto JSON trace of the step to this file",
        json_schema_extra={"allowed": "a file path this user may write", "unset": "none"},
    )

    def resolve(self) -> TpStepInputs:
        chip = self.spec.name if self.spec.name in PRESETS else None
        system = system_input(self.system, chip)
        chips = system.chips
        if chips < 2:
            raise InputError("system", self.system, "a system of 2 or more chips")
        k = 512 * chips if self.k is None else self.k
        if k < 1 or k % chips:
            raise InputError("k", k, f"a positive multiple of {chips} (the chips of {system.name})")
        if self.algo != "auto":
            why = unfit(self.algo, "all_reduce", system)
            if why is not None:
                fitting = [a for a in ALGORITHMS if unfit(a, "all_reduce", system) is None]
                raise InputError(
                    "algo",
                    self.algo,
                    "auto or one of " + ", ".join(fitting),
                    f"does not fit --system {self.system} (it {why})",
                )
        nblocks, waves = output_blocks(self.m, self.n, self.spec)
        blocks = waves if self.blocks is None else self.blocks
        if not 1 <= blocks <= nblocks:
            raise InputError(
                "blocks",
                blocks,
                f"an integer in 1..{nblocks} (the output blocks of the {self.m} x {self.n} GEMM)",
            )
        if self.values and self.m * self.n * k > VALUES_MAX_MACS:
            raise InputError(
                "values",
                self.values,
                f"false for m x n x k above {VALUES_MAX_MACS} (here {self.m * self.n * k})",
            )
        writable_path("trace", self.trace)
        return self.model_copy(update={"k": k, "blocks": blocks})


class TpStepGroup(BaseModel):
    """One all-reduce of the step."""

    group: int
    count: int = Field(description="elements per chip")
    size_bytes: int
    algorithm: str
    ready_s: float = Field(description="its blocks stored on every chip")
    start_s: float
    end_s: float


class TpStepResults(Results):
    """Times of the step, of its parts alone, and what HBM did."""

    ranks: int
    algorithm: str = Field(description="the all-reduce algorithms used")
    step_s: float = Field(description="the step in one simulation")
    gemm_alone_s: float = Field(description="one chip's GEMM share, nothing else running")
    gemm_in_step_s: float = Field(description="the slowest chip's GEMM inside the step")
    all_reduce_alone_s: float = Field(description="one all-reduce of the whole output, alone")
    exposed_communication_s: float = Field(description="step - GEMM alone")
    hbm_bandwidth_Bps: float = Field(description="HBM bytes per chip over the step")
    hbm_peak_Bps: float = Field(description="the preset's HBM bandwidth per chip")
    values_bit_exact: bool | None = Field(
        None, description="every rank equals the reference bit for bit (with --values)"
    )
    error_of_bound_fraction: float | None = Field(
        None, description="largest |Y - X W (float64)| over its bound; <= 1 passes"
    )
    series: list[TpStepGroup] = Field(default=[], exclude=True)


def tp_step_study(inputs: TpStepInputs) -> TpStepResults:
    """Run the step (and write the trace if asked)."""
    chip = inputs.spec.name if inputs.spec.name in PRESETS else None
    system = with_runtime(system_input(inputs.system, chip), inputs.spec)
    step = tensor_parallel_step(
        system,
        inputs.m,
        inputs.n,
        inputs.k,
        inputs.format,
        preset=inputs.spec,
        algo=inputs.algo,
        blocks=inputs.blocks,
        values=inputs.values,
        seed=inputs.seed,
        record=inputs.trace is not None,
    )
    if inputs.trace is not None:
        try:
            write_step_trace(step, inputs.trace)
        except OSError as error:
            raise InputError(
                "trace",
                inputs.trace,
                "a file path this user may write",
                f"cannot be written ({error.strerror})",
            ) from None
    return TpStepResults(
        ranks=step.tp,
        algorithm=",".join(step.algorithms),
        step_s=step.step_s,
        gemm_alone_s=step.gemm_alone_s,
        gemm_in_step_s=step.gemm_in_step_s,
        all_reduce_alone_s=step.all_reduce_alone_s,
        exposed_communication_s=step.exposed_communication_s,
        hbm_bandwidth_Bps=step.hbm_bandwidth_Bps,
        hbm_peak_Bps=step.hbm_peak_Bps,
        values_bit_exact=step.bit_exact,
        error_of_bound_fraction=step.error_of_bound,
        series=[
            TpStepGroup(
                group=i,
                count=g.count,
                size_bytes=g.size_bytes,
                algorithm=g.algorithm,
                ready_s=g.ready_s,
                start_s=g.start_s,
                end_s=g.end_s,
            )
            for i, g in enumerate(step.groups)
        ],
    )


STUDY = register(
    Study(
        "tp-step",
        TpStepInputs,
        tp_step_study,
    )
)
