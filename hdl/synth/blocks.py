"""The blocks ``make synth`` measures, registered by name, each generating its own Verilog."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

__all__ = ["Block", "BLOCKS", "FORMAT_SETS"]

#: The format sets the area proxy compares (``hdl.synth.area``): name in block names -> the
#: ``EngineConfig`` format spec and a label. Each has a ``pe_<name>`` and a ``slice_<name>``.
FORMAT_SETS: dict[str, tuple[str, str]] = {
    "int8": ("int8", "int8"),
    "fp8": ("fp8_e4m3,fp8_e5m2", "the FP8 pair"),
    "bf16": ("bf16", "BF16"),
    "fp32": ("fp32", "FP32"),
    "all": ("all", "every format"),
}


@dataclass(frozen=True)
class Block:
    """One design to synthesise.

    Parameters
    ----------
    name : str
        Its name on the command line (``--block``, ``make synth BLOCK=``).
    summary : str
        What it is, one line.
    top : str
        The top module of the Verilog that ``verilog`` returns.
    verilog : callable
        ``verilog()`` returns the Verilog text (every module of the hierarchy).
    in_all : bool
        Whether ``make synth`` (``--block all``) runs it; a block that alone takes longer than
        the whole run may is run only by name.
    seconds : float
        About how long it takes (generation and Yosys, an idle machine of two cores): which
        blocks a pool of workers starts first when no earlier run's figure says.
    """

    name: str
    summary: str
    top: str
    verilog: Callable[[], str]
    in_all: bool = True
    seconds: float = 10.0


def _engine_config(rows: int, cols: int, fmt: str, pe_stages=None, decode_stages=None):
    from tlm.tensor.config import EngineConfig

    return EngineConfig(rows, cols, fmt, pe_stages=pe_stages, decode_stages=decode_stages)


def _pe(fmt: str, pe_stages: int | None = None) -> str:
    from amaranth.back import verilog

    from ..tensor.pe import ProcessingElement

    return verilog.convert(
        ProcessingElement(_engine_config(128, 128, fmt, pe_stages)), name="pe", emit_src=False
    )


def _slice(fmt: str, rows: int, pe_stages: int | None = None) -> str:
    """A column of ``rows`` PEs, the unit a ``rows x cols`` array is made of ``cols`` times
    (:class:`~hdl.tensor.array.Column`), with its PE generated once."""
    from amaranth.back import verilog

    from ..tensor.array import Column
    from ..tensor.pe import ProcessingElement

    cfg = _engine_config(rows, 128, fmt, pe_stages)
    return "\n".join(
        [
            verilog.convert(ProcessingElement(cfg), name="slice_pe", emit_src=False),
            verilog.convert(Column(cfg, 1, pe_module="slice_pe"), name="slice", emit_src=False),
        ]
    )


def _engine(rows: int, cols: int, fmt: str, pe_stages=None, decode_stages=None) -> str:
    from ..gen import tensor_engine_verilog

    cfg = _engine_config(rows, cols, fmt, pe_stages, decode_stages)
    return tensor_engine_verilog(cfg, "tensor_engine")


def _edge(rows: int, fmt: str, decode_stages: int) -> str:
    """The longest operand lane of a ``rows``-row engine at ``PIPELINED_FLOAT``'s PE stages
    (a skew line delaying ``(rows - 1) * add_stages`` cycles) and its decoder, into the
    register the PE takes it in: what a whole engine of that size would add to a PE."""
    from amaranth.back import verilog
    from amaranth.hdl import Module, Signal
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    from tlm.tensor.config import PIPELINED_FLOAT

    from ..formats import OperandDecoder, decoded_layout, operand_shape
    from ..tensor.skew import DelayLane, lane_depth

    cfg = _engine_config(rows, 128, fmt, PIPELINED_FLOAT["pe_stages"], decode_stages)
    depth = lane_depth((rows - 1) * cfg.add_stages + 1)

    class Edge(wiring.Component):
        def __init__(self):
            ports = {"raw": In(operand_shape(cfg)), "adv": In(1), "delay": In(range(depth))}
            ports |= {"code": In(cfg.fmt_bits)} if cfg.fmt_bits else {}
            super().__init__({**ports, "out": Out(decoded_layout(cfg).size)})

        def elaborate(self, platform):
            m = Module()
            m.submodules.lane = lane = DelayLane(len(self.raw), depth)
            m.submodules.dec = dec = OperandDecoder(cfg)
            m.d.comb += [lane.adv.eq(self.adv), lane.delay.eq(self.delay), lane.i.eq(self.raw)]
            m.d.comb += dec.raw.eq(lane.o)
            if cfg.fmt_bits:
                m.d.comb += dec.code.eq(self.code)
            if dec.clocked:
                m.d.comb += dec.adv.eq(self.adv)
            reg = Signal(len(self.out))  # the PE's operand register
            m.d.sync += reg.eq(dec.out)
            m.d.comb += self.out.eq(reg)
            return m

    return verilog.convert(Edge(), name="edge", emit_src=False)


def _link(kind: str, shape: str) -> str:
    from tlm.link.config import LinkConfig

    from ..gen import link_router_verilog, torus_verilog

    generate = link_router_verilog if kind == "link_router" else torus_verilog
    return generate(LinkConfig(shape), kind)


def _blocks() -> dict[str, Block]:
    from tlm.tensor.config import ONE_STAGE_FLOAT

    formats = {"int8": "int8", "all": "every format"}
    blocks = []
    for name, (fmt, text) in FORMAT_SETS.items():
        blocks.append(Block(f"pe_{name}", f"processing element, {text}", "pe", partial(_pe, fmt)))
    # The stage counts worth comparing with the defaults (int8 in 2, floats in 11, trn2's
    # clock): each format set in one stage (ONE_STAGE_FLOAT for floats), floats in 5.
    blocks.append(
        Block(
            "pe_int8_1stage",
            "processing element, int8, in one stage",
            "pe",
            partial(_pe, "int8", 1),
        )
    )
    for name, fmt, text in (("all", "all", "every format"), ("fp8", "fp8_e4m3,fp8_e5m2", "FP8")):
        blocks.append(
            Block(
                f"pe_{name}_5stage",
                f"processing element, {text}, 5 stages",
                "pe",
                partial(_pe, fmt, 5),
            )
        )
    for name, (fmt, text) in FORMAT_SETS.items():
        blocks.append(
            Block(
                f"slice_{name}",
                f"array slice: a column of 128 PEs (a 128x128 array is 128 of them), {text}",
                "slice",
                partial(_slice, fmt, 128),
            )
        )
    one = ONE_STAGE_FLOAT["pe_stages"]
    for name, (fmt, text) in FORMAT_SETS.items():
        if name == "int8":
            continue  # pe_int8_1stage above; int8's area needs no one-stage slice
        for kind, what, make in (
            ("pe", "processing element", partial(_pe, fmt, one)),
            ("slice", "array slice: a column of 128 PEs", partial(_slice, fmt, 128, one)),
        ):
            blocks.append(
                Block(f"{kind}_{name}_{one}stage", f"{what}, {text}, in one stage", kind, make)
            )
    for size in (8, 128):
        for fmt, text in formats.items():
            blocks.append(
                Block(
                    f"engine_{size}x{size}_{fmt}",
                    f"tensor engine {size}x{size}, {text}",
                    "tensor_engine",
                    partial(_engine, size, size, fmt),
                    # over 10 minutes alone on 2 cores: 128 x slice_all stands for its array
                    in_all=(size, fmt) != (128, "all"),
                    seconds={(8, "int8"): 10.0, (8, "all"): 30.0, (128, "int8"): 100.0}.get(
                        (size, fmt), 600.0
                    ),
                )
            )
    for stages, text in ((1, "combinational"), (2, "with its register")):
        blocks.append(
            Block(
                f"edge_128_all_dec{stages}",
                "the longest operand lane of a 128-row every-format engine pipelined to trn2's "
                f"clock and its decoder, {text}",
                "edge",
                partial(_edge, 128, "all", stages),
                seconds=80.0,
            )
        )
    blocks.append(
        Block(
            f"engine_8x8_all_{one}stage",
            "tensor engine 8x8, every format, in one stage (PE and decoders)",
            "tensor_engine",
            partial(_engine, 8, 8, "all", **ONE_STAGE_FLOAT),
        )
    )
    blocks.append(
        Block(
            "router_4x4",
            "NeuronLink router of a 4x4 torus",
            "link_router",
            partial(_link, "link_router", "4x4"),
        )
    )
    blocks.append(
        Block(
            "torus_4x4",
            "4x4 torus of 16 routers (Trn2 server)",
            "torus",
            partial(_link, "torus", "4x4"),
        )
    )
    return {b.name: b for b in blocks}


#: Every block, in the order ``make synth`` runs and reports them.
BLOCKS: dict[str, Block] = _blocks()
