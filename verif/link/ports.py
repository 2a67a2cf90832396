"""The node ports of a torus top under cocotb, and the benches' configuration."""

from __future__ import annotations

import os
import random

from tlm.link.config import LinkConfig

__all__ = ["NodePorts", "config_from_env"]


def config_from_env() -> tuple[LinkConfig, int]:
    """The link configuration (``LINK_SHAPE``, ``LINK_VCS``, ``LINK_DEPTH``) and the seed
    (``SEED``, else drawn) a bench runs with."""
    cfg = LinkConfig(
        os.environ.get("LINK_SHAPE", "4x4"),
        vcs=int(os.environ.get("LINK_VCS", "2")),
        depth=int(os.environ.get("LINK_DEPTH", "4")),
    )
    seed = int(os.environ.get("SEED") or random.randrange(1 << 31))
    return cfg, seed


class NodePorts:
    """Handles of every node's injection and ejection stream; inputs are written only when
    they change (a cocotb write per port per cycle would cost more than the simulation)."""

    def __init__(self, dut, nodes: int):
        def ports(stream, field):
            return [getattr(dut, f"{stream}__{i}__{field}") for i in range(nodes)]

        self.nodes = nodes
        self.inj_v, self.inj_p, self.inj_r = (
            ports("inject", f) for f in ("valid", "payload", "ready")
        )
        self.ej_v, self.ej_p, self.ej_r = (ports("eject", f) for f in ("valid", "payload", "ready"))
        self._offered = [None] * nodes
        self._ready = [None] * nodes

    def idle(self):
        """Every injection idle with a zero payload (never X on Icarus)."""
        for i in range(self.nodes):
            self.inj_v[i].value = 0
            self.inj_p[i].value = 0
        self._offered = [None] * self.nodes

    def offer(self, offers: dict):
        """Drive each node's injection: the flit in ``offers`` (by node), else idle."""
        for i in range(self.nodes):
            flit = offers.get(i)
            if flit is not self._offered[i]:
                self.inj_v[i].value = flit is not None
                if flit is not None:
                    self.inj_p[i].value = flit
                self._offered[i] = flit

    def set_ready(self, ready):
        """Drive each node's ejection ``ready``."""
        for i in range(self.nodes):
            if ready[i] != self._ready[i]:
                self.ej_r[i].value = ready[i]
                self._ready[i] = ready[i]
