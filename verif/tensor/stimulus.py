"""Random stimulus for the tensor engine: ops of random shapes and data, and misuse."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hdl.formats import operand_shape
from tlm.tensor.config import EngineConfig
from tlm.tensor.timing import LoadBeat, MovingBeat, Op
from verif.common.patterns import PATTERNS, pattern
from verif.tensor.fp_operands import (
    F32_MAX,
    edge_operands,
    special_operands,
    stored_fraction_bits,
)

__all__ = [
    "Stimulus",
    "random_stimulus",
    "run_stimulus",
    "overflow_op",
    "rounding_ops",
    "adder_ops",
    "lowest_one_ops",
    "carry_ops",
    "sum_carry_ops",
    "subnormal_ops",
    "mismatch_burst",
    "bad_format_loads",
    "pattern",
    "PATTERNS",
]


@dataclass
class Stimulus:
    """Beats for both input streams, with the ops they came from (for reports)."""

    ld_beats: list[LoadBeat] = field(default_factory=list)
    mv_beats: list[MovingBeat] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
    misuse: list[str] = field(default_factory=list)

    @property
    def results(self) -> int:
        return sum(op.moving.shape[1] for op in self.ops)


#: The share of float operand blocks (an op's stationary or moving, a misuse's data) in
#: which :data:`SPECIALS_DENSITY` of the operands are special values (:func:`special_operands`).
#: Edge operands alone make an infinity about one operand in 200, too few for an infinite
#: product next to a finite one while the engine stalls.
SPECIALS_P = 0.3
SPECIALS_DENSITY = 0.4


def _data(rng, shape, fmt):
    """Operands: uniform, extremes only, or sparse, so -128 and 127 appear often; for
    floating-point formats, raw bit patterns biased towards the edges (subnormals, zeros,
    infinities, NaN, the largest values, ties), in :data:`SPECIALS_P` of the draws with
    :data:`SPECIALS_DENSITY` of them special values."""
    if fmt.kind == "float":
        count = int(np.prod(shape))
        unsigned = np.dtype(f"u{fmt.storage_bits // 8}")
        raw = np.array(edge_operands(fmt, rng, count), unsigned).reshape(shape)
        if rng.random() < SPECIALS_P:
            # infinities, NaNs and zeros beside finite operands in one stream: products whose
            # flags differ from the next beat's (a stalled pipeline must keep each one's)
            specials = np.array(special_operands(fmt), unsigned)
            mask = rng.random(shape) < SPECIALS_DENSITY
            raw[mask] = rng.choice(specials, int(mask.sum()))
        return raw.view(fmt.dtype)
    kind = rng.integers(0, 4)
    if kind == 0:
        return rng.choice(np.array([fmt.min_value, fmt.max_value]), size=shape)
    values = rng.integers(fmt.min_value, fmt.max_value + 1, size=shape)
    if kind == 1:
        values[rng.random(shape) < 0.7] = 0
    return values


def _size(rng, limit):
    """1, the maximum, or anything between, with the edges drawn often."""
    return int(rng.choice([1, limit, rng.integers(1, limit + 1), rng.integers(1, limit + 1)]))


def random_stimulus(
    cfg: EngineConfig,
    rng: np.random.Generator,
    *,
    ops: int,
    max_n: int = 64,
    misuse: bool = True,
    no_stationary: bool = False,
) -> Stimulus:
    """``ops`` nc_matmuls of random K, M, N (edges included) and random formats among the
    pairs the engine allows (:meth:`EngineConfig.pairs`), some reusing the previous
    stationary (with a moving format that mixes with it), with misuse mixed in when
    ``misuse`` is set: a moving op before any load, loads with a bad K, cut short or
    overrun, and on a multi-format engine format codes that name no format and moving
    formats that do not mix with the stationary. With ``misuse``, the moving op before any
    load comes in half the runs, or always with ``no_stationary``."""
    stim = Stimulus()
    pairs = cfg.pairs()
    unknown = list(range(len(cfg.formats), 1 << cfg.fmt_bits))  # codes naming no format
    if misuse and (rng.random() < 0.5 or no_stationary):  # the draw is made either way
        # MultiplyMoving before any stationary: consumed, dropped, flagged.
        fmt = cfg.formats[rng.integers(len(cfg.formats))]
        n = _size(rng, 4)
        for j in range(n):
            stim.mv_beats.append(
                MovingBeat(_data(rng, cfg.rows, fmt), False, j == n - 1, cfg.code(fmt))
            )
        stim.misuse.append("no_stationary")
    s_fmt = None
    for _ in range(ops):
        if misuse and rng.random() < 0.15:
            stim.ld_beats.extend(_bad_load(cfg, rng, stim))
        if misuse and s_fmt is not None and rng.random() < 0.15:
            stim.mv_beats.extend(_bad_moving(cfg, rng, stim, s_fmt, unknown))
        k, m, n = _size(rng, cfg.rows), _size(rng, cfg.cols), _size(rng, max_n)
        reuse = s_fmt is not None and rng.random() < 0.25
        if reuse:
            k = stim.ops[-1].moving.shape[0]
            choices = [mf for sf, mf in pairs if sf == s_fmt]
            m_fmt = choices[rng.integers(len(choices))]
        else:
            s_fmt, m_fmt = pairs[rng.integers(len(pairs))]
        stationary = None if reuse else _data(rng, (k, m), s_fmt)
        op = Op(_data(rng, (k, n), m_fmt), stationary, (s_fmt, m_fmt))
        stim.ops.append(op)
        stim.ld_beats.extend(op.load_beats(cfg))
        # Rows at or beyond K carry garbage, not zeros: the engine must ignore them (a zero
        # would hide a PE that adds a row it should skip).
        for beat in op.moving_beats(cfg):
            data = beat.data.copy()
            data[k:] = _data(rng, cfg.rows - k, m_fmt)
            stim.mv_beats.append(MovingBeat(data, beat.load, beat.last, beat.fmt))
    return stim


def run_stimulus(cfg: EngineConfig, seed: int, run: int, *, ops, max_n, misuse=True) -> Stimulus:
    """The stimulus of run ``run`` (its pattern triple) of a tensor bench with ``seed``: drawn
    from ``seed + run``; the first run always begins with the moving op before any load (the
    first draw of a sub-seed is the same on every engine, so by chance a seed's runs could all
    miss it; a second one of a single beat goes before it) and ends with :func:`overflow_op`
    where the engine's formats can overflow, then the :func:`rounding_ops` and
    :func:`adder_ops` its formats allow; with ``misuse``, the :func:`mismatch_burst` and
    :func:`bad_format_loads` go before these (the bench stops at the last result: a count
    after the last beat is never seen)."""
    rng = np.random.default_rng(seed + run)
    stim = random_stimulus(
        cfg, rng, ops=ops, max_n=max_n, misuse=misuse, no_stationary=misuse and run == 0
    )
    if misuse and run == 0:
        # a second moving op before any load, ahead of the random one: the one misuse that can
        # only come before the first load happens twice, so a narrow counter saturates on it
        zeros = np.zeros(cfg.rows, stim.mv_beats[0].data.dtype)
        stim.mv_beats.insert(0, MovingBeat(zeros, False, True, stim.mv_beats[0].fmt))
        stim.misuse.insert(0, "no_stationary")
    if misuse and run == 0:  # before the directed ops: their cycles show the last count
        stim.mv_beats.extend(mismatch_burst(cfg, rng, stim))
        stim.ld_beats.extend(bad_format_loads(cfg, stim))
    directed = (
        [
            overflow_op(cfg),
            *rounding_ops(cfg),
            *adder_ops(cfg),
            *lowest_one_ops(cfg),
            *carry_ops(cfg),
            *sum_carry_ops(cfg),
            *subnormal_ops(cfg),
        ]
        if run == 0
        else []
    )
    for op in directed:
        if op is None:
            continue
        stim.ops.append(op)
        stim.ld_beats.extend(op.load_beats(cfg))
        stim.mv_beats.extend(op.moving_beats(cfg))
    return stim


#: Moving ops of :func:`mismatch_burst`: the FORMAT_MISMATCH counter passes 2**6, so its bit
#: 6 is set in every first run (a random run counts a few; a mutation of that bit survived).
MISMATCH_BURST = 64


def mismatch_burst(cfg: EngineConfig, rng, stim: Stimulus) -> list[MovingBeat]:
    """:data:`MISMATCH_BURST` moving ops of one beat each, in a format that does not mix
    with the stationary of the last op of ``stim`` (the one in use after it): each dropped
    whole, flagged and counted, the cheapest misuse to repeat. None on an engine whose
    formats all mix with that one."""
    if not stim.ops:
        return []
    s_fmt = stim.ops[-1].fmt[0]
    clash = [f for f in cfg.formats if (s_fmt, f) not in cfg.pairs()]
    if not clash:
        return []
    fmt = clash[0]
    data = _data(rng, (MISMATCH_BURST, cfg.rows), fmt)
    stim.misuse.append(f"format_mismatch x{MISMATCH_BURST}")
    return [MovingBeat(row, False, True, cfg.code(fmt)) for row in data]


#: Loads of :func:`bad_format_loads`: the LOAD_FORMAT counter passes 1 -> 2 -> 3, so each of
#: its low bits changes both ways (a random run has about one such load in four; the float
#: target's m015, bit 0 of that counter's +1 tied to 1, counted 1 -> 3 unseen).
LOAD_FORMAT_BURST = 3


def bad_format_loads(cfg: EngineConfig, stim: Stimulus) -> list[LoadBeat]:
    """:data:`LOAD_FORMAT_BURST` loads of one beat (K = 1) with a format code that names no
    format: each dropped whole, flagged and counted; raw zeros, no draw. None on an engine
    whose format codes all name a format."""
    unknown = range(len(cfg.formats), 1 << cfg.fmt_bits)
    if not unknown:
        return []
    stim.misuse.append(f"load_bad_format x{LOAD_FORMAT_BURST}")
    zeros = np.zeros(cfg.cols, np.int64)
    return [LoadBeat(zeros, 1, True, unknown[0]) for _ in range(LOAD_FORMAT_BURST)]


def _largest(fmt) -> int:
    """The raw bits of ``fmt``'s largest finite positive value (an IEEE-style format: the
    exponent below all ones, the fraction all ones)."""
    frac_bits = stored_fraction_bits(fmt)
    return (((1 << fmt.exp_bits) - 2) << frac_bits) | ((1 << frac_bits) - 1)


def _one(fmt) -> int:
    frac_bits = stored_fraction_bits(fmt)
    return ((1 << (fmt.exp_bits - 1)) - 1) << frac_bits


def overflow_op(cfg: EngineConfig) -> Op | None:
    """A directed op whose binary32 accumulation overflows: K = min(rows, 4) rows of the
    stationary at its format's largest finite value, the moving all 1.0, so every product is
    finite and the sum passes binary32's largest at the second row (the accumulator's overflow
    to infinity, which random operands of short sums never reach). ``None`` when no format
    pair of the engine can (FP8 and FP16 products are far below it) or the engine has one
    row."""
    if cfg.rows < 2:
        return None
    for s_fmt, m_fmt in cfg.pairs():
        if s_fmt.kind != "float" or m_fmt.kind != "float":
            continue
        big = np.array([_largest(s_fmt)], f"u{s_fmt.storage_bits // 8}").view(s_fmt.dtype)
        if not 2 * float(big.astype(np.float64)[0]) > F32_MAX:
            continue
        k, m, n = min(cfg.rows, 4), cfg.cols, 2
        stationary = np.full((k, m), _largest(s_fmt), f"u{s_fmt.storage_bits // 8}")
        moving = np.full((k, n), _one(m_fmt), f"u{m_fmt.storage_bits // 8}")
        return Op(moving.view(m_fmt.dtype), stationary.view(s_fmt.dtype), (s_fmt, m_fmt))
    return None


def _raw(fmt, value: float) -> int | None:
    """The raw bits of ``value`` in ``fmt``, or ``None`` when ``fmt`` does not hold it exactly
    (TF32: in the fraction bits it keeps)."""
    held = np.array([value]).astype(fmt.dtype)
    raw = int(held.view(f"u{fmt.storage_bits // 8}")[0])
    if float(held.astype(np.float64)[0]) != value or raw & ((1 << fmt.ignored_low_bits) - 1):
        return None
    return raw


def _directed(s_fmt, m_fmt, stationary, moving) -> Op | None:
    """An op of these values (rows of K), or ``None`` when a format does not hold one."""
    raws = []
    for fmt, values in ((s_fmt, stationary), (m_fmt, moving)):
        bits = [[_raw(fmt, v) for v in row] for row in values]
        if any(b is None for row in bits for b in row):
            return None
        raws.append(np.array(bits, f"u{fmt.storage_bits // 8}").view(fmt.dtype))
    return Op(raws[1], raws[0], (s_fmt, m_fmt))


#: The second moving row of :func:`rounding_ops`' sum op, one value a column (the first row
#: is 1.0): against the stationary column (-2, 1), sums whose lowest one sits at the
#: significand's last place, the next, or 7 places up, at exponent gaps of 1, 31 (the
#: adder's widest alignment) and beyond it (the smaller addend a sticky bit).
SUM_MOVING = (1.0, 1.5, 1 + 2.0**-7, 2.0**-30, 2.0**-40)


def rounding_ops(cfg: EngineConfig) -> list[Op]:
    """Directed ops at rounding corners of binary32 that random operands of short sums
    almost never reach (none on an integer engine):

    * K = 2, the stationary columns (2, -2**-24) and (-2, 1) side by side, the moving
      columns (1, v) for v in :data:`SUM_MOVING` that the format holds: ``2 - 2**-24`` is a
      tie that rounds up to 2, a carry out of 24 ones into the exponent field; ``-2 + v``
      are negative sums whose two's complement is 0 up to one low bit, so the adder's
      negation must invert every bit above it (each output bit of its prefix OR has its
      own tree). On the first format pair that holds 2, -2, 1 and -2**-24.
    * K = 1, a product that rounds up through the longest run of ones a format's
      significands can make: ``(1 + 2**-f) * (2 - 2**(1 - f))`` (``f`` fraction bits) is
      ``2 - 2**(1 - 2f)``, 2f ones; scaled to round ``u = max(0, 25 - 2f)`` places below
      binary32's normal range (TF32: 2**-131), its guard bit is the first one not kept, and
      the carry crosses all ``24 - u`` kept bits. On the format with the most fraction bits
      that can (FP32 in the normal range; TF32, BF16 below it).
    """
    floats = [(s, m) for s, m in cfg.pairs() if s.kind == m.kind == "float"]
    ops = []
    if cfg.rows >= 2:
        cols = [(2.0, -(2.0**-24)), (-2.0, 1.0)]
        stationary = [[cols[j % 2][k] for j in range(cfg.cols)] for k in range(2)]
        for s_fmt, m_fmt in floats:
            column = [v for v in SUM_MOVING if _raw(m_fmt, v) is not None]
            op = _directed(s_fmt, m_fmt, stationary, [[1.0] * len(column), column])
            if op is not None:
                ops.append(op)
                break
    best = None
    for s_fmt, m_fmt in floats:
        f = stored_fraction_bits(s_fmt) - s_fmt.ignored_low_bits
        u = max(0, 25 - 2 * f)
        if s_fmt == m_fmt and (u == 0 or s_fmt.exp_bits >= 8) and (best is None or f > best[1]):
            best = (s_fmt, f, u)
    if best is not None:
        fmt, f, u = best
        lead = -126 - u if u else 0  # the exponent of the product's leading one
        a = (1 + 2.0**-f) * 2.0 ** (lead // 2)
        b = (2 - 2.0 ** (1 - f)) * 2.0 ** (lead - lead // 2)
        ops.append(_directed(fmt, fmt, [[a] * cfg.cols], [[b]]))
    return [op for op in ops if op is not None]


#: Exponent gaps of :func:`adder_ops`' first op: 0 to 34, past the adder's widest alignment.
ADDER_GAPS = tuple(range(35))


def _factors(n: int, bits: int) -> tuple[int, int] | None:
    """``(a, b)``, ``a * b == n``, each of at most ``bits`` bits, ``a`` the least such; or
    ``None``."""
    for a in range(1, 1 << bits):
        if n % a == 0 and (n // a).bit_length() <= bits:
            return a, n // a
    return None


def _unit(n: int) -> float:
    """``n`` scaled by a power of two into [1, 2)."""
    return n / 2.0 ** (n.bit_length() - 1)


def negation_places(fmt) -> list[int]:
    """The ``q`` of :func:`adder_ops`' negation ops on ``fmt``: ``1 + 2**-q`` is a product of
    two of its values (``2**q + 1`` two factors of at most ``f + 1`` bits), ``q`` below 24."""
    f = stored_fraction_bits(fmt) - fmt.ignored_low_bits
    return [q for q in range(1, 24) if _factors(2**q + 1, f + 1) is not None]


def adder_ops(cfg: EngineConfig) -> list[Op]:
    """Directed ops that put the leading one of the binary32 adder's sum (before it is
    normalised) at each place of its 57-bit field, both signs, and the lowest one of a
    negative sum at each place a product can give it; random short sums of random exponents
    reach few of these places. On the float format (the same both sides) with the most
    fraction bits ``f``; K = 2; each column kept where the format holds it. Places below are
    of the field, 0 the smaller addend's last place (both addends have 24-bit significands,
    the leading one at 23).

    * Gaps: stationary (1, 1) and (-1, 1), moving columns ``(1.5 + 2**-f, 2**-g (1 + 2**-f))``
      for g in :data:`ADDER_GAPS`: ``u + v`` and ``-u + v``, the larger addend aligned ``g``
      places up (31 at most: then the smaller is a sticky bit), the sum's leading one at each
      place from 24 to 54, both signs (55 takes a significand of 2**24, a product rounded
      up).
    * Cancellations leaving ``+-k 2**-f`` (places ``23 - f`` to 22) and, where a product of
      ``2f + 2`` bits fits binary32's 24 (else products are rounded first), ``+-k 2**-2f``
      (places ``23 - 2f`` to ``22 - f``), for k = 2**j, 2**j + 1, 2**j - 1: the sum's leading
      one that many places below the operands' (negative: the adder's negation of a value
      all sign bits but for the low ones). Stationary (1, -1) and (-1, 1), moving
      ``(1 + (k + 1) 2**-f, 1 + 2**-f)``; as products, stationary ``(t, -1)`` and ``(-t, 1)``,
      ``t = 1 + 2**-f``, moving ``(1 + k 2**-f, 1 + (k + 1) 2**-f)``: ``t (1 + k 2**-f) =
      1 + (k + 1) 2**-f + k 2**-2f``. The second form leaves the sum's leading one at 17 and
      18, where the leading-zero count's node of places 17 to 24 decides its "lower half not
      all zeros" (a mutation of it survived the random ops).
    * Negations: ``2**e (1 + 2**-q) - 2**(e + 1) = -2**e (1 - 2**-q)``, the first product
      ``a * b`` with ``a b = 2**q + 1`` (:func:`negation_places`), the second ``-1 * 2**(e +
      1)``: a negative sum whose two's complement below place 23 is the one bit ``23 - q``
      (``|sum| = 2**23 - 2**(23 - q)``), so that every output of the adder's prefix OR from
      there to 22 rests on that bit alone, and one it misses flips place 23, inside the kept
      bits. The stationary's first row holds ``a`` a column (1 where ``a`` is 1: all such
      ``q`` in one op), its second -1; the moving columns ``(b, 2**(e + 1))``.

    None on an engine of one row or of no float format.
    """
    floats = [s for s, m in cfg.pairs() if s == m and s.kind == "float"]
    if cfg.rows < 2 or not floats:
        return []
    fmt = max(floats, key=lambda f: (f.exp_bits, stored_fraction_bits(f) - f.ignored_low_bits))
    f = stored_fraction_bits(fmt) - fmt.ignored_low_bits
    held = lambda col: all(_raw(fmt, v) is not None for v in col)  # noqa: E731

    def op(a, b, columns):
        """K = 2: stationary columns alternating ``a`` and ``b`` (rows of K), moving
        ``columns`` (pairs) that the format holds."""
        columns = [c for c in columns if held(c)]
        stationary = [[(a, b)[j % 2][k] for j in range(cfg.cols)] for k in range(2)]
        return (
            _directed(fmt, fmt, stationary, [list(r) for r in zip(*columns, strict=True)])
            if columns
            else None
        )

    gaps = [(1.5 + 2.0**-f, 2.0**-g * (1 + 2.0**-f)) for g in ADDER_GAPS]
    ks = sorted({k for j in range(f) for k in (2**j, 2**j + 1, 2**j - 1) if 0 < k < 2**f - 1})
    ops = [
        op((1.0, 1.0), (-1.0, 1.0), gaps),
        op((1.0, -1.0), (-1.0, 1.0), [(1 + (k + 1) * 2.0**-f, 1 + 2.0**-f) for k in ks]),
    ]
    if 2 * f + 2 <= 24:
        t = 1 + 2.0**-f
        cancels = [(1 + k * 2.0**-f, 1 + (k + 1) * 2.0**-f) for k in ks]
        ops.append(op((t, -1.0), (-t, 1.0), cancels))
    # Negations: (a, b, 2**(e + 1)) a place q; those with a = 1 together, the rest cols a time.
    parts = []
    for q in negation_places(fmt):
        a, b = _factors(2**q + 1, f + 1)
        e = q - (a.bit_length() - 1) - (b.bit_length() - 1)  # 2**e <= a b scaled < 2**(e + 1)
        parts.append((_unit(a), _unit(b), 2.0 ** (e + 1)))
    groups = [[p for p in parts if p[0] == 1.0]]
    rest = [p for p in parts if p[0] != 1.0]
    groups += [rest[i : i + cfg.cols] for i in range(0, len(rest), cfg.cols)]
    for group in groups:
        if not group:
            continue
        w = [group[j][0] if j < len(group) else 1.0 for j in range(cfg.cols)]
        ops.append(
            _directed(
                fmt, fmt, [w, [-1.0] * cfg.cols], [[p[1] for p in group], [p[2] for p in group]]
            )
        )
    return [o for o in ops if o is not None]


def _bad_moving(cfg, rng, stim, s_fmt, unknown):
    """A moving op reusing the stationary with a format code naming no format, or with a
    format that does not mix with the stationary's: dropped whole, flagged and counted."""
    clash = [f for f in cfg.formats if (s_fmt, f) not in cfg.pairs()]
    kinds = (["moving_bad_format"] if unknown else []) + (["format_mismatch"] if clash else [])
    if not kinds:
        return []
    kind = kinds[rng.integers(len(kinds))]
    stim.misuse.append(kind)
    n = _size(rng, 3)
    if kind == "moving_bad_format":
        code = int(rng.choice(unknown))
        data = rng.integers(0, 1 << min(operand_shape(cfg).width, 62), (n, cfg.rows))
    else:
        fmt = clash[rng.integers(len(clash))]
        code, data = cfg.code(fmt), _data(rng, (n, cfg.rows), fmt)
    return [MovingBeat(data[j], False, j == n - 1, code) for j in range(n)]


def _bad_load(cfg, rng, stim):
    fmt = cfg.formats[rng.integers(len(cfg.formats))]
    code = cfg.code(fmt)
    unknown = list(range(len(cfg.formats), 1 << cfg.fmt_bits))
    kind = rng.integers(0, 4 if unknown else 3)
    data = _data(rng, (cfg.rows + 2, cfg.cols), fmt)
    k = int(rng.integers(1, cfg.rows + 1))
    if kind == 0 and k > 1:  # cut short: last before row K-1
        stim.misuse.append("load_cut_short")
        cut = int(rng.integers(1, k))
        return [LoadBeat(data[j], k, j == cut - 1, code) for j in range(cut)]
    if kind == 1:  # overrun: K rows and more before last
        stim.misuse.append("load_overrun")
        extra = int(rng.integers(1, 3))
        return [LoadBeat(data[j], k, j == k + extra - 1, code) for j in range(k + extra)]
    if kind == 3:  # a format code that names no format: the whole load is dropped
        stim.misuse.append("load_bad_format")
        code = int(rng.choice(unknown))
        raw = rng.integers(0, 1 << min(operand_shape(cfg).width, 62), (k, cfg.cols))
        return [LoadBeat(raw[j], k, j == k - 1, code) for j in range(k)]
    bad_k = int(rng.choice([0] + ([cfg.rows + 1] if cfg.rows + 1 < 1 << cfg.k_bits else [])))
    stim.misuse.append("load_bad_k")
    n = int(rng.integers(1, 3))
    return [LoadBeat(data[j], bad_k, j == n - 1, code) for j in range(n)]


def _float_format(cfg):
    """The float format that pairs with itself with the widest exponent, then the most
    fraction bits kept, and that count; ``None`` on an engine of one row or of no such
    format."""
    floats = [s for s, m in cfg.pairs() if s == m and s.kind == "float"]
    if cfg.rows < 2 or not floats:
        return None

    def kept(f):
        return stored_fraction_bits(f) - f.ignored_low_bits

    fmt = max(floats, key=lambda f: (f.exp_bits, kept(f)))
    return fmt, kept(fmt)


def lowest_one_ops(cfg: EngineConfig) -> list[Op]:
    """Directed ops whose negative sums have their lowest one at each place of the binary32
    adder's 57-bit field that a sum with zero can give it (2 to 54 where the format reaches
    binary32's low normal range): the adder negates a negative sum by inverting every bit
    above its lowest one, each output of its prefix OR a tree of its own, so a node of one
    of them that is stuck shows only when the lowest one is under it.

    K = 1, two ops: the stationary ``-(1 + 2**-f) 2**-64`` or ``-2**-64``, the moving
    columns ``x``. The adder adds the product ``P`` to the accumulator +0.0: ``P``'s 24-bit
    significand aligned ``d = E + 126`` places up (``E`` its leading one's exponent; 31 at
    most), so the lowest one sits ``d`` plus its trailing zeros up. (Not K = 2 with a zero
    second product: a wrong bit at that place flips back when the same sum is negated
    again.) ``x = (1 + k 2**-f) 2**e`` is chosen per place: the trailing zeros (2 to 23) by
    ``k``, then ``d`` by ``e``. On the format of :func:`_float_format`; none on an engine of
    one row or of no float format.
    """
    from fractions import Fraction

    chosen = _float_format(cfg)
    if chosen is None:
        return []
    fmt, f = chosen
    columns = (-(1 + Fraction(1, 2**f)), Fraction(-1))  # significands of the stationary
    scale = -64 if _raw(fmt, 2.0**-64) is not None else 0
    # x's significands: 1 + k 2**-f for k of one or two bits, and all ones
    ks = sorted({0, 2**f - 1} | {k for j in range(f) for k in (2**j, 2**j + 1, 2**j - 1)})
    found: dict[int, tuple[int, float]] = {}  # place -> (stationary column, moving value)
    for kind, w in enumerate(columns):
        for k in ks:
            x = 1 + Fraction(k, 2**f)
            prod = -w * x  # in [1, 4)
            lead0 = 1 if prod >= 2 else 0
            odd = prod.numerator >> ((prod.numerator & -prod.numerator).bit_length() - 1)
            tz = 24 - odd.bit_length()  # trailing zeros of the 24-bit significand
            if tz < 0:  # rounded: not the product's own bits
                continue
            for d in range(32):
                # the product's leading one at 2**(d - 126); at d = 31 any from 2**-95 up
                lead = d - 126 if d < 31 else 0
                value = float(x) * 2.0 ** (lead - lead0 - scale)
                if d + tz in found or _raw(fmt, value) is None:
                    continue
                found[d + tz] = (kind, value)
    if not found:
        return []
    ops = []
    for kind in range(2):
        moving = [v for p, (k, v) in sorted(found.items()) if k == kind]
        if not moving:
            continue
        w = float(columns[kind]) * 2.0**scale
        ops.append(_directed(fmt, fmt, [[w] * cfg.cols], [moving]))
    return [op for op in ops if op is not None]


def _trailing_ones(v, bits: int):
    """The trailing ones of each of ``v`` (a numpy integer array), up to ``bits``."""
    count = np.zeros(v.shape, np.int64)
    run = np.ones(v.shape, bool)
    for i in range(bits):
        run &= (v >> i) & 1 == 1
        count += run
    return count


def _longest_above(mask, z, above):
    """For each place ``z`` of the carry's stop among ``mask``'s elements: ``(ones above,
    index)`` of the one with the longest run of ones ``above`` it (the first, on a tie)."""
    out = {}
    for zi in np.unique(z[mask]):
        k = np.argmax(np.where(mask & (z == zi), above, -1))
        index = np.unravel_index(k, mask.shape)
        out[int(zi)] = (int(above[index]), index)
    return out


#: Stationary significands :func:`carry_ops` searches (a fixed sample): its cost, about
#: 0.1 s a bench run.
CARRY_SAMPLE = 64


def carry_ops(cfg: EngineConfig) -> list[Op]:
    """Directed ops whose products round up with the carry stopping at each place ``z`` of the kept
    bits it can, the bits above ``z`` as many ones as a product gives: the rounding increment flips
    bit ``i + 1`` when bits 0 to ``i`` are all set, each such AND a tree of its own, so a node of
    one stuck at 1 shows only when the one zero below ``i`` is under it. Random short sums round few
    products (on formats of at most 11-bit significands only those below binary32's normal range
    round at all).

    K = 1 on the format of :func:`_float_format`, ``f`` fraction bits: for each ``z``, of the
    products ``a b`` of two ``f + 1``-bit significands (a fixed sample of :data:`CARRY_SAMPLE`
    ``a``, every ``b`` for ``f`` up to 10) dropping ``u`` low bits (``u`` the bits below 2**-149 for
    a product below binary32's normal range, where products of at most 24 bits round, else those
    beyond 24), rounding up, with ``z`` trailing ones, the one with the longest run of ones above
    ``z``; ``a`` on the stationary, ``cfg.cols`` of them an op, and the ``b`` of those as the moving
    columns. None on an engine of one row or of no float format."""
    chosen = _float_format(cfg)
    if chosen is None:
        return []
    fmt, f = chosen
    subnormal = 2 * f + 2 <= 24
    if subnormal and _raw(fmt, 2.0**-100) is None:
        return []
    # every b of a narrow format; the a (and a wide format's b) a fixed sample
    draw = np.random.default_rng(0).integers(2**f, 2 ** (f + 1), (2, 1024))
    a = draw[0][:CARRY_SAMPLE, None]
    b = np.arange(2**f, 2 ** (f + 1), dtype=np.int64)[None, :] if f <= 10 else draw[1][None, :]
    prod = a * b
    best: dict[int, tuple[int, int, int, int]] = {}  # z -> (ones above, a, b, u)
    lengths = np.floor(np.log2(prod)).astype(np.int64) + 1
    for u in range(1, 24) if subnormal else [2 * f + 2 - 24, 2 * f + 1 - 24]:
        kept = prod >> u
        fits = lengths <= u + (23 if subnormal else 24)
        if not subnormal:
            fits &= lengths - u == 24
        guard = (prod >> (u - 1)) & 1 == 1
        up = fits & guard & (((prod & ((1 << (u - 1)) - 1)) != 0) | (kept & 1 == 1))
        z = _trailing_ones(kept, 24)
        above = _trailing_ones(kept >> (z + 1), 24)
        for zi, (score, (i, j)) in _longest_above(up, z, above).items():
            if zi not in best or best[zi][0] < score:
                best[zi] = (score, int(a[i, 0]), int(b[0, j]), u)
    pairs = []
    for _, sa, sb, u in (best[z] for z in sorted(best)):
        # a 2**ea times b 2**eb: 2**-149 (or the 24th bit's place) at bit u of a b
        ea = -70 - f if subnormal else -f
        eb = (-149 - u if subnormal else 1 - len(bin(sa * sb)) + 2) - ea
        x, w = sb * 2.0**eb, sa * 2.0**ea
        if _raw(fmt, x) is not None and _raw(fmt, w) is not None:
            pairs.append((w, x))
    ops = []
    for i in range(0, len(pairs), cfg.cols):
        group = pairs[i : i + cfg.cols]
        stationary = [[group[c % len(group)][0] for c in range(cfg.cols)]]
        ops.append(_directed(fmt, fmt, stationary, [[x for _, x in group]]))
    return [op for op in ops if op is not None]


def subnormal_ops(cfg: EngineConfig) -> list[Op]:
    """Directed ops of subnormal operands whose significands have their leading one at each
    place of the fraction field: the operand decoders normalise them (a leading-zero count,
    a tree over the bits, then a shift), and random operands are rarely subnormal, and
    rarely with few fraction bits, and their tiny products vanish in a sum of larger ones.

    For each float format that pairs with itself (:meth:`EngineConfig.pairs`), ``f``
    fraction bits kept and bias ``B``, the fractions ``2**j`` and ``2**(j + 1) - 1`` for j
    from 0 to ``f - 1``, and the largest normal significand: K = 1, those as the moving
    columns, the stationary ``2**B`` (a product near 1, exact). On the format with the most
    fraction bits the same values are also the stationary (K = rows, each moving column
    ``2**B`` in one row and 0 in the others), ``rows * cols`` of them an op, since the
    stationary's decoders are others. None on an integer engine."""
    floats = [s for s, m in cfg.pairs() if s == m and s.kind == "float"]
    ops = []

    def values(fmt):
        f = stored_fraction_bits(fmt) - fmt.ignored_low_bits
        tiny = 2.0 ** (2 - 2 ** (fmt.exp_bits - 1) - f)  # the least subnormal
        fracs = sorted({v for j in range(f) for v in (2**j, 2 ** (j + 1) - 1)})
        return [k * tiny for k in fracs] + [2.0 - 2.0**-f], 2.0 ** (2 ** (fmt.exp_bits - 1) - 1)

    for fmt in floats:
        subs, scale = values(fmt)
        ops.append(_directed(fmt, fmt, [[scale] * cfg.cols], [subs]))
    if floats:
        fmt = max(floats, key=lambda f: stored_fraction_bits(f) - f.ignored_low_bits)
        subs, scale = values(fmt)
        per = cfg.rows * cfg.cols
        for i in range(0, len(subs), per):
            part = subs[i : i + per] + [0.0] * (per - len(subs[i : i + per]))
            stationary = [
                [part[r * cfg.cols + c] for c in range(cfg.cols)] for r in range(cfg.rows)
            ]
            moving = [[scale if r == n else 0.0 for n in range(cfg.rows)] for r in range(cfg.rows)]
            ops.append(_directed(fmt, fmt, stationary, moving))
    return [op for op in ops if op is not None]


def sum_carry_ops(cfg: EngineConfig) -> list[Op]:
    """Directed ops whose sums round up with the carry stopping at each place ``z`` of the
    kept bits it can, ones above it: :func:`carry_ops` for the binary32 adder's rounding
    increment (its own prefix AND) rather than the product's.

    K = 2 on the format of :func:`_float_format`, ``f`` fraction bits, where a product of two
    significands leaves ``g = 22 - 2f`` low kept bits free and ``2**(g + 1) - 1`` fits one
    (``f`` from 8 to 10): the first row's product ``P = a b`` of ``2f + 2`` bits (``a b >=
    2**(2f + 1)``, 1 <= P < 4), the second's ``(2**g - 1/2)`` of ``P``'s last kept place, so the
    sum's kept bits are ``a b`` then ``g`` ones, and it is a tie that rounds up (the kept bits
    odd). For each ``z`` from ``g``, of the ``b`` of ``f + 1`` bits with a few fixed ``a``
    (a sample of :data:`CARRY_SAMPLE`), the one with the longest run of ones above ``z``; one
    op for each ``a`` used (every column ``a``). None elsewhere."""
    chosen = _float_format(cfg)
    if chosen is None:
        return []
    fmt, f = chosen
    g = 22 - 2 * f
    if not 0 < g <= f:
        return []
    draw = np.random.default_rng(0).integers(2**f, 2 ** (f + 1), 1024)
    a = draw[:CARRY_SAMPLE, None]
    b = np.arange(2**f, 2 ** (f + 1), dtype=np.int64)[None, :]
    prod = a * b
    kept = (prod << g) | ((1 << g) - 1)
    ok = prod >= 1 << (2 * f + 1)
    z = _trailing_ones(kept, 24)
    above = _trailing_ones(kept >> (z + 1), 24)
    best: dict[int, tuple[int, int, int]] = {}  # z -> (ones above, a, b)
    for zi, (score, (i, j)) in _longest_above(ok, z, above).items():
        best[zi] = (score, int(a[i, 0]), int(b[0, j]))
    by_a: dict[int, list[int]] = {}
    for _, sa, sb in (best[k] for k in sorted(best)):
        by_a.setdefault(sa, []).append(sb)
    # (2**g - 1/2) places of 2**-22 (P's last kept one): tail times 2**(g - 22)
    tail = (2 ** (g + 1) - 1) / 2.0 ** (g + 1)
    ops = []
    for sa, bs in by_a.items():
        w = sa / 2.0**f
        stationary = [[w] * cfg.cols, [tail] * cfg.cols]
        moving = [[sb / 2.0**f for sb in bs], [2.0 ** (g - 22)] * len(bs)]
        ops.append(_directed(fmt, fmt, stationary, moving))
    return [op for op in ops if op is not None]
