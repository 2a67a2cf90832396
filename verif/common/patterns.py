"""Valid/ready patterns for stream drivers: every bench runs under idle and backpressure."""

from __future__ import annotations

import itertools

import numpy as np

__all__ = ["PATTERNS", "pattern"]

#: Named valid/ready patterns: every bench runs under idle and backpressure patterns.
PATTERNS = {
    "always": [1],
    "3of4": [1, 1, 1, 0],
    "1of2": [1, 0],
    "1of4": [1, 0, 0, 0],
    "random": None,  # drawn from the seed
}


def pattern(name: str, rng: np.random.Generator):
    """An endless iterator of booleans for the named pattern."""
    if name not in PATTERNS:
        raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, not {name!r}")
    if PATTERNS[name] is None:
        p = rng.uniform(0.2, 0.9)
        return iter(lambda: bool(rng.random() < p), None)
    return itertools.cycle(bool(v) for v in PATTERNS[name])
