"""tlm.link.router: pipeline timing, credits, round robin, and the drop rules."""

import pytest

from tlm.link.config import DropKind, LinkConfig
from tlm.link.flit import FlitKind
from tlm.link.router import Router

CFG = LinkConfig((4, 4), depth=2)
FMT = CFG.fmt
X_PLUS, X_MINUS, Y_PLUS, Y_MINUS = 1, 2, 3, 4


def run(router, cycles, **inputs):
    return [router.step(**inputs) for _ in range(cycles)]


def test_flit_timing_and_vc_rewrite():
    r = Router(CFG, (3, 0))
    # from (3, 0) going + in x takes the wrap link: class 1, VC 1
    flit = FMT.head(dst=(0, 0), src=(3, 0), length=1, seq=1)
    assert r.step(inject=flit).accepted == [0]
    assert r.outputs().link[X_PLUS] is None
    info = r.step()  # granted: the flit leaves its buffer in the next cycle
    assert info.grants == [(0, X_PLUS, 1)] and info.sent == {}
    assert r.outputs().link[X_PLUS] is None
    info = r.step()
    assert info.sent == {X_PLUS: FMT.with_vc(flit, 1)}
    assert r.outputs().link[X_PLUS] == FMT.with_vc(flit, 1)
    r.step()
    assert r.outputs().link[X_PLUS] is None


def test_link_input_to_eject_with_credit_return():
    r = Router(CFG, (1, 1))
    flit = FMT.head(dst=(1, 1), src=(0, 1), length=1, seq=2, vc=1)
    link = [None] * CFG.ports
    link[X_MINUS] = flit
    r.step(link_in=link)  # written into x- VC 1
    r.step()  # granted to ejection: the slot is credited back at once
    out = r.outputs()
    assert out.eject is None and out.credit[X_MINUS] == 0b10
    r.step()  # the flit traverses into the ejection register
    out = r.outputs()
    assert out.eject == FMT.with_vc(flit, 0)  # the lane (VC mod V/2) leaves with it
    assert out.credit[X_MINUS] == 0
    assert r.step(eject_ready=False).ejected == {}
    assert r.step(eject_ready=True).ejected == {0: FMT.with_vc(flit, 0)}
    assert r.outputs().eject is None and r.outputs().credit[X_MINUS] == 0


def test_credits_stop_and_resume():
    r = Router(CFG, (0, 0))
    packets = [FMT.head(dst=(1, 0), src=(0, 0), length=1, seq=s) for s in range(4)]
    sent = []
    for flit in packets:
        info = r.step(inject=flit)
        assert info.accepted == [0]
        sent += list(info.sent.values())
    for _ in range(6):
        sent += list(r.step().sent.values())
    assert len(sent) == CFG.depth  # two credits of VC 0 on x+, then stop
    credit = [0] * CFG.ports
    credit[X_PLUS] = 1
    r.step(credit_in=credit)
    assert list(r.step().sent.values()) == [packets[2]]


def test_round_robin_between_inputs():
    r = Router(CFG, (1, 0))
    # two link inputs (x- VC 0, y+ VC 0) both feeding x+ with single-flit packets
    got = []
    for s in range(8):
        link = [None] * CFG.ports
        link[X_MINUS] = FMT.head(dst=(2, 0), src=(0, 0), length=1, seq=s)
        link[Y_PLUS] = FMT.head(dst=(2, 0), src=(1, 1), length=1, seq=100 + s)
        credit = [0] * CFG.ports
        credit[X_PLUS] = 1  # the next router frees a slot each cycle
        info = r.step(link_in=link if s < 2 else None, credit_in=credit)
        got += [FMT.decode_head(f).seq for f in info.sent.values()]
    assert got == [0, 100, 1, 101]


def test_wormhole_holds_output_vc():
    r = Router(LinkConfig((4, 4), depth=4), (0, 0))
    a = FMT.packet((0, 0), (0, 0), 3, 1, data=[7, 8])  # to itself: through the ejection port
    b_head = FMT.head(dst=(0, 0), src=(3, 0), length=1, seq=2, vc=1)
    order = []
    for flit in a:
        order += list(r.step(inject=flit).sent.values())
    link = [None] * CFG.ports
    link[X_MINUS] = b_head  # arrives while packet a holds the ejection port
    for c in range(8):
        order += list(r.step(link_in=link if c == 0 else None).sent.values())
    assert order == a + [FMT.with_vc(b_head, 0)]


@pytest.mark.parametrize(
    "flits,kind",
    [
        (lambda: [FMT.head((4, 0), (0, 0), 2, 0), FMT.body(1, tail=True)], DropKind.BAD_DEST),
        (lambda: [FMT.head((9, 9), (0, 0), 1, 0)], DropKind.BAD_DEST),
        (lambda: [FMT.body(5)], DropKind.ORPHAN),
        (lambda: [FMT.body(5, tail=True)], DropKind.ORPHAN),
        (lambda: [FMT.head((1, 0), (0, 0), 3, 0), FMT.body(1, tail=True)], DropKind.BAD_LENGTH),
        (
            lambda: [FMT.head((1, 0), (0, 0), 2, 0), FMT.body(1), FMT.body(2, tail=True)],
            DropKind.BAD_LENGTH,
        ),
        (lambda: [FMT.head((1, 0), (0, 0), 2, 0, single=True)], DropKind.BAD_LENGTH),
        (lambda: [FMT.head((1, 0), (0, 0), 2, 0), FMT.body(1)], DropKind.BAD_LENGTH),
        # a head (not a single) whose length says 1, then a body and a tail
        (
            lambda: (
                [FMT.head((1, 0), (0, 0), 1, 0, single=False), FMT.body(1)]
                + [FMT.body(2, tail=True)]
            ),
            DropKind.BAD_LENGTH,
        ),
        # bodies past the length, the overrun ones never written
        (
            lambda: (
                [FMT.head((1, 0), (0, 0), 2, 0), *[FMT.body(i) for i in (1, 2, 3)]]
                + [FMT.body(4, tail=True)]
            ),
            DropKind.BAD_LENGTH,
        ),
    ],
)
def test_malformed_injection_is_dropped_counted_and_does_not_block(flits, kind):
    r = Router(CFG, (0, 0))
    good = FMT.packet((1, 0), (0, 0), 2, 9, data=[42])
    for flit in flits() + good:
        assert r.step(inject=flit).accepted == [0]
    sent = []
    for _ in range(6):
        sent += list(r.step().sent.values())
    assert sent == good  # the drop came cycles ago: its counter has it
    counts = [0] * len(DropKind)
    counts[kind] = 1
    assert r.outputs().counters == tuple(counts)


def test_malformed_link_input_is_dropped_with_credit():
    r = Router(CFG, (0, 0))
    link = [None] * CFG.ports
    link[Y_PLUS] = FMT.body(3)
    r.step(link_in=link)
    link[Y_PLUS] = FMT.head((7, 0), (0, 1), 1, 0)
    r.step(link_in=link)  # the orphan body leaves its FIFO: the drop is registered ...
    assert r.outputs().credit[Y_PLUS] == 1 and r.outputs().counters == (0, 0, 0, 0, 0)
    assert r.drop_reg == [0, 0, 1, 0, 0]
    r.step()  # ... and counted a cycle later, as the bad head leaves
    assert r.outputs().credit[Y_PLUS] == 1 and r.outputs().counters == (0, 0, 1, 0, 0)
    r.step()
    assert r.outputs().credit[Y_PLUS] == 0 and r.outputs().counters == (1, 0, 1, 0, 0)


def test_drop_is_counted_the_cycle_after_it_happens():
    """The RTL registers each drop and counts it in the next cycle: ``outputs().counters``
    shows a drop of step ``t`` after step ``t + 1``, not before; several in one cycle at once."""
    r = Router(CFG, (0, 0))
    credit = [0] * CFG.ports
    credit[X_PLUS] = 0b11
    r.step(credit_in=credit)
    assert r.outputs().counters == (0, 0, 0, 0, 0) and not r.quiet
    r.step()
    assert r.outputs().counters == (0, 0, 0, 0, 2) and r.quiet


def test_counters_saturate():
    r = Router(LinkConfig((4, 4), counter_bits=2), (0, 0))
    for _ in range(5):
        r.step(inject=FMT.body(0))
    r.step()  # the last drop reaches its counter
    assert r.outputs().counters == (0, 0, 3, 0, 0)


def link(port, flit):
    """Link inputs with ``flit`` on ``port`` alone."""
    flits = [None] * CFG.ports
    flits[port] = flit
    return flits


@pytest.mark.parametrize(
    "last,closed",
    [
        (lambda: FMT.head((0, 1), (3, 0), 1, 7, single=True), None),  # a packet ended: kept
        (lambda: FMT.head((0, 1), (3, 0), 3, 7), FlitKind.SINGLE),
        (lambda: FMT.body(7), FlitKind.TAIL),
    ],
)
def test_flit_without_credit_is_dropped_and_counted(last, closed):
    """A flit into a full FIFO is dropped and counted; if the FIFO's last flit leaves a
    packet open, that flit becomes the packet's end; other inputs keep flowing."""
    r = Router(CFG, (0, 0))
    q = r.fifo[CFG.requester(X_MINUS, 0)]
    r.step(link_in=link(X_MINUS, FMT.head((0, 2), (3, 0), 1, 1, single=True)))  # no credit
    r.credits[Y_PLUS][0] = 0
    r.step(link_in=link(X_MINUS, last()))
    r.step()
    assert list(q) == [FMT.head((0, 2), (3, 0), 1, 1, single=True), last()]
    dropped = FMT.body(99, tail=True)
    r.step(link_in=link(X_MINUS, dropped))
    counts = [0] * len(DropKind)
    counts[DropKind.NO_CREDIT] = 1
    assert r.outputs().counters == (0,) * len(DropKind)  # registered, counted next cycle
    want = last() if closed is None else FMT.with_kind(last(), closed)
    assert list(q) == [FMT.head((0, 2), (3, 0), 1, 1, single=True), want]
    # another input keeps going: x+ VC 0 to the ejection port
    r.step(link_in=link(X_PLUS, FMT.head((0, 0), (1, 0), 1, 5)))
    assert r.outputs().counters == tuple(counts)
    assert r.step().grants == [(CFG.requester(X_PLUS, 0), 0, 0)]
    assert r.step().sent == {0: FMT.head((0, 0), (1, 0), 1, 5)}
    assert r.outputs().counters == tuple(counts)


def test_closed_packet_leaves_truncated_and_the_rest_is_orphaned():
    """Head and one body in a full depth-2 FIFO; the next body is dropped (no credit), the
    buffered body becomes the tail; the packet leaves as head + tail and frees its output VC;
    the packet's real tail then arrives as an orphan."""
    r = Router(CFG, (0, 0))
    head = FMT.head((0, 1), (3, 0), 4, 3)
    r.credits[Y_PLUS][0] = 0
    r.step(link_in=link(X_MINUS, head))
    r.step(link_in=link(X_MINUS, FMT.body(1)))
    r.step(link_in=link(X_MINUS, FMT.body(2)))  # full: dropped
    credit = [0] * CFG.ports
    credit[Y_PLUS] = 1
    sent = []
    for c in range(4):
        sent += list(r.step(credit_in=credit if c < 2 else None).sent.values())
    assert sent == [head, FMT.body(1, tail=True)]
    assert not r.busy[Y_PLUS][0] and r.alloc[CFG.requester(X_MINUS, 0)] is None
    r.step(link_in=link(X_MINUS, FMT.body(3, tail=True)))
    r.step()  # the orphan leaves its FIFO: counted a cycle later
    assert r.outputs().counters == (0, 0, 0, 1, 0)
    r.step()
    assert r.outputs().counters == (0, 0, 1, 1, 0)


def test_credit_not_owed_is_ignored_and_counted():
    r = Router(CFG, (0, 0))
    credit = [0] * CFG.ports
    credit[X_PLUS] = 0b11
    credit[Y_MINUS] = 0b01
    r.step(credit_in=credit)
    assert r.credits[X_PLUS] == [CFG.depth] * CFG.vcs
    # a credit that is owed still counts: one flit out on x+ VC 0, its credit back
    assert r.step(inject=FMT.head((1, 0), (0, 0), 1, 0)).accepted == [0]
    assert r.outputs().counters == (0, 0, 0, 0, 3)
    r.step()
    assert r.credits[X_PLUS][0] == CFG.depth - 1
    r.step(credit_in=credit)
    assert r.credits[X_PLUS] == [CFG.depth] * CFG.vcs
    r.step()
    assert r.outputs().counters == (0, 0, 0, 0, 5)


def test_bad_arguments():
    with pytest.raises(ValueError) as error:
        Router(CFG, (4, 0))
    assert str(error.value) == "coord must be a node of the torus (4, 4), not (4, 0)"
    with pytest.raises(TypeError) as error:
        Router((4, 4), (0, 0))
    assert str(error.value) == "cfg must be a LinkConfig, not (4, 4)"


def test_no_credit_drop_closes_a_flit_granted_that_cycle():
    """With one-flit buffers the flit a no-credit drop closes may be the one granted in that
    cycle (it leaves its buffer in the next): the grant took the output VC for a head, so the
    packet ends there, as at a tail, and the flit leaves closed (head -> single)."""
    cfg = LinkConfig((4, 4), depth=1)
    r = Router(cfg, (0, 0))
    head = FMT.head((1, 0), (3, 0), 3, 4)
    r.step(link_in=link(X_MINUS, head))
    info = r.step(link_in=link(X_MINUS, FMT.body(1)))  # granted; the body finds it full
    [(rq, port, vc)] = info.grants
    assert (rq, port) == (cfg.requester(X_MINUS, 0), X_PLUS)
    assert r.alloc[rq] is None and not r.busy[X_PLUS][vc]  # released at once
    single = FMT.with_vc(FMT.with_kind(head, FlitKind.SINGLE), vc)
    assert r.step().sent == {X_PLUS: single}
    assert r.outputs().counters[DropKind.NO_CREDIT] == 1
