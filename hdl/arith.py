"""Two forms of the datapath's arithmetic, equal bit for bit: gates and words.

The carry chains, multipliers and leading-zero counts of the floating-point datapath
(:mod:`hdl.fp.prefix`, :mod:`hdl.fp.csa`, :func:`hdl.fp.round.leading_zeros`) are written
as the gate structures a timing-driven design uses: parallel-prefix trees, Wallace trees of
3:2 compressors, a multiplexer tree. That is what synthesis measures (``make synth``), what the
formal properties and ``make mutate`` work on. A simulator pays for it: Verilator evaluates
every gate of every PE every cycle, and the 128x128 every-format array's code outgrows the
caches.

The *words* form writes each primitive as the word operation it computes (``+``, ``-``,
``*``, a binary search for the leading zeros whose shifts also give the normalised value,
:func:`hdl.fp.round.normalise_left`, with no wide shift after it), and retimes the pipeline
(:meth:`hdl.stages.Stages.sync`): the logic between the points where the datapath reads a new
input is computed at once and its results delayed by as many registers as it had cuts, packed
into words of up to 64 bits. Every register advances on the same enable and no stage reads
an input of its own, so every port of the PE and the decoder carries the gates form's value on
every cycle; the registers inside hold other values (a carry-save pair, for one, is
``(sum, 0)``).

:func:`arithmetic` chooses the form while a design elaborates (``gates`` by default);
``tests/test_hdl_arith.py`` proves each primitive's two forms equal with Yosys's SAT solver
and runs a PE and a decoder of each form side by side on random inputs, comparing their
ports every cycle; the MAC column and the engine's lockstep bench run in both forms.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["FORMS", "arithmetic", "check_form", "words"]

#: The forms, the first the default.
FORMS = ("gates", "words")

_FORM: ContextVar[str] = ContextVar("hdl_arith_form", default=FORMS[0])


def check_form(form, name: str = "arith") -> str:
    """``form`` if it is one of :data:`FORMS`, else a one-line ``ValueError`` naming ``name``."""
    if form not in FORMS:
        raise ValueError(f"{name} must be one of {', '.join(FORMS)}, not {form!r}")
    return form


@contextmanager
def arithmetic(form: str):
    """Elaborate the primitives in ``form`` inside the ``with`` block."""
    token = _FORM.set(check_form(form))
    try:
        yield
    finally:
        _FORM.reset(token)


def words() -> bool:
    """Whether the primitives elaborate now in the words form."""
    return _FORM.get() == "words"
