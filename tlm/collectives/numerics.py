"""The collectives' numerics contract, defined once for the values engine and its reference.

* Buffers hold the operation's format (:data:`tlm.formats.FORMATS`: ``bf16``, ``fp32``, the FP8
  formats, ``fp16``) and travel in it: a chunk of ``n`` elements is ``n x itemsize`` bytes.
* A reduction combines two values of the format as the runtime's vector engine does: both are
  widened to binary32, added (or the larger taken) in binary32, and the result is rounded to
  the format, to nearest even (:func:`combine`). One rounding to the format per addition; an
  fp32 buffer rounds once (the binary32 add).
* The order of the additions is the algorithm's (each algorithm's ``order``); addition is
  commutative in IEEE arithmetic, so only the tree's shape matters.
* Overflow follows the cast: infinities where the format has them, NaN in ``fp8_e4m3fn``.

Bound on the error against the exact (float64) sum of the inputs, for a result whose tree has
depth ``h`` (additions on its longest path) over ``r`` inputs ``x``:
``|result - sum(x)| <= g(h) * sum(|x|) + h * eta``, ``g(h) = (1 + u)^h - 1`` (Higham's bound
for recursive summation, which needs no ``h u < 1``: FP8 sums over 16 ranks pass it), ``u`` the unit
roundoff of one combine (the format's ``2^-(m+1)`` plus binary32's ``2^-24`` before it, for
formats narrower than binary32) and ``eta`` half the smallest subnormal step of the format
(:func:`error_bound`).

Examples
--------
>>> import numpy as np, ml_dtypes
>>> a = np.array([1.0], ml_dtypes.bfloat16); b = np.array([2**-8], ml_dtypes.bfloat16)
>>> combine(a, b, "sum")               # 1 + 2^-8 rounds to even: 1
array([1], dtype=bfloat16)
>>> round(float(error_bound("bf16", 4, np.array([2.0]))[0]), 6)      # 4 additions, |x| sums to 2
0.031434
"""

from __future__ import annotations

import numpy as np

from ..formats import FLOAT_FORMATS, get_format

__all__ = ["REDUCTIONS", "COLLECTIVE_FORMATS", "combine", "error_bound"]

#: The reductions the collectives support.
REDUCTIONS = ("sum", "max")
#: Formats a collective's buffer may hold: the floating-point formats with a numpy dtype of
#: their own (TF32 travels as FP32 and is not a buffer format).
COLLECTIVE_FORMATS = tuple(n for n, f in FLOAT_FORMATS.items() if f.ignored_low_bits == 0)


def combine(a: np.ndarray, b: np.ndarray, reduction: str) -> np.ndarray:
    """``a`` and ``b`` (same format) combined under the contract: binary32, then rounded back.

    Raises
    ------
    ValueError
        If ``reduction`` is not one of :data:`REDUCTIONS`.
    """
    wide_a, wide_b = a.astype(np.float32), b.astype(np.float32)
    if reduction == "sum":
        out = wide_a + wide_b
    elif reduction == "max":
        out = np.maximum(wide_a, wide_b)
    else:
        raise ValueError(f"reduction must be one of {', '.join(REDUCTIONS)}, not {reduction!r}")
    return out.astype(a.dtype)


def error_bound(fmt, depth: int, magnitude_sum: np.ndarray) -> np.ndarray:
    """The largest error the contract allows a sum of depth ``depth`` against the exact sum,
    given ``magnitude_sum`` = the sum of the inputs' magnitudes (per element)."""
    fmt = get_format(fmt)
    u = 2.0 ** -(fmt.man_bits + 1)
    if fmt.man_bits < 23:
        u = u + 2.0**-24 + u * 2.0**-24
    emin = 2 - 2 ** (fmt.exp_bits - 1)  # the smallest normal exponent
    eta = 2.0 ** (emin - fmt.man_bits) / 2 + 2.0**-150
    gamma = (1.0 + u) ** depth - 1.0
    return gamma * np.asarray(magnitude_sum, dtype=np.float64) + depth * eta
