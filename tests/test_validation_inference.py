"""The inference model against published latencies (tlm.validation.inference): the documented
bounds, the fitted figures the package ships, the rows left out and why; the rows under load
simulated (stable across seeds, the fit a fixed point), the rows of one request equal to the
simulation of one client, and the tool's token count."""

import tomllib
from dataclasses import replace
from importlib import resources

import numpy as np
import pytest

from tlm.inference import Engine, estimate, fixed_costs
from tlm.inference.buckets import stack_buckets
from tlm.inference.layout import FIXED_COSTS
from tlm.inference.serving import PREFILLS, ClosedLoop, Colocated, Scheduler, Workload, simulate
from tlm.validation import inference
from tlm.validation.inference import (
    BOUND,
    FIT,
    LOAD_SEED,
    MAX_THROUGHPUT,
    TRTLLM_BENCH_DEVICE_MEMORY_BYTES,
    held_factor,
    trtllm_bench_limits,
    validate_inference,
)

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off


@pytest.fixture(scope="module")
def v():
    return validate_inference()


def test_every_judged_row_within_its_documented_bound(v):
    """docs/validation.md's bound on |model / published - 1| of every judged latency row, those
    the sources leave unambiguous ("good") and the ambiguous ones (their settings uncertain:
    see the table) alike: the issue's 25 % (BOUND). The maximum-throughput rows, to the same
    bound, are test_max_throughput_rows_within_their_documented_bound's."""
    judged = [r for r in v.rows if r.role == "judge" and r.source not in MAX_THROUGHPUT]
    assert len(judged) >= 12
    for r in judged:
        assert abs(r.calibrated_error_fraction) <= BOUND, (r.detail.id, r.calibrated_error_fraction)
    good = [r for r in judged if r.detail.reliability == "good"]
    assert len(good) >= 3


def test_the_fit_rows_are_reproduced_and_beat_the_bare_model(v):
    fit = [r for r in v.rows if r.role == "fit"]
    assert {r.detail.id for r in fit} == {i for ids in FIT.values() for i in ids}
    # least-squares residuals: H100 four figures to five rows, reproduced; trn2 three to four
    # (its bandwidth factor held at 1: the collectives' own mechanisms), each within the
    # judged rows' bound - the 70B's 12,288-token prefill 15 % slow (docs/validation.md)
    for r in fit:
        held = held_factor(r.system)
        assert abs(r.calibrated_error_fraction) < (0.16 if held else 0.05), r.detail.id
    assert any(held_factor(r.system) for r in fit) and not all(held_factor(r.system) for r in fit)
    # a per-operator estimator without fixed costs is optimistic on latencies, as the issue
    # says of peers
    latency = [r for r in v.rows if r.quantity in ("ttft_s", "tpot_s", "e2e_s")]
    bare = np.array([r.detail.bare / r.published - 1 for r in latency])
    fitted = np.array([r.calibrated_error_fraction for r in latency])
    assert np.median(bare) < -0.2
    assert np.abs(fitted).mean() < np.abs(bare).mean() / 2


def test_as_shipped_is_the_fit_not_the_bare_model(v):
    """A row's ``shipped`` figure is the model at the fixed costs the package ships (what
    ``trnsim validate`` reports as shipped), so it follows the fit; the bare model (no fixed
    costs) is the row's detail, the per-operator estimator the docs compare against."""
    for r in v.rows:
        assert r.shipped == pytest.approx(r.calibrated, rel=0.02), r.detail.id
    latency = [r for r in v.rows if r.quantity in ("ttft_s", "tpot_s", "e2e_s")]
    assert all(r.detail.bare < r.shipped for r in latency)


def test_the_shipped_fixed_costs_are_the_fit(v):
    for system, p in v.parameters.items():
        shipped = fixed_costs(system)
        assert "FITTED" in shipped.source
        assert shipped.step_fixed_s == pytest.approx(p["step_fixed_s"], rel=5e-3)
        assert shipped.collective_fixed_s == pytest.approx(p["collective_fixed_s"], rel=5e-3)
        assert shipped.collective_bandwidth_factor == p["collective_bandwidth_factor"]
        assert ("MECHANISM" in shipped.source) == held_factor(system)
        assert shipped.request_fixed_s == pytest.approx(p["request_fixed_s"], rel=5e-3)
    # the generations without published rows stand on their software stack's fit: every
    # shipped hardware file (trn3-gen2 got the ASSUMED default until this checked them all)
    from tlm.hardware import HARDWARE

    lenders = {"a100": "h100", "trn1": "trn2", "trn3": "trn2", "trn3-gen2": "trn2"}
    assert set(HARDWARE) == set(lenders) | set(v.parameters)
    for system, lender in lenders.items():
        borrowed, fitted = fixed_costs(system), fixed_costs(lender)
        assert "BORROWED" in borrowed.source
        for name in ("step_fixed_s", "collective_fixed_s", "collective_bandwidth_factor"):
            assert getattr(borrowed, name) == getattr(fitted, name), (system, name)
        assert borrowed.request_fixed_s == fitted.request_fixed_s


def test_rows_not_modelled_say_why_and_every_row_is_accounted_for(v):
    text = resources.files("tlm.validation").joinpath("inference.toml").read_text()
    published = tomllib.loads(text)["row"]
    assert len(v.rows) + len(v.skipped) == len(published)
    for _, why in v.skipped:
        assert why and len(why) > 10
    assert any("throughput" in why for _, why in v.skipped)
    skipped = dict(v.skipped)
    mlperf = [r["id"] for r in published if r["source"].startswith("MLPERF")]
    assert len(mlperf) == 3
    for i in mlperf:
        assert "layout" in skipped[i] and "length distribution" in skipped[i], skipped[i]
    assert not [i for i in skipped if inference._row(i)["source"] in MAX_THROUGHPUT]


def _bucket_specs(s, system):
    """The scheduler's context and token bucket specs of a row's settings ``s``."""
    given = s["buckets"]
    return (given.context, given.token) if given else (stack_buckets(system)[0],) * 2


def _spec_settings(r):
    return inference._settings(inference._row(r.detail.id))


def _params(v, system):
    """The system's fitted figures in :data:`~tlm.inference.layout.FIXED_COSTS`' order."""
    return tuple(v.parameters[system][k] for k in FIXED_COSTS)


@pytest.mark.parametrize("prefill", PREFILLS)
def test_rows_of_one_request_equal_the_simulation_of_one_client(v, prefill):
    """A row measured one request at a time stays :func:`estimate`'s figure, and a closed loop
    of one client (back-to-back requests, a token budget holding the prompt) gives the same
    figure under either prefill policy. (Speculative rows apart: the serving simulation has no
    speculation.)"""
    alone = [r for r in v.rows if not r.detail.load and "draft_model" not in _spec_settings(r)]
    assert len(alone) >= 12
    for r in alone:
        row = inference._row(r.detail.id)
        s = inference._settings(row)
        engine = Engine.build(
            s["model"],
            r.system,
            row["chips"],
            tp=s["tp"],
            fmt=s["fmt"],
            kv_fmt=s["kv_fmt"],
            **dict(zip(FIXED_COSTS, _params(v, r.system), strict=True)),
            max_tokens=s["prompt"],
        )
        run = simulate(
            Colocated(engine),
            ClosedLoop(concurrency=1, requests=2, workload=Workload(s["prompt"], s["output"])),
            Scheduler(1, s["prompt"], prefill, "greedy", *_bucket_specs(s, r.system)),
        )
        assert run.per_request["ttft_s"][1] == pytest.approx(run.ttft_s.mean, rel=1e-12)
        figure = {"ttft_s": run.ttft_s.mean, "tpot_s": run.tpot_s.mean, "e2e_s": run.e2e_s.mean}
        simulated = figure[r.quantity]
        counted = row.get("counted_output_tokens")
        if r.quantity == "tpot_s" and counted is not None:
            simulated = (run.e2e_s.mean - run.ttft_s.mean) / (counted - 1)
        assert simulated == pytest.approx(r.calibrated, rel=1e-9), r.detail.id


def test_rows_under_load_are_simulated_as_published(v):
    """The rows with a request rate or more than one client are the simulated ones; batch =
    concurrency (the old assumption) is gone: under load the figures move."""
    loaded = {r.detail.id: r for r in v.rows if r.detail.load and r.source not in MAX_THROUGHPUT}
    published = {r["id"]: r for r in inference._published()[1]}
    expect = {
        i
        for i, r in published.items()
        if (r.get("qps") or (r.get("concurrency") or 1) > 1)
        and i in {x.detail.id for x in v.rows}
        and r["speculative"]["method"] == "none"
        and r["source"] not in MAX_THROUGHPUT
    }
    assert set(loaded) == expect and len(expect) == 8
    # the closed loop's output tokens/s: the simulation's, tokens over the time to the last
    r = loaded["trn2-llama3-8b-bf16-tp8-c2-512-128-throughput"]
    assert r.quantity == "throughput_tokens_per_s" and "2 clients" in r.detail.load
    # a speculative row of two clients is their batch's decode (no speculation in serving)
    r = next(x for x in v.rows if x.detail.id == "trn2-llama3-8b-bf16-tp8-c2-512-128-eagle3k3-tpot")
    assert not r.detail.load and "batch 2" in r.case and "EAGLE-3" in r.case
    for r in loaded.values():
        assert ("Poisson" in r.detail.load) == (published[r.detail.id].get("qps") is not None), (
            r.detail.id
        )
    # ~11 requests in flight at 2/s for 467/256 on the 70B: the ITL is the batch's, not one's
    r = loaded["h100-llama3-70b-bf16-tp4-qps2-467-256-itl"]
    one = inference._value(r.detail.id, *_params(v, "h100"))
    assert r.calibrated > 1.05 * one
    # two clients on Neuron: one prefill at a time, so the TTFTs are one and two prefills
    r = loaded["trn2-llama3-8b-bf16-tp8-c2-512-128-ttft"]
    assert "separate" in r.detail.load and "2 clients" in r.detail.load


def test_poisson_rows_are_stable_across_seeds(v):
    """Each Poisson row's statistic at seed 1 is within 1 % of seed 0's (LOAD_REQUESTS)."""
    seen = 0
    for r in v.rows:
        row = inference._row(r.detail.id)
        if "Poisson" not in r.detail.load:
            continue
        s = inference._settings(row)
        load, scheduler = inference._load(row)
        load = replace(load, workload=replace(load.workload, seed=LOAD_SEED + 1))
        key = (row["system"], row["chips"], s["model"], s["tp"], s["fmt"], s["kv_fmt"])
        key += (load, scheduler)
        other = inference._served(key, *_params(v, r.system))[r.quantity]
        stat = other.mean if row["statistic"] == "mean" else other.p50
        print(
            f"{r.detail.id}: seed {LOAD_SEED} {r.calibrated:.6g}, seed {LOAD_SEED + 1} {stat:.6g}"
        )
        assert stat == pytest.approx(r.calibrated, rel=0.01), r.detail.id
        seen += 1
    assert seen == 5


def test_the_fit_under_load_is_a_fixed_point(v):
    """Holding each fit row's ratio (under load / one request) at the fitted figures and
    solving again gives the figures back within 0.1 % (the iteration's stopping rule)."""
    for system, ids in FIT.items():
        args = _params(v, system)
        ratio = np.array([inference._modelled(i, *args) / inference._value(i, *args) for i in ids])
        assert (ratio != 1).any()  # each system has a fit row under load
        y = np.array([inference._row(i)["value"] for i in ids])
        again = inference._fit_once(system, ids, y, ratio)
        assert not inference._moved(v.parameters[system], again), system
        assert 1 <= v.rounds[system] <= 20


def test_the_non_negative_least_squares_meet_their_optimality_conditions():
    """_nnls on random problems of the fit's shape (4-8 rows, 3 unknowns; seeded), many with
    the unconstrained solution negative somewhere: x >= 0 and the KKT conditions of the
    convex problem hold - the gradient a^T (a x - b) zero where x > 0 and >= 0 where x = 0 -
    so x is the optimum; and no feasible point of a grid around it does better."""
    seed = 2411
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    bound = 0
    for _ in range(300):
        rows = int(rng.integers(4, 9))
        a = rng.normal(size=(rows, 3))
        b = rng.normal(size=rows)
        x = inference._nnls(a, b)
        free, *_ = np.linalg.lstsq(a, b, rcond=None)
        bound += bool((free < 0).any())
        g = a.T @ (a @ x - b)
        assert (x >= 0).all()
        assert np.allclose(g[x > 0], 0, atol=1e-9), (x, g)
        assert (g[x == 0] >= -1e-9).all(), (x, g)
        best = float(np.sum((a @ x - b) ** 2))
        for step in rng.normal(scale=0.05, size=(20, 3)):
            y = np.maximum(x + step, 0)
            assert np.sum((a @ y - b) ** 2) >= best - 1e-12
    assert bound > 100  # the bound binds in many of them


def test_the_tools_token_count_defines_the_405b_tpot(v):
    """LLMPerf counted 1,785 output tokens (Llama 2 tokenizer) for 1,500 generated: its TPOT is
    the decode time over 1,784 gaps, i.e. the model's per-token time x 1,499 / 1,784."""
    r = next(x for x in v.rows if x.detail.id == "trn2-llama3.1-405b-bf16-tp64-b1-10000-1500-tpot")
    assert inference._row(r.detail.id)["counted_output_tokens"] == 1785
    e = estimate(
        "llama3.1-405b",
        "trn2",
        16,
        tp=16,
        prompt=10000,
        output=1500,
        **dict(zip(FIXED_COSTS, _params(v, "trn2"), strict=True)),
        check_memory=False,
        buckets=inference.DEPLOYED_BUCKETS["trn2-llama3.1-405b-bf16-tp64-b1-10000-1500"],
    )
    assert r.calibrated == pytest.approx(e.tpot_s * 1499 / 1784, rel=1e-12)
    assert r.detail.reliability == "ambiguous"


def test_speculative_rows_use_the_published_acceptance_length():
    """A row's published mean acceptance length E is met by the acceptance it is modelled at
    (tokens_per_verify(k, a) = E), and the EAGLE-3 head is one layer with the draft vocabulary."""
    for k, length in ((3, 3.22), (7, 1.0), (4, 5.0), (2, 2.5)):
        a = inference._acceptance_for(k, length)
        assert inference.tokens_per_verify(k, a) == pytest.approx(length, abs=1e-9)
    with pytest.raises(ValueError, match="acceptance length"):
        inference._acceptance_for(3, 4.5)
    row = inference._row("trn2-llama3-8b-bf16-tp8-c2-512-128-eagle3k3-tpot")
    s = inference._settings(row)
    head = s["draft_model"]
    assert (head.layers, head.vocab, head.hidden, s["draft_tokens"]) == (1, 32000, 4096, 3)
    assert s["draft_fused"] is False  # vLLM Neuron's proposer: its own compiled calls
    fused = inference._settings(
        inference._row("trn2-llama3.3-70b-bf16-tp64-b1-10000-1500-spec1b7-ttft")
    )
    assert fused["draft_fused"] is True and fused["draft_model"] == "llama3.2-1b"
    # the plain run's buckets: the 10,000-token prompt encoded in the 12,288 bucket
    assert fused["prompt"] == 10000 and fused["buckets"].padded_context(10000) == 12288


# ------------------------------------------------------------------ maximum-throughput rows


def test_trtllm_bench_limits_by_hand():
    """trtllm-bench's heuristic, by hand for Llama 3 8B in FP8 on one H100 at 128/2048: KV
    2 x 32 layers x 8 heads x 128 x 1 B = 65,536 B a token; 81,559 MiB less 8.03e9 B of
    weights, x 0.95, over 65,536 x 2,176 = 516.2 requests; 516.2 rounds up by 128 (256 <= x <
    1,024) to 640; 516.2 x (1 + 128 / 2,048) = 548.5 tokens, below 4,096, at least 2,048."""
    free = TRTLLM_BENCH_DEVICE_MEMORY_BYTES - 8_030_261_248
    fits = free * 0.95 / 65536 / 2176
    assert fits == pytest.approx(516.2, abs=0.05)
    assert trtllm_bench_limits("llama3-8b", 1, 1, 128, 2048) == (640, 2048, pytest.approx(fits))
    # the rounding's other branches: below 256 (32s, at least 64); 1,024 and above (256s);
    # tokens from 8,192 up (1,024s) and 4,096-8,192 (512s); the 4,096 cap per stage
    assert trtllm_bench_limits("llama3.3-70b", 2, 1, 8192, 1024)[:2] == (64, 2048)
    assert trtllm_bench_limits("llama3-70b", 2, 1, 5000, 500)[:2] == (128, 2048)
    assert trtllm_bench_limits("llama3-70b", 8, 1, 128, 2048)[:2] == (1792, 2048)
    assert trtllm_bench_limits("llama3-70b", 4, 1, 2048, 128)[:2] == (768, 13312)
    assert trtllm_bench_limits("llama3.1-405b", 8, 1, 2048, 128)[:2] == (512, 8192)
    b, t, fits = trtllm_bench_limits("llama3-8b", 1, 1, 16, 16)
    assert fits > 4096 and (b, t) == (4096, 8192)
    assert trtllm_bench_limits("llama3-8b", 1, 2, 16, 16)[:2] == (2048, 4096)
    with pytest.raises(ValueError, match="leaves no room for one request"):
        trtllm_bench_limits("llama3.1-405b", 1, 1, 128, 128)
    with pytest.raises(ValueError, match="output must be an integer >= 1, not 0"):
        trtllm_bench_limits("llama3-8b", 1, 1, 128, 0)


def _offline_rows(v):
    return [r for r in v.rows if r.source in MAX_THROUGHPUT]


def test_max_throughput_rows_are_offline_runs(v):
    """Every trtllm-bench row is modelled and judged, as one offline run: all its requests at
    time 0, at most the heuristic's batch, never preempted (reserving), all completed; the
    figure is output tokens over the time to the last completion (per GPU for the per-GPU
    row); the case names the limits."""
    rows = _offline_rows(v)
    published = [r for r in inference._published()[1] if r["source"] in MAX_THROUGHPUT]
    assert {r.detail.id for r in rows} == {r["id"] for r in published} and len(rows) == 13
    for r in rows:
        row = inference._row(r.detail.id)
        o = inference._offline_setup(row)
        assert r.role == "judge" and r.detail.load.startswith("offline: ")
        assert f"max batch {o['max_batch']}" in r.case and f"{o['max_tokens']:,}" in r.case
        run = inference._offline(r.detail.id, *_params(v, "h100"))
        assert run.completed == run.requests == row["requests"] and run.preemptions == 0
        assert (run.per_request["arrival_s"] == 0).all()
        assert run.mean_batch <= o["max_batch"]
        tokens = row["requests"] * row["output"]
        per = row["chips"] if row["metric"].endswith("_per_chip") else 1
        # the row's figure is its schedule (simulated once, at no fixed cost) priced at the
        # fitted costs: the simulation at those costs gives it (the iterations do not depend
        # on time), to the summation order of the parts
        assert r.calibrated == pytest.approx(tokens / run.simulated_s / per, rel=1e-9), r.detail.id
        # and seconds per token are exactly linear in the fixed costs
        inv = [
            1 / inference._offline_value(r.detail.id, x, 0.0, 0.29, 0.0) for x in (0.0, 1e-3, 2e-3)
        ]
        assert inv[2] - inv[1] == pytest.approx(inv[1] - inv[0], rel=1e-9)
    per_gpu = next(r for r in rows if r.quantity == "throughput_tokens_per_s_per_chip")
    assert inference._row(per_gpu.detail.id)["chips"] == 2


def test_max_throughput_rows_within_their_documented_bound(v):
    """The issue's 25 % on every trtllm-bench row (the latency rows' bound)."""
    rows = _offline_rows(v)
    for r in rows:
        print(
            f"{r.detail.id}: published {r.published:.1f}, bare {r.detail.bare:.1f} "
            f"({r.detail.bare / r.published - 1:+.1%}), fitted {r.calibrated:.1f} "
            f"({r.calibrated_error_fraction:+.1%}), {r.detail.reliability}"
        )
    over = [
        (r.detail.id, round(r.calibrated_error_fraction, 3))
        for r in rows
        if abs(r.calibrated_error_fraction) > BOUND
    ]
    assert not over
