"""Route compute: a head's output port and dateline class, in logic.

The rule is :func:`tlm.link.routing.route` (dimension-order, the shorter way round each ring,
``+`` at exactly half way, the dateline class of :func:`~tlm.link.routing.dateline_class`);
``tests/test_hdl_link_route.py`` holds this block to it exhaustively on several tori: every
router coordinate, destination and source a packet can have there.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tlm.link.config import LinkConfig
from tlm.link.routing import out_vc
from tlm.link.topology import LOCAL

__all__ = ["RouteCompute", "outside"]


class RouteCompute(wiring.Component):
    """Combinational route of one head flit at the router ``here``.

    Ports
    -----
    ``here``, ``dst``, ``src`` (in)
        Coordinates, ``coord_bits`` per dimension (``dst`` and ``src`` from the head).
    ``lane`` (in, only with more than one lane)
        The head's lane (:func:`tlm.link.routing.lane` of the VC it arrived in).
    ``port`` (out)
        Output port (:mod:`tlm.link.topology`): 0 ejects.
    ``cls`` (out)
        Dateline class of the hop (0 when ejecting).
    ``out_vc`` (out)
        The VC it leaves in: :func:`tlm.link.routing.out_vc` of its lane and ``cls``, built
        from that very function (the ejection port's "VC" is the lane).
    ``bad_dest`` (out)
        ``dst`` lies outside the torus (the head must be dropped; ``port`` is then meaningless).

    Parameters
    ----------
    cfg : LinkConfig
    """

    def __init__(self, cfg: LinkConfig):
        if not isinstance(cfg, LinkConfig):
            self._MustUse__silence = True
            raise TypeError(f"cfg must be a LinkConfig, not {cfg!r}")
        self.cfg = cfg
        coords = data.ArrayLayout(cfg.coord_bits, len(cfg.shape))
        super().__init__(
            {
                "here": In(coords),
                "dst": In(coords),
                "src": In(coords),
                "port": Out(range(cfg.ports)),
                "cls": Out(1),
                "out_vc": Out(cfg.fmt.bits("vc")),
                "bad_dest": Out(1),
            }
            # one lane: nothing to choose, and no input that nothing would read
            | ({"lane": In(cfg.lanes.bit_length() - 1)} if cfg.lanes > 1 else {})
        )

    def elaborate(self, platform):
        cfg = self.cfg
        m = Module()
        m.d.comb += [self.port.eq(LOCAL), self.cls.eq(0)]
        for d in reversed(range(len(cfg.shape))):  # dimension 0 last: the first it must correct
            k = cfg.shape[d]
            c, t, s = self.here[d], self.dst[d], self.src[d]
            dist = Mux(t >= c, t - c, k - (c - t))  # (t - c) mod k, operands of one width
            plus = dist <= k // 2  # the shorter way round; + at exactly half way
            # tlm.link.routing.dateline_class: the hop leaving c is class 1 from the wrap link on
            cls = Mux(plus, (c == k - 1) | (c < s), (c == 0) | (c > s))
            with m.If(t != c):
                m.d.comb += [self.port.eq(Mux(plus, 1 + 2 * d, 2 + 2 * d)), self.cls.eq(cls)]
        vc = out_vc(self.lane if cfg.lanes > 1 else 0, self.cls, cfg.vcs)
        m.d.comb += [self.out_vc.eq(vc), self.bad_dest.eq(outside(self.dst, cfg))]
        return m


def outside(dst, cfg: LinkConfig):
    """1 when coordinates ``dst`` lie outside the torus of ``cfg`` (a ring of
    ``2**coord_bits`` nodes holds every value its field can take: no comparison for it)."""
    full = 1 << cfg.coord_bits
    return Cat(*[dst[d] >= k for d, k in enumerate(cfg.shape) if k < full], Const(0, 1)).any()
