"""tlm.tensor.matmul: exact values and clear errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tlm.formats import IntFormat, get_format
from tlm.tensor import EngineConfig, matmul


def reference(stationary, moving):
    return (stationary.astype(np.int64).T @ moving.astype(np.int64)).astype(np.int32)


def test_random_shapes_exact(seed):
    rng = np.random.default_rng(seed)
    for _ in range(50):
        k, m, n = rng.integers(1, 129), rng.integers(1, 129), rng.integers(1, 513)
        s = rng.integers(-128, 128, (k, m)).astype(np.int8)
        x = rng.integers(-128, 128, (k, n)).astype(np.int8)
        got = matmul(s, x)
        assert got.dtype == np.int32 and got.shape == (m, n)
        np.testing.assert_array_equal(got, reference(s, x))


def test_extremes_at_full_size():
    s = np.full((128, 128), -128, np.int8)
    x = np.full((128, 512), -128, np.int8)
    assert (matmul(s, x) == 128 * 16384).all()
    x[:] = 127
    assert (matmul(s, x) == -128 * 127 * 128).all()


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 8).flatmap(
        lambda k: st.tuples(
            arrays(np.int8, st.tuples(st.just(k), st.integers(1, 8))),
            arrays(np.int8, st.tuples(st.just(k), st.integers(1, 8))),
        )
    )
)
def test_property_matches_int64(pair):
    s, x = pair
    np.testing.assert_array_equal(matmul(s, x), reference(s, x))


def test_wide_format_wraps_like_the_accumulator():
    cfg = EngineConfig(4, 2, IntFormat("int16w", bits=16, acc_bits=32))
    s = np.full((4, 2), -(1 << 15), np.int16)
    x = np.full((4, 1), -(1 << 15), np.int16)
    expected = np.int64(4 * (1 << 30))
    got = matmul(s, x, cfg=cfg)
    assert got[0, 0] == np.int64(expected).astype(np.int32)  # wraps modulo 2**32


@pytest.mark.parametrize(
    "stationary,moving,message",
    [
        (
            np.zeros((129, 4), np.int8),
            np.zeros((129, 4), np.int8),
            "K=129 is outside 1..128 for a 128x128 engine",
        ),
        (
            np.zeros((4, 129), np.int8),
            np.zeros((4, 4), np.int8),
            "M=129 is outside 1..128 for a 128x128 engine",
        ),
        (
            np.zeros((4, 4), np.int8),
            np.zeros((4, 513), np.int8),
            "N=513 is outside 1..512 for a 128x128 engine",
        ),
        (
            np.zeros((4, 4), np.int8),
            np.zeros((5, 4), np.int8),
            "stationary has K=4 rows but moving has K=5; the contraction sizes must match",
        ),
        (
            np.zeros((4, 4), np.float32),
            np.zeros((4, 4), np.int8),
            "stationary is fp32 and moving is int8: integer and floating-point operands do not mix",
        ),
        (
            np.zeros((4, 4), np.float64),
            np.zeros((4, 4), np.float64),
            "stationary has dtype float64, which the tensor engine does not take; allowed: int8,"
            " float8_e4m3, float8_e4m3fn, float8_e5m2, bfloat16, float16, float32 (TF32 as"
            " float32 with fmt='tf32')",
        ),
        (
            np.zeros((4, 4), np.int8),
            np.full((4, 4), 200, np.int16),
            "moving holds values in 200..200; int8 allows -128..127",
        ),
        (
            np.zeros(4, np.int8),
            np.zeros((4, 4), np.int8),
            "stationary must be a 2-D array, not one of shape (4,)",
        ),
    ],
)
def test_errors(stationary, moving, message):
    with pytest.raises(ValueError) as info:
        matmul(stationary, moving)
    assert str(info.value) == message


def test_wider_int_dtypes_with_values_in_range_are_accepted():
    s = np.array([[1, -128]], np.int64).T
    x = np.array([[127]], np.int32).T[:1].repeat(2, axis=0)
    np.testing.assert_array_equal(matmul(s, x), [[127 - 128 * 127]])


def test_format_lookup_errors():
    with pytest.raises(ValueError) as info:
        get_format("fp8")
    assert str(info.value) == (
        "format must be one of bf16, fp16, fp32, fp8_e4m3, fp8_e4m3fn, "
        "fp8_e5m2, int8, mxfp4, mxfp8, mxfp8_e5m2, tf32, not 'fp8'"
    )
    with pytest.raises(ValueError, match=r"^rows must be an integer in 1..1024, not 0$"):
        EngineConfig(0, 4)
    with pytest.raises(ValueError, match=r"^cols must be an integer in 1..1024, not 'x'$"):
        EngineConfig(4, "x")
    with pytest.raises(ValueError, match=r"^bits must be an integer in 2..32, not 1$"):
        IntFormat("int1", bits=1, acc_bits=32)
