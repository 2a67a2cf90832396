"""Functional coverage of the tensor engine, sampled by the lockstep scoreboard
(:class:`verif.tensor.scoreboard.Scoreboard`) from the beats it drives and the cycle model it
steps: the model is cycle-exact and every cycle has been compared with the RTL, so what it did
is what the RTL did. The same sampler runs on the model alone (:mod:`verif.coverage.tlm`).

The stationary's format, K and the misuse counters are read from the model's state
(``EngineTiming``'s bank and counter fields) after each step.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from tlm.tensor import matmul
from tlm.tensor.config import EngineConfig, ErrorKind
from verif.common.patterns import PATTERNS
from verif.tensor.fp_operands import F32_MAX

from .db import Covergroup

__all__ = ["ITEMS", "EngineCoverage", "pattern_labels"]


@cache
def _pairs() -> list[str]:
    """Every (stationary, moving) format pair an engine with every format allows."""
    return [f"{s.name}/{m.name}" for s, m in EngineConfig(1, 1, "all").pairs()]


def pattern_labels() -> list[str]:
    return [f"{stream}:{name}" for stream in ("ld", "mv", "ready") for name in PATTERNS]


#: Item name -> bins (labels).
ITEMS = {
    "tensor.format_pair": _pairs(),
    "tensor.op_kind": ["new stationary", "reused stationary"],
    "tensor.k": ["K=1", "1<K<rows", "K=rows"],
    "tensor.n": ["N=1", "1<N<latency", "N>=latency"],
    "tensor.double_buffer": [
        "load while multiplying",
        "new stationary back to back",
        "moving waits for its stationary",
    ],
    "tensor.misuse": [kind.name for kind in ErrorKind],
    # misuse while its counter is already at its largest value (it stays there)
    "tensor.misuse_saturated": [kind.name for kind in ErrorKind],
    "tensor.backpressure": [
        "ld stalled",
        "mv stalled",
        "result stalled",
        "result queue full",
        "fp32 quarter rate",
    ],
    "tensor.patterns": pattern_labels(),
    # a binary32 overflow to infinity from finite operands: in a product, or in the sum of
    # finite products (the accumulator's own overflow; stimulus.overflow_op directs it)
    "tensor.accumulate": ["product overflow", "sum overflow"],
}


#: Misuse that drops a whole moving op.
_DROP_OP = {ErrorKind.NO_STATIONARY, ErrorKind.MOVING_FORMAT, ErrorKind.FORMAT_MISMATCH}


class EngineCoverage:
    """Samples :data:`ITEMS` once per cycle: call :meth:`before` with the model before it
    steps, :meth:`after` with the cycle's beats and the model's :class:`CycleOut`."""

    def __init__(self, cfg: EngineConfig):
        self.cfg = cfg
        self.group = Covergroup(ITEMS)
        self._in_op = False
        self._op_live = False
        self._op_beats = 0
        self._last_end = None
        self._cycle = 0
        self._pre = (0, 0, (0,) * len(ErrorKind))

    def patterns(self, ld: str, mv: str, ready: str):
        """The stream patterns of a run."""
        self.group.sample_all("tensor.patterns", [f"ld:{ld}", f"mv:{mv}", f"ready:{ready}"])

    def before(self, model):
        self._pre = (model._mv_hold, len(model._queue), tuple(model._counts))

    def after(self, model, ld, mv, res_ready, out):
        cfg, g = self.cfg, self.group
        hold, queued, counts = self._pre
        errors = model.errors  # this step's misuse, counted or not (a full counter stays)
        top = (1 << cfg.status_bits) - 1
        g.sample_all("tensor.misuse", [k.name for k in errors])
        g.sample_all("tensor.misuse_saturated", [k.name for k in errors if counts[k] == top])
        first = not self._in_op
        stalls = set()
        if ld is not None and not out.ld_fire:
            stalls.add("ld stalled")
        if mv is not None and not out.mv_fire:
            stalls.add("mv stalled")
            if hold:
                stalls.add("fp32 quarter rate")
            if first and mv.load and queued < 2 and not hold:
                g.sample("tensor.double_buffer", "moving waits for its stationary")
        if out.res_valid and not res_ready:
            stalls.add("result stalled")
        if queued == 2:
            stalls.add("result queue full")
        g.sample_rising("tensor.backpressure", stalls)
        if out.ld_fire and (self._in_op or out.mv_fire):
            g.sample("tensor.double_buffer", "load while multiplying")
        if out.mv_fire:
            if first:
                dropped = bool(set(errors) & _DROP_OP)
                self._op_live, self._op_beats = not dropped, 0
                if not dropped:
                    self._sample_op(model, mv)
            if self._op_live and cfg.has_float:
                self._sample_accumulate(model, mv)
            self._op_beats += 1
            self._in_op = not mv.last
            if mv.last:
                if self._op_live:
                    n, latency = self._op_beats, cfg.latency
                    label = "N=1" if n == 1 else "1<N<latency" if n < latency else "N>=latency"
                    g.sample("tensor.n", label)
                self._last_end = self._cycle
        self._cycle += 1

    def _sample_op(self, model, mv):
        g, rows = self.group, self.cfg.rows
        bank = model._act
        pair = f"{model._bank_fmt[bank].name}/{model._mv_fmt.name}"
        g.sample("tensor.format_pair", pair)
        g.sample("tensor.op_kind", "new stationary" if mv.load else "reused stationary")
        k = model._bank_k[bank]
        g.sample_all("tensor.k", [lbl for lbl, hit in _k_labels(k, rows) if hit])
        if mv.load and self._last_end == self._cycle - 1:
            g.sample("tensor.double_buffer", "new stationary back to back")

    def _sample_accumulate(self, model, mv):
        """A live moving beat whose column of results overflows binary32 from finite operands:
        in a product, or only in the sum (the model's result, computed again only when the
        products' magnitudes add up past binary32's largest)."""
        bank = model._act
        k, w_fmt, x_fmt = model._bank_k[bank], model._bank_fmt[bank], model._mv_fmt
        if w_fmt.kind != "float" or x_fmt is None or x_fmt.kind != "float":
            return
        w = model._bank_w[bank][:k]
        x = np.asarray(mv.data, x_fmt.dtype)[:k]
        with np.errstate(all="ignore"):
            w64, x64 = w.astype(np.float64), x.astype(np.float64)
            if not (np.isfinite(w64).all() and np.isfinite(x64).all()):
                return
            products = w64 * x64[:, None]
            if np.isinf(products.astype(np.float32)).any():
                self.group.sample("tensor.accumulate", "product overflow")
            elif np.abs(products).sum(axis=0).max() > F32_MAX:
                value = matmul(w, x[:, None], cfg=self.cfg, fmt=(w_fmt, x_fmt))
                if np.isinf(value).any():
                    self.group.sample("tensor.accumulate", "sum overflow")


def _k_labels(k: int, rows: int):
    return [("K=1", k == 1), ("1<K<rows", 1 < k < rows), ("K=rows", k == rows)]
