"""Replica groups (tlm.collectives.groups): nccom-test's JSON form and --data-parallel-dimension
read and checked, every group's schedule run at once on the shared links, on the front door."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tlm.collectives import Analytic, build, choose
from tlm.collectives.algorithms import CollectiveError
from tlm.collectives.groups import (
    GroupError,
    group_systems,
    parse_replica_groups,
    run_together,
    strided,
)
from tlm.collectives.runtime import Placement, RuntimeCosts
from tlm.presets import load_preset
from tlm.studies import run_study
from tlm.studies.protocol import InputError
from tlm.system import load_system

ROWS = [list(range(4 * r, 4 * r + 4)) for r in range(4)]


def _json(groups) -> str:
    return json.dumps({"replica_groups": [groups]})


def test_nccom_tests_form_is_read():
    assert parse_replica_groups(_json([[3, 1], [0, 2]]), 4) == ((1, 3), (0, 2))


@pytest.mark.parametrize(
    "text, words",
    [
        ("{", "not JSON"),
        ('{"replica_groups": [[0, 1], [2, 3]]}', "one list of groups"),  # one level short
        ('{"groups": [[[0, 1], [2, 3]]]}', "nccom-test's form"),
        ("[[[0, 1], [2, 3]]]", "nccom-test's form"),
        (_json([[0, 1], [2, 3]]).replace("[0, 1]", '["0", 1]'), "not an integer"),
        (_json([[0, 1], [2]]), "missing (3)"),
        (_json([[0, 1], [1, 2, 3]]), "listed twice (1)"),
        (_json([[0, 1], [2, 4]]), "not ranks 0..3"),
        (_json([[0, 1, 2], [3]]), "one size, 2 or more"),
        (_json([[0], [1], [2], [3]]), "one size, 2 or more"),
    ],
)
def test_bad_groups_say_what_is_wrong(text, words):
    with pytest.raises(GroupError, match=None) as caught:
        parse_replica_groups(text, 4)
    assert words in str(caught.value), str(caught.value)


def test_data_parallel_dimension_strides():
    assert strided(8, 2) == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert strided(8, 8) == (tuple(range(8)),)
    for bad in (1, 3, 0, 16, True, 2.0):
        with pytest.raises(GroupError):
            strided(8, bad)


def _ranks(ranks=64):
    server, spec = load_system("trn2-server"), load_preset("trn2")
    where = Placement.of(server, spec, ranks=ranks)
    return where.rank_system(server, RuntimeCosts.of(spec))


def test_a_rank_group_is_a_rank_system_of_its_chips():
    ranks = _ranks()
    row = ranks.subset(range(16, 32))  # chips 4..7, all four ranks of each
    assert (row.chips, row.ranks_per_chip, row.torus.shape) == (16, 4, (4, 4))
    assert row.members == tuple(range(16, 32))
    column = ranks.subset(range(1, 64, 16))  # rank 1 of chips 0, 4, 8, 12: a y ring
    assert (row.costs, column.ranks_per_chip, column.torus.shape) == (ranks.costs, 1, (4,))
    assert column.members == (1, 17, 33, 49)
    with pytest.raises(CollectiveError, match="as many on every chip"):
        ranks.subset([0, 1, 4])
    with pytest.raises(CollectiveError, match="distinct ranks"):
        ranks.subset([0, 64])


def test_groups_of_a_subset_number_the_subsets_ranks():
    """A placement of fewer ranks than the server (chips 0-3) is a subset of its chips: a
    group's members are ranks of the placement, not of the whole server."""
    ranks = _ranks(16)
    half = ranks.subset(range(8, 16))
    assert half.members == tuple(range(8, 16))
    assert [half.chips_system.members[c] for c in range(2)] == [2, 3]


def _time(system, groups, op, size, itemsize=2):
    subs = group_systems(system, groups)
    name = choose(op, subs[0], size)
    one = build(name, op, subs[0])
    together = Analytic(run_together(one, subs), system).time_s(np.array([size]), itemsize)[0]
    alone = Analytic(one, subs[0]).time_s(np.array([size]), itemsize)[0]
    return float(together), float(alone)


@pytest.mark.parametrize("op", ["all_reduce", "all_gather", "reduce_scatter"])
def test_groups_on_their_own_links_take_the_time_of_one(op):
    """The four x rows of the server share no link: together each takes what it takes alone."""
    server = load_system("trn2-server")
    for size in (1 << 12, 1 << 24):
        together, alone = _time(server, ROWS, op, size * 4)
        assert together == pytest.approx(alone, rel=1e-12)


def test_groups_that_share_links_are_slower_together():
    """Chips 0 and 2 of a row route through chip 1, and chips 1 and 3 through chip 2: the two
    groups of each row share the link 1 -> 2, so large buffers take twice as long together."""
    server = load_system("trn2-server")
    groups = [g for r in range(4) for g in ([4 * r, 4 * r + 2], [4 * r + 1, 4 * r + 3])]
    together, alone = _time(server, groups, "all_reduce", 1 << 30)
    assert 1.9 < together / alone <= 2.0 + 1e-9, (together, alone)
    small_together, small_alone = _time(server, groups, "all_reduce", 64)
    assert small_together == pytest.approx(small_alone, rel=1e-3)  # latency-bound: no sharing


def test_the_front_door_runs_groups(tmp_path):
    path = tmp_path / "rows.json"
    path.write_text(_json(ROWS))
    common = {"system": "server", "sizes": "1KiB,1GiB", "format": "bf16", "runtime": False}
    grouped = run_study("collective", custom_replica_groups=str(path), **common).results
    strides = run_study("collective", data_parallel_dimension=4, **common).results
    row = run_study("collective", **{**common, "system": "trn2-server"}).results
    assert (grouped.groups, grouped.group_ranks, grouped.ranks) == (4, 4, 16)
    assert (row.groups, row.group_ranks) == (1, 16)
    # busbw counts the group's ranks: all-reduce of 4 ranks moves 2 x 3/4 of the buffer
    for p in grouped.series:
        assert p.busbw_Bps / p.algbw_Bps == pytest.approx(1.5)
    # rows (x) and columns (y) of a 4x4 torus are alike: the same times
    for a, b in zip(grouped.series, strides.series, strict=True):
        assert a.time_s == pytest.approx(b.time_s, rel=1e-12)
    # each row as a system of its own (its x ring's links only), alone
    one_row = load_system("trn2-server").subset(range(4))
    alone = Analytic(build("rings", "all_reduce", one_row), one_row)
    assert grouped.series[-1].algorithm == "rings"  # KangaRing needs the whole 4x4 torus
    assert grouped.series[-1].time_s == pytest.approx(alone.time_s([1 << 30], 2)[0], rel=1e-12)
    assert grouped.series[-1].time_s > row.series[-1].time_s  # one ring, not all 32 links


def test_the_front_door_with_the_runtime(tmp_path):
    """nccom-test's multistream stream 0 as typed: 64 ranks, four groups of 16 (one x row of
    chips each), bf16 - the same time as the validation suite's row."""
    path = tmp_path / "rg.json"
    path.write_text(_json([list(range(16 * g, 16 * g + 16)) for g in range(4)]))
    r = run_study(
        "collective", ranks=64, custom_replica_groups=str(path), sizes="1KiB", format="bf16"
    ).results
    assert (r.ranks, r.ranks_per_chip, r.groups, r.group_ranks) == (64, 4, 4, 16)
    alone = run_study("collective", ranks=16, sizes="1KiB", format="bf16").results
    assert r.series[0].time_s >= alone.series[0].time_s - 1e-12


@pytest.mark.parametrize(
    "inputs, field",
    [
        ({"data_parallel_dimension": 5}, "data_parallel_dimension"),
        ({"custom_replica_groups": "/nonexistent/groups.json"}, "custom_replica_groups"),
        ({"custom_replica_groups": ""}, "custom_replica_groups"),
        ({"data_parallel_dimension": 4, "engine": "flit", "sizes": "1KiB"}, "engine"),
        ({"data_parallel_dimension": 4, "op": "broadcast", "root": 1}, "root"),
    ],
)
def test_bad_group_inputs_name_the_flag(inputs, field):
    with pytest.raises(InputError) as caught:
        run_study("collective", system="server", **inputs)
    assert caught.value.field == field


def test_a_dimension_beside_custom_groups_must_be_their_size(tmp_path):
    """(On chips, links only: the groups name chips.)"""
    path = tmp_path / "rows.json"
    path.write_text(_json(ROWS))
    chips = {"system": "server", "runtime": False}
    r = run_study("collective", **chips, custom_replica_groups=str(path)).inputs
    assert r.data_parallel_dimension == 4  # resolved: the groups' size
    same = run_study(
        "collective", **chips, custom_replica_groups=str(path), data_parallel_dimension=4
    )
    assert same.results.groups == 4
    with pytest.raises(InputError) as caught:
        run_study("collective", **chips, custom_replica_groups=str(path), data_parallel_dimension=8)
    assert caught.value.field == "data_parallel_dimension"
    whole = run_study("collective", **chips).inputs
    assert (whole.custom_replica_groups, whole.data_parallel_dimension) == ("none", 16)


def test_groups_of_different_shapes_are_refused(tmp_path):
    path = tmp_path / "odd.json"
    path.write_text(_json([[0, 1, 2, 3], [4, 5, 8, 9], [6, 7, 10, 11], [12, 13, 14, 15]]))
    with pytest.raises(InputError, match="one shape") as caught:
        run_study("collective", system="server", runtime=False, custom_replica_groups=str(path))
    assert caught.value.field == "custom_replica_groups"
