"""Goodput at scale: the closed forms (Young, Daly), Llama 3's interruptions, spares, vectors."""

import numpy as np
import pytest

from tlm.cluster.goodput import (
    LLAMA3,
    FailureRates,
    checkpoint_bytes,
    daly_interval_s,
    daly_wall_per_work,
    goodput,
    interruptions_per_day,
    young_interval_s,
)
from tlm.workloads import load_model

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off


def test_llama3_interruptions_per_day_at_16k_h100():
    """Llama 3 (Table 5): 419 unexpected interruptions in 54 days on 16,384 H100 in 8s."""
    assert LLAMA3["chip"] + LLAMA3["server"] + LLAMA3["network"] + LLAMA3["software"] == 419
    per_day = interruptions_per_day(16384, server_chips=8)
    assert per_day == pytest.approx(419 / 54, rel=1e-12)
    # 466 with the 47 planned: the model counts the unexpected ones only
    assert per_day * 54 < LLAMA3["unexpected"] + LLAMA3["planned"]


def test_interruptions_scale_with_chips_and_hosts():
    n = np.array([1024, 16384, 1048576])
    eight = interruptions_per_day(n, server_chips=8)
    assert np.allclose(eight / n, eight[0] / n[0])  # linear in chips at a fixed server size
    sixteen = interruptions_per_day(16384, server_chips=16)
    host = 53 / 54 / 2  # half of the host interruptions: half the servers
    assert sixteen == pytest.approx(419 / 54 - host)
    none = interruptions_per_day(16384, server_chips=8, rates=FailureRates(0, 0, 0, 0))
    assert none == 0


def test_llama3_goodput_above_90_percent():
    """Llama 3: "more than 90 % effective training time" on 16k H100, 2 TB/s storage."""
    ckpt = checkpoint_bytes(load_model("llama3-405b"))
    r = goodput(chips=16384, server_chips=8, checkpoint_bytes=ckpt)
    assert 0.90 < r.goodput_fraction < 0.99


def test_checkpoint_bytes_is_weights_master_and_moments():
    m = load_model("llama3-8b")
    assert checkpoint_bytes(m) == m.parameters * (2 + 4 + 8)
    assert checkpoint_bytes(m, weights="fp32", master="fp32") == m.parameters * (4 + 8)
    assert checkpoint_bytes(m, optimizer="bf16") == m.parameters * (2 + 4 + 4)


@pytest.mark.parametrize("write_s,mtbf_s", [(1.0, 3600.0), (60.0, 86400.0), (600.0, 7200.0)])
def test_daly_interval_against_young_and_the_minimum(write_s, mtbf_s):
    """Daly's interval approaches Young's sqrt(2 delta M) when delta << M, and is (close to)
    the minimum of Daly's exact wall time."""
    young = young_interval_s(write_s, mtbf_s)
    daly = daly_interval_s(write_s, mtbf_s)
    assert young == pytest.approx(np.sqrt(2 * write_s * mtbf_s))
    assert abs(daly - young) / young < 0.5 * np.sqrt(write_s / mtbf_s) + write_s / young
    grid = np.linspace(0.2, 5, 20001) * young
    wall = daly_wall_per_work(grid, write_s, 0.0, mtbf_s)
    best = grid[np.argmin(wall)]
    exact = daly_wall_per_work(daly, write_s, 0.0, mtbf_s)
    assert exact <= wall.min() * (1 + 1e-3), (daly, best)


def test_daly_interval_when_the_write_exceeds_two_mtbf():
    assert daly_interval_s(100.0, 40.0) == 40.0


def test_wall_per_work_first_order():
    """For M >> tau, delta, R: wall/work ~ 1 + delta/tau + (tau + delta)/2M + R/M."""
    tau, d, r, m = 300.0, 5.0, 60.0, 1e6
    first = 1 + d / tau + (tau + d) / (2 * m) + r / m
    assert daly_wall_per_work(tau, d, r, m) == pytest.approx(first, rel=1e-5)
    assert daly_wall_per_work(tau, d, 0.0, 1e15) == pytest.approx(1 + d / tau, rel=1e-9)


def test_fractions_add_up_and_goodput_falls_with_scale():
    n = np.array([64, 1024, 16384, 131072, 1048576])
    r = goodput(chips=n, server_chips=16, checkpoint_bytes=5e12)
    total = r.goodput_fraction + r.checkpoint_fraction + r.restart_fraction + r.lost_fraction
    assert np.allclose(total, 1.0)
    assert np.all(np.diff(r.goodput_fraction) < 0)
    assert np.all(r.lost_fraction >= 0) and np.all(r.restart_fraction >= 0)
    assert r.goodput_fraction.shape == n.shape


def test_restarts_and_redone_work_share_what_goodput_leaves():
    """Both restarts and redone work stay visible at every scale: at 98,304 chips (44
    interruptions a day, 10-minute restarts) the redone work was clipped to 0; now the rest of
    the wall time splits between them as their first-order shares (interruptions x restart,
    interruptions x half an interval) do, which at small scale they are."""
    for chips, tolerance in ((98304, None), (1024, 0.02)):
        g = goodput(chips=chips, server_chips=16, checkpoint_bytes=5.7e12)
        restart, lost = float(g.restart_fraction), float(g.lost_fraction)
        assert restart > 0 and lost > 0
        total = float(g.goodput_fraction + g.checkpoint_fraction) + restart + lost
        assert total == pytest.approx(1.0, abs=1e-12)
        if tolerance:
            lam = float(g.interruptions_per_day) / 86400
            assert restart == pytest.approx(lam * float(g.restart_s), rel=tolerance)
            half = (float(g.checkpoint_interval_s) + float(g.checkpoint_write_s)) / 2
            assert lost == pytest.approx(lam * half, rel=tolerance)


def test_spares_cover_failures_or_the_job_waits_for_repairs():
    """Little's law: with too few spares a share of the hardware failures waits repair_s."""
    base = dict(chips=131072, server_chips=8, checkpoint_bytes=1e12, repair_s=48 * 3600.0)
    enough = goodput(**base, spare_fraction=0.05)
    none = goodput(**base, spare_fraction=0.0)
    assert enough.no_spare_fraction == 0 and none.no_spare_fraction == 1
    hw = (none.chip_per_day + none.network_per_day + none.server_per_day) / 86400
    lam = none.interruptions_per_day / 86400
    expected = 600 + 0.5 + hw / lam * 48 * 3600
    assert none.restart_s == pytest.approx(expected)
    assert none.goodput_fraction < enough.goodput_fraction


def test_vectorised_over_configurations():
    rng = np.random.default_rng(seed := 13)
    print("seed", seed)
    n = rng.integers(1, 2_000_000, 100_000)
    ckpt = rng.uniform(1e10, 2e13, n.size)
    r = goodput(chips=n, server_chips=16, checkpoint_bytes=ckpt)
    i = 1234
    one = goodput(chips=int(n[i]), server_chips=16, checkpoint_bytes=float(ckpt[i]))
    assert r.row(i) == pytest.approx(one.row())


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(chips=0), "chips must be a positive number (or an array of them), not 0.0"),
        (dict(checkpoint_bytes=-1), "checkpoint_bytes must be a positive number"),
        (dict(restart_s=-5), "restart_s must be a number >= 0 (or an array of them), not -5.0"),
        (dict(storage_Bps=np.array([1.0, 0.0])), "storage_Bps must be a positive number"),
    ],
)
def test_bad_input_names_the_argument(kwargs, message):
    args = dict(chips=8, server_chips=8, checkpoint_bytes=1e9) | kwargs
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        goodput(**args)


def test_bad_rates():
    with pytest.raises(ValueError, match="chip_per_hour must be a number >= 0, not -1"):
        FailureRates(chip_per_hour=-1)
