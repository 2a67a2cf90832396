"""``make bench`` / ``python -m bench``: the project's performance figures.

Prints a table with each figure beside its target and the naive design's figure
(``../shared/TOOLCHAIN.md``), and records them in ``build/bench/figures.json``: the latest
record of every part, a run of some parts replacing theirs and leaving the others' as they
were. Nothing here is a test: figures are measured,
printed and recorded, never asserted.

    python -m bench                 # everything (about 15 minutes)
    python -m bench --only tlm,gen  # a subset: gen, build, sim, tlm, chip, noc, coll, cluster,
                                    # costs, serve, infer, synth
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sys
import time

import numpy as np

from .common import OUT, ROOT, best_time, build_in_child, generate

PARTS = (
    "gen",
    "build",
    "sim",
    "tlm",
    "chip",
    "noc",
    "coll",
    "cluster",
    "costs",
    "serve",
    "infer",
    "synth",
)


def _children_peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def _label(size: int, fmt: str, stages: dict | None = None) -> str:
    text = f"{size}x{size}" + ("" if fmt == "int8" else f" {fmt}")
    if stages:
        pe, dec = stages["pe_stages"], stages["decode_stages"]
        text += f" (PE {pe} stage{'s' * (pe != 1)}, decoders {dec})"
    return text


def other_float_stages() -> dict:
    """The stage counts the benches compare with a floating-point engine's defaults:
    :data:`~tlm.tensor.config.ONE_STAGE_FLOAT` while the default is pipelined,
    :data:`~tlm.tensor.config.PIPELINED_FLOAT` otherwise."""
    from tlm.tensor.config import ONE_STAGE_FLOAT, PIPELINED_FLOAT, EngineConfig

    default = EngineConfig(4, 4, "all")
    if {"pe_stages": default.pe_stages, "decode_stages": default.decode_stages} == ONE_STAGE_FLOAT:
        return dict(PIPELINED_FLOAT)
    return dict(ONE_STAGE_FLOAT)


def bench_gen(size: int, fmt: str = "int8") -> list[dict]:
    """Verilog generation in a fresh interpreter (as FuseSoC and `make gen` run it)."""
    out = OUT / f"tensor_engine_{size}_{fmt}.v"
    label = _label(size, fmt)
    int8_128 = size == 128 and fmt == "int8"
    wall, info = generate(
        "tensor_engine", ["--rows", str(size), "--cols", str(size), "--format", fmt], out
    )
    return [
        {
            "figure": f"Verilog generation {label}",
            "value": wall,
            "unit": "s",
            "target": "<= 10 s" if int8_128 else "",
            "naive": "118 s" if int8_128 else ("5.4 s" if size == 32 else ""),
        },
        {
            "figure": f"Verilog size {label}",
            "value": info["bytes"] / 1e6,
            "unit": "MB",
            "target": "",
            "naive": "34 MB" if int8_128 else ("2 MB" if size == 32 else ""),
        },
    ]


def _config(size: int, fmt: str, stages: dict | None = None):
    from tlm.tensor.config import EngineConfig

    return EngineConfig(size, size, fmt, **(stages or {}))


def _cached_build(sim: str, size: int, fmt: str = "int8", stages: dict | None = None):
    from verif.tensor.build import build_engine

    return build_engine(sim, _config(size, fmt, stages))


def bench_build(size: int, fmt: str = "int8", stages: dict | None = None) -> list[dict]:
    figures = build_in_child(
        "from tlm.tensor.config import EngineConfig\nfrom verif.tensor.build import build_engine",
        f"build_engine('verilator', EngineConfig({size}, {size}, {fmt!r}, **{stages or {}!r}), "
        "fresh=True)",
    )
    label = _label(size, fmt, stages)
    int8_128 = size == 128 and fmt == "int8"
    return [
        {
            "figure": f"Verilator build under cocotb {label}",
            "value": figures["seconds"],
            "unit": "s",
            "target": "<= 300 s" if int8_128 else ("<= 600 s" if size == 128 else ""),
            "naive": "916 s" if int8_128 else "",
        },
        {
            "figure": f"Verilator build peak memory {label}",
            "value": figures["peak_gib"],
            "unit": "GiB",
            "target": "<= 4 GiB" if int8_128 else ("<= 8 GiB" if size == 128 else ""),
            "naive": "3 GiB" if int8_128 else "",
        },
    ]


def bench_sim(
    sim: str, size: int, cycles: int, fmt: str = "int8", stages: dict | None = None
) -> list[dict]:
    """Speed of ``sim`` under cocotb on a ``size`` x ``size`` engine of ``fmt`` (with
    ``stages``, :data:`~tlm.tensor.config.PIPELINED_FLOAT` say; default: the engine's
    defaults): driven at full rate and clock only for ``cycles``, and with the lockstep
    scoreboard."""
    from verif.common.runner import run

    simbuild = _cached_build(sim, size, fmt, stages)
    label = _label(size, fmt, stages)
    cfg = _config(size, fmt, stages)
    tag = f"{sim}_{cfg.tag}"
    perf = OUT / f"speed_{tag}.json"
    env = {"TE_ROWS": size, "TE_COLS": size, "TE_FORMAT": fmt, "PYTHONPATH": ROOT}
    env |= {"TE_PE_STAGES": cfg.pe_stages, "TE_DECODE_STAGES": cfg.decode_stages}
    run(
        simbuild,
        "verif.tensor.speed",
        test_dir=simbuild.build_dir / "speed",
        env={**env, "TE_CYCLES": cycles, "TE_PERF_JSON": perf},
    )
    figures = json.loads(perf.read_text())
    checked = OUT / f"checked_{tag}.json"
    run(
        simbuild,
        "verif.tensor.bench",
        test_dir=simbuild.build_dir / "checked",
        env={
            **env,
            "SEED": 1,
            "TE_OPS": 3,
            "TE_MAX_N": 512,
            "TE_MISUSE": 0,
            "TE_PATTERNS": "always:always:always",
            "TE_PERF_JSON": checked,
        },
    )
    board = json.loads(checked.read_text())
    name = "Verilator" if sim == "verilator" else "Icarus"
    naive = {("verilator", 128): "~320", ("verilator", 32): "~13.5 k", ("icarus", 16): "~1,270"}
    target = ""
    if size == 128:
        target = ">= 3,000" if fmt == "int8" else ">= 1,000"
    return [
        {
            "figure": f"{name} under cocotb {label}, driven at full rate",
            "unit": "cycles/s",
            "value": figures["driven_cycles_per_s"],
            "target": target,
            "naive": naive.get((sim, size), "") if fmt == "int8" else "",
        },
        {
            "figure": f"{name} under cocotb {label}, clock only",
            "unit": "cycles/s",
            "value": figures["clock_only_cycles_per_s"],
            "target": "",
            "naive": "",
        },
        {
            "figure": f"{name} under cocotb {label}, with the lockstep scoreboard",
            "unit": "cycles/s",
            "value": board["cycles"] / board["seconds"],
            "target": "",
            "naive": "",
        },
    ]


def bench_tlm() -> list[dict]:
    from tlm.tensor import matmul

    rng = np.random.default_rng(0)
    s = rng.integers(-128, 128, (128, 128)).astype(np.int8)
    x = rng.integers(-128, 128, (128, 512)).astype(np.int8)

    def best(fn, repeat=30):
        return best_time(fn, repeat)

    ours = best(lambda: matmul(s, x))
    sf, xf = s.astype(np.float32), x.astype(np.float32)
    numpy_f32 = best(lambda: sf.T @ xf)
    numpy_int = best(lambda: s.T.astype(np.int32) @ x.astype(np.int32), repeat=5)

    import ml_dtypes

    wb = rng.standard_normal((128, 128)).astype(ml_dtypes.bfloat16)
    xb = rng.standard_normal((128, 512)).astype(ml_dtypes.bfloat16)

    def plain_loop():  # the float32 steps of the numerics contract, as plain numpy
        a, b = wb.astype(np.float32), xb.astype(np.float32)
        acc = np.zeros((128, 512), np.float32)
        for k in range(128):
            acc += a[k][:, None] * b[k][None, :]
        return acc

    ours_bf16 = best(lambda: matmul(wb, xb), repeat=10)
    loop = best(plain_loop, repeat=10)
    return [
        {
            "figure": "TLM matmul 128x128x512 bf16 (bit-exact fp32)",
            "value": ours_bf16 * 1e3,
            "unit": "ms",
            "target": "<= 2x loop",
            "naive": "",
        },
        {
            "figure": "numpy loop over k of the float32 steps, same shapes",
            "value": loop * 1e3,
            "unit": "ms",
            "target": "",
            "naive": "",
        },
        {
            "figure": "TLM bf16 matmul / numpy loop",
            "value": ours_bf16 / loop,
            "unit": "x",
            "target": "<= 2",
            "naive": "",
        },
        {
            "figure": "TLM matmul 128x128x512 int8 (exact int32)",
            "value": ours * 1e3,
            "unit": "ms",
            "target": "<= 3x numpy @",
            "naive": "",
        },
        {
            "figure": "numpy float32 @, same shapes",
            "value": numpy_f32 * 1e3,
            "unit": "ms",
            "target": "",
            "naive": "",
        },
        {
            "figure": "numpy int32 @, same shapes",
            "value": numpy_int * 1e3,
            "unit": "ms",
            "target": "",
            "naive": "",
        },
        {
            "figure": "TLM matmul / numpy float32 @",
            "value": ours / numpy_f32,
            "unit": "x",
            "target": "<= 3",
            "naive": "",
        },
    ]


def print_table(rows: list[dict]):
    from rich.console import Console
    from rich.table import Table

    table = Table(title="tensor engine benchmarks")
    for col in ("figure", "value", "unit", "target", "naive"):
        table.add_column(col, justify="left" if col == "figure" else "right")
    for row in rows:
        value = row["value"]
        text = f"{value:,.0f}" if value >= 100 else f"{value:.3g}"
        table.add_row(row["figure"], text, row["unit"], row["target"], row["naive"])
    Console().print(table)


#: The generated section of docs/performance.md (between these two lines).
DOC = ROOT / "docs" / "performance.md"
BEGIN = "<!-- figures: written by `make bench` from build/bench/figures.json; do not edit -->"
END = "<!-- figures: end -->"
#: Each part's title in the rendered tables.
TITLES = {
    "tlm": "tensor engine TLM",
    "chip": "chip TLM",
    "gen": "Verilog generation",
    "build": "Verilator builds",
    "sim": "RTL simulation under cocotb",
    "noc": "NeuronLink",
    "coll": "collectives",
    "cluster": "training model",
    "costs": "operator costs",
    "serve": "serving simulation",
    "infer": "inference model and start-up",
    "synth": "synthesis to generic gates",
}


def _value_text(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def sections(block: str) -> dict[str, str]:
    """The rendered section of each part in ``block`` (a :func:`render` output), by part."""
    found = {}
    for chunk in block.split("\n### ")[1:]:
        chunk = chunk.split(END, 1)[0].strip()
        for part, title in TITLES.items():
            if chunk.startswith(f"{title} (`--only {part}`)"):
                found[part] = f"### {chunk}\n"
    return found


def render(latest: dict, kept: dict[str, str] | None = None) -> str:
    """The figures of record (``figures.json``'s latest record of each part) as Markdown:
    a table per part, with when and on what load it was measured. A part ``latest`` lacks
    keeps its section from ``kept`` (:func:`sections` of the page as it was), so that a
    run of some parts on a machine without the others' record leaves theirs on the page."""
    out = [BEGIN, ""]
    for part in PARTS:
        if part not in latest:
            if part in (kept or {}):
                out.append(kept[part])
            continue
        rec = latest[part]
        load = rec.get("load", "")
        out.append(f"### {TITLES[part]} (`--only {part}`)")
        out.append("")
        out.append(
            f"{rec['when']}, {rec['machine']}, Python {rec['python']}"
            + (f", load average {load}" if load else "")
            + "."
        )
        out.append("")
        out.append("| figure | value | unit | target | naive |")
        out.append("|---|---|---|---|---|")
        for row in rec["figures"]:
            cells = (row["figure"], _value_text(row["value"]), row["unit"], row["target"])
            out.append(
                "| " + " | ".join(str(c).replace("|", "/") for c in cells) + f" | {row['naive']} |"
            )
        out.append("")
    out.append(END)
    return "\n".join(out)


def write_doc(latest: dict, doc=DOC) -> None:
    """Put :func:`render` between :data:`BEGIN` and :data:`END` in ``doc`` (after its title
    the first time)."""
    text = doc.read_text()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        block = render(latest, sections(rest.split(END, 1)[0]))
        text = head + block + rest.split(END, 1)[1]
    else:
        title, rest = text.split("\n", 1)
        text = f"{title}\n\n## Figures of record\n\n{render(latest)}\n{rest}"
    doc.write_text(text)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    p.add_argument(
        "--only",
        default=",".join(PARTS),
        help=f"comma-separated parts to run, of {', '.join(PARTS)}",
    )
    p.add_argument("--cycles", type=int, default=3000, help="cycles of each speed run")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument(
        "--render",
        action="store_true",
        help="only write build/bench/figures.json's figures into docs/performance.md",
    )
    args = p.parse_args(argv)
    path = OUT / "figures.json"
    if args.render:
        if not path.exists():
            p.error(f"--render needs {path}: run make bench first")
        write_doc(json.loads(path.read_text()))
        print(f"wrote {DOC}")
        return 0
    parts = [x for x in args.only.split(",") if x]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        p.error(f"--only takes {', '.join(PARTS)}, not {', '.join(unknown)}")
    OUT.mkdir(parents=True, exist_ok=True)
    from verif.common.toolchain import apply_environment

    apply_environment()
    by_part: dict[str, list[dict]] = {}
    if "tlm" in parts:
        by_part["tlm"] = bench_tlm()
    if "chip" in parts:
        from .chip import bench_chip

        by_part["chip"] = bench_chip(OUT)
    if "gen" in parts:
        by_part["gen"] = bench_gen(32) + bench_gen(128) + bench_gen(128, "all")
    if "build" in parts:
        builds = bench_build(128) + bench_build(128, "all")
        by_part["build"] = builds + bench_build(128, "all", other_float_stages())
    if "sim" in parts:
        sims = bench_sim("verilator", 128, args.cycles)
        sims += bench_sim("verilator", 128, args.cycles // 2, "all")
        sims += bench_sim("verilator", 128, args.cycles // 2, "all", other_float_stages())
        sims += bench_sim("verilator", 32, args.cycles)
        if shutil.which("iverilog"):
            sims += bench_sim("icarus", 16, args.cycles // 4)
        by_part["sim"] = sims
    if "noc" in parts:
        from .noc import bench_noc

        by_part["noc"] = bench_noc()
    if "coll" in parts:
        from .collectives import bench_collectives

        by_part["coll"] = bench_collectives()
    if "cluster" in parts:
        from .cluster import bench_cluster

        by_part["cluster"] = bench_cluster()
    if "costs" in parts:
        from .costs import bench_costs

        by_part["costs"] = bench_costs()
    if "serve" in parts:
        from .serving import bench_serving

        by_part["serve"] = bench_serving()
    if "infer" in parts:
        from .inference import bench_inference

        by_part["infer"] = bench_inference()
    if "synth" in parts:
        from .synth import bench_synth

        by_part["synth"] = bench_synth()
    head = {
        "machine": platform.platform(),
        "python": platform.python_version(),
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
    }
    latest = json.loads(path.read_text()) if path.exists() else {}
    latest |= {part: {**head, "figures": part_rows} for part, part_rows in by_part.items()}
    path.write_text(json.dumps({p: latest[p] for p in PARTS if p in latest}, indent=2))
    rows = [row for part in parts for row in by_part[part]]
    record = {**head, "figures": rows}
    if args.json:
        print(json.dumps(record))
    else:
        print_table(rows)
        print(f"recorded in {OUT / 'figures.json'} ({', '.join(by_part)}) and {DOC}")
    write_doc(latest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
