"""Packet scoreboard and watchdog of the network benches (no cocotb: the TLM tests use them).

:class:`PacketBoard` takes what each node's source handed to the network and what each
ejection port delivered, and checks that every well-formed packet arrives exactly once, at its
destination, intact, and in order per (source, destination, lane). :class:`Watchdog` fails when
nothing moves for too long while packets are outstanding, naming where they are stuck.
"""

from __future__ import annotations

from collections import defaultdict, deque

from tlm.link.config import LinkConfig
from tlm.link.topology import port_name

__all__ = ["PacketBoard", "Watchdog", "ScoreboardError", "describe_buffers", "moved"]


class ScoreboardError(AssertionError):
    pass


class PacketBoard:
    """Expected packets per (src, dst, lane), and a reassembly per ejection port.

    Parameters
    ----------
    cfg : LinkConfig
    deliver : callable, optional
        Called as ``deliver(node, flits)`` with every packet that arrived intact (its flits as
        ejected, head first): where a bench takes the data on (the collective bench's
        reassembly).
    """

    def __init__(self, cfg: LinkConfig, deliver=None):
        self.cfg = cfg
        self.deliver = deliver
        self.fmt = cfg.fmt
        self.expected: dict[tuple, deque] = defaultdict(deque)
        self.partial: dict[int, list] = {}
        self.sent = 0
        self.delivered = 0
        self.flits = 0

    def send(self, packet):
        """A well-formed packet entered its source's injection port."""
        if packet.bad is None:
            self.expected[(packet.src, packet.dst, packet.lane)].append(packet)
            self.sent += 1

    @property
    def outstanding(self) -> int:
        return self.sent - self.delivered

    def eject(self, node: int, flit: int, cycle: int):
        """A flit left ``node``'s ejection port in ``cycle``."""
        fmt, torus = self.fmt, self.cfg.torus
        self.flits += 1
        kind = fmt.kind(flit)
        part = self.partial.get(node)
        if kind.starts_packet:
            if part:
                raise ScoreboardError(f"cycle {cycle}: node {node} ejected a head inside a packet")
            part = self.partial[node] = []
        elif part is None:
            raise ScoreboardError(f"cycle {cycle}: node {node} ejected a flit with no head")
        part.append(flit)
        if not kind.ends_packet:
            return
        del self.partial[node]
        head = fmt.decode_head(part[0])
        src = torus.node(head.src)
        key = (src, node, fmt.vc(part[0]))
        queue = self.expected.get(key)
        if not queue:
            raise ScoreboardError(
                f"cycle {cycle}: node {node} received an unexpected packet {head} "
                f"(lane {key[2]}): never sent, sent elsewhere, or delivered twice"
            )
        want = queue.popleft()
        lane_flits = [fmt.with_vc(f, want.lane) for f in want.flits]
        if part != lane_flits:
            raise ScoreboardError(
                f"cycle {cycle}: node {node}: packet seq {want.seq} from {src} lane {want.lane}"
                f" arrived as {[hex(f) for f in part]}, sent as {[hex(f) for f in lane_flits]}"
                " (corrupt or out of order)"
            )
        self.delivered += 1
        if self.deliver is not None:
            self.deliver(node, part)

    def check_done(self):
        left = {k: len(q) for k, q in self.expected.items() if q}
        if left or self.partial:
            raise ScoreboardError(f"packets never delivered (src, dst, lane): {left}")


class Watchdog:
    """Fails when no flit has moved for ``limit`` cycles while packets are outstanding."""

    def __init__(self, limit: int = 200):
        self.limit = limit
        self.idle = 0

    def tick(self, moved: bool, outstanding: int, cycle: int, where=None):
        """``where()`` returns a description of the stuck state, called only on failure."""
        self.idle = 0 if moved or not outstanding else self.idle + 1
        if self.idle >= self.limit:
            detail = where() if where else ""
            raise ScoreboardError(
                f"cycle {cycle}: no flit moved for {self.limit} cycles with {outstanding}"
                f" packets outstanding (deadlock?); {detail}"
            )


def describe_buffers(cfg: LinkConfig, routers) -> str:
    """Where flits wait in TLM routers: node, input port, VC, count and head flit."""
    parts = []
    for node, r in enumerate(routers):
        for req, q in enumerate(r.fifo):
            if q:
                if req == 0:
                    where = "inject"
                else:
                    port, vc = divmod(req - 1, cfg.vcs)
                    where = f"{port_name(port + 1)} vc{vc}"
                parts.append(f"node {node} {where}: {len(q)} flits, head {q[0]:#x}")
    return "stuck at " + "; ".join(parts[:20]) if parts else "no flit buffered"


def moved(step, routers) -> bool:
    """Whether anything moved in a network cycle: a flit accepted or ejected (``step``, a
    :class:`~tlm.link.network.NetStep`) or on a link register of one of ``routers``."""
    return bool(step.accepted or step.ejected) or any(
        any(x is not None for x in r.link_reg) for r in routers
    )
