"""``trnsim serve``: requests arriving at a fleet of model replicas - Poisson at ``--rate-per-s``,
from an ``--arrivals`` file, or sent by ``--concurrency`` clients in a closed loop (each sends
its next request when its last completes) - served with iteration-level continuous batching,
chunked prefill (or ``--prefill separate``: one prefill alone, the decodes waiting, as the
Neuron stack schedules) and a paged KV cache (``--admission greedy``: vLLM's preemption when
it runs out; ``reserve``: TensorRT-LLM's whole-request reservation, never preempting),
optionally disaggregated into prefill and decode pools: TTFT, TPOT and end-to-end
percentiles, throughput, SLO attainment, power and cost per million tokens, and with
``--find-max-rate`` the highest rate the fleet sustains within the SLO. ``--arrivals FILE``
replays a trace (CSV or JSONL: ``arrival_s, prompt, output``) instead of Poisson arrivals.

Each replica is :class:`tlm.inference.Engine` (``trnsim infer``'s model: calibrated operator
costs, collectives on the system's topology, the fitted fixed costs); the simulation is
:func:`tlm.inference.serving.simulate` (SimPy). A disaggregated fleet moves each prompt's KV
cache from its prefill replica to a decode replica over the scale-out network: the replica's
chips' NICs together (``--kv-link-Bps`` unset), plus ``--kv-link-latency-s``. The series: the
latency percentiles. ``--plot`` draws latency against throughput over a sweep of rates
(``--plot-rates``, fractions of ``--rate-per-s``); ``--trace`` writes every iteration of
every replica as a Perfetto/Chrome trace. See docs/serving.md.

Examples
--------
>>> from tlm.studies import run_study
>>> r = run_study("serve", model="llama3-8b", hardware="trn2", system="server", tp=4,
...               rate_per_s=4.0, requests=200, prompt="512", output="64").results
>>> r.completed, bool(r.ttft_p50_s < r.e2e_p50_s), r.chips
(200, True, 4)
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from ..hardware.prices import price_footing
from ..inference import FORMATS, Engine, InferenceInputError, SloUnreachable, token_economics
from ..inference.serving import (
    ADMISSIONS,
    PREFILLS,
    ROUTERS,
    RULES,
    ClosedLoop,
    Colocated,
    Disaggregated,
    KvLink,
    Poisson,
    Scheduler,
    Slo,
    Trace,
    TraceError,
    Workload,
    max_rate,
    simulate,
)
from .hardware import with_price_footing
from .infer import ReplicaInputs, _input_error, buckets_source
from .protocol import (
    MAX_COUNT,
    MAX_REQUEST_TOKENS,
    PLOT_ALLOWED,
    InputError,
    Results,
    Study,
    figure,
    plot_path,
    progress,
    register,
    writable_path,
)

__all__ = ["ServeInputs", "ServeResults", "LatencyRow", "serve_study"]

_LENGTHS = (
    f"an integer in 1..{MAX_REQUEST_TOKENS}, uniform:LO:HI (within it) or lognormal:MEAN:SIGMA "
    "(MEAN within it, SIGMA in 0..10; draws capped at it)"
)


def _lengths(text: str):
    """A length input as :func:`simulate` takes it: an integer, or the distribution's text."""
    return int(text) if text.strip().isdigit() else text


class ServeInputs(ReplicaInputs):
    """Inputs of ``trnsim serve``."""

    rate_per_s: float | None = Field(
        None,
        gt=0,
        description="Poisson arrivals per second",
        json_schema_extra={"unset": "5 per second (none with --concurrency)"},
    )
    concurrency: int = Field(
        0,
        ge=0,
        le=1_000_000,
        description="clients in a closed loop, each sending its next request when its last "
        "completes, --requests in all (0: arrivals at --rate-per-s or from --arrivals)",
    )
    duration_s: float = Field(600.0, gt=0, description="arrivals during this window")
    requests: int = Field(
        0, ge=0, le=10_000_000, description="arrivals in all (0: as many as --duration-s brings)"
    )
    prompt: str = Field(
        "2048", description="prompt tokens per request", json_schema_extra={"allowed": _LENGTHS}
    )
    output: str = Field(
        "256", description="generated tokens per request", json_schema_extra={"allowed": _LENGTHS}
    )
    arrivals: str = Field(
        "poisson",
        description="Poisson arrivals at --rate-per-s, or requests from a CSV or JSONL file "
        "(arrival_s, prompt, output)",
        json_schema_extra={"allowed": "poisson, or an existing .csv or .jsonl file"},
    )
    seed: int = Field(0, ge=0, description="seed of the arrivals and lengths")
    replicas: int = Field(1, ge=1, le=100_000, description="colocated replicas")
    router: Literal[ROUTERS] = Field("least_loaded", description="which replica takes a request")
    max_batch: int = Field(
        64, ge=1, le=MAX_COUNT, description="sequences running at once on a replica"
    )
    token_budget: int = Field(
        2048, ge=1, le=MAX_REQUEST_TOKENS, description="tokens an iteration processes"
    )
    prefill: Literal[PREFILLS] = Field(
        "chunked",
        description="prefill chunks beside the decodes (chunked) or one prefill alone, the "
        "decodes waiting (separate: the Neuron stack's scheduler)",
    )
    admission: Literal[ADMISSIONS] = Field(
        "greedy",
        description="when a queued request starts: once its first chunk's KV blocks are free, "
        "the latest preempted when they run out (greedy: vLLM), or only once its whole KV "
        "(prompt + output) can be reserved, never preempting (reserve: TensorRT-LLM's "
        "GUARANTEED_NO_EVICT)",
    )
    prefill_replicas: int = Field(
        0, ge=0, le=100_000, description="disaggregated prefill pool (0: none)"
    )
    decode_replicas: int = Field(
        0, ge=0, le=100_000, description="disaggregated decode pool (0: none)"
    )
    kv_link_Bps: float | None = Field(
        None,
        gt=0,
        description="bandwidth of a KV transfer between the pools",
        json_schema_extra={"unset": "the replica's chips' scale-out NICs together"},
    )
    kv_link_latency_s: float = Field(10e-6, ge=0, description="latency of a KV transfer")
    slo_ttft_s: float = Field(2.0, gt=0, description="the SLO's time to first token")
    slo_tpot_s: float = Field(0.05, gt=0, description="the SLO's time per output token")
    find_max_rate: bool = Field(False, description="search the highest rate within the SLO")
    rule: Literal[RULES] = Field("attainment", description="what meeting the SLO means")
    target: float = Field(0.9, gt=0, le=1, description="attainment or percentile of the rule")
    plot: str | None = Field(
        None,
        description="write latency against throughput over a sweep of rates",
        json_schema_extra={"allowed": PLOT_ALLOWED},
    )
    plot_rates: list[Annotated[float, Field(gt=0)]] = Field(
        default_factory=lambda: [0.25, 0.5, 0.75, 1.0, 1.25, 1.5],
        min_length=1,
        description="the sweep's rates as fractions of --rate-per-s",
        json_schema_extra={"allowed": "a comma-separated list of numbers > 0"},
    )
    trace: str | None = Field(
        None,
        description="write every iteration as a Perfetto/Chrome trace (JSON)",
        json_schema_extra={"allowed": "a file path ending in .json"},
    )

    def resolve(self) -> ServeInputs:
        update = self.replica_resolved()
        if self.concurrency:
            closed = "unset with --concurrency (a closed loop sets its own pace)"
            for name, value, bad in (
                ("rate_per_s", self.rate_per_s, self.rate_per_s is not None),
                ("arrivals", self.arrivals, self.arrivals != "poisson"),
                ("find_max_rate", self.find_max_rate, self.find_max_rate),
                ("plot", self.plot, self.plot is not None),
            ):
                if bad:
                    raise InputError(name, value, closed)
            if not self.requests:
                raise InputError(
                    "requests", self.requests, ">= 1 with --concurrency (the requests in all)"
                )
        elif self.rate_per_s is None:
            update["rate_per_s"] = 5.0
        if self.find_max_rate and self.arrivals != "poisson":
            raise InputError(
                "find_max_rate", True, "false with an --arrivals file (it varies a Poisson rate)"
            )
        from ..inference.serving import parse_lengths

        for name in ("prompt", "output"):
            try:
                parse_lengths(name, _lengths(getattr(self, name)))
            except ValueError:
                raise InputError(name, getattr(self, name), _LENGTHS) from None
        if self.arrivals != "poisson" and not Path(self.arrivals).is_file():
            raise InputError(
                "arrivals", self.arrivals, "poisson, or an existing .csv or .jsonl file"
            )
        if (self.prefill_replicas > 0) != (self.decode_replicas > 0):
            field = "decode_replicas" if self.prefill_replicas else "prefill_replicas"
            raise InputError(
                field, getattr(self, field), "> 0 together with the other pool (or both 0)"
            )
        if self.token_budget < self.max_batch:
            raise InputError(
                "token_budget", self.token_budget, f">= --max-batch ({self.max_batch})"
            )
        plot_path("plot", self.plot)
        writable_path("trace", self.trace)
        if self.trace is not None and not self.trace.endswith(".json"):
            raise InputError("trace", self.trace, "a file path ending in .json")
        if self.kv_link_Bps is None:
            hw = self.device()
            update["kv_link_Bps"] = hw.scale_out_bandwidth_Bps * self.stage_chips() * self.pp
        return self.model_copy(update=update)

    def engine(self) -> Engine:
        """The replica these (resolved) inputs describe."""
        try:
            engine = Engine.of(self.replica(max_tokens=self.token_budget), self.fixed())
        except InferenceInputError as error:
            raise _input_error(self, error) from None
        if engine.kv_capacity_tokens < engine.block_tokens:
            # the iteration's activations, or the weights, leave no KV block: name the cause
            least = Engine.of(self.replica(max_tokens=self.max_batch), self.fixed())
            if least.kv_capacity_tokens >= least.block_tokens:
                raise InputError(
                    "token_budget",
                    self.token_budget,
                    "a budget whose iteration's activations leave room for a KV block",
                    f"leaves {engine.kv_capacity_tokens} tokens of KV cache",
                )
            raise InputError(
                "tp",
                self.tp,
                "a replica whose weights leave room for a KV block (more tp or pp, --format "
                "fp8_e4m3)",
                f"leaves {engine.kv_capacity_tokens} tokens of KV cache",
            )
        return engine

    def simulation(self, engine: Engine) -> dict:
        """:func:`simulate`'s keyword arguments (the arrival rate aside)."""
        args = dict(
            prompt=_lengths(self.prompt),
            output=_lengths(self.output),
            trace=None if self.arrivals == "poisson" else self.arrivals,
            seed=self.seed,
            router=self.router,
            max_batch=self.max_batch,
            token_budget=self.token_budget,
            prefill=self.prefill,
            admission=self.admission,
            buckets=self.bucket_specs(),
            slo_ttft_s=self.slo_ttft_s,
            slo_tpot_s=self.slo_tpot_s,
        )
        if self.prefill_replicas:
            # the KV format's tlm.formats name (fp8: the tensor engine's E4M3)
            per_token = engine.model.kv_cache_per_token_bytes(FORMATS[engine.kv_fmt])
            args |= dict(
                prefill_replicas=self.prefill_replicas,
                decode_replicas=self.decode_replicas,
                kv_bytes_per_token=per_token,
                link_bandwidth_Bps=self.kv_link_Bps,
                link_latency_s=self.kv_link_latency_s,
            )
        else:
            args["replicas"] = self.replicas
        return args


class LatencyRow(BaseModel):
    """One latency's mean and percentiles over the completed requests (none when no request
    has it: a TPOT where every request generated one token)."""

    metric: str
    mean_s: float | None
    p50_s: float | None
    p90_s: float | None
    p99_s: float | None


class ServeResults(Results):
    """What the fleet served; the series: the latency percentiles."""

    requests: int
    completed: int
    rejected: int
    preemptions: int
    iterations: int
    simulated_s: float = Field(description="from the first arrival to the last finish")
    ttft_mean_s: float
    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    tpot_mean_s: float | None = Field(description="none when no request has a second token")
    tpot_p50_s: float | None
    tpot_p90_s: float | None
    tpot_p99_s: float | None
    e2e_mean_s: float
    e2e_p50_s: float
    e2e_p90_s: float
    e2e_p99_s: float
    throughput_per_s: float = Field(description="completed requests per second")
    output_tokens_per_s: float
    chip_output_tokens_per_s: float
    mean_batch: float = Field(description="sequences per iteration, by iteration time")
    kv_occupancy_fraction: float = Field(description="KV blocks in use, time average")
    mean_in_system: float = Field(description="requests in the system, time average")
    slo_attainment_fraction: float = Field(description="requests meeting both SLOs")
    chips: int = Field(description="every replica of every pool")
    replica_chips: int
    kv_capacity_tokens: int = Field(description="per replica")
    power_w: float = Field(description="the fleet's share of its servers, facility power")
    energy_per_token_j: float = Field(description="per generated token")
    cost_per_million_tokens_usd: float = Field(description="cloud instance-hours")
    max_rate_per_s: float | None = Field(
        None, description="the highest rate within the SLO (--find-max-rate)"
    )
    max_rate_output_tokens_per_s: float | None = None
    max_rate_cost_per_million_tokens_usd: float | None = Field(
        None,
        description="the fleet at max_rate_per_s: the configuration's price-performance, as "
        "infer-search's",
    )
    seed: int | None = Field(description="of the draws (none for a trace)")
    buckets_source: str = Field(
        description="the compiled lengths: given, or the stack's (nxd: NxD Inference's "
        "generated buckets for the load's longest prompt and sequence)"
    )
    series: list[LatencyRow] = Field(default=[], exclude=True)


ServeResults = with_price_footing(ServeResults)


def _values(args: dict, engine):
    """:meth:`ServeInputs.simulation`'s arguments as the serving simulation's values: the
    fleet, the workload, the scheduler and the SLO."""
    if "prefill_replicas" in args:
        link = KvLink(
            args["kv_bytes_per_token"], args["link_bandwidth_Bps"], args["link_latency_s"]
        )
        fleet = Disaggregated(
            engine, args["prefill_replicas"], args["decode_replicas"], link, router=args["router"]
        )
    else:
        fleet = Colocated(engine, args["replicas"], router=args["router"])
    workload = Workload(args["prompt"], args["output"], seed=args["seed"])
    settings = ("max_batch", "token_budget", "prefill", "admission")
    scheduler = Scheduler(*(args[k] for k in settings), *args["buckets"])
    return fleet, workload, scheduler, Slo(args["slo_ttft_s"], args["slo_tpot_s"])


def _run(inputs: ServeInputs, engine, rate, timeline=False, requests=None):
    args = inputs.simulation(engine)
    fleet, workload, scheduler, slo = _values(args, engine)
    if inputs.concurrency:
        load = ClosedLoop(inputs.concurrency, inputs.requests, workload)
    elif inputs.arrivals != "poisson":
        load = Trace(args["trace"])
    elif requests or inputs.requests:
        load = Poisson(rate, requests=requests or inputs.requests, workload=workload)
    else:
        load = Poisson(rate, duration_s=inputs.duration_s, workload=workload)
    try:
        return simulate(fleet, load, scheduler, slo, timeline=timeline)
    except TraceError as error:
        raise InputError(
            "arrivals", inputs.arrivals, "a CSV or JSONL trace", f"fails: {error}"
        ) from None
    except InferenceInputError as error:
        if error.field != "rate":  # the load's rate is this study's --rate-per-s
            raise _input_error(inputs, error) from None
        allowed = error.allowed.replace("duration_s", "--duration-s")
        raise InputError("rate_per_s", rate, allowed) from None


def serve_study(inputs: ServeInputs) -> ServeResults:
    engine = inputs.engine()
    run = _run(inputs, engine, inputs.rate_per_s, timeline=inputs.trace is not None)
    if run.completed == 0:
        raise InputError(
            "max_batch" if run.rejected else "rate_per_s",
            inputs.max_batch if run.rejected else inputs.rate_per_s,
            "a fleet that completes a request: no request fits the replica's KV cache "
            f"({engine.kv_capacity_tokens} tokens); more tp, --kv-format fp8_e4m3 or shorter "
            "requests",
        )
    hw = engine.hardware
    money = token_economics(hw, run.chips, run.output_tokens_per_s)
    found = {}
    if inputs.find_max_rate:
        progress(0, 1, "max rate")
        fleet, workload, scheduler, slo = _values(inputs.simulation(engine), engine)
        try:
            best = max_rate(
                fleet,
                slo,
                workload,
                scheduler,
                requests=min(inputs.requests or 2000, 2000),
                rule=inputs.rule,
                target=inputs.target,
            )
        except SloUnreachable as error:
            raise InputError(
                "slo_ttft_s", inputs.slo_ttft_s, "an SLO some rate meets", f"is not met: {error}"
            ) from None
        progress(1, 1, "max rate")
        at = token_economics(hw, best.run.chips, best.run.output_tokens_per_s)
        found = dict(
            max_rate_per_s=best.rate,
            max_rate_output_tokens_per_s=best.run.output_tokens_per_s,
            max_rate_cost_per_million_tokens_usd=at["cost_per_million_tokens_usd"],
        )
    rows = [
        LatencyRow(
            metric=name,
            **{
                f"{k}_s": (v if math.isfinite(v := getattr(s, k)) else None)
                for k in ("mean", "p50", "p90", "p99")
            },
        )
        for name, s in (("ttft", run.ttft_s), ("tpot", run.tpot_s), ("e2e", run.e2e_s))
    ]
    results = ServeResults(
        requests=run.requests,
        completed=run.completed,
        rejected=run.rejected,
        preemptions=run.preemptions,
        iterations=run.iterations,
        simulated_s=run.simulated_s,
        **{
            f"{r.metric}_{k}_s": getattr(r, f"{k}_s")
            for r in rows
            for k in ("mean", "p50", "p90", "p99")
        },
        throughput_per_s=run.throughput_rps,
        output_tokens_per_s=run.output_tokens_per_s,
        chip_output_tokens_per_s=run.output_tokens_per_s_per_chip,
        mean_batch=run.mean_batch,
        kv_occupancy_fraction=run.kv_occupancy,
        mean_in_system=run.mean_in_system,
        slo_attainment_fraction=run.slo_attainment,
        chips=run.chips,
        replica_chips=engine.chips,
        kv_capacity_tokens=engine.kv_capacity_tokens,
        power_w=money["power_w"],
        energy_per_token_j=money["energy_per_token_j"],
        cost_per_million_tokens_usd=money["cost_per_million_tokens_usd"],
        **found,
        **price_footing(hw),
        seed=run.seed,
        buckets_source=buckets_source(inputs),
        series=rows,
    )
    if inputs.trace is not None:
        write_trace(inputs.trace, run.timeline, inputs.prefill_replicas)
    if inputs.plot is not None:
        write_curve(inputs, engine)
    return results


def write_trace(path: str, timeline: dict, prefill_replicas: int = 0) -> Path:
    """Every iteration as a complete event on its replica's track (Chrome trace format, which
    Perfetto opens), its tokens, sequences and KV blocks as arguments. Disaggregated, the
    first ``prefill_replicas`` replicas are the prefill pool's, the rest the decode pool's
    (the simulation numbers them in that order), and their tracks say so."""
    events = [
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "serving fleet"}},
    ]
    replicas = sorted(set(int(r) for r in timeline["replica"]))

    def track(r: int) -> str:
        if not prefill_replicas:
            return f"replica {r}"
        if r < prefill_replicas:
            return f"prefill replica {r}"
        return f"decode replica {r - prefill_replicas}"

    events += [
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": r, "args": {"name": track(r)}}
        for r in replicas
    ]
    for i in range(len(timeline["replica"])):
        events.append(
            {
                "name": f"{int(timeline['tokens'][i])} tokens",
                "ph": "X",
                "pid": 1,
                "tid": int(timeline["replica"][i]),
                "ts": float(timeline["start_s"][i]) * 1e6,
                "dur": float(timeline["duration_s"][i]) * 1e6,
                "args": {
                    k: int(timeline[k][i])
                    for k in ("tokens", "sequences", "decodes", "kv_blocks")
                    if k in timeline
                },
            }
        )
    out = Path(path)
    out.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
    return out


def write_curve(inputs: ServeInputs, engine) -> Path:
    """p50 and p90 TTFT and TPOT against the output throughput, one point per rate of the
    sweep, with the SLO as lines; matplotlib, the format by suffix."""
    rates = [f * inputs.rate_per_s for f in inputs.plot_rates]
    runs = []
    for i, rate in enumerate(rates):
        progress(i, len(rates), "latency-throughput sweep")
        runs.append(_run(inputs, engine, rate, requests=min(inputs.requests or 2000, 2000)))
    progress(len(rates), len(rates), "latency-throughput sweep")
    x = [r.output_tokens_per_s for r in runs]
    with figure(inputs.plot, ncols=2, figsize=(9, 3.4), save={"bbox_inches": "tight"}) as (
        fig,
        axes,
    ):
        for ax, name, slo in zip(
            axes, ("ttft_s", "tpot_s"), (inputs.slo_ttft_s, inputs.slo_tpot_s), strict=True
        ):
            for q in ("p50", "p90"):
                ax.plot(x, [getattr(getattr(r, name), q) * 1e3 for r in runs], "o-", label=q)
            ax.axhline(slo * 1e3, color="grey", linestyle="--", label="SLO")
            ax.set_xlabel("output tokens/s (fleet)")
            ax.set_ylabel(f"{name[:-2].upper()} (ms)")
            ax.set_yscale("log")
            ax.legend(fontsize=8)
        fig.suptitle(
            f"{inputs.model} on {inputs.hardware} {inputs.system}: tp {inputs.tp}, "
            f"{inputs.replicas or 1} replica(s), max batch {inputs.max_batch}, {inputs.format}",
            fontsize=9,
        )
    return Path(inputs.plot)


STUDY = register(
    Study(
        "serve",
        ServeInputs,
        serve_study,
    )
)
