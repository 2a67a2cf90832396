"""Pipeline micro-batches (tlm.inference.pipeline): the hand-computable cases of the rule, the
fast path against the full one, the serving simulation's duck type, bad input. The layouts
that existed before micro-batches are among the golden ones (tests/test_inference_cold.py)."""

import random

import numpy as np
import pytest

from tlm.inference import Engine, InferenceInputError, estimate
from tlm.inference.layout import network_for

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

FREE = {
    "step_fixed_s": 0.0,
    "collective_fixed_s": 0.0,
    "collective_bandwidth_factor": 1.0,
    "request_fixed_s": 0.0,
}


# ---- the rule ----------------------------------------------------------------------------


def test_two_micro_batches_double_the_tokens_at_the_same_latency():
    """pp 2 with 2 micro-batches of b sequences against 1 batch of b: each stage's time is a
    batch of b in both, so a token's latency (TPOT) is the same and the decode's tokens/s
    doubles (the shipped fixed cost covers the stages' imbalance: 2 t <= L)."""
    kw = dict(system="server", tp=4, pp=2, prompt=512, output=32)
    one = estimate("llama3-8b", "trn2", batch=8, micro_batches=1, **kw)
    two = estimate("llama3-8b", "trn2", batch=16, micro_batches=2, **kw)
    assert two.tpot_s == one.tpot_s
    assert two.decode_tokens_per_s == pytest.approx(2 * one.decode_tokens_per_s, rel=1e-12)
    assert two.decode.flop == pytest.approx(2 * one.decode.flop, rel=1e-12)
    # the default is pp micro-batches
    assert estimate("llama3-8b", "trn2", batch=16, **kw).tpot_s == two.tpot_s


def _parts(engine, tokens, sequences):
    """The stages' ends of a micro-batch, from the engine's parts and the network directly:
    tp 1, so no all-reduce or all-gather; the fixed costs free."""
    m = engine.model
    first = float(engine.costs.memory_s(tokens * m.hidden * 2))
    seq = engine._sequence_part(np.array([float(sequences)]))
    last = float(seq["compute"][0] + seq["memory"][0] + seq["communication"][0])
    net = network_for(engine.hardware, engine.system)
    sends = (engine.pp - 1) * float(net.p2p_s(tokens * m.hidden * 2, 1, engine.pp))
    return first, last, sends


@pytest.mark.parametrize("m", [2, 3, 4, 8])
def test_more_micro_batches_than_stages_wait_on_the_busiest_stage(m):
    """Without fixed costs, a micro-batch's stage is the layers' share plus the larger end;
    steady state max(L, m t), from empty L + (m - 1) t - hand-added from the parts."""
    single = Engine.build("llama3-8b", "trn2", "server", tp=1, pp=2, micro_batches=1, **FREE)
    wrapped = Engine.build("llama3-8b", "trn2", "server", tp=1, pp=2, micro_batches=m, **FREE)
    b = 16
    L = float(single.step(b, b, b * 1000, b * 1000).time_s)
    first, last, sends = _parts(single, b, b)
    t = (L - sends - first - last) / 2 + max(first, last)
    steady = wrapped.step(m * b, m * b, m * b * 1000, m * b * 1000)
    assert float(steady.time_s) == pytest.approx(max(L, m * t), rel=1e-12)
    # beyond two, the micro-batches queue at the busiest stage (at two, only its surplus
    # over the other - the LM head against the embedding - when nothing is fixed)
    assert m * t > L and (m > 2 or 2 * t - L < 0.2 * L)
    empty = wrapped.step(m * b, m * b, m * b * 1000, m * b * 1000, from_empty=True)
    assert float(empty.time_s) == pytest.approx(L + (m - 1) * t, rel=1e-12)
    # the breakdown adds up to the time, the FLOPs are the whole iteration's
    parts = steady.compute_s + steady.memory_s + steady.communication_s + steady.fixed_s
    assert float(parts) == pytest.approx(float(steady.time_s), rel=1e-12)
    whole = single.step(m * b, m * b, m * b * 1000, m * b * 1000)
    assert float(steady.flop) == float(whole.flop)


def test_the_prefill_fills_the_pipeline_and_the_latency_is_a_micro_batchs():
    """A batch's prefill in 2 micro-batches: the first comes out after L, the second a stage
    later; compute-bound, that is sooner than one batch of both."""
    kw = dict(system="server", tp=4, pp=2, prompt=2048, output=2)
    one = estimate("llama3-8b", "trn2", batch=8, micro_batches=1, **kw)
    two = estimate("llama3-8b", "trn2", batch=8, micro_batches=2, **kw)
    half = estimate("llama3-8b", "trn2", batch=4, micro_batches=1, **kw)
    assert half.ttft_s < two.ttft_s < one.ttft_s
    assert two.micro_batches == 2 and one.micro_batches == 1


def test_fewer_sequences_than_micro_batches_and_uneven_splits():
    """A sequence is never split: 1 sequence is one micro-batch (the engine's own time); 6 in
    4 micro-batches price the largest (2 sequences)."""
    e = Engine.build("llama3-8b", "trn2", "server", tp=4, pp=4)
    single = Engine.build("llama3-8b", "trn2", "server", tp=4, pp=4, micro_batches=1)
    assert e.iteration_s(1, 1, 900, 900) == single.iteration_s(1, 1, 900, 900)
    assert e.iteration_s(6, 6, 600, 600) == single.iteration_s(2, 2, 150.0, 150.0)


def test_fast_path_equals_the_full_path():
    seed = random.randrange(2**32)
    print("seed", seed)
    rng = np.random.default_rng(seed)
    for args in (
        dict(model="llama3-8b", system="server", tp=4, pp=4),
        dict(model="mixtral-8x7b", system="ultraserver", tp=4, pp=4, ep=2, micro_batches=6),
        dict(model="mixtral-8x7b", system="server", tp=2, ep=8, pp=2, dp_attention=True),
    ):
        e = Engine.build(args.pop("model"), "trn2", args.pop("system"), **args)
        assert e.micro_batches > 1
        for _ in range(60):
            T = int(rng.integers(1, 5000))
            S = int(rng.integers(1, T + 1))
            KV, P = float(rng.integers(0, 10**6)), float(rng.integers(0, 10**8))
            fast = e.iteration_s(T, S, KV, P)
            assert fast == pytest.approx(float(e.step(T, S, KV, P).time_s), rel=1e-12), (T, S)


def test_the_serving_simulation_runs_a_micro_batched_replica():
    from tlm.inference.serving import Colocated, Poisson, Workload, simulate

    e = Engine.build("llama3-8b", "trn2", "server", tp=4, pp=2, max_tokens=2048)
    assert e.chips == 8 and e.kv_capacity_tokens > 0 and e.block_tokens == 16
    r = simulate(Colocated(e), Poisson(20.0, 200, workload=Workload(256, 32, seed=3)))
    assert r.completed == 200


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(pp=2, micro_batches=0), "micro_batches must be a positive integer, not 0"),
        (dict(pp=2, micro_batches=True), "micro_batches must be a positive integer, not True"),
        (
            dict(pp=1, micro_batches=2),
            "micro_batches must be 1 when pp is 1 (micro-batches fill pipeline stages), not 2",
        ),
    ],
)
def test_bad_micro_batches_are_named(kwargs, message):
    with pytest.raises(InferenceInputError) as error:
        Engine.build("llama3-8b", "trn2", "server", tp=4, **kwargs)
    assert str(error.value) == message


def test_a_micro_batched_step_names_the_iterations_values():
    e = Engine.build("llama3-8b", "trn2", "server", tp=4, pp=2)
    with pytest.raises(InferenceInputError) as error:
        e.step(4, 8, 0, 0)
    assert str(error.value) == (
        "sequences must be at most tokens (each sequence has a token), not 8.0 > 4.0"
    )
    with pytest.raises(InferenceInputError, match="tokens must be a number >= 1"):
        e.step(0, 1, 0, 0)


def test_the_study_takes_micro_batches_and_names_the_flag(capsys):
    from tlm.studies import run_study
    from tlm.studies.cli import main

    r = run_study("infer", model="llama3-8b", tp=4, pp=2, batch=8, prompt=256, output=8)
    assert r.results.micro_batches == 2 and r.inputs.micro_batches == 2
    args = ["infer", "--model", "llama3-8b", "--tp", "4", "--micro-batches", "2"]
    assert main(args) == 2
    assert "--micro-batches: 2 is not allowed; allowed: 1 when --pp is 1" in capsys.readouterr().err
