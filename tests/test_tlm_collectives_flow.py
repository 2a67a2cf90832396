"""The flow engine: transfers as flows sharing links max-min fairly, against the analytic engine.

The relations checked (docs/collectives.md, "The flow engine"):

* equal (1e-9 relative) where nothing contends: a single transfer; a ring all-reduce on the
  4x4 server, whose ring is a Hamiltonian cycle of the torus (each step crosses each link at
  most once); flows that share a link but end together;
* ``flow >= analytic`` always: a step's flows start no earlier than the analytic step (same
  fixed cost, dependencies by induction) and its busiest link moves at most its bandwidth;
* ``flow > analytic`` when steps that do not wait for each other share a link (the analytic
  engine times each step alone);
* every algorithm the system fits, on the 4x4 server and the 4x4x4 UltraServer: the factor is
  1 - every shipped schedule is a chain of steps whose flows on the busiest link end together.
"""

import numpy as np
import pytest
import simpy

from tlm.chip.bandwidth_sharing import FluidNetwork
from tlm.collectives import OPS, Analytic, build
from tlm.collectives.algorithms import ALGORITHMS, unfit
from tlm.collectives.flow import Flow, Launch, StepFlows
from tlm.collectives.schedule import Schedule, Step, Transfer
from tlm.system import load_system

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

SERVER = load_system("trn2-server")
ULTRA = load_system("trn2-ultraserver")
HOP_S = 1e-6 + 0.5e-6  # step_fixed_s + one link's latency_s (the presets' ASSUMED figures)
SIZES = [1, 7, 1 << 20, 3 << 30]  # bytes of one chunk (itemsize 1, one chunk)


def _permute(steps, system=SERVER, subs=1) -> Schedule:
    return Schedule("permute", "test", tuple(range(system.chips)), 1, subs, tuple(steps))


def _both(schedule, system, sizes, itemsize=1):
    analytic = Analytic(schedule, system)
    flow = Flow(schedule, system, analytic)
    return flow.time_s(sizes, itemsize), analytic.time_s(sizes, itemsize)


@pytest.mark.parametrize(
    "system, src, dst, hops", [(SERVER, 0, 1, 1), (SERVER, 0, 10, 4), (ULTRA, 0, 16, 1)]
)
def test_a_single_transfer_is_the_closed_form(system, src, dst, hops):
    flow, analytic = _both(
        _permute([Step((Transfer(src, dst, 0, 1, False),), ())], system), system, SIZES
    )
    path = system.path(src, dst)
    assert len(path) == hops
    bw = system.bandwidth_Bps[list(path)].min()
    want = system.step_fixed_s + system.latency_s[list(path)].sum() + np.array(SIZES) / bw
    assert np.allclose(flow, want, rtol=1e-12, atol=0)
    assert np.allclose(flow, analytic, rtol=1e-9, atol=0)


def test_ring_all_reduce_on_the_server_equals_analytic():
    """The ring is a Hamiltonian cycle of the 4x4 torus: no step crosses a link twice."""
    ring = build("ring", "all_reduce", SERVER)
    analytic = Analytic(ring, SERVER)
    for paths in analytic.paths:
        links = [link for path in paths for link in path]
        assert len(links) == len(set(links)) == 16
    sizes = [32, 34, 2 * 1000003, 1 << 30]  # even, uneven (largest chunk charged), large
    flow = Flow(ring, SERVER, analytic).time_s(sizes, 2)
    assert np.allclose(flow, analytic.time_s(sizes, 2), rtol=1e-9, atol=0)
    assert flow[-1] == pytest.approx(30 * (HOP_S + (1 << 30) / 16 / 256e9), rel=1e-12)


def test_flows_sharing_a_link_and_ending_together_equal_analytic():
    """0 -> 2 (x+ x+) and 1 -> 2 (x+) share chip 1's x+ link: each gets half of it, both end
    after 2 x size / bandwidth - the bytes on the busiest link, as the analytic engine says."""
    step = Step((Transfer(0, 2, 0, 1, False), Transfer(1, 2, 0, 1, False)), ())
    flow, analytic = _both(_permute([step]), SERVER, SIZES)
    assert np.allclose(flow, analytic, rtol=1e-9, atol=0)
    assert flow[-1] == pytest.approx(1e-6 + 2 * 0.5e-6 + 2 * SIZES[-1] / 256e9, rel=1e-12)


def test_steps_that_overlap_share_their_links():
    """Two steps that wait for nothing, each 0 -> 1: the analytic engine times each alone
    (flow > analytic, here twice the transfer time); chained, they do not overlap (equal)."""
    a = Step((Transfer(0, 1, 0, 1, False),), ())
    size = 1 << 30
    flow, analytic = _both(_permute([a, a]), SERVER, [size])
    assert analytic[0] == pytest.approx(HOP_S + size / 256e9, rel=1e-12)
    assert flow[0] == pytest.approx(HOP_S + 2 * size / 256e9, rel=1e-12)
    flow, analytic = _both(_permute([a, Step(a.transfers, (0,))]), SERVER, [size])
    assert flow[0] == pytest.approx(analytic[0], rel=1e-9)
    assert flow[0] == pytest.approx(2 * (HOP_S + size / 256e9), rel=1e-12)


def test_flow_never_beats_analytic(seed):
    """Random schedules (random transfers, chunk counts and dependencies): flow >= analytic."""
    rng = np.random.default_rng(seed)
    strict = 0
    for _ in range(40):
        steps = []
        for i in range(int(rng.integers(1, 6))):
            transfers = []
            for _ in range(int(rng.integers(1, 6))):
                src, dst = rng.choice(16, 2, replace=False)
                first = int(rng.integers(0, 3))
                transfers.append(
                    Transfer(
                        int(src),
                        int(dst),
                        first,
                        first + 1 + int(rng.integers(0, 4 - first)),
                        False,
                    )
                )
            after = (
                tuple(sorted({int(a) for a in rng.integers(0, i, rng.integers(0, 3))})) if i else ()
            )
            steps.append(Step(tuple(transfers), after))
        schedule = _permute(steps, subs=4)
        schedule.check()
        sizes = [4, 4 << 20, 4 << 30]
        flow, analytic = _both(schedule, SERVER, sizes)
        assert np.all(flow >= analytic * (1 - 1e-12)), (steps, flow, analytic)
        # rates memoised across sizes: the same figures as a fresh engine per size
        alone = [Flow(schedule, SERVER).time_s([size], 1)[0] for size in sizes]
        assert flow.tolist() == alone
        strict += bool(np.any(flow > analytic * (1 + 1e-9)))
    print(f"{strict} of 40 schedules slower on the flow engine")


@pytest.mark.parametrize("system", [SERVER, ULTRA], ids=["server", "ultraserver"])
@pytest.mark.parametrize("op", OPS)
def test_every_algorithm_runs_on_the_flow_engine(system, op):
    ran = 0
    for name in ALGORITHMS:
        if unfit(name, op, system) is not None:
            continue
        step = 2 * system.chips
        sizes = [step, 3 * step, step << 20]
        flow, analytic = _both(build(name, op, system), system, sizes, itemsize=2)
        assert np.all(flow > 0)
        # the documented factor: 1 (docs/collectives.md)
        assert np.allclose(flow, analytic, rtol=1e-9, atol=0), (name, flow / analytic)
        ran += 1
    assert ran >= 1


def test_events_and_bad_input():
    flow = Flow(build("ring", "all_reduce", SERVER), SERVER)
    flow.run(1e6)
    assert flow.events == 30  # one rate change (the flows' end) per step
    for bad in (-1, float("nan"), "1", True):
        with pytest.raises(ValueError, match=f"chunk_bytes must be a number >= 0, not {bad!r}"):
            flow.run(bad)
    assert flow.run(0) == pytest.approx(30 * HOP_S, rel=1e-12)  # fixed costs only


def test_fluid_network_starts_flows_together():
    """transfers(): one rate computation for a batch; together=True, one event for all."""
    env = simpy.Environment()
    net = FluidNetwork(env, {"a": 10.0, "b": 10.0}, record=False)
    each = net.transfers([(10.0, ["a"]), (30.0, ["a", "b"]), (0.0, ["b"])])
    assert each[2].triggered and not each[0].triggered
    env.run()
    assert env.now == pytest.approx(4.0)  # 2 s sharing a, then 20 bytes alone at 10 B/s
    assert net.history == []
    done = net.transfers([(10.0, ["a"]), (10.0, ["b"]), (5.0, ["a"])], together=True)
    ends = []
    done.callbacks.append(lambda _event: ends.append(env.now))
    env.run()
    assert ends == [pytest.approx(5.5)]  # the 5 B flow ends at 5 s, then 5 B left alone on a
    with pytest.raises(ValueError, match="nbytes must be a number >= 0, not -1"):
        net.transfers([(10.0, ["a"]), (-1, ["a"])])
    assert not net.flows  # a bad batch starts nothing


def test_step_flows_are_checked_once_and_launch_takes_them_or_plain_lists():
    """A step's flows are one FlowSet built once (chunks checked there); Launch takes the
    StepFlows of step_flows or per-transfer lists of flows, with the same ends."""
    with pytest.raises(ValueError, match=r"^chunks must be numbers >= 0, not -1.0$"):
        StepFlows([((2, (0,)),), ((-1, (1,)),)])
    flow = Flow(build("ring", "all_reduce", SERVER), SERVER)
    step = flow.flows[0]
    assert isinstance(step, StepFlows) and len(step.flows) == len(step.chunks) == len(step)
    ends = []
    for flows in (flow.flows, [list(s.transfers) for s in flow.flows]):
        env = simpy.Environment()
        net = FluidNetwork(env, flow.capacity, record=False)
        launch = Launch(env, net, flows, flow.after, flow.fixed_s, 1e6)
        env.run()
        ends.append(launch.ends)
    assert ends[0] == ends[1] and max(ends[0]) == flow.run(1e6)
