"""``trnsim model``: a model's facts - parameters, active parameters, FLOPs per token, KV-cache
bytes - and, for a parallel configuration on a chip preset, each chip's memory (weights,
gradients, optimizer state, activations, buffers) and whether it fits the chip's HBM.

The model is a workload file (:mod:`tlm.workloads`: a name such as ``llama3-405b`` or a TOML
path); the memory model is :func:`tlm.cluster.memory_per_chip` (Korthikanti et al.'s
activation formulas generalised to GQA, MLA, SwiGLU and MoE; ZeRO 0-3; 1F1B pipelines). The
series is one chip's operators for one micro-batch (GEMM and attention shapes of a layer of
each kind and the output projection). See docs/workloads.md.

Examples
--------
>>> from tlm.studies import run_study
>>> r = run_study("model", model="llama3-405b", dp=64, tp=8, pp=16, zero=1, sp="on",
...               recompute="selective").results
>>> r.chips, round(r.parameters / 1e9, 1), r.fits
(8192, 405.9, True)
>>> round(r.total_bytes / 2**30, 1), round(r.hbm_bytes / 2**30), r.peak_stage
(74.1, 96, 'second')
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ..cluster import DEFAULT_RESERVE_BYTES, RECOMPUTE, hbm_capacity_bytes, memory_per_chip
from ..cluster.layout import Layout
from ..formats import FLOAT_FORMATS
from ..workloads import model_ops
from .preset import PresetInputs
from .protocol import (
    MAX_BYTES,
    MAX_CHIPS,
    MAX_COUNT,
    InputError,
    Inputs,
    Results,
    Study,
    format_field,
    register,
)
from .workload import MODEL_ALLOWED, workload_input

__all__ = [
    "ModelInputs",
    "ModelResults",
    "MemoryResults",
    "OperatorRow",
    "model_study",
    "memory_figures",
]

_FLOATS = tuple(FLOAT_FORMATS)


class RecipeInputs(Inputs):
    """A training layout's inputs, their defaults :class:`tlm.cluster.Layout`'s: ``trnsim
    model`` and ``trnsim train`` share them (a study may give ``dp``, ``tp`` and ``pp`` its own
    defaults)."""

    dp: int = Field(1, ge=1, le=MAX_CHIPS, description="data-parallel size")
    tp: int = Field(1, ge=1, le=MAX_CHIPS, description="tensor-parallel size")
    pp: int = Field(1, ge=1, le=MAX_CHIPS, description="pipeline-parallel size (1F1B)")
    cp: int = Field(
        1, ge=1, le=MAX_CHIPS, description="context-parallel size (splits the sequence)"
    )
    ep: int = Field(1, ge=1, le=MAX_CHIPS, description="expert-parallel size (within dp x cp)")
    zero: int = Field(
        Layout().zero,
        ge=0,
        le=3,
        description="ZeRO stage: 1 optimizer, 2 + gradients, 3 (FSDP) + weights",
    )
    micro_batch: int = Field(
        Layout().micro_batch, ge=1, le=MAX_CHIPS, description="sequences per micro-batch"
    )
    interleave: int = Field(
        Layout().interleave, ge=1, le=MAX_CHIPS, description="virtual pipeline stages per chip"
    )
    sp: Literal["on", "off"] = Field(
        "on" if Layout().sp else "off", description="sequence parallelism"
    )
    recompute: Literal[RECOMPUTE] = Field(
        Layout().recompute, description="activation recomputation"
    )

    def layout(self) -> Layout:
        """These inputs as the cluster model's :class:`~tlm.cluster.Layout`."""
        return Layout(
            dp=self.dp,
            tp=self.tp,
            pp=self.pp,
            cp=self.cp,
            ep=self.ep,
            zero=self.zero,
            micro_batch=self.micro_batch,
            sp=self.sp == "on",
            recompute=self.recompute,
            interleave=self.interleave,
        )


class ModelInputs(RecipeInputs, PresetInputs):
    """Inputs of ``trnsim model``."""

    deprecated = {"weights_format": "format"}

    model: str = Field(
        "llama3-8b",
        description="the model: a workload name or a model TOML file",
        json_schema_extra={"allowed": MODEL_ALLOWED},
    )
    global_batch: int | None = Field(
        None,
        ge=1,
        le=MAX_COUNT,
        description="sequences per step",
        json_schema_extra={"unset": "the model file's"},
    )
    seq_len: int | None = Field(
        None,
        ge=1,
        le=MAX_COUNT,
        description="tokens per sequence",
        json_schema_extra={"unset": "the model file's"},
    )
    format: str = format_field("bf16", _FLOATS, "format of the weights computed on")
    gradients_format: str = format_field("bf16", _FLOATS, "format of the gradients")
    optimizer_format: str = format_field("fp32", _FLOATS, "format of Adam's two moments")
    master_format: str = format_field(
        "fp32", _FLOATS, "format of the master weights (none kept when the weights' own)"
    )
    activations_format: str = format_field("bf16", _FLOATS, "format of stored activations")
    kv_format: str = format_field("bf16", _FLOATS, "format of the KV cache (inference)")
    reserve_bytes: int = Field(
        DEFAULT_RESERVE_BYTES,
        ge=0,
        le=MAX_BYTES,
        description="HBM the runtime keeps for itself (ASSUMED, docs/workloads.md)",
    )

    def workload(self):
        """The model these inputs name."""
        return workload_input(self.model)

    def resolve(self) -> ModelInputs:
        m = self.workload()
        gb = m.global_batch_sequences if self.global_batch is None else self.global_batch
        seq = m.seq_len if self.seq_len is None else self.seq_len
        if gb % (self.dp * self.micro_batch):
            raise InputError(
                "micro_batch",
                self.micro_batch,
                f"a size with dp x micro_batch dividing the global batch of {gb} sequences "
                f"(dp {self.dp})",
            )
        resolved = self.model_copy(update={"global_batch": gb, "seq_len": seq})
        resolved.memory()  # every other check of the configuration
        return resolved

    def memory(self):
        """:func:`tlm.cluster.memory_per_chip` of these (resolved) inputs."""
        return memory_per_chip(
            self.workload(),
            layout=self.layout(),
            global_batch=self.global_batch,
            seq_len=self.seq_len,
            weights=self.format,
            gradients=self.gradients_format,
            optimizer=self.optimizer_format,
            master=self.master_format,
            activations=self.activations_format,
            hbm_bytes=hbm_capacity_bytes(self.spec),
            reserve_bytes=self.reserve_bytes,
        )


class OperatorRow(BaseModel):
    """One operator of one chip for one micro-batch."""

    part: str = Field(description="dense layer, moe layer or the output head")
    op: str
    kind: str = Field(description="gemm or attention")
    batch: int = Field(description="independent products (heads x sequences, local experts)")
    m: int | float = Field(description="rows (tokens; a routed expert's average tokens)")
    n: int
    k: int
    weights: int = Field(description="weight elements this chip holds for it")
    forward_flop: float


class MemoryResults(Results):
    """One chip's memory as a study reports it (``trnsim model``, ``trnsim train``)."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    buffers_bytes: float = Field(description="gathered weights, pipeline buffers, reserve")
    total_bytes: float = Field(description="memory per chip, the peak stage")
    hbm_bytes: float = Field(description="the chip's HBM")
    fits: bool


def memory_figures(row: dict) -> dict:
    """:class:`MemoryResults`' fields from a :meth:`MemoryBreakdown.row`."""
    own = set(MemoryResults.model_fields) - set(Results.model_fields)
    return {k: bool(row[k]) if k == "fits" else row[k] for k in own}


class ModelResults(MemoryResults):
    """The model's facts and one chip's memory; the series: one chip's operators."""

    parameters: int
    active_parameters: int = Field(description="per token: routed experts top-k, no embedding")
    forward_per_token_flop: float = Field(description="model FLOPs, full attention square")
    training_per_token_flop: float = Field(description="forward + backward, no recomputation")
    hardware_per_token_flop: float = Field(description="with the chosen recomputation")
    training_run_flop: float = Field(description="training_per_token x the file's tokens")
    kv_cache_per_token_bytes: float = Field(description="all layers, in --kv-format")
    chips: int = Field(description="dp x tp x pp x cp")
    headroom_bytes: float = Field(description="HBM left; negative: missing")
    peak_stage: str = Field(description="the pipeline stage with the most memory")
    series: list[OperatorRow] = Field(default=[], exclude=True)


def model_study(inputs: ModelInputs) -> ModelResults:
    """The facts of the model and the memory of the configuration."""
    m = inputs.workload()
    seq = inputs.seq_len
    r = inputs.memory()
    row = r.row()
    rows = []
    shape = dict(
        sequences=inputs.micro_batch,
        queries=seq // inputs.cp,
        keys=seq,
        tp=inputs.tp,
        ep=inputs.ep,
    )
    for part, _count, ops in model_ops(m, **shape):
        for op in ops:
            rows.append(
                OperatorRow(
                    part=part,
                    op=op.name,
                    kind=op.kind,
                    batch=op.batch,
                    m=int(op.m) if float(op.m).is_integer() else float(op.m),
                    n=op.n,
                    k=op.k,
                    weights=op.weights,
                    forward_flop=op.flop,
                )
            )
    training = float(m.training_flop_per_token(seq))
    return ModelResults(
        parameters=m.parameters,
        active_parameters=m.active_parameters,
        forward_per_token_flop=float(m.forward_flop_per_token(seq)),
        training_per_token_flop=training,
        hardware_per_token_flop=float(m.training_flop_per_token(seq, inputs.recompute)),
        training_run_flop=training * m.tokens,
        kv_cache_per_token_bytes=float(m.kv_cache_per_token_bytes(inputs.kv_format)),
        chips=inputs.dp * inputs.tp * inputs.pp * inputs.cp,
        **memory_figures(row),
        headroom_bytes=row["hbm_bytes"] - row["total_bytes"],
        peak_stage=_stage_name(int(row["stage"]), inputs.pp),
        series=rows,
    )


def _stage_name(stage: int, pp: int) -> str:
    """The peak pipeline stage in words: first, second or last (the only candidates)."""
    if stage == pp - 1 and pp > 1:
        return "last"
    return ("first", "second")[stage]


STUDY = register(
    Study(
        "model",
        ModelInputs,
        model_study,
    )
)
