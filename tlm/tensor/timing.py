"""Cycle-exact model of the tensor engine RTL (``hdl.tensor.engine.TensorEngine``).

The model mirrors the engine's control: each call to :meth:`EngineTiming.step` takes what is on
the input wires during one clock cycle (valid and payload of both input streams, ready of the
result stream) and returns what the engine shows during that cycle (ready of both inputs, the
result register, the status), then advances one clock. A cocotb scoreboard steps it in lockstep
with the RTL and compares every signal every cycle; the values of results come from
:func:`tlm.tensor.matmul`, so the RTL is held to the values and the cycles at once.

Timing rules (the "tick" is a cycle in which the engine advances: its two-entry result
queue is not full at the start of the cycle):

* a moving beat accepted at tick ``t`` has its result at the queue's tail at tick
  ``t + cfg.latency`` (``rows * add_stages + mul_stages + cols + decode_stages``: the
  pipeline, see :class:`~tlm.tensor.config.EngineConfig`); results leave in order, one per cycle the
  consumer is ready;
* a LoadStationary may run while the array computes with the other bank; a MultiplyMoving
  whose first beat asks for the new stationary (``load``) is accepted from the cycle after
  the load's last beat, and a further load is accepted from that first beat on;
* back to back, each op with a new stationary takes ``max(N, K)`` cycles;
* each beat carries a format code (:meth:`EngineConfig.code`), read on an op's first beat:
  the stationary keeps the format it was loaded with, the moving operand has its own, and
  the pair must mix (:func:`tlm.formats.formats_mix`) or the op is dropped;
* after each accepted moving beat of an FP32 op the moving stream waits
  ``FP32_BEAT_INTERVAL - 1`` ticks (quarter rate).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..formats import formats_mix
from .config import FP32_BEAT_INTERVAL, EngineConfig, ErrorKind
from .matmul import matmul, resolve_formats

__all__ = ["EngineTiming", "CycleOut", "LoadBeat", "MovingBeat", "run_ops", "Op"]


@dataclass(frozen=True)
class LoadBeat:
    """One LoadStationary beat: a row of the stationary (``cols`` values), declared K, last,
    and the format code (read on the first beat of a load, like K)."""

    data: np.ndarray
    k: int
    last: bool
    fmt: int = 0


@dataclass(frozen=True)
class MovingBeat:
    """One MultiplyMoving beat: a column of the moving matrix (``rows`` values), load, last,
    and the moving operand's format code (read on the first beat of an op)."""

    data: np.ndarray
    load: bool
    last: bool
    fmt: int = 0


def _dtype(fmt) -> np.dtype:
    """The array type the model keeps operands of ``fmt`` in."""
    return np.dtype(np.int64) if fmt.kind == "int" else fmt.dtype


@dataclass
class CycleOut:
    """What the engine shows during one cycle."""

    ld_ready: bool
    mv_ready: bool
    res_valid: bool
    res_last: bool
    res_data: np.ndarray | None
    flags: int
    counts: tuple[int, ...]
    ld_fire: bool = False
    mv_fire: bool = False
    res_fire: bool = False


@dataclass
class EngineTiming:
    """Cycle-exact model of one tensor engine; see the module docstring.

    Examples
    --------
    >>> import numpy as np
    >>> from tlm.tensor import EngineConfig
    >>> model = EngineTiming(EngineConfig(2, 2))
    >>> out = model.step(ld=LoadBeat(np.array([1, 2]), k=1, last=True))
    >>> out.ld_ready, model.cycle
    (True, 1)
    """

    cfg: EngineConfig
    cycle: int = 0
    tick: int = 0

    def __post_init__(self):
        cfg = self.cfg
        if cfg.has_mx:
            raise ValueError(
                "cfg has MX formats, which the RTL this model mirrors does not have "
                "(docs/tensor_engine.md); their values are tlm.tensor.matmul's, their cost "
                "matmul_cycles'"
            )
        self._act = 0
        self._act_valid = False
        self._pend = False
        self._bank_k = [0, 0]
        self._bank_fmt = [cfg.fmt, cfg.fmt]
        self._bank_w = [np.zeros((cfg.rows, cfg.cols), _dtype(cfg.fmt)) for _ in range(2)]
        self._mv_in_op = False
        self._mv_dropping = False
        self._mv_fmt = cfg.fmt  # the moving format of the op in progress
        self._mv_hold = 0  # ticks the moving stream still waits (FP32 quarter rate)
        fp32 = [f for f in cfg.formats if f.name == "fp32"]
        self._fp32 = fp32[0] if fp32 else None
        self._ld_fmt = cfg.fmt
        self._ld_in_op = False
        self._ld_dropping = False
        self._ld_row = 0
        self._ld_k = 0
        self._pipe = deque([(False, False, None)] * (cfg.latency - 1))
        self._queue: deque = deque()  # results waiting to leave, at most two
        self._flags = 0
        self._counts = [0] * len(ErrorKind)
        self.errors: list = []

    def _error(self, kind: ErrorKind):
        self.errors.append(kind)
        self._flags |= 1 << kind
        self._counts[kind] = min(self._counts[kind] + 1, (1 << self.cfg.status_bits) - 1)

    def step(
        self,
        ld: LoadBeat | None = None,
        mv: MovingBeat | None = None,
        res_ready: bool = True,
    ) -> CycleOut:
        """Advance one clock cycle.

        Parameters
        ----------
        ld, mv : LoadBeat or MovingBeat or None
            The beat offered (``valid`` high) on each input stream this cycle, or ``None``.
        res_ready : bool
            ``ready`` of the result stream this cycle.
        """
        cfg = self.cfg
        #: The misuse this step flagged, counted or not (a saturated counter does not move).
        self.errors = []
        res_valid = bool(self._queue)
        res_last, res_data = self._queue[0] if res_valid else (False, None)
        out = CycleOut(
            ld_ready=False,
            mv_ready=False,
            res_valid=res_valid,
            res_last=res_last,
            res_data=res_data,
            flags=self._flags,
            counts=tuple(self._counts),
        )
        adv = len(self._queue) < 2  # registers only: never waits on res_ready this cycle
        out.res_fire = res_valid and res_ready

        # MultiplyMoving.
        for beat in (ld, mv):
            if beat is not None and not 0 <= beat.fmt < 1 << cfg.fmt_bits:
                raise ValueError(
                    f"{type(beat).__name__} fmt={beat.fmt} does not fit the {cfg.fmt_bits}-bit "
                    f"format field of this engine (0..{(1 << cfg.fmt_bits) - 1})"
                )
        mv_first = not self._mv_in_op
        mv_wants_load = mv is not None and mv_first and mv.load
        out.mv_ready = adv and self._mv_hold == 0 and (not mv_wants_load or self._pend)
        mv_fire = out.mv_fire = mv is not None and out.mv_ready
        activate = mv_fire and mv_wants_load
        act_now = 1 - self._act if activate else self._act
        x_fmt = (cfg.format_of(mv.fmt) if mv_first else self._mv_fmt) if mv_fire else None
        w_fmt = self._bank_fmt[act_now]
        mv_error = mv_fire and mv_first and not mv.load and not self._act_valid
        fmt_error = mv_fire and mv_first and not mv_error and x_fmt is None
        mix_error = (
            mv_fire
            and mv_first
            and not mv_error
            and not fmt_error
            and not formats_mix(w_fmt, x_fmt)
        )
        mv_drop = (mv_error or fmt_error or mix_error) if mv_first else self._mv_dropping
        mv_live = mv_fire and not mv_drop
        value = None
        if mv_live:
            k = self._bank_k[act_now]
            column = np.asarray(mv.data, _dtype(x_fmt))[:k, None]
            w = self._bank_w[act_now][:k]
            value = matmul(w, column, cfg=cfg, fmt=(w_fmt, x_fmt))[:, 0]

        # LoadStationary.
        out.ld_ready = adv and (not self._pend or activate)
        ld_fire = out.ld_fire = ld is not None and out.ld_ready
        ld_first = not self._ld_in_op
        if ld is not None and not 0 <= ld.k < 1 << cfg.k_bits:
            raise ValueError(
                f"LoadBeat k={ld.k} does not fit the {cfg.k_bits}-bit field of a "
                f"{cfg.rows}-row engine (0..{(1 << cfg.k_bits) - 1})"
            )
        k_decl = (ld.k if ld_first else self._ld_k) if ld_fire else 0
        row = 0 if ld_first else self._ld_row
        k_error = ld_fire and ld_first and not 1 <= ld.k <= cfg.rows
        ld_fmt = (cfg.format_of(ld.fmt) if ld_first else self._ld_fmt) if ld_fire else None
        ld_fmt_error = ld_fire and ld_first and ld_fmt is None
        bad = (k_error or ld_fmt_error) if ld_first else self._ld_dropping
        at_end = row == k_decl - 1
        len_error = ld_fire and not bad and at_end != ld.last
        commit = ld_fire and not bad and at_end and ld.last
        target = 1 - act_now
        if ld_fire and not bad:
            if ld_first:  # rows at or beyond K keep stale values the op never reads
                self._bank_w[target] = np.zeros((cfg.rows, cfg.cols), _dtype(ld_fmt))
            self._bank_w[target][row % cfg.rows] = np.asarray(ld.data, _dtype(ld_fmt))

        # Clock edge.
        if mv_fire:
            self._mv_in_op = not mv.last
            self._mv_dropping = mv_drop and not mv.last
            if mv_first:
                self._mv_fmt = x_fmt
        if activate:
            self._act = 1 - self._act
            self._act_valid = True
        if ld_fire:
            self._ld_in_op = not ld.last
            self._ld_dropping = not ld.last and (bad or len_error)
            self._ld_row = (row + 1) % (1 << max(0, (cfg.rows - 1).bit_length()))
            self._ld_k = k_decl
            self._ld_fmt = ld_fmt
        if commit:
            self._pend = True
            self._bank_k[target] = k_decl
            self._bank_fmt[target] = ld_fmt
        elif activate:
            self._pend = False
        if out.res_fire:
            self._queue.popleft()
        if adv:
            valid, last, data = self._pipe.pop()
            if valid:
                self._queue.append((last, data))
            self._pipe.appendleft((mv_live, bool(mv_live and mv.last), value))
            self.tick += 1
            if mv_fire and x_fmt is not None and x_fmt is self._fp32:
                self._mv_hold = FP32_BEAT_INTERVAL - 1
            elif self._mv_hold:
                self._mv_hold -= 1
        if mv_error:
            self._error(ErrorKind.NO_STATIONARY)
        if len_error:
            self._error(ErrorKind.LOAD_LENGTH)
        if k_error:
            self._error(ErrorKind.LOAD_K)
        if ld_fmt_error:
            self._error(ErrorKind.LOAD_FORMAT)
        if fmt_error:
            self._error(ErrorKind.MOVING_FORMAT)
        if mix_error:
            self._error(ErrorKind.FORMAT_MISMATCH)
        self.cycle += 1
        return out


@dataclass
class Op:
    """One nc_matmul as the engine receives it: an optional new stationary and a moving matrix.

    ``stationary=None`` reuses the stationary of the previous op. ``fmt`` names the formats
    as :func:`tlm.tensor.matmul` takes them (one name, or ``(stationary, moving)``); by
    default they follow the dtypes (integers: the engine's integer format).
    """

    moving: np.ndarray
    stationary: np.ndarray | None = None
    fmt: str | tuple[str, str] | None = None
    results: list = field(default_factory=list)

    def formats(self, cfg: EngineConfig) -> tuple:
        """(stationary, moving) formats, checked against ``cfg``; the stationary's is
        ``None`` for an op that reuses the previous stationary."""
        if self.stationary is None:
            names = self.fmt[1] if isinstance(self.fmt, tuple) else self.fmt
            m_fmt = resolve_formats(self.moving, self.moving, cfg, names)[1]
            return None, m_fmt
        return resolve_formats(self.stationary, self.moving, cfg, self.fmt)

    def load_beats(self, cfg: EngineConfig) -> list[LoadBeat]:
        if self.stationary is None:
            return []
        code = cfg.code(self.formats(cfg)[0])
        k = self.stationary.shape[0]
        padded = np.zeros((k, cfg.cols), self.stationary.dtype)
        padded[:, : self.stationary.shape[1]] = self.stationary
        return [LoadBeat(padded[j], k, j == k - 1, code) for j in range(k)]

    def moving_beats(self, cfg: EngineConfig) -> list[MovingBeat]:
        code = cfg.code(self.formats(cfg)[1])
        k, n = self.moving.shape
        padded = np.zeros((cfg.rows, n), self.moving.dtype)
        padded[:k] = self.moving
        return [
            MovingBeat(padded[:, j], self.stationary is not None and j == 0, j == n - 1, code)
            for j in range(n)
        ]


def run_ops(
    cfg: EngineConfig,
    ops: Sequence[Op],
    *,
    ld_pattern: Iterable[bool] | None = None,
    mv_pattern: Iterable[bool] | None = None,
    ready_pattern: Iterable[bool] | None = None,
    max_cycles: int = 10_000_000,
) -> tuple[list[tuple[int, np.ndarray]], int]:
    """Run ``ops`` through the model with producers and a consumer of the given patterns.

    A producer offers its next beat in a cycle where its pattern is true and keeps it offered
    until accepted (a beat once valid stays valid). Patterns cycle; ``None`` means always.

    Returns
    -------
    results : list of (cycle, vector)
        The cycle each result beat left the engine, and its value (``cols`` lanes).
    cycles : int
        Cycles until the last result left (the op sequence's cost).
    """
    import itertools

    def pattern(p):
        return itertools.cycle([True]) if p is None else itertools.cycle(p)

    ld_q = deque(b for op in ops for b in op.load_beats(cfg))
    mv_q = deque(b for op in ops for b in op.moving_beats(cfg))
    expected = sum(op.moving.shape[1] for op in ops)
    lp, mp, rp = pattern(ld_pattern), pattern(mv_pattern), pattern(ready_pattern)
    model = EngineTiming(cfg)
    results: list[tuple[int, np.ndarray]] = []
    ld_offer = mv_offer = None
    while len(results) < expected:
        if model.cycle >= max_cycles:
            raise RuntimeError(f"engine made no progress in {max_cycles} cycles")
        if ld_offer is None and next(lp) and ld_q:
            ld_offer = ld_q.popleft()
        if mv_offer is None and next(mp) and mv_q:
            mv_offer = mv_q.popleft()
        cycle = model.cycle
        out = model.step(ld_offer, mv_offer, next(rp))
        if out.ld_fire:
            ld_offer = None
        if out.mv_fire:
            mv_offer = None
        if out.res_fire:
            results.append((cycle, out.res_data))
    return results, results[-1][0] + 1 if results else 0
