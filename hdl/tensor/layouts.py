"""Payload layouts of the tensor engine's ports and internal lanes."""

from __future__ import annotations

from amaranth.lib import data

from tlm.tensor.config import EngineConfig, ErrorKind

from ..formats import acc_shape, lane_shape, operand_shape

__all__ = [
    "moving_lane",
    "load_lane",
    "weight_write",
    "load_beat",
    "moving_beat",
    "result_beat",
    "status_layout",
]


def _codes(cfg: EngineConfig, *names: str) -> dict:
    """Format-code fields, present only when the engine has more than one format."""
    return {name: cfg.fmt_bits for name in names} if cfg.fmt_bits else {}


def moving_lane(cfg: EngineConfig) -> data.StructLayout:
    """One moving element travelling right along a PE row (decoded, see
    :func:`hdl.formats.lane_shape`), with the row's enable (beat is real and the row is below
    the active K), the weight bank it uses and, on an engine with both integer and
    floating-point formats, whether the op is an integer one (``int``)."""
    mixed = {"int": 1} if cfg.has_int and cfg.has_float else {}
    return data.StructLayout({"data": lane_shape(cfg), "en": 1, "bank": 1, **mixed})


def weight_write(cfg: EngineConfig) -> data.StructLayout:
    """A write of one stationary weight (decoded) into one bank of one PE."""
    return data.StructLayout({"data": lane_shape(cfg), "we": 1, "bank": 1})


def load_lane(cfg: EngineConfig) -> data.StructLayout:
    """A stationary weight (decoded) on its way to one column, with the row it belongs to."""
    return data.StructLayout({"data": lane_shape(cfg), "row": range(cfg.rows), "we": 1, "bank": 1})


def load_beat(cfg: EngineConfig) -> data.StructLayout:
    """LoadStationary beat: one row of ``stationary[K, M]`` (``cols`` lanes, lanes >= M zero),
    the declared K (read on the first beat), ``last`` on row K-1 and, on a multi-format
    engine, the format code ``fmt`` (read on the first beat)."""
    return data.StructLayout(
        {
            "data": data.ArrayLayout(operand_shape(cfg), cfg.cols),
            "k": cfg.k_bits,
            "last": 1,
            **_codes(cfg, "fmt"),
        }
    )


def moving_beat(cfg: EngineConfig) -> data.StructLayout:
    """MultiplyMoving beat: one column of ``moving[K, N]`` (``rows`` lanes); ``load`` on the
    first beat switches to the stationary loaded last, else the current one is reused;
    ``last`` on column N-1; on a multi-format engine the moving format code ``fmt`` (read on
    the first beat)."""
    return data.StructLayout(
        {
            "data": data.ArrayLayout(operand_shape(cfg), cfg.rows),
            "load": 1,
            "last": 1,
            **_codes(cfg, "fmt"),
        }
    )


def result_beat(cfg: EngineConfig) -> data.StructLayout:
    """Result beat: column n of ``stationary.T @ moving`` (``cols`` lanes), ``last`` on N-1."""
    return data.StructLayout({"data": data.ArrayLayout(acc_shape(cfg), cfg.cols), "last": 1})


def status_layout(cfg: EngineConfig) -> data.StructLayout:
    """Sticky error flags (bit = :class:`ErrorKind`) and a saturating counter per kind."""
    n = len(ErrorKind)
    return data.StructLayout({"flags": n, "counts": data.ArrayLayout(cfg.status_bits, n)})
