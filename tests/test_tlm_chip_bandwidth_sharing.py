"""Max-min fair sharing of resources by flows: rates, caps, completion times, bad input."""

import doctest

import pytest
import simpy

from tlm.chip import bandwidth_sharing
from tlm.chip.bandwidth_sharing import FluidNetwork

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
