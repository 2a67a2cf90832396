"""hdl/formats.py: shapes of an engine's operands and sums, and the errors for format sets it
cannot build."""

import pytest
from amaranth.hdl import Shape, Signal

from hdl.formats import OperandDecoder, acc_shape, is_int_code, operand_shape
from tlm.formats import IntFormat
from tlm.tensor.config import EngineConfig

INT16 = IntFormat("int16w", bits=16, acc_bits=64)


def test_shapes():
    assert operand_shape(EngineConfig(2, 2)) == Shape(8, signed=True)
    assert acc_shape(EngineConfig(2, 2)) == Shape(32, signed=True)
    assert operand_shape(EngineConfig(2, 2, "int8,bf16")) == Shape(16)
    assert operand_shape(EngineConfig(2, 2, "all")) == Shape(32)
    assert acc_shape(EngineConfig(2, 2, "all")) == Shape(32)


def test_integer_beside_float_needs_a_32_bit_accumulator():
    with pytest.raises(
        ValueError,
        match=r"^format int16w has a 64-bit accumulator; beside floating-point formats "
        r"\(binary32 sums\) an integer format needs acc_bits=32$",
    ):
        acc_shape(EngineConfig(2, 2, [INT16, "bf16"]))


def test_integer_formats_share_an_accumulator():
    with pytest.raises(
        ValueError,
        match=r"^integer formats of one engine must share an accumulator width, not "
        r"int8: 32, int16w: 64$",
    ):
        acc_shape(EngineConfig(2, 2, ["int8", INT16]))


def test_one_integer_format_at_most():
    with pytest.raises(
        ValueError, match=r"^an engine takes at most one integer format, not int8, int16w$"
    ):
        is_int_code(EngineConfig(2, 2, ["int8", INT16, "bf16"]), Signal(2))


def test_an_integer_engine_has_nothing_to_decode():
    with pytest.raises(ValueError, match=r"^an engine of int8 only has no operands to decode$"):
        OperandDecoder(EngineConfig(2, 2))
