"""The errors of the inference model, its configuration search and its serving simulation.

:class:`InferenceInputError` is an argument that is not allowed, raised where it enters (a
layout, a format, a fixed cost, a serving value, a scheduler's budget); a
:class:`tlm.errors.FieldError`, it carries ``field``, ``value`` and ``allowed`` so the front
door names its own flag. :class:`SloUnreachable` says no configuration or arrival rate meets
the SLO, naming the input to change.

Examples
--------
>>> error = InferenceInputError("tp", 6, "a divisor of the 32 heads")
>>> str(error), error.field
('tp must be a divisor of the 32 heads, not 6', 'tp')
>>> SloUnreachable("no rate meets the SLO", "slo").field
'slo'
"""

from __future__ import annotations

from ..errors import FieldError

__all__ = ["InferenceInputError", "SloUnreachable"]


class InferenceInputError(FieldError):
    """An argument of the inference model or the serving simulation that is not allowed
    (:class:`tlm.errors.FieldError`: ``field`` - a config field, or ``engine.chips`` for an
    engine's member -, ``value``, ``allowed``, and the whole ``message`` where the usual one
    does not say it); the message reads ``"tp must be <allowed>, not 6"``."""


class SloUnreachable(ValueError):
    """No configuration or arrival rate meets the SLO.

    Parameters
    ----------
    message : str
        What misses and by how much: the closest configuration, or the run at the lowest rate
        tried with its percentiles and attainment.
    field : str
        The input to change: the SLO the closest configuration misses by more
        (``slo_ttft_s`` or ``slo_tpot_s``), ``systems`` when no configuration fits, ``slo``
        when no arrival rate meets it.
    """

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field
