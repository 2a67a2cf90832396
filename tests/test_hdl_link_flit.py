"""hdl.link.flit: the Amaranth layout puts every field where tlm.link.flit encodes it."""

import numpy as np
from amaranth.hdl import Const
from amaranth.lib import data

from hdl.link.flit import FlitKind, flit_layout
from tlm.link.flit import FlitFormat


def test_layout_matches_encoding(seed):
    rng = np.random.default_rng(seed)
    for fmt in (FlitFormat(dims=2), FlitFormat(dims=3, width=96, vc_bits=2, seq_bits=20)):
        layout = flit_layout(fmt)
        assert layout.size == fmt.width
        for _ in range(50):
            dst = tuple(int(v) for v in rng.integers(16, size=fmt.dims))
            src = tuple(int(v) for v in rng.integers(16, size=fmt.dims))
            length = int(rng.integers(1, fmt.max_length + 1))
            seq = int(rng.integers(1 << fmt.seq_bits))
            vc = int(rng.integers(1 << fmt.vc_bits))
            flit = fmt.head(dst, src, length, seq, vc)
            view = data.Const(layout, flit)
            assert view.kind == FlitKind(int(fmt.kind(flit)))
            assert view.vc == vc
            head = view.payload.head
            assert tuple(head.dst[d] for d in range(fmt.dims)) == dst
            assert tuple(head.src[d] for d in range(fmt.dims)) == src
            assert head.length == length - 1 and head.seq == seq
            body = fmt.body(12345, vc, tail=True)
            assert data.Const(layout, body).payload.data == 12345
            assert Const.cast(data.Const(layout, body).as_value()).value == body
