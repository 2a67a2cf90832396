"""Properties of the tensor engine (:class:`hdl.tensor.engine.TensorEngine`): the load/multiply
handshake, the misuse counters and bounded liveness, from the contract of
``docs/tensor_engine.md`` (not from the TLM).

Every input is free: the load and moving streams' valid and payload, the result consumer's
ready. The producers' side of the stream contract (``amaranth.lib.stream``: a beat offered is
held, unchanged, until it is taken) is assumed; the engine's side (the same on ``res_stream``)
is asserted.

The harness keeps a *contract state* from the beats that fire: where each op is, which misuse
its first beat (or, for a load's length, which beat) is, whether a completed load waits, and
which moving beats are live (those of ops not dropped). The properties compare the RTL's ports
with it; a few assertions tie the RTL's own state (its names: ``count``, ``pipe_valid``,
``pend``, ``adv``) to it, which is what lets the induction close.
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth.hdl import Assert, Assume, Const, Cover, Elaboratable, Module, Mux, Signal
from amaranth.lib import data

from hdl.tensor.engine import TensorEngine
from hdl.tensor.layouts import result_beat
from tlm.formats import formats_mix
from tlm.tensor.config import FP32_BEAT_INTERVAL, EngineConfig, ErrorKind

from .harness import AnySeq, internal, no_reset

__all__ = ["FORMAL_INT8", "FORMAL_FORMATS", "FORMAL_FP32", "CHECKS", "TensorEngineContract"]

#: The int8 engine the proofs check: 2x2 at the default 2 PE stages (latency 2 + 1 + 2 + 1 =
#: 6), counters cut to 2 bits so that saturation is reachable within the cover depth.
FORMAL_INT8 = EngineConfig(2, 2, "int8", status_bits=2)

#: A three-format engine (codes 0 int8, 1 fp8_e4m3fn, 2 fp8_e5m2; code 3 names no format): the
#: one that has the format misuses. int8 does not mix with FP8; the two FP8 formats mix. Float
#: kind, at the default 11 PE stages and 2 decoder stages (latency 2 x 6 + 5 + 2 + 2 = 21).
FORMAL_FORMATS = EngineConfig(2, 2, "int8,fp8_e4m3fn,fp8_e5m2", status_bits=2)

#: An engine with FP32, whose moving beats come at a quarter of the rate (BF16 and FP32 do not
#: mix; float kind, 11 PE stages and 2 decoder stages, latency 21).
FORMAL_FP32 = EngineConfig(2, 2, "bf16,fp32", status_bits=2)

#: What a harness asserts (every harness keeps the same contract state and assumptions).
CHECKS = ("handshake", "misuse", "liveness")

_FLIGHT_BITS = 6  # beat counters wrap; at most latency + 1 beats are ever in flight


class TensorEngineContract(Elaboratable):
    """Harness: a tensor engine with free inputs, the contract state, and one group of checks.

    Parameters
    ----------
    cfg : EngineConfig
        The engine (small: its datapath is in the model when ``handshake`` checks data).
    check : str
        One of :data:`CHECKS`:

        ``handshake``
            ``res_stream`` holds a result offered until it is taken (valid and payload,
            ``data`` too when ``data`` is set); results are those of live moving beats only,
            each once, in order (the ``last`` of a freely chosen beat comes out as its own
            result's ``last``), and each enters the result queue exactly ``cfg.latency``
            ticks after its beat (a tick: a cycle the engine advances).
        ``misuse``
            each status counter equals the contract's count of its ``ErrorKind`` (one per
            offending op, saturating at ``2**status_bits - 1``), each flag is set exactly when
            its kind has occurred; a moving op with ``load`` is taken only when a completed
            (good) load waits, and a load only while none waits or an op switches to it.
        ``liveness``
            a moving beat that needs no new stationary, a moving beat with ``load`` while a
            completed load waits, and a load beat while none waits are each taken within
            ``bound`` ticks of being offered. A cycle after the result consumer is ready, the
            engine advances.
    engine : type
        The engine class (a mutant in tests), built as ``engine(cfg)``.
    data : bool
        ``handshake`` only: also assert that a held result's data does not change (brings the
        datapath into the model; fine for int8 at 2x2).
    bound : int or None
        ``liveness`` only: ticks within which an offer the engine must take is taken; ``None``
        takes the contract's, 1, or ``FP32_BEAT_INTERVAL`` (4) on an engine with FP32 (a
        moving beat waits 3 ticks after an FP32 beat).
    """

    def __init__(
        self, cfg: EngineConfig, check: str, *, engine=TensorEngine, data=False, bound=None
    ):
        self._MustUse__silence = True
        if not isinstance(cfg, EngineConfig):
            raise TypeError(f"cfg must be an EngineConfig, not {cfg!r}")
        if check not in CHECKS:
            raise ValueError(f"check must be one of {', '.join(CHECKS)}, not {check!r}")
        if bound is None:
            fp32 = any(f.name == "fp32" for f in cfg.formats)
            bound = FP32_BEAT_INTERVAL if fp32 else 1
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
            raise ValueError(f"bound must be a positive integer, not {bound!r}")
        del self._MustUse__silence
        self.cfg, self.check, self.engine, self.data, self.bound = cfg, check, engine, data, bound

    # -- the environment ---------------------------------------------------------------------

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        no_reset(m)
        dut = self.engine(cfg)
        dut._MustUse__silence = True
        body = dut.elaborate(platform)
        m.submodules.dut = body
        ld, mv, res = dut.ld_stream, dut.mv_stream, dut.res_stream
        m.d.comb += [
            ld.valid.eq(AnySeq(1)),
            ld.payload.as_value().eq(AnySeq(len(ld.payload.as_value()))),
            mv.valid.eq(AnySeq(1)),
            mv.payload.as_value().eq(AnySeq(len(mv.payload.as_value()))),
            res.ready.eq(AnySeq(1)),
        ]
        for name, s in (("ld", ld), ("mv", mv)):  # the producers hold an offered beat
            waited = Signal(name=f"{name}_waited")
            held = Signal.like(s.payload.as_value(), name=f"{name}_held")
            m.d.sync += [waited.eq(s.valid & ~s.ready), held.eq(s.payload.as_value())]
            m.d.comb += Assume(~waited | (s.valid & (s.payload.as_value() == held)))
        c = self._contract(m, dut)
        self._ties(m, body, c)
        getattr(self, f"_{self.check}")(m, dut, body, c)
        return m

    # -- the contract state ------------------------------------------------------------------

    def _contract(self, m, dut):
        """The contract's view of the beats that fire (a namespace of signals)."""
        cfg = self.cfg
        ld, mv = dut.ld_stream, dut.mv_stream
        fb = cfg.fmt_bits
        c = SimpleNamespace()
        c.ld_fire = ld.valid & ld.ready
        c.mv_fire = mv.valid & mv.ready

        def known(code):
            return code < len(cfg.formats) if fb else Const(1)

        # MultiplyMoving ops.
        mv_in_op = Signal(name="c_mv_in_op")
        mv_drop = Signal(name="c_mv_drop")  # the op in progress is being dropped
        loaded = Signal(name="c_loaded")  # some op has switched to a stationary
        pend = Signal(name="c_pend")  # a completed good load waits in the shadow bank
        act_fmt = Signal(max(fb, 1), name="c_act_fmt")  # format of the active stationary
        pend_fmt = Signal(max(fb, 1), name="c_pend_fmt")  # ... and of the one waiting
        first = ~mv_in_op
        c.mv_first = first
        c.activate = c.mv_fire & first & mv.payload.load
        no_stat = c.mv_fire & first & ~mv.payload.load & ~loaded
        events = {ErrorKind.NO_STATIONARY: no_stat}
        if fb:
            x = mv.payload.fmt
            w = Mux(mv.payload.load, pend_fmt, act_fmt)
            table = 0
            for i, wf in enumerate(cfg.formats):
                for j, xf in enumerate(cfg.formats):
                    table |= formats_mix(wf, xf) << (i << fb | j)
            mixes = Const(table, 1 << 2 * fb).bit_select(w << fb | x, 1)
            checked = c.mv_fire & first & ~no_stat  # the RTL counts one kind per moving op
            events[ErrorKind.MOVING_FORMAT] = checked & ~known(x)
            events[ErrorKind.FORMAT_MISMATCH] = checked & known(x) & ~mixes
        bad_op = no_stat
        for kind in (ErrorKind.MOVING_FORMAT, ErrorKind.FORMAT_MISMATCH):
            if kind in events:
                bad_op = bad_op | events[kind]
        dropped = Mux(first, bad_op, mv_drop)
        c.mv_live = c.mv_fire & ~dropped
        with m.If(c.mv_fire):
            m.d.sync += [mv_in_op.eq(~mv.payload.last), mv_drop.eq(dropped & ~mv.payload.last)]
        with m.If(c.activate):
            m.d.sync += [loaded.eq(1), act_fmt.eq(pend_fmt)]

        # LoadStationary ops.
        ld_in_op = Signal(name="c_ld_in_op")
        ld_bad = Signal(name="c_ld_bad")  # the load in progress is being dropped
        beat = Signal(range(cfg.rows), name="c_ld_beat")  # its beats taken so far
        k_decl = Signal(cfg.k_bits, name="c_ld_k")
        fmt_decl = Signal(max(fb, 1), name="c_ld_fmt")
        lfirst = ~ld_in_op
        k = Mux(lfirst, ld.payload.k, k_decl)
        code = Mux(lfirst, ld.payload.fmt, fmt_decl) if fb else Const(0)
        j = Mux(lfirst, 0, beat)
        events[ErrorKind.LOAD_K] = (
            c.ld_fire & lfirst & ((ld.payload.k == 0) | (ld.payload.k > cfg.rows))
        )
        bad_first = events[ErrorKind.LOAD_K]
        if fb:
            events[ErrorKind.LOAD_FORMAT] = c.ld_fire & lfirst & ~known(ld.payload.fmt)
            bad_first = bad_first | events[ErrorKind.LOAD_FORMAT]
        bad = Mux(lfirst, bad_first, ld_bad)
        at_end = j == (k - 1)[: len(beat)]
        events[ErrorKind.LOAD_LENGTH] = c.ld_fire & ~bad & (at_end ^ ld.payload.last)
        c.commit = c.ld_fire & ~bad & at_end & ld.payload.last
        with m.If(c.ld_fire):
            m.d.sync += [
                ld_in_op.eq(~ld.payload.last),
                ld_bad.eq(~ld.payload.last & (bad | events[ErrorKind.LOAD_LENGTH])),
                beat.eq(j + 1),
                k_decl.eq(k),
                fmt_decl.eq(code),
            ]
        with m.If(c.commit):
            m.d.sync += [pend.eq(1), pend_fmt.eq(code)]
        with m.Elif(c.activate):
            m.d.sync += pend.eq(0)
        c.pend, c.loaded, c.events = pend, loaded, events
        c.mv_in_op, c.mv_drop, c.ld_in_op, c.ld_bad = mv_in_op, mv_drop, ld_in_op, ld_bad
        c.act_fmt, c.pend_fmt = act_fmt, pend_fmt
        c.ld_beat, c.ld_k, c.ld_fmt = beat, k_decl, fmt_decl

        # Live moving beats taken and results taken, counted (wrapping).
        c.n_live = Signal(_FLIGHT_BITS, name="c_n_live")
        c.n_out = Signal(_FLIGHT_BITS, name="c_n_out")
        c.pop = dut.res_stream.valid & dut.res_stream.ready
        m.d.sync += [c.n_live.eq(c.n_live + c.mv_live), c.n_out.eq(c.n_out + c.pop)]
        return c

    def _ties(self, m, body, c):
        """The RTL's op state is the contract's (asserted in every check: the invariant the
        induction needs, by the names the RTL gives its registers)."""
        cfg = self.cfg

        def rtl(name):
            return internal(body, name)

        in_load = c.ld_in_op & ~c.ld_bad
        m.d.comb += [
            Assert(rtl("count") <= 2),  # the result queue has two entries
            Assert(rtl("mv_in_op") == c.mv_in_op),
            Assert(rtl("mv_dropping") == c.mv_drop),
            Assert(rtl("act_valid") == c.loaded),
            Assert(rtl("pend") == c.pend),
            Assert(rtl("ld_in_op") == c.ld_in_op),
            Assert(rtl("ld_dropping") == c.ld_bad),
            Assert(~in_load | (rtl("ld_row") == c.ld_beat)),
            Assert(~in_load | (rtl("ld_k") == c.ld_k)),
        ]
        if cfg.fmt_bits:
            act, fmts = rtl("act"), rtl("bank_fmt")
            width = cfg.fmt_bits
            active = fmts.bit_select(act * width, width)
            shadow = fmts.bit_select((~act)[:1] * width, width)
            m.d.comb += [
                Assert(~in_load | (rtl("ld_fmt") == c.ld_fmt)),
                Assert(~c.loaded | (active == c.act_fmt)),
                Assert(~c.pend | (shadow == c.pend_fmt)),
            ]

    # -- the checks --------------------------------------------------------------------------

    def _handshake(self, m, dut, body, c):
        cfg = self.cfg
        res = dut.res_stream
        latency = cfg.latency
        queue = internal(body, "count")
        pipe_valid = internal(body, "pipe_valid")
        adv = internal(body, "count") != 2  # a tick: the result queue is not full
        pipe_last = internal(body, "pipe_last")
        second = data.View(result_beat(cfg), internal(body, "second"))

        # The engine's side of the stream contract on res_stream.
        waited = Signal(name="res_waited")
        held_last = Signal(name="res_held_last")
        m.d.sync += [waited.eq(res.valid & ~res.ready), held_last.eq(res.payload.last)]
        m.d.comb += Assert(~waited | (res.valid & (res.payload.last == held_last)))
        if self.data:
            held = Signal.like(res.payload.data.as_value(), name="res_held_data")
            m.d.sync += held.eq(res.payload.data.as_value())
            m.d.comb += Assert(~waited | (res.payload.data.as_value() == held))

        # Results only for live beats: never more out than in, never more than the pipeline
        # and queue hold; and (the invariant) every live beat not yet out is in one of them.
        unseen = (c.n_live - c.n_out)[:_FLIGHT_BITS]
        in_pipe = sum(pipe_valid[i] for i in range(len(pipe_valid)))
        m.d.comb += [
            Assert(unseen <= latency + 1),
            Assert(unseen == queue + in_pipe),
        ]

        # One live beat, chosen freely, followed: its index, its `last`, the ticks since it was
        # taken (saturating at latency).
        follow = AnySeq(1)
        tagged = Signal(name="f_tagged")
        done = Signal(name="f_done")
        index = Signal(_FLIGHT_BITS, name="f_index")
        last = Signal(name="f_last")
        age = Signal(range(latency + 1), name="f_age")
        with m.If(c.mv_live & follow & ~tagged):
            m.d.sync += [tagged.eq(1), index.eq(c.n_live), last.eq(dut.mv_stream.payload.last)]
            m.d.sync += age.eq(1)
        with m.Elif(tagged & adv & (age != latency)):
            m.d.sync += age.eq(age + 1)
        behind = (index - c.n_out)[:_FLIGHT_BITS]  # results ahead of it still to leave
        queued = (c.n_out + queue)[:_FLIGHT_BITS]
        entered = ((queued - index)[:_FLIGHT_BITS] - 1)[:_FLIGHT_BITS] < latency + 1
        leaves = tagged & ~done & c.pop & (c.n_out == index)
        with m.If(leaves):
            m.d.sync += done.eq(1)
        pending = tagged & ~done
        after = (c.n_live - index - 1)[:_FLIGHT_BITS]
        stage = (age - 1)[: len(age)]
        younger = sum((pipe_valid[i] & (stage > i)) for i in range(len(pipe_valid)))
        m.d.comb += [
            Assert(~pending | (behind < latency + 1)),  # not skipped
            Assert(~pending | (entered == (age == latency))),  # at the documented latency
            Assert(~leaves | (res.payload.last == last)),  # its own result, in order
            # where it is (what makes the induction close): in the pipe at stage age - 1, the
            # live beats taken after it in the stages before
            Assert(~pending | (age == latency) | (after == younger)),
            Assert(~pending | (age == latency) | pipe_valid.bit_select((age - 1)[: len(age)], 1)),
            Assert(
                ~pending
                | (age == latency)
                | (pipe_last.bit_select((age - 1)[: len(age)], 1) == last)
            ),
            Assert(
                ~pending
                | (age != latency)
                | (Mux(behind == 0, res.payload.last, second.last) == last)
            ),
            Cover(leaves & (index != 0) & last),
            Cover(c.pop & res.payload.last),
        ]
        # A result right at the latency with no stall, and one delayed by a full queue.
        since = Signal(range(latency + 2), name="f_cycles")
        with m.If(c.mv_live & follow & ~tagged):
            m.d.sync += since.eq(1)
        with m.Elif(tagged & (since != latency + 1)):
            m.d.sync += since.eq(since + 1)
        m.d.comb += [
            Cover(leaves & (since == latency)),
            Cover(leaves & (since == latency + 1) & (queue == 2)),
        ]

    def _misuse(self, m, dut, body, c):
        cfg = self.cfg
        top = (1 << cfg.status_bits) - 1
        status = dut.status
        for kind, event in c.events.items():
            count = Signal(cfg.status_bits, name=f"c_count_{kind.name.lower()}")
            flag = Signal(name=f"c_flag_{kind.name.lower()}")
            with m.If(event):
                m.d.sync += [flag.eq(1), count.eq(Mux(count == top, top, count + 1))]
            m.d.comb += [
                Assert(status.counts[kind] == count),
                Assert(status.flags[kind] == flag),
                Cover(event),
                Cover(event & (count == top)),  # saturated, and counted once more
            ]
        for kind in ErrorKind:
            if kind not in c.events:  # a kind this engine cannot have (one format)
                m.d.comb += [Assert(status.counts[kind] == 0), Assert(~status.flags[kind])]
        # Dropped loads are discarded: only a good load is ever switched to.
        pend = internal(body, "pend")
        m.d.comb += [
            Assert(~c.activate | c.pend),
            Assert(~(c.ld_fire & c.pend & ~c.activate)),
            Assert(pend == c.pend),
            Cover(c.activate & c.commit),  # a load completes as an op switches to the last
        ]
        # A dropped moving op's beats are taken: an op dropped, then a good op's beat.
        dropped_then = Signal(name="c_dropped_then")
        with m.If(c.mv_fire & c.mv_first & ~c.mv_live):
            m.d.sync += dropped_then.eq(1)
        m.d.comb += Cover(dropped_then & c.mv_live)

    def _liveness(self, m, dut, body, c):
        ld, mv, res = dut.ld_stream, dut.mv_stream, dut.res_stream
        adv = internal(body, "count") != 2  # a tick: the result queue is not full
        must_mv = mv.valid & ~(c.mv_first & mv.payload.load & ~c.pend)
        must_ld = ld.valid & ~c.pend
        refusals = {}
        for name, must, fire in (("mv", must_mv, c.mv_fire), ("ld", must_ld, c.ld_fire)):
            refused = refusals[name] = Signal(range(self.bound + 1), name=f"{name}_refused")
            with m.If(adv & must & ~fire):
                m.d.sync += refused.eq(Mux(refused == self.bound, self.bound, refused + 1))
            with m.Elif(fire | ~must):
                m.d.sync += refused.eq(0)
            m.d.comb += [
                Assert(~(adv & must & ~fire & (refused >= self.bound - 1))),
                Cover(fire & must & c.events[ErrorKind.NO_STATIONARY])
                if name == "mv"
                else Cover(fire & c.events[ErrorKind.LOAD_K] & ld.payload.last),
            ]
        if any(f.name == "fp32" for f in self.cfg.formats):
            m.d.comb += Cover(must_mv & c.mv_fire & (refusals["mv"] == FP32_BEAT_INTERVAL - 1))
            # The ticks a moving beat has been refused and those it still waits after an FP32
            # beat add up to fewer than the bound: the invariant the induction needs, on the
            # RTL's wait counter (`hold` in engine.py; a design without it is checked bounded).
            try:
                hold = internal(body, "hold")
            except LookupError:
                hold = None
            if hold is not None:
                m.d.comb += Assert(refusals["mv"] + hold <= self.bound - 1)
        waited_load = Signal(name="mv_waited_load")  # a moving op waited for its load
        with m.If(mv.valid & c.mv_first & mv.payload.load & ~c.pend):
            m.d.sync += waited_load.eq(1)
        ready_before = Signal(name="res_ready_before")
        m.d.sync += ready_before.eq(res.ready)
        m.d.comb += [
            Assert(~ready_before | adv),
            Cover(~adv),  # the queue does fill
            Cover(waited_load & c.activate),  # ... and was taken once its load completed
        ]
