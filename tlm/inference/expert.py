"""Expert parallelism beyond the tensor-parallel group: attention data-parallel across groups
of ``tp`` chips, the routed experts spread over all ``ep`` chips of a pipeline stage, tokens
dispatched to their experts and combined back by all-to-alls.

This is the layout DeepSeek serves DeepSeek-V3 with (DeepSeek-V3 Technical Report,
arXiv:2412.19437, Section 3.4: decode with attention TP4 + DP80 and the MoE part EP320,
dispatch and combine as all-to-alls over IB and NVLink) and the one vLLM and SGLang run for
such models: vLLM ``--data-parallel-size N --enable-expert-parallel`` ("data parallel for the
attention layers and expert or tensor parallel (EP or TP) for the expert layers", vLLM docs,
Data Parallel Deployment; Expert Parallel Deployment), SGLang ``--enable-dp-attention`` with
``--tp`` and ``--dp`` (SGLang docs, "DP, DPA and SGLang DP Router"). The other layout, experts
split within the tensor-parallel group with the combine riding the all-reduce, is
:class:`~tlm.inference.step.Engine`'s (``ep`` dividing ``tp``).

A stage is ``ep`` chips: ``dp = ep / tp`` **attention groups** of ``tp`` chips (``tp``
innermost, stride 1; the groups next to each other; stages at stride ``ep``):

- **Attention, dense FFN layers, shared experts, router, norms, embedding and LM head** run
  ``tp``-way within each group on the group's sequences: an iteration's ``tokens``,
  ``sequences``, ``kv_tokens`` and ``pairs`` are shared evenly by the ``dp`` groups (each
  prices ``1/dp`` of them: the average group, so a batch should be a multiple of ``dp`` -
  :func:`tlm.inference.estimate` insists). Their weights are replicated in every group; the
  KV cache of a sequence lives in its group only (a chip holds ``1/dp`` of the replica's KV
  per token).
- **Routed experts**: each chip holds ``E / ep`` whole experts (expert tensor parallelism 1).
  Every token of the stage may pick them, so the active experts and the rows per expert follow
  the stage's ``tokens`` (balanced routing, as :mod:`tlm.inference.step`).
- **Dispatch and combine** (per MoE layer): each chip sends its ``1/tp`` share of its group's
  tokens - ``tokens / ep`` of them, ``top_k x capacity_factor`` copies each - to the experts'
  chips and gets the outputs back: two all-to-alls of ``tokens / ep x k x cf x hidden x 2 B``
  per chip among the ``ep`` chips (:meth:`Network.collective_s` ``("all_to_all", ep, 1,
  ...)`` on the real topology: the torus, the UltraServer, EFA across servers; the network
  prices the share that leaves the chip), each plus ``collective_fixed_s``. The group's
  all-reduces stay (after attention; after the FFN for the shared experts and the combined
  outputs), on the group's tokens.

This layout is a choice inside :class:`~tlm.inference.step.Engine` (``dp_attention=True``):
its stage shape, its parts over a group's share of the tokens, its attention coefficients and
memory per replica token; this module prices the dispatch and combine. Everything else (the
fast path, the pipeline, the fixed costs, the time categories) is the engine's; the replica's
figures are per replica token, the memory per replica token too (``kv_per_token_bytes`` and
the activations divided by ``dp``).

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
