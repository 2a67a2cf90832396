"""The floating-point numerics contract of tlm.tensor.matmul, checked against independent
references: exact float64 products rounded once to float32, and a scalar loop over k."""

import itertools

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tlm.formats import CANONICAL_NAN_BITS, FLOAT_FORMATS
from tlm.tensor import EngineConfig, matmul

FP8 = ["fp8_e4m3", "fp8_e4m3fn", "fp8_e5m2"]
WIDE = EngineConfig(128, 256, "all")


def bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


def canonical(values):
    out = np.array(values, np.float32)
    out[np.isnan(out)] = np.uint32(CANONICAL_NAN_BITS).view(np.float32)
    return out


def all_codes(fmt):
    return np.arange(256, dtype=np.uint8).view(FLOAT_FORMATS[fmt].dtype)


@pytest.mark.parametrize("s_fmt,m_fmt", list(itertools.product(FP8, FP8)))
def test_every_fp8_pair(s_fmt, m_fmt):
    w, x = all_codes(s_fmt), all_codes(m_fmt)
    got = matmul(w[None, :], x[None, :], cfg=WIDE)  # K=1: +0.0 + fp32(w * x)
    with np.errstate(all="ignore"):
        exact = np.multiply.outer(w.astype(np.float64), x.astype(np.float64))  # exact here
        want = canonical(np.float32(0.0) + exact.astype(np.float32))
    np.testing.assert_array_equal(bits(got), bits(want))


EDGES = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    1.5,
    3.0e38,
    -3.0e38,
    1e-40,
    -1e-45,
    6e-8,
    np.inf,
    -np.inf,
    np.nan,
    65504.0,
    448.0,
    240.0,
    57344.0,
    2.0**-126,
    1 + 2.0**-7,
]


def edge_values(fmt, rng, shape):
    dtype = FLOAT_FORMATS[fmt].dtype
    with np.errstate(all="ignore"):
        edges = np.array(EDGES, np.float32).astype(dtype)
        uniform = rng.standard_normal(shape).astype(np.float32) * rng.choice([1e-3, 1, 1e3])
        values = uniform.astype(dtype)
    pick = rng.random(shape) < 0.3
    values[pick] = rng.choice(edges, size=int(pick.sum()))
    return values


def scalar_reference(w, x, w_fmt="", x_fmt=""):
    """The contract, one float32 scalar operation at a time."""
    mask = {"tf32": np.uint32(0xFFFFE000)}
    wf = w.astype(np.float32)
    xf = x.astype(np.float32)
    if w_fmt in mask:
        wf = (wf.view(np.uint32) & mask[w_fmt]).view(np.float32)
    if x_fmt in mask:
        xf = (xf.view(np.uint32) & mask[x_fmt]).view(np.float32)
    k, m = wf.shape
    n = xf.shape[1]
    out = np.zeros((m, n), np.float32)
    with np.errstate(all="ignore"):
        for i in range(m):
            for j in range(n):
                acc = np.float32(0.0)
                for kk in range(k):
                    acc = np.float32(acc + np.float32(wf[kk, i] * xf[kk, j]))
                out[i, j] = acc
    return canonical(out)


@pytest.mark.parametrize(
    "s_fmt,m_fmt",
    [(f, f) for f in FLOAT_FORMATS if f != "tf32"]
    + [("fp8_e4m3", "fp8_e5m2"), ("fp8_e5m2", "fp8_e4m3fn")],
)
def test_edge_values_against_scalar_loop(s_fmt, m_fmt, seed):
    rng = np.random.default_rng(seed)
    for _ in range(4):
        k, m, n = (int(v) for v in rng.integers(1, 9, 3))
        w, x = edge_values(s_fmt, rng, (k, m)), edge_values(m_fmt, rng, (k, n))
        got = matmul(w, x)
        np.testing.assert_array_equal(
            bits(got), bits(scalar_reference(w, x)), err_msg=f"seed {seed}"
        )


def test_tf32_ignores_the_low_13_mantissa_bits(seed):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    x = rng.standard_normal((16, 4)).astype(np.float32)
    noisy = (w.view(np.uint32) ^ rng.integers(0, 1 << 13, w.shape, dtype=np.uint32)).view(
        np.float32
    )
    got = matmul(w, x, fmt="tf32")
    np.testing.assert_array_equal(bits(got), bits(matmul(noisy, x, fmt="tf32")))
    np.testing.assert_array_equal(bits(got), bits(scalar_reference(w, x, "tf32", "tf32")))
    assert not np.array_equal(bits(got), bits(matmul(w, x)))  # FP32 does use those bits


def test_order_of_accumulation_is_k_ascending():
    # In float32, 1 + 1e8 loses the 1, 1e8 - 1e8 does not: the order of k decides.
    x = np.ones((3, 1), np.float32)
    assert matmul(np.array([[1.0], [1.0e8], [-1.0e8]], np.float32), x)[0, 0] == 0.0
    assert matmul(np.array([[1.0e8], [-1.0e8], [1.0]], np.float32), x)[0, 0] == 1.0


def test_ties_round_to_even_and_signed_zero():
    one_ulp_half = np.float32(2.0**-24)
    w = np.array([[1.0], [1.0]], np.float32)
    x = np.array([[1.0], [one_ulp_half]], np.float32)
    assert matmul(w, x)[0, 0] == 1.0  # 1 + 2**-24 is a tie: rounds to even (1.0)
    neg = matmul(np.array([[-1.0]], np.float32), np.array([[0.0]], np.float32))
    assert bits(neg)[0, 0] == 0  # +0.0 + (-0.0) = +0.0


def test_nan_is_canonical():
    w = np.array([[np.inf], [1.0]], np.float32)
    x = np.array([[0.0], [1.0]], np.float32)
    assert bits(matmul(w, x))[0, 0] == CANONICAL_NAN_BITS  # inf * 0
    payload = np.array([[np.uint32(0xFFC12345).view(np.float32)]])
    assert bits(matmul(payload, np.ones((1, 1), np.float32)))[0, 0] == CANONICAL_NAN_BITS


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["bf16", "fp16"]),
    st.integers(1, 6).flatmap(
        lambda k: st.tuples(st.just(k), st.integers(1, 5), st.integers(1, 5))
    ),
    st.integers(0, 2**32 - 1),
)
def test_property_bf16_fp16_bit_patterns(fmt, shape, salt):
    k, m, n = shape
    rng = np.random.default_rng(salt)
    dtype = FLOAT_FORMATS[fmt].dtype
    w = rng.integers(0, 1 << 16, (k, m), dtype=np.uint16).view(dtype)  # every bit pattern
    x = rng.integers(0, 1 << 16, (k, n), dtype=np.uint16).view(dtype)
    np.testing.assert_array_equal(bits(matmul(w, x)), bits(scalar_reference(w, x)))


@pytest.mark.parametrize(
    "s,m,message",
    [
        (
            np.float16,
            ml_dtypes.bfloat16,
            "stationary is fp16 and moving is bf16: only the two FP8 formats may be mixed; "
            "other formats must match",
        ),
        (
            np.float32,
            np.float16,
            "stationary is fp32 and moving is fp16: only the two FP8 formats may be mixed; "
            "other formats must match",
        ),
        (
            ml_dtypes.float8_e4m3,
            np.float32,
            "stationary is fp8_e4m3 and moving is fp32: only the two FP8 formats may be mixed; "
            "other formats must match",
        ),
    ],
)
def test_mixing_rules(s, m, message):
    with pytest.raises(ValueError) as info:
        matmul(np.zeros((2, 2), s), np.zeros((2, 2), m))
    assert str(info.value) == message


def test_named_format_must_match_the_dtype():
    with pytest.raises(ValueError, match=r"^moving must be float32 for tf32, not float16$"):
        matmul(np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float16), fmt="tf32")
