"""Chunked evaluation of a large set of candidates on Dask, resumable from disk - the engine
under every strategy search (training layouts, inference configurations).

A search splits its candidates ``0..total`` into chunks; :func:`run_chunks` evaluates each
chunk with ``task(*shared, start, stop)`` - a function of module level that returns a dict of
numpy arrays, one row per candidate - on the Dask scheduler at ``scheduler`` (an address such
as ``tcp://host:8786``), on a local cluster (``"local"``: one single-threaded worker process
per core) or in this process (``"inline"``). The ``shared`` arguments (a model, a hardware
file) travel with each task, beside the chunk's two bounds (a task enumerates its candidates
again from them, cheaply, rather than receiving them): nothing lives only on one worker, so a
worker lost - even the last one, which its nanny restarts - costs only its tasks, which Dask
runs again.

With ``out_dir`` the client writes each chunk's result as it arrives (atomically, with a
checksum of its arrays), under a stamp naming the search (``key``, a digest of its inputs), so
the folder need only be the client's: workers on other machines never touch it. A rerun with
the same key loads the chunks found there whose checksum holds and evaluates the others - an
interrupted search resumes from what was done, and a truncated or corrupt chunk is evaluated
again. A folder holding another search's chunks is an error rather than a silent mix.

Examples
--------
>>> import numpy as np
>>> def squares(offset, start, stop):
...     return {"x": np.arange(start, stop) ** 2 + offset}
>>> parts, resumed = run_chunks(
...     squares, (1,), total=5, chunk=2, outputs=("x",), scheduler="inline")
>>> np.concatenate([p["x"] for p in parts]).tolist(), resumed
([1, 2, 5, 10, 17], 0)
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import numpy as np

__all__ = ["SCHEDULERS", "digest", "run_chunks", "check_scheduler"]

#: The two scheduler names; anything else is a Dask scheduler's address.
SCHEDULERS = ("local", "inline")


def digest(*parts) -> str:
    """A short stable digest of ``parts`` (JSON-serialisable, numpy values as lists): the key
    a search's chunks are stamped with."""
    text = json.dumps(parts, default=lambda x: np.asarray(x).tolist())
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def check_scheduler(scheduler) -> str:
    """``scheduler`` if it is ``local``, ``inline`` or looks like an address
    (``tcp://host:port``, ``host:port``); otherwise a ValueError naming it."""
    if isinstance(scheduler, str) and (scheduler in SCHEDULERS or ":" in scheduler):
        return scheduler
    raise ValueError(
        f"scheduler must be local, inline or a Dask scheduler's address (tcp://host:8786), "
        f"not {scheduler!r}"
    )


def _checksum(result: dict) -> str:
    """A digest of a chunk's arrays: their names, shapes, dtypes and bytes."""
    h = hashlib.sha256()
    for name in sorted(result):
        a = np.ascontiguousarray(result[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _write(result: dict, path: Path) -> None:
    tmp = Path(str(path) + ".tmp.npz")
    np.savez(tmp, **result, checksum=np.array(_checksum(result)))
    tmp.replace(path)


def _read(path: Path, outputs: tuple) -> dict | None:
    """A chunk written by :func:`_write`, or None when it is missing, truncated, corrupt or
    short of an output (it is evaluated again)."""
    try:
        with np.load(path) as data:
            result = {k: data[k] for k in data.files if k != "checksum"}
            stored = str(data["checksum"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None
    if _checksum(result) != stored or not set(outputs) <= set(result):
        return None
    return {k: result[k] for k in outputs}


def _task(task, shared, start, stop):
    return task(*shared, start, stop)


def run_chunks(
    task,
    shared: tuple,
    *,
    total: int,
    chunk: int,
    outputs: tuple,
    scheduler: str = "local",
    workers: int | None = None,
    out_dir=None,
    key: str = "",
    progress=None,
) -> tuple[list[dict], int]:
    """Evaluate candidates ``0..total`` in chunks of ``chunk``: the chunks' results in order
    and how many of them were read back from ``out_dir`` rather than evaluated.

    Parameters
    ----------
    task : callable
        ``task(*shared, start, stop) -> dict`` of arrays with ``stop - start`` rows; a module
        level function (Dask pickles it by name).
    shared : tuple
        Arguments every task shares, sent to each worker once.
    total, chunk : int
        Candidates in all (>= 1) and per task (>= 1).
    outputs : tuple of str
        The keys of a task's result that are kept (and read back from ``out_dir``).
    scheduler : str
        ``"local"``, ``"inline"`` or a Dask scheduler's address.
    workers : int, optional
        Worker processes of the local cluster (one per core by default).
    out_dir : path, optional
        Where the client writes chunks and, on a rerun with the same ``key``, reads back the
        ones whose checksum holds.
    key : str
        What identifies this search (:func:`digest` of its inputs).
    progress : callable, optional
        Called with (chunks done, chunks in all) at the start and as chunks finish.

    Raises
    ------
    ValueError
        A bad ``chunk``, ``workers`` or ``scheduler``, or an ``out_dir`` holding another
        search's chunks.
    """
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
    ):
        raise ValueError(f"workers must be a positive integer, not {workers!r}")
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"chunk must be a positive integer, not {chunk!r}")
    check_scheduler(scheduler)
    bounds = list(range(0, total, chunk)) + [total]
    pieces = list(zip(bounds[:-1], bounds[1:], strict=True))
    paths: list = [None] * len(pieces)
    results: list = [None] * len(pieces)
    if out_dir is not None:
        folder = Path(out_dir)
        folder.mkdir(parents=True, exist_ok=True)
        stamp = folder / "search.json"
        if stamp.exists() and json.loads(stamp.read_text()).get("key") != key:
            raise ValueError(
                f"out_dir {folder} holds another search's chunks; use an empty directory"
            )
        stamp.write_text(json.dumps({"key": key, "chunk": chunk, "chunks": len(pieces)}))
        for i in range(len(pieces)):
            paths[i] = folder / f"chunk-{i:05d}-of-{len(pieces):05d}-{chunk}.npz"
            if paths[i].exists():
                results[i] = _read(paths[i], outputs)
    todo = [i for i, r in enumerate(results) if r is None]
    done = resumed = len(pieces) - len(todo)
    if progress:
        progress(done, len(pieces))

    def finished(i, result):
        nonlocal done
        results[i] = {k: result[k] for k in outputs}
        if paths[i] is not None:  # the client keeps it: the folder need be the client's alone
            _write(results[i], paths[i])
        done += 1
        if progress:
            progress(done, len(pieces))

    if scheduler == "inline":
        for i in todo:
            finished(i, _task(task, shared, *pieces[i]))
    elif todo:
        import logging

        from dask.distributed import Client, LocalCluster, as_completed

        cluster = None
        if scheduler == "local":
            # the workers' own logs stay quiet (CRITICAL only): a heartbeat of a worker the
            # closing cluster has not stopped yet reports its closed connection as a
            # traceback on the user's terminal; a task's error still reaches the client
            cluster = LocalCluster(
                n_workers=workers,
                processes=True,
                threads_per_worker=1,
                dashboard_address=":0",  # any free port: two searches at once do not clash
                silence_logs=logging.CRITICAL,
            )
            client = Client(cluster)
        else:
            client = Client(scheduler)
        try:
            # the shared arguments go with every task (not scattered: scattered data held
            # only by workers is lost with the last of them, and every task with it)
            futures = {
                client.submit(_task, task, tuple(shared), *pieces[i], pure=False, retries=2): i
                for i in todo
            }
            for fut in as_completed(futures):
                finished(futures[fut], fut.result())
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    return results, resumed
