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

A GPU's flash kernel runs at its own published speed, not the GEMMs' (softmax, exponentials
and rescaling between its two products): :data:`FA2_SPEED` holds FlashAttention-2's per GPU and
pass, as the FlashAttention papers measured and counted it (:class:`KernelSpeed`), and
:meth:`KernelSpeed.efficiency` turns it into the fraction of peak on the tiles it computes.

Example
-------
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
    """A flash kernel's published speed on one GPU for one pass, as its benchmark counts it.

    The FlashAttention benchmarks (``benchmarks/benchmark_flash_attention.py``, ``flops``;
    the FlashAttention-2 and -3 papers' setting) count ``4 x seq^2 x head_dim x heads`` forward
    FLOPs, halved under a causal mask, and 2.5 times that backward (five products, the score
    recomputed). ``tflops`` is the figure read, ``peak_tflops`` the GPU's dense BF16 peak."""

    tflops: float
    peak_tflops: float
    causal: bool
    seq_len: int
    head_dim: int
    source: str

    def efficiency(self, kernel: FlashKernel, backward: bool) -> float:
        """Fraction of the dense peak the kernel reaches on the tiles it computes: the speed
        over the peak, times the share of the square the benchmark counts (1/2 causal, else 1)
        over the share the kernel computes at the benchmark's length (its causal tiles)."""
        if not self.causal:
            return self.tflops / self.peak_tflops
        f_score, f_context, f_bwd = kernel.fractions(self.seq_len)
        done = f_bwd if backward else (f_score + f_context) / 2
        return self.tflops / self.peak_tflops * 0.5 / done


_FA3_PAPER = "Shah et al. 2024, FlashAttention-3 (arXiv 2407.08608)"
_FA2_PAPER = "Dao 2023, FlashAttention-2 (arXiv 2307.08691)"
#: FlashAttention-2's speed per GPU, (forward, backward), BF16/FP16, head dim 128, 8K tokens
#: (the Llama 3 rows' length; 16K differs by under 1.5 %). H100 SXM5: the FlashAttention-3
#: paper's FlashAttention-2 bars, forward causal (Fig. 5d; the repo's
#: ``assets/flash3_fp16_fwd.png``), backward not causal (Fig. 6, the only backward it gives).
#: A100 SXM4: FlashAttention-2's forward + backward, causal (its paper's Fig. 4d; the repo's
#: ``assets/flash2_a100_fwd_bwd_benchmark.png``), for both passes: no split is read.
FA2_SPEED = {
    "h100": (
        KernelSpeed(333.0, 989.0, True, 8192, 128, f"{_FA3_PAPER} Fig. 5d: 333 TFLOP/s"),
        KernelSpeed(318.0, 989.0, False, 8192, 128, f"{_FA3_PAPER} Fig. 6: 318 TFLOP/s"),
    ),
    "a100": (
        KernelSpeed(182.0, 312.0, True, 8192, 128, f"{_FA2_PAPER} Fig. 4d: 182 TFLOP/s"),
        KernelSpeed(182.0, 312.0, True, 8192, 128, f"{_FA2_PAPER} Fig. 4d: 182 TFLOP/s"),
    ),
}

#: Query rows of a flash kernel's stationary tile (a Trainium core's 128 partitions): a KV
#: group's queries are stacked into one product when they fit.
STACK_ROWS = 128


def flash_forward_s(costs, heads, queries, keys, dqk, dv, *, causal=None, group=1, fmt="bf16"):
    """Seconds of a flash kernel's forward products on one chip: the one definition the
    training step and the inference engine both price attention by.

    ``heads`` score products ``[queries, dqk] x [dqk, keys]`` and as many context products
    ``[queries, keys] x [keys, dv]``: a GPU's at its kernel's published speed
    (``costs.flash_efficiency``, :data:`FA2_SPEED`), a chip without one at the calibrated
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
        at_peak = 2.0 * np.asarray(heads) * queries * keys / costs.peak_flops("bf16")
        score, context = at_peak * dqk / speed[0], at_peak * dv / speed[0]
    if causal is not None:
        shape = (causal, None) if np.ndim(causal) == 0 else tuple(causal)
        f_score, f_context, _ = costs.flash.fractions(*shape)
        score, context = score * f_score, context * f_context
    return score, context
