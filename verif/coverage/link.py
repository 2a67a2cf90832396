"""Functional coverage of the router and the torus, sampled where their benches already look:
the router bench's lockstep loop (:func:`verif.link.bench_router.run_env`, with the model's
grants it already collects) and the torus benches' :class:`verif.link.lockstep.Lockstep`,
after each model step that the RTL was compared with.

States held over many cycles (credits at zero, stalls) count once per time they are entered
(:meth:`~verif.coverage.db.Covergroup.sample_rising`); the router's (input, VC, output, VC)
bins are :func:`verif.link.router_env.all_pairs` of the configuration and coordinate run.
"""

from __future__ import annotations

from tlm.link.config import MALFORMED, DropKind, LinkConfig
from tlm.link.topology import port_name
from verif.common.patterns import PATTERNS
from verif.link.router_env import all_pairs, coverage

from .db import Covergroup

__all__ = ["RouterCoverage", "TorusCoverage", "router_items", "torus_items", "pair_label"]

DIMS = "xyzw"
_MALFORMED = {k.name for k in MALFORMED}


def pair_label(pair) -> str:
    p, v, o, ov = pair
    return f"{port_name(p)}.vc{v}->{port_name(o)}.vc{ov}"


def _link_vcs(cfg: LinkConfig) -> list[str]:
    return [f"{port_name(o)}.vc{v}" for o in range(1, cfg.ports) for v in range(cfg.vcs)]


def router_items(cfg: LinkConfig, coord) -> dict[str, list[str]]:
    """Item name -> bins of one router bench run."""
    return {
        "router.port_vc_pair": sorted(pair_label(p) for p in all_pairs(cfg, coord)),
        "router.drop": [k.name for k in DropKind],
        "router.credits_exhausted": _link_vcs(cfg),
        "router.backpressure": ["inject stalled", "eject stalled", "link input buffer full"],
        "router.patterns": [f"{r}:{n}" for r in ("send", "ready", "credit") for n in PATTERNS],
    }


def torus_items(cfg: LinkConfig) -> dict[str, list[str]]:
    """Item name -> bins of one torus bench run."""
    dims = range(len(cfg.shape))
    return {
        "torus.dateline": [f"{DIMS[d]} class {c}" for d in dims for c in (0, 1)],
        "torus.wrap": [f"{port_name(o)} wrap" for o in range(1, cfg.ports)],
        # a torus of RTL routers only drops malformed packets: credit misuse needs a broken
        # sender, which the router bench's misuse test plays (router.drop)
        "torus.drop": [k.name for k in MALFORMED],
        "torus.credits_exhausted": _link_vcs(cfg),
        "torus.patterns": [f"{r}:{n}" for r in ("inject", "eject") for n in PATTERNS],
    }


class RouterCoverage:
    """Samples :func:`router_items` once per cycle of the router bench."""

    def __init__(self, cfg: LinkConfig, coord):
        self.cfg, self.coord = cfg, tuple(coord)
        self.group = Covergroup(router_items(cfg, coord))
        self._counters = [0] * len(DropKind)

    def patterns(self, send: str, ready: str, credit: str):
        names = [f"send:{send}", f"ready:{ready}", f"credit:{credit}"]
        self.group.sample_all("router.patterns", names)
        self._counters = [0] * len(DropKind)  # a fresh model after each reset

    def cycle(self, model, ins, outs, grants):
        """After ``model`` stepped with ``ins`` (its outputs before the step: ``outs``)."""
        cfg, g = self.cfg, self.group
        g.sample_all("router.port_vc_pair", sorted(map(pair_label, coverage(cfg, grants))))
        g.sample_all("router.drop", _new_drops(self._counters, model.counters))
        self._counters = list(model.counters)
        g.sample_rising("router.credits_exhausted", _exhausted(cfg, [model]))
        stalls = set()
        if ins.inject is not None and not outs.inject_ready:
            stalls.add("inject stalled")
        if outs.eject is not None and not ins.eject_ready:
            stalls.add("eject stalled")
        if any(len(q) >= cfg.depth for q in model.fifo[1:]):
            stalls.add("link input buffer full")
        g.sample_rising("router.backpressure", stalls)


class TorusCoverage:
    """Samples :func:`torus_items` once per cycle of a torus bench, from the model's routers
    (every flit on a link register: its direction, dateline class, a wrap link or not)."""

    def __init__(self, cfg: LinkConfig):
        self.cfg = cfg
        self.group = Covergroup(torus_items(cfg))
        self.reset()

    def reset(self):
        self._counters = None

    def patterns(self, inject: str, eject: str):
        self.group.sample_all("torus.patterns", [f"inject:{inject}", f"eject:{eject}"])

    def cycle(self, routers):
        cfg, g = self.cfg, self.group
        lanes, fmt = cfg.lanes, cfg.fmt
        dateline, wrap = set(), set()
        for r in routers:
            for o, flit in enumerate(r.link_reg):
                if flit is None or o == 0:
                    continue
                d, minus = divmod(o - 1, 2)
                dateline.add(f"{DIMS[d]} class {int(fmt.vc(flit) >= lanes)}")
                if r.coord[d] == (0 if minus else cfg.shape[d] - 1):
                    wrap.add(f"{port_name(o)} wrap")
        g.sample_rising("torus.dateline", dateline)
        g.sample_rising("torus.wrap", wrap)
        counters = [sum(r.counters[k] for r in routers) for k in range(len(DropKind))]
        if self._counters is not None:
            new = _new_drops(self._counters, counters)
            g.sample_all("torus.drop", [k for k in new if k in _MALFORMED])
        self._counters = counters
        g.sample_rising("torus.credits_exhausted", _exhausted(cfg, routers))


def _new_drops(before, after) -> list[str]:
    return [k.name for k in DropKind if after[k] != before[k]]


def _exhausted(cfg, routers) -> set[str]:
    """Link output VCs of ``routers`` holding no credit."""
    out = set()
    for r in routers:
        for o in range(1, cfg.ports):
            for v, credits in enumerate(r.credits[o]):
                if credits == 0:
                    out.add(f"{port_name(o)}.vc{v}")
    return out
