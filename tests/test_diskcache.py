"""The cache of derived figures on disk: a round trip, what makes it stale, turning it off,
files that do not load, and what it refuses to write."""

import doctest
import os
import pickle
import time

import pytest

from tlm import diskcache


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """The cache in a folder of the test's own (the fingerprint worked out again)."""
    monkeypatch.setitem(diskcache._STATE, "fingerprint", "test")
    with diskcache.cache_dir(tmp_path):
        yield tmp_path


def test_doctests():
    result = doctest.testmod(diskcache)
    assert result.attempted > 0 and result.failed == 0


def test_a_kept_object_comes_back_equal_from_another_process_s_point_of_view(folder):
    value = {"a": [1.5, 2.25], "b": (None, "x")}
    assert diskcache.load("kind", ("k", 1)) is None
    diskcache.keep("kind", ("k", 1), value)
    assert diskcache.flush() == 1
    assert diskcache.flush() == 0  # nothing new
    diskcache._PENDING.clear()  # as a new process: nothing loaded yet
    assert diskcache.load("kind", ("k", 1)) == value
    assert diskcache.load("kind", ("k", 2)) is None
    assert diskcache.load("other", ("k", 1)) is None


def test_a_grown_object_is_written_again(folder):
    memo = {1: 1.0}
    diskcache.keep("memo", ("m",), memo, size=len)
    assert diskcache.flush() == 1
    assert diskcache.flush() == 0
    memo[2] = 2.0
    assert diskcache.flush() == 1
    diskcache._PENDING.clear()
    loaded = diskcache.load("memo", ("m",), size=len)
    assert loaded == {1: 1.0, 2: 2.0}
    assert diskcache.flush() == 0  # loaded and unchanged
    loaded[3] = 3.0
    assert diskcache.flush() == 1


def test_key_of_names_what_was_loaded_or_kept(folder):
    value = [1, 2]
    assert diskcache.key_of(value) is None
    diskcache.keep("list", ("l",), value)
    assert diskcache.key_of(value) == ("list", ("l",))
    assert diskcache.key_of([1, 2]) is None  # an equal object is not that one


def test_the_fingerprint_follows_every_file_of_the_package(tmp_path, monkeypatch):
    """A file's edit (size or time), a new file and a new folder each make a new
    fingerprint; byte code does not."""
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "a.py").write_text("x = 1\n")
    (root / "sub" / "data.toml").write_text("y = 2\n")
    monkeypatch.setattr(diskcache, "_ROOT", root)

    def fingerprint():
        diskcache._STATE.pop("fingerprint", None)
        return diskcache.fingerprint()

    seen = {fingerprint()}
    assert fingerprint() in seen  # stable
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert fingerprint() in seen
    (root / "sub" / "data.toml").write_text("y = 3\n")  # same size, a later time
    os.utime(root / "sub" / "data.toml", ns=(1, 10**18))
    assert fingerprint() not in seen
    seen.add(fingerprint())
    (root / "a.py").write_text("x = 10\n")  # another size
    assert fingerprint() not in seen
    seen.add(fingerprint())
    (root / "b.py").write_text("")
    assert fingerprint() not in seen
    seen.add(fingerprint())
    (root / "new").mkdir()
    (root / "new" / "c.py").write_text("")
    assert fingerprint() not in seen
    diskcache._STATE.pop("fingerprint", None)


def test_the_manifest_gives_the_listing_s_fingerprint_until_anything_changes(tmp_path, monkeypatch):
    """Through the manifest kept in the cache: the same fingerprint as a full listing while
    nothing changed; an edit of a file in place (same size, a later time; another size), a
    new file, a new folder, a removed file each make a new one (the manifest is not
    trusted); a listing younger than SETTLE_S is not kept."""
    root = tmp_path / "pkg"
    (root / "sub").mkdir(parents=True)
    (root / "a.py").write_text("x = 1\n")
    (root / "sub" / "data.toml").write_text("y = 2\n")
    monkeypatch.setattr(diskcache, "_ROOT", root)
    cache = tmp_path / "cache"

    settled = [10**18]

    def settle():  # every entry of the package older than SETTLE_S (a time of its own)
        settled[0] += 1000
        for path in [root, *root.rglob("*")]:
            os.utime(path, ns=(settled[0], settled[0]))

    def fingerprint(listed=False):
        """A new process's fingerprint (through the manifest unless ``listed``), and whether
        it came from the manifest; its manifest written as trnsim does after a command."""
        diskcache._STATE.pop("fingerprint", None)
        diskcache._STATE.pop("manifest", None)
        calls = []
        listing = diskcache._listing
        monkeypatch.setattr(diskcache, "_listing", lambda: calls.append(1) or listing())
        with diskcache.cache_dir("off" if listed else cache):
            got = diskcache.fingerprint()
            diskcache.flush()
        monkeypatch.setattr(diskcache, "_listing", listing)
        return got, not calls

    settle()
    first, kept = fingerprint()
    assert not kept and list(cache.glob("manifest-*.pickle"))
    assert fingerprint() == (first, True)  # from the manifest
    assert fingerprint(listed=True) == (first, False)  # a listing agrees
    seen = {first}
    changes = [
        lambda: os.utime(root / "sub" / "data.toml", ns=(1, time.time_ns())),  # time only
        lambda: (root / "a.py").write_text("x = 10\n"),  # another size
        lambda: (root / "b.py").write_text(""),
        lambda: (root / "new").mkdir() or (root / "new" / "c.py").write_text(""),
        lambda: (root / "sub" / "d.toml").write_text(""),  # only its folder's time moves
        lambda: (root / "b.py").unlink(),
    ]
    for i, change in enumerate(changes):
        change()
        got, kept = fingerprint()
        assert not kept and got not in seen, i
        assert fingerprint(listed=True) == (got, False), i
        seen.add(got)
        assert fingerprint() == (got, False), i  # too young to be kept: listed again
        settle()
        assert fingerprint()[0] != got  # (the times moved: another fingerprint)
        got, kept = fingerprint()
        assert kept, i  # settled: the manifest kept and used
        seen.add(got)
    diskcache._STATE.pop("fingerprint", None)


def test_off_reads_and_writes_nothing(tmp_path):
    with diskcache.cache_dir(tmp_path):
        diskcache.keep("kind", ("k",), 1)
        assert diskcache.flush() == 1
    for setting in ("off", "", "OFF", "none", "0"):
        with diskcache.cache_dir(setting):
            assert diskcache.directory() is None
            assert diskcache.load("kind", ("k",)) is None
            diskcache.keep("kind", ("k2",), 2)
            assert diskcache.flush() == 0


def test_default_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("TRNSIM_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert diskcache.directory() == tmp_path / "trnsim"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert diskcache.directory() == tmp_path / "home" / ".cache" / "trnsim"


def test_a_file_that_does_not_load_is_a_miss(folder):
    diskcache.keep("kind", ("k",), {"x": 1})
    assert diskcache.flush() == 1
    (path,) = folder.rglob("*.pickle")
    path.write_bytes(path.read_bytes()[:10])  # truncated
    assert diskcache.load("kind", ("k",)) is None
    path.write_bytes(pickle.dumps((("another key",), 5)))  # a digest's collision
    assert diskcache.load("kind", ("k",)) is None


def test_what_does_not_pickle_or_is_too_large_is_not_written(folder, monkeypatch):
    diskcache.keep("kind", ("lambda",), lambda: 1)
    assert diskcache.flush() == 0
    monkeypatch.setattr(diskcache, "MAX_BYTES", 100)
    diskcache.keep("kind", ("large",), b"x" * 200)
    diskcache.keep("kind", ("small",), b"x")
    assert diskcache.flush() == 1
    assert not list(folder.rglob("*.tmp"))
    assert diskcache.load("kind", ("large",)) is None


def test_an_unwritable_folder_is_not_an_error(tmp_path, monkeypatch):
    monkeypatch.setitem(diskcache._STATE, "fingerprint", "test")
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with diskcache.cache_dir(blocked):
        diskcache.keep("kind", ("k",), 1)
        assert diskcache.flush() == 0


def test_only_the_newest_fingerprints_are_kept(tmp_path, monkeypatch):
    for i in range(diskcache.KEEP_FINGERPRINTS + 2):
        monkeypatch.setitem(diskcache._STATE, "fingerprint", f"f{i}")
        with diskcache.cache_dir(tmp_path):
            diskcache.keep("kind", ("k",), i)
            assert diskcache.flush() == 1
        os.utime(tmp_path / f"v{diskcache.FORMAT}-f{i}", (i + 1, i + 1))
    left = sorted(p.name for p in tmp_path.iterdir())
    first = 2
    assert left == [f"v{diskcache.FORMAT}-f{i}" for i in range(first, first + 4)]
