"""Evaluate a combinational Amaranth block on many input vectors at once, compiled by Verilator.

Amaranth's Python simulator settles a block of a few thousand gates in about a millisecond, so
an exhaustive check of an FP8 x FP8 multiplier (65,536 pairs) takes a minute there. Here the
block's generated Verilog is compiled once with a small C++ harness (cached under
``build/eval/`` by the Verilog and the harness), which reads the input vectors from a file,
evaluates each and writes the outputs: the same 65,536 pairs take milliseconds. The design
checked is the generated Verilog the benches and FuseSoC use, not a re-implementation.

Ports are those of the component's signature, at most 64 bits each; the block must have no
clock (every output a function of the inputs).

Examples
--------
>>> import numpy as np
>>> from amaranth.lib import wiring
>>> from amaranth.lib.wiring import In, Out
>>> class Add(wiring.Component):
...     a: In(8)
...     b: In(8)
...     s: Out(9)
...     def elaborate(self, platform):
...         from amaranth import Module
...         m = Module()
...         m.d.comb += self.s.eq(self.a + self.b)
...         return m
>>> out = evaluate(Add(), {"a": np.array([1, 255]), "b": np.array([2, 255])})  # doctest: +SKIP
>>> out["s"].tolist()  # doctest: +SKIP
[3, 510]
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
from amaranth.back import verilog
from amaranth.hdl import Shape
from amaranth.lib import wiring

from .runner import BUILD
from .toolchain import apply_environment

__all__ = ["Blocks", "evaluate", "simulate"]

#: The C++ compiled without optimisation: the build is most of the time, a few thousand gates
#: evaluated a hundred thousand times take milliseconds either way.
_FAST = "OPT_FAST=-O0 OPT_SLOW=-O0 OPT_GLOBAL=-O0"

_HARNESS = """\
#include <cstdint>
#include <cstdio>
#include <vector>
#include "V{top}.h"
#include "verilated.h"

int main(int argc, char** argv) {{
    Verilated::commandArgs(argc, argv);
    V{top} top;
    FILE* in = std::fopen(argv[1], "rb");
    FILE* out = std::fopen(argv[2], "wb");
    if (!in || !out) return 2;
    uint64_t v[{n_in}];
    uint64_t r[{n_out}];
    while (std::fread(v, sizeof(uint64_t), {n_in}, in) == {n_in}) {{
{sets}
        top.eval();
{gets}
        std::fwrite(r, sizeof(uint64_t), {n_out}, out);
    }}
    top.final();
    std::fclose(in);
    std::fclose(out);
    return 0;
}}
"""


def _ports(component: wiring.Component):
    ins, outs = [], []
    for name, member in component.signature.members.items():
        if not member.is_port:
            raise ValueError(f"port {name!r} is not a plain signal: flatten it first")
        width = Shape.cast(member.shape).width
        if width > 64:
            raise ValueError(f"port {name!r} is {width} bits wide; at most 64 are allowed")
        (ins if member.flow == wiring.In else outs).append((name, width))
    return ins, outs


def _build(text: str, top: str, ins, outs) -> Path:
    sets = "\n".join(f"        top.{n} = v[{i}];" for i, (n, _) in enumerate(ins))
    gets = "\n".join(f"        r[{i}] = top.{n};" for i, (n, _) in enumerate(outs))
    harness = _HARNESS.format(top=top, n_in=len(ins), n_out=len(outs), sets=sets, gets=gets)
    key = hashlib.sha1((text + harness + _FAST).encode()).hexdigest()[:16]
    folder = BUILD / "eval" / f"{top}_{key}"
    exe = folder / "obj" / f"V{top}"
    if exe.exists():
        return exe
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{top}.v").write_text(text)
    (folder / "harness.cpp").write_text(harness)
    # the pid in the object folder: parallel workers may build the same block at once
    obj = folder / f"obj.{os.getpid()}"
    command = [
        "verilator", "--cc", "--exe", "--build", "-Wno-fatal", "-Wno-lint", "-MAKEFLAGS", _FAST,
        "--top-module", top, "-Mdir", str(obj), "-o", f"V{top}",
        str(folder / f"{top}.v"), str(folder / "harness.cpp"),
    ]  # fmt: skip
    done = subprocess.run(
        command, env=apply_environment(dict(os.environ)), capture_output=True, text=True
    )
    if done.returncode:
        raise RuntimeError(
            f"verilator failed on {top}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    try:
        obj.rename(folder / "obj")
    except OSError:  # another worker finished first: use its build
        shutil.rmtree(obj, ignore_errors=True)
    return exe


class Blocks(wiring.Component):
    """Several combinational blocks side by side in one design, so that one Verilator build
    serves them all (a build is seconds, an evaluation milliseconds): the ``i``-th block's
    port ``p`` is this component's ``b{i}_p`` (Verilator renames double underscores).
    Evaluate one with :meth:`evaluate`."""

    def __init__(self, blocks: dict):
        self.blocks = dict(blocks)
        self._prefix = {name: f"b{i}_" for i, name in enumerate(self.blocks)}
        members = {
            f"{self._prefix[name]}{port}": member
            for name, block in self.blocks.items()
            for port, member in block.signature.members.items()
        }
        super().__init__(members)
        self._text = {}

    def elaborate(self, platform):
        from amaranth import Module

        m = Module()
        for name, block in self.blocks.items():
            m.submodules[name] = block
            for port, member in block.signature.members.items():
                outer, inner = getattr(self, f"{self._prefix[name]}{port}"), getattr(block, port)
                m.d.comb += inner.eq(outer) if member.flow == wiring.In else outer.eq(inner)
        return m

    def verilog(self, top: str) -> str:
        """The design's Verilog (generated once per top name)."""
        if top not in self._text:
            self._text[top] = verilog.convert(self, name=top, emit_src=False)
        return self._text[top]

    def evaluate(self, name: str, inputs: dict, top: str = "blocks") -> dict:
        """:func:`evaluate` of block ``name`` alone (the other blocks' inputs held at 0)."""
        block = self.blocks[name]
        n = len(next(iter(inputs.values())))
        outer = {
            f"{self._prefix[b]}{port}": (inputs[port] if b == name else np.zeros(n, np.uint64))
            for b, other in self.blocks.items()
            for port, member in other.signature.members.items()
            if member.flow == wiring.In and (b != name or port in inputs)
        }
        missing = sorted(
            p for p, m in block.signature.members.items() if m.flow == wiring.In and p not in inputs
        )
        if missing:
            raise ValueError(f"inputs must give every input port; missing: {', '.join(missing)}")
        out = evaluate(self, outer, top=top)
        prefix = self._prefix[name]
        return {k.removeprefix(prefix): v for k, v in out.items() if k.startswith(prefix)}


def evaluate(component: wiring.Component, inputs: dict, top: str = "block") -> dict:
    """Each output of ``component`` for every row of ``inputs`` (``{port: array}``, every
    input port given, arrays of one length; values are masked to the port's width).

    Returns
    -------
    dict
        ``{output port: numpy.ndarray of uint64}``, one value per input row.
    """
    ins, outs = _ports(component)
    missing = sorted({n for n, _ in ins} - set(inputs))
    if missing:
        raise ValueError(f"inputs must give every input port; missing: {', '.join(missing)}")
    if isinstance(component, Blocks):
        text = component.verilog(top)
    else:
        text = verilog.convert(component, name=top, emit_src=False)
    exe = _build(text, top, ins, outs)
    columns = [np.asarray(inputs[n], dtype=np.uint64) & np.uint64((1 << w) - 1) for n, w in ins]
    rows = np.stack(columns, axis=1) if columns else np.zeros((0, 0), np.uint64)
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.bin", Path(tmp) / "out.bin"
        rows.astype("<u8").tofile(src)
        subprocess.run([str(exe), str(src), str(dst)], check=True)
        result = np.fromfile(dst, dtype="<u8").reshape(-1, len(outs))
    return {n: result[:, i] for i, (n, _) in enumerate(outs)}


def simulate(component: wiring.Component, inputs: dict) -> dict:
    """:func:`evaluate` through Amaranth's own simulator, a row at a time (about a millisecond
    a row for a few thousand gates): for a sample that ties the Verilog to the design."""
    from amaranth.sim import Simulator

    ins, outs = _ports(component)
    rows = len(next(iter(inputs.values())))
    got = {n: [] for n, _ in outs}

    async def bench(ctx):
        for i in range(rows):
            for n, _ in ins:
                ctx.set(getattr(component, n), int(inputs[n][i]))
            for n, _ in outs:
                got[n].append(ctx.get(getattr(component, n)))

    sim = Simulator(component)
    sim.add_testbench(bench)
    sim.run()
    return {n: np.array(v, np.uint64) for n, v in got.items()}
