"""The inference configuration search (tlm.inference.search) and trnsim infer-search."""

import numpy as np
import pytest

from tlm.inference import InferenceInputError, SloUnreachable, estimate, fixed_costs
from tlm.inference.search import search
from tlm.studies.cli import main

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

LOAD = dict(rate_per_s=2.0, prompt=512, output=64, slo_ttft_s=0.5, slo_tpot_s=0.05)


@pytest.fixture(scope="module")
def found():
    return search("llama3-8b", "trn2", scheduler="inline", **LOAD)


def test_the_best_meets_the_slo_and_nothing_meeting_it_is_cheaper(found):
    best = found.best()
    assert best["meets"] and best["fits"]
    assert best["ttft_s"] <= LOAD["slo_ttft_s"] and best["tpot_s"] <= LOAD["slo_tpot_s"]
    a = found.arrays
    meets = a["meets"].astype(bool)
    assert best["cost_per_hour_usd"] == a["cost_per_hour_usd"][meets].min()
    # enough replicas that each, an M/M/batch queue at its share of the load, meets the TTFT
    # SLO for 90 % of arrivals (serve --find-max-rate's rule), and one fewer would not; never
    # fewer than Little's law asks (each busy for a request's prefill and decode: its
    # end-to-end latency less the serving stack's time, when the replica is free)
    rate, n = LOAD["rate_per_s"], best["replicas"]
    assert n * best["max_rate_per_s"] >= rate > (n - 1) * best["max_rate_per_s"]
    busy = best["e2e_s"] - fixed_costs("trn2").request_fixed_s
    assert n >= np.ceil(rate * busy / best["batch"] - 1e-9)


def test_the_fleet_serves_its_load_within_the_slo():
    """A load that queues: Llama 3.1 405B at 1 request/s on trn2 with a 2 s TTFT SLO. Sized by
    Little's law the best fleet (3 replicas of batch 4) sustains 0.51 requests/s within the
    SLO; sized by the queue it takes the replicas the load needs."""
    load = dict(rate_per_s=1.0, prompt=2048, output=256, slo_ttft_s=2.0, slo_tpot_s=0.05)
    best = search("llama3.1-405b", "trn2", scheduler="inline", **load).best()
    busy = best["e2e_s"] - fixed_costs("trn2").request_fixed_s
    little = np.ceil(load["rate_per_s"] * busy / best["batch"])
    assert best["replicas"] * best["max_rate_per_s"] >= load["rate_per_s"]
    assert best["replicas"] > little  # the queue asks for more than Little's law here


def test_a_configuration_is_priced_as_trnsim_infer_prices_it(found):
    a = found.arrays
    i = int(np.flatnonzero(a["fits"].astype(bool))[3])
    row = found.row(i)
    r = estimate(
        "llama3-8b",
        "trn2",
        row["system"],
        tp=row["tp"],
        pp=row["pp"],
        ep=row["ep"],
        batch=row["batch"],
        prompt=512,
        output=64,
        fmt=row["fmt"],
        kv_fmt=row["kv_fmt"],
        check_memory=False,
    )
    assert row["ttft_s"] == pytest.approx(r.ttft_s, rel=1e-9)
    assert row["tpot_s"] == pytest.approx(r.tpot_s, rel=1e-9)
    assert row["e2e_s"] == pytest.approx(r.e2e_s, rel=1e-9)


def test_an_unreachable_slo_names_the_closest():
    """The message names the closest configuration, and the error the SLO it misses by more
    (the front door's flag: it named --slo-tpot-s when only the TTFT was out of reach)."""
    with pytest.raises(SloUnreachable, match="the closest: .* tp .* TPOT") as info:
        search(
            "llama3-8b", "trn2", scheduler="inline", batches=(1, 2), **{**LOAD, "slo_tpot_s": 1e-5}
        ).best()
    assert info.value.field == "slo_tpot_s"
    with pytest.raises(SloUnreachable) as info:
        search(
            "llama3-8b", "trn2", scheduler="inline", batches=(1, 2), **{**LOAD, "slo_ttft_s": 1e-5}
        ).best()
    assert info.value.field == "slo_ttft_s"


def test_an_interrupted_search_resumes_and_local_dask_agrees(tmp_path):
    small = dict(batches=(1, 4, 16), fmts=("bf16",), kv_fmts=("bf16",), chunk=10)
    first = search("llama3-8b", "trn2", scheduler="inline", out_dir=tmp_path, **small, **LOAD)
    again = search("llama3-8b", "trn2", scheduler="inline", out_dir=tmp_path, **small, **LOAD)
    assert first.chunks > 1 and again.resumed_chunks == again.chunks
    dask = search("llama3-8b", "trn2", scheduler="local", workers=2, **small, **LOAD)
    for k in ("ttft_s", "tpot_s", "cost_per_hour_usd"):
        np.testing.assert_array_equal(dask.arrays[k], first.arrays[k])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"prompt": 0}, "prompt must be an integer >= 1"),
        ({"rate_per_s": -1.0}, "rate_per_s must be a number > 0"),
        ({"batches": (0,)}, "batches must be integers >= 1"),
        ({"fmts": ("int4",)}, "fmts must be one of bf16, fp8_e4m3, not 'int4'"),
        ({"kv_fmts": ()}, "kv_fmts must be formats of bf16, fp8_e4m3"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(InferenceInputError, match=message):
        search("llama3-8b", "trn2", scheduler="inline", **{**LOAD, **kwargs})


@pytest.mark.parametrize(
    "args, message",
    [
        (["--systems", "rack"], "--systems: 'rack' is not allowed"),
        (["--batches", "1,x"], "--batches: 'x' is not a number; allowed: an integer"),
        (
            ["--batches", "1,0"],
            "--batches: 0 is not allowed; allowed: a comma-separated list of integers in "
            "1..1000000000",
        ),
        (["--systems", "server,3xrack"], "--systems: '3xrack' is not allowed"),
        (["--formats", "int4"], "--formats: 'int4' is not allowed"),
        (["--scheduler", "cloud"], "--scheduler: 'cloud' is not allowed"),
        (
            ["--slo-tpot-s", "0.00001", "--batches", "1"],
            "--slo-tpot-s: 1e-05 is not met: no configuration of llama3-8b",
        ),
    ],
)
def test_the_study_names_the_flag(args, message, capsys):
    assert main(["infer-search", "--model", "llama3-8b", "--scheduler", "inline", *args]) == 2
    assert message in capsys.readouterr().err


# ---- expert layouts and micro-batches ----------------------------------------------------


@pytest.fixture(scope="module")
def moe():
    return search(
        "mixtral-8x7b", "trn2", scheduler="inline", systems=("server",), batches=(1, 2, 8, 32),
        fmts=("fp8",), kv_fmts=("fp8",), **LOAD,
    )  # fmt: skip


def test_moe_candidates_hold_both_expert_layouts_and_micro_batches(moe):
    a = moe.arrays
    dp = a["dp_attention"].astype(bool)
    assert dp.any() and (~dp).any()
    groups = np.where(dp, a["ep"] // a["tp"], 1)
    assert (a["batch"] % groups == 0).all()  # a batch shared evenly by the groups
    assert (a["ep"][dp] % a["tp"][dp] == 0).all() and (a["ep"][dp] > 1).all()
    assert (a["tp"][~dp] % a["ep"][~dp] == 0).all()
    assert (a["chips"][dp] == a["ep"][dp] * a["pp"][dp]).all()
    piped = a["pp"] > 1
    assert set(a["micro_batches"][piped].tolist()) == set(a["pp"][piped].tolist()) | {1}
    assert (a["micro_batches"][~piped] == 1).all()


def test_a_dp_attention_micro_batched_configuration_is_priced_as_trnsim_infer(moe):
    a = moe.arrays
    rows = np.flatnonzero(a["dp_attention"].astype(bool) & (a["micro_batches"] > 1))
    row = moe.row(int(rows[len(rows) // 2]))
    r = estimate(
        "mixtral-8x7b", "trn2", row["system"], tp=row["tp"], pp=row["pp"], ep=row["ep"],
        dp_attention=True, micro_batches=row["micro_batches"], batch=row["batch"], prompt=512,
        output=64, fmt="fp8", kv_fmt="fp8", check_memory=False,
    )  # fmt: skip
    assert row["ttft_s"] == pytest.approx(r.ttft_s, rel=1e-9)
    assert row["tpot_s"] == pytest.approx(r.tpot_s, rel=1e-9)


def test_dense_models_get_no_expert_layouts():
    found = search(
        "llama3-8b", "trn2", scheduler="inline", batches=(4,), fmts=("bf16",), **LOAD
    )  # fmt: skip
    assert not found.arrays["dp_attention"].any() and (found.arrays["ep"] == 1).all()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"expert_layouts": ("ring",)}, "expert_layouts must be layouts of tp, dp_attention"),
        ({"micro_batches": (0,)}, "micro_batches must be positive integers or 'pp'"),
    ],
)
def test_bad_layout_options_are_named(kwargs, message):
    with pytest.raises(InferenceInputError, match=message):
        search("mixtral-8x7b", "trn2", scheduler="inline", **{**LOAD, **kwargs})


@pytest.mark.parametrize(
    "args, message",
    [
        (["--expert-layouts", "ring"], "--expert-layouts: 'ring' is not allowed"),
        (
            ["--micro-batches", "1,0"],
            "--micro-batches: 0 is not allowed; allowed: a "
            "comma-separated list of integers in 1..1000000000 and pp (as many as stages)",
        ),
        (["--micro-batches", "two"], "--micro-batches: 'two' is not allowed"),
    ],
)
def test_the_study_names_the_layout_flags(args, message, capsys):
    assert main(["infer-search", "--model", "mixtral-8x7b", "--scheduler", "inline", *args]) == 2
    assert message in capsys.readouterr().err


def test_a_format_the_chip_lacks_names_the_formats_flag(capsys):
    """The model's error names its field; the study maps it to --formats."""
    argv = ["infer-search", "--model", "llama3-8b", "--hardware", "a100", "--formats", "fp8_e4m3"]
    assert main([*argv, "--scheduler", "inline"]) == 2
    assert capsys.readouterr().err.startswith("trnsim infer-search: error: --formats: 'fp8_e4m3'")
