"""Parameters of one tensor engine, checked once and shared by RTL, TLM and benches."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ..formats import IntFormat, get_format

__all__ = ["EngineConfig", "ErrorKind", "MAX_N", "STATUS_COUNTER_BITS"]

#: Moving columns per nc_matmul: one PSUM bank of 2 KiB holds 512 fp32 (TRN2_FACTS, ISA).
MAX_N = 512

#: Default width of each saturating error counter on the engine's status port.
STATUS_COUNTER_BITS = 16


class ErrorKind(enum.IntEnum):
    """Protocol misuse the engine detects. The value is the bit in ``status.flags`` and the
    index of the counter in ``status.counts``."""

    #: A MultiplyMoving asked to reuse the stationary before any stationary was loaded.
    #: Its beats are consumed and dropped; no results are produced.
    NO_STATIONARY = 0
    #: A LoadStationary whose ``last`` flag disagrees with its declared K (cut short or
    #: overrun). The load is discarded; an overrun drops beats up to its ``last``.
    LOAD_LENGTH = 1
    #: A LoadStationary declaring K = 0 or K > rows. The whole load is dropped.
    LOAD_K = 2


@dataclass(frozen=True)
class EngineConfig:
    """Shape and number format of a tensor engine.

    Parameters
    ----------
    rows : int
        PE rows: the contraction (K, partition) dimension, 1 or more (Trainium: 128).
    cols : int
        PE columns: the stationary free dimension (M), 1 or more (Trainium: 128).
    fmt : str or IntFormat
        Operand number format (see :mod:`tlm.formats`).
    status_bits : int
        Width of each saturating error counter on the status port (default 16).

    Examples
    --------
    >>> cfg = EngineConfig(4, 3)
    >>> cfg.latency   # cycles from a moving beat's acceptance to its result being valid
    8
    """

    rows: int = 128
    cols: int = 128
    fmt: IntFormat = field(default="int8")
    status_bits: int = STATUS_COUNTER_BITS

    def __post_init__(self):
        for name in ("rows", "cols"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1024:
                raise ValueError(f"{name} must be an integer in 1..1024, not {value!r}")
        object.__setattr__(self, "fmt", get_format(self.fmt))
        bits = self.status_bits
        if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 32:
            raise ValueError(f"status_bits must be an integer in 1..32, not {bits!r}")

    @property
    def latency(self) -> int:
        """Cycles (without stalls) from accepting a moving beat to its result being valid:
        ``rows`` down the columns, ``cols`` across the rows and de-skew, and one register
        between the skew lines and the array."""
        return self.rows + self.cols + 1

    @property
    def k_bits(self) -> int:
        """Width of the declared-K field of a load beat."""
        return self.rows.bit_length()

    @property
    def tag(self) -> str:
        """Short name used for generated modules and build folders."""
        return f"r{self.rows}c{self.cols}_{self.fmt.name}"
