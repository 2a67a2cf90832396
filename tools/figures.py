"""Rewrite one figure of a TOML data file in place, every other byte kept: what the
calibration tools (``tools/calibrate_*.py``) use to ship what they fit."""

from __future__ import annotations

import re

__all__ = ["set_figure"]


def set_figure(text: str, name: str, shown: str, source: str | None = None) -> tuple[str, bool]:
    """``text`` with the first ``name = { value = ..., ...}`` line's value set to ``shown``
    (only a line whose source is ``source``, when given), and whether there was one."""
    rest = r",.*" if source is None else rf', source = "{source}".*'
    pattern = re.compile(rf"^({re.escape(name)} = {{ value = )([^,]+)({rest})$", re.M)
    text, n = pattern.subn(lambda m: m[1] + shown + m[3], text, count=1)
    return text, n == 1
