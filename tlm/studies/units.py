"""Readable figures: a key's unit suffix decides how its value is shown to people.

Every figure a study returns has its unit in its name (``time_s``, ``hbm_bandwidth_Bps``,
``tensor_utilisation_fraction``). :func:`human` shows the value in the unit a person would
pick (``13.2 ms``, not ``1.32e+04 us``); :func:`label` is the key without its unit. JSON keeps
the plain numbers in SI units.

Examples
--------
>>> human("time_s", 0.0132), human("run_wall_s", 2.09e6), human("mtbf_s", 4000)
('13.2 ms', '24.2 days', '1.11 h')
>>> human("achieved_flop_per_s", 6.35e14)
'635 TFLOP/s'
>>> human("of_peak_fraction", 0.9521)
'95.2 %'
>>> human("hbm_bandwidth_Bps", 2.9e12), human("sbuf_bytes", 229376)
('2.9 TB/s', '224 KiB')
>>> column("time_s", [2e-7, 5e-8])
('time (ns)', ['200', '50'])
>>> column("size_bytes", [8, 2**30])
('size', ['8 B', '1 GiB'])
>>> label("hbm_bandwidth_Bps")
'hbm bandwidth'
"""

from __future__ import annotations

__all__ = ["UNITS", "human", "column", "label", "labels", "significant"]

_SI = (
    (1e21, "Z"),
    (1e18, "E"),
    (1e15, "P"),
    (1e12, "T"),
    (1e9, "G"),
    (1e6, "M"),
    (1e3, "k"),
    (1.0, ""),
)
#: Durations in the largest sensible unit: days, hours and minutes past them, else SI seconds.
_SECONDS = (
    (86400.0, "days"),
    (3600.0, "h"),
    (60.0, "min"),
    (1.0, "s"),
    (1e-3, "ms"),
    (1e-6, "us"),
    (1e-9, "ns"),
    (1e-12, "ps"),
)
_BINARY = ((2**50, "Pi"), (2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki"), (1, ""))
_ONE = ((1.0, ""),)


def significant(value: float, digits: int = 3) -> str:
    """``value`` with ``digits`` significant digits, no exponent for everyday magnitudes."""
    if value == 0:
        return "0"
    text = f"{value:.{digits}g}"
    if "e" in text:
        _mantissa, exp = text.split("e")
        if -5 <= int(exp) < 15:
            text = f"{float(text):f}".rstrip("0").rstrip(".")
    return text


#: Unit suffixes of figure names: (unit shown, scales to pick from, factor to the unit shown).
UNITS = {
    "_flop_per_s": ("FLOP/s", _SI, 1.0),
    "_tokens_per_s": ("tokens/s", _SI, 1.0),
    "_flop": ("FLOP", ((1e24, "Y"), (1e21, "Z"), *_SI), 1.0),
    "_flits_per_node_cycle": ("flits/node/cycle", _ONE, 1.0),
    "_flits_per_cycle": ("flits/cycle", _ONE, 1.0),
    "_fraction": ("%", _ONE, 100.0),
    "_ratio": ("x", _ONE, 1.0),
    "_cycles": ("cycles", _ONE, 1.0),
    "_bytes": ("B", _BINARY, 1.0),
    "_Bps": ("B/s", _SI, 1.0),
    "_hz": ("Hz", _SI, 1.0),
    "_s": ("", _SECONDS, 1.0),  # (the unit is in the scale: 3.2 days, 13.2 ms)
    "_w": ("W", _SI, 1.0),
    "_j": ("J", _SI, 1.0),
    "_usd": ("$", _SI, 1.0),
    "_per_day": ("/day", _ONE, 1.0),
    "_per_s": ("/s", _SI, 1.0),
    "_days": ("days", _ONE, 1.0),
}


def _unit(key: str):
    for suffix in sorted(UNITS, key=len, reverse=True):
        if key.endswith(suffix) or (key == suffix[1:] and suffix != "_cycles"):
            return suffix
    return None


def _scale(suffix: str, magnitude: float) -> tuple[float, str]:
    _text, scales, factor = UNITS[suffix]
    if magnitude == 0:  # nothing: in the base unit (0 s, not 0 ps)
        return next(((s / factor, p) for s, p in scales if s == 1.0), (1.0, ""))
    for scale, prefix in scales:
        if magnitude * factor >= scale * 0.9995:
            return scale / factor, prefix
    scale, prefix = scales[-1]
    return scale / factor, prefix


def _plain(value) -> str | None:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
    if isinstance(value, str):
        return value
    return None


def _number(value) -> str:
    """A count or a plain number: thousands separated (3,500,000 switch ports)."""
    if isinstance(value, int):
        return f"{value:,}"
    text = significant(value)
    if abs(value) >= 1e4 and text.lstrip("-").isdigit():
        return f"{int(text):,}"
    return text


def human(key: str, value) -> str:
    """``value`` of the figure ``key`` as a person would read it."""
    plain = _plain(value)
    if plain is not None:
        return plain
    suffix = _unit(key)
    if suffix is None:
        return _number(value)
    scale, prefix = _scale(suffix, abs(value))
    unit = UNITS[suffix][0]
    if suffix == "_cycles" and isinstance(value, int):
        return f"{value:,} {unit}"
    if suffix == "_ratio":  # 6.95x
        return f"{significant(value)}x"
    return f"{significant(value / scale)} {prefix}{unit}"


def column(key: str, values) -> tuple[str, list[str]]:
    """A table column of figure ``key``: its header with one unit for the whole column
    (picked by the largest value), and the cells in that unit; a column whose values span
    more than three orders of magnitude (a sweep of sizes) shows each cell in its own unit."""
    suffix = _unit(key)
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    nonzero = [abs(v) for v in numbers if v]
    if suffix is None or not nonzero or max(nonzero) > 1000 * min(nonzero):
        return label(key), [human(key, v) for v in values]  # each cell in its own unit
    scale, prefix = _scale(suffix, max(abs(v) for v in numbers))
    header = f"{label(key)} ({prefix}{UNITS[suffix][0]})"
    cells = []
    for v in values:
        plain = _plain(v)
        if plain is not None:
            cells.append(plain)
        elif suffix == "_cycles" and isinstance(v, int):
            cells.append(f"{v:,}")
        else:
            cells.append(significant(v / scale))
    return header, cells


#: What a figure of each unit is, to tell apart two figures a table would give one name
#: (``checkpoint_bytes`` and ``checkpoint_fraction``: checkpoint size, checkpoint share).
_NOUNS = {"_bytes": "size", "_fraction": "share", "_s": "time", "_w": "power", "_j": "energy"}


def labels(keys) -> list[str]:
    """:func:`label` of each key, a name two keys share followed by what each figure is."""
    plain = [label(k) for k in keys]
    names = []
    for key, name in zip(keys, plain, strict=True):
        if plain.count(name) > 1:
            suffix = _unit(key)
            name = f"{name} {_NOUNS.get(suffix) or (UNITS[suffix][0] if suffix else '')}".rstrip()
        names.append(name)
    return names


def label(key: str) -> str:
    """The name of figure ``key`` without its unit, in words."""
    suffix = _unit(key)
    if suffix is not None and key != suffix[1:]:
        key = key[: -len(suffix)]
    return key.replace("_", " ")
