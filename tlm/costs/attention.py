"""The flash-attention kernel of each chip family: the causal tiles it computes.

A causal flash kernel walks the square of queries and keys in tiles and skips the tiles wholly
above the diagonal (every key after every query of the tile). A tile of ``q`` queries and ``k``
keys is computed when its first key is before its last query, so the computed share of the
square is a little over half, by how coarse the tiles are (:func:`causal_fraction`). Each pass
of a kernel may tile differently; :class:`FlashKernel` names the tiles of its forward score
product, of its forward softmax and context product, and of its backward pass.

- :data:`NKI_FLASH`: Neuron's ``flash_fwd`` and ``flash_attn_bwd`` (the source of
  ``neuronxcc.nki.kernels``, aws-neuron/nki-samples ``src/nki_samples/reference/attention.py``
  at 05c0769, the SDK 2.21 release; the same masks at 5d97201 (2.20) and 58705c9 (2025-06)).
  Forward: a 128-query tile's score product per 512-key tile
  (``multiplication_required_selection``), its exponentials, transposes and context product per
  2,048-key tile (``forward_mask``, ``FlashConfig.seq_tile_size``, which neuronx-distributed's
  ``nki_flash_attn_func`` leaves at its default); backward: every product and the
  exponentials per 128 x 512 tile (``mask`` of ``_flash_attn_bwd_core``).
- :data:`FA2`: FlashAttention-2 at head size 128 on sm80 and sm90 (Dao-AILab/flash-attention,
  ``flash_fwd_launch_template.h``: 128 x 64 forward tiles; ``flash_bwd_launch_template.h``: 64 x
  128 backward tiles), which ends each query block's key loop at the diagonal.

A GPU's flash kernel runs at its published speed, not the GEMMs': :data:`FA2_SPEED` holds
FlashAttention-2's per GPU and pass against sequence length as the papers measured it
(:class:`KernelSpeed`); :class:`FlashSpeed` gives the fraction of peak on the computed tiles at
a length (log2-interpolated between the published 512 to 16K, the 16K bar beyond).

>>> round(causal_fraction(4096, 128, 512), 4), round(causal_fraction(8192, 128, 2048), 4)
(0.5625, 0.625)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = [
    "FlashKernel",
    "KernelSpeed",
    "FlashSpeed",
    "NKI_FLASH",
    "FA2",
    "FA2_SPEED",
    "causal_fraction",
    "flash_forward_s",
]


@lru_cache(maxsize=4096)
def causal_fraction(seq_len: int, q_tile: int, k_tile: int, keys: int | None = None) -> float:
    """Share of the ``seq_len`` queries x ``keys`` (default ``seq_len``) rectangle a causal
    kernel computes in tiles of ``q_tile`` queries by ``k_tile`` keys, the queries the last
    ``seq_len`` positions of the keys (a prompt's chunk after its context): the tiles whose
    first key is at or before their last query, over all tiles. 1 for one query tile of one
    row (a decode step); towards 1/2 for a long square."""
    s, bq, bk = int(seq_len), int(q_tile), int(k_tile)
    kv = s if keys is None else max(int(keys), s)
    nq, nk = -(-s // bq), -(-kv // bk)
    before = kv - s  # keys before the first query
    done = sum(min(nk, -(-(before + min(s, (i + 1) * bq)) // bk)) for i in range(nq))
    return done / (nq * nk)


@dataclass(frozen=True)
class FlashKernel:
    """A causal flash-attention kernel: (queries, keys) per tile of each pass, and its source."""

    name: str
    score_fwd: tuple[int, int]
    context_fwd: tuple[int, int]
    backward: tuple[int, int]
    source: str

    def fractions(self, seq_len: int, keys: int | None = None) -> tuple[float, float, float]:
        """Computed share of the square (or of ``seq_len`` queries after ``keys - seq_len``
        keys of context) in the forward score product, the forward softmax and context
        product, and the backward pass (every product and the exponentials)."""
        return tuple(
            causal_fraction(seq_len, *tile, keys)
            for tile in (self.score_fwd, self.context_fwd, self.backward)
        )


NKI_FLASH = FlashKernel(
    name="nki flash_fwd/flash_attn_bwd",
    score_fwd=(128, 512),
    context_fwd=(128, 2048),
    backward=(128, 512),
    source="aws-neuron/nki-samples src/nki_samples/reference/attention.py at 05c0769 "
    "(SDK 2.21): causal tiles skipped, forward scores per 128 x 512, softmax and context per "
    "128 x 2048 (seq_tile_size), backward per 128 x 512",
)
FA2 = FlashKernel(
    name="FlashAttention-2",
    score_fwd=(128, 64),
    context_fwd=(128, 64),
    backward=(64, 128),
    source="Dao-AILab/flash-attention csrc/flash_attn/src/flash_{fwd,bwd}_launch_template.h, "
    "head size 128 on sm80/sm90: causal key loop ends at the diagonal, 128 x 64 forward, "
    "64 x 128 backward tiles",
)


@dataclass(frozen=True)
class KernelSpeed:
    """A flash kernel's published speed on one GPU for one pass against sequence length, as its
    benchmark counts it.

    The FlashAttention benchmarks (``benchmarks/benchmark_flash_attention.py``, ``flops``;
    the FlashAttention-2 and -3 papers' setting: 512 to 16K tokens, batch x length = 16K,
    hidden 2,048) count ``4 x seq^2 x head_dim x heads`` forward FLOPs, halved under a causal
    mask, and 2.5 times that backward (five products, the score recomputed). ``points`` are
    the (length, TFLOP/s) bars read, ``peak_tflops`` the GPU's dense BF16 peak."""

    points: tuple[tuple[int, float], ...]
    peak_tflops: float
    causal: bool
    head_dim: int
    source: str

    def efficiency(self, kernel: FlashKernel, backward: bool, seq_len=8192):
        """Fraction of the dense peak the kernel reaches on the tiles it computes at
        ``seq_len`` (scalar or array): at each published length the speed over the peak,
        times the share of the square the benchmark counts (1/2 causal, else 1) over the
        share the kernel computes there (its causal tiles); between published lengths
        interpolated in log2 of the length, beyond them the nearest (the longest published
        length for any longer sequence: the kernel's speed is taken as flat past it)."""
        lengths = np.log2([n for n, _ in self.points])
        at = np.log2(np.maximum(np.asarray(seq_len, dtype=float), 1.0))
        out = np.interp(at, lengths, self._at_points(kernel, backward))
        return float(out) if np.ndim(out) == 0 else out

    @lru_cache(maxsize=8)  # noqa: B019 - a few (kernel, pass) pairs per frozen speed
    def _at_points(self, kernel: FlashKernel, backward: bool) -> tuple[float, ...]:
        out = []
        for n, tflops in self.points:
            share = 1.0
            if self.causal:
                f_score, f_context, f_bwd = kernel.fractions(n)
                share = 0.5 / (f_bwd if backward else (f_score + f_context) / 2)
            out.append(tflops / self.peak_tflops * share)
        return tuple(out)


@dataclass(frozen=True)
class FlashSpeed:
    """A GPU's flash kernel at its published speeds: called with a length (the keys each
    query block walks; the benchmarks' sequence length), the (forward, backward) fraction
    of peak on the tiles it computes (:meth:`KernelSpeed.efficiency`)."""

    kernel: FlashKernel
    forward: KernelSpeed
    backward: KernelSpeed

    def __call__(self, seq_len=8192):
        return (
            self.forward.efficiency(self.kernel, False, seq_len),
            self.backward.efficiency(self.kernel, True, seq_len),
        )


_FA3_PAPER = "Shah et al. 2024, FlashAttention-3 (arXiv 2407.08608v2)"
_FA2_PAPER = "Dao 2023, FlashAttention-2 (arXiv 2307.08691)"
_LENGTHS = (512, 1024, 2048, 4096, 8192, 16384)


def _bars(*tflops: float) -> tuple[tuple[int, float], ...]:
    """(length, TFLOP/s) of one series of bars at the benchmarks' lengths, 512 to 16K."""
    return tuple(zip(_LENGTHS, tflops, strict=True))


#: FlashAttention-2's speed per GPU, (forward, backward), BF16/FP16, head dim 128, at 512 to
#: 16K tokens (the bars' labels). H100 SXM5: the FlashAttention-3 paper's FlashAttention-2
#: bars, forward causal (Fig. 5d, "Forward, with causal mask, head dim 128"; the repo's
#: ``assets/flash3_fp16_fwd.png``), backward not causal (Fig. 6b, "Backward, without causal
#: mask, head dim 128", the only backward it gives; the labels read from the paper PDF's text
#: layer, v2). A100 SXM4: FlashAttention-2's forward + backward, causal (its paper's Fig. 4d;
#: the repo's ``assets/flash2_a100_fwd_bwd_benchmark.png``), for both passes: the paper's
#: separate forward and backward figures (5d, 6d) are not read here.
FA2_SPEED = {
    "h100": (
        KernelSpeed(
            _bars(191.0, 260.0, 298.0, 319.0, 333.0, 335.0),
            989.0,
            True,
            128,
            f"{_FA3_PAPER} Fig. 5d: 191-335 TFLOP/s at 512-16K (333 at 8K)",
        ),
        KernelSpeed(
            _bars(214.0, 260.0, 291.0, 310.0, 318.0, 322.0),
            989.0,
            False,
            128,
            f"{_FA3_PAPER} Fig. 6b: 214-322 TFLOP/s at 512-16K (318 at 8K)",
        ),
    ),
    "a100": (
        KernelSpeed(
            _bars(99.0, 133.0, 155.0, 173.0, 182.0, 189.0),
            312.0,
            True,
            128,
            f"{_FA2_PAPER} Fig. 4d: 99-189 TFLOP/s at 512-16K (182 at 8K)",
        ),
    )
    * 2,
}

#: Query rows of a flash kernel's stationary tile (a Trainium core's 128 partitions): a KV
#: group's queries are stacked into one product when they fit.
STACK_ROWS = 128


def flash_forward_s(costs, heads, queries, keys, dqk, dv, *, causal=None, group=1, fmt="bf16"):
    """Seconds of a flash kernel's forward products on one chip: the one definition the
    training step and the inference engine both price attention by.

    ``heads`` score products ``[queries, dqk] x [dqk, keys]`` and as many context products
    ``[queries, keys] x [keys, dv]``: a GPU's at its kernel's published speed at ``keys``
    tokens (``costs.flash_efficiency``, :data:`FA2_SPEED`), a chip without one at the calibrated
    GEMM's time (``costs.gemm_s``); each over the tiles the chip's kernel (``costs.flash``)
    computes under a causal mask.

    Parameters
    ----------
    costs : OpCosts
        The chip's costs (``gemm_s``, ``peak_flops``, ``flash``, ``flash_efficiency``).
    heads, queries, keys : array_like
        Products (sequences x query heads), and the queries and keys of each.
    dqk, dv : int
        Head sizes of the scores and of the values.
    causal : int or (int, int) or None
        None: every tile (no mask: a decode step). The causal mask's length (the square), or
        its (queries, keys) - queries the last of the keys: the kernel skips the tiles above
        the diagonal (:meth:`FlashKernel.fractions`).
    group : int
        Query heads sharing a KV head, whose rows the kernel stacks into one product where
        they fit one stationary tile (:data:`STACK_ROWS`; beyond, a product per head). A
        chip priced by its GEMM: at most a tile of rows, the keys are the GEMM's rows
        (streamed past the stationary queries); more, the products' own shapes.
    fmt : str
        The products' format on a chip priced by its GEMM.

    Returns
    -------
    (score_s, context_s) : arrays or floats, seconds.
    """
    speed = getattr(costs, "flash_efficiency", None)
    if speed is None:
        # a KV group's query rows stacked where they fit one stationary tile (a decode step),
        # and then the keys streamed past them (flash decoding); more rows, a product per
        # head in its own shape (the prefill and training kernel)
        q = np.asarray(queries, dtype=float)
        g = np.where(q * group <= STACK_ROWS, group, 1.0)
        stacked, rows = np.rint(np.asarray(heads, dtype=float) / g), q * g
        score = costs.gemm_s(rows, keys, dqk, stacked, fmt=fmt)
        context = costs.gemm_s(rows, dv, keys, stacked, fmt=fmt)
        few = rows <= STACK_ROWS
        if np.any(few):
            score = np.where(few, costs.gemm_s(keys, rows, dqk, stacked, fmt=fmt), score)
            context = np.where(few, costs.gemm_s(keys, rows, dv, stacked, fmt=fmt), context)
    else:
        # its published speed at the length of the key loop each query block walks
        at_peak = 2.0 * np.asarray(heads) * queries * keys / costs.peak_flops("bf16")
        fwd = speed(keys)[0]
        score, context = at_peak * dqk / fwd, at_peak * dv / fwd
    if causal is not None:
        shape = (causal, None) if np.ndim(causal) == 0 else tuple(causal)
        f_score, f_context, _ = costs.flash.fractions(*shape)
        score, context = score * f_score, context * f_context
    return score, context
