"""The study protocol: every ``trnsim`` study is an inputs type, a function and a results type.

A study's **inputs** are a :class:`Inputs` model (pydantic, strict, frozen): one field per input,
units in the field names (``clock_hz``, ``cycles``), each with a description. Defaults that
depend on a chip preset are ``None`` in the class and filled in by :meth:`Inputs.resolve`, which
also checks what involves several fields or the preset. The **function** takes resolved inputs
and returns the study's :class:`Results` (units in the field names too); a study that sweeps
also returns one row per point in ``series``. Models never print.

Every run can be written as one JSON contract (:class:`Report`)::

    {"study": "noc", "version": "0.1.0",
     "inputs": {every input, defaults resolved},
     "results": {...}, "series": [...]}

whose ``inputs``, given back (``trnsim noc --config run.json``, or as keyword arguments to
:func:`run_study`), reproduce the run figure for figure.

Bad input anywhere raises :class:`InputError`, naming the input, the value and what is allowed;
the command line prints it with the input's flag (``--cores``) and exits with status 2.

Examples
--------
>>> from tlm.studies import run_study
>>> report = run_study("tensor", n=[128, 512])
>>> [row["cycles"] for row in report.to_dict()["series"]]
[128, 512]
>>> report.inputs.clock_hz == report.inputs.spec.tensor.freq_hz    # from the trn2 preset
True
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import math
import os
import re
import types
import typing
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .. import __version__
from ..limits import MAX_BYTES, MAX_CHIPS, MAX_COUNT, MAX_GEMM_SIZE, MAX_REQUEST_TOKENS
from .catalogue import CATALOGUE

__all__ = [
    "InputError",
    "Inputs",
    "Results",
    "Study",
    "Report",
    "STUDIES",
    "register",
    "run_study",
    "execute",
    "validate_inputs",
    "rename_deprecated",
    "from_text",
    "is_list",
    "allowed_text",
    "model_error",
    "flag",
    "writable_path",
    "PLOT_SUFFIXES",
    "PLOT_ALLOWED",
    "MAX_CHIPS",
    "MAX_BYTES",
    "MAX_COUNT",
    "MAX_GEMM_SIZE",
    "MAX_REQUEST_TOKENS",
    "plot_path",
    "figure",
    "without_none",
    "progress",
    "progress_to",
]


def show(value) -> str:
    """A value as a user would type it: strings quoted, numbers plain, a list comma-separated
    (quoted as one text when it holds a name: ``'0-1,5-9'``, ``'1,pp'``; ``[]`` when empty)."""
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        text = ",".join(str(v) for v in value)
        return repr(text) if any(isinstance(v, str) for v in value) else text
    return str(value)


class InputError(ValueError):
    """A study input that is not allowed.

    Parameters
    ----------
    field : str
        The input's name (its field in the inputs type; the flag is ``--`` + the name with
        dashes), or a protocol option such as ``"config"`` or ``"out"``.
    value
        The value given.
    allowed : str
        What is allowed, in words.
    problem : str, optional
        What is wrong with it, when "is not allowed" is not enough.

    Examples
    --------
    >>> str(InputError("cores", 0, "an integer in 1..8 (the cores of trn2)"))
    'cores: 0 is not allowed; allowed: an integer in 1..8 (the cores of trn2)'
    >>> InputError("cores", 0, "an integer in 1..8").message("--cores")
    '--cores: 0 is not allowed; allowed: an integer in 1..8'
    """

    def __init__(self, field: str, value, allowed: str, problem: str | None = None):
        self.field, self.value, self.allowed = field, value, allowed
        self.problem = problem or "is not allowed"
        super().__init__(self.message(field))

    def message(self, name: str) -> str:
        """The message with the input called ``name`` (a field name or a flag)."""
        return f"{name}: {show(self.value)} {self.problem}; allowed: {self.allowed}"


# "cores must be an integer in 1..8, not 0": the house style of the models' own messages
_MUST = re.compile(r"^(?P<name>[A-Za-z_][\w.]*) must (?:be )?(?P<allowed>.+), not (?P<value>.+)$")
# "pp x interleave must be at most the 61 layers of deepseek-v3, not 64": a product of inputs
_MUST_PRODUCT = re.compile(
    r"^(?P<names>\w+(?: x \w+)+) must (?P<verb>\w+) (?P<rest>.+), not (?P<value>[^,]+)$"
)


def flag(field: str) -> str:
    """The command-line flag of an input (``clock_hz`` -> ``--clock-hz``)."""
    return "--" + field.replace("_", "-")


def model_error(error: ValueError, fields, values: dict | None = None) -> ValueError:
    """Turn a model's ``"<name> must be <allowed>, not <value>"`` error into an
    :class:`InputError` on the input of that name (one of ``fields``); other errors pass
    through unchanged. ``values`` gives the inputs' values (the value shown is the user's).
    An error that carries its ``field``, ``value`` and ``allowed`` (the inference model's) is
    taken as it is, not parsed."""
    if all(hasattr(error, a) for a in ("field", "value", "allowed")):
        if error.field not in fields:
            return error
        return InputError(error.field, (values or {}).get(error.field, error.value), error.allowed)
    match = _MUST.match(str(error))
    if match and match["name"] in fields:
        name = match["name"]
        value = (values or {}).get(name, match["value"])
        return InputError(name, value, match["allowed"])
    match = _MUST_PRODUCT.match(str(error))
    named = [n for n in (match["names"].split(" x ") if match else ()) if n in fields]
    if named:  # "pp x interleave must be at most 61, not 64": on the last input named
        name, verb, rest = named[-1], match["verb"], match["rest"]
        does = "is" if verb == "be" else verb + "s"
        value = (values or {}).get(name, match["value"])
        allowed = f"such that {match['names']} {does} {rest} (here {match['value']})"
        return InputError(name, value, allowed)
    return error


def without_none(annotation):
    """The annotation without ``X | None`` (inputs resolved from a preset default to None)."""
    if is_union(annotation):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def is_union(annotation) -> bool:
    """``annotation`` is ``X | Y`` (or ``typing.Union``)."""
    return isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union


def bare(annotation):
    """The type of an ``Annotated[T, ...]`` (an item with its own limits): ``T``."""
    if typing.get_origin(annotation) is typing.Annotated:
        return typing.get_args(annotation)[0]
    return annotation


def _bounds(field) -> str:
    low = high = None
    for meta in field.metadata:
        for name, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            value = getattr(meta, name, None)
            if value is not None:
                if op[0] == ">":
                    low = (op, value)
                else:
                    high = (op, value)
    if low and high and low[0] == ">=" and high[0] == "<=":
        return f" in {low[1]}..{high[1]}"
    parts = [f"{bound[0]} {show(bound[1])}" for bound in (low, high) if bound]
    return (" " + " and ".join(parts)) if parts else ""


def allowed_text(field) -> str:
    """What a field accepts, in words, from its type and constraints (pydantic ``FieldInfo``).

    Examples
    --------
    >>> from tlm.studies.preset import PresetInputs
    >>> allowed_text(PresetInputs.model_fields["preset"])
    'one of trn1, trn2, trn3, or a preset file path ending in .toml'
    """
    extra = field.json_schema_extra or {}
    if "allowed" in extra:
        return extra["allowed"]
    ann = without_none(field.annotation)
    origin = typing.get_origin(ann)
    if origin is typing.Literal:
        return "one of " + ", ".join(str(a) for a in typing.get_args(ann))
    if origin is list:
        item = bare(typing.get_args(ann)[0])
        if typing.get_origin(item) is typing.Literal:
            return "a comma-separated list of " + ", ".join(map(str, typing.get_args(item)))
        noun = {int: "integers", float: "numbers", str: "names"}.get(item, "values")
        return f"a comma-separated list of {noun}{_bounds(field)}"
    noun = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
    return noun.get(ann, getattr(ann, "__name__", str(ann))) + _bounds(field)


def from_text(name: str, text: str, field):
    """The value of input ``name`` (pydantic ``FieldInfo`` ``field``) from its text, as typed on
    the command line; :func:`validate_inputs` checks it next.

    A list is comma-separated; a word a ``Literal`` of a union names is itself (``all`` of
    ``--tp all``, ``pp`` of ``--micro-batches 1,pp``), else the text is read as the union's
    other type. A text that is no number where one is needed raises :class:`InputError`
    naming the item.

    Examples
    --------
    >>> class Axes(Inputs):
    ...     tp: typing.Literal["all"] | list[int] = "all"
    >>> tp = Axes.model_fields["tp"]
    >>> from_text("tp", "8, 16", tp), from_text("tp", "all", tp)
    ([8, 16], 'all')
    """
    return _from_text(name, text, field.annotation, _list_allowed(field))


def _from_text(name: str, text: str, annotation, allowed: str | None):
    kind = bare(without_none(annotation))
    if is_union(kind):
        arms = [bare(a) for a in typing.get_args(kind) if a is not type(None)]
        for arm in arms:
            if typing.get_origin(arm) is typing.Literal and text.strip() in typing.get_args(arm):
                return text.strip()
        other = [a for a in arms if typing.get_origin(a) is not typing.Literal]
        if not other:
            return text
        if len(other) == 1:
            return _from_text(name, text, other[0], allowed)
        raise TypeError(f"{name}: a union of {other} cannot be read from a text")
    if typing.get_origin(kind) is list:
        (item,) = typing.get_args(kind)
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if not parts:
            raise InputError(name, text, allowed or "a comma-separated list", "is empty")
        return [_from_text(name, p, item, allowed) for p in parts]
    try:
        if kind is int:
            count = re.fullmatch(r"\s*(\d+)\s*([kKmM])\s*", text)
            if count:  # every whole number may be written in thousands or millions: 16k, 1M
                return int(count[1]) * COUNT_UNITS[count[2].lower()]
            return int(text)
        if kind is float:
            return float(text)
    except ValueError:
        noun = allowed or ("an integer" if kind is int else "a number")
        raise InputError(name, text, noun, None if allowed else "is not a number") from None
    return text


def is_list(field) -> bool:
    """An input that is a list (or may be one: ``Literal["all"] | list[int]``)."""
    kind = without_none(field.annotation)
    arms = typing.get_args(kind) if is_union(kind) else (kind,)
    return any(typing.get_origin(bare(a)) is list for a in arms)


def _list_allowed(field) -> str | None:
    """What an input allows, for the error of an item its type cannot name alone (an item of
    a union: ``all`` or a list, an integer or ``pp``); None: the item's type says it."""
    kind = without_none(field.annotation)
    if is_union(kind) or (
        typing.get_origin(kind) is list and is_union(bare(typing.get_args(kind)[0]))
    ):
        return allowed_text(field)
    return None


def loaded(
    field: str, value: str, load, error: type[Exception], allowed: str, noun: str | None = None
):
    """``load(value)`` for the input ``field``: a data file named by an input (a model, a
    hardware file), its loader's ``error`` turned into an :class:`InputError` naming the input
    (an unknown name: what is allowed; a file that does not validate: why). ``noun`` is what
    the loader calls its argument when that is not ``field``."""
    try:
        return load(value)
    except error as problem:
        text = str(problem)
        if text.startswith(f"{noun or field} must be"):
            raise InputError(field, value, allowed) from None
        raise InputError(field, value, allowed, f"fails: {text}") from None


def writable_path(field: str, path: str | None) -> str | None:
    """Check that a file can be written at ``path`` (its folder exists and is writable, and
    it is not a folder): an output path fails here, before a long run, not after it."""
    if path is None:
        return None
    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise InputError(field, path, "a file path (this is a folder)", "cannot be written")
    if not folder.is_dir():
        raise InputError(field, path, "a file in an existing folder", "cannot be written")
    if not os.access(folder, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise InputError(field, path, "a path this user may write", "cannot be written")
    return path


#: The figure formats a study's ``--plot`` writes (matplotlib picks the format by suffix).
PLOT_SUFFIXES = (".png", ".svg", ".pdf")
#: What a ``--plot`` input allows, in words.
PLOT_ALLOWED = "a file path ending in " + ", ".join(PLOT_SUFFIXES)


def plot_path(field: str, path: str | None) -> str | None:
    """Check a figure's output path: writable (:func:`writable_path`) and one of
    :data:`PLOT_SUFFIXES`."""
    writable_path(field, path)
    if path is not None and Path(path).suffix.lower() not in PLOT_SUFFIXES:
        raise InputError(field, path, "a file ending in " + ", ".join(PLOT_SUFFIXES))
    return path


@contextlib.contextmanager
def figure(path, *, save: dict | None = None, **subplots):
    """A matplotlib figure for a study's ``--plot``: yields ``(figure, axes)`` of
    ``pyplot.subplots(**subplots)`` on the Agg backend (no display needed), then lays it out,
    writes it to ``path`` (the format by suffix; ``save`` = ``savefig``'s keywords) and closes
    it - closed also when drawing fails."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(**subplots)
    try:
        yield fig, axes
        fig.tight_layout()
        fig.savefig(Path(path), **(save or {}))
    finally:
        plt.close(fig)


class Inputs(BaseModel):
    """Base of every study's inputs: strict types (no ``True`` for a number), no unknown
    names, frozen. Subclasses declare fields with a ``description`` each and units in their
    names, and override :meth:`resolve` to fill preset defaults and check combinations.

    ``deprecated`` maps an input's old name to its name now (``{"dtype": "format"}``): the old
    name is still taken, for one release, as a flag, a config file's key or a keyword of
    :func:`run_study`, each time with a warning (:func:`rename_deprecated`).
    ``deprecated_values`` likewise maps an input to its values' old spellings and their
    spellings now (``{"format": {"fp8": "fp8_e4m3"}}``), an item of a list included.

    A subclass's validator is built when it is first used (``defer_build``): a command builds
    the inputs of the study it runs, not those of every study it imports."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True, defer_build=True)
    deprecated: ClassVar[dict[str, str]] = {}
    deprecated_values: ClassVar[dict[str, dict[str, str]]] = {}

    def resolve(self) -> Inputs:
        """These inputs with every default filled in and every combination checked (raise
        :class:`InputError`). The base has nothing to resolve."""
        return self


class SweepInputs(Inputs):
    """What every search on Dask takes (``train-search``, ``infer-search``): where its chunks
    run, how many local workers, and where chunks are kept for a rerun to resume."""

    scheduler: str = Field(
        "local",
        description="where chunks run: local (a local Dask cluster), inline (this process), "
        "or a Dask scheduler's address",
        json_schema_extra={"allowed": "local, inline, or an address such as tcp://host:8786"},
    )
    workers: int = Field(
        0, ge=0, le=256, description="worker processes of the local cluster (0: one per core)"
    )
    out_dir: str | None = Field(
        None,
        description="the client keeps each chunk's results here, checksummed (workers never "
        "touch it); a rerun resumes from the chunks whose checksum holds",
        json_schema_extra={"unset": "kept in memory only"},
    )

    @field_validator("out_dir")
    @classmethod
    def _out_dir(cls, value: str | None) -> str | None:
        """An absolute path to a folder this user may write, or may make in one."""
        if value is None:
            return None
        if not value.strip():
            raise InputError("out_dir", value, "a folder path", "is empty")
        path = Path(value).expanduser().absolute()
        if path.exists() and not path.is_dir():
            raise InputError("out_dir", value, "a folder (this is a file)", "cannot be written")
        folder = path if path.exists() else path.parent
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            allowed = "a folder this user may write, or one to make in an existing folder"
            raise InputError("out_dir", value, allowed, "cannot be written")
        return str(path)

    def check_scheduler(self) -> None:
        """``scheduler`` is local, inline or an address (else the input's error)."""
        from ..sweep import check_scheduler

        try:
            check_scheduler(self.scheduler)
        except ValueError:
            raise InputError(
                "scheduler", self.scheduler, "local, inline, or an address such as tcp://host:8786"
            ) from None


#: What a list of chip counts allows (``--chips`` of ``train-search`` and ``system``), read by
#: :func:`tlm.studies.collective.parse_sizes` with :data:`COUNT_UNITS`.
CHIP_COUNTS_ALLOWED = (
    "chip counts: FROM..TO[:FACTOR] (each FACTOR times the last, 2 unless given) or a "
    "comma-separated list, e.g. 1024..1048576:4 or 4096,16384; k and M for thousands and "
    "millions (decimal)"
)
COUNT_UNITS = {"": 1, "k": 1000, "m": 1_000_000}


def format_field(
    default: str | None,
    names=None,
    description: str = "operand format",
    unset: str | None = None,
):
    """A ``format`` input (or ``kv_format``, ...): a name from :data:`tlm.formats.FORMATS`
    (the one list), or from the subset ``names`` a study supports; ``unset`` says what a
    default of None stands for."""
    if names is None:
        from ..formats import FORMATS

        names = tuple(FORMATS)
    extra = {"allowed": "one of " + ", ".join(sorted(names)), "choices": tuple(names)}
    if unset is not None:
        extra["unset"] = unset
    return Field(default, description=description, json_schema_extra=extra)


def seed_field():
    """A ``seed`` input: the seed of the study's random draws."""
    return Field(0, ge=0, le=2**32 - 1, description="seed of the random draws")


class Results(BaseModel):
    """Base of every study's results: figures with units in their names; ``series`` holds one
    row per point of a sweep (empty when the study does not sweep); built when first used, as
    :class:`Inputs`."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    series: list[BaseModel] = Field(default=[], exclude=True)


@dataclass(frozen=True)
class Study:
    """One ``trnsim`` study.

    Attributes
    ----------
    name : str
        The subcommand (``trnsim NAME``); its one-line title is the catalogue's
        (:data:`tlm.studies.catalogue.CATALOGUE`).
    inputs : type[Inputs]
    run : callable
        ``run(resolved_inputs) -> Results``.
    tables : callable, optional
        ``tables(inputs, results) -> [(title, columns, rows)]``: extra tables for people
        beside the default ones (results and series), rendered by the command line.
    """

    name: str
    inputs: type[Inputs]
    run: Callable
    tables: Callable | None = None

    @property
    def title(self) -> str:
        """One line: what the study answers."""
        return CATALOGUE[self.name].title

    def check_choice(self, field: str, value):
        """Reject a value outside a field's ``choices`` (declared by :func:`format_field`)."""
        extra = self.inputs.model_fields[field].json_schema_extra or {}
        if "choices" in extra and value is not None and value not in extra["choices"]:
            raise InputError(field, value, allowed_text(self.inputs.model_fields[field]))


_PROGRESS: contextvars.ContextVar = contextvars.ContextVar("progress", default=None)


def progress(done: int, total: int, what: str = "") -> None:
    """A study's report of how far it is (``done`` of ``total`` points); nothing happens unless
    the caller listens (:func:`progress_to`): studies never print."""
    listener = _PROGRESS.get()
    if listener is not None:
        listener(done, total, what)


@contextlib.contextmanager
def progress_to(listener: Callable[[int, int, str], None]):
    """Send the :func:`progress` reports of the studies run inside to ``listener``."""
    token = _PROGRESS.set(listener)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


_REGISTERED: dict[str, Study] = {}


class _Studies(Mapping):
    """Every study of the catalogue by name, in its order; a study's module is imported the
    first time the study is asked for, so a command loads only the study it runs."""

    def __getitem__(self, name: str) -> Study:
        if name not in CATALOGUE:
            raise KeyError(name)
        if name not in _REGISTERED:
            importlib.import_module(CATALOGUE[name].module)
            if name not in _REGISTERED:
                raise LookupError(f"{CATALOGUE[name].module} does not register study {name!r}")
        return _REGISTERED[name]

    def __contains__(self, name) -> bool:
        return name in CATALOGUE

    def __iter__(self):
        return iter(CATALOGUE)

    def __len__(self) -> int:
        return len(CATALOGUE)


#: Every study, by name, in the order ``trnsim --help`` lists them (imported when asked for).
STUDIES: Mapping[str, Study] = _Studies()


def register(study: Study) -> Study:
    """Add a study to :data:`STUDIES`: each study module registers itself, once, under a name
    of the catalogue."""
    if study.name not in CATALOGUE:
        raise ValueError(f"study {study.name!r} is not in tlm.studies.catalogue.CATALOGUE")
    if study.name in _REGISTERED:
        raise ValueError(f"study {study.name!r} is registered twice")
    _REGISTERED[study.name] = study
    return study


def _check_finite(name: str, value, field) -> None:
    """Reject an infinite or NaN number (or list item): no input means it, and the models would
    turn it into infinite or NaN results, or a division by zero."""
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, float) and not math.isfinite(item):
            text = allowed_text(field)
            if text.startswith("a comma-separated list"):
                text += ", each finite"
            elif text.startswith("a "):
                text = "a finite " + text.removeprefix("a ")
            raise InputError(name, item, text)


def validate_inputs(study: Study, values: dict) -> Inputs:
    """Build a study's inputs from ``values`` (field name -> value), resolve them, and turn
    every problem into an :class:`InputError` naming the input. A list may be given as its
    comma-separated text, as on the command line (``""``: an empty list)."""
    fields = study.inputs.model_fields
    for name in values:
        if name not in fields:
            raise InputError(
                name, values[name], "inputs " + ", ".join(fields), "is not an input of this study"
            )
    values = {
        name: from_text(name, v, fields[name])
        if isinstance(v, str) and is_list(fields[name])
        else v
        for name, v in values.items()
    }
    try:
        inputs = study.inputs.model_validate(values)
    except ValidationError as error:
        first = error.errors()[0]
        name = str(first["loc"][0])
        cause = (first.get("ctx") or {}).get("error")
        if isinstance(cause, InputError):
            raise cause from None
        value = values.get(name, first.get("input"))
        # an item of a list that is not allowed: name the item, not the whole list
        for e in error.errors():
            if str(e["loc"][0]) == name and any(isinstance(p, int) for p in e["loc"][1:]):
                value = e["input"]
                break
        if isinstance(value, list | tuple) and not is_list(fields[name]):
            value = f"[{show(list(value))}]"  # a list from a file where one value belongs
        raise InputError(name, value, allowed_text(fields[name])) from None
    for name in fields:
        study.check_choice(name, getattr(inputs, name))
        _check_finite(name, getattr(inputs, name), fields[name])
    try:
        return inputs.resolve()
    except InputError:
        raise
    except ValueError as error:
        raise model_error(error, fields, values) from None


@dataclass(frozen=True)
class Report:
    """A study's run: what went in (resolved) and what came out. :meth:`to_dict` is the JSON
    contract."""

    study: str
    inputs: Inputs
    results: Results

    def to_dict(self) -> dict:
        return {
            "study": self.study,
            "version": __version__,
            "inputs": self.inputs.model_dump(mode="json"),
            "results": self.results.model_dump(mode="json"),
            "series": [row.model_dump(mode="json") for row in self.results.series],
        }


def rename_deprecated(
    inputs: type[Inputs], values: dict, where: str = ""
) -> tuple[dict, list[tuple[str, str]]]:
    """``values`` with each deprecated name (:attr:`Inputs.deprecated`) replaced by the
    input's name now, and each deprecated value (:attr:`Inputs.deprecated_values`) by its
    spelling now; and the ``(old, new)`` pairs replaced (a value as ``"name value"``), for
    the caller to warn of.

    Raises
    ------
    InputError
        On the old name when the new one is given too (``where``: in what, e.g. a file).

    Examples
    --------
    >>> class Old(Inputs):
    ...     deprecated = {"dtype": "format"}
    ...     deprecated_values = {"format": {"fp8": "fp8_e4m3"}}
    ...     format: str = "bf16"
    >>> rename_deprecated(Old, {"dtype": "fp8", "seed": 1})
    ({'format': 'fp8_e4m3', 'seed': 1}, [('dtype', 'format'), ('format fp8', 'format fp8_e4m3')])
    """
    renamed = [(old, new) for old, new in inputs.deprecated.items() if old in values]
    for old, new in renamed:
        if new in values:
            raise InputError(
                old,
                values[old],
                f"{new} alone ({old} is its deprecated name)",
                f"is given beside {new}{where}",
            )
    new_name = dict(renamed)
    values = {new_name.get(k, k): v for k, v in values.items()}
    for _, new in renamed:  # an old single input left blank meant none of the list it became
        value = values[new]
        if isinstance(value, str) and not value.strip() and is_list(inputs.model_fields[new]):
            values[new] = []
    for name, spelled in inputs.deprecated_values.items():
        if name not in values:
            continue
        value = values[name]
        items = value.split(",") if isinstance(value, str) and "," in value else value
        if isinstance(items, list | tuple):
            old = [v for v in items if isinstance(v, str) and v.strip() in spelled]
            new = [spelled.get(v.strip(), v) if isinstance(v, str) else v for v in items]
            values[name] = ",".join(new) if isinstance(value, str) else type(items)(new)
        else:
            old = [value] if isinstance(value, str) and value in spelled else []
            values[name] = spelled.get(value, value) if old else value
        renamed += [(f"{name} {v.strip()}", f"{name} {spelled[v.strip()]}") for v in old]
    return values, renamed


def run_study(name: str, **values) -> Report:
    """Run study ``name`` with inputs ``values`` (defaults for the rest). A deprecated input
    name is taken with a :class:`DeprecationWarning`.

    Raises
    ------
    InputError
        For any input that is not allowed, naming it.
    """
    if name not in STUDIES:
        raise InputError("study", name, "one of " + ", ".join(STUDIES))
    study = STUDIES[name]
    values, renamed = rename_deprecated(study.inputs, values)
    for old, new in renamed:
        warnings.warn(f"{old} is deprecated; use {new}", DeprecationWarning, stacklevel=2)
    return execute(study, validate_inputs(study, values))


def execute(study: Study, inputs: Inputs) -> Report:
    """Run ``study`` on resolved ``inputs``; a model's error about an input names it."""
    try:
        results = study.run(inputs)
    except InputError:
        raise
    except ValueError as error:
        raise model_error(error, study.inputs.model_fields, inputs.model_dump()) from None
    return Report(study.name, inputs, results)
