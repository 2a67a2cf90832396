"""System.subset: a group of chips as a system of its own, routed over its parent's links."""

import numpy as np
import pytest

from tlm.collectives import ALGORITHMS, Analytic, build, unfit, values
from tlm.collectives.flit import FlitEngineError, flit_links
from tlm.system import SystemSpecError, load_system


@pytest.fixture(scope="module")
def us():
    return load_system("trn2-ultraserver")


@pytest.mark.parametrize(
    "chips, shape, members",
    [
        (range(4), (4,), (0, 1, 2, 3)),  # an x row
        (range(0, 16, 4), (4,), (0, 4, 8, 12)),  # a y column
        (range(0, 64, 16), (4,), (0, 16, 32, 48)),  # a z ring, between the servers
        (range(16), (4, 4), tuple(range(16))),  # one server's plane
        (range(0, 64, 4), (4, 4), tuple(range(0, 64, 4))),  # a y-z plane
        ([2, 0], (2,), (0, 2)),  # every other chip of x: a ring of 2, in grid order
        (range(0, 16, 2), (2, 4), tuple(range(0, 16, 2))),
        (range(64), (4, 4, 4), tuple(range(64))),
    ],
)
def test_grids_become_tori(us, chips, shape, members):
    sub = us.subset(chips)
    assert sub.torus.shape == shape
    assert sub.members == members
    assert sub.chips == len(members) and sub.nodes == 1 and sub.parent is us
    assert sub.flit is None  # the flit engine runs whole tori
    # every route is the parent's route between the same chips, over the same links
    for a in range(sub.chips):
        for b in range(sub.chips):
            assert sub.path(a, b) == us.path(members[a], members[b])
    assert [(ln.bandwidth_Bps, ln.latency_s, ln.name) for ln in sub.links] == [
        (ln.bandwidth_Bps, ln.latency_s, ln.name) for ln in us.links
    ]
    # link ends renumbered: a member's links leave its new number
    for i, ln in enumerate(sub.links):
        old = us.links[i]
        if old.src in members:
            assert ln.src == members.index(old.src)
        else:
            assert sub.vertices[ln.src] == f"parent {us.vertices[old.src]}"


def test_not_a_grid_keeps_the_chips_in_order(us):
    sub = us.subset([5, 0, 3])  # (1,1), (0,0), (3,0): not every combination
    assert sub.torus is None and sub.members == (0, 3, 5)
    assert sub.path(0, 2) == us.path(0, 5)


def test_routes_through_chips_outside_the_group(us):
    half = us.subset([0, 2])
    names = [half.links[i].name for i in half.path(0, 1)]
    assert names == ["chip 0 x+", "chip 1 x+"]  # through chip 1, not in the group
    assert half.hops(1, 0) == 2


def test_subset_of_a_subset_is_of_the_parent(us):
    plane = us.subset(range(16))
    row = plane.subset([4, 5, 6, 7])
    assert row.parent is us and row.members == (4, 5, 6, 7) and row.torus.shape == (4,)


def test_across_nodes():
    two = load_system("2xtrn2-ultraserver")
    sub = two.subset([0, 16, 32, 48, 64, 80, 96, 112])
    assert (sub.nodes, sub.chips_per_node, sub.torus.shape) == (2, 4, (4,))
    assert sub.path(0, 4) == two.path(0, 64)  # over EFA
    assert unfit("hierarchical", "all_reduce", sub) is None
    one = two.subset([0, 64])  # one chip per node
    assert (one.nodes, one.chips_per_node, one.torus) == (2, 1, None)


def test_failed_links_stay_failed(us):
    broken = us.without([(0, 1)])
    sub = broken.subset(range(4))
    assert sub.failed == ((0, 1),)
    assert sub.detoured(0, 1) and not sub.detoured(1, 2)
    assert sub.path(0, 1) == broken.path(0, 1)
    # failing a link of the subset is failing it in the parent
    again = us.subset(range(4)).without([(0, 1)])
    assert again.path(0, 1) == broken.path(0, 1) and again.failed == ((0, 1),)
    assert unfit("kangaring", "all_reduce", load_system("trn2-server").without([(0, 1)]))


@pytest.mark.parametrize("chips", [range(4), range(0, 64, 16), range(16), [0, 2], range(0, 16, 2)])
def test_every_algorithm_runs_correctly_on_a_subset(us, chips):
    sub = us.subset(chips)
    rng = np.random.default_rng(0)
    for algorithm in ALGORITHMS:
        for op in ("all_reduce", "all_gather", "reduce_scatter"):
            if unfit(algorithm, op, sub) is not None:
                continue
            schedule = build(algorithm, op, sub)
            count = 3 * sub.chips
            shape = (sub.chips, count // sub.chips if op == "all_gather" else count)
            inputs = rng.integers(-8, 8, shape).astype(np.float32)
            got = values.run(schedule, inputs)
            want = values.reference(schedule, inputs)
            np.testing.assert_array_equal(got, want)
            assert Analytic(schedule, sub).time_s([1 << 20], 2)[0] > 0


def test_the_grid_is_what_the_algorithms_lay_out(us):
    """On the z ring every ring step is one z hop, at the z rate (not two x/y hops)."""
    z = us.subset(range(0, 64, 16))
    ring = build("ring", "all_gather", z)
    for step in ring.steps:
        for t in step.transfers:
            (link,) = z.path(ring.chips[t.src], ring.chips[t.dst])
            assert z.links[link].name.endswith(("z+", "z-"))
    plane = us.subset(range(16))
    assert unfit("kangaring", "all_reduce", plane) is None  # a 4x4 torus of its own


def test_flit_engine_refuses_a_subset(us):
    with pytest.raises(FlitEngineError, match="a torus without a \\[flit\\] table"):
        flit_links(us.subset(range(4)))


@pytest.mark.parametrize(
    "chips, message",
    [
        ([], "chips must be one or more distinct chips of trn2-ultraserver, not \\[\\]"),
        ([0, 0], "chips must be one or more distinct chips of trn2-ultraserver, not \\[0, 0\\]"),
        ([0, 64], "chip must be an integer in 0..63, not 64"),
        ([0, 1.5], "chip must be an integer in 0..63, not 1.5"),
        (7, "chips must be an iterable of distinct chips of trn2-ultraserver, not 7"),
    ],
)
def test_bad_subsets(us, chips, message):
    with pytest.raises(SystemSpecError, match=message):
        us.subset(chips)


def test_uneven_nodes_refused():
    two = load_system("2xtrn2-server")
    with pytest.raises(SystemSpecError, match=r"same number in every node .*\{0: 2, 1: 1\}"):
        two.subset([0, 1, 16])
