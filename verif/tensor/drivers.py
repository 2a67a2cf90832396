"""Producers and consumer for the tensor engine's streams, shared by every bench.

A producer offers its next beat in a cycle its pattern allows and holds it (valid stays high,
payload stable) until accepted, as the stream protocol requires. The consumer's ``ready``
follows its own pattern.
"""

from __future__ import annotations

from collections import deque

from tlm.tensor.timing import CycleOut

from .stimulus import Stimulus

__all__ = ["Traffic"]


class Traffic:
    """Offers of both input streams and ``ready`` of the result stream, cycle by cycle.

    Parameters
    ----------
    stim : Stimulus
    ld_pattern, mv_pattern, ready_pattern : iterator of bool
        When each producer may raise ``valid`` and when the consumer is ready.
    """

    def __init__(self, stim: Stimulus, ld_pattern, mv_pattern, ready_pattern):
        self.stim = stim
        self._ld = deque(stim.ld_beats)
        self._mv = deque(stim.mv_beats)
        self._patterns = (ld_pattern, mv_pattern, ready_pattern)
        self.ld = None
        self.mv = None
        self.ready = False
        self.results = 0

    def offers(self):
        """Decide this cycle's ``(ld beat or None, mv beat or None, res ready)``."""
        ld_p, mv_p, rdy_p = self._patterns
        if self.ld is None and next(ld_p) and self._ld:
            self.ld = self._ld.popleft()
        if self.mv is None and next(mv_p) and self._mv:
            self.mv = self._mv.popleft()
        self.ready = next(rdy_p)
        return self.ld, self.mv, self.ready

    def update(self, out: CycleOut):
        """Retire the beats the engine accepted this cycle."""
        if out.ld_fire:
            self.ld = None
        if out.mv_fire:
            self.mv = None
        self.results += out.res_fire

    @property
    def done(self) -> bool:
        pending = self._ld or self._mv or self.ld or self.mv
        return self.results == self.stim.results and not pending
