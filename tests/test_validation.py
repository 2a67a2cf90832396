"""trnsim validate's collective suite: the data file holds, the fit is what it says, and the
model it judges is the same model trnsim collective runs."""

import dataclasses
import json

import pytest
from pydantic import ValidationError

from tlm.collectives.runtime import RUNTIME_FIGURES, RuntimeCosts
from tlm.presets import load_preset
from tlm.studies import run_study
from tlm.system import load_system
from tlm.validation import collectives
from tlm.validation.collectives import (
    Section,
    ValidationFile,
    by_release,
    load_file,
    summary,
    validate,
)

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off


def test_every_row_names_a_source_and_a_third_at_most_fits():
    data = load_file()
    assert {s.platform for s in data.section} == {"trn1", "trn2"}
    for platform in ("trn1", "trn2"):
        rows = [r for s in data.section if s.platform == platform for r in s.rows]
        assert 0 < 3 * sum(r.fit for r in rows) <= len(rows)
    for section in data.section:
        assert all(row.source in data.sources for row in section.rows)
        assert load_system(section.system).chip == section.platform
    assert all(u.source in data.sources and u.why for u in data.unexpressed)


def test_the_presets_hold_the_fit():
    """Shipped = validated: each platform's fitted runtime costs in its preset are what the
    calibration gives today (to the 4 digits the tool writes); trn3 borrows trn2's."""
    for platform in ("trn1", "trn2"):
        fitted = collectives.calibrate(platform)
        shipped = RuntimeCosts.of(load_preset(platform))
        for name in RUNTIME_FIGURES:
            assert getattr(shipped, name) == pytest.approx(getattr(fitted, name), rel=1e-3), (
                f"{platform}.{name}: run tools/calibrate_collectives.py and commit the presets"
            )
    trn2, trn3 = (RuntimeCosts.of(load_preset(p)) for p in ("trn2", "trn3"))
    assert all(getattr(trn3, n) == getattr(trn2, n) for n in RUNTIME_FIGURES)


#: The judged errors (mean, max |error|) as documented in docs/validation.md, per platform and
#: per Neuron release that printed the rows (the issue's target, 30 % each and 15 % mean, is not
#: met): a change that makes any worse fails here (and test_the_docs_tables_are_the_model fails
#: when any row moves). trn2's moved when the 2.32 rows (four replica groups of 16 at once)
#: joined its one calibration, and again when they were read as Ring (the multi-stream mode's
#: algorithm): 2.28 prints a 300 us all-reduce floor by Mesh, 2.32 101 us by 30 Ring steps, a
#: contradiction no model of the mechanisms resolves (test_contradictions_hold_on_the_model).
COLLECTIVE_BOUNDS = {"trn1": (0.19, 0.73), "trn2": (0.55, 0.93)}
RELEASE_BOUNDS = {
    ("trn1", "2.10"): (0.19, 0.73),
    ("trn2", "2.21"): (0.42, 0.42),
    ("trn2", "2.24"): (0.26, 0.40),
    ("trn2", "2.28"): (0.48, 0.73),
    ("trn2", "2.32"): (0.86, 0.93),
}


@pytest.mark.parametrize("engine", collectives.ENGINES)
def test_judged_errors_within_the_documented_bounds(engine):
    sections = validate(engine)
    for platform, entry in summary(sections).items():
        n, mean, most = entry["judge"]
        bound_mean, bound_max = COLLECTIVE_BOUNDS[platform]
        assert n >= 16 and mean <= bound_mean and most <= bound_max, (platform, mean, most)
    releases = by_release(sections)
    assert set(releases) == set(RELEASE_BOUNDS)
    for key, (_, mean, most, _bias) in releases.items():
        bound_mean, bound_max = RELEASE_BOUNDS[key]
        assert mean <= bound_mean and most <= bound_max, (key, mean, most)
    for s in sections:
        for r in s.rows:
            assert r.shipped == r.calibrated  # the calibration is shipped
            assert r.shipped_error_fraction == pytest.approx(r.shipped / r.published - 1)


def test_hbm_binds_on_no_published_row():
    """Each step's HBM reads and writes (tlm/collectives/hbm.py) at the presets' published
    HBM bandwidth take under half of what its links and DMA queues take on every published
    row (docs/validation.md: at most 47 %), so charging HBM moves no row and no fitted figure:
    the fitted DMA rates were not standing in for HBM traffic."""
    for section in load_file().section:
        costs = RuntimeCosts.of(load_preset(section.platform))
        assert costs.hbm_Bps == load_preset(section.platform).chip.hbm_bandwidth_Bps
        charged = collectives.row_times(section, costs)
        free = collectives.row_times(section, dataclasses.replace(costs, hbm_Bps=None))
        assert [t for t, _ in charged] == [t for t, _ in free], section.name
        slow = dataclasses.replace(costs, hbm_Bps=costs.hbm_Bps * 0.5)
        assert collectives.row_times(section, slow) == charged, section.name  # under half


EFA_SECTION = "trn1: 64-rank all-reduce on 2 x trn1.32xlarge over EFA"


def test_the_efa_floor_is_one_fixed_cost_and_64_steps():
    """The 64-rank trn1 all-reduce over EFA at 8 B (docs/validation.md, "trn1's 64 ranks over
    EFA"): the operation's fixed cost once (not once per hierarchy level), then the
    hierarchy's 31 + 2 + 31 steps, each its step sync and its longest path - 0.5 us a
    NeuronLink hop inside a node, 15 us HBM to HBM over EFA (CC) - and no bytes to speak of."""
    section = next(s for s in load_file().section if s.name == EFA_SECTION)
    costs = RuntimeCosts.of(load_preset("trn1"))
    (time, algorithm), *_ = collectives.row_times(section, costs)
    assert section.rows[0].size_bytes == 8 and algorithm == "hierarchical"
    links = load_system("2xtrn1-server").links
    hop = next(ln.latency_s for ln in links if "efa" not in ln.name)
    efa = 2 * next(ln.latency_s for ln in links if ln.name == "chip 0 efa up")
    assert (hop, efa) == (pytest.approx(0.5e-6), pytest.approx(15e-6))
    steps = 31 + 2 + 31
    expected = costs.reduce_fixed_s + steps * costs.step_sync_s + 62 * hop + 2 * efa
    assert time == pytest.approx(expected, rel=1e-3)


def test_no_size_flat_model_meets_the_efa_floor_and_plateau():
    """The published run rises from 520 us (8 B) to 1315 us (64 KiB) while its bytes take
    under 5 us: the shipped model moves under 1 % between the two, so it misses one of them
    by at least (1315 - 520) / (1315 + 520) = 43 % - the reason trn1's judged max stays above
    the issue's 30 % until a mechanism that grows with size there is modelled."""
    section = next(s for s in load_file().section if s.name == EFA_SECTION)
    costs = RuntimeCosts.of(load_preset("trn1"))
    rows = {r.size_bytes: r for r in section.rows}
    times = dict(zip(rows, (t for t, _ in collectives.row_times(section, costs)), strict=True))
    small, plateau = rows[8].time_us * 1e-6, rows[65536].time_us * 1e-6
    assert times[65536] / times[8] < 1.01
    floor = (plateau - small) / (plateau + small)
    assert floor == pytest.approx(0.434, abs=1e-3)
    worst = max(abs(times[8] / small - 1), abs(times[65536] / plateau - 1))
    assert worst >= floor


def test_the_large_efa_rows_pay_a_serial_efa_phase():
    """At 1 GiB the hierarchy's intra-node phases alone, at the DMA rate the 2-rank run on one
    chip pins, are 10 % under the published 41.8 ms; its EFA phase (the node's 16 NICs at
    6.25 GB/s carrying the buffer each way, 10.7 ms) runs after them and puts it 16 % over -
    the candidate mechanisms (the Flat Ring trn1 enables for large messages, or an EFA phase
    pipelined with the intra-node ones) are those that hide it (docs/validation.md)."""
    from tlm.collectives import Analytic
    from tlm.collectives.runtime import RankSystem

    section = next(s for s in load_file().section if s.name == EFA_SECTION)
    costs = RuntimeCosts.of(load_preset("trn1"))
    where, chips = collectives._placement(section)
    ranks = RankSystem(chips, where.ranks_per_chip, costs)
    cost = Analytic(collectives._schedule(section.op, "hierarchical", chips, 2), ranks)
    assert len(cost.schedule.steps) == 64
    row = section.rows[-1]
    unit = float(cost.chunk_bytes([row.size_bytes], 4)[0])
    per_step = cost.fixed_s + cost.per_unit_s_per_byte * unit
    efa = per_step[31:33].sum()
    whole = costs.reduce_fixed_s + per_step.sum()
    published = row.time_us * 1e-6
    assert row.size_bytes == 2**30 and efa == pytest.approx(10.8e-3, rel=0.01)
    assert 0.85 < (whole - efa) / published < 0.95 < 1.10 < whole / published < 1.20


def test_contradictions_hold_on_the_model():
    """Each declared pair of published rows is out of order for any model in which time grows
    with ranks, chips, bytes, groups and concurrent work: the shipped model keeps the lighter
    run no slower, so the two cannot both be nearer than the floor, (slower - faster) /
    (slower + faster) of the published times."""
    found = collectives.contradictions(validate())
    assert len(found) == len(load_file().contradiction) >= 4
    for c in found:
        light, heavy = c.lighter, c.heavier
        assert light.published > heavy.published  # a contradiction as published
        assert light.shipped <= heavy.shipped, (c.lighter_sweep, c.heavier_sweep)
        floor = (light.published - heavy.published) / (light.published + heavy.published)
        assert c.floor == pytest.approx(floor)
        worst = max(abs(light.shipped_error_fraction), abs(heavy.shipped_error_fraction))
        assert worst >= c.floor - 1e-12
    # trn2's all-reduces: no calibration brings the judged 8 KiB pair within 49 % of both
    assert max(c.floor for c in found if c.lighter.detail.size_bytes == 8192) > 0.49


def test_a_bad_contradiction_or_reading_is_refused():
    data = load_file().model_dump()
    pair = data["contradiction"][0]
    unknown = {**pair, "lighter": {**pair["lighter"], "size_bytes": 3}}
    with pytest.raises(ValidationError, match="contradiction rows must be published rows"):
        ValidationFile.model_validate({**data, "contradiction": [unknown]})
    gather = {"section": "trn2: 8-rank all-gather (Neuron 2.28)", "size_bytes": 1024}
    mixed = {**pair, "heavier": gather}
    with pytest.raises(ValidationError, match="one platform's and one operation's"):
        ValidationFile.model_validate({**data, "contradiction": [mixed]})
    with pytest.raises(ValidationError, match="algorithm must be auto or ring"):
        collectives.Reading(reading="a tree", algorithm="tree")
    with pytest.raises(ValidationError, match="should match pattern"):
        collectives.Reading(reading="elsewhere", system="../x.toml")


def test_a_reading_may_name_an_algorithm_or_a_system_file():
    """The multistream all-reduce as read (Ring) and under auto's pick; the all-gathers on
    the system file with links at half the rate, slower where the links bind."""
    costs = RuntimeCosts.of(load_preset("trn2"))
    data = {s.name: s for s in load_file().section}
    (stream,) = (s for name, s in data.items() if "multistream stream 0" in name)
    auto = collectives.Reading(reading="auto", algorithm="auto")
    assert {n for _, n in collectives.row_times(stream, costs)} == {"ring"}
    assert {n for _, n in collectives.row_times(stream, costs, reading=auto)} == {"mesh", "rdh"}
    gather = data["trn2: 8-rank all-gather (Neuron 2.28)"]
    half = collectives.Reading(reading="half", system="trn2-server-128.toml")
    fast = collectives.row_times(gather, costs)
    slow = collectives.row_times(gather, costs, reading=half)
    assert fast[0][0] == pytest.approx(slow[0][0], rel=0.01)  # 1 KiB: the links barely count
    assert slow[-1][0] > fast[-1][0] * 1.2  # 512 KiB: they do


def test_the_shipped_model_is_trnsim_collective(tmp_path):
    """Row by row, the shipped time is what trnsim collective gives for the same command
    (replica groups given as nccom-test's JSON file)."""
    data = load_file()
    for i, (section, result) in enumerate(zip(data.section, validate(), strict=True)):
        groups = None
        if section.replica_groups is not None:
            groups = tmp_path / f"groups{i}.json"
            groups.write_text(json.dumps({"replica_groups": [section.replica_groups]}))
        for r in result.rows[:3]:
            got = run_study(
                "collective",
                preset=section.platform,
                system=section.system,
                ranks=section.ranks,
                nodes=section.nodes,
                lnc=section.lnc,
                op=section.op,
                sizes=str(r.detail.size_bytes),
                algo=r.detail.model_algorithm,
                format=section.format,
                custom_replica_groups="none" if groups is None else str(groups),
            ).results.series[0]
            assert got.time_s == pytest.approx(r.shipped, rel=1e-12), (section.name, r.case)


def test_the_docs_tables_are_the_model():
    """docs/validation.md's collectives tables are what tools/calibrate_collectives.py writes
    from the model as shipped (rerun it after a change)."""
    from tools import calibrate_collectives

    docs = calibrate_collectives.DOCS.read_text()
    assert calibrate_collectives.docs_block(validate()) in docs


def test_a_bad_section_is_refused():
    data = load_file()
    good = data.section[0].model_dump()
    with pytest.raises(ValidationError, match="algorithms must map every row's algorithm"):
        Section.model_validate({**good, "rows": [{**good["rows"][0], "algorithm": "tree"}]})
    with pytest.raises(ValidationError, match="algorithms must map to auto or ring"):
        Section.model_validate({**good, "algorithms": {"": "tree"}})
    too_many = [{**r, "fit": True} for r in good["rows"]]
    with pytest.raises(ValidationError, match="fit rows of trn1 must be 1 to a third of its"):
        ValidationFile.model_validate(
            {**data.model_dump(), "section": [{**good, "rows": too_many}], "contradiction": []}
        )


# --- the training suite ------------------------------------------------------------------
from tlm.validation.training import FIT, PARAMETERS, validate_training  # noqa: E402

#: The documented bounds (docs/validation.md): the issue's target on the A100 tables; the
#: H100 and Trainium1 rows as measured, so that a change making them worse fails (trn1: the
#: chip TLM's calibration, nothing fitted; the issue's target, 8 % mean and 15 % each, is not
#: met). trn1's max moved from 20 to 22 % on 2026-11-27 (mean 12.6 %, within 13 %): the chip
#: model stopped charging a matmul's whole pipeline to the next matmul of its accumulation
#: chain and to the loads refilling its buffers, which the hardware does not pay, and the
#: Llama 2 rows - already the model's fastest against their publication (+20 %) - became
#: faster still (13B +19.9 -> +21.4 %); what the model misses there is elsewhere. Tightened
#: to 11 % / 17 % the same day (10.3 % / 16.1 %): the NxD rows run neuronx-distributed's
#: recipe as its scripts do - the gradients reduced after the last micro-batch, accumulated
#: and reduced in fp32 - which slows the Llama 2 rows 3-8 % and the Llama 3.1 rows 1-3 %.
#: trn1's mean moved to 12 % the same day (11.7 %, max 16.4 %): Llama 3.1 70B now recomputes
#: each layer's MLP as its script does at 8K (run_llama_nxd.py's (CoreAttention, LlamaMLP),
#: recompute "selective+mlp"), -8.0 -> -16.4 %; the model is more faithful and the row, which
#: was read optimistic by the missing rerun, shows how far it overcharges 8K attention.
#: Moved up on 2026-11-27 when flash attention came to compute only its causal tiles, as both
#: kernels' sources do (tlm/costs/attention.py; the rows' paths read at their releases): trn1's
#: max to 24 % (mean 11.4 %, max 23.3 %) - the Llama 3.1 rows -16.4/-12.9 -> -4.6/+2.8 %, Llama
#: 2 7B, the one 4K flash row, +3.3 -> +23.3 %, with its Llama 2 siblings at +16 %; the H100's
#: to 18 % / 34 % (17.4 % / 33.2 %) - the refit efficiency 0.6027 -> 0.5637 and the 131K
#: context-parallel row -6.6 -> +33.2 %, where attention is most of the FLOPs: Meta's FLOP
#: count is not published, and under the causal count the row is -4.9 % (docs/validation.md).
#: The H100's tightened the same day to 10 % / 18 % (9.5 % / 17.4 %) when its flash kernel came to
#: run at FlashAttention-2's published speed, not the GEMMs' (tlm/costs/attention.py, FA2_SPEED):
#: the refit efficiency 0.5637 -> 0.5751, the 131K row +33.2 -> +17.4 %.
#: trn1 tightened on 2026-11-27 to 7 % / 13 % (6.2 % / 12.2 %; the issue's target met): every
#: trn1 GEMM time is the chip TLM's x 1.201, the one published trn1 GEMM measurement (Neuron's
#: NKI matmul tutorial, 6.97 ms where the TLM gives 5.80 ms on one core; tlm.costs.MEASURED_GEMM),
#: fitted on no training row - Llama 2 7B +23.3 -> +9.3 %, 13B +16.1 -> +2.1 %, 70B +15.9 ->
#: +7.4 %, Llama 3.1 8B +2.8 -> -3.7 %, 70B -4.6 -> -12.2 %, GPT-3 +5.6 -> -2.4 %.
#: The H100's tightened on 2026-11-27 to 9 % / 15 % (8.3 % / 14.9 %; the issue's 15 % met) when
#: context parallelism came to pay Llama 3's K/V all-gather exposed, as its paper says (Sec.
#: 3.3.2), and the flash kernel its published speed at the sequence's length (16K's, the longest
#: published, at 131K): the 131K row +17.4 -> +14.9 % (tlm/costs/attention.py, docs/validation.md).
TRAINING_BOUNDS = {"a100": (0.05, 0.10), "h100": (0.09, 0.15), "trn1": (0.07, 0.13)}


@pytest.fixture(scope="module")
def training():
    return validate_training()


@pytest.mark.parametrize("hw", sorted(TRAINING_BOUNDS))
def test_training_judged_errors_within_the_documented_bounds(training, hw):
    judged = [r for r in training.rows if r.system == hw and r.role == "judge"]
    errors = [abs(r.calibrated_error_fraction) for r in judged]
    mean_bound, max_bound = TRAINING_BOUNDS[hw]
    for r in judged:
        print(f"{r.case}: {r.calibrated_error_fraction:+.1%}")
    assert sum(errors) / len(errors) <= mean_bound
    assert max(errors) <= max_bound


def test_training_fit_uses_few_named_physical_parameters(training):
    judged_only = {r.system for r in training.rows} - set(training.parameters)
    # Trainium: the chip TLM held to a published GEMM measurement, nothing fitted on its rows
    assert judged_only == {"trn1"}
    assert all(r.role == "judge" for r in training.rows if r.system == "trn1")
    for hw, params in training.parameters.items():
        assert tuple(params) == PARAMETERS[hw]
        assert 0 < params["efficiency"] <= 1 and params.get("call_s", 0) >= 0
        fit = [r for r in training.rows if r.system == hw and r.role == "fit"]
        assert len(fit) == len(FIT[hw]) >= len(params)
        judged = [r for r in training.rows if r.system == hw and r.role == "judge"]
        assert len(judged) > len(fit)  # judged on more rows than it was fitted on
    # every published Megatron-LM SC'21 and Korthikanti row is in the table
    models = {r.detail.model for r in training.rows if r.system == "a100"}
    assert {"megatron-1.7b", "megatron-1t", "gpt3-175b", "megatron-22b"} <= models
    assert len([r for r in training.rows if r.system == "a100"]) == 18


def test_the_hardware_files_hold_the_training_fit(training):
    """Shipped = validated: the GPU files' fitted GEMM figures are what the fit gives today (to
    the 4 digits the tool writes), so trnsim train runs the model validate judges."""
    from tlm.costs import OpCosts
    from tlm.hardware import load_hardware
    from tlm.validation.training import HARDWARE_FIGURES

    for hw, params in training.parameters.items():
        shipped = load_hardware(hw)
        for name, value in params.items():
            figure = HARDWARE_FIGURES[name]
            assert getattr(shipped, figure) == pytest.approx(value, rel=1e-3), (
                f"{hw}.{figure}: run tools/calibrate_training.py and commit the hardware files"
            )
            assert "FITTED" in shipped.sources[figure]
        assert OpCosts.for_hardware(shipped).efficiency == shipped.gemm_efficiency
    for r in training.rows:
        assert r.shipped == pytest.approx(r.calibrated, rel=2e-3), r.case


#: Published layouts the memory model refuses, with why (docs/validation.md): none since
#: 2026-11-27 (Llama 3 405B on 8,192 GPUs fits at 8 virtual stages in the H100's 79.6 GiB).
REFUSED = set()


def test_published_layouts_fit_the_memory_model(training):
    refused = {r.case for r in training.refused()}
    for r in training.rows:
        print(
            f"{r.case}: {r.detail.memory_bytes / 2**30:.1f} of {r.detail.hbm_bytes / 2**30:.1f} GiB"
        )
    assert refused <= REFUSED


def test_every_suite_returns_one_row_type_and_validate_renders_it(training):
    """One ValidationRow for the three suites; trnsim validate's series holds those very rows,
    the suite's detail left out of the JSON."""
    from tlm.validation.inference import validate_inference
    from tlm.validation.row import SUITES, ValidationRow

    rows = [*validate()[0].rows, *training.rows, *validate_inference().rows]
    assert {type(r) for r in rows} == {ValidationRow} and {r.suite for r in rows} == set(SUITES)
    assert {type(r.detail).__name__ for r in rows} == {
        "CollectiveDetail",
        "TrainingDetail",
        "InferenceDetail",
    }
    report = run_study("validate", suite="training")
    assert report.results.series == list(training.rows)
    row = report.to_dict()["series"][0]
    assert list(row) == [
        *(f for f in ValidationRow.model_fields if f != "detail"),
        "shipped_error_fraction",
        "calibrated_error_fraction",
    ]
    r = training.rows[0]
    assert row["calibrated_error_fraction"] == r.calibrated / r.published - 1


def test_other_readings_of_a_placement_are_run_and_shown():
    """A sweep whose placement is not published shows its judged error under each other
    reading too (the same presets); a reading that does not fit the ranks is refused."""
    sections = [s for s in validate() if s.readings]
    assert len(sections) >= 3
    for s in sections:
        mine = s.errors("judge").mean()
        assert all(0 <= mean <= most for _, mean, most in s.readings)
        assert any(abs(mean - mine) > 1e-3 for _, mean, _ in s.readings) or "8-rank" in s.name
    from tlm.studies.validate import parameters

    report = run_study("validate", suite="collectives")
    tables = {title: rows for title, _, rows in parameters(report.inputs, report.results)}
    shown = tables["collectives: the judged errors under other readings (same presets)"]
    assert len(shown) == len(sections) + sum(len(s.readings) for s in sections)
    pairs = tables["collectives: published rows no model can put in order (least max |err| left)"]
    assert len(pairs) == len(load_file().contradiction)
    assert all(row[-1].endswith("%") and float(row[-1][:-1]) > 0 for row in pairs)
    section = load_file().section[3]
    bad = collectives.Reading(reading="three chips", chips=[0, 1, 2])
    with pytest.raises(ValueError, match=r"chips must be 4 chips of one node for 16 ranks"):
        collectives.row_times(section, RuntimeCosts.of(load_preset("trn2")), reading=bad)


def test_the_calibration_tools_rewrite_only_the_figure_they_fit():
    """tools/figures.py: the value of the first line of that name (and source, when given)
    changes, every other byte stays; a figure that is not there is said to be missing."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tools.figures import set_figure

    text = (
        'a = { value = 1.0, source = "ASSUMED", note = "x, y" }\n'
        'b = { value = 2.0, source = "FITTED", note = "z" }\n'
    )
    out, ok = set_figure(text, "b", "3.5", "FITTED")
    assert ok and out == text.replace("value = 2.0", "value = 3.5")
    assert set_figure(text, "a", "9", "FITTED") == (text, False)  # not a FITTED line
    assert set_figure(text, "a", "9")[0].startswith('a = { value = 9, source = "ASSUMED"')
    assert set_figure(text, "c", "1") == (text, False)
