"""Multiply two floating-point operands into an IEEE binary32 product, rounded to nearest even."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tlm.formats import FloatFormat

from ..stages import Stages
from .csa import carry_save_product, compress
from .prefix import increment
from .round import normalise_left, pack_f32, round_up

__all__ = [
    "FloatMultiplier",
    "decode",
    "decode_any",
    "format_tuple",
    "multiply",
    "normalise",
    "product",
]


def format_tuple(fmts) -> tuple[FloatFormat, ...]:
    """One floating-point format or a sequence of them, as a non-empty tuple."""
    fmts = (fmts,) if isinstance(fmts, FloatFormat) else tuple(fmts)
    if not fmts or not all(isinstance(f, FloatFormat) for f in fmts):
        raise TypeError(f"formats must be FloatFormat objects, not {fmts!r}")
    return fmts


def decode_any(
    m: Module, fmts: tuple[FloatFormat, ...], raw, code, prefix: str, width=0, stages=None
):
    """:func:`decode` for an operand whose format is ``fmts[code]``, chosen at run time, with
    its significand normalised (:func:`normalise`) to the widest format's width, or to
    ``width`` bits if that is more.

    Each format is decoded from the low bits of ``raw``; the fields are widened to the widest
    format's and selected by ``code`` (a code naming no format decodes as ``fmts[0]``). The
    zero flag of the result is the significand's top bit, clear. With ``stages``
    (:class:`hdl.stages.Stages`), the cut ``dec.norm`` may put a register in the
    normalisation, between the leading zeros' count and the shift.
    """
    parts = [decode(m, f, raw[: f.storage_bits], f"{prefix}{i}") for i, f in enumerate(fmts)]
    width = max([width] + [len(p[1]) for p in parts])
    if len(fmts) == 1:
        sign, sig, exp, nan, inf, _ = parts[0]
    else:
        sign = Signal(name=f"{prefix}_sign")
        sig = Signal(width, name=f"{prefix}_raw_sig")
        exp = Signal(signed(max(len(p[2]) for p in parts)), name=f"{prefix}_raw_exp")
        nan, inf = Signal(name=f"{prefix}_nan"), Signal(name=f"{prefix}_inf")
        with m.Switch(code):
            for i, (s, g, e, n, f, _) in enumerate(parts):
                with m.Case(*([i] if i else [0, *range(len(fmts), 1 << len(code))])):
                    m.d.comb += [sign.eq(s), sig.eq(g), exp.eq(e), nan.eq(n), inf.eq(f)]
    if len(sig) < width:
        wide = Signal(width, name=f"{prefix}_wide_sig")
        m.d.comb += wide.eq(sig)
        sig = wide
    flags = {f"{prefix}_sign": sign, f"{prefix}_nan": nan, f"{prefix}_inf": inf}
    if stages is not None:  # the flags ride through the cut beside the significand
        stages.carry |= flags
    sig, exp = normalise(m, sig, exp, prefix, stages)
    if stages is not None:
        sign, nan, inf = (stages.carry.pop(k) for k in flags)
    return sign, sig, exp, nan, inf, ~sig[-1]


def normalise(m: Module, sig, exp, prefix: str, stages=None):
    """``(sig << n, exp - n)`` with ``n`` such that the top bit of the shifted significand
    is set (unchanged when ``sig`` is 0): the same value, with its leading one at a known
    place, so that a product of two normalised significands has its leading one at one of
    two places and needs no search for it. With ``stages``, the cut ``dec.norm`` may put a
    register between the leading zeros' count and the shift (:func:`normalise_left`)."""
    if stages is not None:
        stages.carry[f"{prefix}_exp"] = exp
    out_sig, shift = normalise_left(m, sig, f"{prefix}_norm", stages, "dec.norm")
    if stages is not None:
        exp = stages.carry.pop(f"{prefix}_exp")
    out_exp = Signal(signed(len(exp)), name=f"{prefix}_nexp")  # every format's range fits
    m.d.comb += out_exp.eq(exp - shift)
    return out_sig, out_exp


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
        # one constant add, not a subtraction after a multiplexer
        exp.eq(Mux(subnormal, 1 - bias - f_bits, e_field - (bias + f_bits))),
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


def product(m: Module, a, b, stages=None):
    """``fp32(a * b)`` of two decoded, normalised operands (``(sign, sig, exp, nan, inf,
    zero)`` as :func:`decode_any` returns them), unpacked: ``(sign, sig, exp, nan, inf,
    field)`` with value ``sig * 2**exp`` exactly the rounded product (``sig`` at most
    ``2**24``, ``exp`` at least -149), ``inf`` set for an infinite or overflowed product,
    ``nan`` for an invalid one, and ``field`` ``exp + 150``. Added to ``m``.

    ``stages`` (:class:`hdl.stages.Stages`) may put registers inside the multiplier, before
    its last 3:2 level and final add (cut ``mul.csa``), after it (``mul.multiply``), after
    the normalisation and the subnormal shift amount (``mul.norm``) and before the rounding
    increment (``mul.round``).

    Both significands have their top bit set (or are 0), so the exact product's leading one
    is its top bit or the next: one multiplexer normalises it, and a product in binary32's
    normal range rounds at a fixed place. Only a product below 2**-126 is shifted right, by
    at most 25 places, to round at 2**-149.
    """
    sa, ma, ea, nan_a, inf_a, zero_a = a
    sb, mb, eb, nan_b, inf_b, zero_b = b
    width = len(ma) + len(mb)
    full = max(width, 26)  # at least the 24 kept bits, a guard bit and one more
    st = stages or Stages(m)
    # With the cut mul.csa, the significand product is formed in carry-save form (three
    # numbers whose sum it is) and the register goes before its last 3:2 level and its
    # carry-propagate add. Without it, the product is one operator, which synthesis maps to
    # a Booth multiplier: the same value, fewer gates (6,957 cells against 8,138 for the
    # every-format PE in one stage).
    if "mul.csa" in st.active:
        terms = carry_save_product(m, ma, mb, "prod_csa", until=3)
    else:
        terms = (ma * mb,)
    # (at least 10 bits: the result's exponent goes down to -149 - 23 in the same width)
    e_shape = signed(max(len(ea) + 2, len(eb) + 2, 10))
    esum = Signal(e_shape, name="prod_esum")
    esum1 = Signal(e_shape, name="prod_esum1")  # with the product's top bit set
    m.d.comb += [esum.eq(ea + eb + (width - 2)), esum1.eq(ea + eb + (width - 1))]
    flags = {
        "sign": sa ^ sb,
        "nan": nan_a | nan_b | (inf_a & zero_b) | (inf_b & zero_a),
        "inf": inf_a | inf_b,
        "zero": zero_a | zero_b,
    }
    v = st.cut("mul.csa", t=Cat(*terms), esum=esum, esum1=esum1, **flags)
    terms = [v["t"][i * width : (i + 1) * width] for i in range(len(terms))]
    prod = Signal(width, name="prod_sum")
    if len(terms) > 1:
        s, c = compress(m, terms, width, "prod_cs")
        m.d.comb += prod.eq(s + c)
    else:
        m.d.comb += prod.eq(terms[0])
    v = st.cut("mul.multiply", prod=prod, **{k: v[k] for k in ("esum", "esum1", *flags)})
    prod, esum, esum1 = v["prod"], v["esum"], v["esum1"]
    flags = {k: v[k] for k in flags}
    top = Signal(name="prod_top")
    m.d.comb += top.eq(prod[-1])
    # Exponent of the leading one of the product; value = prod * 2**(ea + eb).
    lead_exp = Signal(e_shape, name="prod_e")
    m.d.comb += lead_exp.eq(Mux(top, esum1, esum))
    norm = Signal(full, name="prod_norm")  # leading one at the top bit
    m.d.comb += norm.eq(Mux(top, prod, prod << 1) << (full - width))
    # Right shift that puts 2**-149 on the last kept bit (0 in the normal range).
    under = Signal(range(26), name="prod_under")
    m.d.comb += under.eq(Mux(lead_exp < -126, Mux(lead_exp < -151, 25, -126 - lead_exp), 0))
    v = st.cut("mul.norm", norm=norm, under=under, lead_exp=lead_exp, **flags)
    norm, under, lead_exp = v["norm"], v["under"], v["lead_exp"]
    flags = {k: v[k] for k in flags}
    shifted = Signal(25, name="prod_shifted")  # the kept bits and the guard bit
    m.d.comb += shifted.eq((norm >> under)[full - 25 :])
    # Sticky: any bit of norm below the guard bit's place (ones mask from a right shift).
    rest = Signal(range(26), name="prod_rest")
    m.d.comb += rest.eq(25 - under)
    sticky = Signal(name="prod_sticky")
    m.d.comb += sticky.eq((norm & (Const((1 << full) - 1, full) >> rest)) != 0)
    kept = shifted[1:]
    up = Signal(name="prod_up")
    m.d.comb += up.eq(round_up(kept, shifted[0], sticky))
    exp = Signal(signed(len(lead_exp)), name="prod_exp")
    # A zero product sits at the bottom of the range, so that it never outranks the other
    # addend when an adder orders the two by exponent.
    normal = (under == 0) & ~flags["zero"]
    m.d.comb += exp.eq(Mux(normal, lead_exp - 23, -149))
    # The same plus 150, a binary32 exponent field's offset: an adder compares the two
    # without first decoding its other addend's field.
    field = Signal(signed(len(lead_exp) + 1), name="prod_field")
    m.d.comb += field.eq(Mux(normal, lead_exp + 127, 1))
    # Overflow, lead_exp + (rounding carry) > 127, decided beside the rounding increment.
    big, edge = Signal(name="prod_big"), Signal(name="prod_edge")
    m.d.comb += [big.eq(lead_exp > 127), edge.eq(lead_exp == 127)]
    v = st.cut("mul.round", kept=kept, up=up, exp=exp, field=field, big=big, edge=edge, **flags)
    sig = increment(m, v["kept"], v["up"], "prod_sig")
    inf = Signal(name="prod_inf")
    m.d.comb += inf.eq(v["inf"] | v["big"] | (v["edge"] & sig[24]))
    return v["sign"], sig, v["exp"], v["nan"], inf, v["field"]


def multiply(m: Module, a, b):
    """``fp32(a * b)`` of two decoded, normalised operands (:func:`decode_any`): binary32
    bits, ties to even, canonical NaN. Added to ``m``."""
    return pack_f32(m, product(m, a, b)[:5], name="prod")
