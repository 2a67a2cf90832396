"""Round ``value * 2**exp`` (an unsigned integer and an exponent) to binary32, ties to even."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Mux, Signal, signed

from tlm.formats import CANONICAL_NAN_BITS

__all__ = ["round_to_f32", "leading_one", "pack_f32", "F32_INF"]

#: Bits of +infinity in binary32; a rounded magnitude at or above it has overflowed.
F32_INF = 0x7F800000


def leading_one(m, value, name: str):
    """Index of the highest set bit of ``value`` (0 when ``value`` is 0), as a tree of
    halving steps: log2(width) levels of muxes rather than a chain of ``width`` of them."""
    bits = max(1, (len(value) - 1).bit_length())
    cur = Signal(1 << bits, name=f"{name}_in")
    m.d.comb += cur.eq(value)
    lead = Signal(bits, name=name)
    for level in reversed(range(bits)):
        half = 1 << level
        upper = cur[half : 2 * half] != 0
        nxt = Signal(half, name=f"{name}_{level}")
        m.d.comb += [lead[level].eq(upper), nxt.eq(Mux(upper, cur[half : 2 * half], cur[:half]))]
        cur = nxt
    return lead


def round_to_f32(m, value, exp, name: str = "rnd"):
    """Return the 33-bit magnitude (exponent and fraction fields, no sign) of ``value *
    2**exp`` rounded to nearest even, subnormals kept. A result at or above :data:`F32_INF`
    has overflowed; ``value == 0`` gives 0. Combinational, added to ``m``.

    The leading one of ``value`` gives the binary32 exponent; the last kept bit is 23 below
    it, or 2**-149 for subnormal results. Adding the rounded significand (hidden bit included)
    to ``(exponent + 126) << 23`` carries into the exponent by itself when rounding overflows
    the significand, and into the infinity pattern when that overflows the range.
    """
    width = len(value)
    lead = leading_one(m, value, f"{name}_lead")
    e32 = Signal(signed(len(exp) + 2), name=f"{name}_e32")  # unbiased exponent of the result
    m.d.comb += e32.eq(exp + lead)
    lsb = Signal(signed(len(e32) + 1), name=f"{name}_lsb")
    normal = Signal(name=f"{name}_normal")  # named signals: computed once, not at every use
    m.d.comb += normal.eq(e32 >= -126)
    m.d.comb += lsb.eq(Mux(normal, e32 - 23, -149))
    shift = Signal(signed(len(lsb) + 1), name=f"{name}_shift")  # right shift of value
    m.d.comb += shift.eq(lsb - exp)

    # Every intermediate stays within 64 bits (Verilator computes wider ones word by word, and
    # 16k PEs each do this every cycle): masks come from right shifts of constants, never
    # from left shifts, which Amaranth widens by the shift amount's range.
    wide = width + 2
    right = Signal(range(wide + 1), name=f"{name}_right")
    negative = Signal(name=f"{name}_neg")
    m.d.comb += negative.eq(shift < 0)
    m.d.comb += right.eq(Mux(shift > wide, wide, Mux(negative, 0, shift)))
    unkept = Signal(range(wide + 2), name=f"{name}_unkept")  # wide + 1 - right
    m.d.comb += unkept.eq(wide + 1 - right)
    left = Signal(range(32), name=f"{name}_left")
    m.d.comb += left.eq(Mux(negative, -shift, 0))
    kept = Signal(width, name=f"{name}_kept")
    lost = Signal(wide + 1, name=f"{name}_lost")  # the low `right` bits
    half = Signal(wide + 1, name=f"{name}_half")  # weight of the first bit dropped
    m.d.comb += [
        kept.eq(value >> right),
        lost.eq(value & (Const((1 << (wide + 1)) - 1, wide + 1) >> unkept)),
        half.eq(Const(1 << wide, wide + 1) >> unkept),
    ]
    round_up = (right != 0) & ((lost > half) | ((lost == half) & kept[0]))
    # A left shift (shift < 0) only happens when the leading one is below bit 23 (the result
    # then needs no rounding), so the low 24 bits of value are all of it.
    q = Signal(33, name=f"{name}_q")
    m.d.comb += q.eq(Mux(negative, value[: min(24, width)] << left, kept + round_up))

    biased = Signal(signed(len(e32) + 2), name=f"{name}_biased")
    m.d.comb += biased.eq(Mux(normal, e32 + 126, 0))
    magnitude = Signal(33, name=f"{name}_mag")
    m.d.comb += magnitude.eq(Mux(value == 0, 0, (biased.as_unsigned() << 23) + q))
    return magnitude


def pack_f32(m, value, name: str = "pack"):
    """Binary32 bits of an unpacked value ``(sign, sig, exp, nan, inf)``: ``sig * 2**exp``
    with ``sig`` at most ``2**24`` and ``exp`` at least -149, already rounded (as
    :func:`hdl.fp.mul.product` returns it). Added to ``m``.

    ``((exp + 149) << 23) + sig`` is the whole encoding: a subnormal has ``exp`` -149; a
    normal significand's hidden bit adds one to the exponent field, and ``sig == 2**24`` (a
    rounding carry) two.
    """
    sign, sig, exp, nan, inf = value
    bits = Signal(32, name=f"{name}_bits")
    magnitude = (exp + 149).as_unsigned()[:8] << 23
    with m.If(nan):
        m.d.comb += bits.eq(CANONICAL_NAN_BITS)
    with m.Elif(inf):
        m.d.comb += bits.eq(Cat(Const(F32_INF, 31), sign))
    with m.Elif(sig == 0):
        m.d.comb += bits.eq(Cat(Const(0, 31), sign))
    with m.Else():
        m.d.comb += bits.eq(Cat((magnitude + sig)[:31], sign))
    return bits
