"""Parameters of a router and its torus network, checked once and shared by RTL, TLM, benches."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .flit import FlitFormat
from .topology import Torus, parse_shape

__all__ = ["LinkConfig", "DropKind", "MALFORMED", "port_intervals"]


class DropKind(enum.IntEnum):
    """Bad input a router drops or ignores; the value indexes the router's status counters.

    The first three are malformed packets; the last two are misuse of the link protocol by a
    neighbour (``docs/noc.md``, "Bad input").
    """

    #: a head whose destination lies outside the torus (the whole packet is dropped)
    BAD_DEST = 0
    #: a packet whose length field disagrees with where its tail is (the whole packet)
    BAD_LENGTH = 1
    #: a body or tail flit with no head before it (that flit)
    ORPHAN = 2
    #: a flit that found its VC's buffer full on a link input: the neighbour sent it without a
    #: credit (that flit; the packet it continues is closed early, the rest become orphans)
    NO_CREDIT = 3
    #: a credit returned on a link output whose VC already holds every credit (ignored)
    CREDIT_OVERFLOW = 4


#: The kinds a malformed packet causes (the others are link-protocol misuse, not packets).
MALFORMED = (DropKind.BAD_DEST, DropKind.BAD_LENGTH, DropKind.ORPHAN)


def _power_of_two(name, value, low, high):
    ok = not isinstance(value, bool) and isinstance(value, int) and low <= value <= high
    if not ok or value & (value - 1):
        raise ValueError(f"{name} must be a power of two in {low}..{high}, not {value!r}")


@dataclass(frozen=True)
class LinkConfig:
    """A torus network of identical routers.

    Parameters
    ----------
    shape : tuple of int or str
        Ring sizes, e.g. ``(4, 4)`` (server) or ``"4x4x4"`` (UltraServer).
    vcs : int
        Virtual channels per link, a power of two 2..8 (half per dateline class).
    depth : int
        Flit buffer per VC at each link input, a power of two 1..64 (credits per VC).
    width : int
        Flit width in bits.
    len_bits : int
        Packets have 1 to ``2**len_bits`` flits.
    seq_bits, coord_bits : int
        See :class:`~tlm.link.flit.FlitFormat`.
    inject_depth : int
        Injection buffer in flits, a power of two at least the longest packet and at least 2
        (a packet enters the network only when all of it is in this buffer and checked).
    counter_bits : int
        Width of each saturating status counter.

    Examples
    --------
    >>> cfg = LinkConfig("4x4x4")
    >>> cfg.shape, cfg.ports, cfg.requesters, cfg.fmt.width
    ((4, 4, 4), 7, 13, 64)
    """

    shape: tuple[int, ...]
    vcs: int = 2
    depth: int = 4
    width: int = 64
    len_bits: int = 2
    seq_bits: int = 16
    coord_bits: int = 4
    inject_depth: int = 8
    counter_bits: int = 16

    def __post_init__(self):
        object.__setattr__(self, "shape", parse_shape(self.shape))
        _power_of_two("vcs", self.vcs, 2, 8)
        _power_of_two("depth", self.depth, 1, 64)
        if max(self.shape) > 1 << self.coord_bits:
            raise ValueError(
                f"coord_bits must hold every coordinate of {self.shape}, not {self.coord_bits!r}"
            )
        self.fmt  # noqa: B018 - checks the flit widths
        # at least 2: a head whose length says 1 (malformed: that is a single) waits in the
        # buffer for its tail, which a 1-flit buffer could never take in
        _power_of_two("inject_depth", self.inject_depth, max(2, self.fmt.max_length), 256)
        c = self.counter_bits
        if isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= 32:
            raise ValueError(f"counter_bits must be an integer in 1..32, not {c!r}")

    @property
    def torus(self) -> Torus:
        return Torus(self.shape)

    @property
    def fmt(self) -> FlitFormat:
        return FlitFormat(
            dims=len(self.shape),
            width=self.width,
            vc_bits=(self.vcs - 1).bit_length(),
            coord_bits=self.coord_bits,
            len_bits=self.len_bits,
            seq_bits=self.seq_bits,
        )

    @property
    def ports(self) -> int:
        return 1 + 2 * len(self.shape)

    @property
    def requesters(self) -> int:
        """Inputs the switch arbitrates between: the injection buffer (requester 0), then each
        VC of each link port (:meth:`requester`)."""
        return 1 + (self.ports - 1) * self.vcs

    def requester(self, port: int, vc: int) -> int:
        """The requester index of VC ``vc`` of link input ``port``: the round-robin order of
        every arbiter, and the index of the input buffers in every model.

        Examples
        --------
        >>> cfg = LinkConfig((4, 4), vcs=2)
        >>> cfg.requester(1, 0), cfg.requester(1, 1), cfg.requester(4, 1)
        (1, 2, 8)
        >>> cfg.requester_link(8)
        (4, 1)
        """
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port < self.ports:
            raise ValueError(f"port must be a link port 1..{self.ports - 1}, not {port!r}")
        if isinstance(vc, bool) or not isinstance(vc, int) or not 0 <= vc < self.vcs:
            raise ValueError(f"vc must be a VC 0..{self.vcs - 1}, not {vc!r}")
        return 1 + (port - 1) * self.vcs + vc

    def requester_link(self, requester: int) -> tuple[int, int]:
        """``(port, vc)`` of a link requester: the inverse of :meth:`requester`."""
        r = requester
        if isinstance(r, bool) or not isinstance(r, int) or not 1 <= r < self.requesters:
            raise ValueError(
                f"requester must be a link requester 1..{self.requesters - 1}, not {r!r}"
            )
        port, vc = divmod(r - 1, self.vcs)
        return port + 1, vc

    @property
    def lanes(self) -> int:
        return self.vcs // 2

    @property
    def tag(self) -> str:
        return f"{self.torus.name}_v{self.vcs}d{self.depth}w{self.width}"


def port_intervals(cfg: LinkConfig, interval=None) -> tuple[int, ...]:
    """Cycles between two flits on each output port's link, by port (port 0, the ejection
    port: 1), from ``interval`` per dimension.

    A TLM-only option of the network models (:class:`~tlm.link.network.RouterNetwork`,
    :class:`~tlm.link.compiled.CompiledNetwork`): a link of dimension ``d`` sends a flit at
    most every ``interval[d]`` cycles, so a slower link (the UltraServer's z links, at half the
    x/y rate) is modelled in whole cycles. The RTL router sends one flit per cycle on every
    link: ``interval=None`` (1 everywhere) is the model the RTL is held to.

    Examples
    --------
    >>> port_intervals(LinkConfig((4, 4, 4)), (1, 1, 2))      # ports: local, x+, x-, ..., z-
    (1, 1, 1, 1, 1, 2, 2)
    """
    dims = len(cfg.shape)
    if interval is None:
        return (1,) * cfg.ports
    ok = isinstance(interval, (tuple, list)) and len(interval) == dims
    ok = ok and all(
        not isinstance(i, bool) and isinstance(i, int) and 1 <= i <= 64 for i in interval
    )
    if not ok:
        raise ValueError(
            f"interval must be {dims} integers in 1..64 (cycles per flit on the links of each "
            f"dimension of {cfg.shape}), not {interval!r}"
        )
    return (1,) + tuple(interval[(p - 1) // 2] for p in range(1, cfg.ports))
