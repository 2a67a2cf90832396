"""The training model against published training runs: every row's error, few parameters fitted.

The published runs are the ``[[run]]`` records of the model files (:mod:`tlm.workloads`), each
with its source: the Megatron-LM SC'21 weak-scaling table (Narayanan et al. 2021, Table 1:
achieved teraFLOP/s per A100, 1.7B to 1T parameters on 32 to 3,072 GPUs), Korthikanti et al.
2022 (Table 5: step times of 22B to 1T with full recomputation, and with sequence parallelism
and selective recomputation) and Llama 3 405B on H100 (Dubey et al. 2024, Table 4: achieved
BF16 teraFLOP/s per GPU). A run is modelled with its published layout on the hardware file of
its chip (``a100-80gb`` runs on :file:`tlm/cluster/hardware/a100.toml`, ``h100`` on
``h100.toml``); what a paper does not give is ASSUMED and listed in docs/validation.md
(:data:`ASSUMED_LAYOUT`).

One parameter per accelerator is calibrated, physical and named: ``gemm_efficiency``, the
fraction of the chip's dense peak its large matrix products reach (:meth:`OpCosts.for_hardware`;
no chip TLM exists for a GPU). It is fitted on the ``fit`` rows of that accelerator (named in
:data:`FIT`), every other row is judged: its error (``model / published - 1`` of the published
quantity: FLOP/s per chip or the step time), and the mean and max over the judged rows.

Examples
--------
>>> v = validate_training()
>>> sorted(v.efficiency)
['a100', 'h100']
>>> len(v.rows) > 15, v.judged_errors().size == len(v.rows) - sum(len(f) for f in FIT.values())
(True, True)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ..cluster.hardware import load_hardware
from ..cluster.network import Network
from ..cluster.training import training_step
from ..costs import OpCosts
from ..workloads import load_model, model_names

__all__ = ["TrainingRow", "TrainingValidation", "validate_training", "FIT", "ASSUMED_LAYOUT"]

#: The published chip names of the runs and the hardware files that model them.
CHIPS = {"a100-80gb": "a100", "h100": "h100"}
#: Rows that calibrate each accelerator's ``gemm_efficiency``: (model, run index in the file).
#: One mid-size row of each table on the A100; the smallest Llama 3 run on the H100.
FIT = {
    "a100": (("megatron-145b", 0), ("megatron-22b", 1)),
    "h100": (("llama3-405b", 0),),
}
#: Layout choices the papers do not print, ASSUMED for every run that does not give them.
ASSUMED_LAYOUT = {
    "micro_batch": 1,
    "interleave": 1,
    "sequence_parallel": False,
    "zero": 1,
    "overlap_dp": False,
}
_SEARCH = (0.3, 1.0)


@dataclass(frozen=True)
class TrainingRow:
    """One published run against the model."""

    model: str
    run: int
    hardware: str
    layout: str
    quantity: str
    published: float
    shipped: float
    modelled: float
    role: str
    source: str
    note: str

    @property
    def error(self) -> float:
        """``modelled / published - 1`` (calibrated)."""
        return self.modelled / self.published - 1

    @property
    def shipped_error(self) -> float:
        """``shipped / published - 1``: the hardware's default efficiency, nothing fitted."""
        return self.shipped / self.published - 1


@dataclass(frozen=True)
class TrainingValidation:
    """Every row, and the fitted ``gemm_efficiency`` per hardware file."""

    rows: tuple[TrainingRow, ...]
    efficiency: dict

    def judged_errors(self) -> np.ndarray:
        """Absolute errors of the judged rows."""
        return np.array([abs(r.error) for r in self.rows if r.role == "judge"])

    def errors(self, role: str | None = None) -> np.ndarray:
        """Absolute errors of the rows of ``role`` (all rows by default)."""
        return np.array([abs(r.error) for r in self.rows if role in (None, r.role)])


def _runs():
    """(model, run index, run) of every published run on a chip the validation models."""
    out = []
    for name in model_names():
        m = load_model(name)
        for i, run in enumerate(m.runs):
            if run.chip in CHIPS and (
                run.step_time_s is not None or run.achieved_flop_per_s_per_chip is not None
            ):
                out.append((m, i, run))
    return out


def _layout(run) -> dict:
    pick = lambda v, key: ASSUMED_LAYOUT[key] if v is None else v  # noqa: E731
    return dict(
        dp=run.dp,
        tp=run.tp,
        pp=run.pp,
        cp=run.cp,
        ep=run.ep,
        micro_batch=pick(run.micro_batch, "micro_batch"),
        interleave=pick(run.interleave, "interleave"),
        sp=pick(run.sequence_parallel, "sequence_parallel"),
        recompute=run.recompute or "none",
        zero=ASSUMED_LAYOUT["zero"],
        overlap_dp=ASSUMED_LAYOUT["overlap_dp"],
        global_batch=run.global_batch_sequences,
        seq_len=run.seq_len,
    )


@lru_cache(maxsize=4)
def _hardware(name: str):
    hw = load_hardware(name)
    return hw, Network.for_hardware(hw)


def _model_value(m, run, hw_name: str, efficiency: float | None) -> float:
    """The run's published quantity as the model gives it with ``efficiency`` (None: the
    default of :meth:`OpCosts.for_hardware`)."""
    hw, network = _hardware(hw_name)
    extra = {} if efficiency is None else {"efficiency": efficiency}
    costs = OpCosts.for_hardware(hw, **extra)
    model = m if run.vocab is None else replace(m, vocab=run.vocab)
    step = training_step(model, costs, network, **_layout(run))
    if run.step_time_s is not None:
        return float(step.step_s)
    # achieved FLOP/s as the papers count it: hardware FLOPs (recomputation included)
    return float(step.hardware_flop_per_step / (step.step_s * step.chips))


def _published(run) -> tuple[str, float]:
    if run.step_time_s is not None:
        return "step_time_s", run.step_time_s
    return "flop_per_s_per_chip", run.achieved_flop_per_s_per_chip


def _fit(hw_name: str, rows) -> float:
    """``gemm_efficiency`` minimising the squared log error over the fit rows (golden
    section: the error is smooth and unimodal in the efficiency)."""

    def loss(e):
        total = 0.0
        for m, run in rows:
            quantity, published = _published(run)
            total += np.log(_model_value(m, run, hw_name, e) / published) ** 2
        return total

    lo, hi = _SEARCH
    g = (np.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = loss(a), loss(b)
    for _ in range(40):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = loss(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = loss(b)
    return round((lo + hi) / 2, 4)


def validate_training() -> TrainingValidation:
    """Fit ``gemm_efficiency`` per accelerator on its :data:`FIT` rows; model every run."""
    runs = _runs()
    efficiency = {}
    for hw_name, keys in FIT.items():
        fit_rows = [(m, run) for m, i, run in runs if (m.name, i) in keys]
        if len(fit_rows) != len(keys):
            raise ValueError(f"FIT names runs of {hw_name} that are not in the model files")
        efficiency[hw_name] = _fit(hw_name, fit_rows)
    rows = []
    for m, i, run in runs:
        hw_name = CHIPS[run.chip]
        quantity, published = _published(run)
        lay = _layout(run)
        layout = (
            f"tp{run.tp} pp{run.pp} dp{run.dp}"
            + (f" cp{run.cp}" if run.cp > 1 else "")
            + f" mb{lay['micro_batch']} {lay['recompute']}"
            + (" sp" if lay["sp"] else "")
        )
        rows.append(
            TrainingRow(
                model=m.name,
                run=i,
                hardware=hw_name,
                layout=layout,
                quantity=quantity,
                published=published,
                shipped=_model_value(m, run, hw_name, None),
                modelled=_model_value(m, run, hw_name, efficiency[hw_name]),
                role="fit" if (m.name, i) in FIT[hw_name] else "judge",
                source=run.source,
                note=run.note,
            )
        )
    return TrainingValidation(rows=tuple(rows), efficiency=efficiency)
