"""hdl.link.torus: a small torus in Amaranth's simulator in lockstep with tlm.link.network,
and the generated Verilog (one router module, one instance per node) and its CLI errors."""

import re

import numpy as np
import pytest
from amaranth.sim import Simulator

from hdl.__main__ import main
from hdl.gen import torus_verilog
from hdl.link.torus import TorusNetwork
from tlm.link.config import DropKind, LinkConfig
from tlm.link.network import RouterNetwork
from verif.link.drivers import NodeTraffic
from verif.link.scoreboard import PacketBoard
from verif.link.stimulus import random_packets


@pytest.mark.parametrize("shape,vcs", [((2, 3), 2), ((3,), 4)])
def test_torus_lockstep(shape, vcs, seed):
    cfg = LinkConfig(shape, vcs=vcs, depth=2)
    n = cfg.torus.nodes
    rng = np.random.default_rng(seed)
    board = PacketBoard(cfg)
    traffic = NodeTraffic(
        random_packets(cfg, rng, 12, malformed=0.1), board, "random", "random", rng
    )
    model = RouterNetwork(cfg)
    dut = TorusNetwork(cfg)
    done = {}

    async def bench(ctx):
        cycle = 0
        while traffic.pending or board.outstanding:
            offers, ready = traffic.offers()
            for i in range(n):
                ctx.set(dut.inject[i].valid, i in offers)
                ctx.set(dut.inject[i].payload, offers.get(i, 0))
                ctx.set(dut.eject[i].ready, ready[i])
            for i, router in enumerate(model.routers):
                assert ctx.get(dut.inject[i].ready) == router.inject_ready, (cycle, i, seed)
                got = ctx.get(dut.eject[i].payload) if ctx.get(dut.eject[i].valid) else None
                assert got == router.eject_reg, (cycle, i, seed)
            step = model.step(offers, ready)
            for i in step.accepted:
                traffic.accepted(i)
            for i, flit in step.ejected.items():
                board.eject(i, flit, cycle)
            await ctx.tick()
            cycle += 1
            assert cycle < 5000, f"no progress (seed {seed})"
        for i, router in enumerate(model.routers):
            assert [ctx.get(dut.drops[i][k]) for k in range(len(DropKind))] == router.counters
        done["cycles"] = cycle

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    board.check_done()
    assert board.delivered == board.sent > 0 and done["cycles"] > 0


def test_router_generated_once():
    text = torus_verilog(LinkConfig((4, 4)), name="srv")
    modules = re.findall(r"^module (\S+)\(", text, re.M)
    assert sorted(modules) == ["srv", "srv_router"]
    assert len(re.findall(r"^\s*srv_router \S+ \(", text, re.M)) == 16


def test_cli_link_blocks(tmp_path, capsys):
    out = tmp_path / "r.v"
    args = ["link_router", "--shape", "3x3", "--vcs", "4", "--depth", "2", "-o", str(out)]
    assert main(args) == 0
    assert "module link_router(" in out.read_text()
    capsys.readouterr()
    assert main(["torus", "--shape", "4x4", "--vcs", "3", "-o", str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        "python -m hdl: error: vcs must be a power of two in 2..8, not 3"
    )


def test_bad_config():
    with pytest.raises(TypeError) as error:
        TorusNetwork((4, 4))
    assert str(error.value) == "cfg must be a LinkConfig, not (4, 4)"
