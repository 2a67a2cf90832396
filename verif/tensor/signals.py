"""Packing of the engine's port payloads for cocotb, from the one layout definition in hdl."""

from __future__ import annotations

import numpy as np
from amaranth.lib import data

from hdl.formats import acc_shape, operand_shape
from hdl.tensor.layouts import load_beat, moving_beat, result_beat, status_layout
from tlm.tensor.config import EngineConfig
from tlm.tensor.timing import LoadBeat, MovingBeat

__all__ = ["Codec", "config_from_env", "raw_lanes"]


def config_from_env(environ, *, rows: int = 4, cols: int = 4) -> EngineConfig:
    """The engine a cocotb bench runs on, from its ``TE_*`` environment: ``TE_ROWS``,
    ``TE_COLS`` (``rows``, ``cols`` when unset), ``TE_FORMAT`` (int8), ``TE_STATUS_BITS``,
    ``TE_PE_STAGES`` and ``TE_DECODE_STAGES`` (unset or empty: the defaults of
    :class:`~tlm.tensor.config.EngineConfig`)."""

    def number(name):
        text = environ.get(name) or ""
        return int(text) if text else None

    optional = {
        "status_bits": number("TE_STATUS_BITS"),
        "pe_stages": number("TE_PE_STAGES"),
        "decode_stages": number("TE_DECODE_STAGES"),
    }
    return EngineConfig(
        number("TE_ROWS") or rows,
        number("TE_COLS") or cols,
        environ.get("TE_FORMAT") or "int8",
        **{k: v for k, v in optional.items() if v is not None},
    )


def raw_lanes(cfg: EngineConfig, code: int, values) -> np.ndarray:
    """Operand values as the port carries them (int64): on an integer-only engine the
    integers themselves; otherwise raw bits in the port's unsigned container - a
    floating-point format's bits, an integer's two's complement in its low bits. A code that
    names no format sends ``values`` as raw bits unchanged (misuse stimulus)."""
    fmt = cfg.format_of(code)
    values = np.asarray(values)
    if fmt is None:
        return values.astype(np.int64)
    if fmt.kind == "int":
        if operand_shape(cfg).signed:
            return values.astype(np.int64)
        return values.astype(np.int64) & ((1 << fmt.bits) - 1)
    raw = np.asarray(values, fmt.dtype).view(f"u{fmt.storage_bits // 8}")
    return raw.astype(np.int64)


def _dtype(shape):
    width, signed = shape.width, shape.signed
    if width not in (8, 16, 32, 64):
        raise ValueError(f"lanes of {width} bits are not byte-aligned; the codec needs 8..64")
    return np.dtype(f"<{'i' if signed else 'u'}{width // 8}")


class Codec:
    """Turns beats into port integers and port integers into arrays, by the hdl layouts."""

    def __init__(self, cfg: EngineConfig):
        self.cfg = cfg
        self._ld = load_beat(cfg)
        self._mv = moving_beat(cfg)
        self._res = result_beat(cfg)
        self._status = status_layout(cfg)
        self._op_dtype = _dtype(operand_shape(cfg))
        self._acc_dtype = _dtype(acc_shape(cfg))
        self._res_bytes = cfg.cols * self._acc_dtype.itemsize

    def lanes(self, values, code: int = 0) -> np.ndarray:
        """Operand lanes as the port carries them, in the port's lane dtype."""
        return raw_lanes(self.cfg, code, values).astype(self._op_dtype)

    def _vector(self, values, code: int) -> int:
        return int.from_bytes(self.lanes(values, code).tobytes(), "little")

    def _code(self, layout, beat) -> int:
        if "fmt" not in layout.members:
            return 0
        if not 0 <= beat.fmt < 1 << layout["fmt"].width:
            raise ValueError(
                f"{type(beat).__name__} fmt={beat.fmt} does not fit the "
                f"{layout['fmt'].width}-bit field"
            )
        return beat.fmt << layout["fmt"].offset

    def load(self, beat: LoadBeat) -> int:
        if not 0 <= beat.k < 1 << self._ld["k"].width:
            raise ValueError(
                f"LoadBeat k={beat.k} does not fit the {self._ld['k'].width}-bit field"
            )
        return (
            self._vector(beat.data, beat.fmt) << self._ld["data"].offset
            | beat.k << self._ld["k"].offset
            | int(beat.last) << self._ld["last"].offset
            | self._code(self._ld, beat)
        )

    def moving(self, beat: MovingBeat) -> int:
        return (
            self._vector(beat.data, beat.fmt) << self._mv["data"].offset
            | int(beat.load) << self._mv["load"].offset
            | int(beat.last) << self._mv["last"].offset
            | self._code(self._mv, beat)
        )

    def result(self, value: int) -> tuple[np.ndarray, bool]:
        raw = (value >> self._res["data"].offset).to_bytes(self._res_bytes + 1, "little")
        vector = np.frombuffer(raw[: self._res_bytes], self._acc_dtype).astype(np.int64)
        return vector, bool(value >> self._res["last"].offset & 1)

    def status(self, value: int) -> tuple[int, tuple[int, ...]]:
        flags_field, counts_field = self._status["flags"], self._status["counts"]
        flags = value >> flags_field.offset & ((1 << flags_field.width) - 1)
        counts_layout: data.ArrayLayout = counts_field.shape
        width = (
            counts_layout.elem_shape.width
            if hasattr(counts_layout.elem_shape, "width")
            else int(counts_layout.elem_shape)
        )
        counts = tuple(
            value >> (counts_field.offset + i * width) & ((1 << width) - 1)
            for i in range(counts_layout.length)
        )
        return flags, counts
