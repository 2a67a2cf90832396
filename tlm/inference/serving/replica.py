"""A model replica: its queue, its running sequences, its paged KV cache and the SimPy process
that runs its iterations.

**Paged KV** (vLLM, SOSP 2023): ``kv_capacity_tokens // block_tokens`` blocks; a sequence
holding ``c`` tokens of KV holds ``ceil(c / block_tokens)`` blocks and takes a new one as it
grows. **Preemption by recompute** (vLLM's default; only where the admission rule allows it):
the latest-arrived running sequence gives back its blocks and returns to the head of the
queue, to prefill its prompt and the tokens it had generated again.

**Aggregates.** Decoding sequences are not visited one by one: after ``step`` decode steps (the
iterations that ran the decodes) a decoding sequence holds ``step + base`` tokens of KV, so
``n_dec`` (how many), ``sum_base`` and ``phase[b]`` (how many have ``base % block_tokens ==
b``: those taking a new block at the steps with ``-step % block_tokens == b``) give an
iteration's keys read and blocks wanted, and a heap holds the step each one finishes at. An
iteration in which nobody joins, leaves or is preempted costs a few scalar operations, one
engine call and one SimPy event, whatever the batch.

The replica runs the iterations its prefill policy plans (``policy.plan(replica)``,
:mod:`~tlm.inference.serving.scheduling`), starts requests by its admission rule, and reports
to its ledger (the simulation): ``first_token(seq)``, ``finish(seq)``, ``preempted[rid]``. On a
prefill pool's replica a sequence whose prefill ends goes to ``hand_off(replica, seq)``.
"""

from __future__ import annotations

import heapq
import math
from collections import deque

__all__ = ["Replica", "Seq"]


class Seq:
    """One request's sequence. ``ctx``: its tokens in the KV cache; ``target``: the KV length
    at which its current prefill ends (prompt + tokens generated); ``generated``: tokens
    emitted; ``blocks``: KV blocks held; ``chunk``: prefill tokens in the running iteration;
    ``reserved``: blocks reserved for its whole KV (admission ``"reserve"``). While decoding,
    ``ctx`` and ``generated`` are implicit (``step + base``; see :class:`Replica`)."""

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
        "reserved",
    )

    def __init__(self, rid: int, prompt: int, output: int):
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
        self.reserved = 0


class Replica:
    """One model replica (see the module).

    Parameters
    ----------
    env : simpy.Environment
    index : int
        The replica's number in its fleet.
    engine
        The model replica's cost (``iteration_s``, ``block_tokens``, ``kv_capacity_tokens``).
    policy : PrefillPolicy
        Plans each iteration.
    admission : Admission
        When a queued request may start.
    ledger
        The simulation: ``env``, ``first_token(seq)``, ``finish(seq)``, ``preempted``.
    timeline : list, optional
        Where to append a row per iteration.
    hand_off : callable, optional
        ``hand_off(replica, seq)`` when ``seq``'s prefill ends (a prefill pool's replica).
    """

    def __init__(self, env, index, engine, policy, admission, ledger, timeline=None, hand_off=None):
        self.env = env
        self.index = index
        self.policy = policy
        self.admission = admission
        self.ledger = ledger
        self.timeline = timeline
        self.hand_off = hand_off
        self.prefill_only = hand_off is not None
        self.cost = engine.iteration_s
        self.B = int(engine.block_tokens)
        self.total = int(engine.kv_capacity_tokens) // self.B
        self.used = 0
        self.committed = 0  # blocks reserved by the running sequences (admission "reserve")
        self.waiting: deque = deque()
        self.running: set = set()
        self.prefilling: list = []  # running, part way through a prefill, in arrival order
        self.decoding: set = set()
        self.n_dec = 0
        self.sum_base = 0
        self.phase = [0] * self.B
        self.heap: list = []  # (finish step, rid, version, seq)
        self.buckets = policy.buckets
        self.longest: list = []  # (-base, rid, version, seq), with token buckets only
        self.step = 0
        self.iterations = 0
        self.busy_s = 0.0
        self.batch_area = 0.0
        self.kv_area = 0.0
        self.kv_t = 0.0
        self.preemptions = 0
        self._wake = None
        self.process = env.process(self._run())

    # -- the queue and the blocks
    def load(self) -> int:
        """Requests queued or running."""
        return len(self.waiting) + len(self.running)

    def wake(self) -> None:
        if self._wake is not None and not self._wake.triggered:
            self._wake.succeed()

    def kv_mark(self) -> None:
        """Add the blocks in use since the last mark to the occupancy's time integral."""
        now = self.env.now
        self.kv_area += self.used * (now - self.kv_t)
        self.kv_t = now

    def enqueue(self, seq: Seq) -> None:
        self.waiting.append(seq)
        self.wake()

    def start(self, seq: Seq) -> None:
        """The queue's head ``seq`` starts its prefill (its blocks taken by the chunk step)."""
        self.waiting.popleft()
        self.running.add(seq)
        self.prefilling.append(seq)

    def decode_all(self) -> tuple[int, int]:
        """Blocks for every decoding sequence's next token (preempting the latest arrived
        until they fit): the decodes' sequences and the keys they read (their contexts + 1)."""
        need = self.phase[-self.step % self.B] if self.n_dec else 0
        while need > self.total - self.used:
            self.preempt_latest()
            need = self.phase[-self.step % self.B] if self.n_dec else 0
        self.used += need
        n = self.n_dec
        return n, n * self.step + self.sum_base + n

    def admit_transferred(self, seq: Seq) -> bool:
        """Start the queue's head ``seq``, whose KV is already here (moved in from a prefill
        pool), to decode now, if the blocks for its next token are free."""
        grow = -(-(seq.ctx + 1) // self.B)
        if grow > self.total - self.used or not self.admission.admit(self, seq):
            return False
        self.waiting.popleft()
        self.used += grow
        seq.blocks = grow
        self.running.add(seq)
        return True

    def preempt_latest(self) -> Seq:
        """Preempt the latest-arrived running sequence (recompute); return it."""
        if not self.admission.preempts:  # reserved sequences always have their blocks
            raise RuntimeError(
                f"replica {self.index} would preempt under admission "
                f"{self.admission.name!r} (a scheduler bug: {self.committed} blocks reserved, "
                f"{self.used} used of {self.total})"
            )
        seq = max(self.running, key=lambda s: s.rid)
        self.kv_mark()
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
        self.ledger.preempted[seq.rid] += 1
        return seq

    # -- the decoding aggregates
    def _join_decode(self, seq: Seq) -> None:
        """``seq`` (ctx tokens of KV, a token pending) decodes from the next iteration on."""
        seq.base = base = seq.ctx - self.step
        self.decoding.add(seq)
        self.n_dec += 1
        self.sum_base += base
        self.phase[base % self.B] += 1
        finish = seq.prompt + seq.output - 1 - base
        heapq.heappush(self.heap, (finish, seq.rid, seq.version, seq))
        if self.buckets.token:
            heapq.heappush(self.longest, (-base, seq.rid, seq.version, seq))

    def longest_decode(self) -> int:
        """The keys the longest decoding sequence reads this step (its context + 1)."""
        heap = self.longest
        while heap[0][2] != heap[0][3].version:  # left the decodes since
            heapq.heappop(heap)
        return self.step - heap[0][0] + 1

    def _leave_decode(self, seq: Seq) -> None:
        """Take ``seq`` out of the aggregates; set its explicit ctx and generated."""
        self.decoding.discard(seq)
        self.n_dec -= 1
        self.sum_base -= seq.base
        self.phase[seq.base % self.B] -= 1
        seq.version += 1  # its heap entry is now stale
        seq.ctx = self.step + seq.base
        seq.generated = seq.ctx - seq.prompt + 1

    # -- the iterations
    def _run(self):
        env = self.env
        plan = self.policy.plan
        while True:
            planned = plan(self)
            if planned is None:
                self._wake = env.event()
                yield self._wake
                self._wake = None
                continue
            args, decodes, chunked, admitted, used = planned
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
            if self.timeline is not None:
                self.timeline.append((self.index, start, dt, *args, decodes, used))
            self._apply(chunked, admitted, decodes)

    def _apply(self, chunked, admitted, decodes) -> None:
        """The iteration ended: the decodes' step, finished sequences, chunks' KV."""
        if decodes:  # ``step`` counts the decode steps
            self.step += 1
        self.kv_mark()
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
            if self.hand_off is not None:
                self.running.discard(seq)
                self.hand_off(self, seq)
                continue
            if seq.generated == 1:
                self.ledger.first_token(seq)
            if seq.generated == seq.output:
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

    def _finish(self, seq: Seq) -> None:
        self.running.discard(seq)
        self.used -= -(-seq.ctx // self.B)
        self.admission.release(self, seq)
        self.ledger.finish(seq)
