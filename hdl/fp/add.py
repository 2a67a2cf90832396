"""Add two IEEE binary32 values, rounded to nearest even: the PE's accumulation step."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tlm.formats import CANONICAL_NAN_BITS, FLOAT_FORMATS

from ..stages import Stages
from .mul import decode
from .prefix import negate_if
from .round import F32_INF, round_to_f32

__all__ = ["Float32Adder", "add"]

#: Alignment kept below the larger operand's last bit. An operand further down than this is
#: below a quarter of the larger one's last place: replacing it by the smallest non-zero value
#: of the same sign at this depth rounds to the same binary32 result.
ALIGN = 31


class Float32Adder(wiring.Component):
    """``s = fp32(a + b)`` for binary32 ``a`` and ``b``, ties to even, subnormals kept.

    Infinities follow IEEE rules; NaN operands and ``inf - inf`` give the canonical quiet NaN
    0x7FC00000; an exact zero sum is +0.0 unless both operands are -0.0. Combinational.
    """

    a: In(32)
    b: In(32)
    s: Out(32)

    def elaborate(self, platform):
        m = Module()
        fp32 = FLOAT_FORMATS["fp32"]
        a = decode(m, fp32, self.a, "a")[:5]
        b = decode(m, fp32, self.b, "b")[:5]
        m.d.comb += self.s.eq(add(m, a, b))
        return m


def add(m: Module, a, b, stages=None, order=None):
    """``fp32(a + b)`` of two unpacked values ``(sign, sig, exp, nan, inf)`` (value ``sig *
    2**exp``, ``sig`` below ``2**25``, ``exp`` at least -149, a zero at -149): binary32 bits,
    ties to even, with the special cases of :class:`Float32Adder`. Added to ``m``;
    ``stages`` (:class:`hdl.stages.Stages`) may put registers at the cuts ``add.order``,
    ``add.align``, ``add.sum``, ``add.abs`` and those of :func:`round_to_f32`. ``order``,
    ``(ea + k, eb + k)`` for a constant ``k``, gives the exponents in a form quicker to
    compare (the operands' exponent fields); by default the exponents themselves."""
    st = stages or Stages(m)
    sa, ma, ea, nan_a, inf_a = a
    sb, mb, eb, nan_b, inf_b = b
    width = max(len(ma), len(mb))
    # The special cases are known from the operands: they ride to the end beside the sum.
    flags = {
        "add_nan": nan_a | nan_b | (inf_a & inf_b & (sa != sb)),
        "add_inf": inf_a | inf_b,
        "add_inf_sign": Mux(inf_a, sa, sb),
        "add_zero_sign": sa & sb,
    }
    st.carry.update(flags)

    # Order by the exponent of the last place: x has the larger (or equal) one.
    # Named signals are computed once: Amaranth repeats an expression at every use, and
    # every PE evaluates this every cycle.
    # Both differences at once, the order from the sign of one: a subtraction and a
    # multiplexer deep, not a comparison, a multiplexer and a subtraction.
    ka, kb = order or (ea, eb)
    e_shape = signed(max(len(ka), len(kb)) + 1)
    ab, ba = Signal(e_shape, name="add_ab"), Signal(e_shape, name="add_ba")
    m.d.comb += [ab.eq(ka - kb), ba.eq(kb - ka)]
    swap = Signal(name="add_swap")
    m.d.comb += swap.eq(ab[-1])  # eb > ea
    sx, mx, ex = Signal(name="add_sx"), Signal(width, name="add_mx"), Signal.like(ea, name="add_ex")
    sy, my, ey = Signal(name="add_sy"), Signal(width, name="add_my"), Signal.like(ea, name="add_ey")
    m.d.comb += [
        sx.eq(Mux(swap, sb, sa)),
        mx.eq(Mux(swap, mb, ma)),
        ex.eq(Mux(swap, eb, ea)),
        sy.eq(Mux(swap, sa, sb)),
        my.eq(Mux(swap, ma, mb)),
        ey.eq(Mux(swap, ea, eb)),
    ]
    d = Signal(range(1024), name="add_d")
    m.d.comb += d.eq(Mux(swap, ba, ab))
    v = st.cut("add.order", sx=sx, mx=mx, ex=ex, sy=sy, my=my, d=d)
    sx, mx, ex, sy, my, d = (v[k] for k in ("sx", "mx", "ex", "sy", "my", "d"))
    near = Signal(name="add_near")
    m.d.comb += near.eq(d <= ALIGN)
    shift = Signal(range(ALIGN + 1), name="add_shift")
    m.d.comb += shift.eq(Mux(near, d, ALIGN))
    # Both on the last place of 2**(ex - shift): x exactly, y exactly or as a sticky one.
    # x << shift as (x << ALIGN) >> (ALIGN - shift): no shift widens its operand
    back = Signal(range(ALIGN + 1), name="add_back")
    x_int = Signal(width + ALIGN, name="add_x")
    y_int = Signal(width + ALIGN, name="add_y")
    m.d.comb += [
        back.eq(ALIGN - shift),
        x_int.eq(Cat(Const(0, ALIGN), mx) >> back),
        y_int.eq(Mux(near, my, my != 0)),
    ]
    exp = Signal(signed(len(ex) + 1), name="add_exp")
    m.d.comb += exp.eq(ex - shift)
    v = st.cut("add.align", sx=sx, x=x_int, sy=sy, y=y_int, exp=exp)
    sx, x_int, sy, y_int, exp = (v[k] for k in ("sx", "x", "sy", "y", "exp"))
    total = Signal(signed(width + ALIGN + 2), name="add_total")
    # -v as ~v + 1: the two negations are carry-ins of the one add, not adds of their own.
    wide = len(total)
    m.d.comb += total.eq((x_int ^ sx.replicate(wide)) + (y_int ^ sy.replicate(wide)) + sx + sy)
    v = st.cut("add.sum", total=total, exp=exp)
    total, exp = v["total"], v["exp"]
    negative = Signal(name="add_neg")
    m.d.comb += negative.eq(total < 0)
    size = Signal(width + ALIGN + 1, name="add_size")
    m.d.comb += size.eq(negate_if(m, total.as_unsigned(), negative, "add_abs"))
    v = st.cut("add.abs", negative=negative, size=size, exp=exp)
    negative, size, exp = v["negative"], v["size"], v["exp"]
    st.carry["add_neg"], st.carry["add_empty"] = negative, size == 0
    magnitude, overflow = round_to_f32(m, size, exp, name="sum", stages=st)
    c = {k: st.carry.pop(k) for k in (*flags, "add_neg", "add_empty")}

    out = Signal(32, name="add_s")
    with m.If(c["add_nan"]):
        m.d.comb += out.eq(CANONICAL_NAN_BITS)
    with m.Elif(c["add_inf"]):
        m.d.comb += out.eq(Cat(Const(F32_INF, 31), c["add_inf_sign"]))
    with m.Elif(c["add_empty"]):
        m.d.comb += out.eq(Cat(Const(0, 31), c["add_zero_sign"]))
    with m.Elif(overflow):
        m.d.comb += out.eq(Cat(Const(F32_INF, 31), c["add_neg"]))
    with m.Else():
        m.d.comb += out.eq(Cat(magnitude[:31], c["add_neg"]))
    return out
