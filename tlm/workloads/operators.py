"""A layer's operators as data: the GEMMs and attention products one chip runs, with their
shapes, for training and inference to cost alike.

A GEMM ``[m, k] x [k, n]`` is repeated ``batch`` times (the attention products once per local
head and sequence, a MoE layer's experts once per local expert); ``flop = 2 batch m n k``.
Shapes are one chip's under Megatron-style tensor parallelism over ``tp`` chips: QKV, the
FFN's gate/up and the experts' gate/up split their outputs (column-parallel), the attention
output and the down projections split their inputs (row-parallel), heads split across chips.
GQA with fewer KV heads than ``tp`` keeps one KV head per chip (replicated); MLA's
down-projections and the MoE router are replicated, as Megatron-core runs them. Experts split
``ep`` ways (expert parallelism) and each expert's FFN ``tp`` ways (expert tensor parallelism =
``tp``, Megatron's default).

``sequences`` x ``queries`` tokens pass through the layer; attention relates each query to
``keys`` keys. Training and prefill: ``queries = keys =`` the sequence (``queries = s / cp``
per chip with context parallelism); decode: ``queries = 1`` and ``keys`` the cache length.
MoE routing is balanced: each expert receives ``tokens x top_k x ep / experts`` tokens of the
expert-parallel group, times the model's capacity factor (an average, so it may be fractional).

Examples
--------
>>> from tlm.workloads import load_model, layer_ops
>>> m = load_model("llama3-70b")
>>> [(o.name, o.m, o.n, o.k) for o in layer_ops(m, sequences=1, queries=8192, tp=8)][:2]
[('qkv', 8192, 1280, 8192), ('score', 8192, 8192, 128)]
>>> decode = layer_ops(m, sequences=64, queries=1, keys=4096, tp=8)
>>> [(o.name, o.batch, o.m, o.n, o.k) for o in decode if o.kind == "attention"]
[('score', 512, 1, 4096, 128), ('context', 512, 1, 128, 4096)]
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import Model

__all__ = ["Op", "layer_ops", "head_ops", "model_ops", "tp_allowed"]


@dataclass(frozen=True)
class Op:
    """One operator on one chip: ``batch`` products ``[m, k] x [k, n]``.

    Attributes
    ----------
    name : str
        ``qkv``, ``score``, ``context``, ``out``, ``gate_up``, ``down``, ...
    kind : str
        ``gemm`` (against weights) or ``attention`` (activation against activation).
    batch, m, n, k : int or float
        Shape; ``m`` of a routed expert is the average tokens per expert.
    weights : int
        Weight elements the chip holds for this operator (0 for attention products).
    """

    name: str
    kind: str
    batch: int
    m: float
    n: int
    k: int
    weights: int

    @property
    def flop(self) -> float:
        """Forward FLOPs: two per multiply-accumulate."""
        return 2.0 * self.batch * self.m * self.n * self.k


def tp_allowed(model: Model, tp: int) -> str | None:
    """Why ``tp`` cannot split ``model`` (None when it can): it must divide the heads, the KV
    heads (or be a multiple of them: KV heads replicated), the FFN and expert FFN sizes."""
    if not isinstance(tp, int) or tp < 1:
        return "a positive integer"
    if model.heads % tp:
        return f"a divisor of the {model.heads} heads"
    if not model.mla and model.kv_heads % tp and tp % model.kv_heads:
        return f"a divisor or a multiple of the {model.kv_heads} KV heads"
    if model.ffn % tp:
        return f"a divisor of the FFN size {model.ffn}"
    if model.moe and model.moe.expert_ffn % tp:
        return f"a divisor of the expert FFN size {model.moe.expert_ffn}"
    return None


def _check(model: Model, tp: int, ep: int):
    why = tp_allowed(model, tp)
    if why:
        raise ValueError(f"tp must be {why} of {model.name}, not {tp!r}")
    experts = model.moe.experts if model.moe else 1
    if not isinstance(ep, int) or ep < 1 or experts % ep:
        allowed = (
            f"a divisor of the {experts} experts of {model.name}"
            if model.moe
            else f"1 for {model.name} (a dense model)"
        )
        raise ValueError(f"ep must be {allowed}, not {ep!r}")


def layer_ops(
    model: Model,
    kind: str = "dense",
    *,
    sequences: int = 1,
    queries: int | None = None,
    keys: int | None = None,
    tp: int = 1,
    ep: int = 1,
) -> tuple[Op, ...]:
    """The operators of one layer (``kind`` "dense" or "moe") on one chip.

    Parameters
    ----------
    sequences : int
        Sequences in the micro-batch (training) or batch (inference).
    queries : int, optional
        Tokens of each sequence this chip computes (the model's sequence by default).
    keys : int, optional
        Keys each query attends to (``queries`` by default; the cache length in decode).
    tp, ep : int
        Tensor- and expert-parallel sizes.

    Raises
    ------
    ValueError
        Naming ``tp``, ``ep`` or ``kind`` and what is allowed.
    """
    _check(model, tp, ep)
    if kind not in ("dense", "moe") or (kind == "moe" and not model.moe):
        allowed = "dense or moe" if model.moe else "dense"
        raise ValueError(f"kind must be {allowed}, not {kind!r}")
    q = model.seq_len if queries is None else queries
    kv = q if keys is None else keys
    tokens = sequences * q
    h, a_l = model.hidden, model.heads // tp
    ops = []
    if model.mla:
        m = model.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        ops += [
            Op("q_down", "gemm", 1, tokens, m.q_lora_rank, h, h * m.q_lora_rank),
            Op("q_up", "gemm", 1, tokens, a_l * qk, m.q_lora_rank, m.q_lora_rank * a_l * qk),
            Op(
                "kv_down",
                "gemm",
                1,
                tokens,
                m.kv_lora_rank + m.qk_rope_head_dim,
                h,
                h * (m.kv_lora_rank + m.qk_rope_head_dim),
            ),
            Op(
                "kv_up",
                "gemm",
                1,
                tokens,
                a_l * (m.qk_nope_head_dim + m.v_head_dim),
                m.kv_lora_rank,
                m.kv_lora_rank * a_l * (m.qk_nope_head_dim + m.v_head_dim),
            ),
        ]
        dqk = qk
    else:
        kv_l = max(model.kv_heads // tp, 1)
        width = (a_l + 2 * kv_l) * model.head_dim
        ops.append(Op("qkv", "gemm", 1, tokens, width, h, h * width))
        dqk = model.head_dim
    dv = model.v_head_dim
    ops += [
        Op("score", "attention", sequences * a_l, q, kv, dqk, 0),
        Op("context", "attention", sequences * a_l, q, dv, kv, 0),
        Op("out", "gemm", 1, tokens, h, a_l * dv, a_l * dv * h),
    ]
    ops += _ffn_ops(model, kind, tokens, tp, ep)
    return tuple(ops)


def _ffn_ops(model: Model, kind: str, tokens: int, tp: int, ep: int) -> list[Op]:
    h, up = model.hidden, model.mlp_matrices - 1  # up: 2 for SwiGLU (gate, up), 1 for GeLU
    if kind == "dense":
        f = model.ffn // tp
        return [
            Op("gate_up" if up == 2 else "up", "gemm", 1, tokens, up * f, h, h * up * f),
            Op("down", "gemm", 1, tokens, h, f, f * h),
        ]
    moe = model.moe
    f = moe.expert_ffn // tp
    local = moe.experts // ep
    per_expert = tokens * moe.top_k * ep / moe.experts * moe.capacity_factor
    ops = [
        Op("router", "gemm", 1, tokens, moe.experts, h, h * moe.experts),
        Op("expert_gate_up", "gemm", local, per_expert, up * f, h, local * h * up * f),
        Op("expert_down", "gemm", local, per_expert, h, f, local * f * h),
    ]
    if moe.shared_experts:
        fs = moe.shared_experts * f
        ops += [
            Op("shared_gate_up", "gemm", 1, tokens, up * fs, h, h * up * fs),
            Op("shared_down", "gemm", 1, tokens, h, fs, fs * h),
        ]
    return ops


def head_ops(model: Model, *, sequences: int = 1, queries: int | None = None, tp: int = 1):
    """The output projection to the vocabulary (split ``tp`` ways by vocabulary)."""
    _check(model, tp, 1)
    q = model.seq_len if queries is None else queries
    v = -(-model.vocab // tp)
    return (Op("lm_head", "gemm", 1, sequences * q, v, model.hidden, model.hidden * v),)


def model_ops(model: Model, **shape) -> list[tuple[str, int, tuple[Op, ...]]]:
    """Every operator of a forward pass as ``(part, repeats, ops)``: the dense layers, the MoE
    layers, the output head. ``shape`` is :func:`layer_ops`'s keywords.

    >>> from tlm.workloads import load_model
    >>> [(part, n) for part, n, _ in model_ops(load_model("deepseek-v3"), queries=4096)]
    [('dense', 3), ('moe', 58), ('head', 1)]
    """
    parts = []
    if model.dense_layers:
        parts.append(("dense", model.dense_layers, layer_ops(model, "dense", **shape)))
    if model.moe_layers:
        parts.append(("moe", model.moe_layers, layer_ops(model, "moe", **shape)))
    head = {k: v for k, v in shape.items() if k in ("sequences", "queries", "tp")}
    parts.append(("head", 1, head_ops(model, **head)))
    return parts
