"""Power and cost: hardware files with sources (Trn figures from the presets), the Clos port
count, power, energy and cost by hand, vectorised."""

import numpy as np
import pytest

from tlm.cluster.cost import (
    DEFAULT_FABRIC,
    Fabric,
    clos_tiers,
    power,
    run_cost,
    switch_ports_per_chip,
)
from tlm.hardware import HARDWARE, HardwareError, load_hardware
from tlm.presets import load_preset
from tlm.system import load_system

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off


@pytest.mark.parametrize("name", HARDWARE)
def test_every_figure_has_a_source(name):
    hw = load_hardware(name)
    for key in (
        "power_w",
        "capex_usd",
        "hbm_bytes",
        "hbm_bandwidth_Bps",
        "server_chips",
        "host_power_w",
        "instance_usd_per_hour",
        "scale_out_bandwidth_Bps",
    ):
        assert hw.sources[key].split(": ")[-1].strip(), key


@pytest.mark.parametrize(
    "name,system",
    [("trn1", "trn1-server"), ("trn2", "trn2-ultraserver"), ("trn3", "trn3-ultraserver")],
)
def test_trainium_figures_come_from_the_presets(name, system):
    hw, spec, sys = load_hardware(name), load_preset(name), load_system(system)
    assert hw.peak_flops("bf16") == spec.published.dense_bf16_flops
    assert hw.peak_flops("fp8_e4m3") == spec.published.dense_fp8_flops
    assert hw.hbm_bytes == spec.chip.hbm_stacks * spec.chip.hbm_stack_capacity_bytes
    assert (hw.power_w, hw.capex_usd) == (spec.cost.power_w, spec.cost.capex_usd)
    assert hw.scale_up_chips == sys.chips_per_node
    assert hw.scale_out_bandwidth_Bps == sys.file.efa.nic_bandwidth_Bps.value


def test_nvidia_datasheet_figures():
    h100, a100 = load_hardware("h100"), load_hardware("a100")
    assert (h100.peak_flops("bf16"), h100.peak_flops("fp8")) == (989e12, 1979e12)
    assert (h100.hbm_bandwidth_Bps, h100.power_w, h100.scale_up_bandwidth_Bps) == (
        3.35e12,
        700,
        900e9,
    )
    assert (a100.peak_flops("fp16"), a100.power_w, a100.scale_out_bandwidth_Bps) == (
        312e12,
        400,
        25e9,
    )
    assert h100.capex_usd == 23000 and h100.instance_usd_per_hour == 55.04  # prices.toml
    with pytest.raises(ValueError, match="fmt must be one of bf16, fp16 for a100, not 'fp8'"):
        a100.peak_flops("fp8")


def test_bad_hardware(tmp_path):
    with pytest.raises(HardwareError, match="must be one of trn1, trn2, trn3, trn3-gen2, a100"):
        load_hardware("b200")
    text = tmp_path / "x.toml"
    text.write_text(
        'name = "x"\nchip = "trn2"\nsystem = "trn2-ultraserver"\n[sources]\nA = "a"\n'
        '[scale_out]\nnic_bandwidth_Bps = { value = 1, source = "A" }\n'
        '[server]\nchips = { value = 16, source = "A" }\n'
        'host_power_w = { value = 1, source = "A" }\n'
        'host_capex_usd = { value = 1, source = "B" }\n'
        '[cloud]\ninstance = "trn2.48xlarge"\n'
    )
    with pytest.raises(HardwareError, match="takes its figures from it; remove .scale_out."):
        load_hardware(text)
    text.write_text(
        text.read_text().replace(
            '[scale_out]\nnic_bandwidth_Bps = { value = 1, source = "A" }\n', ""
        )
    )
    with pytest.raises(HardwareError, match="server.host_capex_usd cites source 'B'"):
        load_hardware(text)


def test_clos_tiers_and_ports():
    assert clos_tiers(np.array([1, 64, 65, 2048, 2049]), 64).tolist() == [1, 1, 2, 2, 3]
    h100, trn2 = load_hardware("h100"), load_hardware("trn2")
    ports, tiers = switch_ports_per_chip(h100, np.array([8, 1024, 16384]))
    assert tiers.tolist() == [1, 2, 3] and ports.tolist() == [1.0, 3.0, 5.0]
    ports, _ = switch_ports_per_chip(trn2, 16384)  # 200 Gb/s per chip: half a 400 Gb/s port
    assert ports == 0.5 * 5
    over = switch_ports_per_chip(h100, 16384, Fabric(oversubscription=2.0))[0]
    assert over == 1 + 2 * 2 / 2


def test_power_by_hand():
    h100 = load_hardware("h100")
    p = power(h100, 16384, pue=1.25)
    it = 16384 * 700 + 2048 * 4600 + 16384 * 5 * DEFAULT_FABRIC.port_power_w
    assert p.it_w == pytest.approx(it) and p.total_w == pytest.approx(1.25 * it)
    assert p.facility_overhead_w == pytest.approx(0.25 * it)


def test_run_cost_by_hand():
    trn2 = load_hardware("trn2")
    chips, t, steps, g = 1024, 5.0, 2000, 0.8
    c = run_cost(
        trn2,
        chips,
        step_time_s=t,
        steps=steps,
        goodput=g,
        pue=1.2,
        usd_per_kwh=0.1,
        amortisation_years=4.0,
    )
    wall = steps * t / g
    assert c.run_wall_s == wall
    ports = 1024 * 0.5 * 3  # 512 endpoint ports: two tiers
    it = 1024 * 500 + 64 * 3000 + ports * 25
    assert c.step_energy_j == pytest.approx(1.2 * it * t)
    capex = 1024 * 4000 + 64 * 50000 + ports * 2000
    assert c.capex_usd == pytest.approx(capex)
    energy_usd = 1.2 * it * wall / 3.6e6 * 0.1
    assert c.owned_usd == pytest.approx(capex * wall / (4 * 365.25 * 86400) + energy_usd)
    assert c.cloud_usd == pytest.approx(64 * 46.98 * wall / 3600)


def test_vectorised_and_bad_input():
    rng = np.random.default_rng(seed := 5)
    print("seed", seed)
    n = rng.integers(1, 1_000_000, 50_000)
    t = rng.uniform(0.1, 30, n.size)
    h100 = load_hardware("h100")
    many = run_cost(h100, n, step_time_s=t, steps=100)
    one = run_cost(h100, int(n[7]), step_time_s=float(t[7]), steps=100)
    assert many.cloud_usd[7] == pytest.approx(float(one.cloud_usd))
    assert many.power.total_w[7] == pytest.approx(float(one.power.total_w))
    with pytest.raises(ValueError, match="goodput must be a fraction in \\(0, 1\\], not 1.5"):
        run_cost(h100, 8, step_time_s=1.0, steps=1, goodput=1.5)
    with pytest.raises(ValueError, match="step_time_s must be a positive number"):
        run_cost(h100, 8, step_time_s=0.0, steps=1)
    with pytest.raises(ValueError, match="pue must be a number >= 1, not 0.9"):
        power(h100, 8, pue=0.9)
    with pytest.raises(ValueError, match="radix must be an even integer >= 4, not 7"):
        Fabric(radix=7)


def test_hardware_figures_must_be_positive():
    """Hardware files share the presets' figure check (presets.schema.FigureSection)."""
    from pydantic import ValidationError

    from tlm.hardware import ChipSection

    def fig(v):
        return {"value": v, "source": "X"}

    good = {k: fig(1) for k in ("hbm_bytes", "hbm_bandwidth_Bps", "power_w", "capex_usd")}
    with pytest.raises(ValidationError, match=r"dense_bf16_flops \(picked\) must be positive"):
        ChipSection.model_validate({**good, "dense_bf16_flops": fig(-1)})
    assert ChipSection.model_validate({**good, "dense_bf16_flops": fig(1e15)})
