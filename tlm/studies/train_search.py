"""``trnsim train-search``: every valid parallel layout of a model on each of ``--chips`` chip
counts, evaluated on Dask - the best layout by time or cost under a memory and power budget,
and the Pareto front of time to train against cost.

The layouts are :func:`tlm.cluster.search.candidates`' (tensor, context, pipeline, data and
expert parallelism, ZeRO 0-3, micro-batch, interleave, recomputation); each is priced by
``trnsim train``'s model (:func:`tlm.cluster.search.evaluate`). ``--scheduler local`` (the
default) starts a local Dask cluster, ``inline`` evaluates in this process, an address
(``tcp://host:8786``) spreads the chunks over an existing cluster; ``--out-dir`` keeps each
chunk's results so an interrupted search resumes. Pinning axes (``--tp 8``) narrows it. The
series: the Pareto front. See docs/cluster.md.

Examples
--------
>>> from tlm.studies import run_study
>>> r = run_study("train-search", model="llama3-8b", chips="64,128", scheduler="inline").results
>>> r.evaluated > 1000, r.best_chips in (64, 128), r.front_layouts >= 1
(True, True, True)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from ..cluster.memory import RECOMPUTE
from ..cluster.search import AXES, NoValidLayout, search
from ..hardware.prices import price_footing
from .collective import parse_sizes
from .hardware import with_price_footing
from .protocol import (
    CHIP_COUNTS_ALLOWED,
    COUNT_UNITS,
    MAX_CHIPS,
    PLOT_ALLOWED,
    InputError,
    Results,
    Study,
    SweepInputs,
    figure,
    plot_path,
    progress,
    register,
)
from .train import FabricInputs

__all__ = ["SearchInputs", "SearchResults", "FrontRow", "search_study"]

#: Most chip counts one search may take.
MAX_COUNTS = 32


def _axis_field(what: str, items: str):
    return Field(
        "all",
        description=f"{what} to try",
        json_schema_extra={"allowed": f"all, or a comma-separated list of {items}"},
    )


#: An axis of the search: all its values, or the ones listed.
_Sizes = (
    Literal["all"] | Annotated[list[Annotated[int, Field(ge=1, le=MAX_CHIPS)]], Field(min_length=1)]
)
_Stages = Literal["all"] | Annotated[list[Annotated[int, Field(ge=0, le=3)]], Field(min_length=1)]
_Recomputes = Literal["all"] | Annotated[list[Literal[RECOMPUTE]], Field(min_length=1)]


class SearchInputs(FabricInputs, SweepInputs):
    """Inputs of ``trnsim train-search`` (``--chips`` is a list here)."""

    chips: str = Field(
        "1024,4096,16384",
        description="chip counts to search",
        json_schema_extra={"allowed": CHIP_COUNTS_ALLOWED},
    )
    objective: Literal["time", "cost"] = Field(
        "time", description="what the best layout minimises: time to train or cloud cost"
    )
    memory_budget_bytes: float | None = Field(
        None, gt=0, description="memory per chip allowed", json_schema_extra={"unset": "the HBM"}
    )
    power_budget_w: float | None = Field(
        None,
        gt=0,
        description="facility power allowed",
        json_schema_extra={"unset": "the power of the largest chip count (no limit)"},
    )
    tp: _Sizes = _axis_field("tensor-parallel sizes", f"integers in 1..{MAX_CHIPS}")
    pp: _Sizes = _axis_field("pipeline-parallel sizes", f"integers in 1..{MAX_CHIPS}")
    cp: _Sizes = _axis_field("context-parallel sizes", f"integers in 1..{MAX_CHIPS}")
    ep: _Sizes = _axis_field("expert-parallel sizes", f"integers in 1..{MAX_CHIPS}")
    zero: _Stages = _axis_field("ZeRO stages", "0, 1, 2, 3")
    recompute: _Recomputes = _axis_field("recomputations", ", ".join(RECOMPUTE))
    chunk: int = Field(200_000, ge=1000, le=10_000_000, description="layouts per Dask task")
    plot: str | None = Field(
        None,
        description="write the Pareto front as a figure",
        json_schema_extra={"allowed": PLOT_ALLOWED},
    )

    def counts(self) -> list[int]:
        """The chip counts ``--chips`` names."""
        counts = parse_sizes(self.chips, "chips", CHIP_COUNTS_ALLOWED, COUNT_UNITS)
        if len(counts) > MAX_COUNTS or max(counts) > 10_000_000:
            raise InputError(
                "chips",
                self.chips,
                CHIP_COUNTS_ALLOWED + f" (1..{MAX_COUNTS} counts, each at most 10,000,000)",
            )
        return counts

    def fixed(self) -> dict:
        """The axes narrowed to the values listed (recomputations by their index)."""
        out = {}
        for name in ("tp", "pp", "cp", "ep", "zero", "recompute"):
            values = getattr(self, name)
            if values != "all":
                out[name] = (
                    [RECOMPUTE.index(v) for v in values] if name == "recompute" else list(values)
                )
        return out

    def resolve(self) -> SearchInputs:
        from ..cluster.search import run_power_w

        hw = self.device()
        model = self.workload()
        counts = self.counts()
        update = self.resolved_resilience(min(counts))
        self.fixed()
        self.check_scheduler()
        plot_path("plot", self.plot)
        if self.sites > 1:
            from ..cluster.search import engines

            for n in counts:
                try:
                    engines(hw, self.settings(), n)
                except ValueError as error:
                    raise InputError(
                        "sites",
                        self.sites,
                        "a number of sites every chip count "
                        "splits into whole, aligned blocks of nodes",
                        str(error),
                    ) from None
        if self.memory_budget_bytes is None:
            update["memory_budget_bytes"] = hw.hbm_bytes
        if self.power_budget_w is None:
            settings = self.settings() + self.run_settings()
            update["power_budget_w"] = float(run_power_w(model, hw, max(counts), settings))
        return self.model_copy(update=update)


class FrontRow(BaseModel):
    """One layout of the Pareto front (time to train against cloud cost)."""

    chips: int
    dp: int
    tp: int
    pp: int
    cp: int
    ep: int
    zero: int
    micro_batch: int
    interleave: int
    recompute: str
    step_s: float
    mfu_fraction: float
    memory_bytes: float
    goodput_fraction: float
    train_days: float
    cost_usd: float
    power_w: float


class SearchResults(Results):
    """The best layout and the search's counts; the series: the Pareto front."""

    evaluated: int = Field(description="layouts evaluated")
    valid_layouts: int = Field(description="passing every rule of the model and the chips")
    fitting_layouts: int = Field(description="within the memory and power budgets")
    chunks: int
    resumed_chunks: int = Field(description="loaded from --out-dir instead of evaluated")
    best_chips: int
    best_dp: int
    best_tp: int
    best_pp: int
    best_cp: int
    best_ep: int
    best_zero: int
    best_micro_batch: int
    best_interleave: int
    best_recompute: str
    best_step_s: float
    best_mfu_fraction: float
    best_train_days: float
    best_cost_usd: float
    best_power_w: float
    front_layouts: int
    series: list[FrontRow] = Field(default=[], exclude=True)


SearchResults = with_price_footing(SearchResults)


def _front_row(row: dict) -> FrontRow:
    return FrontRow(
        **{k: row[k] for k in (*AXES, "step_s", "memory_bytes", "cost_usd", "power_w")},
        mfu_fraction=row["mfu"],
        goodput_fraction=row["goodput"],
        train_days=row["train_s"] / 86400,
    )


def search_study(inputs: SearchInputs) -> SearchResults:
    """Enumerate, evaluate in chunks, pick."""
    import numpy as np

    # every step and run input reaches the step and the run
    settings = inputs.step_settings() + inputs.settings() + inputs.run_settings()
    budget = {"memory_bytes": inputs.memory_budget_bytes, "power_w": inputs.power_budget_w}
    try:
        found = search(
            inputs.workload(),
            inputs.device(),
            inputs.counts(),
            settings=settings,
            fixed=inputs.fixed(),
            scheduler=inputs.scheduler,
            out_dir=inputs.out_dir,
            chunk=inputs.chunk,
            workers=inputs.workers or None,
            progress=lambda done, total: progress(done, total, "chunks of layouts"),
        )
        best = found.best(inputs.objective, **budget)
    except NoValidLayout as error:
        if error.budget is not None:  # a budget cut the last layouts: name it
            field = f"{error.budget.removesuffix('_w').removesuffix('_bytes')}_budget_"
            field += "w" if error.budget == "power_w" else "bytes"
            raise InputError(
                field, getattr(inputs, field), "a budget some valid layout meets", f"leaves {error}"
            ) from None
        raise InputError(
            "chips", inputs.chips, "chip counts with a valid, fitting layout", str(error)
        ) from None
    front = [_front_row(found.row(int(i))) for i in found.front(**budget)]
    results = SearchResults(
        evaluated=found.evaluated,
        valid_layouts=int(np.isfinite(found.step_s).sum()),
        fitting_layouts=int(found.feasible(**budget).sum()),
        chunks=found.chunks,
        resumed_chunks=found.resumed_chunks,
        **{f"best_{k}": best[k] for k in (*AXES, "step_s", "cost_usd", "power_w")},
        best_mfu_fraction=best["mfu"],
        best_train_days=best["train_s"] / 86400,
        front_layouts=len(front),
        series=front,
        **price_footing(inputs.device()),
    )
    if inputs.plot is not None:
        write_front(inputs, found, results)
    return results


def write_front(inputs: SearchInputs, found, results: SearchResults) -> Path:
    """Every feasible layout as a dot of time to train against cost, the front as a line."""
    import numpy as np

    budget = {"memory_bytes": inputs.memory_budget_bytes, "power_w": inputs.power_budget_w}
    ok = found.feasible(**budget)
    with figure(inputs.plot, figsize=(7.5, 4.8)) as (fig, ax):
        for n in np.unique(found.chips[ok]):
            sel = ok & (found.chips == n)
            ax.scatter(
                found.train_s[sel] / 86400,
                found.cost_usd[sel] / 1e6,
                s=3,
                alpha=0.3,
                label=f"{n} chips",
            )
        ax.plot(
            [r.train_days for r in results.series],
            [r.cost_usd / 1e6 for r in results.series],
            "k.-",
            label="Pareto front",
        )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("days to train (with goodput)")
        ax.set_ylabel("cloud cost (M$)")
        ax.set_title(f"{inputs.model} on {inputs.hardware}: {int(ok.sum())} feasible layouts")
        ax.legend(fontsize=8, markerscale=4)
    return Path(inputs.plot)


STUDY = register(
    Study(
        "train-search",
        SearchInputs,
        search_study,
    )
)
