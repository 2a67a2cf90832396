"""hdl/synth/power.py: the dynamic-power proxy's command on a 2x2 engine (a few seconds) and its
errors."""

import json

import pytest
from cli import usage_error

from hdl.synth.power import main


def test_power_json_has_the_documented_fields(tmp_path):
    """int8 and FP8 GEMMs on 2x2 engines: every documented field; int8 on its own engine is
    the unit; an FP8 MAC toggles more nets than an int8 MAC."""
    out = tmp_path / "power.json"
    argv = ["--format", "int8,fp8_e4m3", "--size", "2x2", "--n", "4", "--seed", "5"]
    assert main([*argv, "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert {"proxy", "omits", "engine", "gemm", "operands", "seed", "formats", "seconds"} <= set(
        result
    )
    assert result["seed"] == 5 and result["gemm"] == {"k": 2, "m": 2, "n": 4, "macs": 16}
    assert "clock tree" in result["omits"] and "SRAM" in result["omits"]
    fields = {"cycles", "macs", "nets", "bits", "toggles", "toggles_per_mac"}
    fields |= {"toggles_per_cycle", "relative_to_int8", "relative_to_int8_same_engine"}
    for fmt in ("int8", "fp8_e4m3"):
        for engine in ("alone", "all"):
            run = result["formats"][fmt][engine]
            assert fields <= set(run), (fmt, engine)
            assert run["toggles"] > 0 and run["macs"] == 16
    assert result["formats"]["int8"]["alone"]["relative_to_int8"] == 1
    assert result["formats"]["int8"]["all"]["relative_to_int8_same_engine"] == 1
    assert result["formats"]["fp8_e4m3"]["alone"]["relative_to_int8"] > 1


def test_one_stage_engines(tmp_path):
    """``--one-stage`` adds the float engines in one stage (ONE_STAGE_FLOAT): FP8 alone and
    every format (int8 too, which has no float pipeline of its own); each GEMM is checked
    against the TLM every cycle as on the default engines, and takes less time (the latency
    of the default's pipeline)."""
    out = tmp_path / "power.json"
    argv = ["--format", "int8,fp8_e4m3", "--size", "2x2", "--n", "4", "--seed", "5"]
    assert main([*argv, "--one-stage", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["engines"]) == {"alone", "all", "alone_one_stage", "all_one_stage"}
    assert set(result["formats"]["int8"]) == {"alone", "all", "all_one_stage"}
    fp8 = result["formats"]["fp8_e4m3"]
    assert set(fp8) == {"alone", "all", "alone_one_stage", "all_one_stage"}
    assert fp8["alone_one_stage"]["cycles"] < fp8["alone"]["cycles"]
    assert fp8["alone_one_stage"]["macs"] == 16 and fp8["alone_one_stage"]["toggles"] > 0
    assert result["formats"]["int8"]["all_one_stage"]["relative_to_int8_same_engine"] == 1


@pytest.mark.parametrize(
    "flag,value,allowed",
    [
        ("--format", "int4", "int8, fp8_e4m3"),
        ("--format", "mxfp8", "int8, fp8_e4m3"),
        ("--size", "0x8", "ROWSxCOLS, each 1..32"),
        ("--size", "64x64", "ROWSxCOLS, each 1..32"),
        ("--n", "0", "1..512"),
    ],
)
def test_bad_flag_is_one_line_and_exit_2(flag, value, allowed):
    line = usage_error("-m", "hdl.synth.power", flag, value)
    assert flag in line and repr(value) in line and allowed in line, line
