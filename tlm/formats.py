"""Number formats of the tensor engine, defined once for RTL, TLM and benches.

A format says how an operand is stored (width, signedness), which numpy dtype holds it in the
TLM, and what the accumulator is. ``hdl/`` builds its Amaranth shapes from these objects and
``tlm/`` computes with them; neither keeps its own copy.

Examples
--------
>>> from tlm.formats import get_format
>>> fmt = get_format("int8")
>>> fmt.bits, fmt.acc_bits, fmt.min_value, fmt.max_value
(8, 32, -128, 127)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["IntFormat", "FORMATS", "INT8", "get_format"]


@dataclass(frozen=True)
class IntFormat:
    """A two's-complement integer operand format with a wrapping integer accumulator.

    Parameters
    ----------
    name : str
        Name used on the command line and in file names (``"int8"``).
    bits : int
        Operand width in bits.
    acc_bits : int
        Accumulator (and result) width in bits; sums wrap modulo ``2**acc_bits``.
    """

    name: str
    bits: int
    acc_bits: int

    def __post_init__(self):
        if not isinstance(self.bits, int) or not 2 <= self.bits <= 32:
            raise ValueError(f"bits must be an integer in 2..32, not {self.bits!r}")
        if self.acc_bits not in (16, 32, 64):
            raise ValueError(f"acc_bits must be one of 16, 32, 64, not {self.acc_bits!r}")

    kind = "int"

    @property
    def min_value(self) -> int:
        return -(1 << (self.bits - 1))

    @property
    def max_value(self) -> int:
        return (1 << (self.bits - 1)) - 1

    @property
    def acc_dtype(self) -> np.dtype:
        """numpy dtype of results."""
        return np.dtype(f"int{self.acc_bits}")

    def accepts(self, dtype: np.dtype) -> bool:
        """True when arrays of ``dtype`` can carry this format's operands exactly."""
        dtype = np.dtype(dtype)
        if dtype.kind not in "iu":
            return False
        info = np.iinfo(dtype)
        return info.min >= self.min_value and info.max <= self.max_value

    def wrap_acc(self, values: np.ndarray) -> np.ndarray:
        """Wrap int64 sums to the accumulator width, as the hardware adder does."""
        return values.astype(self.acc_dtype)


INT8 = IntFormat("int8", bits=8, acc_bits=32)

#: Formats the tensor engine can be elaborated with, by name.
FORMATS: dict[str, IntFormat] = {f.name: f for f in (INT8,)}


def get_format(name: str | IntFormat) -> IntFormat:
    """Look a format up by name (a format object passes through).

    Raises
    ------
    ValueError
        If ``name`` is not one of :data:`FORMATS`.
    """
    if isinstance(name, IntFormat):
        return name
    try:
        return FORMATS[name]
    except (KeyError, TypeError):
        allowed = ", ".join(sorted(FORMATS))
        raise ValueError(f"format must be one of {allowed}, not {name!r}") from None
