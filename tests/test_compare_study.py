"""``trnsim compare``: one workload on several generations, ratios with their footings."""

import pytest

from tlm.studies import run_study


def _rows(**kw):
    return {r.hardware: r for r in run_study("compare", **kw).results.series}


def test_ratios_are_the_infer_runs_and_say_their_footing():
    """The rows are ``trnsim infer`` on one server each; the ratios are theirs against the
    baseline; a borrowed fit and an assumed price are said, never hidden."""
    rows = _rows(model="llama3-8b", against="trn1,h100", prompt=512, output=64)
    assert list(rows) == ["trn2", "trn1", "h100"]
    base, trn1, h100 = rows["trn2"], rows["trn1"], rows["h100"]
    assert base.chip_throughput_ratio == base.tokens_per_usd_ratio == 1.0
    one = run_study(
        "infer", model="llama3-8b", hardware="h100", tp=8, prompt=512, output=64
    ).results
    assert h100.chips == 8 and h100.tpot_s == one.tpot_s
    assert h100.chip_tokens_per_s == pytest.approx(one.decode_tokens_per_s / 8, rel=1e-12)
    assert h100.chip_throughput_ratio == pytest.approx(
        h100.chip_tokens_per_s / base.chip_tokens_per_s, rel=1e-12
    )
    assert h100.tokens_per_usd_ratio == pytest.approx(
        base.cost_per_million_tokens_usd / h100.cost_per_million_tokens_usd, rel=1e-12
    )
    assert (base.fixed_costs_footing, trn1.fixed_costs_footing) == ("FITTED", "BORROWED")
    assert base.gemm_footing == "chip TLM trn2" and h100.gemm_footing.startswith("roofline x")
    assert base.price_source == "ASSUMED" and h100.price_source == "CUT2025"
    assert h100.price_as_of == "2026-11-09" and h100.price_kind == "on_demand"


def test_a_replica_that_does_not_fit_is_a_row_that_says_why():
    rows = _rows(model="llama3.1-405b", against="trn1,h100")
    assert rows["trn2"].fits and not rows["trn1"].fits
    assert "does not fit" in rows["trn1"].why and rows["trn1"].chip_throughput_ratio is None


def _orders(model):
    rows = run_study("compare", model=model, prompt=512, output=64).results.series
    base = rows[0]
    for row in rows[1:]:
        if not (row.fits and base.fits):
            assert row.order == "" and row.bandwidth_ratio is None
            continue
        # the explanation is exact: per chip, decode is the bandwidth times the share of its
        # time HBM streams (a token reads the same bytes anywhere: to the KV cache's and the
        # replicated norms' few per cent), prefill the peak times the MFU
        use = row.decode_hbm_use_fraction / base.decode_hbm_use_fraction
        assert row.chip_throughput_ratio == pytest.approx(row.bandwidth_ratio * use, rel=0.05)
        mfu = row.prefill_mfu_fraction / base.prefill_mfu_fraction
        assert row.prefill_ratio == pytest.approx(row.peak_ratio * mfu, rel=1e-12)
        decode_flip = (row.chip_throughput_ratio - 1) * (row.bandwidth_ratio - 1) < 0 and (
            abs(row.chip_throughput_ratio / row.bandwidth_ratio - 1) > 0.05
        )
        prefill_flip = (row.prefill_ratio - 1) * (row.peak_ratio - 1) < 0 and (
            abs(row.prefill_ratio / row.peak_ratio - 1) > 0.05
        )
        # the order follows the published figures, or the row says why not
        assert ("decode" in row.order) == decode_flip, (model, row.hardware, row.order)
        assert ("prefill" in row.order) == prefill_flip, (model, row.hardware, row.order)
        if decode_flip:
            assert f"{row.decode_hbm_use_fraction:.0%}" in row.order
    return rows


@pytest.mark.parametrize("model", ["llama3-8b", "llama3.3-70b"])
def test_generation_order_follows_the_published_figures_or_says_why(model):
    rows = _orders(model)
    assert sum(r.fits for r in rows) >= 5


@pytest.mark.slow
def test_every_shipped_model_orders_its_generations_or_says_why():
    """Every (model, hardware) pair shipped: decode per chip in the order of HBM bandwidth and
    prefill per chip in the order of the dense peak, or the row's ``order`` names the shares
    (HBM streaming, fixed costs, MFU) that differ."""
    from tlm.workloads import model_names

    for model in model_names():
        _orders(model)
