"""SBUF and PSUM: on-chip memories of partitions that hold data, with their rules.

A memory is ``partitions`` rows of ``partition_bytes`` each. A tile is allocated over
partitions ``0..P-1`` (P <= partitions) and a byte range of every one of them; its shape is
``(P, *free)``. PSUM is split into banks; a PSUM tile lives inside one bank. Overflowing a
memory or a bank is a :class:`KernelError` naming the allocation and the rule.

Examples
--------
>>> sbuf = Memory("core0.sbuf", partitions=128, partition_bytes=224 * 1024)
>>> t = sbuf.tile((128, 512), "bf16", name="x")
>>> t.shape, t.partitions, sbuf.used_bytes
((128, 512), (0, 128), 1024)
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .errors import KernelError
from .view import View, as_dtype, dtype_name

__all__ = ["Memory", "Allocation", "Tile"]

_ids = itertools.count()


class Allocation:
    """Bytes ``offset .. offset + nbytes`` of partitions ``0 .. P-1`` of a memory."""

    def __init__(self, memory: Memory, name: str, shape, dtype, offset: int):
        self.id = next(_ids)
        self.memory = memory
        self.name = name
        self.shape = tuple(shape)
        self.dtype = dtype
        self.offset = offset
        self.nbytes = math.prod(self.shape[1:]) * dtype.itemsize  # per partition
        self.freed = False
        self._array = None

    def array(self) -> np.ndarray | None:
        if self.memory.data is None:
            return None
        if self._array is None:
            p = self.shape[0]
            raw = self.memory.data[:p, self.offset : self.offset + self.nbytes]
            self._array = raw.view(self.dtype).reshape(self.shape)
        return self._array


class Tile(View):
    """A view of an SBUF or PSUM allocation: ``tile[p0:p1, a:b]`` slices it."""

    def __init__(self, alloc: Allocation, ranges=None, keep=None):
        self.alloc = alloc
        self.memory = alloc.memory
        self.base_shape = alloc.shape
        self.dtype = alloc.dtype
        self.ranges = ranges or tuple((0, n) for n in alloc.shape)
        self.keep = keep or (True,) * len(alloc.shape)
        self.name = alloc.name

    def _derive(self, ranges, keep):
        if not keep[0]:
            raise IndexError(f"{self.name}: index the partition dimension with a slice")
        return Tile(self.alloc, ranges, keep)

    def _array(self):
        return self.alloc.array()

    @property
    def partitions(self) -> tuple[int, int]:
        """Partition range ``(start, stop)``."""
        return self.ranges[0]

    @property
    def free_size(self) -> int:
        """Elements per partition."""
        return self.size // (self.ranges[0][1] - self.ranges[0][0])

    def __repr__(self):
        return f"{self.memory.name}:{self.name}{list(self.shape)}:{dtype_name(self.dtype)}"


class Memory:
    """An on-chip memory of partitions, optionally holding data.

    Parameters
    ----------
    name : str
        ``"core0.sbuf"``; used in error messages.
    partitions : int
        Rows (128 on Trainium).
    partition_bytes : int
        Bytes per partition (SBUF 224 KiB, PSUM 16 KiB on Trainium2).
    banks : int
        Banks per partition (PSUM: 8); a tile may not cross a bank boundary. 1 for SBUF.
    values : bool
        Hold data (functional mode) or only account for space (timing-only mode).
    """

    def __init__(self, name, *, partitions, partition_bytes, banks=1, values=True):
        for label, value in (
            ("partitions", partitions),
            ("partition_bytes", partition_bytes),
            ("banks", banks),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{label} must be a positive integer, not {value!r}")
        if partition_bytes % banks:
            raise ValueError(f"partition_bytes ({partition_bytes}) must divide into {banks} banks")
        self.name = name
        self.partitions = partitions
        self.partition_bytes = partition_bytes
        self.banks = banks
        self.bank_bytes = partition_bytes // banks
        self.kind = name.rsplit(".", 1)[-1]
        self.data = np.zeros((partitions, partition_bytes), np.uint8) if values else None
        self.live: list[Allocation] = []  # sorted by offset
        self.peak_bytes = 0
        #: Called with each new and each freed Allocation (the kernel's hazard tracking).
        self.on_alloc = None
        self.on_free = None

    @property
    def used_bytes(self) -> int:
        """Bytes per partition allocated now."""
        return sum(a.nbytes for a in self.live)

    def tile(self, shape, dtype, *, name: str | None = None) -> Tile:
        """Allocate a tile of ``shape = (P, *free)``, first fit.

        Raises
        ------
        KernelError
            Naming the allocation and the rule: partitions, memory or bank capacity.
        """
        dtype = as_dtype(dtype)
        shape = tuple(shape)
        name = name or f"t{next(_ids)}"
        what = f"{self.name}.tile {name!r}"
        if len(shape) < 2 or any(
            isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1 for n in shape
        ):
            raise KernelError(
                what, f"shape must be (partitions, free...) of positive ints, not {shape!r}"
            )
        if shape[0] > self.partitions:
            raise KernelError(
                what,
                f"illegal partitions: {shape[0]} partitions requested, "
                f"{self.kind.upper()} has {self.partitions}",
            )
        nbytes = math.prod(shape[1:]) * dtype.itemsize
        offset = self._place(nbytes, what)
        alloc = Allocation(self, name, shape, dtype, offset)
        self.live.append(alloc)
        self.live.sort(key=lambda a: a.offset)
        self.peak_bytes = max(self.peak_bytes, self.used_bytes)
        if self.on_alloc is not None:
            self.on_alloc(alloc)
        return Tile(alloc)

    def _place(self, nbytes: int, what: str) -> int:
        kind = self.kind.upper()
        if self.banks > 1 and nbytes > self.bank_bytes:
            raise KernelError(
                what,
                f"{kind} bank overflow: a tile of {nbytes} bytes per partition does not fit "
                f"one {self.bank_bytes}-byte bank",
            )
        start = 0
        for alloc in self.live + [None]:
            end = self.partition_bytes if alloc is None else alloc.offset
            candidate = start
            if self.banks > 1:
                bank_end = (candidate // self.bank_bytes + 1) * self.bank_bytes
                if candidate + nbytes > bank_end:
                    candidate = bank_end
            if candidate + nbytes <= end:
                return candidate
            if alloc is not None:
                start = max(start, alloc.offset + alloc.nbytes)
        raise KernelError(
            what,
            f"{kind} overflow: {nbytes} bytes per partition requested, "
            f"{self.used_bytes} of {self.partition_bytes} in use "
            f"({self.partition_bytes - self.used_bytes} free, none of it a large enough range)",
        )

    def free(self, tile: Tile):
        """Release a tile's allocation (its space may be reused by later tiles)."""
        alloc = tile.alloc
        if alloc.freed or alloc not in self.live:
            raise KernelError(f"{self.name}.free {alloc.name!r}", "tile is not allocated here")
        alloc.freed = True
        self.live.remove(alloc)
        if self.on_free is not None:
            self.on_free(alloc)
