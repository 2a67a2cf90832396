"""The training step: time per step and where it goes, vectorised over parallel configurations.

For a model (:mod:`tlm.workloads`), a chip's operator costs (:class:`tlm.costs.OpCosts`: the
chip TLM's calibrated GEMM efficiency, or a roofline where there is none) and a network
(:class:`tlm.cluster.network.Network`), :func:`training_step` gives for a
:class:`tlm.cluster.Layout` - data (ZeRO 0-3), tensor (with sequence parallelism), pipeline
(1F1B with interleaved virtual stages), context and expert parallelism, micro-batch and
recomputation, scalars or arrays - the step time and its parts (the slowest stage's
micro-batch, the pipeline's bubble, the data-parallel gradients' reduction and its overlap, the
optimizer), MFU and HFU, tokens/s, and each chip's memory
(:func:`tlm.cluster.memory.memory_per_chip`, whose validity rules it shares). The model of a
step, its derivation and what is ASSUMED: docs/cluster.md, "The training step".

Examples
--------
>>> from tlm.workloads import load_model
>>> from tlm.costs import OpCosts
>>> from tlm.hardware import load_hardware
>>> from tlm.cluster import Layout
>>> from tlm.cluster.network import Network
>>> trn2 = load_hardware("trn2")
>>> step = training_step(load_model("llama3-70b"), OpCosts.for_preset("trn2"),
...                      Network.for_hardware(trn2), Layout(dp=8, tp=16, pp=4),
...                      hbm_bytes=trn2.hbm_bytes)
>>> 0.2 < float(step.mfu) < 0.7, bool(step.memory.fits)
(True, True)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache

import numpy as np

from ..costs.attention import flash_forward_s
from ..elementwise import (
    any_,
    as_float,
    ceil,
    floor,
    logical_not,
    maximum,
    minimum,
    ones_like,
    shaped,
    where,
    zeros_like,
)
from ..workloads.model import Model, element_bytes
from ..workloads.operators import head_ops, layer_ops
from .layout import ATTENTION, Layout
from .memory import RECOMPUTE, MemoryBreakdown, memory_per_chip

__all__ = [
    "TrainingStep",
    "training_step",
    "PARTS",
    "ZERO_OPS",
    "ATTENTION",
    "STEP_FIELDS",
    "ADAM_BYTES_PER_PARAMETER",
    "OVERLAP_TP",
    "overlap_tp_for",
    "GRAD_ACC",
]

#: How the tensor-parallel collectives overlap the GEMMs (``training_step(overlap_tp=...)``):
#: none, the backward pass's behind the weight-gradient GEMMs, or every pass's chunked.
OVERLAP_TP = ("off", "backward", "on")


def overlap_tp_for(hw) -> str:
    """The tensor-parallel overlap a hardware's software stack gives unasked: ``backward`` on
    Trainium (the chip's collective cores run beside any compute that does not wait for them;
    Neuron runtime docs, "Compute-Communication Overlap in Neuron"), ``off`` on GPUs
    (Megatron-LM's asynchronous backward and ``--tp-comm-overlap`` are options of a run)."""
    return "backward" if hw.chip_preset is not None else "off"


#: How each micro-batch's gradients join the step's (``training_step(grad_acc=...)``): ``bf16``,
#: accumulated in the weight-gradient GEMMs' own output and reduced in bf16 (nothing charged
#: beyond the GEMMs); ``fp32``, added into an fp32 buffer by a pass of their own and reduced in
#: fp32 (neuronx-distributed's GPU-compatible precision, its example scripts' default).
GRAD_ACC = ("bf16", "fp32")

#: The MLP block's operators ``selective+mlp`` reruns in the backward pass: the projections up
#: to the last one's input (the last one's output feeds nothing the backward needs; under
#: XLA, neuronx-distributed's runtime, a traced value nothing uses is not computed).
MLP_RERUN_OPS = ("gate_up", "up", "expert_gate_up", "shared_gate_up")

#: The per-layout arrays of :class:`TrainingStep` (its memory aside).
STEP_FIELDS = ("step_s", "mfu", "tokens_per_s")
#: The parts of a step's time, in the order they are reported; they add up to ``step_s``.
PARTS = (
    "compute",
    "recompute",
    "tp_comm",
    "cp_comm",
    "ep_comm",
    "pp_comm",
    "bubble",
    "dp_comm",
    "optimizer",
)
#: Bytes of HBM traffic per parameter of Adam's update on a local shard: read the weights and
#: gradients (bf16, 2 + 2), the master copy and both moments (fp32, 3 x 4), write all but the
#: gradients (2 + 3 x 4).
ADAM_BYTES_PER_PARAMETER = 30
#: What ZeRO stage ``z`` communicates over the data-parallel group per step (for the docs).
ZERO_OPS = {
    0: "all-reduce of the gradients",
    1: "reduce-scatter of the gradients, all-gather of the updated weights",
    2: "reduce-scatter of the gradients, all-gather of the updated weights",
    3: "reduce-scatter of the gradients and an all-gather of the weights before each "
    "micro-batch's forward and backward",
}


@dataclass(frozen=True)
class TrainingStep:
    """One training step per configuration (arrays of one shape; NaN where a configuration
    is not valid, its reason in ``memory.reason``). Times in seconds per step; the parts in
    :data:`PARTS` add up to ``step_s``. ``mfu`` counts attention's products over the whole
    square of queries and keys (Megatron-LM's and Korthikanti's count, as papers print MFU);
    ``causal_mfu`` only the keys at or before each query (what a causal kernel computes: at
    long sequences the two differ most)."""

    step_s: np.ndarray
    compute_s: np.ndarray
    recompute_s: np.ndarray
    tp_comm_s: np.ndarray
    cp_comm_s: np.ndarray
    ep_comm_s: np.ndarray
    pp_comm_s: np.ndarray
    bubble_s: np.ndarray
    dp_comm_s: np.ndarray
    optimizer_s: np.ndarray
    micro_batch_s: np.ndarray
    micro_batches: np.ndarray
    chips: np.ndarray
    tokens_per_step: np.ndarray
    tokens_per_s: np.ndarray
    model_flop_per_step: np.ndarray
    causal_model_flop_per_step: np.ndarray
    hardware_flop_per_step: np.ndarray
    mfu: np.ndarray
    causal_mfu: np.ndarray
    hfu: np.ndarray
    memory: MemoryBreakdown
    costs_source: str

    @property
    def valid(self) -> np.ndarray:
        """Configurations that are valid (whether or not they fit in memory)."""
        return self.memory.reason == 0

    def row(self, i=0) -> dict:
        """Configuration ``i``'s figures as plain numbers (the memory under ``memory``)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                out[f.name] = np.ravel(value)[i].item()
        out["memory"] = self.memory.row(i)
        out["costs_source"] = self.costs_source
        return out


def _classes(*arrays):
    """Unique rows of the given integer arrays and each configuration's row index (0 for one
    configuration given as scalars)."""
    if not any(type(a) is np.ndarray for a in arrays):  # one configuration: no sorting to do
        return np.array([arrays], dtype=np.int64), 0
    stacked = np.stack([np.ravel(a) for a in arrays], axis=1)
    rows, inverse = np.unique(stacked, axis=0, return_inverse=True)
    return rows, inverse.reshape(np.shape(arrays[0]))


def _take(values: np.ndarray, which):
    """``values[which]``: per configuration (``which`` an index array), or for one
    configuration (an int) as a float."""
    return values[which] if type(which) is np.ndarray else values.item(which)


def _backward_shapes(m, n, k):
    """The two products of a forward ``[m,k] x [k,n]`` product's backward pass: the input's
    gradient ``[m,n] x [n,k]`` and the weight's ``[k,m] x [m,n]``, as (m, n, k) triples."""
    return (m, k, n), (k, n, m)


class _ArrayKey:
    """An array as a cache key: equal by shape, dtype and bytes."""

    __slots__ = ("array", "_key")

    def __init__(self, array: np.ndarray):
        self.array, self._key = array, (array.shape, array.dtype.str, array.tobytes())

    def __hash__(self):
        return hash(self._key)

    def __eq__(self, other):
        return isinstance(other, _ArrayKey) and self._key == other._key


@lru_cache(maxsize=4096)
def _times(make, model, costs, *keys):
    return make(model, costs, *(k.array if isinstance(k, _ArrayKey) else k for k in keys))


def _cached(make, model, costs, *args):
    """``make(model, costs, *args)``, kept by the values of the arguments (an array by its
    bytes): a search meets the same few shape classes in every chunk, a single estimate in
    every call."""
    keys = (_ArrayKey(a) if isinstance(a, np.ndarray) else a for a in args)
    return _times(make, model, costs, *keys)


def _layer_times(model: Model, costs, kind, classes, seq_len, fmt, act_fmt, attention):
    """Per shape class (rows of tp, ep, micro_batch, cp): forward GEMM, attention-product,
    vector and recomputed-attention seconds of one layer, and the backward's."""
    names, batch, m, n, k, owner, is_attn = [], [], [], [], [], [], []
    rerun_mlp = []  # the MLP's projections up to the last one's input (selective+mlp)
    for c, (tp, ep, mb, cp) in enumerate(classes):
        ops = layer_ops(
            model,
            kind,
            sequences=int(mb),
            queries=seq_len // int(cp),
            keys=seq_len,
            tp=int(tp),
            ep=int(ep),
        )
        for op in ops:
            names.append(op.name)
            batch.append(op.batch)
            m.append(op.m)
            n.append(op.n)
            k.append(op.k)
            owner.append(c)
            is_attn.append(op.kind == "attention")
            rerun_mlp.append(op.name in MLP_RERUN_OPS)
    batch, m, n, k = (np.asarray(x, dtype=float) for x in (batch, m, n, k))
    owner, is_attn, rerun_mlp = np.asarray(owner), np.asarray(is_attn), np.asarray(rerun_mlp)
    score = np.array([name == "score" for name in names])
    fwd = np.array(costs.gemm_s(m, n, k, batch, fmt=fmt), dtype=float)
    bwd = sum(costs.gemm_s(*shape, batch, fmt=fmt) for shape in _backward_shapes(m, n, k))
    # a GPU's flash kernel at its published speed at the sequence's length (the keys each
    # query block walks; tlm.costs.attention.FA2_SPEED), not the GEMMs': its backward
    # products over the whole square (two of each shape)
    kernel = getattr(costs, "flash_efficiency", None) if attention == "flash" else None
    if kernel is not None:
        at_peak = 2.0 * batch * m * n * k / costs.peak_flops("bf16")
        bwd = np.where(is_attn, 2.0 * at_peak / kernel(seq_len)[1], bwd)
    # flash: the chip's causal kernel computes only its tiles at or below the diagonal, each
    # pass at its own tiling; its forward products by the one definition inference also reads
    # (tlm.costs.attention.flash_forward_s); the materialised path the square at the GEMMs'
    f_score, f_context, f_bwd = costs.flash.fractions(seq_len) if attention == "flash" else (1,) * 3
    if attention == "flash":
        context = is_attn & ~score  # each class's score product, then its context product
        fwd[score], fwd[context] = flash_forward_s(
            costs, batch[score], m[score], n[score], k[score], n[context], causal=seq_len, fmt=fmt
        )
    score_fwd = fwd
    bwd = np.where(is_attn, bwd * f_bwd, bwd)
    count = len(classes)

    def per_class(values, mask=None):
        w = values if mask is None else np.where(mask, values, 0.0)
        return np.bincount(owner, weights=w, minlength=count)

    gemm_fwd = per_class(fwd, ~is_attn)
    attn_fwd = per_class(fwd, is_attn)
    gemm_bwd = per_class(bwd, ~is_attn)
    attn_bwd = per_class(bwd, is_attn)
    # vector work per layer: two norms and two residual adds over the hidden state, softmax
    # over the scores, the activation over the FFN's intermediates (routed copies in MoE)
    tp, ep, mb, cp = (classes[:, i].astype(float) for i in range(4))
    tokens = mb * seq_len / cp
    h = model.hidden
    a_l = model.heads / tp
    scores = mb * a_l * (seq_len / cp) * seq_len
    if kind == "dense":
        inter = tokens * model.ffn / tp
    else:
        x = model.moe
        inter = tokens * (x.top_k * x.capacity_factor + x.shared_experts) * x.expert_ffn / tp
    gates = 2.0 if model.mlp == "swiglu" else 1.0
    norm = costs.vector_s(2 * tokens * h, op="norm", fmt=act_fmt)
    elem = costs.vector_s(2 * tokens * h + gates * inter, op="elementwise", fmt=act_fmt)
    activation = costs.vector_s(gates * inter, op="elementwise", fmt=act_fmt)
    if attention == "materialised":
        # the scores go through HBM: softmax, and dropout of the probabilities (its mask and
        # output) where the model has dropout
        soft = costs.vector_s(scores, op="softmax", fmt=act_fmt)
        if model.dropout:
            soft = soft + costs.vector_s(scores, op="elementwise", fmt=act_fmt)
        soft_bwd = soft
        extra_bwd = 0.0
    else:
        # flash: the softmax on chip, the scores never in HBM, over the kernel's tiles; the
        # backward pass recomputes the score product (one more product of the score's shape)
        soft = costs.vector_s(scores, op="softmax", fmt=act_fmt, from_hbm=False)
        soft, soft_bwd = soft * f_context, soft * f_bwd
        # the recomputed product at the backward's speed where the kernel has one
        rerun = score_fwd * (f_bwd / f_score) if kernel is None else bwd / 2
        extra_bwd = per_class(rerun, score)
    vec_fwd = norm + soft + elem
    return {
        "fwd": gemm_fwd + attn_fwd + vec_fwd,
        "bwd": gemm_bwd + attn_bwd + extra_bwd + 2 * (norm + elem + soft_bwd),
        "attn_fwd": attn_fwd + soft,
        "gemm_fwd": gemm_fwd,
        "gemm_bwd": gemm_bwd,
        "mlp_gemm_fwd": per_class(fwd, rerun_mlp),
        "mlp_fwd": per_class(fwd, rerun_mlp) + activation,
    }


#: Codes of the recomputation modes (:data:`RECOMPUTE` indices) the step treats apart, and the
#: entries :func:`_flop_per_token` adds after the modes: the MLP's rerun alone, the causal count.
_SELECTIVE, _SELECTIVE_MLP = RECOMPUTE.index("selective"), RECOMPUTE.index("selective+mlp")
_FULL = RECOMPUTE.index("full")
_MLP_ONLY, _CAUSAL = len(RECOMPUTE), len(RECOMPUTE) + 1


def _flop_per_token(model: Model, costs, seq_len):
    """Training FLOPs per token of each recomputation mode (:data:`RECOMPUTE` order; the
    first, none, is the model's FLOPs), then the MLP's rerun alone (``selective+mlp`` with
    flash attention, whose selective part reruns nothing) and the model's FLOPs with causal
    attention. ``costs`` is not used (:func:`_cached`'s key)."""
    modes = tuple(model.training_flop_per_token(seq_len, r) for r in RECOMPUTE)
    mlp_only = modes[0] + model.mlp_rerun_flop_per_token()
    return modes + (mlp_only, model.training_flop_per_token(seq_len, causal=True))


def _head_times(model: Model, costs, classes, seq_len, fmt, act_fmt):
    """Per class (tp, micro_batch, cp): the output projection's forward and backward seconds
    (with the cross-entropy's vector work over the local vocabulary)."""
    out_f, out_b = [], []
    for tp, mb, cp in classes:
        (op,) = head_ops(model, sequences=int(mb), queries=seq_len // int(cp), tp=int(tp))
        f = costs.gemm_s(op.m, op.n, op.k, op.batch, fmt=fmt)
        b = sum(costs.gemm_s(*s, op.batch, fmt=fmt) for s in _backward_shapes(op.m, op.n, op.k))
        ce = costs.vector_s(op.m * op.n, op="softmax", fmt="fp32")  # fp32 logits
        out_f.append(float(np.asarray(f)) + float(np.asarray(ce)))
        out_b.append(float(np.asarray(b)) + float(np.asarray(ce)))
    return np.array(out_f), np.array(out_b)


def training_step(
    model: Model,
    costs,
    network,
    layout: Layout | None = None,
    *,
    overlap_dp=True,
    overlap_tp="off",
    overlap_ep=False,
    grad_acc="bf16",
    global_batch=None,
    seq_len=None,
    fmt="bf16",
    hbm_bytes=None,
    reserve_bytes=None,
) -> TrainingStep:
    """Step time, its breakdown, MFU and memory per chip for configurations of ``model``.

    Parameters
    ----------
    model : tlm.workloads.Model
    costs : tlm.costs.OpCosts
        One chip's operator costs.
    network : tlm.cluster.network.Network
        Collective and point-to-point times of a group at a stride.
    layout : Layout, optional
        The parallel sizes and the memory recipe (:class:`tlm.cluster.layout.Layout`, whose
        defaults these are; scalars, or arrays that broadcast together).
    overlap_dp : bool or array
        Hide the gradients' reduction behind the last micro-batch's backward pass.
    overlap_tp : {"off", "backward", "on"}
        Which tensor-parallel collectives hide behind GEMMs (:data:`OVERLAP_TP`): ``off``,
        every one exposed; ``backward``, a layer's backward-pass collectives (all-gathers and
        reduce-scatters, or all-reduces) behind its weight-gradient GEMMs - half its backward
        GEMMs, once - which do not wait for them (Megatron-LM's asynchronous backward, and
        Neuron's collective cores, which run beside any compute that does not depend on
        them), the forward's exposed; ``on``, each all-gather and reduce-scatter (sequence
        parallelism) behind its layer's GEMMs of the same pass, chunked as Megatron-LM's
        ``--tp-comm-overlap`` does, once; all-reduces stay exposed.
    overlap_ep : bool
        DualPipe's schedule (DeepSeek-V3): an MoE layer's dispatch and combine all-to-alls
        hide behind another micro-batch's forward and backward of that layer, once; needs two
        micro-batches or more.
    grad_acc : {"bf16", "fp32"}
        The gradients' accumulation (:data:`GRAD_ACC`): ``bf16``, in place by the
        weight-gradient GEMMs; ``fp32``, an fp32 buffer each micro-batch's bf16 gradients are
        added into by a pass through HBM (read 2 + 4 bytes, write 4 per parameter of the
        stage, charged in ``compute``), reduce-scattered in fp32 and held in fp32 (memory).
    global_batch, seq_len : int, optional
        Sequences per step and tokens per sequence (the model file's by default).
    fmt : str
        Format of the GEMMs' inputs (``bf16``, ``fp8_e4m3``, ...); activations, weights and
        gradients are kept in bf16.
    hbm_bytes, reserve_bytes : optional
        Passed to the memory model (without ``hbm_bytes`` nothing fits).

    Raises
    ------
    ValueError
        When every configuration input is a scalar and the configuration is not valid (the
        memory model's messages: the input, its value and what is allowed).
    """
    layout = Layout() if layout is None else layout
    attention = layout.attention  # the kernel the memory model assumes too
    if grad_acc not in GRAD_ACC:
        raise ValueError(f"grad_acc must be one of {', '.join(GRAD_ACC)}, not {grad_acc!r}")
    gb = model.global_batch_sequences if global_batch is None else int(global_batch)
    s = model.seq_len if seq_len is None else int(seq_len)
    extra = {} if reserve_bytes is None else {"reserve_bytes": reserve_bytes}
    mem = memory_per_chip(
        model,
        layout,
        global_batch=gb,
        seq_len=s,
        gradients=grad_acc,
        hbm_bytes=hbm_bytes,
        **extra,
    )
    shape = mem.reason.shape
    c = mem.config
    ok = mem.reason == 0
    if isinstance(overlap_dp, (bool, np.bool_)):
        overlap = bool(overlap_dp)
    else:
        overlap = np.broadcast_to(np.asarray(overlap_dp, dtype=bool), shape)
    if mem.reason.size == 1:
        # one configuration: the same formulas on Python numbers (numpy's per-call overhead
        # on arrays of one element was most of a single estimate's time)
        c = {k: v.item() for k, v in c.items()}
        ok, overlap = ok.item(), bool(overlap)
    safe = {k: where(ok, v, 1) for k, v in c.items() if k not in ("sp", "recompute", "zero")}
    dpv, tpv, ppv, cpv, epv, mbv, vv = (
        safe[k] for k in ("dp", "tp", "pp", "cp", "ep", "micro_batch", "interleave")
    )
    zero_v, rc, spv = c["zero"], c["recompute"], c["sp"]
    # what is rerun: selective recomputation reruns the attention products, which flash's
    # backward pass does already (the score product, counted in the backward), so with flash
    # it reruns what no recomputation does, and selective+mlp the MLP alone (_MLP_ONLY, the
    # index of its FLOPs in _flop_per_token) - in time and in hardware FLOPs
    if attention == "flash":
        rerun = where(rc == _SELECTIVE, 0, where(rc == _SELECTIVE_MLP, _MLP_ONLY, rc))
    else:
        rerun = rc
    act = "bf16"
    ab = element_bytes(act)
    wb = element_bytes("bf16")
    dpf, tpf, ppf, cpf, epf, mbf, vf = (as_float(x) for x in (dpv, tpv, ppv, cpv, epv, mbv, vv))

    # --- one layer of each kind, per shape class ------------------------------------------
    classes, which = _classes(tpv, epv, mbv, cpv)
    kinds = [("dense", model.dense_layers if model.moe else model.layers)]
    if model.moe:
        kinds.append(("moe", model.moe_layers))
    per_kind = {
        kind: _cached(_layer_times, model, costs, kind, classes, s, fmt, act, attention)
        for kind, _ in kinds
    }

    # the slowest stage: the first stages take one more layer when pp does not divide
    L = model.layers
    n_layers = ceil(L / ppf)
    # MoE layers on that stage (the dense ones come first in the model)
    n_dense_layers = model.dense_layers if model.moe else L
    n_dense = minimum(n_dense_layers, n_layers)
    n_moe = n_layers - n_dense
    counts = {"dense": n_dense, "moe": n_moe}

    fwd = sum(counts[k] * _take(per_kind[k]["fwd"], which) for k, _ in kinds)
    bwd = sum(counts[k] * _take(per_kind[k]["bwd"], which) for k, _ in kinds)
    attn_fwd = sum(counts[k] * _take(per_kind[k]["attn_fwd"], which) for k, _ in kinds)
    mlp_fwd = sum(counts[k] * _take(per_kind[k]["mlp_fwd"], which) for k, _ in kinds)
    head_classes, head_which = _classes(tpv, mbv, cpv)
    head_f, head_b = _cached(_head_times, model, costs, head_classes, s, fmt, act)
    # the head runs on the last stage, which has floor(L/pp) layers; the slower of the two
    last_share = where(ppf > 1, floor(L / ppf) / n_layers, 1.0)
    head_total = _take(head_f, head_which) + _take(head_b, head_which)
    stage_compute = maximum(fwd + bwd, (fwd + bwd) * last_share + head_total)
    weights = mem.weights_bytes
    params = _stage_params(c, weights if type(tpf) is np.ndarray else weights.item())
    grad_b = element_bytes(grad_acc)
    if grad_b > wb:
        # each micro-batch's bf16 gradients read and added into the wider buffer (read, write)
        stage_compute = stage_compute + costs.memory_s(params * (wb + 2 * grad_b))
    recompute_t = where(rerun == _FULL, fwd, where(rerun == _SELECTIVE, attn_fwd, 0.0))
    both = attn_fwd + mlp_fwd
    recompute_t = recompute_t + where(
        rerun == _SELECTIVE_MLP, both, where(rerun == _MLP_ONLY, mlp_fwd, 0)
    )

    # --- tensor-parallel collectives per micro-batch ----------------------------------------
    tokens = mbf * s / cpf
    hidden_bytes = tokens * model.hidden * ab
    ones = ones_like(tpf)
    zeros = zeros_like(tpf)

    def tp_collective(op, rows):
        """A tensor-parallel collective of the hidden state if any of ``rows`` needs it (a
        single estimate pays for the ops it uses)."""
        if not any_(rows):
            return zeros
        return network.collective_s(op, tpv, ones, hidden_bytes, dtype_bytes=int(ab))

    if any_(tpf > 1):
        with_sp = spv & (tpf > 1)
        ag = tp_collective("all_gather", with_sp)
        # selective+mlp reruns the MLP's input all-gather (sequence parallelism: inside its
        # first projection, neuronx-distributed's ColumnParallelLinear); the reduce-scatter
        # (or all-reduce) after its last projection is not rerun
        mlp_ag = where(with_sp & (rc == _SELECTIVE_MLP), ag, 0.0)
        rs = tp_collective("reduce_scatter", with_sp)
        ar = tp_collective("all_reduce", logical_not(spv) & (tpf > 1))
        one_way = where(spv, 2 * (ag + rs), 2 * ar)  # per layer, forward (or backward)
        one_way = where(tpf > 1, one_way, 0.0)
    else:
        one_way = zeros_like(tpf)
        mlp_ag = zeros_like(tpf)
    passes = where(rc == _FULL, 3.0, 2.0)  # forward, backward, and the recomputed forward
    if overlap_tp not in OVERLAP_TP:
        raise ValueError(f"overlap_tp {overlap_tp!r} is not one of {', '.join(OVERLAP_TP)}")
    if overlap_tp == "backward":
        # the backward pass's collectives behind the layer's weight-gradient GEMMs (the same
        # FLOPs as its input-gradient GEMMs: half the backward's), per kind; the forward's and
        # the recomputed forward's exposed
        exposed = 0.0
        for k, _ in kinds:
            wgrad = 0.5 * _take(per_kind[k]["gemm_bwd"], which)
            exposed = exposed + counts[k] * maximum(one_way - wgrad, 0.0)
        tp_t = exposed + n_layers * (one_way * (passes - 1.0) + mlp_ag)
    elif overlap_tp == "on":
        # each pass's collectives behind that pass's GEMMs of the same layer, per kind
        hideable = where(spv & (tpf > 1), one_way, 0.0)
        exposed = 0.0
        for k, _ in kinds:
            g_f = _take(per_kind[k]["gemm_fwd"], which)
            g_b = _take(per_kind[k]["gemm_bwd"], which)
            fwd_left = maximum(hideable - g_f, 0.0)
            one = fwd_left * (passes - 1.0) + maximum(hideable - g_b, 0.0)
            g_mlp = _take(per_kind[k]["mlp_gemm_fwd"], which)  # the rerun's, behind its GEMMs
            exposed = exposed + counts[k] * (one + maximum(mlp_ag - g_mlp, 0.0))
        tp_t = exposed + n_layers * (one_way - hideable) * passes
    else:
        tp_t = n_layers * (one_way * passes + mlp_ag)

    # --- context parallelism: each chip's K and V gathered, their gradients scattered -------
    # the all-gather method of Llama 3 (Dubey et al. 2024, Sec. 3.3.2, "Context parallelism
    # for long sequences"): K and V all-gathered before the local queries' attention, "exposed
    # in the critical path" (not overlapped, as ring implementations are), the gradients
    # reduce-scattered after the backward's; with full recomputation gathered again
    if any_(cpf > 1):
        if model.mla:  # MLA: the latent and the RoPE key are what is exchanged
            x = model.mla
            kv_bytes = mbf * s * (x.kv_lora_rank + x.qk_rope_head_dim) * ab
        else:
            kv_l = maximum(model.kv_heads / tpf, 1)
            kv_bytes = mbf * s * kv_l * (model.head_dim + model.v_head_dim) * ab
        kv_ag = network.collective_s("all_gather", cpv, tpv, kv_bytes, dtype_bytes=int(ab))
        kv_rs = network.collective_s("reduce_scatter", cpv, tpv, kv_bytes, dtype_bytes=int(ab))
        cp_t = where(cpf > 1, n_layers * (kv_ag * where(rc == _FULL, 2.0, 1.0) + kv_rs), 0.0)
    else:
        cp_t = zeros_like(tpf)

    # --- expert parallelism: dispatch and combine all-to-alls of the routed copies ----------
    if model.moe and any_(epf > 1):
        x = model.moe
        routed = tokens * x.top_k * x.capacity_factor * model.hidden * ab
        a2a = network.collective_s("all_to_all", epv, tpv * cpv, routed, dtype_bytes=int(ab))
        # selective+mlp reruns the dispatch (the experts' input), not the combine
        rerun_dispatch = where((epf > 1) & (rc == _SELECTIVE_MLP), a2a, 0)
        per_layer = where(epf > 1, 2 * a2a, 0.0) * passes + rerun_dispatch
        if overlap_ep:
            # behind another micro-batch's forward and backward of the layer (DualPipe pairs
            # one's forward with another's backward), once; one micro-batch has no partner
            window = _take(per_kind["moe"]["fwd"], which) + _take(per_kind["moe"]["bwd"], which)
            paired = gb / (dpf * mbf) >= 2
            per_layer = where(paired, maximum(per_layer - window, 0.0), per_layer)
        ep_t = n_moe * per_layer
    else:
        ep_t = zeros_like(tpf)

    # --- pipeline sends: one activation forward and one gradient back per virtual stage ----
    # (Megatron's scatter-gather: each tensor-parallel chip sends its 1/tp of the hidden
    # state, the receivers all-gather it over the scale-up links)
    if any_(ppf > 1):
        # (rows without a pipeline send to a stage that is not there: stride 1, masked below;
        # the pipeline's stages as the group, so the boundaries that cross nodes and sites pay
        # their links)
        stride_pp = where(ppf > 1, tpv * cpv * dpv, 1)
        p2p = network.p2p_s(hidden_bytes / tpf, stride_pp, where(ppf > 1, ppv, 1))
        regather = tp_collective("all_gather", logical_not(spv) & (tpf > 1) & (ppf > 1))
        p2p = p2p + where(spv | (tpf == 1), 0.0, regather)
        pp_t = where(ppf > 1, 2 * vf * p2p, 0.0)
    else:
        pp_t = zeros_like(tpf)

    t_mb = stage_compute + recompute_t + tp_t + cp_t + ep_t + pp_t
    n_micro = gb / (dpf * mbf)
    bubble = (ppf - 1) / vf * t_mb

    # --- data parallelism: gradients (and weights) over dp x cp ----------------------------
    grad_bytes = params * grad_b
    group = dpv * cpv
    stride = tpv
    gf = as_float(group)
    if any_(gf > 1):
        rs = network.collective_s(
            "reduce_scatter", group, stride, grad_bytes, dtype_bytes=int(grad_b)
        )
        ag = network.collective_s("all_gather", group, stride, params * wb, dtype_bytes=2)
        # ZeRO 0-2: the gradients reduced and the weights gathered once a step, after the
        # last backward pass (which hides them with overlap)
        dp_sync = where((gf > 1) & (zero_v < 3), rs + ag, 0.0)
        # ZeRO-3 holds neither whole weights nor whole gradients: each micro-batch gathers
        # the stage's weights for its forward and again for its backward and reduce-scatters
        # its gradients; with overlap each layer's traffic hides behind the layers next to it,
        # so a micro-batch's forward and backward are one window, charged once
        per_micro = 2 * ag + rs
        exposed = where(overlap, maximum(per_micro - (fwd + bwd), 0.0), per_micro)
        zero3 = where((zero_v >= 3) & (gf > 1), exposed * n_micro, 0.0)
    else:
        dp_sync = zeros_like(tpf)
        zero3 = zeros_like(tpf)
    window = where(overlap, bwd, 0.0)
    dp_t = maximum(dp_sync - window, 0.0) + zero3

    # --- optimizer: Adam over the local shard, memory-bound --------------------------------
    shard = params / where(zero_v >= 1, gf, 1.0)
    opt_t = costs.memory_s(shard * ADAM_BYTES_PER_PARAMETER)

    n_mb = n_micro
    parts = {
        "compute": n_mb * stage_compute,
        "recompute": n_mb * recompute_t,
        "tp_comm": n_mb * tp_t,
        "cp_comm": n_mb * cp_t,
        "ep_comm": n_mb * ep_t,
        "pp_comm": n_mb * pp_t,
        "bubble": bubble,
        "dp_comm": dp_t,
        "optimizer": opt_t + zeros_like(tpf),  # (of the configurations' shape)
    }
    step = sum(parts.values())
    chips = dpf * tpf * ppf * cpf
    tokens_step = float(gb * s)
    per_token = _cached(_flop_per_token, model, costs, s)
    model_flop = tokens_step * per_token[0]
    causal_flop = tokens_step * per_token[_CAUSAL]
    hw_flop = _take(np.array([tokens_step * x for x in per_token[:_CAUSAL]]), rerun)
    peak = costs.peak_flops(fmt)
    nan = where(ok, 1.0, np.nan)
    out = {f"{k}_s": shaped(v * nan, shape) for k, v in parts.items()}
    step = step * nan
    return TrainingStep(
        step_s=shaped(step, shape),
        **out,
        micro_batch_s=shaped(t_mb * nan, shape),
        micro_batches=shaped(n_micro * nan, shape),
        chips=shaped(chips * nan, shape),
        tokens_per_step=np.full(shape, tokens_step),
        tokens_per_s=shaped(tokens_step / step, shape),
        model_flop_per_step=np.full(shape, model_flop),
        causal_model_flop_per_step=np.full(shape, causal_flop),
        hardware_flop_per_step=shaped(hw_flop * nan, shape),
        mfu=shaped(model_flop / (step * chips * peak), shape),
        causal_mfu=shaped(causal_flop / (step * chips * peak), shape),
        hfu=shaped(hw_flop / (step * chips * peak), shape),
        memory=mem,
        costs_source=costs.source,
    )


def _stage_params(config: dict, weights_bytes):
    """Parameters one chip of the peak stage holds (before ZeRO sharding): its weights'
    bytes (NaN where the configuration is not valid: 0) over ZeRO-3's sharding undone."""
    shard = where(config["zero"] >= 3, config["dp"] * config["cp"], 1)
    return where(np.isnan(weights_bytes), 0.0, weights_bytes) / element_bytes("bf16") * shard
