"""tlm.inference.serving: hand-computed cases, a reference scheduler written plainly (one
sequence at a time, no aggregates) against the fast one on random workloads, Little's law,
seeds, traces, the SLO bisection and every bad input."""

import dataclasses
import doctest
import importlib
import json
import math
from collections import deque
from pathlib import Path

import numpy as np
import pytest

from tlm.inference import InferenceInputError, SloUnreachable, serving
from tlm.inference.serving import (
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
    read_trace,
    simulate,
)

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

ROOT = Path(__file__).resolve().parents[1]


class Linear:
    """The test double of an engine: ``a + b tokens + c kv_tokens + d pairs`` seconds, and the
    calls it received (for checking the scheduler's arguments)."""

    def __init__(self, a=0.010, b=0.001, c=0.0, d=0.0, capacity=1 << 20, block=16, chips=1):
        self.a, self.b, self.c, self.d = a, b, c, d
        self.chips = chips
        self.kv_capacity_tokens = capacity
        self.block_tokens = block
        self.calls = []

    def iteration_s(self, tokens, sequences, kv_tokens, pairs):
        self.calls.append((tokens, sequences, kv_tokens, pairs))
        return self.a + self.b * tokens + self.c * kv_tokens + self.d * pairs


def write_trace(tmp_path, rows, name="trace.csv"):
    path = tmp_path / name
    if name.endswith(".csv"):
        lines = ["arrival_s,prompt,output"] + [f"{t},{p},{o}" for t, p, o in rows]
    else:
        lines = [json.dumps({"arrival_s": t, "prompt": p, "output": o}) for t, p, o in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def trace(tmp_path, rows, name="trace.csv"):
    """A :class:`Trace` load of ``rows`` (arrival_s, prompt, output)."""
    return Trace(write_trace(tmp_path, rows, name))


def workload(prompt=512, output=128, seed=0):
    return Workload(prompt, output, seed)


#: The package and its modules with examples.
EXAMPLES = ["", ".checks", ".requests", ".scheduling", ".fleet", ".metrics", ".slo", ".simulation"]


@pytest.mark.parametrize("module", EXAMPLES)
def test_module_examples(module):
    result = doctest.testmod(importlib.import_module("tlm.inference.serving" + module))
    assert result.attempted > 0 and result.failed == 0


def test_docs_examples():
    """docs/serving.md's worked example runs and prints what it says."""
    result = doctest.testfile(str(ROOT / "docs" / "serving.md"), module_relative=False)
    assert result.attempted > 0 and result.failed == 0


# ------------------------------------------------------------------ hand-computed cases


def test_one_request_alone(tmp_path):
    """TTFT is the prefill iteration; every decode iteration reads the KV so far plus itself."""
    e = Linear(a=0.01, b=0.001, c=1e-5, d=1e-7)
    p, o = 100, 6
    run = simulate(Colocated(e), trace(tmp_path, [(0.5, p, o)]), Scheduler(token_budget=256))
    prefill = 0.01 + 0.001 * p + 1e-5 * p + 1e-7 * p * (p + 1) / 2
    decodes = [0.01 + 0.001 + (1e-5 + 1e-7) * (p + j) for j in range(1, o)]
    assert e.calls == [(p, 1, p, p * (p + 1) // 2)] + [(1, 1, p + j, p + j) for j in range(1, o)]
    assert run.ttft_s.mean == pytest.approx(prefill, rel=1e-12)
    assert run.tpot_s.mean == pytest.approx(sum(decodes) / (o - 1), rel=1e-12)
    assert run.e2e_s.mean == pytest.approx(prefill + sum(decodes), rel=1e-12)
    assert run.iterations == o and run.completed == 1 and run.preemptions == 0
    assert run.simulated_s == pytest.approx(0.5 + prefill + sum(decodes), rel=1e-12)
    assert run.seed is None  # a trace draws nothing


def test_one_token_output_has_no_tpot(tmp_path):
    run = simulate(Colocated(Linear()), trace(tmp_path, [(0.0, 10, 1)]))
    assert run.ttft_s.mean == pytest.approx(0.02) and run.e2e_s.mean == pytest.approx(0.02)
    assert math.isnan(run.tpot_s.mean) and run.iterations == 1


def test_two_requests_batch_together(tmp_path):
    """Two prompts at once share the prefill iteration, then decode side by side; the shorter
    output leaves and the other decodes alone."""
    e = Linear(a=0.01, b=0.001)
    run = simulate(
        Colocated(e), trace(tmp_path, [(0, 30, 3), (0, 50, 5)]), Scheduler(token_budget=128)
    )
    assert e.calls == [
        (80, 2, 80, 30 * 31 // 2 + 50 * 51 // 2),
        (2, 2, 31 + 51, 31 + 51),
        (2, 2, 32 + 52, 32 + 52),
        (1, 1, 53, 53),
        (1, 1, 54, 54),
    ]
    t = np.cumsum([0.01 + 0.001 * c[0] for c in e.calls])
    np.testing.assert_allclose(run.per_request["ttft_s"], [t[0], t[0]], rtol=1e-12)
    np.testing.assert_allclose(run.per_request["e2e_s"], [t[2], t[4]], rtol=1e-12)
    np.testing.assert_allclose(
        run.per_request["tpot_s"], [(t[2] - t[0]) / 2, (t[4] - t[0]) / 4], rtol=1e-12
    )
    assert run.mean_batch == pytest.approx(
        sum(c[1] * (0.01 + 0.001 * c[0]) for c in e.calls) / t[-1], rel=1e-12
    )


def test_arrival_joins_the_running_batch(tmp_path):
    """A request arriving while another decodes is prefilled in the next iteration beside the
    decode (decode first, then the chunk), and then both decode."""
    e = Linear(a=0.01, b=0.001)
    run = simulate(Colocated(e), trace(tmp_path, [(0, 20, 4), (0.025, 10, 2)]))
    # iteration 1 ends at 0.030 (prefill of 20); the second request waits for it
    assert e.calls[:3] == [(20, 1, 20, 210), (11, 2, 21 + 10, 21 + 55), (2, 2, 22 + 11, 22 + 11)]
    ends = np.cumsum([0.01 + 0.001 * c[0] for c in e.calls])
    assert run.per_request["ttft_s"][1] == pytest.approx(ends[1] - 0.025, rel=1e-12)
    assert run.per_request["e2e_s"][1] == pytest.approx(ends[2] - 0.025, rel=1e-12)


def test_closed_loop_of_one_client_runs_requests_back_to_back():
    """Concurrency 1: each request is sent the moment the previous one finishes, and is served
    alone (a prefill of 100, ten decodes of 1: 0.11 + 10 x 0.011 = 0.22 s)."""
    load = ClosedLoop(concurrency=1, requests=3, workload=workload(100, 11))
    run = simulate(Colocated(Linear()), load, Scheduler(token_budget=256))
    np.testing.assert_allclose(run.per_request["arrival_s"], [0, 0.22, 0.44], rtol=1e-12)
    np.testing.assert_allclose(run.per_request["ttft_s"], [0.11] * 3, rtol=1e-12)
    np.testing.assert_allclose(run.per_request["tpot_s"], [0.011] * 3, rtol=1e-12)
    np.testing.assert_allclose(run.per_request["e2e_s"], [0.22] * 3, rtol=1e-12)
    assert run.throughput_rps == pytest.approx(1 / 0.22, rel=1e-12)
    assert run.seed == 0 and run.mean_in_system == pytest.approx(1.0)


def test_closed_loop_two_clients_with_equal_lengths_stay_in_step():
    """Two clients: both prompts share the first iteration (0.01 + 0.2 s), both decode
    together (0.012 s a step), both finish at 0.33 s and send again at once - every round the
    same; Little's law holds exactly (2 in the system all the time)."""
    e = Linear()
    load = ClosedLoop(concurrency=2, requests=6, workload=workload(100, 11))
    run = simulate(Colocated(e), load, Scheduler(token_budget=256))
    rounds = np.repeat([0.0, 0.33, 0.66], 2)
    np.testing.assert_allclose(run.per_request["arrival_s"], rounds, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(run.per_request["ttft_s"], [0.21] * 6, rtol=1e-12)
    np.testing.assert_allclose(run.per_request["tpot_s"], [0.012] * 6, rtol=1e-12)
    np.testing.assert_allclose(run.per_request["e2e_s"], [0.33] * 6, rtol=1e-12)
    assert e.calls[:2] == [(200, 2, 200, 2 * 5050), (2, 2, 202, 202)]
    assert run.throughput_rps * run.e2e_s.mean == pytest.approx(2.0, rel=1e-12)
    assert run.mean_in_system == pytest.approx(2.0, rel=1e-12)


def test_the_request_cost_delays_the_scheduler_not_the_replica(tmp_path):
    """An engine's request_fixed_s: a request reaches the scheduler that long after it
    arrives (its latencies count from its arrival); the replica serves another meanwhile.
    Request 0 (0 s) starts at 0.05; request 1 (0.03 s) reaches the scheduler at 0.08, while
    request 0's prefill (0.01 + 0.1 s) runs, and joins the next iteration."""
    e = Linear(a=0.01, b=0.001)
    e.request_fixed_s = 0.05
    run = simulate(Colocated(e), trace(tmp_path, [(0.0, 100, 3), (0.03, 10, 2)]))
    assert e.calls[:2] == [(100, 1, 100, 5050), (11, 2, 101 + 10, 101 + 55)]
    ends = 0.05 + np.cumsum([0.01 + 0.001 * c[0] for c in e.calls])
    np.testing.assert_allclose(run.per_request["ttft_s"], [ends[0], ends[1] - 0.03], rtol=1e-12)
    # a closed loop: each request sent the moment the previous finishes, 0.05 s more each
    alone = Linear()
    alone.request_fixed_s = 0.05
    load = ClosedLoop(concurrency=1, requests=3, workload=workload(100, 11))
    loop = simulate(Colocated(alone), load, Scheduler(token_budget=256))
    np.testing.assert_allclose(loop.per_request["arrival_s"], [0, 0.27, 0.54], rtol=1e-12)
    np.testing.assert_allclose(loop.per_request["ttft_s"], [0.16] * 3, rtol=1e-12)
    np.testing.assert_allclose(loop.per_request["tpot_s"], [0.011] * 3, rtol=1e-12)
    assert loop.mean_in_system == pytest.approx(1.0)  # in the system from its arrival
    for bad in (-0.1, float("nan"), "1"):
        alone.request_fixed_s = bad
        with pytest.raises(ValueError, match="engine.request_fixed_s must be a finite number"):
            Colocated(alone)


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


def test_preemption_when_the_cache_runs_out(tmp_path):
    """4 blocks of 4 tokens, two requests of prompt 4 and output 8 (11 tokens of KV, 3 blocks
    each): at the 6th iteration both decodes need a 3rd block; the later request is preempted
    (it had generated 5 tokens), re-prefills 9 tokens after the first finishes, and finishes.

    iteration:  1   2  3  4  5  6  7  8  9  10 11 12
    request 0:  P4  d  d  d  d  d  d  d(done, frees 3 blocks)
    request 1:  P4  d  d  d  d  preempted... P8 P1 d  d(done)
    """
    e = Linear(a=0.01, b=0.001, capacity=16, block=4)
    run = simulate(
        Colocated(e),
        trace(tmp_path, [(0, 4, 8), (0, 4, 8)]),
        Scheduler(max_batch=2, token_budget=8),
        timeline=True,
    )
    assert run.timeline["tokens"].tolist() == [8, 2, 2, 2, 2, 1, 1, 1, 8, 1, 1, 1]
    assert run.preemptions == 1 and run.per_request["preemptions"].tolist() == [0, 1]
    assert run.completed == 2 and run.rejected == 0
    # the re-prefill of prompt + 5 generated tokens: 8 then 1 (KV 8 -> 9: a third block)
    assert e.calls[8] == (8, 1, 8, 36) and e.calls[9] == (1, 1, 9, 9)
    assert run.timeline["kv_blocks"].tolist() == [2, 4, 4, 4, 4, 3, 3, 3, 2, 3, 3, 3]
    ends = np.cumsum(run.timeline["duration_s"])
    np.testing.assert_allclose(run.per_request["ttft_s"], [ends[0], ends[0]], rtol=1e-12)
    np.testing.assert_allclose(run.per_request["e2e_s"], [ends[7], ends[11]], rtol=1e-12)


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


#: Two prefill and three decode replicas under load with a small decode cache (the
#: disaggregated tests' setting; the engine a fresh ``Linear(a=0.005, b=1e-4, capacity=2048,
#: block=16)`` each, its calls being recorded), at 40 requests/s.
def _pools(seed, admission="greedy"):
    engine = Linear(a=0.005, b=1e-4, capacity=2048, block=16)
    fleet = Disaggregated(engine, 2, 3, kv_transfer_s=lambda tokens: 0.01)
    load = Poisson(40.0, requests=400, workload=workload("uniform:50:400", "uniform:10:200", seed))
    return simulate(fleet, load, Scheduler(32, 512, admission=admission))


def test_reserve_disaggregated_pools_serve_everyone(seed):
    """Reserving on both pools (the prefill pool a prompt's blocks, the decode pool a whole
    request's): every request finishes, none preempted, with a decode cache of a few
    requests."""
    run = _pools(seed, admission="reserve")
    assert run.completed == 400 and run.preemptions == 0 and run.rejected == 0


def test_tight_cache_everyone_finishes(seed):
    """Many requests through a cache that holds two or three at a time: preemptions happen,
    every request finishes, none is rejected."""
    e = Linear(a=0.01, b=1e-4, capacity=256, block=8)
    load = Poisson(50.0, requests=300, workload=workload("uniform:10:100", "uniform:20:120", seed))
    run = simulate(Colocated(e), load, Scheduler(max_batch=16, token_budget=64))
    assert run.preemptions > 0
    assert run.completed == 300 and run.rejected == 0
    assert not np.isnan(run.per_request["e2e_s"]).any()


def test_rejection_of_a_request_that_can_never_fit(tmp_path):
    """16 tokens of cache: prompt 10 + output 7 needs 16 tokens of KV (the last token is never
    fed back) and fits; output 8 needs 17 and is rejected, with its reason, and the others
    are served."""
    e = Linear(capacity=16, block=4)
    run = simulate(Colocated(e), trace(tmp_path, [(0, 10, 7), (0.1, 10, 8), (0.2, 3, 3)]))
    assert run.rejected == 1 and run.rejected_reasons == {"kv_capacity": 1}
    assert run.per_request["rejected"].tolist() == [False, True, False]
    assert run.completed == 2 and np.isnan(run.per_request["e2e_s"][1])


def test_disaggregation_adds_the_transfer(tmp_path):
    """Prefill on one replica, the KV moved, decode on another: TTFT and end-to-end latency
    are the colocated ones plus the transfer; the decodes cost the same."""
    e = Linear(a=0.01, b=0.001, c=1e-5)
    load = trace(tmp_path, [(0, 200, 5)])
    alone = simulate(Colocated(e), load)
    split = simulate(
        Disaggregated(e, 1, 1, kv_transfer_s=lambda tokens: 0.002 + tokens * 1e-5), load
    )
    transfer = 0.002 + 200 * 1e-5
    assert split.ttft_s.mean == pytest.approx(alone.ttft_s.mean + transfer, rel=1e-12)
    assert split.e2e_s.mean == pytest.approx(alone.e2e_s.mean + transfer, rel=1e-12)
    assert split.iterations == alone.iterations and split.chips == 2
    assert split.throughput_rps_per_chip == pytest.approx(split.throughput_rps / 2)
    # the same transfer as a link: 320 kB per token over 32 GB/s after 2 ms
    link = KvLink(bytes_per_token=320e3, bandwidth_Bps=32e9, latency_s=0.002)
    linked = simulate(Disaggregated(e, 1, 1, kv_transfer_s=link), load)
    assert linked.ttft_s.mean == pytest.approx(split.ttft_s.mean, rel=1e-12)
    # the prefill pool's engine carries the serving stack's time per request: before the
    # prefill, added to both latencies (the decode replica's own figure is not used)
    front, back = Linear(a=0.01, b=0.001, c=1e-5), Linear(a=0.01, b=0.001, c=1e-5)
    front.request_fixed_s, back.request_fixed_s = 0.03, 5.0
    fleet = Disaggregated(front, 1, 1, lambda tokens: 0.002 + tokens * 1e-5, decode_engine=back)
    delayed = simulate(fleet, load)
    assert delayed.ttft_s.mean == pytest.approx(split.ttft_s.mean + 0.03, rel=1e-12)
    assert delayed.e2e_s.mean == pytest.approx(split.e2e_s.mean + 0.03, rel=1e-12)


def test_prefill_blocks_held_until_the_transfer_ends(tmp_path):
    """A prefill replica with room for one prompt (4 blocks of 4): the second prompt's prefill
    starts only when the first one's KV has left (1 s later), on a decode replica with a
    larger cache (its own engine)."""
    prefill = Linear(a=0.01, b=0.001, capacity=16, block=4)
    decode = Linear(a=0.01, b=0.001, capacity=64, block=4, chips=2)
    fleet = Disaggregated(prefill, 1, 1, kv_transfer_s=lambda tokens: 1.0, decode_engine=decode)
    run = simulate(fleet, trace(tmp_path, [(0, 16, 2), (0, 16, 2)]))
    t1 = 0.01 + 0.001 * 16
    np.testing.assert_allclose(run.per_request["ttft_s"], [t1 + 1, 2 * t1 + 2], rtol=1e-12)
    # each decodes alone, as it arrives: 0.011 s
    np.testing.assert_allclose(run.per_request["tpot_s"], [0.011, 0.011], rtol=1e-9)
    assert prefill.calls == [(16, 1, 16, 136)] * 2 and run.chips == 3


def test_disaggregated_rejections_name_the_pool(tmp_path):
    prefill = Linear(capacity=32, block=4)
    decode = Linear(capacity=64, block=4)
    fleet = Disaggregated(prefill, 1, 1, kv_transfer_s=lambda tokens: 0.0, decode_engine=decode)
    run = simulate(fleet, trace(tmp_path, [(0, 40, 2), (0, 30, 40), (0, 30, 5)]))
    assert run.rejected_reasons == {"prefill_kv_capacity": 1, "decode_kv_capacity": 1}
    assert run.per_request["rejected"].tolist() == [True, True, False]


def test_everyone_rejected(tmp_path):
    run = simulate(Colocated(Linear(capacity=16)), trace(tmp_path, [(1.0, 20, 2)]))
    assert run.rejected == 1 and run.completed == 0 and run.iterations == 0
    assert math.isnan(run.ttft_s.p99) and run.throughput_rps == 0.0
    json.dumps(run.figures())


def test_disaggregated_pools_serve_everyone(seed):
    """Two prefill and three decode replicas under load with a small decode cache: every
    request finishes, decode replicas preempt and recompute, and no TTFT beats its prefill
    plus transfer."""
    run = _pools(seed)
    assert run.completed == 400 and run.chips == 5 and run.preemptions > 0
    prompt = run.per_request["prompt"]
    floor = 0.005 + 1e-4 * prompt + 0.01
    assert (run.per_request["ttft_s"] >= floor * (1 - 1e-12)).all()
    assert set(run.per_request["replica"].tolist()) == {0, 1}


def test_routers(tmp_path):
    """Round robin takes replicas in turn; least loaded the emptiest, ties to the lowest."""
    load = trace(tmp_path, [(0, 10, 50), (0, 10, 50), (0, 10, 50), (10, 10, 2)])
    rr = simulate(Colocated(Linear(), replicas=2, router="round_robin"), load)
    assert rr.per_request["replica"].tolist() == [0, 1, 0, 1]
    ll = simulate(Colocated(Linear(), replicas=2), load)
    assert ll.per_request["replica"].tolist() == [0, 1, 0, 0]  # all idle again at t = 10
    assert ll.chips == 2


def test_slo_attainment(tmp_path):
    load = trace(tmp_path, [(0, 10, 2), (0, 10, 2), (5, 1000, 2)])
    fleet = Colocated(Linear(a=0.01, b=0.001))
    run = simulate(fleet, load, Scheduler(token_budget=2048), Slo(ttft_s=0.5))
    # two prefills of 10 at once: 0.03 s; the prompt of 1000 alone: 1.01 s > 0.5
    assert run.slo_attainment == pytest.approx(2 / 3)
    run = simulate(fleet, load, slo=Slo(tpot_s=0.0115))
    assert run.slo_attainment == pytest.approx(1 / 3)  # decodes of two: 0.012; of one: 0.011
    assert math.isnan(simulate(Colocated(Linear()), load).slo_attainment)


# ------------------------------------------------------------------ a plain reference


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
                while True:
                    dec = [s for s in running if s["dec"]]
                    need = sum(blocks(s["ctx"] + 1) - blocks(s["ctx"]) for s in dec)
                    if need <= total - used():
                        break
                    preempt()
                work = [(s, 1) for s in running if s["dec"]]
            if work or not running:
                break
            preempt()
        while prefill == "chunked":
            while True:
                dec = [s for s in running if s["dec"]]
                need = sum(blocks(s["ctx"] + 1) - blocks(s["ctx"]) for s in dec)
                if need <= total - used():
                    break
                preempt()
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


def test_closed_loop_littles_law(seed):
    """N clients keep N requests in the system until the last is sent: throughput x mean
    end-to-end latency = N, but for the tail after the last send (the run's last requests
    drain with fewer in the system: within 1 % over 4,000 requests)."""
    clients = 8
    load = ClosedLoop(clients, 4000, workload("lognormal:300:0.6", "uniform:20:200", seed))
    run = simulate(Colocated(Linear(a=0.01, b=2e-5, c=5e-8)), load, Scheduler(64, 512))
    assert run.completed == 4000 and np.all(np.diff(run.per_request["arrival_s"]) >= 0)
    assert run.mean_in_system == pytest.approx(clients, rel=1e-9)
    assert run.throughput_rps * run.e2e_s.mean == pytest.approx(clients, rel=0.01)
    assert run.throughput_rps * run.e2e_s.mean <= clients


# ------------------------------------------------------------------ laws and seeds


def test_littles_law(seed):
    """A long run below saturation: the time-average number of requests in the system equals
    the arrival rate times the mean latency within 3 % (the sample's arrival rate differs from
    the nominal one by about 1/sqrt(20000) = 0.7 %, and the window's edges by less)."""
    e = Linear(a=0.01, b=2e-5, c=5e-8, capacity=200_000)
    rate = 25.0
    load = Poisson(
        rate, requests=20_000, workload=workload("lognormal:300:0.6", "uniform:20:200", seed)
    )
    run = simulate(Colocated(e, replicas=2), load, Scheduler(max_batch=64, token_budget=512))
    assert run.completed == 20_000
    assert run.mean_in_system == pytest.approx(rate * run.e2e_s.mean, rel=0.03)
    # below saturation the fleet serves what arrives
    assert run.throughput_rps == pytest.approx(rate, rel=0.03)


def test_seed_reproduces_the_run(seed):
    def load(seed):
        return Poisson(
            20.0, requests=200, workload=workload("lognormal:200:1.0", "uniform:1:50", seed)
        )

    a = simulate(Colocated(Linear()), load(seed))
    b = simulate(Colocated(Linear()), load(seed))
    assert a.seed == seed
    assert json.dumps(a.figures()) == json.dumps(b.figures())  # NaN as NaN
    for key, value in a.per_request.items():
        np.testing.assert_array_equal(value, b.per_request[key])
    c = simulate(Colocated(Linear()), load(seed + 1))
    assert not np.array_equal(a.per_request["arrival_s"], c.per_request["arrival_s"])


def test_same_seed_same_requests_at_any_rate():
    """Common random numbers: the arrivals scale with 1 / rate, the lengths do not change."""
    a = simulate(Colocated(Linear()), Poisson(10.0, 50, workload=workload("uniform:1:99", seed=7)))
    b = simulate(Colocated(Linear()), Poisson(20.0, 50, workload=workload("uniform:1:99", seed=7)))
    np.testing.assert_allclose(a.per_request["arrival_s"], 2 * b.per_request["arrival_s"])
    np.testing.assert_array_equal(a.per_request["prompt"], b.per_request["prompt"])


def test_length_distributions(seed):
    def run_of(prompt, output):
        load = Poisson(100.0, requests=20_000, workload=workload(prompt, output, seed))
        return simulate(Colocated(Linear()), load)

    run = run_of("lognormal:400:0.5", ("uniform", 3, 9))
    prompt, output = run.per_request["prompt"], run.per_request["output"]
    assert prompt.mean() == pytest.approx(400, rel=0.02)  # sigma 0.5: sd ~ 212, se ~ 1.5
    assert output.min() == 3 and output.max() == 9
    run = run_of(64, "uniform:5:5")
    assert set(run.per_request["prompt"].tolist()) == {64}
    assert set(run.per_request["output"].tolist()) == {5}


def test_duration_bounds_the_arrivals(seed):
    run = simulate(
        Colocated(Linear()), Poisson(50.0, duration_s=40.0, workload=workload(seed=seed))
    )
    arrival = run.per_request["arrival_s"]
    assert arrival.max() < 40.0 and np.all(np.diff(arrival) >= 0)
    assert run.requests == pytest.approx(2000, abs=5 * math.sqrt(2000))


# ------------------------------------------------------------------ traces


def test_trace_csv_and_jsonl(tmp_path):
    rows = [(0.0, 10, 2), (0.5, 20, 3), (0.25, 30, 4)]
    for name in ("t.csv", "t.jsonl"):
        arrival, prompt, output = read_trace(write_trace(tmp_path, rows, name))
        assert arrival.tolist() == [0.0, 0.25, 0.5]
        assert prompt.tolist() == [10, 30, 20] and output.tolist() == [2, 4, 3]


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("t.csv", "arrival_s,prompt\n0,1\n", "t.csv:1: the header must name arrival_s, prompt"),
        ("t.csv", "arrival_s,prompt,output\n0,1,1\n1,x,2\n", "t.csv:3: field 'prompt' must be"),
        ("t.csv", "arrival_s,prompt,output\n-1,1,1\n", "t.csv:2: field 'arrival_s' must be"),
        ("t.csv", "arrival_s,prompt,output\n0,1,0\n", "t.csv:2: field 'output' must be an"),
        ("t.csv", "arrival_s,prompt,output\n0,1.5,2\n", "t.csv:2: field 'prompt' must be an"),
        ("t.csv", "arrival_s,prompt,output\n0,1,\n", "t.csv:2: field 'output' is missing"),
        ("t.csv", "arrival_s,prompt,output\n", "t.csv: no requests"),
        ("t.jsonl", '{"arrival_s": 0, "prompt": 1, "output": 1}\n{oops\n', "t.jsonl:2: not JSON"),
        ("t.jsonl", "[1, 2, 3]\n", "t.jsonl:1: expected an object"),
        ("t.jsonl", '{"arrival_s": 0, "prompt": 3}\n', "t.jsonl:1: field 'output' is missing"),
        ("t.jsonl", '{"arrival_s": "nan", "prompt": 3, "output": 1}\n', "field 'arrival_s'"),
        ("t.txt", "", "the name must end in .csv or .jsonl"),
    ],
)
def test_trace_errors(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(TraceError) as info:
        read_trace(path)
    assert message in str(info.value)
    with pytest.raises(TraceError):  # the simulation passes it on
        simulate(Colocated(Linear()), Trace(path))


def test_trace_missing_file(tmp_path):
    with pytest.raises(TraceError, match=r"absent.csv': cannot be read \(No such file"):
        read_trace(tmp_path / "absent.csv")
    (tmp_path / "bin.csv").write_bytes(b"arrival_s\n\xff")
    with pytest.raises(TraceError, match=r"is not UTF-8 text \(byte 0xff at offset 10\)"):
        read_trace(tmp_path / "bin.csv")


# ------------------------------------------------------------------ the rate under an SLO


def test_max_rate_bisection():
    """The returned rate meets the rule, the bracket's upper end does not; a looser SLO never
    gives a lower rate; the percentile rule at 0.9 is the p90 of both latencies."""
    fleet = Colocated(Linear(a=0.01, b=1e-4, c=1e-7))
    requests = workload("uniform:50:300", "uniform:20:100", seed=3)
    scheduler = Scheduler(max_batch=32, token_budget=512)
    kw = dict(requests=600, rel_tol=0.05)
    slo = Slo(ttft_s=0.3, tpot_s=0.05)
    tight = max_rate(fleet, slo, requests, scheduler, **kw)
    assert tight.run.slo_attainment >= 0.9
    assert serving.meets(tight.run, "attainment", 0.9)
    failed = [r for r, ok, _ in tight.runs if not ok]
    above = min(r for r in failed if r > tight.rate)
    assert above <= tight.rate * 1.05 * (1 + 1e-9)
    loose = max_rate(fleet, Slo(ttft_s=1.0, tpot_s=0.05), requests, scheduler, **kw)
    assert loose.rate >= tight.rate
    p90 = max_rate(fleet, slo, requests, scheduler, rule="percentile", **kw)
    assert p90.run.ttft_s.p90 <= 0.3 * (1 + 1e-9) and p90.run.tpot_s.p90 <= 0.05
    # what the bisection relies on: with the same requests sooner, attainment only falls
    attainment = [
        simulate(fleet, Poisson(f * tight.rate, 600, workload=requests), scheduler, slo)
        for f in (0.25, 0.5, 1.0, 1.5, 3.0)
    ]
    attainment = [run.slo_attainment for run in attainment]
    assert attainment == sorted(attainment, reverse=True) and attainment[-1] < 0.9


def test_max_rate_unreachable():
    with pytest.raises(SloUnreachable, match="no rate meets the SLO") as info:
        max_rate(Colocated(Linear(a=0.5)), Slo(ttft_s=0.1), workload(10, 5), requests=50)
    assert info.value.field == "slo"


def test_max_rate_unbounded_names_the_requests():
    """All the requests at once within the SLO: every rate meets it, and the search says to
    send more (it doubled the rate forty times, then raised a RuntimeError)."""
    fast = Colocated(Linear(a=1e-4))
    with pytest.raises(InferenceInputError, match="requests must be more than .* not 5: all 5"):
        max_rate(fast, Slo(ttft_s=10.0), workload(10, 5), requests=5)


# ------------------------------------------------------------------ values and bad input


def test_values_are_frozen_hashable_and_equal_by_content():
    """The values that configure a run can key a cache: equal fields, equal values (a length
    kept as parse_lengths gives it), and no field can be set after the checks."""
    assert Workload(64, "uniform:1:9") == Workload(("fixed", 64), ["uniform", 1, 9])
    assert Workload(64).prompt == ("fixed", 64)
    assert dataclasses.replace(Workload(64, seed=1), seed=2) == Workload(64, seed=2)
    assert hash(Scheduler(max_batch=8)) == hash(Scheduler(8, 2048, "chunked", "greedy"))
    assert Poisson(2, requests=5) == Poisson(2.0, 5) and Poisson(2, requests=5).rate == 2.0
    e = Linear()
    assert {Colocated(e, 2), Colocated(e, 2)} == {Colocated(e, replicas=2)}
    assert Disaggregated(e, 1, 2, KvLink(1e3, 1e9)).decode_engine is e
    with pytest.raises(AttributeError):
        Scheduler().max_batch = 4


def test_registries_name_their_classes():
    from tlm.inference.serving import fleet, requests, scheduling, slo

    for registry, names in (
        (requests.LOAD_KINDS, ("poisson", "trace", "closed_loop")),
        (scheduling.PREFILL_POLICIES, serving.PREFILLS),
        (scheduling.ADMISSION_RULES, serving.ADMISSIONS),
        (fleet.ROUTER_POLICIES, serving.ROUTERS),
        (slo.SLO_RULES, serving.RULES),
    ):
        assert registry.names == names
        assert all(registry.named(name).name == name for name in names)
    assert serving.PREFILLS == ("chunked", "separate")
    assert serving.ADMISSIONS == ("greedy", "reserve")


def _transfer(tokens):
    return 0.0


@pytest.mark.parametrize(
    "make, args, field, message",
    [
        (Poisson, dict(rate=0, requests=3), "rate", "rate must be a finite number > 0, not 0"),
        (
            Poisson,
            dict(rate=-1.0, requests=3),
            "rate",
            "rate must be a finite number > 0, not -1.0",
        ),
        (
            Poisson,
            dict(rate=math.inf, requests=3),
            "rate",
            "rate must be a finite number > 0, not inf",
        ),
        (
            Poisson,
            dict(rate=None, requests=3),
            "rate",
            "rate must be a finite number > 0, not None",
        ),
        (Poisson, dict(rate=1.0), "requests", "give exactly one of duration_s and requests"),
        (
            Poisson,
            dict(rate=1.0, requests=3, duration_s=5.0),
            "requests",
            "give exactly one of duration_s and requests",
        ),
        (
            Poisson,
            dict(rate=1.0, requests=0),
            "requests",
            "requests must be an integer >= 1, not 0",
        ),
        (
            Poisson,
            dict(rate=1.0, duration_s=-1),
            "duration_s",
            "duration_s must be a finite number > 0, not -1",
        ),
        (
            Poisson,
            dict(rate=1.0, requests=3, workload=64),
            "workload",
            "workload must be a Workload",
        ),
        (
            ClosedLoop,
            dict(concurrency=0, requests=3),
            "concurrency",
            "concurrency must be an integer >= 1, not 0",
        ),
        (
            ClosedLoop,
            dict(concurrency=1.5, requests=3),
            "concurrency",
            "concurrency must be an integer >= 1, not 1.5",
        ),
        (
            ClosedLoop,
            dict(concurrency=2, requests=0),
            "requests",
            "requests must be an integer >= 1, not 0",
        ),
        (Trace, dict(path=3), "path", "path must be a path to a .csv or .jsonl file, not 3"),
        (Workload, dict(seed=-1), "seed", "seed must be an integer >= 0, not -1"),
        (Workload, dict(seed=True), "seed", "seed must be an integer >= 0, not True"),
        (Workload, dict(prompt=0), "prompt", "prompt must be an integer >= 1, 'uniform:lo:hi'"),
        (Workload, dict(prompt="normal:3:4"), "prompt", "prompt must be an integer >= 1"),
        (
            Workload,
            dict(output="uniform:9:3"),
            "output",
            "output: uniform needs integers 1 <= lo <= hi",
        ),
        (
            Workload,
            dict(output="lognormal:100:-1"),
            "output",
            "output: lognormal needs mean >= 1 and sigma >= 0",
        ),
        (Workload, dict(output=("uniform", "a", 3)), "output", "output must be an integer >= 1"),
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
        (Slo, dict(ttft_s=0), "ttft_s", "ttft_s must be a finite number > 0, not 0"),
        (Slo, dict(tpot_s=math.nan), "tpot_s", "tpot_s must be a finite number > 0, not nan"),
        (
            Colocated,
            dict(engine=Linear(), replicas=0),
            "replicas",
            "replicas must be an integer >= 1, not 0",
        ),
        (
            Colocated,
            dict(engine=Linear(), router="random"),
            "router",
            "router must be one of least_loaded, round_robin, not 'random'",
        ),
        (
            Disaggregated,
            dict(engine=Linear(), prefill_replicas=0, decode_replicas=1, kv_transfer_s=_transfer),
            "prefill_replicas",
            "prefill_replicas must be an integer >= 1, not 0",
        ),
        (
            Disaggregated,
            dict(engine=Linear(), prefill_replicas=1, decode_replicas=0, kv_transfer_s=_transfer),
            "decode_replicas",
            "decode_replicas must be an integer >= 1, not 0",
        ),
        (
            Disaggregated,
            dict(engine=Linear(), prefill_replicas=1, decode_replicas=1, kv_transfer_s=3.0),
            "kv_transfer_s",
            "kv_transfer_s must be a callable (prompt tokens -> seconds), not 3.0",
        ),
        (
            Disaggregated,
            dict(
                engine=Linear(),
                prefill_replicas=1,
                decode_replicas=1,
                kv_transfer_s=_transfer,
                decode_engine=object(),
            ),
            "decode_engine",
            "decode_engine must have chips, kv_capacity_tokens, block_tokens and iteration_s",
        ),
        (
            KvLink,
            dict(bytes_per_token=1e3, bandwidth_Bps=0),
            "bandwidth_Bps",
            "bandwidth_Bps must be a finite number > 0, not 0",
        ),
        (
            KvLink,
            dict(bytes_per_token=1e3, bandwidth_Bps=1e9, latency_s=-1),
            "latency_s",
            "latency_s must be a finite number >= 0, not -1",
        ),
        (
            KvLink,
            dict(bytes_per_token="1e3", bandwidth_Bps=1e9),
            "bytes_per_token",
            "bytes_per_token must be a finite number > 0, not '1e3'",
        ),
    ],
)
def test_bad_arguments(make, args, field, message):
    """Each value checks its fields when built: the error names the field, the value and what
    is allowed."""
    with pytest.raises(InferenceInputError) as info:
        make(**args)
    assert message in str(info.value)
    assert info.value.field == field


def test_simulate_takes_the_values():
    with pytest.raises(
        InferenceInputError, match="fleet must be a Colocated or Disaggregated fleet"
    ):
        simulate(Linear(), Poisson(1.0, requests=1))
    with pytest.raises(
        InferenceInputError, match="load must be a Poisson, Trace or ClosedLoop load"
    ):
        simulate(Colocated(Linear()), Workload())
    with pytest.raises(InferenceInputError, match="scheduler must be a Scheduler, not 64"):
        simulate(Colocated(Linear()), Poisson(1.0, requests=1), 64)


@pytest.mark.parametrize(
    "attr, value, message",
    [
        ("chips", 0, "engine.chips must be an integer >= 1, not 0"),
        ("block_tokens", 0, "engine.block_tokens must be an integer >= 1, not 0"),
        ("kv_capacity_tokens", 8, "must hold at least one block of engine.block_tokens=16"),
        ("iteration_s", 5, "engine.iteration_s must be callable"),
    ],
)
def test_bad_engine(attr, value, message):
    e = Linear()
    setattr(e, attr, value)
    with pytest.raises(ValueError) as info:
        Colocated(e)
    assert message in str(info.value)


def test_engine_missing_a_member():
    with pytest.raises(ValueError, match="has no 'chips'"):
        Colocated(object())


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_engine_bad_iteration_time(bad):
    e = Linear(a=bad, b=0)
    with pytest.raises(ValueError, match="must return finite seconds > 0"):
        simulate(Colocated(e), Poisson(1.0, requests=1))


def test_bad_transfer_time():
    fleet = Disaggregated(Linear(), 1, 1, kv_transfer_s=lambda tokens: -1.0)
    with pytest.raises(ValueError, match=r"kv_transfer_s\(512\) must return seconds >= 0"):
        simulate(fleet, Poisson(1.0, requests=1))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(rule="p99"), "rule must be one of attainment, percentile, not 'p99'"),
        (dict(target=1.5), "target must be a fraction in (0, 1], not 1.5"),
        (dict(slo=Slo()), "max_rate needs an Slo with ttft_s or tpot_s (or both)"),
        (dict(requests=0), "requests must be an integer >= 1, not 0"),
        (dict(rel_tol=0), "rel_tol must be a finite number > 0, not 0"),
        (dict(max_runs=2), "max_runs must be an integer >= 3, not 2"),
    ],
)
def test_max_rate_bad_arguments(kwargs, message):
    args = dict(slo=Slo(ttft_s=1.0)) | kwargs
    with pytest.raises(ValueError) as info:
        max_rate(Colocated(Linear()), **args)
    assert message in str(info.value)
