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

Everything else (the fast path, the pipeline, the fixed costs, the time categories) is the
engine's; the replica's figures are per replica token, the memory per replica token too
(``kv_per_token_bytes`` and the activations divided by ``dp``).

Examples
--------
>>> from tlm.inference import Engine
>>> e = Engine.build("deepseek-v3", "trn2", "ultraserver", tp=4, ep=64, dp_attention=True,
...                  fmt="fp8", kv_fmt="fp8")
>>> e.chips, e.dp, e.local_experts
(64, 16, 4)
>>> bool(e.iteration_s(256, 256, 256 * 4096, 256 * 4096) < 0.2)
True
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .memory import InferenceMemory
from .step import Engine

__all__ = ["DpAttentionEngine"]


class DpAttentionEngine(Engine):
    """An :class:`Engine` whose stages are ``ep`` chips: attention data-parallel over ``ep /
    tp`` groups of ``tp`` chips, experts over the ``ep`` chips, all-to-all dispatch and
    combine (the module docstring). Built by ``Engine.build(..., dp_attention=True)``."""

    def _stage_shape(self) -> tuple[int, int]:
        return self.ep, self.ep // self.tp

    def _expert_tp(self) -> int:
        return 1  # whole experts: E / ep of them per chip

    def _setup(self):
        super()._setup()
        # the attention's coefficients per replica token: a chip's group attends 1/dp of
        # the sequences (and keeps their KV only)
        dp = self.dp
        self.attn_s_per_pair /= dp
        self.softmax_s_per_pair /= dp
        self.kv_token_layer_bytes /= dp
        self.qo_bytes_per_token /= dp
        if self.ep > 1:
            self.collective_calls += 2 * self.model.moe_layers  # dispatch and combine

    def _routed_share(self):
        """Routed copies a chip's experts get per token of its group: the stage's ``dp``
        groups' tokens all route to them."""
        return super()._routed_share() * self.dp

    def _active_experts(self, tokens):
        """Active experts of a chip's ``E / ep`` when each group has ``tokens`` tokens."""
        return super()._active_experts(tokens * self.dp)

    def _token_part(self, tokens) -> dict:
        """A group's share of the stage's tokens through the engine's parts, plus the
        dispatch and combine all-to-alls of every MoE layer (a 1-D float array)."""
        part = super()._token_part(tokens / self.dp)
        if self.ep > 1:
            x, ones = self.model.moe, np.ones_like(tokens, dtype=np.int64)
            copies = tokens / self.ep * x.top_k * x.capacity_factor
            nbytes = copies * self.model.hidden * self.ab / self.collective_bandwidth_factor
            a2a = self.network.collective_s(
                "all_to_all", self.ep * ones, ones, nbytes, dtype_bytes=int(self.ab)
            )
            part["communication"] = part["communication"] + 2 * self.model.moe_layers * a2a
        return part

    def _sequence_part(self, sequences) -> dict:
        """A group's share of the sampled sequences: its LM head, softmax and logits (a 1-D
        float array)."""
        return super()._sequence_part(sequences / self.dp)

    def _memory(self, reserve, extra_weights, extra_kv) -> InferenceMemory:
        mem = super()._memory(reserve, extra_weights, extra_kv)
        # per replica token: a group's chip holds its own sequences' activations and logits
        return replace(
            mem,
            activation_per_token_bytes=mem.activation_per_token_bytes / self.dp,
            logits_per_sequence_bytes=mem.logits_per_sequence_bytes / self.dp,
            layout=mem.layout + ", dp attention",
        )

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", dp_attention over {self.dp} groups)"
