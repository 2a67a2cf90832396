"""The training strategy search: every valid parallel layout of a model on N chips, evaluated as
numpy arrays in chunks on Dask, the Pareto front of time against cost, the best under budgets.

:func:`candidates` enumerates the layouts - tensor (powers of two the model's heads and FFN
allow), context (powers of two splitting the sequence), pipeline (sizes dividing what is left
of the chips, at most the layers), data (the rest), expert (divisors of the experts that divide
``dp x cp``), ZeRO 0-3, micro-batch (powers of two dividing the batch per data-parallel rank),
interleave (virtual stages, ``pp x v <= layers + 2`` and micro-batches a multiple of ``pp``) and
recomputation; sequence parallelism is on wherever ``tp > 1`` (it only saves memory). It builds
the arrays axis by axis and keeps, for each constraint, how many layouts it left, so a search
that finds nothing says which constraint cut the last ones.

:func:`search` evaluates them (:func:`tlm.cluster.training.training_step`, goodput, power and
cost) in chunks: on the Dask scheduler at ``scheduler`` (an address), on a local cluster
(``"local"``, the default) or in this process (``"inline"``). With ``out_dir`` each chunk's
results are written as they arrive and a rerun with the same inputs loads them instead of
evaluating again: a killed worker or an interrupted search resumes from what was done.

Examples
--------
>>> from tlm.workloads import load_model
>>> from tlm.hardware import load_hardware
>>> found = search(load_model("llama3-8b"), load_hardware("trn2"), [64], scheduler="inline")
>>> found.evaluated > 1000, bool(found.fits.any())
(True, True)
>>> best = found.best("time")
>>> best["chips"], best["fits"]
(64, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import lru_cache

import numpy as np

from ..elementwise import isfinite, shaped, where
from ..hardware import Hardware
from ..sweep import digest, run_chunks
from ..workloads.model import Model
from ..workloads.operators import tp_allowed
from .cost import power, run_cost
from .goodput import Resilience, checkpoint_bytes, goodput
from .memory import RECOMPUTE, virtual_stages_allowed

__all__ = [
    "AXES",
    "OUTPUTS",
    "NoValidLayout",
    "SearchResult",
    "candidates",
    "evaluate",
    "search",
    "pareto_front",
    "run_power_w",
    "engines",
    "NETWORK_SETTINGS",
]

#: The layout's axes, in the order the results report them.
AXES = ("chips", "dp", "tp", "pp", "cp", "ep", "zero", "micro_batch", "interleave", "recompute")
#: What each layout is evaluated to.
OUTPUTS = (
    "step_s",
    "mfu",
    "tokens_per_s",
    "memory_bytes",
    "fits",
    "goodput",
    "train_s",
    "cost_usd",
    "power_w",
)
#: Largest micro-batch and context-parallel size tried.
MAX_MICRO_BATCH = 8
MAX_CP = 16
#: Interleave sizes tried.
INTERLEAVES = (1, 2, 3, 4, 6, 8)
#: Rows per chunk of the evaluation (one Dask task each).
DEFAULT_CHUNK = 200_000


class NoValidLayout(ValueError):
    """No layout of the model on the chips passes every constraint (the message says which
    constraint cut the last ones; ``budget``, when a budget did: ``memory_bytes`` or
    ``power_w``)."""

    def __init__(self, message: str, budget: str | None = None):
        super().__init__(message)
        self.budget = budget


def _powers(limit: int) -> np.ndarray:
    return 2 ** np.arange(int(np.log2(max(limit, 1))) + 1)


def candidates(
    model: Model,
    chips: int,
    *,
    global_batch: int | None = None,
    seq_len: int | None = None,
    fixed: dict | None = None,
) -> tuple[dict, list]:
    """Every layout of ``model`` on ``chips`` chips as arrays (one per :data:`AXES` name),
    and ``(constraint, layouts left)`` after each constraint.

    ``fixed`` pins axes to one value (``{"tp": 8}``) or a list of values.

    Raises
    ------
    NoValidLayout
        Naming the constraint that removed the last layouts and how many it removed.
    """
    fixed = dict(fixed or {})
    unknown = set(fixed) - set(AXES[2:])
    if unknown:
        raise ValueError(
            f"fixed axes must be among {', '.join(AXES[2:])}, not {sorted(unknown)[0]!r}"
        )
    gb = model.global_batch_sequences if global_batch is None else int(global_batch)
    s = model.seq_len if seq_len is None else int(seq_len)
    if not isinstance(chips, (int, np.integer)) or chips < 1:
        raise ValueError(f"chips must be a positive integer, not {chips!r}")
    cuts = []

    def pick(name, default):
        if name not in fixed:
            return np.asarray(default)
        return np.atleast_1d(np.asarray(fixed[name]))

    tp = pick("tp", [t for t in _powers(128) if tp_allowed(model, int(t)) is None])
    cp = pick("cp", [c for c in _powers(MAX_CP) if s % c == 0])
    pp = pick("pp", np.arange(1, model.layers + 1))
    grid = np.stack(np.meshgrid(tp, cp, pp, indexing="ij"), -1).reshape(-1, 3)
    cuts.append(("tp, cp and pp choices", len(grid)))
    grid = grid[chips % (grid[:, 0] * grid[:, 1] * grid[:, 2]) == 0]
    cuts.append((f"tp x cp x pp divides the {chips} chips", len(grid)))
    dp = chips // (grid[:, 0] * grid[:, 1] * grid[:, 2])
    grid = np.column_stack([dp, grid])  # dp, tp, cp, pp
    experts = model.moe.experts if model.moe else 1
    ep_choices = pick("ep", [e for e in range(1, experts + 1) if experts % e == 0])
    rows = np.repeat(grid, len(ep_choices), axis=0)
    ep = np.tile(ep_choices, len(grid))
    keep = (rows[:, 0] * rows[:, 2]) % ep == 0
    rows, ep = rows[keep], ep[keep]
    cuts.append(("ep divides dp x cp and the experts", len(rows)))
    rest = np.stack(
        np.meshgrid(
            pick("zero", [0, 1, 2, 3]),
            pick("micro_batch", _powers(MAX_MICRO_BATCH)),
            pick("interleave", INTERLEAVES),
            pick("recompute", np.arange(len(RECOMPUTE))),
            indexing="ij",
        ),
        -1,
    ).reshape(-1, 4)
    if rest.dtype.kind not in "iu":  # recompute pinned by name
        rest = _recompute_names(rest)
    n, r = len(rows), len(rest)
    base = np.repeat(np.column_stack([rows, ep]), r, axis=0)
    more = np.tile(rest, (n, 1))
    out = {
        "dp": base[:, 0],
        "tp": base[:, 1],
        "cp": base[:, 2],
        "pp": base[:, 3],
        "ep": base[:, 4],
        "zero": more[:, 0],
        "micro_batch": more[:, 1],
        "interleave": more[:, 2],
        "recompute": more[:, 3],
    }
    cuts.append(("zero, micro-batch, interleave and recompute choices", len(base)))

    def keep_where(mask, label):
        nonlocal out
        out = {k: v[mask] for k, v in out.items()}
        cuts.append((label, int(mask.sum())))

    keep_where(
        gb % (out["dp"] * out["micro_batch"]) == 0,
        f"dp x micro_batch divides the global batch of {gb}",
    )
    n_micro = gb // (out["dp"] * out["micro_batch"])
    v = out["interleave"]
    keep_where(
        (v == 1)
        | (
            (out["pp"] > 1)
            & (out["pp"] * v <= virtual_stages_allowed(model))
            & (n_micro % out["pp"] == 0)
        ),
        "interleave needs pp > 1, pp x interleave <= layers + 2, micro-batches a multiple of pp",
    )
    out["chips"] = np.full(len(out["dp"]), chips)
    if not len(out["dp"]):
        raise NoValidLayout(_explain(model, chips, cuts))
    return {k: out[k].astype(np.int64) for k in AXES}, cuts


def _recompute_names(rest):
    rest = rest.copy()
    codes = np.array([RECOMPUTE.index(str(x)) for x in rest[:, 3]])
    return np.column_stack([rest[:, :3].astype(np.int64), codes])


def _explain(model, chips, cuts) -> str:
    last = next(i for i, (_, n) in enumerate(cuts) if n == 0)
    before = cuts[last - 1][1] if last else 0
    return (
        f"no layout of {model.name} on {chips} chips: the constraint '{cuts[last][0]}' "
        f"removed the last {before}"
    )


#: The settings that shape the network (the rest shape the step).
NETWORK_SETTINGS = ("oversubscription", "sites", "site_bandwidth_Bps", "site_latency_s")
#: The settings of the run's goodput (:func:`tlm.cluster.goodput.goodput`) and cost
#: (:func:`tlm.cluster.cost.run_cost`); the defaults are theirs.
GOODPUT_SETTINGS = (
    "storage_Bps",
    "restart_s",
    "repair_s",
    "spare_fraction",
    *(f.name for f in fields(Resilience)),
)
COST_SETTINGS = ("pue", "usd_per_kwh", "amortisation_years")


def engines(hw: Hardware, settings: tuple = (), chips: int | None = None):
    """The hardware's operator costs and network (built once per hardware, network settings
    and - with several sites, whose network depends on the job's chips - chip count, in each
    worker process)."""
    opts = tuple(sorted((k, v) for k, v in settings if k in NETWORK_SETTINGS))
    sites = dict(opts).get("sites", 1)
    return _engines(hw, opts, chips if sites > 1 else None)


@lru_cache(maxsize=32)
def _engines(hw: Hardware, opts: tuple, chips: int | None):
    from ..costs import OpCosts
    from .network import Network

    opts = dict(opts)
    sites = opts.get("sites", 1)
    costs = (
        OpCosts.for_preset(hw.chip_preset)
        if hw.chip_preset is not None
        else OpCosts.for_hardware(hw)
    )
    extra = {}
    if sites > 1:
        extra = dict(
            chips=chips,
            site_bandwidth_Bps=opts.get("site_bandwidth_Bps"),
            site_latency_s=opts.get("site_latency_s", 0.0),
        )
    network = Network.for_hardware(
        hw, oversubscription=opts.get("oversubscription"), sites=sites, **extra
    )
    return costs, network


def _step(model, hw, configs, opts, settings):
    """The training step of ``configs``; with several sites, one network per chip count."""
    from .layout import Layout
    from .training import STEP_FIELDS, overlap_tp_for, training_step

    def run(rows, chips=None):
        costs, network = engines(hw, settings, chips)
        return training_step(
            model,
            costs,
            network,
            layout=Layout(
                dp=rows["dp"],
                tp=rows["tp"],
                pp=rows["pp"],
                cp=rows["cp"],
                ep=rows["ep"],
                zero=rows["zero"],
                micro_batch=rows["micro_batch"],
                interleave=rows["interleave"],
                recompute=rows["recompute"],
                sp=rows["tp"] > 1,
            ),
            overlap_dp=opts.get("overlap_dp", True),
            overlap_tp=opts.get("overlap_tp", overlap_tp_for(hw)),
            overlap_ep=opts.get("overlap_ep", False),
            grad_acc=opts.get("grad_acc", "bf16"),
            global_batch=opts.get("global_batch"),
            seq_len=opts.get("seq_len"),
            fmt=opts.get("fmt", "bf16"),
            hbm_bytes=hw.hbm_bytes,
        )

    if opts.get("sites", 1) == 1:
        return run(configs)
    out = {}
    for n in np.unique(configs["chips"]):
        sel = configs["chips"] == n
        part = run({k: v[sel] for k, v in configs.items()}, int(n))
        for name in STEP_FIELDS:
            if name not in out:
                out[name] = np.full(len(sel), np.nan)
            out[name][sel] = getattr(part, name)
        fits = out.setdefault("fits", np.zeros(len(sel), bool))
        fits[sel] = part.memory.fits
        total = out.setdefault("total_bytes", np.full(len(sel), np.nan))
        total[sel] = part.memory.total_bytes
    return out


def evaluate(model: Model, hw: Hardware, configs: dict, settings: tuple = ()) -> dict:
    """:data:`OUTPUTS` of each layout in ``configs`` (arrays of :data:`AXES`), one chip count
    or several. ``settings``: (name, value) pairs - the network's (:data:`NETWORK_SETTINGS`),
    the run's goodput and cost (:data:`GOODPUT_SETTINGS`, :data:`COST_SETTINGS`),
    ``overlap_dp``, ``overlap_tp``, ``overlap_ep``, ``grad_acc``, ``fmt`` (the GEMMs' format),
    ``global_batch``, ``seq_len``."""
    from .training import STEP_FIELDS

    opts = dict(settings)
    step = _step(model, hw, configs, opts, settings)
    if not isinstance(step, dict):
        step = {
            **{name: getattr(step, name) for name in STEP_FIELDS},
            "fits": step.memory.fits,
            "total_bytes": step.memory.total_bytes,
        }
    chips = configs["chips"]
    shape = np.shape(chips)
    # one layout: its numbers as scalars, through the same formulas (numpy's per-call
    # overhead on arrays of one element would be most of a single estimate's time)
    one = np.size(chips) == 1
    uniq, inverse = (chips.reshape(1), 0) if one else np.unique(chips, return_inverse=True)
    g = _cached_goodput(model, hw, uniq, _picked(settings, GOODPUT_SETTINGS))
    per_layout = (lambda x: x.item(inverse)) if one else (lambda x: x[inverse])  # noqa: E731
    good = per_layout(g.goodput_fraction)
    gb = model.global_batch_sequences if opts.get("global_batch") is None else opts["global_batch"]
    s = model.seq_len if opts.get("seq_len") is None else opts["seq_len"]
    steps = max(1, round(model.tokens / (gb * s)))
    step_s = step["step_s"].item() if one else step["step_s"]
    valid = isfinite(step_s)
    c = run_cost(
        hw,
        chips.item() if one else chips,
        step_time_s=where(valid, step_s, 1.0),
        steps=steps,
        goodput=good,
        spare_servers=per_layout(g.spare_servers),
        fabric=_fabric(opts),
        **dict(_picked(settings, COST_SETTINGS)),
    )
    nan = where(valid, 1.0, np.nan)
    return {
        "step_s": step["step_s"],
        "mfu": step["mfu"],
        "tokens_per_s": step["tokens_per_s"],
        "memory_bytes": step["total_bytes"],
        "fits": step["fits"] & valid,
        "goodput": shaped(good * nan, shape),
        "train_s": shaped(c.run_wall_s * nan, shape),
        "cost_usd": shaped(c.cloud_usd * nan, shape),
        "power_w": np.reshape(c.power.total_w, shape),
    }


def _picked(settings: tuple, names: tuple) -> tuple:
    """The pairs of ``settings`` named in ``names``, in a fixed order (a cache key)."""
    return tuple(sorted((k, v) for k, v in settings if k in names))


def _fabric(opts: dict):
    from .cost import Fabric

    return Fabric(oversubscription=opts.get("oversubscription", 1.0))


def _goodput(model: Model, hw: Hardware, chips, run: tuple = ()):
    return goodput(
        chips=chips,
        server_chips=hw.server_chips,
        checkpoint_bytes=checkpoint_bytes(model),
        **dict(run),
    )


def _cached_goodput(model: Model, hw: Hardware, chips: np.ndarray, run: tuple = ()):
    """:func:`_goodput` of a few chip counts, kept: it depends on the model and the hardware
    only through the chip counts, which every chunk of a search (and every single estimate
    on the same chips) repeats."""
    return _goodput_of(model, hw, chips.dtype.str, chips.tobytes(), chips.shape, run)


@lru_cache(maxsize=64)
def _goodput_of(model: Model, hw: Hardware, dtype: str, data: bytes, shape: tuple, run: tuple):
    return _goodput(model, hw, np.frombuffer(data, dtype=dtype).reshape(shape), run)


def run_power_w(model: Model, hw: Hardware, chips, settings: tuple = ()) -> np.ndarray:
    """Facility power of a run of ``model`` on ``chips`` chips of ``hw``, hot spares' hosts
    included: what :func:`evaluate` reports as ``power_w`` and a power budget limits."""
    g = _goodput(model, hw, chips, _picked(settings, GOODPUT_SETTINGS))
    pue = dict(settings).get("pue")
    extra = {} if pue is None else {"pue": pue}
    fabric = _fabric(dict(settings))
    return power(hw, chips, spare_servers=g.spare_servers, fabric=fabric, **extra).total_w


def pareto_front(time_s: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Indices of the layouts no other layout beats on both time and cost, fastest first
    (NaN rows are never on it)."""
    ok = np.flatnonzero(np.isfinite(time_s) & np.isfinite(cost))
    order = ok[np.lexsort((cost[ok], time_s[ok]))]
    c = cost[order]
    best_before = np.minimum.accumulate(np.concatenate([[np.inf], c[:-1]]))
    return order[c < best_before]


@dataclass
class SearchResult:
    """Every layout evaluated: :data:`AXES` and :data:`OUTPUTS` as arrays of one length."""

    model: str
    hardware: str
    arrays: dict
    cuts: dict = field(default_factory=dict)
    chunks: int = 0
    resumed_chunks: int = 0

    def __getattr__(self, name):
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name]
        raise AttributeError(name)

    @property
    def evaluated(self) -> int:
        return len(self.arrays["chips"])

    def feasible(self, memory_bytes=None, power_w=None) -> np.ndarray:
        """Layouts that fit the chip's HBM (or ``memory_bytes``) and ``power_w``."""
        ok = self.arrays["fits"].astype(bool)
        if memory_bytes is not None:
            ok = ok & (self.arrays["memory_bytes"] <= memory_bytes)
        if power_w is not None:
            ok = ok & (self.arrays["power_w"] <= power_w)
        return ok

    def front(self, **budget) -> np.ndarray:
        """Indices of the Pareto front of time to train against cost among the feasible."""
        ok = self.feasible(**budget)
        t = np.where(ok, self.arrays["train_s"], np.nan)
        return pareto_front(t, self.arrays["cost_usd"])

    def row(self, i) -> dict:
        out = {}
        for k, v in self.arrays.items():
            x = v[i].item()
            out[k] = RECOMPUTE[x] if k == "recompute" else x
        return out

    def best(self, objective: str = "time", **budget) -> dict:
        """The feasible layout with the least time to train (``"time"``) or cost
        (``"cost"``).

        Raises
        ------
        NoValidLayout
            When none is feasible, saying whether memory or power cut the last ones.
        """
        keys = {"time": "train_s", "cost": "cost_usd"}
        if objective not in keys:
            raise ValueError(f"objective must be one of time, cost, not {objective!r}")
        ok = self.feasible(**budget)
        if not ok.any():
            valid = np.isfinite(self.arrays["step_s"])
            fits = self.arrays["fits"].astype(bool)
            cut = None
            if not fits.any():
                why = f"none of the {int(valid.sum())} valid layouts fits in the chip's memory"
            elif (
                budget.get("memory_bytes") is not None
                and not self.feasible(memory_bytes=budget["memory_bytes"]).any()
            ):
                why = f"none fits the memory budget of {budget['memory_bytes']:.4g} bytes"
                cut = "memory_bytes"
            else:
                why = f"none stays within the power budget of {budget.get('power_w'):.4g} W"
                cut = "power_w"
            raise NoValidLayout(f"no feasible layout of {self.model}: {why}", cut)
        score = np.where(ok, self.arrays[keys[objective]], np.inf)
        return self.row(int(np.argmin(score)))


def _every(model, chips, settings, fixed):
    """Every layout of every chip count, concatenated, and what each rule cut per count;
    a chip count with none is left out (its error kept for when none has any)."""
    opts = dict(settings)
    parts, cuts, errors = [], {}, []
    for n in chips:
        try:
            configs, c = candidates(
                model,
                int(n),
                global_batch=opts.get("global_batch"),
                seq_len=opts.get("seq_len"),
                fixed=fixed,
            )
        except NoValidLayout as error:
            errors.append(str(error))
            continue
        parts.append(configs)
        cuts[int(n)] = c
    if not parts:
        raise NoValidLayout("; ".join(errors))
    return {k: np.concatenate([p[k] for p in parts]) for k in AXES}, cuts


@lru_cache(maxsize=1)
def _every_once(model, chips: tuple, settings: tuple, fixed: tuple) -> dict:
    """:func:`_every`'s layouts, kept for the next chunk of the same search."""
    return _every(model, chips, settings, dict(fixed))[0]


def _frozen(value):
    """``value`` with every list a tuple (a cache key)."""
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


def _run_chunk(model, hw, chips, settings, fixed, start, stop):
    """One task: layouts ``start:stop`` of the search - enumerated again here (cheap, once
    per worker: only these few numbers travel to it) - with their results."""
    pinned = _frozen(sorted((fixed or {}).items()))
    every = _every_once(model, tuple(chips), _frozen(settings), pinned)
    configs = {k: v[start:stop] for k, v in every.items()}
    return {**configs, **evaluate(model, hw, configs, settings)}


def search(
    model: Model,
    hw: Hardware,
    chips,
    *,
    settings: tuple = (),
    fixed: dict | None = None,
    scheduler: str = "local",
    out_dir=None,
    chunk: int = DEFAULT_CHUNK,
    workers: int | None = None,
    progress=None,
) -> SearchResult:
    """Every layout of ``model`` on each chip count of ``chips``, evaluated in chunks.

    Parameters
    ----------
    scheduler : str
        ``"local"`` (a local Dask cluster, one worker per core), ``"inline"`` (this process,
        no Dask) or the address of a running Dask scheduler (``tcp://host:8786``).
    out_dir : path, optional
        Where each chunk's results are written; a rerun with the same inputs loads the
        chunks found there and evaluates only the others.
    workers : int, optional
        Worker processes of the local cluster (one per core by default).
    progress : callable, optional
        Called with (chunks done, chunks in all) as chunks finish.

    Raises
    ------
    NoValidLayout
        When no chip count has a valid layout (naming the constraint that cut the last).
    """
    chips = [int(n) for n in chips]
    every, cuts = _every(model, chips, settings, fixed)
    key = digest(
        model.name,
        model.tokens,
        hw.name,
        chips,
        list(settings),
        sorted((k, np.asarray(v).tolist()) for k, v in (fixed or {}).items()),
    )
    results, resumed = run_chunks(
        _run_chunk,
        (model, hw, chips, settings, fixed),
        total=len(every["chips"]),
        chunk=chunk,
        outputs=OUTPUTS,
        scheduler=scheduler,
        workers=workers,
        out_dir=out_dir,
        key=key,
        progress=progress,
    )
    outputs = {k: np.concatenate([r[k] for r in results]) for k in OUTPUTS}
    return SearchResult(
        model=model.name,
        hardware=hw.name,
        arrays={**every, **outputs},
        cuts=cuts,
        chunks=len(results),
        resumed_chunks=resumed,
    )
