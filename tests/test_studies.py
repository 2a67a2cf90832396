"""The study protocol: every ``trnsim`` study keeps the JSON contract, reruns from its saved
inputs figure for figure, and turns every bad input into one line naming the flag."""

import json
import subprocess
import sys

import pytest

from tlm import __version__
from tlm.studies import STUDIES, InputError, run_study
from tlm.studies.cli import flag, main
from tlm.studies.units import UNITS

#: Quick inputs for each study (the protocol test must cover every registered study).
QUICK = {
    "tensor": ["--n", "64,512", "--format", "fp32"],
    "gemm": ["--m", "512", "--n", "256", "--k", "384", "--cores", "2"],
    "noc": ["--shape", "3x3", "--rate", "0.05,0.2", "--cycles", "600", "--seed", "7"],
    "collective": ["--system", "2xserver", "--sizes", "8B..1GiB:64", "--format", "fp32"],
    "validate": [],
    "system": ["--hardware", "trn3", "--chips", "1k,4k"],
    "tp-step": ["--m", "128", "--n", "512", "--k", "2048", "--algo", "ring"],
    "model": ["--model", "deepseek-v3", "--dp", "64", "--pp", "16", "--ep", "64", "--zero", "1"],
    "compare": ["--model", "llama3-8b", "--against", "h100", "--prompt", "512"],
    "cost": ["--hardware", "h100", "--chips", "16384", "--step-time-s", "10", "--steps", "1000"],
    "train": ["--model", "llama3-70b", "--chips", "1024", "--tp", "16", "--pp", "4"],
    "train-search": ["--model", "llama3-8b", "--chips", "64,128", "--scheduler", "inline"],
    "infer": ["--model", "llama3.3-70b", "--tp", "16", "--prompt", "512", "--output", "16"],
    "infer-search": [
        "--model",
        "llama3-8b",
        "--rate-per-s",
        "2",
        "--prompt",
        "256",
        "--output",
        "16",
        "--batches",
        "1,8",
        "--scheduler",
        "inline",
    ],
    "serve": [
        "--model",
        "llama3-8b",
        "--tp",
        "4",
        "--requests",
        "100",
        "--prompt",
        "256",
        "--output",
        "16",
    ],
}

#: Figures named by what they count carry no unit suffix.
COUNTS = {"n", "nodes", "packets", "instructions", "cycles", "node", "direction", "links"}
COUNTS |= {"ranks", "count", "type", "algorithm"}  # collective: nccom-test's columns
COUNTS |= {"ranks_per_chip", "runtime"}  # collective: where the ranks run, on what footing
COUNTS |= {"failed_links", "detoured_transfers", "groups", "group_ranks"}
COUNTS |= {"rows", "judged_rows", "section", "role", "source"}
COUNTS |= {"group", "values_bit_exact"}  # tp-step: the all-reduce's number, a yes or no
COUNTS |= {"parameters", "active_parameters", "chips", "fits", "peak_stage"}  # model
COUNTS |= {"part", "op", "kind", "batch", "m", "k", "weights"}  # model: operators
COUNTS |= {"servers", "spare_servers", "clos_tiers", "switch_ports", "cause"}  # cost
COUNTS |= {"dp", "micro_batches", "steps", "costs_source", "flop_count"}  # train
COUNTS |= {"evaluated", "valid_layouts", "fitting_layouts", "chunks", "resumed_chunks"}
COUNTS |= {"front_layouts", "tp", "pp", "cp", "ep", "zero", "micro_batch", "interleave"}
COUNTS |= {"recompute"} | {f"best_{k}" for k in ("chips", "dp", "tp", "pp", "cp", "ep", "zero")}
COUNTS |= {"best_micro_batch", "best_interleave", "best_recompute"}  # train-search
# validate: a row's published, shipped and calibrated figures are in its quantity's unit
COUNTS |= {"suite", "case", "quantity", "published", "shipped", "calibrated"}
COUNTS |= {"inference_not_modelled", "collective_bandwidth_factor"}
COUNTS |= {"sources", "level"}  # system: where each figure comes from, a level's name
COUNTS |= {"training_refused_for_memory"}
COUNTS |= {"requests", "completed", "rejected", "preemptions", "iterations", "mean_batch"}
COUNTS |= {"mean_in_system", "replica_chips", "seed", "metric"}  # serve
COUNTS |= {"evaluated", "fitting", "meeting", "system", "format", "kv_format", "replicas"}
COUNTS |= {"fleet_chips"} | {f"best_{k}" for k in ("system", "tp", "pp", "ep", "format")}
COUNTS |= {f"best_{k}" for k in ("kv_format", "batch", "replicas", "fleet_chips")}
# compare: the baseline's name, a hardware's name and its footings, why it does not fit
COUNTS |= {"baseline", "hardware", "gemm_footing", "fixed_costs_footing", "why", "order"}
# every study that prints a cost: its price's footing (tlm.hardware.prices.price_footing)
COUNTS |= {"price_instance", "price_kind", "price_source", "price_as_of"}
COUNTS |= {"max_batch", "kv_capacity_tokens", "tokens_per_verify", "phase"}  # infer
COUNTS |= {"fixed_costs_source", "attention_groups"}
COUNTS |= {"padded_prompt", "context_buckets", "token_buckets", "buckets_source"}  # tokens
COUNTS |= {"dp_attention", "best_dp_attention", "best_micro_batches"}  # infer-search layouts


def test_every_study_has_quick_inputs():
    assert set(QUICK) == set(STUDIES)


def test_every_catalogue_entry_registers_its_study():
    """Each study's module, imported when the study is first asked for, registers it under
    the catalogue's name; its title is the catalogue's."""
    from tlm.studies.catalogue import CATALOGUE

    assert list(STUDIES) == list(CATALOGUE)
    for name, entry in CATALOGUE.items():
        study = STUDIES[name]
        assert study.name == name and study.run.__module__ == entry.module
        assert study.title == entry.title
    with pytest.raises(KeyError):
        STUDIES["nope"]


#: Packages a command imports only when it needs them (each costs a share of start-up).
HEAVY = ("numba", "dask", "distributed", "rich", "matplotlib", "simpy", "scipy", "pygments")

_IMPORTED = f"""
import sys
HEAVY = {HEAVY!r}
from tlm.studies.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(" ".join(sorted(m for m in sys.modules if m.startswith(("tlm.", *HEAVY)))))
"""


def _imported_by(*argv: str) -> set[str]:
    """The tlm modules and those of :data:`HEAVY` a fresh interpreter has imported after
    ``trnsim ARGV``."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # pytest sets its own
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTED, *argv],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return set(done.stdout.split("\n")[-2].split())


def test_a_command_imports_only_its_own_study():
    """``trnsim --help`` imports no study; ``trnsim infer --json`` imports infer's module
    alone of the studies, none of :data:`HEAVY` (rich renders tables on a terminal, not JSON
    nor tables to a pipe) and not the tensor engine's cycle-exact model nor the router's
    flits (start-up is what a user waits for)."""
    from tlm.studies.catalogue import CATALOGUE

    studies = {entry.module for entry in CATALOGUE.values()}
    assert not _imported_by("--help") & studies
    imported = _imported_by("infer", *QUICK["infer"], "--json")
    assert imported & studies == {"tlm.studies.infer"}
    assert not {m for m in imported if m.startswith(HEAVY)}
    assert not {"tlm.tensor.timing", "tlm.link.flit", "tlm.link.config"} & imported
    # its tables, to a pipe, are laid out without rich (tlm/studies/tables.py)
    assert not {m for m in _imported_by("infer", *QUICK["infer"]) if m.startswith(HEAVY)}


def test_a_command_leaves_the_garbage_collector_as_it_was(capsys):
    """``trnsim`` starts with the collector off and sets start-up's objects aside
    (``gc.freeze``) while the study runs; called in a process, it gives them back and
    leaves the collector on, as it found it, also after an error."""
    import gc

    assert gc.isenabled() and not gc.get_freeze_count()
    assert main(["tensor", *QUICK["tensor"], "--json"]) == 0
    assert gc.isenabled() and not gc.get_freeze_count()
    assert main(["tensor", "--n", "0"]) == 2
    assert gc.isenabled() and not gc.get_freeze_count()
    capsys.readouterr()


def _run(argv, capsys) -> dict:
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _units_named(row: dict):
    for key, value in row.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            for item in value:
                _units_named(item)
        elif key not in COUNTS:
            assert any(key.endswith(u) or key == u[1:] for u in UNITS), f"{key} has no unit"


@pytest.mark.parametrize("name", sorted(QUICK))
def test_contract_and_rerun(name, capsys, tmp_path):
    """--json prints the contract; --out run.json and --out run.toml, given back to --config,
    reproduce it exactly."""
    contract = _run([name, *QUICK[name], "--json", "--out", str(tmp_path / "run.json")], capsys)
    assert list(contract) == ["study", "version", "inputs", "results", "series"]
    assert contract["study"] == name and contract["version"] == __version__
    fields = STUDIES[name].inputs.model_fields
    assert list(contract["inputs"]) == list(fields)  # every input, defaults resolved
    assert all(
        v is not None
        for k, v in contract["inputs"].items()
        if k not in ("trace", "vcd", "plot", "out_dir")
    )
    _units_named(contract["results"])
    for row in contract["series"]:
        _units_named(row)
    assert json.loads((tmp_path / "run.json").read_text()) == contract
    assert _run([name, "--config", str(tmp_path / "run.json"), "--json"], capsys) == contract
    assert main([name, *QUICK[name], "--out", str(tmp_path / "run.toml")]) == 0
    capsys.readouterr()
    assert _run([name, "--config", str(tmp_path / "run.toml"), "--json"], capsys) == contract
    # the Python API is the same run
    report = run_study(name, **contract["inputs"])
    assert json.loads(json.dumps(report.to_dict())) == contract


def test_collective_flow_engine_contract_and_rerun(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(QUICK, "collective", [*QUICK["collective"], "--engine", "flow"])
    test_contract_and_rerun("collective", capsys, tmp_path)


def test_collective_flit_engine_contract_and_rerun(capsys, tmp_path, monkeypatch):
    quick = ["--system", "server", "--sizes", "64B,4KiB", "--engine", "flit"]
    monkeypatch.setitem(QUICK, "collective", quick)
    test_contract_and_rerun("collective", capsys, tmp_path)


def test_collective_flit_lanes_and_order_contract_and_rerun(capsys, tmp_path, monkeypatch):
    quick = ["--system", "server", "--sizes", "64KiB", "--engine", "flit"]
    monkeypatch.setitem(QUICK, "collective", [*quick, "--vcs", "4", "--order", "packet"])
    test_contract_and_rerun("collective", capsys, tmp_path)
    lanes = _run(["collective", *QUICK["collective"], "--json"], capsys)
    default = _run(["collective", *quick, "--json"], capsys)
    # two lanes taken in turn and packets interleaved change the timing: the flags reach the engine
    assert lanes["series"][0]["time_s"] != default["series"][0]["time_s"]


@pytest.mark.parametrize("name", sorted(QUICK))
def test_tables_for_people(name, capsys):
    assert main([name, *QUICK[name]]) == 0
    out = capsys.readouterr().out
    assert f"trnsim {name}" in out and "inputs" in out
    # the results table, unless every figure is in a table of the study's own (system's)
    assert "results" in out or name == "system"


def test_tables_show_cells_as_they_are(capsys):
    """A cell is data, not rich markup nor emoji codes: the collective's runtime reads "the
    trn2 preset's [collectives]" in its table as in its contract."""
    assert main(["collective", *QUICK["collective"]]) == 0
    assert "the trn2 preset's [collectives]" in capsys.readouterr().out


def test_flags_override_the_config(capsys, tmp_path):
    (tmp_path / "c.toml").write_text('n = [128]\nformat = "fp16"\n')
    base = _run(["tensor", "--config", str(tmp_path / "c.toml"), "--json"], capsys)
    assert base["inputs"]["n"] == [128] and base["inputs"]["format"] == "fp16"
    over = _run(["tensor", "--config", str(tmp_path / "c.toml"), "--n", "256", "--json"], capsys)
    assert over["inputs"]["n"] == [256] and over["inputs"]["format"] == "fp16"


def test_tensor_figures(capsys):
    """Published anchors: 2 x 128 x 128 x clock per engine; FP32 at a quarter of the rate."""
    c = _run(["tensor", "--n", "64,512", "--json"], capsys)
    assert c["inputs"]["clock_hz"] == 2544403076.171875  # the trn2 preset's tensor.freq_hz
    assert [r["cycles"] for r in c["series"]] == [128, 512]
    assert c["results"]["peak_flop_per_s"] == pytest.approx(667e12 / 8)  # T2: 667 TFLOPS / 8
    nki = _run(
        ["tensor", "--choose", "tensor.freq_hz=core_nki2", "--format", "fp32", "--json"], capsys
    )
    assert nki["inputs"]["clock_hz"] == 2.4e9
    (row,) = nki["series"]
    assert row["cycles"] == 4 * 512  # NKI2: FP32 ~20 TFLOPS per core, a quarter of 78.6
    assert row["achieved_flop_per_s"] == pytest.approx(2 * 128 * 128 * 2.4e9 / 4)


def test_gemm_outputs(capsys, tmp_path):
    trace, vcd = tmp_path / "g.json", tmp_path / "g.vcd"
    c = _run(["gemm", *QUICK["gemm"], "--trace", str(trace), "--vcd", str(vcd), "--json"], capsys)
    assert 0 < c["results"]["of_peak_fraction"] < 1
    assert c["results"]["peak_flop_per_s"] == 667e12
    assert json.loads(trace.read_text())["traceEvents"] and "tensor_busy" in vcd.read_text()


def test_gemm_mxfp8_on_trn3_prints_its_peak_beside_the_published_one(capsys):
    """trn3's engine at four MX rows per PE: 8 x 128 x 128 x 2 x 4 x 2.5597 GHz = 2684 TFLOPS
    (the BF16 clock); the published 2,517 is the chip_mxfp8 clock's."""
    argv = ["gemm", "--preset", "trn3", "--format", "mxfp8", "--m", "512", "--n", "512"]
    r = _run([*argv, "--k", "1024", "--json"], capsys)["results"]
    assert r["peak_flop_per_s"] == pytest.approx(2684e12, rel=1e-12)
    assert r["published_peak_flop_per_s"] == 2517e12
    assert 0 < r["of_peak_fraction"] < 1
    slow = ["--choose", "tensor.freq_hz=chip_mxfp8", "--k", "1024", "--json"]
    r = _run([*argv, *slow], capsys)["results"]
    assert r["peak_flop_per_s"] == pytest.approx(2517e12, rel=1e-9)


def test_tp_step_outputs(capsys, tmp_path):
    trace = tmp_path / "t.json"
    c = _run(["tp-step", *QUICK["tp-step"], "--trace", str(trace), "--json"], capsys)
    r = c["results"]
    assert r["values_bit_exact"] is True and 0 < r["error_of_bound_fraction"] <= 1
    assert r["step_s"] >= max(r["gemm_alone_s"], r["all_reduce_alone_s"])
    assert c["inputs"]["blocks"] == 1 and c["series"][0]["algorithm"] == "ring"
    names = {
        e["args"]["name"]
        for e in json.loads(trace.read_text())["traceEvents"]
        if e["name"] == "process_name"
    }
    assert names == {f"chip {i}" for i in range(16)} | {"links"}
    timing = _run(["tp-step", *QUICK["tp-step"], "--no-values", "--json"], capsys)
    assert timing["inputs"]["values"] is False and timing["results"]["values_bit_exact"] is None
    assert timing["results"]["step_s"] == r["step_s"]  # values do not change the times


def test_noc_sweep(capsys):
    c = _run(["noc", "--shape", "4x4", "--rate", "0.05,0.2", "--cycles", "800", "--json"], capsys)
    assert [p["rate_flits_per_node_cycle"] for p in c["series"]] == [0.05, 0.2]
    assert c["series"][1]["accepted_flits_per_node_cycle"] == pytest.approx(0.2, abs=0.03)
    assert len(c["series"][0]["links"]) == 16 * 4
    # 3 H + 2 L + 1 (three cycles a router), H = 32 / 15 on the 4x4 torus
    assert c["results"]["zero_load_latency_cycles"] == pytest.approx(3 * 32 / 15 + 2 * 4 + 1)


def test_cost_outputs(capsys):
    """Llama 3's 7.76 interruptions a day on 16k H100; the parts of power and time add up."""
    c = _run(["cost", *QUICK["cost"], "--model", "llama3-405b", "--json"], capsys)
    r = c["results"]
    assert r["interruptions_per_day"] == pytest.approx(419 / 54)
    assert sum(row["interruptions_per_day"] for row in c["series"]) == pytest.approx(419 / 54)
    parts = ("chip_power_w", "host_power_w", "network_power_w", "facility_overhead_power_w")
    assert sum(r[k] for k in parts) == pytest.approx(r["total_power_w"])
    fractions = ("goodput_fraction", "checkpoint_fraction", "restart_fraction", "lost_fraction")
    assert sum(r[k] for k in fractions) == pytest.approx(1.0)
    assert r["run_wall_s"] == pytest.approx(1000 * 10 / r["goodput_fraction"])
    assert r["chip_power_w"] == 16384 * 700 and r["servers"] == 2048
    default = _run(["cost", "--model", "llama3-8b", "--json"], capsys)
    assert default["inputs"]["steps"] == round(15e12 / (2048 * 8192))  # the model file's tokens


#: (argv, the message after "trnsim STUDY: error: "): every study's bad inputs.
BAD = [
    (
        ["tensor", "--m", "129"],
        "--m: 129 is not allowed; allowed: an integer in 1..128 (the engine's size)",
    ),
    (["tensor", "--k", "0"], "--k: 0 is not allowed; allowed: an integer >= 1"),
    (
        ["tensor", "--n", "513"],
        "--n: 513 is not allowed; allowed: integers in 1..512 (one PSUM bank of FP32)",
    ),
    (["tensor", "--n", "1,x"], "--n: 'x' is not a number; allowed: an integer"),
    (["tensor", "--clock-hz", "0"], "--clock-hz: 0.0 is not allowed; allowed: a number > 0"),
    (
        ["tensor", "--format", "fp4"],
        "--format: 'fp4' is not allowed; allowed: one of bf16, fp16, "
        "fp32, fp8_e4m3, fp8_e4m3fn, fp8_e5m2, int8, mxfp4, mxfp8, mxfp8_e5m2, tf32",
    ),
    (
        ["tensor", "--mode", "fast"],
        "--mode: 'fast' is not allowed; allowed: one of alone, back_to_back, reuse",
    ),
    (
        ["tensor", "--preset", "trn9"],
        "--preset: 'trn9' is not allowed; allowed: one of trn1, "
        "trn2, trn3, or a preset file path ending in .toml",
    ),
    (
        ["tensor", "--choose", "tensor.freq_hz=warp"],
        "--choose: 'tensor.freq_hz=warp' is not "
        "allowed; allowed: tensor.freq_hz=one of chip_bf16_dec2024, chip_fp8, chip_fp8_dec2024, "
        "core_nki2",
    ),
    (
        ["tensor", "--choose", "novalue"],
        "--choose: 'novalue' is not allowed; allowed: "
        "SECTION.FIGURE=ALTERNATIVE, e.g. tensor.freq_hz=core_nki2",
    ),
    (
        ["gemm", "--cores", "0"],
        "--cores: 0 is not allowed; allowed: an integer in 1..8 (the cores of trn2)",
    ),
    (
        ["gemm", "--cores", "-1"],
        "--cores: -1 is not allowed; allowed: an integer in 1..8 (the cores of trn2)",
    ),
    (
        ["gemm", "--cores", "9"],
        "--cores: 9 is not allowed; allowed: an integer in 1..8 (the cores of trn2)",
    ),
    (["gemm", "--k", "0"], "--k: 0 is not allowed; allowed: an integer in 1..16777216"),
    (["gemm", "--bufs", "1"], "--bufs: 1 is not allowed; allowed: an integer in 2..1024"),
    (
        ["gemm", "--format", "int8"],
        "--format: 'int8' is not allowed; allowed: one of bf16, "
        "fp16, fp32, fp8_e4m3, fp8_e4m3fn, fp8_e5m2, mxfp4, mxfp8, mxfp8_e5m2",
    ),
    (
        ["gemm", "--format", "mxfp8"],
        "--format: 'mxfp8' is an MX format, which trn2's tensor engine does not have; allowed: "
        "one of bf16, fp16, fp32, fp8_e4m3, fp8_e4m3fn, fp8_e5m2 (MX formats are on trn3)",
    ),
    (
        ["gemm", "--preset", "trn3", "--format", "mxfp8", "--k", "100"],
        "--k: 100 is not allowed; allowed: a multiple of 32 for mxfp8 (one E8M0 scale per 32 "
        "elements of K)",
    ),
    (
        ["tensor", "--preset", "trn1", "--format", "mxfp4"],
        "--format: 'mxfp4' is an MX format, which trn1's tensor engine does not have; allowed: "
        "one of bf16, fp16, fp32, fp8_e4m3, fp8_e4m3fn, fp8_e5m2, int8, tf32 (MX formats are on "
        "trn3)",
    ),
    (
        ["gemm", "--trace", "/no/such/folder/t.json"],
        "--trace: '/no/such/folder/t.json' cannot "
        "be written; allowed: a file in an existing folder",
    ),
    (
        ["gemm", "--vcd", "/"],
        "--vcd: '/' cannot be written; allowed: a file path (this is a folder)",
    ),
    (["noc", "--seed", "-1"], "--seed: -1 is not allowed; allowed: an integer in 0..4294967295"),
    (
        ["noc", "--rate", "1.5"],
        "--rate: 1.5 is not allowed; allowed: loads in 0..1 flits per node per cycle",
    ),
    (["noc", "--rate", "0.1,x"], "--rate: 'x' is not a number; allowed: a number"),
    (
        ["noc", "--cycles", "100", "--warmup", "100"],
        "--warmup: 100 is not allowed; allowed: an integer in 0..99 (fewer than --cycles)",
    ),
    (["noc", "--cycles", "0"], "--cycles: 0 is not allowed; allowed: an integer in 1..1000000000"),
    (["noc", "--length", "5"], "--length: 5 is not allowed; allowed: an integer in 1..4"),
    (["noc", "--vcs", "3"], "--vcs: 3 is not allowed; allowed: a power of two in 2..8"),
    (["noc", "--depth", "0"], "--depth: 0 is not allowed; allowed: a power of two in 1..64"),
    (
        ["noc", "--shape", "4x1"],
        "--shape: '4x1' is not allowed; allowed: a tuple of 1 to 4 ring sizes, each 2..16",
    ),
    (["noc", "--shape", "4by4"], "--shape: '4by4' is not allowed; allowed: look like 4x4 or 4x4x4"),
    (
        ["noc", "--shape", "4x2", "--traffic", "transpose"],
        "--traffic: 'transpose' does not fit "
        "--shape 4x2 (transpose needs a symmetric shape, not (4, 2)); allowed: a pattern this "
        "shape can carry",
    ),
    (
        ["noc", "--engine", "gpu"],
        "--engine: 'gpu' is not allowed; allowed: one of compiled, python",
    ),
    (
        ["noc", "--traffic", "random"],
        "--traffic: 'random' is not allowed; allowed: one of "
        "uniform, transpose, neighbour, hotspot, all-to-all",
    ),
    (["noc", "--bogus", "1"], "unrecognized arguments: --bogus 1"),
    (
        ["collective", "--op", "reduce_scatter", "--sizes", "1KiB,8B"],
        "--sizes: 8 is not allowed; allowed: multiples of 128 B (64 ranks x 2 B of bf16) for "
        "reduce_scatter",
    ),
    (
        [
            "collective",
            "--op",
            "all_gather",
            "--system",
            "3xserver",
            "--format",
            "fp32",
            "--sizes",
            "96B",
        ],
        "--sizes: 96 is not allowed; allowed: multiples of 768 B (192 ranks x 4 B of fp32) "
        "for all_gather",
    ),
    (
        ["collective", "--format", "fp32", "--sizes", "6B"],
        "--sizes: 6 is not allowed; allowed: multiples of 4 B (4 B of fp32) for all_reduce",
    ),
    (
        ["collective", "--system", "megaserver"],
        "--system: 'megaserver' is not allowed; allowed: one of server, ultraserver, "
        "ultraserver-gen2 (of the chip preset), trn1-server, trn2-server, trn2-ultraserver, "
        "trn3-ultraserver, trn3-ultraserver-gen2, a system file ending in .toml, or NxSYSTEM "
        "joining N of one by EFA (N in 2..1024)",
    ),
    (
        ["collective", "--preset", "trn1", "--system", "ultraserver"],
        "--system: 'ultraserver' is not allowed; allowed: one of server for chip trn1 (the "
        "systems built of trn1 chips)",
    ),
    (
        ["collective", "--system", "trn3-ultraserver"],
        "--system: 'trn3-ultraserver' is not allowed; allowed: a system of trn2 chips (the "
        "chip preset)",
    ),
    (
        ["collective", "--system", "ultraserver", "--algo", "kangaring"],
        "--algo: 'kangaring' does not fit --op all_reduce on --system ultraserver (it needs one "
        "4x4 torus (the trn2 server's 16 chips with 1, 2 or 4 ranks each, or 16 ranks on 4 of "
        "its chips at LNC=2), not a 4x4x4x4 torus); allowed: auto or one of ring, mesh, mesh1, "
        "rdh, rings",
    ),
    (
        ["collective", "--system", "3xserver", "--algo", "rdh"],
        "--algo: 'rdh' does not fit --op all_reduce on --system 3xserver (it needs a power of "
        "two of ranks, not 192); allowed: auto or one of ring, mesh, mesh1, hierarchical, rings",
    ),
    (
        ["collective", "--algo", "hierarchical"],
        "--algo: 'hierarchical' does not fit --op all_reduce on --system server (it needs 2 or "
        "more nodes joined by EFA (NxSYSTEM), not trn2-server, 4 ranks a chip); allowed: auto or "
        "one of ring, mesh, mesh1, rdh, kangaring, rings",
    ),
    (
        ["collective", "--op", "all_to_all", "--sizes", "1MiB", "--algo", "ring"],
        "--algo: 'ring' does not fit --op all_to_all on --system server (it runs all_reduce, "
        "reduce_scatter, all_gather, broadcast, not all_to_all); allowed: auto or one of mesh",
    ),
    (
        ["collective", "--vcs", "4"],
        "--vcs: 4 has no meaning here; allowed: 2 unless --engine flit",
    ),
    (
        ["collective", "--order", "packet"],
        "--order: 'packet' has no meaning here; allowed: transfer unless --engine flit",
    ),
    (
        ["collective", "--engine", "flit", "--sizes", "4KiB", "--vcs", "3"],
        "--vcs: 3 is not allowed; allowed: one of 2, 4, 8",
    ),
    (
        ["collective", "--algo", "tree"],
        "--algo: 'tree' is not allowed; allowed: one of auto, ring, mesh, mesh1, rdh, "
        "kangaring, hierarchical, rings",
    ),
    (
        ["collective", "--sizes", "4GiB..8B"],
        "--sizes: '4GiB..8B' is not allowed; allowed: sizes in bytes, FROM..TO[:FACTOR] (each "
        "size FACTOR times the last, 2 unless given) or a comma-separated list, e.g. 8B..4GiB, "
        "1KiB..1GiB:4, 1MiB,64MiB; units B, KiB (K), MiB (M), GiB (G), TiB (T), and decimal "
        "KB, MB, GB, TB (FROM >= 1, TO >= FROM, FACTOR >= 2)",
    ),
    (
        ["collective", "--sizes", "1MiB,2XB"],
        "--sizes: '2XB' is not allowed; allowed: sizes in bytes, FROM..TO[:FACTOR] (each "
        "size FACTOR times the last, 2 unless given) or a comma-separated list, e.g. 8B..4GiB, "
        "1KiB..1GiB:4, 1MiB,64MiB; units B, KiB (K), MiB (M), GiB (G), TiB (T), and decimal "
        "KB, MB, GB, TB",
    ),
    (
        ["collective", "--format", "tf32"],
        "--format: 'tf32' is not allowed; allowed: one of bf16, fp16, fp32, fp8_e4m3, "
        "fp8_e4m3fn, fp8_e5m2",
    ),
    (
        ["validate", "--suite", "serving"],
        "--suite: 'serving' is not allowed; allowed: one of all, collectives, training, inference",
    ),
    (
        ["validate", "--engine", "flit"],
        "--engine: 'flit' is not allowed; allowed: one of analytic, flow",
    ),
    (
        ["collective", "--fail-links", "0-2"],
        "--fail-links: '0-2' is not allowed; allowed: two chips joined by a link (torus "
        "neighbours, e.g. 0-1)",
    ),
    (
        ["collective", "--fail-links", "0-16"],
        "--fail-links: '0-16' names a chip outside trn2-server; allowed: chip pairs A-B of chips "
        "0..15 joined by a link",
    ),
    (
        ["collective", "--fail-links", "0-1,0-3,0-4,0-12"],
        "--fail-links: '0-1,0-3,0-4,0-12' is not allowed: they would cut chip 1 off from chip 0; "
        "allowed: links whose loss leaves a route between every two chips",
    ),
    (
        ["collective", "--fail-links", "0 to 1"],
        "--fail-links: '0 to 1' is not allowed; allowed: chip pairs A-B joined by a link, "
        "comma-separated, e.g. 0-1 or 0-1,5-9",
    ),
    (
        ["collective", "--fail-links", "3-7", "--algo", "kangaring", "--no-runtime"],
        "--algo: 'kangaring' does not fit --op all_reduce on --system server (it needs every "
        "link of the 4x4 torus, for its two Hamiltonian cycles use them all, and the link 3-7 "
        "has failed); allowed: auto or one of ring, mesh, mesh1, rdh, rings",
    ),
    (
        ["collective", "--preset", "trn3", "--system", "ultraserver", "--fail-links", "0-1"],
        "--fail-links: '0-1' is not allowed; allowed: two torus neighbours, and "
        "trn3-ultraserver's chips meet at a switch (no link joins two chips)",
    ),
    (
        ["collective", "--op", "broadcast", "--root", "16"],
        "--root: 16 is not allowed; allowed: a chip of trn2-server: 0..15",
    ),
    (
        ["collective", "--root", "3"],
        "--root: 3 has no meaning here; allowed: 0 unless --op broadcast",
    ),
    (
        ["collective", "--trace", "/no/such/folder/t.json"],
        "--trace: '/no/such/folder/t.json' cannot be written; allowed: a file in an existing "
        "folder",
    ),
    (
        ["collective", "--plot", "figure.txt"],
        "--plot: 'figure.txt' is not allowed; allowed: a file ending in .png, .svg, .pdf",
    ),
    (
        ["collective", "--plot", "/no/such/folder/p.png"],
        "--plot: '/no/such/folder/p.png' cannot be written; allowed: a file in an existing folder",
    ),
    (
        ["collective", "--engine", "flit", "--sizes", "1KiB", "--fail-links", "0-1"],
        "--fail-links: '0-1' is not allowed; allowed: none with --engine flit (its routers route "
        "by dimension order and cannot go round a failed link; --engine analytic or flow can)",
    ),
    (
        ["collective", "--engine", "slow"],
        "--engine: 'slow' is not allowed; allowed: one of analytic, flow, flit",
    ),
    (
        ["collective", "--engine", "flit", "--system", "2xserver", "--sizes", "1KiB"],
        "--system: '2xserver' is not allowed: '2xtrn2-server' (2 nodes joined by EFA); "
        "allowed: server or ultraserver (one torus node) for --engine flit",
    ),
    (
        ["collective", "--engine", "flit", "--sizes", "64KiB,2MiB"],
        "--sizes: 2097152 is not allowed; allowed: sizes up to 1118480 B for --engine flit with "
        "rdh (the busiest rank sends at most 2 MiB: size x 1.875)",
    ),
    (
        ["tp-step", "--k", "1000"],
        "--k: 1000 is not allowed; allowed: a positive multiple of 16 (the chips of trn2-server)",
    ),
    (
        ["tp-step", "--blocks", "5"],
        "--blocks: 5 is not allowed; allowed: an integer in 1..4 (the output blocks of the 512 x "
        "512 GEMM)",
    ),
    (
        ["tp-step", "--m", "4096", "--n", "4096"],
        "--values: True is not allowed; allowed: false for m x n x k above 8589934592 (here "
        "137438953472)",
    ),
    (
        ["tp-step", "--system", "ultraserver", "--algo", "kangaring"],
        "--algo: 'kangaring' does not fit --system ultraserver (it needs one 4x4 torus (the trn2 "
        "server's 16 chips with 1, 2 or 4 ranks each, or 16 ranks on 4 of its chips at LNC=2), "
        "not a 4x4x4 torus); allowed: auto or one of ring, mesh, mesh1, rdh, rings",
    ),
    (
        ["tp-step", "--system", "trn3-ultraserver"],
        "--system: 'trn3-ultraserver' is not allowed; allowed: a system of trn2 chips (the "
        "chip preset)",
    ),
    (
        ["tp-step", "--algo", "tree"],
        "--algo: 'tree' is not allowed; allowed: one of auto, ring, "
        "mesh, mesh1, rdh, kangaring, hierarchical, rings",
    ),
    (
        ["tp-step", "--trace", "/no/such/folder/t.json"],
        "--trace: '/no/such/folder/t.json' cannot be written; allowed: a file in an existing "
        "folder",
    ),
    (
        ["model", "--model", "gpt5"],
        "--model: 'gpt5' is not allowed; allowed: one of deepseek-v3, gpt3-175b, llama2-13b, "
        "llama2-70b, llama2-7b, llama3-405b, llama3-70b, llama3-8b, llama3.1-405b, llama3.2-1b, "
        "llama3.3-70b, megatron-1.7b, "
        "megatron-145b, megatron-18b, megatron-1t, megatron-22b, megatron-3.6b, megatron-310b, "
        "megatron-39b, megatron-530b, megatron-7.5b, megatron-76b, mixtral-8x7b, moe-2t, or a "
        "model file path ending in .toml",
    ),
    (
        ["model", "--model", "llama3-405b", "--tp", "6"],
        "--tp: 6 is not allowed; allowed: a divisor of the 128 heads of llama3-405b",
    ),
    (
        ["model", "--model", "llama3-8b", "--pp", "33"],
        "--pp: 33 is not allowed; allowed: at most the 32 layers of llama3-8b",
    ),
    (
        ["model", "--ep", "2"],
        "--ep: 2 is not allowed; allowed: 1 for llama3-8b (a dense model)",
    ),
    (
        ["model", "--model", "deepseek-v3", "--dp", "4", "--ep", "8"],
        "--ep: 8 is not allowed; allowed: divide dp x cp (the expert-parallel group is carved "
        "from them)",
    ),
    (
        ["model", "--dp", "3"],
        "--micro-batch: 1 is not allowed; allowed: a size with dp x micro_batch dividing the "
        "global batch of 2048 sequences (dp 3)",
    ),
    (["model", "--cp", "3"], "--cp: 3 is not allowed; allowed: divide the sequence of 8192 tokens"),
    (["model", "--zero", "4"], "--zero: 4 is not allowed; allowed: an integer in 0..3"),
    (["model", "--sp", "yes"], "--sp: 'yes' is not allowed; allowed: one of on, off"),
    (
        ["model", "--recompute", "half"],
        "--recompute: 'half' is not allowed; allowed: one of none, selective, full, selective+mlp",
    ),
    (
        ["train", "--recompute", "mlp"],
        "--recompute: 'mlp' is not allowed; allowed: one of none, selective, full, selective+mlp",
    ),
    (
        ["model", "--format", "int8"],
        "--format: 'int8' is not allowed; allowed: one of bf16, fp16, fp32, fp8_e4m3, "
        "fp8_e4m3fn, fp8_e5m2, tf32",
    ),
    (
        ["model", "--interleave", "2"],
        "--interleave: 2 is not allowed; allowed: 1 without pipeline parallelism (pp 1)",
    ),
    (
        ["cost", "--hardware", "b200"],
        "--hardware: 'b200' is not allowed; allowed: one of trn1, trn2, trn3, trn3-gen2, a100, "
        "h100, or a hardware file path ending in .toml",
    ),
    (["cost", "--chips", "0"], "--chips: 0 is not allowed; allowed: an integer in 1..10000000"),
    (["cost", "--step-time-s", "0"], "--step-time-s: 0.0 is not allowed; allowed: a number > 0"),
    (["cost", "--pue", "0.9"], "--pue: 0.9 is not allowed; allowed: a number in 1..3"),
    (
        ["cost", "--model", "gpt5"],
        "--model: 'gpt5' is not allowed; allowed: one of "
        + ", ".join(__import__("tlm.workloads", fromlist=["model_names"]).model_names())
        + ", or a model file path ending in .toml",
    ),
    (
        ["train", "--chips", "1000"],
        "--chips: 1000 is not allowed; allowed: a multiple of tp x pp x cp = 128 (tp 16, pp 8, "
        "cp 1)",
    ),
    (
        ["train", "--model", "llama3-8b", "--chips", "96", "--tp", "3", "--pp", "1"],
        "--tp: 3 is not allowed; allowed: a divisor of the 32 heads of llama3-8b",
    ),
    (
        ["train", "--chips", "1024", "--tp", "8", "--pp", "8", "--dp", "4"],
        "--dp: 4 is not allowed; allowed: chips / (tp x pp x cp) = 16, or unset",
    ),
    (
        ["train", "--sites", "3"],
        "--sites: 3 chips must be a positive multiple of sites x chips_per_node (3 x 64), not "
        "16384; allowed: a number of sites the chips split into whole, aligned blocks of nodes",
    ),
    (
        ["train", "--plot", "/tmp/x.gif"],
        "--plot: '/tmp/x.gif' is not allowed; allowed: a file ending in .png, .svg, .pdf",
    ),
    (
        [
            "train-search",
            "--chips",
            "7",
            "--model",
            "llama3-8b",
            "--tp",
            "8,16",
            "--scheduler",
            "inline",
        ],
        "--chips: '7' no layout of llama3-8b on 7 chips: the constraint 'tp x cp x pp divides "
        "the 7 chips' removed the last 320; allowed: chip counts with a valid, fitting layout",
    ),
    (
        ["train-search", "--chips", "1k..2x"],
        "--chips: '2x' is not allowed; allowed: "
        + __import__("tlm.studies.protocol", fromlist=["x"]).CHIP_COUNTS_ALLOWED,
    ),
    (
        ["system", "--chips", "0"],
        "--chips: '0' is not allowed; allowed: "
        + __import__("tlm.studies.protocol", fromlist=["x"]).CHIP_COUNTS_ALLOWED
        + " (each 1..10,000,000)",
    ),
    (
        ["train-search", "--scheduler", "dask"],
        "--scheduler: 'dask' is not allowed; allowed: local, inline, or an address such as "
        "tcp://host:8786",
    ),
    (
        ["noc", "--out", "/no/such/folder/x.json"],
        "--out: '/no/such/folder/x.json' cannot be written; allowed: a file in an existing folder",
    ),
    (
        ["noc", "--config", "/no/such.toml"],
        "--config: '/no/such.toml' cannot be read (No such "
        "file or directory); allowed: a .toml file of inputs, or a .json run contract (trnsim ... "
        "--out run.json)",
    ),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"trnsim {argv[0]}: error: {message}\n"
    assert "Traceback" not in err


def test_bad_config_files(capsys, tmp_path):
    (tmp_path / "other.json").write_text(json.dumps({"study": "noc", "inputs": {}}))
    assert main(["tensor", "--config", str(tmp_path / "other.json")]) == 2
    assert capsys.readouterr().err.endswith("is for 'noc'; allowed: a config of trnsim tensor\n")
    (tmp_path / "bad.toml").write_text("n = [1,\n")
    assert main(["tensor", "--config", str(tmp_path / "bad.toml")]) == 2
    assert "is not valid TOML" in capsys.readouterr().err
    (tmp_path / "typo.toml").write_text("clock = 1e9\n")
    assert main(["tensor", "--config", str(tmp_path / "typo.toml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trnsim tensor: error: --clock: 1000000000.0 is not an input of this")
    (tmp_path / "bool.toml").write_text("k = true\n")
    assert main(["tensor", "--config", str(tmp_path / "bool.toml")]) == 2
    assert "--k: True is not allowed; allowed: an integer >= 1" in capsys.readouterr().err


def test_unwritable_output_after_the_check(capsys, tmp_path, monkeypatch):
    """A file that cannot be written when the run ends still gives one line, no traceback."""
    from pathlib import Path

    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "write_text", refuse)
    assert main(["tensor", "--out", str(tmp_path / "x.json")]) == 2
    assert capsys.readouterr().err == (
        f"trnsim tensor: error: --out: '{tmp_path / 'x.json'}' cannot be written (Permission "
        "denied); allowed: a file path this user may write\n"
    )


@pytest.mark.parametrize(
    "name,values,field",
    [
        ("noc", {"rate": [True]}, "rate"),
        ("noc", {"cycles": 1.5}, "cycles"),
        ("noc", {"seed": -1}, "seed"),
        ("tensor", {"k": True}, "k"),
        ("gemm", {"cores": 0}, "cores"),
        ("gemm", {"dtype": "bf16"}, "dtype"),
    ],
)
def test_python_api_names_the_argument(name, values, field):
    with pytest.raises(InputError) as info:
        run_study(name, **values)
    assert info.value.field == field and str(info.value).startswith(f"{field}: ")


@pytest.mark.parametrize("name", sorted(QUICK))
def test_help(name, capsys):
    with pytest.raises(SystemExit) as done:
        main([name, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for field in STUDIES[name].inputs.model_fields:
        assert flag(field) in out
    for option in ("--config", "--json", "--out"):
        assert option in out


def test_the_top_level_help_lists_every_study(capsys):
    """``trnsim -h infer`` (a top-level option before the study) and ``trnsim --help`` list
    every study; ``trnsim infer ...`` builds infer's subcommand alone, and an unknown study's
    error still names them all."""
    for argv in (["--help"], ["-h", "infer"]):
        with pytest.raises(SystemExit):
            main(argv)
        out = capsys.readouterr().out
        assert all(name in out for name in STUDIES)
    assert main(["nope"]) == 2
    err = capsys.readouterr().err
    assert all(repr(name) in err for name in STUDIES)
    from tlm.studies.cli import parser

    sub = parser("infer", others=False)._subparsers._group_actions[0]
    assert list(sub.choices) == ["infer"]


#: The studies on a chip preset (--preset) and those on a hardware file (--hardware).
CHIP_STUDIES = {"tensor", "gemm", "collective", "tp-step", "model"}
HARDWARE_STUDIES = {"infer", "infer-search", "serve", "train", "train-search", "cost", "system"}
HARDWARE_STUDIES |= {"compare"}


def test_same_flags_for_the_same_things():
    """--preset, --hardware, --choose, --format, --kv-format and --seed mean one thing wherever
    they appear: one type, and for --preset and --hardware one description and one list."""
    from tlm.studies.protocol import allowed_text, without_none

    for field in ("preset", "hardware", "choose", "format", "kv_format", "seed"):
        owners = [s for s in STUDIES.values() if field in s.inputs.model_fields]
        assert owners
        types = {without_none(s.inputs.model_fields[field].annotation) for s in owners}
        assert len(types) == 1, field
        if field in ("preset", "hardware"):
            fields = [s.inputs.model_fields[field] for s in owners]
            assert len({(f.description, allowed_text(f)) for f in fields}) == 1, field
    chip = {s.name for s in STUDIES.values() if "preset" in s.inputs.model_fields}
    hardware = {s.name for s in STUDIES.values() if "hardware" in s.inputs.model_fields}
    assert chip == CHIP_STUDIES and hardware == HARDWARE_STUDIES


def test_every_format_is_named_as_tlm_formats_names_it():
    """A number format has one name on the front door: every input that takes formats
    (``--format``, ``--kv-format``, ``--formats``, ``--gradients-format``...) allows only
    names of :data:`tlm.formats.FORMATS`."""
    import typing

    from tlm.formats import FORMATS

    def names(annotation):
        args = typing.get_args(annotation)
        if typing.get_origin(annotation) is typing.Literal:
            return set(args)
        return set().union(*map(names, args)) if args else set()

    seen = 0
    for s in STUDIES.values():
        for name, field in s.inputs.model_fields.items():
            if not name.endswith(("format", "formats")):
                continue
            extra = field.json_schema_extra or {}
            allowed = set(extra.get("choices", ())) | names(field.annotation)
            assert allowed and allowed <= set(FORMATS), (s.name, name, allowed - set(FORMATS))
            seen += 1
    assert seen >= 12


def test_no_old_spelling_is_left():
    """The old names of renamed inputs are no input's name, and each is taken only where it
    names what it used to (--preset is the hardware's old name on a hardware file only)."""
    old = {"dtype", "kv_dtype", "dtypes", "kv_dtypes", "gemm_format", "weights_format"}
    for s in STUDIES.values():
        assert not old & set(s.inputs.model_fields), s.name
        for name, new in s.inputs.deprecated.items():
            assert name not in s.inputs.model_fields and new in s.inputs.model_fields
        assert ("preset" in s.inputs.deprecated) == (s.name in HARDWARE_STUDIES), s.name


def test_version_and_module_entry_point():
    out = subprocess.run(
        [sys.executable, "-m", "tlm", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == f"trnsim {__version__}"
    done = subprocess.run(
        [sys.executable, "-m", "tlm", "noc", "--vcs", "3"], capture_output=True, text=True
    )
    assert done.returncode == 2 and done.stderr.startswith("trnsim noc: error: --vcs: 3")


def test_progress_is_reported_not_printed(capsys):
    """A sweep reports how far it is to whoever listens (the command line's progress bar on a
    terminal) and prints nothing itself."""
    from tlm.studies.protocol import progress_to

    seen = []
    with progress_to(lambda done, total, what: seen.append((done, total))):
        run_study("noc", rate=[0.1, 0.2], cycles=200)
    assert seen == [(0, 2), (1, 2), (2, 2)]
    run_study("noc", rate=[0.1], cycles=200)
    assert capsys.readouterr() == ("", "")


def test_noc_engines_agree(capsys):
    """The compiled network and the per-router reference give the same figures, sweep or not."""
    args = ["noc", "--shape", "4x4", "--rate", "0.1,0.3", "--cycles", "600", "--json"]
    compiled = _run(args, capsys)
    python = _run([*args, "--engine", "python"], capsys)
    assert compiled["inputs"]["engine"] == "compiled" and python["inputs"]["engine"] == "python"
    assert compiled["results"] == python["results"] and compiled["series"] == python["series"]
    single = _run(["noc", "--shape", "4x4", "--rate", "0.3", "--cycles", "600", "--json"], capsys)
    assert single["series"][0] == compiled["series"][1]


def test_collective_failed_link_plot_and_root(capsys, tmp_path):
    """--fail-links says what went round it; --plot writes a figure; --root moves a broadcast."""
    png = tmp_path / "busbw.png"
    # one rank a chip (--no-runtime): the chips' links and the algorithms on them
    args = ["collective", "--fail-links", "5-6", "--sizes", "64KiB,1GiB", "--no-runtime"]
    args += ["--plot", str(png)]
    contract = _run([*args, "--json"], capsys)
    r = contract["results"]
    assert r["failed_links"] == "5-6" and r["links"] == 62
    assert [p["algorithm"] for p in contract["series"]] == ["mesh", "ring"]  # not kangaring
    assert r["detoured_transfers"] > 0  # the mesh's direct routes go round; the ring does not
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(args[:-2]) == 0
    assert "round 5-6" in capsys.readouterr().out
    cast = ["collective", "--op", "broadcast", "--sizes", "1MiB", "--json"]
    base = _run([*cast, "--no-runtime"], capsys)
    moved = _run([*cast, "--root", "6"], capsys)  # a root other than 0: links only, unasked
    assert not moved["inputs"]["runtime"]
    assert moved["series"][0]["time_s"] == base["series"][0]["time_s"]  # the torus is symmetric


def test_collective_trace(capsys, tmp_path):
    """--trace: a process per chip with its steps, a track per link with the transfers on it;
    the traced run ends when the flow engine says the operation ends."""
    path = tmp_path / "t.json"
    quick = ["collective", "--sizes", "4KiB,1MiB", "--no-runtime"]  # one rank a chip
    contract = _run([*quick, "--trace", str(path), "--json"], capsys)
    events = json.loads(path.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names == {f"chip {c}" for c in range(16)} | {"links"}
    links = {e["args"]["name"] for e in events if e.get("name") == "thread_name"} - {
        "collective sends"
    }
    assert len(links) == 64  # rdh at 1 MiB: every torus link carries a transfer
    steps = [e for e in events if e["ph"] == "X"]
    assert {e["name"].split()[0] for e in steps} == {contract["series"][1]["algorithm"]}
    end_us = max(e["ts"] + e["dur"] for e in steps)
    flow = _run(
        ["collective", "--sizes", "1MiB", "--engine", "flow", "--no-runtime", "--json"], capsys
    )
    assert end_us == pytest.approx(flow["series"][0]["time_s"] * 1e6, rel=1e-9)
    # as shipped, the runtime's ranks: a process per rank, named with its chip
    _run(["collective", "--sizes", "1MiB", "--trace", str(path), "--json"], capsys)
    events = json.loads(path.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e.get("name") == "process_name"}
    assert names == {f"rank {r} (chip {r // 4})" for r in range(64)} | {"links"}


def test_model_study_memory_and_facts(capsys):
    """trnsim model: the facts of the file and the memory of a layout; a layout that does not
    fit says so (fits: no, negative headroom) rather than failing."""
    c = _run(
        [
            "model",
            "--model",
            "llama3-70b",
            "--dp",
            "16",
            "--tp",
            "8",
            "--pp",
            "4",
            "--zero",
            "1",
            "--sp",
            "on",
            "--recompute",
            "selective",
            "--json",
        ],
        capsys,
    )
    r = c["results"]
    assert r["chips"] == 512 and r["fits"] is True
    assert r["parameters"] == 70553706496
    assert r["kv_cache_per_token_bytes"] == 80 * 2 * 8 * 128 * 2
    parts = ("weights", "gradients", "optimizer", "activations", "buffers")
    assert sum(r[f"{p}_bytes"] for p in parts) == pytest.approx(r["total_bytes"])
    assert r["hbm_bytes"] == 96 * 2**30 and r["headroom_bytes"] > 0
    assert {row["op"] for row in c["series"]} >= {"qkv", "score", "gate_up", "lm_head"}
    one = _run(["model", "--model", "llama3-70b", "--json"], capsys)["results"]
    assert one["fits"] is False and one["headroom_bytes"] < 0
    trn3 = _run(["model", "--model", "llama3-70b", "--preset", "trn3", "--json"], capsys)
    assert trn3["results"]["hbm_bytes"] == 144 * 2**30


def test_help_survives_percent_signs(capsys, monkeypatch):
    """A default shown in percent ('2 %') or a description with '%' must not break --help
    (argparse formats help text with %)."""
    import argparse

    from pydantic import Field

    from tlm.studies.catalogue import CATALOGUE, Entry
    from tlm.studies.cli import _add_study
    from tlm.studies.protocol import Inputs, Results, Study

    class Odd(Inputs):
        spares_fraction: float = Field(0.02, description="spare servers, as a % of the fleet")

    monkeypatch.setitem(CATALOGUE, "odd", Entry(__name__, "a study with 100 % percent signs"))
    study = Study("odd", Odd, lambda i: Results())
    sub = argparse.ArgumentParser(prog="trnsim").add_subparsers()
    _add_study(sub, study)
    with pytest.raises(SystemExit):
        sub.choices["odd"].parse_args(["--help"])
    out = capsys.readouterr().out
    assert "as a % of the fleet" in out and "2 %" in out


@pytest.mark.parametrize("name", ["train", "train-search", "collective", "infer", "infer-search"])
def test_plot_is_written(name, capsys, tmp_path):
    """--plot writes a figure (protocol.figure: the backend, the layout, the file)."""
    png = tmp_path / f"{name}.png"
    assert main([name, *QUICK[name], "--plot", str(png)]) == 0
    capsys.readouterr()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_figure_is_closed_when_drawing_fails(tmp_path):
    from matplotlib import pyplot as plt

    from tlm.studies.protocol import figure

    before = len(plt.get_fignums())
    with pytest.raises(ZeroDivisionError), figure(tmp_path / "x.png") as (fig, ax):
        ax.plot([0, 1], [0, 1 / 0])
    assert len(plt.get_fignums()) == before and not (tmp_path / "x.png").exists()


# ---- deprecated names and typed lists: the protocol's own, on a study made for the test ----


@pytest.fixture
def odd_study(monkeypatch):
    """A study ``odd`` whose inputs renamed ``dtype`` to ``format`` and hold typed lists."""
    from typing import Annotated, ClassVar, Literal

    from pydantic import Field

    from tlm.studies import protocol
    from tlm.studies.catalogue import CATALOGUE, Entry
    from tlm.studies.protocol import Inputs, Results, Study

    class OddInputs(Inputs):
        deprecated: ClassVar[dict[str, str]] = {"dtype": "format", "dtypes": "formats"}
        format: Literal["bf16", "fp8"] = Field("bf16", description="the format")
        formats: list[Literal["bf16", "fp8"]] = Field(
            default_factory=lambda: ["bf16"], min_length=1, description="formats tried"
        )
        micro_batches: list[Annotated[int, Field(ge=1)] | Literal["pp"]] = Field(
            default_factory=lambda: [1, "pp"],
            description="micro-batches tried",
            json_schema_extra={"allowed": "a comma-separated list of integers >= 1 and pp"},
        )
        tp: Literal["all"] | list[Annotated[int, Field(ge=1)]] = Field(
            "all",
            description="tp sizes tried",
            json_schema_extra={"allowed": "all, or a comma-separated list of integers >= 1"},
        )

    monkeypatch.setitem(CATALOGUE, "odd", Entry(__name__, "a study for the protocol's tests"))
    monkeypatch.setitem(protocol._REGISTERED, "odd", Study("odd", OddInputs, lambda i: Results()))
    return OddInputs


def test_a_deprecated_flag_is_taken_with_one_warning(odd_study, capsys):
    new = _run(["odd", "--format", "fp8", "--formats", "fp8,bf16", "--json"], capsys)
    assert main(["odd", "--dtype", "fp8", "--dtypes", "fp8,bf16", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == new
    assert err == (
        "trnsim odd: warning: --dtype is deprecated; use --format\n"
        "trnsim odd: warning: --dtypes is deprecated; use --formats\n"
    )
    with pytest.raises(SystemExit):
        main(["odd", "--help"])
    assert "--dtype" not in capsys.readouterr().out  # taken, not shown
    assert main(["odd", "--dtype", "fp8", "--format", "bf16"]) == 2
    assert capsys.readouterr().err == (
        "trnsim odd: error: --dtype: 'fp8' is given beside --format; allowed: --format alone "
        "(--dtype is its deprecated name)\n"
    )


def test_a_deprecated_config_key_is_taken_with_one_warning(odd_study, capsys, tmp_path):
    new = _run(["odd", "--format", "fp8", "--formats", "fp8", "--json"], capsys)
    (tmp_path / "old.toml").write_text('dtype = "fp8"\ndtypes = "fp8"\n')  # and a comma string
    assert main(["odd", "--config", str(tmp_path / "old.toml"), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == new
    assert err == (
        f"trnsim odd: warning: dtype in {tmp_path / 'old.toml'} is deprecated; use format\n"
        f"trnsim odd: warning: dtypes in {tmp_path / 'old.toml'} is deprecated; use formats\n"
    )
    (tmp_path / "old.json").write_text(json.dumps({"study": "odd", "inputs": {"dtype": "fp8"}}))
    assert (
        _run(["odd", "--config", str(tmp_path / "old.json"), "--json"], capsys)["inputs"]["format"]
        == "fp8"
    )
    (tmp_path / "both.toml").write_text('dtype = "fp8"\nformat = "bf16"\n')
    assert main(["odd", "--config", str(tmp_path / "both.toml")]) == 2
    assert "--dtype: 'fp8' is given beside format in" in capsys.readouterr().err
    with pytest.warns(DeprecationWarning, match="dtype is deprecated; use format"):
        assert run_study("odd", dtype="fp8").inputs.format == "fp8"


def test_typed_lists_from_flags_and_config_files(odd_study, capsys, tmp_path):
    c = _run(["odd", "--micro-batches", "2,pp", "--tp", "8,16", "--json"], capsys)
    assert c["inputs"]["micro_batches"] == [2, "pp"] and c["inputs"]["tp"] == [8, 16]
    assert c["inputs"]["formats"] == ["bf16"]
    assert _run(["odd", "--tp", "all", "--json"], capsys)["inputs"]["tp"] == "all"
    (tmp_path / "c.toml").write_text('micro_batches = [2, "pp"]\ntp = [8, 16]\n')
    assert _run(["odd", "--config", str(tmp_path / "c.toml"), "--json"], capsys) == c
    # from Python too, a list may be its comma-separated text
    r = run_study("odd", micro_batches="2,pp", tp="8,16", formats="bf16")
    assert c["inputs"] == r.to_dict()["inputs"]


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--formats", "bf16,int4"], "--formats: 'int4' is not allowed; allowed: a "
         "comma-separated list of bf16, fp8"),
        (["--micro-batches", "1,0"], "--micro-batches: 0 is not allowed; allowed: a "
         "comma-separated list of integers >= 1 and pp"),
        (["--micro-batches", "1,x"], "--micro-batches: 'x' is not allowed; allowed: a "
         "comma-separated list of integers >= 1 and pp"),
        (["--tp", "8,0"], "--tp: 0 is not allowed; allowed: all, or a comma-separated list of "
         "integers >= 1"),
        (["--tp", "some"], "--tp: 'some' is not allowed; allowed: all, or a comma-separated "
         "list of integers >= 1"),
        (["--formats", ","], "--formats: ',' is empty; allowed: a comma-separated list"),
    ],
)  # fmt: skip
def test_a_typed_list_names_the_bad_item(odd_study, argv, message, capsys):
    assert main(["odd", *argv]) == 2
    assert capsys.readouterr().err == f"trnsim odd: error: {message}\n"


# ---- the renamed inputs of the real studies -------------------------------------------------


def test_old_flags_run_as_the_new_ones(capsys):
    """infer's --preset, --dtype and --kv-dtype are --hardware, --format and --kv-format, and
    its format fp8 is fp8_e4m3, each with one warning; the contract is the new one's."""
    base = ["infer", *QUICK["infer"], "--json"]
    new = _run([*base, "--hardware", "trn2", "--format", "fp8_e4m3", "--kv-format", "bf16"], capsys)
    assert main([*base, "--preset", "trn2", "--dtype", "fp8", "--kv-dtype", "bf16"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == new
    assert err == (
        "trnsim infer: warning: --preset is deprecated; use --hardware\n"
        "trnsim infer: warning: --dtype is deprecated; use --format\n"
        "trnsim infer: warning: --kv-dtype is deprecated; use --kv-format\n"
        "trnsim infer: warning: --format fp8 is deprecated; use --format fp8_e4m3\n"
    )
    assert new["inputs"]["hardware"] == "trn2" and new["inputs"]["format"] == "fp8_e4m3"

    for name, old, flag_now in (
        ("cost", ["--preset", "h100"], "--hardware"),
        ("train", ["--gemm-format", "fp8_e4m3"], "--format"),
        ("model", ["--weights-format", "fp8_e4m3"], "--format"),
    ):
        quick = QUICK[name][2:] if name == "cost" else QUICK[name]  # QUICK's --hardware
        assert main([name, *quick, *old, "--json"]) == 0
        err = capsys.readouterr().err
        assert err == f"trnsim {name}: warning: {old[0]} is deprecated; use {flag_now}\n"


def test_old_config_keys_run_as_the_new_ones(capsys, tmp_path):
    """A config file or a saved run with the old names runs as the new ones, one warning each."""
    new = _run(
        ["train", *QUICK["train"], "--hardware", "trn2", "--format", "fp8_e4m3", "--json"], capsys
    )
    old = {k: v for k, v in new["inputs"].items() if k not in ("hardware", "format")}
    old |= {"preset": "trn2", "gemm_format": "fp8_e4m3"}
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"study": "train", "inputs": old}))
    assert main(["train", "--config", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == new
    assert err == (
        f"trnsim train: warning: preset in {path} is deprecated; use hardware\n"
        f"trnsim train: warning: gemm_format in {path} is deprecated; use format\n"
    )


def test_old_format_spellings_run_as_the_new_ones(capsys, tmp_path):
    """fp8, the inference studies' old name of fp8_e4m3, is taken from a flag, a list's item
    and a config file with one warning each; the contract shows fp8_e4m3."""
    path = tmp_path / "old.toml"
    path.write_text('kv_format = "fp8"\n')
    out = _run(["infer", *QUICK["infer"], "--config", str(path), "--json"], capsys)
    assert out["inputs"]["kv_format"] == "fp8_e4m3"
    path.write_text('study = "infer"\nkv_format = "fp8"\n')  # a run's inputs are in [inputs]
    assert main(["infer", "--config", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"trnsim infer: error: --config: {str(path)!r} has 'kv_format'; allowed: a run's keys "
        "(inputs, results, series, study, version)\n"
    )
    argv = ["infer-search", *QUICK["infer-search"], "--json"]
    new = _run([*argv, "--formats", "bf16,fp8_e4m3", "--kv-formats", "fp8_e4m3"], capsys)
    assert main([*argv, "--formats", "bf16,fp8", "--kv-formats", "fp8"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == new and new["inputs"]["formats"] == ["bf16", "fp8_e4m3"]
    assert {row["format"] for row in new["series"]} <= {"bf16", "fp8_e4m3"}
    assert err == (
        "trnsim infer-search: warning: --formats fp8 is deprecated; use --formats fp8_e4m3\n"
        "trnsim infer-search: warning: --kv-formats fp8 is deprecated; use --kv-formats "
        "fp8_e4m3\n"
    )
    with pytest.warns(DeprecationWarning, match="format fp8 is deprecated; use format fp8_e4m3"):
        report = run_study("infer", model="llama3.3-70b", tp=16, format="fp8")
    assert report.inputs.format == "fp8_e4m3"


def test_preset_is_the_chip_and_hardware_the_hardware_file(capsys):
    """--preset on a chip study is the chip preset (no warning); --hardware is the hardware
    file, which a chip study does not take; each names its own list when wrong."""
    trn3 = _run(["model", "--model", "llama3-70b", "--preset", "trn3", "--json"], capsys)
    assert trn3["inputs"]["preset"] == "trn3" and capsys.readouterr().err == ""
    h100 = _run(["infer", *QUICK["infer"], "--hardware", "h100", "--tp", "8", "--json"], capsys)
    assert h100["inputs"]["hardware"] == "h100" and "preset" not in h100["inputs"]
    assert main(["tensor", "--hardware", "trn2"]) == 2
    assert capsys.readouterr().err == (
        "trnsim tensor: error: unrecognized arguments: --hardware trn2\n"
    )
    for name in sorted(HARDWARE_STUDIES):
        assert main([name, "--hardware", "b200"]) == 2
        assert capsys.readouterr().err == (
            f"trnsim {name}: error: --hardware: 'b200' is not allowed; allowed: one of trn1, "
            "trn2, trn3, trn3-gen2, a100, h100, or a hardware file path ending in .toml\n"
        ), name
    assert main(["infer", "--preset", "trn2", "--hardware", "trn1"]) == 2
    assert capsys.readouterr().err == (
        "trnsim infer: error: --preset: 'trn2' is given beside --hardware; allowed: --hardware "
        "alone (--preset is its deprecated name)\n"
    )


@pytest.mark.parametrize("name", sorted(HARDWARE_STUDIES))
def test_hardware_in_help(name, capsys):
    with pytest.raises(SystemExit):
        main([name, "--help"])
    out = capsys.readouterr().out
    assert "--hardware HARDWARE" in out and "--preset" not in out
    assert "a100, h100" in " ".join(out.split())  # (wherever argparse wraps the line)


def test_a_saved_run_of_the_last_release_reruns(capsys, tmp_path):
    """infer-search's contract of the last release (its hardware as preset, its lists as comma
    strings, dtypes) reruns to the new contract: the lists as JSON lists, one warning per old
    name."""
    new = _run(["infer-search", *QUICK["infer-search"], "--json"], capsys)
    assert new["inputs"]["batches"] == [1, 8] and new["inputs"]["micro_batches"] == [1, "pp"]
    assert new["inputs"]["systems"] == ["server", "ultraserver"]
    assert new["inputs"]["formats"] == ["bf16", "fp8_e4m3"]
    old = dict(new["inputs"])
    for name, text in (
        ("systems", "server,ultraserver"),
        ("batches", "1,8"),
        ("expert_layouts", "tp,dp_attention"),
        ("micro_batches", "1,pp"),
    ):
        old[name] = text
    old["preset"] = old.pop("hardware")
    old["dtypes"] = ",".join(old.pop("formats")).replace("fp8_e4m3", "fp8")  # its spellings
    old["kv_dtypes"] = ",".join(old.pop("kv_formats")).replace("fp8_e4m3", "fp8")
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"study": "infer-search", "version": "0.1.0", "inputs": old}))
    assert main(["infer-search", "--config", str(path), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == new
    assert err.count("warning") == 5 and f"dtypes in {path} is deprecated; use formats" in err
    assert f"formats fp8 in {path} is deprecated; use formats fp8_e4m3" in err
    toml = tmp_path / "new.toml"
    assert main(["infer-search", "--config", str(path), "--out", str(toml)]) == 0
    capsys.readouterr()
    assert "batches = [1, 8]\n" in toml.read_text() and 'micro_batches = [1, "pp"]\n' in (
        toml.read_text()
    )
    collective = ["collective", "--sizes", "64KiB", "--json"]
    links = _run([*collective, "--fail-links", "5-6"], capsys)
    assert main([*collective, "--fail-link", "5-6"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == links and links["inputs"]["fail_links"] == ["5-6"]
    assert err == "trnsim collective: warning: --fail-link is deprecated; use --fail-links\n"
    (tmp_path / "none.toml").write_text('fail_link = ""\nsizes = "64KiB"\n')  # none failed
    c = _run(["collective", "--config", str(tmp_path / "none.toml"), "--json"], capsys)
    assert c["inputs"]["fail_links"] == []


def test_train_search_grad_acc_reaches_the_step(capsys):
    """``--grad-acc`` is the one field ``train`` and ``train-search`` share: the search's steps
    pay fp32 accumulation (its pass each micro-batch, its fp32 reduction) on a layout where it
    matters, its best layout run by ``train`` with the same flag gives the same step, the JSON
    inputs carry it, and a bad value is refused on one line."""
    base = ["train-search", "--model", "llama2-7b", "--hardware", "trn1", "--chips", "64"]
    base += ["--scheduler", "inline", "--tp", "4", "--pp", "1", "--zero", "1", "--json"]
    bf16 = _run(base, capsys)
    fp32 = _run([*base, "--grad-acc", "fp32"], capsys)
    assert bf16["inputs"]["grad_acc"] == "bf16" and fp32["inputs"]["grad_acc"] == "fp32"
    # (the best is micro-batch 4: 16 passes over the 1.7B parameters of a chip, ~0.3 s)
    assert fp32["results"]["best_step_s"] > 1.005 * bf16["results"]["best_step_s"]
    best = fp32["results"]
    train = ["train", "--model", "llama2-7b", "--hardware", "trn1", "--chips", "64", "--json"]
    for k in ("tp", "pp", "cp", "zero", "micro_batch", "interleave", "recompute"):
        train += [f"--{k.replace('_', '-')}", str(best[f"best_{k}"])]
    one = _run([*train, "--grad-acc", "fp32"], capsys)
    assert one["inputs"]["grad_acc"] == "fp32"
    assert one["results"]["step_s"] == pytest.approx(best["best_step_s"], rel=1e-9)
    for study in (base, train):
        assert main([*study, "--grad-acc", "fp16"]) == 2
        name = study[0]
        assert capsys.readouterr().err == (
            f"trnsim {name}: error: --grad-acc: 'fp16' is not allowed; allowed: one of bf16, fp32\n"
        )


def test_train_search_axes_are_all_or_a_list(capsys, tmp_path):
    base = ["train-search", "--model", "llama3-8b", "--chips", "64", "--scheduler", "inline"]
    listed = _run([*base, "--tp", "4,8", "--recompute", "selective,full", "--json"], capsys)
    assert listed["inputs"]["tp"] == [4, 8] and listed["inputs"]["pp"] == "all"
    assert listed["inputs"]["recompute"] == ["selective", "full"]
    assert listed["results"]["best_tp"] in (4, 8)
    assert listed["results"]["best_recompute"] in ("selective", "full")
    (tmp_path / "c.toml").write_text(
        'model = "llama3-8b"\nchips = "64"\nscheduler = "inline"\ntp = [4, 8]\n'
        'recompute = ["selective", "full"]\n'
    )
    assert _run(["train-search", "--config", str(tmp_path / "c.toml"), "--json"], capsys) == listed
    for argv, message in (
        (["--tp", "8,0"], "--tp: 0 is not allowed; allowed: all, or a comma-separated list of "
         "integers in 1..10000000"),
        (["--zero", "1,4"], "--zero: 4 is not allowed; allowed: all, or a comma-separated list "
         "of 0, 1, 2, 3"),
        (["--recompute", "half"], "--recompute: 'half' is not allowed; allowed: all, or a "
         "comma-separated list of none, selective, full, selective+mlp"),
        (["--pp", "x"], "--pp: 'x' is not allowed; allowed: all, or a comma-separated list of "
         "integers in 1..10000000"),
    ):  # fmt: skip
        assert main([*base, *argv]) == 2
        assert capsys.readouterr().err == f"trnsim train-search: error: {message}\n"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["tensor", "--clock-hz", "inf"], "--clock-hz: inf is not allowed; allowed: a finite "
         "number > 0"),
        (["train", "--oversubscription", "inf"], "--oversubscription: inf is not allowed; "
         "allowed: a finite number >= 1"),
        (["train", "--restart-s", "inf"], "--restart-s: inf is not allowed; allowed: a finite "
         "number >= 0"),
        (["noc", "--rate", "0.1,inf"], "--rate: inf is not allowed; allowed: a comma-separated "
         "list of loads in 0..1, each finite"),
    ],
)  # fmt: skip
def test_an_infinite_number_is_one_line_not_a_crash(argv, message, capsys):
    """inf reaches no model (it crashed with a division by zero, or blamed goodput)."""
    assert main(argv) == 2
    assert capsys.readouterr().err == f"trnsim {argv[0]}: error: {message}\n"
    with pytest.raises(InputError, match="a finite number >= 0"):
        run_study("train", restart_s=float("inf"))


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--micro-batch", "99999999999999999999999"], "--micro-batch: "
         "99999999999999999999999 is not allowed; allowed: an integer in 1..10000000"),
        (["train", "--tp", "99999999999999999999999"], "--tp: 99999999999999999999999 is not "
         "allowed; allowed: an integer in 1..10000000"),
        (["train", "--swap-s", "1e23"], "--swap-s: 1e+23 stops the run; allowed: a time that "
         "leaves the run some progress: 7.27 interruptions a day on 16,384 chips, each costing "
         "it"),
        (["cost", "--repair-s", "1e30"], "--repair-s: 1e+30 stops the run; allowed: a time "
         "that leaves the run some progress: 7.27 interruptions a day on 16,384 chips, each "
         "costing it"),
        (["cost", "--reform-s", "1e30", "--elastic-replica-chips", "128"], "--reform-s: 1e+30 "
         "stops the run; allowed: a time that leaves the run some progress: 7.27 interruptions "
         "a day on 16,384 chips, each costing it"),
    ],
)  # fmt: skip
def test_huge_values_are_one_line_naming_their_flag(argv, message, capsys):
    """See below."""
    _one_line(argv, message, capsys)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["gemm", "--m", "9999999"], "--m: 9999999 is too large (HBM overflow: 81919991808 "
         "bytes requested on hbm0, 0 of 25769803776 in use); allowed: sizes whose A, B and C "
         "fit the chip's HBM"),
        (["gemm", "--bufs", "100"], "--bufs: 100 is too many (SBUF overflow: 2048 bytes per "
         "partition requested, 229376 of 229376 in use (0 free, none of it a large enough "
         "range)); allowed: as many buffers as SBUF holds at this tile size (2 or more)"),
        (["noc", "--cycles", "99999999999999999999999"], "--cycles: 99999999999999999999999 "
         "is not allowed; allowed: an integer in 1..1000000000"),
        (["train", "--seq-len", "99999999999999999999999"], "--seq-len: "
         "99999999999999999999999 is not allowed; allowed: an integer in 1..1000000000"),
        (["infer-search", "--prompt", "99999999999999999999999"], "--prompt: "
         "99999999999999999999999 is not allowed; allowed: an integer in 1..1000000"),
        (["tp-step", "--n", "99999999999999999999999"], "--n: 99999999999999999999999 is not "
         "allowed; allowed: an integer in 1..16777216"),
    ],
)  # fmt: skip
def test_capacity_and_counts_name_their_flag(argv, message, capsys):
    """The fuzz from outside's second and third samples: a GEMM too large for HBM or with more
    buffers than SBUF holds named the kernel's allocation, not the input; counts past a billion
    (cycles, sequences, tokens) crashed in numpy or were blamed on another flag; a huge prompt
    reached infer-search's Dask workers (a traceback in their log), a huge tp-step N ran on."""
    _one_line(argv, message, capsys)


def _one_line(argv, message, capsys):
    """Found by the fuzz from outside (tools/fuzz_outside.py): an integer beyond int64 crashed
    in numpy, a huge --tp was blamed on --chips, a finite time that stops the run blamed
    goodput. Parallel sizes stop at the most chips a study takes; a time that leaves no
    progress names the input whose share of the lost time is largest."""
    assert main(argv) == 2
    assert capsys.readouterr().err == f"trnsim {argv[0]}: error: {message}\n"


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["compare", "--output", "1"],
            "--output: 1 is not allowed; allowed: an integer in 2..1000000",
        ),
        (
            ["train-search", "--model", "llama3-8b", "--chips", "64", "--scheduler", "inline",
             "--power-budget-w", "1e-6"],
            "--power-budget-w: 1e-06 leaves no feasible layout of llama3-8b: none stays within "
            "the power budget of 1e-06 W; allowed: a budget some valid layout meets",
        ),
    ],
)  # fmt: skip
def test_pairs_of_allowed_values_end_in_results_or_their_flag(argv, message, capsys):
    """The fuzz from outside's pairs of allowed values: compare --output 1 divided by a TPOT of
    0; a power budget no layout meets was blamed on --chips."""
    _one_line(argv, message, capsys)


def test_defaults_follow_what_was_given(capsys):
    """Found by the pairs: a default that another input makes wrong follows it, not refuses
    it. The collective sweep starts at the op's smallest buffer (reduce-scatter of bf16 on a
    trn2 server's 64 ranks: 128 B, where the default starts at 8 B); the tensor op's K and M
    are the engine's rows and columns (an engine of one row took K 128)."""
    rs = _run(["collective", "--op", "reduce_scatter", "--json"], capsys)
    assert rs["inputs"]["sizes"] == "128B..4GiB" and rs["series"][0]["size_bytes"] == 128
    assert main(["collective", "--op", "reduce_scatter", "--sizes", "8B"]) == 2
    assert "--sizes: 8 is not allowed" in capsys.readouterr().err  # given, it is the user's
    one = _run(["tensor", "--rows", "1", "--json"], capsys)
    assert (one["inputs"]["k"], one["inputs"]["m"]) == (1, 128)
    full = _run(["tensor", "--json"], capsys)
    assert (full["inputs"]["k"], full["inputs"]["m"]) == (128, 128)


def test_a_blank_list_in_a_config_is_empty(capsys, tmp_path):
    """Found by the fuzz from outside's config cases: ``fail_links = ""`` in a config ran with
    no failed link where ``--fail-links ''`` is refused; both refuse now (the deprecated
    ``fail_link = ""`` of the last release still means none)."""
    (tmp_path / "c.toml").write_text('fail_links = ""\n')
    assert main(["collective", "--config", str(tmp_path / "c.toml")]) == 2
    assert "--fail-links: '' is empty" in capsys.readouterr().err


def test_output_paths_are_checked_before_the_run(capsys, tmp_path, monkeypatch):
    """--out '' and --out-dir '' were ignored or wrote into the current folder; a relative
    --out-dir is made absolute (Dask workers run in folders of their own)."""
    assert main(["collective", "--out", ""]) == 2
    assert capsys.readouterr().err == (
        "trnsim collective: error: --out: '' is empty; allowed: a file path: .toml for the "
        "inputs, else JSON\n"
    )
    assert main(["infer-search", "--out-dir", "", "--scheduler", "inline"]) == 2
    assert "--out-dir: '' is empty; allowed: a folder path" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    assert main(["infer-search", "--out-dir", str(tmp_path / "file")]) == 2
    assert "allowed: a folder (this is a file)" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)
    out = _run(["infer-search", *QUICK["infer-search"], "--out-dir", "chunks", "--json"], capsys)
    assert out["inputs"]["out_dir"] == str(tmp_path / "chunks")
    assert any((tmp_path / "chunks").iterdir())


@pytest.mark.parametrize(
    "flag, value, figure",
    [
        ("--restart-s", "3600", "best_train_days"),
        ("--storage-Bps", "1e9", "best_train_days"),
        ("--spares-per-server", "0.5", "best_power_w"),
        ("--pue", "1.5", "best_power_w"),
        ("--repair-s", "60", "best_train_days"),  # with no spares a repair waits
        ("--swap-s", "0", "best_train_days"),
        ("--memory-checkpoint-Bps", "1e11", "best_train_days"),
        ("--elastic-replica-chips", "32", "best_train_days"),
    ],
)
def test_train_search_honours_every_run_input(flag, value, figure, capsys):
    """train-search passed only the network's settings on: the run's goodput and cost inputs
    changed nothing. Each now moves the figure it should (as in trnsim train)."""
    base = ["train-search", *QUICK["train-search"], "--json"]
    if flag == "--repair-s":
        base += ["--spares-per-server", "0"]
    before = _run(base, capsys)["results"][figure]
    after = _run([*base, flag, value], capsys)["results"][figure]
    assert after != pytest.approx(before, rel=1e-6), (flag, before, after)


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """``trnsim ... --json | head``: the reader goes away first (``true`` reads nothing and
    exits before Python has started); no traceback, exit 141 (as a shell's command killed by
    SIGPIPE), what was left to print dropped."""
    import subprocess
    import sys

    command = f"{sys.executable} -m tlm system --json | true"
    done = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command}; echo $? >&2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "141", done.stderr


def test_readable_figures():
    """Durations in the largest sensible unit, counts with separators, ratios as x, and two
    figures a table would give one name told apart by what each is."""
    from tlm.studies.units import human, labels

    assert human("mtbf_s", 1950.0) == "32.5 min"
    assert human("run_wall_s", 155 * 86400.0) == "155 days"
    assert human("restart_s", 45.0) == "45 s"
    assert human("site_latency_s", 0.0) == "0 s" and human("power_w", 0.0) == "0 W"
    assert human("switch_ports", 3_500_000.0) == "3,500,000"
    assert human("servers", 6250) == "6,250"
    assert human("spares_per_server", 0.02) == "0.02"
    assert human("cloud_over_owned_ratio", 6.9512) == "6.95x"
    keys = ["checkpoint_bytes", "checkpoint_fraction", "restart_s", "restart_fraction", "lost"]
    assert labels(keys) == [
        "checkpoint size",
        "checkpoint share",
        "restart time",
        "restart share",
        "lost",
    ]


def test_cost_reports_the_reliability_strategies(capsys):
    """Each strategy is a flag of the cost study; --json carries it in the inputs and its
    figures in the results; all of them at 1M chips beat today's 524k chips."""
    base = ["cost", "--hardware", "trn2", "--model", "llama3-405b", "--json"]
    today = _run([*base, "--chips", "524288"], capsys)
    inputs = today["inputs"]
    assert inputs["swap_s"] == inputs["restart_s"] == 600 and inputs["jobs"] == 1  # resolved
    assert inputs["memory_checkpoint_Bps"] == 0 and inputs["elastic_replica_chips"] == 0
    assert today["results"]["memory_checkpoint_write_s"] is None
    assert today["results"]["elastic_fraction"] == 0
    flags = ["--swap-s", "150", "--memory-checkpoint-Bps", "50e9", "--peer-group-servers", "3",
             "--elastic-replica-chips", "128", "--reform-s", "30", "--jobs", "8"]  # fmt: skip
    every = _run([*base, "--chips", "1048576", *flags], capsys)
    inputs = every["inputs"]
    assert (inputs["swap_s"], inputs["memory_checkpoint_Bps"], inputs["jobs"]) == (150, 50e9, 8)
    assert (inputs["peer_group_servers"], inputs["elastic_replica_chips"]) == (3, 128)
    assert inputs["reform_s"] == 30
    r = every["results"]
    assert r["goodput_fraction"] > today["results"]["goodput_fraction"]
    assert r["memory_restore_fraction"] > 0.99 and r["elastic_drops_per_day"] > 0
    parts = ("goodput", "checkpoint", "restart", "lost", "elastic")
    assert sum(r[f"{p}_fraction"] for p in parts) == pytest.approx(1.0)
    again = _run(["cost", "--json", *sum(([f"--{k.replace('_', '-')}", str(v)]
                                         for k, v in inputs.items()), [])], capsys)  # fmt: skip
    assert again["results"] == every["results"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["cost", "--chips", "64", "--jobs", "65"], "--jobs: 65 is not allowed; allowed: at most "
         "the chips (64)"),
        (["train", *QUICK["train"], "--elastic-replica-chips", "2048"], "--elastic-replica-chips: "
         "2048 is not allowed; allowed: at most the chips (1024)"),
        (["train-search", *QUICK["train-search"], "--elastic-replica-chips", "100"],
         "--elastic-replica-chips: 100 is not allowed; allowed: at most the chips (64)"),
        (["cost", "--swap-s", "-1"], "--swap-s: -1.0 is not allowed; allowed: a number >= 0"),
        (["train", "--jobs", "2"], "unrecognized arguments: --jobs 2"),
    ],
)  # fmt: skip
def test_bad_reliability_flags_are_one_line(argv, message, capsys):
    """jobs is the cost study's alone: the training studies model one job on their chips."""
    assert main(argv) == 2
    assert capsys.readouterr().err == f"trnsim {argv[0]}: error: {message}\n"


def test_a_product_of_inputs_is_blamed_on_the_last_one_named():
    """A model's "pp x interleave must be ..." error names an input (--interleave), with the
    product's value, where it passed through without a flag."""
    from tlm.studies.protocol import InputError, model_error

    fields = {"pp": None, "interleave": None}
    error = ValueError("pp x interleave must be at most the 61 layers of deepseek-v3, not 64")
    out = model_error(error, fields, {"pp": 32, "interleave": 2})
    assert isinstance(out, InputError) and out.field == "interleave"
    assert out.message("--interleave") == (
        "--interleave: 2 is not allowed; allowed: such that pp x interleave is at most the 61 "
        "layers of deepseek-v3 (here 64)"
    )
    divides = ValueError("dp x micro_batch must divide the global batch of 8 sequences, not 3")
    assert "dp x micro_batch divides the global batch" in model_error(
        divides, {"dp": 1, "micro_batch": 1}, {"dp": 3, "micro_batch": 1}
    ).message("--micro-batch")
    other = ValueError("aa x bb must be 1, not 2")  # no input of those names: unchanged
    assert model_error(other, {"pp": 1}, {}) is other


def test_train_says_what_each_mfu_counts():
    """The table and the JSON name each MFU's FLOP count; at 131K tokens the causal count is
    below the whole square's by the masked half of attention's FLOPs."""
    from tlm.workloads import load_model

    r = run_study(
        "train", model="llama3-8b", chips=128, tp=8, cp=16, pp=1, seq_len=131072, global_batch=1
    ).results
    assert "whole square" in r.flop_count and "causal mfu" in r.flop_count
    m = load_model("llama3-8b")
    ratio = m.training_flop_per_token(131072, causal=True) / m.training_flop_per_token(131072)
    assert r.causal_mfu_fraction == pytest.approx(r.mfu_fraction * ratio, rel=1e-9)
    assert r.causal_mfu_fraction < 0.75 * r.mfu_fraction
