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
