"""FUSE passthrough (-o passthrough): the kernel reads opened files from
memory the daemon fills once per open. The bytes are those of a mount
without it, reads need no daemon at all, a mapping outlives the cache,
and failures stay where they were: at read."""
import ctypes
import errno
import mmap
import os

import numpy as np
import pytest
import scipy.sparse as sp

from conftest import without_daemon, write_h5, write_h5ad

ON = "FUSE passthrough on"
N = 1000


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("sources")
    rng = np.random.default_rng(7)
    dense = rng.random((N, 24), dtype=np.float32)
    gz = rng.random((N, 9))
    csr = sp.random(N, 300, density=0.05, format="csr", dtype=np.float32,
                    random_state=rng)
    wide = rng.random((N, 600), dtype=np.float32)  # filled from the mapping
    return {
        "dense": (write_h5ad(str(d / "dense.h5ad"), dense), dense, ""),
        "wide": (write_h5ad(str(d / "wide.h5ad"), wide), wide, ""),
        "gzip": (write_h5(str(d / "gz.h5"), {
            "g": (gz, dict(chunks=(64, 9), compression="gzip",
                           shuffle=True))}), gz, "dataset=/g"),
        "csr": (write_h5ad(str(d / "csr.h5ad"), csr), csr, ""),
    }


def every_file(m):
    """Relative paths of every file of epochs 0 and 1 (batch, index,
    .npz), sorted."""
    out = []
    for epoch in (0, 1):
        for rank in (0, 1):
            for kind in sorted(os.listdir(m.path("epoch", str(epoch),
                                                  "rank", str(rank)))):
                d = os.path.join("epoch", str(epoch), "rank", str(rank),
                                 kind)
                out += [os.path.join(d, n)
                        for n in sorted(os.listdir(m.path(d)))]
    return out


@pytest.mark.parametrize("kind", ["dense", "wide", "gzip", "csr"])
def test_bytes_equal_a_mount_without_it(mounts, sources, kind):
    path, x, extra = sources[kind]
    o = ",".join(p for p in (extra, "world_size=2,batch_size=64,seed=5")
                 if p)
    plain = mounts(path, o)
    m = mounts(path, o + ",passthrough")
    assert m.json("config.json")["passthrough"] is True
    names = every_file(m)
    assert names == every_file(plain) and len(names) > 30
    served = 0
    for name in names:
        with open(m.path(name), "rb") as f:
            got = f.read()
        with open(plain.path(name), "rb") as f:
            assert got == f.read(), name
        assert len(got) == os.path.getsize(m.path(name))
        served += len(got)
    # And the rows are the source's.
    for k in range(m.batches()):
        index = m.load("index", 1, 1, k)
        if kind == "csr":
            got = sp.load_npz(m.file("batch", 1, 1, k)[:-4] + ".npz")
            np.testing.assert_array_equal(got.toarray(),
                                          x[index].toarray())
        else:
            np.testing.assert_array_equal(m.load("batch", 1, 1, k),
                                          x[index])
    assert ON in m.log_text() and "passthrough off" not in m.log_text()
    assert ON not in plain.log_text()
    stats = m.json("stats.json")
    assert sum(r["bytes_served"] for r in stats["ranks"]) >= served
    if kind == "wide":  # memfds filled from the source's mapping
        assert stats["generation"]["batches"] == 0


def test_reads_need_no_daemon(mounts, sources):
    """An open file is read while the daemon is stopped: the kernel serves
    it alone. (Through FUSE the read would wait for the daemon.)"""
    path, _, _ = sources["dense"]
    m = mounts(path, "world_size=2,batch_size=64,passthrough")
    f = m.file("batch", 0, 1, 3)
    size = os.path.getsize(f)
    with open(f, "rb") as held:  # opened while the daemon runs
        stuck, got = without_daemon(
            m, lambda: len(os.pread(held.fileno(), size, 100)))
    assert not stuck, "a read of an open passthrough file waited for rankfs"
    assert got == size - 100
    assert ON in m.log_text() and "passthrough off" not in m.log_text()


def map_and_close(path):
    """A read-only shared mapping of path whose descriptor is closed at
    once (numpy's memmap keeps a duplicate open). @return (address,
    size)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                          ctypes.c_int, ctypes.c_int, ctypes.c_long]
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    finally:
        os.close(fd)
    assert addr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
    return addr, size


def copy_out(addr, size):
    """The bytes at addr, copied by libc's memcpy: a ctypes call lets go
    of the GIL, so a copy that waits for rankfs does not stop the test's
    clock (ctypes.string_at would hold it)."""
    buf = ctypes.create_string_buffer(size)
    ctypes.CDLL(None).memcpy(buf, ctypes.c_void_p(addr), ctypes.c_size_t(size))
    return buf.raw


def test_mapping_outlives_close_and_cache(mounts, tmp_path):
    """A mapping of a closed file keeps its bytes while later batches push
    the file out of a small batch cache, and reading it needs no daemon:
    the pages are the memfd's, never written again. np.load(mmap_mode=
    'r') opens a file twice at once: the two opens share its memfd."""
    x = np.arange(2000000, dtype=np.float32).reshape(20000, 100)
    path = write_h5(str(tmp_path / "s.h5"), {"x": x})
    m = mounts(path, "dataset=/x,batch_size=100,cache_mb=2,prefetch=0,"
               "passthrough")
    index = m.load("index", 0, 0, 0)
    shared = m.load("batch", 0, 0, 0, mmap_mode="r")
    np.testing.assert_array_equal(shared, x[index])
    del shared  # closes numpy's descriptor: the file is released
    with open(m.file("batch", 0, 0, 0), "rb") as f:
        expected = f.read()
    addr, size = map_and_close(m.file("batch", 0, 0, 0))
    try:
        for k in range(1, m.batches()):  # 199 other batches of 40 kB
            np.testing.assert_array_equal(m.load("batch", 0, 0, k),
                                          x[m.load("index", 0, 0, k)])
        # Batch 0 has left the cache: opened again, it is generated again.
        misses = m.json("stats.json")["cache"]["misses"]
        np.testing.assert_array_equal(m.load("batch", 0, 0, 0), x[index])
        assert m.json("stats.json")["cache"]["misses"] == misses + 1
        stuck, got = without_daemon(m, lambda: copy_out(addr, size))
        assert not stuck, "reading the mapping waited for rankfs"
        assert got == expected
    finally:
        ctypes.CDLL(None).munmap(ctypes.c_void_p(addr), ctypes.c_size_t(size))


def test_generation_errors_still_fail_the_read(mounts, tmp_path):
    x = np.arange(200000, dtype=np.float32).reshape(2000, 100)
    path = tmp_path / "s.h5"
    write_h5(str(path), {"x": x})
    m = mounts(str(path), "dataset=/x,batch_size=100,prefetch=0,"
               "passthrough")
    index = m.load("index", 0, 0, 0)
    np.testing.assert_array_equal(m.load("batch", 0, 0, 0), x[index])
    os.truncate(path, os.path.getsize(path) // 3)
    with open(m.file("batch", 0, 0, 1), "rb") as f:  # the open succeeds
        with pytest.raises(OSError) as e:
            f.read()
    assert e.value.errno == errno.EIO
    # What was generated is still served, through passthrough.
    np.testing.assert_array_equal(m.load("batch", 0, 0, 0), x[index])
    assert m.proc.poll() is None
