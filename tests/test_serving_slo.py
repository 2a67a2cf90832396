"""tlm.inference.serving.slo: the rate bisection under an SLO, an SLO no rate meets, one every
rate meets, and bad arguments."""

import pytest
from serving_doubles import Linear, workload

from tlm.inference import InferenceInputError, SloUnreachable, serving
from tlm.inference.serving import (
    Colocated,
    Poisson,
    Scheduler,
    Slo,
    max_rate,
    simulate,
)

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off


def test_max_rate_bisection():
    """The returned rate meets the rule, the bracket's upper end does not; a looser SLO never
    gives a lower rate; the percentile rule at 0.9 is the p90 of both latencies."""
    fleet = Colocated(Linear(a=0.01, b=1e-4, c=1e-7))
    requests = workload("uniform:50:300", "uniform:20:100", seed=3)
    scheduler = Scheduler(max_batch=32, token_budget=512)
    kw = dict(requests=600, rel_tol=0.05)
    slo = Slo(ttft_s=0.3, tpot_s=0.05)
    tight = max_rate(fleet, slo, requests, scheduler, **kw)
    assert tight.run.slo_attainment >= 0.9
    assert serving.meets(tight.run, "attainment", 0.9)
    failed = [r for r, ok, _ in tight.runs if not ok]
    above = min(r for r in failed if r > tight.rate)
    assert above <= tight.rate * 1.05 * (1 + 1e-9)
    loose = max_rate(fleet, Slo(ttft_s=1.0, tpot_s=0.05), requests, scheduler, **kw)
    assert loose.rate >= tight.rate
    p90 = max_rate(fleet, slo, requests, scheduler, rule="percentile", **kw)
    assert p90.run.ttft_s.p90 <= 0.3 * (1 + 1e-9) and p90.run.tpot_s.p90 <= 0.05
    # what the bisection relies on: with the same requests sooner, attainment only falls
    attainment = [
        simulate(fleet, Poisson(f * tight.rate, 600, workload=requests), scheduler, slo)
        for f in (0.25, 0.5, 1.0, 1.5, 3.0)
    ]
    attainment = [run.slo_attainment for run in attainment]
    assert attainment == sorted(attainment, reverse=True) and attainment[-1] < 0.9


def test_max_rate_unreachable():
    with pytest.raises(SloUnreachable, match="no rate meets the SLO") as info:
        max_rate(Colocated(Linear(a=0.5)), Slo(ttft_s=0.1), workload(10, 5), requests=50)
    assert info.value.field == "slo"


def test_max_rate_unbounded_names_the_requests():
    """All the requests at once within the SLO: every rate meets it, and the search says to
    send more (it doubled the rate forty times, then raised a RuntimeError)."""
    fast = Colocated(Linear(a=1e-4))
    with pytest.raises(InferenceInputError, match="requests must be more than .* not 5: all 5"):
        max_rate(fast, Slo(ttft_s=10.0), workload(10, 5), requests=5)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(rule="p99"), "rule must be one of attainment, percentile, not 'p99'"),
        (dict(target=1.5), "target must be a fraction in (0, 1], not 1.5"),
        (dict(slo=Slo()), "max_rate needs an Slo with ttft_s or tpot_s (or both)"),
        (dict(requests=0), "requests must be an integer >= 1, not 0"),
        (dict(rel_tol=0), "rel_tol must be a finite number > 0, not 0"),
        (dict(max_runs=2), "max_runs must be an integer >= 3, not 2"),
    ],
)
def test_max_rate_bad_arguments(kwargs, message):
    args = dict(slo=Slo(ttft_s=1.0)) | kwargs
    with pytest.raises(ValueError) as info:
        max_rate(Colocated(Linear()), **args)
    assert message in str(info.value)
