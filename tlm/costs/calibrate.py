"""Calibration of GEMM costs: the chip TLM's shipped GEMM kernel run once per grid shape.

:func:`measure_gemm` times one GEMM ``[m, k] x [k, n]`` with :func:`tlm.kernels.build_gemm`
in timing-only mode (``values=False``, ``bufs=4``, the kernel's defaults) on all the chip's
cores or on one. :func:`calibrate` runs it over the log grid of shapes of :mod:`tlm.costs.grid`
(powers of two, 1 to 4096 in M and K, to 8192 in N) for each format the chip's tensor engine has
a rate for, and returns the data file's contents; :func:`write_data` writes it.
``tools/calibrate_costs.py`` (``make calibrate``) is the command that rebuilds
``tlm/costs/data/<preset>.json``.

Examples
--------
>>> from tlm.costs.calibrate import measure_gemm
>>> measure_gemm("trn2", 128, 512, 256, "bf16") > 0
True
"""

from __future__ import annotations

import datetime
import json
import subprocess
import time
from pathlib import Path

from .grid import AXES, CORES, DATA_VERSION, FORMATS
from .opcosts import BASIS, FORMAT_TABLE, OpCosts

__all__ = [
    "KERNEL",
    "CHECK_MAX_ERROR",
    "CHECK_MEAN_ERROR",
    "CHECK_SHAPES",
    "calibrate",
    "check",
    "measure_gemm",
    "write_data",
]

#: How the data was measured, recorded in the file.
KERNEL = "tlm.kernels.build_gemm(m, n, k, fmt, values=False, bufs=4; cores all or 1), timing only"


def measure_gemm(preset: str, m: int, n: int, k: int, fmt: str, cores: str = "all") -> float:
    """Simulated seconds of one GEMM ``[m, k] x [k, n]`` in ``fmt`` on the chip TLM.

    Parameters
    ----------
    preset : str
        Chip preset (``trn2``).
    m, n, k : int
        Shape, positive integers.
    fmt : str
        Input format of the kernel (``bf16``, ``fp8_e4m3``, ...); C is BF16.
    cores : str
        ``all`` (the chip's cores) or ``one``.

    Returns
    -------
    float
        The kernel's simulated time in seconds (start to the last store's completion).
    """
    from ..kernels import build_gemm

    if cores not in CORES:
        raise ValueError(f"cores must be one of {', '.join(CORES)}, not {cores!r}")
    used = 1 if cores == "one" else None
    kernel, _blocks, _c = build_gemm(
        int(m), int(n), int(k), fmt, preset=preset, values=False, cores=used
    )
    return float(kernel.run().time_s)


#: The sources a GEMM's simulated time depends on: the commit recorded names their state.
TIMED_BY = (
    "tlm/chip",
    "tlm/core",
    "tlm/kernels",
    "tlm/tensor",
    "tlm/presets",
    "tlm/formats.py",
)


def _commit() -> str:
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", *TIMED_BY],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head + (" with uncommitted changes to the chip model" if dirty else "")


def calibrate(preset: str = "trn2", axes=None, formats=None, progress=None) -> dict:
    """Run the grid through the chip TLM and return the data file's contents.

    Parameters
    ----------
    preset : str
        Chip preset.
    axes : dict, optional
        ``{"m": ..., "n": ..., "k": ...}``: the grid values of each (ascending; default
        :data:`tlm.costs.grid.AXES`).
    formats : sequence of str, optional
        Keys of :data:`tlm.costs.grid.FORMATS` (default: all).
    progress : callable, optional
        Called as ``progress(done, total)`` after each shape.

    Returns
    -------
    dict
        ``{"version", "preset", "kernel", "trnsim_version", "commit", "date",
        "calibration_wall_s", "axes", "formats", "tables"}``; ``tables[fmt][cores]`` is the
        flat list of seconds in ``(m, n, k)`` C order.
    """
    from importlib.metadata import PackageNotFoundError, version

    formats = tuple(FORMATS) if formats is None else tuple(formats)
    for f in formats:
        if f not in FORMATS:
            raise ValueError(f"formats must be among {', '.join(FORMATS)}, not {f!r}")
    axes = {d: [int(a) for a in (axes or AXES)[d]] for d in "mnk"}
    start = time.perf_counter()
    total = len(formats) * len(CORES) * len(axes["m"]) * len(axes["n"]) * len(axes["k"])
    done = 0
    tables = {}
    for f in formats:
        tables[f] = {}
        for cores in CORES:
            times = []
            for m in axes["m"]:
                for n in axes["n"]:
                    for k in axes["k"]:
                        times.append(measure_gemm(preset, m, n, k, FORMATS[f], cores))
                        done += 1
                        if progress is not None:
                            progress(done, total)
            tables[f][cores] = times
    try:
        ours = version("trnsim")
    except PackageNotFoundError:
        ours = "unknown"
    return {
        "version": DATA_VERSION,
        "preset": preset,
        "kernel": KERNEL,
        "trnsim_version": ours,
        "commit": _commit(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%MZ"),
        "calibration_wall_s": round(time.perf_counter() - start, 1),
        "axes": axes,
        "formats": {f: FORMATS[f] for f in formats},
        "tables": tables,
    }


#: Shapes off the grid the estimates are checked on against the chip TLM (BF16, all cores):
#: the GEMMs of Llama 3 70B's layer at tensor parallelism 8 (QKV, out, gate/up, down) and of
#: Llama 3 8B's at 1, with 64 rows (a decode batch) and 2048 (a prefill or training piece);
#: ragged shapes inside the grid; large ones beyond it. ``tools/calibrate_costs.py --check``
#: prints the table docs/costs.md shows.
CHECK_SHAPES = (
    (64, 1280, 8192),
    (64, 8192, 1024),
    (64, 7168, 8192),
    (64, 8192, 3584),
    (64, 6144, 4096),
    (64, 4096, 14336),
    (2048, 1280, 8192),
    (2048, 8192, 1024),
    (2048, 7168, 8192),
    (2048, 8192, 3584),
    (2048, 6144, 4096),
    (2048, 4096, 14336),
    (3000, 1280, 1000),
    (100, 1500, 3000),
    (1000, 1000, 1000),
    (1, 8192, 16384),
    (8192, 512, 512),
    (512, 512, 8192),
    (4096, 4096, 16384),
    (8192, 8192, 8192),
)


#: Bounds on the estimates' relative error over :data:`CHECK_SHAPES` (measured 2026-11-27:
#: mean 3.3 %, max 20.8 %, docs/costs.md); tests fail if a change makes them worse.
CHECK_MEAN_ERROR = 0.035
CHECK_MAX_ERROR = 0.22


def check(preset: str = "trn2", shapes=CHECK_SHAPES, fmt: str = "bf16") -> list[dict]:
    """Each shape's estimate (:meth:`tlm.costs.OpCosts.gemm_s`) against the chip TLM.

    Returns
    -------
    list of dict
        ``{"m", "n", "k", "tlm_s", "estimate_s", "error", "basis"}`` per shape (``error`` the
        estimate's relative error, ``basis`` a name of :data:`tlm.costs.BASIS`).
    """
    costs = OpCosts.for_preset(preset, measured=False)  # the TLM's own times
    rows = []
    for m, n, k in shapes:
        measured = measure_gemm(preset, m, n, k, FORMATS[FORMAT_TABLE[fmt]])
        estimate = float(costs.gemm_s(m, n, k, fmt=fmt))
        rows.append(
            {
                "m": m,
                "n": n,
                "k": k,
                "tlm_s": measured,
                "estimate_s": estimate,
                "error": estimate / measured - 1,
                "basis": BASIS[int(costs.gemm_basis(m, n, k, fmt=fmt))],
            }
        )
    return rows


def write_data(data: dict, path) -> None:
    """Write ``data`` as JSON: the axes and metadata readable, each table on one line per M."""
    path = Path(path)
    axes = data["axes"]
    rows = len(axes["n"]) * len(axes["k"])
    lines = ["{"]
    head = {k: v for k, v in data.items() if k != "tables"}
    for key, value in head.items():
        lines.append(f"  {json.dumps(key)}: {json.dumps(value)},")
    lines.append('  "tables": {')
    for fi, (f, table) in enumerate(data["tables"].items()):
        lines.append(f"    {json.dumps(f)}: {{")
        for ci, (cores, times) in enumerate(table.items()):
            lines.append(f"      {json.dumps(cores)}: [")
            chunks = [times[i : i + rows] for i in range(0, len(times), rows)]
            for ri, chunk in enumerate(chunks):
                tail = "," if ri < len(chunks) - 1 else ""
                lines.append("        " + ", ".join(repr(float(t)) for t in chunk) + tail)
            lines.append("      ]" + ("," if ci < len(table) - 1 else ""))
        lines.append("    }" + ("," if fi < len(data["tables"]) - 1 else ""))
    lines += ["  }", "}"]
    text = "\n".join(lines) + "\n"
    if json.loads(text) != data:  # the writer is hand-made: prove it round-trips
        raise RuntimeError("calibration data does not round-trip through JSON")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
