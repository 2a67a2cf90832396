"""A column of floating-point MAC steps in RTL equals tlm.tensor.matmul bit for bit."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.arith import FORMS, arithmetic
from hdl.fp import FloatMac
from tlm.formats import FLOAT_FORMATS
from tlm.tensor import EngineConfig, matmul
from verif.tensor.fp_operands import edge_operands

PAIRS = [
    ("bf16", "bf16"),
    ("fp16", "fp16"),
    ("fp8_e4m3", "fp8_e5m2"),
    ("fp8_e4m3fn", "fp8_e4m3fn"),
    ("tf32", "tf32"),
    ("fp32", "fp32"),
]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("w_name,x_name", PAIRS)
def test_column_of_macs_matches_the_tlm(w_name, x_name, form, seed):
    w_fmt, x_fmt = FLOAT_FORMATS[w_name], FLOAT_FORMATS[x_name]
    rng = np.random.default_rng(seed)
    dut = FloatMac(w_fmt, x_fmt)
    cases = []
    for _ in range(40):
        k = int(rng.integers(1, 17))
        w = np.array(edge_operands(w_fmt, rng, k), f"u{w_fmt.storage_bits // 8}")
        x = np.array(edge_operands(x_fmt, rng, k), f"u{x_fmt.storage_bits // 8}")
        fmt = "tf32" if w_name == "tf32" else None
        want = matmul(
            w.view(w_fmt.dtype)[:, None],
            x.view(x_fmt.dtype)[:, None],
            cfg=EngineConfig(16, 1, "all"),
            fmt=fmt,
        )
        cases.append((w, x, int(want.view(np.uint32)[0, 0])))
    bad = []

    async def bench(ctx):
        for w, x, want in cases:
            acc = 0  # +0.0
            for wk, xk in zip(w, x, strict=True):
                ctx.set(dut.w, int(wk))
                ctx.set(dut.x, int(xk))
                ctx.set(dut.en, 1)
                ctx.set(dut.acc_in, acc)
                acc = ctx.get(dut.acc_out)
            ctx.set(dut.en, 0)  # a disabled row passes the sum through untouched
            ctx.set(dut.acc_in, acc)
            assert ctx.get(dut.acc_out) == acc
            if acc != want and len(bad) < 5:
                bad.append(
                    f"w={[hex(v) for v in w]} x={[hex(v) for v in x]}: RTL {acc:#010x}, "
                    f"TLM {want:#010x}"
                )

    with arithmetic(form):  # the primitives take their form as the design elaborates
        sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, f"seed {seed}: " + "; ".join(bad)
