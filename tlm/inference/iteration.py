"""An iteration of a serving engine as data: its four numbers checked, and its figures.

An iteration is described by ``tokens`` (GEMM rows), ``sequences`` (sampled tokens),
``kv_tokens`` (keys attended, summed over sequences) and ``pairs`` (queries x keys, summed);
:class:`Iteration` holds the figures :meth:`tlm.inference.Engine.step` gives for them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from .errors import InferenceInputError

__all__ = ["Iteration", "checked_iteration", "scalar_iteration"]

#: Scalar types the fast path takes (numpy's too: a simulation's counters often are).
_INTEGERS = frozenset({int, np.int64, np.int32})
_NUMBERS = _INTEGERS | {float, np.float64, np.float32}


@dataclass(frozen=True)
class Iteration:
    """Iterations' figures (arrays of one shape). Times in seconds on the replica; ``flop``
    the model FLOPs (useful work: each multiply-accumulate of every matrix product twice,
    routed experts top-k, attention over ``pairs``), ``hbm_bytes`` the bytes every chip of
    the replica moves to and from HBM, summed."""

    time_s: np.ndarray
    compute_s: np.ndarray
    memory_s: np.ndarray
    communication_s: np.ndarray
    fixed_s: np.ndarray
    flop: np.ndarray
    hbm_bytes: np.ndarray

    def row(self, i=0) -> dict:
        return {f.name: float(np.ravel(getattr(self, f.name))[i]) for f in fields(self)}


def _checked(name, value, low):
    a = np.asarray(value, dtype=float)
    bad = ~np.isfinite(a) | (a < low)
    if bad.any():
        raise InferenceInputError(
            name, float(a[bad].flat[0]), f"a number >= {low} (or an array of them)"
        )
    return a


def checked_iteration(tokens, sequences, kv_tokens, pairs):
    """The arguments of :meth:`Engine.step` as float arrays broadcast together, checked
    (``InferenceInputError`` naming the argument and its first bad value)."""
    T = _checked("tokens", tokens, 1)
    S = _checked("sequences", sequences, 1)
    KV = _checked("kv_tokens", kv_tokens, 0)
    P = _checked("pairs", pairs, 0)
    T, S, KV, P = np.broadcast_arrays(T, S, KV, P)
    for name, a in (("tokens", T), ("sequences", S)):
        if (a != np.floor(a)).any():
            raise InferenceInputError(name, float(a[a != np.floor(a)][0]), "an integer >= 1")
    if (S > T).any():
        s, t = float(S[S > T][0]), float(T[S > T][0])
        raise InferenceInputError(
            "sequences", s, "at most tokens (each sequence has a token)", shown=f"{s!r} > {t!r}"
        )
    return T, S, KV, P


def scalar_iteration(tokens, sequences, kv_tokens, pairs) -> bool:
    """Whether :meth:`Engine.iteration_s`'s arguments are one valid iteration of plain
    numbers (integer tokens and sequences, 1 <= sequences <= tokens, finite keys and pairs
    >= 0): the fast path's case; anything else takes the checked, vectorised one."""
    return (
        type(tokens) in _INTEGERS
        and type(sequences) in _INTEGERS
        and 1 <= sequences <= tokens
        and type(kv_tokens) in _NUMBERS
        and type(pairs) in _NUMBERS
        and kv_tokens >= 0
        and pairs >= 0
        and math.isfinite(kv_tokens + pairs)
    )
