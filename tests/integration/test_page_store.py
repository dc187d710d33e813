# SPDX-License-Identifier: MIT
"""Files stored at open: through the page cache (the default), a batch
file's bytes are handed to the kernel before its open is answered, so its
reads never reach the daemon; with O_DIRECT they all do."""
import io
import os

import numpy as np
import pytest

from conftest import without_daemon, write_h5, write_h5ad

N, D = 1000, 24


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    d = tmp_path_factory.mktemp("store")
    x = np.random.default_rng(11).random((N, D), dtype=np.float32)
    return write_h5ad(str(d / "x.h5ad"), x), x


def read_all(fd, size):
    got = bytearray()
    while len(got) < size:
        piece = os.pread(fd, size - len(got), len(got))
        if not piece:
            break
        got += piece
    return bytes(got)


def open_then_read_stopped(m, f, flags=0):
    """Opens f while the daemon runs, and reads it whole while it is
    stopped. @return (stuck, the bytes, f's size), as without_daemon."""
    size = os.path.getsize(f)
    fd = os.open(f, os.O_RDONLY | flags)
    try:
        stuck, got = without_daemon(m, lambda: read_all(fd, size))
    finally:
        os.close(fd)
    return stuck, got, size


@pytest.mark.parametrize("extra", ["", ",-s"])
def test_reads_after_open_need_no_daemon(mounts, source, extra):
    """Opened while the daemon runs, the file is read whole while it is
    stopped: the bytes are the source rows of the batch's index file. One
    loop thread (-s) stores as well."""
    path, x = source
    m = mounts(path, "world_size=2,batch_size=64,seed=5",
               extra=("-s",) if extra else ())
    index = m.load("index", 2, 1, 3)
    stuck, got, size = open_then_read_stopped(m, m.file("batch", 2, 1, 3))
    assert not stuck, "a read of a stored file waited for rankfs"
    assert len(got) == size
    np.testing.assert_array_equal(np.load(io.BytesIO(got)), x[index])
    # Counted once, when stored: no read of it reached the daemon (the
    # index file read above is counted too).
    served = m.json("stats.json")["ranks"][1]["bytes_served"]
    assert served == size + os.path.getsize(m.file("index", 2, 1, 3))


def test_o_direct_reads_reach_the_daemon(mounts, source):
    """The same read through an O_DIRECT open waits for the daemon: what
    the test above tells apart."""
    path, _ = source
    m = mounts(path, "world_size=2,batch_size=64")
    stuck, got, size = open_then_read_stopped(m, m.file("batch", 0, 0, 0),
                                              os.O_DIRECT)
    assert stuck
    assert len(got) == size


def test_o_direct_read_is_counted_once(mounts, source):
    """An O_DIRECT open stores nothing (its reads bypass the page cache):
    one read of the file counts its bytes and one first read, as the
    reads reach the daemon, not a second time at the open."""
    path, _ = source
    m = mounts(path, "world_size=2,batch_size=64,prefetch=0")
    f = m.file("batch", 0, 1, 2)
    size = os.path.getsize(f)
    before = m.json("stats.json")["ranks"][1]
    fd = os.open(f, os.O_RDONLY | os.O_DIRECT)
    try:
        assert len(read_all(fd, size)) == size
    finally:
        os.close(fd)
    after = m.json("stats.json")["ranks"][1]
    assert after["bytes_served"] - before["bytes_served"] == size
    assert sum(after["first_reads"].values()) - \
        sum(before["first_reads"].values()) == 1


def test_open_while_open_elsewhere_is_served(mounts, source):
    """Two opens of one file at once (the second is not stored: a read of
    it may be waiting for the daemon) read the source rows, and so do
    opens after they are closed and the pages dropped."""
    path, x = source
    m = mounts(path, "world_size=2,batch_size=64")
    index = m.load("index", 0, 0, 1)
    f = m.file("batch", 0, 0, 1)
    size = os.path.getsize(f)
    with open(f, "rb") as first:
        with open(f, "rb") as second:
            a = read_all(first.fileno(), size)
            b = read_all(second.fileno(), size)
    np.testing.assert_array_equal(np.load(io.BytesIO(a)), x[index])
    assert a == b
    # Stored once (its size counted at that open); the second open read
    # the pages the first stored, and reached rankfs only to open.
    served = m.json("stats.json")["ranks"][0]["bytes_served"]
    assert served == size + os.path.getsize(m.file("index", 0, 0, 1))
    for _ in range(3):  # reopened after closes: stored or read again
        np.testing.assert_array_equal(np.load(f), x[index])


def test_open_files_read_alternately_in_pieces_generate_once(mounts,
                                                             tmp_path):
    """Two open 16 MB batch files read alternately in 1 MiB pieces with
    cache_mb=40 (the batch cache holds one of them): each is generated
    once, at its first open, whose bytes the page cache keeps while it is
    open. direct_io, which rankfs had until this test, generated them 32
    times between them."""
    x = np.random.default_rng(4).random((8192, 1000), dtype=np.float32)
    path = write_h5(str(tmp_path / "big.h5"), {"x": x})
    m = mounts(path, "dataset=/x,batch_size=4096,prefetch=0,cache_mb=40")
    files = [m.file("batch", 0, 0, k) for k in (0, 1)]
    size = os.path.getsize(files[0])
    assert size > 16_000_000
    fds = [os.open(f, os.O_RDONLY) for f in files]
    try:
        got = [bytearray(), bytearray()]
        for off in range(0, size, 1 << 20):
            for k in (0, 1):
                got[k] += os.pread(fds[k], 1 << 20, off)
    finally:
        for fd in fds:
            os.close(fd)
    for k in (0, 1):
        index = m.load("index", 0, 0, k)
        np.testing.assert_array_equal(np.load(io.BytesIO(bytes(got[k]))),
                                      x[index])
    assert m.json("stats.json")["generation"]["batches"] == 2
