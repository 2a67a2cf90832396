"""tlm.cluster.network: parallel groups' collectives on the real sub-topology, across a Clos,
across sites; cross-checked against the collectives' analytic and flow engines."""

import math
import os
import pickle
from pathlib import Path

import numpy as np
import pytest

from tlm.cluster.cost import Fabric
from tlm.cluster.network import OPS, Network, run_together
from tlm.collectives import ALGORITHMS, Analytic, build, unfit
from tlm.collectives.flow import Flow
from tlm.hardware import load_hardware
from tlm.system import load_system

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

MiB = 1 << 20


@pytest.fixture(scope="module")
def trn2():
    return Network.for_hardware(load_hardware("trn2"))


@pytest.fixture(scope="module")
def a100():
    return Network.for_hardware(load_hardware("a100"))


# ---- inside the UltraServer: the analytic engine on the group's sub-topology --------------

CASES = [(4, 1), (16, 1), (64, 1), (4, 16)]  # an x row, the server plane, the torus, a z ring


@pytest.mark.parametrize("op", ["all_reduce", "all_gather"])
@pytest.mark.parametrize("group, stride", CASES)
def test_against_the_flow_engine(trn2, op, group, stride):
    """Every algorithm that fits, and the one the model picks, at 64 KiB, 4 MiB and 64 MiB:
    the flow engine on the same schedule (every group of the node at once) gives the same time.
    Tolerance: equal (1e-9 relative) - nothing contends unevenly on these schedules (the flows
    sharing a link end together), where the flow engine equals the analytic one."""
    sizes = [64 << 10, 4 * MiB, 64 * MiB]
    first = trn2.node.subset(trn2.groups_in_node(group, stride)[0])
    picked = trn2.algorithm(op, group, stride, sizes)
    times = trn2.collective_s(op, group, stride, sizes)
    best = np.full(len(sizes), np.inf)
    for algorithm in ALGORITHMS:
        if unfit(algorithm, op, first) is not None:
            continue
        schedule, system = trn2.schedule(op, group, stride, algorithm)
        flow = Flow(schedule, system).time_s(sizes, 2)
        best = np.minimum(best, flow)
        for i, name in enumerate(picked):
            if name == algorithm:
                assert flow[i] == pytest.approx(times[i], rel=1e-9)
    np.testing.assert_allclose(times, best, rtol=1e-9)  # the fastest algorithm is taken


def test_the_sub_topologies(trn2):
    """The group's own links: an x row's ring at 256 GB/s, a z ring at 128 GB/s (half), on the
    links alone; with the runtime's DMA queues (one rank's rate a chip: the node the model
    runs) both at the queues' 112 GB/s."""
    S = 64 * MiB
    x = trn2.schedule("all_gather", 4, 1, "ring")[0]
    z = trn2.schedule("all_gather", 4, 16, "ring")[0]
    us = trn2.node.chips_system  # the links alone
    assert Analytic(x, us).time_s([S], 2)[0] == pytest.approx(3 * (1.5e-6 + S / 4 / 256e9))
    assert Analytic(z, us).time_s([S], 2)[0] == pytest.approx(3 * (1.5e-6 + S / 4 / 128e9))
    dma = trn2.node.costs.dma_Bps
    assert dma < 128e9
    for ring in (x, z):
        t = Analytic(ring, trn2.node).time_s([S], 2)[0]
        assert t == pytest.approx(3 * (1.5e-6 + S / 4 / dma))
    # 16 groups at once on the x rows, 16 on the z rings: as many as the node holds
    assert x.ranks == 64 and z.ranks == 64
    assert trn2.groups_in_node(4, 16)[1] == [1, 17, 33, 49]


def test_groups_alone_where_their_links_are_their_own(trn2):
    """Rows, planes and z rings use disjoint links: every group at once costs what one group
    alone costs on its sub-system."""
    for group, stride in CASES:
        sub = trn2._node_at(stride).subset(trn2.groups_in_node(group, stride)[0])
        for algorithm in ("ring", "mesh", "rdh"):
            alone = Analytic(build(algorithm, "all_reduce", sub), sub).time_s([4 * MiB], 2)
            together = Analytic(*trn2.schedule("all_reduce", group, stride, algorithm))
            assert together.time_s([4 * MiB], 2) == pytest.approx(alone, rel=1e-12)


@pytest.mark.parametrize("op", OPS)
def test_closed_forms_are_the_analytic_engine_on_the_groups_run_together(trn2, op):
    """The closed forms the network keeps (worked out from one group's transfers tiled over
    the groups, without building their schedule) are the analytic engine's figures on the
    run-together schedule, bit for bit: groups alone, groups sharing links (stride 2), a
    group that does not tile the node (stride 3: one group of three)."""
    for group, stride in [*CASES, (2, 2), (8, 2), (4, 4), (2, 8), (3, 3)]:
        phase = trn2._up_phase(op, group, stride)
        assert phase.names, (op, group, stride)
        for name, a, k, c in zip(phase.names, phase.A, phase.K, phase.C, strict=True):
            schedule, system = trn2.schedule(op, group, stride, name)
            together = Analytic(schedule, system)
            assert (a, k, c) == (
                together.total_fixed_s,
                together.total_per_unit_s_per_byte,
                schedule.chunks,
            ), (op, group, stride, name)


def test_groups_that_share_links_share_them(trn2):
    """Every other chip of an x ring (stride 2): group {0, 2} routes through chip 1, which
    routes group {1, 3} through chip 2 - the link 1 -> 2 carries both: the bandwidth term
    doubles against one group alone."""
    links = trn2.node.chips_system  # the links alone: the DMA queues would bind first
    sub = links.subset([0, 2])
    alone = Analytic(build("ring", "all_gather", sub), sub)
    together = Analytic(trn2.schedule("all_gather", 2, 2, "ring")[0], links)
    assert together.total_fixed_s == pytest.approx(alone.total_fixed_s)
    assert together.total_per_unit_s_per_byte == pytest.approx(2 * alone.total_per_unit_s_per_byte)


# ---- a switched node (NVSwitch) in closed form ------------------------------------------


def test_switch_closed_form_equals_the_analytic_engine_on_the_trn3_switch():
    """The closed forms used for an NVSwitch board, given the trn3 switch's figures, equal the
    analytic engine on the trn3 UltraServer's sub-systems, every op, group and size (a chip's
    DMA queues carry what its switch port carries: the slower of the two is the port - one
    rank's queues for the innermost groups, all the chip's ranks' for an outer dimension)."""
    trn3 = Network.for_hardware(load_hardware("trn3"))
    f = trn3.node.chips_system.file.switch
    sizes = np.array([2**k for k in range(8, 34, 3)])
    for stride_kind, groups in (
        ("inner", [(2, 1), (4, 1), (16, 1), (64, 1), (128, 1)]),
        ("outer", [(8, 4)]),
    ):
        dma = trn3._node_at(1 if stride_kind == "inner" else 4).costs.dma_Bps
        closed = Network(
            name="trn3 as a switch",
            chips_per_node=64,
            node=None,
            switch_Bps=min(f.port_bandwidth_Bps.value, dma),
            switch_step_s=trn3.node.step_fixed_s + 2 * f.latency_s.value,
            nic_Bps=trn3.nic_Bps,
            out_step_s=trn3.out_step_s,
            out_tier_s=trn3.out_tier_s,
            fabric=trn3.fabric,
            oversubscription=1.0,
            sites=1,
            site_chips=0,
            site_bandwidth_Bps=None,
            site_latency_s=0.0,
            chips=None,
        )
        for op in OPS:
            for group, stride in groups:
                a = trn3.breakdown(op, group, stride, sizes)
                b = closed.breakdown(op, group, stride, sizes)
                np.testing.assert_allclose(a.time_s, b.time_s, rtol=1e-12)
                assert list(a.algorithm) == list(b.algorithm)


def test_a100_nvswitch(a100):
    """8 A100 over NVSwitch: 300 GB/s each way; a 1 GiB all-reduce by mesh: 2 steps of 7/8
    of the buffer through each port."""
    S = 1 << 30
    t = a100.collective_s("all_reduce", 8, 1, S)
    assert t == pytest.approx(2 * 2e-6 + 2 * (7 / 8) * S / 300e9)
    assert a100.chips_per_node == 8 and str(a100.algorithm("all_reduce", 8, 1, S)) == "mesh"


# ---- across nodes ------------------------------------------------------------------------


def test_hierarchical_is_its_parts(trn2):
    """Two UltraServers, tp=128 at stride 1: reduce-scatter in each (64 chips), the 64 lanes'
    all-reduce across the two on 1/64 of the buffer (what a group of 2 at stride 64 does), the
    all-gather in each."""
    S = 256 * MiB
    parts = (
        trn2.collective_s("reduce_scatter", 64, 1, S)
        + trn2.collective_s("all_reduce", 2, 64, S / 64)
        + trn2.collective_s("all_gather", 64, 1, S)
    )
    b = trn2.breakdown("all_reduce", 128, 1, S)
    assert b.time_s == pytest.approx(parts, rel=1e-12)
    assert str(b.tier) == "hierarchical"
    assert b.scale_out_s == pytest.approx(trn2.collective_s("all_reduce", 2, 64, S / 64))
    rs = trn2.collective_s("reduce_scatter", 64, 1, S) + trn2.collective_s(
        "reduce_scatter", 2, 64, S / 64
    )
    assert trn2.collective_s("reduce_scatter", 128, 1, S) == pytest.approx(rs, rel=1e-12)


def test_one_member_per_node_over_efa(trn2):
    """DP of 4 at stride 64 (one chip per UltraServer): recursive halving/doubling over the
    NICs, 25 GB/s each way, 16 us a step (1 us + 2 x 7.5 us), two tiers' spine latency 0."""
    S = 1 << 30
    want = 2 * 2 * 16e-6 + 2 * (3 / 4) * S / 25e9
    b = trn2.breakdown("all_reduce", 4, 64, S)
    assert b.time_s == pytest.approx(want) and str(b.algorithm) == "rdh"
    assert str(b.tier) == "scale-out" and b.scale_up_s == 0
    # a ring of 3 nodes (not a power of two): 2 (n - 1) steps of a third
    assert trn2.collective_s("all_reduce", 3, 64, S) == pytest.approx(
        4 * 16e-6 + 4 * math.ceil(S / 2 / 3) * 2 / 25e9
    )


def test_oversubscription_slows_what_leaves_the_leaf():
    """A100 leaves hold 64 GPUs (32 ports of 400 Gb/s, 200 Gb/s per GPU). Oversubscription 4:
    a group inside one leaf is not slowed; DP at stride 64 (every GPU of a leaf leaves it at
    once) runs at 1/4 of the NIC; a ring whose hops are 8 GPUs apart leaves each leaf from
    only 8 of its 64 GPUs and keeps the full NIC rate, so at large sizes it beats halving."""
    hw = load_hardware("a100")
    flat = Network.for_hardware(hw)
    over = Network.for_hardware(hw, oversubscription=4)
    assert over.leaf_chips == 64
    S = 1 << 30
    assert over.collective_s("all_reduce", 8, 8, S) == flat.collective_s("all_reduce", 8, 8, S)
    t1 = flat.collective_s("all_reduce", 4, 64, S) - 2 * 2 * 5e-6
    t4 = over.collective_s("all_reduce", 4, 64, S) - 2 * 2 * 5e-6
    assert t4 == pytest.approx(4 * t1)
    b = over.breakdown("all_reduce", 16, 8, S)  # 16 DGX nodes over 2 leaves
    assert str(b.algorithm) == "ring"  # the ring avoids the slow uplinks
    assert b.time_s == pytest.approx(2 * 15 * 5e-6 + 2 * 15 * math.ceil(S / 2 / 16) * 2 / 25e9)
    small = over.breakdown("all_reduce", 16, 8, 64 << 10)
    assert str(small.algorithm) == "rdh"  # fewer steps win when latency rules
    # with two GPUs of each node in the group, the same across nodes after the node's part
    h = over.breakdown("all_reduce", 32, 4, S)
    assert str(h.tier) == "hierarchical" and str(h.algorithm).split("/")[1] == "ring"


def test_sites_share_their_links():
    """4,096 trn2 over 2 sites joined at 200 GB/s each way: DP of 64 at stride 64 crosses the
    boundary from 64 chips at once: 200/64 = 3.125 GB/s each, an eighth of the NIC; a group
    within a site does not notice."""
    hw = load_hardware("trn2")
    one = Network.for_hardware(hw)
    two = Network.for_hardware(hw, sites=2, chips=4096, site_bandwidth_Bps=200e9)
    S = 1 << 30
    # a ring (n = 64 is a power of two, but halving's long exchanges cross from every chip)
    ring_one = 2 * 63 * 16e-6 + 2 * 63 * math.ceil(S / 2 / 64) * 2 / 25e9
    ring_two = 2 * 63 * 16e-6 + 2 * 63 * math.ceil(S / 2 / 64) * 2 / (200e9 / 64)
    assert one.collective_s("all_reduce", 64, 64, S) <= ring_one
    assert two.collective_s("all_reduce", 64, 64, S) == pytest.approx(ring_two)
    assert two.collective_s("all_reduce", 16, 64, S) == one.collective_s("all_reduce", 16, 64, S)
    slow = Network.for_hardware(
        hw, sites=2, chips=4096, site_bandwidth_Bps=200e9, site_latency_s=1e-3
    )
    assert slow.collective_s("all_reduce", 64, 64, S) == pytest.approx(ring_two + 126e-3)
    # pipeline sends: 8 stages 512 apart cross the boundary from 512 chips at once; 8 stages
    # 64 apart stay in a site
    M = 16 * MiB
    assert two.p2p_s(M, 512, group=8) == pytest.approx(16e-6 + M / (200e9 / 512))
    assert two.p2p_s(M, 64, group=8) == one.p2p_s(M, 64, group=8) == pytest.approx(16e-6 + M / 25e9)


def test_pipeline_sends(trn2):
    S = 16 * MiB
    # a pipeline's stages are an outer dimension: each chip's send splits over its 4 ranks'
    # DMA queues (4 x 112 GB/s), so the links decide
    dma = trn2._node_at(16).costs.dma_Bps
    assert dma == pytest.approx(4 * trn2.node.costs.dma_Bps) and dma > 256e9
    # stride 16: one z hop each, no link shared: 1.5 us + S / 128 GB/s
    assert trn2.p2p_s(S, 16) == pytest.approx(1.5e-6 + S / 128e9)
    # stride 2: chip c -> c + 2 through c + 1, whose own send uses the same x link: 2 flows;
    # the longest route, chip 14 -> 16, (2, 3, 0) -> (0, 0, 1), is four hops
    assert trn2.p2p_s(S, 2) == pytest.approx(1e-6 + 4 * 0.5e-6 + 2 * S / 256e9)
    # across UltraServers: the NIC
    assert trn2.p2p_s(S, 64) == pytest.approx(16e-6 + S / 25e9)
    # 8 stages at stride 16 span two UltraServers: the stage boundary between them decides
    assert trn2.p2p_s(S, 16, group=8) == pytest.approx(trn2.p2p_s(S, 64))
    np.testing.assert_allclose(trn2.p2p_s([S, 0], [16, 64]), [trn2.p2p_s(S, 16), 16e-6])


def test_groups_of_one_cost_nothing(trn2):
    assert trn2.collective_s("all_reduce", 1, 7, 1 << 30) == 0
    assert str(trn2.tier(1, 1)) == "-" and str(trn2.algorithm("all_gather", 1, 1, 8)) == "-"


# ---- vectorised == scalar, speed ---------------------------------------------------------


def test_vectorised_equals_scalar(trn2, a100):
    seed = int(os.environ.get("SEED", np.random.SeedSequence().entropy % 2**32))
    print(f"SEED={seed}")
    rng = np.random.default_rng(seed)
    n = 40
    group = rng.choice([1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 1024], n)
    stride = rng.choice([1, 2, 4, 8, 16, 32, 64, 128, 512], n)
    nbytes = rng.integers(0, 1 << 32, n).astype(float)
    for net in (trn2, a100):
        for op in OPS:
            got = net.collective_s(op, group, stride, nbytes)
            b = net.breakdown(op, group, stride, nbytes)
            np.testing.assert_array_equal(got, b.time_s)
            for i in range(n):
                one = net.collective_s(op, int(group[i]), int(stride[i]), float(nbytes[i]))
                assert one.shape == () and float(one) == got[i], (op, i)
        got = net.p2p_s(nbytes, stride)
        for i in range(n):
            assert float(net.p2p_s(float(nbytes[i]), int(stride[i]))) == got[i]
    grid = trn2.collective_s("all_gather", [[4], [16]], [1, 16], [[MiB, 2 * MiB]])
    assert grid.shape == (2, 2)


# ---- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda n: n.collective_s("allreduce", 4, 1, 8),
            "op must be one of all_reduce, reduce_scatter, all_gather, all_to_all, not 'allreduce'",
        ),
        (
            lambda n: n.collective_s("all_reduce", 0, 1, 8),
            "group must be an integer in 1..2147483647 \\(or an array of them\\), not 0",
        ),
        (
            lambda n: n.collective_s("all_reduce", [4, 2.5], 1, 8),
            "group must be an integer in 1..2147483647 \\(or an array of them\\), not 2.5",
        ),
        (lambda n: n.collective_s("all_reduce", True, 1, 8), "group must be an integer"),
        (
            lambda n: n.collective_s("all_reduce", 4, -1, 8),
            "stride must be an integer in 1..2147483647 \\(or an array of them\\), not -1",
        ),
        (
            lambda n: n.collective_s("all_reduce", 4, 1, -8.0),
            "nbytes must be a number >= 0 \\(or an array of them\\), not -8.0",
        ),
        (lambda n: n.collective_s("all_reduce", 4, 1, [1.0, np.nan]), "nbytes must be a number"),
        (
            lambda n: n.collective_s("all_reduce", 4, 1, 8, dtype_bytes=0),
            "dtype_bytes must be an integer >= 1, not 0",
        ),
        (
            lambda n: n.p2p_s(8, 0),
            "stride must be an integer in 1..2147483647 \\(or an array of them\\), not 0",
        ),
        (
            lambda n: n.collective_s("all_gather", 2**31, 1, 8),
            "group must be an integer in 1..2147483647 \\(or an array of them\\), not 2147483648",
        ),
        (
            lambda n: n.collective_s("all_gather", "4", 1, 8),
            "group must be an integer in 1..2147483647 \\(or an array of them\\), not '4'",
        ),
        (lambda n: n.p2p_s(-1, 4), "nbytes must be a number >= 0"),
        (
            lambda n: n.schedule("all_reduce", 4, 1, "kangaring"),
            "algorithm kangaring does not fit trn2-ultraserver chips 0..3: it needs one 4x4 torus",
        ),
        (
            lambda n: n.schedule("all_reduce", 8, 16, "ring"),
            "group x stride must be in 2..64 \\(one node\\), not 8 x 16",
        ),
    ],
)
def test_bad_calls(trn2, call, message):
    with pytest.raises(ValueError, match=message):
        call(trn2)


def test_groups_larger_than_the_job():
    net = Network.for_hardware(load_hardware("trn2"), chips=1024)
    with pytest.raises(
        ValueError, match="group x stride must be at most chips \\(1024\\), not 32 x 64"
    ):
        net.collective_s("all_reduce", [2, 32], 64, 8)
    with pytest.raises(ValueError, match="stride must be less than chips \\(1024\\), not 1024"):
        net.p2p_s(8, 1024)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(oversubscription=0.5), "oversubscription must be a number >= 1, not 0.5"),
        (dict(sites=0), "sites must be an integer >= 1, not 0"),
        (dict(sites=2), "chips must be given with sites > 1 \\(sites=2\\), not None"),
        (
            dict(sites=2, chips=4096),
            "site_bandwidth_Bps must be a positive number with sites > 1, not None",
        ),
        (
            dict(chips=100),
            "chips must be a positive multiple of sites x chips_per_node \\(1 x 64\\), not 100",
        ),
        (dict(site_latency_s=-1.0), "site_latency_s must be a number >= 0, not -1.0"),
        (dict(fabric="clos"), "fabric must be a tlm.cluster.cost.Fabric, not 'clos'"),
    ],
)
def test_bad_networks(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Network.for_hardware(load_hardware("trn2"), **kwargs)
    with pytest.raises(ValueError, match="hw must be a tlm.hardware.Hardware"):
        Network.for_hardware("trn2")


def test_fabric_figures_come_from_cost():
    """The Clos is tlm.cluster.cost's: a wider port halves the leaf's chips."""
    hw = load_hardware("h100")
    assert Network.for_hardware(hw).leaf_chips == 32  # 400 Gb/s per GPU, 400 Gb/s ports
    wide = Network.for_hardware(hw, fabric=Fabric(port_Bps=100e9))
    assert wide.leaf_chips == 64


def test_docs_sample_table_follows_the_model(trn2, a100):
    """docs/cluster.md's sample figures are the model's (each cell: time and algorithm)."""
    text = (Path(__file__).parents[1] / "docs" / "cluster.md").read_text()
    section = text.split("Sample figures (bf16 all-reduce; `breakdown`):")[1].split("\n\n")[1]
    nets = {"trn2": trn2, "a100": a100}
    rows = [r for r in section.splitlines() if r.startswith("| trn2") or r.startswith("| a100")]
    assert len(rows) == 9
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        net, group, stride = nets[cells[0]], int(cells[1]), int(cells[2])
        assert str(net.tier(group, stride)) == cells[3].split(" (")[0]
        for size, cell in zip((1 << 20, 64 << 20, 1 << 30), cells[4:], strict=True):
            b = net.breakdown("all_reduce", group, stride, size)
            value, unit, *algorithm = cell.split()
            t = float(b.time_s) * (1e3 if unit == "ms" else 1e6)
            assert f"{t:.3g}" == value, (row, size)
            assert not algorithm or algorithm[0] == str(b.algorithm), (row, size)


@pytest.mark.parametrize("over", [1.0, 2.0])
@pytest.mark.parametrize("nodes", [2, 4])
def test_efa_ring_against_the_analytic_engine_on_nxsystem(nodes, over, tmp_path):
    """DP across UltraServers, one chip each (stride 64): the collectives' ring on the
    NxSYSTEM (its leaf is the node, 64 chips, as the model's leaf here), all 64 groups at once,
    costs what the model's cross-node ring costs - oversubscription included (every chip of
    the leaf leaves it: NIC / oversubscription)."""
    net = Network.for_hardware(load_hardware("trn2"), oversubscription=over)
    assert net.leaf_chips == 64
    preset = Path(__file__).parents[1] / "tlm" / "system" / "trn2-ultraserver.toml"
    text = preset.read_text()
    old = "oversubscription = { value = 1.0,"
    assert old in text
    mine = tmp_path / "us.toml"  # the same fabric in the system: leaf uplinks thinned
    mine.write_text(text.replace(old, f"oversubscription = {{ value = {over},"))
    system = load_system(f"{nodes}x{mine}")
    subs = [system.subset(range(c, 64 * nodes, 64)) for c in range(64)]
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        cost = Analytic(run_together(build("ring", op, subs[0]), subs), system)
        ring = net._out_phase(op, nodes, 64, 1, nodes, 64)
        assert ring.names[0] == "ring"
        assert cost.total_fixed_s == pytest.approx(ring.A[0], rel=1e-12)
        assert cost.total_per_unit_s_per_byte == pytest.approx(ring.K[0], rel=1e-12)


@pytest.mark.parametrize("hardware", ["trn2", "h100"])
def test_a_pickled_network_keeps_its_closed_forms_and_reloads_its_node(hardware):
    """A network pickles (the cache on disk, a Dask worker) with the closed forms it has
    worked out and without its node's system: the copy times what it had worked out without
    the node, and loads the node again for a group it had not - the same times bit for bit."""
    net = Network.for_hardware(load_hardware(hardware))
    group = [4, 8, 16, 4] if hardware == "trn2" else [2, 4, 8, 16]
    stride = [1, 1, 1, 16] if hardware == "trn2" else [1, 1, 1, 1]
    sizes = [1e3, 1e6, 64e6, 1e9]
    before = net.collective_s("all_reduce", group, stride, sizes)
    send = net.p2p_s(16e6, 16, 4)
    copy = pickle.loads(pickle.dumps(net))
    assert "node" not in vars(copy) if hardware == "trn2" else copy.node is None
    assert copy._plans.keys() == net._plans.keys() and not copy._schedules
    assert (copy.collective_s("all_reduce", group, stride, sizes) == before).all()
    assert copy.p2p_s(16e6, 16, 4) == send
    assert "node" not in vars(copy) if hardware == "trn2" else True  # none was needed
    other = ("all_gather", 8, 2, 5e6)  # a closed form not worked out before pickling
    assert copy.collective_s(*other) == net.collective_s(*other)
    if hardware == "trn2":
        assert vars(copy)["node"].name == net.node.name
        twice = pickle.loads(pickle.dumps(pickle.loads(pickle.dumps(net))))  # its node unloaded
        assert (twice.collective_s("all_reduce", group, stride, sizes) == before).all()
        assert twice.collective_s(*other) == net.collective_s(*other)
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        getattr(copy, "missing")  # noqa: B009 - the attribute lookup is what is tested


@pytest.mark.parametrize("hardware", ["trn2", "h100"])
def test_a_rows_time_does_not_depend_on_the_rows_beside_it(hardware, seed):
    """One row, a few or many: each row's time is the same (exact: additions,
    multiplications and roundings to integers), for every op and for pipeline sends."""
    rng = np.random.default_rng(seed)
    net = Network.for_hardware(load_hardware(hardware))
    n = 120
    group = rng.choice([1, 2, 4, 8, 16, 32, 64, 128, 256], n)
    stride = rng.choice([1, 2, 4, 16, 64], n)
    nbytes = rng.uniform(0, 1e9, n)
    nbytes[:4] = [0.0, 1.0, 3.0, 7.5]
    few = 8
    for i in range(0, n, 17):
        assert (
            net.collective_s("all_reduce", group[i], stride[i], nbytes[i])
            == net.collective_s("all_reduce", group, stride, nbytes)[i]
        )
    for op in OPS:
        whole = net.collective_s(op, group, stride, nbytes, dtype_bytes=2)
        for i in range(0, n, few):
            part = slice(i, i + few)
            rows = net.collective_s(op, group[part], stride[part], nbytes[part], dtype_bytes=2)
            assert (rows == whole[part]).all(), (op, i)
    stages = rng.choice([1, 2, 4, 8, 16], n)
    whole = net.p2p_s(nbytes, stride, stages)
    for i in range(0, n, few):
        part = slice(i, i + few)
        assert (net.p2p_s(nbytes[part], stride[part], stages[part]) == whole[part]).all()


def test_trainium_steps_cost_the_runtime_synchronisation():
    """A Trainium node's collective steps cost its chip preset's fitted step_sync_s (trn1
    12.6 us, fitted on nccom-test) in place of the system file's assumed 1 us; trn2's fit is
    that 1 us, so nothing moves there. A pickled network (a Dask worker's) loads the same."""
    import pickle

    from tlm.collectives.runtime import RuntimeCosts
    from tlm.presets import load_preset
    from tlm.system import load_system

    for name in ("trn1", "trn2", "trn3"):
        hw = load_hardware(name)
        net = Network.for_hardware(hw)
        sync = RuntimeCosts.of(load_preset(name)).step_sync_s
        assert net.node.step_fixed_s == sync
        again = pickle.loads(pickle.dumps(net))
        assert again.node.step_fixed_s == sync
        assert again.collective_s("all_gather", 16, 1, 1 << 20) == net.collective_s(
            "all_gather", 16, 1, 1 << 20
        )
    trn1 = Network.for_hardware(load_hardware("trn1"))
    assert trn1.node.step_fixed_s > 10 * load_system("trn1-server").step_fixed_s
    # a tiny all-gather (one direct step) pays one sync; a large one by rings, each step's
    sync = trn1.node.step_fixed_s
    assert trn1.collective_s("all_gather", 16, 1, 1024) >= sync
    big = 256 << 20
    schedule, node = trn1.schedule("all_gather", 16, 1, "ring")
    assert len(schedule.steps) == 15
    assert Analytic(schedule, node).time_s([big], 2)[0] >= len(schedule.steps) * sync
