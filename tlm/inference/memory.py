"""Memory of one chip of an inference replica: weights, the KV cache in paged blocks, the
activations of the largest iteration and a runtime reserve, against the chip's HBM.

The figures per token and per chip come from the replica's operator list
(:class:`tlm.inference.step.Engine` builds this object; weights are the operators' own
``weights``); this module only adds them up, pages the KV cache and answers what fits.

- **Weights**: the peak pipeline stage's layers (every operator's weights on one chip: split
  parts ``1/tp``, replicated parts - norms, a KV head shared by several chips, the router -
  whole), its embedding or output projection (split by vocabulary), in the weight format
  (``fmt``); a draft model's weights on the same chips when speculative decoding is on.
- **KV cache**: whole blocks of ``block_tokens`` tokens per sequence (a sequence of ``c``
  tokens holds ``ceil(c / block) x block``): :data:`DEFAULT_BLOCK_TOKENS` is vLLM's default
  ``--block-size`` of 16 tokens (vLLM engine arguments; Kwon et al., SOSP 2023, use 16 too).
- **Activations**: one layer's live tensors for the iteration's tokens (hidden state and
  residual, Q/K/V, attention output, the FFN's intermediates - for a MoE layer the routed
  copies), BF16, plus the FP32 logits of the sequences sampled (the local vocabulary shard and
  the gathered whole row): layers run one after another, so one layer's working set is live.
- **Reserve**: :data:`tlm.cluster.memory.DEFAULT_RESERVE_BYTES` (2 GiB, ASSUMED: runtime,
  allocator slack, collective scratch; the training model's figure, one definition).

Examples
--------
>>> from tlm.inference import Engine
>>> e = Engine.build("llama3.3-70b", "trn2", "server", tp=16)
>>> mem = e.memory
>>> round(mem.weights_bytes / 2**30, 1)      # 70.6B x 2 B / 16 + a KV head per chip (8 < 16)
8.4
>>> mem.max_batch(context=4096) > 64
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..cluster.memory import DoesNotFit

__all__ = ["InferenceMemory", "InferenceDoesNotFit", "DEFAULT_BLOCK_TOKENS", "PARTS"]

#: Tokens per KV-cache page: vLLM's default ``--block-size`` (16).
DEFAULT_BLOCK_TOKENS = 16
#: What can fail to fit, in the order it is checked.
PARTS = ("weights", "activations", "KV cache")

_GiB = 2**30


class InferenceDoesNotFit(DoesNotFit):
    """The replica does not fit one chip's HBM: ``part`` (one of :data:`PARTS`) is the first
    that does not, ``shortfall_bytes`` how much is missing."""

    def __init__(self, message: str, part: str, shortfall_bytes: float):
        super().__init__(message)
        self.part, self.shortfall_bytes = part, shortfall_bytes


def _gib(x: float) -> str:
    return f"{x / _GiB:.3g} GiB"


@dataclass(frozen=True)
class InferenceMemory:
    """One chip's memory of a replica (the peak pipeline stage), bytes.

    Attributes
    ----------
    weights_bytes : float
        Weights on the chip (the draft model's included).
    kv_per_token_bytes : float
        KV cache one token of one sequence holds on the chip (all its layers).
    activation_per_token_bytes : float
        Activations per token of an iteration (one layer's working set).
    logits_per_sequence_bytes : float
        FP32 logits per sampled sequence (local shard and gathered row).
    reserve_bytes, hbm_bytes : float
        The runtime reserve and the chip's HBM.
    block_tokens : int
        KV page size in tokens.
    model : str
        For the messages.
    """

    weights_bytes: float
    kv_per_token_bytes: float
    activation_per_token_bytes: float
    logits_per_sequence_bytes: float
    reserve_bytes: float
    hbm_bytes: float
    block_tokens: int
    model: str
    layout: str = ""

    def __post_init__(self):
        b = self.block_tokens
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise ValueError(f"block_tokens must be a positive integer, not {b!r}")

    def activations_bytes(self, tokens, sequences):
        """Activations of an iteration of ``tokens`` tokens sampling ``sequences``."""
        return (
            np.asarray(tokens) * self.activation_per_token_bytes
            + np.asarray(sequences) * self.logits_per_sequence_bytes
        )

    def paged_tokens(self, context):
        """Tokens of KV cache a sequence of ``context`` tokens holds: whole blocks."""
        b = self.block_tokens
        return np.ceil(np.asarray(context) / b) * b

    def kv_bytes(self, batch, context):
        """KV cache of ``batch`` sequences of ``context`` tokens (whole blocks)."""
        return np.asarray(batch) * self.paged_tokens(context) * self.kv_per_token_bytes

    def parts(self, batch, context, tokens) -> dict:
        """Each part's bytes for ``batch`` sequences of ``context`` tokens whose largest
        iteration has ``tokens`` tokens."""
        return {
            "weights_bytes": float(self.weights_bytes),
            "kv_cache_bytes": float(self.kv_bytes(batch, context)),
            "activations_bytes": float(self.activations_bytes(tokens, batch)),
            "reserve_bytes": float(self.reserve_bytes),
        }

    def check(self, batch, context, tokens) -> dict:
        """:meth:`parts`, or :class:`InferenceDoesNotFit` naming the first part that does not
        fit (weights, then activations, then the KV cache) and by how much."""
        p = self.parts(batch, context, tokens)
        used = p["weights_bytes"] + p["reserve_bytes"]  # the reserve is checked with them
        keys = ("weights_bytes", "activations_bytes", "kv_cache_bytes")
        for part, key in zip(PARTS, keys, strict=True):
            if part != "weights":
                used += p[key]
            if used > self.hbm_bytes:
                short = used - self.hbm_bytes
                before = "" if part == "weights" else " with the weights"
                raise InferenceDoesNotFit(
                    f"{self.model} does not fit{self.layout}: the {part} "
                    f"({_gib(p[key])}){before} and the reserve exceed the chip's HBM "
                    f"({_gib(self.hbm_bytes)}) by "
                    f"{_gib(short)} (weights {_gib(p['weights_bytes'])}, activations "
                    f"{_gib(p['activations_bytes'])} for {tokens} tokens, KV cache "
                    f"{_gib(p['kv_cache_bytes'])} for {batch} x {context} tokens, reserve "
                    f"{_gib(p['reserve_bytes'])})",
                    part,
                    short,
                )
        return p

    def free_bytes(self, tokens, sequences) -> float:
        """HBM left for the KV cache beside the weights, the reserve and an iteration of
        ``tokens`` tokens (negative: none)."""
        used = self.weights_bytes + self.reserve_bytes
        return self.hbm_bytes - used - float(self.activations_bytes(tokens, sequences))

    def kv_capacity_tokens(self, max_tokens: int, max_sequences: int | None = None) -> int:
        """KV tokens (all sequences, whole blocks) that fit beside the weights, the reserve
        and the largest iteration (``max_tokens`` tokens, ``max_sequences`` sampled)."""
        s = max_tokens if max_sequences is None else max_sequences
        free = self.free_bytes(max_tokens, s)
        if free <= 0 or self.kv_per_token_bytes <= 0:
            return 0
        blocks = math.floor(free / (self.kv_per_token_bytes * self.block_tokens))
        return blocks * self.block_tokens

    def max_batch(self, context: int, prompt: int | None = None) -> int:
        """The most sequences of ``context`` tokens that fit, their prompts (``prompt``
        tokens each, ``context`` by default) prefilled in one iteration; 0 if none."""
        p = context if prompt is None else prompt
        free = self.hbm_bytes - self.weights_bytes - self.reserve_bytes
        per = (
            float(self.kv_bytes(1, context))
            + p * self.activation_per_token_bytes
            + self.logits_per_sequence_bytes
        )
        return max(0, math.floor(free / per)) if per > 0 else 0

    def max_context(self, batch: int, prefill_tokens: int | None = None) -> int:
        """The longest context (whole blocks) ``batch`` sequences can each hold, beside an
        iteration of ``prefill_tokens`` tokens (default: one block per sequence); 0 if none."""
        t = batch * self.block_tokens if prefill_tokens is None else prefill_tokens
        free = self.free_bytes(t, batch)
        if free <= 0:
            return 0
        blocks = math.floor(free / (batch * self.kv_per_token_bytes * self.block_tokens))
        return blocks * self.block_tokens
