"""tlm.inference.serving.requests: closed loops served back to back and in step, seeds and
common random numbers, length distributions, a duration, trace files and their errors,
and every bad load or workload."""

import math

import numpy as np
import pytest
from serving_doubles import Linear, check_bad_argument, workload, write_trace

from tlm.inference.serving import (
    ClosedLoop,
    Colocated,
    Poisson,
    Scheduler,
    Trace,
    TraceError,
    Workload,
    read_trace,
    simulate,
)

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off


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
        (Workload, dict(prompt=0), "prompt", "prompt must be an integer in 1..1000000, 'uniform"),
        (Workload, dict(prompt="normal:3:4"), "prompt", "prompt must be an integer in 1.."),
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
            "output: lognormal needs mean in 1..1000000 and sigma in 0..10",
        ),
        (Workload, dict(output=("uniform", "a", 3)), "output", "output must be an integer in 1.."),
    ],
)
def test_bad_arguments(make, args, field, message):
    """Each load and the workload checks its fields when built."""
    check_bad_argument(make, args, field, message)
