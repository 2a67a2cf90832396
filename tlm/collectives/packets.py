"""A schedule's transfers as packets on the torus network: how chunk bytes travel in flits.

The one definition used by the flit engine (:mod:`tlm.collectives.flit`, which counts the
flits) and the RTL bench of a collective (``verif/link/bench_collective.py``, which sends the
real bytes through the RTL torus and reassembles them):

* a transfer of ``n`` bytes from torus node ``s`` to node ``d`` becomes packets of at most
  ``fmt.max_length`` flits: a head (route, length, sequence number) and up to
  ``fmt.max_length - 1`` data flits of :func:`data_bytes` bytes each (the flit's payload
  field, little-endian; the last flit of a transfer zero-padded). A transfer of 0 bytes sends
  nothing;
* the packets of one step are numbered per source node, in the order of the step's transfers
  (``seq`` 0, 1, ...): the destination files a packet by ``(source, seq)`` - both ends know the
  plan, as DMA descriptor rings do - so packets may arrive in any order;
* a source's packets take the lanes of the network (:mod:`tlm.link.routing`) in turn by
  sequence number (:func:`lane`), so a pair's packets alternate lanes and may overtake each
  other; packets of one (source, destination, lane) arrive in the order they were sent;
* :func:`queue_order` is the order a source's injection queue sends a step's packets in: plan
  order (``"transfer"``: each transfer's packets in a row) or a packet of each transfer in turn
  (``"packet"``).

Examples
--------
>>> from tlm.link.config import LinkConfig
>>> cfg = LinkConfig((4, 4))                          # 64-bit flits: 7 data bytes each
>>> data_bytes(cfg.fmt), cfg.fmt.max_length
(7, 4)
>>> plan = plan_step(cfg.fmt, [(0, 5), (0, 1)], [30, 5])
>>> [(p.transfer, p.seq, p.offset, p.nbytes, p.flits) for p in plan]
[(0, 0, 0, 21, 4), (0, 1, 21, 9, 3), (1, 2, 0, 5, 2)]
>>> flits = encode(cfg, plan[2], b"hello")
>>> receive = Reassembly(cfg, plan, [30, 5])
>>> receive.take(1, flits); receive.data(1)
b'hello'
>>> [(p.transfer, p.seq) for p in queue_order(plan, "packet")], lane(plan[1], lanes=2)
([(0, 0), (1, 2), (0, 1)], 1)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..link.config import LinkConfig
from ..link.flit import FlitFormat

__all__ = [
    "ORDERS",
    "Packet",
    "PacketError",
    "data_bytes",
    "plan_step",
    "queue_order",
    "lane",
    "encode",
    "Reassembly",
]

#: Orders of :func:`queue_order`: ``transfer`` (plan order: each transfer's packets in a row,
#: then the next transfer's) or ``packet`` (the transfers take turns, a packet each).
ORDERS = ("transfer", "packet")


class PacketError(AssertionError):
    """A packet that does not match the plan: unexpected, repeated, wrong place or length."""


def data_bytes(fmt: FlitFormat) -> int:
    """Bytes of data one non-head flit carries: the payload field's whole bytes."""
    return fmt.payload_bits // 8


@dataclass(frozen=True)
class Packet:
    """One packet of a step: bytes ``offset..offset+nbytes-1`` of transfer ``transfer``."""

    transfer: int
    src: int
    dst: int
    seq: int
    offset: int
    nbytes: int
    flits: int


def plan_step(fmt: FlitFormat, routes, nbytes, per: int | None = None) -> list[Packet]:
    """The packets of one step.

    Parameters
    ----------
    fmt : FlitFormat
    routes : sequence of (int, int)
        Per transfer: its source and destination torus nodes.
    nbytes : sequence of int
        Per transfer: the bytes it carries.
    per : int, optional
        Data bytes a flit carries: :func:`data_bytes` of ``fmt`` (the default) when the flits
        carry the bytes; the flit engine, which only counts flits, passes the system preset's
        figure (a link's flit may be wider than the 64-bit flits the models hold).

    Raises
    ------
    ValueError
        If one node sends more packets in the step than the sequence field numbers.
    """
    if per is None:
        per = data_bytes(fmt)
    if isinstance(per, bool) or not isinstance(per, int) or per < 1:
        raise ValueError(f"per must be an integer >= 1 (bytes per flit), not {per!r}")
    most = (fmt.max_length - 1) * per  # data bytes of a full packet
    if most == 0:
        raise ValueError(f"fmt must allow packets of 2 or more flits, not {fmt.max_length}")
    seq: dict[int, int] = {}
    out = []
    for index, ((src, dst), n) in enumerate(zip(routes, nbytes, strict=True)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"nbytes[{index}] must be an integer >= 0, not {n!r}")
        for offset in range(0, n, most):
            size = min(most, n - offset)
            number = seq.get(src, 0)
            if number >= 1 << fmt.seq_bits:
                raise ValueError(
                    f"node {src} sends more than {1 << fmt.seq_bits} packets in one step: "
                    f"the flit format's seq_bits ({fmt.seq_bits}) must number them"
                )
            seq[src] = number + 1
            out.append(Packet(index, src, dst, number, offset, size, 1 + -(-size // per)))
    return out


def queue_order(plan: list[Packet], order: str = "transfer") -> list[Packet]:
    """The packets of :func:`plan_step` in the order they are sent.

    ``"transfer"``: plan order. ``"packet"``: every transfer's first packet in plan order, then
    every second packet, and so on (a transfer out of packets drops out) - as a DMA engine that
    works on every descriptor of its queue at once; each source's (or each injection queue's)
    packets keep this relative order.
    """
    if order not in ORDERS:
        raise ValueError(
            f"order must be one of {', '.join(ORDERS)} (how a step's packets join an "
            f"injection queue), not {order!r}"
        )
    if order == "transfer":
        return list(plan)
    index, count = [], {}
    for p in plan:  # a packet's index within its transfer
        index.append(count.get(p.transfer, 0))
        count[p.transfer] = index[-1] + 1
    return [plan[i] for i in sorted(range(len(plan)), key=index.__getitem__)]


def lane(packet: Packet, lanes: int) -> int:
    """The lane ``packet`` travels in when the network has ``lanes`` lanes (``vcs / 2``): its
    source's packets take them in turn, by sequence number."""
    return packet.seq % lanes


def encode(cfg: LinkConfig, packet: Packet, data: bytes, vc: int = 0) -> list[int]:
    """The flits of ``packet`` carrying ``data`` (its ``nbytes`` bytes)."""
    fmt, torus = cfg.fmt, cfg.torus
    if len(data) != packet.nbytes:
        raise ValueError(f"data must hold the packet's {packet.nbytes} bytes, not {len(data)}")
    per = data_bytes(fmt)
    words = [int.from_bytes(data[i : i + per], "little") for i in range(0, packet.nbytes, per)]
    return fmt.packet(
        torus.coord(packet.dst), torus.coord(packet.src), packet.flits, packet.seq, words, vc
    )


class Reassembly:
    """Every destination's receive side of one step: files each packet by ``(source, seq)``,
    checks it against the plan and writes its bytes into the transfer's buffer.

    Parameters
    ----------
    cfg : LinkConfig
    plan : list of Packet
        :func:`plan_step`'s packets.
    nbytes : sequence of int
        Bytes of each transfer.
    """

    def __init__(self, cfg: LinkConfig, plan: list[Packet], nbytes):
        self.cfg = cfg
        self.expect = {(p.src, p.seq): p for p in plan}
        self.buffers = [bytearray(n) for n in nbytes]

    @property
    def outstanding(self) -> int:
        """Packets not yet received."""
        return len(self.expect)

    def take(self, node: int, flits: list[int]):
        """A whole packet (its flits, head first) left ``node``'s ejection port."""
        fmt, torus = self.cfg.fmt, self.cfg.torus
        head = fmt.decode_head(flits[0])
        src = torus.node(head.src)
        want = self.expect.get((src, head.seq))
        if want is None or want.dst != node:
            raise PacketError(
                f"node {node} received a packet the plan does not have there (or a second "
                f"time): {head}"
            )
        if want.flits != len(flits) or head.length != len(flits):
            raise PacketError(
                f"node {node}: packet seq {head.seq} from node {src} has {len(flits)} flits "
                f"(head says {head.length}), the plan {want.flits}"
            )
        per = data_bytes(fmt)
        buffer = self.buffers[want.transfer]
        data = b"".join(fmt.payload(f).to_bytes(per, "little") for f in flits[1:])
        buffer[want.offset : want.offset + want.nbytes] = data[: want.nbytes]
        del self.expect[(src, head.seq)]

    def data(self, transfer: int) -> bytes:
        """The bytes transfer ``transfer`` delivered (raises if a packet is missing)."""
        left = [p for p in self.expect.values() if p.transfer == transfer]
        if left:
            raise PacketError(f"transfer {transfer} misses {len(left)} packets: {left[:3]}")
        return bytes(self.buffers[transfer])

    def check_done(self):
        """Raise if any planned packet never arrived."""
        if self.expect:
            left = sorted(self.expect.values(), key=lambda p: (p.src, p.seq))
            raise PacketError(f"{len(left)} packets never arrived: {left[:3]}")
