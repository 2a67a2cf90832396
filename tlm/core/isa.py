"""What the Vector, Scalar and GpSimd instructions compute, and what each costs.

Arithmetic is in FP32 (``NKI2``: the engines compute in FP32 whatever their operand formats);
inputs convert to float32 exactly, results round to the destination's format to nearest even
(``ml_dtypes``/numpy casts). Functions use numpy float32; GELU is the tanh approximation.
Sums (``add`` reductions, ``accum``) are numpy float32 sums: their order is numpy's, not a
specified hardware order, so they are checked within a tolerance, not bit for bit.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["ACTIVATIONS", "ALU_OPS", "REDUCE_OPS", "stream_cycles"]


def _gelu(x):
    c = np.float32(math.sqrt(2.0 / math.pi))
    return np.float32(0.5) * x * (np.float32(1.0) + np.tanh(c * (x + np.float32(0.044715) * x**3)))


#: Functions of the Scalar engine's ``activation``: ``func(in * scale + bias)``.
ACTIVATIONS = {
    "identity": lambda x: x,
    "exp": np.exp,
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, np.float32(0.0)),
    "gelu": _gelu,
}

#: Binary operators of tensor_tensor and tensor_scalar.
ALU_OPS = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "max": np.maximum,
    "min": np.minimum,
}

#: Reductions along the free dimensions.
REDUCE_OPS = {"add": np.sum, "max": np.max, "min": np.min}


def stream_cycles(engine, free_elements: int, operand_bytes: int) -> int:
    """Cycles of one Vector/Scalar/GpSimd instruction on ``free_elements`` per partition.

    The engine processes ``elements_per_cycle`` elements per cycle over all 128 partitions
    (``_2byte`` when every operand is 2 bytes wide, else ``_4byte``), so a partition's
    elements take ``free_elements * 128 / elements_per_cycle`` cycles whatever the number of
    partitions used, plus a fixed cost per instruction.
    """
    if operand_bytes <= 2:
        rate = engine.elements_per_cycle_2byte
    else:
        rate = engine.elements_per_cycle_4byte
    return engine.fixed_cycles + math.ceil(free_elements * 128 / rate)
