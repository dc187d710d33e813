"""Under -o passthrough, an open of a batch whose rows are 2 KiB or more,
stored as served and held in the page cache fills its memfd straight
from the source's mapping: nothing is generated, cached or prefetched.
The bytes are those a generating mount serves; reads through FUSE (no
passthrough) still generate; and a change to the source fails new opens'
reads with EIO."""
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


def bring_into_page_cache(*paths):
    """Reads each source just before a mount whose test asserts that
    nothing was generated: the rows are mapped only while the source is
    in the page cache, and this VM's proactive reclaim (DAMON) takes pages
    untouched for a minute (docs/benchmarks.md)."""
    for path in paths:
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass


def generated(m):
    return m.json("stats.json")["generation"]["batches"]


@pytest.mark.parametrize("strategy", ["shuffle", "streaming"])
def test_bytes_equal_a_generating_mount(mounts, wide, strategy):
    path, x = wide
    o = f"world_size=2,batch_size=32,strategy={strategy},seed=3"
    bring_into_page_cache(path)
    m = mounts(path, o + ",passthrough")
    # Through FUSE, and 2 MiB of cache leaves 1 MiB for the 1.5 MB of
    # rows: not mapped.
    gen = mounts(path, o + ",cache_mb=2")
    fuse = mounts(path, o)  # mapped, read through FUSE
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
        with open(name.replace(m.mnt, fuse.mnt, 1), "rb") as f:
            assert f.read() == got
        assert len(got) == os.path.getsize(name)
    for k in range(m.batches()):
        np.testing.assert_array_equal(m.load("batch", 1, 0, k),
                                      x[m.load("index", 1, 0, k)])
    # Nothing generated, prefetch included; the FUSE mounts generated
    # all (and prefetched beyond).
    assert "FUSE passthrough on" in m.log_text()
    assert generated(m) == 0
    for other in (gen, fuse):
        assert generated(other) >= len(batch_files(m))
    for r in m.json("stats.json")["ranks"]:
        reads = r["first_reads"]
        assert reads["ready"] >= 2 * m.batches(), reads
        assert reads["waited"] == reads["generated"] == 0, reads


def test_rows_of_several_files(mounts, tmp_path):
    rng = np.random.default_rng(12)
    parts = [rng.random((n, D), dtype=np.float32) for n in (250, 170)]
    for i, p in enumerate(parts):
        write_h5ad(str(tmp_path / f"part{i}.h5ad"), p)
    x = np.concatenate(parts)
    paths = [str(tmp_path / f"part{i}.h5ad") for i in range(len(parts))]
    bring_into_page_cache(*paths)
    m = mounts(paths, "world_size=2,batch_size=40,seed=1,passthrough")
    seen = []
    for r in (0, 1):
        for k in range(m.batches()):
            index = m.load("index", 2, r, k)
            np.testing.assert_array_equal(m.load("batch", 2, r, k),
                                          x[index])
            seen += list(index)
    assert len(set(seen)) == len(seen) and max(seen) >= 250
    assert generated(m) == 0


def test_cast_and_narrow_rows_are_generated(mounts, wide, tmp_path):
    path, x = wide
    m = mounts(path, "batch_size=32,dtype=float64,passthrough")
    np.testing.assert_array_equal(m.load("batch", 0, 0, 1),
                                  x[m.load("index", 0, 0, 1)])
    assert generated(m) >= 1
    narrow = np.arange(600 * 500, dtype=np.float32).reshape(600, 500)
    write_h5(str(tmp_path / "narrow.h5"), {"x": narrow})  # 2000-byte rows
    n = mounts(str(tmp_path / "narrow.h5"),
               "dataset=/x,batch_size=32,passthrough")
    assert n.json("dataset.json")["read_path"] == "mmap"
    np.testing.assert_array_equal(n.load("batch", 0, 0, 1),
                                  narrow[n.load("index", 0, 0, 1)])
    assert generated(n) >= 1


@pytest.mark.parametrize("how", ["replaced", "deleted", "truncated"])
def test_source_changed_fails_new_opens(mounts, tmp_path, how):
    path = tmp_path / "s.h5ad"
    x = np.random.default_rng(13).random((N, D), dtype=np.float32)
    write_h5ad(str(path), x)
    m = mounts(str(path), "batch_size=32,prefetch=0,passthrough")
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
    # Nothing of batch 0 was generated: opened again, it fails too (a
    # generated batch would still be served from the cache).
    for k in (0, 1):
        with pytest.raises(OSError) as e:
            m.load("batch", 0, 0, k)
        assert e.value.errno == errno.EIO
    # A file open before the change keeps its bytes.
    with held:
        np.testing.assert_array_equal(np.load(held),
                                      x[m.load("index", 0, 0, 2)])
    assert m.json("config.json")["batch_size"] == 32
    assert m.proc.poll() is None
    log = m.log_text()
    assert f"source {path}" in log and "new batches fail with EIO" in log
