"""LLM inference on a model replica: the forward pass per phase as operators with calibrated
costs and collectives on the real topology, the memory per chip, and a whole request's
latency and throughput (TTFT, TPOT, tokens/s, MFU, HBM-bandwidth utilisation).

- :class:`Engine` (:mod:`tlm.inference.step`): one replica of ``tp x pp`` chips; its
  :meth:`~Engine.step` prices iterations (vectorised), :meth:`~Engine.iteration_s` is the
  serving simulation's fast scalar call; its choices: data-parallel attention with experts
  beyond the tensor-parallel group (``dp_attention``, :mod:`tlm.inference.expert`) and
  micro-batches in flight through its pipeline stages (``micro_batches``,
  :mod:`tlm.inference.pipeline`);
- :class:`InferenceMemory` (:mod:`tlm.inference.memory`): weights, paged KV cache,
  activations, reserve; ``max_batch``, ``max_context``, ``kv_capacity_tokens``;
- :func:`estimate_of` (:mod:`tlm.inference.estimate`): a :class:`RequestBatch`'s prefill and
  decode on a :class:`ReplicaSpec` under :class:`FixedCosts`, with an optional
  :class:`Speculation`, padded to the serving stack's :class:`ShapeBuckets`
  (:mod:`tlm.inference.buckets`); :func:`estimate` takes the same by keywords;
- :func:`~tlm.inference.serving.simulate` (:mod:`tlm.inference.serving`): requests arriving at
  replicas that batch them iteration by iteration (paged KV, chunked prefill, preemption,
  disaggregation) and :func:`~tlm.inference.serving.max_rate` under an SLO;
- :func:`token_economics` (:mod:`tlm.inference.economics`): power, energy and dollars per
  token.

See ``docs/inference.md``.

Examples
--------
>>> from tlm.inference import Engine, estimate
>>> r = estimate("llama3.3-70b", "trn2", "server", tp=16, batch=1, prompt=2048, output=256)
>>> bool(r.ttft_s < r.e2e_s), bool(0.005 < r.tpot_s < 0.05)
(True, True)
>>> r.decode.memory_s > r.decode.compute_s          # decode streams the weights
True
>>> r.prefill.compute_s > r.prefill.memory_s        # prefill multiplies them
True
"""

from .buckets import ShapeBuckets
from .economics import token_economics
from .errors import InferenceInputError, SloUnreachable
from .estimate import Estimate, Phase, RequestBatch, Speculation, estimate, estimate_of
from .layout import FORMATS, FixedCosts, ReplicaSpec, fixed_costs
from .memory import DEFAULT_BLOCK_TOKENS, InferenceDoesNotFit, InferenceMemory
from .step import CATEGORIES, Engine, Iteration

__all__ = [
    "CATEGORIES",
    "DEFAULT_BLOCK_TOKENS",
    "Engine",
    "Estimate",
    "FORMATS",
    "FixedCosts",
    "InferenceDoesNotFit",
    "InferenceInputError",
    "InferenceMemory",
    "Iteration",
    "Phase",
    "ReplicaSpec",
    "RequestBatch",
    "ShapeBuckets",
    "SloUnreachable",
    "Speculation",
    "estimate",
    "estimate_of",
    "fixed_costs",
    "token_economics",
]
