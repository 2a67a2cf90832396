"""Workloads as data: every model file validates, its parameter count matches the published
one, the FLOP counts are the papers' formulas and reproduce the papers' own figures, the
operator lists add up to the FLOP counts, and bad input names what is wrong."""

import math

import numpy as np
import pytest

from tlm.workloads import (
    WorkloadError,
    element_bytes,
    layer_ops,
    load_model,
    model_names,
    model_ops,
)

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

A100_PEAK = 312e12  # A100 BF16/FP16 dense (NVIDIA datasheet; Korthikanti footnote 5)

#: The unit of each published parameter count's last digit: a count is held to the published
#: figure within max(1 %, half that unit) - "1.7" billion can be anything from 1.65 to 1.75.
PUBLISHED_UNIT = {
    "gpt3-175b": 0.1e9,  # "175.0B" (Brown et al. Table 2.1)
    "llama3-8b": 0.01e9,  # "8.03B" (Hugging Face card)
    "llama3-70b": 0.1e9,  # "70.6B"
    "llama3-405b": 1e9,  # "405B" (Llama 3 paper)
    "megatron-22b": 1e9,  # "22B" (Korthikanti Table 3)
    "deepseek-v3": 1e9,  # "671B", "37B"
    "moe-2t": 0.1e12,  # "2.0T" (assumed design target)
    "mixtral-8x7b": 1e9,  # "47B", "13B" (Mistral paper)
    "llama3.2-1b": 0.01e9,  # "1.23B" (Hugging Face card)
}


def _tolerance(name, published):
    unit = PUBLISHED_UNIT.get(name, 0.1e9)  # the Megatron table prints one decimal (billions)
    return max(0.01 * published, unit / 2)


def test_every_model_loads_with_sources():
    names = model_names()
    assert len(names) >= 17
    for name in names:
        m = load_model(name)
        assert m.name == name
        for figure, keys in m.sources.items():
            for key in keys.split():
                assert key in m.references, (name, figure, key)


@pytest.mark.parametrize("name", model_names())
def test_parameters_match_the_published_count(name):
    m = load_model(name)
    tol = _tolerance(name, m.published_parameters)
    assert abs(m.parameters - m.published_parameters) <= tol, (m.parameters, tol)
    if m.moe:
        pub = m.published_active_parameters
        assert abs(m.active_parameters - pub) <= _tolerance(name, pub)
        # what a token leaves unused: the routed experts it is not sent to, and the input
        # embedding table (an untied one; a tied table counts once, as the output projection)
        routed = m.moe_layers * m.moe.experts * m.ffn_parameters(m.moe.expert_ffn)
        unused = routed * (1 - m.moe.top_k / m.moe.experts)
        unused += 0 if m.tied_embeddings else m.embedding_parameters()
        assert m.parameters - m.active_parameters == pytest.approx(unused, rel=1e-12)
    else:
        assert m.published_active_parameters is None


def test_megatron_parameter_formula():
    """Narayanan et al. Eq. (2): P = 12 l h^2 (1 + 13/12h + (V + s)/12lh) - our count adds
    only the final LayerNorm (2h) the formula leaves out."""
    for name in model_names():
        if not name.startswith("megatron-") or name == "megatron-22b":
            continue
        m = load_model(name)
        h, L, V, s = m.hidden, m.layers, m.vocab, m.seq_len
        formula = 12 * L * h**2 * (1 + 13 / (12 * h) + (V + s) / (12 * L * h))
        assert m.parameters - 2 * h == pytest.approx(formula, rel=1e-12)


def test_table_1_is_consistent():
    """The transcribed Megatron Table 1 rows: aggregate = per-GPU x GPUs (within the per-GPU
    figure's rounding to a teraFLOP/s), % of peak = per-GPU / 312, GPUs = t x p x d."""
    rows = 0
    for name in model_names():
        for run in load_model(name).runs:
            if run.aggregate_flop_per_s is None:
                continue
            rows += 1
            per_gpu = run.achieved_flop_per_s_per_chip
            assert run.aggregate_flop_per_s == pytest.approx(per_gpu * run.chips, rel=0.005)
            assert run.mfu_fraction == pytest.approx(per_gpu / A100_PEAK, abs=0.005)
    assert rows == 10


def megatron_flop(B, s, L, h, V, recompute):
    """Narayanan et al. Eq. (3) (with recomputation: 96) / Korthikanti Eq. (7) (without: 72)
    - written out here, independently of the model's own count."""
    if recompute == "full":
        return 96 * B * s * L * h**2 * (1 + s / (6 * h) + V / (16 * L * h))
    return 72 * B * s * L * h**2 * (1 + s / (6 * h) + V / (12 * L * h))


@pytest.mark.parametrize("name", ["megatron-1.7b", "gpt3-175b", "megatron-1t", "megatron-22b"])
@pytest.mark.parametrize("recompute", ["none", "full"])
def test_flops_are_the_megatron_formula(name, recompute):
    m = load_model(name)
    B, s = m.global_batch_sequences, m.seq_len
    ours = B * s * m.training_flop_per_token(recompute=recompute)
    assert ours == pytest.approx(megatron_flop(B, s, m.layers, m.hidden, m.vocab, recompute))


def test_selective_recompute_is_korthikanti_eq_8():
    m = load_model("gpt3-175b")
    B, s, L, h, V = 64, m.seq_len, m.layers, m.hidden, m.vocab
    hw = 72 * B * L * s * h**2 * (1 + s / (3 * h) + V / (12 * h * L))
    assert B * s * m.training_flop_per_token(recompute="selective") == pytest.approx(hw)


def _korthikanti_runs():
    for name in ("megatron-22b", "gpt3-175b", "megatron-530b", "megatron-1t"):
        m = load_model(name)
        for run in m.runs:
            if run.source.startswith("KORTHIKANTI") and run.mfu_fraction:
                yield name, m, run


def test_korthikanti_table_5_mfu_and_hfu():
    """The paper's own figures: MFU = model FLOPs / (time x GPUs x 312 TFLOP/s), HFU with the
    selective recomputation's extra attention products, for all four models (Table 5), within
    the rounding of the published time (3 significant figures) and percentage."""
    seen = 0
    for name, m, run in _korthikanti_runs():
        V = run.vocab or m.vocab
        B, s = run.global_batch_sequences, m.seq_len
        mm = m if V == m.vocab else __import__("dataclasses").replace(m, vocab=V)
        capacity = run.step_time_s * run.chips * A100_PEAK
        mfu = B * s * mm.training_flop_per_token() / capacity
        hfu = B * s * mm.training_flop_per_token(recompute="selective") / capacity
        slack = 0.0005 + 0.005 / run.step_time_s * mfu  # 0.05 % + the time's last digit
        assert mfu == pytest.approx(run.mfu_fraction, abs=slack), name
        assert hfu == pytest.approx(run.hfu_fraction, abs=slack), name
        seen += 1
    assert seen == 4


def test_megatron_training_time_estimates():
    """Narayanan et al. Section 5.1: end-to-end time ~ 8 T P / (n X): GPT-3 175B on 300B tokens
    with 1,024 A100s at 140 TFLOP/s takes 34 days; the 1T model on 450B tokens with 3,072 at
    163 TFLOP/s, 84 days. The 8TP rule is the 96 formula with s << 6h and V << 16lh."""
    for name, tokens, gpus, x, days in (
        ("gpt3-175b", 300e9, 1024, 140e12, 34),
        ("megatron-1t", 450e9, 3072, 163e12, 84),
    ):
        m = load_model(name)
        rule = 8 * tokens * m.parameters / (gpus * x) / 86400
        assert round(rule) == days
        ours = tokens * m.training_flop_per_token(recompute="full") / (gpus * x) / 86400
        assert ours == pytest.approx(days, rel=0.04)  # the attention and logit terms: < 4 %


def test_six_n_and_the_attention_term():
    m = load_model("llama3-405b")
    six_n = m.six_n_flop_per_token()
    exact = m.training_flop_per_token()
    attention = 3 * m.attention_flop_per_token()
    assert exact == pytest.approx(6 * m.matmul_parameters_per_token() + attention)
    assert 1.0 < exact / six_n < 1.1  # 8k tokens: attention adds a few % on 405B
    causal = m.training_flop_per_token(causal=True)
    assert exact - causal == pytest.approx(3 * m.layers * 2 * 128 * 256 * (8192 - 1) / 2)


def test_flops_vectorised_over_sequence_length():
    m = load_model("llama3-8b")
    s = np.array([1024, 8192, 131072])
    many = m.forward_flop_per_token(s)
    assert many.shape == (3,)
    assert many[1] == m.forward_flop_per_token(8192)
    assert np.all(np.diff(many) > 0)


@pytest.mark.parametrize("name", ["llama3-405b", "deepseek-v3", "moe-2t", "gpt3-175b"])
def test_operators_add_up_to_the_forward_flops(name):
    m = load_model(name)
    total = sum(n * sum(op.flop for op in ops) for _, n, ops in model_ops(m))
    assert total == pytest.approx(m.seq_len * m.forward_flop_per_token(), rel=1e-12)
    weights = sum(n * sum(op.weights for op in ops) for _, n, ops in model_ops(m))
    unrouted = 0  # the weights of the experts a token does not visit
    if m.moe:
        unrouted = (m.moe.experts - m.moe.top_k) * m.moe_layers * m.ffn_parameters(m.moe.expert_ffn)
    assert weights == m.matmul_parameters_per_token() + unrouted


def test_operators_split_by_tp_and_ep():
    m = load_model("deepseek-v3")
    one = {o.name: o for o in layer_ops(m, "moe", queries=4096)}
    split = {o.name: o for o in layer_ops(m, "moe", queries=4096, tp=4, ep=8)}
    assert split["q_down"] == one["q_down"]  # replicated down-projection
    assert split["q_up"].n * 4 == one["q_up"].n
    assert split["expert_gate_up"].batch * 8 == one["expert_gate_up"].batch == 256
    # balanced routing: the EP group's 8 x 4096 tokens x top-8 over 256 experts
    assert split["expert_gate_up"].m == 8 * 4096 * 8 / 256
    assert split["expert_gate_up"].n * 4 == one["expert_gate_up"].n == 2 * 2048
    gqa = {o.name: o for o in layer_ops(load_model("llama3-405b"), queries=8192, tp=16)}
    assert gqa["qkv"].n == (128 // 16 + 2 * 1) * 128  # 8 KV heads over 16 chips: 1 each


def test_decode_shapes():
    m = load_model("llama3-8b")
    ops = {o.name: o for o in layer_ops(m, sequences=32, queries=1, keys=2048)}
    assert ops["qkv"].m == 32 and ops["score"].batch == 32 * 32
    assert (ops["score"].m, ops["score"].n, ops["score"].k) == (1, 2048, 128)


def test_kv_cache_bytes():
    m = load_model("llama3-70b")
    assert m.kv_cache_per_token_layer_bytes("bf16") == 2 * 8 * 128 * 2
    assert m.kv_cache_per_token_bytes("fp8_e4m3") == 80 * 2 * 8 * 128
    ds = load_model("deepseek-v3")
    assert ds.kv_cache_per_token_layer_bytes("bf16") == (512 + 64) * 2
    gpt = load_model("gpt3-175b")  # multi-head: 2 x 12288 per layer
    assert gpt.kv_cache_per_token_bytes() == 96 * 2 * 12288 * 2
    assert element_bytes("fp32") == 4 and element_bytes("int8") == 1


@pytest.mark.parametrize(
    "call,message",
    [
        (
            lambda: load_model("llama9"),
            "model must be one of deepseek-v3, gpt3-175b, llama2-13b, llama2-70b, llama2-7b, "
            "llama3-405b, llama3-70b, llama3-8b, llama3.1-405b, llama3.2-1b, llama3.3-70b, "
            "megatron-1.7b",
        ),
        (
            lambda: layer_ops(load_model("llama3-8b"), tp=3),
            "tp must be a divisor of the 32 heads of llama3-8b, not 3",
        ),
        (
            lambda: layer_ops(load_model("llama3-70b"), tp=128),
            "tp must be a divisor of the 64 heads of llama3-70b, not 128",
        ),
        (
            lambda: layer_ops(load_model("deepseek-v3"), "moe", ep=3),
            "ep must be a divisor of the 256 experts of deepseek-v3, not 3",
        ),
        (
            lambda: layer_ops(load_model("llama3-8b"), ep=2),
            "ep must be 1 for llama3-8b (a dense model), not 2",
        ),
        (
            lambda: layer_ops(load_model("llama3-8b"), "moe"),
            "kind must be dense, not 'moe'",
        ),
        (
            lambda: load_model("llama3-8b").training_flop_per_token(recompute="half"),
            "recompute must be one of none, selective, full, selective+mlp, not 'half'",
        ),
    ],
)
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value).startswith(message)


def _write(tmp_path, text):
    base = (
        load_model.__globals__["_folder"]().joinpath("llama3-8b.toml").read_text()
    )  # a valid file to break
    path = tmp_path / "m.toml"
    path.write_text(text(base))
    return path


@pytest.mark.parametrize(
    "edit,message",
    [
        (
            lambda t: t.replace('value = 8, source = "LLAMA3"', 'value = 5, source = "LLAMA3"'),
            "architecture: kv_heads must divide heads (32), not 5",
        ),
        (
            lambda t: t.replace('value = "swiglu"', 'value = "relu"'),
            "architecture: mlp must be one of gelu, swiglu, not 'relu'",
        ),
        (
            lambda t: t.replace('source = "HF" }\nbiases', 'source = "WIKI" }\nbiases'),
            "architecture.tied_embeddings cites source 'WIKI', which is not in "
            "[sources] (HF, LLAMA3, NEURON_NXD)",
        ),
        (
            lambda t: t.replace("hidden = { value = 4096", "hidden = { value = 0"),
            "architecture.hidden.value: Input should be greater than or equal to 1",
        ),
        (lambda t: t + "\n[surprise]\nx = 1\n", "surprise: Extra inputs are not permitted"),
    ],
)
def test_bad_model_files(tmp_path, edit, message):
    path = _write(tmp_path, edit)
    with pytest.raises(WorkloadError) as info:
        load_model(path)
    assert str(info.value) == f"{path}: {message}"


def test_model_file_path_loads(tmp_path):
    path = _write(tmp_path, lambda t: t)
    assert load_model(path) == load_model("llama3-8b")
    assert math.isclose(load_model(str(path)).parameters, 8.03e9, rel_tol=0.001)
