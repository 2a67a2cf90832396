"""Amaranth shapes and arithmetic for the number formats defined in :mod:`tlm.formats`.

An engine is elaborated with a set of formats (``EngineConfig.formats``); every function here
takes the engine's configuration and works for one format or several.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed, unsigned

from tlm.tensor.config import EngineConfig

__all__ = ["operand_shape", "acc_shape", "mac"]


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


def _float_codes(m: Module, cfg: EngineConfig, code, name: str):
    """Map an engine format code to the index of its format among the engine's floating-point
    formats (integer codes map to 0; the float result is not used for them)."""
    floats = [f for f in cfg.formats if f.kind == "float"]
    index = Signal(range(max(2, len(floats))), name=name)
    with m.Switch(code):
        for c, f in enumerate(cfg.formats):
            if f.kind == "float" and floats.index(f):
                with m.Case(c):
                    m.d.comb += index.eq(floats.index(f))
    return index


def mac(m: Module, cfg: EngineConfig, acc, weight, x, enable, w_code=None, x_code=None):
    """``acc + weight * x`` when ``enable``, else ``acc``: one PE step, added to ``m``.

    Integers wrap like the TLM's accumulator; floating point follows the numerics contract
    (``docs/numerics.md``) through :class:`hdl.fp.FloatMac`. With several formats,
    ``w_code`` and ``x_code`` (engine format codes) choose them per step; the engine never
    offers a pair that does not mix.
    """
    ints = [f for f in cfg.formats if f.kind == "int"]
    floats = [f for f in cfg.formats if f.kind == "float"]
    if len(ints) > 1:
        raise ValueError(
            f"an engine takes at most one integer format, not {', '.join(f.name for f in ints)}"
        )
    int_sum = None
    if ints:
        fmt = ints[0]
        w_int, x_int = weight[: fmt.bits].as_signed(), x[: fmt.bits].as_signed()
        int_sum = (acc.as_signed() + w_int * x_int)[: fmt.acc_bits]
        if not floats:
            return Mux(enable, int_sum.as_signed(), acc)
    from .fp import FloatMac

    m.submodules.mac = unit = FloatMac(floats, floats)
    m.d.comb += [unit.w.eq(weight), unit.x.eq(x), unit.en.eq(enable), unit.acc_in.eq(acc)]
    if len(floats) > 1:
        m.d.comb += [
            unit.w_code.eq(_float_codes(m, cfg, w_code, "w_float")),
            unit.x_code.eq(_float_codes(m, cfg, x_code, "x_float")),
        ]
    if int_sum is None:
        return unit.acc_out
    is_int = w_code == cfg.code(ints[0])
    return Mux(enable & is_int, int_sum, unit.acc_out)
