"""Multiply two floating-point operands into an IEEE binary32 product, rounded to nearest even."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tlm.formats import CANONICAL_NAN_BITS, FloatFormat

from .round import F32_INF, round_to_f32

__all__ = ["FloatMultiplier", "decode"]


def decode(m: Module, fmt: FloatFormat, raw, prefix: str):
    """Split an operand into sign, integer significand and exponent (value = sig * 2**exp),
    and flags for NaN, infinity and zero. TF32 operands ignore their low 13 bits."""
    e_bits, f_bits = fmt.exp_bits, fmt.man_bits
    bias = (1 << (e_bits - 1)) - 1
    if fmt.ignored_low_bits:
        frac = raw[fmt.ignored_low_bits : 23]
        f_bits = 23 - fmt.ignored_low_bits
        e_field = raw[23:31]
        sign = raw[31]
    else:
        frac = raw[:f_bits]
        e_field = raw[f_bits : f_bits + e_bits]
        sign = raw[f_bits + e_bits]
    all_ones = e_field == (1 << e_bits) - 1
    if fmt.has_inf:
        nan = all_ones & (frac != 0)
        inf = all_ones & (frac == 0)
    else:  # float8_e4m3fn: only S.1111.111 is NaN; no infinities
        nan = all_ones & (frac == (1 << f_bits) - 1)
        inf = Const(0)
    subnormal = e_field == 0
    sig = Signal(f_bits + 1, name=f"{prefix}_sig")
    exp = Signal(signed(e_bits + 2), name=f"{prefix}_exp")  # unbiased exponent of sig's LSB
    m.d.comb += [
        sig.eq(Mux(subnormal, frac, Cat(frac, Const(1, 1)))),
        exp.eq(Mux(subnormal, 1 - bias, e_field - bias) - f_bits),
    ]
    zero = sig == 0
    return sign, sig, exp, nan, inf, zero


class FloatMultiplier(wiring.Component):
    """``p = fp32(a * b)``: the exact product rounded once to binary32, ties to even.

    Subnormal operands and results are kept; an infinite operand times a non-zero finite one
    is a signed infinity; any NaN operand, or infinity times zero, gives the canonical quiet
    NaN 0x7FC00000; a product beyond binary32's range is a signed infinity. Combinational.

    Parameters
    ----------
    a_fmt, b_fmt : FloatFormat
        Operand formats (``tlm.formats.FLOAT_FORMATS``); ``a`` and ``b`` are their raw bits
        (TF32 in a float32 container).
    """

    def __init__(self, a_fmt: FloatFormat, b_fmt: FloatFormat):
        self.a_fmt, self.b_fmt = a_fmt, b_fmt
        super().__init__({"a": In(a_fmt.storage_bits), "b": In(b_fmt.storage_bits), "p": Out(32)})

    def elaborate(self, platform):
        m = Module()
        sa, ma, ea, nan_a, inf_a, zero_a = decode(m, self.a_fmt, self.a, "a")
        sb, mb, eb, nan_b, inf_b, zero_b = decode(m, self.b_fmt, self.b, "b")
        sign = sa ^ sb
        width = len(ma) + len(mb)
        prod = Signal(width)
        m.d.comb += prod.eq(ma * mb)
        exp = Signal(signed(max(len(ea), len(eb)) + 2))  # value = prod * 2**exp
        m.d.comb += exp.eq(ea + eb)

        magnitude = round_to_f32(m, prod, exp, name="prod")
        with m.If(nan_a | nan_b | (inf_a & zero_b) | (inf_b & zero_a)):
            m.d.comb += self.p.eq(CANONICAL_NAN_BITS)
        with m.Elif(inf_a | inf_b | (magnitude >= F32_INF)):
            m.d.comb += self.p.eq(Cat(Const(F32_INF, 31), sign))
        with m.Elif(zero_a | zero_b):
            m.d.comb += self.p.eq(Cat(Const(0, 31), sign))
        with m.Else():
            m.d.comb += self.p.eq(Cat(magnitude[:31], sign))
        return m
