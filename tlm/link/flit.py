"""The flit and packet format, defined once: field widths, encode and decode.

A flit is one unsigned integer of ``width`` bits. Fields, from bit 0 up:

=========  ==================  ==========================================================
field      width               meaning
=========  ==================  ==========================================================
kind       2                   :class:`FlitKind`: head, body, tail, or head-and-tail
vc         ``vc_bits``         virtual channel on the link it travels (rewritten each hop)
payload    the rest            head: ``dst``, ``src``, ``length``, ``seq``; other flits: data
=========  ==================  ==========================================================

The head payload, from its bit 0 up: ``dst`` (one ``coord_bits`` field per dimension, dimension
0 lowest), ``src`` (same), ``length`` (flits in the packet minus one, ``len_bits``), ``seq``
(``seq_bits``), zeros above. A packet is a head followed by ``length`` body flits of which the
last is a tail, or a single head-and-tail flit (``length`` 0).

:mod:`hdl.link.flit` builds its ``amaranth.lib.data`` layout from :meth:`FlitFormat.fields` and
:meth:`FlitFormat.head_fields`, so RTL, TLM and benches share these positions.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["FlitKind", "FlitFormat", "Head"]

KIND_BITS = 2


class FlitKind(enum.IntEnum):
    """What a flit is within its packet (2 bits)."""

    HEAD = 0
    BODY = 1
    TAIL = 2
    #: a single-flit packet: head and tail at once
    SINGLE = 3


@dataclass(frozen=True)
class Head:
    """The fields of a head flit's payload."""

    dst: tuple[int, ...]
    src: tuple[int, ...]
    length: int
    seq: int


def _check_int(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in {low}..{high}, not {value!r}")


@dataclass(frozen=True)
class FlitFormat:
    """Widths of the flit fields (see the module docstring).

    Parameters
    ----------
    dims : int
        Torus dimensions, 1..4.
    width : int
        Flit width in bits (the link's data path), 16..1024.
    vc_bits : int
        Width of the VC field, 1..4.
    coord_bits : int
        Width of one coordinate, 1..8. Wider than the torus needs, so that a destination
        outside the torus can be written (and must be dropped).
    len_bits : int
        Width of the length field (flits - 1): packets of 1 to ``2**len_bits`` flits.
    seq_bits : int
        Width of the sequence number in the head.

    Examples
    --------
    >>> fmt = FlitFormat(dims=2, width=64)
    >>> flit = fmt.head(dst=(1, 2), src=(3, 0), length=3, seq=7, vc=1)
    >>> fmt.kind(flit), fmt.vc(flit), fmt.decode_head(flit)
    (<FlitKind.HEAD: 0>, 1, Head(dst=(1, 2), src=(3, 0), length=3, seq=7))
    """

    dims: int
    width: int = 64
    vc_bits: int = 1
    coord_bits: int = 4
    len_bits: int = 2
    seq_bits: int = 16

    def __post_init__(self):
        _check_int("dims", self.dims, 1, 4)
        _check_int("width", self.width, 16, 1024)
        _check_int("vc_bits", self.vc_bits, 1, 4)
        _check_int("coord_bits", self.coord_bits, 1, 8)
        _check_int("len_bits", self.len_bits, 0, 8)
        _check_int("seq_bits", self.seq_bits, 0, 32)
        if self.head_bits > self.payload_bits:
            raise ValueError(
                f"width must hold the head fields ({KIND_BITS + self.vc_bits + self.head_bits}"
                f" bits), not {self.width!r}"
            )

    # -- positions --------------------------------------------------------------------------
    @property
    def payload_bits(self) -> int:
        return self.width - KIND_BITS - self.vc_bits

    @property
    def head_bits(self) -> int:
        return 2 * self.dims * self.coord_bits + self.len_bits + self.seq_bits

    @property
    def max_length(self) -> int:
        """Longest packet in flits."""
        return 1 << self.len_bits

    def fields(self) -> list[tuple[str, int]]:
        """``(name, width)`` of the flit fields from bit 0 up."""
        return [("kind", KIND_BITS), ("vc", self.vc_bits), ("payload", self.payload_bits)]

    def head_fields(self) -> list[tuple[str, int]]:
        """``(name, width)`` of the head payload fields from bit 0 up (coordinates are
        ``dims`` fields of ``coord_bits`` each)."""
        c = self.dims * self.coord_bits
        return [("dst", c), ("src", c), ("length", self.len_bits), ("seq", self.seq_bits)]

    # -- encode -----------------------------------------------------------------------------
    def _coords(self, name, coords) -> int:
        if len(coords) != self.dims:
            raise ValueError(f"{name} must have {self.dims} coordinates, not {coords!r}")
        value = 0
        for d, c in enumerate(coords):
            _check_int(f"{name}[{d}]", c, 0, (1 << self.coord_bits) - 1)
            value |= c << (d * self.coord_bits)
        return value

    def pack(self, kind: FlitKind, vc: int, payload: int) -> int:
        """One flit from its three fields."""
        _check_int("vc", vc, 0, (1 << self.vc_bits) - 1)
        _check_int("payload", payload, 0, (1 << self.payload_bits) - 1)
        return int(kind) | vc << KIND_BITS | payload << (KIND_BITS + self.vc_bits)

    def head(self, dst, src, length: int, seq: int, vc: int = 0, single=None) -> int:
        """A head flit (kind ``SINGLE`` when ``length`` is 1, unless ``single`` says).

        ``length`` is the packet's length in flits, 1..:attr:`max_length`.
        """
        _check_int("length", length, 1, self.max_length)
        _check_int("seq", seq, 0, (1 << self.seq_bits) - 1)
        c = self.dims * self.coord_bits
        payload = (
            self._coords("dst", dst)
            | self._coords("src", src) << c
            | (length - 1) << (2 * c)
            | seq << (2 * c + self.len_bits)
        )
        if single is None:
            single = length == 1
        return self.pack(FlitKind.SINGLE if single else FlitKind.HEAD, vc, payload)

    def body(self, data: int, vc: int = 0, tail: bool = False) -> int:
        """A body flit, or the tail when ``tail``."""
        return self.pack(FlitKind.TAIL if tail else FlitKind.BODY, vc, data)

    def packet(self, dst, src, length: int, seq: int, data=(), vc: int = 0) -> list[int]:
        """The flits of a well-formed packet; ``data`` gives its ``length - 1`` payloads."""
        data = list(data)
        if len(data) != length - 1:
            raise ValueError(f"data must hold length - 1 = {length - 1} payloads, not {data!r}")
        flits = [self.head(dst, src, length, seq, vc)]
        for i, word in enumerate(data):
            flits.append(self.body(word, vc, tail=i == length - 2))
        return flits

    # -- decode -----------------------------------------------------------------------------
    def kind(self, flit: int) -> FlitKind:
        return FlitKind(flit & 3)

    def vc(self, flit: int) -> int:
        return (flit >> KIND_BITS) & ((1 << self.vc_bits) - 1)

    def payload(self, flit: int) -> int:
        return flit >> (KIND_BITS + self.vc_bits)

    def with_vc(self, flit: int, vc: int) -> int:
        """``flit`` with its VC field replaced."""
        mask = ((1 << self.vc_bits) - 1) << KIND_BITS
        return (flit & ~mask) | (vc << KIND_BITS)

    def decode_head(self, flit: int) -> Head:
        p = self.payload(flit)
        cb, c = self.coord_bits, self.dims * self.coord_bits
        cmask = (1 << cb) - 1
        return Head(
            dst=tuple((p >> (d * cb)) & cmask for d in range(self.dims)),
            src=tuple((p >> (c + d * cb)) & cmask for d in range(self.dims)),
            length=((p >> (2 * c)) & ((1 << self.len_bits) - 1)) + 1,
            seq=(p >> (2 * c + self.len_bits)) & ((1 << self.seq_bits) - 1),
        )
