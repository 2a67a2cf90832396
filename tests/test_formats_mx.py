"""OCP MX formats of tlm.formats: the reference quantisation on hand-worked blocks, the special
blocks (zeros, NaN, infinity, saturation, subnormal elements, E8M0's extremes), and the error
bound of the round trip as a Hypothesis property."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tlm.formats import (
    E8M0_NAN,
    FORMATS,
    MX_FORMATS,
    PE_FORMATS,
    MXFormat,
    format_set,
    formats_mix,
    get_format,
)

MXFP8, MXFP8_E5M2, MXFP4 = (MX_FORMATS[n] for n in ("mxfp8", "mxfp8_e5m2", "mxfp4"))


def block(*head, fill=0.0, dtype=np.float64):
    """One block of 32 values along axis 0: ``head`` then ``fill``."""
    values = np.full(32, fill, dtype)
    values[: len(head)] = head
    return values


def codes(scales):
    return np.asarray(scales).view(np.uint8)


def test_the_registry_names_each_mx_format_once():
    assert list(MX_FORMATS) == ["mxfp8", "mxfp8_e5m2", "mxfp4"]
    assert all(FORMATS[n] is f for n, f in MX_FORMATS.items())
    assert get_format("mxfp8").element is get_format("fp8_e4m3fn")  # OCP E4M3: max 448
    assert MXFP8_E5M2.element is get_format("fp8_e5m2")
    assert MXFP4.element.dtype == np.dtype(ml_dtypes.float4_e2m1fn)
    assert [(f.bits, f.storage_bits, f.emax_elem) for f in MX_FORMATS.values()] == [
        (8, 8.25, 8),
        (8, 8.25, 15),
        (4, 4.25, 2),
    ]
    # "all" stays the RTL engine's formats (its port codes); MX formats are named one by one
    assert format_set("all") == tuple(PE_FORMATS.values())
    assert [f.name for f in format_set("mxfp4,bf16")] == ["bf16", "mxfp4"]
    assert formats_mix("mxfp8", "mxfp4") and not formats_mix("mxfp8", "fp8_e4m3fn")


def test_mxfp8_hand_worked_block():
    # max |x| = 3: floor(log2 3) = 1, minus E4M3's emax 8: shared exponent -7, code 127 - 7.
    # 3 * 2**7 = 384 = 1.5 * 2**8 exactly. -0.1 * 2**7 = -12.8 lies in [8, 16), where E4M3's
    # step is 2**(3 - 3) = 1: rounds to -13, which decodes to -13 / 128 = -0.1015625.
    elements, scales = MXFP8.quantize(block(3.0, -0.1))
    assert codes(scales).tolist() == [120]
    assert elements[:3].astype(float).tolist() == [384.0, -13.0, 0.0]
    assert MXFP8.dequantize(elements, scales)[:3].tolist() == [3.0, -0.1015625, 0.0]


def test_mxfp4_hand_worked_block_rounds_ties_to_even():
    # max |x| = 6: floor(log2 6) = 2 = E2M1's emax: shared exponent 0, scale 1 (code 127).
    # E2M1's step is 0.5 below 2: 1.25 is a tie between 1.0 and 1.5 -> 1.0 (even); -0.75 a tie
    # between -0.5 and -1.0 -> -1.0 (even); 0.2 -> 0. Step 1 in [2, 4): 2.5 -> 2 (even).
    elements, scales = MXFP4.quantize(block(6.0, 1.25, -0.75, 0.2, 2.5))
    assert codes(scales).tolist() == [127]
    assert elements[:5].astype(float).tolist() == [6.0, 1.0, -1.0, 0.0, 2.0]


def test_blocks_run_along_the_axis_asked():
    x = np.zeros((2, 64))
    x[0, 0], x[0, 40], x[1, 5] = 1.0, 64.0, 0.5
    elements, scales = MXFP8.quantize(x, axis=1)
    assert scales.shape == (2, 2)
    # 1 -> 2**(0 - 8); 64 -> 2**(6 - 8); 0.5 -> 2**(-1 - 8); the zero block -> 2**-127
    assert codes(scales).tolist() == [[119, 125], [118, 0]]
    np.testing.assert_array_equal(MXFP8.dequantize(elements, scales, axis=1), x)


def test_all_zero_block_takes_the_least_scale():
    # max |x| = 0: the reference code takes floor(log2(FP32's least normal)) = -126, and
    # -126 - 8 is clamped to E8M0's least exponent, -127: code 0x00, elements +0 and -0.
    x = block(-0.0)
    elements, scales = MXFP8.quantize(x)
    assert codes(scales).tolist() == [0]
    assert elements.view(np.uint8).tolist() == [0x80] + [0] * 31
    assert np.array_equal(MXFP8.dequantize(elements, scales), x)


@pytest.mark.parametrize("special", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("name", list(MX_FORMATS))
def test_a_nan_or_infinity_makes_its_block_nan(name, special):
    fmt = MX_FORMATS[name]
    x = np.concatenate([block(1.0, special), block(2.0)])
    elements, scales = fmt.quantize(x)
    assert codes(scales).tolist() == [E8M0_NAN, 127 + 1 - fmt.emax_elem]
    out = fmt.dequantize(elements, scales)
    assert np.isnan(out[:32]).all() and out[32] == 2.0 and not np.isnan(out[32:]).any()


def test_a_shared_exponent_above_127_is_nan():
    # 2**300 (float64 input): 300 - 8 > 127, beyond E8M0.
    _, scales = MXFP8.quantize(block(2.0**300))
    assert codes(scales).tolist() == [E8M0_NAN]


def test_elements_saturate_at_the_largest_normal():
    # MXFP8: max 500, floor(log2 500) = 8 - 8 = 0, scale 1. 500 lies in [256, 512), step 32:
    # 500 / 32 = 15.625 rounds to 16 -> 512, above E4M3's 448: saturates to 448.
    # MXFP4: 7 -> scale 1 (floor(log2 7) = 2); step 2 in [4, 8): 3.5 -> 4 -> 8 > 6: 6.
    e8, s8 = MXFP8.quantize(block(500.0, -500.0))
    e4, s4 = MXFP4.quantize(block(7.0, -7.0))
    assert codes(s8).tolist() == codes(s4).tolist() == [127]
    assert e8[:2].astype(float).tolist() == [448.0, -448.0]
    assert e4[:2].astype(float).tolist() == [6.0, -6.0]


def test_subnormal_elements():
    # Scale 1 (max 448). E4M3's least subnormal is 2**-9 and its step below 2**-6 is 2**-9:
    # 2**-9 stays; 2**-10 is a tie between 0 and 2**-9 -> 0 (even); 3 * 2**-10 a tie between
    # 2**-9 and 2**-8 -> 2**-8 (even); 5 * 2**-9 is exact.
    x = block(448.0, 2.0**-9, 2.0**-10, 3 * 2.0**-10, 5 * 2.0**-9)
    elements, scales = MXFP8.quantize(x)
    assert codes(scales).tolist() == [127]
    assert elements[:5].astype(float).tolist() == [448.0, 2.0**-9, 0.0, 2.0**-8, 5 * 2.0**-9]


def test_e8m0_extremes():
    # Least: max 2**-140 wants scale 2**(-140 - 15) in MXFP8 E5M2, clamped to 2**-127; the
    # element 2**-13 is an E5M2 subnormal (least 2**-16), so the value survives exactly.
    tiny = block(2.0**-140)
    elements, scales = MXFP8_E5M2.quantize(tiny)
    assert codes(scales).tolist() == [0]
    assert MXFP8_E5M2.dequantize(elements, scales)[0] == 2.0**-140
    # Greatest: max 2**135 -> 135 - 8 = 127, code 254; element 256, value 2**135 exactly.
    elements, scales = MXFP8.quantize(block(2.0**135))
    assert codes(scales).tolist() == [254]
    assert MXFP8.dequantize(elements, scales)[0] == 2.0**135
    # FP32's largest finite (just under 2**128): 127 - 8 = 119, code 119 + 127 = 246; no
    # float32 block reaches E8M0's NaN.
    _, scales = MXFP8.quantize(block(np.finfo(np.float32).max, dtype=np.float32))
    assert codes(scales).tolist() == [246]


def test_float32_and_bfloat16_inputs_quantise_as_their_float64_values():
    rng = np.random.default_rng(3)
    x = rng.standard_normal(64).astype(np.float32)
    for dtype in (np.float32, ml_dtypes.bfloat16, np.float16):
        xs = x.astype(dtype)
        got, want = MXFP4.quantize(xs), MXFP4.quantize(xs.astype(np.float64))
        assert all(
            np.array_equal(a.view(np.uint8), b.view(np.uint8))
            for a, b in zip(got, want, strict=True)
        )


def test_rounding_agrees_with_ml_dtypes_on_float32(seed):
    """ml_dtypes rounds float32 to the element type once (its float64 cast goes through
    float32, so it is not the reference there); x / scale of a float32 is a float32."""
    rng = np.random.default_rng(seed)
    for fmt in MX_FORMATS.values():
        x = (rng.standard_normal((32, 64)) * 2.0 ** rng.integers(-20, 20, (1, 64))).astype(
            np.float32
        )
        elements, scales = fmt.quantize(x)
        y = (x / scales.astype(np.float32)).clip(-fmt.max_value, fmt.max_value)
        np.testing.assert_array_equal(
            elements.astype(np.float32), y.astype(fmt.dtype).astype(np.float32), err_msg=fmt.name
        )


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: MXFP8.quantize(np.zeros(40)),
            "values has 40 elements along axis 0; mxfp8 "
            "takes multiples of 32 (one E8M0 scale per block of 32)",
        ),
        (
            lambda: MXFP8.quantize(np.zeros(32, np.int32)),
            "values must be floating point (float16, bfloat16, float32, float64), not int32",
        ),
        (
            lambda: MXFP8.quantize(np.zeros((32, 2)), axis=2),
            "axis must be one of -2..1 for values of shape (32, 2), not 2",
        ),
        (
            lambda: MXFP4.dequantize(np.zeros(32, ml_dtypes.float4_e2m1fn), np.zeros(2, np.uint8)),
            "scales must be float8_e8m0fnu (E8M0) for mxfp4, not uint8",
        ),
        (
            lambda: MXFP4.dequantize(np.zeros(32, np.float32), None),
            "elements must be float4_e2m1fn for mxfp4, not float32",
        ),
        (
            lambda: MXFormat("mx", get_format("bf16")),
            "element must be a FloatFormat of at most 8 bits, not",
        ),
    ],
)
def test_errors_name_the_argument_the_value_and_what_is_allowed(call, message):
    with pytest.raises(ValueError) as error:
        call()
    assert str(error.value).startswith(message)


def test_scales_of_the_wrong_shape_are_refused():
    elements, scales = MXFP8.quantize(np.zeros((64, 3)))
    with pytest.raises(ValueError, match=r"scales must have shape \(2, 3\) .* not \(3,\)"):
        MXFP8.dequantize(elements, scales[0])


def ulp(fmt, y):
    """The element type's step at ``y`` (exact powers of two)."""
    e = np.maximum(np.frexp(np.abs(y))[1] - 1, 2 - (1 << (fmt.element.exp_bits - 1)))
    return np.ldexp(1.0, e - fmt.element.man_bits)


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(list(MX_FORMATS)),
    values=st.lists(
        st.floats(-(2.0**100), 2.0**100, allow_nan=False, allow_subnormal=True, width=32),
        min_size=32,
        max_size=32,
    ),
)
def test_round_trip_error_is_at_most_half_an_element_ulp_times_the_scale(name, values):
    """For every value whose x / scale lies within the element's range (the block's largest
    may saturate: the reference algorithm's floor(log2) leaves x / scale below 2**(emax+1)),
    |dequantise(quantise(x)) - x| <= ulp(x / scale) / 2 * scale, exactly (all in float64)."""
    fmt = MX_FORMATS[name]
    x = np.array(values, np.float64)
    elements, scales = fmt.quantize(x)
    scale = float(scales[0])
    y = x / scale  # exact: a power of two
    error = np.abs(fmt.dequantize(elements, scales) - x)
    inside = np.abs(y) <= fmt.max_value
    assert (error[inside] <= ulp(fmt, y[inside]) / 2 * scale).all()
    assert (np.abs(elements.astype(float)) <= fmt.max_value).all()
    # requantising the dequantised block gives it back (the format's values are fixed points)
    again = fmt.quantize(fmt.dequantize(elements, scales))
    assert np.array_equal(fmt.dequantize(*again), fmt.dequantize(elements, scales))
