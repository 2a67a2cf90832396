"""tlm.inference.serving.metrics: SLO attainment, Little's law, and a bad SLO."""

import math

import pytest
from serving_doubles import Linear, check_bad_argument, trace, workload

from tlm.inference.serving import (
    Colocated,
    Poisson,
    Scheduler,
    Slo,
    simulate,
)

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off


def test_slo_attainment(tmp_path):
    load = trace(tmp_path, [(0, 10, 2), (0, 10, 2), (5, 1000, 2)])
    fleet = Colocated(Linear(a=0.01, b=0.001))
    run = simulate(fleet, load, Scheduler(token_budget=2048), Slo(ttft_s=0.5))
    # two prefills of 10 at once: 0.03 s; the prompt of 1000 alone: 1.01 s > 0.5
    assert run.slo_attainment == pytest.approx(2 / 3)
    run = simulate(fleet, load, slo=Slo(tpot_s=0.0115))
    assert run.slo_attainment == pytest.approx(1 / 3)  # decodes of two: 0.012; of one: 0.011
    assert math.isnan(simulate(Colocated(Linear()), load).slo_attainment)


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


@pytest.mark.parametrize(
    "make, args, field, message",
    [
        (Slo, dict(ttft_s=0), "ttft_s", "ttft_s must be a finite number > 0, not 0"),
        (Slo, dict(tpot_s=math.nan), "tpot_s", "tpot_s must be a finite number > 0, not nan"),
    ],
)
def test_bad_arguments(make, args, field, message):
    """The SLO checks its fields when built."""
    check_bad_argument(make, args, field, message)
