"""The public claims about Trainium, each tested by the command a reader can type, and the page
that records the verdicts (``docs/claims.md``; ``make claims``):

    .venv/bin/python -m tools.claims            # run every claim's commands, write the page
    .venv/bin/python -m tools.claims --check    # run them and print; write nothing

Each claim (:data:`CLAIMS`) names where it was made, the ``trnsim`` commands that test it (run
here exactly as typed, through :func:`tlm.studies.cli.main` with ``--json``) and how their
figures are read. The verdict is computed, never written by hand:

- **reproduced**: the model's figure is within :data:`WITHIN` of the claim;
- **contradicted**: it is not (by how much, and the mechanism that makes the difference);
- **not testable**: the claim rests on a figure the model takes as an input, or an input it
  needs is not published (what is missing is said).

``tests/test_claims.py`` fails when the page drifts from what the commands print.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PAGE = ROOT / "docs" / "claims.md"
#: A model figure within this fraction of a claim reproduces it (the claims round to 2-3
#: significant digits; the presets' peaks are the published per-chip figures).
WITHIN = 0.05

REPRODUCED, CONTRADICTED, UNTESTABLE = "reproduced", "contradicted", "not testable"


@cache
def run(command: str) -> dict:
    """The ``--json`` contract of one ``trnsim`` command, run in this process as typed."""
    from tlm.studies.cli import main

    argv = shlex.split(command)
    assert argv[0] == "trnsim", command
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv[1:], "--json"])
    if code != 0:
        raise SystemExit(f"claims: `{command}` exited {code}: {err.getvalue().strip()}")
    return json.loads(out.getvalue())


def level(command: str, name: str) -> dict:
    """One level of a ``trnsim system`` run (``server``, ``scale-up domain``, ``1,000 chips``)."""
    return next(row for row in run(command)["series"] if row["level"] == name)


def off(model: float, claim: float) -> float:
    """The model's figure against the claim's, as a signed fraction."""
    return model / claim - 1


def within(*errors: float) -> bool:
    return all(abs(e) <= WITHIN for e in errors)


@dataclass(frozen=True)
class Verdict:
    model: str  # the model's figures, as the page prints them
    verdict: str  # REPRODUCED, CONTRADICTED or UNTESTABLE
    why: str  # the reading taken, the mechanism of a difference, or what is missing


@dataclass(frozen=True)
class Claim:
    claim: str
    source: str
    commands: tuple[str, ...]
    judge: Callable[[], Verdict]


# --- the claims -------------------------------------------------------------------------------

SYS_TRN2 = "trnsim system --hardware trn2 --chips 100k"
SYS_TRN1 = "trnsim system --hardware trn1"
SYS_RAINIER = "trnsim system --hardware trn2 --chips 500k,1M"
SYS_TRN3 = "trnsim system --hardware trn3"
SYS_TRN3_GEN2 = "trnsim system --hardware trn3-gen2"
GOODPUT = "trnsim cost --hardware trn2 --model llama3-405b --chips 1000000"
STRATEGIES = (
    " --swap-s 150 --memory-checkpoint-Bps 50e9 --elastic-replica-chips 128 --reform-s 60 --jobs 8"
)
TRAIN = "trnsim train --model llama3-70b --chips 1024 --search time --hardware {hw}"
SERVE_405B = (
    "trnsim infer --model llama3.1-405b --format fp8_e4m3 --batch 1 --prompt 1000 --output 200 "
    "--hardware {hw}"
)
PRICE_70B = (
    "trnsim infer --model llama3.3-70b --format fp8_e4m3 --batch 64 --prompt 1000 --output 200 "
    "--hardware {hw}"
)


def _server_peaks() -> Verdict:
    s = level(SYS_TRN2, "server")
    pf, tib, tbs = s["fp8_dense_flop_per_s"] / 1e15, s["hbm_bytes"] / 2**40, None
    tbs = s["hbm_bandwidth_Bps"] / 1e12
    ok = within(off(pf, 20.8), off(tib, 1.5), off(tbs, 46))
    return Verdict(
        f"{pf:.1f} PFLOP/s FP8 dense, {tib:.2f} TiB, {tbs:.1f} TB/s",
        REPRODUCED if ok else CONTRADICTED,
        "16 chips of 1,299 dense FP8 TFLOPS, 96 GiB and 2.9 TB/s; the claim's TB are binary",
    )


def _ultraserver_peaks() -> Verdict:
    u = level(SYS_TRN2, "scale-up domain")
    dense, sparse = u["fp8_dense_flop_per_s"] / 1e15, u["fp8_sparse_flop_per_s"] / 1e15
    tib, tbs = u["hbm_bytes"] / 2**40, u["hbm_bandwidth_Bps"] / 1e12
    ok = within(off(dense, 83.2), off(tib, 6), off(tbs, 185))
    return Verdict(
        f"{dense:.1f} PFLOP/s FP8 dense ({sparse:.0f} sparse), {tib:.0f} TiB, {tbs:.0f} TB/s",
        REPRODUCED if ok else CONTRADICTED,
        f"as dense FP8 (64 x 1,299 TFLOPS, {off(dense, 83.2):+.1%}); the reports that call 83.2 "
        f"sparse are contradicted: 64 chips' published sparse peak is {sparse:.0f} PFLOPS",
    )


def _exaflops() -> Verdict:
    c = level(SYS_TRN2, "100,000 chips")
    bf16, fp8 = c["bf16_dense_flop_per_s"] / 1e18, c["fp8_dense_flop_per_s"] / 1e18
    return Verdict(
        f"{bf16:.1f} EFLOP/s BF16 dense, {fp8:.0f} FP8 dense",
        REPRODUCED if within(off(bf16, 65)) else CONTRADICTED,
        f"as BF16 dense ({off(bf16, 65):+.1%}); no format gives exactly 65",
    )


def _rainier() -> Verdict:
    half, full = level(SYS_RAINIER, "500,000 chips"), level(SYS_RAINIER, "1,000,000 chips")
    one = run(GOODPUT)["results"]
    every = run(GOODPUT + STRATEGIES)["results"]
    return Verdict(
        f"500k chips: {half['bf16_dense_flop_per_s'] / 1e18:.0f} EFLOP/s BF16, "
        f"{half['power_w'] / 1e6:.0f} MW; 1M: {full['bf16_dense_flop_per_s'] / 1e18:.0f} "
        f"EFLOP/s, {full['power_w'] / 1e6:.0f} MW, goodput {one['goodput_fraction']:.0%} as "
        f"one job, {every['goodput_fraction']:.0%} with the reliability strategies",
        UNTESTABLE,
        f"a cluster's size, not a figure of performance; the peaks and the power of the chips "
        f"and hosts (500 W a chip, an analyst figure) are what the model says of it. At 1M "
        f"chips {one['interruptions_per_day']:.0f} interruptions a day (Llama 3's rates per "
        f"chip, ASSUMED for Trainium) leave one synchronous job with a 10-minute restart "
        f"{one['goodput_fraction']:.0%} of its time; hot spares swapped in 150 s, in-memory "
        f"checkpoints, elastic data parallelism and 8 jobs give "
        f"{every['goodput_fraction']:.0%} (docs/cluster.md, reliability strategies)",
    )


def _trn2_over_trn1() -> Verdict:
    t1 = run(TRAIN.format(hw="trn1"))["results"]
    t2 = run(TRAIN.format(hw="trn2"))["results"]
    ratio = t2["tokens_per_s"] / t1["tokens_per_s"]
    c1, c2 = level(SYS_TRN1, "chip"), level(SYS_TRN2, "chip")
    peak = c2["bf16_dense_flop_per_s"] / c1["bf16_dense_flop_per_s"]
    hbm = (c2["hbm_bandwidth_Bps"] / 1e12, c1["hbm_bandwidth_Bps"] / 1e12)
    from tlm.costs import OpCosts

    # the footing of each side's GEMMs: trn1's held to its published GEMM, trn2's the TLM's
    held = {p: OpCosts.for_preset(p).gemm_hardware_ratio for p in ("trn1", "trn2")}
    footing = "; ".join(
        f"{p}'s GEMMs the chip TLM's x {r:.3f} (its published GEMM measurement)"
        if r != 1
        else f"{p}'s the chip TLM's alone (no published {p} GEMM measurement)"
        for p, r in held.items()
    )
    return Verdict(
        f"{ratio:.2f}x tokens/s (Llama 3 70B, 1,024 chips, best layout each: "
        f"{t1['tokens_per_s'] / 1e3:,.0f}k and {t2['tokens_per_s'] / 1e3:,.0f}k)",
        REPRODUCED if within(off(ratio, 4)) else CONTRADICTED,
        f"trn2's BF16 peak is {peak:.2f}x trn1's; the rest from HBM ({hbm[0]:.1f} against "
        f"{hbm[1]:.2f} TB/s), larger memory (fewer model-parallel splits) and NeuronLink-v3. "
        f"Footing: {footing}. If trn2's TLM misses its hardware as trn1's does, the ratio is "
        f"above {ratio / held['trn1'] * held['trn2']:.2f}x (all of trn2's step that much "
        f"slower) and below {ratio:.2f}x",
    )


def _prices() -> Verdict:
    return Verdict(
        "$4,000 and $23,000 per chip (inputs)",
        UNTESTABLE,
        "prices the model takes as inputs (tlm/presets/trn2.toml cost.capex_usd, "
        "tlm/hardware/h100.toml chip.capex_usd), analyst figures; nothing the model computes "
        "tests them",
    )


def _serve_405b() -> Verdict:
    us = run(SERVE_405B.format(hw="trn2") + " --system ultraserver --tp 64")
    h = run(SERVE_405B.format(hw="h100") + " --tp 8")
    a, b = us["results"]["decode_tokens_per_s"], h["results"]["decode_tokens_per_s"]
    ratio = a / b
    decode = {row["phase"]: row for row in us["series"]}["decode"]
    share = decode["communication_s"] / decode["time_s"]
    return Verdict(
        f"{ratio:.2f}x decode tokens/s of one request ({a:.0f} on a TP 64 UltraServer, "
        f"{b:.0f} on 8 H100)",
        REPRODUCED if within(off(ratio, 3)) else CONTRADICTED,
        f"one request's decode reads every weight once per token: 64 chips read 4x fewer "
        f"bytes each than 16, but the 2 all-reduces per layer over 64 chips take "
        f"{share:.0%} of the decode at the fitted collective costs (docs/inference.md); the "
        f"claim's software (speculative decoding, its kernels) and its baseline clouds are not "
        f"published",
    )


def _price_performance() -> Verdict:
    t = run(PRICE_70B.format(hw="trn2") + " --tp 16")["results"]
    h = run(PRICE_70B.format(hw="h100") + " --tp 8")["results"]
    better = h["cost_per_million_tokens_usd"] / t["cost_per_million_tokens_usd"] - 1

    def price(r: dict) -> str:
        return (
            f"{r['price_instance']} ${r['price_per_hour_usd']:.2f}/h {r['price_kind']}, "
            f"{r['price_source']} {r['price_as_of']}"
        )

    return Verdict(
        f"{better:+.0%} tokens per dollar (Llama 3.3 70B, batch 64: "
        f"${t['cost_per_million_tokens_usd']:.2f} against ${h['cost_per_million_tokens_usd']:.2f}"
        f" per million tokens)",
        UNTESTABLE,
        f"the answer is the ratio of two hourly prices ({price(t)}; {price(h)}: "
        f"tlm/hardware/prices.toml), and trn2's is a placeholder: no AWS page or dated figure "
        f"was found for it",
    )


def _trn3_preview() -> Verdict:
    g1 = level(SYS_TRN3, "scale-up domain")["fp8_dense_flop_per_s"]
    trn2 = level(SYS_TRN2, "scale-up domain")["fp8_dense_flop_per_s"]
    ratio = g1 / trn2
    g2 = level(SYS_TRN3_GEN2, "scale-up domain")
    return Verdict(
        f"{ratio:.2f}x (Gen1, 64 chips: {g1 / 1e15:.0f} PFLOP/s MXFP8 dense against "
        f"{trn2 / 1e15:.1f} FP8)",
        REPRODUCED if within(off(ratio, 4)) else CONTRADICTED,
        f"64 chips of {g1 / 64e12:,.0f} MXFP8 TFLOPS make {ratio:.2f}x trn2's UltraServer; the "
        f"preview's 4x at 64 chips (332.9 PFLOPS) would need {4 * trn2 / 64e15:.1f} PFLOPS a "
        f"chip. The shipped Gen2 reaches it with {g2['chips']} chips "
        f"({g2['fp8_dense_flop_per_s'] / trn2:.2f}x)",
    )


def _trn3_launch() -> Verdict:
    g2 = level(SYS_TRN3_GEN2, "scale-up domain")["fp8_dense_flop_per_s"]
    trn2 = level(SYS_TRN2, "scale-up domain")["fp8_dense_flop_per_s"]
    ratio = g2 / trn2
    return Verdict(
        f"{ratio:.2f}x (Gen2, 144 chips: {g2 / 1e15:.0f} PFLOP/s MXFP8 dense)",
        REPRODUCED if within(off(ratio, 4.4)) else CONTRADICTED,
        f"as Gen2's dense MXFP8 against trn2's UltraServer's dense FP8 ({off(ratio, 4.4):+.1%})",
    )


def _trn3_energy() -> Verdict:
    c3 = level(SYS_TRN3, "chip")
    c2 = level(SYS_TRN2, "chip")
    peak = c3["fp8_dense_flop_per_s"] / c2["fp8_dense_flop_per_s"]
    per_watt = peak * c2["power_w"] / c3["power_w"]
    return Verdict(
        f"{per_watt:.2f}x FP8 FLOP/s per chip watt ({c3['power_w']:.0f} W against "
        f"{c2['power_w']:.0f} W)",
        UNTESTABLE,
        f"no Trainium3 power is published: the preset's {c3['power_w']:.0f} W was derived from "
        f"the preview's 40 % claim, so 1.4x is what was put in; with {peak:.2f}x the peak a "
        f"chip, the launch's 4x would need {c2['power_w'] * peak / 4:.0f} W a chip, so it must "
        f"count more than peak FLOP/s per chip watt (the system, or delivered work)",
    )


CLAIMS = (
    Claim(
        "20.8 FP8 PFLOPS, 1.5 TB and 46 TB/s of HBM per 16-chip Trn2 server",
        "AWS Trn2 launch (re:Invent 2024)",
        (SYS_TRN2,),
        _server_peaks,
    ),
    Claim(
        "83.2 PFLOPS (dense in one report, sparse in another), 6 TB, 185 TB/s per Trn2 UltraServer",
        "AWS Trn2 launch; press coverage",
        (SYS_TRN2,),
        _ultraserver_peaks,
    ),
    Claim(
        "65 ExaFLOPS on 100,000 Trainium2 chips",
        "AWS re:Invent 2024",
        (SYS_TRN2,),
        _exaflops,
    ),
    Claim(
        "Project Rainier: 400,000-500,000 Trainium2 chips, then more than a million",
        "AWS and press, 2025",
        (SYS_RAINIER, GOODPUT, GOODPUT + STRATEGIES),
        _rainier,
    ),
    Claim(
        "Trainium2 trains 4x faster than Trainium1",
        "AWS re:Invent 2023",
        (TRAIN.format(hw="trn1"), TRAIN.format(hw="trn2"), SYS_TRN1, SYS_TRN2),
        _trn2_over_trn1,
    ),
    Claim(
        "About $4,000 per Trainium2 against $23,000 per H100",
        "analysts, as quoted in the press",
        (),
        _prices,
    ),
    Claim(
        "Llama 3.1 405B served on Trn2 with 3x the token throughput of other clouds",
        "AWS re:Invent 2024 (latency-optimised inference)",
        (
            SERVE_405B.format(hw="trn2") + " --system ultraserver --tp 64",
            SERVE_405B.format(hw="h100") + " --tp 8",
        ),
        _serve_405b,
    ),
    Claim(
        "30-40 % better price-performance than GPU-based instances",
        "AWS Trn2 launch",
        (PRICE_70B.format(hw="trn2") + " --tp 16", PRICE_70B.format(hw="h100") + " --tp 8"),
        _price_performance,
    ),
    Claim(
        "A Trn3 UltraServer 4x the performance of a Trn2 UltraServer",
        "AWS re:Invent 2024 preview",
        (SYS_TRN3, SYS_TRN2, SYS_TRN3_GEN2),
        _trn3_preview,
    ),
    Claim(
        "Trn3 UltraServers: 4.4x the compute of Trn2 UltraServers",
        "AWS re:Invent 2025 launch",
        (SYS_TRN3_GEN2, SYS_TRN2),
        _trn3_launch,
    ),
    Claim(
        "Trainium3 40 % more energy efficient (preview), then 4x (launch)",
        "AWS re:Invent 2024 and 2025",
        (SYS_TRN3, SYS_TRN2),
        _trn3_energy,
    ),
)


def verdicts() -> list[tuple[Claim, Verdict]]:
    """Every claim with its verdict, from running its commands."""
    return [(claim, claim.judge()) for claim in CLAIMS]


def page(rows: list[tuple[Claim, Verdict]]) -> str:
    """docs/claims.md: the table, then each claim's commands and reading."""
    counts = {
        v: sum(1 for _, x in rows if x.verdict == v) for v in (REPRODUCED, CONTRADICTED, UNTESTABLE)
    }
    lines = [
        "# The public claims, checked by command",
        "",
        "Generated by `python -m tools.claims` (`make claims`) from the commands below, run as",
        "typed; `tests/test_claims.py` fails when this page drifts from what they print. A",
        f"figure within {WITHIN:.0%} of the claim reproduces it. "
        + ", ".join(f"{n} {v}" for v, n in counts.items())
        + ".",
        "",
        "| # | claim | source | model | verdict |",
        "|---|---|---|---|---|",
    ]
    for i, (claim, v) in enumerate(rows, 1):
        lines.append(f"| {i} | {claim.claim} | {claim.source} | {v.model} | **{v.verdict}** |")
    lines.append("")
    for i, (claim, v) in enumerate(rows, 1):
        lines += ["", f"## {i}. {claim.claim}", "", f"**{v.verdict}**: {v.why}.", ""]
        if claim.commands:
            lines += ["```sh", *claim.commands, "```"]
        else:
            lines.append("No command: nothing the model computes tests it.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="print the page; write nothing")
    args = parser.parse_args(argv)
    text = page(verdicts())
    if args.check:
        print(text, end="")
    else:
        PAGE.write_text(text)
        print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
