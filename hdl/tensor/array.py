"""Weight-stationary systolic array: columns of PEs, moving data flowing right, sums down."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, Value
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tlm.tensor.config import EngineConfig

from ..formats import acc_shape
from ..hier import place
from .layouts import load_lane, moving_lane
from .pe import ProcessingElement

__all__ = ["Column", "LaneRegister", "SystolicArray", "check_slice_cols"]


class LaneRegister(wiring.Component):
    """A reset-less register of ``width`` bits that takes ``d`` while ``adv`` is high: the
    array's register between two slices (see :class:`SystolicArray`), ``edge_out`` taking
    ``edge_in``. A component of its own so that hierarchical generation describes it once
    and places it per slice: as plain Amaranth registers, the 127 registers of 5,120 bits
    each of a 128x128 array doubled the time to generate its Verilog."""

    def __init__(self, width: int):
        super().__init__({"adv": In(1), "edge_in": In(width), "edge_out": Out(width)})

    def elaborate(self, platform):
        m = Module()
        # reset-less like the PEs' lane registers it mirrors
        reg = Signal.like(self.edge_out, reset_less=True, name="edge_reg")
        m.d.sync += reg.eq(Mux(self.adv, self.edge_in, reg))
        m.d.comb += self.edge_out.eq(reg)
        return m


def check_slice_cols(component, cfg: EngineConfig, slice_cols):
    """Raise ``ValueError`` unless ``slice_cols`` divides ``cfg.cols`` (the array is made of
    identical slices). ``component`` is being constructed and will never be elaborated."""
    if not isinstance(slice_cols, int) or slice_cols < 1 or cfg.cols % slice_cols:
        component._MustUse__silence = True
        raise ValueError(
            f"slice_cols must be a positive divisor of cols={cfg.cols}, not {slice_cols!r}"
        )


class Column(wiring.Component):
    """``width`` adjacent columns of ``rows`` PEs (a vertical slice of the array).

    Every register advances only while ``adv`` is high (the engine drives it from registers
    only, so nothing computed from it depends on an input of the engine). Moving lanes
    enter on the left (``a_in[k]`` to row k) and move one column right per cycle; partial
    sums start at zero at the top of each column and leave at its bottom
    (``p_out[j]``). ``a_out`` (only in slices of two columns or more) is the lanes the
    slice's last column takes next, that is the registers of the column before it: the
    next slice's left register, which the parent holds (see :class:`SystolicArray`), takes
    them on the same edge as the last column does. (In a one-column slice that would be
    ``a_in`` itself, which the parent has already.) Column j's load lane ``w_in[j]`` writes
    ``data`` into bank ``bank`` of the PE in row ``row`` ``1 + row * (add_stages - 1)``
    cycles later: lanes are registered on entry, and with PEs of more than one add stage the
    lane then moves down the column ``add_stages - 1`` registers per row, so a write keeps its
    place among the moving elements, which reach row k ``k * add_stages`` cycles after row 0.

    Parameters
    ----------
    cfg : EngineConfig
    width : int
        Columns in the slice, 1 or more. The array is ``cols / width`` identical slices; a
        wider slice is fewer, larger blocks for Verilator's hierarchical build.
    pe_module : str or None
        Verilog module name of the PE in hierarchical generation; ``None`` for submodules.
    """

    def __init__(self, cfg: EngineConfig, width: int = 1, *, pe_module: str | None = None):
        if not isinstance(width, int) or width < 1:
            self._MustUse__silence = True
            raise ValueError(f"width must be a positive integer, not {width!r}")
        self.cfg = cfg
        self.width = width
        self._pe_module = pe_module
        # Ports are plain vectors, viewed through layouts inside: a 128x128 array places 128
        # columns, and layout-typed ports would each add a debug wire per field to the parent.
        self.lanes = data.ArrayLayout(moving_lane(cfg), cfg.rows)
        self.w_layout = data.ArrayLayout(load_lane(cfg), width)
        self.p_layout = data.ArrayLayout(acc_shape(cfg), width)
        handoff = {"a_out": Out(self.lanes.size)} if width > 1 else {}
        super().__init__(
            {
                "adv": In(1),
                "a_in": In(self.lanes.size),
                **handoff,
                "w_in": In(self.w_layout.size),
                "p_out": Out(self.p_layout.size),
            }
        )

    def elaborate(self, platform):
        m = Module()
        adv = self.adv
        # Load lanes are registered on entry: the row decode and weight write of every PE
        # then read a register, not a port, and run once per clock edge in a Verilator
        # hierarchical block, not again on every call that changes its inputs. (Each PE
        # registers its moving lane too, so writes and uses keep their order.)
        w_in = Signal(self.w_layout, reset_less=True)
        m.d.sync += w_in.eq(Mux(adv, self.w_in, w_in))  # one expression: see the PE
        a_in = data.View(self.lanes, self.a_in)
        p_out = data.View(self.p_layout, self.p_out)
        left = [a_in[k] for k in range(self.cfg.rows)]
        for j in range(self.width):
            handoff = list(left)  # what column j takes (after the loop: the last column)
            above = None
            lane = w_in[j]  # the load lane as row k sees it
            for k in range(self.cfg.rows):
                for s in range(self.cfg.add_stages - 1 if k else 0):
                    reg = Signal(load_lane(self.cfg), reset_less=True, name=f"w{j}_{k}_{s}")
                    m.d.sync += reg.eq(Mux(adv, lane, reg))
                    lane = reg
                pe = ProcessingElement(self.cfg)
                place(m, f"pe{k}_{j}", pe, self._pe_module, reset=False)
                m.d.comb += [
                    pe.adv.eq(adv),
                    pe.a_in.eq(left[k]),
                    pe.w_in.data.eq(lane.data),
                    pe.w_in.bank.eq(lane.bank),
                    pe.w_in.we.eq(lane.we & (lane.row == k)),
                ]
                if above is not None:
                    m.d.comb += pe.p_in.eq(above.p_out)
                above = pe
                left[k] = pe.a_out
            m.d.comb += p_out[j].eq(above.p_out)
        if self.width > 1:
            a_out = data.View(self.lanes, self.a_out)
            for k in range(self.cfg.rows):
                m.d.comb += a_out[k].eq(handoff[k])
        return m


class SystolicArray(wiring.Component):
    """``rows`` x ``cols`` weight-stationary array.

    Row k's moving lane enters column 0 and reaches column m m cycles later; the sum of the
    moving elements that entered row k at ``t0 + k * add_stages`` leaves the bottom of column
    m at ``t0 + rows * add_stages + mul_stages + m + 1`` (:class:`ProcessingElement`). The
    engine skews the inputs and de-skews the outputs; see
    :class:`~hdl.tensor.engine.TensorEngine`.

    The lanes entering each slice but the first come from a register here that takes the
    previous slice's ``a_out`` (what that slice's last column takes next) on the same edges
    as that column, so it always holds the same values as the column's own lane registers.
    The slices then connect through registers only: Verilator calls each hierarchical
    block's combinational update on its own, not in a chain across the array during which
    one thread waits for the other.

    Parameters
    ----------
    cfg : EngineConfig
    col_module, pe_module, edge_module : str or None
        Verilog module names of the slice, the PE and the register between slices
        (:class:`LaneRegister`) for hierarchical generation (``None``: flat submodules).
    """

    def __init__(
        self,
        cfg: EngineConfig,
        *,
        slice_cols: int = 1,
        col_module=None,
        pe_module=None,
        edge_module=None,
    ):
        check_slice_cols(self, cfg, slice_cols)
        self.cfg = cfg
        self.slice_cols = slice_cols
        self._col_module = col_module
        self._pe_module = pe_module
        self._edge_module = edge_module
        slices = cfg.cols // slice_cols
        super().__init__(
            {
                "adv": In(1),
                "a_in": In(data.ArrayLayout(moving_lane(cfg), cfg.rows)),
                **{
                    f"w_in{s}": In(data.ArrayLayout(load_lane(cfg), slice_cols))
                    for s in range(slices)
                },
                "p_out": Out(data.ArrayLayout(acc_shape(cfg), cfg.cols)),
            }
        )

    def w_in(self, col: int):
        """The load lane of column ``col``: a port per slice (``w_in{s}``), not one vector for
        the array, so that Verilator sees each slice's lanes as a variable of their own. (The
        first slice's come straight from the engine's ports; a vector that held them would
        make every slice's depend on those ports.)"""
        return getattr(self, f"w_in{col // self.slice_cols}")[col % self.slice_cols]

    def elaborate(self, platform):
        m = Module()
        width = self.slice_cols
        adv = self.adv
        handoff = None  # what the previous slice's last column takes next
        for s in range(self.cfg.cols // width):
            col = Column(self.cfg, width, pe_module=self._pe_module)
            place(m, f"col{s}", col, self._col_module, reset=False)
            # Slice s takes lanes s*width .. (s+1)*width-1 of the result vector.
            p_bits = len(col.p_out)
            if handoff is None:
                m.d.comb += col.a_in.eq(self.a_in)
            else:
                edge = LaneRegister(len(col.a_in))
                place(m, f"edge{s}", edge, self._edge_module, reset=False)
                m.d.comb += [edge.adv.eq(adv), edge.edge_in.eq(handoff), col.a_in.eq(edge.edge_out)]
            m.d.comb += [
                col.adv.eq(adv),
                col.w_in.eq(getattr(self, f"w_in{s}")),
                Value.cast(self.p_out)[s * p_bits : (s + 1) * p_bits].eq(col.p_out),
            ]
            handoff = col.a_out if width > 1 else col.a_in
        return m
