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
:meth:`FlitFormat.head_fields`, so RTL, TLM and benches share these positions; code that works
on bits (the compiled engine, the load sources) takes them from :meth:`FlitFormat.offset` and
:meth:`FlitFormat.mask`. The kind rules (which kinds start and end a packet, how a packet is
closed early) are :class:`FlitKind`'s, written once as :func:`starts_packet`,
:func:`ends_packet` and :func:`closed_kind` for every level.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["FlitKind", "FlitFormat", "Head", "starts_packet", "ends_packet", "closed_kind"]

KIND_BITS = 2


class FlitKind(enum.IntEnum):
    """What a flit is within its packet (2 bits).

    Examples
    --------
    >>> FlitKind.HEAD.starts_packet, FlitKind.HEAD.ends_packet, FlitKind.HEAD.closed
    (True, False, <FlitKind.SINGLE: 3>)
    >>> [k.closed.name for k in FlitKind]   # the packet ends here: head -> single, body -> tail
    ['SINGLE', 'TAIL', 'TAIL', 'SINGLE']
    """

    HEAD = 0
    BODY = 1
    TAIL = 2
    #: a single-flit packet: head and tail at once
    SINGLE = 3

    @property
    def starts_packet(self) -> bool:
        """A head or a single: the flit that carries the packet's route."""
        return starts_packet(self)

    @property
    def ends_packet(self) -> bool:
        """A tail or a single: the packet's last flit."""
        return ends_packet(self)

    @property
    def closed(self) -> FlitKind:
        """The kind this flit takes when its packet must end at it (a flit that finds its
        buffer full leaves the packet before it open): head -> single, body -> tail; a tail or
        single already ends its packet and stays as it is."""
        return FlitKind(closed_kind(self))


# The kind rules as plain functions of the kind's code, so that the compiled engine
# (:mod:`tlm.link.compiled`, numba) runs these very functions; :class:`FlitKind`'s properties
# and the RTL (:mod:`hdl.link.flit`) are built on them too.
def starts_packet(kind: int) -> bool:
    """Whether a flit of ``kind`` (a :class:`FlitKind` code) starts its packet."""
    return kind == FlitKind.HEAD or kind == FlitKind.SINGLE


def ends_packet(kind: int) -> bool:
    """Whether a flit of ``kind`` ends its packet."""
    return kind == FlitKind.TAIL or kind == FlitKind.SINGLE


def closed_kind(kind: int) -> int:
    """The code of ``kind`` made to end its packet (:attr:`FlitKind.closed`)."""
    if kind == FlitKind.HEAD:
        return FlitKind.SINGLE
    if kind == FlitKind.BODY:
        return FlitKind.TAIL
    return kind


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


#: the kinds by code, for decoding without an enum call per flit
_KINDS = tuple(FlitKind)


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
        # every field's (offset, width), worked out once: decoding reads it per flit
        object.__setattr__(self, "_at", self._layout())

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

    def _layout(self) -> dict[str, tuple[int, int]]:
        """``name: (offset, width)`` of every flit field and head field, offsets from the
        flit's bit 0."""
        out, pos = {}, 0
        for name, width in self.fields():
            out[name], pos = (pos, width), pos + width
        pos = out["payload"][0]
        for name, width in self.head_fields():
            out[name], pos = (pos, width), pos + width
        return out

    def offset(self, name: str) -> int:
        """Bit position in the flit of field ``name``: ``kind``, ``vc``, ``payload``, or a
        head field (``dst``, ``src``, ``length``, ``seq``).

        Examples
        --------
        >>> fmt = FlitFormat(dims=2, width=64, vc_bits=1)
        >>> fmt.offset("vc"), fmt.offset("dst"), fmt.offset("src"), fmt.offset("seq")
        (2, 3, 11, 21)
        """
        return self._field(name)[0]

    def bits(self, name: str) -> int:
        """Width of field ``name`` in bits (a coordinate field holds every dimension)."""
        return self._field(name)[1]

    def mask(self, name: str) -> int:
        """``2**bits(name) - 1``: field ``name`` shifted down to bit 0 and masked."""
        return (1 << self._field(name)[1]) - 1

    def field(self, flit: int, name: str) -> int:
        """The value of field ``name`` of ``flit``."""
        offset, width = self._field(name)
        return (flit >> offset) & ((1 << width) - 1)

    def _field(self, name):
        try:
            return self._at[name]
        except KeyError:
            fields = ", ".join(self._at)
            raise ValueError(f"name must be one of {fields}, not {name!r}") from None

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
        return (
            int(kind) << self.offset("kind")
            | vc << self.offset("vc")
            | payload << self.offset("payload")
        )

    def head(self, dst, src, length: int, seq: int, vc: int = 0, single=None) -> int:
        """A head flit (kind ``SINGLE`` when ``length`` is 1, unless ``single`` says).

        ``length`` is the packet's length in flits, 1..:attr:`max_length`.
        """
        _check_int("length", length, 1, self.max_length)
        _check_int("seq", seq, 0, (1 << self.seq_bits) - 1)
        base = self.offset("payload")  # head fields are placed within the payload
        payload = (
            self._coords("dst", dst) << (self.offset("dst") - base)
            | self._coords("src", src) << (self.offset("src") - base)
            | (length - 1) << (self.offset("length") - base)
            | seq << (self.offset("seq") - base)
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
        return _KINDS[self.field(flit, "kind")]

    def vc(self, flit: int) -> int:
        return self.field(flit, "vc")

    def payload(self, flit: int) -> int:
        return flit >> self.offset("payload")

    def _with(self, flit: int, name: str, value: int) -> int:
        offset, width = self._field(name)
        return (flit & ~(((1 << width) - 1) << offset)) | (value << offset)

    def with_vc(self, flit: int, vc: int) -> int:
        """``flit`` with its VC field replaced."""
        return self._with(flit, "vc", vc)

    def with_kind(self, flit: int, kind: FlitKind) -> int:
        """``flit`` with its kind replaced."""
        return self._with(flit, "kind", int(kind))

    def close(self, flit: int) -> int:
        """``flit`` made the end of its packet (:attr:`FlitKind.closed`).

        Examples
        --------
        >>> fmt = FlitFormat(dims=1)
        >>> fmt.kind(fmt.close(fmt.body(5))), fmt.kind(fmt.close(fmt.body(5, tail=True)))
        (<FlitKind.TAIL: 2>, <FlitKind.TAIL: 2>)
        """
        return self.with_kind(flit, self.kind(flit).closed)

    def decode_head(self, flit: int) -> Head:
        return Head(
            dst=self._split(self.field(flit, "dst")),
            src=self._split(self.field(flit, "src")),
            length=self.field(flit, "length") + 1,
            seq=self.field(flit, "seq"),
        )

    def _split(self, field: int) -> tuple[int, ...]:
        """The coordinates of a ``dst`` or ``src`` field, dimension 0 first."""
        cb, cmask = self.coord_bits, (1 << self.coord_bits) - 1
        return tuple((field >> (d * cb)) & cmask for d in range(self.dims))
