"""One floating-point multiply-accumulate step: the PE datapath of the numerics contract."""

from amaranth.hdl import Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .add import Float32Adder
from .mul import FloatMultiplier, format_tuple

__all__ = ["FloatMac"]


class FloatMac(wiring.Component):
    """``acc_out = fp32(acc_in + fp32(w * x))`` when ``en``, else ``acc_in``. Combinational.

    Chained down a column from +0.0, k = 0 .. K-1, this is exactly ``tlm.tensor.matmul`` for
    floating-point operands (``tests/test_hdl_fp_mac.py``).

    Parameters
    ----------
    w_fmt, x_fmt : FloatFormat or sequence of FloatFormat
        Formats of the stationary and moving operands (raw bits on ``w`` and ``x``); given
        several, ``w_code`` and ``x_code`` choose one at run time (see
        :class:`~hdl.fp.FloatMultiplier`).
    """

    def __init__(self, w_fmt, x_fmt):
        self.w_fmts, self.x_fmts = format_tuple(w_fmt), format_tuple(x_fmt)
        ports = {}
        for side, fmts in (("w", self.w_fmts), ("x", self.x_fmts)):
            ports[side] = In(max(f.storage_bits for f in fmts))
            if len(fmts) > 1:
                ports[f"{side}_code"] = In((len(fmts) - 1).bit_length())
        super().__init__({**ports, "en": In(1), "acc_in": In(32), "acc_out": Out(32)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.mul = mul = FloatMultiplier(self.w_fmts, self.x_fmts)
        m.submodules.add = add = Float32Adder()
        for side, port in (("w", "a"), ("x", "b")):
            if hasattr(self, f"{side}_code"):
                m.d.comb += getattr(mul, f"{port}_code").eq(getattr(self, f"{side}_code"))
        m.d.comb += [
            mul.a.eq(self.w),
            mul.b.eq(self.x),
            add.a.eq(self.acc_in),
            add.b.eq(mul.p),
            self.acc_out.eq(Mux(self.en, add.s, self.acc_in)),
        ]
        return m
