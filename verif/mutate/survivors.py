"""The survivors a reader classified (``verif/mutate/survivors.toml``): mutants no bench kills
and Yosys's cut check cannot prove equivalent, each with its reason.

A class is ``equivalent`` (argued: the difference needs a state or input the design never
has) or ``proof`` (beyond what a bench can reach; the formal property ``property`` checks the
same logic). An entry names its target and the exact ``mutate`` command: when the RTL
changes, Yosys numbers its cells anew, the entry no longer matches, and the mutant shows as an
unclassified survivor until someone reads it again. :func:`unmatched` finds the entries a run
shows dead: killed, proven by the cut check, or naming a cell the design no longer has.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

__all__ = ["SURVIVORS", "CLASSES", "load", "cells", "unmatched", "unmatched_line"]

SURVIVORS = Path(__file__).with_name("survivors.toml")
CLASSES = ("equivalent", "proof")


def load(path: Path = SURVIVORS) -> dict[tuple[str, str], dict]:
    """``(target, mutation) -> {"class", "reason", "property"?}``, checked.

    Raises
    ------
    ValueError
        On an entry without target, mutation or reason, an unknown class, or a ``proof``
        naming no property of :data:`verif.formal.properties.PROPERTIES`.
    """
    from verif.formal.properties import PROPERTIES

    entries = {}
    for i, entry in enumerate(tomllib.loads(Path(path).read_text()).get("survivor", [])):
        where = f"{path}: survivor {i + 1}"
        for key in ("target", "mutation", "class", "reason"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise ValueError(
                    f"{where}: {key} must be a non-empty string, not {entry.get(key)!r}"
                )
        if entry["class"] not in CLASSES:
            raise ValueError(f"{where}: class must be one of {CLASSES}, not {entry['class']!r}")
        if entry["class"] == "proof" and entry.get("property") not in PROPERTIES:
            raise ValueError(
                f"{where}: property must be one of {', '.join(PROPERTIES)}, "
                f"not {entry.get('property')!r}"
            )
        entries[(entry["target"], entry["mutation"])] = entry
    return entries


def cells(design: Path) -> set[tuple[str, str]]:
    """``(module, cell)`` of every cell of an RTLIL ``design`` (``verif.mutate.yosys.prepare``),
    named as a ``mutate`` command names them (no leading backslash)."""
    found, module = set(), None
    for line in Path(design).read_text().splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "module":
            module = words[1].removeprefix("\\")
        elif len(words) >= 3 and words[0] == "cell" and module is not None:
            found.add((module, words[2].removeprefix("\\")))
    return found


_WHERE = re.compile(r"-module (\S+) -cell (\S+)")


def unmatched(entries: dict, target: str, mutants, design_cells: set) -> list[tuple[str, str]]:
    """The entries of ``target`` that classified no survivor of a run and never will, each as
    ``(mutation, why)``: its mutant was killed or proven by the cut check, or its cell is not
    in the design (``design_cells``, :func:`cells`; the RTL changed and Yosys numbered its cells
    anew). An entry whose mutation the run did not plant but whose cell is there may be
    planted by another seed or count: not listed.

    ``entries`` is :func:`load`'s result; ``mutants`` the run's
    :class:`verif.mutate.grade.Mutant` objects of ``target``.
    """
    planted = {m.mutation: m for m in mutants}
    dead = []
    for name, mutation in entries:
        if name != target:
            continue
        mutant = planted.get(mutation)
        if mutant is not None:
            if mutant.kills:
                dead.append((mutation, f"killed by {mutant.kills[0].bench}"))
            elif mutant.classified is None and mutant.status == "equivalent":
                dead.append((mutation, "proven equivalent by the cut check"))
            continue
        where = _WHERE.search(mutation)
        if where is not None and where.groups() not in design_cells:
            dead.append((mutation, f"no cell {where.group(2)} in {where.group(1)}"))
    return dead


def unmatched_line(dead: dict[str, list[tuple[str, str]]]) -> str | None:
    """One line naming every dead entry (``target -> [(mutation, why)]``), or ``None``."""
    items = [
        f"{target} `{mutation.removeprefix('mutate ').split(' -src')[0]}` ({why})"
        for target, found in dead.items()
        for mutation, why in found
    ]
    if not items:
        return None
    return (
        f"[mutate] {SURVIVORS.name}: {len(items)} "
        f"{'entry matches' if len(items) == 1 else 'entries match'} no survivor and never "
        f"will, remove {'it' if len(items) == 1 else 'them'}: " + "; ".join(items)
    )
