# SPDX-License-Identifier: MIT
"""A source mapped into memory (read_path mmap, room in the chunk share of
cache_mb) serves the bytes a mount reading it with pread serves, through
FUSE reads at any offset, over several files, cast or not, rows wide or
narrow; and a change to the source fails the batches generated after it
with EIO."""
import errno
import os

import numpy as np
import pytest

from conftest import write_h5, write_h5ad

N, D = 600, 640  # 2560-byte float32 rows


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    d = tmp_path_factory.mktemp("wide")
    x = np.random.default_rng(11).random((N, D), dtype=np.float32)
    return write_h5ad(str(d / "wide.h5ad"), x), x


def batch_files(m, epochs=(0, 1)):
    return [m.file("batch", e, r, k) for e in epochs for r in (0, 1)
            for k in range(m.batches())]


def generated(m):
    return m.json("stats.json")["generation"]["batches"]


@pytest.mark.parametrize("strategy", ["shuffle", "streaming"])
def test_bytes_equal_a_generating_mount(mounts, wide, strategy):
    path, x = wide
    o = f"world_size=2,batch_size=32,strategy={strategy},seed=3"
    m = mounts(path, o)  # mapped
    # 2 MiB of cache leaves 1 MiB for the 1.5 MB of rows: not mapped.
    gen = mounts(path, o + ",cache_mb=2")
    assert m.json("dataset.json")["read_path"] == "mmap"
    assert gen.json("dataset.json")["read_path"] == "pread"
    for name in batch_files(m):
        theirs = name.replace(m.mnt, gen.mnt, 1)
        with open(name, "rb") as f, open(theirs, "rb") as g:
            got = f.read()
            assert got == g.read(), name
            # Slices across the header and rows' edges.
            for off, size in ((0, 1), (100, 200), (127, 2562),
                              (128 + 2559, 5000), (len(got) - 3, 10)):
                assert os.pread(f.fileno(), size, off) == \
                    got[off:off + size], (name, off, size)
        fd = os.open(name, os.O_RDONLY | os.O_DIRECT)  # through rankfs
        try:
            assert os.pread(fd, len(got) + 1, 0) == got
        finally:
            os.close(fd)
        assert len(got) == os.path.getsize(name)
    for k in range(m.batches()):
        np.testing.assert_array_equal(m.load("batch", 1, 0, k),
                                      x[m.load("index", 1, 0, k)])
    # Every mount generated every batch read (and prefetched beyond).
    for each in (m, gen):
        assert generated(each) >= len(batch_files(m))


def test_rows_of_several_files(mounts, tmp_path):
    rng = np.random.default_rng(12)
    parts = [rng.random((n, D), dtype=np.float32) for n in (250, 170)]
    for i, p in enumerate(parts):
        write_h5ad(str(tmp_path / f"part{i}.h5ad"), p)
    x = np.concatenate(parts)
    paths = [str(tmp_path / f"part{i}.h5ad") for i in range(len(parts))]
    m = mounts(paths, "world_size=2,batch_size=40,seed=1")
    assert m.json("dataset.json")["read_path"] == "mmap"
    seen = []
    for r in (0, 1):
        for k in range(m.batches()):
            index = m.load("index", 2, r, k)
            np.testing.assert_array_equal(m.load("batch", 2, r, k),
                                          x[index])
            seen += list(index)
    assert len(set(seen)) == len(seen) and max(seen) >= 250


def test_cast_and_narrow_rows(mounts, wide, tmp_path):
    path, x = wide
    m = mounts(path, "batch_size=32,dtype=float64")
    np.testing.assert_array_equal(m.load("batch", 0, 0, 1),
                                  x[m.load("index", 0, 0, 1)])
    assert generated(m) >= 1
    narrow = np.arange(600 * 500, dtype=np.float32).reshape(600, 500)
    write_h5(str(tmp_path / "narrow.h5"), {"x": narrow})  # 2000-byte rows
    n = mounts(str(tmp_path / "narrow.h5"),
               "dataset=/x,batch_size=32")
    assert n.json("dataset.json")["read_path"] == "mmap"
    np.testing.assert_array_equal(n.load("batch", 0, 0, 1),
                                  narrow[n.load("index", 0, 0, 1)])
    assert generated(n) >= 1


@pytest.mark.parametrize("how", ["replaced", "deleted", "truncated"])
def test_source_changed_under_a_mapped_mount(mounts, tmp_path, how):
    """Mapped rows: a file renamed over the source, or an unlink, changes
    nothing served (the mapping is of the file opened); a truncation fails
    every batch generated after it with EIO."""
    path = tmp_path / "s.h5ad"
    x = np.random.default_rng(13).random((N, D), dtype=np.float32)
    write_h5ad(str(path), x)
    m = mounts(str(path), "batch_size=32,prefetch=0")
    index = m.load("index", 0, 0, 0)
    np.testing.assert_array_equal(m.load("batch", 0, 0, 0), x[index])
    held = open(m.file("batch", 0, 0, 2), "rb")  # open across the change
    if how == "replaced":
        write_h5ad(str(tmp_path / "new.h5ad"), x + 1)
        os.replace(tmp_path / "new.h5ad", path)
    elif how == "deleted":
        os.unlink(path)
    else:
        os.truncate(path, os.path.getsize(path) // 3)
    for k in (1, 3):
        if how == "truncated":
            with pytest.raises(OSError) as e:
                m.load("batch", 0, 0, k)
            assert e.value.errno == errno.EIO
        else:
            np.testing.assert_array_equal(m.load("batch", 0, 0, k),
                                          x[m.load("index", 0, 0, k)])
    # A file open before the change keeps its bytes.
    with held:
        np.testing.assert_array_equal(np.load(held),
                                      x[m.load("index", 0, 0, 2)])
    assert m.json("config.json")["batch_size"] == 32
    assert m.proc.poll() is None
    log = m.log_text()
    if how == "truncated":
        assert f"source {path} changed in place" in log
        assert "new batches fail with EIO" in log
