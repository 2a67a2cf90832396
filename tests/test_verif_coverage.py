"""Functional coverage (verif/coverage) and the testplan (verif/testplan.toml): the plan names
real tests and real bins; an item a run did not hit reports below 1.0; the model-only replay of
a tensor bench run samples exactly what the bench sampled on the RTL."""

import json
import re

import pytest

from tlm.tensor.config import EngineConfig
from verif.common.runner import ROOT
from verif.common.toolchain import have_simulator
from verif.coverage import report as coverage_report
from verif.coverage.db import Covergroup, load_runs, write_run
from verif.coverage.tensor import ITEMS
from verif.coverage.testplan import expected_items, load
from verif.coverage.tlm import replay
from verif.tensor.build import build_engine


def tensor_run(tmp_path, monkeypatch, cfg, seed, **kwargs):
    """One tensor bench run replayed on the model, written as a run file in ``tmp_path``."""
    monkeypatch.setenv("COVERAGE_DIR", str(tmp_path))
    Covergroup.forget(ITEMS)
    from verif.coverage.tensor import EngineCoverage

    replay(cfg, seed, coverage=EngineCoverage(cfg), **kwargs)
    return write_run(f"tensor-{cfg.tag}-{seed}", {"bench": "tensor", "seed": seed})


def test_the_testplan_names_tests_that_exist():
    features = load()
    assert len(features) >= 25
    for feature in features:
        for test in feature.tests:
            path, function = test.split("::")
            text = (ROOT / path).read_text()
            assert re.search(rf"^def {function}\(", text, re.M), f"{feature.id}: no {test}"
        assert feature.bins()


def test_every_coverage_item_is_in_the_testplan():
    named = {ref.partition(":")[0] for f in load() for ref in f.coverage}
    assert named == set(expected_items())


@pytest.mark.parametrize(
    "text,message",
    [
        (
            'id = "a"\ndescription = "d"\ntests = ["tests/x.py::t"]\ncoverage = ["tensor.nope"]',
            "testplan.toml: feature 'a': coverage 'tensor.nope' names no item; items: [",
        ),
        (
            'id = "a"\ndescription = "d"\ntests = ["tests/x.py::t"]\ncoverage = ["tensor.k:K=0"]',
            "testplan.toml: feature 'a': coverage 'tensor.k:K=0': 'K=0' is not a bin of tensor.k",
        ),
        (
            'id = "a"\ndescription = "d"\ntests = []\ncoverage = ["tensor.k"]',
            "testplan.toml: feature 'a': tests must be given and not empty",
        ),
        (
            'id = "a"\ndescription = "d"\ntests = ["tests/x.py::t[1]"]\ncoverage = ["tensor.k"]',
            "testplan.toml: feature 'a': tests must be FILE.py::FUNCTION, not 'tests/x.py::t[1]'",
        ),
    ],
)
def test_a_bad_testplan_is_an_error(tmp_path, text, message):
    path = tmp_path / "testplan.toml"
    path.write_text("[[feature]]\n" + text + "\n")
    with pytest.raises(ValueError) as error:
        load(path)
    assert str(error.value).startswith(message)


def test_a_label_that_is_not_a_bin_is_an_error():
    group = Covergroup({"doctest.labels": ["a", "b"]})
    with pytest.raises(ValueError, match=r"^'c' is not a bin of doctest.labels: \['a', 'b'\]$"):
        group.sample("doctest.labels", "c")


def test_rising_states_count_once_per_entry():
    Covergroup.forget(["doctest.rising"])
    group = Covergroup({"doctest.rising": ["stall", "full"]})
    for labels in [{"stall"}, {"stall"}, {"stall", "full"}, set(), {"stall"}]:
        group.sample_rising("doctest.rising", labels)
    assert group.hits("doctest.rising") == {"stall": 2, "full": 1}


def test_items_not_hit_report_below_one(tmp_path, monkeypatch, seed):
    """A 1x1 int8 engine cannot mix formats, have 1 < K < rows, or see a format code that
    names no format: those features report below 1.0, and --strict fails."""
    tensor_run(tmp_path, monkeypatch, EngineConfig(1, 1), seed, ops=10, max_n=16,
               patterns="always:always:always,random:random:random")  # fmt: skip
    result = coverage_report.report(load_runs(tmp_path), load())
    features, items = result["features"], result["items"]
    assert features["tensor.formats.mixed"]["covered_fraction"] == 0.0
    assert features["tensor.misuse.load_format"]["covered_fraction"] == 0.0
    assert items["tensor.k"]["bins"]["1<K<rows"] == 0
    assert items["tensor.k"]["covered_fraction"] < 1.0
    assert 0 < items["tensor.format_pair"]["covered_fraction"] < 1.0
    assert features["router.port_vc_pairs"]["covered_fraction"] == 0.0  # no router run
    assert items["tensor.op_kind"]["bins"]["new stationary"] > 0
    out = tmp_path / "out"
    args = ["--runs", str(tmp_path), "--out", str(out)]
    assert coverage_report.main([*args, "--strict"]) == 1
    assert coverage_report.main(args) == 0
    written = json.loads((out / "coverage.json").read_text())
    assert written["features"]["tensor.formats.mixed"]["missing"][0].startswith(
        "tensor.format_pair:fp8_"
    )
    assert "| `tensor.formats.mixed` | 6 | 0 | 0.00 |" in (out / "coverage.md").read_text()


def test_runs_merge_bin_by_bin(tmp_path, monkeypatch, seed):
    """Two engines' runs together cover what neither covers alone."""
    kwargs = dict(ops=6, max_n=8, patterns="random:random:random")
    tensor_run(tmp_path, monkeypatch, EngineConfig(2, 2, "int8"), seed, **kwargs)
    alone = coverage_report.report(load_runs(tmp_path), load())
    tensor_run(tmp_path, monkeypatch, EngineConfig(2, 2, "bf16"), seed, **kwargs)
    both = coverage_report.report(load_runs(tmp_path), load())
    pairs = ["int8/int8", "bf16/bf16"]
    assert [alone["items"]["tensor.format_pair"]["bins"][p] > 0 for p in pairs] == [True, False]
    assert [both["items"]["tensor.format_pair"]["bins"][p] > 0 for p in pairs] == [True, True]
    same = "tensor.formats.same"
    assert (alone["features"][same]["hit"], both["features"][same]["hit"]) == (1, 2)


def test_no_runs_is_an_error(tmp_path, capsys):
    assert coverage_report.main(["--runs", str(tmp_path)]) == 2
    assert "no coverage runs in" in capsys.readouterr().err


@pytest.mark.sim
def test_the_model_replay_samples_what_the_rtl_bench_sampled(tmp_path, monkeypatch, seed):
    """The tensor bench on Icarus and its replay on the cycle-exact model give the same hits
    in every bin: stimulus coverage can be measured, and seeds chosen, without a simulator."""
    from tests.test_verif_tensor import PATTERNS
    from verif.common.runner import run

    if not have_simulator("icarus"):
        pytest.fail("icarus is not installed: run `make setup`")
    cfg = EngineConfig(3, 2, "all")
    rtl_dir = tmp_path / "rtl"
    monkeypatch.setenv("COVERAGE_DIR", str(rtl_dir))
    simbuild = build_engine("icarus", cfg)
    env = {"TE_ROWS": 3, "TE_COLS": 2, "TE_FORMAT": "all", "SEED": seed, "TE_OPS": 8}
    env |= {"TE_MAX_N": 8, "TE_PATTERNS": PATTERNS, "PYTHONPATH": ROOT}
    run(simbuild, "verif.tensor.bench", env=env, test_dir=tmp_path / "sim")
    (rtl,) = load_runs(rtl_dir)
    model_run = tensor_run(
        tmp_path / "model", monkeypatch, cfg, seed, ops=8, max_n=8, patterns=PATTERNS
    )
    model = json.loads(model_run.read_text())
    assert {n: rtl["items"][n] for n in ITEMS} == {n: model["items"][n] for n in ITEMS}


@pytest.mark.sim
def test_the_router_replay_samples_what_the_rtl_bench_sampled(tmp_path, monkeypatch, seed):
    """The same for the router bench's lockstep test."""
    from tlm.link.config import LinkConfig
    from verif.common.runner import run
    from verif.coverage.link import RouterCoverage, router_items
    from verif.coverage.tlm import replay_router
    from verif.link.build import build_link

    if not have_simulator("icarus"):
        pytest.fail("icarus is not installed: run `make setup`")
    cfg, coord, patterns = (
        LinkConfig((4, 4), depth=2),
        (1, 2),
        "random:random:random,1of2:3of4:1of4",
    )
    monkeypatch.setenv("COVERAGE_DIR", str(tmp_path / "rtl"))
    env = {"LINK_SHAPE": "4x4", "LINK_VCS": 2, "LINK_DEPTH": 2, "LINK_COORD": "1,2"}
    env |= {"LINK_PACKETS": 4, "LINK_PATTERNS": patterns, "SEED": seed, "PYTHONPATH": ROOT}
    simbuild = build_link("icarus", "link_router", cfg)
    run(
        simbuild, "verif.link.bench_router", env=env, test_dir=tmp_path / "sim", testcase="lockstep"
    )
    (rtl,) = load_runs(tmp_path / "rtl")
    cov = RouterCoverage(cfg, coord)
    replay_router(cfg, coord, seed, packets=4, patterns=patterns, coverage=cov)
    items = router_items(cfg, coord)
    assert {n: rtl["items"][n]["bins"] for n in items} == {n: cov.group.hits(n) for n in items}
