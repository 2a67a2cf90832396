"""tlm.inference.serving as a package: every module's examples and docs/serving.md's, the values
that configure a run (frozen, hashable, equal by content) and the registries of named
choices. Each module's own tests: tests/test_serving_<module>.py."""

import dataclasses
import doctest
import importlib
from pathlib import Path

import pytest
from serving_doubles import Linear

from tlm.inference import serving
from tlm.inference.serving import (
    Colocated,
    Disaggregated,
    KvLink,
    Poisson,
    Scheduler,
    Workload,
)

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

ROOT = Path(__file__).resolve().parents[1]


#: The package and its modules with examples.
EXAMPLES = ["", ".checks", ".requests", ".scheduling", ".fleet", ".metrics", ".slo", ".simulation"]


@pytest.mark.parametrize("module", EXAMPLES)
def test_module_examples(module):
    result = doctest.testmod(importlib.import_module("tlm.inference.serving" + module))
    assert result.attempted > 0 and result.failed == 0


def test_docs_examples():
    """docs/serving.md's worked example runs and prints what it says."""
    result = doctest.testfile(str(ROOT / "docs" / "serving.md"), module_relative=False)
    assert result.attempted > 0 and result.failed == 0


def test_values_are_frozen_hashable_and_equal_by_content():
    """The values that configure a run can key a cache: equal fields, equal values (a length
    kept as parse_lengths gives it), and no field can be set after the checks."""
    assert Workload(64, "uniform:1:9") == Workload(("fixed", 64), ["uniform", 1, 9])
    assert Workload(64).prompt == ("fixed", 64)
    assert dataclasses.replace(Workload(64, seed=1), seed=2) == Workload(64, seed=2)
    assert hash(Scheduler(max_batch=8)) == hash(Scheduler(8, 2048, "chunked", "greedy"))
    assert Poisson(2, requests=5) == Poisson(2.0, 5) and Poisson(2, requests=5).rate == 2.0
    e = Linear()
    assert {Colocated(e, 2), Colocated(e, 2)} == {Colocated(e, replicas=2)}
    assert Disaggregated(e, 1, 2, KvLink(1e3, 1e9)).decode_engine is e
    with pytest.raises(AttributeError):
        Scheduler().max_batch = 4


def test_registries_name_their_classes():
    from tlm.inference.serving import fleet, requests, scheduling, slo

    for registry, names in (
        (requests.LOAD_KINDS, ("poisson", "trace", "closed_loop")),
        (scheduling.PREFILL_POLICIES, serving.PREFILLS),
        (scheduling.ADMISSION_RULES, serving.ADMISSIONS),
        (fleet.ROUTER_POLICIES, serving.ROUTERS),
        (slo.SLO_RULES, serving.RULES),
    ):
        assert registry.names == names
        assert all(registry.named(name).name == name for name in names)
    assert serving.PREFILLS == ("chunked", "separate")
    assert serving.ADMISSIONS == ("greedy", "reserve")
