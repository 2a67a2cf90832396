"""The examples in docstrings and in docs/numerics.md run and print what they say."""

import doctest
import importlib
from pathlib import Path

import pytest

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

ROOT = Path(__file__).resolve().parents[1]
MODULES = [
    "tlm.formats",
    "tlm.tensor.config",
    "tlm.tensor.matmul",
    "tlm.tensor.timing",
    "tlm.link.flit",
    "tlm.link.topology",
    "tlm.link.routing",
    "tlm.link.config",
    "tlm.link.router",
    "tlm.link.network",
    "tlm.link.patterns",
    "tlm.link.compiled",
    "tlm.link.ports",
    "tlm.link.sources",
    "tlm.link.bounds",
    "tlm.link.measure",
    "tlm.studies",
    "tlm.studies.protocol",
    "tlm.studies.units",
    "tlm.studies.config",
    "tlm.studies.tensor",
    "tlm.studies.gemm",
    "tlm.studies.noc",
    "tlm.studies.collective",
    "tlm.system",
    "tlm.system.graph",
    "tlm.collectives",
    "tlm.collectives.schedule",
    "tlm.collectives.mapping",
    "tlm.collectives.algorithms",
    "tlm.collectives.numerics",
    "tlm.collectives.values",
    "tlm.collectives.analytic",
    "tlm.collectives.flow",
    "verif.link.collective",
    "tlm.server.tensor_parallel",
    "tlm.studies.tp_step",
    "tlm.collectives.flit",
    "tlm.workloads",
    "tlm.workloads.model",
    "tlm.workloads.operators",
    "tlm.cluster",
    "tlm.cluster.memory",
    "tlm.studies.model",
    "tlm.hardware",
    "tlm.cluster.network",
    "tlm.cluster.goodput",
    "tlm.cluster.cost",
    "tlm.hardware.prices",
    "tlm.studies.hardware",
    "tlm.studies.workload",
    "tlm.studies.cost",
    "tlm.costs",
    "tlm.costs.opcosts",
    "tlm.costs.calibrate",
    "tlm.costs.grid",
    "tlm.sweep",
    "tlm.cluster.search",
    "tlm.inference.economics",
    "tlm.validation.row",
    "tlm.validation.inference",
    "tlm.inference.search",
    "tlm.inference.queueing",
    "tlm.studies.serve",
    "tlm.studies.infer_search",
    "tlm.studies.tables",
    "hdl.synth.clock",
    "hdl.synth.area",
]


@pytest.mark.parametrize("name", MODULES)
def test_module_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


def test_numerics_worked_example():
    result = doctest.testfile(str(ROOT / "docs" / "numerics.md"), module_relative=False)
    assert result.attempted > 0 and result.failed == 0
