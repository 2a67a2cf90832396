"""Processing element of the weight-stationary systolic array."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tlm.tensor.config import EngineConfig

from ..arith import words
from ..formats import acc_shape, lane_shape, mac
from ..stages import Stages
from .layouts import moving_lane, weight_write

__all__ = ["ProcessingElement"]


class ProcessingElement(wiring.Component):
    """One PE: two banks of one stationary weight, a moving operand passed right, a partial sum
    passed down.

    Every register advances only when ``adv`` is high (the engine freezes the whole array while
    the result stream is stalled). The moving operand is registered on entry (``a``, which is
    also ``a_out``) and used from there. With ``cfg.pe_stages`` 1, per advancing cycle::

        a <= a_in
        p_out <= p_in + w[a.bank] * a.data   if a.en else p_in
        w[w_in.bank] <= w_in.data            if w_in.we

    With more, the step is pipelined at the cuts ``cfg.pe_cuts``: the product of ``a`` taken
    at advancing cycle t meets ``p_in`` at t + ``cfg.mul_stages``, and their sum is on
    ``p_out`` ``cfg.add_stages`` advancing cycles after that (one result per cycle).

    So no arithmetic depends on ``a_in``: a PE on the left edge of a Verilator hierarchical
    block (whose ``a_in`` is a port of the block) is computed once per clock edge, not again
    whenever the block's inputs change.

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
                "p_in": In(acc_shape(cfg)),
                "p_out": Out(acc_shape(cfg)),
                "w_in": In(weight_write(cfg)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        # No register here has a reset. A reset would make every PE's next state depend on
        # the top-level `rst` input combinationally, and Verilator would recompute the whole
        # array whenever any input changes instead of once per clock edge. Nothing needs one:
        # after a reset the engine's control marks no beat valid and no bank loaded, so stale
        # operands and sums are never read into a result.
        w0 = Signal(lane_shape(cfg), reset_less=True)
        w1 = Signal(lane_shape(cfg), reset_less=True)
        # wiring.Out ports cannot be reset-less: the registers are ours, the ports follow them.
        a_reg = Signal.like(self.a_out, reset_less=True)
        p_reg = Signal.like(self.p_out, reset_less=True)
        m.d.comb += [self.a_out.eq(a_reg), self.p_out.eq(p_reg)]
        weight = Signal.like(w0)
        m.d.comb += weight.eq(Mux(a_reg.bank, w1, w0))
        is_int = (a_reg.int,) if cfg.has_int and cfg.has_float else ()
        # The datapath is built outside the `adv` condition: combinational logic added under
        # it would read `adv` (its signals are 0 while `adv` is low), and everything in it
        # would depend on a port of the slice.
        # Pipeline registers (Stages) follow the same two rules.
        stages = Stages(m, self.adv, cfg.pe_cuts)
        total = mac(m, cfg, self.p_in, weight, a_reg.data, a_reg.en, *is_int, stages=stages)
        total = stages.sync(total=total)["total"]
        stages.check()
        # Each register's next value is one expression, not an assignment under `If(adv)`:
        # Amaranth then emits it as a plain assignment that Verilator folds into the clocked
        # block, where reading the `adv` port costs nothing between clock edges. (Under an
        # If it becomes a combinational process of its own, which reads a port and so runs on
        # every call into a hierarchical block.)
        adv, we, bank = self.adv, self.w_in.we, self.w_in.bank
        m.d.sync += [
            a_reg.eq(Mux(adv, self.a_in, a_reg)),
            p_reg.eq(Mux(adv, total, p_reg)),
        ]
        for w, this_bank in ((w0, ~bank), (w1, bank)):
            if words():
                # The same next value with `adv` outermost, where Verilator folds it into
                # the clocked block: `adv & we` is a function of a port of the slice, which
                # Verilator would recompute on every call into it (its input region).
                m.d.sync += w.eq(Mux(adv, Mux(we & this_bank, self.w_in.data, w), w))
            else:
                m.d.sync += w.eq(Mux(adv & we & this_bank, self.w_in.data, w))
        return m
