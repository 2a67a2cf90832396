"""Tensor engine: nc_matmul(stationary[K, M], moving[K, N]) -> [M, N] on a systolic array."""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from tlm.formats import formats_mix
from tlm.tensor.config import FP32_BEAT_INTERVAL, EngineConfig, ErrorKind

from ..formats import OperandDecoder, acc_shape, is_int_code, operand_shape
from ..hier import place
from .array import SystolicArray, check_slice_cols
from .layouts import (
    load_beat,
    moving_beat,
    result_beat,
    status_layout,
)
from .skew import Pipe, Skew, lane_depth

__all__ = ["TensorEngine"]


class TensorEngine(wiring.Component):
    """Weight-stationary tensor engine with a double-buffered stationary.

    Ports (``amaranth.lib.stream``, valid/ready):

    ``ld_stream`` (LoadStationary)
        ``K`` beats, beat ``j`` carrying ``stationary[j, :]`` in ``cols`` lanes, the declared
        ``k`` and ``last`` on beat K-1. Rows are written into the shadow bank while the array
        computes with the active one. A load completes into the shadow bank; a second load
        waits (``ready`` low) until a MultiplyMoving has switched to the first.
    ``mv_stream`` (MultiplyMoving)
        ``N`` beats, beat ``n`` carrying ``moving[:, n]`` in ``rows`` lanes, ``last`` on beat
        N-1. ``load`` on the first beat switches to the completed shadow load (waiting for it
        if it is still arriving); otherwise the active stationary is reused.
    ``res_stream``
        One beat per moving beat, in order: ``(stationary.T @ moving)[:, n]`` in ``cols``
        lanes, ``last`` on the op's final beat. Latency ``cfg.latency`` cycles (``rows *
        add_stages + mul_stages + cols + decode_stages``). Results wait in a two-entry queue;
        while it is full the whole engine holds still.
    ``status``
        Sticky ``flags`` and saturating ``counts`` per :class:`~tlm.tensor.config.ErrorKind`.

    The cycle-exact reference is :class:`tlm.tensor.timing.EngineTiming`.

    Parameters
    ----------
    cfg : EngineConfig
    slice_cols : int
        Columns per slice of the array (see :class:`~hdl.tensor.array.Column`); changes the
        module structure only, never the behaviour.
    col_module, pe_module : str or None
        Verilog module names for hierarchical generation (see :mod:`hdl.hier`).
    lane_module : callable or None
        ``lane_module(width, depth)`` names the Verilog module of a skew lane
        (:class:`~hdl.tensor.skew.DelayLane`) in hierarchical generation.
    decode_module : str or None
        Verilog module name of the operand decoder (:class:`~hdl.formats.OperandDecoder`)
        in hierarchical generation.
    edge_module : str or None
        Verilog module name of the register between array slices
        (:class:`~hdl.tensor.array.LaneRegister`) in hierarchical generation.
    """

    def __init__(
        self,
        cfg: EngineConfig,
        *,
        slice_cols: int = 1,
        col_module=None,
        pe_module=None,
        lane_module=None,
        decode_module=None,
        edge_module=None,
    ):
        if not isinstance(cfg, EngineConfig):
            self._MustUse__silence = True
            raise TypeError(f"cfg must be an EngineConfig, not {cfg!r}")
        check_slice_cols(self, cfg, slice_cols)
        self.cfg = cfg
        self.slice_cols = slice_cols
        self._col_module = col_module
        self._pe_module = pe_module
        self._lane_module = lane_module
        self._decode_module = decode_module
        self._edge_module = edge_module
        super().__init__(
            {
                "ld_stream": In(stream.Signature(load_beat(cfg))),
                "mv_stream": In(stream.Signature(moving_beat(cfg))),
                "res_stream": Out(stream.Signature(result_beat(cfg))),
                "status": Out(status_layout(cfg)),
            }
        )

    def _decode(self, m, name, raw, code, adv):
        """The operand ``raw`` decoded for the array (itself on an integer-only engine)."""
        if not self.cfg.has_float:
            return raw
        dec = OperandDecoder(self.cfg)
        place(m, name, dec, self._decode_module, clocked=dec.clocked, reset=False)
        m.d.comb += dec.raw.eq(raw)
        if dec.clocked:
            m.d.comb += dec.adv.eq(adv)
        if self.cfg.fmt_bits:
            m.d.comb += dec.code.eq(code)
        return dec.out

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        ld, mv, res = self.ld_stream, self.mv_stream, self.res_stream

        m.submodules.array = array = SystolicArray(
            cfg,
            slice_cols=self.slice_cols,
            col_module=self._col_module,
            pe_module=self._pe_module,
            edge_module=self._edge_module,
        )

        # Operands are skewed (row k, column m delayed by k, m cycles) and results de-skewed
        # in data buffers; the control of each beat travels beside them in reset-able pipes,
        # tapped once per lane.
        def lanes_of(shape, n, step=1):
            if self._lane_module is None or n == 1:  # one lane: no delay line at all
                return None
            return self._lane_module(Shape.cast(shape).width, lane_depth((n - 1) * step + 1))

        op, acc = operand_shape(cfg), acc_shape(cfg)
        fb = cfg.fmt_bits
        mixed = cfg.has_int and cfg.has_float
        codes = {"x_fmt": fb} if fb else {}
        codes |= {"int": 1} if mixed else {}
        # Row 0 and column 0 take their operands and control straight from the ports; the
        # skews and pipes leave that lane out of their outputs (through=False), so that the
        # other 2 x 127 lanes, and the operand decoders on them, depend on registers only:
        # Verilator evaluates logic that depends on the model's inputs on every evaluation,
        # several times per cycle under cocotb, and the rest once per clock edge.
        # Row k is delayed k * add_stages cycles: the partial sum takes add_stages per row.
        step = cfg.add_stages
        # The operand decoders' register (decode_stages 2) delays the operands a cycle; the
        # control each lane takes beside them is tapped that much later.
        dec = cfg.decode_stages - 1
        m.submodules.mv_skew = mv_skew = Skew(
            op, cfg.rows, lane_module=lanes_of(op, cfg.rows, step), step=step, through=False
        )
        m.submodules.mv_ctl = mv_ctl = Pipe(
            data.StructLayout({"live": 1, "bank": 1, "k": range(cfg.rows + 1), **codes}),
            (cfg.rows - 1) * step + 1 + dec,
            through=False,
        )
        m.submodules.ld_skew = ld_skew = Skew(
            op, cfg.cols, lane_module=lanes_of(op, cfg.cols), through=False
        )
        m.submodules.ld_ctl = ld_ctl = Pipe(
            data.StructLayout(
                {"row": range(cfg.rows), "we": 1, "bank": 1, **({"fmt": fb} if fb else {})}
            ),
            cfg.cols + dec,
            through=False,
        )

        m.submodules.deskew = deskew = Skew(
            acc, cfg.cols, reverse=True, lane_module=lanes_of(acc, cfg.cols)
        )

        # Results leave through a two-entry output queue. The engine advances while the queue
        # has room for one more result, so `adv` (the enable of every register in the array)
        # depends on registers only, never combinationally on res_stream.ready: the array's
        # next state is then computed once per clock edge in Verilator, not again whenever an
        # input changes.
        count = Signal(range(3))
        adv = Signal()
        m.d.comb += adv.eq(count != 2)
        for part in (array, mv_skew, mv_ctl, ld_skew, ld_ctl, deskew):
            m.d.comb += part.adv.eq(adv)

        # Stationary banks: `act` is in use; `pend` says the other one holds a completed load.
        act = Signal()
        act_valid = Signal()
        pend = Signal()
        bank_k = Signal(data.ArrayLayout(range(cfg.rows + 1), 2))
        bank_fmt = Signal(data.ArrayLayout(max(fb, 1), 2))  # format code of each bank

        # Format codes: which are in use, and which (stationary, moving) pairs mix.
        def known(code):
            return code < len(cfg.formats) if fb and len(cfg.formats) < 1 << fb else Const(1)

        table = 0
        for w, wf in enumerate(cfg.formats):
            for x, xf in enumerate(cfg.formats):
                table |= formats_mix(wf, xf) << (w << fb | x)
        mixes = Const(table, 1 << 2 * fb)

        # MultiplyMoving control.
        mv_in_op = Signal()  # a beat of this op has been accepted and `last` not yet
        mv_dropping = Signal()  # this op is being dropped (see ErrorKind)
        mv_fmt = Signal(max(fb, 1))  # the moving format code of the op in progress
        fp32 = [c for c, f in enumerate(cfg.formats) if f.name == "fp32"]
        # Ticks the moving stream still waits after an FP32 beat (quarter rate).
        hold = Signal(range(FP32_BEAT_INTERVAL), name="hold") if fp32 else Const(0, 1)
        mv_first = ~mv_in_op
        mv_wants_load = mv_first & mv.payload.load
        m.d.comb += mv.ready.eq(adv & (hold == 0) & (~mv_wants_load | pend))
        mv_fire = mv.valid & mv.ready
        activate = Signal()
        mv_error = Signal()
        m.d.comb += [
            activate.eq(mv_fire & mv_wants_load),
            mv_error.eq(mv_fire & mv_first & ~mv.payload.load & ~act_valid),
        ]
        act_now = Mux(activate, ~act, act)
        mv_fmt_error = Signal() if fb else Const(0)
        mix_error = Signal() if fb else Const(0)
        if fb:
            x_code = Mux(mv_first, mv.payload.fmt, mv_fmt)
            w_code = bank_fmt[act_now]
            checked = mv_fire & mv_first & ~mv_error
            m.d.comb += [
                mv_fmt_error.eq(checked & ~known(mv.payload.fmt)),
                mix_error.eq(
                    checked
                    & known(mv.payload.fmt)
                    & ~mixes.bit_select(Cat(mv.payload.fmt, w_code), 1)
                ),
            ]
        mv_drop = Mux(mv_first, mv_error | mv_fmt_error | mix_error, mv_dropping)
        mv_live = mv_fire & ~mv_drop
        k_now = bank_k[act_now]
        with m.If(mv_fire):
            m.d.sync += [mv_in_op.eq(~mv.payload.last), mv_dropping.eq(mv_drop & ~mv.payload.last)]
            if fb:
                m.d.sync += mv_fmt.eq(x_code)
        # FP32 runs at a quarter of the rate: after each of its beats the stream waits.
        if fp32:
            is_fp32 = (x_code == fp32[0]) if fb else Const(1)
            with m.If(adv):
                with m.If(mv_fire & is_fp32):
                    m.d.sync += hold.eq(FP32_BEAT_INTERVAL - 1)
                with m.Elif(hold != 0):
                    m.d.sync += hold.eq(hold - 1)
        with m.If(activate):
            m.d.sync += [act.eq(~act), act_valid.eq(1)]
        m.d.comb += [
            mv_skew.i.eq(mv.payload.data),
            mv_ctl.i.live.eq(mv_live),
            mv_ctl.i.bank.eq(act_now),
            mv_ctl.i.k.eq(k_now),
        ]
        if fb:
            m.d.comb += mv_ctl.i.x_fmt.eq(x_code)
        if mixed:
            m.d.comb += mv_ctl.i.int.eq(is_int_code(cfg, w_code))
        # Each PE registers its moving lane on entry and computes from that register (see
        # ProcessingElement), which matches the register each array slice puts on its load
        # lanes (see Column): a weight written for row k, column m is still written before the
        # first moving element that uses it and after the last that does not.
        # Operands enter the array decoded (hdl.formats.decode_operand): one decoder per row
        # and per column here, none in the PEs.
        lanes = Signal.like(array.a_in)
        for k in range(cfg.rows):
            ctl = mv_ctl.tap(k * step + dec)  # beside the decoded operand
            code = mv_ctl.tap(k * step).x_fmt if fb else None  # beside the raw operand
            m.d.comb += [
                lanes[k].data.eq(self._decode(m, f"mv_dec{k}", mv_skew.out(k), code, adv)),
                lanes[k].en.eq(ctl.live & (k < ctl.k)),
                lanes[k].bank.eq(ctl.bank),
            ]
            if mixed:
                m.d.comb += lanes[k].int.eq(ctl.int)
        m.d.comb += array.a_in.eq(lanes)

        # LoadStationary control: writes the bank that is not (or no longer) active.
        ld_in_op = Signal()
        ld_dropping = Signal()
        ld_row = Signal(range(cfg.rows))
        ld_k = Signal(cfg.k_bits)
        ld_fmt = Signal(max(fb, 1))
        m.d.comb += ld.ready.eq(adv & (~pend | activate))
        ld_fire = ld.valid & ld.ready
        ld_first = ~ld_in_op
        k_decl = Mux(ld_first, ld.payload.k, ld_k)
        row = Mux(ld_first, 0, ld_row)
        k_error = Signal()
        ld_fmt_error = Signal() if fb else Const(0)
        len_error = Signal()
        commit = Signal()
        bad = Mux(ld_first, k_error | ld_fmt_error, ld_dropping)
        code_now = Mux(ld_first, ld.payload.fmt, ld_fmt) if fb else Const(0)
        if fb:
            m.d.comb += ld_fmt_error.eq(ld_fire & ld_first & ~known(ld.payload.fmt))
        at_end = row == (k_decl - 1)[: len(ld_row)]
        m.d.comb += [
            k_error.eq(ld_fire & ld_first & ((ld.payload.k == 0) | (ld.payload.k > cfg.rows))),
            len_error.eq(ld_fire & ~bad & (at_end ^ ld.payload.last)),
            commit.eq(ld_fire & ~bad & at_end & ld.payload.last),
        ]
        target = ~Mux(activate, ~act, act)
        with m.If(ld_fire):
            m.d.sync += [
                ld_in_op.eq(~ld.payload.last),
                ld_dropping.eq(~ld.payload.last & (bad | len_error)),
                ld_row.eq(row + 1),
                ld_k.eq(k_decl),
            ]
            if fb:
                m.d.sync += ld_fmt.eq(code_now)
        with m.If(commit):
            m.d.sync += [pend.eq(1), bank_k[target].eq(k_decl)]
            if fb:
                m.d.sync += bank_fmt[target].eq(code_now)
        with m.Elif(activate):
            m.d.sync += pend.eq(0)
        m.d.comb += [
            ld_skew.i.eq(ld.payload.data),
            ld_ctl.i.row.eq(row),
            ld_ctl.i.we.eq(ld_fire & ~bad),
            ld_ctl.i.bank.eq(target),
        ]
        if fb:
            m.d.comb += ld_ctl.i.fmt.eq(code_now)
        for c in range(cfg.cols):
            ctl = ld_ctl.tap(c + dec)
            code = ld_ctl.tap(c).fmt if fb else None
            m.d.comb += [
                array.w_in(c).data.eq(self._decode(m, f"ld_dec{c}", ld_skew.out(c), code, adv)),
                array.w_in(c).row.eq(ctl.row),
                array.w_in(c).we.eq(ctl.we),
                array.w_in(c).bank.eq(ctl.bank),
            ]

        # Results: de-skew the column sums; a valid/last pipe of the same latency marks them.
        m.d.comb += deskew.i.eq(array.p_out)
        depth = cfg.latency - 1
        pipe_valid = Signal(depth)
        pipe_last = Signal(depth)
        with m.If(adv):
            m.d.sync += [
                pipe_valid.eq((pipe_valid << 1) | mv_live),
                pipe_last.eq((pipe_last << 1) | mv.payload.last),
            ]
        second = Signal.like(res.payload)  # the queue's second entry; res.payload is the first
        arriving = Signal.like(res.payload)
        m.d.comb += [arriving.data.eq(deskew.o), arriving.last.eq(pipe_last[-1])]
        push = adv & pipe_valid[-1]
        pop = res.valid & res.ready
        m.d.comb += res.valid.eq(count != 0)
        with m.If(pop):
            m.d.sync += res.payload.eq(Mux(count == 2, second, arriving))
        with m.Elif(push & (count == 0)):
            m.d.sync += res.payload.eq(arriving)
        with m.If(push & (count == 1) & ~pop):
            m.d.sync += second.eq(arriving)
        m.d.sync += count.eq(count + push - pop)

        # Status: sticky flags and saturating counters.
        for kind, event in (
            (ErrorKind.NO_STATIONARY, mv_error),
            (ErrorKind.LOAD_LENGTH, len_error),
            (ErrorKind.LOAD_K, k_error),
            (ErrorKind.LOAD_FORMAT, ld_fmt_error),
            (ErrorKind.MOVING_FORMAT, mv_fmt_error),
            (ErrorKind.FORMAT_MISMATCH, mix_error),
        ):
            count = self.status.counts[kind]
            with m.If(event):
                m.d.sync += self.status.flags[kind].eq(1)
                with m.If(count != (1 << cfg.status_bits) - 1):
                    m.d.sync += count.eq(count + 1)
        return m
