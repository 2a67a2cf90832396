"""Measure one target: its Verilog with ``src`` attributes built by Verilator with coverage
(a build of its own: the arguments and the Verilog differ from the benches'), each bench run
once per seed in its own folder, and the ``coverage.dat`` files merged and summarised."""

from __future__ import annotations

import time
from pathlib import Path

from verif.common.runner import ROOT, BenchFailure, build, output_to, run

from .dat import merge, read, write
from .report import summarise
from .targets import COVERAGE_ARGS, Target, verilog_with_src

__all__ = ["measure"]


def measure(target: Target, seeds: tuple[int, ...], folder: Path) -> dict:
    """Build ``target`` with coverage, run its benches with each of ``seeds``, and return
    :func:`~.report.summarise`'s figures with the block, configuration, benches, seeds,
    seconds and any bench failure. Writes the merged ``coverage.dat`` (which Debian's
    ``verilator_coverage --annotate`` reads) and the simulator's output (``sim.log``) into
    ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "sim.log"
    log.unlink(missing_ok=True)
    start = time.perf_counter()
    verilog = verilog_with_src(target)
    with output_to(log):
        simbuild = build("verilator", verilog, target.top, extra_args=COVERAGE_ARGS)
    built = time.perf_counter()
    runs, failures = [], []
    for bench in target.benches:
        for seed in seeds:
            test_dir = folder / f"{bench.name}-{seed}"
            dat = test_dir / "coverage.dat"
            dat.unlink(missing_ok=True)
            env = bench.environment(seed) | {"COVERAGE_DIR": folder / "functional"}
            try:
                with output_to(log):
                    run(simbuild, bench.module, env=env, test_dir=test_dir,
                        testcase=bench.testcase, seed=seed)  # fmt: skip
            except BenchFailure as failure:
                failures.append(f"{bench.name} seed {seed}: {str(failure).splitlines()[-1]}")
            if dat.exists():
                runs.append(read(dat))
            else:
                failures.append(f"{bench.name} seed {seed}: no coverage.dat written")
    points = merge(runs)
    write(points, folder / "coverage.dat")
    figures = summarise(points, verilog.read_text(), ROOT)
    return {
        "block": target.block,
        "config": target.cfg.tag,
        "benches": [b.name for b in target.benches],
        "seeds": list(seeds),
        "verilog": verilog.relative_to(ROOT).as_posix(),
        **figures,
        "build_seconds": round(simbuild.build_seconds, 1),  # when it was built
        "build_cached": simbuild.cached,
        "seconds": round(time.perf_counter() - start, 1),
        "run_seconds": round(time.perf_counter() - built, 1),
        "failures": failures,
    }
