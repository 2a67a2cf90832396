"""The mutation grade as figures and as Markdown (``build/mutate/mutate.md``)."""

from __future__ import annotations

__all__ = ["summary", "markdown"]


def summary(mutants) -> dict:
    """Counts of a target's mutants (the identity apart), the kill rate over the mutants not
    equivalent, and how many each bench kills."""
    planted = [m for m in mutants if m.id != 0]
    killed = sum(m.status == "killed" for m in planted)
    equivalent = sum(m.status == "equivalent" for m in planted)
    argued = sum(m.status == "equivalent" and m.classified is not None for m in planted)
    proof = sum(m.status == "proof" for m in planted)
    survived = sum(m.status == "survived" for m in planted)
    by_bench: dict[str, int] = {}
    for m in planted:
        for kill in m.kills:
            by_bench[kill.bench] = by_bench.get(kill.bench, 0) + 1
    live = len(planted) - equivalent
    return {
        "planted": len(planted),
        "killed": killed,
        "equivalent": equivalent,
        "equivalent_argued": argued,
        "proof": proof,
        "survived": survived,
        "kill_rate": round(killed / live, 3) if live else 1.0,
        "identity_ok": bool(mutants) and mutants[0].status == "identity",
        "kills_by_bench": by_bench,
    }


def _outcome(m: dict) -> str:
    if m["kills"]:
        return "; ".join(
            f"{k['bench']} seed {k['seed']}"
            + (f" cycle {k['cycle']}" if k["cycle"] is not None else " (end of run)")
            for k in m["kills"]
        )
    if m["classified"]:
        c = m["classified"]
        proof = f" (formal: `{c['property']}`)" if c["class"] == "proof" else " (argued)"
        return f"{c['class']}{proof}: {c['reason']}"
    if m["equivalence"]:
        e = m["equivalence"]
        differs = f": {', '.join(e['witness'][:4])}" if e["witness"] else ""
        return f"cut check {e['verdict']}{differs} ({e['seconds']:.0f} s)"
    return "passed every bench"


def markdown(report: dict) -> str:
    """A summary table of every target, then one row per mutant."""
    lines = [
        f"# Mutation grade: {report['mutants']} mutations a target, Yosys seed "
        f"{report['seed']}, {report['sim']}, {report['seconds']} s",
        "",
        "| target | config | planted | killed | equivalent (argued) | proof | survived "
        "| kill rate | identity | kills by bench | time (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, t in report["targets"].items():
        s = t["summary"]
        identity = "passes" if s["identity_ok"] else "KILLED"
        benches = ", ".join(f"{b} {s['kills_by_bench'].get(b, 0)}" for b in t["benches"])
        lines.append(
            f"| {name} | {t['config']} | {s['planted']} | {s['killed']} "
            f"| {s['equivalent']} ({s['equivalent_argued']}) | {s['proof']} | {s['survived']} "
            f"| {s['kill_rate']:.3f} | {identity} "
            f"| {benches} | {t['seconds']} |"
        )
    dead = [(n, d) for n, t in report["targets"].items() for d in t.get("dead_survivors", [])]
    if dead:
        lines += ["", "Entries of `verif/mutate/survivors.toml` that match no survivor (remove):"]
        lines += [f"- {n}: `{d['mutation']}` ({d['why']})" for n, d in dead]
    for name, t in report["targets"].items():
        lines += ["", f"## {name}", "", "| # | status | killed by / check | mutation |"]
        lines.append("|---|---|---|---|")
        for m in t["mutants"]:
            mutation = m["mutation"].replace("mutate ", "").split(" -src")[0].replace("|", "\\|")
            lines.append(f"| {m['id']} | {m['status']} | {_outcome(m)} | `{mutation}` |")
    return "\n".join(lines) + "\n"
