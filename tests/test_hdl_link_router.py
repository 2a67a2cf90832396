"""hdl.link.router in Amaranth's simulator, in lockstep with tlm.link.router: every output of
every cycle, under random traffic on every input with malformed packets, idle inputs and slow
neighbours; coverage of every (input, VC) -> (output, VC) pair the router can use."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.link.router import Router as RtlRouter
from tlm.link.config import DropKind, LinkConfig
from tlm.link.router import Router, RouterOutputs
from verif.link.router_env import RouterEnv, all_pairs, coverage


def rtl_outputs(ctx, dut, cfg) -> RouterOutputs:
    link = [None] * cfg.ports
    credit = [0] * cfg.ports
    for p in range(1, cfg.ports):
        o = dut.o_links[p - 1]
        if ctx.get(o.valid):
            link[p] = ctx.get(o.flit)
        credit[p] = ctx.get(dut.i_links[p - 1].credit)
    eject = ctx.get(dut.eject.payload) if ctx.get(dut.eject.valid) else None
    drops = tuple(ctx.get(dut.drops[k]) for k in range(len(DropKind)))
    return RouterOutputs(bool(ctx.get(dut.inject.ready)), eject, link, credit, drops)


def drive(ctx, dut, cfg, ins):
    ctx.set(dut.inject.valid, ins.inject is not None)
    ctx.set(dut.inject.payload, ins.inject or 0)
    ctx.set(dut.eject.ready, ins.eject_ready)
    for p in range(1, cfg.ports):
        i = dut.i_links[p - 1]
        ctx.set(i.valid, ins.link_in[p] is not None)
        ctx.set(i.flit, ins.link_in[p] or 0)
        ctx.set(dut.o_links[p - 1].credit, ins.credit_in[p])


def check_router(
    cfg, coord, seed, packets, malformed=0.15, patterns=("random",) * 3, rogue=None, spurious=0.0
):
    rng = np.random.default_rng(seed)
    env = RouterEnv(
        cfg,
        coord,
        rng,
        packets,
        malformed,
        send=patterns[0],
        ready=patterns[1],
        credit=patterns[2],
        rogue=rogue,
        spurious=spurious,
    )
    model = Router(cfg, coord)
    dut = RtlRouter(cfg)
    grants = []
    result = {}

    async def bench(ctx):
        ctx.set(dut.coord, sum(c << (d * cfg.coord_bits) for d, c in enumerate(coord)))
        cycle = 0
        idle = 0
        while idle < 30:
            want = model.outputs()
            ins = env.drive()
            drive(ctx, dut, cfg, ins)
            got = rtl_outputs(ctx, dut, cfg)
            assert got == want, f"cycle {cycle} (seed {seed}): RTL {got} != model {want}"
            env.observe(want, ins)
            info = model.step(**ins.kwargs())
            grants.extend(info.grants)
            await ctx.tick()
            cycle += 1
            idle = idle + 1 if env.idle else 0
            assert cycle < 20000, f"no progress (seed {seed})"
        result["cycles"] = cycle

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    env.check_counters(model.counters)
    env.check_delivered()
    return coverage(cfg, grants), result["cycles"]


def test_lockstep_2d_every_port_pair_and_vc(seed):
    cfg = LinkConfig((4, 4), vcs=2, depth=2)
    for i, coord in enumerate([(1, 2), (0, 3)]):
        seen, _ = check_router(cfg, coord, seed + i, packets=30)
        missing = all_pairs(cfg, coord) - seen
        assert not missing, f"never exercised (in port, in vc, out, out vc): {sorted(missing)}"


@pytest.mark.parametrize(
    "shape,vcs,depth,patterns",
    [
        ((4, 4, 4), 2, 4, ("always", "3of4", "1of2")),
        ((3, 5), 4, 1, ("random", "always", "1of4")),
        ((2, 4), 2, 2, ("1of2", "random", "always")),
    ],
)
def test_lockstep_shapes(shape, vcs, depth, patterns, seed):
    cfg = LinkConfig(shape, vcs=vcs, depth=depth)
    coord = tuple(k // 2 for k in shape)
    seen, _ = check_router(cfg, coord, seed, packets=12, patterns=patterns)
    assert not all_pairs(cfg, coord) - seen


def test_single_flit_packets(seed):
    """len_bits=0: every good packet is one flit (a head claiming length 1 with a tail is
    BAD_LENGTH); the smallest injection buffer this allows, 2 flits, never hangs on it."""
    cfg = LinkConfig((4, 4), len_bits=0, inject_depth=2, depth=2)
    check_router(cfg, (1, 2), seed, packets=12, malformed=0.5)


def test_counters_saturate_in_rtl(seed):
    cfg = LinkConfig((4, 4), counter_bits=2)
    check_router(cfg, (1, 1), seed, packets=16, malformed=0.9)


@pytest.mark.parametrize("depth", [1, 2])
def test_link_misuse_is_dropped_counted_and_others_flow(depth, seed):
    """The x- neighbour sends without credits and every neighbour now and then returns a
    credit it does not owe: the RTL drops and counts as the model does, every cycle, and
    every well-formed packet from the other inputs still leaves the router."""
    cfg = LinkConfig((4, 4), depth=depth)
    patterns = ("always", "random", "1of4")
    check_router(cfg, (1, 2), seed, 16, patterns=patterns, rogue=2, spurious=0.05)


def test_bad_config():
    with pytest.raises(TypeError) as error:
        RtlRouter((4, 4))
    assert str(error.value) == "cfg must be a LinkConfig, not (4, 4)"
