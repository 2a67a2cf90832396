"""The training model against published training runs: every row's error, few parameters fitted.

The published runs are the ``[[run]]`` records of the model files (:mod:`tlm.workloads`), each
with its source: the Megatron-LM SC'21 weak-scaling table (Narayanan et al. 2021, Table 1:
achieved teraFLOP/s per A100, 1.7B to 1T parameters on 32 to 3,072 GPUs), Korthikanti et al.
2022 (Table 5: step times of 22B to 1T with full recomputation, and with sequence parallelism
and selective recomputation) and Llama 3 405B on H100 (Dubey et al. 2024, Table 4: achieved
BF16 teraFLOP/s per GPU). A run is modelled with its published layout on the hardware file of
its chip (``a100-80gb`` runs on :file:`tlm/hardware/a100.toml`, ``h100`` on
``h100.toml``); what a paper does not give is ASSUMED and listed in docs/validation.md
(:data:`ASSUMED_LAYOUT`).

At most two parameters per accelerator are calibrated, physical and named
(:meth:`OpCosts.for_hardware`; no chip TLM exists for a GPU): ``efficiency``, the fraction of
the chip's dense peak its large matrix products reach, and ``call_s``, what each GEMM kernel
costs beyond that (launch, prologue, the last wave's tail). :func:`fit` fits them on the ``fit``
rows of that accelerator (:data:`FIT`: least squares of the relative step-time error, the
model linearised in ``1 / efficiency`` and ``call_s`` and solved twice);
tools/calibrate_training.py writes them into the hardware files (``gemm_efficiency``,
``gemm_call_s``), so the **shipped** model - the hardware files as they are, what ``trnsim
train`` runs - is the calibrated one, and a test fails when the two drift apart. Every other
row is judged: its error (``model / published - 1`` of the published quantity: FLOP/s per
chip or the step time), and the mean and max over the judged rows. Each row also says whether
its published layout fits the chip's memory in the model (a row that does not is counted).

Examples
--------
>>> v = validate_training()
>>> sorted(v.parameters)
['a100', 'h100']
>>> len(v.rows) > 15, v.judged_errors().size == len(v.rows) - sum(len(f) for f in FIT.values())
(True, True)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ..cluster.layout import Layout
from ..cluster.memory import memory_per_chip
from ..cluster.network import Network
from ..cluster.training import overlap_tp_for, training_step
from ..costs import OpCosts
from ..hardware import load_hardware
from ..workloads import load_model, model_names
from .row import TrainingDetail, ValidationRow

__all__ = [
    "TrainingValidation",
    "validate_training",
    "FIT",
    "PARAMETERS",
    "HARDWARE_FIGURES",
    "ATTENTION",
    "fit",
    "ASSUMED_LAYOUT",
]

#: The published chip names of the runs and the hardware files that model them.
CHIPS = {"a100-80gb": "a100", "h100": "h100", "trn1": "trn1"}
#: Rows that calibrate each accelerator: (model, run index in the file). On the A100 the
#: smallest and a large model of each table; on the H100 the first Llama 3 run.
FIT = {
    "a100": (
        ("megatron-1.7b", 0),
        ("megatron-145b", 0),
        ("megatron-22b", 1),
        ("megatron-530b", 2),
    ),
    "h100": (("llama3-405b", 0),),
}
#: The parameters fitted per accelerator (one Llama 3 row can fix only one: the H100 keeps
#: ``call_s`` at its default).
PARAMETERS = {"a100": ("efficiency", "call_s"), "h100": ("efficiency",)}
#: Where each parameter is shipped: its figure in a hardware file's ``[chip]``.
HARDWARE_FIGURES = {"efficiency": "gemm_efficiency", "call_s": "gemm_call_s"}
#: How each source's framework computed attention: Megatron-LM's fused softmax of 2021-22
#: wrote the scores to HBM; Llama 3 (2024) used flash attention. ASSUMED from the papers' dates
#: and code (neither table states it).
ATTENTION = {
    "MEGATRON": "materialised",
    "KORTHIKANTI": "materialised",
    "LLAMA3": "flash",
    # neuronx-distributed's Llama examples (SDK 2.19 on) call Neuron's NKI flash kernel,
    # causal (nki_flash_attn_func, causal=True): tp_zero1_llama_hf_pretrain.py defaults
    # --use_flash_attention to 1 (Llama 2 7B at 2.21, 3aa65c6; Llama 3.1 8B at 2.24, c9ee222),
    # run_llama3_70B_tp_pp.sh passes 1; run_llama_nxd.py defaults to 0, so the Llama 2 13B
    # and 70B scripts (which pass nothing) run CoreAttention: their records say so. The
    # NeMo port of 2023 (SDK 2.13) predates the kernel
    "NEURON_NXD": "flash",
    "NEURON_NEMO": "materialised",
}
#: Layout choices the papers do not print, ASSUMED for every run of a source that does not
#: give them. Megatron-LM (2021-22): micro-batch 1, no interleaving, no sequence parallelism
#: unless the row says so, the optimizer sharded (distributed optimizer), the data-parallel
#: reduction after the backward pass (not overlapped). Llama 3: FSDP sharding gradients and
#: optimizer state (ZeRO-2), the reduction overlapped with the backward pass, and an
#: interleaved pipeline schedule whose depth the paper does not give: 8 virtual stages per
#: chip (a layer each; the first stage's first and the last stage's last hold the embedding
#: and the output layer, Meta's "one layer fewer" on those stages), the only depth dividing
#: the 8 slots of a stage that fits 80 GB without activation checkpointing (the paper's
#: claim; 1 fits, not interleaved; 2 and 4 do not). The H100 rows are sensitive to it
#: (docs/validation.md).
ASSUMED_LAYOUT = {
    "MEGATRON": {
        "micro_batch": 1,
        "interleave": 1,
        "sequence_parallel": False,
        "zero": 1,
        "overlap_dp": False,
        "grad_acc": "bf16",
    },
    "KORTHIKANTI": {
        "micro_batch": 1,
        "interleave": 1,
        "sequence_parallel": False,
        "zero": 1,
        "overlap_dp": False,
        "grad_acc": "bf16",
    },
    "LLAMA3": {
        "micro_batch": 1,
        "interleave": 8,
        "sequence_parallel": True,
        "zero": 2,
        "overlap_dp": True,
        "grad_acc": "bf16",
    },
    # Neuron's NxD recipes, as neuronx-distributed's example scripts at the SDK 2.21 release
    # (3aa65c6, 2024-12-19) run: the ZeRO-1 optimizer, no interleaving; the gradients reduced
    # in `optimizer.step()`, after the last micro-batch's graph (`xm.mark_step()`), so not
    # behind its backward pass; `--use_gpu_compatible_precision` (default 1 in
    # run_llama_nxd.py and tp_zero1_llama_hf_pretrain.py, no script sets 0):
    # `use_fp32_grad_acc`, whose hook adds each micro-batch's gradients into an fp32 buffer,
    # and `higher_cc_precision`, their reduce-scatter in fp32 (trainer.py)
    "NEURON_NXD": {
        "micro_batch": 1,
        "interleave": 1,
        "sequence_parallel": True,
        "zero": 1,
        "overlap_dp": False,
        "grad_acc": "fp32",
    },
    # neuronx-nemo-megatron (2023): ZeRO-1, the reduction overlapped (ASSUMED, not checked)
    "NEURON_NEMO": {
        "micro_batch": 1,
        "interleave": 1,
        "sequence_parallel": True,
        "zero": 1,
        "overlap_dp": True,
        "grad_acc": "bf16",
    },
}


@dataclass(frozen=True)
class TrainingValidation:
    """Every row, and the fitted parameters per hardware file (``{"a100": {"efficiency":
    0.7, "call_s": 2e-5}}``)."""

    rows: tuple[ValidationRow, ...]
    parameters: dict

    def judged_errors(self) -> np.ndarray:
        """Absolute errors of the judged rows."""
        return np.array([abs(r.calibrated_error_fraction) for r in self.rows if r.role == "judge"])

    def refused(self) -> tuple[ValidationRow, ...]:
        """Rows whose published layout the memory model says does not fit the chip."""
        return tuple(r for r in self.rows if not r.detail.fits)

    def errors(self, role: str | None = None) -> np.ndarray:
        """Absolute errors of the rows of ``role`` (all rows by default)."""
        return np.array(
            [abs(r.calibrated_error_fraction) for r in self.rows if role in (None, r.role)]
        )


def _runs():
    """(model, run index, run) of every published run on a chip the validation models."""
    out = []
    for name in model_names():
        m = load_model(name)
        for i, run in enumerate(m.runs):
            measured = (run.step_time_s, run.achieved_flop_per_s_per_chip, run.sequences_per_s)
            if run.chip in CHIPS and any(x is not None for x in measured):
                out.append((m, i, run))
    return out


def _family(run) -> str:
    """The source family of a run (its first source key)."""
    return run.source.split()[0]


def _layout(run) -> dict:
    assumed = ASSUMED_LAYOUT[_family(run)]
    pick = lambda v, key: assumed[key] if v is None else v  # noqa: E731
    layout = Layout(
        dp=run.dp,
        tp=run.tp,
        pp=run.pp,
        cp=run.cp,
        ep=run.ep,
        micro_batch=pick(run.micro_batch, "micro_batch"),
        interleave=pick(run.interleave, "interleave"),
        sp=pick(run.sequence_parallel, "sequence_parallel"),
        recompute=run.recompute or "none",
        zero=assumed["zero"],
        attention=run.attention or ATTENTION[_family(run)],
    )
    return dict(
        layout=layout,
        overlap_dp=assumed["overlap_dp"],
        grad_acc=assumed["grad_acc"],
        global_batch=run.global_batch_sequences,
        seq_len=run.seq_len,
    )


@lru_cache(maxsize=4)
def _hardware(name: str):
    hw = load_hardware(name)
    return hw, Network.for_hardware(hw)


def _model_time(m, run, hw_name: str, params: dict | None) -> float:
    """The run's step time on the model with ``params`` (None: the defaults)."""
    hw, network = _hardware(hw_name)
    costs = OpCosts.for_hardware(hw, **(params or {}))
    model = m if run.vocab is None else replace(m, vocab=run.vocab)
    step = training_step(model, costs, network, overlap_tp=overlap_tp_for(hw), **_layout(run))
    return float(step.step_s), float(step.hardware_flop_per_step / step.chips)


def _memory(m, run, hw_name: str):
    """The run's memory per chip in the model (:class:`tlm.cluster.memory.MemoryBreakdown`)."""
    hw, _ = _hardware(hw_name)
    model = m if run.vocab is None else replace(m, vocab=run.vocab)
    lay = _layout(run)
    return memory_per_chip(
        model,
        lay["layout"],
        global_batch=lay["global_batch"],
        seq_len=lay["seq_len"],
        gradients=lay["grad_acc"],
        hbm_bytes=hw.hbm_bytes,
    )


def _model_value(m, run, hw_name: str, params: dict | None) -> float:
    """The run's published quantity as the model gives it: the step time, the whole job's
    sequences per second, or the achieved FLOP/s per chip as the papers count it (hardware
    FLOPs: recomputation included)."""
    seconds, flop = _model_time(m, run, hw_name, params)
    if run.step_time_s is not None:
        return seconds
    if run.sequences_per_s is not None:
        return run.global_batch_sequences / seconds
    return flop / seconds


def _published(run) -> tuple[str, float]:
    if run.step_time_s is not None:
        return "step_time_s", run.step_time_s
    if run.sequences_per_s is not None:
        return "sequences_per_s", run.sequences_per_s
    return "flop_per_s_per_chip", run.achieved_flop_per_s_per_chip


def _published_time(m, run, hw_name: str) -> float:
    """The published figure as a step time (a throughput: the batch over it; a FLOP/s figure:
    the model's hardware FLOPs over it)."""
    if run.step_time_s is not None:
        return run.step_time_s
    if run.sequences_per_s is not None:
        return run.global_batch_sequences / run.sequences_per_s
    _, flop = _model_time(m, run, hw_name, None)
    return flop / run.achieved_flop_per_s_per_chip


def fit(hw_name: str) -> dict:
    """The parameters of :data:`PARAMETERS` for accelerator ``hw_name`` fitted on its
    :data:`FIT` rows (``{"efficiency": 0.64}``)."""
    keys = FIT[hw_name]
    rows = [(m, run) for m, i, run in _runs() if (m.name, i) in keys]
    if len(rows) != len(keys):
        raise ValueError(f"FIT names runs of {hw_name} that are not in the model files")
    return _fit(hw_name, rows)


def _fit(hw_name: str, rows) -> dict:
    """The parameters of :data:`PARAMETERS` minimising the relative step-time error over the
    fit rows: each row's time linearised as ``A + G / efficiency + N x call_s`` around the
    current point (finite differences), the linear least squares solved, twice."""
    names = PARAMETERS[hw_name]
    point = {"efficiency": 0.75, "call_s": 2e-5}
    targets = np.array([_published_time(m, run, hw_name) for m, run in rows])
    for _ in range(2):
        base = {k: point[k] for k in names}
        t0 = np.array([_model_time(m, run, hw_name, base)[0] for m, run in rows])
        columns = []
        x = 1 / point["efficiency"]
        bumped = {**base, "efficiency": 1 / (x * 1.05)}
        t1 = np.array([_model_time(m, run, hw_name, bumped)[0] for m, run in rows])
        columns.append((t1 - t0) / (0.05 * x))  # d t / d (1 / efficiency)
        if "call_s" in names:
            bumped = {**base, "call_s": point["call_s"] + 1e-5}
            t2 = np.array([_model_time(m, run, hw_name, bumped)[0] for m, run in rows])
            columns.append((t2 - t0) / 1e-5)
        # t = t0 + J (p - p0); minimise sum ((t - T) / T)^2 over p
        J = np.column_stack(columns) / targets[:, None]
        p0 = np.array([x] + ([point["call_s"]] if "call_s" in names else []))
        rhs = (targets - t0) / targets + J @ p0
        p, *_ = np.linalg.lstsq(J, rhs, rcond=None)
        point["efficiency"] = float(np.clip(1 / p[0], 0.05, 1.0))
        if "call_s" in names:
            point["call_s"] = float(max(p[1], 0.0))
    return {
        "efficiency": round(point["efficiency"], 4),
        **({"call_s": round(point["call_s"], 8)} if "call_s" in names else {}),
    }


def validate_training() -> TrainingValidation:
    """Fit ``gemm_efficiency`` per accelerator on its :data:`FIT` rows; model every run."""
    runs = _runs()
    parameters = {hw_name: fit(hw_name) for hw_name in FIT}
    rows = []
    for m, i, run in runs:
        hw_name = CHIPS[run.chip]
        quantity, published = _published(run)
        lay = _layout(run)["layout"]
        memory = _memory(m, run, hw_name)
        layout = (
            f"tp{run.tp} pp{run.pp} dp{run.dp}"
            + (f" cp{run.cp}" if run.cp > 1 else "")
            + f" mb{lay.micro_batch} {lay.recompute}"
            + (" sp" if lay.sp else "")
        )
        rows.append(
            ValidationRow(
                suite="training",
                section=f"{run.source.split()[0]} on {hw_name}",
                case=f"{m.name} {layout}",
                system=hw_name,
                quantity=quantity,
                role="fit" if (m.name, i) in FIT.get(hw_name, ()) else "judge",
                published=published,
                shipped=_model_value(m, run, hw_name, None),  # the hardware file's figures
                calibrated=_model_value(m, run, hw_name, parameters.get(hw_name)),
                source=run.source,
                detail=TrainingDetail(
                    model=m.name,
                    run=i,
                    layout=layout,
                    note=run.note,
                    memory_bytes=float(memory.total_bytes),
                    hbm_bytes=float(memory.hbm_bytes),
                ),
            )
        )
    return TrainingValidation(rows=tuple(rows), parameters=parameters)
