"""The strategy search (tlm/cluster/search.py): the layouts it enumerates against a brute force,
the Pareto front against a brute force, budgets and their errors, Dask, and resuming."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
from layouts import MEMORY_RECIPE, laid

from tlm.cluster.memory import memory_per_chip
from tlm.cluster.search import (
    AXES,
    INTERLEAVES,
    NoValidLayout,
    candidates,
    pareto_front,
    search,
)
from tlm.hardware import load_hardware
from tlm.workloads import load_model
from tlm.workloads.operators import tp_allowed

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

SEED = int(os.environ.get("SEED", "20261124"))


def _brute(model, chips, gb, seq):
    """Every layout by nested loops: the rules written out one by one."""
    experts = model.moe.experts if model.moe else 1
    out = set()
    for tp, cp, pp in itertools.product(
        [1, 2, 4, 8, 16, 32, 64, 128], [1, 2, 4, 8, 16], range(1, model.layers + 1)
    ):
        if tp_allowed(model, tp) or seq % cp or chips % (tp * cp * pp):
            continue
        dp = chips // (tp * cp * pp)
        # rc: none, selective, full, selective+mlp
        for ep, zero, mb, v, rc in itertools.product(
            range(1, experts + 1), range(4), [1, 2, 4, 8], INTERLEAVES, range(4)
        ):
            if experts % ep or (dp * cp) % ep or gb % (dp * mb):
                continue
            n_micro = gb // (dp * mb)
            if v > 1 and not (pp > 1 and pp * v <= model.layers + 2 and n_micro % pp == 0):
                continue
            out.add((chips, dp, tp, pp, cp, ep, zero, mb, v, rc))
    return out


@pytest.mark.parametrize("name,chips", [("llama3-8b", 64), ("deepseek-v3", 256)])
def test_candidates_are_every_valid_layout(name, chips):
    m = load_model(name)
    got, cuts = candidates(m, chips)
    rows = set(zip(*(got[k].tolist() for k in AXES), strict=True))
    assert len(rows) == len(got["dp"])  # no duplicates
    assert rows == _brute(m, chips, m.global_batch_sequences, m.seq_len)
    assert cuts[-1][1] == len(rows)
    # the memory model (which validates independently) accepts every one of them
    mem = memory_per_chip(
        m, **laid(MEMORY_RECIPE, **{k: got[k] for k in AXES[1:]}, sp=got["tp"] > 1)
    )
    assert np.all(mem.reason == 0)


def test_pinned_axes_and_the_error_naming_the_last_constraint():
    m = load_model("llama3-8b")
    got, _ = candidates(m, 64, fixed={"tp": 8, "recompute": [0, 2]})
    assert set(got["tp"]) == {8} and set(got["recompute"]) == {0, 2}
    with pytest.raises(NoValidLayout, match="tp x cp x pp divides the 7 chips"):
        candidates(m, 7, fixed={"tp": 8})
    with pytest.raises(ValueError, match="fixed axes must be among"):
        candidates(m, 64, fixed={"vocab": 8})


def test_pareto_front_matches_brute_force():
    rng = np.random.default_rng(SEED)
    print(f"SEED={SEED}")
    t = rng.random(500)
    c = rng.random(500)
    t[::37] = np.nan
    front = set(pareto_front(t, c).tolist())
    brute = {
        i
        for i in range(500)
        if np.isfinite(t[i])
        and not any(
            np.isfinite(t[j]) and t[j] <= t[i] and c[j] <= c[i] and (t[j] < t[i] or c[j] < c[i])
            for j in range(500)
        )
    }
    assert front == brute


@pytest.fixture(scope="module")
def small():
    return load_model("llama3-8b"), load_hardware("trn2")


def test_one_layout_is_the_vectorised_row_bit_for_bit():
    """A single estimate (one layout) runs the step, goodput and cost on Python numbers
    instead of arrays: each output equals its row of the vectorised call exactly."""
    from tlm.cluster.search import OUTPUTS, evaluate

    rng = np.random.default_rng(SEED)
    print(f"SEED={SEED}")
    m, hw = load_model("deepseek-v3"), load_hardware("trn2")
    parts = [candidates(m, n)[0] for n in (1024, 1 << 20)]
    every = {k: np.concatenate([p[k] for p in parts]) for k in AXES}
    pick = rng.choice(len(every["chips"]), 40, replace=False)
    configs = {k: v[pick] for k, v in every.items()}
    configs["pp"][::7] = 7  # some layouts that are not valid
    many = evaluate(m, hw, configs)
    assert np.isfinite(many["step_s"]).sum() >= 20
    for i in range(len(pick)):
        one = evaluate(m, hw, {k: v[i : i + 1] for k, v in configs.items()})
        for key in OUTPUTS:
            assert one[key].shape == (1,) and one[key].dtype == many[key].dtype, key
            np.testing.assert_array_equal(one[key][0], many[key][i], err_msg=f"{key} row {i}")


def test_best_layouts_and_budgets(small):
    m, hw = small
    found = search(m, hw, [64, 256], scheduler="inline")
    best = found.best("time")
    assert best["chips"] == 256 and best["fits"]
    assert found.best("time", power_w=float(found.power_w[found.chips == 64].max()))["chips"] == 64
    with pytest.raises(NoValidLayout, match="power budget"):
        found.best("cost", power_w=1.0)
    with pytest.raises(NoValidLayout, match="memory budget"):
        found.best("cost", memory_bytes=1.0)
    front = found.front()
    t, c = found.train_s[front], found.cost_usd[front]
    assert np.all(np.diff(t) > 0) and np.all(np.diff(c) < 0)


def test_resume_from_chunks(small, tmp_path):
    """A search that lost a chunk evaluates only that chunk again and gives the same
    arrays; another search in the same folder is refused."""
    m, hw = small
    first = search(m, hw, [64], scheduler="inline", out_dir=tmp_path, chunk=2000)
    assert first.chunks > 2 and first.resumed_chunks == 0
    chunks = sorted(tmp_path.glob("chunk-*.npz"))
    assert len(chunks) == first.chunks
    chunks[1].unlink()
    again = search(m, hw, [64], scheduler="inline", out_dir=tmp_path, chunk=2000)
    assert again.resumed_chunks == first.chunks - 1
    for k in ("step_s", "cost_usd", "fits"):
        np.testing.assert_array_equal(again.arrays[k], first.arrays[k])
    with pytest.raises(ValueError, match="holds another search"):
        search(m, hw, [128], scheduler="inline", out_dir=tmp_path, chunk=2000)


def test_local_dask_cluster_gives_the_inline_results(small):
    m, hw = small
    inline = search(m, hw, [64], scheduler="inline", chunk=3000)
    dask = search(m, hw, [64], scheduler="local", chunk=3000)
    assert dask.chunks == inline.chunks > 1
    for k in ("step_s", "memory_bytes", "cost_usd"):
        np.testing.assert_array_equal(dask.arrays[k], inline.arrays[k])


def test_sites_give_each_chip_count_its_own_network(small):
    """Across two sites the data-parallel traffic that crosses them is slower: never a
    faster step than on one site, and slower where it is exposed."""
    m, hw = small
    one = search(m, hw, [1024, 2048], scheduler="inline", settings=(("overlap_dp", False),))
    two = search(
        m,
        hw,
        [1024, 2048],
        scheduler="inline",
        settings=(("sites", 2), ("site_bandwidth_Bps", 1e9), ("overlap_dp", False)),
    )
    assert np.array_equal(one.chips, two.chips)
    ok = np.isfinite(one.step_s)
    assert np.all(two.step_s[ok] >= one.step_s[ok] * (1 - 1e-12))
    assert np.any(two.step_s[ok] > one.step_s[ok] * 1.01)


def test_trnsim_train_search_picks_the_searched_layout(small):
    """``trnsim train --search time`` trains the layout the search finds fastest, and its
    contract (search still on) reruns to the same layout."""
    from tlm.studies import InputError, run_study

    m, hw = small
    best = search(m, hw, [64], scheduler="inline").best("time")
    report = run_study("train", model="llama3-8b", hardware="trn2", chips=64, search="time")
    inputs = report.inputs
    for k in ("dp", "tp", "pp", "cp", "zero", "micro_batch", "interleave"):
        assert getattr(inputs, k) == best[k], k
    assert inputs.recompute == best["recompute"] and inputs.search == "time"
    assert report.results.step_s == pytest.approx(best["step_s"], rel=1e-12)
    again = run_study("train", **report.to_dict()["inputs"])
    assert again.results.step_s == report.results.step_s
    # a layout input the search would replace is refused, not overridden silently
    other = 2 if best["tp"] != 2 else 4
    with pytest.raises(InputError, match=rf"^tp: {other} is not allowed; allowed: {best['tp']}, "):
        run_study("train", model="llama3-8b", hardware="trn2", chips=64, search="time", tp=other)


def test_trnsim_train_refuses_a_layout_that_does_not_fit():
    from tlm.studies import InputError, run_study

    with pytest.raises(
        InputError,
        match=r"does not fit .* 347 GiB too much .* the largest: "
        "optimizer",
    ):
        run_study("train", model="llama3-405b", chips=128, tp=8, pp=2, zero=0)


def test_no_layout_beats_the_roofline_of_its_own_products():
    """On a roofline chip no product runs faster than the peak times the GEMM efficiency,
    so no layout the search finds - whatever its overlap - has an MFU above that efficiency
    (each layout's step holds at least its own products' time): the H100's shipped fit."""
    from tlm.costs import OpCosts

    hw = load_hardware("h100")
    efficiency = OpCosts.for_hardware(hw).efficiency
    assert efficiency == hw.gemm_efficiency
    found = search(load_model("llama3-8b"), hw, [64, 512], scheduler="inline")
    mfu = found.mfu[np.isfinite(found.mfu)]
    assert mfu.size > 1000
    assert float(mfu.max()) <= efficiency
