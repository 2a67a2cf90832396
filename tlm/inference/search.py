"""The inference configuration search: the cheapest fleet that serves a load within a latency
SLO, over replicas of every valid (system, tp, pp, ep, format, KV format, batch), on Dask.

A **configuration** is one replica layout and the batch it runs: ``system`` (the chips the
replica may use and their network: the hardware's server or scale-up domain), ``tp``, ``pp``
(``tp x pp`` dividing the system's chips), ``ep`` (a divisor of the experts and of ``tp``; 1 for
a dense model), ``dp_attention`` (a MoE model's experts over ``ep`` chips per stage, a multiple
of ``tp``, with attention data-parallel over ``ep / tp`` groups: :mod:`tlm.inference.expert`;
its batches multiples of the groups), ``micro_batches`` (in flight through the ``pp`` stages:
:mod:`tlm.inference.pipeline`; ``pp`` and 1 tried by default), ``fmt`` and ``kv_fmt`` (bf16 or
fp8) and ``batch`` (requests decoded together).
Each is priced by :func:`tlm.inference.estimate.request_times` (the same model as
``trnsim infer``), vectorised over the batches of a layout: TTFT, TPOT and end-to-end latency
of ``batch`` requests of ``prompt + output`` tokens, the memory check (a batch beyond
:meth:`InferenceMemory.max_batch` does not fit). A **load** of ``rate`` requests per second
needs ``ceil(rate / max_rate_per_s)`` replicas, ``max_rate_per_s`` the Poisson rate one
replica sustains within the SLO: its ``batch`` slots, each held ``busy`` seconds (prefill and
decode - the end-to-end latency less the serving stack's time per request,
``request_fixed_s``), queueing arrivals that may wait the TTFT SLO less their own prefill, 90 %
of them (:mod:`tlm.inference.queueing`, Erlang C; Little's law, ``batch / busy``, is its bound:
a fleet sized by it alone misses the SLO) - the rule ``trnsim serve --find-max-rate`` bisects by.
The fleet's cost per hour and per million output tokens at the load (idle capacity of the last
replica included) come from :func:`tlm.inference.economics.token_economics`, and so does the
configuration's price-performance, ``max_rate_cost_per_million_tokens_usd`` (:meth:`row`): one
replica's chips over the tokens it sustains within the SLO. The
best configuration is the cheapest per hour among those that fit and meet the SLO (TTFT <=
``slo_ttft_s`` and TPOT <= ``slo_tpot_s``); when none meets it,
:class:`~tlm.inference.errors.SloUnreachable` names the closest.

Configurations are evaluated in chunks by :func:`tlm.sweep.run_chunks`: on a local Dask
cluster (the default), in this process (``"inline"``) or on an existing scheduler (its
address); ``out_dir`` makes an interrupted search resume.

Examples
--------
>>> found = search("llama3-8b", "trn2", rate_per_s=2.0, prompt=512, output=64,
...                slo_ttft_s=0.5, slo_tpot_s=0.05, scheduler="inline")
>>> found.evaluated > 100, found.best()["replicas"] >= 1
(True, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..hardware import Hardware
from ..sweep import digest, run_chunks
from ..workloads import Model
from ..workloads.operators import tp_allowed
from .buckets import ShapeBuckets, stack_buckets
from .economics import token_economics
from .errors import InferenceInputError, SloUnreachable
from .estimate import request_times
from .layout import (
    FORMATS,
    as_hardware,
    as_model,
    check_format,
    check_layout,
    system_chips,
)
from .queueing import max_rate_within
from .step import Engine

__all__ = [
    "AXES",
    "DEFAULT_MICRO_BATCHES",
    "EXPERT_LAYOUTS",
    "OUTPUTS",
    "InferenceSearch",
    "candidates",
    "evaluate",
    "search",
]

#: A configuration's axes (``system``, ``fmt`` and ``kv_fmt`` as indices into the search's
#: systems and :data:`FORMATS`).
AXES = ("system", "tp", "pp", "ep", "dp_attention", "micro_batches", "fmt", "kv_fmt", "batch")
#: What each configuration is evaluated to.
OUTPUTS = (
    "chips",
    "ttft_s",
    "tpot_s",
    "e2e_s",
    "fits",
    "replicas",
    "fleet_chips",
    "cost_per_hour_usd",
    "cost_per_million_tokens_usd",
    "power_w",
    "meets",
    "busy_s",
    "wait_s",
    "max_rate_per_s",
)
_FMTS = tuple(FORMATS)
#: Batches tried by default: powers of two up to 1,024.
DEFAULT_BATCHES = tuple(2**i for i in range(11))
#: Rows per Dask task.
DEFAULT_CHUNK = 2_000
#: Where a MoE model's experts may go: within the tensor-parallel group (``tp``) or over
#: ``ep`` chips with data-parallel attention (``dp_attention``).
EXPERT_LAYOUTS = ("tp", "dp_attention")
#: Micro-batches tried per layout: ``"pp"`` fills the stages (1 when ``pp`` is 1).
DEFAULT_MICRO_BATCHES = (1, "pp")


def _powers(limit: int) -> list[int]:
    return [2**i for i in range(limit.bit_length()) if 2**i <= limit]


def _layouts(model: Model, chips: int, tp: int, pp: int, expert_layouts) -> list:
    """``(ep, dp_attention)`` of every valid expert layout at ``tp`` and ``pp``."""
    out = []
    if "tp" in expert_layouts or model.moe is None:
        out += [(ep, False) for ep in (_powers(tp) if model.moe else [1])]
    if model.moe is not None and "dp_attention" in expert_layouts:
        # ep 1 would be the tp layout itself (one group, no all-to-all)
        out += [(ep, True) for ep in _powers(chips // pp) if ep >= tp and ep > 1]
    valid = []
    for ep, dp in out:
        try:
            check_layout(model, chips, tp, pp, ep, dp)
        except InferenceInputError:
            continue
        valid.append((ep, dp))
    return valid


def candidates(
    model: Model,
    hw: Hardware,
    systems: tuple,
    batches=DEFAULT_BATCHES,
    fmts=FORMATS,
    kv_fmts=None,
    expert_layouts=EXPERT_LAYOUTS,
    micro_batches=DEFAULT_MICRO_BATCHES,
) -> dict:
    """Every configuration as numpy arrays of :data:`AXES` (layouts the model or the system
    does not allow left out; with ``dp_attention`` only batches that are multiples of the
    attention groups)."""
    kv_fmts = fmts if kv_fmts is None else kv_fmts
    rows = []
    for si, system in enumerate(systems):
        chips = system_chips(hw, system)
        for tp in _powers(chips):
            if tp_allowed(model, tp) is not None:
                continue
            for pp in _powers(chips // tp):
                counts = sorted({pp if m == "pp" else m for m in micro_batches})
                counts = [m for m in counts if m == 1 or pp > 1]
                for ep, dp in _layouts(model, chips, tp, pp, expert_layouts):
                    groups = ep // tp if dp else 1
                    fits = [b for b in batches if b % groups == 0]
                    for mb in counts:
                        for fi, f in enumerate(FORMATS):
                            if f not in fmts:
                                continue
                            for ki, k in enumerate(FORMATS):
                                if k in kv_fmts:
                                    rows += [(si, tp, pp, ep, dp, mb, fi, ki, b) for b in fits]
    if not rows:
        raise InferenceInputError(
            "systems", systems, f"systems that leave {model.name} a valid layout",
            shown=", ".join(systems),
        )  # fmt: skip
    table = np.array(rows, dtype=np.int64)
    return {k: table[:, i] for i, k in enumerate(AXES)}


def evaluate(
    model: Model,
    hw: Hardware,
    systems: tuple,
    configs: dict,
    *,
    prompt: int,
    output: int,
    rate_per_s: float,
    slo_ttft_s: float,
    slo_tpot_s: float,
) -> dict:
    """:data:`OUTPUTS` of each configuration, one layout's batches at a time."""
    n = len(configs["batch"])
    out = {k: np.zeros(n) for k in OUTPUTS}
    buckets = ShapeBuckets.for_stack(stack_buckets(hw.name)[0], prompt, output)
    padded = int(buckets.padded_context(prompt))
    layout = np.stack([configs[k] for k in AXES[:-1]], axis=1)
    keys, inverse = np.unique(layout, axis=0, return_inverse=True)
    for j, (si, tp, pp, ep, dp, mb, fi, ki) in enumerate(keys.tolist()):
        rows = np.flatnonzero(inverse.ravel() == j)
        batch = configs["batch"][rows].astype(float)
        engine = Engine.build(
            model,
            hw,
            systems[si],
            tp=tp,
            pp=pp,
            ep=ep,
            fmt=_FMTS[fi],
            kv_fmt=_FMTS[ki],
            max_tokens=int(batch.max() * padded),
            dp_attention=bool(dp),
            micro_batches=mb,
        )
        r = request_times(engine, batch, prompt, output, buckets=buckets)
        busy = r["prefill"]["time_s"] + r["decode"]["time_s"]  # the replica's time
        ttft = r["request_s"] + r["prefill"]["time_s"]
        tpot = r["decode"]["time_s"] / max(output - 1, 1)
        e2e = r["request_s"] + busy
        fits = batch <= engine.memory.max_batch(prompt + output, padded)
        # a request holds its slot for busy and may wait the TTFT SLO less its own prefill
        wait = slo_ttft_s - (r["request_s"] + r["prefill"]["time_s"] / batch)
        # the load split evenly over the replicas, each an M/M/batch queue within the SLO
        # (serve --find-max-rate's rule), where the SLO can be met at all; Little's law (the
        # bound a long wait approaches) sizes the rest, which cannot be chosen
        could = fits & (ttft <= slo_ttft_s) & (tpot <= slo_tpot_s) & (wait >= 0)
        # chunked prefill shares the steps with the decodes in flight: at a rate lam a replica
        # spends lam x p of its time on prefills (p, one request's), which stretches the TPOT
        # to tpot / (1 - lam p); within the SLO, lam <= (1 - tpot / slo) / p
        own_prefill = r["prefill"]["time_s"] / batch
        tpot_rate = (1.0 - tpot / slo_tpot_s) / own_prefill
        per_replica = np.zeros(len(rows))
        if could.any():
            per_replica[could] = np.minimum(
                max_rate_within(batch[could].astype(np.int64), busy[could], wait[could]),
                tpot_rate[could],
            )
        sized = per_replica > 0
        replicas = np.ceil(rate_per_s / np.where(sized, per_replica, 1.0))
        replicas = np.where(sized, np.maximum(replicas, 1.0), np.ceil(rate_per_s * busy / batch))
        fleet = replicas * engine.chips
        money = token_economics(hw, fleet, np.maximum(rate_per_s * output, 1e-12))
        out["chips"][rows] = engine.chips
        out["ttft_s"][rows], out["tpot_s"][rows], out["e2e_s"][rows] = ttft, tpot, e2e
        out["fits"][rows] = fits
        out["replicas"][rows] = replicas
        out["fleet_chips"][rows] = fleet
        for k in ("cost_per_hour_usd", "cost_per_million_tokens_usd", "power_w"):
            out[k][rows] = money[k]
        out["meets"][rows] = could & sized
        out["busy_s"][rows] = busy
        out["wait_s"][rows] = wait
        out["max_rate_per_s"][rows] = per_replica
    return out


_CONFIGS: dict = {}


def _task(model, hw, systems, settings, start, stop):
    """One chunk: configurations ``start:stop``, enumerated again here (once per worker)."""
    opts = dict(settings)
    key = (model.name, hw.name, systems, opts["batches"], opts["fmts"], opts["kv_fmts"])
    key += (opts["expert_layouts"], opts["micro_batches"])
    if key not in _CONFIGS:
        _CONFIGS.clear()
        _CONFIGS[key] = candidates(
            model,
            hw,
            systems,
            opts["batches"],
            opts["fmts"],
            opts["kv_fmts"],
            opts["expert_layouts"],
            opts["micro_batches"],
        )
    configs = {k: v[start:stop] for k, v in _CONFIGS[key].items()}
    result = evaluate(
        model,
        hw,
        systems,
        configs,
        prompt=opts["prompt"],
        output=opts["output"],
        rate_per_s=opts["rate_per_s"],
        slo_ttft_s=opts["slo_ttft_s"],
        slo_tpot_s=opts["slo_tpot_s"],
    )
    return {**configs, **result}


@dataclass(frozen=True)
class InferenceSearch:
    """Every configuration evaluated; :meth:`best` the cheapest meeting the SLO."""

    model: str
    hardware: str
    systems: tuple
    arrays: dict = field(repr=False)
    chunks: int = 0
    resumed_chunks: int = 0
    slo_ttft_s: float = 0.0
    slo_tpot_s: float = 0.0
    #: The hardware at its price in force and the output tokens per request: a row's
    #: price-performance (:meth:`row`).
    hw: Hardware | None = field(default=None, repr=False)
    output: int = 1

    @property
    def evaluated(self) -> int:
        return len(self.arrays["batch"])

    def row(self, i: int) -> dict:
        out = {}
        for k, v in self.arrays.items():
            x = v[i].item()
            if k == "system":
                x = self.systems[x]
            elif k in ("fmt", "kv_fmt"):
                x = _FMTS[x]
            elif k in ("fits", "meets", "dp_attention"):
                x = bool(x)
            elif k in ("chips", "replicas", "fleet_chips"):
                x = int(x)
            out[k] = x
        return {**out, **self._max_rate(out)}

    def _max_rate(self, row: dict) -> dict:
        """A row's price-performance, as ``serve --find-max-rate`` defines it: one replica's
        chips over the output tokens it sustains within the SLO - ``max_rate_per_s``, its
        batch slots queueing Poisson arrivals (:func:`tlm.inference.queueing.max_rate_within`:
        Erlang C, at serve's attainment) - and ``max_rate_cost_per_million_tokens_usd``."""
        if self.hw is None or not row["meets"]:
            return {"max_rate_per_s": 0.0, "max_rate_cost_per_million_tokens_usd": None}
        money = token_economics(self.hw, row["chips"], row["max_rate_per_s"] * self.output)
        return {"max_rate_cost_per_million_tokens_usd": money["cost_per_million_tokens_usd"]}

    def best(self) -> dict:
        """The configuration meeting the SLO at the least cost per hour (ties: the lower
        TPOT).

        Raises
        ------
        SloUnreachable
            When none meets it, naming the closest: the fitting configuration whose worse of
            TTFT / SLO and TPOT / SLO is least.
        """
        a = self.arrays
        ok = a["meets"].astype(bool)
        if ok.any():
            order = np.lexsort((a["tpot_s"], np.where(ok, a["cost_per_hour_usd"], np.inf)))
            return self.row(int(order[0]))
        fits = a["fits"].astype(bool)
        if not fits.any():
            raise SloUnreachable(
                f"no configuration of {self.model} fits the chips' memory on "
                f"{', '.join(self.systems)}; try a larger system or fp8",
                "systems",
            )
        over = np.maximum(a["ttft_s"] / self.slo_ttft_s, a["tpot_s"] / self.slo_tpot_s)
        i = int(np.argmin(np.where(fits, over, np.inf)))
        c = self.row(i)
        raise SloUnreachable(
            f"no configuration of {self.model} meets TTFT <= {self.slo_ttft_s:g} s and TPOT "
            f"<= {self.slo_tpot_s:g} s; the closest: {c['system']} tp {c['tp']} pp {c['pp']} "
            f"ep {c['ep']}{' dp-attention' if c['dp_attention'] else ''} micro-batches "
            f"{c['micro_batches']} {c['fmt']} (KV {c['kv_fmt']}) batch {c['batch']}: TTFT "
            f"{c['ttft_s']:.3g} s, TPOT {c['tpot_s']:.3g} s",
            "slo_ttft_s"
            if c["ttft_s"] / self.slo_ttft_s >= c["tpot_s"] / self.slo_tpot_s
            else "slo_tpot_s",
        )


def search(
    model,
    hardware,
    *,
    systems=("server", "ultraserver"),
    rate_per_s: float = 1.0,
    prompt: int = 2048,
    output: int = 256,
    slo_ttft_s: float = 2.0,
    slo_tpot_s: float = 0.05,
    batches=DEFAULT_BATCHES,
    fmts=FORMATS,
    kv_fmts=None,
    expert_layouts=EXPERT_LAYOUTS,
    micro_batches=DEFAULT_MICRO_BATCHES,
    scheduler: str = "local",
    workers: int | None = None,
    out_dir=None,
    chunk: int = DEFAULT_CHUNK,
    progress=None,
) -> InferenceSearch:
    """Every configuration of ``model`` on ``hardware``'s ``systems``, evaluated in chunks.

    Parameters
    ----------
    systems : tuple of str
        ``server``, ``ultraserver``, ``Nxserver``...; those the hardware does not have
        (``ultraserver`` of an 8-GPU server) are left out.
    rate_per_s, prompt, output : float, int, int
        The load: requests per second of ``prompt + output`` tokens.
    slo_ttft_s, slo_tpot_s : float
        The SLO.
    batches, fmts, kv_fmts : sequences
        The batches and formats tried.
    expert_layouts : sequence of str
        A MoE model's expert layouts tried: of :data:`EXPERT_LAYOUTS`.
    micro_batches : sequence of int or "pp"
        Micro-batches tried per layout (``"pp"``: as many as stages).
    scheduler, workers, out_dir, chunk, progress :
        As :func:`tlm.sweep.run_chunks`.

    Raises
    ------
    InferenceInputError
        A bad argument, naming it.
    """
    m, hw = as_model(model), as_hardware(hardware)
    for name, value in (("prompt", prompt), ("output", output)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InferenceInputError(name, value, "an integer >= 1")
    for name, value in (
        ("rate_per_s", rate_per_s),
        ("slo_ttft_s", slo_ttft_s),
        ("slo_tpot_s", slo_tpot_s),
    ):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise InferenceInputError(name, value, "a number > 0")
    batches = tuple(int(b) for b in batches)
    if not batches or min(batches) < 1:
        raise InferenceInputError("batches", batches, "integers >= 1")
    kv_fmts = tuple(fmts if kv_fmts is None else kv_fmts)
    keys = {}
    for name, values in (("fmts", tuple(fmts)), ("kv_fmts", kv_fmts)):
        if not values:
            raise InferenceInputError(name, values, f"formats of {', '.join(FORMATS.values())}")
        keys[name] = tuple(check_format(name, value) for value in values)  # the model's keys
    fmts, kv_fmts = keys["fmts"], keys["kv_fmts"]
    expert_layouts = tuple(expert_layouts)
    if not expert_layouts or any(x not in EXPERT_LAYOUTS for x in expert_layouts):
        raise InferenceInputError(
            "expert_layouts", expert_layouts, f"layouts of {', '.join(EXPERT_LAYOUTS)}"
        )
    micro_batches = tuple(micro_batches)
    if not micro_batches or any(
        m != "pp" and (isinstance(m, bool) or not isinstance(m, int) or m < 1)
        for m in micro_batches
    ):
        raise InferenceInputError("micro_batches", micro_batches, "positive integers or 'pp'")
    kept = []
    for s in systems:
        try:
            system_chips(hw, s)
        except InferenceInputError:
            if s != "ultraserver":
                raise
            continue
        kept.append(s)
    systems = tuple(kept)
    settings = (
        ("batches", batches),
        ("fmts", tuple(fmts)),
        ("kv_fmts", kv_fmts),
        ("expert_layouts", expert_layouts),
        ("micro_batches", micro_batches),
        ("prompt", prompt),
        ("output", output),
        ("rate_per_s", float(rate_per_s)),
        ("slo_ttft_s", float(slo_ttft_s)),
        ("slo_tpot_s", float(slo_tpot_s)),
    )
    every = candidates(m, hw, systems, batches, tuple(fmts), kv_fmts, expert_layouts, micro_batches)
    results, resumed = run_chunks(
        _task,
        (m, hw, systems, settings),
        total=len(every["batch"]),
        chunk=chunk,
        outputs=OUTPUTS,
        scheduler=scheduler,
        workers=workers,
        out_dir=out_dir,
        key=digest("inference", m.name, hw.name, systems, settings),
        progress=progress,
    )
    outputs = {k: np.concatenate([r[k] for r in results]) for k in OUTPUTS}
    return InferenceSearch(
        model=m.name,
        hardware=hw.name,
        systems=systems,
        arrays={**every, **outputs},
        chunks=len(results),
        resumed_chunks=resumed,
        slo_ttft_s=float(slo_ttft_s),
        slo_tpot_s=float(slo_tpot_s),
        hw=hw,
        output=int(output),
    )
