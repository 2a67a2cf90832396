"""One answer to "how much better per dollar": ``trnsim infer-search`` and ``trnsim serve
--find-max-rate`` price a configuration by one definition - one replica's chips at the
instance-hour price over the output tokens it sustains within the SLO
(``max_rate_cost_per_million_tokens_usd``) - and rank trn2 against h100 the same way.

They differ in how the rate within the SLO is found. The search treats a replica's batch slots
as an M/M/c queue of Poisson arrivals (Erlang C: :mod:`tlm.inference.queueing`), serve simulates
them (continuous batching, chunked prefill, a near-fixed time per request) and bisects the rate
at which 90 % of requests meet the SLO. On the four configurations below the search's rate is
4-8 % under serve's (2026-11-27, since the search caps the rate where prefills sharing the decode
steps stretch the TPOT past its SLO), so the ratio of two of them may be about 15 % off, and serve's
bisection at 600 requests moves by a few per cent: the tolerance is 20 %. (Little's law alone,
``batch / busy``, is 1.2-2.3x serve's rate here and turned the ranking over.)
"""

import pytest

from tlm.studies import run_study

PROMPT, OUTPUT = 2048, 256
#: How far the two studies' h100-over-trn2 ratios may differ (the module's docstring says why).
TOLERANCE = 0.20


def _both(hardware: str, rate_per_s: float, slo_tpot_s: float) -> tuple:
    slo = dict(model="llama3.3-70b", slo_ttft_s=2.0, slo_tpot_s=slo_tpot_s)
    found = run_study(
        "infer-search", hardware=hardware, systems=["server"], rate_per_s=rate_per_s,
        prompt=PROMPT, output=OUTPUT, scheduler="inline", **slo,
    ).results  # fmt: skip
    served = run_study(
        "serve", hardware=hardware, system=found.best_system, tp=found.best_tp,
        pp=found.best_pp, format=found.best_format, kv_format=found.best_kv_format,
        max_batch=found.best_batch, prompt=str(PROMPT), output=str(OUTPUT), rate_per_s=0.1,
        requests=600, find_max_rate=True, **slo,
    ).results  # fmt: skip
    assert found.price_source == served.price_source  # one price, one footing
    return found, served


@pytest.mark.parametrize(
    "rate_per_s,slo_tpot_s",
    [(10.0, 0.03), (1.0, 0.05)],  # docs/inference.md's example; infer-search's default SLO
)
def test_search_and_serve_rank_the_same_per_dollar(rate_per_s, slo_tpot_s):
    (ts, tv), (hs, hv) = (_both(hw, rate_per_s, slo_tpot_s) for hw in ("trn2", "h100"))
    for s, v in ((ts, tv), (hs, hv)):
        assert v.max_rate_per_s == pytest.approx(s.best_max_rate_per_s, rel=0.15)
    search = (
        hs.best_max_rate_cost_per_million_tokens_usd / ts.best_max_rate_cost_per_million_tokens_usd
    )
    serve = hv.max_rate_cost_per_million_tokens_usd / tv.max_rate_cost_per_million_tokens_usd
    print(f"h100 / trn2 cost per million tokens: infer-search {search:.3f}, serve {serve:.3f}")
    assert (search < 1) == (serve < 1), (search, serve)
    assert search == pytest.approx(serve, rel=TOLERANCE)


def test_queueing_by_hand():
    """Erlang C against the closed forms: M/M/1 waits longer than t with probability
    rho exp(-(1 - rho) t / S); a long wait allowed approaches Little's law; a request whose own
    prefill misses the SLO sustains no rate."""
    import math

    from tlm.inference.queueing import max_rate_within

    rate = max_rate_within(1, 2.0, 1.0)
    rho = rate * 2.0
    assert rho * math.exp(-(1 - rho) * 1.0 / 2.0) == pytest.approx(0.1, rel=1e-9)
    many = max_rate_within([8, 64], [6.7, 6.7], [1e4, 1e4])
    assert many == pytest.approx([8 / 6.7, 64 / 6.7], rel=1e-3)
    assert max_rate_within(4, 10.0, -0.5) == 0.0
    assert max_rate_within(8, 6.7, 0.5) < max_rate_within(8, 6.7, 2.0) < 8 / 6.7
