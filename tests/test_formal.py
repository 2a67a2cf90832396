"""verif/formal: the proofs pass on the RTL, fail on planted bugs, and the front door checks
its flags. The SymbiYosys runs take a few seconds each (the router's are ``slow``)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
from amaranth.hdl import Cover, Elaboratable, Module, Signal

from hdl.link.arbiter import RoundRobinArbiter
from hdl.link.router import Router
from hdl.link.vc_fifo import VcFifo
from hdl.tensor.engine import TensorEngine
from tlm.link.config import LinkConfig
from tlm.tensor.config import EngineConfig, ErrorKind
from verif.formal.__main__ import main
from verif.formal.arbiter import ArbiterFairness
from verif.formal.deadlock import dependency_graph, find_cycle
from verif.formal.harness import AnySeq, internal, no_reset
from verif.formal.properties import PROPERTIES
from verif.formal.router import FORMAL_CONFIG, RouterCredits, RouterVcOrder
from verif.formal.sby import check
from verif.formal.tensor import FORMAL_FORMATS, FORMAL_FP32, FORMAL_INT8, TensorEngineContract

REQUESTERS = LinkConfig((4, 4)).requesters


class FrozenPointerArbiter(RoundRobinArbiter):
    """Planted bug: the round-robin pointer never advances (fixed priority from requester 0)."""

    def elaborate(self, platform):
        m = Module()
        lowest = self.requests & (~self.requests + 1)[: self.count]
        m.d.comb += [self.grant.eq(lowest), self.granted.eq(self.requests.any())]
        return m


class CreditOffByOne(Router):
    """Planted bug: the x+ link's VC 0 credit counter starts at depth + 1."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        counter = internal(m, "credit1_vc0")
        counter._init = self.cfg.depth + 1
        return m


def check_arbiter(tmp_path, bound, arbiter=RoundRobinArbiter):
    harness = ArbiterFairness(REQUESTERS, bound, arbiter)
    return check(harness, tmp_path, mode="prove", depth=REQUESTERS + 1)


def test_a_task_past_its_time_is_a_verdict_not_an_exception(tmp_path):
    """SymbiYosys past ``timeout_s`` gives a verdict naming the task (printed as such by
    ``make formal``), not a traceback; a cover task's timeout keeps the assertions' verdict."""
    harness = ArbiterFairness(REQUESTERS, REQUESTERS, RoundRobinArbiter)
    verdict = check(harness, tmp_path, mode="prove", depth=REQUESTERS + 1, timeout_s=0.01)
    assert (verdict.passed, verdict.held, verdict.timeout) == (False, False, "check")
    assert verdict.result == "check timed out"


def test_a_cover_past_its_time_keeps_the_proof(tmp_path, monkeypatch):
    """A proof whose cover task runs out of time: proven, not passed, covers unknown."""
    from verif.formal import sby

    real = sby._sby
    monkeypatch.setattr(sby, "_sby", lambda w, n, *a: None if n == "cover" else real(w, n, *a))
    verdict = check_arbiter(tmp_path, REQUESTERS)
    assert (verdict.passed, verdict.proven, verdict.held) == (False, True, True)
    assert (verdict.timeout, verdict.covers) == ("cover", (0, 0))
    assert verdict.result == f"proven (k={REQUESTERS + 1})"


class _Never(Elaboratable):
    """``o`` registered ``a & ~a``: never 1 in the design, free once the module is cut."""

    def __init__(self):
        self.a, self.o = Signal(), Signal()

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.o.eq(self.a & ~self.a)
        return m


class _CutCovers(Elaboratable):
    """Two covers: ``never.o`` (reachable only with ``never`` cut) and a counter at 3."""

    def elaborate(self, platform):
        m = Module()
        no_reset(m)
        m.submodules.never = never = _Never()
        a, count = AnySeq(1), Signal(2)
        m.d.comb += never.a.eq(a)
        m.d.sync += count.eq(count + a)
        m.d.comb += [Cover(count == 3), Cover(never.o)]
        return m


def test_a_cover_reached_only_through_the_cut_is_not_counted(tmp_path):
    """Covers searched on the design with a part cut are replayed on the whole design: the
    counter's trace replays, the one that needed the cut part to lie does not."""
    verdict = check(_CutCovers(), tmp_path, mode="bmc", depth=4, cover_cut=("top.never",))
    assert verdict.covers == (1, 2) and not verdict.passed, verdict
    assert check(_CutCovers(), tmp_path / "whole", mode="bmc", depth=4).covers == (1, 2)


def test_a_cut_selecting_nothing_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match="SymbiYosys failed"):
        check(_CutCovers(), tmp_path, mode="bmc", depth=4, cover_cut=("top.nothing*",))


def test_arbiter_fairness_proven(tmp_path):
    verdict = check_arbiter(tmp_path, REQUESTERS)
    assert verdict.passed and verdict.proven
    assert verdict.covers == (REQUESTERS, REQUESTERS)


def test_arbiter_fairness_bound_is_tight(tmp_path):
    verdict = check_arbiter(tmp_path, REQUESTERS - 1)
    assert not verdict.passed
    assert verdict.trace.endswith(".vcd")


def test_arbiter_planted_frozen_pointer_fails(tmp_path):
    assert not check_arbiter(tmp_path, REQUESTERS, FrozenPointerArbiter).passed


@pytest.mark.parametrize("shape", ["4x4", "4x4x4"])
def test_dateline_breaks_every_cycle(shape):
    cfg = LinkConfig(shape)
    assert find_cycle(dependency_graph(cfg)) is None
    cycle = find_cycle(dependency_graph(cfg, dateline=False))
    assert cycle is not None and cycle[0] == cycle[-1]


def test_arbiter_harness_checks_arguments():
    with pytest.raises(ValueError, match=r"bound must be a positive integer, not 0"):
        ArbiterFairness(3, 0)


def test_front_door_rejects_unknown_property(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--property", "nope"])
    assert exit_.value.code == 2
    message = capsys.readouterr().err.strip()
    assert message.startswith("error: --property must be one of torus_acyclic_4x4, ")
    assert message.endswith(", not 'nope'")


@pytest.mark.parametrize("depth", ["0", "x", "201"])
def test_front_door_rejects_bad_depth(capsys, depth):
    with pytest.raises(SystemExit) as exit_:
        main(["--depth", depth])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: --depth must be an integer in 1..200, not {depth!r}"


@pytest.mark.slow
def test_router_credits_proven(tmp_path):
    verdict = check(RouterCredits(), tmp_path, depth=2, cover_depth=8)
    assert verdict.passed and verdict.proven


@pytest.mark.slow
def test_router_planted_credit_off_by_one_fails(tmp_path):
    harness = RouterCredits(FORMAL_CONFIG, router=CreditOffByOne)
    assert not check(harness, tmp_path, depth=2).passed


class FrontOneOff(VcFifo):
    """Planted bug: a link input VC presents the flit behind its front one."""

    def __init__(self, m, layout, depth, name, aux_width=0):
        super().__init__(m, layout, depth, name, aux_width)
        self.head = self._slot(self.rd + 1)
        self.head_aux = self._slot(self.rd + 1, self.aux)  # its route, kept beside it


@pytest.mark.slow
def test_router_planted_vc_front_off_by_one_fails(tmp_path, monkeypatch):
    monkeypatch.setattr("hdl.link.router.VcFifo", FrontOneOff)
    assert not check(RouterVcOrder(), tmp_path, depth=3).passed


# The tensor engine: the int8 contract proven, and three planted bugs, each caught by the
# property that is about it (a few seconds each).


def check_tensor(tmp_path, what, engine=TensorEngine):
    """``what`` checked as ``make formal`` checks it (its depths: the base case must reach a
    bug that needs a result, or a counter saturated, to show a counterexample)."""
    prop = PROPERTIES[f"tensor_{what}_int8"]
    harness = TensorEngineContract(FORMAL_INT8, what, engine=engine, data=what == "handshake")
    return check(harness, tmp_path, depth=prop.depth, cover_depth=prop.cover_depth)


@pytest.mark.parametrize("what", ["handshake", "misuse", "liveness"])
def test_tensor_contract_proven(tmp_path, what):
    verdict = check_tensor(tmp_path, what)
    assert verdict.passed and verdict.proven
    assert verdict.covers[0] == verdict.covers[1] > 0


class _EarlyConfig(EngineConfig):
    @property
    def latency(self):
        return super().latency - 1


class EarlyResult(TensorEngine):
    """Planted bug: a result is marked valid one cycle before its sum leaves the array (the
    valid/last pipe one stage short)."""

    def __init__(self, cfg):
        super().__init__(cfg)
        fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg) if f.init}
        self.cfg = _EarlyConfig(**(fields | {"fmt": cfg.formats}))


class ReadyLateAfterBadK(TensorEngine):
    """Planted bug: ld_stream.ready stays low for a cycle after a load declaring a bad K."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        late = Signal()
        m.d.sync += late.eq(internal(m, "k_error"))
        open_ = (internal(m, "count") != 2) & (~internal(m, "pend") | internal(m, "activate"))
        m.d.comb += self.ld_stream.ready.eq(open_ & ~late)
        return m


class WrappingCounter(TensorEngine):
    """Planted bug: the NO_STATIONARY counter wraps to 0 in place of saturating."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        counter = self.status.counts[ErrorKind.NO_STATIONARY]
        with m.If(internal(m, "mv_error")):
            m.d.sync += counter.eq(counter + 1)
        return m


class DroppedOpGivesResults(TensorEngine):
    """Planted bug: every moving beat taken is marked valid, those of dropped ops too."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        pipe_valid, mv = internal(m, "pipe_valid"), self.mv_stream
        with m.If(internal(m, "count") != 2):
            m.d.sync += pipe_valid.eq((pipe_valid << 1) | (mv.valid & mv.ready))
        return m


#: Planted bug: a load of the wrong length is counted as a bad K (LOAD_LENGTH's counter never
#: moves, LOAD_K's counts both).
LENGTH_COUNTED_AS_K = SimpleNamespace(
    **{k.name: k for k in ErrorKind} | {"LOAD_LENGTH": ErrorKind.LOAD_K}
)


def test_tensor_planted_early_result_fails_handshake(tmp_path):
    verdict = check_tensor(tmp_path, "handshake", EarlyResult)
    assert not verdict.passed and verdict.trace.endswith(".vcd")


def test_tensor_planted_miscounted_kind_fails_misuse(tmp_path, monkeypatch):
    monkeypatch.setattr("hdl.tensor.engine.ErrorKind", LENGTH_COUNTED_AS_K)
    assert not check_tensor(tmp_path, "misuse").passed


def test_tensor_planted_wrapping_counter_fails_misuse(tmp_path):
    assert not check_tensor(tmp_path, "misuse", WrappingCounter).passed


def test_tensor_planted_dropped_op_results_fail_handshake(tmp_path):
    assert not check_tensor(tmp_path, "handshake", DroppedOpGivesResults).passed


def test_tensor_planted_late_ready_fails_liveness(tmp_path):
    assert not check_tensor(tmp_path, "liveness", ReadyLateAfterBadK).passed


def test_tensor_fp32_liveness_bound_is_tight(tmp_path):
    """A moving beat after an FP32 beat waits 3 ticks: 4 holds (make formal), 3 fails."""
    harness = TensorEngineContract(FORMAL_FP32, "liveness", bound=3)
    verdict = check(harness, tmp_path, mode="bmc", depth=8)
    assert not verdict.passed and verdict.trace.endswith(".vcd")


def test_tensor_harness_checks_arguments():
    with pytest.raises(
        ValueError, match=r"check must be one of handshake, misuse, liveness, not 'x'"
    ):
        TensorEngineContract(FORMAL_INT8, "x")
    with pytest.raises(TypeError, match=r"cfg must be an EngineConfig, not 3"):
        TensorEngineContract(3, "misuse")


def test_make_formal_checks_every_property():
    """``tensor_handshake_formats`` was left out while its covers took past 600 s; searched
    with the PEs cut (and replayed whole) they take about 2 minutes, so nothing is left out.
    Its cut selects the PEs of the harness's engine as Amaranth names them, and only them
    (each instance's module of that name: a renamed array would make it cut nothing)."""
    import fnmatch
    import re

    from amaranth.back import rtlil

    assert [name for name, prop in PROPERTIES.items() if not prop.default] == []
    prop = PROPERTIES["tensor_handshake_formats"]
    text = rtlil.convert(prop.harness(), name="top", ports=[])
    modules = re.findall(r"^module \\(\S+)$", text, re.M)
    cut = [m for m in modules if any(fnmatch.fnmatchcase(m, sel) for sel in prop.cover_cut)]
    pes = FORMAL_FORMATS.rows * FORMAL_FORMATS.cols
    assert len(cut) == pes and all(
        re.fullmatch(r"top\.dut\.array\.col\d+\.pe\d+_\d+", m) for m in cut
    )
