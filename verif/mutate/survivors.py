"""The survivors a reader classified (``verif/mutate/survivors.toml``): mutants no bench kills
and Yosys's cut check cannot prove equivalent, each with its reason.

A class is ``equivalent`` (argued: the difference needs a state or input the design never
has) or ``proof`` (beyond what a bench can reach; the formal property ``property`` checks the
same logic). An entry names its target and the exact ``mutate`` command: when the RTL
changes, Yosys numbers its cells anew, the entry no longer matches, and the mutant shows as an
unclassified survivor until someone reads it again.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

__all__ = ["SURVIVORS", "CLASSES", "load"]

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
