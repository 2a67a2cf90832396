"""The systolic array (flat, in Amaranth's simulator): skewed operands in, column sums out."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.tensor import SystolicArray
from tlm.tensor import EngineConfig, matmul


@pytest.mark.parametrize(
    "rows,cols,slice_cols", [(1, 1, 1), (3, 2, 1), (2, 5, 1), (2, 6, 3), (4, 4, 2), (4, 4, 4)]
)
@pytest.mark.parametrize("stages", [1, 2])
def test_array_computes_skewed_matmul(rows, cols, slice_cols, stages, seed):
    cfg = EngineConfig(rows, cols, pe_stages=stages)
    step, ahead = cfg.add_stages, cfg.mul_stages
    rng = np.random.default_rng(seed)
    n = 6
    w = rng.integers(-128, 128, (rows, cols))
    x = rng.integers(-128, 128, (rows, n))
    want = matmul(w, x, cfg=cfg)  # [cols, n]
    dut = SystolicArray(cfg, slice_cols=slice_cols)
    got = np.zeros((cols, n), np.int64)

    async def bench(ctx):
        ctx.set(dut.adv, 1)
        # Load bank 1 one row per cycle, each column's write delayed by its index (diagonal);
        # row j's write lands (add_stages - 1) * j cycles later still.
        for t in range(rows + cols + (rows - 1) * (step - 1)):
            for c in range(cols):
                j = t - c
                lane = dut.w_in(c)
                ctx.set(
                    lane,
                    {
                        "data": int(w[j, c]) if 0 <= j < rows else 0,
                        "row": max(0, min(j, rows - 1)),
                        "we": int(0 <= j < rows),
                        "bank": 1,
                    },
                )
            await ctx.tick()
        for c in range(cols):
            ctx.set(dut.w_in(c).we, 0)
        # Beat b enters row k at cycle b + k * add_stages; each PE registers its moving lane
        # before using it, so column m's sum of beat b leaves at
        # b + rows * add_stages + mul_stages + m + 1.
        for t in range(n + rows * step + ahead + cols + 2):
            for k in range(rows):
                b = t - k * step
                live = 0 <= b < n
                ctx.set(
                    dut.a_in[k], {"data": int(x[k, b]) if live else 0, "en": int(live), "bank": 1}
                )
            for m in range(cols):
                b = t - rows * step - ahead - m - 1
                if 0 <= b < n:
                    got[m, b] = ctx.get(dut.p_out[m])
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    np.testing.assert_array_equal(got, want, err_msg=f"seed {seed}, slices of {slice_cols}")


@pytest.mark.parametrize("slice_cols", [1, 2])
def test_array_holds_while_adv_is_low(slice_cols):
    cfg = EngineConfig(2, 2, pe_stages=1)  # the cycle counts below are for one-stage PEs
    dut = SystolicArray(cfg, slice_cols=slice_cols)

    async def bench(ctx):
        ctx.set(dut.adv, 1)
        ctx.set(dut.w_in(0), {"data": 3, "row": 0, "we": 1, "bank": 0})
        ctx.set(dut.w_in(1), {"data": 2, "row": 0, "we": 1, "bank": 0})
        await ctx.tick()
        ctx.set(dut.w_in(0).we, 0)
        ctx.set(dut.w_in(1).we, 0)
        await ctx.tick()  # load lanes are registered on entry to a slice
        ctx.set(dut.a_in[0], {"data": 5, "en": 1, "bank": 0})
        await ctx.tick()  # PE(0,0) registers 5
        ctx.set(dut.a_in[0], {"data": 7, "en": 1, "bank": 0})
        await ctx.tick()  # PE(0,0) sum 3*5, registers 7; PE(0,1) registers 5
        ctx.set(dut.a_in[0].en, 0)
        await ctx.tick()  # PE(0,0) sum 3*7; 15 at the bottom of column 0; PE(0,1) 2*5
        ctx.set(dut.adv, 0)
        for _ in range(5):  # nothing moves
            assert ctx.get(dut.p_out[0]) == 15
            assert ctx.get(dut.p_out[1]) == 0
            await ctx.tick()
        ctx.set(dut.adv, 1)
        await ctx.tick()
        assert ctx.get(dut.p_out[0]) == 21  # the second sum reached the bottom
        assert ctx.get(dut.p_out[1]) == 10  # column 1 one cycle behind column 0
        await ctx.tick()
        assert ctx.get(dut.p_out[0]) == 0  # and nothing after it
        assert ctx.get(dut.p_out[1]) == 14

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
