"""One iteration of a serving engine on one model replica: its time, the time's breakdown
(compute, memory, communication, fixed), model FLOPs and HBM bytes, vectorised over
iterations; and the fast scalar call a serving simulation makes.

An iteration is four numbers (arrays or scalars): ``tokens`` (GEMM rows: a decode sequence 1, a
prefill chunk its tokens), ``sequences`` (sampled: the LM head's rows), ``kv_tokens`` (keys
attended, summed over sequences) and ``pairs`` (queries x keys, summed). :class:`Engine` prices
each layer's GEMMs on the chip's calibrated operator costs (at least their HBM traffic), the
attention products by KV head, the vector work, the embedding, and the collectives on the
replica's real network (:func:`tlm.inference.layout.network_for`), plus the named fixed costs
(:class:`~tlm.inference.layout.FixedCosts`). An engine is a
:class:`~tlm.inference.layout.ReplicaSpec` under fixed costs; data-parallel attention
(:mod:`tlm.inference.expert`) and pipeline micro-batches (:mod:`tlm.inference.pipeline`) are
choices of it. :meth:`Engine.iteration_s` reads tables filled by the same parts
:meth:`Engine.step` adds up. The operator table, the categories and what is assumed:
docs/inference.md, "An iteration".
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache, lru_cache

import numpy as np

from ..cluster.memory import DEFAULT_RESERVE_BYTES
from ..costs.attention import flash_forward_s
from ..costs.opcosts import VECTOR_OPS
from ..elementwise import ceil, minimum
from ..hardware import Hardware
from ..workloads.model import Model, element_bytes
from ..workloads.operators import head_ops, layer_ops
from . import pipeline
from .expert import dispatch_combine_s
from .iteration import Iteration, checked_iteration, scalar_iteration
from .layout import (
    ACTIVATION_FORMAT,
    FORMATS,
    FixedCosts,
    ReplicaSpec,
    costs_for,
    network_for,
    server_system,
)
from .memory import DEFAULT_BLOCK_TOKENS, InferenceMemory

__all__ = [
    "Engine",
    "Iteration",
    "CATEGORIES",
    "ATTENTION_KEY_BLOCK",
    "ATTENTION_ROWS_MAX",
]

#: The parts of an iteration's time; they add up to ``time_s``.
CATEGORIES = ("compute", "memory", "communication", "fixed")
#: Keys per product of the table of the attention products' seconds per query-key pair
#: (:func:`_attention_per_pair`): a flash kernel streams a sequence's cached keys against its
#: stationary query rows, so its fixed cost is amortised - the steady state (the calibrated
#: GEMM's edge tiles repeated on a chip priced by its GEMM; no effect at a GPU kernel's speed).
ATTENTION_KEY_BLOCK = 2**20
#: Queries per sequence beyond which the attention products' seconds per pair are taken as
#: constant (the table's length).
ATTENTION_ROWS_MAX = 16384
#: Score elements of the reference softmax that sets its per-element rate (the Vector/Scalar
#: engines' instruction fixed costs amortised over a layer's scores).
_SOFTMAX_REFERENCE = float(2**24)


@dataclass(frozen=True)
class _Shape:
    """What an engine's token and sequence parts depend on: engines of one shape (another KV
    format, page size, reserve or fixed costs) share the parts' figures."""

    model: Model
    hardware: Hardware
    server: str | None
    kind: str
    tp: int
    pp: int
    ep: int
    fmt: str


@lru_cache(maxsize=256)
def _parts_memo(shape: _Shape) -> dict:
    """The figures the parts of engines of ``shape`` have evaluated, by part and collective
    bandwidth factor, and the fast path's tables: filled as engines ask."""
    return {}


@cache
def _attention_per_pair(hw: Hardware, a_l: int, group: float, dqk: int, dv: int):
    """Seconds per query-key pair of a layer's score and context products (one chip, ``a_l``
    query heads, ``group`` of them per KV head) for 1 .. :data:`ATTENTION_ROWS_MAX` queries
    per sequence, by the flash kernel's definition training reads
    (:func:`tlm.costs.attention.flash_forward_s`), every tile (the mask is applied per
    iteration): two arrays and their lists."""
    queries = np.arange(1, ATTENTION_ROWS_MAX + 1, dtype=float)
    score, context = flash_forward_s(
        costs_for(hw),
        a_l,
        queries,
        ATTENTION_KEY_BLOCK,
        dqk,
        dv,
        group=group,
        fmt=ACTIVATION_FORMAT,
    )
    pairs = queries * ATTENTION_KEY_BLOCK
    out = []
    for seconds in (score, context):
        a = np.asarray(seconds, dtype=float) / pairs
        a.flags.writeable = False  # shared by every engine of this hardware and shape
        out += [a, a.tolist()]
    return tuple(out)


def _length_factors(speed, keys):
    """A GPU flash kernel's forward time at ``keys`` keys (rounded, at least 1; an array or
    one number) over its time at the per-pair table's :data:`ATTENTION_KEY_BLOCK` (its
    published speed by sequence length, :class:`tlm.costs.attention.FlashSpeed`): what the
    table's pairs cost at the iteration's length, as training prices them."""
    k = np.maximum(np.rint(keys), 1.0)
    return speed(ATTENTION_KEY_BLOCK)[0] / np.asarray(speed(k)[0], dtype=float)


@lru_cache(maxsize=65536)
def _length_factor(speed, keys: int) -> float:
    """:func:`_length_factors` at one iteration's keys (the fast path's, memoised)."""
    return float(_length_factors(speed, keys))


def _masked_share(kernel, queries, keys) -> tuple[float, float]:
    """Tiles a causal ``kernel`` computes for ``queries`` (the last of ``keys``) over the
    pairs the mask keeps, for its score and its context product: 1 for a decode step (one
    query attends every key), a little over 1 for a prompt (the diagonal's tiles)."""
    q, k = max(int(round(queries)), 1), max(int(round(keys)), 1)
    if q == 1 or k < q:
        return 1.0, 1.0
    f_score, f_context, _ = kernel.fractions(q, k)
    kept = q * (k - q) + q * (q + 1) / 2
    return f_score * q * k / kept, f_context * q * k / kept


def _masked_shares(kernel, queries, keys) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_masked_share` over arrays: worked out once per distinct (queries, keys) pair,
    which a search's layouts repeat many times over."""
    q, k = np.broadcast_arrays(
        np.maximum(np.rint(queries), 1).astype(np.int64),
        np.maximum(np.rint(keys), 1).astype(np.int64),
    )
    span = int(k.max(initial=1)) + 1  # one integer per pair: a 1-D unique, not a sort of rows
    codes, inverse = np.unique((q * span + k).ravel(), return_inverse=True)
    pairs = [divmod(c, span) for c in codes.tolist()]
    shares = np.array([_masked_share(kernel, a, b) for a, b in pairs], dtype=float)
    shares = shares.reshape(-1, 2)[inverse.ravel()]
    return shares[:, 0].reshape(q.shape), shares[:, 1].reshape(q.shape)


class Engine:
    """One model replica on ``tp x pp`` chips: the cost of an iteration.

    An engine is a :class:`~tlm.inference.layout.ReplicaSpec` under
    :class:`~tlm.inference.layout.FixedCosts` (:meth:`of`; :meth:`build` takes their fields
    as keywords). The serving simulation's duck type: :attr:`chips`,
    :attr:`kv_capacity_tokens`, :attr:`block_tokens`, :meth:`iteration_s`.

    Examples
    --------
    >>> e = Engine.build("llama3.3-70b", "trn2", "server", tp=16)
    >>> decode = e.iteration_s(64, 64, 64 * 2048, 64 * 2048)    # 64 sequences at 2k
    >>> bool(0.005 < decode < 0.05)
    True
    >>> it = e.step(64, 64, 64 * 2048, 64 * 2048)
    >>> abs(float(it.time_s) / decode - 1) < 1e-12      # the same parts, added in another order
    True
    """

    def __init__(self, spec: ReplicaSpec, fixed: FixedCosts):
        self.spec, self.fixed = spec, fixed
        self.model, self.hardware, self.system = spec.model, spec.hardware, spec.system
        self.tp, self.pp, self.ep = spec.tp, spec.pp, spec.ep
        self.dp_attention, self.micro_batches = spec.dp_attention, spec.micro_batches
        self.stage_chips, self.dp = self._stage_shape()
        self.chips = self.stage_chips * self.pp
        self.fmt, self.kv_fmt = spec.fmt, spec.kv_fmt
        self.block_tokens = spec.block_tokens
        self.step_fixed_s = fixed.step_fixed_s
        self.collective_fixed_s = fixed.collective_fixed_s
        self.collective_bandwidth_factor = fixed.collective_bandwidth_factor
        self.request_fixed_s = fixed.request_fixed_s
        self.fixed_source = fixed.source
        self.costs = costs_for(self.hardware)
        self.network = network_for(self.hardware, self.system)
        self._setup()
        self.memory = self._memory(
            spec.reserve_bytes, spec.extra_weights_bytes, spec.extra_kv_per_token_bytes
        )
        self.max_tokens = spec.max_tokens
        self.kv_capacity_tokens = self.memory.kv_capacity_tokens(
            spec.max_tokens, spec.max_sequences
        )
        # the parts' figures, shared by the engines of one shape (the collective bandwidth
        # factor keys the entries): the model, hardware, network, the engine's kind (experts
        # within tp, or data-parallel attention: other parts), tp, pp, ep, the GEMMs' format
        server = server_system(self.hardware, self.system)
        kind = "dp attention" if self.dp_attention else "experts within tp"
        layout = (self.tp, self.pp, self.ep, self.fmt)
        self._memo = _parts_memo(_Shape(self.model, self.hardware, server, kind, *layout))
        self._fast = self._memo.setdefault(("fast", self.collective_bandwidth_factor), {})
        self._ends_memo: dict = {}  # micro-batches' stages' ends (tlm.inference.pipeline)

    @classmethod
    def of(cls, spec: ReplicaSpec, fixed: FixedCosts) -> Engine:
        """The engine of ``spec`` under ``fixed`` costs, built once per pair of values
        (engines of one shape share their parts' figures)."""
        return _built(spec, fixed)

    # ---- construction ---------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        model,
        hardware,
        system="server",
        *,
        tp: int = 1,
        pp: int = 1,
        ep: int = 1,
        fmt: str = "bf16",
        kv_fmt: str = "bf16",
        block_tokens: int = DEFAULT_BLOCK_TOKENS,
        step_fixed_s: float | None = None,
        collective_fixed_s: float | None = None,
        collective_bandwidth_factor: float | None = None,
        request_fixed_s: float | None = None,
        reserve_bytes: float = DEFAULT_RESERVE_BYTES,
        max_tokens: int = 8192,
        max_sequences: int | None = None,
        extra_weights_bytes: float = 0.0,
        extra_kv_per_token_bytes: float = 0.0,
        dp_attention: bool = False,
        micro_batches: int | None = None,
    ) -> Engine:
        """A replica of ``model`` on ``tp x pp`` chips of ``system`` (``ep x pp`` with
        ``dp_attention``).

        Parameters
        ----------
        model : Model or str
            A model or a model name (:func:`tlm.workloads.load_model`).
        hardware : Hardware or str
            A hardware (:func:`tlm.hardware.load_hardware`) or its name.
        system : str or int
            ``server``, ``ultraserver``, ``Nxserver``, ``Nxultraserver``, or a chip count: the
            chips the replica may use (``tp x pp`` must divide them) and its network.
        tp, pp, ep : int
            Tensor, pipeline and expert parallelism (experts over the tensor-parallel group).
        fmt, kv_fmt : str
            ``bf16`` or ``fp8``: weights and GEMM inputs; the KV cache.
        block_tokens : int
            KV page size in tokens.
        step_fixed_s, collective_fixed_s : float, optional
            The named fixed costs; default ``tlm/inference/data/fixed_costs.toml``'s.
        collective_bandwidth_factor : float, optional
            The fraction of the modelled link bandwidth the collectives reach, in (0, 1];
            default the data file's.
        request_fixed_s : float, optional
            The serving stack's time per request outside the iterations (added to a request's
            TTFT and end-to-end latency, the replica free meanwhile); default the data
            file's.
        reserve_bytes : float
            Runtime reserve per chip.
        max_tokens : int
            The largest iteration (tokens) the KV capacity leaves room for.
        max_sequences : int, optional
            The sequences that iteration samples; default ``max_tokens``.
        extra_weights_bytes, extra_kv_per_token_bytes : float
            Memory per chip of what shares the chips (a draft model).
        dp_attention : bool
            Expert parallelism beyond the tensor-parallel group: attention data-parallel over
            ``ep / tp`` groups of ``tp`` chips, experts over all ``ep`` chips of a stage,
            tokens dispatched and combined by all-to-alls (:mod:`tlm.inference.expert`).
        micro_batches : int, optional
            Micro-batches an iteration is split into to fill the pipeline's stages
            (:mod:`tlm.inference.pipeline`); default ``pp`` (1: one batch through the
            stages).

        Raises
        ------
        InferenceInputError
            Naming the argument, its value and what is allowed.
        """
        spec = ReplicaSpec(
            model,
            hardware,
            system,
            tp=tp,
            pp=pp,
            ep=ep,
            dp_attention=dp_attention,
            micro_batches=micro_batches,
            fmt=fmt,
            kv_fmt=kv_fmt,
            block_tokens=block_tokens,
            reserve_bytes=reserve_bytes,
            max_tokens=max_tokens,
            max_sequences=max_sequences,
            extra_weights_bytes=extra_weights_bytes,
            extra_kv_per_token_bytes=extra_kv_per_token_bytes,
        )
        fixed = FixedCosts.given(
            spec.hardware.name,
            step_fixed_s=step_fixed_s,
            collective_fixed_s=collective_fixed_s,
            collective_bandwidth_factor=collective_bandwidth_factor,
            request_fixed_s=request_fixed_s,
        )
        return cls.of(spec, fixed)

    def _stage_shape(self) -> tuple[int, int]:
        """Chips of a pipeline stage and the attention's data-parallel groups in it: the
        tensor-parallel group, one; with data-parallel attention ``ep`` chips, ``ep / tp``
        groups (:mod:`tlm.inference.expert`)."""
        return (self.ep, self.ep // self.tp) if self.dp_attention else (self.tp, 1)

    def _expert_tp(self) -> int:
        """Ways each routed expert's FFN is split: ``tp / ep`` (experts within the tensor-
        parallel group); whole experts (``E / ep`` per chip) with data-parallel attention."""
        return 1 if self.dp_attention else self.tp // self.ep

    def _setup(self):
        """The per-token operator table and the attention's coefficients (once)."""
        m, tp, ep = self.model, self.tp, self.ep
        c = self.costs
        self.wb = element_bytes(FORMATS[self.fmt])
        self.ab = element_bytes(ACTIVATION_FORMAT)
        self.gemm_fmt = self.fmt
        self.bw = c.hbm_bandwidth_Bps
        self.ridge = c.peak_flops(self.gemm_fmt) / self.bw
        kinds = [("dense", m.dense_layers)] if m.dense_layers else []
        if m.moe:
            kinds.append(("moe", m.moe_layers))
        self.kinds = kinds
        rows = []  # (layers, name, m per token, n, k, weights per product, expert)
        self.layer_weights = {}
        for kind, count in kinds:
            ops = layer_ops(m, kind, sequences=1, queries=1, keys=1, tp=tp, ep=1)
            if kind == "moe":
                # experts over the tensor-parallel group: E/ep per chip, each tp/ep ways
                routed = layer_ops(
                    m, kind, sequences=1, queries=1, keys=1, tp=self._expert_tp(), ep=ep
                )
                by_name = {o.name: o for o in routed}
                ops = [by_name[o.name] if o.name.startswith("expert_") else o for o in ops]
            weights = 2 * m.norm_parameters()
            for op in ops:
                weights += op.weights
                if op.kind == "attention":
                    if op.name == "score":
                        self.dqk, self.a_l = op.k, op.batch
                    else:
                        self.dv = op.n
                    continue
                expert = op.name.startswith("expert_")
                per = op.weights / op.batch if expert else op.weights
                rows.append((count, op.name, float(op.m), op.n, op.k, per, expert))
            self.layer_weights[kind] = weights
        self.gemm_rows = rows
        self.local_experts = m.moe.experts // ep if m.moe else 0
        (head,) = head_ops(m, sequences=1, queries=1, tp=tp)
        self.head = head
        self.vocab_local = head.n
        # attention
        if m.mla:
            self.kv_l = 1
            self.kv_token_layer_bytes = m.kv_cache_per_token_layer_bytes(FORMATS[self.kv_fmt])
        else:
            self.kv_l = max(m.kv_heads // tp, 1)
            per_head = m.kv_cache_per_token_layer_bytes(FORMATS[self.kv_fmt]) / m.kv_heads
            self.kv_token_layer_bytes = per_head * self.kv_l
        self.group = self.a_l / self.kv_l
        # the products stream the cached keys and values in the KV format: at a narrower one
        # (FP8: 1 byte against the activations' 2) a query row does the work of 2 on the
        # same bytes, so the kernel's efficiency is the calibrated one at that arithmetic
        # intensity - its efficiency at (activation bytes / KV bytes) x the query rows
        (self.score_per_pair, self._score_list, self.context_per_pair, self._context_list) = (
            _attention_per_pair(self.hardware, self.a_l, self.group, self.dqk, self.dv)
        )
        self.flash = c.flash
        # a GPU's kernel at its published speed by length: the table's pairs re-read at the
        # iteration's keys (None: a chip priced by its GEMM, whose table is the cost)
        self.flash_speed = getattr(c, "flash_efficiency", None)
        self.attn_scale = 1.0  # the share of the sequences a chip's group attends
        soft = c.vector_s(_SOFTMAX_REFERENCE, op="softmax", fmt=ACTIVATION_FORMAT, from_hbm=False)
        self.softmax_s_per_pair = self.a_l * float(soft) / _SOFTMAX_REFERENCE
        self.qo_bytes_per_token = self.a_l * (self.dqk + self.dv) * self.ab
        # collective calls per iteration (each pays collective_fixed_s)
        calls = 0
        if tp > 1:
            calls += 2 * m.layers + 2  # per layer two all-reduces; the embedding's; logits
        if self.pp > 1:
            calls += (self.pp - 1) * (2 if tp > 1 else 1)
        self.collective_calls = calls
        # model FLOPs per token (matrix products but the head) and per sequence (the head)
        self.flop_per_token = 2.0 * (m.matmul_parameters_per_token() - m.vocab * m.hidden)
        self.flop_per_sequence = 2.0 * m.vocab * m.hidden
        self.flop_per_pair = 2.0 * m.layers * m.heads * (self.dqk + self.dv)
        if self.dp_attention:
            # the attention's coefficients per replica token: a chip's group attends 1/dp of
            # the sequences (and keeps their KV only); dispatch and combine per MoE layer
            dp = self.dp
            self.attn_scale /= dp
            self.softmax_s_per_pair /= dp
            self.kv_token_layer_bytes /= dp
            self.qo_bytes_per_token /= dp
            if ep > 1:
                self.collective_calls += 2 * m.moe_layers

    def _memory(self, reserve, extra_weights, extra_kv) -> InferenceMemory:
        m, pp = self.model, self.pp
        per_stage = m.layers // pp
        dense_per_layer = self.layer_weights.get("dense", 0)
        moe_per_layer = self.layer_weights.get("moe", 0)
        k_dense = m.dense_layers

        def stage(first):  # the dense layers come first
            lo = 0 if first else m.layers - per_stage
            dense = max(0, min(k_dense, lo + per_stage) - lo)
            return dense * dense_per_layer + (per_stage - dense) * moe_per_layer

        table = self.vocab_local * m.hidden
        first = stage(True) + table + (table + m.norm_parameters() if pp == 1 else 0)
        last = stage(False) + table + m.norm_parameters()
        weights = max(first, last) * self.wb + extra_weights
        kv = per_stage * self.kv_token_layer_bytes + extra_kv
        # one layer's live activations per token (BF16): hidden state and residual, Q/K/V,
        # the attention output, the FFN's intermediates (gate, up and their product)
        h = m.hidden
        qkv = (self.a_l + 2 * self.kv_l) * self.dqk
        widths = [0.0]
        for _count, name, per_token, n, _k, _w, expert in self.gemm_rows:
            if name in ("gate_up", "up", "expert_gate_up", "shared_gate_up"):
                rows = self._routed_share() if expert else per_token  # rows per token
                widths.append(1.5 * n * rows)
        acts = (2 * h + qkv + self.a_l * self.dv + max(widths)) * self.ab
        logits = 4.0 * (self.vocab_local + m.vocab)
        memory = InferenceMemory(
            weights_bytes=float(weights),
            kv_per_token_bytes=float(kv),
            activation_per_token_bytes=float(acts),
            logits_per_sequence_bytes=logits,
            reserve_bytes=float(reserve),
            hbm_bytes=float(self.hardware.hbm_bytes),
            block_tokens=self.block_tokens,
            model=m.name,
            layout=f" on {self.hardware.name} with tp={self.tp}, pp={pp}, ep={self.ep}, "
            f"fmt={self.fmt}, kv_fmt={self.kv_fmt}",
        )
        if not self.dp_attention:
            return memory
        # per replica token: a group's chip holds its own sequences' activations and logits
        return replace(
            memory,
            activation_per_token_bytes=memory.activation_per_token_bytes / self.dp,
            logits_per_sequence_bytes=memory.logits_per_sequence_bytes / self.dp,
            layout=memory.layout + ", dp attention",
        )

    # ---- the parts ------------------------------------------------------------------------

    def _routed_share(self):
        """Expected routed copies a chip's experts get per token of the iteration: its
        ``E/ep`` experts' share of ``k x cf`` copies."""
        x = self.model.moe
        share = x.top_k * x.capacity_factor * self.local_experts / x.experts
        return share * self.dp  # data-parallel attention: the stage's dp groups route here

    def _active_experts(self, tokens):
        """Expected experts of a chip's ``E/ep`` that get at least one of ``tokens`` (a
        group's: with data-parallel attention the stage's ``dp`` groups' tokens route)."""
        x = self.model.moe
        tokens = tokens * self.dp
        return self.local_experts * (1.0 - np.power(1.0 - x.top_k / x.experts, tokens))

    def gemm_times(self, tokens) -> dict:
        """Every layer GEMM of one chip at ``tokens`` tokens (a 1-D array): ``names`` and
        ``layers`` (how many layers have it) per operator, and arrays of shape
        ``(operators, len(tokens))`` of one layer's ``seconds`` (``max(OpCosts.gemm_s, HBM
        bytes / bandwidth)``, routed experts: times the active experts), ``gemm_s`` (the
        calibrated product alone), ``flop``, ``hbm_bytes`` and ``memory_bound``."""
        T = np.asarray(tokens, dtype=float)
        ms, ns, ks, mult, wts = [], [], [], [], []
        for _count, _name, per_token, n, k, w, expert in self.gemm_rows:
            if expert:
                active = self._active_experts(T)
                ms.append(T * self._routed_share() / active)
                mult.append(active)
            else:
                ms.append(T * per_token)
                mult.append(np.ones_like(T))
            ns.append(float(n))
            ks.append(float(k))
            wts.append(float(w))
        M, mult = np.stack(ms), np.stack(mult)
        N = np.asarray(ns, dtype=float)[:, None]
        K = np.asarray(ks, dtype=float)[:, None]
        W = np.asarray(wts, dtype=float)[:, None]
        gemm = np.asarray(self.costs.gemm_s(M, N, K, fmt=self.gemm_fmt), dtype=float)
        nbytes = W * self.wb + (M * K + M * N) * self.ab
        flop = 2.0 * M * N * K
        return {
            "names": [r[1] for r in self.gemm_rows],
            "layers": [r[0] for r in self.gemm_rows],
            "gemm_s": gemm,
            "seconds": mult * np.maximum(gemm, nbytes / self.bw),
            "flop": mult * flop,
            "hbm_bytes": mult * nbytes,
            "memory_bound": flop < self.ridge * nbytes,
        }

    def _vector(self, work, like: np.ndarray):
        """Vector/Scalar operators ``(op, elements, fmt)`` (elements broadcast to ``like``'s
        shape): their seconds as compute and as memory (an operator whose time is its HBM
        roofline is memory), and their HBM bytes - one :meth:`OpCosts.vector_s` call per kind
        of operator."""
        compute = memory = hbm = np.zeros_like(like)
        groups: dict = {}
        for op, elements, fmt in work:
            el = np.broadcast_to(np.asarray(elements, dtype=float), like.shape)
            groups.setdefault((op, fmt), []).append(el)
        costs = self.costs
        for (op, fmt), items in groups.items():
            passes, width = VECTOR_OPS[op]["hbm_elements"], element_bytes(fmt)
            el = np.stack(items)
            total = np.asarray(costs.vector_s(el, op=op, fmt=fmt), dtype=float)
            nbytes = el * passes * width
            on_hbm = costs.memory_s(nbytes) >= total
            compute = compute + np.where(on_hbm, 0.0, total).sum(axis=0)
            memory = memory + np.where(on_hbm, total, 0.0).sum(axis=0)
            hbm = hbm + nbytes.sum(axis=0)
        return compute, memory, hbm

    def _token_part(self, tokens: np.ndarray) -> dict:
        """The parts that depend on the tokens only (a 1-D float array): every layer's GEMMs,
        vector work and collectives, the embedding, the pipeline's sends; seconds on the
        replica per category, and HBM bytes summed over its chips. With data-parallel
        attention a group's share of the tokens, plus the dispatch and combine."""
        if not self.dp_attention:
            return self._group_token_part(tokens)
        part = self._group_token_part(tokens / self.dp)
        if self.ep > 1:
            a2a = dispatch_combine_s(self, tokens)
            part["communication"] = part["communication"] + a2a
        return part

    def _group_token_part(self, tokens: np.ndarray) -> dict:
        """:meth:`_token_part` of one attention group's tokens."""
        m, c, tp = self.model, self.costs, self.tp
        T = np.asarray(tokens, dtype=float)
        g = self.gemm_times(T)
        t, memory_bound = g["seconds"], g["memory_bound"]
        L = np.asarray(g["layers"], dtype=float)[:, None]
        compute = (L * np.where(memory_bound, 0.0, t)).sum(axis=0)
        memory = (L * np.where(memory_bound, t, 0.0)).sum(axis=0)
        hbm = (L * g["hbm_bytes"]).sum(axis=0)
        # vector work per layer kind
        h = m.hidden
        for kind, count in self.kinds:
            work = [("norm", 2 * T * h), ("elementwise", 2 * T * h)]
            if m.position == "rope":
                work.append(("elementwise", T * (self.a_l + self.kv_l) * self.dqk))
            # the FFN's intermediates: the down projections' inputs (a dense layer's, or the
            # routed and shared experts')
            inter = 0.0
            ffn_rows = [r for r in self.gemm_rows if r[1] in ("down", "expert_down", "shared_down")]
            for _c, name, per_token, _n, k_in, _w, expert in ffn_rows:
                if (kind == "dense") != (name == "down"):
                    continue
                share = self._routed_share() if expert else per_token
                inter = inter + T * share * k_in
            work.append(("activation", inter))
            if m.mlp == "swiglu":
                work.append(("elementwise", inter))
            if kind == "moe":
                work.append(("softmax", T * m.moe.experts))
            vc, vm, vb = self._vector([(op, el, ACTIVATION_FORMAT) for op, el in work], T)
            compute, memory, hbm = compute + count * vc, memory + count * vm, hbm + count * vb
        # embedding: a row per token
        emb = T * h * self.ab
        memory = memory + c.memory_s(emb)
        hbm = hbm + emb
        # collectives
        hidden = T * h * self.ab / self.collective_bandwidth_factor  # as the network sees it
        comm = np.zeros_like(T)
        net, ones = self.network, np.ones_like(T, dtype=np.int64)
        if tp > 1:
            ar = net.collective_s("all_reduce", tp * ones, ones, hidden, dtype_bytes=int(self.ab))
            comm = comm + (2 * m.layers + 1) * ar
        if self.pp > 1:
            send = net.p2p_s(hidden / tp, self.stage_chips * ones, self.pp * ones)
            if tp > 1:
                send = send + net.collective_s(
                    "all_gather", tp * ones, ones, hidden, dtype_bytes=int(self.ab)
                )
            comm = comm + (self.pp - 1) * send
        # per chip -> the replica: every stage's chips do their layers' share, one after the
        # other; HBM bytes summed over the chips of each stage
        return {
            "compute": compute,
            "memory": memory,
            "communication": comm,
            "hbm": hbm * self.stage_chips,
        }

    def _sequence_part(self, sequences: np.ndarray) -> dict:
        """The parts that depend on the sequences only (a 1-D float array): the final norm,
        the LM head, the sampling softmax over the local vocabulary, the logits'
        all-gather (with data-parallel attention, a group's share of the sequences)."""
        m, c, tp = self.model, self.costs, self.tp
        S = np.asarray(sequences, dtype=float) / self.dp
        op = self.head
        M = S * op.m
        gemm = np.asarray(c.gemm_s(M, op.n, op.k, fmt=self.gemm_fmt), dtype=float)
        nbytes = op.weights * self.wb + (M * op.k + M * op.n) * self.ab
        t = np.maximum(gemm, nbytes / self.bw)
        memory_bound = 2.0 * M * op.n * op.k < self.ridge * nbytes
        compute = np.where(memory_bound, 0.0, t)
        memory = np.where(memory_bound, t, 0.0)
        hbm = nbytes
        vc, vm, vb = self._vector(
            [("norm", S * m.hidden, ACTIVATION_FORMAT), ("softmax", S * self.vocab_local, "fp32")],
            S,
        )
        compute, memory, hbm = compute + vc, memory + vm, hbm + vb
        comm = np.zeros_like(S)
        if tp > 1:
            ones = np.ones_like(S, dtype=np.int64)
            logits = S * self.vocab_local * tp * 4.0 / self.collective_bandwidth_factor
            comm = self.network.collective_s("all_gather", tp * ones, ones, logits, dtype_bytes=4)
        return {
            "compute": compute,
            "memory": memory,
            "communication": comm,
            "hbm": hbm * self.stage_chips,
        }

    def _attention(self, tokens, sequences, kv_tokens, pairs):
        """One layer's attention on one chip: the products' compute, the HBM traffic and the
        softmax, seconds; and the HBM bytes (arrays, or one iteration's numbers: the fast
        path's, by the same formula). The products and the softmax over the tiles the chip's
        flash kernel computes for the iteration's mean sequence (its queries the last of its
        keys), as training prices them; a decode step computes every tile. A GPU's kernel at
        its published speed at those keys (:func:`_length_factor`)."""
        queries, keys = tokens / sequences, kv_tokens / sequences
        index = minimum(ceil(queries), ATTENTION_ROWS_MAX) - 1  # the table's row: 1-based
        at_length = 1.0  # a GPU kernel's speed at these keys over the table's
        if type(index) is np.ndarray:
            index = np.maximum(index, 0).astype(np.intp)
            f_score, f_context = _masked_shares(self.flash, queries, keys)
            score, context = self.score_per_pair[index], self.context_per_pair[index]
            if self.flash_speed is not None:
                at_length = _length_factors(self.flash_speed, keys)
        else:
            index = max(int(index), 0)
            f_score, f_context = _masked_share(self.flash, queries, keys)
            score, context = self._score_list[index], self._context_list[index]
            if self.flash_speed is not None:
                at_length = _length_factor(self.flash_speed, int(round(keys)))
        compute = (score * f_score + context * f_context) * pairs * self.attn_scale * at_length
        nbytes = (kv_tokens + tokens) * self.kv_token_layer_bytes + tokens * self.qo_bytes_per_token
        return compute, nbytes / self.bw, self.softmax_s_per_pair * f_context * pairs, nbytes

    # ---- the full path --------------------------------------------------------------------

    def _by_unique(self, part, values):
        """``part`` evaluated once per distinct value, spread back (a batch of decode steps
        shares its tokens); values already evaluated are kept (per engine and part), so a
        later call pays only for new ones."""
        flat = values.ravel()
        if len(flat) == 1:
            uniq, inverse = flat, np.zeros(1, dtype=np.intp)
        else:
            uniq, inverse = np.unique(flat, return_inverse=True)
        memo = self._memo.setdefault((part.__name__, self.collective_bandwidth_factor), {})
        # the parts' output names, per part, in the same shared dict as the values: a copy of
        # the engine (Engine.build with another max_tokens) shares both
        names = self._memo.setdefault("output names", {})
        missing = [v for v in uniq.tolist() if v not in memo]
        if missing:
            if len(memo) + len(missing) > 65536:
                memo.clear()
                missing = uniq.tolist()
            new = part(np.asarray(missing, dtype=float))
            keys = tuple(new)
            columns = [np.asarray(new[k], dtype=float).tolist() for k in keys]
            for i, v in enumerate(missing):
                memo[v] = tuple(col[i] for col in columns)
            names[part.__name__] = keys
        keys = names[part.__name__]
        table = np.array([memo[v] for v in uniq.tolist()], dtype=float).reshape(len(uniq), -1)
        return {k: table[inverse, i].reshape(values.shape) for i, k in enumerate(keys)}

    def step(self, tokens, sequences, kv_tokens, pairs, *, from_empty=False) -> Iteration:
        """Iterations' time, its breakdown, model FLOPs and HBM bytes (numpy arrays or
        scalars, broadcast together). With micro-batches (``pp > 1``) an iteration's
        sequences are split among them (:mod:`tlm.inference.pipeline`): the steady-state
        time, or with ``from_empty`` (a bool or an array broadcast with them) the time from an
        empty pipeline.

        Raises
        ------
        InferenceInputError
            ``tokens`` or ``sequences`` below 1, ``sequences`` above ``tokens``,
            ``kv_tokens`` or ``pairs`` negative, or not integers where they must be.
        """
        if self.micro_batches > 1:
            return pipeline.step(self, tokens, sequences, kv_tokens, pairs, from_empty)
        return self._batch_step(tokens, sequences, kv_tokens, pairs)

    def _batch_step(self, tokens, sequences, kv_tokens, pairs) -> Iteration:
        """:meth:`step` of one batch through the stages."""
        T, S, KV, P = checked_iteration(tokens, sequences, kv_tokens, pairs)
        tok = self._by_unique(self._token_part, T)
        seq = self._by_unique(self._sequence_part, S)
        comp, mem, soft, attn_bytes = self._attention(T, S, KV, P)
        L = self.model.layers
        attn = L * np.maximum(np.maximum(comp, mem), soft)
        attn_memory = (mem >= comp) & (mem >= soft)
        compute = tok["compute"] + seq["compute"] + np.where(attn_memory, 0.0, attn)
        memory = tok["memory"] + seq["memory"] + np.where(attn_memory, attn, 0.0)
        comm = tok["communication"] + seq["communication"]
        comm = comm + self.collective_calls * self.collective_fixed_s
        fixed = np.full(T.shape, self.step_fixed_s)
        time = compute + memory + comm + fixed
        flop = self.model_flop(T, S, P)
        hbm = tok["hbm"] + seq["hbm"] + L * attn_bytes * self.stage_chips

        def out(a):
            a = np.asarray(a, dtype=float)
            return a[()] if a.ndim == 0 else a

        return Iteration(
            time_s=out(time),
            compute_s=out(compute),
            memory_s=out(memory),
            communication_s=out(comm),
            fixed_s=out(fixed),
            flop=out(flop),
            hbm_bytes=out(hbm),
        )

    def model_flop(self, tokens, sequences, pairs):
        """The model's FLOPs of iterations of ``tokens``, ``sequences`` (their logits) and
        query-key ``pairs``, every stage's."""
        return (
            self.flop_per_token * tokens
            + self.flop_per_sequence * sequences
            + (self.flop_per_pair * pairs)
        )

    # ---- the fast path --------------------------------------------------------------------

    def _grow(self, tokens: int, sequences: int):
        """Tabulate the token and sequence parts' time for every integer up to at least
        ``tokens`` and ``sequences`` (doubling), from the same parts :meth:`step` adds up;
        the tables are shared by the engines of this shape."""
        for name, part, need in (
            ("tokens", self._token_part, tokens),
            ("sequences", self._sequence_part, sequences),
        ):
            if need <= len(self._fast.get(name, ())):
                continue
            size = max(1024, 1 << (need - 1).bit_length())
            p = self._by_unique(part, np.arange(1, size + 1, dtype=float))
            self._fast[name] = (p["compute"] + p["memory"] + p["communication"]).tolist()

    def iteration_s(self, tokens, sequences, kv_tokens, pairs):
        """Seconds of iterations (:meth:`step`'s ``time_s``, the steady state); integer
        scalars take the fast path (tables of the same parts, a few microseconds), arrays the
        full one."""
        if self.micro_batches > 1:
            return pipeline.iteration_s(self, tokens, sequences, kv_tokens, pairs)
        return self._batch_iteration_s(tokens, sequences, kv_tokens, pairs)

    def _batch_iteration_s(self, tokens, sequences, kv_tokens, pairs):
        """:meth:`iteration_s` of one batch through the stages."""
        if scalar_iteration(tokens, sequences, kv_tokens, pairs):
            tokens, sequences = int(tokens), int(sequences)
            fast = self._fast
            if tokens > len(fast.get("tokens", ())) or sequences > len(fast.get("sequences", ())):
                self._grow(tokens, sequences)
            compute, memory, soft, _ = self._attention(tokens, sequences, kv_tokens, pairs)
            return (
                fast["tokens"][tokens - 1]
                + fast["sequences"][sequences - 1]
                + self.model.layers * max(compute, memory, soft)
                + self.collective_calls * self.collective_fixed_s
                + self.step_fixed_s
            )
        return self._batch_step(tokens, sequences, kv_tokens, pairs).time_s

    def __repr__(self) -> str:
        dp = f", dp_attention over {self.dp} groups" if self.dp_attention else ""
        mb = f", micro_batches={self.micro_batches}" if self.micro_batches > 1 else ""
        return (
            f"Engine({self.model.name} on {self.chips} {self.hardware.name}: tp={self.tp}, "
            f"pp={self.pp}, ep={self.ep}, fmt={self.fmt}, kv_fmt={self.kv_fmt}{dp}{mb})"
        )


@lru_cache(maxsize=256)
def _built(spec: ReplicaSpec, fixed: FixedCosts) -> Engine:
    return Engine(spec, fixed)
