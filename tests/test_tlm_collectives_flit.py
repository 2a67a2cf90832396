"""tlm.collectives.flit: the flit engine against the zero-load closed form, the per-router model,
and the flow engine - the ladder's flit rung (docs/collectives.md, "The flit engine").

The relations, each derived in the docs:

* a step whose transfers share no link and no injection or ejection port takes exactly its
  fixed cost plus :func:`tlm.link.bounds.stream_cycles` of its slowest transfer;
* for every schedule, every step of the flit engine takes at least the flow engine's step
  (the busiest link carries at least its bytes in flits, at most one flit per interval);
* without contention, at most the flow step plus the head flits (``1/(L-1)`` of the
  serialisation), the pipeline (``3 H + L + 2 + k`` cycles) and half a cycle of rounding;
* with an injection and an ejection port per link direction (the engine's default), a node's
  transfers on different links do not contend: KangaRing is contention-free;
* the mesh all-to-all, whose transfers share links and buffers: at least the flow engine and
  its busiest port's flits, at most the busiest link's cycles times the router's saturation
  factor (measured by its own load study, seeded) plus the zero-load pipeline;
* with two lanes (``vcs=4``) a pair's packets overtake each other, and the step's bytes are
  still reassembled by (source, seq).
"""

import dataclasses

import numpy as np
import pytest

from tlm.collectives import Analytic, Schedule, Step, Transfer, build
from tlm.collectives.flit import (
    FlitEngine,
    FlitEngineError,
    link_config,
    transfer_cycles,
)
from tlm.collectives.flow import Flow
from tlm.collectives.packets import Reassembly, encode, lane, plan_step, queue_order
from tlm.collectives.runtime import RankSystem, RuntimeCosts
from tlm.link.bounds import channel_load_bound, stream_cycles
from tlm.link.compiled import CompiledNetwork
from tlm.link.config import LinkConfig
from tlm.link.flit import ends_packet
from tlm.link.measure import simulate
from tlm.link.ports import Ports
from tlm.link.routing import route
from tlm.presets import load_preset
from tlm.system import load_system

SERVER = load_system("trn2-server")
ULTRA = load_system("trn2-ultraserver")
#: The engine's options under test: its defaults (one lane, a transfer's packets in a row) and
#: two lanes with the queue's transfers taking turns.
LANES = {"one lane": {}, "two lanes": {"vcs": 4, "order": "packet"}}


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
    # two lanes: the same where the path keeps one flit rate; where it slows (x or y, then z)
    # the two lanes' packets take turns on the slow link and then wait for each other at the
    # one ejection port: not faster (measured in the docs: up to 60 cycles slower at 20,000 B)
    lanes = FlitEngine(_one(system, src, dst), system, **LANES["two lanes"])
    lanes.run(nbytes)
    a, b = system.torus.coord(src), system.torus.coord(dst)
    if len({system.flit.interval[d] for d in range(len(a)) if a[d] != b[d]}) == 1:
        assert lanes.end_cycle == want
    else:
        assert lanes.end_cycle >= want


def test_the_closed_form_by_hand():
    """One z hop on the UltraServer, 961 bytes: 2 packets (a head and 15 flits of 64 B, then a
    head and 1 B), 18 flits at 2 cycles each after the first: 3 + 16 + 2 + 2 x 17 = 55 cycles
    after 1.5 us (6,000)."""
    assert stream_cycles(1, [16, 2], interval=2) == 55
    assert transfer_cycles(ULTRA, 0, 16, 961) == 6055
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
@pytest.mark.parametrize("lanes", list(LANES))
def test_the_per_router_model_gives_the_same_cycles(system, algo, op, size, ports, lanes):
    schedule = build(algo, op, system)
    fast = FlitEngine(schedule, system, ports=ports, **LANES[lanes])
    ref = FlitEngine(schedule, system, network="python", ports=ports, **LANES[lanes])
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


def check_flit_against_flow(system, schedule, size, itemsize=2, contention=False, **options):
    """Run both engines on a chain schedule; assert the derived relations and return the
    flit and flow times. ``flow <= flit`` always; without ``contention`` (no two transfers of
    a step on one link or port) also ``flit <= flow + sum over steps of (serialisation /
    (L - 1) + (3 H + L + 2 + k + 1/2) / clock)``. ``options``: the flit engine's (default: its
    defaults)."""
    flit = FlitEngine(schedule, system, **options)
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
            slack += serial / (L - 1) + (3 * hops + L + 2 + k + 0.5) / clock
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
@pytest.mark.parametrize("lanes", list(LANES))
def test_ring_and_rdh_all_reduce_are_the_closed_form_and_within_the_tolerance(
    system, algo, size, lanes
):
    """Ring and recursive doubling/halving: every step is one transfer per rank over one hop,
    no two on a link or a port - the sum of the steps' closed forms, and flow <= flit <=
    flow + the tolerance; with one lane or two (one hop: one flit rate on the path)."""
    schedule = build(algo, "all_reduce", system)
    t_flit, _ = check_flit_against_flow(system, schedule, size, **LANES[lanes])
    chunk = int(Analytic(schedule, system).chunk_bytes(size, 2))
    cycles = 0
    for step in schedule.steps:
        c = schedule.chips
        cycles += max(
            transfer_cycles(system, c[t.src], c[t.dst], t.units * chunk) for t in step.transfers
        )
    assert t_flit * system.flit.clock_hz == pytest.approx(cycles, abs=1e-6)


@pytest.mark.parametrize("size", [64 * 130, 64 << 10, 1 << 20])
@pytest.mark.parametrize("lanes", list(LANES))
def test_kangaring_is_contention_free_with_a_port_per_direction(size, lanes):
    """KangaRing: each rank sends four chunks a step, one on each of its four links, and
    receives four, one from each. With an injection and an ejection port per link direction
    (the engine's default) no two transfers of a step share a link or a port: every step is
    exactly its transfers' closed form, and flow <= flit <= flow + the tolerance; with one
    lane or two."""
    schedule = build("kangaring", "all_reduce", SERVER)
    check_flit_against_flow(SERVER, schedule, size, **LANES[lanes])
    flit = FlitEngine(schedule, SERVER, **LANES[lanes])
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


def _between_chips(schedule, per_chip) -> Schedule:
    """A schedule over ranks that share chips (``per_chip`` a chip) as the flit engine runs it,
    one rank a chip and links only: its transfers between chips, on those chips (the steps
    kept, those inside a chip dropped: they cross no link)."""
    steps = tuple(
        Step(
            tuple(t for t in st.transfers if t.src // per_chip != t.dst // per_chip),
            st.after,
            st.label,
        )
        for st in schedule.steps
    )
    chips = tuple(r // per_chip for r in range(schedule.ranks))
    return dataclasses.replace(schedule, chips=chips, steps=steps)


@pytest.mark.parametrize("op", ["all_reduce", "reduce_scatter", "all_gather"])
@pytest.mark.parametrize("size", [64 * 260, 64 << 10])
def test_kangaring_over_ranks_sharing_chips_on_the_links(op, size):
    """KangaRing over the server's 64 ranks at LNC=2: its hops between chips on the flit
    engine (one rank a chip, links only: the primaries' hops, two chunks of one ring on each
    directed link a step, from one source to one destination): flow <= flit <= flow + the
    tolerance."""
    ranks = RankSystem(SERVER, 4, RuntimeCosts.of(load_preset("trn2")))
    schedule = _between_chips(build("kangaring", op, ranks), 4)
    t_flit, t_flow = check_flit_against_flow(SERVER, schedule, size)
    assert t_flit > t_flow


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


#: The router's load study that measures its saturation factor: uniform traffic offered at a
#: flit per node per cycle (past saturation) for this many cycles, from this seed.
LOAD_CYCLES, LOAD_SEED = 20_000, 1
_factors: dict = {}


def saturation_factor(system, vcs: int) -> float:
    """``gamma``: how many times its flits the busiest channel of the engine's router (``vcs``
    VCs, its buffers, the preset's longest packets) takes to carry under uniform traffic past
    saturation - the channel-load bound over the accepted load, ``1 / (g x accepted)`` with
    ``g`` the busiest channel's flits per flit a node offers (:func:`channel_load_bound`).
    Measured by the router's own load study (:func:`tlm.link.measure.simulate`, one port per
    node, links at one rate, seeded), not by the engine."""
    key = (system.name, vcs)
    if key not in _factors:
        cfg = link_config(system, vcs)
        length = system.flit.max_packet_flits
        load = simulate(cfg, "uniform", 1.0, LOAD_CYCLES, length=length, seed=LOAD_SEED)
        g = channel_load_bound(cfg, "uniform")["max_channel_load"]
        _factors[key] = 1 / (g * load["accepted"])
        print(
            f"load study seed {LOAD_SEED}, {system.name}, {vcs} VCs, {length}-flit packets: "
            f"accepted {load['accepted']:.3f} flits/node/cycle, gamma {_factors[key]:.3f}"
        )
    return _factors[key]


def _busiest_link_cycles(system, engine, chunk) -> int:
    """Cycles the busiest link of the all-to-all's one step needs for its flits: the flits of
    every transfer whose route crosses it, times its dimension's flit interval."""
    torus, fmt, per = system.torus, engine.cfg.fmt, system.flit.bytes_per_flit
    load: dict = {}
    for t in engine.schedule.steps[0].transfers:
        a, b = engine.schedule.chips[t.src], engine.schedule.chips[t.dst]
        flits = sum(p.flits for p in plan_step(fmt, [(a, b)], [t.units * chunk], per=per))
        here, src, dst = torus.coord(a), torus.coord(a), torus.coord(b)
        while here != dst:
            port = route(torus.shape, here, src, dst)[0]
            k = system.flit.interval[(port - 1) // 2]
            load[(here, port)] = load.get((here, port), 0) + flits * k
            here = torus.neighbour(here, port)
    return max(load.values())


def all_to_all_bound(system, engine, chunk) -> float:
    """The tolerance of docs/collectives.md ("Contention"): the step's fixed cost, the busiest
    link's cycles times the router's saturation factor, and the zero-load pipeline of the
    longest path (``3 H + L + 2 + k``), in cycles."""
    hops = max(
        system.hops(engine.schedule.chips[t.src], engine.schedule.chips[t.dst])
        for t in engine.schedule.steps[0].transfers
    )
    pipeline = 3 * hops + system.flit.max_packet_flits + 2 + max(system.flit.interval)
    gamma = saturation_factor(system, engine.cfg.vcs)
    return engine.fixed_cycles[0] + gamma * _busiest_link_cycles(system, engine, chunk) + pipeline


@pytest.mark.parametrize("system", [SERVER, ULTRA], ids=["server", "ultraserver"])
@pytest.mark.parametrize("size_per_rank", [64, 1024, 16384])
@pytest.mark.parametrize("lanes", list(LANES))
def test_all_to_all_under_contention(system, size_per_rank, lanes):
    """Mesh all-to-all: every rank sends to every other at once, many transfers per link,
    port and buffer. Derived (docs/collectives.md, "Contention"): flow <= flit, and the flit
    time is at least its busiest injection or ejection port's flits (one per cycle). The
    tolerance above: the all-to-all offers uniform traffic past what the network carries, so
    its busiest link runs at least at the router's saturated share - at most the fixed cost,
    the busiest link's cycles times the router's saturation factor (measured independently by
    the router's load study, at the engine's VCs and packet length) and the pipeline. Checked,
    not derived: a port per link direction is no slower than one port per node (one lane), and
    two lanes with the transfers taking turns are no slower than one lane from 1 KiB a rank."""
    options = LANES[lanes]
    schedule = build("mesh", "all_to_all", system)
    size = size_per_rank * system.chips
    t_flit, t_flow = check_flit_against_flow(system, schedule, size, contention=True, **options)
    flit = FlitEngine(schedule, system, **options)
    flit.time_s([size], 2)
    chunk = int(flit.analytic.chunk_bytes(size, 2))
    out, into = _port_flits(system, schedule, chunk)
    busiest = max(max(out.values()), max(into.values()))
    assert flit.end_cycle >= flit.fixed_cycles[0] + busiest
    bound = all_to_all_bound(system, flit, chunk)
    assert flit.end_cycle <= bound, (flit.end_cycle, bound)
    serial = (flit.end_cycle - flit.fixed_cycles[0]) / _busiest_link_cycles(system, flit, chunk)
    print(
        f"all-to-all {size} B, {lanes}: flit / flow = {t_flit / t_flow:.3f}, "
        f"serialisation / busiest link = {serial:.3f}, "
        f"flit / bound = {flit.end_cycle / bound:.3f}"
    )
    if options:
        one = FlitEngine(schedule, system)
        t_one = float(one.time_s([size], 2)[0])
        if size_per_rank >= 1024:
            assert t_flit <= t_one
        print(f"... one lane: {t_one / t_flow:.3f}")
    else:
        one = FlitEngine(schedule, system, ports="single")
        t_one = float(one.time_s([size], 2)[0])
        assert t_flit <= t_one
        print(f"... one port per node: {t_one / t_flow:.3f}")


def test_the_all_to_all_bound_can_fail():
    """The tolerance is not vacuous: on the RTL's router (one injection port per node) a node's
    15 transfers leave through one port one after another, each source starting with the
    lowest rank, and the all-to-all takes longer than the busiest link's tolerance."""
    schedule = build("mesh", "all_to_all", SERVER)
    size = 16384 * SERVER.chips
    one = FlitEngine(schedule, SERVER, ports="single")
    one.time_s([size], 2)
    chunk = int(one.analytic.chunk_bytes(size, 2))
    assert one.end_cycle > all_to_all_bound(SERVER, one, chunk)


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
    with pytest.raises(ValueError) as error:
        FlitEngine(ring, SERVER, order="random")
    assert str(error.value) == (
        "order must be one of transfer, packet (how a step's packets join an injection queue), "
        "not 'random'"
    )
    with pytest.raises(ValueError) as error:
        FlitEngine(ring, SERVER, vcs=3)
    assert str(error.value) == "vcs must be a power of two in 2..8, not 3"
    engine = FlitEngine(ring, SERVER)
    for bad in (-1, 1.5, True, "64"):
        with pytest.raises(ValueError) as error:
            engine.run(bad)
        assert str(error.value) == f"chunk_bytes must be an integer >= 0, not {bad!r}"


@pytest.mark.parametrize("lanes", list(LANES))
def test_heads_are_the_flit_format_s(lanes):
    """The engine builds heads from the format's pieces: each is FlitFormat.head's, with its
    lane in the VC field, in the order packets.queue_order gives."""
    system = ULTRA
    schedule = build("mesh", "all_to_all", system)
    engine = FlitEngine(schedule, system, **LANES[lanes])
    src, dst, flits, heads, lanes_of = engine._plan(0, 3000)
    fmt, torus = engine.cfg.fmt, engine.cfg.torus
    plan = plan_step(fmt, engine.routes[0], [3000] * len(engine.routes[0]), per=64)
    plan = queue_order(plan, engine.order)
    assert len(plan) == len(heads) > 1000
    assert set(lanes_of.tolist()) == set(range(engine.cfg.lanes))
    for p, h, j in zip(plan, heads.tolist(), lanes_of.tolist(), strict=True):
        assert j == lane(p, engine.cfg.lanes)
        want = fmt.head(torus.coord(p.dst), torus.coord(p.src), p.flits, p.seq, vc=j)
        assert h & ((1 << 64) - 1) == want, p


def test_queue_order():
    """``packet``: the transfers take turns, a packet each, and one out of packets drops out;
    each transfer's packets keep their order."""
    cfg = link_config(SERVER)
    plan = plan_step(cfg.fmt, [(0, 1), (0, 2), (0, 1)], [3 * 960, 960, 2 * 960], per=64)
    turns = [(p.transfer, p.offset // 960) for p in queue_order(plan, "packet")]
    assert turns == [(0, 0), (1, 0), (2, 0), (0, 1), (2, 1), (0, 2)]
    assert queue_order(plan, "transfer") == plan
    with pytest.raises(ValueError) as error:
        queue_order(plan, "random")
    assert str(error.value) == (
        "order must be one of transfer, packet (how a step's packets join an injection queue), "
        "not 'random'"
    )


@pytest.mark.parametrize("network", ["compiled", "python"])
def test_a_packet_out_of_turn_on_its_lane_stops_the_run(network):
    """The engine tells an ejected packet's step by its order on its (source, destination,
    lane); heads that say another lane than the one the engine expects them on stop the run."""
    ring = build("ring", "all_reduce", SERVER)
    engine = FlitEngine(ring, SERVER, network=network, vcs=4)
    base, head_dst, head_src, len_off, seq_off, vc_off = engine._pieces
    engine._pieces = (base ^ 1 << vc_off, head_dst, head_src, len_off, seq_off, vc_off)
    with pytest.raises(RuntimeError) as error:
        engine.run(4096)
    assert str(error.value) == (
        "flit engine: a packet left the network that is not the next one sent on its (source, "
        "destination, lane)"
    )


def test_packets_overtake_each_other_across_lanes_and_are_reassembled():
    """Real bytes through the compiled 4x4 torus with two lanes (``vcs=4``), a packet per
    transfer in turn, a port per link direction: one step of the mesh all-to-all, random sizes
    and bytes, in the RTL bench's 4-flit packets (the engine's 16-flit packets did not overtake
    each other in the same step at 1,000-3,000 B a transfer: a packet's successor leaves the
    injection buffer only after its tail, which 4-flit buffers hold back). Packets of one (source,
    destination) pair overtake each other on different lanes, never on one lane, and
    Reassembly, which files each by (source, seq), rebuilds every transfer's bytes."""
    seed = int(np.random.SeedSequence().entropy % (1 << 31))
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    cfg = LinkConfig((4, 4), vcs=4)  # the RTL bench's flits: 4-flit packets, 7 B of data each
    ports = Ports(cfg, "per_direction")
    torus = cfg.torus
    routes = FlitEngine(build("mesh", "all_to_all", SERVER), SERVER).routes[0]
    nbytes = [int(n) for n in rng.integers(100, 400, len(routes))]
    data = [rng.bytes(n) for n in nbytes]
    plan = queue_order(plan_step(cfg.fmt, routes, nbytes), "packet")
    receive = Reassembly(cfg, plan, nbytes)
    queues: dict = {}
    for p in plan:
        q = p.src * ports.count + ports.injection_port(torus.coord(p.src), torus.coord(p.dst))
        chunk = data[p.transfer][p.offset : p.offset + p.nbytes]
        queues.setdefault(q, []).extend(encode(cfg, p, chunk, vc=lane(p, cfg.lanes)))
    at = dict.fromkeys(queues, 0)
    net = CompiledNetwork(cfg, None, "per_direction")
    arriving: dict = {}  # ejection port id -> flits of the packet it is ejecting
    order: dict = {}  # (src, dst) -> (lane, seq) of its packets as they arrive
    for _ in range(100_000):
        if receive.outstanding == 0:
            break
        out = net.step({q: f[at[q]] for q, f in queues.items() if at[q] < len(f)})
        for q in out.accepted:
            at[q] += 1
        for e, flit in out.ejected.items():
            arriving.setdefault(e, []).append(flit)
            if ends_packet(cfg.fmt.field(flit, "kind")):
                flits = arriving.pop(e)
                head = cfg.fmt.decode_head(flits[0])
                node = e // ports.count
                order.setdefault((torus.node(head.src), node), []).append(
                    (cfg.fmt.vc(flits[0]), head.seq)
                )
                receive.take(node, flits)
    receive.check_done()
    for t, want in enumerate(data):
        assert receive.data(t) == want, t
    overtaken = 0
    for arrivals in order.values():
        seqs = [seq for _, seq in arrivals]
        overtaken += seqs != sorted(seqs)
        for j in range(cfg.lanes):  # in order on each lane
            mine = [seq for vc, seq in arrivals if vc == j]
            assert mine == sorted(mine)
    print(f"{overtaken} of {len(order)} pairs had a packet overtaken")
    assert overtaken > 0


def test_a_dropped_packet_stops_the_run():
    """Heads for a node outside the torus are dropped by the routers: the run stops with a
    clear error instead of waiting forever."""
    ring = build("ring", "all_reduce", SERVER)
    engine = FlitEngine(ring, SERVER)
    base, head_dst, head_src, len_off, seq_off, vc_off = engine._pieces
    x5 = 5 << engine.cfg.fmt.offset("dst")  # x = 5 on a 4-ring
    engine._pieces = (base, head_dst | x5, head_src, len_off, seq_off, vc_off)
    with pytest.raises(RuntimeError) as error:
        engine.run(64)
    assert str(error.value) == (
        "flit engine: no flit moved for 100,000 cycles with packets in flight"
    )
