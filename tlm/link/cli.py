"""``trnsim noc``: load study of a torus network on the cycle-exact model.

trnsim noc --shape 4x4x4 --traffic uniform --rate 0.3 --cycles 20000 [--engine fast] [--json]

``--engine fast`` (the default) runs every load point on the compiled network
(:mod:`tlm.link.fast`); ``--engine python`` on the per-router reference model (the same
figures, some 40x slower).
"""

from __future__ import annotations

from ..cli_args import comma_list
from .bounds import channel_load_bound
from .config import LinkConfig
from .measure import ENGINES, simulate
from .patterns import PATTERNS

__all__ = ["register", "noc_study"]


_rates = comma_list(float, "loads", "load")


def noc_study(args) -> list[dict]:
    cfg = LinkConfig(args.shape, vcs=args.vcs, depth=args.depth)
    if args.engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {args.engine!r}")
    bound = channel_load_bound(cfg, args.traffic)["bound"]
    if len(args.rate) > 1:
        rows = [
            simulate(
                cfg,
                args.traffic,
                rate,
                args.cycles,
                length=args.length,
                seed=args.seed,
                engine=args.engine,
            )
            | {"channel_load_bound": bound}
            for rate in args.rate
        ]
        if args.json:
            return rows
        keep = (
            "rate",
            "offered",
            "accepted",
            "latency_mean",
            "latency_p99",
            "latency_max",
            "link_util_mean",
            "link_util_max",
        )
        return [{k: row[k] for k in keep} for row in rows]
    result = simulate(
        cfg,
        args.traffic,
        args.rate[0],
        args.cycles,
        length=args.length,
        seed=args.seed,
        engine=args.engine,
    )
    result["channel_load_bound"] = bound
    if args.json:
        return [result]
    links = result.pop("links")
    _print_links(links)
    return [{"figure": k, "value": v} for k, v in result.items() if v is not None]


def _print_links(links):
    from rich.console import Console
    from rich.table import Table

    table = Table(title="link utilisation by direction (flits per cycle)")
    for col in ("direction", "mean", "max", "busiest node"):
        table.add_column(col, justify="right")
    for port in dict.fromkeys(link["port"] for link in links):
        mine = [x for x in links if x["port"] == port]
        top = max(mine, key=lambda x: x["utilisation"])
        mean = sum(x["utilisation"] for x in mine) / len(mine)
        table.add_row(port, f"{mean:.3f}", f"{top['utilisation']:.3f}", str(top["node"]))
    Console().print(table)


def register(sub):
    """Add the ``noc`` subcommand to ``trnsim``'s subparsers."""
    p = sub.add_parser("noc", help="load study of a NeuronLink torus (cycle-exact to the RTL)")
    p.add_argument("--shape", default="4x4", help="torus shape: 4x4 (server), 4x4x4 (UltraServer)")
    p.add_argument("--traffic", choices=PATTERNS, default="uniform", help="traffic pattern")
    p.add_argument(
        "--rate",
        type=_rates,
        default=[0.3],
        help="offered flits per node per cycle, or a list for a sweep: 0.1,0.2,0.3",
    )
    p.add_argument("--cycles", type=int, default=20000, help="cycles to simulate (default 20000)")
    p.add_argument("--length", type=int, default=4, help="flits per packet (default 4)")
    p.add_argument("--vcs", type=int, default=2, help="virtual channels per link (default 2)")
    p.add_argument("--depth", type=int, default=4, help="flits of buffer per VC (default 4)")
    p.add_argument("--seed", type=int, default=0, help="traffic seed (default 0)")
    p.add_argument(
        "--engine",
        default="fast",
        help="fast: compiled network (default); python: the per-router reference model. "
        "Same figures",
    )
    p.add_argument("--json", action="store_true", help="print JSON (with every link)")
    p.set_defaults(study=noc_study, title="NeuronLink torus load study (cycle-level model)")
