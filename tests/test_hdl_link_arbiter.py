"""hdl.link.arbiter.RoundRobinArbiter against the reference router's rule: of those asking,
the requester nearest after the last one granted (tlm.link.router.Router._arbitrate)."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.link.arbiter import RoundRobinArbiter


@pytest.mark.parametrize("count", [1, 3, 9, 13])
def test_round_robin(count, seed):
    rng = np.random.default_rng(seed)
    dut = RoundRobinArbiter(count)
    pointer = 0  # the model: the first requester to consider

    async def bench(ctx):
        nonlocal pointer
        for cycle in range(400):
            asking = [r for r in range(count) if rng.random() < 0.4]
            ctx.set(dut.requests, sum(1 << r for r in asking))
            want = min(asking, key=lambda r: (r - pointer) % count) if asking else None
            got = ctx.get(dut.grant)
            assert got == (0 if want is None else 1 << want), f"cycle {cycle} (seed {seed})"
            assert ctx.get(dut.granted) == bool(asking)
            if want is not None:
                pointer = (want + 1) % count
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def test_bad_count():
    with pytest.raises(TypeError) as error:
        RoundRobinArbiter(0)
    assert str(error.value) == "count must be a positive integer, not 0"
