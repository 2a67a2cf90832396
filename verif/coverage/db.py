"""Coverage items on cocotb-coverage, written per run and merged across runs.

Each item is a ``cocotb_coverage.coverage.CoverPoint`` whose bins are labels (strings); a
sampler (:mod:`verif.coverage.tensor`, :mod:`verif.coverage.link`) decides which labels a cycle
hit, from what the scoreboards and monitors already see, and calls :meth:`Covergroup.sample`.
At the end of a bench, :func:`write_run` exports cocotb-coverage's database as JSON into
``build/coverage/runs/`` (``COVERAGE_DIR``); :func:`merge` adds the runs up, bin by bin.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from cocotb_coverage.coverage import CoverPoint, coverage_db

__all__ = ["Covergroup", "RUNS", "runs_dir", "write_run", "load_runs", "merge", "fraction"]

#: Where each run writes its coverage unless ``COVERAGE_DIR`` says otherwise.
RUNS = Path(__file__).resolve().parents[2] / "build" / "coverage" / "runs"


def runs_dir() -> Path:
    return Path(os.environ.get("COVERAGE_DIR") or RUNS)


class Covergroup:
    """Named coverage items, each a cocotb-coverage ``CoverPoint`` over label bins.

    Parameters
    ----------
    items : dict of str to list of str
        Full item name (``tensor.misuse``) to its bins.
    fresh : bool
        Start the items from zero hits (cocotb-coverage keeps one database per process: two
        cocotb tests of one bench run in one simulator process must not add up). Otherwise an
        item already registered keeps its hits, and its bins must be the same.

    Examples
    --------
    >>> group = Covergroup({"doc.example": ["a", "b"]})
    >>> group.sample("doc.example", "a")
    >>> group.hits("doc.example")
    {'a': 1, 'b': 0}
    """

    def __init__(self, items: dict[str, list[str]], *, fresh: bool = True):
        if fresh:
            self.forget(items)
        self._sample = {}
        self._active: dict[str, frozenset] = {}
        self._bins = {name: set(bins) for name, bins in items.items()}
        for name, bins in items.items():
            if not bins or len(set(bins)) != len(bins):
                raise ValueError(f"bins of {name} must be distinct labels, not {bins!r}")
            if name in coverage_db and list(coverage_db[name].detailed_coverage) != list(bins):
                raise ValueError(f"{name} is registered with other bins")
            point = CoverPoint(name, vname="label", bins=list(bins))

            def sample(label):  # the CoverPoint matches its argument against the bins
                pass

            self._sample[name] = point(sample)

    def sample(self, name: str, label: str):
        """Count one hit of bin ``label`` of item ``name``."""
        if label not in self._bins[name]:
            raise ValueError(f"{label!r} is not a bin of {name}: {sorted(self._bins[name])}")
        self._sample[name](label)

    def sample_all(self, name: str, labels: Iterable[str]):
        for label in labels:
            self.sample(name, label)

    def sample_rising(self, name: str, labels: set[str]):
        """Count the bins of ``labels`` (this cycle's) that were not in the previous call's
        set for ``name``: a state held for many cycles counts once per time it is entered,
        which keeps sampling cheap where a state is common (credits at zero, a stall)."""
        last = self._active.get(name, frozenset())
        for label in labels - last:
            self.sample(name, label)
        self._active[name] = frozenset(labels)

    @staticmethod
    def hits(name: str) -> dict[str, int]:
        return dict(coverage_db[name].detailed_coverage)

    @staticmethod
    def forget(names: Iterable[str]):
        """Drop items from cocotb-coverage's database (a process that samples several runs
        apart: the model-only replays)."""
        for name in names:
            coverage_db.pop(name, None)


def write_run(tag: str, meta: dict) -> Path:
    """Write every item of cocotb-coverage's database, with ``meta`` (bench, seed, ...), to
    ``runs_dir()/<tag>-<pid>.json``; returns the path."""
    out = runs_dir()
    out.mkdir(parents=True, exist_ok=True)
    items = {
        name: {"bins": {str(k): v for k, v in point.detailed_coverage.items()}}
        for name, point in coverage_db.items()
        if hasattr(point, "detailed_coverage") and "." in name
    }
    path = out / f"{tag}-{os.getpid()}.json"
    path.write_text(json.dumps({"meta": meta, "items": items}, indent=1, sort_keys=True))
    return path


def load_runs(folder: Path | None = None) -> list[dict]:
    """Every run file in ``folder`` (default :func:`runs_dir`)."""
    folder = Path(folder or runs_dir())
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]


def merge(runs: Iterable[dict]) -> dict[str, dict[str, int]]:
    """Hits per bin per item, summed over ``runs``; an item's bins are the union of the bins
    its runs declared (a bin no run hit counts 0)."""
    merged: dict[str, dict[str, int]] = {}
    for run in runs:
        for name, item in run["items"].items():
            bins = merged.setdefault(name, {})
            for label, hits in item["bins"].items():
                bins[label] = bins.get(label, 0) + hits
    return merged


def fraction(bins: dict[str, int]) -> float:
    """Share of ``bins`` hit at least once."""
    return sum(1 for h in bins.values() if h) / len(bins) if bins else 0.0
