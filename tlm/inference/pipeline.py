"""Pipeline parallelism with micro-batches in flight: an iteration's sequences split into ``m``
micro-batches that follow each other through the ``pp`` stages (vLLM's virtual engines, NxD
Inference's pipelined micro-batches).

For a micro-batch of ``ceil(tokens / m')`` tokens and ``ceil(sequences / m')`` sequences (``m'
= min(m, sequences)``) the engine gives its latency ``L`` through the stages and the busiest
stage's time ``t``; an iteration then takes ``max(L, m' t)`` in the steady state (decode) and
``L + (m' - 1) t`` from an empty pipeline (a prefill). With ``m' = 1`` both are the engine's
own time. :func:`step` and :func:`iteration_s` are what :class:`~tlm.inference.step.Engine`
calls when its ``micro_batches`` exceed 1. The rule, its sources and what is assumed:
docs/inference.md, "Pipeline micro-batches".

Examples
--------
>>> from tlm.inference import Engine
>>> one = Engine.build("llama3-8b", "trn2", "server", tp=4, pp=4, micro_batches=1)
>>> four = Engine.build("llama3-8b", "trn2", "server", tp=4, pp=4)     # pp micro-batches
>>> four.micro_batches
4
>>> t1 = one.iteration_s(16, 16, 16 * 1024, 16 * 1024)
>>> t4 = four.iteration_s(64, 64, 64 * 1024, 64 * 1024)     # 4 micro-batches of 16
>>> t4 == t1                                   # a token's latency unchanged, 4x the tokens
True
"""

from __future__ import annotations

import numpy as np

from .iteration import Iteration, checked_iteration, scalar_iteration

__all__ = ["step", "iteration_s"]


def _ends(e, tokens: np.ndarray, sequences: np.ndarray):
    """For micro-batches of ``tokens`` and ``sequences`` (float arrays) on engine ``e``: the
    first stage's extra (embedding, its all-reduce), the last stage's (the sequence part) and
    the ``pp - 1`` sends, each with its collective calls' fixed cost, seconds."""
    tp, call = e.tp, e.collective_fixed_s
    group = tokens / e.dp  # the tokens of one attention group (the engine's own view)
    size = group * e.model.hidden * e.ab
    hidden = size / e.collective_bandwidth_factor
    ones, nb = np.ones_like(tokens, dtype=np.int64), int(e.ab)
    first = np.asarray(e.costs.memory_s(size), dtype=float)
    sends = e.network.p2p_s(hidden / tp, e.stage_chips * ones, e.pp * ones) + call
    if tp > 1:
        ar = e.network.collective_s("all_reduce", tp * ones, ones, hidden, dtype_bytes=nb)
        ag = e.network.collective_s("all_gather", tp * ones, ones, hidden, dtype_bytes=nb)
        first = first + ar + call
        sends = sends + ag + call
    seq = e._by_unique(e._sequence_part, sequences)
    last = seq["compute"] + seq["memory"] + seq["communication"] + (call if tp > 1 else 0.0)
    return first, last, (e.pp - 1) * sends


def _pipelined(e, single, tokens, sequences, m, from_empty):
    """The iteration's time from a micro-batch's latency ``single`` (arrays)."""
    first, last, sends = _ends(e, tokens, sequences)
    body = single - e.step_fixed_s - sends - first - last
    stage = body / e.pp + np.maximum(first, last)
    return np.where(from_empty, single + (m - 1) * stage, np.maximum(single, m * stage))


def step(e, tokens, sequences, kv_tokens, pairs, from_empty=False) -> Iteration:
    """Iterations of engine ``e`` split into its micro-batches (:meth:`Engine.step`'s
    arguments and figures): the steady-state time, or with ``from_empty`` (a bool or an
    array broadcast with them) the time from an empty pipeline."""
    T, S, KV, P, empty = np.broadcast_arrays(
        *checked_iteration(tokens, sequences, kv_tokens, pairs),
        np.asarray(from_empty, dtype=bool),
    )
    m = np.minimum(float(e.micro_batches), S)
    Tm, Sm = np.ceil(T / m), np.ceil(S / m)
    one = e._batch_step(Tm, Sm, KV / m, P / m)
    single = np.asarray(one.time_s, dtype=float)
    time = _pipelined(e, single, Tm, Sm, m, empty)
    scale = time / single

    def out(a):
        a = np.asarray(a, dtype=float)
        return a[()] if a.ndim == 0 else a

    return Iteration(
        time_s=out(time),
        compute_s=out(one.compute_s * scale),
        memory_s=out(one.memory_s * scale),
        communication_s=out(one.communication_s * scale),
        fixed_s=out(one.fixed_s * scale),
        flop=out(e.model_flop(T, S, P)),
        hbm_bytes=out(one.hbm_bytes * m),
    )


def iteration_s(e, tokens, sequences, kv_tokens, pairs):
    """Steady-state seconds of iterations of engine ``e`` (:func:`step`'s ``time_s``);
    integer scalars take the engine's fast path for the micro-batch and a memo of the
    stages' ends."""
    if not scalar_iteration(tokens, sequences, kv_tokens, pairs):
        return step(e, tokens, sequences, kv_tokens, pairs).time_s
    m = min(e.micro_batches, int(sequences))
    Tm, Sm = -(-int(tokens) // m), -(-int(sequences) // m)
    single = e._batch_iteration_s(Tm, Sm, kv_tokens / m, pairs / m)
    if m == 1:
        return single
    ends = e._ends_memo.get((Tm, Sm))
    if ends is None:
        if len(e._ends_memo) > 65536:
            e._ends_memo.clear()
        ends = _ends(e, np.array([float(Tm)]), np.array([float(Sm)]))
        ends = e._ends_memo[(Tm, Sm)] = tuple(float(np.ravel(x)[0]) for x in ends)
    first, last, sends = ends
    body = single - e.step_fixed_s - sends - first - last
    stage = body / e.pp + max(first, last)
    return max(single, m * stage)
