"""The schema of a workload (model) file, validated on load with pydantic.

A model file describes one transformer: its architecture (``[architecture]``; ``[moe]`` for a
mixture of experts, ``[mla]`` for multi-head latent attention), how it was trained
(``[training]``: sequence length, global batch, tokens), the published figures it is checked
against (``[published]``: parameter counts) and published training runs (``[[run]]``: the
measurements later validation holds the cluster model to). Every figure is a table
``{value, source, note}`` whose ``source`` names keys of the file's ``[sources]`` table, or
``ASSUMED`` (which must then be a key too, saying what is assumed and where it is documented).
Counts are plain nouns (``layers``, ``heads``), other figures carry their unit in their name
(``step_time_s``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "Count",
    "Number",
    "Choice",
    "Flag",
    "Architecture",
    "MoeSection",
    "MlaSection",
    "TrainingSection",
    "PublishedSection",
    "RunRecord",
    "ModelFile",
    "ATTENTIONS",
    "MLPS",
    "NORMS",
    "POSITIONS",
    "RECOMPUTES",
]

#: Attention kinds: grouped-query (multi-head when kv_heads == heads, multi-query at 1) and
#: DeepSeek's multi-head latent attention.
ATTENTIONS = ("gqa", "mla")
#: Feed-forward kinds: a GeLU MLP (two matrices) or SwiGLU (gate, up and down).
MLPS = ("gelu", "swiglu")
NORMS = ("layernorm", "rmsnorm")
POSITIONS = ("learned", "rope")
#: Activation recomputation: none; ``selective``, the attention core (Korthikanti et al.);
#: ``full``, every layer; ``selective+mlp``, the attention core and the MLP block
#: (Megatron-core's ``--recompute-modules core_attn mlp``; neuronx-distributed's
#: ``(CoreAttention, LlamaMLP)`` at 8K). Appended last: layouts hold the codes (the index).
RECOMPUTES = ("none", "selective", "full", "selective+mlp")


class _Strict(BaseModel):
    # validators built when first used: loading a file builds the file's model, its sections
    # inside it, and importing the schema builds none
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)


class _Fact(_Strict):
    source: str = Field(min_length=1)
    note: str = ""


class Count(_Fact):
    """A whole number >= 1 (layers, heads, tokens)."""

    value: int = Field(ge=1)


class Number(_Fact):
    """A positive number (a parameter count, a time, a fraction)."""

    value: float = Field(gt=0)


class Choice(_Fact):
    """A named kind (``"gqa"``, ``"swiglu"``); the section checks it is one it knows."""

    value: str


class Flag(_Fact):
    """True or false (tied embeddings, biases, dropout)."""

    value: bool


def _one_of(name: str, figure: Choice, allowed: tuple[str, ...]):
    if figure.value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, not {figure.value!r}")


class Architecture(_Strict):
    """Dimensions of a decoder-only transformer. ``ffn`` is the FFN size of a dense layer (for
    SwiGLU the size of each of the gate and up projections)."""

    hidden: Count
    layers: Count
    heads: Count
    kv_heads: Count = Field(description="key/value heads (GQA); equal to heads for MHA")
    head_dim: Count
    ffn: Count
    vocab: Count
    attention: Choice
    mlp: Choice
    norm: Choice
    position: Choice
    tied_embeddings: Flag
    biases: Flag = Field(description="biases on the linear layers (GPT-2/3 style)")
    dropout: Flag = Field(description="dropout after attention and MLP (masks are stored)")

    @model_validator(mode="after")
    def _check(self):
        _one_of("attention", self.attention, ATTENTIONS)
        _one_of("mlp", self.mlp, MLPS)
        _one_of("norm", self.norm, NORMS)
        _one_of("position", self.position, POSITIONS)
        if self.heads.value % self.kv_heads.value:
            raise ValueError(
                f"kv_heads must divide heads ({self.heads.value}), not {self.kv_heads.value}"
            )
        return self


class MoeSection(_Strict):
    """A mixture of experts replacing the dense FFN of every layer after the first
    ``dense_layers`` (DeepSeek's ``first_k_dense_replace``)."""

    experts: Count = Field(description="routed experts per MoE layer")
    top_k: Count = Field(description="routed experts per token")
    shared_experts: Count | None = None
    expert_ffn: Count = Field(description="FFN size of one expert (SwiGLU: gate and up each)")
    dense_layers: Count | None = Field(None, description="the first k layers stay dense")
    capacity_factor: Number = Field(description="routed tokens per expert / the balanced share")

    @model_validator(mode="after")
    def _check(self):
        if self.top_k.value > self.experts.value:
            raise ValueError(
                f"top_k must be at most experts ({self.experts.value}), not {self.top_k.value}"
            )
        return self


class MlaSection(_Strict):
    """Multi-head latent attention (DeepSeek-V2/V3): queries and keys/values through low-rank
    latents; the KV cache holds the ``kv_lora_rank`` latent plus the shared RoPE key."""

    q_lora_rank: Count
    kv_lora_rank: Count
    qk_nope_head_dim: Count
    qk_rope_head_dim: Count
    v_head_dim: Count


class TrainingSection(_Strict):
    """How the model was (or is assumed to be) trained."""

    seq_len: Count
    global_batch_sequences: Count
    tokens: Number = Field(description="tokens to train")


class PublishedSection(_Strict):
    """Published figures the derived quantities are tested against."""

    parameters: Number
    active_parameters: Number | None = None


class RunRecord(_Strict):
    """One published training run (for the cluster model's validation): its parallel layout
    and what was measured. Optional fields are the ones the source does not give."""

    chip: str = Field(min_length=1, description="the accelerator, e.g. a100-80gb, h100")
    chips: int = Field(ge=1)
    tp: int = Field(ge=1)
    pp: int = Field(ge=1)
    dp: int = Field(ge=1)
    cp: int = Field(1, ge=1)
    ep: int = Field(1, ge=1)
    global_batch_sequences: int = Field(ge=1)
    micro_batch: int | None = Field(None, ge=1)
    interleave: int | None = Field(None, ge=1)
    recompute: Literal[RECOMPUTES] | None = None
    sequence_parallel: bool | None = None
    attention: Literal["flash", "materialised"] | None = Field(
        None, description="the attention kernel, when the run's differs from its source's"
    )
    seq_len: int | None = Field(None, ge=1, description="when the run's differs from the model's")
    vocab: int | None = Field(None, ge=1, description="when the run's differs from the model's")
    step_time_s: float | None = Field(None, gt=0)
    achieved_flop_per_s_per_chip: float | None = Field(None, gt=0)
    sequences_per_s: float | None = Field(None, gt=0, description="the whole job's throughput")
    mfu_fraction: float | None = Field(None, gt=0, le=1)
    hfu_fraction: float | None = Field(None, gt=0, le=1)
    aggregate_flop_per_s: float | None = Field(None, gt=0)
    source: str = Field(min_length=1)
    note: str = ""

    @model_validator(mode="after")
    def _check(self):
        if self.dp * self.tp * self.pp * self.cp != self.chips:
            raise ValueError(
                f"chips must be dp x tp x pp x cp ({self.dp * self.tp * self.pp * self.cp}), "
                f"not {self.chips}"
            )
        return self


class ModelFile(_Strict):
    """A whole model file; every ``source`` names keys of ``sources``."""

    name: str = Field(min_length=1)
    description: str = ""
    sources: dict[str, str]
    architecture: Architecture
    moe: MoeSection | None = None
    mla: MlaSection | None = None
    training: TrainingSection
    published: PublishedSection
    run: list[RunRecord] = []

    @model_validator(mode="after")
    def _check(self):
        kind = self.architecture.attention.value
        if kind == "mla" and self.mla is None:
            raise ValueError("attention 'mla' needs an [mla] section")
        if kind != "mla" and self.mla is not None:
            raise ValueError(f"an [mla] section needs attention 'mla', not {kind!r}")
        if self.moe is not None:
            dense = self.moe.dense_layers.value if self.moe.dense_layers else 0
            if dense >= self.architecture.layers.value:
                raise ValueError(
                    f"moe.dense_layers must be fewer than layers "
                    f"({self.architecture.layers.value}), not {dense}"
                )
            if self.published.active_parameters is None:
                raise ValueError("a MoE model needs published.active_parameters")
        for where, keys in _sources(self):
            for key in keys.replace(",", " ").split():
                if key not in self.sources:
                    known = ", ".join(sorted(self.sources))
                    raise ValueError(
                        f"{where} cites source {key!r}, which is not in [sources] ({known})"
                    )
        return self


def _sources(data: ModelFile):
    for section in ("architecture", "moe", "mla", "training", "published"):
        block = getattr(data, section)
        if block is None:
            continue
        for name in type(block).model_fields:
            figure = getattr(block, name)
            if isinstance(figure, _Fact):
                yield f"{section}.{name}", figure.source
    for i, run in enumerate(data.run):
        yield f"run[{i}]", run.source
