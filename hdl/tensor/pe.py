"""Processing element of the weight-stationary systolic array."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tlm.tensor.config import EngineConfig

from ..formats import acc_shape, mac, operand_shape
from .layouts import moving_lane, weight_write

__all__ = ["ProcessingElement"]


class ProcessingElement(wiring.Component):
    """One PE: two banks of one stationary weight, a moving operand passed right, a partial sum
    passed down.

    Every register advances only when ``adv`` is high (the engine freezes the whole array while
    the result stream is stalled). Per advancing cycle::

        a_out <= a_in
        p_out <= p_in + w[a_in.bank] * a_in.data   if a_in.en else p_in
        w[w_in.bank] <= w_in.data                  if w_in.we

    Parameters
    ----------
    cfg : EngineConfig
        Supplies the number format; the PE does not depend on the array size.
    """

    def __init__(self, cfg: EngineConfig):
        self.cfg = cfg
        super().__init__(
            {
                "adv": In(1),
                "a_in": In(moving_lane(cfg)),
                "a_out": Out(moving_lane(cfg)),
                "p_in": In(acc_shape(cfg.fmt)),
                "p_out": Out(acc_shape(cfg.fmt)),
                "w_in": In(weight_write(cfg)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        fmt = self.cfg.fmt
        w0 = Signal(operand_shape(fmt))
        w1 = Signal(operand_shape(fmt))
        weight = Mux(self.a_in.bank, w1, w0)
        with m.If(self.adv):
            m.d.sync += [
                self.a_out.eq(self.a_in),
                self.p_out.eq(mac(fmt, self.p_in, weight, self.a_in.data, self.a_in.en)),
            ]
            with m.If(self.w_in.we & ~self.w_in.bank):
                m.d.sync += w0.eq(self.w_in.data)
            with m.If(self.w_in.we & self.w_in.bank):
                m.d.sync += w1.eq(self.w_in.data)
        return m
