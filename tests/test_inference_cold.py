"""The inference model's figures against golden ones, and the work a new layout costs.

``tests/data/inference_golden.json`` holds every figure of :func:`tlm.inference.estimate` on
:data:`LAYOUTS` and of :meth:`Engine.step` / :meth:`Engine.iteration_s` on :data:`ENGINES`, at
pinned fixed costs (:data:`GOLDEN_FIXED`), so the test checks how figures are computed, not the
validation's latest fit. Floats match within :data:`golden.REL` (numpy's SIMD loops change last
bits from one CPU to the next); a change that moves a figure rewrites the file with
``python tests/test_inference_cold.py --write`` and says why in its commit.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from golden import assert_matches

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

FREE = {
    "step_fixed_s": 0.0,
    "collective_fixed_s": 0.0,
    "collective_bandwidth_factor": 1.0,
    "request_fixed_s": 0.0,
}
GOLDEN = Path(__file__).with_name("data") / "inference_golden.json"
#: Fixed costs the golden figures are computed at, pinned: the test checks how figures are
#: computed, not the validation's latest fit (no per-request cost).
GOLDEN_FIXED = {
    "trn2": dict(
        step_fixed_s=3.19e-3,
        collective_fixed_s=3.07e-5,
        collective_bandwidth_factor=1.0,  # Trainium: the DMA queues instead
        request_fixed_s=0.0,
    ),
    "h100": dict(
        step_fixed_s=2.50e-3,
        collective_fixed_s=4.04e-5,
        collective_bandwidth_factor=0.29,
        request_fixed_s=0.0,
    ),
}


def _pinned(args: dict, estimate: bool) -> dict:
    """``args`` at the golden fixed costs (unless they give their own); a pipeline runs as one
    batch (``micro_batches=1``) unless the layout says otherwise."""
    a = GOLDEN_FIXED[args["hardware"]] | dict(args)
    if estimate and a.get("pp", 1) > 1:
        a.setdefault("micro_batches", 1)
    return a


#: (name, estimate's arguments): dense and MoE models, trn2 server / UltraServer / servers
#: over EFA, H100, both formats and KV formats, pipeline and expert parallelism, a draft
#: model, the fixed costs given.
LAYOUTS = {
    "405b-server-tp16": dict(model="llama3.1-405b", hardware="trn2", system="server", tp=16),
    "405b-server-tp16-fp8": dict(
        model="llama3.1-405b", hardware="trn2", system="server", tp=16, fmt="fp8"
    ),
    "405b-server-tp16-kvfp8-b8": dict(
        model="llama3.1-405b", hardware="trn2", system="server", tp=16, kv_fmt="fp8", batch=8
    ),
    "405b-2xserver-tp16-pp2": dict(
        model="llama3.1-405b", hardware="trn2", system="2xserver", tp=16, pp=2
    ),
    "405b-4xserver-tp64": dict(
        model="llama3.1-405b", hardware="trn2", system="4xserver", tp=64, prompt=512
    ),
    "405b-2xultra-tp64-pp2": dict(
        model="llama3.1-405b", hardware="trn2", system="2xultraserver", tp=64, pp=2, batch=4
    ),
    "405b-server-tp16-draft": dict(
        model="llama3.1-405b",
        hardware="trn2",
        system="server",
        tp=16,
        draft_model="llama3-8b",
        draft_tokens=4,
        acceptance=0.8,
    ),
    "70b-ultra-tp64-long": dict(
        model="llama3.3-70b",
        hardware="trn2",
        system="ultraserver",
        tp=64,
        prompt=10000,
        output=1500,
    ),
    "70b-ultra-tp16": dict(model="llama3.3-70b", hardware="trn2", system="ultraserver", tp=16),
    "70b-server-tp8-fp8-b32": dict(
        model="llama3.3-70b", hardware="trn2", system="server", tp=8, fmt="fp8", batch=32
    ),
    "70b-server-tp16-given": dict(
        model="llama3.3-70b",
        hardware="trn2",
        system="server",
        tp=16,
        step_fixed_s=1e-3,
        collective_fixed_s=2e-5,
        collective_bandwidth_factor=0.5,
    ),
    "8b-server-tp4-b4": dict(model="llama3-8b", hardware="trn2", system="server", tp=4, batch=4),
    "8b-server-tp1": dict(model="llama3-8b", hardware="trn2", system="server", tp=1, output=64),
    "mixtral-server-tp8-ep8-b32": dict(
        model="mixtral-8x7b", hardware="trn2", system="server", tp=8, ep=8, batch=32
    ),
    "mixtral-server-tp8-ep2": dict(
        model="mixtral-8x7b", hardware="trn2", system="server", tp=8, ep=2, prompt=512
    ),
    "dsv3-ultra-tp64-ep64-fp8": dict(
        model="deepseek-v3",
        hardware="trn2",
        system="ultraserver",
        tp=64,
        ep=64,
        fmt="fp8",
        kv_fmt="fp8",
    ),
    "dsv3-2xserver-tp32-ep32-fp8": dict(
        model="deepseek-v3",
        hardware="trn2",
        system="2xserver",
        tp=32,
        ep=32,
        fmt="fp8",
        batch=16,
        output=32,
    ),
    "70b-h100-tp8": dict(model="llama3.3-70b", hardware="h100", system="server", tp=8),
    "70b-h100-tp4-fp8-b16": dict(
        model="llama3.3-70b", hardware="h100", system="server", tp=4, fmt="fp8", batch=16
    ),
    "405b-h100-2xserver-tp8-pp2-fp8": dict(
        model="llama3.1-405b", hardware="h100", system="2xserver", tp=8, pp=2, fmt="fp8"
    ),
    # more layouts of the same kinds, one batch through any pipeline
    "70b-server-tp16-b1-p2048": dict(
        model="llama3.3-70b",
        hardware="trn2",
        system="server",
        tp=16,
        batch=1,
        prompt=2048,
        output=64,
    ),
    "70b-server-tp16-fp8-kvfp8-b32": dict(
        model="llama3.3-70b",
        hardware="trn2",
        system="server",
        tp=16,
        batch=32,
        prompt=512,
        output=32,
        fmt="fp8",
        kv_fmt="fp8",
    ),
    "mixtral-server-tp8-ep8-b32-p1024": dict(
        model="mixtral-8x7b",
        hardware="trn2",
        system="server",
        tp=8,
        ep=8,
        batch=32,
        prompt=1024,
        output=32,
    ),
    "mixtral-server-tp8-ep2-b4": dict(
        model="mixtral-8x7b",
        hardware="trn2",
        system="server",
        tp=8,
        ep=2,
        batch=4,
        prompt=256,
        output=16,
    ),
    "dsv3-ultra-tp64-ep8-fp8-b8": dict(
        model="deepseek-v3",
        hardware="trn2",
        system="ultraserver",
        tp=64,
        ep=8,
        batch=8,
        prompt=1024,
        output=16,
        fmt="fp8",
    ),
    "8b-server-tp4-self-draft": dict(
        model="llama3-8b",
        hardware="trn2",
        system="server",
        tp=4,
        batch=2,
        prompt=300,
        output=8,
        draft_model="llama3-8b",
        draft_tokens=3,
        acceptance=0.6,
    ),
    "70b-h100-tp8-b4": dict(
        model="llama3.3-70b",
        hardware="h100",
        system="server",
        tp=8,
        batch=4,
        prompt=1000,
        output=20,
    ),
    "8b-2xserver-tp8-pp4": dict(
        model="llama3-8b",
        hardware="trn2",
        system="2xserver",
        tp=8,
        pp=4,
        batch=8,
        prompt=256,
        output=16,
    ),
    "mixtral-ultra-tp8-pp4-ep4": dict(
        model="mixtral-8x7b",
        hardware="trn2",
        system="ultraserver",
        tp=8,
        pp=4,
        ep=4,
        batch=16,
        prompt=512,
        output=16,
    ),
    # data-parallel attention and micro-batches in flight
    "dsv3-ultra-tp8-ep64-dp-fp8-b64": dict(
        model="deepseek-v3",
        hardware="trn2",
        system="ultraserver",
        tp=8,
        ep=64,
        dp_attention=True,
        fmt="fp8",
        kv_fmt="fp8",
        batch=64,
        prompt=1024,
        output=16,
    ),
    "mixtral-server-tp2-ep8-dp-b8": dict(
        model="mixtral-8x7b",
        hardware="trn2",
        system="server",
        tp=2,
        ep=8,
        dp_attention=True,
        batch=8,
        prompt=512,
        output=16,
    ),
    "8b-2xserver-tp8-pp4-mb4-b16": dict(
        model="llama3-8b",
        hardware="trn2",
        system="2xserver",
        tp=8,
        pp=4,
        micro_batches=4,
        batch=16,
        prompt=256,
        output=16,
    ),
    "70b-ultra-tp16-pp4-mb2-b8": dict(
        model="llama3.3-70b",
        hardware="trn2",
        system="ultraserver",
        tp=16,
        pp=4,
        micro_batches=2,
        batch=8,
        prompt=1024,
        output=32,
    ),
}

#: Engines whose step() and iteration_s() figures are pinned, and the iterations asked.
ENGINES = {
    "405b-server-tp16": dict(model="llama3.1-405b", hardware="trn2", system="server", tp=16),
    "mixtral-ultra-tp16-ep4-fp8": dict(
        model="mixtral-8x7b", hardware="trn2", system="ultraserver", tp=16, ep=4, fmt="fp8"
    ),
    "70b-h100-tp8": dict(model="llama3.3-70b", hardware="h100", system="server", tp=8),
    "mixtral-server-tp8-ep4": dict(
        model="mixtral-8x7b", hardware="trn2", system="server", tp=8, ep=4
    ),
    "dsv3-ultra-tp8-ep64-dp": dict(
        model="deepseek-v3",
        hardware="trn2",
        system="ultraserver",
        tp=8,
        ep=64,
        dp_attention=True,
        fmt="fp8",
    ),
    "8b-2xserver-tp8-pp4-mb4": dict(
        model="llama3-8b", hardware="trn2", system="2xserver", tp=8, pp=4, micro_batches=4
    ),
}
#: (tokens, sequences, kv_tokens, pairs) of mixed iterations: decode, prefill chunks, both.
ITERATIONS = (
    (1, 1, 2048, 2048),
    (64, 64, 64 * 4096, 64 * 4096),
    (512, 1, 512, 512 * 513 / 2),
    (2048, 1, 2048, 2048 * 2049 / 2),
    (1000, 17, 50000, 300000),
    (8192, 8, 8192, 8 * 1024 * 1025 / 2),
)


def estimate_figures(args: dict) -> dict:
    """Every figure of one estimate: the Estimate's fields (floats and ints), nested."""
    from tlm.inference import estimate

    a = _pinned(args, estimate=True)
    r = estimate(a.pop("model"), a.pop("hardware"), a.pop("system"), **a).to_dict()
    # figures added since (micro-batches, attention groups; the request's time, pinned at 0
    # with the fixed costs) are not in the golden file
    for name in ("micro_batches", "attention_groups"):
        r.pop(name, None)
    assert r.pop("request_s") == a.get("request_fixed_s", 0.0) == 0.0
    return r


def engine_figures(args: dict) -> dict:
    """An engine's step() on :data:`ITERATIONS` (one vectorised call and one call each) and
    iteration_s() on each, every field."""
    from tlm.inference import Engine

    a = _pinned(args, estimate=False)
    e = Engine.build(a.pop("model"), a.pop("hardware"), a.pop("system"), **a)
    T, S, KV, P = (np.array(x, dtype=float) for x in zip(*ITERATIONS, strict=True))
    whole = e.step(T, S, KV, P)
    out = {"step": {k: np.asarray(v).tolist() for k, v in vars(whole).items()}}
    out["one"] = [e.step(*it).row() for it in ITERATIONS]
    out["fast"] = [float(e.iteration_s(int(t), int(s), kv, p)) for t, s, kv, p in ITERATIONS]
    out["memory"] = {
        "weights_bytes": e.memory.weights_bytes,
        "kv_per_token_bytes": e.memory.kv_per_token_bytes,
        "kv_capacity_tokens": e.kv_capacity_tokens,
    }
    return out


def all_figures() -> dict:
    """Every pinned figure, as the golden file holds them."""
    return {
        "estimate": {name: estimate_figures(a) for name, a in LAYOUTS.items()},
        "engine": {name: engine_figures(a) for name, a in ENGINES.items()},
    }


if __name__ == "__main__":
    text = json.dumps(all_figures(), indent=1, sort_keys=True)
    if sys.argv[1:] == ["--write"]:
        GOLDEN.write_text(text + "\n")
    else:
        print(text)


# ---- the figures, within golden.REL ------------------------------------------------------------


def _golden() -> dict:
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_estimate_is_golden(name):
    """Every figure of the estimate matches the golden one (whatever engines, tables and
    closed forms earlier tests of this process left built)."""
    assert_matches(estimate_figures(LAYOUTS[name]), _golden()["estimate"][name])


@pytest.mark.parametrize("name", list(ENGINES))
def test_engine_is_golden(name):
    assert_matches(engine_figures(ENGINES[name]), _golden()["engine"][name])


# ---- the work a layout costs -------------------------------------------------------------


@pytest.fixture
def counted(monkeypatch):
    """A function giving the counts, from here on, of the parts' evaluations (rows), of the
    attention efficiency tables and of the network's closed forms built."""
    from tlm.cluster.network import Network
    from tlm.inference import Engine, step

    counts = {"_token_part": 0, "_sequence_part": 0, "closed forms": 0}

    def counting(name):
        original = getattr(Engine, name)

        @functools.wraps(original)
        def part(self, values):
            counts[name] += np.size(values)  # rows
            return original(self, values)

        monkeypatch.setattr(Engine, name, part)

    counting("_token_part")
    counting("_sequence_part")
    up = Network._up_phase

    def up_phase(self, *args, **kwargs):
        counts["closed forms"] += 1
        return up(self, *args, **kwargs)

    monkeypatch.setattr(Network, "_up_phase", up_phase)
    tables = step._attention_per_pair.cache_info().misses
    return lambda: counts | {"attention": step._attention_per_pair.cache_info().misses - tables}


def test_a_layout_of_the_same_shapes_builds_no_tables(counted):
    """A KV format, a page size, a reserve and fixed costs of its own change no operator
    shape: the second layout evaluates no part and builds no table."""
    from tlm.inference import estimate

    args = dict(tp=2, fmt="fp8", prompt=777, output=9)  # a prompt no other test asks
    estimate("llama3-8b", "trn2", "server", **args)
    first = counted()
    assert first["_token_part"] >= 1 and first["_sequence_part"] >= 0
    estimate(
        "llama3-8b",
        "trn2",
        "server",
        kv_fmt="fp8",
        block_tokens=32,
        step_fixed_s=0.01,
        collective_fixed_s=1e-4,
        **args,
    )
    assert counted() == first


def test_other_fixed_costs_are_added_on_top_of_the_same_tables(counted):
    """An engine under other fixed costs shares its parts and adds the costs exactly: the
    decode step's time moves by the step cost and the collective calls' cost."""
    from tlm.inference import Engine

    base = Engine.build("llama3-8b", "trn2", "server", tp=4, fmt="fp8", **FREE)
    t0 = base.step(333, 3, 3000, 3000)
    before = counted()
    given = Engine.build(
        "llama3-8b",
        "trn2",
        "server",
        tp=4,
        fmt="fp8",
        step_fixed_s=0.002,
        collective_fixed_s=3e-5,
        collective_bandwidth_factor=1.0,
    )
    t1 = given.step(333, 3, 3000, 3000)
    assert counted() == before
    assert given is not base and base.step_fixed_s == 0.0 and given.step_fixed_s == 0.002
    assert "replaced by given values" in given.fixed_source
    assert float(t1.fixed_s) == 0.002
    assert float(t1.communication_s) == float(t0.communication_s) + given.collective_calls * 3e-5
    assert float(t1.compute_s) == float(t0.compute_s)
    assert float(t1.memory_s) == float(t0.memory_s)
