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

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

__all__ = [
    "IntFormat",
    "FloatFormat",
    "MXFormat",
    "FORMATS",
    "PE_FORMATS",
    "FLOAT_FORMATS",
    "MX_FORMATS",
    "MX_BLOCK",
    "E8M0_NAN",
    "FP4_E2M1",
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

#: Formats a PE multiplies as they are: what the RTL tensor engine can be elaborated with, and
#: what :func:`format_set` means by ``"all"`` (the format codes on the engine's ports).
PE_FORMATS: dict[str, IntFormat | FloatFormat] = {INT8.name: INT8, **FLOAT_FORMATS}

#: OCP MX v1.0: elements per block sharing one scale.
MX_BLOCK = 32
#: The E8M0 scale code that means NaN (OCP MX v1.0, 5.4.1); codes 0..254 are 2**(code - 127).
E8M0_NAN = 0xFF
_E8M0_BIAS = 127

#: FP4 E2M1 (OCP MX v1.0, 5.3.3): values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives; no
#: infinity, no NaN. Only ever an MX element type, never a format of its own on the engine.
FP4_E2M1 = FloatFormat("fp4_e2m1", 2, 1, np.dtype(ml_dtypes.float4_e2m1fn), 6.0, has_inf=False)


@dataclass(frozen=True)
class MXFormat:
    """An OCP Microscaling (MX v1.0) format: blocks of :data:`MX_BLOCK` (32) elements of a
    small float type sharing one E8M0 scale (an 8-bit power of two, bias 127, 0xFF = NaN).

    An MX operand is two arrays: ``elements`` (the element type's ``ml_dtypes`` dtype, the
    operand's shape) and ``scales`` (``float8_e8m0fnu``, one per block of 32 along the axis
    the blocks run on). Its value is ``element * scale``; a NaN scale makes its whole block
    NaN.

    Parameters
    ----------
    name : str
        Name on the command line (``"mxfp8"``: E4M3 elements).
    element : FloatFormat
        The element type (E4M3 is OCP's, max 448, no infinities: ``fp8_e4m3fn``).

    Examples
    --------
    >>> import numpy as np
    >>> fmt = get_format("mxfp4")
    >>> fmt.element.name, fmt.storage_bits, fmt.emax_elem
    ('fp4_e2m1', 4.25, 2)
    >>> elements, scales = fmt.quantize(np.arange(32.0))
    >>> float(scales[0]), float(elements[31]), float(fmt.dequantize(elements, scales)[31])
    (4.0, 6.0, 24.0)
    """

    name: str
    element: FloatFormat

    kind = "mx"
    acc_bits = 32
    block = MX_BLOCK
    scale_bits = 8

    def __post_init__(self):
        if not isinstance(self.element, FloatFormat) or self.element.bits > 8:
            raise ValueError(
                f"element must be a FloatFormat of at most 8 bits, not {self.element!r}"
            )

    @property
    def bits(self) -> int:
        """Bits of one element."""
        return self.element.bits

    @property
    def storage_bits(self) -> float:
        """Bits an element costs in memory and on the wire, its share of the scale included:
        ``bits + 8 / 32`` (8.25 for MXFP8, 4.25 for MXFP4)."""
        return self.bits + self.scale_bits / self.block

    @property
    def dtype(self) -> np.dtype:
        """The array type of the elements (``ml_dtypes``; FP4 takes a byte per element in
        numpy, though it costs :attr:`storage_bits` in the model's memory and traffic)."""
        return self.element.dtype

    @property
    def acc_dtype(self) -> np.dtype:
        return np.dtype(np.float32)

    @property
    def max_value(self) -> float:
        """Largest finite element value (the scale multiplies it)."""
        return self.element.max_value

    @property
    def emax_elem(self) -> int:
        """Exponent of the element type's largest normal: 8 for E4M3, 15 for E5M2, 2 for E2M1."""
        return math.frexp(self.element.max_value)[1] - 1

    @property
    def _emin_elem(self) -> int:
        """Exponent of the element type's smallest normal (subnormals share its quantum)."""
        return 2 - (1 << (self.element.exp_bits - 1))

    def _blocks(self, name, array, axis):
        if array.ndim == 0:
            raise ValueError(f"{name} must have at least one dimension, not shape ()")
        try:
            moved = np.moveaxis(array, axis, -1)
        except np.exceptions.AxisError:
            raise ValueError(
                f"axis must be one of {-array.ndim}..{array.ndim - 1} for {name} of shape "
                f"{array.shape}, not {axis!r}"
            ) from None
        size = moved.shape[-1]
        if size % self.block:
            raise ValueError(
                f"{name} has {size} elements along axis {axis}; {self.name} takes multiples "
                f"of {self.block} (one E8M0 scale per block of {self.block})"
            )
        return moved.reshape(*moved.shape[:-1], size // self.block, self.block)

    def quantize(self, values, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Quantise ``values`` to this format in blocks of 32 along ``axis``.

        The reference algorithm of OCP MX v1.0 (6.3): ``shared_exp = floor(log2(max |x|)) -
        emax_elem`` over each block, clamped below to -127 (E8M0's least); the scale is
        ``2**shared_exp``; each element is ``x / scale`` rounded to nearest, ties to even, in
        the element type, saturating at its largest normal (the spec leaves overflow to the
        implementation; saturation is what its reference code does). An all-zero block gets
        the least scale, 2**-127 (code 0x00). A block holding a NaN or an infinity (or, from
        float64 input, a shared exponent above 127) gets the NaN scale 0xFF and zero elements:
        it decodes to NaN throughout. Every step is exact: exponents by ``frexp``, scaling by
        ``ldexp``, rounding by ``rint`` at the element's quantum; ``ml_dtypes`` only stores the
        already representable result (its float64 cast rounds twice, through float32).

        Parameters
        ----------
        values : array_like of floats (float16/32/64, bfloat16)
            The length along ``axis`` must be a multiple of 32.
        axis : int
            The axis the blocks run along (the contraction, K, for a matmul operand).

        Returns
        -------
        elements : numpy.ndarray of ``self.dtype``, the shape of ``values``
        scales : numpy.ndarray of ``ml_dtypes.float8_e8m0fnu``
            The shape of ``values`` with ``axis`` divided by 32.

        Raises
        ------
        ValueError
            For a non-float array, a bad ``axis`` or a length that is not a multiple of 32.
        """
        x = np.asarray(values)
        if x.dtype.kind != "f" and x.dtype != np.dtype(ml_dtypes.bfloat16):
            raise ValueError(
                f"values must be floating point (float16, bfloat16, float32, float64), "
                f"not {x.dtype}"
            )
        x = x.astype(np.float64)  # exact from every float type
        blocks = self._blocks("values", x, axis)
        with np.errstate(invalid="ignore"):
            amax = np.max(np.abs(blocks), axis=-1)  # NaN propagates
        special = ~np.isfinite(amax)
        amax = np.where(special, 1.0, amax)
        floor_log2 = np.frexp(amax)[1] - 1  # exact; 0 gives -1, clamped below anyway
        shared = np.maximum(floor_log2 - self.emax_elem, -_E8M0_BIAS)
        shared = np.where(amax == 0, -_E8M0_BIAS, shared)
        special |= shared > _E8M0_BIAS
        shared = np.where(special, 0, shared)
        codes = np.where(special, E8M0_NAN, shared + _E8M0_BIAS).astype(np.uint8)
        y = np.ldexp(np.where(special[..., None], 0.0, blocks), -shared[..., None])
        elements = self._round(y)
        elements = np.moveaxis(elements.reshape(np.moveaxis(x, axis, -1).shape), -1, axis)
        scales = np.moveaxis(codes, -1, axis).view(ml_dtypes.float8_e8m0fnu)
        return elements.astype(self.dtype), scales

    def _round(self, y: np.ndarray) -> np.ndarray:
        """``y`` (float64) rounded to nearest even in the element type, saturating."""
        exponent = np.frexp(y)[1] - 1  # of y's leading bit (y = 0: -1, below emin anyway)
        quantum = np.maximum(exponent, self._emin_elem) - self.element.man_bits
        rounded = np.ldexp(np.rint(np.ldexp(y, -quantum)), quantum)
        return np.clip(rounded, -self.max_value, self.max_value)

    def dequantize(self, elements, scales, axis: int = 0) -> np.ndarray:
        """The values of an MX operand, exactly, as float64: ``element * scale`` per block.

        Raises
        ------
        ValueError
            When the dtypes or shapes of ``elements`` and ``scales`` do not fit this format.
        """
        e, s = self.check(elements, scales, axis)
        blocks = self._blocks("elements", e.astype(np.float64), axis)
        value = blocks * np.moveaxis(s.astype(np.float64), axis, -1)[..., None]  # exact
        return np.moveaxis(value.reshape(np.moveaxis(e, axis, -1).shape), -1, axis)

    def check(self, elements, scales, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``elements`` and ``scales`` as arrays, checked: dtypes, and one scale per block.

        Raises
        ------
        ValueError
            Naming the argument, what it is and what this format takes.
        """
        e, s = np.asarray(elements), np.asarray(scales)
        if e.dtype != self.dtype:
            raise ValueError(f"elements must be {self.dtype} for {self.name}, not {e.dtype}")
        if s.dtype != np.dtype(ml_dtypes.float8_e8m0fnu):
            raise ValueError(f"scales must be float8_e8m0fnu (E8M0) for {self.name}, not {s.dtype}")
        blocks = self._blocks("elements", e, axis)
        want = np.moveaxis(blocks[..., 0], -1, axis).shape
        if s.shape != want:
            raise ValueError(
                f"scales must have shape {want} (one per block of {self.block} of elements "
                f"{e.shape} along axis {axis}), not {s.shape}"
            )
        return e, s


#: OCP MX v1.0's floating-point MX formats by name (MXFP6 is not modelled). ``mxfp8`` has
#: E4M3 elements (OCP's E4M3, max 448, no infinities), ``mxfp8_e5m2`` E5M2, ``mxfp4`` E2M1.
MX_FORMATS: dict[str, MXFormat] = {
    f.name: f
    for f in (
        MXFormat("mxfp8", FLOAT_FORMATS["fp8_e4m3fn"]),
        MXFormat("mxfp8_e5m2", FLOAT_FORMATS["fp8_e5m2"]),
        MXFormat("mxfp4", FP4_E2M1),
    )
}

#: Every number format by name: the PE formats, then the MX formats (the TLM's alone: the RTL
#: engine has none, see docs/tensor_engine.md). The one list of names on the front door.
FORMATS: dict[str, IntFormat | FloatFormat | MXFormat] = {**PE_FORMATS, **MX_FORMATS}

_FORMAT_TYPES = (IntFormat, FloatFormat, MXFormat)


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
    if isinstance(name, _FORMAT_TYPES):
        return name
    try:
        return allowed[name]
    except (KeyError, TypeError):
        names = ", ".join(sorted(allowed))
        raise ValueError(f"format must be one of {names}, not {name!r}") from None


def format_set(spec) -> tuple:
    """A set of formats, as a tuple in the canonical order of :data:`FORMATS`.

    ``spec`` is a format (name or object), a sequence of them, a comma-separated string of
    names, or ``"all"`` (every format of :data:`PE_FORMATS`: what the RTL engine can be
    elaborated with; MX formats are named one by one). The position of a format in the tuple
    is its format code on the tensor engine's ports.

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
        names = list(PE_FORMATS) if spec == "all" else [s.strip() for s in spec.split(",")]
    elif isinstance(spec, _FORMAT_TYPES):
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
    FP8 formats mix, and so do any two MX formats (OCP MX v1.0 dot products take any two MX
    operands; trn3's engine takes "MXFP8/MXFP4"); any other format must be the same on both
    sides (so FP32 or TF32 on one side forces the other to match); integers never mix with
    floating point, nor MX with anything else."""
    s, m = get_format(stationary), get_format(moving)
    return (
        s == m
        or (s.kind == m.kind == "float" and s.is_fp8 and m.is_fp8)
        or s.kind == m.kind == "mx"
    )


def format_of_dtype(dtype) -> FloatFormat | None:
    """The floating-point format an array of ``dtype`` carries (float32 means FP32; TF32 is
    only ever chosen by name), or ``None`` when ``dtype`` is not a floating-point format."""
    dtype = np.dtype(dtype)
    for fmt in FLOAT_FORMATS.values():
        if fmt.dtype == dtype and fmt.ignored_low_bits == 0:
            return fmt
    return None
