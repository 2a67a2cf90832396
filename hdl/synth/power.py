"""``python -m hdl.synth.power`` (``make power``): a relative dynamic-power proxy per format.

For each format, one GEMM (K = rows, M = cols, N columns of random operands, seeded) runs on a
small tensor engine in Amaranth's simulator, in lockstep with the TLM's cycle model (the
scoreboard of the benches: a wrong result stops the run), writing a VCD. Every bit toggle of
every net over the run is counted (:mod:`~hdl.synth.toggles`), each weighed by a capacitance
of 1 (no library, no fanout, no wire load), and the sum divided by the GEMM's MACs: toggles per
MAC, and that over int8's. Two engines per format: one elaborated with that format alone, and
the every-format engine running it.

A proxy, stated as such: dynamic power is ``alpha C V^2 f``; this keeps only ``alpha`` over
the RTL's nets (registers and the named wires of the Amaranth design, not the gates inside a
multiplier), with every net the same ``C``. It leaves out the clock tree (the largest single
part of a real array's dynamic power, in proportion to its flops, see ``make synth``'s area
proxy), SRAM and the engine's buffers outside the RTL, glitches (a zero-delay simulation) and
leakage. It feeds nothing until an issue asks for it.

With ``--gates``, the PEs also at gate level (:mod:`~hdl.synth.gates`): the PE synthesised by
``make synth``'s recipe, simulated at zero delay on the port values each PE saw, its outputs
checked against the RTL's every cycle, and every net's toggles weighed by its fanout (the gate
inputs it drives: a capacitance proxy). That counts the gates inside the operators the RTL
names no net for; it still leaves out the array's edges, wires, glitches and the clock.

Examples::

    python -m hdl.synth.power                       # 8x8, every format, N = 16
    python -m hdl.synth.power --format int8,bf16 --size 4x4 --seed 7
    python -m hdl.synth.power --gates               # and the PEs at gate level
    python -m hdl.synth.power --one-stage           # and the float engines in one stage
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .toggles import count_toggles

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "synth"
PROG = "python -m hdl.synth.power"

__all__ = ["ENGINES", "gemm_operands", "measure_power", "run_gemm", "main"]

#: The engines each format runs on (``--one-stage`` adds the last two).
ENGINES = {
    "alone": "elaborated with the format alone, at its default stages",
    "all": "the every-format engine at its default stages",
    "alone_one_stage": "a float format alone in one stage (ONE_STAGE_FLOAT: 1 PE, 1 decoder)",
    "all_one_stage": "the every-format engine in one stage (ONE_STAGE_FLOAT), every format",
}


class UsageError(ValueError):
    """A bad command-line value: the message names the flag, the value and what is allowed."""


def gemm_operands(fmt, rng: np.random.Generator, k: int, m: int, n: int):
    """Stationary ``(k, m)`` and moving ``(k, n)`` operands of ``fmt``: int8 uniform over its
    range; floating point standard normal values rounded to the format (what a layer's
    activations and weights look like, not the edge cases of the benches)."""
    if fmt.kind == "int":
        draw = lambda shape: rng.integers(fmt.min_value, fmt.max_value + 1, size=shape)  # noqa: E731
    else:
        draw = lambda shape: rng.standard_normal(shape).astype(fmt.dtype)  # noqa: E731
    return draw((k, m)), draw((k, n))


def run_gemm(cfg, fmt, seed: int, n: int, vcd: Path) -> dict:
    """One GEMM of ``fmt`` on the engine of ``cfg``, its waveform written to ``vcd``; returns
    ``cycles`` (clock cycles simulated) and ``macs`` (``rows x cols x n``). Every cycle is
    checked against the TLM's cycle model (raises :class:`verif.tensor.scoreboard.Mismatch`)."""
    from amaranth.sim import Simulator

    from hdl.tensor import TensorEngine
    from tlm.tensor.timing import Op
    from verif.tensor.drivers import Traffic
    from verif.tensor.scoreboard import Observed, Scoreboard
    from verif.tensor.signals import raw_lanes
    from verif.tensor.stimulus import Stimulus, pattern

    rng = np.random.default_rng(seed)
    stationary, moving = gemm_operands(fmt, rng, cfg.rows, cfg.cols, n)
    op = Op(moving, stationary, fmt.name)
    stim = Stimulus(op.load_beats(cfg), op.moving_beats(cfg), [op])
    dut = TensorEngine(cfg)
    always = lambda: pattern("always", rng)  # noqa: E731
    traffic = Traffic(stim, always(), always(), always())
    board = Scoreboard(cfg, seed, where=f"power {fmt.name}")
    limit = 100 + 4 * (cfg.rows + n * 4 + cfg.latency)
    cycles = 0

    def payload(beat, extra):
        data = {"data": [int(v) for v in raw_lanes(cfg, beat.fmt, beat.data)], **extra}
        return {**data, **({"fmt": beat.fmt} if cfg.fmt_bits else {})}

    async def bench(ctx):
        nonlocal cycles
        for _ in range(limit):
            if traffic.done:
                return
            ld, mv, ready = traffic.offers()
            ctx.set(dut.ld_stream.valid, ld is not None)
            if ld is not None:
                ctx.set(dut.ld_stream.payload, payload(ld, {"k": ld.k, "last": ld.last}))
            ctx.set(dut.mv_stream.valid, mv is not None)
            if mv is not None:
                ctx.set(dut.mv_stream.payload, payload(mv, {"load": mv.load, "last": mv.last}))
            ctx.set(dut.res_stream.ready, ready)
            res = ctx.get(dut.res_stream.payload)
            status = ctx.get(dut.status)
            observed = Observed(
                ld_ready=bool(ctx.get(dut.ld_stream.ready)),
                mv_ready=bool(ctx.get(dut.mv_stream.ready)),
                res_valid=bool(ctx.get(dut.res_stream.valid)),
                res_last=bool(res.last),
                res_data=np.array([res.data[i] for i in range(cfg.cols)]),
                flags=int(status.flags),
                counts=tuple(int(status.counts[i]) for i in range(len(status.counts))),
            )
            traffic.update(board.check(ld, mv, ready, observed))
            cycles += 1
            await ctx.tick()
        raise RuntimeError(f"the GEMM did not finish in {limit} cycles (seed {seed})")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    with sim.write_vcd(str(vcd)):
        sim.run()
    if board.results != n:
        raise RuntimeError(f"{board.results} results of {n} (seed {seed})")
    return {"cycles": cycles, "macs": cfg.rows * cfg.cols * n}


def pe_netlist(cfg) -> dict:
    """The synthesised netlist (module ``pe``) of the PE of ``cfg``, through ``make synth``'s
    cache (the PE's Verilog does not depend on the engine's size: ``pe_<set>`` blocks serve)."""
    from amaranth.back import verilog

    from ..tensor.pe import ProcessingElement
    from .yosys import synthesise

    text = verilog.convert(ProcessingElement(cfg), name="pe", emit_src=False)
    netlist, _, _ = synthesise(text, "pe", BUILD / "power_pe", BUILD / "cache")
    return netlist


def measure_power(
    formats,
    rows: int,
    cols: int,
    n: int,
    seed: int,
    *,
    keep: Path | None = None,
    log=None,
    gates: bool = False,
    one_stage: bool = False,
):
    """Toggle figures per format and engine (``alone``: elaborated with that format only;
    ``all``: the every-format engine); see the module's docstring. ``keep``: a folder to
    keep the VCDs in (else a temporary one); ``log``: called with a line after each run;
    ``gates``: also the PEs' gate-level toggles (:func:`~hdl.synth.gates.pe_toggles`, the PE
    synthesised once per format set and cached); ``one_stage``: also the floating-point
    engines at :data:`~tlm.tensor.config.ONE_STAGE_FLOAT`'s stages (``alone_one_stage``:
    a float format's own engine; ``all_one_stage``: the every-format engine, every format)."""
    from tlm.formats import get_format
    from tlm.tensor.config import ONE_STAGE_FLOAT, EngineConfig

    from .gates import pe_toggles

    engines = {"alone": {}, "all": {"fmt": "all"}}
    if one_stage:
        engines |= {
            "alone_one_stage": ONE_STAGE_FLOAT,
            "all_one_stage": {"fmt": "all", **ONE_STAGE_FLOAT},
        }
    rows_out = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(keep) if keep else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for name in formats:
            fmt = get_format(name)
            for engine, params in engines.items():
                if engine == "alone_one_stage" and fmt.kind == "int":
                    continue  # an integer engine has no floating-point pipeline
                cfg = EngineConfig(rows, cols, **{"fmt": name, **params})
                vcd = folder / f"gemm_{rows}x{cols}_{name}_{engine}.vcd"
                start = time.perf_counter()
                run = run_gemm(cfg, fmt, seed, n, vcd)
                simulated = time.perf_counter()
                nets = {c: v for c, v in count_toggles(vcd).items() if not _is_clock(v.name)}
                toggles = sum(net.toggles for net in nets.values())
                entry = rows_out.setdefault(name, {})[engine] = {
                    **run,
                    "nets": len(nets),
                    "bits": sum(net.width for net in nets.values()),
                    "toggles": toggles,
                    "toggles_per_mac": toggles / run["macs"],
                    "toggles_per_cycle": toggles / run["cycles"],
                    "seconds": {
                        "simulate": simulated - start,
                        "count": time.perf_counter() - simulated,
                    },
                }
                if gates:
                    g = pe_toggles(vcd, pe_netlist(cfg))
                    g["weighted_per_mac"] = g["weighted_toggles"] / run["macs"]
                    entry["pe_gates"] = g
                if log:
                    log(
                        f"{name} on the {engine} engine: {run['cycles']} cycles, "
                        f"{entry['toggles_per_mac']:.1f} toggles/MAC"
                        + (
                            f", PE gates {entry['pe_gates']['weighted_per_mac']:.1f}"
                            if gates
                            else ""
                        )
                        + f" ({time.perf_counter() - start:.1f} s)"
                    )
    base = rows_out.get("int8", {})
    for per_engine in rows_out.values():
        for engine, r in per_engine.items():
            # int8's own engine is the unit of every engine (an integer engine has one kind)
            alone, same = base.get("alone"), base.get(engine)
            r["relative_to_int8"] = (
                r["toggles_per_mac"] / alone["toggles_per_mac"] if alone else None
            )
            r["relative_to_int8_same_engine"] = (
                r["toggles_per_mac"] / same["toggles_per_mac"] if same else None
            )
            if "pe_gates" in r:
                g, key = r["pe_gates"], "weighted_per_mac"
                g["relative_to_int8"] = g[key] / alone["pe_gates"][key] if alone else None
                g["relative_to_int8_same_engine"] = g[key] / same["pe_gates"][key] if same else None
    return rows_out


def _is_clock(name: str) -> bool:
    """The clock net: left out with the clock tree (its two edges a cycle are no data)."""
    return name.rsplit(".", 1)[-1] == "clk"


def parse_size(text: str) -> tuple[int, int]:
    """``RxC`` from ``--size``: rows and columns, each 1..32."""
    try:
        rows, cols = (int(v) for v in text.lower().split("x"))
    except ValueError:
        rows = cols = 0
    if not (1 <= rows <= 32 and 1 <= cols <= 32):
        raise UsageError(f"--size takes ROWSxCOLS, each 1..32 (e.g. 8x8); not {text!r}")
    return rows, cols


def parse_formats(text: str) -> list[str]:
    """Format names from ``--format``: ``all`` or comma-separated names of the RTL's formats."""
    from tlm.formats import PE_FORMATS

    names = list(PE_FORMATS) if text.strip() == "all" else [s.strip() for s in text.split(",")]
    bad = [n for n in names if n not in PE_FORMATS]
    if bad or not names:
        raise UsageError(
            f"--format takes all or comma-separated names of {', '.join(PE_FORMATS)}; not {text!r}"
        )
    return names


def table(result: dict) -> str:
    """The figures as text: per format and engine, toggles per MAC and over int8's."""
    gates = any("pe_gates" in r for e in result["formats"].values() for r in e.values())
    rows = [["format", "engine", "cycles", "toggles", "per MAC", "vs int8", "vs int8 same engine"]]
    if gates:
        rows[0] += ["PE gates per MAC", "vs int8", "vs int8 same engine"]
    for name, per_engine in result["formats"].items():
        for engine, r in per_engine.items():
            rel, same = r["relative_to_int8"], r["relative_to_int8_same_engine"]
            rows.append(
                [
                    name,
                    engine,
                    str(r["cycles"]),
                    f"{r['toggles']:,}",
                    f"{r['toggles_per_mac']:.1f}",
                    "-" if rel is None else f"{rel:.2f}",
                    "-" if same is None else f"{same:.2f}",
                ]
            )
            if gates:
                g = r["pe_gates"]
                rows[-1] += [
                    f"{g['weighted_per_mac']:.1f}",
                    "-" if g["relative_to_int8"] is None else f"{g['relative_to_int8']:.2f}",
                    "-"
                    if g["relative_to_int8_same_engine"] is None
                    else f"{g['relative_to_int8_same_engine']:.2f}",
                ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("--format", default="all", help="all, or comma-separated format names")
    p.add_argument("--size", default="8x8", help="engine ROWSxCOLS, each 1..32 (8x8)")
    p.add_argument("--n", default="16", help="moving columns of the GEMM, 1..512 (16)")
    p.add_argument("--seed", type=int, default=None, help="operands' seed (printed)")
    p.add_argument("--out", type=Path, default=BUILD / "power.json", help="the JSON to write")
    p.add_argument("--keep-vcd", type=Path, default=None, help="a folder to keep the VCDs in")
    p.add_argument(
        "--gates",
        action="store_true",
        help="also the PEs' gate-level toggles weighed by fanout (synthesises each PE once)",
    )
    p.add_argument(
        "--one-stage",
        action="store_true",
        help="also the floating-point engines in one stage (ONE_STAGE_FLOAT: 1 PE, 1 decoder)",
    )
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args(argv)
    try:
        formats = parse_formats(args.format)
        rows, cols = parse_size(args.size)
        if not args.n.isdigit() or not 1 <= int(args.n) <= 512:
            raise UsageError(f"--n takes an integer 1..512; not {args.n!r}")
    except UsageError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    n = int(args.n)
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    print(
        f"[power] {rows}x{cols} engines, GEMM K={rows} M={cols} N={n}, seed {seed}", file=sys.stderr
    )
    start = time.perf_counter()
    figures = measure_power(
        formats,
        rows,
        cols,
        n,
        seed,
        keep=args.keep_vcd,
        gates=args.gates,
        one_stage=args.one_stage,
        log=lambda line: print(f"[power] {line}", file=sys.stderr, flush=True),
    )
    result = {
        "proxy": "relative dynamic power: bit toggles of every RTL net over one GEMM "
        "(Amaranth's simulator, zero delay), each net bit weighed 1, per MAC, over int8's",
        "omits": "clock tree, SRAM and buffers outside the RTL, gate-level nodes inside "
        "operators, glitches, wire and gate capacitance, voltage and frequency, leakage",
        "engine": {"rows": rows, "cols": cols},
        "engines": {k: v for k, v in ENGINES.items() if args.one_stage or "one_stage" not in k},
        "gemm": {"k": rows, "m": cols, "n": n, "macs": rows * cols * n},
        "operands": "int8 uniform over -128..127; floats standard normal rounded to the format",
        "seed": seed,
        "formats": figures,
        "seconds": time.perf_counter() - start,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result))
        return 0
    print(table(result))
    print(f"seed {seed}; {result['seconds']:.1f} s; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
