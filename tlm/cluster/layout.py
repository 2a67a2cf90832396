"""A training job's parallel layout: one value that the step, the memory model and the search
share, with one set of defaults.

Each field is a scalar (one layout) or a numpy array (a table of layouts that broadcast
together: a strategy search evaluates thousands at once); :func:`tlm.cluster.memory.
memory_per_chip` checks them, naming the field, or marks the invalid rows of a table.

Examples
--------
>>> Layout(dp=64, tp=8, pp=16).chips_of(0)
8192
>>> Layout().zero, Layout().sp, Layout().recompute       # Megatron-LM's usual recipe
(1, True, 'selective')
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["Layout", "LAYOUT_FIELDS"]


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
        ``none``, ``selective`` (the attention's products, as Korthikanti et al.) or ``full``.
    interleave : int or array
        Virtual pipeline stages per chip (1: plain 1F1B).
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

    def as_dict(self) -> dict:
        """The fields by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def chips_of(self, row: int | None = None) -> int:
        """Chips of one layout (``dp x tp x pp x cp``; ``row`` of a table)."""
        import numpy as np

        chips = np.asarray(self.dp) * self.tp * self.pp * self.cp
        return int(chips if chips.ndim == 0 else chips.ravel()[row or 0])


#: The fields of :class:`Layout`, in order.
LAYOUT_FIELDS = tuple(f.name for f in fields(Layout))
