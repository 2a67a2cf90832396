"""MX operands of tlm.tensor.matmul (a TLM-only engine), checked against an independent float64
reference of the dequantised operands and a scalar loop of the contract; their cost, and the
presets that have them."""

import math

import ml_dtypes
import numpy as np
import pytest

from tlm.formats import CANONICAL_NAN_BITS, MX_FORMATS, get_format
from tlm.presets import PresetError, load_preset
from tlm.tensor import EngineConfig, matmul, matmul_cycles
from tlm.tensor.timing import EngineTiming

MX = list(MX_FORMATS)
ENGINE = EngineConfig(512, 128, ["bf16", *MX])  # rows: K of four MX rows per PE on 128


def operand(rng, fmt, k, cols, spread=8):
    """Random (elements, scales) of ``fmt``: normal values, each block of 32 along K at its
    own power of two in 2**-spread..2**spread."""
    x = rng.standard_normal((k // 32, 32, cols))
    x *= 2.0 ** rng.integers(-spread, spread + 1, (k // 32, 1, cols))
    return MX_FORMATS[fmt].quantize(x.reshape(k, cols))


def dequantised(fmt, pair):
    return MX_FORMATS[fmt].dequantize(*pair)


def scalar_reference(a, b, s_fmt, m_fmt):
    """The contract, one k at a time in Python floats: the product exact, rounded once to
    binary32, added in binary32 (independent of tlm.tensor's vectorised loop)."""
    w, x = dequantised(s_fmt, a), dequantised(m_fmt, b)  # exact: element x scale
    out = np.zeros((w.shape[1], x.shape[1]), np.float32)
    for i in range(w.shape[1]):
        for j in range(x.shape[1]):
            acc = np.float32(0.0)
            for k in range(w.shape[0]):
                with np.errstate(all="ignore"):
                    acc = np.float32(acc + np.float32(float(w[k, i]) * float(x[k, j])))
            out[i, j] = acc
    return out


@pytest.mark.parametrize("s_fmt,m_fmt", [("mxfp8", "mxfp8"), ("mxfp8_e5m2", "mxfp4")])
def test_bit_for_bit_against_a_scalar_loop(s_fmt, m_fmt, seed):
    rng = np.random.default_rng(seed)
    a, b = operand(rng, s_fmt, 64, 3), operand(rng, m_fmt, 64, 4)
    got = matmul(a, b, cfg=ENGINE)
    np.testing.assert_array_equal(
        got.view(np.uint32), scalar_reference(a, b, s_fmt, m_fmt).view(np.uint32), f"seed {seed}"
    )


def test_exact_where_fp32_accumulation_is_exact(seed):
    """MXFP4 elements are multiples of 0.5 up to 6 and the scales here 2**-2..2**1: every
    product is a multiple of 2**-6 below 2**8 (36 x 4), K = 512 sums stay below 2**17, so every
    partial sum is a binary32 integer multiple of 2**-6 (< 2**24 of them): exact, equal to the
    float64 product of the dequantised operands."""
    rng = np.random.default_rng(seed)
    fmt = MX_FORMATS["mxfp4"]
    k, m, n = 512, 128, 64
    pairs = []
    for cols in (m, n):
        codes = rng.integers(0, 16, (k, cols), dtype=np.uint8)
        elements = codes.view(ml_dtypes.float4_e2m1fn)
        scales = rng.integers(125, 129, (k // 32, cols), dtype=np.uint8)
        pairs.append((elements, scales.view(ml_dtypes.float8_e8m0fnu)))
    got = matmul(*pairs, cfg=ENGINE)
    want = fmt.dequantize(*pairs[0]).T @ fmt.dequantize(*pairs[1])
    np.testing.assert_array_equal(got, want.astype(np.float32), f"seed {seed}")
    assert np.array_equal(got.astype(np.float64), want)  # nothing was rounded


@pytest.mark.parametrize("s_fmt,m_fmt", [("mxfp8", "mxfp8"), ("mxfp4", "mxfp8_e5m2")])
def test_within_the_sequential_sum_bound_of_the_float64_reference(s_fmt, m_fmt, seed):
    """Products are exact in binary32 here (no scale leaves its normal range), so the only
    rounding is the sum's: |got - ref| <= K u sum |w x| with u = 2**-24 (Higham's bound for a
    recursive sum, first order)."""
    rng = np.random.default_rng(seed)
    k = 512
    a, b = operand(rng, s_fmt, k, 128), operand(rng, m_fmt, k, 96)
    w, x = dequantised(s_fmt, a), dequantised(m_fmt, b)
    got = matmul(a, b, cfg=ENGINE).astype(np.float64)
    bound = k * 2.0**-24 * (np.abs(w).T @ np.abs(x))
    assert (np.abs(got - w.T @ x) <= bound).all(), f"seed {seed}"


def test_a_nan_scale_makes_its_outputs_the_canonical_nan():
    fmt = MX_FORMATS["mxfp8"]
    a = fmt.quantize(np.ones((64, 2)))
    b = fmt.quantize(np.ones((64, 2)))
    scales = a[1].view(np.uint8).copy()
    scales[1, 0] = 0xFF  # the second block of column 0 of the stationary
    got = matmul((a[0], scales.view(ml_dtypes.float8_e8m0fnu)), b, cfg=ENGINE)
    assert (got[0].view(np.uint32) == CANONICAL_NAN_BITS).all()
    assert (got[1] == 64.0).all()


def test_scaled_products_round_once_to_binary32():
    """Scales 2**127 and 2**127 put 1 x 1 at 2**254: inf in binary32; 2**-127 and 2**-127
    with E5M2's least subnormals (2**-16) give 2**-286: +0."""
    fmt = MX_FORMATS["mxfp8_e5m2"]
    big = np.full((32, 1), 1.0, ml_dtypes.float8_e5m2), np.full((1, 1), 254, np.uint8)
    tiny = np.full((32, 1), 2.0**-16, ml_dtypes.float8_e5m2), np.zeros((1, 1), np.uint8)
    big = big[0], big[1].view(ml_dtypes.float8_e8m0fnu)
    tiny = tiny[0], tiny[1].view(ml_dtypes.float8_e8m0fnu)
    assert matmul(big, big, cfg=ENGINE)[0, 0] == np.inf
    got = matmul(tiny, tiny, cfg=ENGINE)[0, 0]
    assert got == 0.0 and not np.signbit(got)
    assert fmt.dequantize(*tiny)[0, 0] == 2.0**-143


def test_k_not_a_multiple_of_32_is_one_clear_error():
    e = np.zeros((40, 2), ml_dtypes.float8_e4m3fn)
    s = np.full((2, 2), 127, np.uint8).view(ml_dtypes.float8_e8m0fnu)
    with pytest.raises(ValueError) as error:
        matmul((e, s), (e, s), cfg=ENGINE)
    assert str(error.value) == (
        "stationary has K=40 rows; MX operands (mxfp8) take K a multiple of 32 "
        "(one E8M0 scale per 32 elements along K)"
    )


@pytest.mark.parametrize(
    "stationary,moving,fmt,message",
    [
        (
            (np.zeros((32, 1), np.float32), np.zeros((1, 1), np.uint8)),
            None,
            None,
            "stationary is an MX (elements, scales) pair with elements of dtype float32; "
            "allowed: float8_e4m3fn (mxfp8), float8_e5m2 (mxfp8_e5m2), float4_e2m1fn (mxfp4)",
        ),
        (
            None,
            np.zeros((32, 1), ml_dtypes.bfloat16),
            None,
            "stationary is mxfp8 and moving is bf16: MX and other operands do not mix",
        ),
        (None, None, "bf16", "stationary must be one array for bf16"),
    ],
)
def test_operand_errors(stationary, moving, fmt, message):
    pair = MX_FORMATS["mxfp8"].quantize(np.zeros((32, 1)))
    stationary = pair if stationary is None else stationary
    moving = pair if moving is None else moving
    with pytest.raises(ValueError) as error:
        matmul(stationary, moving, cfg=ENGINE, fmt=fmt)
    assert str(error.value) == message


def test_the_cycle_exact_rtl_model_refuses_mx():
    with pytest.raises(ValueError, match="^cfg has MX formats, which the RTL"):
        EngineTiming(EngineConfig(4, 4, "mxfp8"))


def test_mx_streams_a_beat_a_cycle_like_fp8():
    cfg = EngineConfig(128, 128, ["fp8_e4m3", *MX])
    for mode in ("alone", "back_to_back", "reuse"):
        fp8 = matmul_cycles(128, 128, 512, cfg=cfg, mode=mode, fmt="fp8_e4m3")
        assert all(matmul_cycles(128, 128, 512, cfg=cfg, mode=mode, fmt=f) == fp8 for f in MX)


def test_trn3_prices_mx_at_four_rows_per_pe():
    """trn3: tensor.mx_max_k = 512 on 128 rows, FP8's four rows per PE; 8 cores x 128 x 128 x
    2 x 4 x 2.5597 GHz = 2684 TFLOPS, and its chip_mxfp8 clock gives the published 2517."""
    spec = load_preset("trn3")
    assert [spec.rows_per_pe(f) for f in ("bf16", "fp8_e4m3", *MX)] == [1, 4, 4, 4, 4]
    for f in MX:
        assert math.isclose(spec.peak_flops(f), 4 * spec.peak_flops("bf16"), rel_tol=1e-12)
        assert math.isclose(spec.peak_flops(f), 2684e12, rel_tol=1e-12)
    slow = load_preset("trn3", choose={"tensor.freq_hz": "chip_mxfp8"})
    assert math.isclose(slow.peak_flops("mxfp8"), spec.published.dense_mx_flops, rel_tol=1e-9)


@pytest.mark.parametrize("preset", ["trn1", "trn2"])
def test_mx_on_a_chip_without_it_is_one_clear_error(preset):
    spec = load_preset(preset)
    with pytest.raises(PresetError) as error:
        spec.peak_flops("mxfp4")
    assert str(error.value) == (
        f"format mxfp4 is an MX format, which {preset}'s tensor engine does not have; "
        "presets with MX formats: trn3"
    )
    assert get_format("mxfp4").kind == "mx"


def test_the_tensor_study_runs_mx_at_four_rows_per_pe():
    from tlm.studies import run_study

    spec = load_preset("trn3")
    r = run_study("tensor", preset="trn3", format="mxfp4", k=512, n=[512, 64]).results
    per_core = 128 * 128 * 2 * 4 * spec.tensor.freq_hz
    assert r.peak_flop_per_s == pytest.approx(per_core, rel=1e-12)
    assert [p.cycles for p in r.series] == [512, 128]  # back to back: max(N, 512 / 4 rows)
    assert r.series[0].pe_utilisation_fraction == 1.0


@pytest.mark.parametrize(
    "inputs,message",
    [
        (
            {"preset": "trn2", "format": "mxfp8"},
            "format: 'mxfp8' is an MX format, which trn2's tensor engine does not have; "
            "allowed: one of bf16, fp16, fp32, fp8_e4m3, fp8_e4m3fn, fp8_e5m2, int8, tf32 "
            "(MX formats are on trn3)",
        ),
        (
            {"preset": "trn3", "format": "mxfp8", "k": 96 + 1},
            "k: 97 is not allowed; allowed: a multiple of 32 in 32..512 for mxfp8 (one E8M0 "
            "scale per 32 elements of K)",
        ),
    ],
)
def test_the_tensor_study_refuses_mx_where_it_cannot_run(inputs, message):
    from tlm.studies import run_study
    from tlm.studies.protocol import InputError

    with pytest.raises(InputError) as error:
        run_study("tensor", **inputs)
    assert str(error.value) == message
