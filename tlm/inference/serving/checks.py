"""The serving simulation's argument checks: the number checks and the registries of named
choices (a router, a prefill policy, ...), which check a name.

Every check raises :class:`~tlm.inference.errors.InferenceInputError`, which carries the
field, the bad value and what is allowed, its message in the house form ``"<field> must be
<allowed>, not <value>"``.

Examples
--------
>>> check_int("max_batch", 0, 1)
Traceback (most recent call last):
...
tlm.inference.errors.InferenceInputError: max_batch must be an integer >= 1, not 0
>>> colours = Registry("colour")
>>> @colours.register("red")
... class Red:
...     pass
>>> colours.named("red").name, colours.names
('red', ('red',))
>>> colours.named("blue")
Traceback (most recent call last):
...
tlm.inference.errors.InferenceInputError: colour must be one of red, not 'blue'
"""

from __future__ import annotations

import math
import numbers

from ..errors import InferenceInputError

__all__ = ["Registry", "check_int", "check_positive"]


def check_int(name: str, value, minimum: int) -> int:
    """``value`` as an int if it is an integer (not a bool) ``>= minimum``; else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InferenceInputError(name, value, f"an integer >= {minimum}")
    return int(value)


def check_positive(name: str, value, allow_zero: bool = False) -> float:
    """``value`` as a float if it is a finite real ``> 0`` (``>= 0`` with ``allow_zero``)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (value == 0 and not allow_zero):
        raise InferenceInputError(name, value, f"a finite number {'>= 0' if allow_zero else '> 0'}")
    return float(value)


class Registry(dict):
    """Classes of one role by name (``@registry.register("name")`` sets the class's ``name``);
    :meth:`named` checks a name, the error naming ``field`` and the names registered."""

    def __init__(self, field: str):
        super().__init__()
        self.field = field

    def register(self, name: str):
        def add(cls):
            cls.name = name
            self[name] = cls
            return cls

        return add

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self)

    def named(self, name):
        """The class registered as ``name``; raise naming the field if there is none."""
        if not isinstance(name, str) or name not in self:
            raise InferenceInputError(self.field, name, f"one of {', '.join(self)}")
        return self[name]
