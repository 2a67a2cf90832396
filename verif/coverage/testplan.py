"""The testplan (``verif/testplan.toml``): features, the tests that exercise them, the coverage
that proves it; loaded and checked against the coverage model."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tlm.link.config import LinkConfig

from .link import router_items, torus_items
from .tensor import ITEMS as TENSOR_ITEMS

__all__ = ["Feature", "TESTPLAN", "load", "expected_items", "REFERENCE"]

TESTPLAN = Path(__file__).resolve().parents[1] / "testplan.toml"

#: The configurations whose bins the report counts even where no run declared them: the
#: router bench's (4x4, 2-flit buffers, at (1, 2)) and the largest torus of the regression.
REFERENCE = {
    "router": (LinkConfig((4, 4), depth=2), (1, 2)),
    "torus": LinkConfig((4, 4, 4)),
}


@cache
def expected_items() -> dict[str, tuple[str, ...]]:
    """Every coverage item and its bins, for the reference configurations."""
    cfg, coord = REFERENCE["router"]
    items = TENSOR_ITEMS | router_items(cfg, coord) | torus_items(REFERENCE["torus"])
    return {name: tuple(bins) for name, bins in items.items()}


@dataclass(frozen=True)
class Feature:
    """One line of the testplan.

    Parameters
    ----------
    id : str
    description : str
    tests : tuple of str
        pytest node ids without parameters, ``tests/FILE.py::FUNCTION``.
    coverage : tuple of str
        ``item`` or ``item:bin`` references into :func:`expected_items`.
    """

    id: str
    description: str
    tests: tuple[str, ...]
    coverage: tuple[str, ...]

    def bins(self) -> list[tuple[str, str]]:
        """``(item, bin)`` of every bin the feature's coverage names."""
        items = expected_items()
        out = []
        for ref in self.coverage:
            item, _, label = ref.partition(":")
            out += [(item, label)] if label else [(item, b) for b in items[item]]
        return out


def load(path: Path | None = None) -> list[Feature]:
    """The features of the testplan at ``path``, checked.

    Raises
    ------
    ValueError
        Naming the feature and the field that is missing, repeated or unknown.
    """
    path = Path(path or TESTPLAN)
    data = tomllib.loads(path.read_text())
    items = expected_items()
    features, seen = [], set()
    for i, entry in enumerate(data.get("feature", [])):
        where = f"{path.name}: feature {entry.get('id', i)!r}"
        unknown = sorted(set(entry) - {"id", "description", "tests", "coverage"})
        if unknown:
            raise ValueError(f"{where}: unknown fields {unknown}")
        for key in ("id", "description", "tests", "coverage"):
            if not entry.get(key):
                raise ValueError(f"{where}: {key} must be given and not empty")
        if entry["id"] in seen:
            raise ValueError(f"{where}: id given twice")
        seen.add(entry["id"])
        for ref in entry["coverage"]:
            item, _, label = ref.partition(":")
            if item not in items:
                raise ValueError(f"{where}: coverage {ref!r} names no item; items: {sorted(items)}")
            if label and label not in items[item]:
                raise ValueError(f"{where}: coverage {ref!r}: {label!r} is not a bin of {item}")
        for test in entry["tests"]:
            if "::" not in test or "[" in test:
                raise ValueError(f"{where}: tests must be FILE.py::FUNCTION, not {test!r}")
        features.append(
            Feature(
                entry["id"], entry["description"], tuple(entry["tests"]), tuple(entry["coverage"])
            )
        )
    if not features:
        raise ValueError(f"{path.name}: no [[feature]]")
    return features
