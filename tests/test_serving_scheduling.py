"""tlm.inference.serving.scheduling: the prefill policies and admission rules by hand, and a
reference scheduler written plainly (one sequence at a time, no aggregates) against the fast
one on random workloads, open and closed loop."""

import json
from collections import deque
from pathlib import Path

import numpy as np
import pytest
from serving_doubles import Linear, check_bad_argument, trace, workload

from tlm.inference import serving
from tlm.inference.serving import (
    ClosedLoop,
    Colocated,
    Poisson,
    Scheduler,
    Trace,
    simulate,
)

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off


def test_separate_prefill_runs_one_prompt_an_iteration_and_holds_the_decodes():
    """prefill="separate", two clients: the first prompt's prefill (0.11 s), then the second's
    alone (the first's decode waits), then ten decodes of two (0.012 s each): TTFTs 0.11 and
    0.22 s, both finish at 0.34 s; the first's TPOT carries the second's prefill."""
    e = Linear()
    load = ClosedLoop(concurrency=2, requests=4, workload=workload(100, 11))
    run = simulate(Colocated(e), load, Scheduler(token_budget=256, prefill="separate"))
    assert e.calls[:3] == [(100, 1, 100, 5050), (100, 1, 100, 5050), (2, 2, 202, 202)]
    np.testing.assert_allclose(run.per_request["arrival_s"], [0, 0, 0.34, 0.34], atol=1e-15)
    np.testing.assert_allclose(run.per_request["ttft_s"], [0.11, 0.22] * 2, rtol=1e-12)
    np.testing.assert_allclose(
        run.per_request["tpot_s"], [(0.34 - 0.11) / 10, 0.012] * 2, rtol=1e-12
    )
    np.testing.assert_allclose(run.per_request["e2e_s"], [0.34] * 4, rtol=1e-12)


def test_separate_prefill_chunks_a_long_prompt_alone():
    """Under "separate" a prompt longer than the budget takes several prefill iterations of
    its own while the other sequence's decode waits (NeuronScheduler's segmented prefill)."""
    e = Linear()
    trace = [(0.0, 10, 5), (0.015, 250, 2)]
    import tempfile

    path = Path(tempfile.mkdtemp()) / "t.csv"
    path.write_text("arrival_s,prompt,output\n" + "".join(f"{a},{p},{o}\n" for a, p, o in trace))
    simulate(
        Colocated(e), Trace(path), Scheduler(max_batch=8, token_budget=100, prefill="separate")
    )
    assert e.calls == [
        (10, 1, 10, 55),  # the first prompt; the second arrives during it
        (100, 1, 100, 5050),  # the second's chunks, alone
        (100, 1, 200, 100 * 100 + 5050),
        (50, 1, 250, 50 * 200 + 50 * 51 // 2),
        (2, 2, 11 + 251, 11 + 251),  # then both decode
        (1, 1, 12, 12),
        (1, 1, 13, 13),
        (1, 1, 14, 14),
    ]


def test_chunked_prefill_splits_the_prompt_by_the_budget(tmp_path):
    """A prompt of 250 under a budget of 100: chunks of 100, 100, 50, each attending to the
    keys cached before it and its own (causally)."""
    e = Linear(a=0.01, b=0.001)
    run = simulate(
        Colocated(e),
        trace(tmp_path, [(0, 250, 3)]),
        Scheduler(max_batch=4, token_budget=100),
        timeline=True,
    )
    assert e.calls == [
        (100, 1, 100, 100 * 101 // 2),
        (100, 1, 200, 100 * 100 + 100 * 101 // 2),
        (50, 1, 250, 50 * 200 + 50 * 51 // 2),
        (1, 1, 251, 251),
        (1, 1, 252, 252),
    ]
    assert run.ttft_s.mean == pytest.approx(3 * 0.01 + 0.250, rel=1e-12)
    assert run.timeline["tokens"].tolist() == [100, 100, 50, 1, 1]
    assert run.timeline["duration_s"].sum() == pytest.approx(run.e2e_s.mean, rel=1e-12)


def test_a_long_prompt_does_not_stall_decodes(tmp_path):
    """Stall-free batching: while a long prompt is chunked, the running decode still takes its
    token in every iteration, before the chunk."""
    e = Linear()
    simulate(
        Colocated(e), trace(tmp_path, [(0, 8, 6), (0.015, 300, 2)]), Scheduler(token_budget=128)
    )
    assert [c[:2] for c in e.calls[:5]] == [(8, 1), (128, 2), (128, 2), (47, 2), (2, 2)]
    # chunks 127, 127, 46 of the prompt beside one decode each
    assert e.calls[3][2] == 11 + 300


def test_reserve_admits_one_where_greedy_admits_two(tmp_path):
    """The preemption case above under admission "reserve": each request reserves
    ceil((4 + 8) / 4) = 3 of the 4 blocks, so the second waits for the first to finish
    instead of starting beside it and being preempted.

    iteration:  1   2..8        9   10..16
    request 0:  P4  d x 7(done)
    request 1:  (waits)         P4  d x 7(done)
    """
    e = Linear(a=0.01, b=0.001, capacity=16, block=4)
    run = simulate(
        Colocated(e),
        trace(tmp_path, [(0, 4, 8), (0, 4, 8)]),
        Scheduler(max_batch=2, token_budget=8, admission="reserve"),
        timeline=True,
    )
    assert run.timeline["tokens"].tolist() == [4] + [1] * 7 + [4] + [1] * 7
    assert run.timeline["sequences"].tolist() == [1] * 16
    assert run.preemptions == 0 and run.completed == 2
    # physical blocks as the KV grows (never above the 4 of the cache; 3 reserved)
    assert run.timeline["kv_blocks"].tolist() == [1, 2, 2, 2, 2, 3, 3, 3] * 2
    ends = np.cumsum(run.timeline["duration_s"])
    np.testing.assert_allclose(run.per_request["ttft_s"], [ends[0], ends[8]], rtol=1e-12)
    np.testing.assert_allclose(run.per_request["e2e_s"], [ends[7], ends[15]], rtol=1e-12)
    greedy = simulate(
        Colocated(e),
        trace(tmp_path, [(0, 4, 8), (0, 4, 8)]),
        Scheduler(max_batch=2, token_budget=8),
    )
    assert greedy.iterations == 12 and greedy.preemptions == 1  # both admitted at once
    assert greedy.per_request["ttft_s"][1] < run.per_request["ttft_s"][1]


def test_reserve_rejects_a_request_whose_whole_kv_never_fits(tmp_path):
    """16 tokens of cache in blocks of 4: prompt 10 + output 7 needs 16 tokens of KV (fits
    greedily) but reserves ceil(17 / 4) = 5 blocks, more than the 4 there are: rejected."""
    rows = [(0, 10, 7), (0.1, 3, 3)]
    greedy = simulate(Colocated(Linear(capacity=16, block=4)), trace(tmp_path, rows))
    assert greedy.rejected == 0
    run = simulate(
        Colocated(Linear(capacity=16, block=4)),
        trace(tmp_path, rows),
        Scheduler(admission="reserve"),
    )
    assert run.rejected_reasons == {"kv_capacity": 1} and run.completed == 1


@pytest.mark.parametrize("prefill", ["chunked", "separate"])
def test_reserve_never_preempts_nor_overfills_the_cache(seed, prefill):
    """A cache that holds a few requests at a time under a heavy load: greedily the latest
    are preempted; reserving, none ever is, every request finishes and the blocks in use
    never exceed the cache (each iteration's, the timeline's)."""
    fleet = Colocated(Linear(a=0.01, b=1e-4, capacity=512, block=8))
    load = Poisson(100.0, requests=300, workload=workload("uniform:10:100", "uniform:20:120", seed))
    greedy = simulate(fleet, load, Scheduler(16, 64, prefill), timeline=True)
    assert greedy.preemptions > 0
    run = simulate(fleet, load, Scheduler(16, 64, prefill, "reserve"), timeline=True)
    assert run.preemptions == 0 and run.completed == 300 and run.rejected == 0
    assert run.timeline["kv_blocks"].max() <= 512 // 8
    assert run.mean_batch < greedy.mean_batch  # reserving admits fewer at a time


def reference(
    arrival,
    prompt,
    output,
    engine,
    max_batch,
    budget,
    prefill="chunked",
    concurrency=None,
    admission="greedy",
):
    """The scheduling policy of the module's docstring, one sequence at a time: explicit KV
    lengths, blocks counted from them, no aggregates, no SimPy. One replica. With
    ``concurrency``, a closed loop: ``arrival`` is ignored and filled in as the clients send
    (each at once after its previous request finishes or is rejected). With ``admission=
    "reserve"`` a request starts only if the blocks of its prompt + output, added to those of
    the running sequences, fit the cache (and one needing more than the cache is rejected)."""
    arrival = np.array(arrival, float)
    if concurrency is not None:
        arrival[:] = np.inf
        arrival[: min(concurrency, len(arrival))] = 0.0
    B = engine.block_tokens
    total = engine.kv_capacity_tokens // B

    def blocks(c):
        return -(-c // B)

    def whole(s):  # the blocks a request needs at most (what "reserve" holds for it)
        return blocks(s["P"] + s["O"] - (admission == "greedy"))

    def reserves(s):
        return admission == "greedy" or sum(whole(r) for r in running) + whole(s) <= total

    n = len(arrival)
    seqs = [
        dict(rid=i, P=int(prompt[i]), O=int(output[i]), gen=0, ctx=0, target=int(prompt[i]))
        for i in range(n)
    ]
    for s in seqs:
        s["dec"] = False
    first, finish = np.full(n, np.nan), np.full(n, np.nan)
    pre = np.zeros(n, int)
    waiting, running = deque(), []
    t, nxt, done, calls = 0.0, 0, 0, []
    rejected = 0
    while done + rejected < n:
        while nxt < n and arrival[nxt] <= t:
            s = seqs[nxt]
            if whole(s) > total:
                rejected += 1
                later = np.flatnonzero(np.isinf(arrival))
                if concurrency is not None and later.size:
                    arrival[later[0]] = t  # the client sends its next at once
            else:
                waiting.append(s)
            nxt += 1

        def used():
            return sum(blocks(s["ctx"]) for s in running)

        def preempt():
            assert admission == "greedy", "a reserved sequence was preempted"
            v = max(running, key=lambda r: r["rid"])
            running.remove(v)
            v.update(ctx=0, target=v["P"] + v["gen"], dec=False)
            waiting.appendleft(v)
            pre[v["rid"]] += 1

        def decodes_with_room():
            """The decoding sequences and the blocks their next tokens need, preempting the
            newest until those fit."""
            while True:
                dec = [s for s in running if s["dec"]]
                need = sum(blocks(s["ctx"] + 1) - blocks(s["ctx"]) for s in dec)
                if need <= total - used():
                    return dec, need
                preempt()

        while prefill == "separate":
            # one prefill chunk alone (the one under way, else the queue's head), else decodes
            work = []
            under_way = sorted((s for s in running if not s["dec"]), key=lambda s: s["rid"])
            if under_way:
                s = under_way[0]
                room = blocks(s["ctx"]) * B - s["ctx"] + (total - used()) * B
                c = min(s["target"] - s["ctx"], budget, room)
                if c > 0:
                    work = [(s, c)]
            elif waiting and len(running) < max_batch:
                s = waiting[0]
                c = min(s["target"], budget)
                if blocks(c) <= total - used() and reserves(s):
                    waiting.popleft()
                    running.append(s)
                    work = [(s, c)]
            if not work:
                dec, _ = decodes_with_room()
                work = [(s, 1) for s in dec]
            if work or not running:
                break
            preempt()
        while prefill == "chunked":
            dec, need = decodes_with_room()
            free = total - used() - need
            work = [(s, 1) for s in dec]
            left = budget - len(dec)
            for s in sorted((s for s in running if not s["dec"]), key=lambda s: s["rid"]):
                room = blocks(s["ctx"]) * B - s["ctx"] + free * B
                c = min(s["target"] - s["ctx"], left, room)
                if left == 0 or c <= 0:
                    continue
                free -= blocks(s["ctx"] + c) - blocks(s["ctx"])
                left -= c
                work.append((s, c))
            while waiting and left > 0 and len(running) < max_batch:
                s = waiting[0]
                c = min(s["target"], left)
                if blocks(c) > free or not reserves(s):
                    break
                waiting.popleft()
                running.append(s)
                free -= blocks(c)
                left -= c
                work.append((s, c))
            if work or not running:
                break
            preempt()
        if not work:
            t = arrival[nxt]
            continue
        args = (
            sum(c for _, c in work),
            len(work),
            sum(s["ctx"] + c for s, c in work),
            sum(c * s["ctx"] + c * (c + 1) // 2 for s, c in work),
        )
        calls.append(args)
        t = t + engine.iteration_s(*args)
        for s, c in work:
            s["ctx"] += c
            if s["dec"]:
                s["gen"] += 1
            elif s["ctx"] == s["target"]:
                s["gen"] += 1
                s["dec"] = True
                if s["gen"] == 1:
                    first[s["rid"]] = t
            if s["gen"] == s["O"]:
                running.remove(s)
                finish[s["rid"]] = t
                done += 1
                if concurrency is not None:  # the client sends its next request
                    later = np.flatnonzero(np.isinf(arrival))
                    if later.size:
                        arrival[later[0]] = t
    return first - arrival, finish - arrival, pre, calls


@pytest.mark.parametrize("admission", serving.ADMISSIONS)
@pytest.mark.parametrize("prefill", ["chunked", "separate"])
@pytest.mark.parametrize("cache", ["roomy", "tight"])
def test_fast_scheduler_equals_the_reference(seed, cache, prefill, admission):
    """Random workloads, with a cache that never runs out and one that preempts often (or,
    reserving, holds requests back), under both prefill policies and both admissions: every
    iteration's arguments and every request's TTFT and end-to-end latency are the
    reference's."""
    rng = np.random.default_rng(seed)
    n = 150
    arrival = np.cumsum(rng.exponential(0.02, n))
    prompt = rng.integers(1, 200, n)
    output = rng.integers(1, 60, n)
    capacity = 1 << 20 if cache == "roomy" else int(rng.integers(260, 600))
    block = int(rng.choice([1, 4, 16]))
    max_batch = int(rng.integers(1 if cache == "roomy" else 4, 12))
    budget = max_batch + int(rng.integers(0, 150))
    print(f"capacity {capacity} block {block} max_batch {max_batch} budget {budget}")
    import tempfile

    path = Path(tempfile.mkdtemp()) / "t.jsonl"
    path.write_text(
        "".join(
            json.dumps({"arrival_s": float(a), "prompt": int(p), "output": int(o)}) + "\n"
            for a, p, o in zip(arrival, prompt, output, strict=True)
        )
    )
    e_fast = Linear(a=0.004, b=2e-4, c=1e-6, d=1e-9, capacity=capacity, block=block)
    e_ref = Linear(a=0.004, b=2e-4, c=1e-6, d=1e-9, capacity=capacity, block=block)
    run = simulate(Colocated(e_fast), Trace(path), Scheduler(max_batch, budget, prefill, admission))
    ttft, e2e, pre, calls = reference(
        arrival, prompt, output, e_ref, max_batch, budget, prefill, admission=admission
    )
    assert e_fast.calls == calls
    np.testing.assert_allclose(run.per_request["ttft_s"], ttft, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(run.per_request["e2e_s"], e2e, rtol=1e-9, atol=1e-12)
    assert run.per_request["preemptions"].tolist() == pre.tolist()
    if admission == "reserve":
        assert run.preemptions == 0
    elif cache == "tight":
        assert run.rejected > 0 or run.preemptions > 0


@pytest.mark.parametrize("admission", serving.ADMISSIONS)
@pytest.mark.parametrize("prefill", ["chunked", "separate"])
def test_closed_loop_equals_the_reference(seed, prefill, admission):
    """Random lengths, a random number of clients and a cache that may run out: the closed
    loop's arrivals, iterations and latencies are the reference's."""
    rng = np.random.default_rng(seed)
    clients = int(rng.integers(1, 7))
    capacity = int(rng.choice([1 << 20, int(rng.integers(300, 700))]))
    block = int(rng.choice([1, 4, 16]))
    max_batch = int(rng.integers(1, 8))
    budget = max_batch + int(rng.integers(0, 150))
    print(f"clients {clients} capacity {capacity} block {block} max_batch {max_batch}")
    e_fast = Linear(a=0.004, b=2e-4, c=1e-6, d=1e-9, capacity=capacity, block=block)
    e_ref = Linear(a=0.004, b=2e-4, c=1e-6, d=1e-9, capacity=capacity, block=block)
    load = ClosedLoop(clients, 120, workload("uniform:1:200", "uniform:1:60", seed))
    run = simulate(Colocated(e_fast), load, Scheduler(max_batch, budget, prefill, admission))
    r = run.per_request
    arrival = np.zeros(120)
    ttft, e2e, pre, calls = reference(
        arrival, r["prompt"], r["output"], e_ref, max_batch, budget, prefill, clients, admission
    )
    assert e_fast.calls == calls
    np.testing.assert_allclose(r["ttft_s"], ttft, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(r["e2e_s"], e2e, rtol=1e-9, atol=1e-12)
    assert r["preemptions"].tolist() == pre.tolist()


@pytest.mark.parametrize(
    "make, args, field, message",
    [
        (Scheduler, dict(max_batch=0), "max_batch", "max_batch must be an integer >= 1, not 0"),
        (Scheduler, dict(max_batch=2.5), "max_batch", "max_batch must be an integer >= 1, not 2.5"),
        (
            Scheduler,
            dict(token_budget=0),
            "token_budget",
            "token_budget must be an integer >= 1, not 0",
        ),
        (
            Scheduler,
            dict(max_batch=64, token_budget=32),
            "token_budget",
            "token_budget must be >= max_batch=64",
        ),
        (
            Scheduler,
            dict(prefill="mixed"),
            "prefill",
            "prefill must be one of chunked, separate, not 'mixed'",
        ),
        (
            Scheduler,
            dict(admission="lazy"),
            "admission",
            "admission must be one of greedy, reserve, not 'lazy'",
        ),
    ],
)
def test_bad_arguments(make, args, field, message):
    """The scheduler checks its fields when built."""
    check_bad_argument(make, args, field, message)
