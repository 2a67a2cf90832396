"""The serving simulation: requests arriving at model replicas that batch them iteration by
iteration, with a paged KV cache, chunked prefill, preemption and optional prefill/decode
disaggregation; latency percentiles, throughput and the rate a fleet sustains under an SLO.

What is modelled
----------------
* **Requests** arrive as a Poisson process (``rate`` per second for ``duration_s`` seconds, or
  ``requests`` of them) with prompt and output lengths fixed or drawn (``"uniform:lo:hi"``,
  ``"lognormal:mean:sigma"``), or from a trace file (CSV or JSONL: ``arrival_s``, ``prompt``,
  ``output``). The arrival gaps are standard exponentials divided by the rate, so two runs with
  the same seed at different rates see the same requests, scaled in time (common random
  numbers: this is what makes :func:`max_rate`'s bisection monotone in practice). Or a
  **closed loop** (``concurrency=N``): N clients each send a request at time 0 and the next
  the moment the last one completes, ``requests`` in all (what ``vllm bench serve
  --max-concurrency``, LLMPerf's ``--num-concurrent-requests`` and genai-perf's
  ``--concurrency`` do); the lengths are drawn as for Poisson arrivals with the same seed.
  A request reaches the scheduler ``engine.request_fixed_s`` after it arrives (the serving
  stack's receiving, tokenising and queueing of it and the return of its first token, lumped
  before; the replicas are free meanwhile); its latencies count from its arrival.
* **Replicas** of the model (``engine``) behind a router: ``"least_loaded"`` (fewest requests
  queued or running, ties to the lowest index) or ``"round_robin"``.
* **Iteration-level continuous batching** (Orca, Yu et al., OSDI 2022) with **chunked prefill**
  and stall-free scheduling (Sarathi-Serve, Agrawal et al., OSDI 2024; vLLM's V1 scheduler,
  ``vllm/v1/core/sched/scheduler.py``): each iteration every running sequence that is decoding
  takes one token of the ``token_budget`` first, then sequences part way through their prefill
  take chunks in arrival order, then queued requests are admitted first come first served while
  fewer than ``max_batch`` sequences run and budget and KV blocks remain (a queued request whose
  chunk finds no free block stops admission: no overtaking, as vLLM). ``token_budget`` must be
  at least ``max_batch`` so every running sequence can decode in every iteration (vLLM's rule
  ``max_num_batched_tokens >= max_num_seqs``). This is ``prefill="chunked"`` (the default): a
  new prompt's prefill shares iterations with the other sequences' decodes, as vLLM V1 on GPUs
  and TensorRT-LLM's in-flight batching ("sequences in the context phase can be processed
  together with sequences in the generation phase", TensorRT-LLM docs, "Paged Attention, IFB,
  and Request Scheduling") do.
* ``prefill="separate"``: an iteration is either **one** sequence's prefill (a chunk of up to
  ``token_budget`` tokens) or the decodes, never both. A prefill under way goes on first, then
  the queue's head is admitted (while fewer than ``max_batch`` run) and prefilled, and only
  when no prefill can run do the decoding sequences take a step: prefill priority, the decodes
  waiting. This is the Neuron stack: vLLM Neuron's ``NeuronScheduler`` ("Neuron requires
  prefill and decode operations to run in separate batches"; ``max_prefills_per_batch = 1``;
  "decode requests are hidden during each prefill iteration"; prompts longer than
  ``max_num_batched_tokens`` prefilled in chunks over several iterations - aws-neuron-sdk
  ``vllm-neuron/docs/design/vllm/neuron-scheduler.md``, commit 81ce03ae, 2026), and the older
  NxD Inference vLLM V0 integration runs its context-encoding and token-generation models as
  separate calls under vLLM V0's default scheduler (no chunked prefill: "We are working ...
  to enable ... Chunked Prefill on Neuron", NxD Inference vLLM V0 user guide).
* **Paged KV cache** (vLLM, Kwon et al., SOSP 2023): ``engine.kv_capacity_tokens //
  engine.block_tokens`` blocks per replica; a sequence holding ``c`` tokens of KV holds
  ``ceil(c / block_tokens)`` blocks and takes a new one as it grows. When the decodes of an
  iteration need more blocks than are free, the latest-arrived running sequence is **preempted
  by recompute** (vLLM's default): its blocks are freed and it returns to the head of the queue,
  to prefill its prompt and the tokens it had generated again (that prefill emits its next
  token). A sequence part way through its prefill that finds no free block waits; if nothing
  else would run, the latest-arrived running sequence is preempted, so the earliest always
  progresses. A request needs at most ``prompt + output - 1`` tokens of KV (its last token is
  never fed back); one that needs more blocks than a replica has is **rejected** at arrival
  (reason ``"kv_capacity"``), never left to hang. This is ``admission="greedy"`` (the default).
* ``admission="reserve"``: a queued request is admitted only when the blocks of its whole KV,
  ``ceil((prompt + output) / block_tokens)``, fit beside the blocks every running sequence has
  reserved for its own (held or still to come); the blocks are still taken as the KV grows,
  but they are always there, so no sequence is ever preempted (the queue's head waits,
  first come first served). This is TensorRT-LLM's default capacity scheduler policy,
  ``GUARANTEED_NO_EVICT`` ("guarantee that a started request is never paused", TensorRT-LLM
  docs, "Useful Runtime Options"; the reservation is ``KVCacheManager::
  getRemainingBlocksToCompletion``, ``ceil((prompt + max new tokens) / tokens per block)``).
  It admits fewer sequences than ``"greedy"`` while the outputs are young and pays no
  recompute. A request whose ``prompt + output`` tokens need more blocks than a replica has is
  rejected. On a disaggregated prefill pool a sequence reserves its prompt's blocks.
* **Prefill/decode disaggregation** (DistServe, Zhong et al., OSDI 2024; Splitwise, Patel et
  al., ISCA 2024): ``prefill_replicas`` replicas only prefill; at the end of its prefill a
  sequence's KV (``prompt`` tokens) moves to a decode replica in ``kv_transfer_s(prompt)``
  seconds (or ``link_latency_s + prompt * kv_bytes_per_token / link_bandwidth_Bps``), its
  blocks held on the prefill replica until then. The first token travels with the KV, so its
  time (TTFT) includes the transfer. The decode replica admits it when it has the blocks (until
  then its KV waits outside the paged cache), and recomputes it locally if it preempts it.

What is not: transfers do not contend with each other (one link per pair of replicas); no
prefix caching, no speculative decoding in the scheduler (the engine's iteration cost may
include it), no swapping to host memory, no priorities beyond first come first served, no
request cancelled by a timeout. A replica's iterations do not overlap (no pipelining across
iterations: an engine with pipeline stages reports the time of one whole iteration).

Outputs (:class:`ServingResult`): per request TTFT (arrival to first token), TPOT (mean
inter-token time after the first: ``(finish - first) / (output - 1)``) and end-to-end latency;
their means and p50/p90/p99 over completed requests; throughput over the simulated time (from
0, where the arrivals start, to the last finish, so a run that cannot keep up measures what the
fleet serves);
time averages of the batch (over busy iterations) and of KV occupancy; the mean number in the
system over the arrival window; preemptions, rejections, iterations; SLO attainment.

Engine
------
The simulation runs against a duck type, one model replica (:mod:`tlm.inference`'s engine,
or any object with these members)::

    engine.chips: int                 # chips of the replica
    engine.kv_capacity_tokens: int    # KV tokens that fit on the replica (all sequences)
    engine.block_tokens: int          # KV page size, tokens
    engine.iteration_s(tokens, sequences, kv_tokens, pairs) -> float seconds
    engine.request_fixed_s: float     # optional (default 0): see "Requests" above

``tokens`` are the GEMM rows of an iteration (one per decoding sequence plus the prefill chunks'
tokens), ``sequences`` the sequences in it, ``kv_tokens`` the sum over them of the keys each
attends to (the KV read), ``pairs`` the sum over them of queries x keys (causal: a chunk of
``c`` tokens after ``s`` cached ones has ``c * s + c * (c + 1) / 2`` pairs).

Speed
-----
The work of an iteration is proportional to what changed, not to the batch: decoding sequences
are kept as aggregates (their count, the sum of their KV lengths, how many cross a block
boundary at each step, a heap of the step each one finishes at), so an iteration in which no
sequence joins, leaves or is preempted costs a few scalar operations, one
``engine.iteration_s`` call and one SimPy event. SimPy (the chip model's engine) meets the
target with room: 100,000 requests (prompts of 1,000 tokens on average, outputs 100-500,
max_batch 128) on the Llama 3 70B trn2 engine simulate in 9.1 s on four colocated replicas
(486,000 iterations) and in 16 s on two prefill and four decode replicas (874,000 iterations)
on this machine (``python -m bench --only serve``, the engine's calls included); SimPy's own
share of the time is about a quarter.

Examples
--------
>>> class Linear:                      # 10 ms an iteration + 1 ms a token
...     chips, kv_capacity_tokens, block_tokens = 1, 4096, 16
...     def iteration_s(self, tokens, sequences, kv_tokens, pairs):
...         return 0.010 + 0.001 * tokens
>>> run = simulate(Linear(), requests=1, rate=1.0, prompt=100, output=11, token_budget=256)
>>> round(run.ttft_s.mean, 6), round(run.tpot_s.mean, 6)   # one prefill of 100, decodes of 1
(0.11, 0.011)
>>> round(run.e2e_s.mean, 6), run.iterations
(0.22, 11)
"""

from __future__ import annotations

import csv
import heapq
import json
import math
import numbers
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import simpy

__all__ = [
    "ServingResult",
    "Summary",
    "MaxRate",
    "TraceError",
    "SloUnreachable",
    "simulate",
    "max_rate",
    "read_trace",
    "parse_lengths",
    "PREFILLS",
    "ADMISSIONS",
    "ROUTERS",
    "RULES",
]

ROUTERS = ("least_loaded", "round_robin")
PREFILLS = ("chunked", "separate")
ADMISSIONS = ("greedy", "reserve")
RULES = ("attainment", "percentile")


class TraceError(ValueError):
    """A trace file that cannot be read: names the file, the line and the field."""


class SloUnreachable(ValueError):
    """No arrival rate meets the SLO: even a lone request misses it (the figures say by how
    much)."""


# ------------------------------------------------------------------ results


@dataclass(frozen=True)
class Summary:
    """Mean and percentiles of one latency, seconds (NaN when no request has it)."""

    mean: float
    p50: float
    p90: float
    p99: float

    @classmethod
    def of(cls, values: np.ndarray) -> Summary:
        values = values[~np.isnan(values)]
        if values.size == 0:
            return cls(math.nan, math.nan, math.nan, math.nan)
        p50, p90, p99 = np.percentile(values, [50, 90, 99])
        return cls(float(values.mean()), float(p50), float(p90), float(p99))


@dataclass
class ServingResult:
    """What a serving simulation measured.

    Latencies are seconds; throughputs per second of simulated time (``simulated_s``: from 0,
    the arrival window's start, to the last finish). Per-request arrays are indexed by request
    in arrival order; a rejected request has NaN latencies.

    Attributes
    ----------
    seed : int or None
        Seed of the random draws (None for a trace with nothing drawn).
    requests, completed, rejected : int
        Requests that arrived, finished, were rejected.
    rejected_reasons : dict
        Reason -> count: ``"kv_capacity"`` (colocated), ``"prefill_kv_capacity"``,
        ``"decode_kv_capacity"`` (disaggregated).
    preemptions : int
        Sequences preempted (recompute), all replicas.
    iterations : int
        Iterations run, all replicas.
    ttft_s, tpot_s, e2e_s : Summary
        Time to first token, time per output token after the first, end-to-end latency.
    throughput_rps, output_tokens_per_s : float
        Completed requests and their output tokens per second.
    throughput_rps_per_chip, output_tokens_per_s_per_chip : float
        The same per chip of the fleet (``chips``).
    mean_batch : float
        Sequences per iteration, weighted by iteration time (busy time only).
    kv_occupancy : float
        Fraction of KV blocks in use, time average over the simulated time and the replicas.
    mean_in_system : float
        Requests arrived and not yet finished, time average over the arrival window (Little's
        law: ``rate * e2e_s.mean`` in a steady state).
    slo_ttft_s, slo_tpot_s : float or None
        The SLO; ``slo_attainment`` is the fraction of all requests (rejected ones fail)
        meeting both (a one-token request meets any TPOT). NaN without an SLO.
    chips : int
        Chips of the fleet (every replica of every pool).
    per_request : dict of numpy arrays
        ``arrival_s``, ``prompt``, ``output``, ``ttft_s``, ``tpot_s``, ``e2e_s``,
        ``preemptions``, ``replica`` (of the prefill, -1 if rejected), ``rejected`` (bool).
    timeline : dict of numpy arrays or None
        With ``timeline=True``, one row per iteration: ``replica``, ``start_s``, ``duration_s``,
        ``tokens``, ``sequences``, ``kv_tokens``, ``pairs``, ``decodes``, ``kv_blocks``.
    """

    seed: int | None
    requests: int
    completed: int
    rejected: int
    rejected_reasons: dict
    preemptions: int
    iterations: int
    simulated_s: float
    ttft_s: Summary
    tpot_s: Summary
    e2e_s: Summary
    throughput_rps: float
    output_tokens_per_s: float
    throughput_rps_per_chip: float
    output_tokens_per_s_per_chip: float
    mean_batch: float
    kv_occupancy: float
    mean_in_system: float
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    slo_attainment: float
    chips: int
    per_request: dict = field(repr=False)
    timeline: dict | None = field(default=None, repr=False)

    def figures(self) -> dict:
        """The scalar figures as a flat dict (latency summaries as ``ttft_s_p90`` and so on),
        ready for JSON."""
        out = {}
        for name, value in vars(self).items():
            if name in ("per_request", "timeline"):
                continue
            if isinstance(value, Summary):
                out |= {f"{name}_{k}": v for k, v in vars(value).items()}
            else:
                out[name] = dict(value) if isinstance(value, dict) else value
        return out

    def meets(self, rule: str, target: float) -> bool:
        """Whether this run meets its SLO under ``rule`` (see :func:`max_rate`)."""
        return _rule_metric(self, rule, target) <= 0


# ------------------------------------------------------------------ inputs


def _check_int(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, not {value!r}")
    return int(value)


def _check_positive(name, value, allow_zero=False):
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        what = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {what}, not {value!r}")
    return float(value)


def _check_engine(name, engine):
    for attr in ("chips", "kv_capacity_tokens", "block_tokens", "iteration_s"):
        if not hasattr(engine, attr):
            raise ValueError(
                f"{name} must have chips, kv_capacity_tokens, block_tokens and iteration_s; "
                f"{engine!r} has no {attr!r}"
            )
    if not callable(engine.iteration_s):
        raise ValueError(f"{name}.iteration_s must be callable, not {engine.iteration_s!r}")
    _check_int(f"{name}.chips", engine.chips, 1)
    _check_positive(f"{name}.request_fixed_s", getattr(engine, "request_fixed_s", 0.0), True)
    block = _check_int(f"{name}.block_tokens", engine.block_tokens, 1)
    capacity = _check_int(f"{name}.kv_capacity_tokens", engine.kv_capacity_tokens, 1)
    if capacity < block:
        raise ValueError(
            f"{name}.kv_capacity_tokens must hold at least one block of "
            f"{name}.block_tokens={block} tokens, not {capacity}"
        )


_LENGTH_FORMS = "an integer >= 1, 'uniform:lo:hi' or 'lognormal:mean:sigma' (or such a tuple)"


def parse_lengths(name, spec):
    """A length distribution from its spec (``prompt``/``output`` of :func:`simulate`, the
    serve study's ``--prompt``/``--output``): ``('fixed', n)``, ``('uniform', lo, hi)`` or
    ``('lognormal', mean, sigma)``; a bad spec raises ``ValueError`` naming ``name``.

    >>> parse_lengths("prompt", "uniform:100:200")
    ('uniform', 100, 200)
    """
    if isinstance(spec, numbers.Integral) and not isinstance(spec, bool):
        if spec < 1:
            raise ValueError(f"{name} must be {_LENGTH_FORMS}, not {spec!r}")
        return ("fixed", int(spec))
    parts = spec.split(":") if isinstance(spec, str) else spec
    if (
        not isinstance(parts, list | tuple)
        or len(parts) != 3
        or parts[0]
        not in (
            "uniform",
            "lognormal",
        )
    ):
        raise ValueError(f"{name} must be {_LENGTH_FORMS}, not {spec!r}")
    kind = parts[0]
    try:
        a, b = (float(x) for x in parts[1:])
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {_LENGTH_FORMS}, not {spec!r}") from None
    if kind == "uniform":
        if not (a == int(a) and b == int(b) and 1 <= a <= b):
            raise ValueError(f"{name}: uniform needs integers 1 <= lo <= hi, not {spec!r}")
        return ("uniform", int(a), int(b))
    if not (math.isfinite(a) and a >= 1 and math.isfinite(b) and b >= 0):
        raise ValueError(f"{name}: lognormal needs mean >= 1 and sigma >= 0, not {spec!r}")
    return ("lognormal", a, b)


def _draw_lengths(spec, n, rng):
    """``n`` lengths of ``spec``: lognormal has the given mean (mu = ln mean - sigma^2 / 2),
    rounded to the nearest integer and at least 1."""
    if spec[0] == "fixed":
        return np.full(n, spec[1], np.int64)
    if spec[0] == "uniform":
        return rng.integers(spec[1], spec[2], n, endpoint=True).astype(np.int64)
    mean, sigma = spec[1], spec[2]
    x = rng.lognormal(math.log(mean) - sigma * sigma / 2, sigma, n)
    return np.maximum(1, np.rint(x)).astype(np.int64)


def read_trace(path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read a trace of requests: CSV with a header row, or JSON lines (``.jsonl``), each request
    with ``arrival_s`` (seconds >= 0), ``prompt`` and ``output`` (tokens, integers >= 1).

    Requests are sorted by arrival (stably). Returns ``(arrival_s, prompt, output)`` arrays.

    Raises
    ------
    TraceError
        Naming the file, the line and the field of the first bad value.

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> p = os.path.join(d, "t.csv")
    >>> _ = open(p, "w").write("arrival_s,prompt,output\\n0.5,100,10\\n0.25,7,3\\n")
    >>> arrival, prompt, output = read_trace(p)
    >>> arrival.tolist(), prompt.tolist(), output.tolist()
    ([0.25, 0.5], [7, 100], [3, 10])
    """
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise TraceError(f"trace {str(path)!r}: cannot read it ({e.strerror})") from None
    rows = []  # (line number, dict)
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise TraceError(f"{path}:{number}: not JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise TraceError(f"{path}:{number}: expected an object, not {line.strip()!r}")
            rows.append((number, row))
    elif path.suffix.lower() == ".csv":
        reader = csv.DictReader(text.splitlines())
        missing = [
            k for k in ("arrival_s", "prompt", "output") if k not in (reader.fieldnames or [])
        ]
        if missing:
            raise TraceError(
                f"{path}:1: the header must name arrival_s, prompt and output; "
                f"missing {', '.join(missing)} (header {reader.fieldnames})"
            )
        rows = [(reader.line_num, row) for row in reader]
    else:
        raise TraceError(f"trace {str(path)!r}: the name must end in .csv or .jsonl")
    if not rows:
        raise TraceError(f"{path}: no requests")
    arrival = np.empty(len(rows))
    prompt = np.empty(len(rows), np.int64)
    output = np.empty(len(rows), np.int64)
    for i, (number, row) in enumerate(rows):
        for key in ("arrival_s", "prompt", "output"):
            value = row.get(key)
            if value is None or value == "":
                raise TraceError(f"{path}:{number}: field {key!r} is missing")
            try:
                x = float(value)
            except (TypeError, ValueError):
                x = math.nan
            if key == "arrival_s":
                if not (math.isfinite(x) and x >= 0):
                    raise TraceError(
                        f"{path}:{number}: field 'arrival_s' must be seconds >= 0, not {value!r}"
                    )
                arrival[i] = x
            else:
                if not (math.isfinite(x) and x == int(x) and x >= 1):
                    raise TraceError(
                        f"{path}:{number}: field {key!r} must be an integer >= 1, not {value!r}"
                    )
                (prompt if key == "prompt" else output)[i] = int(x)
    order = np.argsort(arrival, kind="stable")
    return arrival[order], prompt[order], output[order]


# ------------------------------------------------------------------ the simulation


class _Seq:
    """One request's sequence. ``ctx``: its tokens in the KV cache; ``target``: the KV length
    at which its current prefill ends (prompt + tokens generated); ``generated``: tokens emitted.
    While decoding, ``ctx`` and ``generated`` are implicit (``step + base``; see _Replica)."""

    __slots__ = (
        "rid",
        "prompt",
        "output",
        "generated",
        "ctx",
        "target",
        "blocks",
        "base",
        "version",
        "chunk",
        "replica",
        "reserved",
    )

    def __init__(self, rid, prompt, output):
        self.rid = rid
        self.prompt = prompt
        self.output = output
        self.generated = 0
        self.ctx = 0
        self.target = prompt
        self.blocks = 0
        self.base = 0
        self.version = 0
        self.chunk = 0
        self.replica = -1
        self.reserved = 0  # blocks reserved for its whole KV (admission "reserve")


class _Replica:
    """One model replica: a queue, the running sequences, the KV blocks, a SimPy process.

    Decoding sequences are aggregates: after ``step`` decode steps (iterations in which the
    decodes ran: every iteration that has decodes under the ``"chunked"`` policy, the budget
    being at least max_batch; the decode-only ones under ``"separate"``) a decoding sequence
    holds ``step + base`` tokens of KV (every one decodes in every decode step), so ``n_dec``,
    ``sum_base`` and ``phase[b]`` (how many have ``base % block == b``: those taking a new
    block at steps with ``-step % block == b``) give an iteration's KV read and block demand
    without visiting the sequences.
    """

    def __init__(self, sim, index, engine, role):
        self.sim = sim
        self.index = index
        self.role = role  # "both", "prefill" or "decode"
        self.cost = engine.iteration_s
        self.B = int(engine.block_tokens)
        self.total = int(engine.kv_capacity_tokens) // self.B
        self.used = 0
        # admission "reserve": the blocks the running sequences have reserved for their whole
        # KV (held or not yet); a request is admitted only while they fit the cache
        self.reserve = sim.admission == "reserve"
        self.committed = 0
        self.waiting: deque = deque()
        self.running: set = set()
        self.prefilling: list = []  # running, part way through a prefill, in arrival order
        self.decoding: set = set()
        self.n_dec = 0
        self.sum_base = 0
        self.phase = [0] * self.B
        self.heap: list = []  # (finish step, rid, version, seq)
        self.step = 0
        self.iterations = 0
        self.busy_s = 0.0
        self.batch_area = 0.0
        self.kv_area = 0.0
        self.kv_t = 0.0
        self.preemptions = 0
        self._wake = None
        self.process = sim.env.process(self._run())

    # -- bookkeeping
    def load(self):
        return len(self.waiting) + len(self.running)

    def wake(self):
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    def _kv_mark(self):
        now = self.sim.env.now
        self.kv_area += self.used * (now - self.kv_t)
        self.kv_t = now

    def enqueue(self, seq):
        seq.replica = self.index if seq.replica < 0 else seq.replica
        self.waiting.append(seq)
        self.wake()

    def _join_decode(self, seq):
        """``seq`` (ctx tokens of KV, a token pending) decodes from the next iteration on."""
        seq.base = base = seq.ctx - self.step
        self.decoding.add(seq)
        self.n_dec += 1
        self.sum_base += base
        self.phase[base % self.B] += 1
        finish = seq.prompt + seq.output - 1 - base
        heapq.heappush(self.heap, (finish, seq.rid, seq.version, seq))

    def _leave_decode(self, seq):
        """Take ``seq`` out of the aggregates; set its explicit ctx and generated."""
        self.decoding.discard(seq)
        self.n_dec -= 1
        self.sum_base -= seq.base
        self.phase[seq.base % self.B] -= 1
        seq.version += 1  # its heap entry is now stale
        seq.ctx = self.step + seq.base
        seq.generated = seq.ctx - seq.prompt + 1

    def _whole_kv_blocks(self, seq) -> int:
        """The blocks ``seq`` reserves under admission ``"reserve"``: its prompt's on a prefill
        pool's replica (its KV moves on), else its prompt's and every output token's (TensorRT-
        LLM's ``getRemainingBlocksToCompletion``: ``ceil((prompt + max new tokens) / block)``)."""
        tokens = seq.prompt if self.role == "prefill" else seq.prompt + seq.output
        return -(-tokens // self.B)

    def _reserves(self, seq) -> bool:
        """Whether ``seq`` may be admitted under admission ``"reserve"`` (always under
        ``"greedy"``), reserving its whole KV if so."""
        if not self.reserve:
            return True
        need = self._whole_kv_blocks(seq)
        if self.committed + need > self.total:
            return False
        self.committed += need
        seq.reserved = need
        return True

    def release(self, seq):
        """Give back the blocks ``seq`` reserved (admission ``"reserve"``)."""
        self.committed -= seq.reserved
        seq.reserved = 0

    def _preempt_latest(self):
        """Preempt the latest-arrived running sequence (recompute); return it."""
        if self.reserve:  # reserved sequences always have their blocks: never reached
            raise RuntimeError(
                f"replica {self.index} would preempt under admission 'reserve' (a scheduler "
                f"bug: {self.committed} blocks reserved, {self.used} used of {self.total})"
            )
        seq = max(self.running, key=lambda s: s.rid)
        self._kv_mark()
        if seq in self.decoding:
            self._leave_decode(seq)
        else:
            self.prefilling.remove(seq)
        self.running.discard(seq)
        self.used -= -(-seq.ctx // self.B)
        seq.ctx = seq.blocks = seq.chunk = 0
        seq.target = seq.prompt + seq.generated
        seq.version += 1
        self.waiting.appendleft(seq)
        self.preemptions += 1
        self.sim.preempted[seq.rid] += 1
        return seq

    # -- one iteration
    def _plan(self):
        """Choose the iteration's work; allocate its blocks. Returns the engine's arguments
        ``(tokens, sequences, kv_tokens, pairs)`` and the chunked and admitted-decode lists,
        or None when there is nothing to run."""
        if self.sim.prefill == "separate":
            return self._plan_separate()
        B = self.B
        while True:
            self._kv_mark()
            # 1. decodes: every decoding sequence, one token each; preempt for their blocks
            n, kv = self._decode_all()
            tokens = sequences = n
            pairs = kv
            budget = self.sim.token_budget - n
            chunked = []
            # 2. sequences part way through a prefill, in arrival order, as room allows
            for seq in self.prefilling:
                if budget == 0:
                    break
                room = seq.blocks * B - seq.ctx + (self.total - self.used) * B
                c = min(seq.target - seq.ctx, budget, room)
                if c <= 0:
                    continue
                grow = -(-(seq.ctx + c) // B) - seq.blocks
                self.used += grow
                seq.blocks += grow
                seq.chunk = c
                s = seq.ctx
                tokens += c
                sequences += 1
                kv += s + c
                pairs += c * s + c * (c + 1) // 2
                budget -= c
                chunked.append(seq)
            # 3. admissions, first come first served
            admitted = []
            while self.waiting and budget > 0 and len(self.running) < self.sim.max_batch:
                seq = self.waiting[0]
                free = self.total - self.used
                if seq.ctx == seq.target:  # KV transferred in: decode now
                    if not self._admit_transferred(seq):
                        break
                    tokens += 1
                    sequences += 1
                    kv += seq.ctx + 1
                    pairs += seq.ctx + 1
                    budget -= 1
                    admitted.append(seq)
                    continue
                c = min(seq.target - seq.ctx, budget)
                grow = -(-c // B)
                if grow > free or not self._reserves(seq):
                    break
                self.waiting.popleft()
                self.used += grow
                seq.blocks = grow
                seq.chunk = c
                self.running.add(seq)
                self.prefilling.append(seq)
                tokens += c
                sequences += 1
                kv += c
                pairs += c * (c + 1) // 2
                budget -= c
                chunked.append(seq)
            if tokens:
                return (tokens, sequences, kv, pairs), n, chunked, admitted, self.used
            if not self.running:
                return None  # idle, or waiting for blocks a KV transfer still holds
            # only prefills part way, with no free block: make room, plan again
            self._preempt_latest()

    def _decode_all(self):
        """Blocks for every decoding sequence's next token (preempting the latest arrived
        until they fit): the decodes' sequences and the keys they read (their contexts + 1)."""
        need = self.phase[-self.step % self.B] if self.n_dec else 0
        while need > self.total - self.used:
            self._preempt_latest()
            need = self.phase[-self.step % self.B] if self.n_dec else 0
        self.used += need
        n = self.n_dec
        return n, n * self.step + self.sum_base + n

    def _admit_transferred(self, seq) -> bool:
        """Admit the queue's head ``seq``, whose KV is already here (moved in from a prefill
        pool), to decode now, if the blocks for its next token are free."""
        grow = -(-(seq.ctx + 1) // self.B)
        if grow > self.total - self.used or not self._reserves(seq):
            return False
        self.waiting.popleft()
        self.used += grow
        seq.blocks = grow
        self.running.add(seq)
        return True

    def _decodes(self, budget):
        """Every decoding sequence, one token each (preempting for their blocks), then the
        queue's head while its KV is already here (moved in from a prefill pool): the decode
        part of an iteration. Returns ``[tokens, sequences, kv_tokens, pairs, budget]`` and
        the admitted list."""
        n, kv = self._decode_all()
        work = [n, n, kv, kv, budget - n]
        admitted = []
        while self.waiting and work[4] > 0 and len(self.running) < self.sim.max_batch:
            seq = self.waiting[0]
            if seq.ctx != seq.target or not self._admit_transferred(seq):
                break
            work[0] += 1
            work[1] += 1
            work[2] += seq.ctx + 1
            work[3] += seq.ctx + 1
            work[4] -= 1
            admitted.append(seq)
        return work, admitted

    def _plan_separate(self):
        """The ``"separate"`` policy: an iteration is either one sequence's prefill chunk
        alone or the decodes alone. A prefill under way goes on first; else the queue's head
        is admitted for its prefill (while fewer than ``max_batch`` run and a block is free);
        else every decoding sequence decodes (vLLM Neuron's ``NeuronScheduler``: one prefill
        per iteration, decodes hidden while it runs)."""
        B = self.B
        budget = self.sim.token_budget
        while True:
            self._kv_mark()
            seq = self.prefilling[0] if self.prefilling else None
            if seq is not None:
                room = seq.blocks * B - seq.ctx + (self.total - self.used) * B
                c = min(seq.target - seq.ctx, budget, room)
            elif (
                self.waiting
                and len(self.running) < self.sim.max_batch
                and self.waiting[0].ctx < self.waiting[0].target
            ):
                seq = self.waiting[0]
                c = min(seq.target - seq.ctx, budget)
                if -(-c // B) > self.total - self.used or not self._reserves(seq):
                    c = 0
                else:
                    self.waiting.popleft()
                    self.running.add(seq)
                    self.prefilling.append(seq)
            else:
                c = 0
            if c > 0:
                grow = -(-(seq.ctx + c) // B) - seq.blocks
                self.used += grow
                seq.blocks += grow
                seq.chunk = c
                s = seq.ctx
                args = (c, 1, s + c, c * s + c * (c + 1) // 2)
                return args, 0, [seq], [], self.used
            # no prefill can run: the decodes (and KV moved in)
            work, admitted = self._decodes(budget)
            if work[0]:
                return tuple(work[:4]), self.n_dec, [], admitted, self.used
            if not self.running:
                return None  # idle, or waiting for blocks a KV transfer still holds
            self._preempt_latest()

    def _run(self):
        env = self.sim.env
        while True:
            plan = self._plan()
            if plan is None:
                self._wake = env.event()
                yield self._wake
                self._wake = None
                continue
            args, decodes, chunked, admitted, used = plan
            returned = self.cost(*args)
            try:
                dt = float(returned)
            except (TypeError, ValueError):
                dt = math.nan
            if not 0 < dt < math.inf:
                raise ValueError(
                    f"engine.iteration_s{args} must return finite seconds > 0, not {returned!r}"
                )
            start = env.now
            yield env.timeout(dt)
            self.iterations += 1
            self.busy_s += dt
            self.batch_area += args[1] * dt
            if self.sim.timeline is not None:
                self.sim.timeline.append((self.index, start, dt, *args, decodes, used))
            self._apply(chunked, admitted, decodes)

    def _apply(self, chunked, admitted, decodes):
        sim = self.sim
        if decodes:  # ``step`` counts the decode steps (see the class)
            self.step += 1
        self._kv_mark()
        heap = self.heap
        while heap and heap[0][0] <= self.step:
            _, _, version, seq = heapq.heappop(heap)
            if version != seq.version:
                continue
            self._leave_decode(seq)
            self._finish(seq)
        for seq in chunked:
            seq.ctx += seq.chunk
            seq.chunk = 0
            if seq.ctx < seq.target:
                continue
            self.prefilling.remove(seq)
            seq.generated += 1
            if seq.generated == 1 and self.role != "prefill":
                sim.first_token(seq)
            if self.role == "prefill":
                self.running.discard(seq)
                sim.hand_off(self, seq)
            elif seq.generated == seq.output:
                self._finish(seq)
            else:
                self._join_decode(seq)
        for seq in admitted:
            seq.ctx += 1
            seq.generated += 1
            if seq.generated == seq.output:
                self._finish(seq)
            else:
                self._join_decode(seq)

    def _finish(self, seq):
        self.running.discard(seq)
        self.used -= -(-seq.ctx // self.B)
        self.release(seq)
        self.sim.finish(seq)


class _Simulation:
    def __init__(
        self,
        arrival,
        prompt,
        output,
        engines,
        roles,
        router,
        max_batch,
        token_budget,
        transfer,
        timeline,
        prefill="chunked",
        concurrency=None,
        admission="greedy",
    ):
        self.env = simpy.Environment()
        self.arrival = arrival
        self.prompt = prompt
        self.output = output
        n = len(arrival)
        self.first_s = np.full(n, np.nan)
        self.finish_s = np.full(n, np.nan)
        self.replica_of = np.full(n, -1, np.int64)
        self.rejected = np.zeros(n, bool)
        self.preempted = np.zeros(n, np.int64)
        self.reasons: dict = {}
        self.max_batch = max_batch
        self.token_budget = token_budget
        self.prefill = prefill
        self.admission = admission
        self.concurrency = concurrency
        self.issued = 0  # closed loop: requests sent so far
        # the serving stack's time before a request reaches the scheduler (the front engine's)
        self.request_delay = float(getattr(engines[0], "request_fixed_s", 0.0))
        self.transfer = transfer
        self.router = router
        self.timeline = [] if timeline else None
        self.replicas = [
            _Replica(self, i, e, r) for i, (e, r) in enumerate(zip(engines, roles, strict=True))
        ]
        self.front = [r for r in self.replicas if r.role != "decode"]
        self.back = [r for r in self.replicas if r.role == "decode"]
        self._rr = {"front": 0, "back": 0}
        self.in_system = 0
        self.in_area = 0.0
        self.in_t = 0.0
        self.window_area = 0.0
        self.completed = 0
        if concurrency is None:
            self.env.process(self._arrivals())
        else:
            for _ in range(min(concurrency, n)):
                self._send()

    def _mark(self):
        now = self.env.now
        self.in_area += self.in_system * (now - self.in_t)
        self.in_t = now

    def _pick(self, pool, which):
        if self.router == "round_robin":
            i = self._rr[which]
            self._rr[which] = (i + 1) % len(pool)
            return pool[i]
        return min(pool, key=_Replica.load)  # min keeps the first (lowest index) of ties

    def _fits(self, rid):
        """The rejection reason of request ``rid``, or None: its KV (``prompt + output - 1``
        tokens, the last never fed back; ``prompt + output`` under admission ``"reserve"``,
        what it reserves) needs more blocks than a replica has."""
        p, o = int(self.prompt[rid]), int(self.output[rid])
        whole = p + o if self.admission == "reserve" else p + o - 1
        if not self.back:
            r = self.front[0]
            return "kv_capacity" if -(-whole // r.B) > r.total else None
        f, b = self.front[0], self.back[0]
        if -(-p // f.B) > f.total:
            return "prefill_kv_capacity"
        if -(-whole // b.B) > b.total:
            return "decode_kv_capacity"
        return None

    def _arrive(self, rid) -> bool:
        """Request ``rid`` arrives now: rejected (False) or queued at a replica (True)."""
        reason = self._fits(rid)
        if reason is not None:
            self.rejected[rid] = True
            self.reasons[reason] = self.reasons.get(reason, 0) + 1
        else:
            self._mark()
            self.in_system += 1
            seq = _Seq(rid, int(self.prompt[rid]), int(self.output[rid]))
            if self.request_delay > 0:
                self.env.timeout(self.request_delay).callbacks.append(lambda _: self._queue(seq))
            else:
                self._queue(seq)
        if rid == len(self.arrival) - 1:
            self._mark()
            self.window_area = self.in_area
        return reason is None

    def _queue(self, seq):
        """``seq`` reaches the scheduler: a replica of the front pool queues it."""
        replica = self._pick(self.front, "front")
        self.replica_of[seq.rid] = replica.index
        replica.enqueue(seq)

    def _arrivals(self):
        env = self.env
        for rid, t in enumerate(self.arrival.tolist()):
            if t > env.now:
                yield env.timeout(t - env.now)
            self._arrive(rid)

    def _send(self):
        """Closed loop: a client sends its next request now (and, if it is rejected, the one
        after, at once), while requests remain."""
        while self.issued < len(self.arrival):
            rid = self.issued
            self.issued += 1
            self.arrival[rid] = self.env.now
            if self._arrive(rid):
                return

    def first_token(self, seq):
        self.first_s[seq.rid] = self.env.now

    def finish(self, seq):
        self._mark()
        self.in_system -= 1
        self.completed += 1
        self.finish_s[seq.rid] = self.env.now
        if self.concurrency is not None:
            self._send()  # its client sends the next request

    def hand_off(self, replica, seq):
        """``seq`` ended its prefill on ``replica`` (prefill pool): move its KV, then decode."""
        delay = self.transfer(seq.prompt)

        def arrived(_event):
            replica._kv_mark()
            replica.used -= seq.blocks
            replica.release(seq)
            replica.wake()
            self.first_token(seq)
            if seq.generated == seq.output:
                self.finish(seq)
                return
            seq.blocks = 0  # its KV waits outside the decode replica's paged cache
            self._pick(self.back, "back").enqueue(seq)

        self.env.timeout(delay).callbacks.append(arrived)

    def run(self):
        self.env.run()
        if self.completed + int(self.rejected.sum()) != len(self.arrival):
            raise RuntimeError(
                f"serving simulation stopped with {len(self.arrival) - self.completed} of "
                f"{len(self.arrival)} requests unfinished (a scheduler bug)"
            )


def _transfer_fn(kv_transfer_s, kv_bytes_per_token, link_bandwidth_Bps, link_latency_s):
    if kv_transfer_s is not None:
        if kv_bytes_per_token is not None or link_bandwidth_Bps is not None:
            raise ValueError(
                "give either kv_transfer_s or kv_bytes_per_token with link_bandwidth_Bps, not both"
            )
        if not callable(kv_transfer_s):
            raise ValueError(
                f"kv_transfer_s must be a callable (prompt tokens -> seconds), not "
                f"{kv_transfer_s!r}"
            )

        def checked(tokens):
            t = kv_transfer_s(tokens)
            if not (isinstance(t, numbers.Real) and 0 <= t < math.inf):
                raise ValueError(f"kv_transfer_s({tokens}) must return seconds >= 0, not {t!r}")
            return t

        return checked
    if kv_bytes_per_token is None or link_bandwidth_Bps is None:
        raise ValueError(
            "a disaggregated fleet needs kv_transfer_s, or kv_bytes_per_token and "
            "link_bandwidth_Bps (and link_latency_s)"
        )
    per_token = _check_positive("kv_bytes_per_token", kv_bytes_per_token)
    bandwidth = _check_positive("link_bandwidth_Bps", link_bandwidth_Bps)
    latency = _check_positive("link_latency_s", link_latency_s, allow_zero=True)
    return lambda tokens: latency + tokens * per_token / bandwidth


def _requests(rate, duration_s, requests, prompt, output, trace, seed, concurrency=None):
    """The arrival times and lengths, and the seed used (None if nothing was drawn). In a
    closed loop the arrival times are zeros, set as the clients send."""
    if concurrency is not None:
        _check_int("concurrency", concurrency, 1)
        for name, value in (("rate", rate), ("duration_s", duration_s), ("trace", trace)):
            if value is not None:
                raise ValueError(
                    f"{name}={value!r} must not be given with concurrency={concurrency} (closed "
                    "loop: each client sends its next request when its last one completes; "
                    "give requests)"
                )
        if requests is None:
            raise ValueError(
                f"requests (an integer >= 1) is required with concurrency={concurrency}: the "
                "requests the clients send in all"
            )
        n = _check_int("requests", requests, 1)
        seed = _check_int("seed", seed, 0)
        p_spec = parse_lengths("prompt", prompt)
        o_spec = parse_lengths("output", output)
        # the same stream of lengths as an open loop with this seed
        lengths = np.random.default_rng(np.random.SeedSequence(seed).spawn(2)[1])
        return (
            np.zeros(n),
            _draw_lengths(p_spec, n, lengths),
            _draw_lengths(o_spec, n, lengths),
            seed,
        )
    if trace is not None:
        for name, value in (("rate", rate), ("duration_s", duration_s), ("requests", requests)):
            if value is not None:
                raise ValueError(f"{name} must not be given with a trace (it has {name!r})")
        arrival, p, o = read_trace(trace)
        return arrival, p, o, None
    if rate is None:
        raise ValueError("rate (requests per second, > 0) is required without a trace")
    rate = _check_positive("rate", rate)
    if (duration_s is None) == (requests is None):
        raise ValueError(
            f"give exactly one of duration_s and requests, not duration_s={duration_s!r} "
            f"and requests={requests!r}"
        )
    seed = _check_int("seed", seed, 0)
    p_spec = parse_lengths("prompt", prompt)
    o_spec = parse_lengths("output", output)
    arrivals_ss, lengths_ss = np.random.SeedSequence(seed).spawn(2)
    gaps = np.random.default_rng(arrivals_ss)
    if requests is not None:
        n = _check_int("requests", requests, 1)
        arrival = np.cumsum(gaps.standard_exponential(n)) / rate
    else:
        duration_s = _check_positive("duration_s", duration_s)
        chunks, total = [], 0.0
        while total * 1.0 < duration_s * rate:
            chunk = np.cumsum(gaps.standard_exponential(int(duration_s * rate) + 16)) + total
            chunks.append(chunk)
            total = chunk[-1]
        arrival = np.concatenate(chunks) / rate
        arrival = arrival[arrival < duration_s]
        if arrival.size == 0:
            raise ValueError(
                f"no request arrives in duration_s={duration_s} at rate={rate}/s "
                f"(seed {seed}): give a longer duration or a higher rate"
            )
        n = arrival.size
    lengths = np.random.default_rng(lengths_ss)
    return arrival, _draw_lengths(p_spec, n, lengths), _draw_lengths(o_spec, n, lengths), seed


def simulate(
    engine,
    *,
    rate: float | None = None,
    duration_s: float | None = None,
    requests: int | None = None,
    prompt=512,
    output=128,
    trace=None,
    seed: int = 0,
    concurrency: int | None = None,
    replicas: int | None = None,
    router: str = "least_loaded",
    max_batch: int = 128,
    token_budget: int = 2048,
    prefill: str = "chunked",
    admission: str = "greedy",
    prefill_replicas: int | None = None,
    decode_replicas: int | None = None,
    decode_engine=None,
    kv_transfer_s: Callable[[int], float] | None = None,
    kv_bytes_per_token: float | None = None,
    link_bandwidth_Bps: float | None = None,
    link_latency_s: float = 0.0,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    timeline: bool = False,
) -> ServingResult:
    """Simulate serving a stream of requests on a fleet of model replicas.

    Parameters
    ----------
    engine
        One model replica (see the module's "Engine"); with disaggregation, the prefill pool's.
    rate : float
        Poisson arrivals per second (not with ``trace`` or ``concurrency``).
    duration_s : float
        Arrivals during ``[0, duration_s)``; or
    requests : int
        this many arrivals. Exactly one of the two with ``rate``; ``requests`` alone with
        ``concurrency``.
    prompt, output : int, str or tuple
        Tokens: an integer, ``"uniform:lo:hi"`` (integers, inclusive) or
        ``"lognormal:mean:sigma"`` (rounded, at least 1), or the same as a tuple.
    trace : path, optional
        CSV or JSONL of ``arrival_s, prompt, output`` instead of drawn requests
        (:func:`read_trace`).
    seed : int
        Seed of the draws (``numpy.random.default_rng``); reported in the result.
    concurrency : int, optional
        A closed loop instead of arrivals: this many clients, each sending its next request
        the moment its previous one completes (or is rejected), ``requests`` in all; they all
        send their first at time 0. What ``vllm bench serve --max-concurrency``, LLMPerf's
        ``--num-concurrent-requests`` and genai-perf's ``--concurrency`` do. Not with
        ``rate``, ``duration_s`` or ``trace``.
    replicas : int
        Colocated replicas (default 1); not with the pools below.
    router : {"least_loaded", "round_robin"}
        Which replica of a pool takes a request.
    max_batch : int
        Sequences running at once on a replica (>= 1).
    token_budget : int
        Tokens an iteration processes (decodes + prefill chunks), >= max_batch.
    prefill : {"chunked", "separate"}
        How prefills share iterations (see the module's "What is modelled"): ``"chunked"``,
        decodes first and prefill chunks beside them within the budget; ``"separate"``, one
        sequence's prefill chunk alone or the decodes alone.
    admission : {"greedy", "reserve"}
        When a queued request may start (see the module's "What is modelled"): ``"greedy"``,
        when its first chunk's blocks are free, the latest-arrived running sequence preempted
        when blocks run out (vLLM); ``"reserve"``, only when the blocks of its whole KV
        (``prompt + output`` tokens) are free beside those the running sequences reserved, so
        none is ever preempted (TensorRT-LLM's ``GUARANTEED_NO_EVICT``).
    prefill_replicas, decode_replicas : int
        Disaggregated pools (both or neither).
    decode_engine
        The decode pool's replica (default ``engine``).
    kv_transfer_s : callable, optional
        Seconds to move the KV of a prompt of so many tokens between the pools; or
    kv_bytes_per_token, link_bandwidth_Bps, link_latency_s : float
        ``link_latency_s + tokens * kv_bytes_per_token / link_bandwidth_Bps``.
    slo_ttft_s, slo_tpot_s : float, optional
        The SLO for ``slo_attainment`` (an absent one is always met).
    timeline : bool
        Keep one row per iteration (``ServingResult.timeline``).

    Returns
    -------
    ServingResult

    Raises
    ------
    ValueError
        Any bad argument, naming it, its value and what is allowed; :class:`TraceError` for a
        bad trace file.
    """
    if prefill not in PREFILLS:
        raise ValueError(f"prefill must be one of {', '.join(PREFILLS)}, not {prefill!r}")
    if admission not in ADMISSIONS:
        raise ValueError(f"admission must be one of {', '.join(ADMISSIONS)}, not {admission!r}")
    max_batch = _check_int("max_batch", max_batch, 1)
    token_budget = _check_int("token_budget", token_budget, 1)
    if token_budget < max_batch:
        raise ValueError(
            f"token_budget must be >= max_batch={max_batch} (every running sequence decodes "
            f"each iteration), not {token_budget}"
        )
    if router not in ROUTERS:
        raise ValueError(f"router must be one of {', '.join(ROUTERS)}, not {router!r}")
    for name, value in (("slo_ttft_s", slo_ttft_s), ("slo_tpot_s", slo_tpot_s)):
        if value is not None:
            _check_positive(name, value)
    _check_engine("engine", engine)
    disaggregated = prefill_replicas is not None or decode_replicas is not None
    if disaggregated:
        if replicas is not None:
            raise ValueError(
                f"replicas={replicas!r} is for a colocated fleet; a disaggregated one is "
                "prefill_replicas + decode_replicas"
            )
        if prefill_replicas is None or decode_replicas is None:
            raise ValueError(
                f"give both prefill_replicas and decode_replicas, not "
                f"prefill_replicas={prefill_replicas!r} and decode_replicas={decode_replicas!r}"
            )
        np_ = _check_int("prefill_replicas", prefill_replicas, 1)
        nd = _check_int("decode_replicas", decode_replicas, 1)
        decode_engine = engine if decode_engine is None else decode_engine
        _check_engine("decode_engine", decode_engine)
        transfer = _transfer_fn(
            kv_transfer_s, kv_bytes_per_token, link_bandwidth_Bps, link_latency_s
        )
        engines = [engine] * np_ + [decode_engine] * nd
        roles = ["prefill"] * np_ + ["decode"] * nd
    else:
        for name, value in (
            ("decode_engine", decode_engine),
            ("kv_transfer_s", kv_transfer_s),
            ("kv_bytes_per_token", kv_bytes_per_token),
            ("link_bandwidth_Bps", link_bandwidth_Bps),
        ):
            if value is not None:
                raise ValueError(
                    f"{name} is for a disaggregated fleet (prefill_replicas, decode_replicas)"
                )
        n = 1 if replicas is None else _check_int("replicas", replicas, 1)
        engines, roles, transfer = [engine] * n, ["both"] * n, None
    arrival, prompt_t, output_t, seed = _requests(
        rate, duration_s, requests, prompt, output, trace, seed, concurrency
    )
    sim = _Simulation(
        arrival,
        prompt_t,
        output_t,
        engines,
        roles,
        router,
        max_batch,
        token_budget,
        transfer,
        timeline,
        prefill,
        concurrency,
        admission,
    )
    sim.run()
    return _result(sim, seed, engines, slo_ttft_s, slo_tpot_s)


def _result(sim, seed, engines, slo_ttft_s, slo_tpot_s) -> ServingResult:
    arrival, output = sim.arrival, sim.output
    ttft = sim.first_s - arrival
    e2e = sim.finish_s - arrival
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(output > 1, (sim.finish_s - sim.first_s) / (output - 1), np.nan)
    done = ~sim.rejected
    end = float(np.nanmax(sim.finish_s)) if done.any() else float(arrival[-1])
    simulated = max(end, float(arrival[-1]))
    reps = sim.replicas
    kv_occupancy = (
        np.mean([(r.kv_area + r.used * (simulated - r.kv_t)) / (r.total * simulated) for r in reps])
        if simulated > 0
        else 0.0
    )
    busy = sum(r.busy_s for r in reps)
    chips = int(sum(e.chips for e in engines))
    out_tokens = float(output[done].sum())
    ok = done.copy()
    if slo_ttft_s is not None:
        ok &= ttft <= slo_ttft_s
    if slo_tpot_s is not None:
        ok &= np.isnan(tpot) | (tpot <= slo_tpot_s)
    attainment = (
        float(ok.mean()) if (slo_ttft_s is not None or slo_tpot_s is not None) else math.nan
    )
    window = float(arrival[-1])
    timeline = None
    if sim.timeline is not None:
        cols = (
            "replica",
            "start_s",
            "duration_s",
            "tokens",
            "sequences",
            "kv_tokens",
            "pairs",
            "decodes",
            "kv_blocks",
        )
        table = np.array(sim.timeline, float).reshape(-1, len(cols))
        timeline = {c: table[:, i] for i, c in enumerate(cols)}
        for c in cols:
            if c not in ("start_s", "duration_s"):
                timeline[c] = timeline[c].astype(np.int64)
    return ServingResult(
        seed=seed,
        requests=len(arrival),
        completed=sim.completed,
        rejected=int(sim.rejected.sum()),
        rejected_reasons=dict(sim.reasons),
        preemptions=sum(r.preemptions for r in reps),
        iterations=sum(r.iterations for r in reps),
        simulated_s=simulated,
        ttft_s=Summary.of(ttft),
        tpot_s=Summary.of(tpot),
        e2e_s=Summary.of(e2e),
        throughput_rps=sim.completed / simulated if simulated > 0 else math.nan,
        output_tokens_per_s=out_tokens / simulated if simulated > 0 else math.nan,
        throughput_rps_per_chip=sim.completed / simulated / chips if simulated > 0 else math.nan,
        output_tokens_per_s_per_chip=out_tokens / simulated / chips if simulated > 0 else math.nan,
        mean_batch=sum(r.batch_area for r in reps) / busy if busy > 0 else 0.0,
        kv_occupancy=float(kv_occupancy),
        mean_in_system=sim.window_area / window if window > 0 else math.nan,
        slo_ttft_s=slo_ttft_s,
        slo_tpot_s=slo_tpot_s,
        slo_attainment=attainment,
        chips=chips,
        per_request={
            "arrival_s": arrival,
            "prompt": sim.prompt,
            "output": output,
            "ttft_s": ttft,
            "tpot_s": tpot,
            "e2e_s": e2e,
            "preemptions": sim.preempted,
            "replica": sim.replica_of,
            "rejected": sim.rejected,
        },
        timeline=timeline,
    )


# ------------------------------------------------------------------ the rate under an SLO


def _rule_metric(run: ServingResult, rule: str, target: float) -> float:
    """<= 0 when ``run`` meets its SLO under ``rule``; the larger, the further it misses.

    ``"attainment"``: the fraction of requests meeting both SLOs is at least ``target``
    (returns ``target - attainment``). ``"percentile"``: the ``100 * target`` percentile of TTFT
    is at most ``slo_ttft_s`` and that of TPOT at most ``slo_tpot_s``, rejected requests counting
    as infinitely late (returns the larger relative excess)."""
    if rule == "attainment":
        return target - run.slo_attainment
    done = ~run.per_request["rejected"]
    worst = -math.inf
    for name, slo in (("ttft_s", run.slo_ttft_s), ("tpot_s", run.slo_tpot_s)):
        if slo is None:
            continue
        values = np.where(done, run.per_request[name], np.inf)
        if name == "tpot_s":
            values = np.where(np.isnan(values), 0.0, values)  # one-token requests
        q = float(np.quantile(values, target, method="higher"))
        worst = max(worst, q / slo - 1)
    return worst


@dataclass
class MaxRate:
    """The highest arrival rate meeting an SLO, found by bisection.

    Attributes
    ----------
    rate : float
        Requests per second: the highest rate tried that met the rule.
    run : ServingResult
        The simulation at ``rate``.
    rule : str
    target : float
    runs : list of (rate, met, metric)
        Every simulation, in order (``metric <= 0`` when met; see the rule).
    """

    rate: float
    run: ServingResult
    rule: str
    target: float
    runs: list


def max_rate(
    engine,
    *,
    slo_ttft_s: float | None = None,
    slo_tpot_s: float | None = None,
    rule: str = "attainment",
    target: float = 0.9,
    requests: int = 2000,
    rel_tol: float = 0.02,
    max_runs: int = 40,
    **kwargs,
) -> MaxRate:
    """The highest Poisson arrival rate a fleet serves within an SLO.

    The rule: ``"attainment"`` - at least ``target`` of the requests meet both SLOs (TTFT <=
    ``slo_ttft_s`` and TPOT <= ``slo_tpot_s``, a rejected request failing); ``"percentile"`` -
    the ``100 * target`` percentile of TTFT and of TPOT (p90 for 0.9) are within their SLOs.
    Every simulation runs ``requests`` requests with the same seed, so a higher rate sees the
    same requests sooner. The bracket: the fleet's capacity ``c`` measured by one saturated
    run (every request at once, the rate ``requests / makespan``); if ``c`` meets the rule the
    rate doubles until it fails, else it halves until it holds (below ``c / 1000``:
    :class:`SloUnreachable`) - low rates are the slow runs (each request alone, an iteration a
    token), so the search starts high. Then bisection (geometric while the bracket spans more
    than 4x) until the bracket is within ``rel_tol`` of its lower end.

    Parameters
    ----------
    engine
        As :func:`simulate`.
    slo_ttft_s, slo_tpot_s : float
        The SLO (at least one).
    rule : {"attainment", "percentile"}
    target : float
        In (0, 1]: the attainment or the percentile's fraction.
    requests : int
        Requests of each simulation.
    rel_tol : float
        Relative width of the final bracket, > 0.
    max_runs : int
        Simulations allowed (the saturated one included).
    **kwargs
        Passed to :func:`simulate` (not ``rate``, ``duration_s``, ``trace``, ``concurrency``).

    Returns
    -------
    MaxRate

    Raises
    ------
    SloUnreachable
        When the SLO fails below ``c / 1000``, with the figures of that run.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, not {rule!r}")
    if not (isinstance(target, numbers.Real) and 0 < target <= 1):
        raise ValueError(f"target must be a fraction in (0, 1], not {target!r}")
    if slo_ttft_s is None and slo_tpot_s is None:
        raise ValueError("max_rate needs slo_ttft_s or slo_tpot_s (or both)")
    rel_tol = _check_positive("rel_tol", rel_tol)
    max_runs = _check_int("max_runs", max_runs, 3)
    for name in ("rate", "duration_s", "trace", "concurrency"):
        if name in kwargs:
            raise ValueError(f"max_rate chooses the rate itself; do not pass {name}")
    runs = []

    def run_at(rate):
        if len(runs) >= max_runs:
            raise RuntimeError(
                f"max_rate: {max_runs} simulations did not narrow the bracket to "
                f"rel_tol={rel_tol} (runs: {runs})"
            )
        result = simulate(
            engine,
            rate=rate,
            requests=requests,
            slo_ttft_s=slo_ttft_s,
            slo_tpot_s=slo_tpot_s,
            **kwargs,
        )
        metric = _rule_metric(result, rule, target)
        runs.append((rate, metric <= 0, metric))
        return result, metric <= 0

    # capacity: every request at (almost) once
    saturated, _ = run_at(1e9)
    capacity = saturated.throughput_rps
    hi_run, ok = run_at(capacity)
    if ok:  # a short run can beat the saturated capacity: widen until the rule fails
        lo, lo_run, hi = capacity, hi_run, 2 * capacity
        hi_run, ok = run_at(hi)
        while ok:
            lo, lo_run, hi = hi, hi_run, 2 * hi
            hi_run, ok = run_at(hi)
    else:  # halve until the rule holds; the low rates are the slow runs (requests alone)
        hi, lo = capacity, capacity / 2
        while True:
            lo_run, ok = run_at(lo)
            if ok:
                break
            if lo < capacity / 1000:
                raise SloUnreachable(
                    f"no rate meets the SLO (rule {rule!r}, target {target}): at "
                    f"{lo:.4g} requests/s (under a thousandth of the capacity, "
                    f"{capacity:.4g}/s) TTFT p90 {lo_run.ttft_s.p90:.4g} s (SLO {slo_ttft_s}), "
                    f"TPOT p90 {lo_run.tpot_s.p90:.4g} s (SLO {slo_tpot_s}), attainment "
                    f"{lo_run.slo_attainment:.3f}"
                )
            hi, lo = lo, lo / 2
    while hi - lo > rel_tol * lo:
        mid = (lo * hi) ** 0.5 if hi > 4 * lo else (lo + hi) / 2
        result, ok = run_at(mid)
        if ok:
            lo, lo_run = mid, result
        else:
            hi = mid
    return MaxRate(rate=lo, run=lo_run, rule=rule, target=target, runs=runs)
