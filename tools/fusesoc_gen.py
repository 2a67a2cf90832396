"""FuseSoC generator (GAPI 1.0): run ``python -m hdl`` with the core's parameters and describe
the Verilog it wrote in a generated core file.

FuseSoC calls ``fusesoc_gen.py <input.yml>`` in a fresh folder; the input names the
parameters (``block``, ``rows``, ``cols``, ``format``, ``name``; for the NeuronLink blocks
``shape``, ``vcs``, ``depth``, ``width``) under ``parameters``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml


def main(input_file: str) -> int:
    spec = yaml.safe_load(Path(input_file).read_text())
    params = spec.get("parameters") or {}
    files_root = Path(spec["files_root"])
    block = params.get("block", "tensor_engine")
    name = params.get("name", block)
    out = Path.cwd() / f"{name}.v"
    cmd = [sys.executable, "-m", "hdl", block, "-o", str(out), "--name", name]
    for key in ("rows", "cols", "format", "shape", "vcs", "depth", "width"):
        if key in params:
            cmd += [f"--{key}", str(params[key])]
    subprocess.run(cmd, check=True, cwd=files_root)
    vlnv = spec["vlnv"]
    core = (
        "CAPI=2:\n"
        f"name: {vlnv}\n"
        "filesets:\n"
        "  rtl:\n"
        "    files:\n"
        f"      - {out.name}: {{file_type: verilogSource}}\n"
        "targets:\n"
        "  default:\n"
        "    filesets: [rtl]\n"
    )
    (Path.cwd() / f"{vlnv.replace(':', '_')}.core").write_text(core)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: fusesoc_gen.py INPUT.yml")
    sys.exit(main(sys.argv[1]))
