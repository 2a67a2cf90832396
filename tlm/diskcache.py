"""Figures derived from the package's data files, kept on disk between processes.

A ``trnsim infer`` command is a fresh process: without this, every run parses the hardware,
preset and model files again, rebuilds the chip's operator costs and works out the network's
collective closed forms (routes and schedules on the torus: 10-500 ms) before its first
estimate. Those are pure functions of the package's files, so they are kept here, pickled, and
a later process loads them in a fraction of a millisecond.

- **What**: the objects the callers name (a kind and a key): a hardware or model loaded by its
  shipped name, a hardware's fixed costs, operator costs and networks with the closed forms
  they have worked out, the inference engine's operator tables (see where :func:`load` is
  called). Nothing that depends on a value given at run time is keyed by less than that value.
- **When it is stale**: every entry lives under a *fingerprint* of the ``tlm`` package (each
  file's path, size and modification time), the Python and numpy versions and
  :data:`FORMAT`: editing, adding or checking out any file of the package starts a new, empty
  cache. Objects loaded from a file outside the package are keyed by their content. Listing
  the package's folders costs more than the ``stat`` of its files, so the cache keeps a
  *manifest* of the last listing (each folder's modification time, each file's size and
  time, the fingerprint): when every folder's time is the same - no entry added, removed or
  renamed in any of them - and every file's size and time, the fingerprint is the manifest's
  (the same one a listing gives). A listing whose times are under :data:`SETTLE_S` old is
  not kept as a manifest (a change within the file system's clock tick could hide behind an
  equal time).
- **Where**: ``$TRNSIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/trnsim``, else
  ``~/.cache/trnsim``; ``TRNSIM_CACHE_DIR=off`` (or empty) turns it off (the tests do). Only
  :data:`KEEP_FINGERPRINTS` fingerprints are kept (other checkouts of the package each have
  their own).
- **Writing**: :func:`keep` marks an object to write; :func:`flush` writes those that are new
  or have grown since they were loaded (``trnsim`` calls it after each command), each file
  written whole and renamed into place, so concurrent processes never read half a file.
  Reading never writes.

The files are pickles: they are read only from the user's own cache directory, as any other
of the user's files that a program executes. A file that does not load (truncated, from
another version of a class) is a miss.

Examples
--------
>>> import tempfile
>>> folder = tempfile.mkdtemp()
>>> with cache_dir(folder):
...     load("example", ("a", 1)) is None
...     keep("example", ("a", 1), {"x": 1.5})
...     flush()
...     load("example", ("a", 1))
True
1
{'x': 1.5}
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

__all__ = [
    "FORMAT",
    "KEEP_FINGERPRINTS",
    "SETTLE_S",
    "cache_dir",
    "content_key",
    "directory",
    "fingerprint",
    "flush",
    "keep",
    "key_of",
    "kept",
    "load",
]

#: Bumped when what this module writes changes shape.
FORMAT = 1
#: Fingerprint folders kept (the most recently used); older ones are removed by :func:`flush`.
KEEP_FINGERPRINTS = 4
#: An object whose pickle is larger is not written (a search's memo of every batch and
#: prompt): loading it would cost a later process more than it saves.
MAX_BYTES = 2 << 20
#: Objects marked for writing at most (a long search builds thousands of engines).
MAX_PENDING = 1024
#: Seconds a folder's or file's modification time must be in the past for a listing to be
#: kept as the manifest (file systems' times move in ticks of up to a few milliseconds, 2 s
#: on FAT: an entry changed within the tick of the listing would show the same time).
SETTLE_S = 2.0
#: The package's root folder: its files make the fingerprint.
_ROOT = Path(__file__).resolve().parent
_OFF = ("", "off", "0", "none")

#: (directory setting, fingerprint) worked out once per process.
_STATE: dict = {}
#: Objects to write at the next flush: (kind, key) -> (object, its size when loaded or last
#: written - :data:`_NEW` if never -, the size function).
_PENDING: dict = {}
_NEW = object()
#: The (kind, key) of each object loaded or kept, by identity (kept with the object).
_KEYS: dict = {}


def _constant(value) -> int:
    return 0


def directory() -> Path | None:
    """The cache's folder (not created here), or None when it is off."""
    setting = os.environ.get("TRNSIM_CACHE_DIR")
    if setting is not None:
        return None if setting.strip().lower() in _OFF else Path(setting)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "trnsim"


def fingerprint() -> str:
    """Of the package's files (path, size, modification time, every file but byte code), the
    Python and numpy versions and :data:`FORMAT`; worked out once per process (from the
    manifest when nothing in the package changed since it was written)."""
    if "fingerprint" not in _STATE:
        versions = f"{FORMAT} {sys.version} {np.__version__}"
        where = directory()
        manifest = None
        if where is not None:
            name = hashlib.blake2b(f"{_ROOT}\n{versions}".encode(), digest_size=8).hexdigest()
            manifest = os.path.join(where, f"manifest-{name}.pickle")
            digest = _from_manifest(manifest)
            if digest is not None:
                _STATE["fingerprint"] = digest
                return digest
        folders, files = _listing()
        rows = [versions] + [f"{path} {size} {mtime}" for path, size, mtime in files]
        rows.sort()
        digest = hashlib.blake2b("\n".join(rows).encode(), digest_size=10).hexdigest()
        _STATE["fingerprint"] = digest
        settled = time.time_ns() - int(SETTLE_S * 1e9)
        times = [t for _, t in folders] + [t for _, _, t in files]
        if manifest is not None and max(times) < settled:  # written at the next flush
            _STATE["manifest"] = (manifest, (str(_ROOT), folders, files, digest))
    return _STATE["fingerprint"]


def _listing() -> tuple[list, list]:
    """Every folder of the package but byte code's, with its modification time (taken before
    it is listed: an entry added meanwhile leaves a later time), and every file in them with
    its size and modification time (ns)."""
    folders, files = [], []
    todo = [str(_ROOT)]
    for folder in todo:  # grows as it goes
        folders.append((folder, os.stat(folder).st_mtime_ns))
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        todo.append(entry.path)
                else:
                    s = entry.stat()
                    files.append((entry.path, s.st_size, s.st_mtime_ns))
    return folders, files


def _from_manifest(path: str) -> str | None:
    """The manifest's fingerprint when every folder and file it lists is as it was, else
    None (no manifest, another package root, anything changed or gone)."""
    try:
        with open(path, "rb") as f:
            root, folders, files, digest = pickle.load(f)
        if root != str(_ROOT):
            return None
        stat = os.stat
        for folder, mtime in folders:
            if stat(folder).st_mtime_ns != mtime:
                return None
        for file, size, mtime in files:
            s = stat(file)
            if s.st_mtime_ns != mtime or s.st_size != size:
                return None
    except Exception:  # noqa: BLE001 - missing, truncated, a file gone: list the package
        return None
    return digest


def content_key(obj) -> str:
    """A key of an object by its content (its ``repr``: the frozen dataclasses of a hardware,
    a model), for objects that may come from a file outside the package."""
    return hashlib.blake2b(repr(obj).encode(), digest_size=12).hexdigest()


def _folder() -> str | None:
    """This fingerprint's folder in the cache, or None when the cache is off (worked out again
    only when the setting changes: a path per load is a cost the cold path notices)."""
    setting = os.environ.get("TRNSIM_CACHE_DIR")
    hit = _STATE.get("folder")
    if hit is None or hit[0] != (setting, _STATE.get("fingerprint")):
        where = directory()
        folder = None if where is None else os.path.join(where, f"v{FORMAT}-{fingerprint()}")
        hit = _STATE["folder"] = ((setting, _STATE.get("fingerprint")), folder)
    return hit[1]


def _file(folder: str, kind: str, key) -> str:
    digest = hashlib.blake2b(repr(key).encode(), digest_size=12).hexdigest()
    return os.path.join(folder, kind, digest + ".pickle")


def load(kind: str, key, size=None):
    """The object kept for ``(kind, key)``, or None (the cache off, nothing kept, or a file
    that does not load). It is then marked as :func:`keep` would, with ``size``."""
    folder = _folder()
    if folder is None:
        return None
    try:
        with open(_file(folder, kind, key), "rb") as f:
            stored_key, value = pickle.load(f)
    except Exception:  # noqa: BLE001 - missing, truncated, or a class changed: a miss
        return None
    if stored_key != key:  # a digest's collision: a miss
        return None
    if len(_PENDING) < MAX_PENDING:
        size = size or _constant
        _PENDING[(kind, key)] = (value, size(value), size)
        _KEYS[id(value)] = (value, (kind, key))
    return value


def keep(kind: str, key, value, size=None) -> None:
    """Write ``value`` for ``(kind, key)`` at the next :func:`flush`; with ``size`` (a
    function of the object, e.g. the entries of a memo it grows) again whenever it has grown
    since it was loaded or last written. ``key`` is a tuple of str, int, float and None (its
    ``repr`` names the file)."""
    if _folder() is None or len(_PENDING) >= MAX_PENDING:
        return
    _PENDING[(kind, key)] = (value, _NEW, size or _constant)
    _KEYS[id(value)] = (value, (kind, key))


def kept(kind: str, key, make, size=None):
    """The object kept for ``(kind, key)`` (:func:`load`), else ``make()``, marked to be
    written (:func:`keep`): the one way a caller derives an object through the cache."""
    value = load(kind, key, size)
    if value is None:
        value = make()
        keep(kind, key, value, size)
    return value


def key_of(value):
    """The ``(kind, key)`` ``value`` was loaded or kept under in this process, else None:
    what is derived from it can be kept under a key that names it."""
    hit = _KEYS.get(id(value))
    return hit[1] if hit is not None and hit[0] is value else None


def flush() -> int:
    """Write the objects kept since they were loaded or last written; the number written.
    Never raises for the cache's sake (a full disk, a read-only home): it stays unwritten."""
    folder = _folder()
    if folder is None:
        return 0
    manifest = _STATE.pop("manifest", None)
    if manifest is not None:
        _write(Path(manifest[0]), pickle.dumps(manifest[1], protocol=pickle.HIGHEST_PROTOCOL))
    if not _PENDING:
        return 0
    written = 0
    for (kind, key), (value, was, size) in list(_PENDING.items()):
        now = size(value)
        if was is not _NEW and now == was:
            continue
        _PENDING[(kind, key)] = (value, now, size)  # tried once, written or not
        try:
            data = pickle.dumps((key, value), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - an object that does not pickle: not kept
            continue
        if len(data) > MAX_BYTES:
            continue
        written += _write(Path(_file(folder, kind, key)), data)
    if written:
        _prune(Path(folder))
    return written


def _write(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` whole (a temporary file renamed into place); False when it
    cannot be (a full disk, a read-only home: not kept)."""
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(handle, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
    except OSError:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        return False
    return True


def _prune(folder: Path) -> None:
    """Remove the fingerprint folders beyond :data:`KEEP_FINGERPRINTS` (the least recently
    written first)."""
    with contextlib.suppress(OSError):
        os.utime(folder)
        others = [p for p in folder.parent.iterdir() if p.is_dir() and p.name.startswith("v")]
        others.sort(key=lambda p: p.stat().st_mtime, reverse=True)
        for old in others[KEEP_FINGERPRINTS:]:
            shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def cache_dir(path):
    """Use ``path`` as the cache (``"off"`` to turn it off) inside a ``with`` block (tests,
    benches). What is marked inside and not flushed there is forgotten at its end; what was
    marked before is put back."""
    before = os.environ.get("TRNSIM_CACHE_DIR")
    saved, keys = dict(_PENDING), dict(_KEYS)
    _PENDING.clear()
    _KEYS.clear()
    os.environ["TRNSIM_CACHE_DIR"] = str(path)
    try:
        yield
    finally:
        _PENDING.clear()
        _PENDING.update(saved)
        _KEYS.clear()
        _KEYS.update(keys)
        if before is None:
            del os.environ["TRNSIM_CACHE_DIR"]
        else:
            os.environ["TRNSIM_CACHE_DIR"] = before
