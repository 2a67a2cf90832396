"""Memory per chip of a training configuration, vectorised over configurations.

For a model (:mod:`tlm.workloads`), arrays of :class:`~tlm.cluster.layout.Layout` fields (dp,
tp with ``sp``, pp with ``interleave``, cp, ep, ZeRO 0-3, micro-batch, recomputation) and the
formats of weights, gradients, optimizer state and activations, it gives each chip's weights,
gradients, optimizer state, activations and buffers in bytes, the total, and whether it fits
the HBM: one call for any number of configurations (the search's inner loop), or the same
formulas on Python numbers for one (:mod:`tlm.elementwise`). The peak is on the first pipeline
stage (most micro-batches in flight, the embedding) or the last (the output projection and its
logits); both are computed and the larger is kept.

**Activations** follow Korthikanti et al. 2022 (arXiv:2205.05198, Section 4), generalised
from their GPT layer to GQA, MLA, SwiGLU, RMSNorm, no dropout, MoE and any format; for a GPT
layer it is their Table 2 exactly (``sbh(34 + 5as/h)``, ``sbh(10 + 24/t + 5as/ht)`` with
tensor parallelism, ``/t`` with sequence parallelism, ``34 sbh/t`` selective, ``2 sbh`` full;
``selective+mlp`` drops the MLP's ``16 sbh/t`` too). The derivation: docs/workloads.md.

Examples
--------
>>> from tlm.workloads import load_model
>>> from tlm.cluster import Layout, memory_per_chip
>>> m = load_model("llama3-70b")
>>> r = memory_per_chip(m, Layout(dp=16, tp=8, pp=4), hbm_bytes=96 * 2**30)
>>> bool(r.fits), round(float(r.total_bytes) / 2**30, 1)
(True, 33.0)
>>> import numpy as np
>>> many = memory_per_chip(m, Layout(dp=16, tp=np.array([1, 2, 4, 8]), pp=4),
...                        hbm_bytes=96 * 2**30)
>>> many.fits.tolist(), (many.total_bytes / 2**30).round().tolist()
([False, False, True, True], [250.0, 126.0, 64.0, 33.0])
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..elementwise import (
    any_,
    as_float,
    as_int,
    ceil,
    clip,
    floor,
    maximum,
    minimum,
    shaped,
    where,
    zeros_like,
)
from ..workloads.model import Model, element_bytes
from ..workloads.operators import tp_allowed
from .layout import ATTENTION, LAYOUT_FIELDS, RECOMPUTE, Layout

__all__ = [
    "MemoryBreakdown",
    "DoesNotFit",
    "memory_per_chip",
    "hbm_capacity_bytes",
    "RECOMPUTE",
    "COMPONENTS",
    "DEFAULT_RESERVE_BYTES",
    "layer_activation_bytes",
]

#: The parts of a chip's memory, in the order they are reported.
COMPONENTS = ("weights", "gradients", "optimizer", "activations", "buffers")
#: Memory the runtime keeps for itself (allocator slack, collective scratch, code):
#: ASSUMED, not published for Trainium; 2 GiB (docs/workloads.md).
DEFAULT_RESERVE_BYTES = 2 * 2**30

_GiB = 2**30


class DoesNotFit(ValueError):
    """A configuration whose memory exceeds the chip's HBM (the message says by how much and
    which part is the largest)."""


def hbm_capacity_bytes(spec) -> int:
    """HBM of one chip of a preset (:class:`tlm.presets.ChipSpec` or its name): its
    :attr:`~tlm.presets.ChipSpec.hbm_capacity_bytes` (96 GiB on trn2)."""
    if isinstance(spec, str):
        from ..presets import load_preset

        spec = load_preset(spec)
    return spec.hbm_capacity_bytes


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per chip of each part, per configuration (arrays of one shape; NaN where the
    configuration is not valid). ``stage`` is 0 where the first pipeline stage is the peak,
    1 where the last is; ``reason`` is 0 for a valid configuration, else the index of what is
    wrong in :attr:`reasons`."""

    weights_bytes: np.ndarray
    gradients_bytes: np.ndarray
    optimizer_bytes: np.ndarray
    activations_bytes: np.ndarray
    buffers_bytes: np.ndarray
    total_bytes: np.ndarray
    hbm_bytes: np.ndarray
    fits: np.ndarray
    stage: np.ndarray
    reason: np.ndarray
    reasons: tuple
    config: dict
    model: str

    @property
    def headroom_bytes(self) -> np.ndarray:
        """HBM left (negative: missing)."""
        return self.hbm_bytes - self.total_bytes

    def row(self, i=0) -> dict:
        """Configuration ``i``'s figures as plain numbers."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                out[f.name] = np.ravel(value)[i].item()
        return out

    def check(self, i=0) -> None:
        """Raise :class:`DoesNotFit` unless configuration ``i`` fits, naming the model, the
        configuration, the need, the capacity, the shortfall and each part."""
        r = self.row(i)
        if r["reason"]:
            raise ValueError(self.reasons[r["reason"]])
        if r["fits"]:
            return
        if np.isnan(r["hbm_bytes"]):
            raise ValueError("hbm_bytes must be the chip's HBM in bytes to check a fit, not None")
        cfg = ", ".join(f"{k}={_show(k, np.ravel(v)[i])}" for k, v in self.config.items())
        parts = ", ".join(f"{c} {_gib(r[c + '_bytes'])}" for c in COMPONENTS)
        largest = max(COMPONENTS, key=lambda c: r[c + "_bytes"])
        raise DoesNotFit(
            f"{self.model} does not fit with {cfg}: it needs {_gib(r['total_bytes'])} per chip "
            f"and the chip has {_gib(r['hbm_bytes'])}, {_gib(-r['hbm_bytes'] + r['total_bytes'])}"
            f" too much ({parts}; the largest: {largest})"
        )


def _show(name, v):
    v = v.item() if hasattr(v, "item") else v
    return RECOMPUTE[v] if name == "recompute" else v


def _gib(x: float) -> str:
    return f"{x / _GiB:.3g} GiB" if abs(x) < 1024 * _GiB else f"{x / 2**40:.3g} TiB"


def _int_array(name, value):
    if type(value) is int or type(value) is np.int64:  # one integer: no dtype tests to run
        return np.asarray(value, dtype=np.int64)
    a = np.asarray(value)
    if a.dtype.kind not in "iu":  # (the kinds of numpy's integers; bool is "b")
        if a.dtype.kind == "f" and np.all(a == np.floor(a)):
            return a.astype(np.int64)
        raise ValueError(f"{name} must be an integer or an array of integers, not {value!r}")
    return a.astype(np.int64)


def _recompute_codes(value):
    if isinstance(value, str) and value in RECOMPUTE:  # one name: no sorting to do
        return np.asarray(RECOMPUTE.index(value), dtype=np.int64)
    a = np.asarray(value)
    if a.dtype.kind in "iu":
        codes = a.astype(np.int64)
        if np.any((codes < 0) | (codes >= len(RECOMPUTE))):
            raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}, not {value!r}")
        return codes
    names, inverse = np.unique(a.astype(str), return_inverse=True)  # a few names, many rows
    bad = [str(x) for x in names if x not in RECOMPUTE]
    if bad:
        raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}, not {bad[0]!r}")
    codes = np.array([RECOMPUTE.index(x) for x in names], dtype=np.int64)
    return codes[inverse].reshape(a.shape)


# --- parameters per chip ----------------------------------------------------------------------
def _attention_params(m: Model, t):
    """Attention weights (and biases) one chip holds, by tensor-parallel size ``t``."""
    h, a = m.hidden, m.heads
    a_l = a / t
    if m.mla:
        x = m.mla
        qk = x.qk_nope_head_dim + x.qk_rope_head_dim
        replicated = h * x.q_lora_rank + x.q_lora_rank  # down-projections and latent norms
        replicated += h * (x.kv_lora_rank + x.qk_rope_head_dim) + x.kv_lora_rank
        split = x.q_lora_rank * a * qk + x.kv_lora_rank * a * (x.qk_nope_head_dim + x.v_head_dim)
        return replicated + (split + a * x.v_head_dim * h) / t
    kv_l = maximum(m.kv_heads / t, 1)
    d = m.head_dim
    weights = h * (a_l + 2 * kv_l) * d + a_l * d * h
    return weights + (((a_l + 2 * kv_l) * d + h) if m.biases else 0)


def _ffn_params(m: Model, f, t):
    weights = m.mlp_matrices * m.hidden * f / t
    return weights + (((m.mlp_matrices - 1) * f / t + m.hidden) if m.biases else 0)


def _layer_params(m: Model, t, ep):
    """(dense layer params, MoE layer's non-expert params, MoE layer's expert params) per
    chip; the experts are sharded over the expert-data-parallel group, the rest over the
    data-parallel group."""
    base = _attention_params(m, t) + 2 * m.norm_parameters()
    dense = base + _ffn_params(m, m.ffn, t)
    if not m.moe:
        zero = zeros_like(dense)
        return dense, zero, zero
    x = m.moe
    moe_base = base + m.router_parameters()
    if x.shared_experts:  # the shared experts fused into one FFN, split like a dense one
        moe_base = moe_base + _ffn_params(m, x.shared_experts * x.expert_ffn, t)
    experts = (x.experts / ep) * _ffn_params(m, x.expert_ffn, t)
    return dense, moe_base, experts


# --- activations ------------------------------------------------------------------------------
def layer_activation_bytes(
    m: Model,
    kind,
    *,
    micro_batch,
    seq_len,
    tp,
    cp=1,
    sp,
    recompute,
    fmt="bf16",
    attention="flash",
):
    """Bytes one layer stores for the backward pass, for one micro-batch, on one chip
    (vectorised over every argument but ``m``, ``kind``, ``fmt`` and ``attention``).

    ``recompute`` is a name or code of :data:`RECOMPUTE` (or an array of them); ``attention``
    one of :data:`tlm.cluster.layout.ATTENTION`. See the module docstring and
    docs/workloads.md for the derivation.

    >>> from tlm.workloads import load_model
    >>> gpt = load_model("gpt3-175b")     # Korthikanti: sbh (34 + 5as/h) = 2048 x 12288 x 114
    >>> stored = layer_activation_bytes(gpt, "dense", micro_batch=1, seq_len=2048, tp=1,
    ...                                 sp=False, recompute="none", attention="materialised")
    >>> int(stored) == 2048 * 12288 * 114
    True
    """
    if kind not in ("dense", "moe") or (kind == "moe" and not m.moe):
        allowed = "dense or moe" if m.moe else "dense"
        raise ValueError(f"kind must be {allowed}, not {kind!r}")
    if attention not in ATTENTION:
        raise ValueError(f"attention must be one of {', '.join(ATTENTION)}, not {attention!r}")
    b, s, t, c = (np.asarray(x, dtype=float) for x in (micro_batch, seq_len, tp, cp))
    sp = np.asarray(sp, dtype=bool)
    code = _recompute_codes(recompute)
    return _activation_bytes(m, kind, b, s, t, c, sp, code, fmt, attention)


def _activation_bytes(m: Model, kind, b, s, t, c, sp, code, fmt, attention):
    """:func:`layer_activation_bytes` of checked inputs: floats ``b, s, t, c`` (micro-batch,
    sequence, tp, cp), booleans ``sp`` and recomputation codes ``code`` - arrays, or Python
    numbers for one configuration."""
    e = element_bytes(fmt)
    mask = 1.0 if m.dropout else 0.0  # dropout masks: one byte per element
    r = where(sp, t, 1.0)  # what tensor parallelism leaves whole
    tokens = b * s / c
    h = m.hidden
    a_l = m.heads / t
    # attention: norm input, the projections' shared input, the output dropout's mask
    whole = (2 * e + mask) * h
    if m.mla:
        x = m.mla
        qk = x.qk_nope_head_dim + x.qk_rope_head_dim
        # latents (replicated like the down-projections): q norm in, q up in, kv norm in +
        # RoPE key, kv up in
        whole = whole + e * (2 * x.q_lora_rank + 2 * x.kv_lora_rank + x.qk_rope_head_dim)
        split = e * a_l * (2 * qk + 2 * x.v_head_dim)  # Q, K, V, output projection input
    else:
        kv_l = maximum(m.kv_heads / t, 1)
        split = e * (a_l * m.head_dim + kv_l * (m.head_dim + m.v_head_dim) + a_l * m.v_head_dim)
    if attention == "flash":
        # each query's softmax statistics (fp32 log-sum-exp); the dropout mask is regenerated
        # from its seed in the backward pass
        scores = b * a_l * (s / c) * 4.0
    else:
        # scores: softmax output (+ dropout mask and output), b a s^2 over the context chips
        scores = b * a_l * (s / c) * s * (e + mask * (1 + e))
    # FFN: norm input, first projection's input, dropout mask; intermediates split by t
    whole = whole + (2 * e + mask) * h
    mid = 3 if m.mlp == "swiglu" else 2  # SwiGLU: gate and up outputs, product; GeLU: in, out
    if kind == "dense":
        split = split + e * mid * m.ffn / t
        routed = 0.0
    else:
        x = m.moe
        whole = whole + 4.0 * x.experts  # router probabilities, fp32
        split = split + e * mid * x.shared_experts * x.expert_ffn / t
        # each token's top-k copies: the expert input and output (for the weighted combine),
        # whole on every tensor-parallel chip, and the experts' intermediates split by t
        per_copy = 2 * e * h + e * mid * x.expert_ffn / t
        routed = tokens * x.top_k * x.capacity_factor * per_copy
    full_layer = tokens * (whole / r + split) + routed
    if attention == "flash":  # nothing left for selective recomputation to drop
        stored = full_layer + scores
    else:
        stored = where(code == 0, full_layer + scores, full_layer)
    # the MLP checkpointed too: only its input is kept (counted above, the first projection's)
    stored = where(code == 3, stored - _mlp_bytes(m, kind, b, s, t, c, sp, fmt), stored)
    return where(code == 2, tokens * e * h / r, stored)


def _mlp_bytes(m: Model, kind, b, s, t, c, sp, fmt):
    """What one layer's MLP block stores beyond its input (the norm's output, which the
    checkpoint keeps): the projections' intermediates (SwiGLU's gate and up outputs and their
    product; GeLU's input and output), split by ``t``; of an MoE block also the router's
    probabilities and every routed copy (expert input, output, intermediates). What
    ``selective+mlp`` does not store, and holds for one layer while it is recomputed."""
    e = element_bytes(fmt)
    r = where(sp, t, 1.0)
    tokens = b * s / c
    mid = 3 if m.mlp == "swiglu" else 2
    if kind == "dense":
        return tokens * e * mid * m.ffn / t
    x = m.moe
    per_copy = 2 * e * m.hidden + e * mid * x.expert_ffn / t
    shared = e * mid * x.shared_experts * x.expert_ffn / t
    return tokens * (4.0 * x.experts / r + shared + x.top_k * x.capacity_factor * per_copy)


# --- the model ----------------------------------------------------------------------------------
def memory_per_chip(
    model: Model,
    layout: Layout | None = None,
    *,
    global_batch=None,
    seq_len=None,
    weights="bf16",
    gradients="bf16",
    optimizer="fp32",
    master="fp32",
    activations="bf16",
    hbm_bytes=None,
    reserve_bytes=DEFAULT_RESERVE_BYTES,
) -> MemoryBreakdown:
    """Each chip's memory for configurations of ``model`` (scalars or arrays that broadcast).

    Parameters
    ----------
    layout : Layout, optional
        The parallel sizes and the memory recipe (:class:`tlm.cluster.layout.Layout`, whose
        defaults these are; scalars, or arrays that broadcast).
    global_batch, seq_len : int, optional
        Sequences per step and tokens per sequence (the model file's by default).
    weights, gradients, optimizer, master, activations : str
        Number formats (names of :data:`tlm.formats.FORMATS`): weights as computed on,
        gradients, Adam's two moments, the master copy of the weights (none when it is the
        weights' own format), activations.
    hbm_bytes : int, optional
        The chip's HBM (:func:`hbm_capacity_bytes` of a preset); without it nothing fits.
    reserve_bytes : int
        What the runtime keeps (:data:`DEFAULT_RESERVE_BYTES`, ASSUMED).

    Raises
    ------
    ValueError
        When every configuration input is a scalar and the configuration is not valid,
        naming the input, its value and what is allowed (arrays mark invalid rows instead).
    """
    layout = Layout() if layout is None else layout
    dp, tp, pp, cp, ep, zero, micro_batch, sp, recompute, interleave, attention = (
        getattr(layout, name) for name in LAYOUT_FIELDS
    )
    config = {
        "dp": _int_array("dp", dp),
        "tp": _int_array("tp", tp),
        "pp": _int_array("pp", pp),
        "cp": _int_array("cp", cp),
        "ep": _int_array("ep", ep),
        "zero": _int_array("zero", zero),
        "micro_batch": _int_array("micro_batch", micro_batch),
        "sp": np.asarray(sp, dtype=bool),
        "recompute": _recompute_codes(recompute),
        "interleave": _int_array("interleave", interleave),
    }
    scalar = all(v.ndim == 0 for v in config.values())
    gb = model.global_batch_sequences if global_batch is None else global_batch
    s = model.seq_len if seq_len is None else seq_len
    if all(v.size == 1 for v in config.values()):
        # one configuration: the same formulas on Python numbers (numpy's per-call overhead
        # on arrays of one element was most of a single estimate's time)
        shape = (1,) * max(v.ndim for v in config.values())
        arrays = {k: v.reshape(shape) for k, v in config.items()}
        values = {k: v.item() for k, v in config.items()}
    else:
        arrays = dict(zip(config, np.broadcast_arrays(*config.values()), strict=True))
        values = arrays
    reason, reasons = _validate(model, values, gb, s)
    if scalar and reason:
        raise ValueError(reasons[reason])
    ok = reason == 0
    safe = {
        k: where(ok, v, 1) if k not in ("sp", "recompute", "zero") else v for k, v in values.items()
    }
    formats = (weights, gradients, optimizer, master, activations)
    figures = _evaluate(model, safe, gb, s, formats, attention, reserve_bytes)
    nan = where(ok, 1.0, np.nan)
    hbm = np.nan if hbm_bytes is None else float(hbm_bytes)
    total = figures["total_bytes"] * nan
    fits = ok & (total <= hbm)
    shape = np.shape(arrays["tp"])
    return MemoryBreakdown(
        **{k: shaped(v * nan, shape) for k, v in figures.items() if k != "stage"},
        hbm_bytes=shaped(hbm, shape),
        fits=shaped(fits, shape, bool),
        stage=shaped(figures["stage"], shape, np.int64),
        reason=shaped(reason, shape, np.int64),
        reasons=reasons,
        config=arrays,
        model=model.name,
    )


def _validate(m: Model, c: dict, gb: int, s: int):
    """Reason codes per configuration (0: valid) and their messages."""
    reasons = [""]
    one = type(c["tp"]) is not np.ndarray  # one configuration, as Python numbers
    code = 0 if one else np.zeros(c["tp"].shape, dtype=np.int64)

    def rule(bad, message, values):
        """Mark the rows where ``bad`` holds (and nothing earlier did): one reason per bad
        value, so each row's message names its own value."""
        nonlocal code
        if one:
            if bad and not code:
                reasons.append(message.format(int(values)))
                code = len(reasons) - 1
            return
        bad = bad & (code == 0)
        if not bad.any():
            return
        for value in np.unique(values[bad]):
            reasons.append(message.format(int(value)))
            code[bad & (values == value)] = len(reasons) - 1

    for name in ("dp", "tp", "pp", "cp", "ep", "micro_batch", "interleave"):
        rule(c[name] < 1, f"{name} must be a positive integer, not {{}}", c[name])
    if one:
        tps = [c["tp"]] if c["tp"] >= 1 and not code else []
    else:
        tps = np.unique(c["tp"][(c["tp"] >= 1) & (code == 0)])
    for t in tps:
        why = tp_allowed(m, int(t))
        if why:
            rule(c["tp"] == t, f"tp must be {why} of {m.name}, not {{}}", c["tp"])
    rule(
        c["pp"] > m.layers,
        f"pp must be at most the {m.layers} layers of {m.name}, not {{}}",
        c["pp"],
    )
    experts = m.moe.experts if m.moe else 1
    allowed = (
        f"a divisor of the {experts} experts of {m.name}"
        if m.moe
        else (f"1 for {m.name} (a dense model)")
    )
    rule(experts % maximum(c["ep"], 1) != 0, f"ep must be {allowed}, not {{}}", c["ep"])
    dpcp = c["dp"] * c["cp"]
    rule(
        dpcp % maximum(c["ep"], 1) != 0,
        "ep must divide dp x cp (the expert-parallel group is carved from them), not {}",
        c["ep"],
    )
    rule(
        s % maximum(c["cp"], 1) != 0,
        f"cp must divide the sequence of {s} tokens, not {{}}",
        c["cp"],
    )
    dmb = c["dp"] * c["micro_batch"]
    rule(
        gb % maximum(dmb, 1) != 0,
        f"dp x micro_batch must divide the global batch of {gb} sequences, not {{}}",
        dmb,
    )
    rule((c["zero"] < 0) | (c["zero"] > 3), "zero must be one of 0, 1, 2, 3, not {}", c["zero"])
    rule(
        (c["interleave"] > 1) & (c["pp"] < 2),
        "interleave must be 1 without pipeline parallelism (pp 1), not {}",
        c["interleave"],
    )
    ppv = c["pp"] * c["interleave"]
    rule(
        ppv > virtual_stages_allowed(m),
        f"pp x interleave must be at most {virtual_stages_allowed(m)} (the {m.layers} layers"
        f" of {m.name}, the embedding and the output layer a virtual stage each), not {{}}",
        ppv,
    )
    return code, tuple(reasons)


def virtual_stages_allowed(m: Model) -> int:
    """The most virtual pipeline stages (``pp x interleave``) ``m`` can be split into: one a
    layer, and the embedding and the output layer a stage each (Megatron-core's
    ``account_for_embedding_in_pipeline_split`` and ``..._loss_in_...``; Llama 3 405B's 126
    layers in 16 stages of 8 slots, the first and last holding a layer fewer). The layers of a
    stage that ``pp`` does not divide evenly go to the middle stages (:func:`_evaluate`), so
    every virtual stage but the first stage's first and the last stage's last holds a layer."""
    return m.layers + 2


def _in_flight(pp, v, n_micro, r, n, light):
    """Layer-micro-batches whose activations pipeline stage ``r`` (``n`` layers) holds at
    its peak: 1F1B's warm-up plus the one in its steady state, never more than the step's
    micro-batches. Without interleaving ``pp - r`` micro-batches of its ``n`` layers. Over
    ``v`` virtual stages (chunks), Megatron-LM's warm-up of ``2 (pp - r - 1) + (v - 1) pp``
    chunk forwards plus one, taken in rounds of ``pp`` micro-batches a chunk (chunk 0 for
    micro-batches 0..pp-1, chunk 1 for the same, ..., then chunk 0 again). ``light`` is the
    chunk holding the fewest layers, ``floor(n / v)``: the first stage's first chunk (the
    embedding's side) or the last stage's last (the output layer's), -1 when the chunks are
    even (``n / v`` each). With even chunks it is ``n (pp + (pp - 2r - 1) / v)`` -
    Korthikanti's ``pp (1 + (pp - 1)/(pp v))`` stage-units on the first."""
    plain = minimum(pp - r, n_micro) * n
    vf = maximum(v, 1)
    forwards = minimum(2 * (pp - r - 1) + (v - 1) * pp + 1, v * n_micro)
    rounds = floor(forwards / pp)  # chunks whose pp micro-batches are all in flight (<= v)
    rest = forwards - rounds * pp  # micro-batches of chunk `rounds mod v`
    c_light = where(light >= 0, floor(n / vf), n / vf)
    c_heavy = where(light >= 0, (n - c_light) / maximum(vf - 1, 1), n / vf)
    full = rounds * c_heavy + where((light >= 0) & (light < rounds), c_light - c_heavy, 0.0)
    nxt = where(rounds >= v, 0, rounds)
    c_next = where(nxt == light, c_light, c_heavy)
    interleaved = pp * full + rest * c_next
    return where(v > 1, interleaved, plain)


def _evaluate(m, c, gb, s, formats, attention, reserve):
    dp, t, pp, cp, ep = (as_float(c[k]) for k in ("dp", "tp", "pp", "cp", "ep"))
    zero, b, rc, v = c["zero"], as_float(c["micro_batch"]), c["recompute"], c["interleave"]
    sp = c["sp"]
    wf, gf, of, mf, af = formats
    wb, gb_, ob = element_bytes(wf), element_bytes(gf), element_bytes(of)
    master = 0.0 if mf == wf else element_bytes(mf)
    ab = element_bytes(af)
    dense_p, moe_p, expert_p = _layer_params(m, t, ep)

    # layers per stage: what pp does not divide goes to the stages after the first (stages
    # 1 .. L mod pp take one more), so the first - which holds the most micro-batches and the
    # embedding - and, unless every other stage has one more, the last - which holds the
    # output layer - take the fewest (as Llama 3 405B's 126 layers over 16 stages: 7, 8 x 14, 7)
    L = m.layers
    base = floor(L / pp)
    rem = L - base * pp
    k_dense = m.dense_layers if m.moe else L
    first_n = base
    second_n = base + where(rem >= 1, 1, 0)
    last_n = base + where((pp > 1) & (rem == pp - 1), 1, 0)

    vocab_l = ceil(m.vocab / t)
    embed = vocab_l * m.hidden + (s * m.hidden if m.position == "learned" else 0)
    head = where(pp > 1, vocab_l * m.hidden, 0.0) if m.tied_embeddings else vocab_l * m.hidden
    head = head + m.norm_parameters()
    n_micro = gb / (dp * b)
    # the first, the second (a peak candidate only from 3 stages: with 2 it is the last) and
    # the last stage: (index, layers, dense layers among them, parameters beyond the layers)
    candidates = (
        (0, first_n, minimum(k_dense, first_n), embed + where(pp == 1, head, 0.0)),
        (
            where(pp >= 3, 1, 0),
            where(pp >= 3, second_n, first_n),
            where(pp >= 3, clip(k_dense - first_n, 0, second_n), minimum(k_dense, first_n)),
            where(pp >= 3, 0.0, embed + where(pp == 1, head, 0.0)),
        ),
        (pp - 1, last_n, clip(k_dense - (L - last_n), 0, last_n), head),
    )

    d_shard = dp * cp
    e_shard = d_shard / ep
    # what is the same on every stage: a layer's activations per micro-batch, and while it
    # is recomputed (the larger of the two kinds of layer)
    shape = (b, s, t, cp, sp)
    dense_acts = _activation_bytes(m, "dense", *shape, rc, af, attention)
    moe_acts = _activation_bytes(m, "moe", *shape, rc, af, attention) if m.moe else 0.0
    working = _activation_bytes(m, "dense", *shape, 0 * rc, af, attention)
    if m.moe:
        working = maximum(working, _activation_bytes(m, "moe", *shape, 0 * rc, af, attention))
    tokens = b * s / cp
    r = where(sp, t, 1.0)
    # buffers: ZeRO-3 gathers a layer's weights (two in flight: one prefetched); pipeline
    # send and receive of one micro-batch's hidden state; a fully recomputed layer's
    # activations while it is recomputed; context-parallel K/V blocks in flight; reserve
    biggest = maximum(dense_p, moe_p + expert_p) if m.moe else dense_p
    buf = where(zero >= 3, 2 * biggest * wb, 0.0)
    buf = buf + where(pp > 1, 2 * tokens * ab * m.hidden / r, 0.0)
    buf = buf + where(rc == 2, working, 0.0)
    if any_(rc == 3):  # one layer's MLP block while it is recomputed
        mlp = _mlp_bytes(m, "dense", *shape, af)
        if m.moe:
            mlp = maximum(mlp, _mlp_bytes(m, "moe", *shape, af))
        buf = buf + where(rc == 3, mlp, 0.0)
    kv_l = maximum(m.kv_heads / t, 1)
    buf = buf + where(cp > 1, 2 * tokens * ab * kv_l * (m.head_dim + m.v_head_dim), 0.0)
    buf = buf + reserve
    # final norm and output projection inputs, fp32 logits split by vocabulary
    head_acts = tokens * (2 * ab * m.hidden / r + 4.0 * vocab_l)
    results = []
    for index, n_layers, n_dense, extra in candidates:
        n_moe = n_layers - n_dense
        pd = n_dense * dense_p + n_moe * moe_p + extra  # sharded over dp x cp
        pe = n_moe * expert_p  # sharded over dp x cp / ep
        held = pd / where(zero >= 3, d_shard, 1) + pe / where(zero >= 3, e_shard, 1)
        weights = held * wb
        grads = pd / where(zero >= 2, d_shard, 1) + pe / where(zero >= 2, e_shard, 1)
        grads = grads * gb_
        opt = pd / where(zero >= 1, d_shard, 1) + pe / where(zero >= 1, e_shard, 1)
        opt = opt * (master + 2 * ob)
        per_layer = dense_acts
        if m.moe:  # the stage's mean layer (the split of dense and MoE layers by chunk is not
            # tracked: DeepSeek-V3's 3 dense layers sit in the first chunk)
            per_layer = (n_dense * dense_acts + n_moe * moe_acts) / maximum(n_layers, 1)
        light = where(index == 0, 0, where(index == pp - 1, v - 1, -1))
        layers_held = _in_flight(pp, v, n_micro, index, n_layers, light)
        acts = per_layer * layers_held
        first = index == 0
        # the embedding's dropout mask, per micro-batch in flight on the first stage
        mask = tokens * m.hidden / r * (1.0 if m.dropout else 0.0)
        acts = acts + where(first, mask * minimum(pp, n_micro), 0.0)
        acts = acts + where(index == pp - 1, head_acts, 0.0)
        results.append((weights, grads, opt, acts, buf, index))
    totals = [sum(parts[:5]) for parts in results]
    peak = where(totals[1] > totals[0], 1, 0)
    peak = where(totals[2] > maximum(totals[0], totals[1]), 2, peak)
    out = {}
    for j, name in enumerate(COMPONENTS):
        out[f"{name}_bytes"] = _pick(peak, [x[j] for x in results]) + 0.0
    out["total_bytes"] = _pick(peak, totals) + 0.0
    out["stage"] = as_int(_pick(peak, [x[5] for x in results]))
    return out


def _pick(which, values):
    """``values[which]`` per configuration (``which`` 0, 1 or 2)."""
    return where(which == 2, values[2], where(which == 1, values[1], values[0]))
