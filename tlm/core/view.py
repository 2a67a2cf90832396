"""Rectangular views of a buffer: the slicing every tile and HBM tensor shares.

A view keeps, per dimension of its base buffer, the range it covers and whether the dimension
is kept (sliced) or dropped (indexed by an integer). Only unit-step slices and integers are
allowed: the access patterns here are rectangles.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ..formats import FLOAT_FORMATS, format_of_dtype

__all__ = ["View", "as_dtype", "DTYPE_NAMES"]

#: Names kernels give dtypes, and the numpy dtypes that carry them (TF32 travels as float32).
DTYPE_NAMES = {name: fmt.dtype for name, fmt in FLOAT_FORMATS.items() if name != "tf32"}

#: Dtypes a buffer may hold that are no operand format of their own: MX's E8M0 block scales.
STORAGE_NAMES = {"e8m0": np.dtype(ml_dtypes.float8_e8m0fnu)}


def as_dtype(dtype) -> np.dtype:
    """A numpy dtype from a format name (``"bf16"``) or a dtype; floating point only."""
    if isinstance(dtype, str) and dtype in DTYPE_NAMES:
        return np.dtype(DTYPE_NAMES[dtype])
    if isinstance(dtype, str) and dtype in STORAGE_NAMES:
        return STORAGE_NAMES[dtype]
    try:
        value = np.dtype(dtype)
    except TypeError:
        value = None
    if value is None or (format_of_dtype(value) is None and value not in STORAGE_NAMES.values()):
        allowed = ", ".join([*DTYPE_NAMES, *STORAGE_NAMES])
        raise ValueError(f"dtype must be one of {allowed} (or their numpy dtypes), not {dtype!r}")
    return value


def dtype_name(dtype: np.dtype) -> str:
    for name, value in STORAGE_NAMES.items():
        if value == dtype:
            return name
    return format_of_dtype(dtype).name


class View:
    """A rectangle of a base buffer of shape ``base_shape`` and ``dtype``.

    Subclasses supply ``_array()`` (the base values, or ``None`` in timing-only mode) and
    ``_derive(ranges, keep)`` (a new view of the same base).
    """

    base_shape: tuple[int, ...]
    dtype: np.dtype
    ranges: tuple[tuple[int, int], ...]
    keep: tuple[bool, ...]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(e - s for (s, e), k in zip(self.ranges, self.keep, strict=True) if k)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def index(self) -> tuple:
        """The numpy index of this view into its base array."""
        return tuple(
            slice(s, e) if k else s for (s, e), k in zip(self.ranges, self.keep, strict=True)
        )

    def __getitem__(self, index):
        if not isinstance(index, tuple):
            index = (index,)
        kept = [i for i, k in enumerate(self.keep) if k]
        if len(index) > len(kept):
            raise IndexError(f"{self.name}: {len(index)} indices for a {len(kept)}-D view")
        ranges, keep = list(self.ranges), list(self.keep)
        for dim, item in zip(kept, index, strict=False):
            start, stop = ranges[dim]
            length = stop - start
            if isinstance(item, slice):
                if item.step not in (None, 1):
                    raise IndexError(f"{self.name}: only unit-step slices, not step {item.step}")
                a, b, _ = item.indices(length)
                if b <= a:
                    raise IndexError(f"{self.name}: empty slice {item} of dimension {dim}")
                ranges[dim] = (start + a, start + b)
            elif isinstance(item, (int, np.integer)) and not isinstance(item, bool):
                i = int(item) + (length if item < 0 else 0)
                if not 0 <= i < length:
                    raise IndexError(f"{self.name}: index {item} outside 0..{length - 1}")
                ranges[dim] = (start + i, start + i + 1)
                keep[dim] = False
            else:
                raise IndexError(f"{self.name}: index with ints and slices, not {item!r}")
        return self._derive(tuple(ranges), tuple(keep))

    @property
    def values(self) -> np.ndarray | None:
        """The values (a numpy view, writable), or ``None`` in timing-only mode."""
        array = self._array()
        return None if array is None else array[self.index]

    def _flat_bounds(self) -> tuple[int, int]:
        """First and one-past-last flat element offsets this view touches in its base."""
        strides = [math.prod(self.base_shape[i + 1 :]) for i in range(len(self.base_shape))]
        first = sum(s * st for (s, _), st in zip(self.ranges, strides, strict=True))
        last = sum((e - 1) * st for (_, e), st in zip(self.ranges, strides, strict=True))
        return first, last + 1
