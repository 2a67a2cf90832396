"""Multiply two floating-point operands into an IEEE binary32 product, rounded to nearest even."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tlm.formats import CANONICAL_NAN_BITS, FloatFormat

from .round import F32_INF, round_to_f32

__all__ = ["FloatMultiplier", "decode", "decode_any", "format_tuple", "multiply"]


def format_tuple(fmts) -> tuple[FloatFormat, ...]:
    """One floating-point format or a sequence of them, as a non-empty tuple."""
    fmts = (fmts,) if isinstance(fmts, FloatFormat) else tuple(fmts)
    if not fmts or not all(isinstance(f, FloatFormat) for f in fmts):
        raise TypeError(f"formats must be FloatFormat objects, not {fmts!r}")
    return fmts


def decode_any(m: Module, fmts: tuple[FloatFormat, ...], raw, code, prefix: str):
    """:func:`decode` for an operand whose format is ``fmts[code]``, chosen at run time.

    Each format is decoded from the low bits of ``raw``; the fields are widened to the widest
    format's and selected by ``code`` (a code naming no format decodes as ``fmts[0]``).
    """
    if len(fmts) == 1:
        return decode(m, fmts[0], raw[: fmts[0].storage_bits], prefix)
    parts = [decode(m, f, raw[: f.storage_bits], f"{prefix}{i}") for i, f in enumerate(fmts)]
    sign = Signal(name=f"{prefix}_sign")
    sig = Signal(max(len(p[1]) for p in parts), name=f"{prefix}_sig")
    exp = Signal(signed(max(len(p[2]) for p in parts)), name=f"{prefix}_exp")
    nan, inf = Signal(name=f"{prefix}_nan"), Signal(name=f"{prefix}_inf")
    with m.Switch(code):
        for i, (s, g, e, n, f, _) in enumerate(parts):
            with m.Case(*([i] if i else [0, *range(len(fmts), 1 << len(code))])):
                m.d.comb += [sign.eq(s), sig.eq(g), exp.eq(e), nan.eq(n), inf.eq(f)]
    return sign, sig, exp, nan, inf, sig == 0


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
    all_ones = Signal(name=f"{prefix}_top")  # named: computed once
    m.d.comb += all_ones.eq(e_field == (1 << e_bits) - 1)
    if fmt.has_inf:
        nan = all_ones & (frac != 0)
        inf = all_ones & (frac == 0)
    else:  # float8_e4m3fn: only S.1111.111 is NaN; no infinities
        nan = all_ones & (frac == (1 << f_bits) - 1)
        inf = Const(0)
    subnormal = Signal(name=f"{prefix}_sub")
    m.d.comb += subnormal.eq(e_field == 0)
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
    a_fmt, b_fmt : FloatFormat or sequence of FloatFormat
        Operand formats (``tlm.formats.FLOAT_FORMATS``); ``a`` and ``b`` are their raw bits
        (TF32 in a float32 container, narrower formats in the low bits). Given several
        formats, the operand's format is chosen at run time by its ``a_code`` or ``b_code``
        port: ``a_fmt[a_code]``.
    """

    def __init__(self, a_fmt, b_fmt):
        self.a_fmts, self.b_fmts = format_tuple(a_fmt), format_tuple(b_fmt)
        ports = {}
        for side, fmts in (("a", self.a_fmts), ("b", self.b_fmts)):
            ports[side] = In(max(f.storage_bits for f in fmts))
            if len(fmts) > 1:
                ports[f"{side}_code"] = In((len(fmts) - 1).bit_length())
        super().__init__({**ports, "p": Out(32)})

    def elaborate(self, platform):
        m = Module()
        sa, ma, ea, nan_a, inf_a, zero_a = decode_any(
            m, self.a_fmts, self.a, getattr(self, "a_code", None), "a"
        )
        sb, mb, eb, nan_b, inf_b, zero_b = decode_any(
            m, self.b_fmts, self.b, getattr(self, "b_code", None), "b"
        )
        m.d.comb += self.p.eq(
            multiply(m, (sa, ma, ea, nan_a, inf_a, zero_a), (sb, mb, eb, nan_b, inf_b, zero_b))
        )
        return m


def multiply(m: Module, a, b):
    """``fp32(a * b)`` of two decoded operands (``(sign, sig, exp, nan, inf, zero)`` as
    :func:`decode` returns them): binary32 bits, ties to even, canonical NaN. Added to ``m``."""
    sa, ma, ea, nan_a, inf_a, zero_a = a
    sb, mb, eb, nan_b, inf_b, zero_b = b
    sign = sa ^ sb
    prod = Signal(len(ma) + len(mb))
    m.d.comb += prod.eq(ma * mb)
    exp = Signal(signed(max(len(ea), len(eb)) + 2))  # value = prod * 2**exp
    m.d.comb += exp.eq(ea + eb)
    magnitude = round_to_f32(m, prod, exp, name="prod")
    p = Signal(32)
    with m.If(nan_a | nan_b | (inf_a & zero_b) | (inf_b & zero_a)):
        m.d.comb += p.eq(CANONICAL_NAN_BITS)
    with m.Elif(inf_a | inf_b | (magnitude >= F32_INF)):
        m.d.comb += p.eq(Cat(Const(F32_INF, 31), sign))
    with m.Elif(zero_a | zero_b):
        m.d.comb += p.eq(Cat(Const(0, 31), sign))
    with m.Else():
        m.d.comb += p.eq(Cat(magnitude[:31], sign))
    return p
