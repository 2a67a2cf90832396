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

Example
-------
>>> round(causal_fraction(4096, 128, 512), 4), round(causal_fraction(8192, 128, 2048), 4)
(0.5625, 0.625)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

__all__ = ["FlashKernel", "NKI_FLASH", "FA2", "causal_fraction"]


@lru_cache(maxsize=256)
def causal_fraction(seq_len: int, q_tile: int, k_tile: int) -> float:
    """Share of the ``seq_len`` x ``seq_len`` square a causal kernel computes in tiles of
    ``q_tile`` queries by ``k_tile`` keys: the tiles whose first key is at or before their last
    query, over all tiles. 1 for a sequence of one tile; towards 1/2 for long sequences."""
    s, bq, bk = int(seq_len), int(q_tile), int(k_tile)
    nq, nk = -(-s // bq), -(-s // bk)
    done = sum(min(nk, -(-min(s, (i + 1) * bq) // bk)) for i in range(nq))
    return done / (nq * nk)


@dataclass(frozen=True)
class FlashKernel:
    """A causal flash-attention kernel: (queries, keys) per tile of each pass, and its source."""

    name: str
    score_fwd: tuple[int, int]
    context_fwd: tuple[int, int]
    backward: tuple[int, int]
    source: str

    def fractions(self, seq_len: int) -> tuple[float, float, float]:
        """Computed share of the square in the forward score product, the forward softmax and
        context product, and the backward pass (every product and the exponentials)."""
        return tuple(
            causal_fraction(seq_len, *tile)
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
