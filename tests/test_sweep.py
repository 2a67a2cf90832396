"""The chunked, resumable evaluation under every strategy search (tlm.sweep)."""

import numpy as np
import pytest

from tlm.sweep import check_scheduler, digest, run_chunks

pytestmark = pytest.mark.numerics  # rerun with numpy's SIMD loops off

CALLS = []


def cube(offset, start, stop):
    CALLS.append((start, stop))
    return {"x": np.arange(start, stop) ** 3 + offset, "dropped": np.zeros(stop - start)}


def test_chunks_cover_every_candidate_in_order():
    parts, resumed = run_chunks(cube, (2,), total=7, chunk=3, outputs=("x",), scheduler="inline")
    assert resumed == 0
    assert np.concatenate([p["x"] for p in parts]).tolist() == [i**3 + 2 for i in range(7)]
    assert all(set(p) == {"x"} for p in parts)


def test_a_rerun_reads_back_what_was_done_and_evaluates_only_the_rest(tmp_path):
    key = digest("cube", 2)
    run_chunks(
        cube, (2,), total=7, chunk=3, outputs=("x",), scheduler="inline", out_dir=tmp_path, key=key
    )
    (tmp_path / "chunk-00001-of-00003-3.npz").unlink()  # as if its worker had been killed
    CALLS.clear()
    parts, resumed = run_chunks(
        cube, (2,), total=7, chunk=3, outputs=("x",), scheduler="inline", out_dir=tmp_path, key=key
    )
    assert resumed == 2 and CALLS == [(3, 6)]
    assert np.concatenate([p["x"] for p in parts]).tolist() == [i**3 + 2 for i in range(7)]
    with pytest.raises(ValueError, match="holds another search's chunks"):
        run_chunks(
            cube,
            (3,),
            total=7,
            chunk=3,
            outputs=("x",),
            scheduler="inline",
            out_dir=tmp_path,
            key=digest("cube", 3),
        )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"chunk": 0}, "chunk must be a positive integer, not 0"),
        ({"workers": 0}, "workers must be a positive integer, not 0"),
        ({"scheduler": "cloud"}, "scheduler must be local, inline or a Dask scheduler's"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    args = {"total": 4, "chunk": 2, "outputs": ("x",), "scheduler": "inline", **kwargs}
    with pytest.raises(ValueError, match=message):
        run_chunks(cube, (0,), **args)


def test_scheduler_names_and_addresses():
    assert check_scheduler("tcp://10.0.0.1:8786") == "tcp://10.0.0.1:8786"
    assert check_scheduler("local") == "local"
    with pytest.raises(ValueError, match="not 3"):
        check_scheduler(3)


def test_a_truncated_or_corrupt_chunk_is_evaluated_again(tmp_path):
    """A chunk cut short (a full disk, a copy interrupted) or with other bytes than its
    checksum says is read as missing: evaluated again, never a traceback on every rerun."""
    key = digest("cube", 2)
    args = dict(total=9, chunk=3, outputs=("x",), scheduler="inline", out_dir=tmp_path, key=key)
    run_chunks(cube, (2,), **args)
    first, second = sorted(tmp_path.glob("chunk-*.npz"))[:2]
    first.write_bytes(first.read_bytes()[:100])  # truncated
    raw = bytearray(second.read_bytes())
    at = raw.find(np.int64(3**3 + 2).tobytes())  # one of its values, flipped
    raw[at] ^= 0xFF
    second.write_bytes(bytes(raw))
    CALLS.clear()
    parts, resumed = run_chunks(cube, (2,), **args)
    assert resumed == 1 and sorted(CALLS) == [(0, 3), (3, 6)]
    assert np.concatenate([p["x"] for p in parts]).tolist() == [i**3 + 2 for i in range(9)]


def crash_once(marker, start, stop):
    """A task whose worker process dies the first time it meets chunk 3..6 (``marker`` is a
    file the crash leaves behind, so the rerun succeeds)."""
    import os
    from pathlib import Path

    if start == 3 and not Path(marker).exists():
        Path(marker).write_text("crashed")
        os._exit(1)  # the worker process dies without a word, as a killed one does
    return {"x": np.arange(start, stop) ** 3}


def test_the_last_worker_killed_mid_search_is_survived(tmp_path):
    """One worker, killed during a chunk: its nanny restarts it and the chunk runs again. The
    shared arguments travel with the tasks; scattered, they died with the only worker that
    held them and every task after ended in a FutureCancelledError."""
    from dask.distributed import LocalCluster

    marker = tmp_path / "crashed"
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None) as cluster:
        parts, _ = run_chunks(
            crash_once,
            (str(marker),),
            total=9,
            chunk=3,
            outputs=("x",),
            scheduler=cluster.scheduler_address,
        )
    assert marker.exists()  # the worker did die
    assert np.concatenate([p["x"] for p in parts]).tolist() == [i**3 for i in range(9)]


def test_the_client_keeps_the_chunks_in_its_own_folder(tmp_path, monkeypatch):
    """out_dir is the client's: a relative path is the client's folder, whatever folder the
    workers run in (the docs' own example failed every task when workers wrote it)."""
    monkeypatch.chdir(tmp_path)
    key = digest("cube", 5)
    args = dict(total=6, chunk=3, outputs=("x",), scheduler="local", workers=1, key=key)
    run_chunks(cube, (5,), out_dir="chunks", **args)
    assert len(list((tmp_path / "chunks").glob("chunk-*.npz"))) == 2
    CALLS.clear()
    parts, resumed = run_chunks(cube, (5,), out_dir="chunks", **{**args, "scheduler": "inline"})
    assert resumed == 2 and CALLS == []
