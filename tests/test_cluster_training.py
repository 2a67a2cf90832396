"""The training step model (tlm/cluster/training.py): its accounting, against exact FLOP counts,
and its wiring to the operator costs and the network."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np
import pytest
from layouts import laid

from tlm.cluster.layout import RECOMPUTE, Layout
from tlm.cluster.training import PARTS, training_step
from tlm.costs.attention import FA2, FA2_SPEED, NKI_FLASH, FlashKernel, causal_fraction
from tlm.workloads import load_model

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

SEED = int(os.environ.get("SEED", "20261124"))


#: A flash kernel whose one tile covers any sequence here: it computes the whole square.
WHOLE_SQUARE = FlashKernel("test: whole square", (1 << 30,) * 2, (1 << 30,) * 2, (1 << 30,) * 2, "")


class PeakCosts:
    """A chip that runs every product at exactly ``peak`` FLOP/s and everything else for free:
    the step's compute must then be its FLOPs over the peak (its flash kernel computes the
    whole square unless ``flash`` says otherwise)."""

    source = "test: exact peak"

    def __init__(self, peak=1e15, flash=WHOLE_SQUARE, flash_efficiency=None):
        self.peak = peak
        self.flash = flash
        self.flash_efficiency = flash_efficiency

    def peak_flops(self, fmt="bf16"):
        return self.peak

    def gemm_s(self, m, n, k, batch=1, fmt="bf16"):
        return 2.0 * np.asarray(batch, float) * np.asarray(m, float) * n * k / self.peak

    def vector_s(self, elements, op="elementwise", fmt="bf16", from_hbm=True):
        return np.zeros(np.shape(elements))

    def memory_s(self, nbytes):
        return np.zeros(np.shape(nbytes))


class FreeNetwork:
    """Collectives and sends that cost nothing."""

    chips_per_node = 64

    def collective_s(self, op, group, stride, nbytes, dtype_bytes=2):
        return np.zeros(np.broadcast_shapes(np.shape(group), np.shape(nbytes)))

    def p2p_s(self, nbytes, stride, group=None):
        return np.zeros(np.broadcast_shapes(np.shape(nbytes), np.shape(stride)))


class RingNetwork(FreeNetwork):
    """Alpha-beta rings at one bandwidth (100 GB/s over ``scale``): collectives cost, so the
    parts they feed show."""

    def __init__(self, scale=1.0):
        self.scale = scale

    def collective_s(self, op, group, stride, nbytes, dtype_bytes=2):
        g = np.asarray(group, float)
        f = 2.0 if op == "all_reduce" else 1.0
        per = 1e-6 + np.asarray(nbytes) / g / 100e9
        return np.where(g > 1, f * (g - 1) * per * self.scale, 0.0)

    def p2p_s(self, nbytes, stride, group=None):
        return 1e-6 + np.asarray(nbytes, float) / 25e9 + 0 * np.asarray(stride)


@pytest.mark.parametrize("name", ["llama3-8b", "gpt3-175b", "deepseek-v3"])
@pytest.mark.parametrize("recompute", ["none", "full"])
def test_compute_is_the_flops_over_the_peak(name, recompute):
    """With products at exactly the peak and nothing else costing, a one-stage step is its
    hardware FLOPs over the peak, to rounding: the model file's count (the full attention
    square; full recomputation adds the layers' forward) with the vocabulary padded to a
    multiple of tp, as the output projection is split. (DeepSeek-V3 at tp 1: tensor
    parallelism replicates MLA's down-projections and the router, hardware FLOPs the model
    count leaves out.)"""
    m = load_model(name)
    ep = 8 if m.moe else 1
    tp = 1 if m.mla else 8
    step = training_step(
        m,
        PeakCosts(),
        FreeNetwork(),
        layout=Layout(
            dp=8,
            tp=tp,
            pp=1,
            ep=ep,
            zero=1,
            sp=True,
            recompute=recompute,
            attention="materialised",
        ),
        global_batch=64,
    )
    padded = replace(m, vocab=-(-m.vocab // tp) * tp)
    flops = 64 * m.seq_len * padded.training_flop_per_token(recompute=recompute)
    assert float(step.step_s) * 8 * tp * 1e15 == pytest.approx(flops, rel=1e-12)
    parts = sum(float(getattr(step, p + "_s")) for p in PARTS)
    assert parts == pytest.approx(float(step.step_s), rel=1e-12)


def test_flash_attention_recomputes_the_score_product_in_the_backward_pass():
    """Flash attention's backward pass adds one score product per layer: with products at
    the peak and no vector cost, exactly half the attention's forward FLOPs per layer (the
    score product is one of its two)."""
    m = load_model("llama3-8b")
    args = dict(dp=1, tp=8, pp=1, sp=True, recompute="none", global_batch=8)
    flash = training_step(m, PeakCosts(), FreeNetwork(), **laid(attention="flash", **args))
    plain = training_step(m, PeakCosts(), FreeNetwork(), **laid(attention="materialised", **args))
    score = m.attention_flop_per_token() / 2 * 8 * m.seq_len / 8  # per chip of 8
    assert float(flash.step_s - plain.step_s) * 1e15 == pytest.approx(score, rel=1e-9)
    with pytest.raises(ValueError, match="attention must be one of flash, materialised"):
        training_step(m, PeakCosts(), FreeNetwork(), **laid(attention="paged", **args))


def test_causal_tiles_of_the_nki_and_fa2_kernels():
    """The share of the square each kernel's tiles compute: NKI's 128 x 512 score tiles and
    128 x 2,048 context tiles at 4K and 8K (counted by hand from the kernel's masks), one tile
    all of it, and towards half at long sequences."""
    assert causal_fraction(4096, 128, 512) == 144 / 256
    assert causal_fraction(4096, 128, 2048) == 48 / 64
    assert causal_fraction(8192, 128, 512) == 544 / 1024
    assert causal_fraction(8192, 128, 2048) == 160 / 256
    assert causal_fraction(1024, 128, 2048) == 1.0
    for kernel in (NKI_FLASH, FA2):
        longest = kernel.fractions(1 << 17)
        assert all(0.5 < f < 0.51 for f in longest)
        assert all(a >= b for a, b in zip(kernel.fractions(4096), longest, strict=True))


@pytest.mark.parametrize("kernel", [NKI_FLASH, FA2], ids=["nki", "fa2"])
def test_causal_flash_attention_costs_about_half_the_square_at_long_sequence(kernel):
    """A causal flash kernel skips the tiles above the diagonal: at 128K tokens the attention
    products cost about half the whole square's (score and context, forward and backward),
    and exactly the kernel's tile shares of each pass; the other work is unchanged."""
    m = load_model("llama3-8b")
    args = dict(dp=1, tp=8, pp=1, sp=True, recompute="none", global_batch=1, seq_len=1 << 17)
    whole = training_step(m, PeakCosts(), FreeNetwork(), **laid(attention="flash", **args))
    causal = training_step(
        m, PeakCosts(flash=kernel), FreeNetwork(), **laid(attention="flash", **args)
    )
    tokens = 1 << 17
    half = m.attention_flop_per_token(tokens) / 2 * tokens / 8 / 1e15  # one product, per chip
    f_score, f_context, f_bwd = kernel.fractions(tokens)
    # forward: score + context; backward: the score again, and four products of its shape
    square = 2 * half + 5 * half
    skipped = (1 - f_score) * half + (1 - f_context) * half + (1 - f_bwd) * 5 * half
    saved = float(whole.step_s - causal.step_s)
    assert saved == pytest.approx(skipped, rel=1e-9)
    assert 0.49 * square < saved < 0.51 * square


def test_the_materialised_path_computes_the_whole_square():
    """The scores through HBM (``CoreAttention``: a masked fill, no skipped tiles): the chip's
    flash kernel changes nothing."""
    m = load_model("llama2-13b")
    args = dict(dp=1, tp=4, pp=1, sp=True, recompute="selective", global_batch=4)
    a = training_step(m, PeakCosts(), FreeNetwork(), **laid(attention="materialised", **args))
    b = training_step(
        m, PeakCosts(flash=NKI_FLASH), FreeNetwork(), **laid(attention="materialised", **args)
    )
    assert float(a.step_s) == float(b.step_s) and float(a.recompute_s) == float(b.recompute_s)


def test_each_chip_family_prices_its_own_flash_kernel():
    from tlm.costs import OpCosts
    from tlm.hardware import load_hardware

    assert OpCosts.for_preset("trn1").flash is NKI_FLASH
    assert OpCosts.for_hardware(load_hardware("trn1")).flash is NKI_FLASH
    assert OpCosts.for_hardware(load_hardware("h100")).flash is FA2


@pytest.mark.parametrize("attention", ["flash", "materialised"])
def test_a_gpu_flash_kernel_runs_at_its_own_speed(attention):
    """A GPU's flash kernel at its published speed, not the GEMMs': at (1/2, 1/4) of the peak
    forward / backward its products (two forward, five backward with the recomputed score)
    cost 2x and 4x the peak's time; every other product, and the materialised path, stay."""
    m = load_model("llama3-8b")
    args = dict(dp=1, tp=8, pp=1, sp=True, recompute="none", global_batch=1, seq_len=1 << 15)
    args = laid(attention=attention, **args)
    peak = training_step(m, PeakCosts(), FreeNetwork(), **args)
    half_quarter = lambda length: (0.5, 0.25)  # noqa: E731 - at every length
    slow = training_step(m, PeakCosts(flash_efficiency=half_quarter), FreeNetwork(), **args)
    half = m.attention_flop_per_token(1 << 15) / 2 * (1 << 15) / 8 / 1e15  # one product
    extra = 2 * half * (2 - 1) + 5 * half * (4 - 1) if attention == "flash" else 0.0
    assert float(slow.step_s - peak.step_s) == pytest.approx(extra, rel=1e-9, abs=1e-12)
    assert float(slow.model_flop_per_step) == float(peak.model_flop_per_step)


def test_gpu_flash_speeds_are_the_published_ones_on_the_computed_tiles():
    """H100: FlashAttention-2 at 333 TFLOP/s forward at 8K (causal: half the square counted,
    0.508 computed) and 318 backward (not causal) of 989; at 512 tokens 191 and 214, between
    published lengths interpolated in log2, past 16K its 16K speed (335, 322); Trainium keeps
    its chip's kernel."""
    from tlm.costs import OpCosts
    from tlm.hardware import load_hardware

    speed = OpCosts.for_hardware(load_hardware("h100")).flash_efficiency
    fwd, bwd = speed(8192)
    assert fwd == pytest.approx(333 / 989 * 0.5 / causal_fraction(8192, 128, 64), rel=1e-12)
    assert bwd == pytest.approx(318 / 989, rel=1e-12)
    assert fwd < bwd * 1.1 < OpCosts.for_hardware(load_hardware("h100")).efficiency
    short = speed(512)
    assert short[0] == pytest.approx(191 / 989 * 0.5 / np.mean(FA2.fractions(512)[:2]))
    assert short[1] == pytest.approx(214 / 989)
    assert speed(1 << 17) == speed(16384) == pytest.approx(speed(1 << 20))
    assert speed(16384)[1] == pytest.approx(322 / 989)
    mid = speed(2**12.5)[1]  # halfway between 4K (310) and 8K (318) in log2
    assert mid == pytest.approx((310 + 318) / 2 / 989)
    f = np.asarray(speed(np.array([512, 1024, 4096, 16384]))[0])
    assert np.all(np.diff(f) > 0)  # faster with length, as every published bar
    a100 = OpCosts.for_hardware(load_hardware("a100")).flash_efficiency
    assert a100(8192)[0] == a100(8192)[1]  # fwd + bwd causal for both passes
    assert set(FA2_SPEED) == {"a100", "h100"}
    assert OpCosts.for_hardware(load_hardware("trn1")).flash_efficiency is None
    assert OpCosts.for_preset("trn2").flash_efficiency is None


def test_selective_recompute_is_the_attention_products_forward():
    m = load_model("gpt3-175b")
    args = dict(dp=1, tp=8, pp=1, sp=True, global_batch=8, attention="materialised")
    none = training_step(m, PeakCosts(), FreeNetwork(), **laid(recompute="none", **args))
    sel = training_step(m, PeakCosts(), FreeNetwork(), **laid(recompute="selective", **args))
    tokens = 8 * m.seq_len
    attention = m.attention_flop_per_token() * tokens / 8  # forward, per chip of 8
    assert float(sel.recompute_s) == pytest.approx(attention / 1e15, rel=1e-9)
    assert float(sel.compute_s) == pytest.approx(float(none.compute_s), rel=1e-12)


def test_flash_attention_leaves_selective_recomputation_nothing_to_do():
    """With flash attention the backward pass recomputes the score product already: selective
    recomputation adds no time and no hardware FLOPs, and stores what no recomputation does."""
    m = load_model("gpt3-175b")
    args = dict(dp=1, tp=8, pp=1, sp=True, global_batch=8, attention="flash")
    none = training_step(m, PeakCosts(), FreeNetwork(), **laid(recompute="none", **args))
    sel = training_step(m, PeakCosts(), FreeNetwork(), **laid(recompute="selective", **args))
    assert float(sel.recompute_s) == 0
    assert float(sel.step_s) == float(none.step_s)
    assert float(sel.hfu) == float(none.hfu)
    assert float(sel.memory.activations_bytes) == float(none.memory.activations_bytes)


@pytest.mark.parametrize("attention", ["flash", "materialised"])
def test_mlp_recomputation_reruns_the_mlp_up_to_its_last_projection(attention):
    """``selective+mlp`` reruns what selective recomputation does and the MLP's forward up to
    its last projection's input (SwiGLU's gate and up products), in time and in hardware
    FLOPs; with sequence parallelism its input's all-gather again (the reduce-scatter after
    the last projection is not rerun), without it no collective. Between selective and full."""
    m = load_model("llama3-8b")
    args = dict(dp=1, tp=8, pp=1, global_batch=8, attention=attention)
    tokens, peak = 8 * m.seq_len, 1e15
    mlp = m.mlp_rerun_flop_per_token() * tokens / 8  # per chip of 8
    assert mlp == pytest.approx(m.layers * 2 * m.hidden * 2 * m.ffn * tokens / 8, rel=1e-12)
    step = {
        r: training_step(m, PeakCosts(peak), RingNetwork(), **laid(recompute=r, sp=True, **args))
        for r in ("selective", "selective+mlp", "full")
    }
    sel, both, full = step["selective"], step["selective+mlp"], step["full"]
    assert float(both.recompute_s - sel.recompute_s) * peak == pytest.approx(mlp, rel=1e-9)
    assert float(both.hardware_flop_per_step - sel.hardware_flop_per_step) == pytest.approx(
        mlp * 8, rel=1e-9
    )
    assert float(sel.recompute_s) < float(both.recompute_s) < float(full.recompute_s)
    assert float(both.compute_s) == pytest.approx(float(sel.compute_s), rel=1e-12)
    hidden = m.seq_len * m.hidden * 2  # one sequence's hidden state, bf16
    gather = RingNetwork().collective_s("all_gather", 8, 1, hidden)
    assert float(both.tp_comm_s - sel.tp_comm_s) == pytest.approx(
        8 * m.layers * float(gather), rel=1e-9
    )  # 8 micro-batches, one all-gather a layer
    plain = {
        r: training_step(m, PeakCosts(peak), RingNetwork(), **laid(recompute=r, sp=False, **args))
        for r in ("selective", "selective+mlp")
    }
    assert float(plain["selective+mlp"].tp_comm_s) == float(plain["selective"].tp_comm_s)
    mem = [float(step[r].memory.total_bytes) for r in ("full", "selective+mlp", "selective")]
    assert mem == sorted(mem) and len(set(mem)) == 3


def test_mfu_says_how_it_counts_attention():
    """MFU counts attention over the whole square (the papers' convention); the causal MFU
    counts the keys at or before each query: at 131,072 tokens the square is most of Llama 3
    8B's FLOPs and the two differ by the attention's half."""
    m = load_model("llama3-8b")
    s = 131072
    step = training_step(
        m, PeakCosts(), FreeNetwork(), **laid(dp=1, tp=8, cp=16, pp=1, global_batch=1), seq_len=s
    )
    square = m.training_flop_per_token(s)
    causal = m.training_flop_per_token(s, causal=True)
    assert float(step.causal_mfu / step.mfu) == pytest.approx(causal / square, rel=1e-12)
    attention = 3 * m.attention_flop_per_token(s)
    assert attention / square > 0.5  # the square is most of the FLOPs at this length
    assert float(step.causal_mfu) < 0.75 * float(step.mfu)


def test_pipeline_bubble_and_interleave():
    """The bubble is (pp - 1) / v micro-batch times; interleaving divides it."""
    m = load_model("llama3-70b")
    args = dict(dp=4, tp=8, pp=8, zero=1, sp=True, recompute="selective", global_batch=256)
    plain = training_step(m, PeakCosts(), RingNetwork(), **laid(interleave=1, **args))
    inter = training_step(m, PeakCosts(), RingNetwork(), **laid(interleave=2, **args))
    for s, v in ((plain, 1), (inter, 2)):
        assert float(s.bubble_s) == pytest.approx(7 / v * float(s.micro_batch_s), rel=1e-12)
        assert float(s.micro_batches) == 256 / 4
    assert float(inter.bubble_s) < float(plain.bubble_s)
    assert float(inter.pp_comm_s) == pytest.approx(2 * float(plain.pp_comm_s), rel=1e-12)
    one = training_step(
        m, PeakCosts(), RingNetwork(), layout=Layout(dp=32, tp=8, pp=1), global_batch=256
    )
    assert float(one.bubble_s) == 0 and float(one.pp_comm_s) == 0


def test_pipeline_sends_across_sites_pay_the_site_link():
    """Four sites of 64 trn2 (an UltraServer each) joined at 100 GB/s and 2 ms, a pipeline
    of 16 stages of 16 chips: stages 4 apart share a site, and the boundaries between sites
    make every stage wait for the slowest send, so each send pays the site's latency; the
    same job on one site (its stages in four UltraServers) does not."""
    from tlm.cluster.network import Network
    from tlm.costs import OpCosts
    from tlm.hardware import load_hardware

    hw = load_hardware("trn2")
    m = load_model("llama3-70b")
    costs = OpCosts.for_preset("trn2")
    layout = dict(layout=Layout(dp=1, tp=16, pp=16), global_batch=64)
    one = training_step(m, costs, Network.for_hardware(hw), **layout)
    sites = Network.for_hardware(
        hw, sites=4, chips=256, site_bandwidth_Bps=100e9, site_latency_s=2e-3
    )
    four = training_step(m, costs, sites, **layout)
    sends = 2 * float(four.micro_batches)  # one forward and one backward per micro-batch
    assert float(four.pp_comm_s) - float(one.pp_comm_s) > sends * 2e-3
    assert float(four.step_s) > float(one.step_s)
    # the other parts do not cross a site: unchanged
    assert float(four.tp_comm_s) == float(one.tp_comm_s)
    assert float(four.compute_s) == float(one.compute_s)


def test_communication_parts_follow_the_groups():
    m = load_model("llama3-70b")
    base = dict(zero=1, sp=True, recompute="selective", global_batch=256)
    solo = training_step(m, PeakCosts(), RingNetwork(), **laid(dp=1, tp=1, pp=1, **base))
    assert all(
        float(getattr(solo, p)) == 0
        for p in ("tp_comm_s", "dp_comm_s", "pp_comm_s", "cp_comm_s", "ep_comm_s")
    )
    tp = training_step(m, PeakCosts(), RingNetwork(), **laid(dp=1, tp=8, pp=1, **base))
    assert float(tp.tp_comm_s) > 0 and float(tp.dp_comm_s) == 0
    dp = training_step(
        m, PeakCosts(), RingNetwork(), **laid(dp=8, tp=1, pp=1, overlap_dp=False, **base)
    )
    assert float(dp.dp_comm_s) > 0 and float(dp.tp_comm_s) == 0
    hidden = training_step(
        m, PeakCosts(), RingNetwork(), **laid(dp=8, tp=1, pp=1, overlap_dp=True, **base)
    )
    assert float(hidden.dp_comm_s) < float(dp.dp_comm_s)
    z3 = training_step(
        m,
        PeakCosts(),
        RingNetwork(),
        **laid(dp=8, tp=1, pp=1, overlap_dp=False, **{**base, "zero": 3}),
    )
    assert float(z3.dp_comm_s) > float(dp.dp_comm_s)  # weights gathered per micro-batch
    # context parallelism: Llama 3's all-gather of K and V, exposed (not behind attention):
    # the all-gather and the gradients' reduce-scatter per layer and micro-batch, whatever
    # the compute; none on a free network
    args = dict(dp=1, tp=8, cp=2, pp=1, **base)
    ring = RingNetwork()
    cp = training_step(m, PeakCosts(), ring, **laid(**args))
    kv = m.seq_len * (m.kv_heads // 8) * (m.head_dim + m.v_head_dim) * 2
    one = ring.collective_s("all_gather", 2, 8, kv, dtype_bytes=2)
    one += ring.collective_s("reduce_scatter", 2, 8, kv, dtype_bytes=2)
    n_mb = 256 // 1  # global batch over dp x micro-batch
    assert float(cp.cp_comm_s) == pytest.approx(n_mb * m.layers * float(one), rel=1e-9)
    free = training_step(m, PeakCosts(), FreeNetwork(), **laid(**args))
    assert float(free.cp_comm_s) == 0
    moe = load_model("deepseek-v3")
    ep = training_step(moe, PeakCosts(), RingNetwork(), **laid(dp=8, tp=1, pp=1, ep=8, **base))
    assert float(ep.ep_comm_s) > 0


def test_zero3_charges_a_micro_batch_window_once():
    """ZeRO-3 gathers the weights twice and reduce-scatters the gradients every micro-batch;
    overlapped, they hide behind that micro-batch's forward and backward - one window, so
    overlap saves at most the compute (it once hid the gradients behind the backward pass a
    second time)."""
    m = load_model("llama3-8b")
    args = dict(dp=8, tp=1, pp=1, zero=3, sp=False, recompute="none", global_batch=8)
    slow = RingNetwork(scale=1000.0)  # communication far longer than compute
    plain = training_step(m, PeakCosts(), slow, **laid(overlap_dp=False, **args))
    hidden = training_step(m, PeakCosts(), slow, **laid(overlap_dp=True, **args))
    params = float(plain.memory.weights_bytes) / 2 * 8  # the stage's weights, unsharded
    ag = float(slow.collective_s("all_gather", 8, 1, params * 2))
    rs = float(slow.collective_s("reduce_scatter", 8, 1, params * 2))
    assert float(plain.micro_batches) == 1
    assert float(plain.dp_comm_s) == pytest.approx(2 * ag + rs, rel=1e-9)
    saved = float(plain.dp_comm_s) - float(hidden.dp_comm_s)
    assert 0 < saved <= float(hidden.compute_s)


class HbmCosts(PeakCosts):
    """Exact-peak products, and HBM traffic at 1 TB/s."""

    def memory_s(self, nbytes):
        return np.asarray(nbytes, float) / 1e12


def test_fp32_gradient_accumulation_pays_its_pass_its_reduction_and_its_memory():
    """neuronx-distributed's fp32 accumulation adds each micro-batch's bf16 gradients into an
    fp32 buffer (2 + 4 bytes read, 4 written per parameter, a pass of its own) and
    reduce-scatters that buffer: twice the bytes of a bf16 reduction."""
    m = load_model("llama3-8b")
    args = dict(dp=8, tp=2, pp=1, zero=1, sp=True, recompute="selective", global_batch=32)
    net = RingNetwork()
    kw = dict(overlap_dp=False, hbm_bytes=2**40)
    bf16 = training_step(m, HbmCosts(), net, **laid(**args, **kw))
    fp32 = training_step(m, HbmCosts(), net, **laid(grad_acc="fp32", **args, **kw))
    params = float(bf16.memory.weights_bytes) / 2  # ZeRO-1: the stage's weights, whole
    n_micro = float(bf16.micro_batches)
    assert n_micro == 4
    added = float(fp32.compute_s) - float(bf16.compute_s)
    assert added == pytest.approx(n_micro * params * 10 / 1e12, rel=1e-9)
    rs = lambda nbytes: float(net.collective_s("reduce_scatter", 8, 2, nbytes))  # noqa: E731
    wider = float(fp32.dp_comm_s) - float(bf16.dp_comm_s)
    assert wider == pytest.approx(rs(params * 4) - rs(params * 2), rel=1e-9)
    assert float(fp32.memory.gradients_bytes) == pytest.approx(
        2 * float(bf16.memory.gradients_bytes), rel=1e-12
    )
    with pytest.raises(ValueError, match=r"^grad_acc must be one of bf16, fp32, not 'fp16'$"):
        training_step(m, HbmCosts(), net, **laid(grad_acc="fp16", **args))


def test_backward_overlap_hides_only_the_backward_pass_behind_weight_gradients():
    """``overlap_tp="backward"``: on a fast network the backward pass's collectives vanish and
    the forward's (and the recomputed forward's) stay, so a third (full recomputation) or half
    of the exposed time is left; on a slow one it saves at most the weight-gradient GEMMs (half
    the backward GEMMs), whether the collectives are all-gathers and reduce-scatters or
    all-reduces; it never hides more than ``on`` where both apply."""
    m = load_model("llama3-70b")
    for recompute, left in (("selective", 1 / 2), ("full", 2 / 3)):
        for sp in (True, False):
            args = dict(dp=1, tp=8, pp=1, sp=sp, recompute=recompute, global_batch=4)
            fast = RingNetwork(scale=1e-3)
            plain = training_step(m, PeakCosts(), fast, **laid(**args))
            back = training_step(m, PeakCosts(), fast, overlap_tp="backward", **laid(**args))
            assert float(back.tp_comm_s) == pytest.approx(left * float(plain.tp_comm_s), rel=1e-9)
            slow = RingNetwork(scale=1000.0)
            plain = training_step(m, PeakCosts(), slow, **laid(**args))
            back = training_step(m, PeakCosts(), slow, overlap_tp="backward", **laid(**args))
            saved = float(plain.tp_comm_s - back.tp_comm_s)
            assert 0 < saved <= 0.5 * float(plain.compute_s)  # within the backward's half
            if sp:
                on = training_step(m, PeakCosts(), slow, overlap_tp="on", **laid(**args))
                assert saved <= float(plain.tp_comm_s - on.tp_comm_s)


def test_overlap_schedules_hide_communication_behind_compute_once():
    """Tensor-parallel collectives overlapped with their GEMMs, and DualPipe's MoE all-to-alls
    behind another micro-batch: on a network 1,000x slow each saves at most the compute that
    hides it; on a fast one the overlapped part disappears; without a partner micro-batch
    DualPipe has nothing to hide behind."""
    m = load_model("llama3-70b")
    args = dict(dp=1, tp=8, pp=1, sp=True, recompute="selective", global_batch=4)
    for scale in (1000.0, 1e-6):
        net = RingNetwork(scale=scale)
        plain = training_step(m, PeakCosts(), net, **laid(**args))
        over = training_step(m, PeakCosts(), net, overlap_tp="on", **laid(**args))
        saved = float(plain.tp_comm_s - over.tp_comm_s)
        assert 0 < saved <= float(plain.compute_s + plain.recompute_s)
        if scale < 1:
            assert float(over.tp_comm_s) == 0
        assert float(over.compute_s) == float(plain.compute_s)
    # without sequence parallelism the all-reduces stay exposed
    ar = dict(args, sp=False)
    a = training_step(m, PeakCosts(), RingNetwork(), **laid(**ar))
    b = training_step(m, PeakCosts(), RingNetwork(), overlap_tp="on", **laid(**ar))
    assert float(a.tp_comm_s) == float(b.tp_comm_s) > 0

    # an unknown mode is refused, naming it
    with pytest.raises(ValueError, match="overlap_tp 'sideways' is not one of off, backward, on"):
        training_step(m, PeakCosts(), RingNetwork(), overlap_tp="sideways", **laid(**args))

    moe = load_model("deepseek-v3")
    slow = RingNetwork(scale=1000.0)
    base = dict(dp=8, tp=1, pp=1, ep=8, sp=False, recompute="full")
    for batch, partner in ((64, True), (8, False)):
        step = dict(global_batch=batch, **base)
        plain = training_step(moe, PeakCosts(), slow, **laid(**step))
        dual = training_step(moe, PeakCosts(), slow, overlap_ep=True, **laid(**step))
        saved = float(plain.ep_comm_s - dual.ep_comm_s)
        if partner:
            assert 0 < saved <= float(plain.compute_s + plain.recompute_s)
        else:
            assert saved == 0


def test_vectorised_equals_scalar():
    """Random valid layouts evaluated together give each one's own figures."""
    rng = np.random.default_rng(SEED)
    print(f"SEED={SEED}")
    m = load_model("llama3-70b")
    n = 40
    cfg = dict(
        dp=rng.choice([1, 2, 4, 8], n),
        tp=rng.choice([1, 2, 4, 8], n),
        pp=rng.choice([1, 2, 4, 5], n),
        cp=rng.choice([1, 2], n),
        zero=rng.integers(0, 4, n),
        micro_batch=rng.choice([1, 2], n),
        recompute=rng.integers(0, len(RECOMPUTE), n),
        sp=rng.random(n) < 0.5,
        overlap_dp=rng.random(n) < 0.5,
    )
    many = training_step(
        m, PeakCosts(), RingNetwork(), **laid(global_batch=64, hbm_bytes=96 * 2**30, **cfg)
    )
    for i in range(n):
        one = training_step(
            m,
            PeakCosts(),
            RingNetwork(),
            **laid(
                global_batch=64, hbm_bytes=96 * 2**30, **{k: v[i].item() for k, v in cfg.items()}
            ),
        )
        for p in (*PARTS, "step"):
            assert float(getattr(many, p + "_s")[i]) == pytest.approx(
                float(getattr(one, p + "_s")), rel=1e-12, abs=1e-15
            ), (i, p)
        assert bool(many.memory.fits[i]) == bool(one.memory.fits)


def _figures(step) -> dict:
    """Every per-configuration array of a step and of its memory, by name (the reason as its
    message: a code indexes its own call's messages)."""
    out = {f: getattr(step, f) for f in step.__dataclass_fields__}
    out.update({"memory." + f: getattr(step.memory, f) for f in step.memory.__dataclass_fields__})
    messages = np.array(step.memory.reasons, dtype=object)
    out["memory.reason"] = np.asarray(messages[step.memory.reason], dtype=object)
    return {k: v for k, v in out.items() if isinstance(v, np.ndarray)}


@pytest.mark.parametrize("name", ["llama3-405b", "deepseek-v3"])
def test_one_configuration_is_the_vectorised_row_bit_for_bit(name):
    """A single estimate runs the same formulas on Python numbers instead of arrays: through
    the real operator costs and network, every figure of one configuration - given as scalars
    or as arrays of one - equals its row of the vectorised call exactly (same dtype; invalid
    rows NaN in both, and the scalar call raises the row's reason)."""
    from tlm.cluster.search import engines
    from tlm.hardware import load_hardware

    rng = np.random.default_rng(SEED)
    print(f"SEED={SEED}")
    hw = load_hardware("trn2")
    costs, network = engines(hw)
    m = load_model(name)
    n = 60
    cfg = dict(
        dp=rng.choice([1, 8, 64, 512, 3], n),
        tp=rng.choice([1, 4, 16, 64], n),
        pp=rng.choice([1, 2, 8, 16, 5], n),
        cp=rng.choice([1, 2, 4], n),
        ep=rng.choice([1, 8, 32], n) if m.moe else np.ones(n, dtype=np.int64),
        zero=rng.integers(0, 4, n),
        micro_batch=rng.choice([1, 2], n),
        sp=rng.random(n) < 0.5,
        recompute=rng.integers(0, len(RECOMPUTE), n),
        interleave=rng.choice([1, 2], n),
        overlap_dp=rng.random(n) < 0.5,
    )
    many = _figures(training_step(m, costs, network, **laid(hbm_bytes=hw.hbm_bytes, **cfg)))
    valid = 0
    for i in range(n):
        rows = _figures(
            training_step(
                m,
                costs,
                network,
                **laid(hbm_bytes=hw.hbm_bytes, **{k: v[i : i + 1] for k, v in cfg.items()}),
            )
        )
        one = {k: v[i].item() for k, v in cfg.items()}
        reason = str(many["memory.reason"][i])
        if reason:
            with pytest.raises(ValueError) as info:
                training_step(m, costs, network, **laid(hbm_bytes=hw.hbm_bytes, **one))
            assert str(info.value) == reason
            scalars = None
        else:
            valid += 1
            scalars = _figures(
                training_step(m, costs, network, **laid(hbm_bytes=hw.hbm_bytes, **one))
            )
        for key, column in many.items():
            assert rows[key].shape == (1,), key
            assert rows[key].dtype == column.dtype, key
            np.testing.assert_array_equal(rows[key][0], column[i], err_msg=f"{key} row {i}")
            if scalars is not None:
                assert scalars[key].shape == () and scalars[key].dtype == column.dtype, key
                np.testing.assert_array_equal(scalars[key], column[i], err_msg=f"{key} {i}")
    assert valid >= 10


def test_invalid_rows_are_nan_and_scalars_raise():
    m = load_model("llama3-8b")
    many = training_step(
        m, PeakCosts(), FreeNetwork(), layout=Layout(tp=np.array([8, 3])), global_batch=8
    )
    assert np.isfinite(many.step_s[0]) and np.isnan(many.step_s[1])
    assert not bool(many.valid[1])
    with pytest.raises(ValueError, match="tp must be a divisor of the 32 heads"):
        training_step(m, PeakCosts(), FreeNetwork(), layout=Layout(tp=3))


def test_more_data_parallel_chips_shorten_the_step():
    m = load_model("llama3-8b")
    steps = training_step(
        m,
        PeakCosts(),
        RingNetwork(),
        layout=Layout(dp=np.array([1, 2, 4, 8]), tp=8),
        global_batch=64,
    )
    assert np.all(np.diff(steps.step_s) < 0)
