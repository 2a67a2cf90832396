"""tlm.inference.serving.fleet: disaggregated pools and the KV transfer, the routers, and every
bad fleet, engine or link."""

import numpy as np
import pytest
from serving_doubles import Linear, check_bad_argument, trace, workload

from tlm.inference.serving import (
    Colocated,
    Disaggregated,
    KvLink,
    Poisson,
    Scheduler,
    simulate,
)

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off


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


def _transfer(tokens):
    return 0.0


@pytest.mark.parametrize(
    "make, args, field, message",
    [
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
    """Each fleet and the link checks its fields when built."""
    check_bad_argument(make, args, field, message)


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


def test_bad_transfer_time():
    fleet = Disaggregated(Linear(), 1, 1, kv_transfer_s=lambda tokens: -1.0)
    with pytest.raises(ValueError, match=r"kv_transfer_s\(512\) must return seconds >= 0"):
        simulate(fleet, Poisson(1.0, requests=1))
