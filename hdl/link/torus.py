"""Torus network top: one router per node, wired as :mod:`tlm.link.topology` says.

Each node's injection and ejection streams and drop counters are ports of the top
(``inject[n]``, ``eject[n]``, ``drops[n]`` for node ``n``, numbered as
:meth:`tlm.link.topology.Torus.node`). Every router is the same Verilog module (its coordinate
is an input tied to a constant here), generated once and placed as an instance
(:mod:`hdl.hier`); with ``router_module=None`` the routers are ordinary submodules, which
Amaranth's simulator can run. The cycle-exact reference is :class:`tlm.link.network.RouterNetwork`.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from tlm.link.config import DropKind, LinkConfig

from ..hier import place
from .router import Router

__all__ = ["TorusNetwork"]


class TorusNetwork(wiring.Component):
    """All routers of a ``cfg.shape`` torus.

    Parameters
    ----------
    cfg : LinkConfig
    router_module : str or None
        Verilog module name of the router for hierarchical generation, or ``None`` (flat).
    """

    def __init__(self, cfg: LinkConfig, *, router_module: str | None = None):
        if not isinstance(cfg, LinkConfig):
            self._MustUse__silence = True
            raise TypeError(f"cfg must be a LinkConfig, not {cfg!r}")
        self.cfg = cfg
        self._router_module = router_module
        n = cfg.torus.nodes
        counters = data.ArrayLayout(cfg.counter_bits, len(DropKind))
        super().__init__(
            {
                "inject": In(stream.Signature(cfg.width)).array(n),
                "eject": Out(stream.Signature(cfg.width)).array(n),
                "drops": Out(data.ArrayLayout(counters, n)),
            }
        )

    def elaborate(self, platform):
        cfg = self.cfg
        torus = cfg.torus
        m = Module()
        routers = []
        for node, coord in enumerate(torus.coords()):
            router = Router(cfg)
            place(m, f"router{node}", router, self._router_module)
            routers.append(router)
            packed = sum(c << (d * cfg.coord_bits) for d, c in enumerate(coord))
            m.d.comb += router.coord.eq(packed)
            wiring.connect(m, wiring.flipped(self.inject[node]), router.inject)
            wiring.connect(m, router.eject, wiring.flipped(self.eject[node]))
            m.d.comb += self.drops[node].eq(router.drops)
        for node, port, peer, peer_port in torus.links():
            wiring.connect(m, routers[node].o_links[port - 1], routers[peer].i_links[peer_port - 1])
        return m
