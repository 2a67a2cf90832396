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
    if len(a) == 3:  # (memory, partitions, bytes)
        return a[1][0] < b[1][1] and b[1][0] < a[1][1] and a[2][0] < b[2][1] and b[2][0] < a[2][1]
    return all(x0 < y1 and y0 < x1 for (x0, x1), (y0, y1) in zip(a[1], b[1], strict=True))


def _covers(a, b) -> bool:
    if len(a) == 3:
        return (a[1][0] <= b[1][0] and b[1][1] <= a[1][1]
                and a[2][0] <= b[2][0] and b[2][1] <= a[2][1])
    return all(x0 <= y0 and y1 <= x1 for (x0, x1), (y0, y1) in zip(a[1], b[1], strict=True))


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
        # hazards are tracked per allocation (per HBM tensor); boxes are physical, and a
        # new allocation inherits the accesses of freed ones whose bytes it reuses
        return ("t", view.alloc.id) if isinstance(view, Tile) else ("h", view.id)

    def _retire(self, alloc):
        key = ("t", alloc.id)
        retired = self._retired.setdefault(alloc.memory.name, [])
        for table, kind in ((self._writers, "w"), (self._readers, "r")):
            retired += [(kind, box, inst) for box, inst in table.pop(key, ())]

    def _inherit(self, alloc):
        retired = self._retired.get(alloc.memory.name)
        if not retired:
            return
        key = ("t", alloc.id)
        span = (alloc.memory, (0, alloc.shape[0]), (alloc.offset, alloc.offset + alloc.nbytes))
        for kind, box, inst in retired:
            if _overlap(span, box):
                table = self._writers if kind == "w" else self._readers
                table.setdefault(key, []).append((box, inst))

    def _version(self, view) -> int:
        return self._versions.get(view.alloc.id, 0)

    def _hazards(self, inst, reads, writes):
        """Earlier instructions this one must wait for, and the bookkeeping for later ones."""
        deps = {}
        for view in reads:
            box, key = view.box(), self._key(view)
            for wbox, w in self._writers.get(key, ()):
                if _overlap(box, wbox):
                    deps[w.index] = w
        for view in writes:
            box, key = view.box(), self._key(view)
            for table in (self._writers, self._readers):
                for obox, other in table.get(key, ()):
                    if _overlap(box, obox):
                        deps[other.index] = other
        for view in reads:
            self._readers.setdefault(self._key(view), []).append((view.box(), inst))
        for view in writes:
            box, key = view.box(), self._key(view)
            for table in (self._writers, self._readers):
                entries = table.get(key)
                if entries:
                    table[key] = [(b, i) for b, i in entries if not _covers(box, b)]
            self._writers.setdefault(key, []).append((box, inst))
            if isinstance(view, Tile):
                self._versions[view.alloc.id] = self._versions.get(view.alloc.id, 0) + 1
        return [deps[i] for i in sorted(deps)]

    def run(self):
        """Simulate the recorded program; returns a :class:`tlm.chip.sim.Run`.

        Raises
        ------
        DeadlockError
            When queues still hold instructions that can never start (a semaphore wait that
            is never met), naming each blocked instruction and what it waits for.
        """
        from .sim import simulate

        return simulate(self)

