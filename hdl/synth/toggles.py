"""Toggle counts per net from a VCD file: the activity half of a dynamic-power proxy.

A small reader of its own: pyvcd's tokenizer stops at the escaped names Amaranth's simulator
writes for the fields of a signal (``$var wire 8 ; \\i[0] $end``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Net", "count_toggles", "value_changes"]

#: Variable types that hold no bits (Amaranth writes an enum's name as a ``string``).
_NOT_BITS = {"string", "real", "realtime", "event"}


@dataclass
class Net:
    """One net of a VCD (every variable sharing its identifier code): its first full name,
    width in bits, bit toggles counted and value changes seen."""

    name: str
    width: int
    toggles: int = 0
    changes: int = 0


def count_toggles(path: Path, *, start: int = 1) -> dict[str, Net]:
    """Bit toggles of every net of the VCD at ``path``, keyed by identifier code.

    A toggle is one bit changing between 0 and 1: a change from ``0110`` to ``0011`` is two.
    Values at times before ``start`` (default 1: the initial values dumped at time 0) set the
    starting state and count nothing; a change to or from ``x`` or ``z`` counts nothing.
    Variables sharing an identifier code are one net (a port seen from both sides), and a
    variable with an escaped name that is a field or element of a variable of the same scope
    (Amaranth's ``\\payload.data``, ``\\lanes[0]`` beside ``payload`` and ``lanes``) is left
    out: its bits are counted in the whole.

    Examples
    --------
    >>> nets = count_toggles(Path("gemm.vcd"))                 # doctest: +SKIP
    >>> sum(n.toggles for n in nets.values())                  # doctest: +SKIP
    123456
    """
    nets: dict[str, Net] = {}
    value: dict[str, int | None] = {}
    scope: list[str] = []
    declared: list[set[str]] = [set()]
    with open(path) as stream:
        for line in stream:  # the header: one declaration per line, as simulators write it
            words = line.split()
            if not words:
                continue
            head = words[0]
            if head == "$scope":
                scope.append(words[2])
                declared.append(set())
            elif head == "$upscope":
                scope.pop()
                declared.pop()
            elif head == "$var":
                _, kind, width, code, ref = words[:5]
                if kind in _NOT_BITS or code in nets:
                    continue
                base = re.split(r"[.\[]", ref.lstrip("\\"), maxsplit=1)[0]
                if ref.startswith("\\") and base in declared[-1]:
                    continue  # a field of a variable already counted whole
                declared[-1].add(ref)
                nets[code] = Net(".".join([*scope, ref.lstrip("\\")]), int(width))
            elif head == "$enddefinitions":
                break
        for time, code, bits in value_changes(stream):
            net = nets.get(code)
            if net is None:
                continue
            try:
                new = int(bits, 2)
            except ValueError:
                new = None
            old = value.get(code)
            value[code] = new
            if time >= start and old is not None and new is not None and old != new:
                net.toggles += (old ^ new).bit_count()
                net.changes += 1
    return nets


def value_changes(stream) -> Iterator[tuple[int, str, str]]:
    """``(time, code, bits)`` of each scalar or vector value change in a VCD ``stream`` read
    past its header (``$enddefinitions``); ``bits`` as written (``x`` and ``z`` kept).
    ``$dumpvars``, ``$end``, real and string changes are skipped."""
    time = 0
    for line in stream:
        c = line[:1]
        if c == "#":
            time = int(line[1:])
            continue
        if c in "bB":
            bits, code = line[1:].split()
        elif c in "01xXzZ":
            bits, code = c, line[1:].strip()
        else:
            continue
        yield time, code, bits
