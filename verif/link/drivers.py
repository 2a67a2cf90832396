"""Per-node traffic generators: injection offers and ejection ``ready``, cycle by cycle.

A source offers the next flit of its packet list in a cycle its pattern allows and then holds
it (valid high, flit stable) until the router accepts it, as the stream protocol requires. An
ejection port's ``ready`` follows its own pattern. Patterns are those of
:func:`verif.tensor.stimulus.pattern` (``always``, ``3of4``, ``1of2``, ``1of4``, ``random``).
"""

from __future__ import annotations

from collections import deque

from verif.common.patterns import pattern

from .scoreboard import PacketBoard

__all__ = ["NodeTraffic"]


class NodeTraffic:
    """Sources and sinks of every node of a network (or of one router's local port).

    Parameters
    ----------
    packets : list of list of Packet
        Each node's packets, in the order it sends them.
    board : PacketBoard
        Told of each packet when its head is accepted.
    inject, eject : str
        Pattern names of the sources' valid and the sinks' ready.
    rng : numpy.random.Generator
    """

    def __init__(self, packets, board: PacketBoard, inject: str, eject: str, rng):
        self.board = board
        self._flits = [deque((p, f) for p in mine for f in p.flits) for mine in packets]
        self._inject = [pattern(inject, rng) for _ in packets]
        self._eject = [pattern(eject, rng) for _ in packets]
        self.offer: list[int | None] = [None] * len(packets)
        self._offer_packet = [None] * len(packets)

    def add(self, packets):
        """Queue more packets (a list per node) behind those not yet sent."""
        for queue, mine in zip(self._flits, packets, strict=True):
            queue.extend((p, f) for p in mine for f in p.flits)

    @property
    def pending(self) -> bool:
        """Flits not yet accepted by the network."""
        return any(self._flits) or any(f is not None for f in self.offer)

    def offers(self) -> tuple[dict, dict]:
        """This cycle's ``({node: flit offered}, {node: eject ready})``."""
        for n, q in enumerate(self._flits):
            if self.offer[n] is None and next(self._inject[n]) and q:
                self._offer_packet[n], self.offer[n] = q.popleft()
        valid = {n: f for n, f in enumerate(self.offer) if f is not None}
        ready = {n: next(p) for n, p in enumerate(self._eject)}
        return valid, ready

    def accepted(self, node: int):
        """The router took ``node``'s offered flit."""
        flit, packet = self.offer[node], self._offer_packet[node]
        if flit is packet.flits[0] or flit == packet.flits[0]:
            self.board.send(packet)
        self.offer[node] = None
