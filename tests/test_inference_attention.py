"""Inference prices attention by the flash kernel's one definition training reads
(tlm.costs.attention.flash_forward_s): causal tiles in a prompt, every tile in a decode step."""

import numpy as np
import pytest

from tlm.cluster import training
from tlm.costs.attention import flash_forward_s
from tlm.inference.step import ATTENTION_KEY_BLOCK, ATTENTION_ROWS_MAX, Engine


def _engine(hw, tp):
    return Engine.build("llama3.3-70b", hw, "server", tp=tp)


def test_a_prompt_costs_what_the_training_step_prices_for_its_attention():
    e = _engine("h100", 8)  # a GPU: FlashAttention-2 at its published speed
    n = 8192
    compute, _, softmax, _ = e._attention(n, 1, n, n * (n + 1) / 2)
    classes = np.array([[8, 1, 1, 1]])
    step = training._layer_times(e.model, e.costs, "dense", classes, n, "bf16", "bf16", "flash")
    assert float(compute + softmax) == pytest.approx(float(step["attn_fwd"][0]), rel=1e-12)


@pytest.mark.parametrize("hw,tp", [("h100", 8), ("trn2", 16)])
def test_a_prompt_reads_the_shared_kernel_definition(hw, tp):
    e, n = _engine(hw, tp), 4096
    compute, *_ = e._attention(2048, 1, n, 2048 * (n - 2048) + 2048 * 2049 / 2)
    score, context = flash_forward_s(
        e.costs, e.a_l, 2048, ATTENTION_KEY_BLOCK, e.dqk, e.dv, group=e.group
    )
    f_score, f_context, _ = e.costs.flash.fractions(2048, n)
    expected = (score * f_score + context * f_context) * n / ATTENTION_KEY_BLOCK
    speed = e.costs.flash_efficiency  # a GPU's kernel at its speed at n keys, not the block's
    if speed is not None:
        expected *= speed(ATTENTION_KEY_BLOCK)[0] / speed(n)[0]
        direct = flash_forward_s(e.costs, e.a_l, 2048, n, e.dqk, e.dv, group=e.group)
        assert float(compute) == pytest.approx(
            float(direct[0] * f_score + direct[1] * f_context), rel=1e-9
        )
    assert float(compute) == pytest.approx(float(expected), rel=1e-9)


@pytest.mark.parametrize("hw,tp", [("h100", 8), ("trn2", 16)])
def test_a_causal_prompt_costs_less_than_the_full_square(hw, tp):
    e = _engine(hw, tp)
    i = ATTENTION_ROWS_MAX - 1  # long prompts: the table's last row
    for n in (8192, 32768):
        causal, *_ = e._attention(n, 1, n, n * (n + 1) / 2)
        square = (e.score_per_pair[i] + e.context_per_pair[i]) * float(n) * n  # no mask
        assert 0.5 * square < causal < 0.7 * square


@pytest.mark.parametrize("hw,tp", [("h100", 8), ("trn2", 16)])
def test_a_decode_step_computes_every_tile(hw, tp):
    e = _engine(hw, tp)
    keys = np.array([100.0, 2048.0, 32768.0])
    compute, *_ = e._attention(np.ones(3) * 64, np.ones(3) * 64, keys * 64, keys * 64)
    score, context = flash_forward_s(
        e.costs, e.a_l, 1, ATTENTION_KEY_BLOCK, e.dqk, e.dv, group=e.group
    )
    per_pair = (score + context) / ATTENTION_KEY_BLOCK
    speed = e.costs.flash_efficiency  # a GPU's kernel at its published speed at the keys
    at = 1.0 if speed is None else speed(ATTENTION_KEY_BLOCK)[0] / speed(keys)[0]
    assert compute == pytest.approx(per_pair * keys * 64 * at, rel=1e-12)
