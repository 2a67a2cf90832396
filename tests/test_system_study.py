"""``trnsim system`` reproduces the published server and UltraServer peaks of trn2 and trn3."""

import pytest

from tlm.studies import run_study

TIB = 2**40


def _levels(hardware):
    rows = run_study("system", hardware=hardware, chips="1k").results.series
    return {row.level: row for row in rows}


@pytest.mark.parametrize(
    "hardware,level,chips,fp8_pflops,sparse_pflops,hbm_tib,hbm_tbps",
    [
        # AWS Trn2 pages: 20.8 FP8 PFLOPS, 1.5 TB, 46 TB/s per server; 83.2 PFLOPS, 6 TB,
        # 185 TB/s per UltraServer (dense: 64 x 1,299; sparse 64 x 2,563)
        ("trn2", "server", 16, 20.784, 41.008, 1.5, 46.4),
        ("trn2", "scale-up domain", 64, 83.136, 164.032, 6.0, 185.6),
        # Amazon EC2 Trn3 Architecture: Gen1 161 PFLOPS dense MXFP8, 314 TB/s, 9 TB;
        # Gen2 362 PFLOPS, 706 TB/s, 20 TB (144 GiB chips: 20.25 TiB)
        ("trn3", "scale-up domain", 64, 161.088, None, 9.0, 313.6),
        ("trn3-gen2", "scale-up domain", 144, 362.448, None, 20.25, 705.6),
        ("trn3-gen2", "server", 4, 10.068, None, 0.5625, 19.6),
    ],
)
def test_published_peaks(hardware, level, chips, fp8_pflops, sparse_pflops, hbm_tib, hbm_tbps):
    row = _levels(hardware)[level]
    assert row.chips == chips
    assert row.fp8_dense_flop_per_s == pytest.approx(fp8_pflops * 1e15, rel=1e-12)
    if sparse_pflops is None:
        assert row.fp8_sparse_flop_per_s is None
    else:
        assert row.fp8_sparse_flop_per_s == pytest.approx(sparse_pflops * 1e15, rel=1e-12)
    assert row.hbm_bytes == pytest.approx(hbm_tib * TIB, rel=1e-12)
    assert row.hbm_bandwidth_Bps == pytest.approx(hbm_tbps * 1e12, rel=1e-12)


def test_sparse_figures_are_the_published_ones():
    chip = {h: _levels(h)["chip"] for h in ("trn1", "trn2", "trn3", "a100", "h100")}
    assert chip["trn2"].bf16_sparse_flop_per_s == 2563e12  # one figure for every format
    assert chip["trn3"].bf16_sparse_flop_per_s == 2517e12  # no sparse MXFP8 figure published
    assert chip["trn3"].fp32_dense_flop_per_s == 183e12
    assert chip["h100"].fp8_sparse_flop_per_s == 2 * chip["h100"].fp8_dense_flop_per_s
    assert chip["a100"].bf16_sparse_flop_per_s == 624e12
    assert chip["trn1"].bf16_sparse_flop_per_s is None  # none published
    sources = run_study("system", hardware="trn3-gen2", chips="1k").results.sources
    assert sources["fp32_dense_flop_per_s"].endswith("published.dense_fp32_flops: T3")
    assert "T3ARCH" in sources["servers"]
