"""HBM stacks and the tensors kernels place in them."""

from __future__ import annotations

import itertools

import numpy as np

from ..core.errors import KernelError
from ..core.view import View, as_dtype, dtype_name

__all__ = ["HbmStack", "HbmTensor"]

_ids = itertools.count()


class HbmStack:
    """One HBM stack: a capacity in bytes and a bandwidth shared by everyone who uses it.

    Parameters
    ----------
    index : int
        Stack number on the chip.
    capacity_bytes : int
    bandwidth_Bps : float
        Peak bandwidth of this stack (the chip's figure over its stacks).
    cores : tuple of int
        The cores this stack is local to (Trainium2: two).
    """

    def __init__(self, index, capacity_bytes, bandwidth_Bps, cores):
        self.index = index
        self.capacity_bytes = capacity_bytes
        self.bandwidth_Bps = bandwidth_Bps
        self.cores = tuple(cores)
        self.used_bytes = 0
        self.name = f"hbm{index}"


class HbmTensor(View):
    """A tensor in HBM (``shape``, ``dtype``), placed on one stack; slicing gives views.

    In functional mode it holds a numpy array (``values``); in timing-only mode only its size.
    """

    def __init__(
        self,
        name,
        shape,
        dtype,
        stack: HbmStack,
        data=None,
        values=True,
        _base=None,
        ranges=None,
        keep=None,
    ):
        self.name = name
        self.dtype = as_dtype(dtype)
        self.stack = stack
        if _base is None:
            shape = tuple(int(n) for n in shape)
            if not shape or min(shape) < 1:
                raise ValueError(f"shape must be positive sizes, not {shape!r}")
            nbytes = int(np.prod(shape)) * self.dtype.itemsize
            if stack.used_bytes + nbytes > stack.capacity_bytes:
                raise KernelError(
                    f"hbm_tensor {name!r}",
                    f"HBM overflow: {nbytes} bytes requested on {stack.name}, "
                    f"{stack.used_bytes} of {stack.capacity_bytes} in use",
                )
            stack.used_bytes += nbytes
            self.id = next(_ids)
            self._data = None
            if values:
                if data is None:
                    self._data = np.zeros(shape, self.dtype)
                else:
                    array = np.asarray(data)
                    if array.shape != shape:
                        raise ValueError(f"data has shape {array.shape}, not {shape}")
                    if array.dtype != self.dtype:
                        raise ValueError(
                            f"data has dtype {array.dtype}, not {dtype_name(self.dtype)}"
                        )
                    self._data = array.copy()
            self.base_shape = shape
            self._root = self
        else:
            self._root = _base
            self.id = _base.id
            self.base_shape = _base.base_shape
        self.ranges = ranges or tuple((0, n) for n in self.base_shape)
        self.keep = keep or (True,) * len(self.base_shape)

    def _derive(self, ranges, keep):
        return HbmTensor(
            self.name, None, self.dtype, self.stack, _base=self._root, ranges=ranges, keep=keep
        )

    def _array(self):
        return self._root._data

    def __repr__(self):
        return f"{self.stack.name}:{self.name}{list(self.shape)}:{dtype_name(self.dtype)}"
