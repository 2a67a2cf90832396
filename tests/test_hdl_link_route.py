"""hdl.link.route.RouteCompute against tlm.link.routing, exhaustively: on each torus, every
router coordinate, destination, source a packet there can have, and input VC, in Amaranth's
simulator (combinational: one settle per case, many cases side by side)."""

from itertools import product

import pytest
from amaranth.hdl import Module, Signal, Value
from amaranth.sim import Simulator

from hdl.link.route import RouteCompute
from tlm.link.config import LinkConfig
from tlm.link.routing import lane, out_vc, route


def dor_sources(torus, here, dst):
    """Every source a packet at ``here`` bound for ``dst`` can have under dimension-order
    routing: the dimensions before the first one still to correct are anything (corrected
    already), that one anything (it started there), the later ones ``here``'s (untouched); at
    its destination, any source."""
    todo = [d for d in range(torus.dims) if here[d] != dst[d]]
    free = todo[0] + 1 if todo else torus.dims
    ranges = [range(k) for k in torus.shape[:free]]
    return [(*head[::-1], *here[free:]) for head in product(*ranges[::-1])]


def cases(cfg):
    """``(here, dst, src, in_vc)`` of every state (:func:`dor_sources`), then heads for every
    destination field value outside the torus (only ``bad_dest`` is checked for those)."""
    torus = cfg.torus
    for here, dst in product(torus.coords(), repeat=2):
        for src in dor_sources(torus, here, dst):
            for vc in range(cfg.vcs):
                yield here, dst, src, vc
    here = torus.coords()[-1]
    for dst in product(range(1 << cfg.coord_bits), repeat=torus.dims):
        if not torus.contains(dst):
            yield here, dst, here, 0


def check_route_compute(cfg, width=16):
    """Every case of :func:`cases` through ``width`` instances side by side, their inputs and
    outputs packed into a few wide signals (the simulator's cost is per access and per settle,
    not per instance). Returns the ports taken and the number of cases."""
    m = Module()
    units = [RouteCompute(cfg) for _ in range(width)]
    lanes_in = ("lane",) if cfg.lanes > 1 else ()  # a port only when there is a lane to choose
    fields = ("here", "dst", "src", *lanes_in, "port", "out_vc", "bad_dest")
    inputs = fields[: 3 + len(lanes_in)]
    bits = {name: len(Value.cast(getattr(units[0], name))) for name in fields}
    wide = {name: Signal(bits[name] * width, name=f"all_{name}") for name in fields}
    for i, unit in enumerate(units):
        m.submodules[f"route{i}"] = unit
        for name in fields:
            port, n = Value.cast(getattr(unit, name)), bits[name]
            part = wide[name][i * n : (i + 1) * n]
            m.d.comb += port.eq(part) if name in inputs else part.eq(port)
    todo = list(cases(cfg))
    taken = set()

    def pack(coord):
        return sum(c << (d * cfg.coord_bits) for d, c in enumerate(coord))

    def join(name, values):
        return sum(v << (i * bits[name]) for i, v in enumerate(values))

    def split(name, value, n):
        return [(value >> (i * bits[name])) & ((1 << bits[name]) - 1) for i in range(n)]

    async def bench(ctx):
        for start in range(0, len(todo), width):
            batch = todo[start : start + width]
            here, dst, src, vc = zip(*batch, strict=True)
            ctx.set(wide["here"], join("here", map(pack, here)))
            ctx.set(wide["dst"], join("dst", map(pack, dst)))
            ctx.set(wide["src"], join("src", map(pack, src)))
            if lanes_in:
                ctx.set(wide["lane"], join("lane", (lane(v, cfg.vcs) for v in vc)))
            n = len(batch)
            got = zip(
                *(split(name, ctx.get(wide[name]), n) for name in ("port", "out_vc", "bad_dest")),
                strict=True,
            )
            for (here, dst, src, vc), out in zip(batch, got, strict=True):
                if not cfg.torus.contains(dst):
                    assert out[2] == 1, f"{here=} {dst=}: not flagged outside the torus"
                    continue
                port, cls = route(cfg.shape, here, src, dst)
                want = (port, out_vc(lane(vc, cfg.vcs), cls, cfg.vcs), 0)
                assert out == want, f"{here=} {dst=} {src=} {vc=}: RTL {out} != TLM {want}"
                taken.add(port)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return taken, len(todo)


@pytest.mark.parametrize(
    "shape,vcs", [((4, 4), 2), ((4, 4, 4), 2), ((3, 5), 4), ((8,), 4), ((2, 4), 8)]
)
def test_route_compute_equals_routing(shape, vcs):
    cfg = LinkConfig(shape, vcs=vcs)
    taken, _ = check_route_compute(cfg)
    # every port was taken (ejection included) but the - port of a 2-ring: ties go +
    never = {2 + 2 * d for d, k in enumerate(shape) if k == 2}
    assert taken == set(range(cfg.ports)) - never


def test_dor_sources():
    """The states enumerated: on a 4x4 torus at (1, 2) for (3, 0), x is still to correct, so
    the packet came from (any x, 2); at its destination it came from anywhere; with y left to
    correct, from any (x, y)."""
    torus = LinkConfig((4, 4)).torus
    assert dor_sources(torus, (1, 2), (3, 0)) == [(x, 2) for x in range(4)]
    assert len(dor_sources(torus, (3, 0), (3, 0))) == 16
    assert sorted(dor_sources(torus, (3, 2), (3, 0))) == sorted(product(range(4), repeat=2))
    torus = LinkConfig((4, 4, 4)).torus
    assert len(dor_sources(torus, (1, 2, 3), (1, 0, 0))) == 16  # any x, any y, z = 3


def test_bad_config():
    with pytest.raises(TypeError) as error:
        RouteCompute((4, 4))
    assert str(error.value) == "cfg must be a LinkConfig, not (4, 4)"
