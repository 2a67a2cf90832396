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
