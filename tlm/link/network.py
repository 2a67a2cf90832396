"""Cycle-exact model of a torus of routers (:class:`hdl.link.torus.TorusNetwork`).

Routers are wired as :mod:`tlm.link.topology` says; every signal between routers is a register
(link flit, credit mask), so one network cycle is: read every router's outputs, then step every
router with its neighbours' outputs. Each node has its own injection and ejection stream -
or, under ``ports="per_direction"`` (:mod:`tlm.link.ports`), one per port.

**Port ids.** Injection and ejection streams are named by one number, ``node * count + port``
(``count`` ports per node: :attr:`RouterNetwork.port_count`), so under ``ports="single"`` a
stream's id is its node's number. :meth:`RouterNetwork.injection_port` gives the id a packet
enters at.
"""

from __future__ import annotations

from .config import LinkConfig
from .ports import Ports
from .router import Router

__all__ = ["RouterNetwork", "NetStep", "injection_port_id"]


class RouterNetwork:
    """All routers of ``cfg.shape``, stepped together.

    Parameters
    ----------
    cfg : LinkConfig
    interval : sequence of int, optional
        Cycles per flit on the links of each dimension (TLM only:
        :func:`~tlm.link.config.port_intervals`); 1 everywhere by default, as the RTL.
    ports : str
        ``"single"`` (one injection and one ejection port per node, as the RTL; the default)
        or ``"per_direction"`` (one per link direction: :class:`~tlm.link.ports.Ports`).

    Examples
    --------
    >>> cfg = LinkConfig((4, 4))
    >>> net = RouterNetwork(cfg)
    >>> flit = cfg.fmt.head(dst=(2, 3), src=(0, 0), length=1, seq=5)
    >>> cycles = [net.step({0: flit} if c == 0 else {}).ejected for c in range(16)]
    >>> [(c, node) for c, out in enumerate(cycles) for node in out]   # 3 hops: 3*3+3
    [(12, 14)]
    """

    def __init__(self, cfg: LinkConfig, interval=None, ports: str = "single"):
        if not isinstance(cfg, LinkConfig):
            raise TypeError(f"cfg must be a LinkConfig, not {cfg!r}")
        self.cfg = cfg
        torus = cfg.torus
        self.torus = torus
        self.ports = Ports(cfg, ports)
        self.routers = [Router(cfg, c, interval, self.ports) for c in torus.coords()]
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

    @property
    def port_count(self) -> int:
        """Injection (and ejection) ports per node: port id ``i`` is port ``i % port_count``
        of node ``i // port_count``."""
        return self.ports.count

    def injection_port(self, src: int, dst: int) -> int:
        """The id of the injection port a packet from node ``src`` to node ``dst`` enters at
        (:meth:`Ports.injection_port <tlm.link.ports.Ports.injection_port>`)."""
        return injection_port_id(self.ports, src, dst)

    def inject_ready(self, port: int) -> bool:
        """Injection port id ``port`` has room (under ``"single"``: node ``port``'s)."""
        node, i = divmod(port, self.ports.count)
        return self.routers[node].inject_ready_at(i)

    @property
    def idle(self) -> bool:
        """No flit anywhere, no credit on its way, no link waiting out its interval: a step
        without inputs would change nothing but the cycle count."""
        return all(router.quiet for router in self.routers)

    def step(self, inject=None, eject_ready=None) -> NetStep:
        """Advance one cycle.

        Parameters
        ----------
        inject : dict port id -> flit
            Flits offered on injection ports this cycle (absent: not valid); under
            ``"single"`` the id is the node.
        eject_ready : dict port id -> bool or None
            ``ready`` of ejection ports (absent: ready).
        """
        inject = inject or {}
        eject_ready = eject_ready or {}
        count = self.ports.count
        if count > 1:  # by node: {port: flit} for each router
            inject, eject_ready = _by_node(inject, count), _by_node(eject_ready, count)
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
            for i in info.accepted:
                out.accepted.append(n * count + i)
            for e, flit in info.ejected.items():
                out.ejected[n * count + e] = flit
            if info.sent:
                counts = self.link_flits[n]
                for o in info.sent:
                    counts[o if o < P else 0] += 1  # every ejection port counts as port 0
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


def injection_port_id(ports: Ports, src: int, dst: int) -> int:
    """The id of the injection port a packet from node ``src`` to node ``dst`` enters at:
    ``src * ports.count +`` :meth:`Ports.injection_port <tlm.link.ports.Ports.injection_port>`."""
    if ports.count == 1:
        return src
    torus = ports.cfg.torus
    return src * ports.count + ports.injection_port(torus.coord(src), torus.coord(dst))


def _by_node(flat: dict, count: int) -> dict:
    """``{port id: x}`` as ``{node: {port: x}}``."""
    out: dict[int, dict] = {}
    for i, x in flat.items():
        node, port = divmod(i, count)
        out.setdefault(node, {})[port] = x
    return out


class NetStep:
    """One network cycle: the injection port ids that ``accepted`` a flit, flits ``ejected``
    by ejection port id (under ``ports="single"``, both are node numbers)."""

    __slots__ = ("accepted", "ejected")

    def __init__(self):
        self.accepted = []
        self.ejected = {}
