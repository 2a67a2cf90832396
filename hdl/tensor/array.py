"""Weight-stationary systolic array: columns of PEs, moving data flowing right, sums down."""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tlm.tensor.config import EngineConfig

from ..formats import acc_shape
from ..hier import place
from .layouts import load_lane, moving_lane
from .pe import ProcessingElement

__all__ = ["Column", "SystolicArray"]


class Column(wiring.Component):
    """A column of ``rows`` PEs sharing one stationary-load lane.

    Moving lanes enter on the left (``a_in[k]`` to row k) and leave on the right one cycle
    later; partial sums start at zero at the top and leave at the bottom (``p_out``). The load
    lane writes ``w_in.data`` into bank ``w_in.bank`` of the PE in row ``w_in.row``.

    Parameters
    ----------
    cfg : EngineConfig
    pe_module : str or None
        Verilog module name of the PE in hierarchical generation; ``None`` for submodules.
    """

    def __init__(self, cfg: EngineConfig, *, pe_module: str | None = None):
        self.cfg = cfg
        self._pe_module = pe_module
        # Ports are plain vectors, viewed through layouts inside: a 128x128 array places 128
        # columns, and layout-typed ports would each add a debug wire per field to the parent.
        self.lanes = data.ArrayLayout(moving_lane(cfg), cfg.rows)
        self.w_layout = load_lane(cfg)
        super().__init__(
            {
                "adv": In(1),
                "a_in": In(self.lanes.size),
                "a_out": Out(self.lanes.size),
                "w_in": In(self.w_layout.size),
                "p_out": Out(acc_shape(cfg.fmt)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        a_in = data.View(self.lanes, self.a_in)
        a_out = data.View(self.lanes, self.a_out)
        w_in = data.View(self.w_layout, self.w_in)
        above = None
        for k in range(self.cfg.rows):
            pe = ProcessingElement(self.cfg)
            place(m, f"pe{k}", pe, self._pe_module)
            m.d.comb += [
                pe.adv.eq(self.adv),
                pe.a_in.eq(a_in[k]),
                a_out[k].eq(pe.a_out),
                pe.w_in.data.eq(w_in.data),
                pe.w_in.bank.eq(w_in.bank),
                pe.w_in.we.eq(w_in.we & (w_in.row == k)),
            ]
            if above is not None:
                m.d.comb += pe.p_in.eq(above.p_out)
            above = pe
        m.d.comb += self.p_out.eq(above.p_out)
        return m


class SystolicArray(wiring.Component):
    """``rows`` x ``cols`` weight-stationary array.

    Row k's moving lane enters column 0 and reaches column m m cycles later; column m's sum
    leaves its bottom ``rows`` cycles after its top row computed. The engine skews the inputs
    and de-skews the outputs; see :class:`~hdl.tensor.engine.TensorEngine`.

    Parameters
    ----------
    cfg : EngineConfig
    col_module, pe_module : str or None
        Verilog module names for hierarchical generation (``None``: flat submodules).
    """

    def __init__(self, cfg: EngineConfig, *, col_module=None, pe_module=None):
        self.cfg = cfg
        self._col_module = col_module
        self._pe_module = pe_module
        super().__init__(
            {
                "adv": In(1),
                "a_in": In(data.ArrayLayout(moving_lane(cfg), cfg.rows)),
                "w_in": In(data.ArrayLayout(load_lane(cfg), cfg.cols)),
                "p_out": Out(data.ArrayLayout(acc_shape(cfg.fmt), cfg.cols)),
            }
        )

    def elaborate(self, platform):
        m = Module()
        left = None
        for c in range(self.cfg.cols):
            col = Column(self.cfg, pe_module=self._pe_module)
            place(m, f"col{c}", col, self._col_module)
            m.d.comb += [
                col.adv.eq(self.adv),
                col.a_in.eq(self.a_in if left is None else left.a_out),
                col.w_in.eq(self.w_in[c]),
                self.p_out[c].eq(col.p_out),
            ]
            left = col
        return m
