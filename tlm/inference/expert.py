"""Expert parallelism beyond the tensor-parallel group: attention data-parallel over ``ep /
tp`` groups of ``tp`` chips, each chip holding ``E / ep`` whole experts, tokens dispatched
to their experts and combined back by all-to-alls (DeepSeek-V3's serving layout; vLLM's
``--enable-expert-parallel`` with data parallelism, SGLang's ``--enable-dp-attention``).

The layout is a choice of :class:`~tlm.inference.step.Engine` (``dp_attention=True``): its
stage shape, a group's share of the parts, the attention's coefficients and the memory per
replica token. This module prices the dispatch and combine (:func:`dispatch_combine_s`): per
MoE layer two all-to-alls among the ``ep`` chips of each chip's ``tokens / ep x top_k x
capacity_factor`` copies of the hidden state, on the real topology, each with its collective
call's fixed cost. The layout's rules and sources: docs/inference.md, "Expert parallelism with
data-parallel attention".

Examples
--------
>>> from tlm.inference import Engine
>>> e = Engine.build("deepseek-v3", "trn2", "ultraserver", tp=4, ep=64, dp_attention=True,
...                  fmt="fp8", kv_fmt="fp8")
>>> e.chips, e.dp, e.local_experts, e.dp_attention
(64, 16, 4, True)
>>> bool(e.iteration_s(256, 256, 256 * 4096, 256 * 4096) < 0.2)
True
"""

from __future__ import annotations

import numpy as np

__all__ = ["dispatch_combine_s"]


def dispatch_combine_s(engine, tokens: np.ndarray) -> np.ndarray:
    """Seconds of the dispatch and combine all-to-alls of every MoE layer of an iteration of
    ``tokens`` stage tokens (a 1-D float array) on ``engine``'s ``ep`` chips: each chip sends
    ``tokens / ep x top_k x capacity_factor`` copies of the hidden state, twice per layer."""
    x, ones = engine.model.moe, np.ones_like(tokens, dtype=np.int64)
    copies = tokens / engine.ep * x.top_k * x.capacity_factor
    nbytes = copies * engine.model.hidden * engine.ab / engine.collective_bandwidth_factor
    a2a = engine.network.collective_s(
        "all_to_all", engine.ep * ones, ones, nbytes, dtype_bytes=int(engine.ab)
    )
    return 2 * engine.model.moe_layers * a2a
