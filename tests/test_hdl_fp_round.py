"""hdl/fp/round.py: the leading-zero count and the normalisation built on it."""

import random

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from hdl.fp.round import leading_zeros, normalise_left


def _values(width, rng):
    if width <= 10:
        return range(1 << width)  # every value
    ones = [(1 << width) - 1, 0, 1]
    return ones + [rng.getrandbits(rng.randint(1, width)) for _ in range(400)]


@pytest.mark.parametrize("width", [*range(1, 11), 23, 24, 32, 33, 56, 64])
def test_leading_zeros_and_the_shift_match_python(width, seed):
    """Every value below 11 bits, and random values of each length above (the seed is
    printed by the suite; rerun with ``--seed``): the count is ``width - bit_length`` (the
    width for 0), and the shifted value has its top bit set."""
    rng = random.Random(seed)
    m = Module()
    x = Signal(width)
    count = leading_zeros(m, x, "lz")
    shifted, zeros = normalise_left(m, x, "nl")
    bad = []

    async def bench(ctx):
        for v in _values(width, rng):
            ctx.set(x, v)
            want = width - v.bit_length()
            got = (ctx.get(count), ctx.get(zeros), ctx.get(shifted))
            if got != (want, want, (v << want) & ((1 << width) - 1)):
                bad.append((v, got))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, bad[:5]
