"""Round ``value * 2**exp`` (an unsigned integer and an exponent) to binary32, ties to even."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Mux, Signal, signed

from tlm.formats import CANONICAL_NAN_BITS

from ..arith import words
from .prefix import increment

__all__ = ["round_to_f32", "round_up", "normalise_left", "leading_zeros", "pack_f32", "F32_INF"]

#: Bits of +infinity in binary32; a rounded magnitude at or above it has overflowed.
F32_INF = 0x7F800000


def round_up(kept, guard, sticky):
    """Round to nearest, ties to even: add one to ``kept`` when the first bit dropped
    (``guard``) is set and either any bit below it (``sticky``) or ``kept``'s last bit is."""
    return guard & (sticky | kept[0])


def normalise_left(m, value, name: str, stages=None, cut=None):
    """``(value << n, n)`` with ``n`` the leading zeros of ``value`` in its width
    (:func:`leading_zeros`; for 0, ``(0, width)``): the count first, then one shift by it.
    With ``stages`` (:class:`hdl.stages.Stages`), the cut named ``cut`` may put a register
    between the count and the shift."""
    if words():  # the binary search shifts as it counts: no shift after it
        zeros, shifted = _leading_zeros_words(m, value, f"{name}_lz")
        if stages is not None:
            v = stages.cut(cut, shifted=shifted, zeros=zeros)
            shifted, zeros = v["shifted"], v["zeros"]
        return shifted, zeros
    zeros = leading_zeros(m, value, f"{name}_lz")
    if stages is not None:
        v = stages.cut(cut, value=value, zeros=zeros)
        value, zeros = v["value"], v["zeros"]
    out = Signal(len(value), name=f"{name}_out")
    m.d.comb += out.eq(value << zeros)
    return out, zeros


def leading_zeros(m, value, name: str):
    """The leading zeros of ``value`` in its width (for 0: the width), as a tree over the
    bits: each node joins its halves' counts (the upper half a power of two wide) by a
    multiplexer on whether the upper half is all zeros, the bits above the lower count's set
    directly, with no adder: log2(width) levels of multiplexers, and no shift on the way.
    In the words form (:mod:`hdl.arith`), a binary search by shifts."""
    if words():
        return _leading_zeros_words(m, value, name)[0]
    nodes = []

    def tree(bits):  # (all zero, leading zeros) of ``bits``, most significant bit last
        if len(bits) == 1:
            return ~bits[0], ~bits[0]  # one bit: the count is the flag
        half = 1 << ((len(bits) - 1).bit_length() - 1)  # the upper part, a power of two
        even = len(bits) == 2 * half  # both parts as wide: the lower may be all zeros too
        lo_zero, lo = tree(bits[: len(bits) - half])
        hi_zero, hi = tree(bits[len(bits) - half :])
        b = half.bit_length() - 1  # bits of a count below `half`
        count = Signal(b + 1 + even, name=f"{name}_{len(nodes)}")
        nodes.append(count)
        parts = []
        if b:  # below `half`: the upper count, or the lower one when the upper is all zeros
            low = Signal(b, name=f"{name}_{len(nodes) - 1}_lo")
            m.d.comb += low.eq(lo)
            parts.append(Mux(hi_zero, low, hi[:b]))
        parts.append(hi_zero & ~lo_zero if even else hi_zero)  # + half
        if even:
            parts.append(hi_zero & lo_zero)  # 2 * half: the whole node is zeros
        m.d.comb += count.eq(Cat(*parts))
        return hi_zero & lo_zero, count

    return tree(value)[1]


def _leading_zeros_words(m, value, name: str):
    """``(count, value << count)``: :func:`leading_zeros` as a binary search, for each power
    of two ``s`` from the largest below the width, if the top ``s`` bits are zero, count
    ``s`` and shift them out. The count's bits are those decisions; 0 counts the width.
    Every shift keeps the word's width (no wider intermediate for Verilator to build)."""
    width = len(value)
    span = 1 << (width - 1).bit_length()  # the value placed at the top of a power of two
    cur = Signal(span, name=f"{name}_w0")
    m.d.comb += cur.eq(value << (span - width))
    found = []
    step = span >> 1
    while step:
        zero = Signal(name=f"{name}_z{step}")
        nxt = Signal(span, name=f"{name}_w{step}")
        up = Cat(Const(0, step), cur[: span - step])  # cur << step in span bits
        m.d.comb += [zero.eq(cur[span - step :] == 0), nxt.eq(Mux(zero, up, cur))]
        found.insert(0, zero)
        cur, step = nxt, step >> 1
    count = Signal(width.bit_length(), name=f"{name}_n")
    m.d.comb += count.eq(Mux(value == 0, width, Cat(*found)))
    shifted = Signal(width, name=f"{name}_shifted")
    m.d.comb += shifted.eq(cur[span - width :])  # 0 for 0, as value << width would be
    return count, shifted


def round_to_f32(m, value, exp, name: str = "rnd", stages=None):
    """Return the 33-bit magnitude (exponent and fraction fields, no sign) of ``value *
    2**exp`` rounded to nearest even, for ``exp >= -149`` (both addends of a sum of binary32
    values, so every such sum is a multiple of 2**-149), and whether it overflowed (is at or
    above :data:`F32_INF`). ``value == 0`` is the caller's to flag (the adder's empty sum).
    Combinational, added to ``m``.

    The value is normalised (:func:`normalise_left`), so a normal result rounds at a fixed
    place: 24 bits kept, a guard bit and a sticky rest. A result below 2**-126 is exact (a
    multiple of 2**-149 that small is a subnormal) and is placed, unrounded, on 2**-149.
    A rounding carry out of the significand adds one to the exponent field, and into the
    infinity pattern when that overflows the range.

    ``stages`` (:class:`hdl.stages.Stages`) may put registers at the cuts ``add.norm_half``
    (between the leading zeros' count and the shift), ``add.norm`` (after it) and
    ``add.round`` (before the rounding increment).
    """
    from ..stages import Stages

    st = stages or Stages(m)
    width = len(value)
    if width < 26:
        raise ValueError(f"value must be at least 26 bits wide to round here, not {width}")
    # The exponent's sums that do not need the leading zeros, formed while they are counted.
    expw = Signal(signed(len(exp) + 2), name=f"{name}_expw")
    exp149 = Signal(signed(len(exp) + 2), name=f"{name}_exp149")
    m.d.comb += [expw.eq(exp + (width - 1)), exp149.eq(exp + 149)]
    st.carry[f"{name}_expw"], st.carry[f"{name}_exp149"] = expw, exp149
    norm, zeros = normalise_left(m, value, f"{name}_norm", st, "add.norm_half")
    v = st.cut("add.norm", norm=norm, zeros=zeros)
    norm, zeros = v["norm"], v["zeros"]
    expw, exp149 = st.carry.pop(f"{name}_expw"), st.carry.pop(f"{name}_exp149")
    e32 = Signal(signed(len(expw)), name=f"{name}_e32")  # exponent of the leading one
    m.d.comb += e32.eq(expw - zeros)
    normal = Signal(name=f"{name}_normal")
    m.d.comb += normal.eq(zeros <= expw + 126)  # e32 >= -126, beside e32
    kept = norm[width - 24 :]
    sticky = norm[: width - 25] != 0
    up = Signal(name=f"{name}_up")
    m.d.comb += up.eq(round_up(kept, norm[width - 25], sticky))
    # Subnormal: value * 2**(exp + 149) is an integer below 2**23, that is the normalised
    # value shifted right by zeros - (exp + 149) places (at least width - 23), losing nothing.
    place = Signal(range(width), name=f"{name}_place")
    m.d.comb += place.eq(Mux(normal, 0, zeros - exp149))
    sub = Signal(23, name=f"{name}_sub")
    m.d.comb += sub.eq((norm >> place)[:23])
    # The exponent field without and with a rounding carry, and whether it overflows, known
    # before the rounding increment.
    field0 = Signal(10, name=f"{name}_field0")
    ones, big, edge = (Signal(name=f"{name}_{k}") for k in ("ones", "big", "edge"))
    m.d.comb += [
        field0.eq(e32 + 127),
        ones.eq(kept.all()),
        big.eq(e32 >= 128),
        edge.eq(e32 == 127),
    ]
    v = st.cut(
        "add.round",
        kept=kept,
        up=up,
        field0=field0,
        normal=normal,
        sub=sub,
        ones=ones,
        big=big,
        edge=edge,
    )
    kept, up, field0, normal, sub = (v[k] for k in ("kept", "up", "field0", "normal", "sub"))
    frac = Signal(23, name=f"{name}_frac")
    m.d.comb += frac.eq(increment(m, kept, up, f"{name}_inc")[:23])
    # The rounded significand is 2**23 .. 2**24: the fraction is its low 23 bits, and 2**24
    # (a carry out of 24 ones) adds one to the exponent field, into the infinity pattern at
    # the top.
    carry = Signal(name=f"{name}_carry")
    m.d.comb += carry.eq(v["ones"] & up)
    field = Signal(10, name=f"{name}_field")
    m.d.comb += field.eq(increment(m, field0, carry, f"{name}_finc")[:10])
    above = Signal(33, name=f"{name}_normal_mag")
    m.d.comb += above.eq(Cat(frac, field))
    magnitude = Signal(33, name=f"{name}_mag")
    m.d.comb += magnitude.eq(Mux(normal, above, sub))
    overflow = Signal(name=f"{name}_overflow")  # magnitude >= F32_INF: field >= 255
    m.d.comb += overflow.eq(normal & (v["big"] | (v["edge"] & carry)))
    return magnitude, overflow


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
