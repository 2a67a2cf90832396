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

import ml_dtypes
import numpy as np

__all__ = [
    "IntFormat",
    "FloatFormat",
    "FORMATS",
    "FLOAT_FORMATS",
    "INT8",
    "get_format",
    "format_set",
    "formats_mix",
    "format_of_dtype",
    "CANONICAL_NAN_BITS",
]

#: Any NaN a floating-point nc_matmul produces is this quiet NaN (binary32 bits).
CANONICAL_NAN_BITS = 0x7FC00000


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


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point operand format; products and sums are IEEE binary32.

    Parameters
    ----------
    name : str
        Name used on the command line (``"bf16"``).
    exp_bits, man_bits : int
        Exponent and stored mantissa (fraction) widths; the sign is one more bit.
    dtype : numpy dtype
        The array type that carries operands in the TLM (``ml_dtypes`` for FP8 and BF16).
    max_value : float
        Largest finite value (FP8 E4M3 saturates at 240, its "fn" variant at 448).
    has_inf : bool
        Whether the all-ones exponent encodes infinities (not in ``float8_e4m3fn``).
    ignored_low_bits : int
        Low mantissa bits of ``dtype`` the engine ignores (13 for TF32 carried in float32).
    """

    name: str
    exp_bits: int
    man_bits: int
    dtype: np.dtype
    max_value: float
    has_inf: bool = True
    ignored_low_bits: int = 0

    kind = "float"
    acc_bits = 32

    @property
    def bits(self) -> int:
        return 1 + self.exp_bits + self.man_bits

    @property
    def acc_dtype(self) -> np.dtype:
        return np.dtype(np.float32)

    @property
    def storage_bits(self) -> int:
        """Bits of the container an operand travels in (32 for TF32, carried in float32)."""
        return self.dtype.itemsize * 8

    @property
    def is_fp8(self) -> bool:
        return self.bits == 8


FLOAT_FORMATS: dict[str, FloatFormat] = {
    f.name: f
    for f in (
        # Trainium's float8_e4m3 (NKI) is the IEEE-style E4M3 with infinities, max 240; its
        # float8_e4m3fn is the extended-range variant without infinities, max 448 (NKI2).
        FloatFormat("fp8_e4m3", 4, 3, np.dtype(ml_dtypes.float8_e4m3), 240.0),
        FloatFormat("fp8_e4m3fn", 4, 3, np.dtype(ml_dtypes.float8_e4m3fn), 448.0, has_inf=False),
        FloatFormat("fp8_e5m2", 5, 2, np.dtype(ml_dtypes.float8_e5m2), 57344.0),
        FloatFormat("bf16", 8, 7, np.dtype(ml_dtypes.bfloat16), 3.3895313892515355e38),
        FloatFormat("fp16", 5, 10, np.dtype(np.float16), 65504.0),
        FloatFormat(
            "tf32", 8, 10, np.dtype(np.float32), 3.4011621342146535e38, ignored_low_bits=13
        ),
        FloatFormat("fp32", 8, 23, np.dtype(np.float32), 3.4028234663852886e38),
    )
}

#: Formats the tensor engine can be elaborated with, by name.
FORMATS: dict[str, IntFormat | FloatFormat] = {INT8.name: INT8, **FLOAT_FORMATS}


def get_format(name, allowed=None):
    """Look a format up by name (a format object passes through).

    Parameters
    ----------
    name : str or format
    allowed : dict, optional
        The formats to choose among (default :data:`FORMATS`).

    Raises
    ------
    ValueError
        If ``name`` is not one of them.
    """
    allowed = FORMATS if allowed is None else allowed
    if isinstance(name, (IntFormat, FloatFormat)):
        return name
    try:
        return allowed[name]
    except (KeyError, TypeError):
        names = ", ".join(sorted(allowed))
        raise ValueError(f"format must be one of {names}, not {name!r}") from None


def format_set(spec) -> tuple:
    """A set of formats, as a tuple in the canonical order of :data:`FORMATS`.

    ``spec`` is a format (name or object), a sequence of them, a comma-separated string of
    names, or ``"all"`` (every format). The position of a format in the tuple is its format
    code on the tensor engine's ports.

    Examples
    --------
    >>> [f.name for f in format_set("bf16,fp8_e4m3")]
    ['fp8_e4m3', 'bf16']

    Raises
    ------
    ValueError
        Naming the bad entry and the formats allowed; also for an empty set.
    """
    if isinstance(spec, str):
        names = list(FORMATS) if spec == "all" else [s.strip() for s in spec.split(",")]
    elif isinstance(spec, (IntFormat, FloatFormat)):
        names = [spec]
    else:
        try:
            names = list(spec)
        except TypeError:
            raise ValueError(
                f"formats must be a format name, a list of them or 'all', not {spec!r}"
            ) from None
    chosen = [get_format(n) for n in names if n != ""]
    if not chosen:
        raise ValueError(f"formats must name at least one format, not {spec!r}")
    order = list(FORMATS.values())
    known = [f for f in order if f in chosen]
    custom = [f for i, f in enumerate(chosen) if f not in order and f not in chosen[:i]]
    return tuple(known + custom)  # formats built by hand (tests) after the named ones


def formats_mix(stationary, moving) -> bool:
    """Whether a stationary of one format may multiply a moving operand of another: the two
    FP8 formats mix; any other format must be the same on both sides (so FP32 or TF32 on one
    side forces the other to match); integers never mix with floating point."""
    s, m = get_format(stationary), get_format(moving)
    return s == m or (s.kind == m.kind == "float" and s.is_fp8 and m.is_fp8)


def format_of_dtype(dtype) -> FloatFormat | None:
    """The floating-point format an array of ``dtype`` carries (float32 means FP32; TF32 is
    only ever chosen by name), or ``None`` when ``dtype`` is not a floating-point format."""
    dtype = np.dtype(dtype)
    for fmt in FLOAT_FORMATS.values():
        if fmt.dtype == dtype and fmt.ignored_low_bits == 0:
            return fmt
    return None
