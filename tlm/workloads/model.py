"""A transformer model as plain numbers, loaded from its data file, and what follows from it:
parameter counts, FLOPs per token, KV-cache bytes.

Every count is exact for the shapes in the file (matrices, biases, norms, embeddings); the
tests hold them to each model's published count. FLOPs are *model* FLOPs: two per
multiply-accumulate of every matrix product a token takes part in, attention included, as
Megatron-LM counts them (Narayanan et al. 2021, Appendix; Korthikanti et al. 2022, Eq. 7):
the forward pass ``2 N_matmul + 4 s a d`` per token and layer, training three times that;
recomputation adds *hardware* FLOPs (:meth:`Model.training_flop_per_token`).

Examples
--------
>>> from tlm.workloads import load_model
>>> m = load_model("llama3-8b")
>>> round(m.parameters / 1e9, 2), m.kv_heads, m.mlp
(8.03, 8, 'swiglu')
>>> m.kv_cache_per_token_bytes("bf16")        # 32 layers x K and V x 8 heads x 128 x 2 B
131072
>>> ds = load_model("deepseek-v3")
>>> round(ds.parameters / 1e9), round(ds.active_parameters / 1e9, 1)
(671, 36.6)
>>> ds.kv_cache_per_token_bytes("bf16") // ds.layers  # MLA: 512 latent + 64 RoPE key
1152
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from ..datafile import parse_data_file, read_text
from ..formats import FloatFormat, get_format
from .schema import RECOMPUTES, ModelFile, RunRecord

__all__ = [
    "Model",
    "Moe",
    "Mla",
    "WorkloadError",
    "load_model",
    "model_names",
    "element_bytes",
]


class WorkloadError(ValueError):
    """A model file or name that does not validate."""


def element_bytes(fmt) -> float:
    """Bytes one element of format ``fmt`` (a name of :data:`tlm.formats.FORMATS`) occupies in
    memory: its container (TF32 travels in 4 bytes), not its significant bits.

    >>> element_bytes("bf16"), element_bytes("fp8_e4m3"), element_bytes("tf32")
    (2.0, 1.0, 4.0)
    """
    f = get_format(fmt)
    bits = f.storage_bits if isinstance(f, FloatFormat) else f.bits
    return bits / 8


@dataclass(frozen=True)
class Moe:
    """A mixture of experts: routed experts, top-k, shared experts, expert FFN size, dense
    first layers, capacity factor (routed tokens per expert over the balanced share)."""

    experts: int
    top_k: int
    shared_experts: int
    expert_ffn: int
    dense_layers: int
    capacity_factor: float


@dataclass(frozen=True)
class Mla:
    """Multi-head latent attention ranks and head dimensions (DeepSeek-V2/V3)."""

    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class Model:
    """A decoder-only transformer: dimensions (counts), kinds (names), training recipe.

    ``head_dim`` is the query/key head dimension; :attr:`v_head_dim` the value one (equal
    except for MLA). ``ffn`` is a dense layer's FFN size (SwiGLU: each of gate and up).
    ``sources`` maps ``section.figure`` to the source keys of the file, ``references`` the keys
    to their text. ``runs`` are the published training runs the file records.
    """

    name: str
    description: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    attention: str
    mlp: str
    norm: str
    position: str
    tied_embeddings: bool
    biases: bool
    dropout: bool
    seq_len: int
    global_batch_sequences: int
    tokens: float
    published_parameters: float
    published_active_parameters: float | None = None
    moe: Moe | None = None
    mla: Mla | None = None
    runs: tuple[RunRecord, ...] = ()
    sources: dict = field(default_factory=dict, compare=False, repr=False)
    references: dict = field(default_factory=dict, compare=False, repr=False)

    # --- shapes -----------------------------------------------------------------------------
    @property
    def v_head_dim(self) -> int:
        return self.mla.v_head_dim if self.mla else self.head_dim

    @property
    def moe_layers(self) -> int:
        """Layers whose FFN is a mixture of experts."""
        return self.layers - self.moe.dense_layers if self.moe else 0

    @property
    def dense_layers(self) -> int:
        """Layers with a dense FFN."""
        return self.layers - self.moe_layers

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices of one FFN: 2 (GeLU: up, down) or 3 (SwiGLU: gate, up, down)."""
        return 3 if self.mlp == "swiglu" else 2

    # --- parameters per part -------------------------------------------------------------
    def attention_parameters(self) -> int:
        """Weights and biases of one layer's attention (its norm not included)."""
        h, a = self.hidden, self.heads
        if self.mla:
            m = self.mla
            qk = m.qk_nope_head_dim + m.qk_rope_head_dim
            q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * a * qk  # down, norm, up
            kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank  # down, norm
            kv += m.kv_lora_rank * a * (m.qk_nope_head_dim + m.v_head_dim)  # up to K and V
            return q + kv + a * m.v_head_dim * h
        d, k = self.head_dim, self.kv_heads
        weights = h * (a + 2 * k) * d + a * d * h
        return weights + ((a + 2 * k) * d + h if self.biases else 0)

    def ffn_parameters(self, ffn: int | None = None) -> int:
        """Weights and biases of one FFN of size ``ffn`` (a dense layer's by default)."""
        f = self.ffn if ffn is None else ffn
        weights = self.mlp_matrices * self.hidden * f
        return weights + ((self.mlp_matrices - 1) * f + self.hidden if self.biases else 0)

    def norm_parameters(self) -> int:
        """One norm: a scale (RMSNorm) or a scale and a shift (LayerNorm) per channel."""
        return self.hidden * (2 if self.norm == "layernorm" else 1)

    def router_parameters(self) -> int:
        return self.moe.experts * self.hidden if self.moe else 0

    def moe_ffn_parameters(self, active: bool = False) -> int:
        """One MoE layer's experts and router: all of them, or those a token uses."""
        m = self.moe
        routed = m.top_k if active else m.experts
        return (routed + m.shared_experts) * self.ffn_parameters(
            m.expert_ffn
        ) + self.router_parameters()

    def layer_parameters(self, kind: str = "dense", active: bool = False) -> int:
        """One layer (``kind`` "dense" or "moe"): attention, FFN (or experts), two norms."""
        if kind not in ("dense", "moe") or (kind == "moe" and not self.moe):
            allowed = "dense or moe" if self.moe else "dense"
            raise ValueError(f"kind must be {allowed}, not {kind!r}")
        ffn = self.moe_ffn_parameters(active) if kind == "moe" else self.ffn_parameters()
        return self.attention_parameters() + ffn + 2 * self.norm_parameters()

    def embedding_parameters(self) -> int:
        """Token embeddings, plus learned positions (one per position of the sequence)."""
        return self.vocab * self.hidden + (
            self.seq_len * self.hidden if self.position == "learned" else 0
        )

    def head_parameters(self) -> int:
        """The output projection to the vocabulary (none of its own when tied) and the final
        norm."""
        return (0 if self.tied_embeddings else self.vocab * self.hidden) + self.norm_parameters()

    @property
    def parameters(self) -> int:
        """Every parameter of the model."""
        body = self.dense_layers * self.layer_parameters("dense")
        if self.moe:
            body += self.moe_layers * self.layer_parameters("moe")
        return body + self.embedding_parameters() + self.head_parameters()

    @property
    def active_parameters(self) -> int:
        """Parameters a token's computation uses: every layer's (of a MoE layer the router,
        the top-k routed and the shared experts), the output projection and the norms - not
        the input embedding table, which a token only reads one row of (Kaplan et al.'s
        convention for N; a tied table counts once, as the output projection)."""
        body = self.dense_layers * self.layer_parameters("dense")
        if self.moe:
            body += self.moe_layers * self.layer_parameters("moe", active=True)
        head = self.head_parameters() + (self.vocab * self.hidden if self.tied_embeddings else 0)
        return body + head

    # --- FLOPs ------------------------------------------------------------------------------
    def matmul_parameters_per_token(self) -> int:
        """Weights of the matrix products a token goes through (biases, norms and the
        embedding look-up are not matrix products; the output projection is, tied or not)."""
        h, a = self.hidden, self.heads
        if self.mla:
            m = self.mla
            attn = h * m.q_lora_rank + m.q_lora_rank * a * (m.qk_nope_head_dim + m.qk_rope_head_dim)
            attn += h * (m.kv_lora_rank + m.qk_rope_head_dim)
            attn += m.kv_lora_rank * a * (m.qk_nope_head_dim + m.v_head_dim)
            attn += a * m.v_head_dim * h
        else:
            attn = h * (a + 2 * self.kv_heads) * self.head_dim + a * self.head_dim * h
        dense = self.mlp_matrices * h * self.ffn
        total = self.layers * attn + self.dense_layers * dense + self.vocab * h
        if self.moe:
            m = self.moe
            expert = self.mlp_matrices * h * m.expert_ffn
            total += self.moe_layers * ((m.top_k + m.shared_experts) * expert + m.experts * h)
        return total

    def attention_flop_per_token(self, seq_len=None, causal: bool = False):
        """Forward FLOPs of the score (QK^T) and context (AV) products per token, all layers.

        Parameters
        ----------
        seq_len : int or array, optional
            Keys each query attends to over the whole sequence (the model's by default).
        causal : bool
            False counts the full square, as Megatron-LM's and Korthikanti's FLOP formulas do
            (``4 s h`` per token and layer); True counts the keys at or before each query only
            (on average ``(s + 1) / 2``), what a causal kernel that skips masked blocks does.
        """
        s = np.asarray(self.seq_len if seq_len is None else seq_len, dtype=float)
        keys = (s + 1) / 2 if causal else s
        per_layer = 2 * keys * self.heads * (self.head_dim + self.v_head_dim)
        return self.layers * per_layer

    def forward_flop_per_token(self, seq_len=None, causal: bool = False):
        """Model FLOPs of one token's forward pass: ``2 N_matmul`` plus attention
        (vectorised over ``seq_len``)."""
        return 2.0 * self.matmul_parameters_per_token() + self.attention_flop_per_token(
            seq_len, causal
        )

    def training_flop_per_token(self, seq_len=None, recompute: str = "none", causal=False):
        """FLOPs of one token's forward and backward pass (backward = 2 x forward).

        ``recompute="none"`` gives *model* FLOPs (3 x forward, Korthikanti Eq. 7: for a GPT
        ``72 B s l h^2 (1 + s/6h + V/12lh)`` over a batch); ``"full"`` adds the layers'
        forward again (Narayanan's ``96 B s l h^2 (1 + s/6h + V/16lh)``), ``"selective"`` the
        attention products as Korthikanti's Eq. 8 counts them (``s/3h`` for ``s/6h``: the
        attention term doubled, which reproduces their Table 5 HFU; a forward-only recompute
        of the two products would be a third of that): *hardware* FLOPs.
        """
        fwd = self.forward_flop_per_token(seq_len, causal)
        if recompute == "none":
            return 3 * fwd
        if recompute == "selective":
            return 3 * fwd + 3 * self.attention_flop_per_token(seq_len, causal)
        if recompute == "full":
            head = 2.0 * self.vocab * self.hidden  # the output layer is not recomputed
            return 4 * fwd - head
        if recompute == "selective+mlp":
            selective = self.training_flop_per_token(seq_len, "selective", causal)
            return selective + self.mlp_rerun_flop_per_token()
        raise ValueError(f"recompute must be one of {', '.join(RECOMPUTES)}, not {recompute!r}")

    def mlp_rerun_flop_per_token(self) -> float:
        """FLOPs of one token's MLP blocks rerun under ``selective+mlp``, all layers: the
        forward of the projections up to the last one's input (SwiGLU's gate and up, GeLU's
        first; of an MoE block the top-k routed and the shared experts'). The last projection
        is not rerun: the backward pass needs its input, not its output."""
        up = self.mlp_matrices - 1
        total = self.dense_layers * 2.0 * self.hidden * up * self.ffn
        if self.moe:
            m = self.moe
            experts = m.top_k + m.shared_experts
            total += self.moe_layers * 2.0 * self.hidden * up * m.expert_ffn * experts
        return total

    def six_n_flop_per_token(self) -> float:
        """The common ``6 N`` estimate of training FLOPs per token (active parameters, no
        attention term): what most papers' token budgets are quoted against."""
        return 6.0 * self.active_parameters

    def training_flop(self, tokens=None, seq_len=None) -> float:
        """Model FLOPs to train on ``tokens`` (the file's by default)."""
        t = self.tokens if tokens is None else tokens
        return t * self.training_flop_per_token(seq_len)

    # --- KV cache ---------------------------------------------------------------------------
    def kv_cache_per_token_layer_bytes(self, fmt="bf16") -> float:
        """Bytes one token adds to one layer's KV cache in format ``fmt``: K and V of every
        KV head (GQA), or MLA's latent plus its shared RoPE key."""
        if self.mla:
            elements = self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        else:
            elements = self.kv_heads * (self.head_dim + self.v_head_dim)
        return elements * element_bytes(fmt)

    def kv_cache_per_token_bytes(self, fmt="bf16"):
        """Bytes one token adds to the whole model's KV cache (integer when exact)."""
        total = self.layers * self.kv_cache_per_token_layer_bytes(fmt)
        return int(total) if float(total).is_integer() else total


# --- loading ----------------------------------------------------------------------------------
def _folder():
    return resources.files(__package__).joinpath("models")


def model_names() -> tuple[str, ...]:
    """Names of the model files shipped in ``tlm/workloads/models/``."""
    names = [p.name[: -len(".toml")] for p in _folder().iterdir() if p.name.endswith(".toml")]
    return tuple(sorted(names))


def _value(fig):
    return None if fig is None else fig.value


def load_model(name: str | Path) -> Model:
    """Load and validate a model by name (``"llama3-405b"``) or from a TOML file path.

    Raises
    ------
    WorkloadError
        For an unknown name (naming the models there are), or a file that does not validate
        (naming the file, the figure and the rule).
    """
    if isinstance(name, Path) or str(name).endswith(".toml"):
        path = Path(name)
        text = read_text(path, WorkloadError)
        return _from_file(parse_data_file(text, path, ModelFile, WorkloadError))
    if not isinstance(name, str):
        return _shipped_model(name)  # not a name: its error
    return _shipped_model(name)


def _shipped_model(name: str) -> Model:
    if name not in model_names():
        raise WorkloadError(
            f"model must be one of {', '.join(model_names())} or a .toml path, not {name!r}"
        )
    path = f"tlm/workloads/models/{name}.toml"
    text = _folder().joinpath(f"{name}.toml").read_text()
    return _from_file(parse_data_file(text, path, ModelFile, WorkloadError))


def _from_file(data: ModelFile) -> Model:
    arch = data.architecture
    values = {n: getattr(arch, n).value for n in type(arch).model_fields}
    sources = {f"architecture.{n}": getattr(arch, n).source for n in type(arch).model_fields}
    moe = mla = None
    if data.moe:
        m = data.moe
        moe = Moe(
            experts=m.experts.value,
            top_k=m.top_k.value,
            shared_experts=_value(m.shared_experts) or 0,
            expert_ffn=m.expert_ffn.value,
            dense_layers=_value(m.dense_layers) or 0,
            capacity_factor=m.capacity_factor.value,
        )
    if data.mla:
        mla = Mla(**{n: getattr(data.mla, n).value for n in type(data.mla).model_fields})
    for section in ("moe", "mla", "training", "published"):
        block = getattr(data, section)
        for n in type(block).model_fields if block is not None else ():
            fig = getattr(block, n)
            if fig is not None:
                sources[f"{section}.{n}"] = fig.source
    t, p = data.training, data.published
    return Model(
        name=data.name,
        description=data.description,
        **values,
        seq_len=t.seq_len.value,
        global_batch_sequences=t.global_batch_sequences.value,
        tokens=t.tokens.value,
        published_parameters=p.parameters.value,
        published_active_parameters=_value(p.active_parameters),
        moe=moe,
        mla=mla,
        runs=tuple(data.run),
        sources=sources,
        references=dict(data.sources),
    )
