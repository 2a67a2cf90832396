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

    Parameters
    ----------
    cfg : LinkConfig
    interval : sequence of int, optional
        Cycles per flit on the links of each dimension (TLM only:
        :func:`~tlm.link.config.port_intervals`); 1 everywhere by default, as the RTL.

    Examples
    --------
    >>> cfg = LinkConfig((4, 4))
    >>> net = Network(cfg)
    >>> flit = cfg.fmt.head(dst=(2, 3), src=(0, 0), length=1, seq=5)
    >>> cycles = [net.step({0: flit} if c == 0 else {}).ejected for c in range(12)]
    >>> [(c, node) for c, out in enumerate(cycles) for node in out]   # 3 hops: 2*3+2
    [(8, 14)]
    """

    def __init__(self, cfg: LinkConfig, interval=None):
        if not isinstance(cfg, LinkConfig):
            raise TypeError(f"cfg must be a LinkConfig, not {cfg!r}")
        self.cfg = cfg
        torus = cfg.torus
        self.torus = torus
        self.routers = [Router(cfg, c, interval) for c in torus.coords()]
        # peers[node][port] = (node, port) at the other end of the link
        self.peers = [
            [None]
            + [(torus.node(torus.neighbour(c, p)), torus.facing(p)) for p in range(1, cfg.ports)]
            for c in torus.coords()
        ]
        self.cycle = 0
        # inputs of the next cycle: what the neighbours' registers hold (None: nothing)
        self._link_in = [None] * torus.nodes
        self._credit_in = [None] * torus.nodes
        self.link_flits = [[0] * cfg.ports for _ in range(torus.nodes)]

    def inject_ready(self, node: int) -> bool:
        return self.routers[node].inject_ready

    @property
    def idle(self) -> bool:
        """No flit anywhere, no credit on its way, no link waiting out its interval: a step
        without inputs would change nothing but the cycle count."""
        return all(router.quiet for router in self.routers)

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
        link_in, credit_in = self._link_in, self._credit_in
        self._link_in = [None] * len(routers)
        self._credit_in = [None] * len(routers)
        out = NetStep()
        sent = []
        for n, router in enumerate(routers):
            offer = inject.get(n)
            links, creds = link_in[n], credit_in[n]
            if offer is None and links is None and creds is None and router.quiet:
                continue
            info = router.step(offer, eject_ready.get(n, True), links, creds)
            if info.inject_fire:
                out.accepted.append(n)
            if info.ejected is not None:
                out.ejected[n] = info.ejected
            if info.sent:
                counts = self.link_flits[n]
                for o in info.sent:
                    counts[o] += 1
            if (
                router.link_reg is not router._no_links
                or router.credit_reg is not router._no_credits
            ):
                sent.append(n)
        # deliver this cycle's registers as the neighbours' inputs of the next cycle
        for n in sent:
            router = routers[n]
            links, creds = router.link_reg, router.credit_reg
            for p in range(1, P):
                flit, mask = links[p], creds[p]
                if flit is None and not mask:
                    continue
                m, q = peers[n][p]
                if flit is not None:
                    if self._link_in[m] is None:
                        self._link_in[m] = [None] * P
                    self._link_in[m][q] = flit
                if mask:
                    if self._credit_in[m] is None:
                        self._credit_in[m] = [0] * P
                    self._credit_in[m][q] = mask
        self.cycle += 1
        return out


class NetStep:
    """One network cycle: nodes whose injection ``accepted`` a flit, flits ``ejected`` by
    node."""

    __slots__ = ("accepted", "ejected")

    def __init__(self):
        self.accepted = []
        self.ejected = {}
