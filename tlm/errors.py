"""The error of an argument that is not allowed, shared by the models below the studies.

:class:`FieldError` carries the argument's name (``field``), the ``value`` given and what is
``allowed``, so a front door names its own flag (``trnsim``'s studies map ``field`` to
``--field``) instead of parsing text; the message reads ``"tp must be an integer >= 1, not
0"``. The inference model, the serving simulation and the collectives' rank placement raise
their own subclasses of it.

>>> error = FieldError("tp", 0, "an integer >= 1")
>>> str(error), error.field
('tp must be an integer >= 1, not 0', 'tp')
"""

from __future__ import annotations

__all__ = ["FieldError"]


class FieldError(ValueError):
    """An argument that is not allowed.

    Parameters
    ----------
    field : str
        The argument's name (a config field, or ``engine.chips`` for an engine's member).
    value
        The value given.
    allowed : str
        What is allowed, as a phrase (``"an integer >= 1"``).
    message : str, optional
        The whole message, when ``"<field> must be <allowed>, not <value>"`` does not say it.
    shown : str, optional
        How the message shows the value (default its ``repr``).
    """

    def __init__(self, field: str, value, allowed: str, message: str | None = None, *, shown=None):
        self.field, self.value, self.allowed = field, value, allowed
        self.message, self.shown = message, shown
        super().__init__(message or f"{field} must be {allowed}, not {shown or repr(value)}")

    def __reduce__(self):  # pickles (a Dask worker's error) with its fields
        fields = (self.field, self.value, self.allowed, self.message, self.shown)
        return _rebuild, (type(self), *fields)


def _rebuild(cls, field, value, allowed, message, shown):
    return cls(field, value, allowed, message, shown=shown)
