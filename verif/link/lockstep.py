"""The RTL torus and :class:`tlm.link.network.RouterNetwork` driven with the same inputs, cycle by
cycle, under cocotb: what every torus bench that checks timing shares.

Each cycle :meth:`Lockstep.step` drives every node's injection port and ejection ``ready``,
then checks every node's ``inject.ready``, ejection register and drop counters against the
model - so each flit is accepted and leaves the network at the cycle the model predicts, and
each drop is counted in the cycle the model counts it - and steps the model.
The benches keep their own traffic and scoreboards and feed them the model's
:class:`~tlm.link.network.NetStep`, which the comparison has shown to be the RTL's.

The RTL's outputs during a cycle are registers: they show what the model held *before* it
stepped that cycle. A drop is registered in the cycle it happens and counted in the next, in
the model as in the RTL, so a drop in the last cycle a bench steps reaches the counters only
at the end of the cycle after: :meth:`Lockstep.counters` runs one more cycle, with every
injection idle, reads the model's counters, and runs one more to check the RTL's against them.
"""

from __future__ import annotations

from cocotb.triggers import ReadOnly, RisingEdge

from tlm.link.config import DropKind, LinkConfig
from tlm.link.network import NetStep, RouterNetwork
from verif.coverage.link import TorusCoverage

from .ports import NodePorts
from .scoreboard import describe_buffers, moved

__all__ = ["Lockstep"]


class Lockstep:
    """A torus top (``dut``, built for ``cfg``) and its model.

    Parameters
    ----------
    dut : cocotb handle
        The torus top; its clock must be running.
    cfg : LinkConfig
    seed : int
        Named in every mismatch, so that a failure can be rerun.
    """

    def __init__(self, dut, cfg: LinkConfig, seed: int):
        self.dut = dut
        self.cfg = cfg
        self.root = seed  # the bench's seed: a rerun needs it, not a sub-seed alone
        self.seed = seed
        self.ports = NodePorts(dut, cfg.torus.nodes)
        self.net = RouterNetwork(cfg)
        self.cycle = 0
        self._ready = [False] * cfg.torus.nodes  # the ejection ready driven last
        #: functional coverage, sampled from the model after each compared step
        self.coverage = TorusCoverage(cfg)

    async def reset(self, seed: int | None = None):
        """Idle every port, hold reset for two cycles, and start a fresh model (its mismatches
        naming ``seed`` from now on, if given)."""
        if seed is not None:
            self.seed = seed
        await RisingEdge(self.dut.clk)
        self.ports.idle()
        self._ready = [False] * self.cfg.torus.nodes
        self.ports.set_ready(self._ready)
        self.dut.rst.value = 1
        for _ in range(2):
            await RisingEdge(self.dut.clk)
        self.dut.rst.value = 0
        self.net = RouterNetwork(self.cfg)
        self.coverage.reset()
        self.cycle = 0

    async def step(self, offers: dict, ready) -> NetStep:
        """One cycle: drive ``offers`` (node -> flit) and ejection ``ready`` (per node), check
        the RTL's outputs against the model's, and return the model's step.

        Raises
        ------
        AssertionError
            If a node's ``inject.ready``, ejection register or drop counters differ from the
            model's.
        """
        ports, cycle, seed = self.ports, self.cycle, self._seed_note()
        await RisingEdge(self.dut.clk)
        ports.offer(offers)
        ports.set_ready(ready)
        self._ready = [ready[i] for i in range(self.cfg.torus.nodes)]  # a list or a dict
        await ReadOnly()
        inj_r, ej_v, ej_p = ports.inj_r, ports.ej_v, ports.ej_p
        for i, router in enumerate(self.net.routers):
            if bool(inj_r[i].value) != router.inject_ready:
                raise AssertionError(
                    f"cycle {cycle} (seed {seed}): node {i} inject.ready is {inj_r[i].value},"
                    f" the model says {router.inject_ready}"
                )
            want = router.eject_reg
            got = ej_p[i].value.to_unsigned() if ej_v[i].value else None
            if got != want:
                raise AssertionError(
                    f"cycle {cycle} (seed {seed}): node {i} ejection register is "
                    f"{got if got is None else hex(got)}, the model says "
                    f"{want if want is None else hex(want)}"
                )
        self._check_counters(f"cycle {cycle} (seed {seed})")
        self.cycle += 1
        step = self.net.step(offers, ready)
        self.coverage.cycle(self.net.routers)
        return step

    def _seed_note(self) -> str:
        """``1234`` or ``1234, sub-seed 1235``: the bench's seed first."""
        return str(self.root) + ("" if self.seed == self.root else f", sub-seed {self.seed}")

    def _check_counters(self, when: str):
        """The RTL's ``drops`` port (every node's counters, node 0 in the low bits) against the
        model's counters now, before the model steps this cycle."""
        bits = self.cfg.counter_bits
        per_node = len(DropKind) * bits
        raw = self.dut.drops.value.to_unsigned()
        want = 0
        for i, router in enumerate(self.net.routers):
            for k, n in enumerate(router.counters):
                want |= n << (i * per_node + k * bits)
        if raw == want:
            return
        for i, router in enumerate(self.net.routers):
            word = raw >> (i * per_node)
            got = [word >> (k * bits) & ((1 << bits) - 1) for k in range(len(DropKind))]
            if got != router.counters:
                raise AssertionError(
                    f"{when}: node {i} drop counters {got}, the model says {router.counters}"
                )

    def moved(self, step: NetStep) -> bool:
        """Whether a flit moved in the cycle ``step`` came from (for a watchdog)."""
        return moved(step, self.net.routers)

    def where(self) -> str:
        """Where the model's routers hold flits (a watchdog's report)."""
        return describe_buffers(self.cfg, self.net.routers)

    async def counters(self) -> list[list[int]]:
        """Every node's drop counters, after one more cycle with every injection idle (and
        ejection ``ready`` as last driven), so that the drops of the last cycle stepped have
        reached the counters; checked equal to the RTL's in the cycle after.

        Raises
        ------
        AssertionError
            If a node's counters (or another output) differ from the model's.
        """
        ready = dict(enumerate(self._ready))  # the model takes a dict (a list once failed)
        await self.step({}, ready)
        counters = [list(router.counters) for router in self.net.routers]
        await self.step({}, ready)
        return counters
