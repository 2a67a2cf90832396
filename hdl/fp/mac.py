"""One floating-point multiply-accumulate step: the PE datapath of the numerics contract."""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tlm.formats import FLOAT_FORMATS

from ..stages import Stages
from .add import add
from .mul import decode, decode_any, format_tuple, product

__all__ = ["FloatMac", "mac_step"]


def mac_step(m: Module, acc, w, x, stages=None, at_acc=None):
    """``fp32(acc + fp32(w * x))``: binary32 bits from the binary32 bits ``acc`` and two
    operands decoded and normalised by :func:`hdl.fp.mul.decode_any`. The product goes to
    the adder unpacked (:func:`hdl.fp.mul.product`): rounded, never packed into binary32
    and decoded again. Added to ``m``.

    ``stages`` (:class:`hdl.stages.Stages`) may register the product (``mul.*``, see
    :func:`hdl.fp.mul.product`, and ``mul.product`` after it) before ``acc`` is read, and the
    sum (``add.*``, see :func:`hdl.fp.add.add`); ``at_acc(carry, acc)``, called where ``acc``
    is first read, may add values to ``stages.carry`` that ride beside the sum."""
    st = stages or Stages(m)
    fields = ("sign", "sig", "exp", "nan", "inf", "field")
    prod = st.cut("mul.product", **dict(zip(fields, product(m, w, x, st), strict=True)))
    if st.retime and st.pending:
        # Retimed (the words form), the product's delay carries no more than it must: its
        # field is its exp + 150 (hdl.fp.mul.product), formed again after the delay.
        field = prod.pop("field")
        prod = st.sync(**prod)  # acc is read next
        prod_field = Signal.like(field, name="prod_field_again")
        m.d.comb += prod_field.eq(prod["exp"] + 150)
    else:
        prod = st.sync(**prod)  # acc is read next
        prod_field = prod.pop("field")
    if at_acc is not None:
        at_acc(st.carry, acc)
    acc_dec = decode(m, FLOAT_FORMATS["fp32"], acc, "acc")[:5]
    # The adder orders the two by their exponents plus 150: for the sum, its exponent field
    # (a subnormal's 0 read as 1), with no decoding in the way.
    e_field = acc[23:31]
    acc_field = Cat(e_field[0] | (e_field == 0), e_field[1:])
    return add(m, acc_dec, tuple(prod.values()), st, order=(acc_field, prod_field))


class FloatMac(wiring.Component):
    """``acc_out = fp32(acc_in + fp32(w * x))`` when ``en``, else ``acc_in``. Combinational.

    Chained down a column from +0.0, k = 0 .. K-1, this is exactly ``tlm.tensor.matmul`` for
    floating-point operands (``tests/test_hdl_fp_mac.py``); it is the datapath of every PE
    (:func:`hdl.formats.mac` runs the same :func:`mac_step` on operands decoded at the
    array's edge).

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
        w = decode_any(m, self.w_fmts, self.w, getattr(self, "w_code", None), "w")
        x = decode_any(m, self.x_fmts, self.x, getattr(self, "x_code", None), "x")
        m.d.comb += self.acc_out.eq(Mux(self.en, mac_step(m, self.acc_in, w, x), self.acc_in))
        return m
