"""tlm.inference.serving.simulation: the serving stack's time per request, a seed that
reproduces a run, and what simulate refuses."""

import json

import numpy as np
import pytest
from serving_doubles import Linear, trace, workload

from tlm.inference import InferenceInputError
from tlm.inference.serving import (
    ClosedLoop,
    Colocated,
    Poisson,
    Scheduler,
    Workload,
    simulate,
)

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off


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


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_engine_bad_iteration_time(bad):
    e = Linear(a=bad, b=0)
    with pytest.raises(ValueError, match="must return finite seconds > 0"):
        simulate(Colocated(e), Poisson(1.0, requests=1))
