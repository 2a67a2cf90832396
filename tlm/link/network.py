"""Cycle-exact model of a torus of routers (:class:`hdl.link.torus.TorusNetwork`).

Routers are wired as :mod:`tlm.link.topology` says; every signal between routers is a register
(link flit, credit mask), so one network cycle is: read every router's outputs, then step every
router with its neighbours' outputs. Each node has its own injection and ejection stream.
"""

from __future__ import annotations

from .config import LinkConfig
from .router import Router

__all__ = ["Network"]


class Network:
    """All routers of ``cfg.shape``, stepped together.

    Examples
    --------
    >>> cfg = LinkConfig((4, 4))
    >>> net = Network(cfg)
    >>> flit = cfg.fmt.head(dst=(2, 3), src=(0, 0), length=1, seq=5)
    >>> cycles = [net.step({0: flit} if c == 0 else {}).ejected for c in range(12)]
    >>> [(c, node) for c, out in enumerate(cycles) for node in out]   # 3 hops: 2*3+2
    [(8, 14)]
    """

    def __init__(self, cfg: LinkConfig):
        if not isinstance(cfg, LinkConfig):
            raise TypeError(f"cfg must be a LinkConfig, not {cfg!r}")
        self.cfg = cfg
        torus = cfg.torus
        self.torus = torus
        self.routers = [Router(cfg, c) for c in torus.coords()]
        # peers[node][port] = (node, port) at the other end of the link
        self.peers = [
            [None]
            + [(torus.node(torus.neighbour(c, p)), torus.facing(p)) for p in range(1, cfg.ports)]
            for c in torus.coords()
        ]
        self.cycle = 0
        self.link_flits = [[0] * cfg.ports for _ in range(torus.nodes)]

    def inject_ready(self, node: int) -> bool:
        return self.routers[node].inject_ready

    def step(self, inject=None, eject_ready=None) -> NetStep:
        """Advance one cycle.

        Parameters
        ----------
        inject : dict node -> flit
            Flits offered on injection ports this cycle (absent: not valid).
        eject_ready : dict node -> bool or None
            ``ready`` of ejection ports (absent: ready).
        """
        inject = inject or {}
        eject_ready = eject_ready or {}
        routers, peers = self.routers, self.peers
        P = self.cfg.ports
        links = [r.link_reg for r in routers]
        credits = [r.credit_reg for r in routers]
        out = NetStep()
        for n, router in enumerate(routers):
            link_in = [None] * P
            credit_in = [0] * P
            for p in range(1, P):
                m, q = peers[n][p]
                link_in[p] = links[m][q]
                credit_in[p] = credits[m][q]
            info = router.step(inject.get(n), eject_ready.get(n, True), link_in, credit_in)
            if info.inject_fire:
                out.accepted.append(n)
            if info.ejected is not None:
                out.ejected[n] = info.ejected
            counts = self.link_flits[n]
            for o in info.sent:
                counts[o] += 1
        self.cycle += 1
        return out


class NetStep:
    """One network cycle: nodes whose injection ``accepted`` a flit, flits ``ejected`` by
    node."""

    __slots__ = ("accepted", "ejected")

    def __init__(self):
        self.accepted = []
        self.ejected = {}
