"""Op cost of nc_matmul on the tensor engine, for the higher levels of the model."""

from __future__ import annotations

from ..formats import get_format
from .config import FP32_BEAT_INTERVAL, MAX_N, EngineConfig

__all__ = ["matmul_cycles", "MODES"]

#: How an op sits in the stream: alone on an idle engine, back to back with ops that each
#: load a new stationary, or back to back reusing the stationary already loaded.
MODES = ("alone", "back_to_back", "reuse")


def matmul_cycles(
    k: int,
    m: int,
    n: int,
    *,
    cfg: EngineConfig | None = None,
    mode: str = "back_to_back",
    fmt=None,
) -> int:
    """Cycles one ``nc_matmul(stationary[k, m], moving[k, n])`` costs on the engine.

    ``alone``: from the first stationary row accepted to the last result delivered on an idle
    engine, ``k + n + cfg.latency`` (``rows * add_stages + mul_stages + cols + decode_stages``).
    ``back_to_back``: the steady-state spacing of ops that each load a new stationary,
    ``max(n, k)`` (the next load overlaps this op's moving stream; it cannot start before this
    op has switched banks). ``reuse``: ``n``. M costs nothing:
    unused columns compute zeros. These closed forms are checked against the cycle-exact model
    in ``tests/test_tlm_tensor_timing.py``.

    FP32 operands (``fmt="fp32"``) stream at a quarter of the rate: one moving beat every
    ``FP32_BEAT_INTERVAL`` (4) cycles, so ``n`` counts as ``4 n`` (``4 (n - 1) + 1`` alone).

    MX operands (``mxfp8``, ``mxfp4``, ...; in ``cfg.formats`` of a TLM engine) stream a beat
    a cycle like FP8; ``k`` is the partitions an op uses. Like FP8's multi-row mode, the chip
    presets' rows per PE (:meth:`tlm.presets.ChipSpec.rows_per_pe`: ``R`` elements of K per
    partition) multiply the work of those cycles, not their number.

    Trainium2's documented cost is about ``max(min(64, M), N)``; ours is exact for this RTL.

    Parameters
    ----------
    fmt : str or format, optional
        The moving operand's format, one of ``cfg.formats`` (default ``cfg.fmt``).

    Raises
    ------
    ValueError
        For sizes outside the engine's limits or an unknown ``mode``.
    """
    cfg = cfg or EngineConfig()
    fmt = cfg.formats[cfg.code(cfg.fmt if fmt is None else get_format(fmt))]
    interval = FP32_BEAT_INTERVAL if fmt.name == "fp32" else 1
    for label, size, limit in (("k", k, cfg.rows), ("m", m, cfg.cols), ("n", n, MAX_N)):
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= limit:
            raise ValueError(f"{label} must be an integer in 1..{limit}, not {size!r}")
    if mode == "alone":
        return k + interval * (n - 1) + 1 + cfg.latency
    if mode == "back_to_back":
        return max(interval * n, k)
    if mode == "reuse":
        return interval * n
    raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
