"""``make sim-link`` / ``python -m verif.link.run``: one run of the torus or router bench, or of
the all-gather on the 4x4 torus (``--collective``), its seed printed, with waveforms on request,
and ``make waves-link`` to look at them in GTKWave.

Examples::

    python -m verif.link.run --sim icarus --shape 4x4 --seed 1 --waves
    python -m verif.link.run --collective kangaring --format fp8_e4m3 --count 400 --waves
    python -m verif.link.run --block link_router --shape 4x4x4 --coord 1,2,3 --misuse
    python -m verif.link.run --sim verilator --shape 4x4x4 --traffic transpose --packets 50
    python -m verif.link.run --open-waves
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from hdl.hier import port_names
from hdl.link.flit import flit_fields, flit_layout
from hdl.link.router import Router, drop_name, watched_flits
from hdl.link.torus import TorusNetwork
from tlm.collectives import COLLECTIVE_FORMATS
from tlm.link.config import DropKind, LinkConfig
from tlm.link.flit import FlitKind
from tlm.link.patterns import PATTERNS as TRAFFIC
from tlm.system import load_system
from verif.common.patterns import PATTERNS
from verif.common.run import open_waves, run_and_report, write_save
from verif.common.runner import ROOT, SIMULATORS
from verif.common.triage import Rerun
from verif.link.build import TOPS, build_link
from verif.link.collective import ALGORITHMS, DEFAULT_COUNT, SYSTEM, check_count

#: Nodes of a torus whose injection and ejection streams the save file shows.
SHOWN_NODES = 4

#: Waveform file names by block: all begin with ``link_``, which ``make waves-link`` opens.
WAVE_NAMES = {"link_router": "link_router", "torus": "link_torus"}

#: The cocotb tests of each block's bench, the default first.
TESTCASES = {"torus": ("traffic", "last_cycle_drop"), "link_router": ("lockstep", "misuse")}

#: The patterns each bench runs with unless --patterns says otherwise.
DEFAULT_PATTERNS = {
    "traffic": "always:always,random:1of4",  # the torus: inject:eject pairs
    "lockstep": "always:always:always,random:random:random",  # the router: send:ready:credit
    "misuse": "always:random:1of4",
    "all_gather": "always:always,random:1of4",  # the collective: inject:eject pairs
}


def _ports(component) -> dict[str, list[tuple[str, int]]]:
    """A component's ports as GTKWave groups: ``inject__0__valid`` goes to ``inject 0``."""
    component._MustUse__silence = True  # built for its port list only, never elaborated
    groups: dict[str, list[tuple[str, int]]] = {}
    for name, _, value in port_names(component):
        parts = name.split("__")
        group = " ".join(parts[:-1]) if len(parts) > 1 else name
        groups.setdefault(group, []).append((name, len(value)))
    return groups


def decoded(cfg: LinkConfig, scope: str = "") -> dict[str, list]:
    """GTKWave groups of a router's named wires (:func:`hdl.link.router.watched_flits`): each
    flit port's fields - kind (the group's name says which value is which), VC, destination,
    source, length, sequence, data - and each drop counter by its kind, in decimal. A field's
    wire is a Verilog escaped name (``\\in1_flit.kind``), traced without its backslash as the
    save file's other names are."""
    router = Router(cfg)
    router._MustUse__silence = True  # built for its names only, never elaborated
    fields = flit_fields(flit_layout(cfg.fmt))
    groups = {}
    kinds = ", ".join(f"{k.value} {k.name.lower()}" for k in FlitKind)
    for name, _ in watched_flits(router, cfg.ports):
        groups[f"{scope}{name} (kind: {kinds})"] = [
            (f"{scope}{name}.{path}", width, "hex" if path.endswith("data") else "dec")
            for path, width in fields
        ]
    groups[f"{scope}drops by kind"] = [
        (f"{scope}{drop_name(kind)}", cfg.counter_bits, "dec") for kind in DropKind
    ]
    return groups


def write_gtkw(block: str, cfg: LinkConfig, dump: Path, save: Path, sim: str) -> Path:
    """A GTKWave save file: every port of the router, or for a torus the streams of its first
    nodes, every drop counter, and the link ports of router 0 (node (0, ...)); then the
    router's (router 0's) flits decoded into their fields and its drop counters by kind."""
    if block == "link_router":
        groups = {f"router {g}": s for g, s in _ports(Router(cfg)).items()}
    else:
        groups = {}
        for group, signals in _ports(TorusNetwork(cfg)).items():
            _, *node = group.split()  # inject 0, eject 0, ..., drops
            if not node:
                groups[group] = signals
            elif int(node[0]) < SHOWN_NODES:
                groups.setdefault(f"node {node[0]}", []).extend(signals)
        for group, signals in _ports(Router(cfg)).items():
            if "links" in group:
                groups[f"router0 {group}"] = [(f"router0.{p}", w) for p, w in signals]
    groups = {name: [(p, w, "hex") for p, w in signals] for name, signals in groups.items()}
    groups |= decoded(cfg, "" if block == "link_router" else "router0.")
    return write_save(save, dump, f"{block} {cfg.tag}, {sim}", TOPS[block], groups)


#: Bench environment variables and the ``make sim-link`` variables that set them.
MAKE_VARIABLES = {
    "LINK_COORD": "COORD",
    "LINK_PACKETS": "PACKETS",
    "LINK_TRAFFIC": "TRAFFIC",
    "LINK_PATTERNS": "PATTERNS",
    "LINK_MALFORMED": "MALFORMED",
    "LINK_ROGUE": "ROGUE",
    "LINK_SPURIOUS": "SPURIOUS",
    "COLL_ALGO": "COLLECTIVE",
    "COLL_FORMAT": "FORMAT",
    "COLL_COUNT": "COUNT",
}


def rerun(sim: str, block: str, cfg: LinkConfig, seed: int, testcase=None, env=None) -> Rerun:
    """The ``make sim-link`` line of a bench run: ``block`` built for ``cfg`` on ``sim``,
    cocotb ``testcase`` (``None``: the bench's every test), bench environment ``env``.

    Raises
    ------
    ValueError
        If ``env`` names a variable ``make sim-link`` cannot set, or ``block`` is unknown.
    """
    if block not in TOPS:
        raise ValueError(f"block must be one of {', '.join(sorted(TOPS))}, not {block!r}")
    env = dict(env or {})
    unknown = sorted(set(env) - set(MAKE_VARIABLES))
    if unknown:
        raise ValueError(f"env has variables make sim-link cannot set: {', '.join(unknown)}")
    params = [("BLOCK", block), ("SIM", sim), ("SHAPE", cfg.torus.name)]
    params += [("VCS", cfg.vcs), ("DEPTH", cfg.depth)]
    if testcase is not None and "COLL_ALGO" not in env:
        params.append(("TESTCASE", testcase))
    params += [(MAKE_VARIABLES[name], value) for name, value in env.items()]
    return Rerun("sim-link", tuple(params), seed)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m verif.link.run", description=__doc__.split("\n")[0])
    p.add_argument("--block", choices=sorted(TOPS), default="torus", help="default torus")
    p.add_argument("--sim", choices=SIMULATORS, default="icarus")
    p.add_argument("--shape", default="4x4", help="torus shape, e.g. 4x4 or 4x4x4")
    p.add_argument("--vcs", type=int, default=2, help="virtual channels (default 2)")
    p.add_argument("--depth", type=int, default=4, help="flits per VC buffer (default 4)")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--packets", type=int, default=10, help="packets per node or input")
    p.add_argument(
        "--traffic", choices=TRAFFIC, default="uniform", help="torus: destination pattern"
    )
    p.add_argument(
        "--patterns",
        default=None,
        help=f"comma-separated patterns of {', '.join(PATTERNS)}: inject:eject pairs (torus) or "
        f"send:ready:credit triples (router; --misuse runs the first); default {DEFAULT_PATTERNS}",
    )
    p.add_argument("--malformed", type=float, default=0.05, help="torus: share of broken packets")
    p.add_argument("--coord", default=None, help="router: its coordinate, e.g. 1,2 (default 1s)")
    p.add_argument(
        "--misuse",
        action="store_true",
        help="router: a neighbour sending without credits and credits not owed (--testcase misuse)",
    )
    p.add_argument(
        "--testcase",
        choices=sorted({t for ts in TESTCASES.values() for t in ts}),
        default=None,
        help="the bench's test: torus traffic (default) or last_cycle_drop, router lockstep "
        "(default) or misuse",
    )
    p.add_argument(
        "--rogue", type=int, default=2, help="router misuse: the link port ignoring credits"
    )
    p.add_argument(
        "--spurious",
        type=float,
        default=0.05,
        help="router misuse: chance per cycle and link that a credit not owed comes back",
    )
    p.add_argument(
        "--collective",
        choices=ALGORITHMS,
        default=None,
        help="run an all-gather by this algorithm on the 4x4 torus instead of random traffic",
    )
    p.add_argument(
        "--count",
        type=int,
        default=DEFAULT_COUNT,
        help=f"collective: elements gathered, a multiple of 16 (default {DEFAULT_COUNT})",
    )
    p.add_argument(
        "--format",
        choices=COLLECTIVE_FORMATS,
        default="bf16",
        help="collective: the buffers' format (default bf16)",
    )
    p.add_argument("--waves", action="store_true", help="write a waveform and a GTKWave save file")
    p.add_argument("--open-waves", action="store_true", help="open the last waveform in GTKWave")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.open_waves:
        return open_waves("link_*.gtkw", "sim-link")
    prog = "python -m verif.link.run"
    try:
        cfg = LinkConfig(args.shape, vcs=args.vcs, depth=args.depth)
        coord = _coord(args.coord, cfg) if args.block == "link_router" else None
        if args.collective:
            _check_collective(args, cfg)
        testcase = _testcase(args)
    except ValueError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    where = f" at {coord}" if coord else ""
    print(f"{args.block} {cfg.tag}{where} on {args.sim}, seed {seed} (rerun with --seed {seed})")
    start = time.perf_counter()
    simbuild = build_link(args.sim, args.block, cfg, waves=args.waves)
    env = {
        "LINK_SHAPE": cfg.torus.name,
        "LINK_VCS": cfg.vcs,
        "LINK_DEPTH": cfg.depth,
        "LINK_PACKETS": args.packets,
        "SEED": seed,
        "PYTHONPATH": ROOT,
    }
    if args.collective:
        module = "verif.link.bench_collective"
        env |= {"COLL_ALGO": args.collective, "COLL_FORMAT": args.format, "COLL_COUNT": args.count}
    elif args.block == "torus":
        module = "verif.link.bench_network"
        env |= {"LINK_TRAFFIC": args.traffic, "LINK_MALFORMED": args.malformed}
    else:
        module = "verif.link.bench_router"
        env["LINK_COORD"] = ",".join(map(str, coord))
        if testcase == "misuse":
            env |= {"LINK_ROGUE": args.rogue, "LINK_SPURIOUS": args.spurious}
    env["LINK_PATTERNS"] = args.patterns or DEFAULT_PATTERNS.get(testcase, "always:always")
    return run_and_report(
        simbuild,
        module,
        env,
        {"block": args.block, "sim": args.sim, "shape": cfg.torus.name, "seed": seed}
        | ({"collective": args.collective} if args.collective else {}),
        seed=seed,
        started=start,
        waves=args.waves,
        dump_name=f"{WAVE_NAMES[args.block]}_{cfg.tag}_{args.sim}_{testcase}_seed{seed}",
        write_gtkw=lambda dump, save: write_gtkw(args.block, cfg, dump, save, args.sim),
        waves_target="waves-link",
        as_json=args.json,
        testcase=testcase,
    )


def _testcase(args) -> str:
    """The cocotb test to run: ``all_gather`` with --collective, else --testcase (or
    ``misuse`` with --misuse), which must be one of the block's bench."""
    if args.collective:
        if args.testcase is not None:
            raise ValueError(f"testcase is not taken with --collective, not {args.testcase!r}")
        return "all_gather"
    choices = TESTCASES[args.block]
    testcase = args.testcase or ("misuse" if args.misuse else choices[0])
    if testcase not in choices or (args.misuse and testcase != "misuse"):
        raise ValueError(
            f"testcase must be one of {', '.join(choices)} for {args.block}"
            f"{' (misuse with --misuse)' if args.misuse else ''}, not {testcase!r}"
        )
    return testcase


def _check_collective(args, cfg: LinkConfig):
    """The collective runs on the trn2 server's torus, gathering a multiple of its ranks."""
    torus = load_system(SYSTEM).torus
    if args.block != "torus":
        raise ValueError(f"block must be torus with --collective, not {args.block!r}")
    if cfg.shape != torus.shape:
        raise ValueError(
            f"shape must be {torus.name} with --collective ({SYSTEM}'s torus), not {args.shape!r}"
        )
    check_count(args.count, "count")


def _coord(text: str | None, cfg: LinkConfig) -> tuple[int, ...]:
    """The router's coordinate from ``--coord`` (default all 1s, an inner node of rings > 2)."""
    if text is None:
        return tuple(min(1, k - 1) for k in cfg.shape)
    try:
        coord = tuple(int(c) for c in text.split(","))
    except ValueError:
        coord = None
    if coord is None or not cfg.torus.contains(coord) or len(coord) != len(cfg.shape):
        raise ValueError(f"coord must be a node of the torus {cfg.shape} like 1,2, not {text!r}")
    return coord


if __name__ == "__main__":
    sys.exit(main())
