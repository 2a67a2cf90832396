"""Exact values of nc_matmul: ``stationary.T @ moving`` in the engine's number format."""

from __future__ import annotations

import functools
import threading

import numpy as np

from ..formats import (
    CANONICAL_NAN_BITS,
    FLOAT_FORMATS,
    MX_BLOCK,
    MX_FORMATS,
    FloatFormat,
    IntFormat,
    MXFormat,
    format_of_dtype,
    formats_mix,
    get_format,
)
from .config import MAX_N, EngineConfig

__all__ = ["matmul", "check_operands", "resolve_formats", "float_matmul", "mx_matmul"]

#: The Trainium2 engine: 128x128, every format (``nc_matmul`` takes them all, ISA).
_DEFAULT = EngineConfig(fmt="all")


@functools.lru_cache(maxsize=64)
def _int_config(rows: int, cols: int, fmt) -> EngineConfig:
    return EngineConfig(rows, cols, fmt)


def check_operands(stationary, moving, cfg: EngineConfig = _DEFAULT):
    """Check shapes, dtypes and value ranges of an nc_matmul; return them as int64 arrays.

    Raises
    ------
    ValueError
        Naming the argument, the bad value and what is allowed.
    """
    fmt = cfg.fmt
    arrays = []
    for name, value in (("stationary", stationary), ("moving", moving)):
        array = np.asarray(value)
        if array.ndim != 2:
            raise ValueError(f"{name} must be a 2-D array, not one of shape {array.shape}")
        if array.dtype.kind not in "iu":
            raise ValueError(
                f"{name} has dtype {array.dtype}, which the {fmt.name} engine does not take; "
                f"use integer arrays (int8) with values in {fmt.min_value}..{fmt.max_value}"
            )
        if array.size and not fmt.accepts(array.dtype):
            low, high = int(array.min()), int(array.max())
            if low < fmt.min_value or high > fmt.max_value:
                raise ValueError(
                    f"{name} holds values in {low}..{high}; {fmt.name} allows "
                    f"{fmt.min_value}..{fmt.max_value}"
                )
        arrays.append(array)
    return _check_shapes(arrays[0], arrays[1], cfg)


def _check_shapes(a: np.ndarray, b: np.ndarray, cfg: EngineConfig):
    for name, array in (("stationary", a), ("moving", b)):
        if array.ndim != 2:
            raise ValueError(f"{name} must be a 2-D array, not one of shape {array.shape}")
    (k, m), (k2, n) = a.shape, b.shape
    if k != k2:
        raise ValueError(
            f"stationary has K={k} rows but moving has K={k2}; the contraction sizes must match"
        )
    limits = (("K", k, cfg.rows), ("M", m, cfg.cols), ("N", n, MAX_N))
    for label, size, limit in limits:
        if not 1 <= size <= limit:
            raise ValueError(
                f"{label}={size} is outside 1..{limit} for a {cfg.rows}x{cfg.cols} engine"
            )
    return a, b


_scratch = threading.local()


def _buffer(name: str, shape: tuple[int, ...], dtype) -> np.ndarray:
    """A float scratch array reused across calls (per thread). BLAS on freshly allocated
    operands ran 3x slower here than on reused ones (0.32 against 0.11 ms at 128x128x512)."""
    key = (name, shape, np.dtype(dtype).char)
    cache = _scratch.__dict__.setdefault("arrays", {})
    if key not in cache:
        if len(cache) > 64:
            cache.clear()
        cache[key] = np.empty(shape, dtype)
    return cache[key]


def _exact_product(a: np.ndarray, b: np.ndarray, fmt: IntFormat, k: int) -> np.ndarray:
    """``a.T @ b`` exactly, wrapped to the accumulator, using BLAS when every partial sum fits
    the float mantissa (then no sum can reach the accumulator's range either, and the float
    result converts straight to it: one pass, no int64 intermediate)."""
    bound = k * (1 << (2 * (fmt.bits - 1)))  # largest |partial sum| possible
    fits_acc = bound < 1 << (fmt.acc_bits - 1)
    for mantissa, dtype in ((24, np.float32), (53, np.float64)):
        if bound < 1 << mantissa and fits_acc:
            fa = _buffer("a", (a.shape[1], a.shape[0]), dtype)
            fb = _buffer("b", b.shape, dtype)
            out = _buffer("out", (a.shape[1], b.shape[1]), dtype)
            np.copyto(fa, a.T, casting="unsafe")
            np.copyto(fb, b, casting="unsafe")
            np.matmul(fa, fb, out=out)
            return out.astype(fmt.acc_dtype)
    return fmt.wrap_acc(a.T.astype(np.int64) @ b.astype(np.int64))


def _side_format(name: str, array: np.ndarray, cfg: EngineConfig):
    """The format one operand carries, from its dtype."""
    if array.dtype.kind in "iu":
        for fmt in cfg.formats:
            if isinstance(fmt, IntFormat):
                return fmt
        raise ValueError(
            f"{name} has integer dtype {array.dtype} but the engine's formats are "
            f"{_names(cfg)}; pass arrays of {cfg.fmt.name}'s dtype {cfg.fmt.dtype}"
        )
    fmt = format_of_dtype(array.dtype)
    if fmt is None:
        allowed = ", ".join(
            ["int8"] + [str(f.dtype) for f in FLOAT_FORMATS.values() if not f.ignored_low_bits]
        )
        raise ValueError(
            f"{name} has dtype {array.dtype}, which the tensor engine does not take; "
            f"allowed: {allowed} (TF32 as float32 with fmt='tf32')"
        )
    tf32 = FLOAT_FORMATS["tf32"]
    if fmt.name == "fp32" and fmt not in cfg.formats and tf32 in cfg.formats:
        return tf32  # float32 arrays on an engine with TF32 but not FP32 carry TF32
    return fmt


def _names(cfg: EngineConfig) -> str:
    return ", ".join(f.name for f in cfg.formats)


def resolve_formats(stationary, moving, cfg: EngineConfig = _DEFAULT, fmt=None):
    """The formats of both operands of an nc_matmul, checked against the engine's rules.

    ``fmt`` names one format for both sides or a pair ``(stationary, moving)``; by default
    each side's format follows its dtype (float32 is FP32, or TF32 on an engine that has TF32
    and not FP32). The two FP8 formats may be mixed; any other
    floating-point format must be the same on both sides (FP32 or TF32 on one side forces the
    other to match); integers do not mix with floating point.

    Raises
    ------
    ValueError
        Naming the side, its dtype or format, and what is allowed.
    """
    given = {"stationary": stationary, "moving": moving}
    is_mx = {n: isinstance(v, tuple) for n, v in given.items()}
    arrays = {n: np.asarray(v[0] if is_mx[n] else v) for n, v in given.items()}
    if fmt is None:
        pair = [
            _mx_format(n, a) if is_mx[n] else _side_format(n, a, cfg) for n, a in arrays.items()
        ]
    else:
        names = fmt if isinstance(fmt, tuple) else (fmt, fmt)
        pair = [get_format(f) for f in names]
        for (name, array), f in zip(arrays.items(), pair, strict=True):
            if isinstance(f, MXFormat) != is_mx[name]:
                takes = "an (elements, scales) pair" if isinstance(f, MXFormat) else "one array"
                raise ValueError(f"{name} must be {takes} for {f.name}")
            want = f.dtype if isinstance(f, FloatFormat | MXFormat) else None
            if want is not None and array.dtype != want:
                raise ValueError(f"{name} must be {want} for {f.name}, not {array.dtype}")
    s_fmt, m_fmt = pair
    for name, f in zip(arrays, pair, strict=True):
        if f not in cfg.formats:
            raise ValueError(
                f"{name} is {f.name}, not one of the formats this {cfg.rows}x{cfg.cols} "
                f"engine was elaborated with ({_names(cfg)})"
            )
    if s_fmt.kind != m_fmt.kind:
        kinds = "MX and other" if "mx" in (s_fmt.kind, m_fmt.kind) else "integer and floating-point"
        raise ValueError(
            f"stationary is {s_fmt.name} and moving is {m_fmt.name}: {kinds} operands do not mix"
        )
    if not formats_mix(s_fmt, m_fmt):
        raise ValueError(
            f"stationary is {s_fmt.name} and moving is {m_fmt.name}: only the two FP8 "
            "formats may be mixed; other formats must match"
        )
    return s_fmt, m_fmt


def _mx_format(name: str, elements: np.ndarray) -> MXFormat:
    """The MX format of an (elements, scales) operand, from its elements' dtype."""
    for fmt in MX_FORMATS.values():
        if fmt.dtype == elements.dtype:
            return fmt
    allowed = ", ".join(f"{f.dtype} ({f.name})" for f in MX_FORMATS.values())
    raise ValueError(
        f"{name} is an MX (elements, scales) pair with elements of dtype {elements.dtype}; "
        f"allowed: {allowed}"
    )


def _float_operand(array: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    values = array.astype(np.float32)
    if fmt.ignored_low_bits:
        mask = np.uint32((0xFFFFFFFF << fmt.ignored_low_bits) & 0xFFFFFFFF)
        values = (values.view(np.uint32) & mask).view(np.float32)
    return values


def float_matmul(a: np.ndarray, b: np.ndarray, s_fmt: FloatFormat, m_fmt: FloatFormat):
    """The numerics contract: ``acc = fp32(acc + fp32(w * x))`` for k = 0..K-1 from +0.0,
    round to nearest even, subnormals kept, every NaN made the canonical quiet NaN."""
    w = _float_operand(a, s_fmt)
    x = _float_operand(b, m_fmt)
    k, m = w.shape
    n = x.shape[1]
    acc = np.zeros((m, n), np.float32)
    product = _buffer("product", (m, n), np.float32)
    with np.errstate(all="ignore"):  # overflow to inf and inf - inf are part of the contract
        for j in range(k):
            np.multiply(w[j][:, None], x[j][None, :], out=product)
            acc += product
    nan = np.isnan(acc)
    if nan.any():
        acc[nan] = np.uint32(CANONICAL_NAN_BITS).view(np.float32)
    return acc


def _mx_operand(name: str, operand, fmt: MXFormat):
    """An MX operand's elements as float64 and its scales' E8M0 codes, checked."""
    elements, scales = operand
    elements = np.asarray(elements)
    if elements.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array, not one of shape {elements.shape}")
    k = elements.shape[0]
    if k % MX_BLOCK:
        raise ValueError(
            f"{name} has K={k} rows; MX operands ({fmt.name}) take K a multiple of {MX_BLOCK} "
            f"(one E8M0 scale per {MX_BLOCK} elements along K)"
        )
    try:
        elements, scales = fmt.check(elements, scales, axis=0)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None
    return elements.astype(np.float64), scales.view(np.uint8).astype(np.int64)


def mx_matmul(a, b, s_fmt: MXFormat, m_fmt: MXFormat) -> np.ndarray:
    """The MX numerics contract: with ``p = w[k] * x[k] * 2**(sw + sx)`` (the elements times
    the E8M0 scales of their two blocks, ``k // 32``: exact), ``acc = fp32(acc + fp32(p))``
    for k = 0..K-1 from +0.0, rounded to nearest even: the product is rounded once to binary32
    (exact unless it leaves binary32's normal range), then accumulated as every
    floating-point format is (:func:`float_matmul`). A NaN scale (0xFF) makes its block's
    products NaN; every NaN is the canonical quiet NaN.

    ``a`` and ``b`` are ``(elements, scales)`` pairs: ``[K, M]`` and ``[K/32, M]``,
    ``[K, N]`` and ``[K/32, N]``.
    """
    w, sw = _mx_operand("stationary", a, s_fmt)
    x, sx = _mx_operand("moving", b, m_fmt)
    k, m = w.shape
    n = x.shape[1]
    acc = np.zeros((m, n), np.float32)
    product = _buffer("mx_product", (m, n), np.float64)
    # 2**(ew + ex) with ew, ex = code - 127, in float64: exact for every pair (2**-254..2**254)
    scale = np.ldexp(1.0, sw[:, :, None] + sx[:, None, :] - 254)
    scale[(sw == 0xFF)[:, :, None] | (sx == 0xFF)[:, None, :]] = np.nan
    with np.errstate(all="ignore"):  # overflow to inf and inf - inf are part of the contract
        for j in range(k):
            np.multiply.outer(w[j], x[j], out=product)  # exact: 4 x 4 significant bits at most
            product *= scale[j // MX_BLOCK]  # exact: a power of two, far inside float64
            acc += product.astype(np.float32)  # one rounding of the product, then the sum's
    nan = np.isnan(acc)
    if nan.any():
        acc[nan] = np.uint32(CANONICAL_NAN_BITS).view(np.float32)
    return acc


def matmul(stationary, moving, *, cfg: EngineConfig | None = None, fmt=None) -> np.ndarray:
    """nc_matmul: ``stationary[K, M]``, ``moving[K, N]`` -> ``stationary.T @ moving`` ``[M, N]``.

    Integer operands (int8): exact int32 sums wrapping like the RTL's accumulator (with int8
    and K <= 128 no sum can overflow); integer partial sums below 2**24 are exact in float32,
    so the product runs on BLAS.

    Floating-point operands (``ml_dtypes`` float8_e4m3, float8_e4m3fn, float8_e5m2, bfloat16;
    numpy float16, float32): a float32 array equal bit for bit to the sequential computation
    ``acc = fp32(acc + fp32(w[k] * x[k]))`` for k = 0, 1, ..., K-1 from +0.0, rounded to
    nearest even, subnormals kept, any NaN the canonical quiet NaN 0x7FC00000 (see
    ``docs/numerics.md``). TF32 operands are float32 arrays with ``fmt="tf32"``: the low 13
    mantissa bits are ignored (cleared) before multiplying.

    MX operands (``mxfp8``, ``mxfp8_e5m2``, ``mxfp4``, :class:`~tlm.formats.MXFormat`; an
    engine of the TLM only) are ``(elements, scales)`` pairs, the scales per 32 elements
    along K (K a multiple of 32), the format following the elements' dtype: the same
    sequential sum of products, each scaled by its two blocks' scales (:func:`mx_matmul`).

    Parameters
    ----------
    stationary : array_like, shape (K, M)
        K <= ``cfg.rows`` (contraction, partition dimension), M <= ``cfg.cols``.
    moving : array_like, shape (K, N)
        N <= 512 (one PSUM bank of fp32).
    cfg : EngineConfig, optional
        Engine whose limits and formats apply; the default is the 128x128 Trainium2 engine
        with every format.
    fmt : str or (str, str), optional
        Format of both operands, or of (stationary, moving); by default from the dtypes.

    Returns
    -------
    numpy.ndarray, shape (M, N), int32 for integer operands, float32 otherwise

    Examples
    --------
    >>> import numpy as np
    >>> matmul(np.array([[1, 2], [3, 4]], np.int8), np.array([[5], [6]], np.int8))
    array([[23],
           [34]], dtype=int32)
    >>> import ml_dtypes
    >>> w = np.array([[1.5], [2.0]], ml_dtypes.bfloat16)
    >>> matmul(w, np.array([[2.0], [0.25]], ml_dtypes.bfloat16))
    array([[3.5]], dtype=float32)
    """
    if cfg is None:
        cfg = _DEFAULT
    s_fmt, m_fmt = resolve_formats(stationary, moving, cfg, fmt)
    if s_fmt.kind == "mx":
        _check_shapes(np.asarray(stationary[0]), np.asarray(moving[0]), cfg)
        return mx_matmul(stationary, moving, s_fmt, m_fmt)
    if s_fmt.kind == "float":
        a, b = _check_shapes(np.asarray(stationary), np.asarray(moving), cfg)
        return float_matmul(a, b, s_fmt, m_fmt)
    a, b = check_operands(stationary, moving, _int_config(cfg.rows, cfg.cols, s_fmt))
    return _exact_product(a, b, s_fmt, a.shape[0])
