# SPDX-License-Identifier: MIT
"""The fetch layer through real mounts: CSR sources as dense .npy and as
.npz, compressed and chunked sources read without HDF5, dtype casts,
layers and raw, and prefetch."""
import os
import time
import warnings
import zipfile

import anndata
import h5py
import numpy as np
import pytest
import scipy.sparse as sp

from conftest import PageCacheProbe, run_rankfs, write_h5

N, D = 900, 50


def csr_matrix(rng, n=N, d=D, density=0.1, dtype=np.float32):
    m = sp.random(n, d, density=density, format="csr", random_state=rng,
                  dtype=dtype)
    m.data[:] = rng.integers(1, 100, m.nnz)  # exact in every dtype
    m[5] = 0  # an empty row
    m.eliminate_zeros()
    return m.tocsr()


def write_adata(path, x, compression=None, **extra):
    n = x.shape[0]
    import pandas as pd
    ad = anndata.AnnData(
        X=x, obs=pd.DataFrame(index=[f"c{i}" for i in range(n)]),
        var=pd.DataFrame(index=[f"g{j}" for j in range(x.shape[1])]),
        **extra)
    ad.write_h5ad(path, compression=compression)
    return str(path)


@pytest.fixture(scope="module")
def csr(tmp_path_factory):
    d = tmp_path_factory.mktemp("csr")
    rng = np.random.default_rng(3)
    x = csr_matrix(rng)
    return {"x": x, "plain": write_adata(d / "plain.h5ad", x),
            "gzip": write_adata(d / "gzip.h5ad", x, compression="gzip"),
            "dir": d}


def check_npz(m, x, epoch, rank, batch):
    index = m.load("index", epoch, rank, batch)
    path = m.file("batch", epoch, rank, batch)[:-4] + ".npz"
    with open(path, "rb") as f:
        raw = f.read()
    assert os.stat(path).st_size == len(raw)
    assert os.stat(path).st_blksize == 1 << 20  # zipfile's buffer
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None  # every CRC-32 is right
        assert sorted(z.namelist()) == ["data.npy", "format.npy",
                                        "indices.npy", "indptr.npy",
                                        "shape.npy"]
        assert all(i.compress_type == zipfile.ZIP_STORED
                   for i in z.infolist())
    got = sp.load_npz(path)
    want = x[index]
    assert got.format == "csr" and got.shape == want.shape
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.indptr, want.indptr)
    np.testing.assert_array_equal(got.indices, want.indices)
    np.testing.assert_array_equal(got.data, want.data)
    return got


def test_npz_size_known_before_generation(mounts, csr):
    """A .npz's size comes from indptr alone: a stat generates nothing,
    and it is the size of the bytes read later."""
    m = mounts(csr["plain"], "batch_size=64,prefetch=0")
    path = m.file("batch", 3, 0, 2)[:-4] + ".npz"
    size = os.stat(path).st_size
    stats = m.json("stats.json")
    assert stats["cache"]["misses"] == stats["generation"]["batches"] == 0
    with open(path, "rb") as f:
        assert len(f.read()) == size
    assert m.json("stats.json")["generation"]["batches"] == 1


@pytest.mark.parametrize("kind", ["plain", "gzip"])
def test_csr_npy_and_npz_exact(mounts, csr, kind):
    x = csr["x"]
    m = mounts(csr[kind], "world_size=2,batch_size=64,strategy=shuffle")
    info = m.json("dataset.json")
    assert info["format"] == "csr" and info["nnz"] == x.nnz
    # anndata writes sparse parts chunked (resizable) even uncompressed:
    # both are read without HDF5, unfiltered chunks straight from the file.
    assert info["read_path"] == ("mmap" if kind == "plain" else "chunks")
    assert [s["layout"] for s in info["sources"]] == ["chunked"]
    names = os.listdir(m.path("epoch/0/rank/1/batch"))
    nb = N // 128
    assert sorted(names) == sorted([f"{k:06d}.npy" for k in range(nb)] +
                                   [f"{k:06d}.npz" for k in range(nb)])
    for epoch, rank, k in ((0, 0, 0), (0, 1, nb - 1), (3, 1, 2)):
        index = m.load("index", epoch, rank, k)
        dense = m.load("batch", epoch, rank, k)
        assert dense.dtype == np.float32 and dense.shape == (64, D)
        np.testing.assert_array_equal(dense, x[index].toarray())
        check_npz(m, x, epoch, rank, k)
    # The step view has the .npz too.
    with open(m.path("step/rank/1/000000002.npz"), "rb") as f, \
            open(m.file("batch", 0, 1, 2)[:-4] + ".npz", "rb") as g:
        assert f.read() == g.read()
    assert os.stat(m.path("step/rank/1/000000002.npz")).st_blksize == 1 << 20
    assert os.stat(m.path("step/rank/1/000000002.npy")).st_blksize == 4096


def test_csr_every_row_once_including_empty(mounts, csr):
    x = csr["x"]
    m = mounts(csr["plain"], "batch_size=100,drop_last=0,strategy=shuffle")
    rows = np.concatenate(m.epoch_index(0, 0))
    assert sorted(rows) == list(range(N))
    got = sp.vstack([sp.load_npz(m.file("batch", 0, 0, k)[:-4] + ".npz")
                     for k in range(m.batches())])
    np.testing.assert_array_equal(got.toarray(), x[rows].toarray())


def test_csr_int64_indices_and_float64(mounts, tmp_path):
    """A csr_matrix group as anndata lays it out, with int64 indices."""
    rng = np.random.default_rng(5)
    x = csr_matrix(rng, dtype=np.float64)
    path = str(tmp_path / "wide.h5ad")
    with h5py.File(path, "w") as f:
        g = f.create_group("X")
        g.attrs["encoding-type"] = "csr_matrix"
        g.attrs["encoding-version"] = "0.1.0"
        g.attrs["shape"] = np.array(x.shape)
        g["data"] = x.data
        g["indices"] = x.indices.astype(np.int64)
        g["indptr"] = x.indptr.astype(np.int64)
    m = mounts(path, "batch_size=50,dtype=float32")
    index = m.load("index", 0, 0, 3)
    got = sp.load_npz(m.file("batch", 0, 0, 3)[:-4] + ".npz")
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.toarray(),
                                  x[index].toarray().astype(np.float32))
    np.testing.assert_array_equal(m.load("batch", 0, 0, 3),
                                  x[index].toarray().astype(np.float32))


@pytest.mark.parametrize("layout", ["contiguous", "chunked"])
@pytest.mark.parametrize("reads", ["io_uring", "preadv"])
@pytest.mark.parametrize("strategy", ["shuffle", "block_shuffle"])
def test_csr_parts_read_by_ranges(mounts, tmp_path, monkeypatch, layout,
                                  reads, strategy):
    """CSR parts stored as is, contiguous (h5py's default) or in
    unfiltered chunks (anndata's resizable layout), with no room to map
    them: a batch's ranges of values and column ids are read together
    (io_uring, or preadv where it is off), a read per chunk crossed, and
    placed row by row."""
    if reads == "preadv":
        monkeypatch.setenv("RANKFS_NO_URING", "1")
    rng = np.random.default_rng(11)
    x = csr_matrix(rng, n=8000, d=1000, density=0.05)  # 3.2 MB: no map
    path = str(tmp_path / f"{layout}.h5")
    # 997 values a chunk: rows (about 50 values) cross chunk boundaries.
    kw = dict(maxshape=(None,), chunks=(997,)) if layout == "chunked" \
        else {}
    with h5py.File(path, "w") as f:
        g = f.create_group("X")
        g.attrs["encoding-type"] = "csr_matrix"
        g.attrs["shape"] = np.array(x.shape)
        g.create_dataset("data", data=x.data, **kw)
        g.create_dataset("indices", data=x.indices, **kw)
        g["indptr"] = x.indptr
    m = mounts(path, "dataset=/X,world_size=2,batch_size=64,block_size=8,"
               f"strategy={strategy},cache_mb=2")
    info = m.json("dataset.json")
    assert info["read_path"] == "pread"
    assert [s["layout"] for s in info["sources"]] == [layout]
    for rank in (0, 1):
        for k in (0, 7, m.batches() - 1):
            got = check_npz(m, x, 0, rank, k)
            np.testing.assert_array_equal(m.load("batch", 0, rank, k),
                                          got.toarray())
    # The reads went the way asked (a kernel without io_uring fails the
    # io_uring case rather than test preadv twice).
    assert ("reading with preadv" in m.log_text()) == (reads == "preadv")


@pytest.mark.parametrize("cache_mb,read_path", [(64, "mmap"), (4, "pread")])
def test_one_dimensional_rows_in_raw_chunks(mounts, tmp_path, cache_mb,
                                            read_path):
    """A 1-D dataset in unfiltered chunks (h5py's resizable default) is
    read at its chunks' addresses: copied from the mapping where it fits,
    else row by row in reads submitted together."""
    x = np.random.default_rng(12).random(1_000_000, dtype=np.float32)
    path = str(tmp_path / "vector.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=x, maxshape=(None,), chunks=(4096,))
    m = mounts(path, f"dataset=/v,batch_size=500,world_size=2,"
               f"cache_mb={cache_mb}")
    info = m.json("dataset.json")
    assert info["read_path"] == read_path
    assert [s["layout"] for s in info["sources"]] == ["chunked"]
    for rank, k in ((0, 0), (1, 5), (1, m.batches() - 1)):
        got = m.load("batch", 0, rank, k)
        assert got.shape == (500,)
        np.testing.assert_array_equal(got, x[m.load("index", 0, rank, k)])


@pytest.mark.parametrize("dtype,options", [
    (np.float32, ""), (np.int16, ""), (np.float64, ",dtype=float16")])
def test_csr_duplicate_entries_add_up(mounts, tmp_path, dtype, options):
    # Not canonical, but valid for scipy: a row may list a column twice
    # (toarray() adds them up) and store a -0.0 (which toarray() turns
    # into 0.0). A batch's .npy is then its .npz's toarray().
    n, d = 64, 5
    indptr = np.arange(0, 2 * n + 1, 2)
    indices = np.tile([1, 3], n)
    indices[0:2] = [2, 2]  # row 0: column 2 twice
    data = np.arange(1, 2 * n + 1).astype(dtype)
    if dtype == np.int16:
        data[0:2] = [30000, 30000]  # wraps, as in numpy
    else:
        data[2] = -0.0
    x = sp.csr_matrix((data, indices, indptr), shape=(n, d))
    assert not x.has_canonical_format
    path = str(tmp_path / "dup.h5")
    with h5py.File(path, "w") as f:
        g = f.create_group("M")
        g.attrs["encoding-type"] = "csr_matrix"
        g.attrs["shape"] = np.array(x.shape)
        g["data"], g["indices"], g["indptr"] = data, indices, indptr
    m = mounts(path, "dataset=/M,batch_size=8,strategy=streaming" + options)
    npz = sp.load_npz(m.file("batch", 0, 0, 0)[:-4] + ".npz")
    # float16 values are stored as float32, as scipy keeps a float16
    # matrix: its toarray() works (it failed on the float16 .npz of the
    # build of f9e14c2).
    assert npz.dtype == (np.float32 if "float16" in options else dtype)
    got = m.load("batch", 0, 0, 0)
    np.testing.assert_array_equal(got, x.toarray()[:8].astype(got.dtype))
    np.testing.assert_array_equal(npz.toarray().astype(got.dtype), got)
    if dtype != np.int16:
        assert not np.signbit(got).any()


def test_csr_split_files_serve_the_same_npz(mounts, csr, tmp_path):
    x = csr["x"]
    parts = []
    for i, (a, b) in enumerate(((0, 300), (300, 700), (700, N))):
        parts.append(write_adata(tmp_path / f"p{i}.h5ad", x[a:b]))
    o = "world_size=2,batch_size=64"
    one = mounts(csr["plain"], o)
    many = mounts(parts, o)
    # dataset.json counts the stored values of every file (the first
    # file's only with the build of f9e14c2).
    assert many.json("dataset.json")["nnz"] == x.nnz
    assert one.json("dataset.json")["nnz"] == x.nnz
    for k in range(one.batches()):
        for r in (0, 1):
            for ext in ("npy", "npz"):
                f = one.file("batch", 1, r, k)[:-3] + ext
                g = many.file("batch", 1, r, k)[:-3] + ext
                with open(f, "rb") as a, open(g, "rb") as b:
                    assert a.read() == b.read()


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    d = tmp_path_factory.mktemp("dense")
    rng = np.random.default_rng(4)
    x = rng.random((N, D), dtype=np.float32)
    counts = rng.integers(0, 255, (N, D)).astype(np.uint8)
    raw = anndata.AnnData(X=rng.random((N, D + 3), dtype=np.float32))
    import pandas as pd
    raw.var_names = [f"r{j}" for j in range(D + 3)]
    ad = anndata.AnnData(X=x, layers={"counts": counts},
                         obs=pd.DataFrame(index=[f"c{i}" for i in range(N)]))
    ad.raw = raw
    path = str(d / "layers.h5ad")
    ad.write_h5ad(path)
    gz = write_adata(d / "gz.h5ad", x, compression="gzip")
    return {"x": x, "counts": counts, "raw": raw.X, "path": path, "gz": gz,
            "dir": d}


def test_dense_gzip_through_chunks(mounts, dense):
    m = mounts(dense["gz"], "world_size=2,batch_size=50,strategy=shuffle")
    info = m.json("dataset.json")
    assert info["layout"] == "chunked" and info["read_path"] == "chunks"
    for k in range(m.batches()):
        index = m.load("index", 0, 1, k)
        np.testing.assert_array_equal(m.load("batch", 0, 1, k),
                                      dense["x"][index])


@pytest.mark.parametrize("options,expect", [
    ("layer=counts", "counts"), ("raw", "raw")])
def test_layer_and_raw(mounts, dense, options, expect):
    m = mounts(dense["path"], f"batch_size=100,{options}")
    src = dense[expect]
    index = m.load("index", 0, 0, 2)
    np.testing.assert_array_equal(m.load("batch", 0, 0, 2), src[index])
    assert m.json("dataset.json")["columns"] == src.shape[1]


@pytest.mark.parametrize("src_dtype,to,cast", [
    (np.uint8, "float32", lambda a: a.astype(np.float32)),
    (np.float64, "float16", lambda a: a.astype(np.float16)),
    (np.float32, "int16", lambda a: np.clip(np.trunc(a), -32768,
                                            32767).astype(np.int16)),
    (np.int32, "uint8", lambda a: a.astype(np.uint8)),
    (np.int64, "float32", lambda a: a.astype(np.float32)),
])
def test_dtype_casts(mounts, tmp_path, src_dtype, to, cast):
    rng = np.random.default_rng(6)
    if np.issubdtype(src_dtype, np.floating):
        data = (rng.standard_normal((400, 7)) * 50000).astype(src_dtype)
        data[0, :3] = [np.nan, np.inf, -np.inf] if to == "float16" else \
            [1e10, -1e10, 0.5]
        # Just above halfway between two halves: rounding through float32
        # first would land on the lower one.
        data[1, :2] = [1 + 2**-11 + 2**-30, -(2**-25 + 2**-60)]
    else:
        data = rng.integers(0, 1000, (400, 7)).astype(src_dtype)
        if src_dtype == np.int64:  # rounds twice through double
            data[1, :2] = [2**60 + 2**36 + 1, -(2**60 + 2**36 + 1)]
    path = write_h5(str(tmp_path / "d.h5"), {"x": data})
    m = mounts(path, f"dataset=/x,batch_size=40,dtype={to},strategy=streaming")
    got = np.concatenate([m.load("batch", 0, 0, k) for k in range(10)])
    assert got.dtype == np.dtype(to)
    with np.errstate(invalid="ignore", over="ignore"):
        want = cast(data)
    np.testing.assert_array_equal(got, want)
    assert m.json("dataset.json")["served_dtype"] == to


def served_rows(m):
    """Every batch of epoch 0, rank 0, and the source rows it says it has."""
    got = [m.load("batch", 0, 0, k) for k in range(m.batches())]
    index = [m.load("index", 0, 0, k) for k in range(m.batches())]
    return np.concatenate(got), np.concatenate(index)


@pytest.mark.parametrize("name,kw,read_path", [
    ("contiguous", {}, "mmap"),
    ("chunked", dict(chunks=(10, 8)), "chunks"),
    ("gzip", dict(chunks=(10, 8), compression="gzip", shuffle=True),
     "chunks"),
])
def test_file_with_userblock(mounts, tmp_path, name, kw, read_path):
    # A userblock (bytes before the HDF5 superblock) moves every address;
    # HDF5 1.10 leaves it out of chunk addresses, not of dataset offsets.
    x = np.random.default_rng(8).random((103, 37)).astype(np.float32)
    path = str(tmp_path / "ub.h5")
    with h5py.File(path, "w", userblock_size=4096) as f:
        f.create_dataset("x", data=x, **kw)
    m = mounts(path, "dataset=/x,batch_size=16,strategy=shuffle")
    assert m.json("dataset.json")["read_path"] == read_path
    got, index = served_rows(m)
    np.testing.assert_array_equal(got, x[index])


def test_half_with_another_exponent_bias_is_converted(mounts, tmp_path):
    # A 2-byte float laid out like IEEE binary16 but with bias 16: its
    # bits are not numpy's float16; HDF5 converts it to the real one.
    v = (np.arange(24, dtype=np.float32).reshape(12, 2) - 5) / 4
    path = str(tmp_path / "bias16.h5")
    with h5py.File(path, "w") as f:
        t = h5py.h5t.IEEE_F32LE.copy()
        t.set_fields(15, 10, 5, 0, 10)
        t.set_size(2)
        t.set_ebias(16)
        d = h5py.h5d.create(f.id, b"x", t, h5py.h5s.create_simple(v.shape))
        d.write(h5py.h5s.ALL, h5py.h5s.ALL, v)
    m = mounts(path, "dataset=/x,batch_size=4,strategy=shuffle")
    assert m.json("dataset.json")["read_path"] == "hdf5"
    got, index = served_rows(m)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, v[index].astype(np.float16))


@pytest.mark.parametrize("filters", [("deflate", "shuffle"),
                                     ("deflate", "deflate")])
def test_other_filter_orders_read_through_hdf5(mounts, tmp_path, filters):
    # Valid pipelines h5py does not write: decoding them as shuffle then
    # deflate would fail every read; HDF5 reads them.
    x = np.arange(240, dtype=np.int32).reshape(40, 6)
    path = str(tmp_path / "order.h5")
    with h5py.File(path, "w") as f:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((8, 6))
        for name in filters:
            dcpl.set_deflate(4) if name == "deflate" else dcpl.set_shuffle()
        d = h5py.h5d.create(f.id, b"x", h5py.h5t.STD_I32LE,
                            h5py.h5s.create_simple(x.shape), dcpl)
        d.write(h5py.h5s.ALL, h5py.h5s.ALL, x)
    m = mounts(path, "dataset=/x,batch_size=8,strategy=shuffle")
    assert m.json("dataset.json")["read_path"] == "hdf5"
    got, index = served_rows(m)
    np.testing.assert_array_equal(got, x[index])


def test_fletcher32_falls_back_to_hdf5(mounts, tmp_path):
    x = np.arange(3000, dtype=np.float32).reshape(300, 10)
    path = write_h5(str(tmp_path / "f.h5"), {
        "x": (x, dict(chunks=(32, 10), fletcher32=True))})
    m = mounts(path, "dataset=/x,batch_size=30")
    assert m.json("dataset.json")["read_path"] == "hdf5"
    index = m.load("index", 0, 0, 4)
    np.testing.assert_array_equal(m.load("batch", 0, 0, 4), x[index])


def test_truncated_chunked_source_is_eio(mounts, tmp_path):
    path = tmp_path / "t.h5"
    x = np.random.default_rng(0).random((2000, 64), dtype=np.float32)
    write_h5(str(path), {"x": (x, dict(chunks=(100, 64),
                                       compression="gzip"))})
    m = mounts(str(path), "dataset=/x,batch_size=100,prefetch=0")
    assert m.json("dataset.json")["read_path"] == "chunks"
    os.truncate(path, os.path.getsize(path) // 2)
    with pytest.raises(OSError) as e:
        m.load("batch", 0, 0, 0)
    assert e.value.errno == 5
    rows = np.unique(m.load("index", 0, 0, 0))
    log = m.log_text()
    assert "t.h5" in log and "/x" in log
    assert f"rows {rows[0]}..{rows[-1]} ({len(rows)} rows)" in log, log


def mapped_rss_kib(pid, path):
    """Rss of the daemon's mappings of path (smaps), in KiB."""
    total, ours = 0, False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if line[:1].isdigit() or line[:1] in "abcdef":  # a mapping
                ours = line.rstrip("\n").endswith(" " + path)
            elif ours and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total


def drop_from_page_cache(path):
    """POSIX_FADV_DONTNEED skips pages another CPU holds a reference to
    at that moment: checked and asked again; pages that stay fail the
    test, never pass it."""
    probe = PageCacheProbe(path)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        for _ in range(100):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            left = probe.cached()
            if left == 0:
                return
            time.sleep(0.01)
        pytest.fail(f"{path}: {left} pages stay in the page cache after "
                    "POSIX_FADV_DONTNEED")
    finally:
        probe.close()
        os.close(fd)


def nowait_reads_see_a_drop(path):
    """Whether reads with RWF_NOWAIT just after the file is dropped from
    the page cache mostly fail with EAGAIN, as rankfs's probe expects. A
    miss starts reading the page in, and where the device answers before
    the read looks again (a RAM-backed disk) the read succeeds: there the
    probe rightly calls a dropped file resident, as no read would wait."""
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY)
    misses = 0
    try:
        for k in range(20):
            drop_from_page_cache(path)
            try:
                os.preadv(fd, [bytearray(1)], k * 97 * 4096 % size,
                          os.RWF_NOWAIT)
            except BlockingIOError:
                misses += 1
            except OSError as e:
                pytest.fail(f"{path}: this file system cannot read with "
                            f"RWF_NOWAIT ({e}): run the tests where TMPDIR "
                            "is ext4, xfs or btrfs")
    finally:
        os.close(fd)
    drop_from_page_cache(path)
    return misses >= 10


def test_contiguous_rows_mapped_while_in_page_cache(mounts, tmp_path):
    """A contiguous source that fits in the chunk half of cache_mb is
    mapped (read_path mmap): rows are copied from the mapping while the
    file is in the page cache and read with pread (io_uring) while it is
    not; a source that does not fit is read with pread. Same bytes."""
    x = np.random.default_rng(8).random((20000, 100), dtype=np.float32)
    path = write_h5(str(tmp_path / "c.h5"), {"x": x})  # 8 MB
    opts = "dataset=/x,world_size=2,batch_size=100,strategy=shuffle,prefetch=0"
    misses_seen = nowait_reads_see_a_drop(path)  # and dropped
    m = mounts(path, opts)
    small = mounts(path, opts + ",cache_mb=8")  # 4 MiB for chunks: no map
    assert m.json("dataset.json")["read_path"] == "mmap"
    assert small.json("dataset.json")["read_path"] == "pread"

    def check(mount, epoch):
        for rank in (0, 1):
            for batch in (0, 7):
                index = mount.load("index", epoch, rank, batch)
                np.testing.assert_array_equal(
                    mount.load("batch", epoch, rank, batch), x[index])

    check(m, 0)  # cold: read from storage, the mapping untouched
    if misses_seen:
        assert mapped_rss_kib(m.proc.pid, path) == 0
    else:
        warnings.warn(f"{path}: NOWAIT reads do not see a drop on this "
                      "device; the cold read's path is not checked")
    # Now all of it in the page cache; the next probe (at most one a
    # second, of random pages) sees it. Under memory pressure the kernel
    # may reclaim a sampled page first, and that probe then says "not
    # resident": read it in again and take the next epoch, a few times.
    for epoch in range(1, 6):
        with open(path, "rb") as f:
            f.read()
        time.sleep(1.2)
        check(m, epoch)
        if mapped_rss_kib(m.proc.pid, path) > 0:
            break
    assert mapped_rss_kib(m.proc.pid, path) > 0  # copied from the mapping
    check(small, 1)
    assert mapped_rss_kib(small.proc.pid, path) == 0


def test_config_shows_the_prefetch_depth_in_use(mounts, dense):
    """prefetch= beyond what half the batch cache holds is cut to that,
    and config.json, which shows effective values, says so."""
    m = mounts(dense["gz"], "world_size=2,batch_size=50,prefetch=60000,"
               "cache_mb=4")
    depth = m.json("config.json")["prefetch"]
    assert 1 <= depth < 60000
    assert m.json("stats.json")["prefetch"]["depth"] == depth


def test_prefetch_serves_sequential_reads_from_memory(mounts, dense):
    m = mounts(dense["gz"], "world_size=2,batch_size=50,prefetch=4,"
               "fetch_factor=2")
    s = m.json("stats.json")
    assert m.json("config.json")["prefetch"] == 4
    assert m.json("config.json")["threads"] >= 1
    for k in range(m.batches()):
        index = m.load("index", 0, 0, k)
        np.testing.assert_array_equal(m.load("batch", 0, 0, k),
                                      dense["x"][index])
    # A worker counts a batch done just after the reader may have got it.
    for _ in range(400):
        s = m.json("stats.json")
        if s["prefetch"]["done"] >= m.batches() - 1:
            break
        time.sleep(0.05)
    assert s["prefetch"]["depth"] == 4
    assert s["prefetch"]["done"] >= m.batches() - 1
    # Every batch after the first was generated ahead of its read (the
    # index files' too), or was being generated when read.
    assert s["cache"]["prefetched"] >= m.batches() - 1
    assert s["cache"]["hits"] >= m.batches() - 1


def test_prefetch_leaves_random_reads_alone(mounts, dense):
    """A reader opening batches in random order gets nothing made ahead
    at its jumps: with prefetch=4, 60 random opens made about 5 batches
    each with the build of f9e14c2."""
    m = mounts(dense["gz"], "world_size=1,batch_size=10,prefetch=4")
    nb = m.batches()
    rng = np.random.default_rng(7)
    picks = [(int(e), int(b)) for e, b in zip(rng.integers(0, 10, 60),
                                              rng.integers(0, nb, 60))]
    for e, b in picks:
        index = m.load("index", e, 0, b)
        np.testing.assert_array_equal(m.load("batch", e, 0, b),
                                      dense["x"][index])
    for _ in range(400):  # let queued generations finish
        p = m.json("stats.json")["prefetch"]
        if p["done"] + p["dropped"] >= p["queued"]:
            break
        time.sleep(0.05)
    s = m.json("stats.json")
    made = s["cache"]["misses"] + s["cache"]["prefetched"]
    print(f"{len(set(picks))} batches opened at random: {made} "
          f"generations, {s['prefetch']['queued']} queued ahead")
    # Each distinct batch once (index files too), the first open's 4
    # ahead, and a few opens that happen to follow the one before.
    assert made <= 2 * len(set(picks)) + 4 + 4 * 4


def settled(m):
    """stats.json once every batch queued ahead has been generated."""
    for _ in range(400):
        s = m.json("stats.json")
        p = s["prefetch"]
        if p["done"] + p["dropped"] >= p["queued"]:
            return s
        time.sleep(0.05)
    raise AssertionError(f"prefetch did not settle: {p}")


def test_cache_misses_are_reads_that_generated(mounts, dense):
    """cache.misses counts what usage.md says: the reads that found their
    file neither generated nor being generated, and generated it
    themselves. A reader in order with prefetch misses its first file
    (of each kind it reads) and each jump, not one per batch; what is
    made ahead counts as cache.prefetched. With the build of 1f8af60, 20
    batches read in order gave 28 misses (every generation)."""
    m = mounts(dense["gz"], "world_size=1,batch_size=10,prefetch=8")
    n = 20
    for k in range(n):  # in order; each open's 8 ahead made before the next
        m.load("batch", 0, 0, k)
        s = settled(m)
    c, r = s["cache"], s["ranks"][0]["first_reads"]
    assert c["misses"] == 1, c
    assert r == {"ready": n - 1, "waited": 0, "generated": 1}
    assert c["prefetched"] == n - 1 + 8  # batches 1 .. n + 7
    assert c["misses"] + c["prefetched"] == s["generation"]["batches"]
    assert c["hits"] >= n - 1  # (a second read of one file is a hit too)
    # Another kind of file is another reader: its first misses.
    m.load("index", 0, 0, 0)
    s = settled(m)
    assert s["cache"]["misses"] == 2
    # A jump (random order) is not prefetched: it misses, and queues
    # nothing ahead.
    queued = s["prefetch"]["queued"]
    m.load("batch", 5, 0, 40)
    s = settled(m)
    assert s["cache"]["misses"] == 3
    assert s["prefetch"]["queued"] == queued
    assert s["cache"]["room_waits"] == 0


def test_fetch_option_errors(csr, dense, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    cases = [
        ([dense["path"]], "layer=counts,dataset=/X", "give one of them"),
        ([dense["path"]], "layer=nope", "/layers/nope not found"),
        ([dense["path"]], "dtype=float128", "dtype=float128"),
        ([dense["path"], csr["plain"]], "", "is CSR, but"),
    ]
    csc = str(tmp_path / "csc.h5ad")
    x = csr["x"]
    write_adata(csc, x.tocsc(), layers={"counts": x.tocsc()},
                raw=anndata.AnnData(x.tocsc()))
    # The error gives the anndata line that rewrites that matrix.
    for opts, fix in (("", "adata.X = adata.X.tocsr()"),
                      ("layer=counts", "adata.layers['counts'] = "
                       "adata.layers['counts'].tocsr()"),
                      ("raw", "adata.raw = anndata.AnnData("
                       "adata.raw.X.tocsr(), var=adata.raw.var)")):
        cases.append(([csc], opts, "is a csc_matrix: its rows are "
                      f"scattered over every column; rewrite it as CSR "
                      f"({fix})"))
    for sources, opts, words in cases:
        args = (["-o", opts] if opts else []) + sources + [mnt]
        r = run_rankfs(args)
        assert r.returncode != 0 and words in r.stderr, (opts, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1
