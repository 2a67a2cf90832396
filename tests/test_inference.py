"""The inference model: FLOPs and weights against the model's own counts, decode memory-bound
and prefill compute-bound, tensor parallelism, the fast path against the full one,
speculative decoding's algebra, memory errors, every bad input, and the per-op costs and
collectives against OpCosts and Network for the same shapes."""

import doctest
import importlib
import math
import random

import numpy as np
import pytest

from tlm.hardware import load_hardware
from tlm.inference import (
    Engine,
    InferenceDoesNotFit,
    InferenceInputError,
    ShapeBuckets,
    estimate,
    fixed_costs,
)
from tlm.inference.estimate import request_times, tokens_per_verify
from tlm.inference.layout import network_for
from tlm.workloads import layer_ops, load_model

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

FREE = {
    "step_fixed_s": 0.0,
    "collective_fixed_s": 0.0,
    "collective_bandwidth_factor": 1.0,
    "request_fixed_s": 0.0,
}


@pytest.mark.parametrize(
    "module",
    [
        "tlm.inference",
        "tlm.inference.errors",
        "tlm.inference.memory",
        "tlm.inference.step",
        "tlm.inference.estimate",
        "tlm.inference.expert",
        "tlm.inference.pipeline",
        "tlm.studies.infer",
    ],
)
def test_doctests(module):
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0


# ---- FLOPs and weights -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["llama3-8b", "mixtral-8x7b"])
def test_flop_is_two_per_parameter_per_token_plus_attention(name):
    """Model FLOPs of an iteration = 2 x the matrices a token goes through x tokens (the LM
    head only for the sampled rows) + the attention products over the pairs - counted here
    from the parameter count, not from the engine's op list."""
    m = load_model(name)
    e = Engine.build(m, "trn2", "server", tp=1)
    T, S, P = 4096.0, 2.0, 2 * 2048 * 2049 / 2
    h, V = m.hidden, m.vocab
    norms = (2 * m.layers + 1) * m.norm_parameters()
    routed_unused = 0
    if m.moe:  # a token's matrices: its top-k experts and the router, not all experts
        x = m.moe
        routed_unused = m.moe_layers * (x.experts - x.top_k) * m.ffn_parameters(x.expert_ffn)
    body = m.parameters - 2 * V * h - norms - routed_unused  # without embedding and head
    attention = 2 * m.layers * m.heads * 2 * m.head_dim * P  # score and context products
    expected = 2 * body * T + 2 * V * h * S + attention
    assert float(e.step(T, S, 4096, P).flop) == pytest.approx(expected, rel=1e-12)
    # decode (a token per sequence, short context): 2 x active parameters per token
    decode = float(e.step(64, 64, 64, 64).flop)
    assert decode == pytest.approx(2 * m.active_parameters * 64, rel=0.01)


def test_weights_are_the_parameter_count():
    """One chip holds every parameter at tp 1 (bf16: 2 B, fp8: 1 B); at tp 8 each chip holds
    1/8 of the split matrices and the replicated norms (and router) whole."""
    m = load_model("llama3-8b")
    for fmt, size in (("bf16", 2), ("fp8", 1)):
        e = Engine.build(m, "trn2", "server", tp=1, fmt=fmt)
        assert e.memory.weights_bytes == size * m.parameters
    for name in ("llama3-70b", "mixtral-8x7b"):
        m = load_model(name)
        replicated = m.layers * (2 * m.norm_parameters() + m.router_parameters())
        replicated += m.norm_parameters()  # the final norm
        for ep in (1, 8) if m.moe else (1,):
            e = Engine.build(m, "trn2", "server", tp=8, ep=ep)
            whole = (e.memory.weights_bytes * 8 - 2 * 7 * replicated) / 2
            assert whole == m.parameters, (name, ep)


def test_moe_reads_only_the_active_experts():
    """With few tokens not every expert is active: E(1 - (1 - k/E)^T) of them, and only
    their weights are read."""
    m = load_model("mixtral-8x7b")
    e = Engine.build(m, "trn2", "server", tp=8, ep=8)  # one expert per chip
    g1, g64 = e.gemm_times([1.0]), e.gemm_times([64.0])
    i = g1["names"].index("expert_gate_up")
    per_expert = m.ffn_parameters(m.moe.expert_ffn) * 2 / 3 * 2  # gate+up of one, bf16
    active_1 = 1 - (1 - 2 / 8) ** 1
    # (the rest of the bytes: the rows' activations, 16 rows of 4096 in and 28672 out at 64)
    assert g1["hbm_bytes"][i, 0] == pytest.approx(active_1 * per_expert, rel=1e-3)
    active_64 = 1 - (1 - 2 / 8) ** 64
    activations = 64 * 2 / 8 * (4096 + 2 * 14336) * 2
    assert g64["hbm_bytes"][i, 0] == pytest.approx(active_64 * per_expert + activations)


# ---- where the time goes -----------------------------------------------------------------


def test_decode_is_memory_bound_at_the_weight_streaming_efficiency():
    """A batch-1 decode step streams the weights: its time is mostly memory, and its
    HBM-bandwidth utilisation is the calibrated GEMMs' weight-streaming efficiency (weights'
    roofline / calibrated time) - less only by what else the step does."""
    m = load_model("llama3.3-70b")
    e = Engine.build(m, "trn2", "server", tp=16, **FREE)
    it = e.step(1, 1, 2048, 2048)
    assert float(it.memory_s) > 0.7 * float(it.time_s)
    g = e.gemm_times([1.0])
    layers = np.asarray(g["layers"])[:, None]
    efficiency = (layers * g["hbm_bytes"]).sum() / e.costs.hbm_bandwidth_Bps
    efficiency /= (layers * g["seconds"]).sum()
    utilisation = float(it.hbm_bytes) / (float(it.time_s) * 16 * e.costs.hbm_bandwidth_Bps)
    assert 0.75 * efficiency < utilisation <= efficiency, (utilisation, efficiency)


def test_prefill_is_compute_bound():
    e = Engine.build("llama3-70b", "trn2", "server", tp=8, **FREE)
    it = e.step(8192, 1, 8192, 8192 * 8193 / 2)
    assert float(it.compute_s) > 3 * float(it.memory_s)
    mfu = float(it.flop) / (float(it.time_s) * 8 * e.costs.peak_flops("bf16"))
    assert 0.3 < mfu < 0.9


def test_tensor_parallelism_divides_each_chips_compute():
    m = load_model("llama3-70b")
    compute = {}
    for tp in (4, 8, 16):
        e = Engine.build(m, "trn2", "server", tp=tp, **FREE)
        compute[tp] = float(e.step(8192, 1, 8192, 8192 * 8193 / 2).compute_s)
    assert compute[8] < 0.6 * compute[4] and compute[16] < 0.6 * compute[8]


def test_fp8_weights_halve_the_decode_stream():
    m = load_model("llama3.3-70b")
    bf = Engine.build(m, "trn2", "server", tp=16, **FREE).gemm_times([1.0])
    f8 = Engine.build(m, "trn2", "server", tp=16, fmt="fp8", **FREE).gemm_times([1.0])
    weights = lambda g: sum(n * b[0] for n, b in zip(g["layers"], g["hbm_bytes"], strict=True))  # noqa: E731
    assert weights(f8) == pytest.approx(weights(bf) / 2, rel=0.01)


# ---- the fast path -----------------------------------------------------------------------


def test_fast_path_equals_the_full_path():
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    for name, kw in (("llama3.3-70b", dict(tp=16)), ("mixtral-8x7b", dict(tp=8, ep=4))):
        e = Engine.build(name, "trn2", "server", **kw)
        for _ in range(60):
            s = rng.randint(1, 256)
            t = s + rng.choice([0, 0, rng.randint(0, 4096)])
            kv = float(rng.randint(s, 200_000))
            pairs = float(rng.randint(int(kv), int(kv) * 4))
            fast = e.iteration_s(t, s, kv, pairs)
            full = float(e.step(t, s, kv, pairs).time_s)
            assert fast == pytest.approx(full, rel=1e-12, abs=0), (seed, t, s, kv, pairs)
        arrays = e.iteration_s(np.array([1, 64]), np.array([1, 64]), 1e4, 1e4)
        assert arrays.shape == (2,)
        numpy_scalars = e.iteration_s(np.int64(64), np.int64(64), np.float64(1e4), 1e4)
        assert numpy_scalars == pytest.approx(float(arrays[1]), rel=1e-12)


# ---- a request ---------------------------------------------------------------------------


def test_decode_steps_are_each_evaluated():
    """TPOT is the mean of every decode step (keys from prompt + 1 to prompt + output - 1),
    not one midpoint."""
    e = Engine.build("llama3-8b", "trn2", "server", tp=4)
    r = request_times(e, 8, 1000, 101)
    keys = 8 * (1000 + np.arange(1, 101))
    steps = e.step(8, 8, keys, keys)
    assert r["decode"]["time_s"][0] == pytest.approx(float(np.sum(steps.time_s)), rel=1e-12)
    assert r["decode_steps"][0] == 100
    kw = dict(tp=4, batch=8, prompt=1000, output=101)
    est = estimate("llama3-8b", "trn2", "server", **kw, buckets=ShapeBuckets())
    assert est.tpot_s == pytest.approx(float(np.mean(steps.time_s)), rel=1e-12)
    prefill = float(e.step(8000, 8, 8000, 8 * 1000 * 1001 / 2).time_s)
    assert est.ttft_s == pytest.approx(prefill + e.request_fixed_s, rel=1e-12)
    assert e.request_fixed_s == fixed_costs("trn2").request_fixed_s > 0  # the stack's, once
    # as shipped, trn2 runs NxD Inference's buckets: the prompt fills its own (the largest
    # context bucket is the prompt), and every step reads the sequence's bucket, 1,101 keys
    shipped = estimate("llama3-8b", "trn2", "server", **kw)
    assert shipped.buckets == ShapeBuckets((128, 256, 512, 1000), (128, 256, 512, 1101))
    padded = e.step(8, 8, 8 * 1101, 8 * 1101).time_s
    assert shipped.tpot_s == pytest.approx(float(padded), rel=1e-12)
    assert shipped.ttft_s == est.ttft_s and shipped.decode.flop == est.decode.flop
    assert shipped.tpot_s > est.tpot_s


def test_a_format_the_chip_does_not_have_is_an_input_error():
    """FP8 GEMMs on an A100 (no FP8 tensor cores in its hardware file): the inference model's
    input error naming fmt and what the chip has, not the cost table's."""
    with pytest.raises(
        InferenceInputError,
        match=r"fmt must be one of bf16 \(the formats of a100\), not 'fp8'",
    ):
        estimate("llama3-8b", "a100", "server", tp=1, fmt="fp8")
    assert estimate("llama3-8b", "a100", "server", tp=1, kv_fmt="fp8").ttft_s > 0


def test_the_request_cost_is_in_the_ttft_and_e2e_only():
    """request_fixed_s (the serving stack's time per request outside the iterations) adds to
    the TTFT and the end-to-end latency and nothing else: the replica is free meanwhile, so
    the phases (their time, MFU, HBM use), the throughput and the iterations are the same."""
    args = dict(tp=8, batch=4, prompt=512, output=64)
    a = estimate("llama3-8b", "trn2", "server", **args, request_fixed_s=0.0)
    b = estimate("llama3-8b", "trn2", "server", **args, request_fixed_s=0.25)
    assert b.ttft_s - a.ttft_s == pytest.approx(0.25, rel=1e-12)
    assert b.e2e_s - a.e2e_s == pytest.approx(0.25, rel=1e-12)
    assert (a.request_s, b.request_s) == (0.0, 0.25)
    assert b.prefill == a.prefill and b.decode == a.decode and b.tpot_s == a.tpot_s
    assert b.tokens_per_s == a.tokens_per_s  # batch x output over the replica's time
    assert b.prefill.compute_s == a.prefill.compute_s
    assert b.engine.iteration_s(64, 4, 4 * 600, 4 * 600) == a.engine.iteration_s(
        64, 4, 4 * 600, 4 * 600
    )
    with pytest.raises(
        InferenceInputError, match="request_fixed_s must be a finite number of seconds"
    ):
        estimate("llama3-8b", "trn2", "server", **args, request_fixed_s=-1.0)


def test_speculative_decoding_algebra():
    for k in (1, 3, 8):
        for a in (0.0, 0.3, 0.9, 1.0):
            assert tokens_per_verify(k, a) == pytest.approx(sum(a**i for i in range(k + 1)))
    e = Engine.build("llama3.1-405b", "trn2", "server", tp=16)
    d = Engine.build("llama3-8b", "trn2", "server", tp=16)
    for a, k in ((1.0, 4), (0.0, 4), (0.8, 3)):
        r = request_times(e, 1, 2048, 257, d, k, a)
        steps = math.ceil(256 / tokens_per_verify(k, a))
        assert r["decode_steps"][0] == steps
        # one verify step: the target on k + 1 queries per sequence, the draft k times
        first = 2048 + 1
        verify = e.step(k + 1, 1, first + k, (k + 1) * first + k * (k + 1) / 2)
        drafts = sum(float(d.step(1, 1, first + i, first + i).time_s) for i in range(k))
        one = float(verify.time_s) + drafts
        assert r["decode"]["time_s"][0] == pytest.approx(one * steps, rel=0.02)
    plain = estimate("llama3.1-405b", "trn2", "server", tp=16, prompt=2048, output=257)
    sure = estimate(
        "llama3.1-405b", "trn2", "server", tp=16, prompt=2048, output=257,
        draft_model="llama3-8b", draft_tokens=4, acceptance=1.0,
    )  # fmt: skip
    never = estimate(
        "llama3.1-405b", "trn2", "server", tp=16, prompt=2048, output=257,
        draft_model="llama3-8b", draft_tokens=4, acceptance=0.0,
    )  # fmt: skip
    assert sure.tpot_s < plain.tpot_s < never.tpot_s
    assert sure.memory["weights_bytes"] > plain.memory["weights_bytes"]  # the draft's too


def test_speculative_prefill_holds_the_drafts_proposals():
    """Before the first token: the target's prefill, the draft's, and - with separate draft
    calls - the draft's k - 1 further proposals, each an iteration with the fixed cost; fused
    into the target's graphs, the draft's work without an iteration of its own."""
    e = Engine.build("llama3.3-70b", "trn2", "server", tp=16)
    d = Engine.build("llama3-8b", "trn2", "server", tp=8)
    fused = Engine.build("llama3-8b", "trn2", "server", tp=8, step_fixed_s=0.0)
    b, p, k = 2, 1000, 3
    target = float(e.step(b * p, b, b * p, b * p * (p + 1) / 2).time_s)
    sep = request_times(e, b, p, 64, d, k, 0.7)["prefill"]["time_s"][0]
    own = [d.step(b * p, b, b * p, b * p * (p + 1) / 2)]
    own += [d.step(b, b, b * (p + i), b * (p + i)) for i in range(1, k)]
    assert sep == pytest.approx(target + sum(float(x.time_s) for x in own), rel=1e-12)
    fus = request_times(e, b, p, 64, fused, k, 0.7, draft_fused=True)["prefill"]
    pre = float(fused.step(b * p, b, b * p, b * p * (p + 1) / 2).time_s)
    assert fus["time_s"][0] == pytest.approx(target + pre, rel=1e-12)
    assert fus["fixed_s"][0] < sep  # no per-iteration cost of the draft's own
    # through estimate: the fused draft has no fixed cost per iteration, in either phase
    args = dict(tp=16, batch=b, prompt=p, output=64, draft_model="llama3-8b", draft_tokens=k)
    a = estimate("llama3.3-70b", "trn2", "server", **args)
    f = estimate("llama3.3-70b", "trn2", "server", **args, draft_fused=True)
    plain = estimate("llama3.3-70b", "trn2", "server", tp=16, batch=b, prompt=p, output=64)
    assert plain.ttft_s < f.ttft_s < a.ttft_s
    assert f.tpot_s < a.tpot_s
    assert f.prefill.fixed_s < a.prefill.fixed_s and f.decode.fixed_s < a.decode.fixed_s
    with pytest.raises(InferenceInputError, match="draft_fused"):
        estimate("llama3-8b", "trn2", draft_fused=True)
    with pytest.raises(InferenceInputError, match="draft_fused"):
        estimate("llama3-8b", "trn2", draft_model="llama3-8b", draft_fused="yes")


# ---- memory ------------------------------------------------------------------------------


def test_memory_errors_name_the_part_and_the_shortfall():
    with pytest.raises(InferenceDoesNotFit) as weights:
        estimate("llama3.1-405b", "trn2", "server", tp=8)
    assert weights.value.part == "weights"
    assert str(weights.value).startswith(
        "llama3.1-405b does not fit on trn2 with tp=8, pp=1, ep=1, fmt=bf16, kv_fmt=bf16: "
        "the weights (94.5 GiB) and the reserve exceed the chip's HBM (96 GiB) by 0.502 GiB"
    )
    with pytest.raises(InferenceDoesNotFit) as kv:
        estimate("llama3.3-70b", "trn2", "server", tp=16, batch=512, prompt=64, output=8192)
    assert kv.value.part == "KV cache" and kv.value.shortfall_bytes > 0
    assert "the KV cache (" in str(kv.value) and "for 512 x 8256 tokens" in str(kv.value)
    with pytest.raises(InferenceDoesNotFit) as acts:
        estimate("llama3.3-70b", "trn2", "server", tp=16, batch=64, prompt=65536, output=1)
    assert acts.value.part == "activations"


def test_memory_capacity_figures():
    e = Engine.build("llama3.3-70b", "trn2", "server", tp=16, max_tokens=4096)
    mem = e.memory
    assert e.block_tokens == mem.block_tokens == 16
    assert e.kv_capacity_tokens % 16 == 0
    used = mem.weights_bytes + mem.reserve_bytes + float(mem.activations_bytes(4096, 4096))
    assert used + e.kv_capacity_tokens * mem.kv_per_token_bytes <= mem.hbm_bytes
    assert used + (e.kv_capacity_tokens + 16) * mem.kv_per_token_bytes > mem.hbm_bytes
    b = mem.max_batch(context=8192, prompt=1024)
    mem.check(b, 8192, b * 1024)
    with pytest.raises(InferenceDoesNotFit):
        mem.check(b + 1, 8192, (b + 1) * 1024)
    c = mem.max_context(batch=32)
    mem.check(32, c, 32 * 16)
    with pytest.raises(InferenceDoesNotFit):
        mem.check(32, c + 16, 32 * 16)
    # fp8 KV holds twice the tokens per byte
    f8 = Engine.build("llama3.3-70b", "trn2", "server", tp=16, kv_fmt="fp8")
    assert f8.memory.kv_per_token_bytes == mem.kv_per_token_bytes / 2


# ---- cross-checks against the layers below -----------------------------------------------


def test_layer_gemms_are_opcosts_for_the_same_shapes():
    m = load_model("llama3-70b")
    e = Engine.build(m, "trn2", "server", tp=8)
    T = 4096
    g = e.gemm_times([float(T)])
    ops = [o for o in layer_ops(m, sequences=1, queries=T, tp=8) if o.kind == "gemm"]
    assert g["names"] == [o.name for o in ops]
    for i, o in enumerate(ops):
        assert g["gemm_s"][i, 0] == float(e.costs.gemm_s(o.m, o.n, o.k))
        roof = (o.weights * 2 + (o.m * o.k + o.m * o.n) * 2) / e.costs.hbm_bandwidth_Bps
        assert g["seconds"][i, 0] == max(float(e.costs.gemm_s(o.m, o.n, o.k)), roof)


def test_collectives_are_the_networks():
    m = load_model("llama3-70b")
    hw = load_hardware("trn2")
    for system, tp, pp in (("server", 16, 1), ("ultraserver", 16, 4), ("2xserver", 8, 4)):
        e = Engine.build(m, hw, system, tp=tp, pp=pp, micro_batches=1, **FREE)  # one batch
        net = network_for(hw, system)
        T, S = 512, 4
        hidden = T * m.hidden * 2
        ar = float(net.collective_s("all_reduce", tp, 1, hidden, dtype_bytes=2))
        ag = float(net.collective_s("all_gather", tp, 1, hidden, dtype_bytes=2))
        logits = float(net.collective_s("all_gather", tp, 1, S * m.vocab * 4, dtype_bytes=4))
        send = float(net.p2p_s(hidden / tp, tp, pp))
        expected = (2 * m.layers + 1) * ar + logits + (pp - 1) * (send + ag)
        got = float(e.step(T, S, T, T).communication_s)
        assert got == pytest.approx(expected, rel=1e-12), system
    # the server system is the trn2 server's own 4x4 torus; the UltraServer a 64-chip node
    assert network_for(hw, "server").chips_per_node == 16
    assert network_for(hw, "ultraserver").chips_per_node == 64
    # the fixed cost of each collective call is added
    with_fixed = Engine.build(m, hw, "server", tp=16, **{**FREE, "collective_fixed_s": 1e-5})
    free = Engine.build(m, hw, "server", tp=16, **FREE)
    diff = float(with_fixed.step(T, S, T, T).time_s - free.step(T, S, T, T).time_s)
    assert diff == pytest.approx(1e-5 * (2 * m.layers + 2))


def test_the_collective_bandwidth_factor_prices_each_collective_at_bytes_over_it():
    m, hw = load_model("llama3-70b"), load_hardware("trn2")
    slow = Engine.build(m, hw, "server", tp=16, **{**FREE, "collective_bandwidth_factor": 0.25})
    net = network_for(hw, "server")
    T, S = 512, 4
    ar = float(net.collective_s("all_reduce", 16, 1, T * m.hidden * 2 / 0.25, dtype_bytes=2))
    logits = float(net.collective_s("all_gather", 16, 1, S * m.vocab * 4 / 0.25, dtype_bytes=4))
    got = float(slow.step(T, S, T, T).communication_s)
    assert got == pytest.approx((2 * m.layers + 1) * ar + logits, rel=1e-12)
    free = Engine.build(m, hw, "server", tp=16, **FREE)
    assert got > float(free.step(T, S, T, T).communication_s)  # latency terms unscaled
    for bad in (0, 1.5, True):
        with pytest.raises(InferenceInputError, match="collective_bandwidth_factor must be"):
            Engine.build(m, hw, "server", tp=16, collective_bandwidth_factor=bad)


# ---- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: Engine.build("llama3-70b", "trn2", tp=6),
            "tp must be a divisor of the 64 heads of llama3-70b, not 6",
        ),
        (
            lambda: Engine.build("llama3-70b", "trn2", "server", tp=32),
            "tp must be such that tp x pp divides the system's 16 chips (pp 1), not 32",
        ),
        (
            lambda: Engine.build("llama3-70b", "trn2", "server", tp=4, pp=3),
            "pp must be a divisor of the 80 layers, not 3",
        ),
        (
            lambda: Engine.build("llama3-70b", "trn2", "server", tp=4, pp=0),
            "pp must be a positive integer, not 0",
        ),
        (
            lambda: Engine.build("llama3-70b", "trn2", "server", tp=4, ep=2),
            "ep must be 1 for llama3-70b (a dense model), not 2",
        ),
        (
            lambda: Engine.build("mixtral-8x7b", "trn2", "server", tp=8, ep=3),
            "ep must be a divisor of both the 8 experts and tp (8), not 3",
        ),
        (
            lambda: Engine.build("mixtral-8x7b", "trn2", "server", tp=4, ep=8),
            "ep must be a divisor of both the 8 experts and tp (4), not 8",
        ),
        (
            lambda: Engine.build("llama3-8b", "trn2", "server", fmt="fp4"),
            "fmt must be one of bf16, fp8_e4m3, not 'fp4'",
        ),
        (
            lambda: Engine.build("llama3-8b", "trn2", "server", kv_fmt="int8"),
            "kv_fmt must be one of bf16, fp8_e4m3, not 'int8'",
        ),
        (
            lambda: Engine.build("llama3-8b", "trn2", "megaserver"),
            "system must be server, ultraserver, Nxserver or Nxultraserver, not 'megaserver'",
        ),
        (
            lambda: Engine.build("llama3-8b", "h100", "ultraserver"),
            "system must be server or Nxserver for h100 (its scale-up domain is the server of "
            "8 chips), not 'ultraserver'",
        ),
        (
            lambda: Engine.build("llama3-8b", "tpu"),
            "hardware must be one of trn1, trn2, trn3, trn3-gen2, a100, h100 or a hardware file, "
            "not 'tpu'",
        ),
        (
            lambda: Engine.build("llama3-8b", "trn2", step_fixed_s=-1.0),
            "step_fixed_s must be a finite number of seconds >= 0, not -1.0",
        ),
        (
            lambda: estimate("llama3-8b", "trn2", batch=0),
            "batch must be an integer >= 1, not 0",
        ),
        (
            lambda: estimate("llama3-8b", "trn2", prompt=0),
            "prompt must be an integer >= 1, not 0",
        ),
        (
            lambda: estimate("llama3-8b", "trn2", output=-3),
            "output must be an integer >= 1, not -3",
        ),
        (
            lambda: estimate("llama3-8b", "trn2", draft_model="llama3-8b", draft_tokens=0),
            "draft_tokens must be an integer >= 1, not 0",
        ),
        (
            lambda: estimate("llama3-8b", "trn2", draft_model="llama3-8b", acceptance=1.5),
            "acceptance must be a number in [0, 1], not 1.5",
        ),
        (
            lambda: Engine.build("llama3-8b", "trn2").step(0, 1, 0, 0),
            "tokens must be a number >= 1 (or an array of them), not 0.0",
        ),
        (
            lambda: Engine.build("llama3-8b", "trn2").step(4, 8, 0, 0),
            "sequences must be at most tokens (each sequence has a token), not 8.0 > 4.0",
        ),
        (
            lambda: Engine.build("llama3-8b", "trn2").step(4, 1, -1, 0),
            "kv_tokens must be a number >= 0 (or an array of them), not -1.0",
        ),
    ],
)
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(InferenceInputError) as error:
        call()
    assert str(error.value) == message


# ---- the study ---------------------------------------------------------------------------


def test_study_names_the_part_that_does_not_fit():
    from tlm.studies import InputError, run_study

    with pytest.raises(InputError) as error:
        run_study("infer", model="llama3.1-405b", tp=8)
    assert error.value.field == "tp"
    assert "does not fit: llama3.1-405b does not fit on trn2" in str(error.value)
    assert "the weights (94.5 GiB)" in str(error.value)
    with pytest.raises(InputError) as error:
        run_study("infer", model="llama3.3-70b", tp=16, batch=512, prompt=64, output=8192)
    assert error.value.field == "batch" and "the KV cache" in str(error.value)
    with pytest.raises(InputError) as error:
        run_study("infer", model="mixtral-8x7b", tp=8, ep=3)
    assert str(error.value) == (
        "ep: 3 is not allowed; allowed: a divisor of both the 8 experts and tp (8)"
    )
    with pytest.raises(InputError) as error:
        run_study("infer", model="llama3-8b", tp=1, draft_model="llama9")
    assert error.value.field == "draft_model"
    with pytest.raises(InputError) as error:
        run_study("infer", model="llama3-8b", tp=1, draft_fused=True)
    assert str(error.value) == "draft_fused: True is not allowed; allowed: only with --draft-model"
    fused = run_study(
        "infer", model="llama3.3-70b", tp=16, draft_model="llama3.2-1b", draft_fused=True
    )
    assert fused.inputs.draft_fused is True  # in the JSON contract's inputs


def test_study_spec_decoding_and_plot(tmp_path):
    from tlm.studies import run_study

    plot = tmp_path / "breakdown.png"
    r = run_study(
        "infer", model="llama3.1-405b", tp=16, prompt=1024, output=64,
        draft_model="llama3-8b", draft_tokens=4, acceptance=0.8, plot=str(plot),
    ).results  # fmt: skip
    assert r.tokens_per_verify == pytest.approx(tokens_per_verify(4, 0.8))
    assert plot.stat().st_size > 1000
    rows = {row.phase: row for row in r.series}
    assert rows["prefill"].time_s + r.request_fixed_s == pytest.approx(r.ttft_s)
    assert rows["decode"].time_s == pytest.approx(r.tpot_s * 63)


def test_an_engine_built_for_another_capacity_shares_the_kept_parts_safely():
    """Engine.build with another max_tokens builds another engine sharing the parts' figures
    (one shape); it must price what the first filled."""
    first = Engine.build("llama3-8b", "trn2", "server", tp=2, max_tokens=333, **FREE)
    copy = Engine.build("llama3-8b", "trn2", "server", tp=2, max_tokens=444, **FREE)
    assert copy is not first and copy.kv_capacity_tokens != first.kv_capacity_tokens
    a = float(first.step(64, 4, 256, 256).time_s)
    assert float(copy.step(64, 4, 256, 256).time_s) == a


def test_an_input_error_names_its_field_value_and_what_is_allowed():
    """The study maps the field to its flag: nothing parses the message."""
    with pytest.raises(InferenceInputError) as caught:
        Engine.build("llama3-8b", "trn2", "server", tp=6)
    error = caught.value
    assert (error.field, error.value) == ("tp", 6)
    assert str(error) == f"tp must be {error.allowed}, not 6"
    with pytest.raises(InferenceInputError) as caught:
        estimate("llama3-8b", "trn2", "server", tp=1, batch=0)
    assert (caught.value.field, caught.value.value, caught.value.allowed) == (
        "batch",
        0,
        "an integer >= 1",
    )


def test_a_replica_spec_is_a_validated_hashable_value():
    """Equal specs (a model by name or loaded) are one value: one engine is built for both;
    bad fields are refused where the spec is made, naming the field."""
    from tlm.inference import FixedCosts, ReplicaSpec

    a = ReplicaSpec("llama3-8b", "trn2", "server", tp=4, pp=2)
    b = ReplicaSpec(load_model("llama3-8b"), "trn2", "server", tp=4, pp=2, micro_batches=2)
    assert a == b and hash(a) == hash(b) and a.micro_batches == 2
    fixed = FixedCosts.given("trn2")
    assert Engine.of(a, fixed) is Engine.of(b, fixed)
    assert "replaced by given values" in FixedCosts.given("trn2", step_fixed_s=1e-3).source
    for field, value in (("tp", 6), ("micro_batches", 0), ("fmt", "fp4"), ("max_tokens", 0)):
        with pytest.raises(InferenceInputError) as caught:
            ReplicaSpec("llama3-8b", "trn2", "server", **{"tp": 4, field: value})
        assert (caught.value.field, caught.value.value) == (field, value)
    with pytest.raises(InferenceInputError, match="collective_bandwidth_factor must be"):
        FixedCosts.given("trn2", collective_bandwidth_factor=1.5)


def test_input_errors_pickle_with_their_fields():
    """A search's chunks run on Dask workers: their errors come back whole."""
    import pickle

    from tlm.inference.serving import Scheduler

    e = pickle.loads(pickle.dumps(InferenceInputError("tp", 6, "a divisor", shown="6!")))
    assert (e.field, e.value, e.allowed, str(e)) == (
        "tp",
        6,
        "a divisor",
        "tp must be a divisor, not 6!",
    )
    with pytest.raises(InferenceInputError) as caught:  # the serving simulation's too
        Scheduler(max_batch=0)
    s = pickle.loads(pickle.dumps(caught.value))
    assert (type(s), s.field, str(s)) == (
        InferenceInputError,
        "max_batch",
        "max_batch must be an integer >= 1, not 0",
    )


def test_a_replica_spec_refuses_bad_memory_fields_and_fixed_costs_unknown_names():
    from tlm.inference import FixedCosts, ReplicaSpec

    for field, value in (
        ("reserve_bytes", -1e12),
        ("block_tokens", 0),
        ("extra_weights_bytes", math.nan),
    ):
        with pytest.raises(InferenceInputError) as caught:
            ReplicaSpec("llama3-8b", "trn2", "server", tp=4, **{field: value})
        assert caught.value.field == field
    with pytest.raises(TypeError, match="not step_fixed"):
        FixedCosts.given("trn2", step_fixed=5)
    with pytest.raises(InferenceInputError, match="step_fixed_s must be a finite number"):
        FixedCosts.given("trn2", step_fixed_s=math.inf)


def test_an_estimate_takes_values_and_its_keywords_build_the_same():
    """estimate_of takes the replica, the fixed costs, the requests and the speculation as
    values (frozen, hashable, each refusing a bad field by name); estimate's keywords build
    those values, so both give the same figures."""
    from tlm.inference import (
        FixedCosts,
        ReplicaSpec,
        RequestBatch,
        Speculation,
        estimate_of,
    )

    requests = RequestBatch(batch=2, prompt=512, output=32)
    assert requests == RequestBatch(2, 512, 32) and hash(requests) == hash(RequestBatch(2, 512, 32))
    speculation = Speculation("llama3-8b", draft_tokens=3, acceptance=0.5)
    assert speculation.draft_model.name == "llama3-8b" and hash(speculation)
    with pytest.raises(AttributeError):
        requests.batch = 4
    for make, field, value, message in (
        (RequestBatch, "batch", 0, "batch must be an integer >= 1, not 0"),
        (RequestBatch, "output", True, "output must be an integer >= 1, not True"),
        (Speculation, "draft_tokens", 0, "draft_tokens must be an integer >= 1, not 0"),
        (Speculation, "acceptance", -0.1, "acceptance must be a number in [0, 1], not -0.1"),
        (Speculation, "draft_fused", 1, "draft_fused must be True or False, not 1"),
    ):
        args = {"draft_model": "llama3-8b"} if make is Speculation else {}
        with pytest.raises(InferenceInputError) as caught:
            make(**args, **{field: value})
        assert (caught.value.field, str(caught.value)) == (field, message)
    spec = ReplicaSpec("llama3.3-70b", "trn2", "server", tp=16)
    fixed = FixedCosts.given("trn2")
    by_value = estimate_of(spec, fixed, requests, speculation)
    by_keyword = estimate(
        "llama3.3-70b", "trn2", tp=16, batch=2, prompt=512, output=32,
        draft_model="llama3-8b", draft_tokens=3, acceptance=0.5,
    )  # fmt: skip
    assert by_value == by_keyword and by_value.engine is by_keyword.engine
    assert by_value.engine.spec.max_tokens == 2 * 512  # sized to the batch's prompts


def test_a_hardware_pickles_without_its_hash():
    """str hashes differ between processes: a worker works the hash out again."""
    import pickle

    hw = load_hardware("trn2")
    hash(hw)
    back = pickle.loads(pickle.dumps(hw))
    assert "_hash" not in vars(back) and back == hw and hash(back) == hash(hw)


def test_max_sequences_sets_the_kv_capacity_beside_fewer_sampled_rows():
    """An iteration of max_tokens tokens sampling fewer sequences leaves more room for KV."""
    wide = Engine.build("llama3-8b", "trn2", "server", tp=2, max_tokens=4096, **FREE)
    few = Engine.build(
        "llama3-8b", "trn2", "server", tp=2, max_tokens=4096, max_sequences=8, **FREE
    )
    assert few.kv_capacity_tokens == few.memory.kv_capacity_tokens(4096, 8)
    assert few.kv_capacity_tokens > wide.kv_capacity_tokens
    with pytest.raises(InferenceInputError, match="max_sequences must be a positive integer"):
        Engine.build("llama3-8b", "trn2", "server", tp=2, max_sequences=0)
