"""Lockstep scoreboard: the TLM's cycle model stepped beside the RTL, every signal compared."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hdl.formats import acc_shape
from tlm.tensor.config import EngineConfig
from tlm.tensor.timing import CycleOut, EngineTiming, LoadBeat, MovingBeat

__all__ = ["Observed", "Scoreboard", "Mismatch"]


class Mismatch(AssertionError):
    """The RTL disagreed with the TLM."""


@dataclass
class Observed:
    """What the RTL showed during one cycle."""

    ld_ready: bool
    mv_ready: bool
    res_valid: bool
    res_last: bool
    res_data: np.ndarray
    flags: int
    counts: tuple[int, ...]


class Scoreboard:
    """Steps :class:`~tlm.tensor.timing.EngineTiming` once per cycle with the inputs the RTL
    saw and compares handshakes, results (value, ``last``, cycle) and status exactly.

    Parameters
    ----------
    cfg : EngineConfig
    seed : int
        The bench's seed, quoted in every failure message so the run can be repeated.
    where : str
        Said after the seed in failure messages (which part of the run, e.g. its sub-seed).
    plant_mismatch : bool
        Fault injection for the triage tests: expect the first result with its lowest bit
        flipped, so that a correct RTL fails.
    coverage : verif.coverage.tensor.EngineCoverage, optional
        Sampled every cycle from the beats and the model (functional coverage).
    """

    def __init__(
        self,
        cfg: EngineConfig,
        seed: int | None = None,
        *,
        where: str = "",
        plant_mismatch: bool = False,
        coverage=None,
    ):
        self.cfg = cfg
        self.seed = seed
        self.where = where
        self.plant_mismatch = plant_mismatch
        self.coverage = coverage
        self.model = EngineTiming(cfg)
        self._mask = (1 << acc_shape(cfg).width) - 1
        self.results = 0
        self.loads = 0
        self.moves = 0

    def _fail(self, what: str, expected, got):
        raise Mismatch(
            f"cycle {self.model.cycle - 1}: {what}: TLM expects {expected!r}, RTL has {got!r}"
            f" (seed {self.seed}{', ' + self.where if self.where else ''})"
        )

    def check(
        self, ld: LoadBeat | None, mv: MovingBeat | None, res_ready: bool, rtl: Observed
    ) -> CycleOut:
        """Compare one cycle; return the model's view of it (which beats were accepted)."""
        if self.coverage is not None:
            self.coverage.before(self.model)
        exp = self.model.step(ld, mv, res_ready)
        if self.coverage is not None:
            self.coverage.after(self.model, ld, mv, res_ready, exp)
        if ld is not None and exp.ld_ready != rtl.ld_ready:
            self._fail("ld_stream.ready", exp.ld_ready, rtl.ld_ready)
        if mv is not None and exp.mv_ready != rtl.mv_ready:
            self._fail("mv_stream.ready", exp.mv_ready, rtl.mv_ready)
        if exp.res_valid != rtl.res_valid:
            self._fail("res_stream.valid", exp.res_valid, rtl.res_valid)
        if exp.res_valid:
            if exp.res_last != rtl.res_last:
                self._fail(
                    f"res_stream.payload.last of result {self.results}", exp.res_last, rtl.res_last
                )
            # Results are compared as the raw bits of the accumulator: binary32 bit for bit,
            # integer sums in two's complement.
            want = exp.res_data
            if want.dtype == np.float32:
                want = want.view(np.uint32)
            want = want.astype(np.int64) & self._mask
            if self.plant_mismatch and self.results == 0:
                want = want ^ 1
            got = np.asarray(rtl.res_data).astype(np.int64) & self._mask
            if not np.array_equal(want, got):
                bad = np.flatnonzero(want != got)
                self._fail(
                    f"result {self.results}, lanes {bad[:8].tolist()}",
                    [hex(v) for v in want[bad[:8]]],
                    [hex(v) for v in got[bad[:8]]],
                )
        if exp.flags != rtl.flags:
            self._fail("status.flags", exp.flags, rtl.flags)
        if exp.counts != tuple(rtl.counts):
            self._fail("status.counts", exp.counts, tuple(rtl.counts))
        self.results += exp.res_fire
        self.loads += exp.ld_fire
        self.moves += exp.mv_fire
        return exp
