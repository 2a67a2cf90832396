"""Workloads as data: transformer models (dense with GQA and SwiGLU, MoE with top-k routing and
shared experts, multi-head latent attention) in TOML files with a source on every figure,
validated on load, and what follows from them - parameter counts, FLOPs per token, KV-cache
bytes, and each layer's operators (GEMM and attention shapes) for training and inference to
cost. See ``docs/workloads.md``.

>>> from tlm.workloads import load_model, model_names
>>> "llama3-405b" in model_names() and "deepseek-v3" in model_names()
True
>>> m = load_model("gpt3-175b")
>>> m.layers, m.hidden, m.heads, round(m.parameters / 1e9, 1)
(96, 12288, 96, 174.6)
"""

from .model import (
    Mla,
    Model,
    Moe,
    WorkloadError,
    element_bytes,
    load_model,
    model_names,
)
from .operators import Op, layer_ops, model_ops

__all__ = [
    "Mla",
    "Model",
    "Moe",
    "Op",
    "WorkloadError",
    "element_bytes",
    "layer_ops",
    "load_model",
    "model_names",
    "model_ops",
]
