"""Elementwise functions of numpy arrays or of scalars: the cluster and operator-cost models'
formulas are written once and evaluated either on arrays of configurations (a strategy search)
or on the Python numbers of one configuration (a single estimate).

numpy's functions pay about a microsecond per call whatever the size of their operands, and a
0-d array or numpy scalar pays it again in every later operation: a single estimate, a few
hundred such operations, spent most of its time there. These functions call numpy on arrays
and plain Python on scalars (``a if c else b``, :func:`math.ceil`), which gives the same IEEE
double results: each is exact (a selection, a comparison, a rounding to an integer), and
Python's ``+ - * /`` on floats are numpy's (tests/test_cluster_training.py and
tests/test_cluster_search.py check one configuration against its vectorised row bit for bit).

:func:`log2`, :func:`exp` and :func:`power` call numpy on scalars too (returning a float):
numpy's transcendental loops need not round as :mod:`math`'s do (its SIMD builds have their
own), and a scalar goes through the same loop as an array's element, so the bits agree
(tests/test_elementwise.py checks it on random values).

Scalars here are finite numbers: :func:`maximum` and :func:`minimum` of a scalar NaN follow
Python's comparisons, not numpy's NaN propagation (the models mark an invalid configuration
with NaN only at the end, after these functions). A Python ``bool`` is negated with
:func:`logical_not` (``~True`` is -2).

Examples
--------
>>> import numpy as np
>>> where(np.array([True, False]), 1.0, 2.0).tolist(), where(False, 1.0, 2.0)
([1.0, 2.0], 2.0)
>>> ceil(2.5), ceil(np.array([2.5])).tolist()
(3.0, [3.0])
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "where",
    "maximum",
    "minimum",
    "clip",
    "ceil",
    "floor",
    "log2",
    "exp",
    "power",
    "any_",
    "isfinite",
    "all_",
    "logical_not",
    "zeros_like",
    "ones_like",
    "as_float",
    "as_int",
    "number",
    "first",
    "shaped",
    "broadcast_shape",
]


_ARRAY = np.ndarray


def where(cond, a, b):
    """``np.where(cond, a, b)``; on scalars ``a if cond else b``."""
    if type(cond) is _ARRAY or type(a) is _ARRAY or type(b) is _ARRAY:
        return np.where(cond, a, b)
    return a if cond else b


def maximum(a, b):
    """``np.maximum(a, b)``; on (finite) scalars the larger."""
    if type(a) is _ARRAY or type(b) is _ARRAY:
        return np.maximum(a, b)
    return b if b > a else a


def minimum(a, b):
    """``np.minimum(a, b)``; on (finite) scalars the smaller."""
    if type(a) is _ARRAY or type(b) is _ARRAY:
        return np.minimum(a, b)
    return b if b < a else a


def clip(x, low, high):
    """``np.clip(x, low, high)``; on (finite) scalars ``min(max(x, low), high)``."""
    if type(x) is _ARRAY or type(low) is _ARRAY or type(high) is _ARRAY:
        return np.clip(x, low, high)
    return minimum(maximum(x, low), high)


def ceil(x):
    """``np.ceil(x)`` (a float); on a finite scalar :func:`math.ceil` as a float."""
    if type(x) is np.ndarray:
        return np.ceil(x)
    return float(math.ceil(x)) if math.isfinite(x) else x


def floor(x):
    """``np.floor(x)`` (a float); on a finite scalar :func:`math.floor` as a float."""
    if type(x) is np.ndarray:
        return np.floor(x)
    return float(math.floor(x)) if math.isfinite(x) else x


def log2(x):
    """``np.log2(x)``; on a scalar numpy's own as a float (the same bits as an array's)."""
    if type(x) is np.ndarray:
        return np.log2(x)
    return float(np.log2(x))


def exp(x):
    """``np.exp(x)``; on a scalar numpy's own as a float (the same bits as an array's)."""
    if type(x) is np.ndarray:
        return np.exp(x)
    return float(np.exp(x))


def power(x, y):
    """``np.power(x, y)``; on scalars numpy's own as a float (the same bits as an array's)."""
    if type(x) is np.ndarray or type(y) is np.ndarray:
        return np.power(x, y)
    return float(np.power(float(x), float(y)))


def isfinite(x):
    """``np.isfinite(x)``; on a scalar :func:`math.isfinite`."""
    if type(x) is np.ndarray:
        return np.isfinite(x)
    return math.isfinite(x)


def any_(x) -> bool:
    """Whether any element of ``x`` is true (a scalar: whether it is)."""
    if type(x) is np.ndarray:
        return bool(x.any())
    return bool(x)


def all_(x) -> bool:
    """Whether every element of ``x`` is true (a scalar: whether it is)."""
    if type(x) is np.ndarray:
        return bool(x.all())
    return bool(x)


def logical_not(x):
    """``~x`` of booleans (a Python bool is negated with ``not``: ``~True`` is -2)."""
    if type(x) is np.ndarray or isinstance(x, np.bool_):
        return ~x
    return not x


def zeros_like(x):
    """Zeros (floats) of ``x``'s shape; on a scalar ``0.0``."""
    return np.zeros_like(x, dtype=float) if type(x) is np.ndarray else 0.0


def ones_like(x):
    """Ones (floats) of ``x``'s shape; on a scalar ``1.0``."""
    return np.ones_like(x, dtype=float) if type(x) is np.ndarray else 1.0


def as_float(x):
    """``x`` as floats: an array of float64, or a float."""
    if type(x) is np.ndarray:
        return x.astype(float)
    return float(x)


def as_int(x):
    """``x`` as int64: an array, or a numpy int64 scalar."""
    if type(x) is np.ndarray:
        return x.astype(np.int64)
    return np.int64(x)


def number(x):
    """A Python or numpy scalar (not a bool) as a float; anything else (a bool too) as
    ``np.asarray(x, dtype=float)``."""
    t = type(x)
    if t is float or t is int or t in (np.float64, np.int64):  # (isinstance of numpy's
        return float(x)  # abstract types is slow; these are the usual scalars)
    if isinstance(x, (int, float, np.integer, np.floating)) and t is not bool:
        return float(x)
    return np.asarray(x, dtype=float)


def first(x):
    """The first element of an array as a Python number (a scalar as it is)."""
    return x.ravel()[0].item() if type(x) is np.ndarray else x


def broadcast_shape(*xs) -> tuple:
    """The shape ``xs`` broadcast to: ``()`` when none is an array (no numpy call)."""
    if any(type(x) is np.ndarray for x in xs):
        return np.broadcast_shapes(*(np.shape(x) for x in xs))
    return ()


def shaped(x, shape, dtype=float):
    """``x`` as an array of ``shape``: an array of that shape as it is (of ``dtype``), an
    array that broadcasts to it broadcast, a scalar filled in."""
    if type(x) is np.ndarray:
        x = np.asarray(x, dtype=dtype)
        return x if x.shape == shape else np.broadcast_to(x, shape)
    if not shape:
        return np.array(x, dtype=dtype)
    if shape == (1,):
        return np.array((x,), dtype=dtype)  # (np.full is slower for one element)
    return np.full(shape, x, dtype=dtype)
