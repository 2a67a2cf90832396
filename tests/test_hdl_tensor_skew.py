"""Skew lines and control pipes: each lane delayed by exactly its number of advancing cycles."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.tensor.skew import Pipe, Skew


def test_single_lane_passes_through():
    dut = Skew(16, 1)

    async def bench(ctx):
        for v in (0, 1, 0xBEEF):
            ctx.set(dut.i, [v])
            assert list(ctx.get(dut.o)) == [v]
            await ctx.delay(1e-9)

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize(
    "n,reverse,step", [(2, False, 1), (5, False, 1), (5, True, 1), (8, True, 1), (4, False, 3)]
)
def test_skew_delays(n, reverse, step, seed):
    rng = np.random.default_rng(seed)
    dut = Skew(16, n, reverse=reverse, step=step)
    history = []  # inputs at each advancing cycle

    async def bench(ctx):
        for cycle in range(60):
            adv = int(rng.random() < 0.7)
            values = [int(v) for v in rng.integers(0, 1 << 16, n)]
            ctx.set(dut.adv, adv)
            ctx.set(dut.i, values)
            out = ctx.get(dut.o)
            for lane in range(n):
                d = dut.delay(lane)
                if d == 0:
                    assert out[lane] == values[lane]
                elif len(history) >= d:
                    assert out[lane] == history[-d][lane], f"cycle {cycle} lane {lane}"
            if adv:
                history.append(values)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("through", [True, False])
def test_pipe_taps_and_reset_value(through):
    """Tap s is the input s advancing cycles ago; without ``through``, tap 0 is zero."""
    dut = Pipe(4, 3, through=through)
    now = 4 if through else 0

    async def bench(ctx):
        assert list(ctx.get(dut.o)) == [0, 0, 0]
        ctx.set(dut.adv, 1)
        for v in (1, 2, 3):
            ctx.set(dut.i, v)
            await ctx.tick()
        ctx.set(dut.i, 4)
        assert list(ctx.get(dut.o)) == [now, 3, 2]
        ctx.set(dut.adv, 0)
        await ctx.tick()
        assert list(ctx.get(dut.o)) == [now, 3, 2]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("reverse", [False, True])
def test_skew_without_the_zero_delay_lane(reverse):
    """``through=False``: the zero-delay lane is left at zero (its users read ``i``); the
    others are delayed as usual."""
    dut = Skew(16, 3, reverse=reverse, through=False)
    zero = 2 if reverse else 0

    async def bench(ctx):
        ctx.set(dut.adv, 1)
        for v in (1, 2, 3):
            ctx.set(dut.i, [v, v + 10, v + 20])
            await ctx.tick()
        ctx.set(dut.i, [4, 14, 24])
        out = list(ctx.get(dut.o))
        assert out[zero] == 0
        assert ctx.get(dut.out(zero)) == 4 + 10 * zero  # users read that lane from `i`
        for lane in range(3):
            if lane != zero:
                d = dut.delay(lane)
                assert out[lane] == 4 - d + 10 * lane, f"lane {lane}"

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


def test_bad_arguments():
    with pytest.raises(ValueError, match=r"^n must be a positive integer, not 0$"):
        Skew(8, 0)
    with pytest.raises(ValueError, match=r"^stages must be a positive integer, not -1$"):
        Pipe(8, -1)
