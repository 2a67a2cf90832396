"""Code coverage per block: Verilator's points of a target's runs, merged, read against the
Amaranth source lines they map to (:mod:`.srcmap`), as figures, a table and Markdown.

Each target (a block at one configuration) reports, over its points:

* ``line``: statement blocks executed (Verilator's line coverage: processes, ``case`` arms);
* ``branch``: directions taken (each ``if``/``else`` and ``?:`` arm; Amaranth writes most of
  its ``Mux`` and ``m.If`` logic as ``?:``);
* ``toggle``: signal bits seen rising and falling;

and, per Amaranth line (``hdl/link/router.py:163``): the lines none of whose points was hit
(``missed_lines``), the lines with a branch direction or statement block never reached
(``missed_branches``: an ``m.Elif`` never true is a ``line`` point of Yosys's ``if`` chain) and
those with bits that never toggled (``untoggled``). The points of Yosys's never-true
``if`` in each ``always @*`` and of its dummy register are left out: they are not the design.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from .dat import Point
from .srcmap import YOSYS_DUMMY, src_lines

__all__ = ["KINDS", "summarise", "table", "markdown"]

#: Kinds of points reported, in order.
KINDS = ("line", "branch", "toggle")

#: Unmapped points (none expected) are reported under this location.
UNMAPPED = "?"


def _design(points: list[Point], verilog_lines: list[str]) -> list[Point]:
    def dummy(p: Point) -> bool:
        text = verilog_lines[p.line - 1] if 0 < p.line <= len(verilog_lines) else ""
        return YOSYS_DUMMY in text or YOSYS_DUMMY in p.comment

    return [p for p in points if p.kind in KINDS and not dummy(p)]


def _line_key(location: str) -> tuple:
    path, _, line = location.rpartition(":")
    return (path, int(line) if line.isdigit() else 0)


def _in(root, location: str) -> bool:
    """Whether ``location`` is a file of the project at ``root`` (not Amaranth's library)."""
    return (Path(root) / location.rpartition(":")[0]).is_file()


def summarise(points: list[Point], verilog: str, root=None) -> dict:
    """Figures of one target from its merged ``points`` and its Verilog text ``verilog``:
    per kind ``{hit, total}`` and ``fraction``; the Amaranth lines with ``{hit, total}``;
    ``missed_lines`` (of the project at ``root``; Amaranth's library's apart),
    ``missed_branches`` (``{line, not_taken}``) and ``untoggled`` (``{line, bits, of}``), each
    sorted by file and line."""
    lines = src_lines(verilog, root)
    design = _design(points, verilog.splitlines())
    out: dict = {}
    for kind in KINDS:
        of_kind = [p for p in design if p.kind == kind]
        hit = sum(1 for p in of_kind if p.count)
        out[kind] = round(hit / len(of_kind), 4) if of_kind else None
        out.setdefault("points", {})[kind] = {"hit": hit, "total": len(of_kind)}
    by_line: dict[str, list[Point]] = defaultdict(list)
    for p in design:
        by_line[lines.get(p.line, UNMAPPED)].append(p)
    order = sorted((loc for loc in by_line if loc != UNMAPPED), key=_line_key)
    missed = [loc for loc in order if not any(p.count for p in by_line[loc])]
    library = [loc for loc in missed if root is not None and not _in(root, loc)]
    branches, untoggled = [], []
    for loc in order:
        not_taken = [p for p in by_line[loc] if p.kind != "toggle" and not p.count]
        if not_taken and loc not in missed:
            branches.append({"line": loc, "not_taken": len(not_taken)})
        toggles = [p for p in by_line[loc] if p.kind == "toggle"]
        still = sum(1 for p in toggles if not p.count)
        if still and loc not in missed:
            untoggled.append({"line": loc, "bits": still, "of": len(toggles)})
    out["amaranth_lines"] = {"hit": len(order) - len(missed), "total": len(order)}
    out["missed_lines"] = [loc for loc in missed if loc not in library]
    out["missed_library_lines"] = library  # Amaranth's own: a clock or reset port left unused
    out["missed_branches"] = branches
    out["untoggled"] = untoggled
    out["unmapped_points"] = len(by_line.get(UNMAPPED, []))
    return out


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def table(targets: dict) -> str:
    """One row per target: line, branch and toggle %, Amaranth lines hit, a few missed."""
    lines = [
        f"{'target':18} {'block':14} {'line %':>7} {'branch %':>9} {'toggle %':>9} "
        f"{'amaranth lines':>15}  missed lines"
    ]
    for name, t in targets.items():
        a = t["amaranth_lines"]
        missed = ", ".join(t["missed_lines"][:3]) + (" ..." if len(t["missed_lines"]) > 3 else "")
        lines.append(
            f"{name:18} {t['block']:14} {_pct(t['line']):>7} {_pct(t['branch']):>9} "
            f"{_pct(t['toggle']):>9} {a['hit']:>7}/{a['total']:<7}  {missed or '-'}"
        )
    return "\n".join(lines)


def markdown(targets: dict, *, seeds, seconds: float | None = None) -> str:
    """The report: the table, then per target its benches and what was not covered."""
    out = [
        "# Code coverage",
        "",
        "Verilator line, branch and toggle coverage of the regression's benches, mapped to the "
        "Amaranth source lines through the `src` attributes of the generated Verilog "
        f"(seeds {', '.join(map(str, seeds))}"
        + (f"; {seconds:.0f} s" if seconds is not None else "")
        + ").",
        "",
        "| target | block | line % | branch % | toggle % | Amaranth lines hit | missed lines |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, t in targets.items():
        a = t["amaranth_lines"]
        out.append(
            f"| `{name}` | {t['block']} | {_pct(t['line'])} | {_pct(t['branch'])} | "
            f"{_pct(t['toggle'])} | {a['hit']}/{a['total']} | {len(t['missed_lines'])} |"
        )
    for name, t in targets.items():
        p = t["points"]
        out += [
            "",
            f"## `{name}`",
            "",
            f"Benches: {', '.join(f'`{b}`' for b in t['benches'])}. Points hit: "
            + ", ".join(f"{k} {p[k]['hit']}/{p[k]['total']}" for k in KINDS)
            + ".",
            "",
            "Amaranth lines never hit: "
            + (", ".join(f"`{m}`" for m in t["missed_lines"]) or "none")
            + ".",
            "",
            "Branches or blocks never reached: "
            + (
                ", ".join(f"`{b['line']}` ({b['not_taken']})" for b in t["missed_branches"])
                or "none"
            )
            + ".",
            "",
            "Bits never toggled (line: bits of points): "
            + (", ".join(f"`{u['line']}` {u['bits']}/{u['of']}" for u in t["untoggled"]) or "none")
            + ".",
        ]
    return "\n".join(out) + "\n"
