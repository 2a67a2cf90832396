"""cocotb bench of one router, in lockstep with :class:`tlm.link.router.Router`.

Random traffic into every input and VC, with malformed packets (each kind at least once per
input), idle inputs and slow neighbours that return credits late (backpressure on every
output), a directed share that makes every (input, VC) -> (output, VC) pair occur and, in the
first pattern triple of ``lockstep``, every two requesters contending alone for every output,
then handing every output VC over to each other (:class:`verif.link.router_env.RouterEnv`).
Every output is compared with the model every cycle; coverage, the drop counters and that every
well-formed packet left are asserted at the end. A second test, ``misuse``, adds a neighbour that
sends without credits and credits returned that are not owed.

Configured by environment (``tests/test_verif_link.py`` sets it): ``LINK_SHAPE``,
``LINK_VCS``, ``LINK_DEPTH``, ``LINK_COORD`` (e.g. ``1,2``), ``LINK_PACKETS``,
``LINK_PATTERNS`` (``send:ready:credit`` triples, comma-separated), ``SEED``; the ``misuse``
test also ``LINK_ROGUE`` (the link port whose neighbour ignores credits) and ``LINK_SPURIOUS``.
"""

from __future__ import annotations

import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from tlm.link.config import DropKind
from tlm.link.router import Router, RouterOutputs
from verif.common.known import known
from verif.coverage.db import write_run
from verif.coverage.link import RouterCoverage
from verif.link.ports import config_from_env
from verif.link.router_env import RouterEnv, all_pairs, coverage


class Ports:
    """The router's ports by name, read and written as plain integers."""

    def __init__(self, dut, cfg):
        self.cfg = cfg
        links = range(cfg.ports - 1)
        self.i_valid = [getattr(dut, f"i_links__{i}__valid") for i in links]
        self.i_flit = [getattr(dut, f"i_links__{i}__flit") for i in links]
        self.i_credit = [getattr(dut, f"i_links__{i}__credit") for i in links]
        self.o_valid = [getattr(dut, f"o_links__{i}__valid") for i in links]
        self.o_flit = [getattr(dut, f"o_links__{i}__flit") for i in links]
        self.o_credit = [getattr(dut, f"o_links__{i}__credit") for i in links]
        self.inj = (dut.inject__valid, dut.inject__payload, dut.inject__ready)
        self.ej = (dut.eject__valid, dut.eject__payload, dut.eject__ready)
        self.drops = dut.drops

    def idle(self):
        self.inj[0].value = 0
        self.inj[1].value = 0  # idle payloads are zeros, never X (Icarus is 4-state)
        self.ej[2].value = 0
        for i in range(self.cfg.ports - 1):
            self.i_valid[i].value = 0
            self.i_flit[i].value = 0
            self.o_credit[i].value = 0

    def drive(self, ins):
        self.inj[0].value = ins.inject is not None
        self.inj[1].value = ins.inject or 0
        self.ej[2].value = ins.eject_ready
        for i in range(self.cfg.ports - 1):
            flit = ins.link_in[i + 1]
            self.i_valid[i].value = flit is not None
            self.i_flit[i].value = flit or 0
            self.o_credit[i].value = ins.credit_in[i + 1]

    def read(self, cycle: int) -> RouterOutputs:
        """The outputs of ``cycle`` (after reset), each known (0/1) or :class:`NotKnown`."""
        cfg = self.cfg

        def get(handle, name):
            return known(handle.value, name, cycle)

        link, credit = [None] * cfg.ports, [0] * cfg.ports
        for i in range(cfg.ports - 1):
            if get(self.o_valid[i], f"o_links__{i}__valid"):
                link[i + 1] = get(self.o_flit[i], f"o_links__{i}__flit").to_unsigned()
            credit[i + 1] = get(self.i_credit[i], f"i_links__{i}__credit").to_unsigned()
        eject = None
        if get(self.ej[0], "eject__valid"):
            eject = get(self.ej[1], "eject__payload").to_unsigned()
        raw = get(self.drops, "drops").to_unsigned()
        bits = cfg.counter_bits
        counters = tuple(raw >> (k * bits) & ((1 << bits) - 1) for k in range(len(DropKind)))
        ready = bool(get(self.inj[2], "inject__ready"))
        return RouterOutputs(ready, eject, link, credit, counters)


async def reset(dut, ports):
    await RisingEdge(dut.clk)
    ports.idle()
    dut.rst.value = 1
    for _ in range(2):
        await RisingEdge(dut.clk)
    dut.rst.value = 0


async def run_env(dut, ports, cfg, coord, seed, triple, packets, root=None, cov=None, **more):
    """Reset, then drive one :class:`RouterEnv` to the end, comparing every output with the
    model every cycle; check the counters and that every good packet left (``more``: further
    arguments of :class:`RouterEnv`). Returns the (input, VC, output, VC) pairs exercised."""
    root = seed if root is None else root
    note = f"seed {root}" + ("" if seed == root else f", sub-seed {seed}")
    send, ready, credit = triple.split(":")
    await reset(dut, ports)
    rng = np.random.default_rng(seed)
    env = RouterEnv(
        cfg,
        coord,
        rng,
        packets,
        0.1,
        send=send,
        ready=ready,
        credit=credit,
        directed_drops=True,
        **more,
    )
    model = Router(cfg, coord)
    if cov is not None:
        cov.patterns(send, ready, credit)
    seen = set()
    cycle = idle = 0
    while idle < 30:
        await RisingEdge(dut.clk)
        ins = env.drive()
        ports.drive(ins)
        await ReadOnly()
        want, got = model.outputs(), ports.read(cycle)
        if got != want:
            raise AssertionError(f"{triple} cycle {cycle} ({note}): RTL {got} != model {want}")
        env.observe(want, ins)
        grants = model.step(**ins.kwargs()).grants
        seen |= coverage(cfg, grants)
        if cov is not None:
            cov.cycle(model, ins, want, grants)
        cycle += 1
        idle = idle + 1 if env.idle else 0
        if cycle > 50000:
            raise AssertionError(f"no progress after {cycle} cycles ({note})")
    env.check_counters(model.counters)
    env.check_delivered()
    dut._log.info(
        "%s: %d cycles, %d flits in on links, drops %s",
        triple,
        cycle,
        env.sent_flits,
        dict(zip([k.name for k in DropKind], model.counters, strict=True)),
    )
    return seen


def start(dut):
    """The configuration, coordinate and seed from the environment; clock and ports."""
    cfg, seed = config_from_env()
    coord = tuple(int(c) for c in os.environ.get("LINK_COORD", "1,1").split(","))
    dut._log.info("router %s at %s, seed %d (rerun with SEED=%d)", cfg.shape, coord, seed, seed)
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    ports = Ports(dut, cfg)
    dut.coord.value = sum(c << (d * cfg.coord_bits) for d, c in enumerate(coord))
    return cfg, coord, seed, ports


@cocotb.test()
async def lockstep(dut):
    """Random and directed traffic on every input, every output compared every cycle."""
    cfg, coord, seed, ports = start(dut)
    packets = int(os.environ.get("LINK_PACKETS", "20"))
    triples = os.environ.get("LINK_PATTERNS", "random:random:random").split(",")
    seen = set()
    cov = RouterCoverage(cfg, coord)
    for i, triple in enumerate(triples):
        # the first triple begins with every pair of requesters contending for every output,
        # then handing every output VC over to each other
        first = i == 0
        seen |= await run_env(
            dut, ports, cfg, coord, seed + i, triple, packets, seed, cov,
            contention=first, handover=first,
        )  # fmt: skip
    missing = all_pairs(cfg, coord) - seen
    assert not missing, f"never exercised (in port, in vc, out, out vc): {sorted(missing)}"
    write_run(f"router-{cfg.tag}-lockstep-{seed}", _meta(cfg, coord, seed, "lockstep"))


@cocotb.test()
async def misuse(dut):
    """Link misuse: the neighbour on port LINK_ROGUE sends without credits, and neighbours
    return credits they do not owe with chance LINK_SPURIOUS per cycle. The RTL drops and
    counts as the model does, every cycle; traffic from the other inputs still gets through."""
    cfg, coord, seed, ports = start(dut)
    packets = int(os.environ.get("LINK_PACKETS", "20"))
    rogue = int(os.environ.get("LINK_ROGUE", "2"))
    spurious = float(os.environ.get("LINK_SPURIOUS", "0.05"))
    triple = os.environ.get("LINK_PATTERNS", "always:random:1of4").split(",")[0]
    cov = RouterCoverage(cfg, coord)
    await run_env(
        dut, ports, cfg, coord, seed, triple, packets, cov=cov, rogue=rogue, spurious=spurious
    )
    write_run(f"router-{cfg.tag}-misuse-{seed}", _meta(cfg, coord, seed, "misuse"))


def _meta(cfg, coord, seed, test):
    return {"bench": "router", "test": test, "config": cfg.tag, "coord": coord, "seed": seed}
