"""The inference model against published latencies (tlm.validation.inference): the documented
bounds, the fitted figures the package ships, the rows left out and why."""

import tomllib
from importlib import resources

import numpy as np
import pytest

from tlm.inference import fixed_costs
from tlm.validation.inference import BOUND, FIT, validate_inference

#: docs/validation.md's bounds on |model / published - 1| of the judged rows: the issue's 25 %
#: on rows the sources leave unambiguous ("good"), and the measured worst of the ambiguous ones
#: (their settings are uncertain: see the table) rounded up - a test fails if any grows past.
GOOD_BOUND = BOUND
AMBIGUOUS_BOUND = 0.40


@pytest.fixture(scope="module")
def v():
    return validate_inference()


def test_every_judged_row_within_its_documented_bound(v):
    judged = [r for r in v.rows if r.role == "judge"]
    assert len(judged) >= 12
    for r in judged:
        bound = GOOD_BOUND if r.reliability == "good" else AMBIGUOUS_BOUND
        assert abs(r.error) <= bound, (r.id, r.error)
    good = [r for r in judged if r.reliability == "good"]
    assert len(good) >= 3


def test_the_fit_rows_are_reproduced_and_beat_the_bare_model(v):
    fit = [r for r in v.rows if r.role == "fit"]
    assert {r.id for r in fit} == {i for ids in FIT.values() for i in ids}
    for r in fit:  # least-squares residuals: H100 fits three figures to three rows
        assert abs(r.error) < 0.10, r.id
    # a per-operator estimator without fixed costs is optimistic, as the issue says of peers
    bare = np.array([r.shipped_error for r in v.rows])
    fitted = np.array([r.error for r in v.rows])
    assert np.median(bare) < -0.2
    assert np.abs(fitted).mean() < np.abs(bare).mean() / 2


def test_the_shipped_fixed_costs_are_the_fit(v):
    for system, p in v.parameters.items():
        shipped = fixed_costs(system)
        assert "FITTED" in shipped.source
        assert shipped.step_fixed_s == pytest.approx(p["step_fixed_s"], rel=5e-3)
        assert shipped.collective_fixed_s == pytest.approx(p["collective_fixed_s"], rel=5e-3)
        assert shipped.collective_bandwidth_factor == p["collective_bandwidth_factor"]


def test_rows_not_modelled_say_why_and_every_row_is_accounted_for(v):
    text = resources.files("tlm.validation").joinpath("inference.toml").read_text()
    published = tomllib.loads(text)["row"]
    assert len(v.rows) + len(v.skipped) == len(published)
    for _, why in v.skipped:
        assert why and len(why) > 10
    assert any("throughput" in why for _, why in v.skipped)
