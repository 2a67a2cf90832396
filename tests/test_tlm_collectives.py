"""Collectives as schedules, proven by the values engine: every algorithm on every system it
fits, every operation it runs, sizes of 1 element, odd, not divisible by the ranks; formats
from tlm.formats; sum and max. Each result equals the reference (the algorithm's declared
reduction order) bit for bit and the float64 sum within the numerics contract's bound."""

import numpy as np
import pytest

from tlm.collectives import ALGORITHMS, COLLECTIVE_FORMATS, OPS, CollectiveError, build, unfit
from tlm.collectives.kangaring import CYCLE_A, CYCLE_B, pairs
from tlm.collectives.numerics import error_bound
from tlm.collectives.runtime import RankSystem, RuntimeCosts
from tlm.collectives.schedule import REDUCING, Schedule, Step, Transfer, tree_depth, tree_leaves
from tlm.collectives.values import reference, run
from tlm.formats import get_format
from tlm.presets import load_preset
from tlm.system import load_system

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

SYSTEMS = [
    "trn2-server",
    "trn2-ultraserver",
    "trn1-server",
    "trn3-ultraserver",
    "2xtrn2-server",
    "3xtrn2-server",
]
SHARED = ("reduce_scatter", "all_gather", "all_to_all")


def _cases():
    cases = []
    for name in SYSTEMS:
        system = load_system(name)
        for algo in ALGORITHMS:
            for op in OPS:
                if unfit(algo, op, system) is None:
                    cases.append((name, algo, op))
    return cases


CASES = _cases()


def _inputs(rng, op, r, count, fmt):
    dtype = get_format(fmt).dtype
    shape = {"broadcast": (count,), "all_gather": (r, count // r)}.get(op, (r, count))
    # |x| <= 1: a sum over 128 ranks stays inside FP8 E4M3's range (240)
    return rng.uniform(-1, 1, shape).astype(np.float32).astype(dtype)


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


def check_values(schedule: Schedule, count: int, fmt: str, reduction: str, rng):
    r = schedule.ranks
    x = _inputs(rng, schedule.op, r, count, fmt)
    got = run(schedule, x, reduction)
    want = reference(schedule, x, reduction)
    assert got.shape == want.shape
    assert np.array_equal(_bits(got), _bits(want)), (schedule.algorithm, schedule.op, count, fmt)
    if schedule.op not in REDUCING:
        return
    wide = x.astype(np.float64)
    exact = wide.max(axis=0) if reduction == "max" else wide.sum(axis=0)
    magnitude = np.abs(wide).sum(axis=0)
    bounds = schedule.bounds(count)
    depth = np.zeros(got.shape)  # the depth of the tree each output element was added in
    where = np.zeros(got.shape, dtype=np.int64)  # the element of the buffer it is
    seen = {}  # trees by identity (hashing a deep tree costs its size), checked once each
    for rank in range(r):
        chunks = range(schedule.chunks)
        base = 0
        if schedule.op == "reduce_scatter":
            chunks = range(rank * schedule.subs, (rank + 1) * schedule.subs)
            base = bounds[rank * schedule.subs]
        for c in chunks:
            lo, hi = bounds[c], bounds[c + 1]
            tree = schedule.order(rank, c)
            if id(tree) not in seen:
                assert sorted(tree_leaves(tree)) == list(range(r))  # every rank, once
                seen[id(tree)] = (tree, tree_depth(tree))
            depth[rank, lo - base : hi - base] = seen[id(tree)][1]
            where[rank, lo - base : hi - base] = np.arange(lo, hi)
    out = got.astype(np.float64)
    if reduction == "max":
        assert np.array_equal(out, exact[where])
    else:
        allowed = error_bound(fmt, depth, magnitude[where])
        assert (np.abs(out - exact[where]) <= allowed).all()


@pytest.mark.parametrize("name,algo,op", CASES, ids=["-".join(c) for c in CASES])
def test_values(name, algo, op):
    """Every algorithm, operation and system it fits; several sizes and formats each."""
    system = load_system(name)
    schedule = build(algo, op, system)
    r = schedule.ranks
    counts = [r, 3 * r] if op in SHARED else [1, 7, 2 * r + 3]
    rng = np.random.default_rng(hash((name, algo, op)) % 2**32)
    for i, count in enumerate(counts):
        fmt = COLLECTIVE_FORMATS[(i + len(name) + len(algo)) % len(COLLECTIVE_FORMATS)]
        check_values(schedule, count, fmt, "sum", rng)
        if op in REDUCING:
            check_values(schedule, count, "bf16", "max", rng)


def test_every_algorithm_is_proven_somewhere():
    assert {algo for _, algo, _ in CASES} == set(ALGORITHMS)
    assert {op for _, _, op in CASES} == set(OPS)


def test_random_cases(seed):
    """Random sizes, formats, reductions and algorithms on the server (the seed is printed)."""
    rng = np.random.default_rng(seed)
    system = load_system("trn2-server")
    for _ in range(40):
        op = OPS[rng.integers(len(OPS))]
        fits = [a for a in ALGORITHMS if unfit(a, op, system) is None]
        algo = fits[rng.integers(len(fits))]
        count = int(rng.integers(1, 300))
        if op in SHARED:
            count = 16 * max(1, count // 16)
        fmt = COLLECTIVE_FORMATS[rng.integers(len(COLLECTIVE_FORMATS))]
        reduction = ("sum", "max")[rng.integers(2)]
        check_values(build(algo, op, system), count, fmt, reduction, rng)


def test_a_schedule_that_adds_in_another_order_fails():
    """The check can fail: mesh's reduce-scatter with each step's transfers reversed adds in
    the opposite order, and the bits differ from the declared order's."""
    system = load_system("trn2-server")
    good = build("mesh", "reduce_scatter", system)
    steps = tuple(Step(s.transfers[::-1], s.after, s.label) for s in good.steps)
    bad = Schedule(good.op, good.algorithm, good.chips, good.blocks, good.subs, steps, good.order)
    x = np.random.default_rng(1).uniform(-1, 1, (16, 16 * 64)).astype(np.float32)
    x = x.astype(get_format("bf16").dtype)
    assert np.array_equal(_bits(run(good, x)), _bits(reference(good, x)))
    assert not np.array_equal(_bits(run(bad, x)), _bits(reference(bad, x)))


def test_a_schedule_that_drops_a_transfer_fails():
    system = load_system("trn2-server")
    good = build("ring", "all_gather", system)
    first = good.steps[0]
    steps = (Step(first.transfers[1:], first.after, first.label), *good.steps[1:])
    bad = Schedule(good.op, good.algorithm, good.chips, good.blocks, good.subs, steps)
    x = np.ones((16, 4), np.float32)
    assert not np.array_equal(_bits(run(bad, x)), _bits(reference(bad, x)))


def test_kangaring_cycles_are_disjoint_hamiltonian_and_use_every_link():
    system = load_system("trn2-server")
    undirected = set()
    for cycle in (CYCLE_A, CYCLE_B):
        assert sorted(cycle) == list(range(16))
        for a, b in zip(cycle, cycle[1:] + cycle[:1], strict=True):
            assert system.hops(a, b) == 1
            edge = frozenset((a, b))
            assert edge not in undirected
            undirected.add(edge)
    assert len(undirected) == 32
    schedule = build("kangaring", "all_reduce", system)
    for step in schedule.steps:
        used = [system.path(t.src, t.dst)[0] for t in step.transfers]
        assert sorted(used) == list(range(64))  # each directed link once per step


@pytest.mark.parametrize("per_chip", [2, 4])
def test_kangaring_pairs_a_chips_ranks_and_alternates_them_by_cycle(per_chip):
    """Ranks sharing the 16 chips (CCi): a ring's positions are primary-secondary pairs of a
    chip, the chips in cycle order; on cycle A the first of each pair is primary, on B the
    second, so every rank is active in two of the four rings; a primary's hop goes to the next
    pair (on the next chip, or the chip's next pair); a secondary only meets its primary; in
    every step but the first and last each directed link carries two chunks of one ring."""
    server = load_system("trn2-server")
    rings = pairs(per_chip)
    active = {}
    for h, seq in enumerate(rings):
        assert len(seq) == 8 * per_chip
        assert sorted(r for pair in seq for r in pair) == list(range(16 * per_chip))
        chips = [p // per_chip for p, _ in seq]
        cycle = (CYCLE_A, CYCLE_B)[h // 2]
        walk = [c for i, c in enumerate(chips) if i == 0 or c != chips[i - 1]]
        assert walk == list(cycle if h % 2 == 0 else cycle[::-1])[: len(walk)]
        assert all(p // per_chip == s // per_chip and abs(p - s) == 1 for p, s in seq)
        for p, _ in seq:
            active.setdefault(p, []).append(h)
    assert all(hs in ([0, 1], [2, 3]) for hs in active.values()) and len(active) == 16 * per_chip
    rs = RankSystem(server, per_chip, RuntimeCosts.of(load_preset("trn2")))
    schedule = build("kangaring", "all_reduce", rs)
    for i, step in enumerate(schedule.steps):
        load = {}
        for t in step.transfers:
            a, b = t.src // per_chip, t.dst // per_chip
            if a != b:
                (link,) = server.path(a, b)  # one hop between neighbouring chips
                load[link] = load.get(link, 0) + t.units
        if 0 < i < len(schedule.steps) - 1:
            assert load == {link: 2 for link in range(64)}, i


@pytest.mark.parametrize("name", ["trn2-server", "trn2-ultraserver"])
def test_ring_and_rdh_talk_to_neighbours(name):
    """The ring walks a Hamiltonian cycle and recursive doubling/halving sees the torus as a
    hypercube: every transfer crosses one link."""
    system = load_system(name)
    for algo in ("ring", "rdh"):
        s = build(algo, "all_reduce", system)
        hops = {system.hops(s.chips[t.src], s.chips[t.dst]) for st in s.steps for t in st.transfers}
        assert hops == {1}, algo


def test_steps_and_bus_factors():
    system = load_system("trn2-server")
    expect = {
        ("ring", "all_reduce"): (30, 2 * 15 / 16),
        ("ring", "reduce_scatter"): (15, 15 / 16),
        ("ring", "broadcast"): (30, 1.0),
        ("mesh", "all_reduce"): (2, 2 * 15 / 16),
        ("mesh", "all_to_all"): (1, 15 / 16),
        ("mesh", "broadcast"): (1, 15.0),
        ("mesh", "permute"): (1, 1.0),
        ("mesh1", "all_reduce"): (1, 15.0),
        ("rdh", "all_reduce"): (8, 2 * 15 / 16),
        ("rdh", "broadcast"): (4, 4.0),  # the root sends in every one of log2 r steps
        ("kangaring", "all_reduce"): (30, 2 * 15 / 16),
    }
    for (algo, op), (steps, factor) in expect.items():
        s = build(algo, op, system)
        assert (len(s.steps), s.send_factor()) == (steps, factor), (algo, op)
    h = build("hierarchical", "all_reduce", load_system("4xtrn2-server"))
    assert len(h.steps) == 2 * 15 + 2 * 3
    assert h.send_factor() == pytest.approx(2 * 15 / 16 + 2 * 3 / 4 / 16)


@pytest.mark.parametrize(
    "algo,op,system,message",
    [
        ("kangaring", "all_reduce", "trn2-ultraserver", "needs one 4x4 torus (the trn2 server's"),
        ("kangaring", "all_reduce", "trn3-ultraserver", "not a switched system"),
        ("kangaring", "all_reduce", "2xtrn2-server", "not a 2-node system"),
        ("rdh", "all_reduce", "3xtrn2-server", "needs a power of two of ranks, not 48"),
        ("hierarchical", "all_reduce", "trn2-server", "needs 2 or more nodes joined by EFA"),
        ("ring", "all_to_all", "trn2-server", "runs all_reduce, reduce_scatter, all_gather, "),
    ],
)
def test_algorithms_that_do_not_fit(algo, op, system, message):
    with pytest.raises(CollectiveError) as info:
        build(algo, op, load_system(system))
    assert message in str(info.value)


def test_unknown_names():
    with pytest.raises(CollectiveError, match="op must be one of all_reduce, "):
        unfit("ring", "allreduce", load_system("trn2-server"))
    with pytest.raises(CollectiveError, match="algorithm must be one of ring, mesh, "):
        unfit("tree", "all_reduce", load_system("trn2-server"))


def test_reduction_must_be_known():
    from tlm.collectives.numerics import combine

    with pytest.raises(ValueError, match="reduction must be one of sum, max, not 'min'"):
        combine(np.ones(1, np.float32), np.ones(1, np.float32), "min")


@pytest.mark.parametrize("name", ["2xtrn2-ultraserver", "2xtrn3-ultraserver", "4xtrn1-server"])
def test_hierarchical_on_every_kind_of_node(name):
    """Over EFA between UltraServers (torus nodes), switched trn3 UltraServers and trn1 servers:
    1 element, and a count not divisible by the ranks (128 of them on two UltraServers)."""
    schedule = build("hierarchical", "all_reduce", load_system(name))
    rng = np.random.default_rng(len(name))
    for count, fmt in ((1, "fp8_e4m3"), (2 * schedule.ranks + 3, "bf16")):
        check_values(schedule, count, fmt, "sum", rng)
    check_values(schedule, 5, "fp16", "max", rng)


def test_schedules_are_checked():
    good = build("ring", "all_gather", load_system("trn2-server"))
    late = Step(good.steps[0].transfers, (3,), "waits for a later step")
    with pytest.raises(ValueError, match=r"step 0 must wait only for earlier steps, not \(3,\)"):
        Schedule("all_gather", "x", good.chips, 16, 1, (late,)).check()
    self_send = Step((Transfer(2, 2, 0, 1, False),), ())
    with pytest.raises(ValueError, match="step 0 has a transfer out of range"):
        Schedule("all_gather", "x", good.chips, 16, 1, (self_send,)).check()
    past_end = Step((Transfer(0, 1, 15, 17, False),), ())
    with pytest.raises(ValueError, match="step 0 has a transfer out of range"):
        Schedule("all_gather", "x", good.chips, 16, 1, (past_end,)).check()


# -- failed links and broadcast roots ------------------------------------------------------------
def _ring_links(system, schedule):
    chips = schedule.chips
    return {
        frozenset((chips[t.src], chips[t.dst])) for step in schedule.steps for t in step.transfers
    }


@pytest.mark.parametrize("name", ["trn2-server", "trn2-ultraserver", "2xtrn2-server"])
def test_ring_is_laid_round_any_one_failed_link(name):
    """Every single torus link failure: the ring finds a Hamiltonian cycle without it (no
    detours) and still proves its values."""
    system = load_system(name)
    pairs = sorted({(min(ln.src, ln.dst), max(ln.src, ln.dst)) for ln in system.links})
    pairs = [p for p in pairs if p[1] < system.chips]  # chip-to-chip links only
    rng = np.random.default_rng(7)
    for pair in pairs[:: 1 if system.chips == 16 else 9]:
        failed = system.without([pair])
        schedule = build("ring", "all_reduce", failed)
        assert frozenset(pair) not in _ring_links(failed, schedule)
        chips = schedule.chips
        assert not any(
            failed.detoured(chips[t.src], chips[t.dst])
            for step in schedule.steps
            for t in step.transfers
        )
    check_values(schedule, 37, "bf16", "sum", rng)


def test_algorithms_route_round_a_failed_link_or_refuse():
    failed = load_system("trn2-server").without([(5, 6)])
    assert unfit("kangaring", "all_reduce", failed) == (
        "needs every link of the 4x4 torus, for its two Hamiltonian cycles use them all, "
        "and the link 5-6 has failed"
    )
    rng = np.random.default_rng(11)
    for algo in ("mesh", "mesh1", "rdh", "ring"):
        for op in ("all_reduce", "all_gather"):
            if unfit(algo, op, failed) is None:
                schedule = build(algo, op, failed)
                count = 3 * 16 if op == "all_gather" else 29
                check_values(schedule, count, "fp32", "sum", rng)
    # the direct mesh crosses 5-6 and detours; no route it takes uses the failed link
    mesh = build("mesh", "all_reduce", failed)
    gone = {(5, 6), (6, 5)}
    routes = [failed.path(mesh.chips[t.src], mesh.chips[t.dst]) for t in mesh.steps[0].transfers]
    assert all((failed.links[i].src, failed.links[i].dst) not in gone for r in routes for i in r)
    assert failed.detoured(5, 6) and failed.detoured(6, 5) and not failed.detoured(5, 9)


@pytest.mark.parametrize("algo", ["ring", "mesh", "rdh"])
@pytest.mark.parametrize("root", [0, 5, 15])
def test_broadcast_from_any_root(algo, root):
    system = load_system("trn2-server")
    schedule = build(algo, "broadcast", system, root=root)
    assert schedule.chips[schedule.root] == root
    assert sorted(schedule.chips) == list(range(16))
    # the moved schedule is the same shape: its transfers cross the same number of links
    base = build(algo, "broadcast", system)
    hops = [
        [system.hops(s.chips[t.src], s.chips[t.dst]) for st in s.steps for t in st.transfers]
        for s in (schedule, base)
    ]
    assert hops[0] == hops[1]
    check_values(schedule, 23, "bf16", "sum", np.random.default_rng(root))
    with pytest.raises(CollectiveError, match="root must be a chip 0..15, not 16"):
        build(algo, "broadcast", system, root=16)


@pytest.mark.parametrize(
    "system, chips, steps",
    [
        ("trn2-server", None, 2 * (3 + 3)),
        ("trn2-ultraserver", None, 2 * (3 + 3 + 3)),
        ("trn2-server", range(8), 2 * (3 + 1)),  # a 4x2 torus: a ring of 2 is one step
        ("trn2-ultraserver", [0, 16, 32, 48], 2 * 3),  # a z ring of 4 chips
        ("2xtrn2-server", None, 2 * (3 + 3 + 1)),  # and a ring of the 2 nodes over EFA
    ],
)
def test_rings_take_a_ring_per_dimension(system, chips, steps):
    """The torus-native all-reduce sends what the ring over every rank sends, in sum (k - 1)
    steps per phase instead of r - 1; proven by the values engine on sub-tori and nodes."""
    s = load_system(system)
    s = s if chips is None else s.subset(chips)
    rings, ring = build("rings", "all_reduce", s), build("ring", "all_reduce", s)
    assert len(rings.steps) == steps < len(ring.steps) or s.chips <= 4
    assert sorted(rings.chips) == list(range(s.chips))
    assert rings.send_factor() == pytest.approx(2 * (s.chips - 1) / s.chips)
    check_values(rings, 2 * s.chips + 3, "fp32", "sum", np.random.default_rng(s.chips))
    assert unfit("rings", "all_reduce", load_system("trn3-ultraserver")).startswith("needs a")


def test_rings_cross_the_slowest_dimension_with_the_least_data():
    """The reduce-scatter's last phase (and the all-gather's first) runs along the slowest
    links: the UltraServer's z rings (half rate), then EFA between nodes."""
    from tlm.collectives.rings import dimensions

    us = load_system("trn2-ultraserver")
    assert [bw for _, bw in dimensions(us)] == [256e9, 256e9, 128e9]
    rs = build("rings", "reduce_scatter", us)

    def rate(t):
        return min(us.bandwidth_Bps[i] for i in us.path(rs.chips[t.src], rs.chips[t.dst]))

    first, last = rs.steps[0], rs.steps[-1]
    each = len(first.transfers) // us.chips  # half-blocks a rank sends, both ways
    assert (each, rate(first.transfers[0])) == (32, 256e9)  # a quarter of the buffer, fast
    assert (len(last.transfers) // us.chips, rate(last.transfers[0])) == (2, 128e9)  # z
    two = load_system("2xtrn2-server")
    ag = build("rings", "all_gather", two)
    t = ag.steps[0].transfers[0]
    assert two.node_of(ag.chips[t.src]) != two.node_of(ag.chips[t.dst])  # EFA first, 1 block
    assert len(ag.steps[0].transfers) == 2 * two.chips
