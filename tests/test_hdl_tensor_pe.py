"""The processing element in Amaranth's simulator against a per-cycle Python reference."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.tensor import ProcessingElement
from tlm.tensor.config import EngineConfig


def wrap32(v):
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


@pytest.mark.parametrize("stages", [1, 2])
def test_pe_random_cycles(stages, seed):
    """Per advancing cycle: the product of the registered lane and the weight it names meets
    ``p_in`` ``mul_stages`` cycles later, and the sum is on ``p_out`` ``add_stages`` after
    that; nothing moves while ``adv`` is low."""
    rng = np.random.default_rng(seed)
    cfg = EngineConfig(1, 1, pe_stages=stages)
    dut = ProcessingElement(cfg)
    # `a` is the registered moving lane; `mul` the products on their way to the sum, `add`
    # the sums on their way to p_out (its last entry is p_out).
    ref = {"w": [0, 0], "a": (0, 0, 0)}
    ref |= {"mul": [(0, 0)] * cfg.mul_stages, "add": [0] * cfg.add_stages}

    async def bench(ctx):
        for cycle in range(600):
            adv = int(rng.random() < 0.8)
            x = int(rng.choice([-128, 127, rng.integers(-128, 128)]))
            en, bank = int(rng.random() < 0.7), int(rng.integers(0, 2))
            p_in = int(rng.choice([-(1 << 31), (1 << 31) - 1, rng.integers(-(1 << 31), 1 << 31)]))
            we, wbank = int(rng.random() < 0.3), int(rng.integers(0, 2))
            wdata = int(rng.integers(-128, 128))
            ctx.set(dut.adv, adv)
            ctx.set(dut.a_in, {"data": x, "en": en, "bank": bank})
            ctx.set(dut.p_in, p_in)
            ctx.set(dut.w_in, {"data": wdata, "we": we, "bank": wbank})
            a = ctx.get(dut.a_out)
            assert (a.data, a.en, a.bank) == ref["a"], f"cycle {cycle} a_out (seed {seed})"
            assert ctx.get(dut.p_out) == ref["add"][-1], f"cycle {cycle} p_out (seed {seed})"
            if adv:
                a_x, a_en, a_bank = ref["a"]  # the PE computes from its registered lane
                entering = (ref["w"][a_bank] * a_x, a_en)
                ref["mul"] = [entering, *ref["mul"]]
                prod, p_en = ref["mul"].pop()
                ref["add"] = [wrap32(p_in + prod) if p_en else p_in, *ref["add"][:-1]]
                ref["a"] = (x, en, bank)
                if we:
                    ref["w"][wbank] = wdata
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
