"""A kernel: ordinary Python that records instructions on a chip's cores.

Examples
--------
>>> import numpy as np, ml_dtypes
>>> from tlm.chip import Kernel
>>> k = Kernel("trn2")
>>> x = k.hbm_tensor("x", (128, 64), "bf16", data=np.ones((128, 64), ml_dtypes.bfloat16))
>>> core = k.core(0)
>>> t = core.sbuf.tile((128, 64), "bf16")
>>> _ = core.dma_copy(t, x)
>>> y = core.sbuf.tile((128, 64), "fp32")
>>> _ = core.activation(y, t, "exp", scale=2.0)
>>> float(y.values[0, 0]) == float(np.exp(np.float32(2.0)))
True
>>> run = k.run()
>>> run.instructions, run.time_s > 0
(2, True)
"""

from __future__ import annotations

from ..core.instruction import Semaphore
from ..core.memory import Tile
from ..core.neuroncore import NeuronCore
from .chip import Chip
from .hbm import HbmTensor

__all__ = ["Kernel"]


def _overlap(a, b) -> bool:
    """Whether two boxes (a range per dimension) share an element."""
    return all(x0 < y1 and y0 < x1 for (x0, x1), (y0, y1) in zip(a, b, strict=True))


def _subtract(box, cut):
    """``box`` less ``cut`` when the rest is a box (``None`` when nothing is left); ``box``
    itself when the rest is not a box (a safe over-estimate)."""
    rest = None
    for dim, ((b0, b1), (c0, c1)) in enumerate(zip(box, cut, strict=True)):
        if c0 <= b0 and b1 <= c1:
            continue
        if rest is not None:
            return box  # not covered along two dimensions
        if c0 <= b0 < c1:
            rest = (dim, (c1, b1))
        elif c0 < b1 <= c1:
            rest = (dim, (b0, c0))
        else:
            return box  # cut in the middle
    if rest is None:
        return None
    dim, span = rest
    return box[:dim] + (span,) + box[dim + 1 :]


class Kernel:
    """Records a program on a chip: HBM tensors, per-core instructions, semaphores.

    Parameters
    ----------
    chip : str, ChipSpec or Chip
        The chip (a preset name is loaded).
    values : bool
        Functional mode (default): memories hold data and every instruction computes its
        values as it is recorded. ``False``: timing only, for shapes too large to hold.
    """

    def __init__(self, chip="trn2", *, values: bool = True):
        self.chip = chip if isinstance(chip, Chip) else Chip(chip)
        self.spec = self.chip.spec
        self.values = bool(values)
        self.program = []
        self._cores: dict[int, NeuronCore] = {}
        self._writers: dict = {}  # key -> [(box, inst)]
        self._readers: dict = {}
        self._versions: dict = {}
        self._retired: dict = {}
        self.tensors: dict[str, HbmTensor] = {}

    def core(self, index: int) -> NeuronCore:
        """NeuronCore ``index`` (0 .. cores-1)."""
        n = self.spec.chip.cores
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
            raise ValueError(f"core must be an integer in 0..{n - 1}, not {index!r}")
        if index not in self._cores:
            self._cores[index] = NeuronCore(self, index)
        return self._cores[index]

    def hbm_tensor(self, name, shape, dtype, *, data=None, stack: int = 0) -> HbmTensor:
        """A tensor in HBM stack ``stack``, zero or ``data`` (functional mode)."""
        n = len(self.chip.stacks)
        if isinstance(stack, bool) or not isinstance(stack, int) or not 0 <= stack < n:
            raise ValueError(f"stack must be an integer in 0..{n - 1}, not {stack!r}")
        if name in self.tensors:
            raise ValueError(f"name {name!r} is already an HBM tensor of this kernel")
        tensor = HbmTensor(name, shape, dtype, self.chip.stacks[stack], data, self.values)
        self.tensors[name] = tensor
        return tensor

    def semaphore(self, name: str) -> Semaphore:
        """A semaphore kernels signal and wait on across engines."""
        return Semaphore(name)

    def _key(self, view):
        # hazards are tracked per allocation (per HBM tensor), in its index space; a new
        # allocation inherits the accesses of freed ones whose bytes it reuses
        return ("t", view.alloc.id) if isinstance(view, Tile) else ("h", view.id)

    def _version(self, view) -> int:
        return self._versions.get(view.alloc.id, 0)

    def _retire(self, alloc):
        retired = self._retired.setdefault(alloc.memory.name, [])
        span = (alloc.offset, alloc.offset + alloc.nbytes)
        key = ("t", alloc.id)
        for table, kind in ((self._writers, "w"), (self._readers, "r")):
            retired += [(kind, span, inst) for _, inst in table.pop(key, ())]

    def _inherit(self, alloc):
        """A new allocation on bytes freed ones used waits for their last accesses."""
        retired = self._retired.get(alloc.memory.name)
        if not retired:
            return
        key = ("t", alloc.id)
        whole = tuple((0, n) for n in alloc.shape)
        lo, hi = alloc.offset, alloc.offset + alloc.nbytes
        for kind, (r0, r1), inst in retired:
            if r0 < hi and lo < r1:
                table = self._writers if kind == "w" else self._readers
                table.setdefault(key, []).append((whole, inst))

    def _hazards(self, inst, reads, writes):
        """Earlier instructions this one must wait for, and the bookkeeping for later ones.

        Accesses are boxes (a range per dimension) of an allocation or an HBM tensor. A write
        waits for the overlapping earlier writes and reads; those then shrink by the written
        box, since a later access to the same elements waits for this write, and so for them.
        """
        deps = {}
        for view in reads:
            box, key = view.ranges, self._key(view)
            for wbox, w in self._writers.get(key, ()):
                if _overlap(box, wbox):
                    deps[w.index] = w
        for view in writes:
            box, key = view.ranges, self._key(view)
            for table in (self._writers, self._readers):
                entries = table.get(key)
                if not entries:
                    continue
                kept = []
                for obox, other in entries:
                    if _overlap(box, obox):
                        deps[other.index] = other
                        obox = _subtract(obox, box)
                        if obox is None:
                            continue
                    kept.append((obox, other))
                table[key] = kept
        for view in reads:
            self._readers.setdefault(self._key(view), []).append((view.ranges, inst))
        for view in writes:
            self._writers.setdefault(self._key(view), []).append((view.ranges, inst))
            if isinstance(view, Tile):
                self._versions[view.alloc.id] = self._versions.get(view.alloc.id, 0) + 1
        return [deps[i] for i in sorted(deps)]

    def run(self):
        """Simulate the recorded program; returns a :class:`tlm.chip.timing.Run`.

        Raises
        ------
        DeadlockError
            When queues still hold instructions that can never start (a semaphore wait that
            is never met), naming each blocked instruction and what it waits for.
        """
        from .timing import simulate

        return simulate(self)
