"""Requests: what arrives at a fleet, and when.

A load is a frozen value checked when made, registered in :data:`LOAD_KINDS`:
:class:`Poisson` (arrivals at ``rate``; the same seed at another rate scales the same requests
in time), :class:`Trace` (a CSV or JSON-lines file of ``arrival_s, prompt, output``,
:func:`read_trace`) or :class:`ClosedLoop` (``concurrency`` clients, each sending its next
request when its last completes, as ``vllm bench serve --max-concurrency``). The drawn loads
take lengths from a :class:`Workload` (fixed or drawn, :func:`parse_lengths`; gaps and lengths
are separate streams of the seed, so a closed loop draws a Poisson load's lengths).
:meth:`Load.draw` gives the :class:`Requests`; :meth:`Load.driver` brings them to a simulation
(:class:`OpenLoop` or :class:`Clients`, through SimPy's ``env``, the ``arrival`` times and
``arrive(rid) -> bool``). Details: docs/serving.md.

Examples
--------
>>> load = Poisson(rate=2.0, requests=3, workload=Workload(prompt="uniform:10:20", seed=1))
>>> r = load.draw()
>>> r.arrival_s.round(3).tolist(), r.prompt.tolist(), r.output.tolist(), r.seed
([1.371, 1.39, 1.682], [20, 15, 11], [128, 128, 128], 1)
>>> closed = ClosedLoop(concurrency=2, requests=3, workload=Workload("uniform:10:20", seed=1))
>>> closed.draw().prompt.tolist()                  # the same lengths
[20, 15, 11]
>>> Workload(seed=-1)
Traceback (most recent call last):
...
tlm.inference.errors.InferenceInputError: seed must be an integer >= 0, not -1
"""

from __future__ import annotations

import abc
import csv
import json
import math
import numbers
import os
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, NamedTuple

import numpy as np

from ...datafile import read_text
from ...limits import MAX_REQUEST_TOKENS
from ..errors import InferenceInputError
from .checks import Registry, check_int, check_positive

__all__ = [
    "LOAD_KINDS",
    "ClosedLoop",
    "Clients",
    "Load",
    "OpenLoop",
    "Poisson",
    "Requests",
    "Trace",
    "TraceError",
    "Workload",
    "parse_lengths",
    "read_trace",
]

#: The loads by name.
LOAD_KINDS = Registry("load")


class TraceError(ValueError):
    """A trace file that cannot be read: names the file, the line and the field."""


class Requests(NamedTuple):
    """A load's requests in arrival order: ``arrival_s`` (seconds), ``prompt`` and ``output``
    (tokens) arrays, and the ``seed`` of the draws (None if nothing was drawn)."""

    arrival_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    seed: int | None


# ------------------------------------------------------------------ lengths

_LENGTH_FORMS = (
    f"an integer in 1..{MAX_REQUEST_TOKENS}, 'uniform:lo:hi' or 'lognormal:mean:sigma' (or "
    "such a tuple)"
)


def parse_lengths(name, spec):
    """A length distribution from its spec (:class:`Workload`'s ``prompt`` and ``output``,
    the serve study's ``--prompt`` and ``--output``): ``('fixed', n)``, ``('uniform', lo,
    hi)`` or ``('lognormal', mean, sigma)``, which it also takes; a bad spec raises
    :class:`~tlm.inference.errors.InferenceInputError` naming ``name``.

    >>> parse_lengths("prompt", "uniform:100:200")
    ('uniform', 100, 200)
    >>> parse_lengths("output", 64) == parse_lengths("output", ("fixed", 64))
    True
    """
    if isinstance(spec, list | tuple) and len(spec) == 2 and spec[0] == "fixed":
        n = spec[1]  # the form this returns
    else:
        n = spec
    if isinstance(n, numbers.Integral) and not isinstance(n, bool):
        if not 1 <= n <= MAX_REQUEST_TOKENS:
            raise InferenceInputError(name, spec, _LENGTH_FORMS)
        return ("fixed", int(n))
    parts = spec.split(":") if isinstance(spec, str) else spec
    if (
        not isinstance(parts, list | tuple)
        or len(parts) != 3
        or parts[0] not in ("uniform", "lognormal")
    ):
        raise InferenceInputError(name, spec, _LENGTH_FORMS)
    kind = parts[0]
    try:
        a, b = (float(x) for x in parts[1:])
    except (TypeError, ValueError):
        raise InferenceInputError(name, spec, _LENGTH_FORMS) from None
    if kind == "uniform":
        if not (a == int(a) and b == int(b) and 1 <= a <= b <= MAX_REQUEST_TOKENS):
            raise InferenceInputError(
                name,
                spec,
                f"integers 1 <= lo <= hi <= {MAX_REQUEST_TOKENS}",
                f"{name}: uniform needs integers 1 <= lo <= hi <= {MAX_REQUEST_TOKENS}, "
                f"not {spec!r}",
            )
        return ("uniform", int(a), int(b))
    if not (1 <= a <= MAX_REQUEST_TOKENS and 0 <= b <= 10):
        raise InferenceInputError(
            name,
            spec,
            f"mean in 1..{MAX_REQUEST_TOKENS} and sigma in 0..10",
            f"{name}: lognormal needs mean in 1..{MAX_REQUEST_TOKENS} and sigma in 0..10, "
            f"not {spec!r}",
        )
    return ("lognormal", a, b)


def _draw_lengths(spec, n, rng):
    """``n`` lengths of ``spec``: lognormal has the given mean (mu = ln mean - sigma^2 / 2),
    rounded to the nearest integer, at least 1 and at most a million tokens
    (:data:`~tlm.limits.MAX_REQUEST_TOKENS`: a long tail's draws are capped there)."""
    if spec[0] == "fixed":
        return np.full(n, spec[1], np.int64)
    if spec[0] == "uniform":
        return rng.integers(spec[1], spec[2], n, endpoint=True).astype(np.int64)
    mean, sigma = spec[1], spec[2]
    x = rng.lognormal(math.log(mean) - sigma * sigma / 2, sigma, n)
    return np.clip(np.rint(x), 1, MAX_REQUEST_TOKENS).astype(np.int64)


@dataclass(frozen=True)
class Workload:
    """What the drawn requests ask for: prompt and output lengths, and the seed of the draws.

    Parameters
    ----------
    prompt, output : int, str or tuple
        Tokens: an integer, ``"uniform:lo:hi"`` (integers, inclusive) or
        ``"lognormal:mean:sigma"`` (that mean, rounded, at least 1), or such a tuple; kept as
        :func:`parse_lengths` gives it.
    seed : int
        Seed of the draws (``numpy.random.default_rng``): the lengths, and a Poisson load's
        arrival gaps.
    """

    prompt: int | str | tuple = 512
    output: int | str | tuple = 128
    seed: int = 0

    def __post_init__(self):
        object.__setattr__(self, "seed", check_int("seed", self.seed, 0))
        object.__setattr__(self, "prompt", parse_lengths("prompt", self.prompt))
        object.__setattr__(self, "output", parse_lengths("output", self.output))

    def streams(self) -> tuple[np.random.Generator, np.random.Generator]:
        """The generators of the arrival gaps and of the lengths."""
        arrivals, lengths = np.random.SeedSequence(self.seed).spawn(2)
        return np.random.default_rng(arrivals), np.random.default_rng(lengths)

    def lengths(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``n`` prompt lengths, then ``n`` output lengths, from ``rng``."""
        return _draw_lengths(self.prompt, n, rng), _draw_lengths(self.output, n, rng)


# ------------------------------------------------------------------ traces


def read_trace(path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read a trace of requests: CSV with a header row, or JSON lines (``.jsonl``), each request
    with ``arrival_s`` (seconds >= 0), ``prompt`` and ``output`` (tokens, integers in 1..a
    million).

    Requests are sorted by arrival (stably). Returns ``(arrival_s, prompt, output)`` arrays.

    Raises
    ------
    TraceError
        Naming the file, the line and the field of the first bad value.

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> p = os.path.join(d, "t.csv")
    >>> _ = open(p, "w").write("arrival_s,prompt,output\\n0.5,100,10\\n0.25,7,3\\n")
    >>> arrival, prompt, output = read_trace(p)
    >>> arrival.tolist(), prompt.tolist(), output.tolist()
    ([0.25, 0.5], [7, 100], [3, 10])
    """
    path = Path(path)
    text = read_text(path, TraceError, f"trace {str(path)!r}")
    rows = []  # (line number, dict)
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise TraceError(f"{path}:{number}: not JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise TraceError(f"{path}:{number}: expected an object, not {line.strip()!r}")
            rows.append((number, row))
    elif path.suffix.lower() == ".csv":
        reader = csv.DictReader(text.splitlines())
        missing = [
            k for k in ("arrival_s", "prompt", "output") if k not in (reader.fieldnames or [])
        ]
        if missing:
            raise TraceError(
                f"{path}:1: the header must name arrival_s, prompt and output; "
                f"missing {', '.join(missing)} (header {reader.fieldnames})"
            )
        rows = [(reader.line_num, row) for row in reader]
    else:
        raise TraceError(f"trace {str(path)!r}: the name must end in .csv or .jsonl")
    if not rows:
        raise TraceError(f"{path}: no requests")
    arrival = np.empty(len(rows))
    prompt = np.empty(len(rows), np.int64)
    output = np.empty(len(rows), np.int64)
    for i, (number, row) in enumerate(rows):
        for key in ("arrival_s", "prompt", "output"):
            value = row.get(key)
            if value is None or value == "":
                raise TraceError(f"{path}:{number}: field {key!r} is missing")
            try:
                x = float(value)
            except (TypeError, ValueError):
                x = math.nan
            if key == "arrival_s":
                if not (math.isfinite(x) and x >= 0):
                    raise TraceError(
                        f"{path}:{number}: field 'arrival_s' must be seconds >= 0, not {value!r}"
                    )
                arrival[i] = x
            else:
                if not (math.isfinite(x) and x == int(x) and 1 <= x <= MAX_REQUEST_TOKENS):
                    raise TraceError(
                        f"{path}:{number}: field {key!r} must be an integer in "
                        f"1..{MAX_REQUEST_TOKENS}, not {value!r}"
                    )
                (prompt if key == "prompt" else output)[i] = int(x)
    order = np.argsort(arrival, kind="stable")
    return arrival[order], prompt[order], output[order]


# ------------------------------------------------------------------ drivers


class OpenLoop:
    """Brings each request to the simulation at its arrival time."""

    def start(self, sim) -> None:
        sim.env.process(self._arrivals(sim))

    def completed(self, sim) -> None:
        """A request completed: nothing follows from it in an open loop."""

    @staticmethod
    def _arrivals(sim):
        env = sim.env
        for rid, t in enumerate(sim.arrival.tolist()):
            if t > env.now:
                yield env.timeout(t - env.now)
            sim.arrive(rid)


class Clients:
    """A closed loop of ``concurrency`` clients: each sends a request at time 0 and its next
    the moment the previous one completes (or, rejected, at once), while requests remain; it
    sets each request's arrival time as it sends it."""

    def __init__(self, concurrency: int):
        self.concurrency = concurrency
        self.issued = 0  # requests sent so far

    def start(self, sim) -> None:
        for _ in range(min(self.concurrency, len(sim.arrival))):
            self._send(sim)

    def completed(self, sim) -> None:
        self._send(sim)  # the request's client sends its next

    def _send(self, sim) -> None:
        while self.issued < len(sim.arrival):
            rid = self.issued
            self.issued += 1
            sim.arrival[rid] = sim.env.now
            if sim.arrive(rid):
                return


# ------------------------------------------------------------------ loads


class Load(abc.ABC):
    """A load: its requests (:meth:`draw`) and what brings them to a simulation
    (:meth:`driver`)."""

    name: ClassVar[str]

    @abc.abstractmethod
    def draw(self) -> Requests:
        """The requests, in arrival order."""

    def driver(self) -> OpenLoop | Clients:
        """A new driver for one simulation (an open loop unless the load says otherwise)."""
        return OpenLoop()


@LOAD_KINDS.register("poisson")
@dataclass(frozen=True)
class Poisson(Load):
    """Poisson arrivals at ``rate`` per second: ``requests`` of them, or those in
    ``[0, duration_s)`` (exactly one of the two).

    Parameters
    ----------
    rate : float
        Requests per second, > 0.
    requests : int, optional
        Arrivals in all; or
    duration_s : float, optional
        the arrival window, seconds.
    workload : Workload
        Lengths and seed.
    """

    rate: float
    requests: int | None = None
    duration_s: float | None = None
    workload: Workload = Workload()

    def __post_init__(self):
        object.__setattr__(self, "rate", check_positive("rate", self.rate))
        if (self.duration_s is None) == (self.requests is None):
            raise InferenceInputError(
                "requests",
                self.requests,
                "an integer >= 1 or, instead, duration_s",
                f"give exactly one of duration_s and requests, not duration_s="
                f"{self.duration_s!r} and requests={self.requests!r}",
            )
        if self.requests is not None:
            object.__setattr__(self, "requests", check_int("requests", self.requests, 1))
        else:
            object.__setattr__(self, "duration_s", check_positive("duration_s", self.duration_s))
        _check_workload(self.workload)

    def draw(self) -> Requests:
        rate, seed = self.rate, self.workload.seed
        gaps, lengths = self.workload.streams()
        if self.requests is not None:
            n = self.requests
            arrival = np.cumsum(gaps.standard_exponential(n)) / rate
        else:
            duration_s = self.duration_s
            chunks, total = [], 0.0
            while total * 1.0 < duration_s * rate:
                chunk = np.cumsum(gaps.standard_exponential(int(duration_s * rate) + 16)) + total
                chunks.append(chunk)
                total = chunk[-1]
            arrival = np.concatenate(chunks) / rate
            arrival = arrival[arrival < duration_s]
            if arrival.size == 0:
                raise InferenceInputError(
                    "rate",
                    rate,
                    f"a rate at which a request arrives within duration_s={duration_s:g} "
                    f"(seed {seed}; about 1 / duration_s or more), or a longer duration",
                    f"no request arrives in duration_s={duration_s} at rate={rate}/s "
                    f"(seed {seed}): give a longer duration or a higher rate",
                )
            n = arrival.size
        return Requests(arrival, *self.workload.lengths(n, lengths), seed)


@LOAD_KINDS.register("trace")
@dataclass(frozen=True)
class Trace(Load):
    """Requests from a file: CSV or JSON lines of ``arrival_s, prompt, output``
    (:func:`read_trace`; a bad file raises :class:`TraceError` when drawn).

    Parameters
    ----------
    path : str or path
        The file; ``.csv`` or ``.jsonl``.
    """

    path: Path

    def __post_init__(self):
        if not isinstance(self.path, str | os.PathLike):
            raise InferenceInputError("path", self.path, "a path to a .csv or .jsonl file")
        object.__setattr__(self, "path", Path(self.path))

    def draw(self) -> Requests:
        return Requests(*read_trace(self.path), None)


@LOAD_KINDS.register("closed_loop")
@dataclass(frozen=True)
class ClosedLoop(Load):
    """``concurrency`` clients in a closed loop, ``requests`` in all (:class:`Clients`).

    Parameters
    ----------
    concurrency : int
        Clients, >= 1.
    requests : int
        Requests the clients send in all, >= 1.
    workload : Workload
        Lengths (drawn as a Poisson load with the same seed draws them) and seed.
    """

    concurrency: int
    requests: int
    workload: Workload = Workload()

    def __post_init__(self):
        object.__setattr__(self, "concurrency", check_int("concurrency", self.concurrency, 1))
        object.__setattr__(self, "requests", check_int("requests", self.requests, 1))
        _check_workload(self.workload)

    def draw(self) -> Requests:
        n = self.requests
        _, lengths = self.workload.streams()
        return Requests(np.zeros(n), *self.workload.lengths(n, lengths), self.workload.seed)

    def driver(self) -> Clients:
        return Clients(self.concurrency)


def _check_workload(workload) -> None:
    if not isinstance(workload, Workload):
        raise InferenceInputError("workload", workload, "a Workload")
