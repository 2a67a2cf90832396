"""Describe a repeated block once: place it as a submodule or as an instance of one module.

Amaranth elaborates every submodule afresh, so a 128x128 array of PE submodules costs minutes of
Python and tens of MB of Verilog (TOOLCHAIN.md). In *hierarchical* mode a parent places an
``Instance`` of a module that is generated once, wired to the child component's own port
signals; in *flat* mode the same parent adds the component as an ordinary submodule, which
Amaranth's simulator can run. The parent's logic is identical in both modes.
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Const, Instance, ResetSignal, Value
from amaranth.lib import wiring

__all__ = ["place", "port_names"]


def port_names(component: wiring.Component):
    """Yield ``(verilog_name, direction, value)`` for each port, as Amaranth names them."""
    for path, member, value in component.signature.flatten(component):
        name = "__".join(str(p) for p in path)
        direction = "i" if member.flow == wiring.In else "o"
        yield name, direction, Value.cast(value)


def place(
    m, name: str, component: wiring.Component, module: str | None, *, clocked=True, reset=True
):
    """Add ``component`` to module ``m`` under ``name``.

    With ``module=None`` it becomes a submodule (flat); otherwise an ``Instance`` of the
    Verilog module ``module`` (generated separately from an identical component) connected to
    the component's port signals, which the parent drives and reads as usual. A module of
    combinational logic only (``clocked=False``) has no clock and reset ports. One whose
    registers are all reset-less (``reset=False``) has its unused reset port tied low: an
    input that follows the top's reset makes Verilator update a hierarchical block's
    combinational outputs on every evaluation of the model, however little changed.
    """
    if module is None:
        m.submodules[name] = component
        return
    component._MustUse__silence = True  # described by `module`, never elaborated here
    ports = {}
    if clocked:
        ports["i_clk"] = ClockSignal()
        ports["i_rst"] = ResetSignal() if reset else Const(0)
    for port, direction, value in port_names(component):
        ports[f"{direction}_{port}"] = value
    m.submodules[name] = Instance(module, **ports)
