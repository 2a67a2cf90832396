"""A collective as a schedule: steps of transfers between ranks, ranks mapped onto chips.

A :class:`Schedule` is data that every engine interprets the same way:

* each rank holds one buffer of ``count`` elements, cut into ``blocks`` blocks (rank ``j``'s
  block ``j`` is its share in a reduce-scatter or an all-gather) and each block into ``subs``
  sub-chunks: chunk ``c`` is sub ``c % subs`` of block ``c // subs``. Blocks and sub-chunks are
  as equal as the count allows (:meth:`Schedule.bounds`: the first ones one element longer);
* a :class:`Transfer` moves the chunks ``first..stop-1`` of rank ``src``'s buffer to rank
  ``dst``, into its chunks from ``at`` (``first`` unless given), and either copies them or
  reduces them into what is there;
* a :class:`Step` is a set of transfers that run together; it starts when the steps it lists in
  ``after`` have finished. Every transfer of a step reads its source as it was when the step
  began (an exchange swaps), and the transfers into one destination apply in the order listed;
* ``chips[rank]`` is the chip the rank runs on; a transfer's links are the system's route
  between the two chips.

Examples
--------
>>> from tlm.collectives import build
>>> from tlm.system import load_system
>>> s = build("ring", "all_reduce", load_system("trn2-server"))
>>> len(s.steps), s.blocks, s.subs, s.send_factor()        # 2 (r - 1) steps; 2 (r - 1) / r
(30, 16, 1, 1.875)
>>> s.bounds(10)[:5]                                        # 10 elements over 16 chunks
array([0, 1, 2, 3, 4])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

__all__ = ["OPS", "REDUCING", "Transfer", "Step", "Schedule", "chain", "tree_depth", "tree_leaves"]

#: The collective operations, as nccom-test names them (send/recv is ``permute``).
OPS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "permute")
#: The operations that reduce.
REDUCING = ("all_reduce", "reduce_scatter")


@dataclass(frozen=True, init=False)
class Transfer:
    """Chunks ``first..stop-1`` of rank ``src`` to rank ``dst`` (into its chunks from ``at``),
    reduced into the destination's data when ``reduce``, else copied over it."""

    src: int
    dst: int
    first: int
    stop: int
    reduce: bool
    at: int | None = None

    def __init__(self, src: int, dst: int, first: int, stop: int, reduce: bool, at=None):
        # what the frozen dataclass's own __init__ does, without its six calls of
        # object.__setattr__ (two thirds of its time): a schedule is thousands of transfers,
        # built in the first estimate of every command
        fields = self.__dict__
        fields["src"] = src
        fields["dst"] = dst
        fields["first"] = first
        fields["stop"] = stop
        fields["reduce"] = reduce
        fields["at"] = at

    @property
    def units(self) -> int:
        """Chunks carried."""
        return self.stop - self.first

    @property
    def dst_first(self) -> int:
        return self.first if self.at is None else self.at


@dataclass(frozen=True)
class Step:
    """Transfers that run together, after the steps ``after`` (indices of earlier steps)."""

    transfers: tuple[Transfer, ...]
    after: tuple[int, ...]
    label: str = ""


def chain(leaves) -> int | tuple:
    """The reduction tree that adds ``leaves`` one after another: ``((a + b) + c) + ...``."""
    leaves = list(leaves)
    tree = leaves[0]
    for leaf in leaves[1:]:
        tree = (tree, leaf)
    return tree


def tree_leaves(tree) -> list[int]:
    """The ranks a reduction tree adds, left to right."""
    if isinstance(tree, tuple):
        return tree_leaves(tree[0]) + tree_leaves(tree[1])
    return [tree]


def tree_depth(tree) -> int:
    """Additions on the longest path from a leaf to the root (the rounding error's factor)."""
    if isinstance(tree, tuple):
        return 1 + max(tree_depth(tree[0]), tree_depth(tree[1]))
    return 0


def _split(count: int, parts: int) -> np.ndarray:
    """``count`` cut into ``parts`` sizes as equal as can be, the longer ones first (as
    ``numpy.array_split``)."""
    return count // parts + (np.arange(parts) < count % parts)


@dataclass(frozen=True)
class Schedule:
    """One collective operation by one algorithm on one set of ranks.

    Attributes
    ----------
    op : str
        One of :data:`OPS`.
    algorithm : str
    chips : tuple of int
        The chip of each rank (``len(chips)`` ranks).
    blocks, subs : int
        The buffer's cut: ``blocks`` blocks of ``subs`` chunks each.
    steps : tuple of Step
        In an order where every step comes after the steps it waits for.
    order : callable or None
        For reducing operations, ``order(rank, chunk)``: the reduction tree (nested pairs of
        ranks, :func:`chain`) the algorithm declares for that rank's result of that chunk -
        the order the values engine's reference adds in. Defined by the algorithm from its own
        description, not read off the steps, so a schedule that adds in another order fails.
    root : int
        The rank a broadcast starts from.
    """

    op: str
    algorithm: str
    chips: tuple[int, ...]
    blocks: int
    subs: int
    steps: tuple[Step, ...]
    order: Callable | None = None
    root: int = 0

    @property
    def ranks(self) -> int:
        return len(self.chips)

    @property
    def chunks(self) -> int:
        return self.blocks * self.subs

    def bounds(self, count: int) -> np.ndarray:
        """Element offsets of the chunks for a buffer of ``count`` elements (``chunks + 1``
        offsets): blocks as equal as possible, then each block cut the same way."""
        blocks = _split(count, self.blocks)
        sizes = np.concatenate([_split(int(b), self.subs) for b in blocks])
        return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    def unit_elements(self, count):
        """Elements of the largest chunk for ``count`` elements (numpy arrays welcome): what
        the analytic engine charges every chunk."""
        count = np.asarray(count, dtype=np.int64)
        per_block = -(-count // self.blocks)
        return -(-per_block // self.subs)

    def send_factor(self) -> float:
        """Bytes the busiest rank sends, over the buffer's size (equal chunks): the factor
        from algorithm bandwidth to bus bandwidth (docs/collectives.md)."""
        sent = np.zeros(self.ranks)
        for step in self.steps:
            for t in step.transfers:
                sent[t.src] += t.units
        return float(sent.max() / self.chunks)

    @cached_property
    def moves(self) -> np.ndarray:
        """Every transfer as a row ``(step, src, dst, first, stop, at)`` of integers, step by
        step in order (``at`` where the chunks land: ``first`` unless given) - what
        :meth:`check` and the analytic engine read, made once (thousands of transfers)."""
        rows = [
            (i, t.src, t.dst, t.first, t.stop, t.first if t.at is None else t.at)
            for i, step in enumerate(self.steps)
            for t in step.transfers
        ]
        return np.array(rows, dtype=np.int64).reshape(-1, 6)

    @cached_property
    def reduces(self) -> np.ndarray:
        """Per transfer, in :attr:`moves` order: whether it reduces (else it copies)."""
        flags = [t.reduce for step in self.steps for t in step.transfers]
        return np.array(flags, dtype=bool)

    def check(self):
        """Raise ``ValueError`` if the schedule is not well formed (ranks, chunks, order)."""
        r, c = self.ranks, self.chunks
        waits = [i for i, step in enumerate(self.steps) if any(not 0 <= a < i for a in step.after)]
        step, src, dst, first, stop, at = self.moves.T
        ok = (0 <= src) & (src < r) & (0 <= dst) & (dst < r) & (src != dst)
        ok &= (0 <= first) & (first < stop) & (stop <= c) & (0 <= at) & (at <= c - (stop - first))
        bad = np.flatnonzero(~ok)
        if waits and (not len(bad) or waits[0] <= step[bad[0]]):
            i = waits[0]
            raise ValueError(
                f"step {i} must wait only for earlier steps, not {self.steps[i].after}"
            )
        if len(bad):
            k, i = int(bad[0]), int(step[bad[0]])
            t = self.steps[i].transfers[k - int(np.searchsorted(step, i))]
            raise ValueError(f"step {i} has a transfer out of range: {t}")
