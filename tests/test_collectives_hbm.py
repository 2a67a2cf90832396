"""The HBM traffic of a collective's steps (tlm/collectives/hbm.py): the accesses each transfer
makes (the Neuron docs' intra-node page), charged against the chip's HBM on every engine."""

import dataclasses

import numpy as np
import pytest

from tlm.collectives import Analytic, build
from tlm.collectives.flit import FlitEngine
from tlm.collectives.flow import Flow
from tlm.collectives.hbm import accesses, parts
from tlm.collectives.runtime import RankSystem, RuntimeCosts
from tlm.presets import load_preset
from tlm.system import load_system

SERVER = load_system("trn2-server")
FOUR = SERVER.subset([0, 1, 2, 3])  # one x ring: 16 ranks at LNC=2, a 4 x 4 torus of ranks
COSTS = RuntimeCosts.of(load_preset("trn2"))


def test_a_hop_reads_and_writes_as_the_intra_node_page_counts():
    """Ring: 1R1W a gather hop, 2R1W a reduce hop; KangaRing's duplication does two hops in
    one 1R2W (3 accesses for Ring's 4) or one 3R1W (4 for Ring's 6)."""
    assert sum(accesses("ring", False)) == 2 and sum(accesses("ring", True)) == 3
    assert sum(accesses("mesh", True)) == 3 and sum(accesses("hierarchical", False)) == 2
    # per two hops, reads and writes apart: the parts at either end
    two_hops = lambda split, i: 2 * sum(f * part[i] for f, *part in split)  # noqa: E731
    gather = parts("kangaring", False)
    assert (two_hops(gather, 0), two_hops(gather, 1)) == (1, 2)  # the one read at the source
    assert 2 * sum(accesses("kangaring", False)) == 3  # 1R2W
    assert 2 * sum(accesses("kangaring", True)) == 4  # 3R1W
    assert 2 * sum(accesses("ring", False)) == 4 and 2 * sum(accesses("ring", True)) == 6
    for algorithm in ("ring", "kangaring"):
        for reduce in (False, True):
            assert sum(f for f, _, _ in parts(algorithm, reduce)) == 1  # every chunk once


@pytest.mark.parametrize(
    "algo, op, step, chip_accesses",
    [
        # each of a chip's 4 ranks sends one chunk and receives one: 4 x (1 + 2) and 4 x (1 + 1)
        ("ring", "all_reduce", 0, 12),
        ("ring", "all_reduce", 20, 8),
        # four rings of a quarter chunk: 4 ranks x 4 transfers x 1/4 x (1 + 1) and (1/2 + 1)
        ("kangaring", "all_reduce", 0, 8),
        ("kangaring", "all_gather", 0, 6),
    ],
)
def test_a_steps_hbm_bytes_follow_the_algorithms_formula(algo, op, step, chip_accesses):
    """Per step, the busiest chip's HBM carries its ranks' accesses, in chunks of the
    schedule's blocks (KangaRing's sub-chunks are a quarter)."""
    ranks = RankSystem(FOUR, 4, COSTS)
    cost = Analytic(build(algo, op, ranks), ranks)
    subs = cost.schedule.subs
    # the engine charges per byte of a chunk, a sub-chunk: in blocks, over the sub-chunks
    assert cost.hbm_s_per_byte[step] * COSTS.hbm_Bps / subs == pytest.approx(chip_accesses)


def test_kangaring_makes_a_quarter_or_a_third_less_hbm_traffic_than_a_ring():
    ranks = RankSystem(FOUR, 4, COSTS)
    for op, saved in (("all_gather", 1 / 4), ("reduce_scatter", 1 / 3)):
        totals = []
        for algo in ("ring", "kangaring"):
            cost = Analytic(build(algo, op, ranks), ranks)
            totals.append(cost.hbm_s_per_byte.sum() / cost.schedule.subs)  # per block
        assert totals[1] / totals[0] == pytest.approx(1 - saved)


def test_kangaring_over_the_whole_server_saves_what_its_pairs_save():
    """64 ranks at LNC=2, KangaRing's pairs: the busiest chip's HBM accesses over the whole
    operation against the rings of rings' (as many as the ring's): a quarter fewer for an
    all-gather (1R2W for two 1R1W), a third fewer for a reduce-scatter (3R1W for two 2R1W)
    but for its last step (each primary copies its secondary's reduced block: 3 block accesses
    a chip more: 507 for 756) and 0.7 for an all-reduce (882 for 1,260: its reduce-scatter
    without that step, then its all-gather)."""
    ranks = RankSystem(SERVER, 4, COSTS)
    for op, ratio in (("all_gather", 3 / 4), ("reduce_scatter", 507 / 756), ("all_reduce", 0.7)):
        totals = []
        for algo in ("rings", "kangaring"):
            cost = Analytic(build(algo, op, ranks), ranks)
            totals.append(cost.hbm_s_per_byte.sum() * COSTS.hbm_Bps / cost.schedule.subs)
        assert totals[0] == {"all_gather": 504, "reduce_scatter": 756, "all_reduce": 1260}[op]
        assert totals[1] / totals[0] == pytest.approx(ratio, rel=1e-12), op


def slow_hbm(system, rate=2e10):
    return RankSystem(system, 4, dataclasses.replace(COSTS, hbm_Bps=rate))


def test_a_step_costs_the_slowest_of_links_dma_and_hbm():
    """At the published 2.9 TB/s the DMA queues bind (HBM never does on the published rows,
    docs/validation.md); at 20 GB/s a chip's HBM does, on the analytic and flow engines."""
    size = 1 << 30
    fast = RankSystem(FOUR, 4, COSTS)
    ring = build("ring", "all_reduce", fast)
    chunk = size / 16
    t = float(Analytic(ring, fast).time_s([size], 4)[0])
    sync = 30 * COSTS.step_sync_s
    assert t == pytest.approx(sync + 30 * chunk / COSTS.dma_Bps, rel=1e-3)  # links' 0.5 us apart
    slow = slow_hbm(FOUR)
    cost = Analytic(build("ring", "all_reduce", slow), slow)
    hbm = (15 * 12 + 15 * 8) * chunk / 2e10
    assert float(cost.time_s([size], 4)[0]) == pytest.approx(sync + hbm, rel=1e-3)
    flow = Flow(cost.schedule, slow, cost)
    assert float(flow.time_s([size], 4)[0]) == pytest.approx(float(cost.time_s([size], 4)[0]))


def test_the_flow_engine_shares_a_chips_hbm_among_its_ranks():
    """KangaRing's parts cross HBM unequally: flow >= analytic, each chip's HBM a resource."""
    slow = slow_hbm(FOUR)
    cost = Analytic(build("kangaring", "all_reduce", slow), slow)
    flow = Flow(cost.schedule, slow, cost)
    assert {("hbm", c) for c in range(4)} <= set(flow.capacity)
    size = 1 << 28
    t_flow, t_analytic = float(flow.time_s([size], 4)[0]), float(cost.time_s([size], 4)[0])
    assert t_flow >= t_analytic * (1 - 1e-9)
    assert t_flow == pytest.approx(t_analytic, rel=0.05)


class _WithHbm:
    """A system of chips whose HBM is charged (one rank a chip): what the flit engine would
    see if the runtime ran on it."""

    def __init__(self, system, rate):
        self._system, self.hbm_Bps = system, rate

    def __getattr__(self, name):
        return getattr(self._system, name)

    def chip_of(self, ranks):
        return np.asarray(ranks, dtype=np.int64)


def test_the_flit_engine_ends_no_step_before_its_hbm_traffic():
    ring = build("ring", "all_reduce", SERVER)
    size = 64 << 10
    plain = FlitEngine(ring, SERVER)
    t_plain = float(plain.time_s([size], 2)[0])
    slow = _WithHbm(SERVER, 1e9)
    cost = Analytic(ring, slow)
    assert cost.hbm_s_per_byte.max() > 0 and not Analytic(ring, SERVER).hbm_s_per_byte.any()
    t_analytic = float(cost.time_s([size], 2)[0])
    for network in ("compiled", "python"):
        t = float(FlitEngine(ring, slow, cost, network=network).time_s([size], 2)[0])
        assert t > 3 * t_plain and t >= t_analytic * (1 - 1e-9)
        assert t == pytest.approx(t_analytic, rel=0.01)


@pytest.mark.parametrize("algo", ["ring", "kangaring"])
def test_the_server_models_stacks_take_the_same_accesses(algo):
    """The server model shares each chip's stacks between GEMMs and the collective: its flows
    make the accesses of the one rule, spread over the stacks."""
    from tlm.server.tensor_parallel import _hbm_split

    schedule = build(algo, "all_reduce", SERVER)
    split = _hbm_split(schedule, 4)
    for t in (schedule.steps[0].transfers[0], schedule.steps[-1].transfers[0]):
        flows = split(t)
        at_src = sum(f * len(before) for f, before, _ in flows)
        at_dst = sum(f * len(after) for f, _, after in flows)
        assert (at_src, at_dst) == pytest.approx(accesses(algo, t.reduce))
        assert {name for _, before, _ in flows for name in before} <= {
            f"chip{schedule.chips[t.src]}.hbm{s}" for s in range(4)
        }


@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter", "all_gather"])
def test_kangaring_over_the_whole_server_is_the_same_on_the_flow_engine(op):
    """KangaRing's pairs over 64 ranks, with the DMA queues binding (the preset's HBM) and with
    a chip's HBM binding (20 GB/s): every chip carries the same accesses a step, so the flow
    engine gives the analytic figure."""
    sizes = [1 << 20, 1 << 28]
    for ranks in (RankSystem(SERVER, 4, COSTS), slow_hbm(SERVER)):
        cost = Analytic(build("kangaring", op, ranks), ranks)
        flow = Flow(cost.schedule, ranks, cost)
        assert np.allclose(flow.time_s(sizes, 2), cost.time_s(sizes, 2), rtol=1e-9, atol=0)
    assert cost.hbm_s_per_byte.sum() >= cost.per_unit_s_per_byte.sum() * (1 - 1e-12)
