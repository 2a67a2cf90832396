"""Shape buckets (tlm/inference/buckets.py): NxD Inference's generated lengths, the padding of a
prompt and of a decode step, in the estimate and in the serving simulation alike."""

from math import log2

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tlm.inference import Engine, InferenceInputError, ShapeBuckets, estimate
from tlm.inference.buckets import autobuckets, stack_buckets
from tlm.inference.serving import (
    ClosedLoop,
    Colocated,
    Disaggregated,
    Scheduler,
    Trace,
    Workload,
    simulate,
)
from tlm.studies.cli import main


def nxd_generate_buckets(min_length: int, max_length: int) -> list[int]:
    """NxD Inference's ``generate_buckets`` as its source states it (modules/autobucketing.py):
    the reference the model's :func:`autobuckets` is held to."""
    if min_length == max_length:
        return [max_length]
    return [2**i for i in range(int(log2(min_length)), round(log2(max_length)))] + [max_length]


@settings(max_examples=300, derandomize=True)
@given(st.integers(min_value=129, max_value=1 << 20))
def test_autobuckets_are_nxds(maximum):
    assert list(autobuckets(maximum)) == nxd_generate_buckets(128, maximum)


def test_autobuckets_by_hand():
    assert autobuckets(128) == (128,) and autobuckets(100) == (100,)
    assert autobuckets(2304) == (128, 256, 512, 1024, 2304)  # round(log2 2304) = 11
    assert autobuckets(12800) == (128, 256, 512, 1024, 2048, 4096, 8192, 12800)
    assert autobuckets(11500) == (128, 256, 512, 1024, 2048, 4096, 11500)  # log2 = 13.49


def test_padding_picks_the_smallest_bucket_that_holds_it():
    b = ShapeBuckets((2048, 4096, 8192, 12288), (2048, 4096, 8192, 12800))
    assert b.padded_context(np.array([1, 2048, 2049, 10000])).tolist() == [2048, 2048, 4096, 12288]
    assert int(b.padded_token(10001)) == 12800
    assert ShapeBuckets().padded_token(777) == 777  # no buckets: the length itself
    with pytest.raises(InferenceInputError, match="context_buckets must be buckets up to at"):
        b.padded_context(12289)


@pytest.mark.parametrize(
    "kw, field",
    [
        (dict(context=(0, 4)), "context_buckets"),
        (dict(token=(4096, 2048)), "token_buckets"),
        (dict(token=(2048, 2048)), "token_buckets"),
        (dict(context=(1.5,)), "context_buckets"),
    ],
)
def test_bad_buckets_name_their_field(kw, field):
    with pytest.raises(InferenceInputError) as error:
        ShapeBuckets(**kw)
    assert error.value.field == field


def test_the_stacks():
    """Trainium runs NxD Inference's buckets, the GPUs none (fixed_costs.toml, sourced)."""
    for hw in ("trn1", "trn2", "trn3"):
        assert stack_buckets(hw) == ("nxd", "NXDI")
    for hw in ("h100", "a100", "someone-elses"):
        assert stack_buckets(hw)[0] == "none"
    assert estimate("llama3-8b", "h100", "server", tp=1).buckets == ShapeBuckets()


def test_a_request_of_one_token_has_no_decode_to_pad():
    """Found by the fuzz from outside: ``--output 1`` (no decode step) with NxD's buckets."""
    e = estimate("llama3-8b", "trn2", "server", tp=4, output=1)
    assert e.tpot_s == 0 and e.decode.time_s == 0 and e.ttft_s > 0


def test_an_estimate_pays_its_buckets():
    """A 3,000-token prompt in a 4,096 bucket is encoded as 4,096 tokens: the prefill is the
    engine's step of the bucket; the decode reads the 8,192 bucket's keys; the model FLOPs
    are the unpadded ones either way."""
    kw = dict(tp=4, prompt=3000, output=65)
    b = ShapeBuckets((1024, 4096), (8192,))
    padded = estimate("llama3-8b", "trn2", "server", **kw, buckets=b)
    bare = estimate("llama3-8b", "trn2", "server", **kw, buckets=ShapeBuckets())
    e = padded.engine
    prefill = float(e.step(4096, 1, 4096, 4096 * 4097 / 2).time_s)
    assert padded.prefill.time_s == pytest.approx(prefill, rel=1e-12)
    assert padded.tpot_s == pytest.approx(float(e.step(1, 1, 8192, 8192).time_s), rel=1e-12)
    assert padded.prefill.flop == bare.prefill.flop and padded.decode.flop == bare.decode.flop
    assert padded.ttft_s > bare.ttft_s and padded.tpot_s > bare.tpot_s
    assert padded.prefill.mfu_fraction < bare.prefill.mfu_fraction


def test_each_phase_pads_on_its_own_buckets():
    """Context buckets alone move the prefill only; token buckets alone the decode only (a
    speculative decode included)."""
    kw = dict(tp=4, prompt=1000, output=101, draft_model="llama3.2-1b")
    bare = estimate("llama3-8b", "trn2", "server", **kw, buckets=ShapeBuckets())
    ctx = estimate("llama3-8b", "trn2", "server", **kw, buckets=ShapeBuckets((1024,), ()))
    tok = estimate("llama3-8b", "trn2", "server", **kw, buckets=ShapeBuckets((), (2048,)))
    assert ctx.tpot_s == bare.tpot_s and ctx.ttft_s > bare.ttft_s
    assert tok.ttft_s > bare.ttft_s  # the draft's first proposals read padded keys
    assert tok.tpot_s > bare.tpot_s
    plain = dict(tp=4, prompt=1000, output=101)
    bare = estimate("llama3-8b", "trn2", "server", **plain, buckets=ShapeBuckets())
    tok = estimate("llama3-8b", "trn2", "server", **plain, buckets=ShapeBuckets((), (2048,)))
    assert tok.ttft_s == bare.ttft_s and tok.tpot_s > bare.tpot_s


def test_the_simulation_pads_as_the_estimate():
    """One client at a time on NxD's buckets: the serving simulation's TTFT and TPOT are the
    estimate's (the same padding of the prompt and of every decode step)."""
    kw = dict(tp=4, fmt="bf16")
    engine = Engine.build("llama3-8b", "trn2", "server", **kw, max_tokens=4096)
    b = ShapeBuckets((1024, 4096), (4096, 8192))
    load = ClosedLoop(concurrency=1, requests=2, workload=Workload(3000, 2000))
    for prefill in ("chunked", "separate"):
        scheduler = Scheduler(1, 4096, prefill, "greedy", b.context, b.token)
        run = simulate(Colocated(engine), load, scheduler)
        e = estimate("llama3-8b", "trn2", "server", **kw, prompt=3000, output=2000, buckets=b)
        assert run.ttft_s.mean == pytest.approx(e.ttft_s, rel=1e-9), prefill
        assert run.tpot_s.mean == pytest.approx(e.tpot_s, rel=1e-9), prefill


class _Recorder:
    """An engine that records the iterations it is asked to price."""

    chips, kv_capacity_tokens, block_tokens = 1, 1 << 20, 16

    def __init__(self):
        self.calls = []

    def iteration_s(self, tokens, sequences, kv_tokens, pairs):
        self.calls.append((tokens, sequences, kv_tokens, pairs))
        return 0.01


def test_a_batch_reads_the_bucket_of_its_longest():
    """Two clients, prompts 100 and 1,000 tokens: once both decode, each iteration reads two
    sequences' worth of the bucket holding the longer one (one graph for the batch); the
    prompts are encoded at their context buckets."""
    engine = _Recorder()
    load = ClosedLoop(2, 2, Workload("uniform:100:1000", 8, seed=3))
    scheduler = Scheduler(2, 4096, "separate", "greedy", (128, 1024), (512, 2048))
    drawn = load.draw().prompt.tolist()
    simulate(Colocated(engine), load, scheduler)
    prefills = sorted(c[0] for c in engine.calls if c[1] == 1 and c[0] > 1)
    assert prefills == sorted(128 if p <= 128 else 1024 for p in drawn)
    both = [c for c in engine.calls if c[:2] == (2, 2)]
    longest = max(drawn) + 1
    assert both and all(c[2] == c[3] == 2 * (512 if longest <= 512 else 2048) for c in both)


@pytest.mark.parametrize("token", [(), (2048,)])
def test_sequences_moved_in_read_their_own_keys_without_buckets(token, tmp_path):
    """Disaggregated, the decode pool admits sequences whose KV moved in: without token
    buckets each reads its own context's keys (the sum), with them the batch's bucket each."""
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt,output\n0,100,40\n0,1000,40\n")
    engine = _Recorder()
    fleet = Disaggregated(engine, 1, 1, lambda tokens: 1e-3)
    simulate(fleet, Trace(str(trace)), Scheduler(2, 4096, "separate", "greedy", (), token))
    both = [c for c in engine.calls if c[:2] == (2, 2)]
    assert both
    for _, _, kv, pairs in both:
        assert kv == pairs
        if token:
            assert kv == 2 * 2048
        else:
            assert 1102 <= kv <= 1100 + 2 * 41  # the two contexts + 1 each, not 2 x the longest


def test_scheduler_bucket_specs():
    s = Scheduler(context_buckets=[128, 256], token_buckets="nxd")
    assert s.context_buckets == (128, 256) and s.token_buckets == "nxd"
    with pytest.raises(InferenceInputError, match="token_buckets must be one of nxd, none"):
        Scheduler(token_buckets="bad")


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--context-buckets", "2048,4096"], "--context-buckets"),
        (["--token-buckets", "4096,2048"], "--token-buckets"),
        (["--token-buckets", "sometimes"], "--token-buckets"),
    ],
)
def test_bad_buckets_on_the_front_door(argv, flag, capsys):
    args = ["infer", "--model", "llama3-8b", "--hardware", "trn2", "--tp", "4"]
    assert main([*args, "--prompt", "10000", "--output", "16", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0], err
