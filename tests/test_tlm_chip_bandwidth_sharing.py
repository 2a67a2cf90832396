"""Max-min fair sharing of resources by flows: rates, caps, completion times, bad input."""

import doctest
import math
import random

import pytest
import simpy

from tlm.chip import bandwidth_sharing
from tlm.chip.bandwidth_sharing import FlowSet, FluidNetwork

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off


def test_module_examples():
    result = doctest.testmod(bandwidth_sharing)
    assert result.attempted > 0 and result.failed == 0


def finish_times(capacities, flows):
    """Completion time of each ``(start_s, nbytes, resources, cap)`` flow."""
    env = simpy.Environment()
    net = FluidNetwork(env, capacities)
    ends = {}

    def flow(i, start, nbytes, resources, cap):
        yield env.timeout(start)
        yield net.transfer(nbytes, resources, cap)
        ends[i] = env.now

    for i, spec in enumerate(flows):
        env.process(flow(i, *spec))
    env.run()
    return [ends[i] for i in range(len(flows))], net


def test_max_min_fair_across_two_resources():
    # the textbook case: a long flow through a and b, a short one on each; all get 5 B/s
    # (a and b full); once the short ones end at 2 s, the long one gets 10 B/s
    ends, net = finish_times(
        {"a": 10.0, "b": 10.0},
        [
            (0, 30.0, ["a", "b"], float("inf")),
            (0, 10.0, ["a"], float("inf")),
            (0, 10.0, ["b"], float("inf")),
        ],
    )
    assert ends == pytest.approx([4.0, 2.0, 2.0])
    assert net.bytes_by_resource == {"a": 40.0, "b": 40.0}
    assert net.history[0] == (0.0, {"a": 10.0, "b": 10.0})


def test_a_capped_flow_leaves_the_rest_to_the_others():
    # flow 0 is capped at 2 B/s; flow 1 takes the other 8 B/s of the resource
    ends, _ = finish_times({"r": 10.0}, [(0, 4.0, ["r"], 2.0), (0, 16.0, ["r"], 100.0)])
    assert ends == pytest.approx([2.0, 2.0])


def test_a_bottleneck_elsewhere_frees_bandwidth_here():
    # flow 0 goes through the slow s (1 B/s); flow 1 gets the rest of f (9 B/s)
    ends, _ = finish_times({"f": 10.0, "s": 1.0}, [(0, 2.0, ["f", "s"], 1e9), (0, 9.0, ["f"], 1e9)])
    assert ends == pytest.approx([2.0, 1.0])


def test_a_flow_that_starts_later_takes_its_share_then():
    ends, _ = finish_times({"r": 10.0}, [(0, 15.0, ["r"], 1e9), (1, 5.0, ["r"], 1e9)])
    # 0..1 s: flow 0 alone moves 10; then 5 B/s each: both have 5 left, both end at 2 s
    assert ends == pytest.approx([2.0, 2.0])


def test_bad_arguments_name_themselves():
    env = simpy.Environment()
    with pytest.raises(
        ValueError,
        match=r"^capacity of 'r' must be a positive finite number "
        r"of bytes/s, not 0$",
    ):
        FluidNetwork(env, {"r": 0})
    net = FluidNetwork(env, {"r": 10.0})
    with pytest.raises(ValueError, match=r"^resources must be among r, not 'x'$"):
        net.transfer(1.0, ["x"], 1.0)
    with pytest.raises(ValueError, match=r"^nbytes must be a number >= 0, not -1$"):
        net.transfer(-1, ["r"], 1.0)
    with pytest.raises(
        ValueError,
        match=r"^cap_Bps must be a positive number of bytes/s "
        r"\(finite for a flow through no resource\), not inf$",
    ):
        net.transfer(1.0, [])
    with pytest.raises(ValueError, match=r"^cap_Bps must be a positive number .*, not 0$"):
        net.transfer(1.0, ["r"], 0)


def test_a_flow_set_checks_its_caps_once():
    with pytest.raises(ValueError, match=r"^cap_Bps must be a positive number .*, not 0$"):
        FlowSet([["r"]], cap_Bps=[0])
    with pytest.raises(ValueError, match=r"^cap_Bps must be a positive number .*, not inf$"):
        FlowSet([["r"], []])
    with pytest.raises(ValueError, match=r"^cap_Bps must give one cap per flow \(2\), not 1$"):
        FlowSet([["r"], ["r"]], cap_Bps=[1.0])
    flows = FlowSet([("r", "s"), ["r"]], [2.0, math.inf])
    assert flows == FlowSet([["r", "s"], ("r",)], [2, math.inf])
    assert hash(flows) == hash(FlowSet([["r", "s"], ("r",)], [2, math.inf]))
    assert flows != FlowSet([["r", "s"], ("r",)])
    assert len(flows) == 2 and flows.names == ("r", "s")


def test_start_checks_the_bytes_and_resources():
    env = simpy.Environment()
    net = FluidNetwork(env, {"r": 10.0})
    flows = FlowSet([["r"], ["r"]])
    with pytest.raises(TypeError, match=r"^flows must be a FlowSet, not list$"):
        net.start([["r"]], [1.0])
    with pytest.raises(ValueError, match=r"^nbytes must give one size per flow \(2\), not "):
        net.start(flows, [1.0])
    with pytest.raises(ValueError, match=r"^nbytes must be numbers >= 0, not nan$"):
        net.start(flows, [1.0, math.nan])
    with pytest.raises(ValueError, match=r"^resources must be among r, not 'x'$"):
        net.start(FlowSet([["x"]]), [1.0])
    assert not net.flows


def test_start_is_transfers_without_the_checks():
    """The same flows through start() and transfers(): the same times, history, bytes."""
    capacities = {"a": 10.0, "b": 4.0}
    specs = [(30.0, ["a", "b"], math.inf), (10.0, ["a"], 3.0), (0.0, ["b"], 1.0), (7.0, ["b"])]
    runs = []
    for how in ("transfers", "start"):
        env = simpy.Environment()
        net = FluidNetwork(env, capacities)
        if how == "transfers":
            events = net.transfers(specs)
        else:
            flows = FlowSet(
                [s[1] for s in specs], [s[2] if len(s) > 2 else math.inf for s in specs]
            )
            events = net.start(flows, [s[0] for s in specs])
        ends = {}
        for i, event in enumerate(events):
            event.callbacks.append(lambda _e, i=i, ends=ends, env=env: ends.__setitem__(i, env.now))
        env.run()
        runs.append((ends, net.history, net.bytes_by_resource))
    assert runs[0] == runs[1]
    assert runs[0][0][2] == 0.0  # no bytes: at once


def loop_fill(capacities, flows):
    """Progressive filling flow by flow (the reference): per ``(resources, cap)``, its rate."""
    rate = [0.0] * len(flows)
    left = {name: capacities[name] for resources, _ in flows for name in resources}
    unfrozen = list(range(len(flows)))
    while unfrozen:
        users = {}
        for i in unfrozen:
            for name in flows[i][0]:
                users[name] = users.get(name, 0) + 1
        step = min(flows[i][1] - rate[i] for i in unfrozen)
        step = max(min([step] + [left[n] / c for n, c in users.items()]), 0.0)
        for i in unfrozen:
            rate[i] += step
        full = set()
        for name, count in users.items():
            left[name] -= step * count
            if left[name] <= 1e-9 * capacities[name]:
                full.add(name)
        keep = [
            i
            for i in unfrozen
            if rate[i] < flows[i][1] * (1 - 1e-12) and full.isdisjoint(flows[i][0])
        ]
        if len(keep) == len(unfrozen):
            break
        unfrozen = keep
    return rate


@pytest.mark.parametrize("seed", range(40))
def test_rates_are_the_flow_by_flow_fill_to_the_last_bit(seed):
    """The fill works on arrays, each element's arithmetic that of the loop (+, -, *, / and
    minimum, IEEE-rounded; no sum reordered): the rates are the loop's, bit for bit."""
    print(f"seed {seed}")
    rng = random.Random(seed)
    capacities = {f"r{i}": rng.choice([1.0, 10.0, rng.uniform(0.1, 100.0)]) for i in range(12)}
    flows = []
    for _ in range(rng.randint(1, 60)):
        resources = rng.sample(sorted(capacities), rng.randint(0, 4))
        if resources and rng.random() < 0.2:
            resources.append(resources[0])  # through one resource twice
        finite = rng.random() < 0.4 or not resources
        flows.append((tuple(resources), rng.uniform(0.05, 20.0) if finite else math.inf))
    env = simpy.Environment()
    net = FluidNetwork(env, capacities)
    net.transfers([(1.0, resources, cap) for resources, cap in flows])
    assert [rate for _, rate, _, _ in net.flows] == loop_fill(capacities, flows)
    use = {name: 0.0 for name in capacities}
    for (resources, _), rate in zip(flows, loop_fill(capacities, flows), strict=True):
        for name in resources:
            use[name] += rate
    assert net.history[0] == (0, use)


def memo_run(flows, memo):
    """A flow set and a flow started together on two resources; when the last ends."""
    env = simpy.Environment()
    net = FluidNetwork(env, {"a": 10.0, "b": 6.0}, memo=memo)
    net.start(flows, [10.0, 30.0, 5.0], together=True)
    net.transfer(4.0, ["b"], 2.0)
    env.run()
    return env.now, net.history


def test_a_memo_shared_by_runs_gives_the_same_times():
    """Rates memoised by the flows in flight: a second run fills nothing and ends as the
    first, and as a network without a memo of its caller's."""
    memo: dict = {}
    flows = FlowSet([["a"], ["a", "b"], ["b"]])
    first = memo_run(flows, memo)
    size = len(memo)
    assert memo_run(flows, memo) == first == memo_run(flows, None)
    assert len(memo) == size > 0
