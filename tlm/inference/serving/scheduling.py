"""Scheduling: what a replica's iteration runs, and when a queued request may start.

:class:`Scheduler` holds the settings, a frozen value checked in its constructor: ``max_batch``
(sequences running at once on a replica), ``token_budget`` (tokens an iteration processes, at
least ``max_batch`` so every running sequence decodes each iteration, as vLLM requires
``max_num_batched_tokens >= max_num_seqs``), the prefill policy and the admission rule, each a
small class registered by name:

- prefill policies (:data:`PREFILL_POLICIES`, names :data:`PREFILLS`): :class:`Chunked`
  (``"chunked"``) and :class:`Separate` (``"separate"``). ``plan(replica)`` chooses an
  iteration's work and takes its KV blocks; it returns the engine's arguments ``(tokens,
  sequences, kv_tokens, pairs)``, the decodes, the sequences that took a prefill chunk, those
  admitted to decode with their KV moved in, and the blocks in use - or None when there is
  nothing to run. Both build an iteration from the replica's decode step
  (:meth:`~tlm.inference.serving.replica.Replica.decode_all`) and one chunk step,
  :func:`take_chunk`.
- admission rules (:data:`ADMISSION_RULES`, names :data:`ADMISSIONS`): :class:`Greedy`
  (``"greedy"``) and :class:`Reserve` (``"reserve"``): whether a queued request may start
  (``admit``), what it gives back when it leaves (``release``), the KV a request holds at most
  (``kv_tokens``, for rejection at arrival) and whether a running sequence may be preempted
  (``preempts``).

Examples
--------
>>> s = Scheduler(max_batch=8, token_budget=256, prefill="separate", admission="reserve")
>>> s.prefill_policy().name, s.admission_rule().name, s.admission_rule().kv_tokens(100, 10)
('separate', 'reserve', 110)
>>> try:
...     Scheduler(max_batch=64, token_budget=32)
... except InferenceInputError as error:
...     print(error.field, error.value, error.allowed)
token_budget 32 >= max_batch=64
"""

from __future__ import annotations

import abc
from bisect import bisect_left
from dataclasses import dataclass
from typing import ClassVar

from ..buckets import ShapeBuckets
from ..errors import InferenceInputError
from .checks import Registry, check_int

#: No length buckets.
NO_BUCKETS = ShapeBuckets()

__all__ = [
    "ADMISSIONS",
    "ADMISSION_RULES",
    "PREFILLS",
    "PREFILL_POLICIES",
    "Admission",
    "Chunked",
    "Greedy",
    "PrefillPolicy",
    "Reserve",
    "Scheduler",
    "Separate",
    "take_chunk",
]

#: The prefill policies by name.
PREFILL_POLICIES = Registry("prefill")
#: The admission rules by name.
ADMISSION_RULES = Registry("admission")


def take_chunk(r, seq, c: int) -> tuple[int, int, int]:
    """The chunk step: ``seq`` takes ``c`` tokens of its prefill in this iteration on replica
    ``r`` - the blocks its KV grows into - and the engine encodes ``t`` tokens (``c``, or with
    context buckets up to the bucket of ``ctx + c``), reading ``ctx + t`` keys and ``t ctx +
    t (t + 1) / 2`` query-key pairs (causal). Returns those three."""
    s = seq.ctx
    grow = -(-(s + c) // r.B) - seq.blocks
    r.used += grow
    seq.blocks += grow
    seq.chunk = c
    t = pad(r.buckets.context, s + c) - s if r.buckets.context else c
    return t, s + t, t * s + t * (t + 1) // 2


def pad(buckets: tuple, n: int) -> int:
    """``n`` padded to the smallest of ``buckets`` that holds it (``n`` past the largest: a
    recomputed sequence beyond what the buckets were made for runs unpadded)."""
    i = bisect_left(buckets, n)
    return buckets[i] if i < len(buckets) else n


def _fits(r, seq, c: int) -> bool:
    """Whether the free blocks of ``r`` hold ``c`` more tokens of ``seq``'s KV."""
    return -(-(seq.ctx + c) // r.B) - seq.blocks <= r.total - r.used


class _Iteration:
    """An iteration being planned on replica ``r``: it starts with every decoding sequence,
    one token each (:meth:`~tlm.inference.serving.replica.Replica.decode_all`, preempting for
    their blocks), out of ``budget`` tokens; :meth:`chunk` adds a prefill chunk and
    :meth:`join` a sequence whose KV moved in. ``args`` are the engine's arguments."""

    __slots__ = (
        "r",
        "decodes",
        "tokens",
        "sequences",
        "kv",
        "longest",
        "readers",
        "padding",
        "prefill_kv",
        "prefill_pairs",
        "budget",
        "chunked",
        "admitted",
    )

    def __init__(self, r, budget: int):
        n, kv = r.decode_all()
        self.r = r
        self.decodes = self.tokens = self.sequences = n
        self.kv = kv  # the decodes' keys, each its own (and pairs: one query each)
        self.longest = r.longest_decode() if r.buckets.token and n else 0
        self.readers = n  # sequences reading their KV for one token: decodes and joined
        self.padding = 0  # tokens the chunks' buckets add
        self.prefill_kv = self.prefill_pairs = 0
        self.budget = budget - n
        self.chunked: list = []
        self.admitted: list = []

    def chunk(self, seq, c: int) -> None:
        """``seq`` takes ``c`` tokens of its prefill (:func:`take_chunk`)."""
        t, k, p = take_chunk(self.r, seq, c)
        self.padding += t - c
        self.tokens += c
        self.sequences += 1
        self.prefill_kv += k
        self.prefill_pairs += p
        self.budget -= c
        self.chunked.append(seq)

    def join(self, seq) -> bool:
        """``seq``, its KV moved in, decodes its next token now if its block is free."""
        if not self.r.admit_transferred(seq):
            return False
        self.readers += 1
        self.tokens += 1
        self.sequences += 1
        self.kv += seq.ctx + 1
        if self.r.buckets.token:
            self.longest = max(self.longest, seq.ctx + 1)
        self.budget -= 1
        self.admitted.append(seq)
        return True

    @property
    def args(self) -> tuple[int, int, int, int]:
        """The engine's arguments: with token buckets every decode reads the bucket of the
        batch's longest (one compiled graph for the batch), with context buckets each chunk
        encodes its bucket's tokens (:func:`take_chunk`)."""
        kv = self.kv
        if self.longest:
            kv = self.readers * pad(self.r.buckets.token, self.longest)
        tokens = self.tokens + self.padding
        return tokens, self.sequences, kv + self.prefill_kv, kv + self.prefill_pairs


# ------------------------------------------------------------------ admission rules


class Admission(abc.ABC):
    """When a queued request may start on a replica."""

    name: ClassVar[str]
    #: Whether a running sequence may be preempted (recompute) when blocks run out.
    preempts: ClassVar[bool]

    @abc.abstractmethod
    def kv_tokens(self, prompt: int, output: int) -> int:
        """Tokens of KV a request of these lengths holds at most (one needing more blocks
        than a replica has is rejected at arrival)."""

    @abc.abstractmethod
    def admit(self, r, seq) -> bool:
        """Whether replica ``r`` may start the queue's head ``seq`` (its blocks for this
        iteration being free); if so, what it holds for it is held."""

    @abc.abstractmethod
    def release(self, r, seq) -> None:
        """``seq`` leaves replica ``r``: give back what :meth:`admit` held."""


@ADMISSION_RULES.register("greedy")
class Greedy(Admission):
    """As soon as the blocks of its first chunk are free (vLLM); when blocks run out, the
    latest-arrived running sequence is preempted by recompute. A request holds at most
    ``prompt + output - 1`` tokens of KV (the last token is never fed back)."""

    preempts = True

    def kv_tokens(self, prompt: int, output: int) -> int:
        return prompt + output - 1

    def admit(self, r, seq) -> bool:
        return True

    def release(self, r, seq) -> None:
        pass  # nothing held beyond the blocks


@ADMISSION_RULES.register("reserve")
class Reserve(Admission):
    """Only when the blocks of its whole KV fit beside those every running sequence has
    reserved for its own: TensorRT-LLM's ``GUARANTEED_NO_EVICT`` ("guarantee that a started
    request is never paused"), the reservation ``ceil((prompt + output) / block_tokens)``
    (``KVCacheManager::getRemainingBlocksToCompletion``); on a prefill pool's replica the
    prompt's. Blocks are still taken as the KV grows, but they are always there: no sequence is
    ever preempted. The replica keeps the reserved blocks in ``committed``, a sequence its own
    in ``reserved``."""

    preempts = False

    def kv_tokens(self, prompt: int, output: int) -> int:
        return prompt + output

    def admit(self, r, seq) -> bool:
        tokens = seq.prompt if r.prefill_only else seq.prompt + seq.output
        need = -(-tokens // r.B)
        if r.committed + need > r.total:
            return False
        r.committed += need
        seq.reserved = need
        return True

    def release(self, r, seq) -> None:
        r.committed -= seq.reserved
        seq.reserved = 0


# ------------------------------------------------------------------ prefill policies


class PrefillPolicy(abc.ABC):
    """How prefills share a replica's iterations: :meth:`plan` chooses an iteration."""

    name: ClassVar[str]

    def __init__(self, max_batch: int, token_budget: int, buckets: ShapeBuckets = NO_BUCKETS):
        self.max_batch = max_batch
        self.token_budget = token_budget
        self.buckets = buckets

    @abc.abstractmethod
    def plan(self, r):
        """The next iteration of replica ``r``, its blocks taken (preempting if it must):
        ``((tokens, sequences, kv_tokens, pairs), decodes, chunked, admitted, used)``, or
        None when there is nothing to run."""


@PREFILL_POLICIES.register("chunked")
class Chunked(PrefillPolicy):
    """Continuous batching (Orca, OSDI 2022) with chunked prefill and stall-free scheduling
    (Sarathi-Serve, OSDI 2024; vLLM V1's scheduler): every decoding sequence takes one token
    of the budget; then sequences part way through a prefill take chunks, earliest arrival
    first; then queued requests are admitted first come first served while fewer than
    ``max_batch`` run and budget and blocks remain (a head that finds no block stops
    admission: no overtaking). A sequence whose KV moved in from a prefill pool is admitted
    in its turn to decode at once."""

    def plan(self, r):
        B = r.B
        admission = r.admission
        waiting = r.waiting
        while True:
            r.kv_mark()
            # 1. decodes: every decoding sequence, one token each; preempt for their blocks
            it = _Iteration(r, self.token_budget)
            # 2. sequences part way through a prefill, in arrival order, as room allows
            for seq in r.prefilling:
                if it.budget == 0:
                    break
                room = seq.blocks * B - seq.ctx + (r.total - r.used) * B
                c = min(seq.target - seq.ctx, it.budget, room)
                if c > 0:
                    it.chunk(seq, c)
            # 3. admissions, first come first served
            while waiting and it.budget > 0 and len(r.running) < self.max_batch:
                seq = waiting[0]
                if seq.ctx == seq.target:  # KV transferred in: decode now
                    if not it.join(seq):
                        break
                    continue
                c = min(seq.target - seq.ctx, it.budget)
                if not _fits(r, seq, c) or not admission.admit(r, seq):
                    break
                r.start(seq)
                it.chunk(seq, c)
            if it.tokens:
                return it.args, it.decodes, it.chunked, it.admitted, r.used
            if not r.running:
                return None  # idle, or waiting for blocks a KV transfer still holds
            # only prefills part way, with no free block: make room, plan again
            r.preempt_latest()


@PREFILL_POLICIES.register("separate")
class Separate(PrefillPolicy):
    """An iteration is one sequence's prefill chunk alone (up to ``token_budget`` tokens) or
    the decodes alone. A prefill under way goes on first; else the queue's head is admitted
    and prefilled (while fewer than ``max_batch`` run); only when no prefill can run do the
    decodes step (and sequences whose KV moved in join them). The Neuron stack's scheduling:
    vLLM Neuron's ``NeuronScheduler`` (one prefill an iteration, the decodes hidden while it
    runs; aws-neuron-sdk ``vllm-neuron/docs/design/vllm/neuron-scheduler.md``) and NxD
    Inference under vLLM V0."""

    def plan(self, r):
        budget = self.token_budget
        while True:
            r.kv_mark()
            seq = r.prefilling[0] if r.prefilling else None
            if seq is not None:
                room = seq.blocks * r.B - seq.ctx + (r.total - r.used) * r.B
                c = min(seq.target - seq.ctx, budget, room)
            elif (
                r.waiting
                and len(r.running) < self.max_batch
                and r.waiting[0].ctx < r.waiting[0].target
            ):
                seq = r.waiting[0]
                c = min(seq.target - seq.ctx, budget)
                if not _fits(r, seq, c) or not r.admission.admit(r, seq):
                    c = 0
                else:
                    r.start(seq)
            else:
                c = 0
            if c > 0:
                t, k, p = take_chunk(r, seq, c)
                return (t, 1, k, p), 0, [seq], [], r.used
            # no prefill can run: the decodes (and KV moved in)
            it = self._decodes(r, budget)
            if it.tokens:
                return it.args, r.n_dec, [], it.admitted, r.used
            if not r.running:
                return None  # idle, or waiting for blocks a KV transfer still holds
            r.preempt_latest()

    def _decodes(self, r, budget) -> _Iteration:
        """Every decoding sequence, one token each (preempting for their blocks), then the
        queue's head while its KV is already here."""
        it = _Iteration(r, budget)
        while r.waiting and it.budget > 0 and len(r.running) < self.max_batch:
            seq = r.waiting[0]
            if seq.ctx != seq.target or not it.join(seq):
                break
        return it


#: The prefill policies' names.
PREFILLS = PREFILL_POLICIES.names
#: The admission rules' names.
ADMISSIONS = ADMISSION_RULES.names


# ------------------------------------------------------------------ the settings


@dataclass(frozen=True)
class Scheduler:
    """A replica's scheduling settings.

    Parameters
    ----------
    max_batch : int
        Sequences running at once on a replica, >= 1.
    token_budget : int
        Tokens an iteration processes (decodes and prefill chunks), >= ``max_batch``.
    prefill : str
        One of :data:`PREFILLS`: ``"chunked"`` (prefill chunks beside the decodes) or
        ``"separate"`` (one prefill chunk alone, or the decodes alone).
    admission : str
        One of :data:`ADMISSIONS`: ``"greedy"`` (vLLM: start when the first chunk's blocks
        are free, preempt the latest when they run out) or ``"reserve"`` (TensorRT-LLM's
        ``GUARANTEED_NO_EVICT``: start when the whole KV's blocks can be reserved, never
        preempt).
    context_buckets, token_buckets : str or tuple of int
        The compiled lengths of prompts and of sequences (:mod:`tlm.inference.buckets`):
        ``"none"``, ``"nxd"`` (NxD Inference's generated buckets for the load's longest
        prompt, or sequence) or the lengths. A chunk encodes its context bucket's tokens; the
        decodes of an iteration read the token bucket of its longest sequence each (one
        compiled graph for the batch).
    """

    max_batch: int = 128
    token_budget: int = 2048
    prefill: str = "chunked"
    admission: str = "greedy"
    context_buckets: str | tuple = "none"
    token_buckets: str | tuple = "none"

    def __post_init__(self):
        PREFILL_POLICIES.named(self.prefill)
        ADMISSION_RULES.named(self.admission)
        checked = self.buckets_for()  # the specs checked; lengths as tuples
        for phase in ("context", "token"):
            if not isinstance(getattr(self, f"{phase}_buckets"), str):
                object.__setattr__(self, f"{phase}_buckets", getattr(checked, phase))
        max_batch = check_int("max_batch", self.max_batch, 1)
        token_budget = check_int("token_budget", self.token_budget, 1)
        if token_budget < max_batch:
            raise InferenceInputError(
                "token_budget",
                token_budget,
                f">= max_batch={max_batch}",
                f"token_budget must be >= max_batch={max_batch} (every running sequence "
                f"decodes each iteration), not {token_budget}",
            )
        object.__setattr__(self, "max_batch", max_batch)
        object.__setattr__(self, "token_budget", token_budget)

    def prefill_policy(self, requests=None) -> PrefillPolicy:
        """The prefill policy these settings name, padding to the buckets for ``requests``
        (:meth:`buckets_for`)."""
        policy = PREFILL_POLICIES.named(self.prefill)
        return policy(self.max_batch, self.token_budget, self.buckets_for(requests))

    def buckets_for(self, requests=None) -> ShapeBuckets:
        """The compiled lengths for ``requests`` (a :class:`~.requests.Requests`): the given
        lengths, or NxD's generated ones for their longest prompt and sequence."""
        prompt = sequence = 1
        if requests is not None and len(requests.prompt):
            prompt = int(requests.prompt.max())
            sequence = int((requests.prompt + requests.output).max())
        b = ShapeBuckets.resolved(self.context_buckets, self.token_buckets, prompt, sequence)
        if requests is not None:  # given lengths hold every request
            b.check(prompt, sequence - prompt)
        return b

    def admission_rule(self) -> Admission:
        """The admission rule these settings name."""
        return ADMISSION_RULES.named(self.admission)()
