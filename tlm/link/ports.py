"""Injection and ejection ports of a router: one of each (the RTL), or one per link direction.

A TLM-only option of the network models (:class:`~tlm.link.router.Router`,
:class:`~tlm.link.network.RouterNetwork`, :class:`~tlm.link.compiled.CompiledNetwork`), defined once
here and read by all three:

* ``"single"`` (the default, and the RTL router): one injection buffer and one ejection
  register per node, each one flit per cycle - the rate of one link.
* ``"per_direction"``: one injection buffer per output port and one ejection register per input
  port, so a node can start a packet on every link, and take a flit from every link, in the
  same cycle (docs/collectives.md, "The flit engine").

:class:`Ports` gives a packet's injection port (its route's first output port, 0 for a packet
to its own node) and ejection port (that of the link it arrived on), and the switch's
requesters and outputs: the RTL's (``LinkConfig.requesters``, the router's ports) followed by
the extra injection and ejection ports, so under ``"single"`` every index is the RTL's. The
rules in full: docs/noc.md, "Ports (TLM only)".

Examples
--------
>>> from tlm.link.config import LinkConfig
>>> cfg = LinkConfig((4, 4))
>>> one, each = Ports(cfg), Ports(cfg, "per_direction")
>>> one.count, one.requesters, one.outputs
(1, 9, 5)
>>> each.count, each.requesters, each.outputs, each.inject_requester
(5, 13, 9, (0, 9, 10, 11, 12))
>>> each.injection_port((0, 0), (3, 1)), one.injection_port((0, 0), (3, 1))   # x- first
(2, 0)
"""

from __future__ import annotations

from .config import LinkConfig
from .routing import route

__all__ = ["PORTS", "Ports"]

#: The values of the ``ports`` option.
PORTS = ("single", "per_direction")


class Ports:
    """The injection and ejection ports of every router of ``cfg`` under option ``ports``.

    Parameters
    ----------
    cfg : LinkConfig
    ports : str
        ``"single"`` (one injection and one ejection port per node, the RTL's) or
        ``"per_direction"`` (one per link direction, and port 0 for a node's packets to itself).

    Attributes
    ----------
    mode : str
        ``ports``.
    count : int
        Injection ports per node, and ejection ports per node (1, or ``cfg.ports``).
    requesters : int
        Switch inputs: ``cfg.requesters`` and one per injection port after the first.
    outputs : int
        Switch outputs: ``cfg.ports`` and one per ejection port after the first.
    inject_requester : tuple of int
        The requester of each injection port.
    eject_output : tuple of int
        The output of each ejection port.
    local_output : tuple of int
        Per requester: the output a packet takes that ends at this router (the ejection port
        of the link it arrived on; port 0's for an injection buffer).
    """

    def __init__(self, cfg: LinkConfig, ports: str = "single"):
        if not isinstance(cfg, LinkConfig):
            raise TypeError(f"cfg must be a LinkConfig, not {cfg!r}")
        if not isinstance(ports, str) or ports not in PORTS:
            raise ValueError(
                f"ports must be one of {', '.join(PORTS)} (injection and ejection ports per "
                f"node), not {ports!r}"
            )
        self.cfg = cfg
        self.mode = ports
        P, R = cfg.ports, cfg.requesters
        self.count = 1 if ports == "single" else P
        self.requesters = R + self.count - 1
        self.outputs = P + self.count - 1
        self.inject_requester = (0, *range(R, R + self.count - 1))
        self.eject_output = (0, *range(P, P + self.count - 1))
        local = [0] * self.requesters
        if self.count > 1:
            for r in range(1, R):
                local[r] = self.eject_output[cfg.requester_link(r)[0]]
        self.local_output = tuple(local)

    def __repr__(self):
        return f"Ports({self.cfg!r}, {self.mode!r})"

    def injection_port(self, here, dst) -> int:
        """The injection port at node ``here`` (a coordinate) of a packet for ``dst``: its
        route's first output port (0 for ``dst == here``); always 0 under ``"single"``."""
        if self.count == 1:
            return 0
        return route(self.cfg.shape, tuple(here), tuple(here), tuple(dst))[0]

    def is_ejection(self, output: int) -> bool:
        """Whether switch output ``output`` is an ejection port (not a link)."""
        return output == 0 or output >= self.cfg.ports

    def ejection_port(self, output: int) -> int:
        """The ejection port of switch output ``output`` (an ejection output)."""
        return 0 if output == 0 else output - self.cfg.ports + 1
