"""Memory per chip: Korthikanti et al.'s activation formulas on their own configurations, the
parameter bytes of mixed-precision Adam, what each ZeRO stage divides, pipeline in-flight
micro-batches, the vectorised path against scalar calls, and clear errors."""

import dataclasses

import numpy as np
import pytest
from layouts import MEMORY_RECIPE, laid

from tlm.cluster import (
    DEFAULT_RESERVE_BYTES,
    DoesNotFit,
    hbm_capacity_bytes,
    layer_activation_bytes,
    memory_per_chip,
)
from tlm.cluster.layout import RECOMPUTE, Layout
from tlm.workloads import load_model

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

#: Korthikanti et al. (arXiv:2205.05198) Table 3: model, tensor, pipeline, micro-batch,
#: global batch, interleaved stages (Calculon's validation inputs for 175B and 530B: 3).
KORTHIKANTI = [
    ("megatron-22b", 8, 1, 4, 4, 1),
    ("gpt3-175b", 8, 8, 1, 64, 3),
    ("megatron-530b", 8, 35, 1, 280, 3),
    ("megatron-1t", 8, 64, 1, 512, 1),
]
NONE, SELECTIVE, FULL, SELECTIVE_MLP = 0, 1, 2, 3


def table_2(s, b, h, a, t, case):
    """Korthikanti Table 2, bytes per layer, written out independently of the model."""
    return {
        "no parallelism": s * b * h * (34 + 5 * a * s / h),
        "tensor": s * b * h * (10 + 24 / t + 5 * a * s / (h * t)),
        "tensor + sequence": s * b * h / t * (34 + 5 * a * s / h),
        "tensor + selective": s * b * h * (10 + 24 / t),
        "tensor + sequence + selective": s * b * h * 34 / t,
        "full": 2 * s * b * h,
    }[case]


CASES = {
    "no parallelism": dict(tp=1, sp=False, recompute=NONE),
    "tensor": dict(sp=False, recompute=NONE),
    "tensor + sequence": dict(sp=True, recompute=NONE),
    "tensor + selective": dict(sp=False, recompute=SELECTIVE),
    "tensor + sequence + selective": dict(sp=True, recompute=SELECTIVE),
    "full": dict(sp=False, recompute=FULL),
}


@pytest.mark.parametrize("name,t,p,b,batch,v", KORTHIKANTI)
@pytest.mark.parametrize("case", list(CASES))
def test_korthikanti_table_2_per_layer(name, t, p, b, batch, v, case):
    """The generalised layer (GQA, SwiGLU, MoE, any format) reduces exactly to the paper's GPT
    layer: 16-bit activations, 1-byte dropout masks, MLP of 4h."""
    m = load_model(name)
    args = {"micro_batch": b, "seq_len": m.seq_len, "tp": t, **CASES[case]}
    ours = layer_activation_bytes(m, "dense", attention="materialised", **args)
    want = table_2(m.seq_len, b, m.hidden, m.heads, args["tp"], case)
    assert float(ours) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("name,t,p,b,batch,v", KORTHIKANTI)
def test_korthikanti_first_stage_totals(name, t, p, b, batch, v):
    """Section 4.2-4.3: the first pipeline stage keeps p micro-batches of L/p layers - L
    layers' worth, times 1 + (p - 1)/(p m) when interleaved over m stages - plus the
    embedding dropout's mask of p micro-batches (s b h p / t); one stage (p = 1) also holds
    the output layer's norm and projection inputs and the fp32 logits (4 s b h / t (1 + v/h)
    with 16-bit activations; /t with sequence parallelism only, except the logits). Their
    four cases, for sequence parallelism + selective recomputation (the paper's "present
    work") and full recomputation."""
    m = load_model(name)
    s, h, L, V = m.seq_len, m.hidden, m.layers, m.vocab
    factor = 1 + (p - 1) / (p * v) if v > 1 else 1
    for recompute, sp, per_layer in (
        ("selective", True, 34 * s * b * h / t),
        ("full", False, 2 * s * b * h),
    ):
        r = memory_per_chip(
            m,
            layout=Layout(
                dp=1,
                tp=t,
                pp=p,
                micro_batch=b,
                interleave=v,
                sp=sp,
                recompute=recompute,
                zero=0,
                attention="materialised",
            ),
            global_batch=batch,
        )
        assert int(r.stage) == 0
        whole = t if sp else 1  # without sequence parallelism these are whole on every chip
        extra = s * b * h * p / whole
        if p == 1:
            extra += 4 * s * b * h / whole + 4 * s * b * V / t
        want = per_layer * L * factor + extra
        assert float(r.activations_bytes) == pytest.approx(want, rel=1e-12), recompute


@pytest.mark.parametrize("name,t,p,b,batch,v", KORTHIKANTI[1:])
def test_five_fold_reduction(name, t, p, b, batch, v):
    """The abstract's claim: sequence parallelism + selective recomputation cut activation
    memory about 5x against tensor parallelism alone (4.9x to 5.4x on the three large
    models)."""
    m = load_model(name)
    shape = dict(micro_batch=b, seq_len=m.seq_len, tp=t, attention="materialised")
    base = layer_activation_bytes(m, "dense", **shape, sp=False, recompute=NONE)
    ours = layer_activation_bytes(m, "dense", **shape, sp=True, recompute=SELECTIVE)
    assert 4.9 <= float(base / ours) <= 5.5


@pytest.mark.parametrize("name", ["llama3-70b", "gpt3-175b", "deepseek-v3", "moe-2t"])
def test_sixteen_bytes_per_parameter(name):
    """Mixed-precision Adam (ZeRO's accounting): bf16 weights 2 B + bf16 gradients 2 B + fp32
    master 4 B + two fp32 moments 8 B. On one chip that is 16 x the model's parameters -
    counted here by a second, per-chip route that must agree with the model's own count."""
    m = load_model(name)
    r = memory_per_chip(m, layout=Layout(recompute="full", zero=0, sp=False))
    states = r.weights_bytes + r.gradients_bytes + r.optimizer_bytes
    assert float(states) == 16 * m.parameters
    assert float(r.weights_bytes) == 2 * m.parameters


def test_formats_change_the_bytes():
    m = load_model("llama3-8b")
    fp8 = memory_per_chip(
        m, **laid(MEMORY_RECIPE, weights="fp8_e4m3", gradients="fp32", optimizer="bf16")
    )
    assert float(fp8.weights_bytes) == m.parameters
    assert float(fp8.gradients_bytes) == 4 * m.parameters
    assert float(fp8.optimizer_bytes) == (4 + 2 * 2) * m.parameters
    fp32 = memory_per_chip(
        m, **laid(MEMORY_RECIPE, weights="fp32", gradients="fp32", master="fp32")
    )
    assert float(fp32.optimizer_bytes) == 8 * m.parameters  # no separate master copy
    half = memory_per_chip(
        m, layout=Layout(recompute="full", zero=0, sp=False), activations="fp8_e4m3"
    )
    full = memory_per_chip(m, layout=Layout(recompute="full", zero=0, sp=False))
    assert float(half.activations_bytes) < float(full.activations_bytes)


@pytest.mark.parametrize("name", ["llama3-70b", "deepseek-v3"])
def test_zero_stages_divide_what_they_should(name):
    """ZeRO-1 divides the optimizer state, ZeRO-2 the gradients too, ZeRO-3 the weights too,
    by the data-parallel chips (dp x cp); experts by the expert-data-parallel ones (/ ep)."""
    m = load_model(name)
    cfg = dict(dp=32, tp=8, pp=4, cp=2, ep=16 if m.moe else 1, recompute="full")
    z = [memory_per_chip(m, **laid(MEMORY_RECIPE, zero=k, **cfg)) for k in range(4)]
    for part, stage in (("optimizer", 1), ("gradients", 2), ("weights", 3)):
        values = [float(getattr(r, f"{part}_bytes")) for r in z]
        assert values[:stage] == [values[0]] * stage, part
        assert values[stage:] == [values[stage]] * (4 - stage), part
        if not m.moe:
            assert values[0] / values[stage] == pytest.approx(64)
        else:
            assert 4 < values[0] / values[stage] < 64  # experts only divided by 64 / 16
    assert float(z[3].buffers_bytes) > float(z[2].buffers_bytes)  # the gathered layers
    assert float(z[1].activations_bytes) == float(z[0].activations_bytes)


def test_zero_on_experts_by_hand():
    """DeepSeek-V3 on dp x cp = 64 chips with ep = 16: each chip holds 256/16 experts of each
    MoE layer, and ZeRO-1 shards their optimizer state over the 64/16 = 4 chips that hold the
    same experts, the rest of the model's over all 64."""
    m = load_model("deepseek-v3")
    base = dict(dp=64, tp=1, pp=1, ep=16, recompute="full", global_batch=64)
    z0, z1 = (memory_per_chip(m, **laid(MEMORY_RECIPE, zero=k, **base)) for k in (0, 1))
    x = m.moe
    all_experts = m.moe_layers * x.experts * m.ffn_parameters(x.expert_ffn)
    rest = m.parameters - all_experts
    assert float(z0.optimizer_bytes) == pytest.approx(12 * (rest + all_experts / 16))
    assert float(z1.optimizer_bytes) == pytest.approx(12 * (rest / 64 + all_experts / 16 / 4))


def test_pipeline_in_flight_micro_batches():
    """1F1B: the first stage keeps min(pp, micro-batches) micro-batches' activations."""
    m = load_model("llama3-8b")
    one = dict(tp=1, dp=1, micro_batch=1, recompute="selective")
    acts = {
        (pp, gb): float(
            memory_per_chip(
                m, **laid(MEMORY_RECIPE, pp=pp, global_batch=gb, **one)
            ).activations_bytes
        )
        for pp, gb in ((4, 64), (4, 2), (8, 64))
    }
    layer = float(
        layer_activation_bytes(
            m, "dense", micro_batch=1, seq_len=8192, tp=1, sp=False, recompute=SELECTIVE
        )
    )
    assert acts[(4, 64)] == pytest.approx(4 * 8 * layer)  # 4 in flight x 32/4 layers
    assert acts[(4, 2)] == pytest.approx(2 * 8 * layer)  # only 2 micro-batches
    assert acts[(8, 64)] == pytest.approx(8 * 4 * layer)  # L layers' worth either way
    inter = memory_per_chip(m, **laid(MEMORY_RECIPE, pp=4, interleave=2, global_batch=64, **one))
    assert float(inter.activations_bytes) == pytest.approx(acts[(4, 64)] * (1 + 3 / 8))
    # interleaved with 4 micro-batches a step: all of them, and no more, in flight
    few = memory_per_chip(m, **laid(MEMORY_RECIPE, pp=4, interleave=2, global_batch=4, **one))
    assert float(few.activations_bytes) == pytest.approx(4 * 8 * layer)


def test_uneven_pipeline_split():
    """Llama 3 405B's 126 layers over 16 stages: what 16 does not divide goes to the stages
    after the first, so the first and the last take 7 and the fourteen between them 8 (the
    split Llama 3 describes). The peak is then the second stage: 8 layers of 15 micro-batches
    (120 layer-micro-batches) over the first's 7 of 16 (112)."""
    m = load_model("llama3-405b")
    r = memory_per_chip(
        m, layout=Layout(dp=64, tp=8, pp=16, sp=True, recompute="selective", zero=1)
    )
    layer = float(
        layer_activation_bytes(
            m, "dense", micro_batch=1, seq_len=8192, tp=8, sp=True, recompute=SELECTIVE
        )
    )
    assert int(r.stage) == 1
    assert float(r.activations_bytes) == pytest.approx(15 * 8 * layer)
    # 31 layers over 8 stages: the 7 after the first get one more, the last among them; the
    # second (4 layers x 7 micro-batches) is the peak, holding 4 layers' weights and no more
    m31 = dataclasses.replace(load_model("llama3-8b"), layers=31, vocab=1024)
    w = memory_per_chip(m31, **laid(MEMORY_RECIPE, pp=8, global_batch=64))
    assert int(w.stage) == 1
    assert float(w.weights_bytes) == 4 * m31.layer_parameters() * 2
    # one stage holds everything
    one = memory_per_chip(m, layout=Layout(dp=1, tp=8, pp=1))
    assert int(one.stage) == 0


def test_interleaved_chunks_hold_whole_layers():
    """Interleaved over v chunks a round of pp micro-batches each (Megatron-LM's order), the
    first stage's lightest chunk is its first (the embedding's side), the last stage's its
    last: Llama 3 405B (126 layers, pp 16: 7, 8 x 14, 7) at v 4 keeps on the first stage 16
    micro-batches of its 7 layers and 15 more of its first chunk's 1 (127 layer-micro-batches,
    not 7 x (16 + 15/4) = 138.25), on the second 77 chunks of 2 layers (154), on the last 49
    chunks with its light chunk once (16 x 6 + 1 = 97). At v 8 (16 x 8 = 128 = 126 + 2: one
    layer a chunk, the first stage's first chunk the embedding alone and the last stage's last
    the output layer alone, as Llama 3 split it) the first holds 16 x 7 = 112."""
    m = load_model("llama3-405b")
    layer = float(
        layer_activation_bytes(m, "dense", micro_batch=1, seq_len=8192, tp=8, sp=True, recompute=0)
    )
    base = dict(dp=64, tp=8, pp=16, sp=True, recompute="none", zero=2)
    # the global batch of 2,048 at dp 64: 32 micro-batches, two rounds of 16
    acts = {}
    for v in (4, 8):
        r = memory_per_chip(m, layout=Layout(**base, interleave=v))
        assert int(r.stage) == 1  # the second stage (8 layers) peaks
        acts[v] = float(r.activations_bytes) / layer
    assert acts[4] == pytest.approx(77 * 2)
    assert acts[8] == pytest.approx(141)
    # each stage by the in-flight rule, with its light chunk where it sits
    from tlm.cluster.memory import _in_flight

    assert _in_flight(16, 4, 32, 0, 7, 0) == pytest.approx(16 * 7 + 15 * 1)
    assert _in_flight(16, 8, 32, 0, 7, 0) == pytest.approx(16 * 7)
    assert _in_flight(16, 4, 32, 15, 7, 3) == pytest.approx(16 * 6 + 1)
    assert _in_flight(16, 8, 32, 15, 7, 7) == pytest.approx(16 * 7 + 0)
    # even chunks: Korthikanti's n (pp + (pp - 2r - 1)/v), capped by the step's micro-batches
    assert _in_flight(16, 4, 32, 1, 8, -1) == pytest.approx(8 * (16 + 13 / 4))
    assert _in_flight(4, 2, 4, 0, 8, -1) == pytest.approx(4 * 8)
    # one virtual stage more than layers + 2 is refused, naming the product and the bound
    with pytest.raises(ValueError, match=r"pp x interleave must be at most 128 \(the 126 layers"):
        memory_per_chip(m, layout=Layout(**{**base, "pp": 43}, interleave=3))


def test_flash_attention_stores_no_scores():
    """Flash attention keeps each query's fp32 softmax statistics, not the b a s^2 scores:
    with it, selective recomputation stores what no recomputation does."""
    m = load_model("gpt3-175b")
    shape = dict(micro_batch=1, seq_len=m.seq_len, tp=8, sp=True)
    s, b, h, a, t = m.seq_len, 1, m.hidden, m.heads, 8
    for code in (NONE, SELECTIVE):
        flash = layer_activation_bytes(m, "dense", **shape, recompute=code)
        assert float(flash) == pytest.approx(s * b * h * 34 / t + 4 * b * a / t * s, rel=1e-12)
    full = layer_activation_bytes(m, "dense", **shape, recompute=FULL)
    assert float(full) == 2 * s * b * h / t
    with pytest.raises(ValueError, match="attention must be one of flash, materialised"):
        layer_activation_bytes(m, "dense", **shape, recompute=NONE, attention="paged")
    with pytest.raises(ValueError, match="attention must be one of flash, materialised"):
        Layout(attention="eager")


def test_mlp_recomputation_stores_the_mlp_input_only():
    """``selective+mlp`` stores what selective recomputation does less the MLP's intermediates:
    Korthikanti's GPT layer drops its GeLU's input and output (16 sbh/t: 34 -> 18 sbh/t), a
    SwiGLU layer its gate, up and product (3 x 2 bytes x ffn/t a token); the chip then holds one
    layer's MLP while it is recomputed. It lies between selective and full recomputation."""
    gpt = load_model("gpt3-175b")
    s, h, t = gpt.seq_len, gpt.hidden, 8
    shape = dict(micro_batch=1, seq_len=s, tp=t, sp=True, attention="materialised")
    mlp = layer_activation_bytes(gpt, "dense", **shape, recompute=SELECTIVE_MLP)
    assert float(mlp) == pytest.approx(s * h * 18 / t, rel=1e-12)
    llama = load_model("llama3-70b")
    s, f = 8192, llama.ffn
    shape = dict(micro_batch=1, seq_len=s, tp=t, sp=True)
    by = {c: float(layer_activation_bytes(llama, "dense", **shape, recompute=c)) for c in range(4)}
    assert by[SELECTIVE] - by[SELECTIVE_MLP] == pytest.approx(s * 2 * 3 * f / t, rel=1e-12)
    assert by[FULL] < by[SELECTIVE_MLP] < by[SELECTIVE]
    ds = load_model("deepseek-v3")
    moe = {
        c: float(
            layer_activation_bytes(
                ds, "moe", micro_batch=1, seq_len=4096, tp=8, sp=True, recompute=c
            )
        )
        for c in (SELECTIVE, SELECTIVE_MLP)
    }
    assert moe[SELECTIVE_MLP] < 0.5 * moe[SELECTIVE]  # the routed copies were most of it
    layout = dict(dp=4, tp=t, pp=4, zero=1, sp=True)
    per = {
        r: memory_per_chip(llama, Layout(recompute=r, **layout), global_batch=64, seq_len=s)
        for r in ("selective", "selective+mlp", "full")
    }
    one_layer = s * 2 * 3 * f / t
    more = per["selective+mlp"].buffers_bytes - per["selective"].buffers_bytes
    assert float(more) == pytest.approx(one_layer, rel=1e-12)
    totals = [float(per[r].total_bytes) for r in ("full", "selective+mlp", "selective")]
    assert totals == sorted(totals) and len(set(totals)) == 3


def test_vectorised_equals_scalar_calls():
    """Arrays in, arrays out: every row is the scalar call's figure; invalid rows are NaN and
    carry the reason, and never fit."""
    m = load_model("deepseek-v3")
    rng = np.random.default_rng(7)
    print("seed 7")
    n = 200
    cfg = dict(
        dp=rng.choice([1, 8, 32, 64, 128], n),
        tp=rng.choice([1, 2, 4, 8, 3], n),
        pp=rng.choice([1, 2, 4, 8, 16], n),
        cp=rng.choice([1, 2], n),
        ep=rng.choice([1, 8, 16, 64], n),
        zero=rng.choice([0, 1, 2, 3], n),
        micro_batch=rng.choice([1, 2], n),
        sp=rng.choice([False, True], n),
        recompute=rng.choice(list(RECOMPUTE), n),
    )
    many = memory_per_chip(m, **laid(MEMORY_RECIPE, hbm_bytes=96 * 2**30, **cfg))
    assert many.total_bytes.shape == (n,)
    valid = 0
    for i in range(n):
        one = {k: v[i].item() for k, v in cfg.items()}
        if many.reason[i]:
            assert np.isnan(many.total_bytes[i]) and not many.fits[i]
            with pytest.raises(ValueError) as info:
                memory_per_chip(m, **laid(MEMORY_RECIPE, **one))
            assert str(info.value) == many.reasons[many.reason[i]]
            continue
        valid += 1
        r = memory_per_chip(m, **laid(MEMORY_RECIPE, hbm_bytes=96 * 2**30, **one))
        for key in ("weights_bytes", "activations_bytes", "buffers_bytes", "total_bytes"):
            assert getattr(many, key)[i] == float(getattr(r, key)), (i, key)
        assert bool(many.fits[i]) == bool(r.fits)
    assert 20 < valid < n


def test_trn2_hbm_from_the_preset():
    assert hbm_capacity_bytes("trn2") == 96 * 2**30
    assert hbm_capacity_bytes("trn3") == 144 * 2**30


def test_does_not_fit_says_by_how_much():
    m = load_model("llama3-405b")
    r = memory_per_chip(
        m,
        layout=Layout(dp=8, tp=8, pp=2, recompute="full", zero=0, sp=False),
        hbm_bytes=hbm_capacity_bytes("trn2"),
    )
    with pytest.raises(DoesNotFit) as info:
        r.check()
    text = str(info.value)
    assert text.startswith(
        "llama3-405b does not fit with dp=8, tp=8, pp=2, cp=1, ep=1, zero=0, micro_batch=1, "
        "sp=False, recompute=full, interleave=1: it needs "
    )
    need = float(r.total_bytes) / 2**30
    assert (
        f"it needs {need:.3g} GiB per chip and the chip has 96 GiB, {need - 96:.3g} GiB "
        "too much (weights " in text
    )
    assert text.endswith("the largest: optimizer)")
    with pytest.raises(ValueError, match="hbm_bytes must be the chip's HBM in bytes"):
        memory_per_chip(m, **laid(MEMORY_RECIPE)).check()
    names = memory_per_chip(
        m,
        layout=Layout(tp=8, pp=16, recompute=np.array(["full", "none", "full"]), zero=0, sp=False),
    )
    codes = memory_per_chip(
        m, layout=Layout(tp=8, pp=16, recompute=np.array([2, 0, 2]), zero=0, sp=False)
    )
    assert np.array_equal(names.total_bytes, codes.total_bytes)
    fits = memory_per_chip(
        m,
        layout=Layout(dp=8, tp=8, pp=16, zero=1, recompute="full", sp=False),
        hbm_bytes=96 * 2**30,
    )
    fits.check()  # no error
    assert float(fits.buffers_bytes) >= DEFAULT_RESERVE_BYTES


@pytest.mark.parametrize(
    "name,kwargs,message",
    [
        ("llama3-405b", dict(tp=6), "tp must be a divisor of the 128 heads of llama3-405b, not 6"),
        ("llama3-8b", dict(pp=33), "pp must be at most the 32 layers of llama3-8b, not 33"),
        ("llama3-8b", dict(ep=4), "ep must be 1 for llama3-8b (a dense model), not 4"),
        (
            "deepseek-v3",
            dict(dp=8, ep=3),
            "ep must be a divisor of the 256 experts of deepseek-v3, not 3",
        ),
        (
            "deepseek-v3",
            dict(dp=4, ep=8),
            "ep must divide dp x cp (the expert-parallel group is carved from them), not 8",
        ),
        ("llama3-8b", dict(cp=3), "cp must divide the sequence of 8192 tokens, not 3"),
        (
            "llama3-8b",
            dict(dp=3),
            "dp x micro_batch must divide the global batch of 2048 sequences, not 3",
        ),
        ("llama3-8b", dict(zero=4), "zero must be one of 0, 1, 2, 3, not 4"),
        ("llama3-8b", dict(dp=0), "dp must be a positive integer, not 0"),
        (
            "llama3-8b",
            dict(recompute="half"),
            "recompute must be one of none, selective, full, selective+mlp, not 'half'",
        ),
        ("llama3-8b", dict(tp=1.5), "tp must be an integer or an array of integers, not 1.5"),
        (
            "llama3-8b",
            dict(interleave=2),
            "interleave must be 1 without pipeline parallelism (pp 1), not 2",
        ),
    ],
)
def test_bad_configurations(name, kwargs, message):
    with pytest.raises(ValueError) as info:
        memory_per_chip(load_model(name), **laid(MEMORY_RECIPE, **kwargs))
    assert str(info.value) == message


def test_moe_activations_scale_with_top_k():
    m = load_model("deepseek-v3")
    shape = dict(micro_batch=1, seq_len=4096, tp=1, sp=False, recompute=SELECTIVE)
    base = float(layer_activation_bytes(m, "moe", **shape))
    more = dataclasses.replace(m, moe=dataclasses.replace(m.moe, top_k=16))
    per_copy = 2 * 2 * m.hidden + 2 * 3 * m.moe.expert_ffn
    assert float(layer_activation_bytes(more, "moe", **shape)) - base == 8 * 4096 * per_copy


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(tp=0), "tp must be a positive integer, not 0"),
        (dict(zero=-1), "zero must be one of 0, 1, 2, 3, not -1"),
        (dict(pp=2.5), "pp must be an integer or an array of integers, not 2.5"),
        (dict(dp=True), "dp must be an integer or an array of integers, not True"),
        (dict(sp="yes"), "sp must be a bool, not 'yes'"),
        (dict(recompute=4), "recompute must be one of none, selective, full, selective+mlp, not 4"),
    ],
)
def test_a_layout_checks_its_scalars_when_made(kwargs, message):
    """A scalar field is checked by the Layout itself, before any model sees it; a table's
    rows are left to memory_per_chip to mark."""
    with pytest.raises(ValueError) as info:
        Layout(**kwargs)
    assert str(info.value) == message
    Layout(tp=np.array([0, 8]), recompute=np.array(["half", "full"]))  # a table: no error
