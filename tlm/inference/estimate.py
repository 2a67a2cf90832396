"""A request's latency and throughput on one replica: ``batch`` sequences of ``prompt`` +
``output`` tokens through :class:`~tlm.inference.step.Engine` - the prefill (chunked by the
engine's largest iteration, a pipeline's micro-batches from an empty pipeline) and the
decode steps - with the memory check, TTFT, TPOT, end-to-end latency, tokens/s, MFU and HBM
utilisation per phase.

Speculative decoding (``draft_model``): each verify step scores ``draft_tokens + 1`` positions
and accepts ``tokens_per_verify`` of them on average (each draft token accepted with
``acceptance``, independently); the draft encodes the prompts too. The draft runs as calls of
its own (vLLM's proposer: each an iteration with the fixed cost, the first proposals before the
first token) or, with ``draft_fused``, inside the target's compiled iterations (NxD Inference's
fused speculation). Definitions and what is assumed: docs/inference.md, "A request".

Examples
--------
>>> from tlm.inference import estimate
>>> r = estimate("llama3.1-405b", "trn2", "server", tp=16, prompt=2048, output=256)
>>> r.memory["fits"], r.chips
(True, 16)
>>> spec = estimate("llama3.1-405b", "trn2", "server", tp=16, prompt=2048, output=256,
...                 draft_model="llama3-8b", draft_tokens=4, acceptance=0.8)
>>> round(spec.tokens_per_verify, 3), bool(spec.tpot_s < r.tpot_s)
(3.362, True)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import numpy as np

from ..workloads.model import Model
from ..workloads.operators import tp_allowed
from .buckets import ShapeBuckets, stack_buckets
from .errors import InferenceInputError
from .layout import FixedCosts, ReplicaSpec, as_hardware, as_model
from .memory import DEFAULT_BLOCK_TOKENS
from .step import Engine

__all__ = [
    "Estimate",
    "Phase",
    "RequestBatch",
    "Speculation",
    "estimate",
    "estimate_of",
    "request_times",
    "tokens_per_verify",
]


def _check_count(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise InferenceInputError(name, value, "an integer >= 1")


@dataclass(frozen=True)
class RequestBatch:
    """What one replica serves at once: ``batch`` requests of ``prompt`` + ``output`` tokens.

    Parameters
    ----------
    batch, prompt, output : int
        Sequences, prompt tokens and generated tokens each (>= 1).

    Raises
    ------
    InferenceInputError
        Naming the field, its value and what is allowed.
    """

    batch: int = 1
    prompt: int = 2048
    output: int = 256

    def __post_init__(self):
        for name in ("batch", "prompt", "output"):
            _check_count(name, getattr(self, name))


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding: a draft model proposes tokens the target verifies.

    Parameters
    ----------
    draft_model : Model or str
        The draft (:func:`tlm.workloads.load_model`).
    draft_tokens : int
        Tokens the draft proposes per verify step (>= 1).
    acceptance : float
        Probability the target accepts a draft token, in [0, 1].
    draft_fused : bool
        The draft runs inside the target's compiled iterations (NxD Inference's fused
        speculation) rather than as separate calls (vLLM's draft proposer); see the module
        docstring.

    Raises
    ------
    InferenceInputError
        Naming the field, its value and what is allowed.
    """

    draft_model: Model
    draft_tokens: int = 4
    acceptance: float = 0.7
    draft_fused: bool = False

    def __post_init__(self):
        k, a = self.draft_tokens, self.acceptance
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InferenceInputError("draft_tokens", k, "an integer >= 1")
        if isinstance(a, bool) or not isinstance(a, int | float) or not (0 <= a <= 1):
            raise InferenceInputError("acceptance", a, "a number in [0, 1]")
        if not isinstance(self.draft_fused, bool):
            raise InferenceInputError("draft_fused", self.draft_fused, "True or False")
        object.__setattr__(self, "draft_model", as_model(self.draft_model))


@dataclass(frozen=True)
class Phase:
    """One phase of a request (prefill or all its decode steps), summed: seconds on the
    replica by category, model FLOPs, HBM bytes (all chips), and the utilisations."""

    time_s: float
    compute_s: float
    memory_s: float
    communication_s: float
    fixed_s: float
    flop: float
    hbm_bytes: float
    mfu_fraction: float
    hbm_utilisation_fraction: float


@dataclass(frozen=True)
class Estimate:
    """A request's latency and throughput on one replica (see the module docstring)."""

    ttft_s: float
    tpot_s: float
    e2e_s: float
    tokens_per_s: float
    tokens_per_s_per_chip: float
    tokens_per_s_per_server: float
    decode_tokens_per_s: float
    prefill: Phase
    decode: Phase
    request_s: float
    memory: dict
    max_batch: int
    chips: int
    tokens_per_verify: float
    micro_batches: int
    attention_groups: int
    buckets: ShapeBuckets
    engine: Engine = field(repr=False, compare=False)

    def to_dict(self) -> dict:
        out = asdict(self)
        out.pop("engine")
        return out


def tokens_per_verify(draft_tokens: int, acceptance: float) -> float:
    """Expected tokens a verify step yields: ``(1 - a^(k+1)) / (1 - a)`` (``k + 1`` at a = 1).

    >>> tokens_per_verify(4, 0.0), tokens_per_verify(4, 1.0), round(tokens_per_verify(3, 0.5), 4)
    (1.0, 5.0, 1.875)
    """
    a, k = float(acceptance), int(draft_tokens)
    return k + 1.0 if a == 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)


def _positive(name, value):
    a = np.asarray(value)
    if a.dtype == bool or not (np.issubdtype(a.dtype, np.integer) or a.dtype.kind == "f"):
        raise InferenceInputError(name, value, "an integer >= 1")
    bad = (a < 1) | (a != np.floor(a))
    if bad.any():
        first = a[bad].ravel()[0].item() if a.ndim else a.item()
        raise InferenceInputError(name, first, "an integer >= 1")
    return a.astype(np.int64)


#: No length buckets: each sequence's own lengths.
NO_BUCKETS = ShapeBuckets()


_PHASE_SUMS = ("time_s", "compute_s", "memory_s", "communication_s", "fixed_s", "hbm_bytes")


def _sums(engine: Engine, rows: list, count: int, prefills: int | None = None) -> dict:
    """``engine``'s iterations of ``rows`` (owner, tokens, sequences, keys, pairs, and the
    unpadded tokens and pairs) summed per owner (``count`` of them): the :class:`Phase` sums.
    The FLOPs are the model's - the unpadded work. With ``prefills``, owners below it start
    from an empty pipeline."""
    who, T, S, KV, P, T0, P0 = (np.concatenate(x) for x in zip(*rows, strict=True))
    if prefills is None:
        it = engine.step(T, S, KV, P)
    else:
        it = engine.step(T, S, KV, P, from_empty=who < prefills)
    total = lambda a: np.bincount(who, weights=np.ravel(a), minlength=count)  # noqa: E731
    out = {k: total(getattr(it, k)) for k in _PHASE_SUMS}
    out["flop"] = total(engine.model_flop(T0, S, P0))
    return out


def request_times(
    engine: Engine,
    batch,
    prompt,
    output,
    draft: Engine | None = None,
    draft_tokens: int = 4,
    acceptance: float = 0.7,
    draft_fused: bool = False,
    buckets: ShapeBuckets = NO_BUCKETS,
) -> dict:
    """Prefill and decode of requests on ``engine``, vectorised over ``batch``, ``prompt`` and
    ``output`` (arrays broadcast together): ``{"prefill": {...}, "decode": {...}}``, each a
    dict of arrays (the :class:`Phase` sums: seconds by category, FLOPs, HBM bytes), and
    ``decode_steps``, and ``request_s``, the serving stack's time per request outside the
    iterations (``engine.request_fixed_s``: in the TTFT, not in the prefill's replica time).
    With ``draft``, the decode is speculative and the prefill holds the
    draft's too; ``draft_fused`` says the draft runs inside the target's iterations (then
    ``draft`` must carry no per-iteration fixed cost of its own, see :func:`estimate`).
    ``buckets`` pads each prompt to its context-encoding bucket and each decode step's keys
    to its token-generation bucket, every query attending them all (:mod:`.buckets`).
    """
    b, p, o = np.broadcast_arrays(
        _positive("batch", batch), _positive("prompt", prompt), _positive("output", output)
    )
    b, p, o = (x.ravel().astype(float) for x in (b, p, o))
    n = len(b)
    padded = buckets.token != ()  # the decode steps' keys padded
    # rows: (owner, tokens, sequences, keys read, pairs; and the unpadded tokens and pairs,
    # which the model FLOPs count). The prefill: every prompt at once, causal attention.
    pc = buckets.padded_context(p).astype(float)
    rows = [(np.arange(n), b * pc, b, b * pc, b * pc * (pc + 1) / 2, b * p, b * p * (p + 1) / 2)]
    if draft is None:
        steps = (o - 1).astype(np.int64)
        owner = np.repeat(np.arange(n), steps)
        j = np.arange(steps.sum()) - np.repeat(np.cumsum(steps) - steps, steps) + 1
        bb = b[owner]
        keys = bb * (p[owner] + j)  # decode step j attends prompt + j keys
        kp = bb * buckets.padded_token(p[owner] + j)
        rows.append((n + owner, bb, bb, kp, kp, bb, keys))
    else:
        k = int(draft_tokens)
        e = tokens_per_verify(k, acceptance)
        steps = np.ceil((o - 1) / e).astype(np.int64)
        owner = np.repeat(np.arange(n), steps)
        j = np.arange(steps.sum()) - np.repeat(np.cumsum(steps) - steps, steps)
        bb = b[owner]
        first = p[owner] + 1 + j * e  # keys the first of the k + 1 queries attends
        pairs = bb * ((k + 1) * first + k * (k + 1) / 2)
        # padded, every query of a step attends its bucket's keys (the last verify's queries
        # past the output are padding too)
        end = p[owner] + o[owner]
        at = lambda keys: buckets.padded_token(np.minimum(np.ceil(keys), end))  # noqa: E731
        last = at(first + k) if padded else first + k
        rows.append(
            (n + owner, bb * (k + 1), bb, bb * last, bb * (k + 1) * last if padded else pairs)
            + (bb * (k + 1), pairs)
        )
    # one call for the prefill and the decode (the shared work is priced once)
    from_empty = engine.micro_batches > 1  # the prefill from an empty pipeline, decode steady
    sums = _sums(engine, rows, 2 * n, n if from_empty else None)
    prefill = {name: v[:n] for name, v in sums.items()}
    decode = {name: v[n:] for name, v in sums.items()}
    if draft is not None:
        for i in range(k):  # the draft's k decode steps per verify step
            keys = bb * (first + i)
            kp = bb * at(first + i) if padded else keys
            d = _sums(draft, [(owner, bb, bb, kp, kp, bb, keys)], n)
            decode = {name: decode[name] + d[name] for name in decode}
        # before the first token: the draft's prefill of the prompts, and when its calls are
        # separate, the rest of the first verify step's proposals (draft steps 1 .. k - 1)
        idx = np.arange(n)
        rows = rows[:1]
        if not draft_fused:
            for i in range(1, k):
                kp = b * buckets.padded_token(p + i)
                rows.append((idx, b, b, kp, kp, b, b * (p + i)))
        d = _sums(draft, rows, n)
        prefill = {name: prefill[name] + d[name] for name in prefill}
    return {
        "prefill": prefill,
        "decode": decode,
        "decode_steps": steps,
        "request_s": engine.request_fixed_s,
    }


def _draft_engine(spec: ReplicaSpec, fixed: FixedCosts, speculation: Speculation) -> Engine:
    """The draft's engine beside ``spec``: its largest tensor-parallel group within ``tp``, the
    replica's formats, system and fixed costs (no per-iteration cost when fused)."""
    d, tp = speculation.draft_model, spec.tp
    tp_d = max(t for t in range(1, tp + 1) if tp % t == 0 and tp_allowed(d, t) is None)
    if speculation.draft_fused:  # inside the target's iterations: no launch, sampling or sync
        fixed = replace(fixed, step_fixed_s=0.0)
    draft = ReplicaSpec(
        d,
        spec.hardware,
        spec.system,
        tp=tp_d,
        fmt=spec.fmt,
        kv_fmt=spec.kv_fmt,
        block_tokens=spec.block_tokens,
    )
    return Engine.of(draft, fixed)


def estimate(
    model,
    hardware,
    system="server",
    *,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    batch: int = 1,
    prompt: int = 2048,
    output: int = 256,
    fmt: str = "bf16",
    kv_fmt: str = "bf16",
    draft_model=None,
    draft_tokens: int = 4,
    acceptance: float = 0.7,
    draft_fused: bool = False,
    block_tokens: int = DEFAULT_BLOCK_TOKENS,
    step_fixed_s: float | None = None,
    collective_fixed_s: float | None = None,
    collective_bandwidth_factor: float | None = None,
    request_fixed_s: float | None = None,
    check_memory: bool = True,
    dp_attention: bool = False,
    micro_batches: int | None = None,
    buckets: ShapeBuckets | None = None,
) -> Estimate:
    """:func:`estimate_of` by keywords: TTFT, TPOT, end-to-end latency, throughput,
    utilisations and memory of ``batch`` requests of ``prompt`` + ``output`` tokens on one
    replica.

    Parameters
    ----------
    model, hardware, system, tp, pp, ep, fmt, kv_fmt, block_tokens, dp_attention, micro_batches :
        The replica, as :class:`~tlm.inference.layout.ReplicaSpec` (``dp_attention``: no draft
        model, ``batch`` a multiple of the ``ep / tp`` groups).
    batch, prompt, output : int
        As :class:`RequestBatch`.
    draft_model : Model or str, optional
        Speculative decoding's draft model (none: plain decoding); with ``draft_tokens``,
        ``acceptance`` and ``draft_fused`` as :class:`Speculation`.
    step_fixed_s, collective_fixed_s, collective_bandwidth_factor, request_fixed_s : float
        The named fixed costs, as :meth:`~tlm.inference.layout.FixedCosts.given` (None: the
        data file's).
    check_memory : bool
        Raise :class:`~tlm.inference.InferenceDoesNotFit` when it does not fit.
    buckets : ShapeBuckets, optional
        As :func:`estimate_of`.

    Raises
    ------
    InferenceInputError
        Naming the argument, its value and what is allowed.
    InferenceDoesNotFit
        Naming the part (weights, activations, KV cache) and the shortfall in GiB.
    """
    requests = RequestBatch(batch, prompt, output)
    hw = as_hardware(hardware)
    speculation = None
    if draft_model is not None:
        speculation = Speculation(draft_model, draft_tokens, acceptance, draft_fused)
    elif draft_fused is not False:
        raise InferenceInputError("draft_fused", draft_fused, "False without a draft_model")
    spec = ReplicaSpec(
        model,
        hw,
        system,
        tp=tp,
        pp=pp,
        ep=ep,
        dp_attention=dp_attention,
        micro_batches=micro_batches,
        fmt=fmt,
        kv_fmt=kv_fmt,
        block_tokens=block_tokens,
        max_tokens=int(batch * prompt),
    )
    fixed = FixedCosts.given(
        hw.name,
        step_fixed_s=step_fixed_s,
        collective_fixed_s=collective_fixed_s,
        collective_bandwidth_factor=collective_bandwidth_factor,
        request_fixed_s=request_fixed_s,
    )
    return estimate_of(
        spec, fixed, requests, speculation, check_memory=check_memory, buckets=buckets
    )


def estimate_of(
    spec: ReplicaSpec,
    fixed: FixedCosts,
    requests: RequestBatch,
    speculation: Speculation | None = None,
    *,
    check_memory: bool = True,
    buckets: ShapeBuckets | None = None,
) -> Estimate:
    """TTFT, TPOT, end-to-end latency, throughput, utilisations and memory of ``requests`` on
    the replica ``spec`` under ``fixed`` costs, with ``speculation`` or plain decoding.

    The replica's largest iteration is the batch's prompts (``spec.max_tokens`` is set to
    ``batch x`` the prompt's bucket), and a draft's weights and KV share its chips.

    Parameters
    ----------
    spec : ReplicaSpec
        The replica: model, hardware, system, layout, formats, KV block size.
    fixed : FixedCosts
        The named fixed costs (:meth:`FixedCosts.given`).
    requests : RequestBatch
        ``batch`` requests of ``prompt`` + ``output`` tokens.
    speculation : Speculation, optional
        Speculative decoding's draft (none: plain decoding).
    check_memory : bool
        Raise :class:`~tlm.inference.InferenceDoesNotFit` when it does not fit.
    buckets : ShapeBuckets, optional
        The deployment's compiled lengths (:mod:`tlm.inference.buckets`); None: the hardware's
        serving stack's default for these requests (``shape_buckets`` of its fixed costs).

    Returns
    -------
    Estimate

    Raises
    ------
    InferenceInputError
        Naming the field, its value and what is allowed (a draft with ``dp_attention``, a
        batch that is no multiple of the attention groups).
    InferenceDoesNotFit
        Naming the part (weights, activations, KV cache) and the shortfall in GiB.

    Examples
    --------
    >>> from tlm.inference import FixedCosts, ReplicaSpec
    >>> spec = ReplicaSpec("llama3.1-405b", "trn2", "server", tp=16)
    >>> r = estimate_of(spec, FixedCosts.given("trn2"), RequestBatch(1, 2048, 256))
    >>> r == estimate("llama3.1-405b", "trn2", "server", tp=16, prompt=2048, output=256)
    True
    """
    batch, prompt, output = requests.batch, requests.prompt, requests.output
    hw, fmt = spec.hardware, spec.fmt
    if buckets is None:
        buckets = ShapeBuckets.for_stack(stack_buckets(hw.name)[0], prompt, output)
    buckets.check(prompt, output)
    padded = int(buckets.padded_context(prompt))
    draft = None
    sized = {"max_tokens": int(batch * padded)}
    if speculation is not None:
        if spec.dp_attention:
            raise InferenceInputError(
                "draft_model",
                speculation.draft_model.name,
                "None with dp_attention (speculative decoding with data-parallel attention is "
                "not modelled)",
            )
        draft = _draft_engine(spec, fixed, speculation)
        sized["extra_weights_bytes"] = draft.memory.weights_bytes
        sized["extra_kv_per_token_bytes"] = draft.memory.kv_per_token_bytes
    if any(getattr(spec, k) != v for k, v in sized.items()):
        spec = replace(spec, **sized)
    engine = Engine.of(spec, fixed)
    if batch % engine.dp:
        raise InferenceInputError(
            "batch",
            batch,
            f"a multiple of the {engine.dp} attention groups (ep / tp) with dp_attention",
        )
    context = prompt + output
    mem = engine.memory
    if check_memory:
        parts = mem.check(batch, context, batch * padded)
    else:
        parts = mem.parts(batch, context, batch * padded)
    total = sum(parts.values())
    memory = {**parts, "total_bytes": total, "hbm_bytes": mem.hbm_bytes}
    memory["fits"] = bool(total <= mem.hbm_bytes)
    k, a = (4, 0.7) if speculation is None else (speculation.draft_tokens, speculation.acceptance)
    fused = speculation is not None and speculation.draft_fused
    r = request_times(engine, batch, prompt, output, draft, k, a, fused, buckets)
    chips = engine.chips
    peak = engine.costs.peak_flops(fmt)
    bw = engine.costs.hbm_bandwidth_Bps

    def phase(d) -> Phase:
        v = {k: float(np.ravel(x)[0]) for k, x in d.items()}
        t = v["time_s"]
        return Phase(
            **v,
            mfu_fraction=v["flop"] / (t * chips * peak) if t > 0 else 0.0,
            hbm_utilisation_fraction=v["hbm_bytes"] / (t * chips * bw) if t > 0 else 0.0,
        )

    pre, dec = phase(r["prefill"]), phase(r["decode"])
    ttft = r["request_s"] + pre.time_s
    tpot = dec.time_s / (output - 1) if output > 1 else 0.0
    e2e = ttft + dec.time_s
    rate = batch * output / (pre.time_s + dec.time_s)  # the replica's time, not the stack's
    return Estimate(
        ttft_s=ttft,
        tpot_s=tpot,
        e2e_s=e2e,
        tokens_per_s=rate,
        tokens_per_s_per_chip=rate / chips,
        tokens_per_s_per_server=rate / chips * hw.server_chips,
        decode_tokens_per_s=batch / tpot if tpot > 0 else 0.0,
        prefill=pre,
        decode=dec,
        request_s=r["request_s"],
        memory=memory,
        max_batch=mem.max_batch(context, padded),
        chips=chips,
        tokens_per_verify=tokens_per_verify(k, a) if draft is not None else 1.0,
        micro_batches=engine.micro_batches,
        attention_groups=engine.dp,
        buckets=buckets,
        engine=engine,
    )
