"""Chip presets: validated on load, every figure sourced, peaks equal the published figures."""

import re

import pytest

from tlm.presets import PRESETS, PresetError, load_preset

GiB = 2**30


@pytest.mark.parametrize("name", PRESETS)
def test_loads_and_every_figure_has_a_source(name):
    spec = load_preset(name)
    assert spec.name == name
    assert all(spec.sources[key] for key in spec.sources)
    assert spec.cores_per_hbm_stack >= 1


@pytest.mark.parametrize(
    "name,dtype,choose,published",
    [
        ("trn2", "bf16", None, 667e12),
        ("trn2", "bf16", {"tensor.freq_hz": "chip_bf16_dec2024"}, 655e12),
        ("trn2", "fp8_e4m3", {"tensor.freq_hz": "chip_fp8"}, 1299e12),
        ("trn2", "fp8_e4m3", {"tensor.freq_hz": "chip_fp8_dec2024"}, 1287e12),
        ("trn1", "bf16", None, 190e12),
        ("trn3", "bf16", None, 671e12),
        ("trn3", "fp8_e4m3", {"tensor.freq_hz": "chip_mxfp8"}, 2517e12),
    ],
)
def test_peaks_reproduce_published_figures_exactly(name, dtype, choose, published):
    assert load_preset(name, choose).peak_flops(dtype) == published


def test_trn2_published_figures_are_kept_with_alternatives():
    spec = load_preset("trn2")
    assert spec.published.dense_bf16_flops == 667e12
    assert (
        load_preset("trn2", {"published.dense_bf16_flops": "dec2024"}).published.dense_bf16_flops
        == 655e12
    )
    assert spec.chip.hbm_bandwidth_Bps == 2.9e12
    assert (
        load_preset("trn2", {"chip.hbm_bandwidth_Bps": "later_page"}).chip.hbm_bandwidth_Bps
        == 3.0e12
    )
    # core vs chip clock: the NKI guide's 2.4 GHz gives 8 x 78.6 = 629 TFLOPS, not 667
    core = load_preset("trn2", {"tensor.freq_hz": "core_nki2"})
    assert core.tensor.freq_hz == 2.4e9
    assert core.peak_flops("bf16") == 8 * 128 * 128 * 2 * 2.4e9


def test_trn2_capacities_match_the_facts():
    spec = load_preset("trn2")
    c, core = spec.chip, spec.core
    assert c.cores * core.sbuf_partitions * core.sbuf_partition_bytes == 224 * 2**20  # 224 MiB
    assert core.sbuf_partitions * core.psum_partition_bytes == 2 * 2**20  # 2 MiB per core
    assert core.psum_partition_bytes // core.psum_banks == 2048  # 512 fp32 per bank
    assert c.hbm_stacks * c.hbm_stack_capacity_bytes == 96 * GiB
    assert spec.cores_per_hbm_stack == 2
    assert c.cores * core.dma_engines == 128


def write(tmp_path, text):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    return path


def trn2_text():
    from importlib import resources

    return resources.files("tlm.presets").joinpath("trn2.toml").read_text()


def test_unknown_key_is_refused(tmp_path):
    path = write(tmp_path, trn2_text().replace("[vector]", "[vector]\nwidth_lanes = 3"))
    with pytest.raises(PresetError, match=r"bad.toml: vector.width_lanes: Extra inputs"):
        load_preset(path)


def test_undeclared_source_is_refused(tmp_path):
    path = write(tmp_path, trn2_text().replace('source = "T2 NKI2 NKIDMA"', 'source = "T2 BLOG"'))
    with pytest.raises(PresetError, match=re.escape("cites source 'BLOG', which is not in")):
        load_preset(path)


def test_negative_figure_is_refused(tmp_path):
    path = write(tmp_path, trn2_text().replace("cores = { value = 8", "cores = { value = -8"))
    with pytest.raises(PresetError, match="cores \\(picked\\) must be positive, not -8"):
        load_preset(path)


def test_bad_choice_is_refused():
    with pytest.raises(
        PresetError,
        match=re.escape(
            "choose['tensor.freq_hz'] must name one of its alternatives (chip_bf16_dec2024, "
            "chip_fp8, chip_fp8_dec2024, core_nki2), not 'fast'"
        ),
    ):
        load_preset("trn2", {"tensor.freq_hz": "fast"})
    with pytest.raises(PresetError, match="choose names figures the preset does not have: x.y"):
        load_preset("trn2", {"x.y": "z"})
    with pytest.raises(PresetError, match="preset must be one of trn1, trn2, trn3"):
        load_preset("trn9")
