"""tlm.inference.serving.replica: iterations computed by hand (the engine's arguments, the
latencies), batching, preemption when the KV cache runs out, and rejection of a request
whose KV never fits."""

import json
import math

import numpy as np
import pytest
from serving_doubles import Linear, trace, workload

from tlm.inference.serving import (
    Colocated,
    Poisson,
    Scheduler,
    simulate,
)

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off


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


def test_everyone_rejected(tmp_path):
    run = simulate(Colocated(Linear(capacity=16)), trace(tmp_path, [(1.0, 20, 2)]))
    assert run.rejected == 1 and run.completed == 0 and run.iterations == 0
    assert math.isnan(run.ttft_s.p99) and run.throughput_rps == 0.0
    json.dumps(run.figures())
