"""The processing element in Amaranth's simulator against a per-cycle Python reference."""

import numpy as np
from amaranth.sim import Simulator

from hdl.tensor import ProcessingElement
from tlm.tensor.config import EngineConfig


def wrap32(v):
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


def test_pe_random_cycles(seed):
    rng = np.random.default_rng(seed)
    dut = ProcessingElement(EngineConfig(1, 1))
    ref = {"w": [0, 0], "a": (0, 0, 0), "p": 0}  # `a` is the registered moving lane

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
            assert ctx.get(dut.p_out) == ref["p"], f"cycle {cycle} p_out (seed {seed})"
            if adv:
                a_x, a_en, a_bank = ref["a"]  # the PE computes from its registered lane
                ref["p"] = wrap32(p_in + ref["w"][a_bank] * a_x) if a_en else p_in
                ref["a"] = (x, en, bank)
                if we:
                    ref["w"][wbank] = wdata
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
