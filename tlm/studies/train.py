"""``trnsim train``: a model trained on ``--chips`` chips of a ``--hardware`` with one parallel
layout - the step time and where it goes, MFU and HFU, tokens/s, memory per chip, and the run:
time to train with goodput under failures, power, energy, owned and cloud cost.

The step is :func:`tlm.cluster.training.training_step` on the hardware's operator costs
(:class:`tlm.costs.OpCosts`: the chip TLM's calibrated GEMMs for a Trainium preset, a stated
roofline for a GPU) and its network (:class:`tlm.cluster.network.Network`: each group's
collectives on its real sub-topology); goodput, power and cost are ``trnsim cost``'s
(:func:`tlm.studies.cost.run_figures`). ``--dp`` unset is ``chips / (tp x pp x cp)``;
``--search time`` (or ``cost``) takes the layout the strategy search finds on ``--chips``
instead of the one given. A layout that does not fit the chip's HBM is an error naming the
shortfall and the largest part. The series: the step's parts (they add up to the step). See
docs/cluster.md.

Examples
--------
>>> from tlm.studies import run_study
>>> r = run_study("train", model="llama3-70b", chips=1024, tp=16, pp=4).results
>>> r.dp, r.fits, 0.2 < r.mfu_fraction < 0.7
(16, True, True)
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ..cluster.memory import DoesNotFit
from ..cluster.training import GRAD_ACC, PARTS, overlap_tp_for, training_step
from .cost import ClusterInputs, RunResults, run_figures
from .model import MemoryResults, RecipeInputs, memory_figures
from .protocol import (
    MAX_CHIPS,
    MAX_COUNT,
    PLOT_ALLOWED,
    InputError,
    Study,
    figure,
    format_field,
    plot_path,
    register,
)

__all__ = [
    "FabricInputs",
    "TrainInputs",
    "TrainResults",
    "PartRow",
    "train_study",
    "GEMM_FORMATS",
    "DEFAULT_SITE_BANDWIDTH_BPS",
]

#: Formats the GEMMs may run in (the tensor engine's; activations stay bf16).
GEMM_FORMATS = ("bf16", "fp8_e4m3")
#: What each MFU figure counts (:class:`tlm.cluster.training.TrainingStep`): printed with them.
FLOP_COUNT = (
    "mfu: attention over the whole square of queries and keys (Megatron-LM's count); "
    "causal mfu: only the keys at or before each query"
)
#: Bandwidth between two neighbouring sites, each way: ASSUMED 12.5 TB/s (100 Tb/s, a few
#: hundred 400G wavelengths); no figure is published for Project Rainier's sites.
DEFAULT_SITE_BANDWIDTH_BPS = 12.5e12


class FabricInputs(ClusterInputs):
    """What the training studies add to the cluster inputs: the sites the chips span, and how
    each micro-batch's gradients join the step's (one field for ``train`` and ``train-search``,
    passed to the step by :meth:`step_settings`)."""

    sites: int = Field(1, ge=1, le=64, description="data centres the chips are spread over")
    site_bandwidth_Bps: float = Field(
        DEFAULT_SITE_BANDWIDTH_BPS,
        gt=0,
        description="between two neighbouring sites, each way (ASSUMED: none is published)",
    )
    site_latency_s: float = Field(
        0.0, ge=0, description="added to each collective step that crosses a site"
    )
    grad_acc: Literal[GRAD_ACC] = Field(
        "bf16",
        description="gradients accumulated in place in bf16 by the weight-gradient GEMMs, or "
        "added into an fp32 buffer by a pass of their own each micro-batch and reduced in fp32 "
        "(neuronx-distributed's --use_gpu_compatible_precision, its scripts' default)",
    )

    def settings(self) -> tuple:
        """The network's settings (:data:`tlm.cluster.search.NETWORK_SETTINGS`)."""
        return (
            ("oversubscription", self.oversubscription),
            ("sites", self.sites),
            ("site_bandwidth_Bps", self.site_bandwidth_Bps),
            ("site_latency_s", self.site_latency_s),
        )

    def step_settings(self) -> tuple:
        """The step's settings these inputs fix (``training_step``'s keywords, as the search's
        :func:`tlm.cluster.search.evaluate` takes them)."""
        return (("grad_acc", self.grad_acc),)


class TrainInputs(RecipeInputs, FabricInputs):
    """Inputs of ``trnsim train``."""

    deprecated = {**FabricInputs.deprecated, "gemm_format": "format"}

    dp: int | None = Field(
        None,
        ge=1,
        le=MAX_CHIPS,
        description="data-parallel size",
        json_schema_extra={"unset": "chips / (tp x pp x cp)"},
    )
    tp: int = Field(
        16, ge=1, le=MAX_CHIPS, description="tensor-parallel size (sequence parallel with --sp on)"
    )
    pp: int = Field(8, ge=1, le=MAX_CHIPS, description="pipeline-parallel size (1F1B)")
    overlap_dp: Literal["on", "off"] = Field(
        "on", description="hide the gradients' reduction behind the last backward pass"
    )
    overlap_tp: Literal["off", "backward", "on"] | None = Field(
        None,
        description="tensor-parallel collectives hidden behind GEMMs: none; the backward "
        "pass's behind the weight-gradient GEMMs (Megatron-LM's asynchronous backward, "
        "Neuron's collective cores); or every pass's all-gathers and reduce-scatters, chunked "
        "(Megatron-LM's --tp-comm-overlap)",
        json_schema_extra={"unset": "backward on Trainium, off on GPUs"},
    )
    overlap_ep: Literal["on", "off"] = Field(
        "off",
        description="hide the MoE all-to-alls behind another micro-batch's compute (DualPipe)",
    )
    format: str = format_field("bf16", GEMM_FORMATS, "format the GEMMs run in")
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
    search: Literal["off", "time", "cost"] = Field(
        "off",
        description="pick the layout by searching every layout on --chips: the fastest or "
        "cheapest that fits (the layout inputs become the one found)",
    )
    plot: str | None = Field(
        None,
        description="write the step-time breakdown as a figure",
        json_schema_extra={"allowed": PLOT_ALLOWED},
    )

    def resolve(self) -> TrainInputs:
        self.device()
        self.workload()
        me = self.model_copy(update=self.resolved_resilience(self.chips))
        if me.overlap_tp is None:
            me = me.model_copy(update={"overlap_tp": overlap_tp_for(self.device())})
        return (me._searched() if me.search != "off" else me)._resolve_layout()

    def _resolve_layout(self) -> TrainInputs:
        m = self.workload()
        inner = self.tp * self.pp * self.cp
        if self.chips % inner:
            raise InputError(
                "chips",
                self.chips,
                f"a multiple of tp x pp x cp = {inner} (tp {self.tp}, pp {self.pp}, cp {self.cp})",
            )
        dp = self.chips // inner if self.dp is None else self.dp
        if dp * inner != self.chips:
            raise InputError("dp", dp, f"chips / (tp x pp x cp) = {self.chips // inner}, or unset")
        plot_path("plot", self.plot)
        gb = m.global_batch_sequences if self.global_batch is None else self.global_batch
        seq = m.seq_len if self.seq_len is None else self.seq_len
        resolved = self.model_copy(update={"dp": dp, "global_batch": gb, "seq_len": seq})
        step = resolved.step()  # the layout's own checks (the memory model's), by input
        try:
            step.memory.check()
        except DoesNotFit as error:
            raise InputError(
                "tp",
                self.tp,
                "a layout that fits the chip's HBM (more tp, pp or cp, a higher --zero, a "
                "smaller --micro-batch, more --recompute; or --search time)",
                str(error),
            ) from None
        return resolved

    def _searched(self) -> TrainInputs:
        """These inputs with the layout the search picks (``search`` stays on, so the
        contract reruns the same search)."""
        from ..cluster.search import AXES, NoValidLayout
        from ..cluster.search import search as run_search

        m = self.workload()
        options = [
            ("overlap_dp", self.overlap_dp == "on"),
            ("overlap_tp", self.overlap_tp),
            ("overlap_ep", self.overlap_ep == "on"),
            ("fmt", self.format),
            *self.step_settings(),
            *self.settings(),
        ]
        if self.global_batch is not None:
            options.append(("global_batch", self.global_batch))
        if self.seq_len is not None:
            options.append(("seq_len", self.seq_len))
        try:
            best = run_search(
                m, self.device(), [self.chips], settings=tuple(options), scheduler="inline"
            ).best(self.search)
        except NoValidLayout as error:
            raise InputError(
                "chips", self.chips, "a chip count with a layout that fits", str(error)
            ) from None
        layout = {k: best[k] for k in AXES[1:]}  # the layout, chips aside
        layout["sp"] = "on" if best["tp"] > 1 else "off"
        # a layout input the user gave that the search would replace: refused, not overridden
        # silently (the same value, as a rerun of the resolved inputs gives, is fine)
        for name in sorted(self.model_fields_set & set(layout)):
            if getattr(self, name) != layout[name]:
                raise InputError(
                    name,
                    getattr(self, name),
                    f"{layout[name]}, the value --search {self.search} found, or left out "
                    "(the search picks the layout)",
                )
        return self.model_copy(update=layout)

    def engines(self):
        """The chip's operator costs and the cluster's network at these inputs."""
        from ..cluster.search import engines

        try:
            return engines(self.device(), self.settings(), self.chips)
        except ValueError as error:
            raise InputError(
                "sites",
                self.sites,
                "a number of sites the chips split into whole, aligned blocks of nodes",
                str(error),
            ) from None

    def step(self):
        """:func:`training_step` of these (resolved) inputs; a configuration that is not
        valid raises :class:`InputError` naming the input at fault."""
        costs, network = self.engines()
        try:
            return training_step(
                self.workload(),
                costs,
                network,
                layout=self.layout(),
                overlap_dp=self.overlap_dp == "on",
                overlap_tp=self.overlap_tp,
                overlap_ep=self.overlap_ep == "on",
                grad_acc=self.grad_acc,
                global_batch=self.global_batch,
                seq_len=self.seq_len,
                fmt=self.format,
                hbm_bytes=self.device().hbm_bytes,
            )
        except ValueError as error:
            raise _layout_error(self, str(error)) from None


def _layout_error(inputs: TrainInputs, text: str) -> InputError:
    """The memory model's message ``"NAME must be ALLOWED, not VALUE"`` as the input's error
    (a rule over several inputs, ``dp x micro_batch ...``, is charged to the first named)."""
    name = text.split(" ", 1)[0]
    field = name if name in type(inputs).model_fields else "micro_batch"
    allowed = text.removeprefix(f"{name} must be ").rpartition(", not ")[0] or text
    return InputError(field, getattr(inputs, field), allowed)


class PartRow(BaseModel):
    """One part of the step."""

    part: str
    time_s: float
    share_fraction: float


class TrainResults(RunResults, MemoryResults):
    """The step, its breakdown, the memory per chip and the run's goodput, power and cost;
    the series: the step's parts."""

    dp: int
    step_s: float
    compute_s: float
    recompute_s: float
    tp_comm_s: float = Field(description="exposed tensor-parallel collectives")
    cp_comm_s: float = Field(description="context-parallel K/V exchange not hidden")
    ep_comm_s: float = Field(description="expert-parallel all-to-alls")
    pp_comm_s: float = Field(description="pipeline sends on the critical path")
    bubble_s: float = Field(description="pipeline fill and drain")
    dp_comm_s: float = Field(description="exposed data-parallel gradient/weight traffic")
    optimizer_s: float
    micro_batches: int
    tokens_per_s: float
    mfu_fraction: float = Field(
        description="model FLOPs / (step x chips x dense peak); attention over the whole "
        "square of queries and keys, as Megatron-LM and the papers count it"
    )
    causal_mfu_fraction: float = Field(
        description="the same with causal attention's FLOPs (keys at or before each query)"
    )
    hfu_fraction: float = Field(description="with recomputation's FLOPs")
    flop_count: str = Field(description="the FLOP count each MFU figure uses")
    steps: int = Field(description="the model file's tokens / tokens per step")
    train_days: float = Field(description="wall time of the run with goodput, days")
    costs_source: str = Field(description="where the operator costs come from")
    series: list[PartRow] = Field(default=[], exclude=True)


def train_study(inputs: TrainInputs) -> TrainResults:
    """The step, then the run over it."""
    step = inputs.step()
    r = step.row()
    m = inputs.workload()
    steps = max(1, round(m.tokens / (inputs.global_batch * inputs.seq_len)))
    figures, _causes = run_figures(inputs, r["step_s"], steps)
    parts = [
        PartRow(part=p, time_s=r[p + "_s"], share_fraction=r[p + "_s"] / r["step_s"]) for p in PARTS
    ]
    mem = r["memory"]
    results = TrainResults(
        **figures,
        dp=inputs.dp,
        **{p + "_s": r[p + "_s"] for p in PARTS},
        step_s=r["step_s"],
        micro_batches=round(r["micro_batches"]),
        tokens_per_s=r["tokens_per_s"],
        mfu_fraction=r["mfu"],
        causal_mfu_fraction=r["causal_mfu"],
        hfu_fraction=r["hfu"],
        flop_count=FLOP_COUNT,
        steps=steps,
        train_days=figures["run_wall_s"] / 86400,
        **memory_figures(mem),
        costs_source=r["costs_source"],
        series=parts,
    )
    if inputs.plot is not None:
        write_breakdown(inputs, results)
    return results


def write_breakdown(inputs: TrainInputs, results: TrainResults) -> Path:
    """The step's parts as one stacked bar (matplotlib; the format by suffix)."""
    with figure(inputs.plot, figsize=(9, 2.6), save={"bbox_inches": "tight"}) as (fig, ax):
        left = 0.0
        for row in results.series:
            if row.time_s <= 0:
                continue
            ax.barh([0], [row.time_s], left=[left], label=f"{row.part} {row.share_fraction:.0%}")
            left += row.time_s
        ax.set_yticks([])
        ax.set_xlabel("seconds per step")
        ax.set_title(
            f"{inputs.model} on {inputs.chips} {inputs.hardware}: dp {inputs.dp} tp {inputs.tp} "
            f"pp {inputs.pp} cp {inputs.cp} ep {inputs.ep}, MFU {results.mfu_fraction:.1%}"
        )
        ax.legend(ncol=5, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.35))
    return Path(inputs.plot)


STUDY = register(
    Study(
        "train",
        TrainInputs,
        train_study,
    )
)
