"""Amaranth shapes and arithmetic for the number formats defined in :mod:`tlm.formats`.

An engine is elaborated with a set of formats (``EngineConfig.formats``); every function here
takes the engine's configuration and works for one format or several.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tlm.tensor.config import EngineConfig

__all__ = [
    "operand_shape",
    "acc_shape",
    "decoded_layout",
    "lane_shape",
    "decode_operand",
    "OperandDecoder",
    "is_int_code",
    "mac",
]


def operand_shape(cfg: EngineConfig):
    """Shape of one operand (stationary or moving element) on the ports and in the PEs.

    One integer format: a signed integer. Otherwise the raw bits of any of the formats in the
    low bits of an unsigned container as wide as the widest (32 bits with TF32 or FP32).
    """
    if len(cfg.formats) == 1 and cfg.fmt.kind == "int":
        return signed(cfg.fmt.bits)
    return unsigned(max(f.bits if f.kind == "int" else f.storage_bits for f in cfg.formats))


def acc_shape(cfg: EngineConfig):
    """Shape of a partial sum and of a result element: a signed integer for an integer-only
    engine, else 32 raw bits (binary32, or an int32 sum in two's complement).

    Raises
    ------
    ValueError
        When integer and floating-point formats share an engine and the integer
        accumulator is not 32 bits wide.
    """
    if not cfg.has_float:
        if len({f.acc_bits for f in cfg.formats}) != 1:
            raise ValueError(
                "integer formats of one engine must share an accumulator width, not "
                f"{', '.join(f'{f.name}: {f.acc_bits}' for f in cfg.formats)}"
            )
        return signed(cfg.fmt.acc_bits)
    for f in cfg.formats:
        if f.kind == "int" and f.acc_bits != 32:
            raise ValueError(
                f"format {f.name} has a {f.acc_bits}-bit accumulator; beside floating-point "
                "formats (binary32 sums) an integer format needs acc_bits=32"
            )
    return unsigned(32)


def decoded_layout(cfg: EngineConfig) -> data.StructLayout | None:
    """Operands inside the array of an engine with floating-point formats: decoded once, at
    the array's edge, so that no PE decodes its operands again (value = ``(-1)**sign * sig *
    2**exp``; ``nan`` and ``inf`` flags). An int8 operand is its sign and magnitude with
    ``exp`` 0. ``None`` for an integer-only engine, whose operands stay integers."""
    if not cfg.has_float:
        return None
    floats = [f for f in cfg.formats if f.kind == "float"]
    sig_bits = max(
        [24 - f.ignored_low_bits if f.ignored_low_bits else f.man_bits + 1 for f in floats]
        + [f.bits for f in cfg.formats if f.kind == "int"]
    )
    exp_bits = max(f.exp_bits + 2 for f in floats)
    return data.StructLayout(
        {"sign": 1, "sig": sig_bits, "exp": signed(exp_bits), "nan": 1, "inf": 1}
    )


def lane_shape(cfg: EngineConfig):
    """Shape of an operand inside the array: decoded (:func:`decoded_layout`) or an integer."""
    return decoded_layout(cfg) or operand_shape(cfg)


def _float_index(m: Module, cfg: EngineConfig, code, name: str):
    """Map an engine format code to the index of its format among the engine's floating-point
    formats (integer codes map to 0; the float result is not used for them)."""
    floats = [f for f in cfg.formats if f.kind == "float"]
    index = Signal(range(max(2, len(floats))), name=name)
    # One expression (a continuous assignment in Verilog), not a Switch: Icarus runs an
    # `always @*` block only when an input changes, and `code` may hold one value from time
    # 0 on, which left the index, and every operand decoded after it, X for a whole run.
    choice = Const(0)
    for c, f in enumerate(cfg.formats):
        if f.kind == "float" and floats.index(f):
            choice = Mux(code == c, floats.index(f), choice)
    m.d.comb += index.eq(choice)
    return index


def is_int_code(cfg: EngineConfig, code):
    """Whether a format code names the engine's integer format (always false without one)."""
    ints = [c for c, f in enumerate(cfg.formats) if f.kind == "int"]
    if len(ints) > 1:
        raise ValueError(
            "an engine takes at most one integer format, not "
            + ", ".join(cfg.formats[c].name for c in ints)
        )
    if not ints:
        return Const(0)
    return Const(1) if len(cfg.formats) == 1 else code == ints[0]


def decode_operand(m: Module, cfg: EngineConfig, raw, code, name: str, stages=None):
    """Decode a raw operand of format ``cfg.formats[code]`` into :func:`decoded_layout`
    (``raw`` itself on an integer-only engine). Added to ``m``. With ``stages``
    (:class:`hdl.stages.Stages`), the cut ``dec.norm`` may put a register in the
    significand's normalisation, between the count and the shift (:func:`hdl.fp.mul.decode_any`)."""
    layout = decoded_layout(cfg)
    if layout is None:
        return raw
    from .fp.mul import decode_any

    floats = tuple(f for f in cfg.formats if f.kind == "float")
    index = _float_index(m, cfg, code, f"{name}_fi") if len(floats) > 1 else None
    sig_bits = Shape.cast(layout["sig"].shape).width
    ints = [f for f in cfg.formats if f.kind == "int"]
    if ints and stages is not None:  # what the integer path needs rides through the cut
        stages.carry["int_raw"], stages.carry["int_code"] = raw, is_int_code(cfg, code)
    sign, sig, exp, nan, inf, _ = decode_any(m, floats, raw, index, name, sig_bits, stages)
    if ints and stages is not None:
        raw, int_code = stages.carry.pop("int_raw"), stages.carry.pop("int_code")
    elif ints:
        int_code = is_int_code(cfg, code)
    out = Signal(layout, name=f"{name}_dec")
    m.d.comb += [
        out.sign.eq(sign),
        out.sig.eq(sig),
        out.exp.eq(exp),
        out.nan.eq(nan),
        out.inf.eq(inf),
    ]
    if ints:
        value = raw[: ints[0].bits].as_signed()
        with m.If(int_code):
            m.d.comb += [
                out.sign.eq(value < 0),
                out.sig.eq(Mux(value < 0, -value, value)),
                out.exp.eq(0),
                out.nan.eq(0),
                out.inf.eq(0),
            ]
    return out


class OperandDecoder(wiring.Component):
    """:func:`decode_operand` as a block of its own, generated once and placed at each row and
    column of the array's edge. Combinational.

    Ports: ``raw`` (an operand as the engine's ports carry it), ``code`` (its format code, on
    an engine with more than one format), ``out`` (:func:`decoded_layout`, as plain bits: a
    layout-typed port would add a debug wire per field to the parent for each of 256 uses),
    and with ``cfg.decode_stages`` 2 ``adv``, the enable of its reset-less register (the cut
    ``dec.norm``): ``out`` is then the decode of ``raw`` and ``code`` one advancing cycle
    before.
    """

    def __init__(self, cfg: EngineConfig):
        if decoded_layout(cfg) is None:
            self._MustUse__silence = True
            raise ValueError(f"an engine of {cfg.fmt.name} only has no operands to decode")
        self.cfg = cfg
        ports = {"raw": In(operand_shape(cfg)), "out": Out(decoded_layout(cfg).size)}
        if cfg.fmt_bits:
            ports["code"] = In(cfg.fmt_bits)
        if self.clocked:
            ports["adv"] = In(1)
        super().__init__(ports)

    @property
    def clocked(self) -> bool:
        """Whether the decoder has a register (``cfg.decode_stages`` 2)."""
        return self.cfg.decode_stages > 1

    def elaborate(self, platform):
        from .stages import Stages

        m = Module()
        code = self.code if self.cfg.fmt_bits else Const(0)
        st = Stages(m, self.adv, {"dec.norm"}) if self.clocked else None
        out = decode_operand(m, self.cfg, self.raw, code, "op", st)
        if st is not None:
            out = st.sync(out=out)["out"]
            st.check()
        m.d.comb += self.out.eq(out)
        return m


def mac(m: Module, cfg: EngineConfig, acc, weight, x, enable, is_int=None, stages=None):
    """``acc + weight * x`` when ``enable``, else ``acc``: one PE step, added to ``m``.

    Integers wrap like the TLM's accumulator. Floating point follows the numerics contract
    (``docs/numerics.md``) on operands decoded by :func:`decode_operand`
    (:func:`hdl.fp.mac.mac_step`). On an engine with an integer format beside floating-point
    ones, ``is_int`` chooses the integer step.

    ``stages`` (:class:`hdl.stages.Stages`) places pipeline registers at the cuts named in
    :data:`tlm.tensor.config.PE_CUTS`: ``mul.*`` cuts read ``weight`` and ``x`` only, so
    ``acc`` is due only after them; ``add.*`` cuts delay the result. Without it the step is
    combinational.
    """
    from .stages import Stages

    st = stages or Stages(m)
    st.carry["en"] = enable
    ints = [f for f in cfg.formats if f.kind == "int"]
    if not cfg.has_float:
        prod = st.sync(**st.cut("mul.product", prod=weight * x))["prod"]  # acc is read next
        total = (acc + prod)[: ints[0].acc_bits].as_signed()
        return Mux(st.carry.pop("en"), total, acc)
    from .fp.csa import carry_save_product
    from .fp.mac import mac_step

    def unpack(v):
        return (v.sign, v.sig, v.exp, v.nan, v.inf, ~v.sig[-1])

    def at_acc(c, acc):
        # What is not the float sum (acc itself, or the integer sum) rides through the
        # adder's stages as one value.
        if ints:
            is_int, neg = c.pop("int"), c.pop("ineg")
            # acc + product and acc - product side by side, the sign choosing: no negation
            # before them. In one stage each is a three-input add of the product's carry-save
            # halves (a 3:2 level and a carry chain), with no product carry chain.
            plus, minus = Signal(32, name="int_plus"), Signal(32, name="int_minus")
            if "iprod" in c:
                st.settle("iprod")
                p = c.pop("iprod")
                m.d.comb += [plus.eq(acc + p), minus.eq(acc - p)]
            else:
                ps, pc = c.pop("ips"), c.pop("ipc")
                m.d.comb += [plus.eq(acc + ps + pc), minus.eq(acc - ps - pc)]
            c["alt"] = Mux(c["en"] & is_int, Mux(neg, minus, plus), acc)
            c["en"] = c["en"] & ~is_int
        else:
            c["alt"] = acc

    if ints:
        bits = ints[0].bits
        st.carry["int"] = is_int
        w, xs = weight.sig[:bits], x.sig[:bits]
        if st.active:
            # Pipelined: the magnitudes' product as two 16-bit halves over the first cut, added
            # in the next stage (beside the float multiplier's final add), so one 16-bit value
            # rides the other stages, not two 32-bit halves. (A whole 8x8 multiplier in either
            # stage is 24 levels, over the budget of 22.)
            ps, pc = carry_save_product(m, w, xs, "int_csa", width=2 * bits)
            st.carry["iprod"] = Cat(ps, pc)
            st.after_cut("iprod", lambda v: (v[: 2 * bits] + v[2 * bits :])[: 2 * bits])
        else:
            # In one stage: the product as two numbers whose sum it is, 32 bits wide so that
            # their sum modulo 2**32 is the product (in 16 bits it would be modulo 2**16).
            st.carry["ips"], st.carry["ipc"] = carry_save_product(m, w, xs, "int_csa", width=32)
        st.carry["ineg"] = weight.sign ^ x.sign
    result = mac_step(m, acc, unpack(weight), unpack(x), st, at_acc)
    return Mux(st.carry.pop("en"), result, st.carry.pop("alt"))
