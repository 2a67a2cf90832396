"""tlm.collectives.flit: the flit engine against the zero-load closed form, the per-router model,
and the flow engine - the ladder's flit rung (docs/collectives.md, "The flit engine").

The relations, each derived in the docs:

* a step whose transfers share no link and no injection or ejection port takes exactly its
  fixed cost plus :func:`tlm.link.bounds.stream_cycles` of its slowest transfer;
* for every schedule, every step of the flit engine takes at least the flow engine's step
  (the busiest link carries at least its bytes in flits, at most one flit per interval);
* without contention, at most the flow step plus the head flits (``1/(L-1)`` of the
  serialisation), the pipeline (``2 H + L + 1 + k`` cycles) and half a cycle of rounding;
* with an injection and an ejection port per link direction (the engine's default), a node's
  transfers on different links do not contend: KangaRing is contention-free;
* the mesh all-to-all, whose transfers share links and buffers, within the bounds the docs
  derive (and explain where the wormhole routers part from the fluid model).
"""

import pytest

from tlm.collectives import Analytic, Schedule, Step, Transfer, build
from tlm.collectives.flit import (
    FlitEngine,
    FlitEngineError,
    link_config,
    transfer_cycles,
)
from tlm.collectives.flow import Flow
from tlm.collectives.packets import plan_step
from tlm.link.bounds import stream_cycles
from tlm.link.ports import Ports
from tlm.link.routing import route
from tlm.system import load_system

SERVER = load_system("trn2-server")
ULTRA = load_system("trn2-ultraserver")


def _one(system, src, dst) -> Schedule:
    """A schedule of one step of one transfer (one chunk: the whole buffer)."""
    steps = (Step((Transfer(src, dst, 0, 1, False),), ()),)
    return Schedule("permute", "one", tuple(range(system.chips)), 1, 1, steps)


# -- the zero-load closed form --------------------------------------------------------------
@pytest.mark.parametrize(
    "system,src,dst",
    [
        (SERVER, 0, 1),  # 1 hop
        (SERVER, 0, 2),  # 2 hops, x
        (SERVER, 0, 10),  # 4 hops: x and y
        (SERVER, 7, 4),  # over the x wrap-around link
        (ULTRA, 0, 16),  # 1 z hop: a half-rate link
        (ULTRA, 0, 42),  # 2 x, 2 y, 2 z hops
        (ULTRA, 5, 58),  # x, y, z, across wrap-around links
    ],
)
@pytest.mark.parametrize("nbytes", [1, 64, 65, 960, 961, 4096, 20000])
def test_a_single_transfer_is_the_closed_form(system, src, dst, nbytes):
    engine = FlitEngine(_one(system, src, dst), system)
    t = engine.run(nbytes)
    want = transfer_cycles(system, src, dst, nbytes)
    assert engine.end_cycle == want
    assert t == want / system.flit.clock_hz
    plan = plan_step(link_config(system).fmt, [(src, dst)], [nbytes], per=64)
    assert engine.flits == sum(p.flits for p in plan) and engine.packets == len(plan)


def test_the_closed_form_by_hand():
    """One z hop on the UltraServer, 961 bytes: 2 packets (a head and 15 flits of 64 B, then a
    head and 1 B), 18 flits at 2 cycles each after the first: 2 + 16 + 1 + 2 x 17 = 53 cycles
    after 1.5 us (6,000)."""
    assert stream_cycles(1, [16, 2], interval=2) == 53
    assert transfer_cycles(ULTRA, 0, 16, 961) == 6053
    assert transfer_cycles(SERVER, 0, 1, 0) == 6000  # nothing to send: the fixed cost


def test_zero_bytes_take_the_fixed_costs():
    ring = build("ring", "all_reduce", SERVER)
    engine = FlitEngine(ring, SERVER)
    assert engine.run(0) == pytest.approx(float(Analytic(ring, SERVER).time_s([0], 2)[0]))
    assert engine.flits == 0 and engine.cycles == 0  # every cycle fast-forwarded


# -- the per-router model gives the same cycles ---------------------------------------------
@pytest.mark.parametrize("ports", ["per_direction", "single"])
@pytest.mark.parametrize(
    "system,algo,op,size",
    [
        (SERVER, "ring", "all_reduce", 8192),
        (SERVER, "mesh", "all_to_all", 16 * 200),
        (SERVER, "kangaring", "all_reduce", 64 * 130),
        (ULTRA, "mesh", "all_to_all", 64 * 64),  # contention, and the z links' interval
    ],
)
def test_the_per_router_model_gives_the_same_cycles(system, algo, op, size, ports):
    schedule = build(algo, op, system)
    fast = FlitEngine(schedule, system, ports=ports)
    ref = FlitEngine(schedule, system, network="python", ports=ports)
    t = fast.time_s([size], itemsize=2)
    assert ref.time_s([size], itemsize=2) == t
    assert (ref.end_cycle, ref.flits, ref.packets, ref.cycles) == (
        fast.end_cycle,
        fast.flits,
        fast.packets,
        fast.cycles,
    )
    assert fast.flits > 0


# -- flit against flow ----------------------------------------------------------------------
def _flow_steps(flow_engine, chunk_bytes):
    """Per step of a chain schedule: the flow time of the step (fixed + serialisation), from
    the flow engine run step by step."""
    a = flow_engine.analytic
    return [
        float(f + p * chunk_bytes) for f, p in zip(a.fixed_s, a.per_unit_s_per_byte, strict=True)
    ]


def check_flit_against_flow(system, schedule, size, itemsize=2, contention=False, ports=None):
    """Run both engines on a chain schedule; assert the derived relations and return the
    flit and flow times. ``flow <= flit`` always; without ``contention`` (no two transfers of
    a step on one link or port) also ``flit <= flow + sum over steps of (serialisation /
    (L - 1) + (2 H + L + 1 + k + 1/2) / clock)``. ``ports``: the engine's (default: its
    default)."""
    flit = (
        FlitEngine(schedule, system) if ports is None else FlitEngine(schedule, system, ports=ports)
    )
    flow = Flow(schedule, system, flit.analytic)
    t_flit = float(flit.time_s([size], itemsize)[0])
    t_flow = float(flow.time_s([size], itemsize)[0])
    chunk = int(flit.analytic.chunk_bytes(size, itemsize))
    clock, L = flit.clock_hz, system.flit.max_packet_flits
    assert flit.analytic.chain
    # the flow engine equals the analytic one on every shipped schedule (its own tests)
    assert t_flow == pytest.approx(sum(_flow_steps(flow, chunk)), rel=1e-12)
    assert t_flit >= t_flow * (1 - 1e-12), (t_flit, t_flow)
    if not contention:
        slack = 0.0
        for i, step in enumerate(schedule.steps):
            serial = float(flit.analytic.per_unit_s_per_byte[i]) * chunk
            hops, k = 0, 1
            for t in step.transfers:
                a, b = (system.torus.coord(schedule.chips[x]) for x in (t.src, t.dst))
                hops = max(hops, system.hops(schedule.chips[t.src], schedule.chips[t.dst]))
                k = max([k] + [system.flit.interval[d] for d in range(len(a)) if a[d] != b[d]])
            slack += serial / (L - 1) + (2 * hops + L + 1 + k + 0.5) / clock
        assert t_flit <= t_flow + slack, (t_flit, t_flow, slack)
    return t_flit, t_flow


@pytest.mark.parametrize("size", [64, 4096, 64 << 10, 1 << 20])
def test_a_ring_step_is_the_closed_form_and_within_the_tolerance(size):
    """One step of the ring all-reduce on the server: every rank sends one chunk one hop, on
    its own link, injection and ejection port: exactly the closed form."""
    ring = build("ring", "all_reduce", SERVER)
    step = Schedule("all_reduce", "ring", ring.chips, ring.blocks, 1, ring.steps[:1])
    t_flit, t_flow = check_flit_against_flow(SERVER, step, size)
    chunk = int(Analytic(step, SERVER).chunk_bytes(size, 2))
    a, b = ring.chips[0], ring.chips[1]
    assert t_flit * SERVER.flit.clock_hz == pytest.approx(transfer_cycles(SERVER, a, b, chunk))


@pytest.mark.parametrize(
    "system,algo",
    [(SERVER, "ring"), (ULTRA, "ring"), (SERVER, "rdh"), (ULTRA, "rdh")],
    ids=["server-ring", "ultra-ring", "server-rdh", "ultra-rdh"],
)
@pytest.mark.parametrize("size", [4096, 64 << 10])
def test_ring_and_rdh_all_reduce_are_the_closed_form_and_within_the_tolerance(system, algo, size):
    """Ring and recursive doubling/halving: every step is one transfer per rank over one hop,
    no two on a link or a port - the sum of the steps' closed forms, and flow <= flit <=
    flow + the tolerance."""
    schedule = build(algo, "all_reduce", system)
    t_flit, _ = check_flit_against_flow(system, schedule, size)
    chunk = int(Analytic(schedule, system).chunk_bytes(size, 2))
    cycles = 0
    for step in schedule.steps:
        c = schedule.chips
        cycles += max(
            transfer_cycles(system, c[t.src], c[t.dst], t.units * chunk) for t in step.transfers
        )
    assert t_flit * system.flit.clock_hz == pytest.approx(cycles, abs=1e-6)


@pytest.mark.parametrize("size", [64 * 130, 64 << 10, 1 << 20])
def test_kangaring_is_contention_free_with_a_port_per_direction(size):
    """KangaRing: each rank sends four chunks a step, one on each of its four links, and
    receives four, one from each. With an injection and an ejection port per link direction
    (the engine's default) no two transfers of a step share a link or a port: every step is
    exactly its transfers' closed form, and flow <= flit <= flow + the tolerance."""
    schedule = build("kangaring", "all_reduce", SERVER)
    check_flit_against_flow(SERVER, schedule, size)
    flit = FlitEngine(schedule, SERVER)
    t_flit = float(flit.time_s([size], 2)[0])
    chunk = int(flit.analytic.chunk_bytes(size, 2))
    c = schedule.chips
    cycles = sum(
        max(transfer_cycles(SERVER, c[t.src], c[t.dst], t.units * chunk) for t in step.transfers)
        for step in schedule.steps
    )
    assert t_flit * SERVER.flit.clock_hz == pytest.approx(cycles, abs=1e-6)


@pytest.mark.parametrize("size", [64 * 130, 64 << 10, 1 << 20])
def test_kangaring_is_the_closed_form_of_one_injection_port(size):
    """KangaRing on the RTL's router (``ports="single"``): the flow engine runs a rank's four
    transfers at once, the one injection port sends them one after another: each step is the
    closed form of the node's packets in one stream (the four rings' transfers start in step
    with each other, so no ejection port is shared at a time), four times the serialisation
    of the flow engine's step."""
    schedule = build("kangaring", "all_reduce", SERVER)
    t_flit, t_flow = check_flit_against_flow(
        SERVER, schedule, size, contention=True, ports="single"
    )
    flit = FlitEngine(schedule, SERVER, ports="single")
    chunk = int(flit.analytic.chunk_bytes(size, 2))
    fmt, per = link_config(SERVER).fmt, SERVER.flit.bytes_per_flit
    cycles = 0
    for i, step in enumerate(schedule.steps):
        mine = [t for t in step.transfers if t.src == 0]
        plan = plan_step(fmt, [(0, 1)] * len(mine), [t.units * chunk for t in mine], per=per)
        cycles += flit.fixed_cycles[i] + stream_cycles(1, [p.flits for p in plan])
    assert t_flit * SERVER.flit.clock_hz == pytest.approx(cycles, abs=1e-6)
    serial_flow = t_flow - float(flit.analytic.fixed_s.sum())
    serial_flit = t_flit - float(flit.analytic.fixed_s.sum())
    assert serial_flit >= 4 * serial_flow * (1 - 1e-12)  # four chunks through one port


def _arrival_port(torus, a, b):
    """The port of node ``b`` a packet from node ``a`` arrives on (its last hop's far end)."""
    here, src, dst = torus.coord(a), torus.coord(a), torus.coord(b)
    while True:
        port = route(torus.shape, here, src, dst)[0]
        nxt = torus.neighbour(here, port)
        if nxt == dst:
            return torus.facing(port)
        here = nxt


def _port_flits(system, schedule, chunk):
    """Flits through each injection and each ejection port of the mesh all-to-all's one step,
    a port per link direction: a transfer enters at its first hop's port and leaves at the
    port of the link it arrives on (:class:`tlm.link.ports.Ports`)."""
    cfg = link_config(system)
    fmt, per, torus = cfg.fmt, system.flit.bytes_per_flit, system.torus
    ports = Ports(cfg, "per_direction")
    out, into = {}, {}
    for t in schedule.steps[0].transfers:
        a, b = schedule.chips[t.src], schedule.chips[t.dst]
        flits = sum(p.flits for p in plan_step(fmt, [(a, b)], [t.units * chunk], per=per))
        first = ports.injection_port(torus.coord(a), torus.coord(b))
        last = _arrival_port(torus, a, b)
        out[(a, first)] = out.get((a, first), 0) + flits
        into[(b, last)] = into.get((b, last), 0) + flits
    return out, into


@pytest.mark.parametrize("system", [SERVER, ULTRA], ids=["server", "ultraserver"])
@pytest.mark.parametrize("size_per_rank", [64, 1024, 16384])
def test_all_to_all_under_contention(system, size_per_rank):
    """Mesh all-to-all: every rank sends to every other at once, many transfers per link,
    port and buffer. Derived (docs/collectives.md, "Contention"): flow <= flit, and the flit
    time is at least its busiest injection or ejection port's flits (one per cycle). Checked,
    not derived: a port per link direction is no slower than one port per node. The upper
    side relative to the flow engine is not derived: where the wormhole routers part from the
    fluid model (a packet holds its virtual channel while it is fed at a fraction of a link's
    rate) is measured and explained in the docs, and the test prints the ratios."""
    schedule = build("mesh", "all_to_all", system)
    size = size_per_rank * system.chips
    t_flit, t_flow = check_flit_against_flow(system, schedule, size, contention=True)
    flit = FlitEngine(schedule, system)
    flit.time_s([size], 2)
    chunk = int(flit.analytic.chunk_bytes(size, 2))
    out, into = _port_flits(system, schedule, chunk)
    busiest = max(max(out.values()), max(into.values()))
    assert flit.end_cycle >= flit.fixed_cycles[0] + busiest
    one = FlitEngine(schedule, system, ports="single")
    t_one = float(one.time_s([size], 2)[0])
    assert t_flit <= t_one
    print(
        f"all-to-all {size} B: flit / flow = {t_flit / t_flow:.3f} "
        f"(one port per node: {t_one / t_flow:.3f})"
    )


def test_a_wrong_clock_fails_the_checks():
    """The checks can fail: the engine read at a clock 25% too fast is faster than the flow
    engine (and the closed form); a system file with a clock that does not match its links
    does not load."""
    ring = build("ring", "all_reduce", SERVER)
    flit = FlitEngine(ring, SERVER)
    flit.clock_hz *= 1.25
    t = float(flit.time_s([64 << 10], 2)[0])
    assert t < float(Flow(ring, SERVER).time_s([64 << 10], 2)[0])
    one = FlitEngine(_one(SERVER, 0, 1), SERVER)
    one.clock_hz *= 1.25
    assert one.run(4096) != transfer_cycles(SERVER, 0, 1, 4096) / SERVER.flit.clock_hz


# -- bad input ------------------------------------------------------------------------------
def test_systems_it_cannot_run():
    for spec, why in [
        ("2xtrn2-server", "2 nodes joined by EFA"),
        ("trn3-ultraserver", "a switched node"),
    ]:
        system = load_system(spec)
        with pytest.raises(FlitEngineError) as error:
            FlitEngine(build("mesh", "all_to_all", system), system)
        assert str(error.value) == (
            "system must be one torus node with a [flit] table (a server or an UltraServer: "
            "trn2-server, trn2-ultraserver, trn1-server) for the flit engine, not "
            f"{system.name!r} ({why})"
        )


def test_bad_arguments():
    ring = build("ring", "all_reduce", SERVER)
    with pytest.raises(ValueError) as error:
        FlitEngine(ring, SERVER, network="verilator")
    assert str(error.value) == "network must be one of compiled, python, not 'verilator'"
    engine = FlitEngine(ring, SERVER)
    for bad in (-1, 1.5, True, "64"):
        with pytest.raises(ValueError) as error:
            engine.run(bad)
        assert str(error.value) == f"chunk_bytes must be an integer >= 0, not {bad!r}"


def test_heads_are_the_flit_format_s():
    """The engine builds heads from the format's pieces: each is FlitFormat.head's."""
    system = ULTRA
    schedule = build("mesh", "all_to_all", system)
    engine = FlitEngine(schedule, system)
    src, dst, flits, heads = engine._plan(0, 3000)
    fmt, torus = engine.cfg.fmt, engine.cfg.torus
    plan = plan_step(fmt, engine.routes[0], [3000] * len(engine.routes[0]), per=64)
    assert len(plan) == len(heads) > 1000
    for p, h in zip(plan, heads.tolist(), strict=True):
        want = fmt.head(torus.coord(p.dst), torus.coord(p.src), p.flits, p.seq)
        assert h & ((1 << 64) - 1) == want, p


def test_a_dropped_packet_stops_the_run():
    """Heads for a node outside the torus are dropped by the routers: the run stops with a
    clear error instead of waiting forever."""
    ring = build("ring", "all_reduce", SERVER)
    engine = FlitEngine(ring, SERVER)
    base, head_dst, head_src, len_off, seq_off = engine._pieces
    x5 = 5 << engine.cfg.fmt.offset("dst")  # x = 5 on a 4-ring
    engine._pieces = (base, head_dst | x5, head_src, len_off, seq_off)
    with pytest.raises(RuntimeError) as error:
        engine.run(64)
    assert str(error.value) == (
        "flit engine: no flit moved for 100,000 cycles with packets in flight"
    )
