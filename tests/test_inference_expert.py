"""Expert parallelism with data-parallel attention (tlm.inference.expert): the weights and KV
per chip against the model's counts, the dispatch and combine against Network's all-to-all,
the attention groups' share of the batch, the experts' load, the layout's checks, the fast
path, and the study's flags."""

import random

import numpy as np
import pytest

from tlm.hardware import load_hardware
from tlm.inference import Engine, InferenceInputError, estimate
from tlm.inference.layout import network_for
from tlm.workloads import load_model

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

FREE = {
    "step_fixed_s": 0.0,
    "collective_fixed_s": 0.0,
    "collective_bandwidth_factor": 1.0,
    "request_fixed_s": 0.0,
}


def test_weights_per_chip_are_its_experts_and_a_groups_share_of_the_rest():
    """Mixtral at tp 2, ep 8 (4 groups): a chip holds 1 whole expert per layer and half of
    everything else (attention, router and norms replicated, embedding and head by vocab)."""
    m = load_model("mixtral-8x7b")
    e = Engine.build(m, "trn2", "server", tp=2, ep=8, dp_attention=True)
    assert e.dp_attention
    assert (e.chips, e.dp, e.local_experts) == (8, 4, 1)
    expert = m.ffn_parameters(m.moe.expert_ffn)  # one SwiGLU expert
    experts = m.layers * m.moe.experts * expert
    replicated = m.layers * (2 * m.norm_parameters() + m.router_parameters()) + m.norm_parameters()
    rest = m.parameters - experts - replicated
    expected = 2 * (m.layers * expert + rest / 2 + replicated)  # bf16
    assert e.memory.weights_bytes == pytest.approx(expected, rel=1e-12)


def test_the_kv_cache_of_a_sequence_lives_in_its_group():
    """Per replica token, a chip holds 1/dp of what a tp-way engine's chip holds."""
    m = load_model("mixtral-8x7b")
    tp = Engine.build(m, "trn2", "server", tp=2, ep=2)
    dp = Engine.build(m, "trn2", "server", tp=2, ep=8, dp_attention=True)
    assert dp.memory.kv_per_token_bytes == pytest.approx(tp.memory.kv_per_token_bytes / 4)
    assert dp.kv_capacity_tokens > 3 * tp.kv_capacity_tokens


def test_dispatch_and_combine_are_the_networks_all_to_alls():
    """tp 1 (no all-reduce, no logits' gather): the communication is two all-to-alls per MoE
    layer of tokens / ep x top_k x hidden x 2 B per chip among the ep chips."""
    hw = load_hardware("trn2")
    for name, system, ep in (("mixtral-8x7b", "server", 8), ("deepseek-v3", "ultraserver", 64)):
        m = load_model(name)
        e = Engine.build(m, hw, system, tp=1, ep=ep, dp_attention=True, fmt="fp8", **FREE)
        net = network_for(hw, system)
        T = 1024
        nbytes = T / ep * m.moe.top_k * m.moe.capacity_factor * m.hidden * 2
        a2a = float(net.collective_s("all_to_all", ep, 1, nbytes, dtype_bytes=2))
        got = float(e.step(T, T, T * 100, T * 100).communication_s)
        assert got == pytest.approx(2 * m.moe_layers * a2a, rel=1e-12), name
    # and each call pays the collective fixed cost
    m = load_model("mixtral-8x7b")
    paid = Engine.build(m, hw, "server", tp=1, ep=8, dp_attention=True, **FREE)
    fixed = Engine.build(
        m, hw, "server", tp=1, ep=8, dp_attention=True, **{**FREE, "collective_fixed_s": 1e-5}
    )
    diff = float(fixed.step(64, 64, 640, 640).time_s - paid.step(64, 64, 640, 640).time_s)
    assert diff == pytest.approx(1e-5 * 2 * m.moe_layers)


def test_a_group_attends_its_share_of_the_batch():
    """dp groups of tp chips: a chip's attention for dp x the iteration is a tp-way engine's
    for the iteration (the same products, bytes and softmax)."""
    m = load_model("mixtral-8x7b")
    tp = Engine.build(m, "trn2", "server", tp=2, ep=2, **FREE)
    dp = Engine.build(m, "trn2", "server", tp=2, ep=8, dp_attention=True, **FREE)
    T, S, KV, P = (np.array([x]) for x in (64.0, 64.0, 64 * 4096.0, 64 * 4096.0))
    ours, theirs = dp._attention(4 * T, 4 * S, 4 * KV, 4 * P), tp._attention(T, S, KV, P)
    for a, b in zip(ours, theirs, strict=True):
        assert float(a[0]) == pytest.approx(float(b[0]), rel=1e-12)


def test_the_experts_see_every_groups_tokens():
    """A chip's experts are active as for all the stage's tokens: E/ep (1 - (1 - k/E)^T)."""
    m = load_model("deepseek-v3")
    e = Engine.build(m, "trn2", "ultraserver", tp=4, ep=64, dp_attention=True, fmt="fp8")
    x = m.moe
    for T in (16, 256, 4096):
        g = e.gemm_times([T / e.dp])  # a group's tokens
        i = g["names"].index("expert_gate_up")
        active = 4 * (1 - (1 - x.top_k / x.experts) ** T)
        per_expert = x.top_k * T / x.experts / (1 - (1 - x.top_k / x.experts) ** T)
        expected = active * float(e.costs.gemm_s(per_expert, 2 * x.expert_ffn, m.hidden, fmt="fp8"))
        assert g["gemm_s"][i, 0] * active == pytest.approx(expected, rel=1e-12)
        assert g["flop"][i, 0] == pytest.approx(
            2 * T * x.top_k / 64 * 2 * x.expert_ffn * m.hidden, rel=1e-12
        )


def test_fast_path_equals_the_full_path():
    seed = random.randrange(2**32)
    print("seed", seed)
    rng = np.random.default_rng(seed)
    e = Engine.build("deepseek-v3", "trn2", "ultraserver", tp=8, ep=32, dp_attention=True)
    for _ in range(100):
        T = int(rng.integers(1, 5000))
        S = int(rng.integers(1, T + 1))
        KV, P = float(rng.integers(0, 10**6)), float(rng.integers(0, 10**8))
        assert e.iteration_s(T, S, KV, P) == pytest.approx(float(e.step(T, S, KV, P).time_s))


def test_the_estimate_shares_the_batch_over_the_groups():
    r = estimate(
        "deepseek-v3", "trn2", "ultraserver", tp=4, ep=64, dp_attention=True, batch=64,
        prompt=1024, output=16, fmt="fp8", kv_fmt="fp8",
    )  # fmt: skip
    assert (r.chips, r.attention_groups, r.micro_batches) == (64, 16, 1)
    assert r.memory["fits"] and r.tokens_per_s_per_chip == pytest.approx(r.tokens_per_s / 64)


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: Engine.build("llama3-8b", "trn2", tp=4, ep=8, dp_attention=True),
            "dp_attention must be False for llama3-8b (a dense model: no experts to spread), "
            "not True",
        ),
        (
            lambda: Engine.build("mixtral-8x7b", "trn2", tp=4, ep=6, dp_attention=True),
            "ep must be a multiple of tp (4) dividing the 8 experts with dp_attention, not 6",
        ),
        (
            lambda: Engine.build("mixtral-8x7b", "trn2", tp=4, ep=16, dp_attention=True),
            "ep must be a multiple of tp (4) dividing the 8 experts with dp_attention, not 16",
        ),
        (
            lambda: Engine.build(
                "deepseek-v3", "trn2", "server", tp=4, ep=32, dp_attention=True, fmt="fp8"
            ),
            "ep must be such that ep x pp divides the system's 16 chips with dp_attention "
            "(pp 1), not 32",
        ),
        (
            lambda: Engine.build("mixtral-8x7b", "trn2", tp=4, ep=8, dp_attention="yes"),
            "dp_attention must be True or False, not 'yes'",
        ),
        (
            lambda: estimate("mixtral-8x7b", "trn2", tp=2, ep=8, dp_attention=True, batch=6),
            "batch must be a multiple of the 4 attention groups (ep / tp) with dp_attention, not 6",
        ),
        (
            lambda: estimate(
                "mixtral-8x7b",
                "trn2",
                tp=2,
                ep=8,
                dp_attention=True,
                batch=4,
                draft_model="llama3-8b",
            ),  # fmt: skip
            "draft_model must be None with dp_attention (speculative decoding with "
            "data-parallel attention is not modelled), not 'llama3-8b'",
        ),
    ],
)
def test_bad_layouts_are_named(call, message):
    with pytest.raises(InferenceInputError) as error:
        call()
    assert str(error.value) == message


@pytest.mark.parametrize(
    "args, message",
    [
        (["--ep", "3"], "--ep: 3 is not allowed; allowed: a multiple of tp (4) dividing the 8"),
        (["--ep", "8", "--batch", "3"], "--batch: 3 is not allowed; allowed: a multiple of the 2"),
        (["--ep", "16"], "--ep: 16 is not allowed; allowed: a multiple of tp (4) dividing the 8"),
        (["--model", "llama3-8b"], "--dp-attention: True is not allowed; allowed: False for"),
        (
            ["--model", "deepseek-v3", "--ep", "32"],
            "--ep: 32 is not allowed; allowed: such that ep x pp divides the system's 16 chips",
        ),
    ],
)
def test_the_study_names_the_flag(args, message, capsys):
    from tlm.studies.cli import main

    base = ["infer", "--model", "mixtral-8x7b", "--tp", "4", "--dp-attention"]
    assert main([*base, *args]) == 2
    assert message in capsys.readouterr().err


def test_the_study_runs_the_layout():
    from tlm.studies import run_study

    r = run_study(
        "infer", model="mixtral-8x7b", tp=4, ep=8, dp_attention=True, batch=8, prompt=256,
        output=8,
    ).results  # fmt: skip
    assert (r.chips, r.attention_groups) == (8, 2) and r.fits


def test_the_two_expert_layouts_of_one_shape_keep_their_own_parts():
    """tp 8, ep 8 exists in both layouts (one attention group): the engines share no memo of
    parts, so each gives its own figures whichever was built first in the process."""
    from tlm.inference import step

    args = dict(tp=8, ep=8, batch=8, prompt=256, output=8)

    def both(first_dp: bool):
        step._parts_memo.cache_clear()
        step._built.cache_clear()
        out = {}
        for dp in (first_dp, not first_dp):
            out[dp] = estimate("mixtral-8x7b", "trn2", "server", dp_attention=dp, **args)
        return out

    a, b = both(True), both(False)
    assert a[True].tpot_s == b[True].tpot_s and a[False].tpot_s == b[False].tpot_s
    assert a[True].tpot_s != a[False].tpot_s


# ---- docs/inference.md's tables are the model's ---------------------------------------------
_TABLES = [
    ("**DeepSeek-V3 on a trn2 UltraServer**", "deepseek-v3", "ultraserver", "fp8_e4m3", 3),
    ("**Mixtral 8x7B on a trn2 server**", "mixtral-8x7b", "server", "bf16", 2),
]


@pytest.mark.parametrize("title, model, system, fmt, first", _TABLES, ids=["dsv3", "mixtral"])
def test_docs_expert_tables_follow_the_model(title, model, system, fmt, first):
    """Each row of docs/inference.md's expert-layout tables, recomputed: TTFT, TPOT,
    tokens/s/chip, decode tokens/s, decode communication and max batch, as printed."""
    import re
    from pathlib import Path

    text = (Path(__file__).parents[1] / "docs" / "inference.md").read_text()
    start = text.index(title)
    block = text[start : text.index("\n\n", text.index("|---", start))]
    rows = [r for r in block.splitlines() if r.startswith("| tp")]
    assert len(rows) >= 7
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        m = re.match(r"tp (\d+), ep (\d+)(, dp attention)?", cells[0])
        e = estimate(
            model,
            "trn2",
            system,
            tp=int(m[1]),
            ep=int(m[2]),
            dp_attention=bool(m[3]),
            batch=int(cells[1]),
            prompt=2048,
            output=256,
            fmt=fmt,
            kv_fmt=fmt,
            check_memory=False,
        )
        d = e.decode
        got = [
            f"{e.ttft_s * 1e3:.0f}",
            f"{e.tpot_s * 1e3:.1f}",
            f"{e.tokens_per_s_per_chip:.1f}",
            f"{e.decode_tokens_per_s:.0f}",
            f"{d.communication_s / d.time_s:.0%}",
        ]
        assert got == cells[first : first + 5], row
        assert str(e.max_batch) == cells[-1], row
