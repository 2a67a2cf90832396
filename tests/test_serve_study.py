"""trnsim serve: the serving simulation on the inference model, as a study."""

import json

import pytest

from tlm.inference import fixed_costs
from tlm.studies import run_study
from tlm.studies.cli import main

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

BASE = dict(model="llama3-8b", hardware="trn2", system="server", tp=4, prompt="256", output="16")


def test_a_light_load_is_served_within_the_slo_and_costs_follow_the_throughput():
    r = run_study("serve", **BASE, rate_per_s=2.0, requests=200).results
    assert r.completed == 200 and r.rejected == 0
    assert r.ttft_p50_s < r.e2e_p50_s and r.slo_attainment_fraction == 1.0
    # Little's law over the arrival window, within the noise of 200 requests
    assert r.mean_in_system == pytest.approx(2.0 * r.e2e_mean_s, rel=0.15)
    expected = r.power_w / r.output_tokens_per_s
    assert r.energy_per_token_j == pytest.approx(expected, rel=1e-9)


def test_a_heavier_load_batches_more_and_waits_longer():
    light = run_study("serve", **BASE, rate_per_s=1.0, requests=300).results
    heavy = run_study("serve", **BASE, rate_per_s=40.0, requests=300).results
    assert heavy.mean_batch > 2 * light.mean_batch
    assert heavy.tpot_p50_s > light.tpot_p50_s
    assert heavy.cost_per_million_tokens_usd < light.cost_per_million_tokens_usd


def test_disaggregated_pools_pay_the_kv_transfer_in_the_ttft():
    one = run_study("serve", **BASE, rate_per_s=1.0, requests=100, kv_link_Bps=1e9).results
    split = run_study(
        "serve",
        **BASE,
        rate_per_s=1.0,
        requests=100,
        prefill_replicas=1,
        decode_replicas=1,
        kv_link_Bps=1e9,
    ).results
    assert split.chips == 2 * one.chips
    assert split.ttft_p50_s > one.ttft_p50_s  # 256 tokens of KV at 1 GB/s


def test_max_rate_meets_the_slo_and_the_trace_and_plot_are_written(tmp_path):
    trace, plot = tmp_path / "serve.json", tmp_path / "curve.png"
    r = run_study(
        "serve",
        **BASE,
        rate_per_s=4.0,
        requests=200,
        find_max_rate=True,
        slo_ttft_s=0.5,
        slo_tpot_s=0.02,
        trace=str(trace),
        plot=str(plot),
        plot_rates=[0.5, 1.0],
    ).results
    assert r.max_rate_per_s > 0 and r.max_rate_output_tokens_per_s > 0
    events = json.loads(trace.read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    assert len(slices) == r.iterations and all(e["dur"] > 0 for e in slices)
    assert plot.stat().st_size > 1000


def test_a_trace_file_of_requests_replays(tmp_path):
    f = tmp_path / "requests.csv"
    f.write_text("arrival_s,prompt,output\n0.0,100,5\n0.5,200,3\n")
    r = run_study("serve", **BASE, arrivals=str(f)).results
    assert r.requests == 2 and r.completed == 2 and r.seed is None


def test_a_closed_loop_of_clients_keeps_that_many_in_the_system():
    """--concurrency 4, equal lengths: the four clients stay in step, four requests are in the
    system all the time (Little's law exactly); --prefill separate prefills the four prompts
    one at a time, so their TTFTs are 1, 2, 3 and 4 prefills (after the stack's time per
    request, request_fixed_s): p50 2.5 and p90 4 of them."""
    mixed = run_study("serve", **BASE, concurrency=4, requests=40).results
    assert mixed.completed == 40 and mixed.seed == 0
    assert mixed.mean_in_system == pytest.approx(4.0, rel=1e-9)
    assert mixed.throughput_per_s * mixed.e2e_mean_s == pytest.approx(4.0, rel=1e-9)
    assert mixed.ttft_p90_s == pytest.approx(mixed.ttft_p50_s, rel=1e-9)
    alone = run_study("serve", **BASE, concurrency=4, requests=40, prefill="separate").results
    r = fixed_costs("trn2").request_fixed_s
    assert r > 0
    assert (alone.ttft_p90_s - r) / (alone.ttft_p50_s - r) == pytest.approx(4 / 2.5, rel=1e-9)
    assert alone.completed == 40


def test_admission_reserve_never_preempts_where_greedy_does(capsys):
    """192 clients of 4,096 + 1,024 tokens on a Llama 3 70B replica of 4 chips whose KV cache
    holds about 150 of them: greedily the cache runs out and the latest are preempted;
    --admission reserve (in the JSON contract's inputs) starts a request only when its whole
    KV is there, so none is, and fewer run at once."""
    args = ["serve", "--model", "llama3-70b", "--tp", "4", "--concurrency", "192"]
    args += ["--requests", "192", "--prompt", "4096", "--output", "1024", "--max-batch", "192"]
    args += ["--token-budget", "4096", "--json"]
    runs = {}
    for admission in ("greedy", "reserve"):
        assert main([*args, "--admission", admission]) == 0
        runs[admission] = json.loads(capsys.readouterr().out)
        assert runs[admission]["inputs"]["admission"] == admission
        assert runs[admission]["results"]["completed"] == 192
    greedy, reserve = runs["greedy"]["results"], runs["reserve"]["results"]
    assert greedy["preemptions"] > 0 and reserve["preemptions"] == 0
    assert reserve["mean_batch"] < greedy["mean_batch"]


def test_a_load_of_one_token_requests_has_no_tpot(capsys):
    """Found by the fuzz from outside's pairs: with one generated token a request has no TPOT,
    and the JSON said NaN (not JSON); it says null, the table a dash."""
    args = ["serve", "--model", "llama3-8b", "--tp", "4", "--output", "1", "--requests", "20"]
    assert main([*args, "--json"]) == 0
    r = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(c))["results"]
    assert r["tpot_mean_s"] is None and r["tpot_p99_s"] is None and r["ttft_p50_s"] > 0


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--concurrency", "2", "--requests", "5", "--rate-per-s", "3"],
            "--rate-per-s: 3.0 is not allowed; allowed: unset with --concurrency",
        ),
        (["--concurrency", "2"], "--requests: 0 is not allowed; allowed: >= 1 with --concurrency"),
        (
            ["--concurrency", "2", "--requests", "5", "--arrivals", "x.csv"],
            "--arrivals: 'x.csv' is not allowed; allowed: unset with --concurrency",
        ),
        (
            ["--concurrency", "2", "--requests", "5", "--find-max-rate"],
            "--find-max-rate: True is not allowed; allowed: unset with --concurrency",
        ),
        (["--concurrency", "-1"], "--concurrency: -1 is not allowed"),
        (["--prefill", "mixed"], "--prefill: 'mixed' is not allowed; allowed: one of chunked"),
        (
            ["--admission", "lazy"],
            "--admission: 'lazy' is not allowed; allowed: one of greedy, reserve",
        ),
        (["--prefill-replicas", "2"], "--decode-replicas: 0 is not allowed"),
        (["--max-batch", "64", "--token-budget", "32"], "--token-budget: 32 is not allowed"),
        (["--prompt", "uniform:9"], "--prompt: 'uniform:9' is not allowed"),
        (["--arrivals", "missing.csv"], "--arrivals: 'missing.csv' is not allowed"),
        (["--tp", "3"], "--tp: 3 is not allowed"),
        (["--trace", "out.txt"], "--trace: 'out.txt' is not allowed"),
        (
            ["--plot-rates", "1,-2"],
            "--plot-rates: -2.0 is not allowed; allowed: a comma-separated list of numbers > 0",
        ),
        (["--plot-rates", "1,x"], "--plot-rates: 'x' is not a number; allowed: a number"),
        # found by the fuzz from outside's pairs: the engine's and the load's own names
        (["--model", "llama3.3-70b", "--tp", "1"], "--tp: 1 leaves 0 tokens of KV cache"),
        (["--token-budget", "1000000"], "--token-budget: 1000000 leaves 0 tokens of KV cache"),
        (["--prompt", "lognormal:100:50"], "--prompt: 'lognormal:100:50' is not allowed"),
        (["--rate-per-s", "1e-6"], "--rate-per-s: 1e-06 is not allowed; allowed: a rate at"),
        (["--token-buckets", "64"], "--token-buckets: 64 is not allowed; allowed: buckets up"),
    ],
)
def test_bad_input_names_the_flag(args, message, capsys):
    assert main(["serve", "--model", "llama3-8b", "--tp", "4", *args]) == 2
    assert message in capsys.readouterr().err


def test_the_replica_layouts_of_infer_serve_too():
    """--dp-attention and --micro-batches are the replica's (ReplicaInputs), so serve takes
    them: a Mixtral replica of 8 attention groups of 1 chip, a 2-stage pipeline whose
    micro-batches fill the stages (more throughput than one batch at the same load)."""
    mixtral = dict(model="mixtral-8x7b", hardware="trn2", system="server", tp=1, ep=8)
    r = run_study("serve", **mixtral, dp_attention=True, rate_per_s=2.0, requests=50)
    assert r.inputs.micro_batches == 1 and r.results.replica_chips == 8
    assert r.results.completed == 50
    piped = dict(BASE, tp=2, pp=2, rate_per_s=200.0, requests=400)
    one = run_study("serve", **piped, micro_batches=1).results
    two = run_study("serve", **piped).results
    assert two.output_tokens_per_s > 1.2 * one.output_tokens_per_s


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--micro-batches", "2"], "--micro-batches: 2 is not allowed; allowed: 1 when --pp is 1"),
        (["--dp-attention"], "--dp-attention"),
    ],
)
def test_replica_layout_errors_name_the_flag(extra, message, capsys):
    args = ["serve", "--model", "llama3-8b", "--tp", "4", "--requests", "10", *extra]
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_the_trace_names_the_pools_tracks(tmp_path):
    """Disaggregated, a prefill replica's track carries only prefill iterations (no decodes)
    and a decode replica's only decode ones (a token per sequence)."""
    trace = tmp_path / "pools.json"
    run_study(
        "serve",
        **BASE,
        rate_per_s=4.0,
        requests=40,
        prefill_replicas=2,
        decode_replicas=1,
        trace=str(trace),
    )
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert sorted(names.values()) == ["decode replica 0", "prefill replica 0", "prefill replica 1"]
    for e in events:
        if e["ph"] == "X" and names[e["tid"]].startswith("prefill"):
            assert e["args"]["decodes"] == 0
        elif e["ph"] == "X":
            assert e["args"]["tokens"] == e["args"]["sequences"]


def test_disaggregated_pools_with_an_fp8_kv_cache(capsys):
    """The KV transfer is priced at the FP8 cache's bytes (tlm.formats' E4M3)."""
    args = ["serve", "--model", "llama3-8b", "--tp", "4", "--prefill-replicas", "1"]
    args += ["--decode-replicas", "1", "--requests", "20", "--json"]
    assert main([*args, "--kv-format", "fp8"]) == 0, capsys.readouterr().err
    capsys.readouterr()
