"""``trnsim``: the command line of the studies (also ``python -m tlm``), generated from their
inputs types.

Every study takes its inputs as flags (``--clock-hz`` for the field ``clock_hz``; lists
comma-separated; ``--choose SECTION.FIGURE=ALT`` repeatable; a true-or-false input as
``--values`` / ``--no-values``), plus the protocol's own:

``--config FILE``
    inputs from a TOML file or a run's JSON contract; flags given beside it override it;
``--json``
    print the run's JSON contract instead of tables;
``--out FILE``
    also write the run: ``.toml`` its inputs (a config to rerun it), else its JSON contract.

Any bad input ends the command with ``trnsim STUDY: error: --flag: VALUE ...; allowed: ...``
on stderr and status 2, no traceback. An input's old name (:attr:`Inputs.deprecated
<tlm.studies.protocol.Inputs.deprecated>`), as a flag or a config file's key, is taken as the
new one with one line ``trnsim STUDY: warning: --old is deprecated; use --new`` on stderr.

    trnsim tensor --n 64,128,512 --format fp32
    trnsim gemm --m 4096 --n 4096 --k 4096 --json --out gemm.json
    trnsim noc --config gemm.json     # error: the config is for gemm
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import json
import os
import re
import sys

from .. import __version__
from .catalogue import CATALOGUE
from .config import load_config, write_output
from .protocol import (
    STUDIES,
    InputError,
    Report,
    Study,
    allowed_text,
    execute,
    flag,
    from_text,
    progress_to,
    rename_deprecated,
    validate_inputs,
    without_none,
    writable_path,
)
from .units import column, human, labels

__all__ = ["main", "parser", "flag"]

#: Options of the protocol itself, not inputs of a study.
PROTOCOL = ("config", "json", "out")
#: The width of the tables written to a pipe or a file (no terminal, no $COLUMNS).
_PIPE_COLUMNS = 200


class _Fail(Exception):
    """argparse's own errors, raised instead of exiting (see :func:`main`)."""


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # a word that starts with '-' and a digit, '-inf' or '-nan' is a value (a negative
        # number with a suffix or a unit, '-1k', '-2e9B'), so the input's own check names the
        # flag and what it allows, not argparse's "expected one argument"
        self._negative_number_matcher = re.compile(r"^-(\.?\d|inf|nan)", re.IGNORECASE)

    def error(self, message):
        raise _Fail(self.prog, message)


def _choices(text: str) -> tuple[str, str]:
    key, sep, alt = text.partition("=")
    if not sep or not key.strip() or not alt.strip():
        raise InputError(
            "choose", text, "SECTION.FIGURE=ALTERNATIVE, e.g. tensor.freq_hz=core_nki2"
        )
    return key.strip(), alt.strip()


def _add_study(sub, study: Study):
    p = sub.add_parser(
        study.name,
        help=study.title.replace("%", "%%"),
        description=(sys.modules[study.run.__module__].__doc__ or study.title)
        .split("\n\n")[0]
        .replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inputs = p.add_argument_group("inputs (defaults resolved from the preset are shown by --json)")
    fields = study.inputs.model_fields
    for name, field in fields.items():
        default = field.get_default(call_default_factory=True)
        extra = field.json_schema_extra or {}
        unset = default is None or (default == [] and "unset" in extra)  # none: an empty list
        shown = extra.get("unset", "the preset's") if unset else human(name, default)
        help_text = f"{field.description} [{allowed_text(field)}; default {shown}]"
        _add_input(inputs, name, name, field, help_text.replace("%", "%%"))  # help formats %
    for old, new in study.inputs.deprecated.items():  # taken, not shown
        _add_input(inputs, old, old, fields[new], argparse.SUPPRESS)
    run = p.add_argument_group("run")
    run.add_argument("--config", metavar="FILE", help="inputs from a TOML config or a JSON run")
    run.add_argument("--json", action="store_true", help="print the JSON contract")
    run.add_argument("--out", metavar="FILE", help="write the run: .toml inputs, else JSON")
    return p


def _add_input(group, name: str, dest: str, field, help_text: str):
    """The flag of input ``name`` (its value in ``dest``)."""
    if without_none(field.annotation) is bool:
        group.add_argument(
            flag(name),
            dest=dest,
            action=argparse.BooleanOptionalAction,
            default=argparse.SUPPRESS,
            help=help_text,
        )
    elif name == "choose":
        group.add_argument(
            flag(name),
            dest=dest,
            action="append",
            default=argparse.SUPPRESS,
            metavar="SECTION.FIGURE=ALT",
            help=help_text,
        )
    else:
        group.add_argument(
            flag(name), dest=dest, default=argparse.SUPPRESS, metavar=name.upper(), help=help_text
        )


def parser(study: str | None = None, others: bool = True) -> argparse.ArgumentParser:
    """The ``trnsim`` parser: one subcommand per study of the catalogue, with the inputs of
    ``study`` (the only study module it imports; the others' subcommands are their titles,
    for the help and the error that list them: ``others=False`` leaves them out)."""
    p = _Parser(prog="trnsim", description="Models of a Trainium2-class machine: studies.")
    p.add_argument("--version", action="version", version=f"trnsim {__version__}")
    sub = p.add_subparsers(dest="study", required=True, metavar="STUDY", parser_class=_Parser)
    for name, entry in CATALOGUE.items():
        if name == study:
            _add_study(sub, STUDIES[name])
        elif others:
            sub.add_parser(name, help=entry.title.replace("%", "%%"))
    return p


def _study_named(argv) -> str | None:
    """The study a command line names: its first word that is not an option."""
    return next((a for a in argv if not a.startswith("-")), None)


def _warn(study: Study, old: str, new: str):
    print(f"trnsim {study.name}: warning: {old} is deprecated; use {new}", file=sys.stderr)


def inputs_from(study: Study, args: argparse.Namespace) -> dict:
    """The input values of a command line: the config file's, overridden by the flags. An
    input's deprecated name, as a flag or a key of the file, is taken as the new one, with a
    warning on stderr."""
    fields = study.inputs.model_fields
    values = {}
    if args.config:
        where = f" in {args.config}"
        loaded = load_config(args.config, study.name)
        values, renamed = rename_deprecated(study.inputs, loaded, where)
        for old, new in renamed:
            _warn(study, f"{old}{where}", new)
    given = dict(vars(args))
    for old, new in study.inputs.deprecated.items():
        if old not in given:
            continue
        if new in given:
            raise InputError(
                old,
                given[old],
                f"{flag(new)} alone ({flag(old)} is its deprecated name)",
                f"is given beside {flag(new)}",
            )
        _warn(study, flag(old), flag(new))
        given[new] = given.pop(old)
    given, respelled = rename_deprecated(study.inputs, given)  # the names are new by now
    for old, new in respelled:  # "name value": as "--name value"
        _warn(study, *(flag(n) + " " + v for n, v in (p.split(" ", 1) for p in (old, new))))
    for name in fields:
        if name not in given:
            continue
        value = given[name]
        if isinstance(value, bool):  # --flag / --no-flag
            values[name] = value
        elif name == "choose":
            values[name] = dict(_choices(text) for text in value)
        else:
            values[name] = from_text(name, value, fields[name])
    return values


def _table(title, columns, rows) -> tuple:
    """A table whose columns each show one unit, in the header: its title, header and rows
    of text."""
    cells = []
    headers = []
    for i, key in enumerate(columns):
        header, texts = column(key, [row[i] for row in rows])
        headers.append(header)
        cells.append(texts)
    return title, headers, list(zip(*cells, strict=True))


def _figures(title, figures: dict) -> tuple:
    """A two-column table of named figures, each in its own unit."""
    names = labels(list(figures))
    return (
        title,
        ["figure", "value"],
        [(n, human(k, figures[k])) for k, n in zip(figures, names, strict=True)],
    )


def _plain(header: str, tables: list, width: int) -> str | None:
    """The header line and the tables as rich prints them to a pipe or a file ``width``
    wide, laid out without it (:mod:`.tables`); None where rich must print them."""
    from . import tables as plain

    out = plain.line(header, width) if "[" not in header else None
    for table in tables:
        if out is None:
            return None
        drawn = plain.lines(*table, width=width)
        out = None if drawn is None else out + drawn
    return None if out is None else "".join(f"{text}\n" for text in out)


def render(study: Study, report: Report):
    """The tables a person reads: inputs, results, the series, and the study's own."""
    inputs = report.inputs.model_dump()
    tables = [_figures("inputs", inputs)]
    fields = type(report.results).model_fields
    shown = {  # a figure its study renders as a table of its own is left out here
        k: v
        for k, v in report.results.model_dump().items()
        if (fields[k].json_schema_extra or {}).get("table", True)
    }
    if shown:  # a study whose figures are all in its own tables (system) has none here
        tables.append(_figures("results", shown))
    series = [row.model_dump() for row in report.results.series]
    if series:
        columns = [k for k, v in series[0].items() if not isinstance(v, list)]
        tables.append(_table("series", columns, [[r[c] for c in columns] for r in series]))
    for title, columns, rows in study.tables(report.inputs, report.results) if study.tables else ():
        tables.append(_table(title, columns, rows))
    header = f"trnsim {study.name}: {study.title}"
    # a pipe or a file has no width: rich would take 80 columns and fold the wide tables
    # (validate's rows) into unreadable slivers; a terminal or $COLUMNS keeps its own
    wide = sys.stdout.isatty() or "COLUMNS" in os.environ
    if not wide and _colourless():
        text = _plain(header, tables, _PIPE_COLUMNS)
        if text is not None:
            sys.stdout.write(text)
            return
    from rich.console import Console

    # the cells are data, shown as they are: no markup (a path's "[x]" was taken for a
    # style) nor emoji codes (":x:" for a cross); neither is parsed then, cell by cell
    console = Console(width=None if wide else _PIPE_COLUMNS, markup=False, emoji=False)
    console.print(f"[bold]trnsim {study.name}[/bold]: {study.title}", markup=True)
    for table in tables:
        console.print(rich_table(*table))


def rich_table(title, headers, rows):
    """One of :func:`render`'s tables as rich draws it: every column right-justified."""
    from rich.table import Table

    table = Table(title=title)
    for text in headers:
        table.add_column(text, justify="right")
    for row in rows:
        table.add_row(*row)
    return table


def _colourless() -> bool:
    """Whether rich would print plain text to this standard output, no colours nor styles:
    not forced to act as a terminal, not in a notebook, its encoding one of UTF's (else
    rich draws the boxes in ASCII)."""
    import builtins

    forced = any(os.environ.get(v) for v in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"))
    encoding = (getattr(sys.stdout, "encoding", None) or "utf-8").lower()
    return not forced and not hasattr(builtins, "get_ipython") and encoding.startswith("utf")


@contextlib.contextmanager
def _progress_bar(enabled: bool):
    """A progress bar on stderr for studies that report progress, when stderr is a terminal."""
    if not (enabled and sys.stderr.isatty()):
        yield
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("running", total=None)

        def update(done, total, what):
            bar.update(task, completed=done, total=total, description=what or "running")

        with progress_to(update):
            yield


@contextlib.contextmanager
def _collector():
    """No cyclic garbage collection while the command starts (the study's modules imported,
    its inputs and data files read and validated: many objects allocated, few freed, and
    every full collection walks them all); the function yielded then sets what start-up
    made aside from later collections (``gc.freeze``) and lets the collector run while the
    study does. On the way out the collector is as it was, those objects given back."""
    enabled, frozen = gc.isenabled(), gc.get_freeze_count()
    gc.disable()

    def started():
        gc.freeze()
        if enabled:
            gc.enable()

    try:
        yield started
    finally:
        if enabled:
            gc.enable()
        if not frozen:
            gc.unfreeze()


def _exit_uncollected():
    """Set every object aside from the interpreter's collections at exit (``gc.freeze`` once
    the command has returned): its last collections would walk every object still alive, the
    modules' and the study's, to free what the system frees anyway when the process ends
    (docs/performance.md). Objects are still released as their modules are cleared;
    handlers registered later run first."""
    global _exit_frozen
    if not _exit_frozen:
        _exit_frozen = True
        atexit.register(gc.freeze)


#: Whether :func:`_exit_uncollected` has registered its handler in this process.
_exit_frozen = False


def run(argv=None) -> int:
    """``trnsim`` without its error handling (see :func:`main`)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    name = _study_named(argv)
    # a command line that starts with a study is parsed by that study's subcommand alone:
    # the others' (each an argparse parser asking gettext for its words) are listed only by
    # the top-level help and the error for an unknown study
    alone = bool(argv) and argv[0] == name and name in CATALOGUE
    with _collector() as started:
        args = parser(name, others=not alone).parse_args(argv)
        study = STUDIES[args.study]
        inputs = validate_inputs(study, inputs_from(study, args))
        if args.out is not None:
            if not args.out.strip():
                raise InputError(
                    "out", args.out, "a file path: .toml for the inputs, else JSON", "is empty"
                )
            writable_path("out", args.out)
        started()
        with _progress_bar(enabled=not args.json):
            report = execute(study, inputs)
        contract = report.to_dict()
        if args.out is not None:
            write_output(args.out, contract)
        if args.json:
            print(json.dumps(contract))
        else:
            render(study, report)
    return 0


def main(argv=None) -> int:
    """``trnsim``: run a study; user errors print one line and return 2."""
    if argv is None:  # the process's own command: it ends when this returns
        _exit_uncollected()
    argv = sys.argv[1:] if argv is None else list(argv)
    name = _study_named(argv)
    prog = f"trnsim {name}" if name in CATALOGUE else "trnsim"
    # trnsim uses no pydantic plugin: without this, the first model pydantic builds looks for
    # plugins in every installed distribution's entry points (importlib.metadata), a start-up
    # cost of every command; a user who wants plugins sets the variable (to "" or a list)
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        return run(argv)
    except BrokenPipeError:
        # the reader went away (``trnsim ... --json | head``): stop quietly, as a shell's
        # commands do on SIGPIPE; what Python would still flush goes nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13
    except _Fail as fail:
        where, message = fail.args
        where = prog if where == "trnsim" else where
        print(f"{where}: error: {message}", file=sys.stderr)
    except InputError as error:
        print(f"{prog}: error: {error.message(flag(error.field))}", file=sys.stderr)
    except ValueError as error:  # a model's own error (KernelError, PresetError, ...)
        print(f"{prog}: error: {error}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
