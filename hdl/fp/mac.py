"""One floating-point multiply-accumulate step: the PE datapath of the numerics contract."""

from amaranth.hdl import Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tlm.formats import FloatFormat

from .add import Float32Adder
from .mul import FloatMultiplier

__all__ = ["FloatMac"]


class FloatMac(wiring.Component):
    """``acc_out = fp32(acc_in + fp32(w * x))`` when ``en``, else ``acc_in``. Combinational.

    Chained down a column from +0.0, k = 0 .. K-1, this is exactly ``tlm.tensor.matmul`` for
    floating-point operands (``tests/test_hdl_fp_mac.py``).

    Parameters
    ----------
    w_fmt, x_fmt : FloatFormat
        Formats of the stationary and moving operands (raw bits on ``w`` and ``x``).
    """

    def __init__(self, w_fmt: FloatFormat, x_fmt: FloatFormat):
        self.w_fmt, self.x_fmt = w_fmt, x_fmt
        super().__init__(
            {
                "w": In(w_fmt.storage_bits),
                "x": In(x_fmt.storage_bits),
                "en": In(1),
                "acc_in": In(32),
                "acc_out": Out(32),
            }
        )

    def elaborate(self, platform):
        m = Module()
        m.submodules.mul = mul = FloatMultiplier(self.w_fmt, self.x_fmt)
        m.submodules.add = add = Float32Adder()
        m.d.comb += [
            mul.a.eq(self.w),
            mul.b.eq(self.x),
            add.a.eq(self.acc_in),
            add.b.eq(mul.p),
            self.acc_out.eq(Mux(self.en, add.s, self.acc_in)),
        ]
        return m
