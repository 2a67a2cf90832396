"""``amaranth.lib.data`` layouts of the flit, built from :class:`tlm.link.flit.FlitFormat`.

The field list lives in :mod:`tlm.link.flit` (the TLM and benches encode and decode with it);
this module only turns it into layouts, so the three levels cannot drift apart. Ports between
routers stay plain ``width``-bit vectors (struct-typed ports between repeated blocks bloat the
netlist, ``docs/performance.md``); logic views them through these layouts.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Mux, Shape
from amaranth.lib import data, enum

from tlm.link.flit import FlitFormat
from tlm.link.flit import FlitKind as _Kind

__all__ = [
    "FlitKind",
    "flit_layout",
    "flit_fields",
    "head_layout",
    "starts_packet",
    "ends_packet",
    "closed_kind",
]


class FlitKind(enum.Enum, shape=2):
    """Shaped enum of :class:`tlm.link.flit.FlitKind` (same values)."""

    HEAD = _Kind.HEAD.value
    BODY = _Kind.BODY.value
    TAIL = _Kind.TAIL.value
    SINGLE = _Kind.SINGLE.value


# The kind rules in logic, built from tlm.link.flit.FlitKind's own (starts_packet, ends_packet,
# closed): a kind is listed here because the TLM's rule says so, never by its bit pattern.
def starts_packet(kind):
    """1 when ``kind`` (a :class:`FlitKind` value) starts a packet: a head or a single."""
    return Cat(*[kind == FlitKind(k.value) for k in _Kind if k.starts_packet]).any()


def ends_packet(kind):
    """1 when ``kind`` ends a packet: a tail or a single."""
    return Cat(*[kind == FlitKind(k.value) for k in _Kind if k.ends_packet]).any()


def closed_kind(kind):
    """``kind`` made to end its packet (head -> single, body -> tail; the others kept), as a
    :class:`FlitKind` value."""
    out = kind.as_value()
    for k in _Kind:
        if k.closed != k:
            out = Mux(kind == FlitKind(k.value), FlitKind(k.closed.value), out)
    return FlitKind(out)


def head_layout(fmt: FlitFormat) -> data.StructLayout:
    """Layout of a head flit's payload: ``dst``, ``src`` (arrays of coordinates), ``length``
    (flits - 1), ``seq``, from :meth:`FlitFormat.head_fields`."""
    fields = {}
    for name, width in fmt.head_fields():
        if name in ("dst", "src"):
            fields[name] = data.ArrayLayout(fmt.coord_bits, fmt.dims)
        else:
            fields[name] = width
    return data.StructLayout(fields)


def flit_layout(fmt: FlitFormat) -> data.StructLayout:
    """Layout of a flit: ``kind``, ``vc``, ``payload`` (from :meth:`FlitFormat.fields`);
    ``payload`` is a union of ``head`` (:func:`head_layout`) and ``data``."""
    fields = {}
    for name, width in fmt.fields():
        if name == "kind":
            fields[name] = FlitKind
        elif name == "payload":
            head = head_layout(fmt)
            fields[name] = data.UnionLayout({"head": head, "data": width})
        else:
            fields[name] = width
    layout = data.StructLayout(fields)
    assert layout.size == fmt.width
    return layout


def flit_fields(layout, prefix: str = "") -> list[tuple[str, int]]:
    """The leaf fields of a flit layout as ``(path, width)`` - ``kind``, ``vc``,
    ``payload.head.dst[0]``, ..., ``payload.data`` - the names Amaranth gives a signal's fields
    in the Verilog it writes."""
    out = []
    if isinstance(layout, data.ArrayLayout):
        for i in range(layout.length):
            out += flit_fields(layout.elem_shape, f"{prefix}[{i}]")
        return out
    if isinstance(layout, (data.StructLayout, data.UnionLayout)):
        for name, field in layout:
            out += flit_fields(field.shape, f"{prefix}.{name}" if prefix else name)
        return out
    return [(prefix, Shape.cast(layout).width)]
