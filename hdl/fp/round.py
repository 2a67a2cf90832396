"""Round ``value * 2**exp`` (an unsigned integer and an exponent) to binary32, ties to even."""

from __future__ import annotations

from amaranth.hdl import Const, Mux, Signal, signed

__all__ = ["round_to_f32", "F32_INF"]

#: Bits of +infinity in binary32; a rounded magnitude at or above it has overflowed.
F32_INF = 0x7F800000


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
    lead = Signal(range(max(2, width)), name=f"{name}_lead")
    for i in range(width):
        with m.If(value[i]):
            m.d.comb += lead.eq(i)
    e32 = Signal(signed(len(exp) + 2), name=f"{name}_e32")  # unbiased exponent of the result
    m.d.comb += e32.eq(exp + lead)
    lsb = Signal(signed(len(e32) + 1), name=f"{name}_lsb")
    m.d.comb += lsb.eq(Mux(e32 >= -126, e32 - 23, -149))
    shift = Signal(signed(len(lsb) + 1), name=f"{name}_shift")  # right shift of value
    m.d.comb += shift.eq(lsb - exp)

    wide = width + 2
    right = Signal(range(wide + 1), name=f"{name}_right")
    m.d.comb += right.eq(Mux(shift > wide, wide, Mux(shift < 0, 0, shift)))
    left = Signal(range(32), name=f"{name}_left")
    m.d.comb += left.eq(Mux(shift < 0, -shift, 0))
    kept = value >> right
    lost = value & ((Const(1, wide + 1) << right) - 1)
    below = Signal(range(wide + 1), name=f"{name}_below")  # weight of the first bit dropped
    m.d.comb += below.eq(Mux(right == 0, 0, right - 1))
    half = Const(1, wide + 1) << below
    round_up = (right != 0) & ((lost > half) | ((lost == half) & kept[0]))
    q = Signal(33, name=f"{name}_q")
    m.d.comb += q.eq(Mux(shift < 0, value << left, kept + round_up))

    biased = Signal(signed(len(e32) + 2), name=f"{name}_biased")
    m.d.comb += biased.eq(Mux(e32 >= -126, e32 + 126, 0))
    magnitude = Signal(33, name=f"{name}_mag")
    m.d.comb += magnitude.eq(Mux(value == 0, 0, (biased.as_unsigned() << 23) + q))
    return magnitude
