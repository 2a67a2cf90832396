"""A program: the instructions recorded on NeuronCores, in program order, and their hazards.

Every instruction names the views it reads and writes. The program finds the earlier
instructions each must wait for (read after write, write after read, write after write on
overlapping elements), the semaphores NKI's compiler would insert. Accesses are tracked per
allocation (per HBM tensor) as boxes in its index space. When a tile is freed its accesses are
retired; a later allocation on some of the same bytes inherits them, so it waits for the last
readers and writers of the memory it reuses.

Examples
--------
>>> from tlm.core import Memory, Program
>>> program = Program()
>>> sbuf = Memory("core0.sbuf", partitions=128, partition_bytes=1024)
>>> program.track(sbuf)
>>> t = sbuf.tile((128, 64), "fp32", name="t")
>>> load = program.record(core=0, queue="dma0", op="dma_copy", label="load", reads=[], writes=[t])
>>> use = program.record(core=0, queue="vector", op="use", label="use", reads=[t], writes=[])
>>> [d.label for d in use.deps], program.version(t), len(program)
(['load'], 1, 2)
"""

from __future__ import annotations

from .instruction import Instruction
from .memory import Allocation, Memory, Tile

__all__ = ["Program"]


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


class Program:
    """Instructions in program order, with the dependencies between them.

    Parameters
    ----------
    values : bool
        Functional mode (default): the memories of the cores recording into this program hold
        data and every instruction computes its values as it is recorded. ``False``: timing
        only, for shapes too large to hold.

    Notes
    -----
    A view an instruction accesses is a :class:`~tlm.core.memory.Tile` (tracked per
    allocation) or any other :class:`~tlm.core.view.View` with an ``id`` shared by all views
    of one buffer (an HBM tensor, tracked per tensor).
    """

    def __init__(self, *, values: bool = True):
        self.values = bool(values)
        self.instructions: list[Instruction] = []
        self._writers: dict = {}  # key -> [(box, inst)]
        self._readers: dict = {}
        self._versions: dict[int, int] = {}  # allocation id -> writes so far
        self._retired: dict[str, list] = {}  # memory name -> [(kind, byte span, inst)]

    def __len__(self) -> int:
        return len(self.instructions)

    def __iter__(self):
        return iter(self.instructions)

    def track(self, memory: Memory):
        """Follow ``memory``'s allocations: a tile on bytes freed tiles used waits for their
        last accesses."""
        memory.on_alloc = self._inherit
        memory.on_free = self._retire

    def version(self, tile: Tile) -> int:
        """How many recorded instructions have written ``tile``'s allocation: two accesses
        with the same version see the same values (the Tensor engine's stationary reuse)."""
        return self._versions.get(tile.alloc.id, 0)

    def record(self, *, core: int, queue: str, op: str, label: str, reads, writes, **fields):
        """Append an instruction and find the earlier ones it waits for.

        Parameters
        ----------
        core : int
            The core whose queue runs it.
        queue : str
            ``"tensor"``, ``"vector"``, ``"scalar"``, ``"gpsimd"`` or ``"dma0"`` ...
        op, label : str
            The operation and how the kernel named it (errors and traces show it).
        reads, writes : list of View
            What it reads and writes.
        **fields
            The rest of the :class:`Instruction`: ``occupancy_s``, ``latency_s`` (seconds),
            ``flops``, ``dma``, ``sem_wait``, ``sem_signal``.

        Returns
        -------
        Instruction
            With ``deps`` (earlier instructions, in program order) and ``allocs`` set.
        """
        inst = Instruction(
            index=len(self.instructions), core=core, queue=queue, op=op, label=label, **fields
        )
        inst.deps = self._hazards(inst, reads, writes)
        allocs = {}
        for view in (*reads, *writes):
            if isinstance(view, Tile):
                allocs[view.alloc.id] = (view.alloc.id, view.memory.name, view.alloc.nbytes)
        inst.allocs = tuple(allocs.values())
        self.instructions.append(inst)
        return inst

    @staticmethod
    def _key(view):
        # hazards are tracked per allocation (per HBM tensor), in its index space; a new
        # allocation inherits the accesses of freed ones whose bytes it reuses
        return ("t", view.alloc.id) if isinstance(view, Tile) else ("h", view.id)

    def _retire(self, alloc: Allocation):
        retired = self._retired.setdefault(alloc.memory.name, [])
        span = (alloc.offset, alloc.offset + alloc.nbytes)
        key = ("t", alloc.id)
        for table, kind in ((self._writers, "w"), (self._readers, "r")):
            retired += [(kind, span, inst) for _, inst in table.pop(key, ())]

    def _inherit(self, alloc: Allocation):
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
        A Tensor engine instruction does not wait for the same queue's earlier PSUM results; it
        is ordered after the last of them (``inst.after``). A write over what an earlier
        instruction reads waits only until that one has read it (``inst.after_reads``), but
        for the Tensor engine's read of PSUM, which is its accumulation at the pipeline's end.
        """
        deps, ordered, read = {}, {}, {}

        def hazard(view, other, war=False):
            psum = isinstance(view, Tile) and view.memory.name.endswith(".psum")
            # the Tensor engine's own earlier PSUM results come out of its pipeline first: in
            # order behind them, not waiting for them (Instruction.after)
            if psum and other.queue == "tensor" == inst.queue and other.core == inst.core:
                ordered[other.index] = other
            elif war and not (psum and other.queue == "tensor"):
                read[other.index] = other
            else:
                deps[other.index] = other

        for view in reads:
            box, key = view.ranges, self._key(view)
            for wbox, w in self._writers.get(key, ()):
                if _overlap(box, wbox):
                    hazard(view, w)
        for view in writes:
            box, key = view.ranges, self._key(view)
            for table in (self._writers, self._readers):
                entries = table.get(key)
                if not entries:
                    continue
                kept = []
                for obox, other in entries:
                    if _overlap(box, obox):
                        hazard(view, other, war=table is self._readers)
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
        if ordered:
            inst.after = ordered[max(ordered)]
        inst.after_reads = [read[i] for i in sorted(read) if i not in deps]
        return [deps[i] for i in sorted(deps)]
