"""A training job's parallel layout: one value that the step, the memory model and the search
share, with one set of defaults.

Each field is a scalar (one layout) or a numpy array (a table of layouts that broadcast
together: a strategy search evaluates thousands at once). A scalar field is checked when the
layout is made (``ValueError`` naming it); what depends on the model (tp dividing its heads...)
:func:`tlm.cluster.memory.memory_per_chip` checks, naming the field, or marks the invalid
rows of a table.

Examples
--------
>>> Layout(dp=64, tp=8, pp=16).chips_of(0)
8192
>>> Layout().zero, Layout().sp, Layout().recompute       # Megatron-LM's usual recipe
(1, True, 'selective')
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..workloads.schema import RECOMPUTES

__all__ = ["Layout", "LAYOUT_FIELDS", "RECOMPUTE", "ATTENTION"]


@dataclass(frozen=True)
class Layout:
    """Parallel sizes and the memory recipe of a training layout.

    Attributes
    ----------
    dp, tp, pp, cp, ep : int or array
        Data, tensor, pipeline, context and expert parallel sizes; chips = dp x tp x pp x cp,
        the expert-parallel group carved from the dp x cp chips of a stage.
    zero : int or array
        ZeRO stage: 0 none, 1 optimizer state sharded over the data-parallel chips, 2 and the
        gradients, 3 (FSDP) and the weights.
    micro_batch : int or array
        Sequences per micro-batch.
    sp : bool or array
        Sequence parallelism (splits what tensor parallelism leaves whole).
    recompute : str, or array of str or codes of :data:`tlm.cluster.memory.RECOMPUTE`
        ``none``, ``selective`` (the attention's products, as Korthikanti et al.), ``full``, or
        ``selective+mlp`` (the attention's products and the MLP block: its internal
        activations are not stored; the backward pass reruns its forward up to the last
        projection's input - docs/cluster.md).
    interleave : int or array
        Virtual pipeline stages per chip (1: plain 1F1B).
    attention : str
        The attention kernel, one of :data:`ATTENTION` (one for the whole table): ``flash``
        (scores never in HBM: only each query's softmax statistics are kept, and the backward
        pass recomputes the score product - so selective recomputation has nothing left to
        recompute) or ``materialised`` (scores, softmax and dropout through HBM, as Megatron-LM
        of 2021-22). The step's time and its memory both read it.
    """

    dp: object = 1
    tp: object = 1
    pp: object = 1
    cp: object = 1
    ep: object = 1
    zero: object = 1
    micro_batch: object = 1
    sp: object = True
    recompute: object = "selective"
    interleave: object = 1
    attention: str = "flash"

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "attention" and hasattr(value, "shape") and getattr(value, "ndim", 0):
                continue  # a table's rows are marked, not raised on
            if f.name == "attention":
                ok = isinstance(value, str) and value in ATTENTION
                allowed = "one of " + ", ".join(ATTENTION)
            elif f.name == "sp":
                ok, allowed = isinstance(value, bool | np.bool_), "a bool"
            elif f.name == "recompute":
                code = _is_integer(value) and 0 <= value < len(RECOMPUTE)
                ok, allowed = value in RECOMPUTE or code, "one of " + ", ".join(RECOMPUTE)
            elif isinstance(value, bool) or not _is_integer(value):
                ok, allowed = False, "an integer or an array of integers"
            elif f.name == "zero":
                ok, allowed = 0 <= value <= 3, "one of 0, 1, 2, 3"
            else:
                ok, allowed = value >= 1, "a positive integer"
            if not ok:
                raise ValueError(f"{f.name} must be {allowed}, not {value!r}")

    def as_dict(self) -> dict:
        """The fields by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def chips_of(self, row: int | None = None) -> int:
        """Chips of one layout (``dp x tp x pp x cp``; ``row`` of a table)."""
        chips = np.asarray(self.dp) * self.tp * self.pp * self.cp
        return int(chips if chips.ndim == 0 else chips.ravel()[row or 0])


#: Recomputation choices, by name (an array of layouts may hold their codes: the index); one
#: definition, the model files' (:data:`tlm.workloads.schema.RECOMPUTES`).
RECOMPUTE = RECOMPUTES
#: Attention kernels: fused on chip (flash), or the scores through HBM.
ATTENTION = ("flash", "materialised")


def _is_integer(value) -> bool:
    try:
        return int(value) == value and not isinstance(value, str)
    except (TypeError, ValueError, OverflowError):
        return False


#: The fields of :class:`Layout`, in order.
LAYOUT_FIELDS = tuple(f.name for f in fields(Layout))
