"""Golden figures compared at a stated tolerance, never bit for bit.

numpy's ``exp``, ``log2`` and ``power`` give different last bits with and without their
AVX-512 and AVX2 loops, so a float stored on one CPU is a few ulps off on another. A golden
float therefore matches within :data:`REL` of its stored value; integers, booleans and text
match exactly. :data:`REL` is also the contract of a refactoring: figures unchanged to 1e-9.

A golden file is written by the test module that owns it (``python tests/<module>.py
--write``); why a figure moved goes in the commit that rewrites it, not in the data.
"""

from __future__ import annotations

import math

#: Relative tolerance of a golden float: far above a few ulps of SIMD dispatch (~1e-16 each),
#: far below any change of the model worth a figure.
REL = 1e-9


def mismatches(actual, expected, rel: float = REL, where: str = "") -> list[str]:
    """Every place where ``actual`` differs from ``expected``: nested dicts and lists walked,
    floats within ``rel`` (relative), everything else equal. Each entry names the path and
    both values."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(actual) != set(expected):
            keys = sorted(set(actual) ^ set(expected)) if isinstance(actual, dict) else actual
            return [f"{where or '.'}: keys differ: {keys}"]
        out = []
        for key in expected:
            out += mismatches(actual[key], expected[key], rel, f"{where}.{key}")
        return out
    if isinstance(expected, list | tuple):
        if not isinstance(actual, list | tuple) or len(actual) != len(expected):
            return [f"{where}: {actual!r} is not a list of {len(expected)}"]
        out = []
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            out += mismatches(a, e, rel, f"{where}[{i}]")
        return out
    if isinstance(expected, float) and not isinstance(actual, bool | str):
        if isinstance(actual, int | float) and math.isclose(actual, expected, rel_tol=rel):
            return []
        return [f"{where}: {actual!r} against golden {expected!r} (rel {rel:g})"]
    if type(actual) is not type(expected) or actual != expected:
        return [f"{where}: {actual!r} against golden {expected!r} (exact)"]
    return []


def assert_matches(actual, expected, rel: float = REL) -> None:
    """Raise ``AssertionError`` listing every mismatch of :func:`mismatches`."""
    found = mismatches(actual, expected, rel)
    if found:
        shown = "\n  ".join(found[:20])
        more = f"\n  ... and {len(found) - 20} more" if len(found) > 20 else ""
        raise AssertionError(f"{len(found)} figures differ from the golden ones:\n  {shown}{more}")
