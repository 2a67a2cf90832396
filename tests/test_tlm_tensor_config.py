"""tlm/tensor/config.py: the PE's and decoders' stage counts, the split and the latency."""

import pytest

from tlm.tensor.config import (
    DEFAULT_DECODE_STAGES,
    DEFAULT_PE_STAGES,
    ONE_STAGE_FLOAT,
    PE_CUTS,
    PIPELINED_FLOAT,
    EngineConfig,
)


@pytest.mark.parametrize(
    "fmt,stages,message",
    [
        ("int8", 0, "pe_stages must be an integer in 1..2 for a PE of kind 'int', not 0"),
        ("int8", 3, "pe_stages must be an integer in 1..2 for a PE of kind 'int', not 3"),
        ("bf16", 14, "pe_stages must be an integer in 1..13 for a PE of kind 'float', not 14"),
        ("all", "2", "pe_stages must be an integer in 1..13 for a PE of kind 'float', not '2'"),
        (
            "int8,fp32",
            True,
            "pe_stages must be an integer in 1..13 for a PE of kind 'float', not True",
        ),
    ],
)
def test_bad_stage_count_is_one_clear_error(fmt, stages, message):
    with pytest.raises(ValueError) as info:
        EngineConfig(4, 4, fmt, pe_stages=stages)
    assert str(info.value) == message


@pytest.mark.parametrize(
    "fmt,stages,message",
    [
        ("int8", 2, "decode_stages must be an integer in 1..1 for an engine of kind 'int', not 2"),
        (
            "bf16",
            0,
            "decode_stages must be an integer in 1..2 for an engine of kind 'float', not 0",
        ),
        (
            "all",
            1.0,
            "decode_stages must be an integer in 1..2 for an engine of kind 'float', not 1.0",
        ),
    ],
)
def test_bad_decode_stages_is_one_clear_error(fmt, stages, message):
    with pytest.raises(ValueError) as info:
        EngineConfig(4, 4, fmt, decode_stages=stages)
    assert str(info.value) == message


def test_defaults_and_split():
    assert EngineConfig(4, 4).pe_stages == DEFAULT_PE_STAGES["int"]
    assert EngineConfig(4, 4).decode_stages == DEFAULT_DECODE_STAGES["int"] == 1
    cfg = EngineConfig(4, 4, "fp8_e4m3,bf16")
    assert (cfg.pe_stages, cfg.decode_stages) == (DEFAULT_PE_STAGES["float"], 2)
    assert {"pe_stages": cfg.pe_stages, "decode_stages": cfg.decode_stages} == PIPELINED_FLOAT
    for kind, cuts in PE_CUTS.items():
        assert all(c.split(".")[0] in ("mul", "add") for c in cuts), kind
        assert len(set(cuts)) == len(cuts), kind
    cfg = EngineConfig(4, 3, "bf16", pe_stages=4)  # cuts mul.product, add.align, mul.multiply
    assert (cfg.pe_cuts, cfg.mul_stages, cfg.add_stages) == (PE_CUTS["float"][:3], 2, 2)
    cfg = EngineConfig(4, 3, "all", **PIPELINED_FLOAT)  # every mul.* cut, five add.* cuts
    assert (cfg.mul_stages, cfg.add_stages, cfg.decode_stages) == (5, 6, 2)
    assert set(PE_CUTS["float"]) - set(cfg.pe_cuts) == {"add.norm", "add.round"}


@pytest.mark.parametrize("stages,latency", [(1, 4 + 3 + 1), (2, 4 + 1 + 3 + 1)])
def test_latency_counts_add_stages_per_row_and_mul_stages_once(stages, latency):
    assert EngineConfig(4, 3, pe_stages=stages).latency == latency
    cfg = EngineConfig(4, 3, "bf16", pe_stages=5, decode_stages=1)  # mul.product/multiply,
    assert cfg.latency == 4 * 3 + 2 + 3 + 1  # add.align/order
    assert EngineConfig(4, 3, "bf16", pe_stages=5, decode_stages=2).latency == 4 * 3 + 2 + 3 + 2


def test_tag_names_stage_counts_other_than_the_defaults():
    """Generated Verilog and builds are keyed by the tag: configurations that differ only in
    their stages must not share one; the defaults keep the short name."""
    assert EngineConfig(8, 8, "bf16").tag == "r8c8_bf16"
    one = EngineConfig(8, 8, "bf16", **ONE_STAGE_FLOAT)
    assert one.tag == "r8c8_bf16_p1d1"
    assert EngineConfig(8, 8, "bf16", pe_stages=1).tag == "r8c8_bf16_p1d2"
    assert EngineConfig(8, 8, "int8", pe_stages=1, status_bits=4).tag == "r8c8_int8_s4_p1d1"
