"""tlm.link.flit: encode and decode of the flit format, and its argument checks."""

import numpy as np
import pytest

from tlm.link.flit import FlitFormat, FlitKind, Head, closed_kind, ends_packet, starts_packet


def test_head_round_trip(seed):
    rng = np.random.default_rng(seed)
    fmt = FlitFormat(dims=3, width=64, vc_bits=2)
    for _ in range(200):
        dst = tuple(int(v) for v in rng.integers(16, size=3))
        src = tuple(int(v) for v in rng.integers(16, size=3))
        length, seq, vc = int(rng.integers(1, 5)), int(rng.integers(1 << 16)), int(rng.integers(4))
        flit = fmt.head(dst, src, length, seq, vc)
        assert fmt.kind(flit) == (FlitKind.SINGLE if length == 1 else FlitKind.HEAD)
        assert fmt.vc(flit) == vc
        assert fmt.decode_head(flit) == Head(dst, src, length, seq)
        assert fmt.with_vc(flit, 3 - vc) >> 4 == flit >> 4 and fmt.vc(fmt.with_vc(flit, 1)) == 1
        assert 0 <= flit < 1 << 64


def test_packet():
    fmt = FlitFormat(dims=2)
    flits = fmt.packet((1, 2), (0, 0), 3, 9, data=[5, 6])
    assert [fmt.kind(f) for f in flits] == [FlitKind.HEAD, FlitKind.BODY, FlitKind.TAIL]
    assert [fmt.payload(f) for f in flits[1:]] == [5, 6]
    assert fmt.fields() == [("kind", 2), ("vc", 1), ("payload", 61)]
    assert fmt.head_fields() == [("dst", 8), ("src", 8), ("length", 2), ("seq", 16)]


def test_kind_rules():
    """Which kinds start and end a packet, and how a packet is closed early (docs/noc.md, "Bad
    input"), as properties and as the plain functions the compiled engine runs."""
    starts = {FlitKind.HEAD, FlitKind.SINGLE}
    ends = {FlitKind.TAIL, FlitKind.SINGLE}
    closed = {
        FlitKind.HEAD: FlitKind.SINGLE,
        FlitKind.BODY: FlitKind.TAIL,
        FlitKind.TAIL: FlitKind.TAIL,
        FlitKind.SINGLE: FlitKind.SINGLE,
    }
    for kind in FlitKind:
        assert kind.starts_packet == starts_packet(int(kind)) == (kind in starts)
        assert kind.ends_packet == ends_packet(int(kind)) == (kind in ends)
        assert kind.closed == closed_kind(int(kind)) == closed[kind]
        assert kind.closed.ends_packet


def test_field_positions(seed):
    """offset, mask and field agree with encode and decode, for every field."""
    rng = np.random.default_rng(seed)
    fmt = FlitFormat(dims=3, width=64, vc_bits=2, coord_bits=3, len_bits=3, seq_bits=12)
    assert [fmt.offset(n) for n in ("kind", "vc", "payload")] == [0, 2, 4]
    assert [fmt.offset(n) for n in ("dst", "src", "length", "seq")] == [4, 13, 22, 25]
    assert [fmt.mask(n) for n in ("kind", "vc", "dst", "length")] == [3, 3, (1 << 9) - 1, 7]
    for _ in range(100):
        dst, src = (tuple(int(v) for v in rng.integers(8, size=3)) for _ in range(2))
        length, seq, vc = int(rng.integers(1, 9)), int(rng.integers(1 << 12)), int(rng.integers(4))
        flit = fmt.head(dst, src, length, seq, vc)
        assert fmt.field(flit, "length") == length - 1 and fmt.field(flit, "seq") == seq
        assert fmt.field(flit, "vc") == vc and fmt.field(flit, "kind") == fmt.kind(flit)
        assert fmt.field(flit, "dst") == sum(c << (3 * d) for d, c in enumerate(dst))
        closed = fmt.close(flit)
        assert fmt.kind(closed) == fmt.kind(flit).closed
        assert fmt.with_kind(closed, fmt.kind(flit)) == flit


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: FlitFormat(dims=5), "dims must be an integer in 1..4, not 5"),
        (lambda: FlitFormat(dims=2, width=8), "width must be an integer in 16..1024, not 8"),
        (
            lambda: FlitFormat(dims=4, width=40),
            "width must hold the head fields (53 bits), not 40",
        ),
        (
            lambda: FlitFormat(dims=2).head((1,), (0, 0), 1, 0),
            "dst must have 2 coordinates, not (1,)",
        ),
        (
            lambda: FlitFormat(dims=2).head((1, 16), (0, 0), 1, 0),
            "dst[1] must be an integer in 0..15, not 16",
        ),
        (
            lambda: FlitFormat(dims=2).head((1, 1), (0, 0), 5, 0),
            "length must be an integer in 1..4, not 5",
        ),
        (lambda: FlitFormat(dims=2).body(0, vc=2), "vc must be an integer in 0..1, not 2"),
        (
            lambda: FlitFormat(dims=2).packet((1, 1), (0, 0), 2, 0, data=[]),
            "data must hold length - 1 = 1 payloads, not []",
        ),
        (
            lambda: FlitFormat(dims=2).offset("dest"),
            "name must be one of kind, vc, payload, dst, src, length, seq, not 'dest'",
        ),
    ],
)
def test_bad_arguments(call, message):
    with pytest.raises(ValueError) as error:
        call()
    assert str(error.value) == message
