"""The one price file: every instance's chips and dated, sourced prices; the hardware files
price their instance from it; every bad input is one line naming the key, value and what is
allowed."""

import datetime

import pytest

from tlm.hardware import HARDWARE, HardwareError, load_hardware
from tlm.hardware.prices import PRICE_KINDS, PriceError, load_prices, price_footing


def test_every_price_is_dated_and_sourced():
    book = load_prices()
    for inst in book.instances:
        assert inst.chips > 0 and inst.price("on_demand").usd_per_hour > 0
        for p in (*inst.prices, *(a for _, a in inst.alternatives)):
            assert p.kind in PRICE_KINDS and isinstance(p.as_of, datetime.date)
            assert p.citation and p.region, p


@pytest.mark.parametrize("name", HARDWARE)
def test_hardware_prices_its_instance_from_the_file(name):
    hw = load_hardware(name)
    inst = load_prices().instance(hw.instance)
    assert (hw.instance_chips, hw.instance_usd_per_hour) == (
        inst.chips,
        inst.price("on_demand").usd_per_hour,
    )
    assert hw.sources["instance_usd_per_hour"].startswith("tlm/hardware/prices.toml instances.")
    footing = price_footing(hw)
    assert footing["price_kind"] == "on_demand" and footing["price_as_of"] == str(hw.price.as_of)


def test_published_figures():
    """The figures as found (docs/cluster.md gives the sources): the June 2025 cut of P5's
    on-demand price, the capacity blocks, trn2's price still ASSUMED."""
    book = load_prices()
    p5 = book.instance("p5.48xlarge")
    assert p5.price().usd_per_hour == 55.04 and p5.price("capacity_block").usd_per_hour == 39.33
    assert dict(p5.alternatives)["on_demand.before_cut"].usd_per_hour == 98.32
    assert book.instance("trn1.32xlarge").price("capacity_block").region == "ap-southeast-4"
    assert book.instance("trn2.48xlarge").price().source == "ASSUMED"


def test_capacity_block_where_published():
    h100 = load_hardware("h100").priced("capacity_block")
    assert h100.instance_usd_per_hour == 39.33 and h100.price.kind == "capacity_block"
    assert h100.sources["instance_usd_per_hour"].endswith("capacity_block: CAPACITY_BLOCKS")
    assert h100.priced("on_demand").instance_usd_per_hour == 55.04
    assert load_hardware("h100") == load_hardware("h100")  # equal by content: caches hold
    with pytest.raises(HardwareError, match=r"^price: 'capacity_block' is not published for "
                       r"trn2.48xlarge \(trn2\); one of on_demand$"):  # fmt: skip
        load_hardware("trn2").priced("capacity_block")
    with pytest.raises(HardwareError, match="^price must be one of on_demand, capacity_block, "
                       "not 'spot'$"):  # fmt: skip
        load_hardware("trn2").priced("spot")


def _hardware(tmp_path, cloud: str):
    text = (
        'name = "x"\nchip = "trn2"\nsystem = "trn2-ultraserver"\n[sources]\nA = "a"\n'
        '[server]\nchips = { value = 16, source = "A" }\n'
        'host_power_w = { value = 1, source = "A" }\n'
        'host_capex_usd = { value = 1, source = "A" }\n'
        f"[cloud]\n{cloud}\n"
    )
    path = tmp_path / "x.toml"
    path.write_text(text)
    return path


def test_bad_instance_and_price_files(tmp_path):
    with pytest.raises(HardwareError, match=r"x.toml: cloud.instance: 'p9.huge' is not in "
                       r"tlm/hardware/prices.toml; one of p5.48xlarge, p4de.24xlarge"):  # fmt: skip
        load_hardware(_hardware(tmp_path, 'instance = "p9.huge"'))
    moved = "x.toml: cloud: usd_per_hour = 1 is not a hardware file's: prices and chips per "
    with pytest.raises(HardwareError, match=moved + "instance live in tlm/hardware/prices.toml"):
        load_hardware(_hardware(tmp_path, 'instance = "i"\nusd_per_hour = 1'))
    prices = tmp_path / "p.toml"
    body = '[sources]\nA = "a"\n[instances.i]\nchips = { value = 4, source = "A" }\n'
    prices.write_text(body + 'on_demand = { value = 2.5, source = "A", as_of = 2026-01-02, '
                      'region = "r" }\n')  # fmt: skip
    hw = load_hardware(_hardware(tmp_path, 'instance = "i"\nprices = "p.toml"'))
    assert (hw.instance_chips, hw.instance_usd_per_hour, hw.price.as_of.year) == (4, 2.5, 2026)
    for bad, message in (
        ('value = -1, source = "A", as_of = 2026-01-02, region = "r"',
         "instances.i.on_demand.value: Input should be greater than 0"),
        ('value = 1, source = "Z", as_of = 2026-01-02, region = "r"',
         r"instances.i.on_demand.source: 'Z' is not in \[sources\] \(A\)"),
        ('value = 1, source = "A", as_of = "soon", region = "r"',
         "instances.i.on_demand.as_of: Input should be a valid date"),
    ):  # fmt: skip
        prices.write_text(body + f"on_demand = {{ {bad} }}\n")
        load_prices.cache_clear()
        with pytest.raises(HardwareError, match=f"x.toml: cloud.prices: .*p.toml: {message}"):
            load_hardware(_hardware(tmp_path, 'instance = "i"\nprices = "p.toml"'))
    with pytest.raises(PriceError, match="instance: 'nope' is not in"):
        load_prices().instance("nope")


def test_studies_price_at_the_kind_picked_and_say_so():
    """``--price`` picks the instance's price; the JSON carries its footing; a kind the
    instance lacks is one line on --price naming the kinds it has."""
    from tlm.studies import InputError, run_study

    args = dict(model="llama3-8b", hardware="h100", tp=4, prompt=512, output=16)
    on_demand = run_study("infer", **args).results
    block = run_study("infer", **args, price="capacity_block").results
    assert (on_demand.price_source, on_demand.price_as_of) == ("CUT2025", "2026-11-09")
    assert (block.price_kind, block.price_per_hour_usd) == ("capacity_block", 39.33)
    assert block.cost_per_million_tokens_usd == pytest.approx(
        on_demand.cost_per_million_tokens_usd * 39.33 / 55.04, rel=1e-12
    )
    cost = run_study("cost", hardware="trn1", chips=1024, step_time_s=10.0, steps=1000,
                     price="capacity_block").results  # fmt: skip
    assert cost.price_kind == "capacity_block" and cost.price_per_hour_usd == 15.49
    with pytest.raises(InputError) as error:
        run_study("infer", **{**args, "hardware": "trn2"}, price="capacity_block")
    assert (error.value.field, error.value.allowed) == (
        "price",
        "one of on_demand for trn2.48xlarge (tlm/hardware/prices.toml)",
    )
    with pytest.raises(InputError) as error:
        run_study("cost", hardware="h100", chips=64, step_time_s=1.0, steps=10, price="spot")
    assert (error.value.field, error.value.allowed) == (
        "price",
        "one of on_demand, capacity_block (where the instance has one, tlm/hardware/prices.toml)",
    )


def test_the_documented_table_is_the_file():
    """docs/cluster.md's price table is what tools/prices.py writes from the price file."""
    from tools.prices import DOCS, generated

    assert generated() in DOCS.read_text(), "run python -m tools.prices"
