#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""rankfs against the loaders people use, side by side, in one run.

One epoch of --ranks ranks (default 2) read concurrently (processes,
like GPUs on one node), batch 256, on the same warm files, timing each
contender's epoch loop only (imports, opening files and mounting are paid
once per job); a mounted contender's daemon CPU (utime + stime from
/proc/PID/stat) is read around each epoch and reported per GB served:

  rankfs           np.load of epoch/0/rank/R/batch/*.npy (or load_npz of
                   *.npz) through a fresh mount, per strategy
  h5py+sampler     torch's DistributedSampler indices, 256 at a time,
                   sorted, then h5py fancy indexing
  AnnLoader        anndata's AnnLoader over the backed file, same sampler
  anndata backed   adata[sorted idx].X per batch on a backed CSR file
  page cache       the same bytes read from a file in the page cache
  trivial FUSE     bench/trivialfs.c serving as many files of the same
                   size from memory, read with np.load
  block reader     in-process h5py, as scDataset's BlockShuffling: 64-row
                   blocks shuffled, 16 batches per fetch read as contiguous
                   slices, rows shuffled within the fetch

The default run adds (--no-zarr leaves out) zarr v2 copies of the dense and CSR files
(written once by anndata's write_zarr: blosc lz4, dense X in chunks of
1,024 rows, CSR data/indices in chunks of 32,768 values) and two groups:

  rankfs (zarr)    shuffle over the dense store (.npy) and the CSR
                   store (.npz), each a fresh mount of the store directory
  zarr-python      the sampler's sorted indices per batch, read with
                   X.get_orthogonal_selection((idx, slice(None))); for
                   CSR, indptr read whole at set-up, then indices[s:e] and
                   data[s:e] sliced row by row and assembled into a batch

--from-storage: a dense 4 GB HDF5 file (1,000,000 x 1,000 float32, /X);
--atlas: a Tahoe-shaped CSR .h5ad (200,000 x 62,710, 2,000 values a cell,
laid out as anndata writes it: data and indices resizable, so in h5py's
automatic chunks; --atlas-gzip also gzip, --atlas-contiguous also a copy
with contiguous data and indices, --atlas-zarr also a zarr store written
from it by anndata's write_zarr, beside zarr-python, and a zarr v3 store
sharded as annbatch writes one). There every epoch of every contender gets a
fresh mount and drop_caches first, epochs are partial (--batches, 100 or
40 per rank), and the storage's own figures (dd, 4 KiB O_DIRECT random
reads at QD1 and QD32) and the daemon's peak RSS are printed beside.
With --memory-mb N each contender's mount and readers run in a memory
cgroup of N MiB, page cache included, so that no reader keeps a source
smaller than the machine's memory cached through an epoch: as an atlas
larger than memory is read.

Contenders of a file take turns, epoch by epoch (measure_group), and the
median of --repeats epochs is reported, after --warmup epochs of each
that are timed and shown but not counted (paid once per job, like the
set-up: a fresh mount's first touch of its buffers and mappings).
Prints rows/s and MB/s for each and the ratios the fetch issue asks for;
--json writes the numbers, --plot a PNG.

    scripts/bench [--rows 100000] [--ranks N] [--json F] [--plot F]
                  [--baseline BIN] [--batches N]
    scripts/bench --from-storage [--batches 100] [--repeats 2]
                  [--memory-mb N]
    scripts/bench --atlas [--atlas-gzip] [--atlas-contiguous] [--atlas-zarr]
                  [--atlas-cells 200000] [--memory-mb N]
    scripts/bench --only zarr
"""
import argparse
import ctypes
import importlib
import json
import multiprocessing as mp
import os
import platform
import queue
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
RANKFS = os.path.join(REPO, "build", "rankfs")
BATCH = 256
RANKS = 2      # --ranks
LIMIT = None   # --batches: batches per rank of an epoch (None: all)
FETCH, BLOCK = 16, 64  # the block reader: batches per fetch, block rows


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# Data -------------------------------------------------------------------

def write_adata(path, x, compression=None):
    import anndata
    import pandas as pd
    if os.path.exists(path):
        return
    n, d = x.shape
    ad = anndata.AnnData(
        X=x, obs=pd.DataFrame(index=[f"c{i}" for i in range(n)]),
        var=pd.DataFrame(index=[f"g{j}" for j in range(d)]))
    log(f"bench: writing {path}")
    ad.write_h5ad(path + ".tmp", compression=compression)
    os.rename(path + ".tmp", path)


def make_data(d, rows, cols, sparse_cols, density):
    import scipy.sparse as sp
    os.makedirs(d, exist_ok=True)
    paths = {k: os.path.join(d, f"{k}-{rows}.h5ad")
             for k in ("dense", "dense_gzip", "csr")}
    rng = np.random.default_rng(0)
    if not (os.path.exists(paths["dense"]) and
            os.path.exists(paths["dense_gzip"])):
        x = rng.random((rows, cols), dtype=np.float32)
        write_adata(paths["dense"], x)
        write_adata(paths["dense_gzip"], x, compression="gzip")
        del x
    if not os.path.exists(paths["csr"]):
        x = sp.random(rows, sparse_cols, density=density, format="csr",
                      dtype=np.float32, random_state=rng)
        write_adata(paths["csr"], x)
    return paths


ZARR_ROWS = 1024     # --zarr: rows per chunk of the dense store's X
ZARR_VALUES = 32768  # values per chunk of the CSR store's data, indices


def make_zarr_copies(paths, d, rows):
    """--zarr's sources: the dense and CSR .h5ad files again as AnnData
    zarr v2 stores, written by anndata (zarr-python 2's default
    compressor, blosc lz4 clevel 5 byte shuffle, checked here)."""
    import anndata
    out = {"dense_zarr": os.path.join(d, f"dense-{rows}.zarr"),
           "csr_zarr": os.path.join(d, f"csr-{rows}.zarr")}
    for key, src, x_array in (("dense_zarr", paths["dense"], "X"),
                              ("csr_zarr", paths["csr"], "X/data")):
        dst = out[key]
        if not os.path.exists(dst):
            log(f"bench: writing {dst}")
            ad = anndata.read_h5ad(src)
            chunks = (ZARR_ROWS, ad.n_vars) if key == "dense_zarr" \
                else (ZARR_VALUES,)
            shutil.rmtree(dst + ".tmp", ignore_errors=True)
            ad.write_zarr(dst + ".tmp", chunks=chunks)
            if key == "csr_zarr":
                # anndata 0.8 writes a sparse X's arrays in one chunk.
                import zarr
                for name in ("data", "indices"):
                    a = os.path.join(dst + ".tmp", "X", name)
                    z = zarr.open_array(a, mode="r")
                    values = z[...]
                    shutil.rmtree(a)
                    zarr.open_array(a, mode="w", shape=z.shape,
                                    chunks=chunks, dtype=z.dtype,
                                    compressor=z.compressor)[...] = values
            os.rename(dst + ".tmp", dst)
        with open(os.path.join(dst, x_array, ".zarray")) as f:
            meta = json.load(f)
        comp = meta["compressor"] or {}
        if comp.get("id") != "blosc" or comp.get("cname") != "lz4" or \
                meta["chunks"][0] != (ZARR_ROWS if key == "dense_zarr"
                                      else ZARR_VALUES):
            raise SystemExit(f"bench: {dst}/{x_array} is not blosc lz4 in "
                             f"the chunks asked ({meta['compressor']}, "
                             f"{meta['chunks']}): remove it")
    return out


def make_dense_h5(path, rows, cols, step=50000):
    """--from-storage's source: a plain HDF5 file with one contiguous
    float32 dataset /X, written with h5py in slabs of `step` rows (no
    AnnData: rankfs reads it with -o dataset=/X)."""
    import h5py
    if os.path.exists(path):
        return path
    log(f"bench: writing {path} ({rows} x {cols} float32)")
    rng = np.random.default_rng(1)
    with h5py.File(path + ".tmp", "w") as f:
        x = f.create_dataset("X", (rows, cols), dtype="float32")
        for a in range(0, rows, step):
            b = min(rows, a + step)
            x[a:b] = rng.random((b - a, cols), dtype=np.float32)
    os.rename(path + ".tmp", path)
    return path


def make_atlas(path, cells, genes, nnz, compression=None, step=10000,
               resizable=True):
    """--atlas's source, Tahoe-shaped: cells x genes float32 counts, nnz
    stored values in every cell (distinct sorted gene ids, uniform), CSR.
    obs and var are written by anndata; X is then appended by h5py in
    anndata's csr_matrix encoding, `step` cells at a time (anndata 0.8
    writes a sparse X only from memory: 3.2 GB here). resizable: data and
    indices as anndata lays them out (maxshape (None,), so chunked in
    h5py's automatic chunks, compressed or not); else contiguous."""
    import anndata
    import h5py
    import pandas as pd
    if os.path.exists(path):
        return path
    log(f"bench: writing {path} ({cells} x {genes} CSR, {nnz} per cell, "
        f"{compression or 'uncompressed'})")
    tmp = path + ".tmp"
    anndata.AnnData(
        obs=pd.DataFrame(index=[f"c{i}" for i in range(cells)]),
        var=pd.DataFrame(index=[f"g{j}" for j in range(genes)])
    ).write_h5ad(tmp)
    rng = np.random.default_rng(2)
    total = cells * nnz
    # h5py's automatic chunks, as anndata's write_h5ad(compression=...)
    kw = dict(compression=compression, chunks=True) if compression else {}
    if resizable and not compression:  # anndata's write_sparse_compressed
        kw = dict(maxshape=(None,))
    with h5py.File(tmp, "a") as f:
        if "X" in f:
            del f["X"]
        g = f.create_group("X")
        g.attrs["encoding-type"] = "csr_matrix"
        g.attrs["encoding-version"] = "0.1.0"
        g.attrs["shape"] = np.array([cells, genes], dtype=np.int64)
        data = g.create_dataset("data", (total,), dtype="float32", **kw)
        ind = g.create_dataset("indices", (total,), dtype="int32", **kw)
        g.create_dataset("indptr", data=np.arange(cells + 1,
                                                  dtype=np.int64) * nnz)
        span = np.arange(nnz, dtype=np.int32)
        for a in range(0, cells, step):
            b = min(cells, a + step)
            # Sorted draws from [0, genes - nnz] plus 0..nnz-1: distinct
            # increasing gene ids.
            cols = np.sort(rng.integers(0, genes - nnz + 1, (b - a, nnz),
                                        dtype=np.int32), axis=1) + span
            ind[a * nnz:b * nnz] = cols.ravel()
            data[a * nnz:b * nnz] = (rng.geometric(0.4, (b - a) * nnz)
                                     .astype(np.float32))
    os.rename(tmp, path)
    return path


def make_atlas_zarr(h5ad, path):
    """--atlas-zarr's source: the atlas as anndata 0.8's write_zarr lays
    it out (zarr v2, blosc lz4 with shuffle, X/data and X/indices in
    zarr's automatic chunks: 781,250 values, about 3 MB, each)."""
    import anndata
    if os.path.exists(path):
        return path
    log(f"bench: writing {path} from {h5ad} (anndata write_zarr)")
    tmp = path + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    anndata.read_h5ad(h5ad).write_zarr(tmp)
    os.rename(tmp, path)
    return path


def make_atlas_zarr_v3(h5ad, path):
    """--atlas-zarr's second store: the atlas in zarr v3 as annbatch lays
    out its datasets, sharded (X/data and X/indices in inner chunks of
    32,768 values, shards of 2^22) with zstd level 3, zarr-python 3's
    default codec. Debian's zarr-python is 2.13, so the store is written
    by the tests' own v3 writer (tests/support/zarr_v3.py)."""
    import anndata
    if os.path.exists(path):
        return path
    sys.path.insert(0, os.path.join(REPO, "tests", "support"))
    import zarr_v3
    log(f"bench: writing {path} from {h5ad} (zarr v3, sharded, zstd)")
    tmp = path + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    a = anndata.read_h5ad(h5ad)
    zarr_v3.write_anndata_v3(tmp, a.X, obs=a.obs, var_names=list(a.var_names),
                             sharded=True, codec=[("zstd", {"level": 3})],
                             csr_chunk=32768, csr_shard=1 << 22)
    os.rename(tmp, path)
    return path


def warm(path):
    with open(path, "rb", buffering=0) as f:
        while f.read(1 << 24):
            pass


# Contenders: each makes a per-rank reader that returns rows read ----------

def sampler_batches(n, rank, epoch):
    import torch.utils.data as tud  # loaded by main(), before the forks
    s = tud.DistributedSampler(range(n), num_replicas=RANKS, rank=rank,
                               shuffle=True, seed=0, drop_last=True)
    s.set_epoch(epoch)
    idx = np.fromiter(iter(s), dtype=np.int64)
    nb = len(idx) // BATCH
    if LIMIT is not None:
        nb = min(nb, LIMIT)
    return [np.sort(idx[k * BATCH:(k + 1) * BATCH]) for k in range(nb)]


def rankfs_reader(mnt, ext):
    def setup(rank, epoch):
        d = f"{mnt}/epoch/{epoch}/rank/{rank}/batch"
        names = sorted(n for n in os.listdir(d) if n.endswith(ext))
        paths = [f"{d}/{n}" for n in names][:LIMIT]
        if ext == ".npz":
            import scipy.sparse as sp
            return lambda: sum(sp.load_npz(p).shape[0] for p in paths)
        return lambda: sum(len(np.load(p)) for p in paths)
    return setup


def trivial_reader(mnt, nb):
    """Epoch e of the trivial server: its files e*nb .. (e+1)*nb - 1."""
    def setup(rank, epoch):
        paths = [f"{mnt}/{rank}/{k:06d}.npy"
                 for k in range(epoch * nb, (epoch + 1) * nb)]
        return lambda: sum(len(np.load(p)) for p in paths)
    return setup


def h5py_reader(path):
    def setup(rank, epoch):
        import h5py
        f = h5py.File(path, "r")
        x = f["X"]
        batches = sampler_batches(x.shape[0], rank, epoch)
        return lambda: sum(len(x[b]) for b in batches)
    return setup


def annloader_reader(path):
    def setup(rank, epoch):
        import anndata
        import torch.utils.data as tud
        from anndata.experimental import AnnLoader
        ad = anndata.read_h5ad(path, backed="r")
        s = tud.DistributedSampler(range(ad.n_obs), num_replicas=RANKS,
                                   rank=rank, shuffle=True, seed=0,
                                   drop_last=True)
        s.set_epoch(epoch)
        loader = AnnLoader(ad, batch_size=BATCH, sampler=s, drop_last=True)
        import itertools
        return lambda: sum(b.X.shape[0]
                           for b in itertools.islice(loader, LIMIT))
    return setup


def block_reader(path, rows_per_rank, dataset="X"):
    """The in-process block reader, as scDataset's BlockShuffling with
    h5py: the epoch's contiguous 64-row blocks shuffled (seed 0 + epoch),
    rank r taking its share of them (rows_per_rank / 64 blocks: the rows
    per rank of the other contenders); a fetch is 16 batches' blocks,
    read in file order one slice each, its rows shuffled, then cut into
    batches of 256."""
    def setup(rank, epoch):
        import h5py
        x = h5py.File(path, "r")[dataset]
        rng = np.random.default_rng(epoch)
        blocks = rng.permutation(x.shape[0] // BLOCK)
        per = rows_per_rank // BLOCK
        mine = blocks[rank * per:(rank + 1) * per]
        step = FETCH * BATCH // BLOCK

        def run():
            rows = 0
            for f in range(0, len(mine), step):
                got = np.concatenate([x[b * BLOCK:(b + 1) * BLOCK]
                                      for b in np.sort(mine[f:f + step])])
                got = got[rng.permutation(len(got))]
                for k in range(0, len(got), BATCH):
                    rows += len(got[k:k + BATCH])
            return rows
        return run
    return setup


def zarr_dense_reader(store):
    """zarr-python on the store's X: the sampler's sorted indices per
    batch, read by get_orthogonal_selection."""
    def setup(rank, epoch):
        import zarr
        x = zarr.open_array(os.path.join(store, "X"), mode="r")
        batches = sampler_batches(x.shape[0], rank, epoch)
        return lambda: sum(
            len(x.get_orthogonal_selection((b, slice(None))))
            for b in batches)
    return setup


def zarr_csr_reader(store):
    """zarr-python on the store's csr_matrix X: indptr read whole at
    set-up (a loader keeps it; slicing it per row too would only slow
    zarr-python down), then for the sampler's sorted indices of each
    batch, indices[s:e] and data[s:e] sliced row by row and assembled
    into a scipy CSR batch, as a per-row zarr reader does."""
    def setup(rank, epoch):
        import scipy.sparse as sp
        import zarr
        g = zarr.open_group(os.path.join(store, "X"), mode="r")
        ncols = int(g.attrs["shape"][1])
        indptr = g["indptr"][...]
        data, indices = g["data"], g["indices"]
        batches = sampler_batches(len(indptr) - 1, rank, epoch)

        def run():
            rows = 0
            for b in batches:
                vals, cols, ptr = [], [], [0]
                for i in b:
                    s, e = int(indptr[i]), int(indptr[i + 1])
                    vals.append(data[s:e])
                    cols.append(indices[s:e])
                    ptr.append(ptr[-1] + e - s)
                m = sp.csr_matrix((np.concatenate(vals),
                                   np.concatenate(cols), ptr),
                                  shape=(len(b), ncols))
                rows += m.shape[0]
            return rows
        return run
    return setup


def backed_csr_reader(path):
    def setup(rank, epoch):
        import anndata
        ad = anndata.read_h5ad(path, backed="r")
        batches = sampler_batches(ad.n_obs, rank, epoch)
        return lambda: sum(ad[b].X.shape[0] for b in batches)
    return setup


def pagecache_reader(path, nbytes, piece):
    def setup(rank, epoch):
        buf = bytearray(piece)
        start = rank * nbytes

        def run():
            with open(path, "rb", buffering=0) as f:
                f.seek(start)
                done = 0
                while done < nbytes:
                    done += f.readinto(buf)
            return 0
        return run
    return setup


def steady_allocator():
    """Keeps freed batch arrays in this reader's heap.

    A reader frees a batch's ~1 MB array and allocates the next. Whether
    glibc then hands the pages back to the kernel (to fault 256 of them in
    again for the next batch) depends on its dynamic mmap and trim
    thresholds, which a forked reader inherits from this script's malloc
    history: the same rankfs mount read in 2.0 s or 0.37 s per epoch
    depending on it. Fixed thresholds make every contender's reader behave
    like a long-running loader worker whose thresholds have settled."""
    libc = ctypes.CDLL(None)
    m_trim_threshold, m_mmap_threshold = -1, -3
    libc.mallopt(m_mmap_threshold, 64 << 20)
    libc.mallopt(m_trim_threshold, 128 << 20)


def rank_main(setup, rank, epoch, barrier, out):
    if READER_CGROUP:
        READER_CGROUP.add(os.getpid())
    steady_allocator()
    run = setup(rank, epoch)
    barrier.wait()
    t0 = time.perf_counter()
    rows = run()
    out.put((rank, rows, t0, time.perf_counter()))


def measure_once(name, setup, epoch):
    """Runs both ranks at once; the wall time spans first start to last
    end. @return (seconds, rows read per rank)."""
    ctx = mp.get_context("fork")
    barrier, out = ctx.Barrier(RANKS), ctx.Queue()
    procs = [ctx.Process(target=rank_main,
                         args=(setup, r, epoch, barrier, out))
             for r in range(RANKS)]
    for p in procs:
        p.start()
    res = []
    while len(res) < RANKS:
        try:
            res.append(out.get(timeout=1))
        except queue.Empty:
            if any(p.exitcode not in (None, 0) for p in procs):
                for p in procs:
                    p.kill()
                raise SystemExit(f"bench: {name}: a rank failed")
    for p in procs:
        p.join()
    return (max(r[3] for r in res) - min(r[2] for r in res),
            [r[1] for r in res])


class Contender:
    """name; open() -> (setup, bytes read per rank, close, pid): pid the
    daemon serving it (None in-process), whose CPU time is counted per
    epoch; repeats: its epochs, None for the run's --repeats."""

    def __init__(self, name, open, repeats=None):
        self.name, self.open, self.repeats = name, open, repeats


def unmounted(setup, nbytes):
    """A contender that mounts nothing. nbytes: the bytes it counts as
    read, or a function giving them when it starts (the bytes a rankfs
    contender of its group served, known once that one has mounted)."""
    return lambda: (setup, nbytes() if callable(nbytes) else nbytes,
                    lambda: None, None)


def cpu_seconds(pid):
    """utime + stime of a process, all its threads, from /proc/PID/stat."""
    if pid is None:
        return None
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid):
    """VmHWM of a process in MiB (None in-process)."""
    if pid is None:
        return None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024


def disk_sectors(path):
    """Sectors read so far by the block device holding path (its line of
    /proc/diskstats; every process's reads count)."""
    dev = os.stat(path).st_dev
    key = (os.major(dev), os.minor(dev))
    with open("/proc/diskstats") as f:
        for line in f:
            v = line.split()
            if (int(v[0]), int(v[1])) == key:
                return int(v[5])
    return None


class MemoryLimit:
    """A memory cgroup (the v1 memory controller) that bounds what the
    processes in it hold, page cache included. measure_group puts a
    contender's daemon and its reader processes in it (not the bench), so
    that a source bigger than the limit is read as an atlas bigger than
    memory is, with no reader keeping the whole file in the page cache
    through an epoch."""

    def __init__(self, mb):
        own = {}
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, ctrls, path = line.rstrip("\n").split(":", 2)
                for c in ctrls.split(","):
                    own[c] = path
        with open("/proc/self/mounts") as f:
            roots = [m.split()[1] for m in f
                     if m.split()[2] == "cgroup" and
                     "memory" in m.split()[3].split(",")]
        if not roots or "memory" not in own:
            raise SystemExit("bench: --memory-mb needs the cgroup v1 memory "
                             "controller (none mounted here)")
        self.dir = os.path.join(roots[0] + own["memory"],
                                f"rankfs-bench-{os.getpid()}")
        os.makedirs(self.dir, exist_ok=True)
        try:
            self._write("memory.limit_in_bytes", mb << 20)
        except OSError as e:
            os.rmdir(self.dir)
            raise SystemExit(f"bench: --memory-mb {mb}: {self.dir}: {e}")
        self.mb = mb

    def _write(self, name, value):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(f"{value}\n")

    def add(self, pid):
        """Moves process pid (all its threads) into the group."""
        self._write("cgroup.procs", pid)

    def peak_mb(self):
        """The most the group held since the last reset_peak()."""
        with open(os.path.join(self.dir,
                               "memory.max_usage_in_bytes")) as f:
            return int(f.read()) / (1 << 20)

    def reset_peak(self):
        self._write("memory.max_usage_in_bytes", 0)

    def close(self):
        for _ in range(50):  # its last processes may still be exiting
            try:
                os.rmdir(self.dir)
                return
            except OSError:
                time.sleep(0.1)
        with open(os.path.join(self.dir, "cgroup.procs")) as f:
            left = f.read().split()
        log(f"bench: {self.dir} left behind, processes {left}")


# The group a reader process joins first (measure_group sets it).
READER_CGROUP = None


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def summarize(name, times, warmup, rows_per_rank, bytes_per_rank,
              cpu=(), rss=None):
    """cpu: the daemon's CPU seconds in each counted epoch (none for an
    in-process reader); its median over the bytes of one epoch is
    cpu_s_per_gb."""
    wall = statistics.median(times)
    rows = RANKS * rows_per_rank
    result = {"name": name, "seconds": wall, "all_seconds": times,
              "warmup_seconds": warmup,
              "rows_per_s": rows / wall,
              "mb_per_s": RANKS * bytes_per_rank / wall / 1e6,
              "cpu_s_per_gb": None, "all_cpu_seconds": list(cpu),
              "peak_rss_mb": rss}
    if cpu:
        med = statistics.median(cpu)
        result["cpu_s_per_gb"] = med / (RANKS * bytes_per_rank / 1e9)
    first = (f"; warm-up {', '.join(f'{t:.2f}' for t in warmup)} s"
             if warmup else "")
    daemon = (f"; daemon {result['cpu_s_per_gb']:.2f} CPU s/GB"
              if cpu else "")
    log(f"bench: {name:44s} {result['rows_per_s']:10.0f} rows/s "
        f"{result['mb_per_s']:8.0f} MB/s (median of "
        f"{', '.join(f'{t:.2f}' for t in times)} s{first}{daemon})")
    return result


def measure_group(contenders, rows_per_rank, repeats, warmup,
                  fresh=False, disk=None, limit=None):
    """Opens every contender, then runs epoch 0 of each in turn, then
    epoch 1, and so on (epoch e of rankfs, the sampler's epoch e of the
    others: never the same bytes twice); reports the median per contender
    of the epochs after the first `warmup` (none for a contender with its
    own repeats). This VM's speed drifts by up to 3x within minutes:
    taking turns puts the drift on every contender alike, instead of on
    whichever ran in a slow minute. A mounted contender's daemon CPU
    (utime + stime) is read before and after each epoch.

    fresh: from storage. Every epoch of every contender gets its own
    fresh mount (opened, listed by the readers' set-up) and an empty page
    cache (drop_caches after the mount, before the readers start); the
    daemon's peak RSS (VmHWM) is the largest over its mounts.
    disk: a file on the source's device, whose MB read from the device
    per epoch are reported (median; anyone's reads count).
    limit: a MemoryLimit (with fresh) holding each contender's mount and
    readers; the most it held in an epoch is reported."""
    global READER_CGROUP
    opened = {}
    times = {c.name: [] for c in contenders}
    warm = {c.name: [] for c in contenders}
    cpu = {c.name: [] for c in contenders}
    rss = {c.name: None for c in contenders}
    read = {c.name: [] for c in contenders}
    held = {c.name: [] for c in contenders}
    nbytes = {}
    try:
        if not fresh:
            for c in contenders:
                opened[c.name] = c.open()
                nbytes[c.name] = opened[c.name][1]
        for epoch in range(warmup + repeats):
            for c in contenders:
                skip = 0 if c.repeats else warmup
                if epoch >= skip + (c.repeats or repeats):
                    continue
                if fresh:
                    opened[c.name] = c.open()
                    nbytes[c.name] = opened[c.name][1]
                    if limit and opened[c.name][3] is not None:
                        limit.add(opened[c.name][3])
                    drop_caches()
                    if limit:
                        limit.reset_peak()
                setup, _, close, pid = opened[c.name]
                before = cpu_seconds(pid)
                sectors = disk_sectors(disk) if disk else None
                READER_CGROUP = limit if fresh else None
                wall, got = measure_once(c.name, setup, epoch)
                READER_CGROUP = None
                if sectors is not None and epoch >= skip:
                    read[c.name].append(
                        (disk_sectors(disk) - sectors) * 512 / 1e6)
                if pid is not None:
                    used = cpu_seconds(pid) - before
                    if epoch >= skip:
                        cpu[c.name].append(used)
                    hwm = peak_rss_mb(pid)
                    rss[c.name] = max(rss[c.name] or 0, hwm)
                if limit and epoch >= skip:
                    held[c.name].append(limit.peak_mb())
                if fresh:
                    close()
                    del opened[c.name]
                if got[0] and got != [rows_per_rank] * RANKS:
                    raise SystemExit(f"bench: {c.name}: read {got} rows, "
                                     f"expected {rows_per_rank} per rank")
                (warm if epoch < skip else times)[c.name].append(wall)
        out = [summarize(c.name, times[c.name], warm[c.name],
                         rows_per_rank, nbytes[c.name], cpu[c.name],
                         rss[c.name])
               for c in contenders]
        for r in out:
            mb = read[r["name"]]
            r["disk_mb_read"] = statistics.median(mb) if mb else None
            r["all_disk_mb_read"] = mb
            if held[r["name"]]:
                r["cgroup_peak_mb"] = max(held[r["name"]])
                log(f"bench: {r['name']:44s} held at most "
                    f"{r['cgroup_peak_mb']:.0f} MiB of its "
                    f"{limit.mb} MiB limit (daemon, readers, page cache)")
            if mb:
                log(f"bench: {r['name']:44s} read {r['disk_mb_read']:.0f}"
                    f" MB from the disk for {RANKS * nbytes[r['name']] / 1e6:.0f}"
                    f" MB served (median of "
                    f"{', '.join(f'{m:.0f}' for m in mb)})")
        return out
    finally:
        for _, _, close, _ in opened.values():
            close()


# Mounts -------------------------------------------------------------------

class Mounted:
    def __init__(self, argv, mnt, log=None):
        """log: a file for the daemon's stderr (else the bench's)."""
        self.mnt, self.log = mnt, log
        self.proc = subprocess.Popen(
            argv, stderr=open(log, "w") if log else None)
        deadline = time.time() + 60
        while not os.path.ismount(mnt):
            if self.proc.poll() is not None or time.time() > deadline:
                said = open(log).read().strip() if log else ""
                raise SystemExit(f"bench: {argv[0]} did not mount {said}")
            time.sleep(0.05)

    def close(self):
        subprocess.run(["fusermount3", "-u", self.mnt], check=False)
        self.proc.wait(timeout=60)


def rankfs_mount(path, options, mnt, log=None, binary=None):
    return Mounted([binary or RANKFS, "-f", "-o", options, path, mnt], mnt,
                   log)


def trivial_mount(binary, files, cols, mnt, direct_io=False,
                  distinct=False):
    m = Mounted([binary, mnt, str(RANKS), str(files), str(BATCH), str(cols)]
                + (["direct_io"] if direct_io else [])
                + (["distinct"] if distinct else []), mnt)
    # What rankfs does for its own mount: 1 MiB readahead.
    with open("/proc/self/mountinfo") as f:
        dev = next(line.split()[2] for line in f
                   if line.split()[4] == os.path.realpath(mnt))
    with open(f"/sys/class/bdi/{dev}/read_ahead_kb", "w") as f:
        f.write("1024\n")
    return m


def build_trivialfs(out):
    cflags = subprocess.run(["pkg-config", "--cflags", "--libs", "fuse3"],
                            capture_output=True, text=True,
                            check=True).stdout.split()
    subprocess.run(["cc", "-O2", "-o", out, os.path.join(HERE, "trivialfs.c")]
                   + cflags, check=True)


# The run --------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100000)
    ap.add_argument("--cols", type=int, default=1000)
    ap.add_argument("--sparse-cols", type=int, default=10000)
    ap.add_argument("--density", type=float, default=0.02)
    ap.add_argument("--dir", default=os.path.join(REPO, "data", "bench"))
    ap.add_argument("--json")
    ap.add_argument("--plot")
    ap.add_argument("--replot", metavar="JSON",
                    help="only draw --plot from an earlier --json")
    ap.add_argument("--repeats", type=int,
                    help="epochs per contender; the median is reported "
                    "(default 5, or 2 from storage)")
    ap.add_argument("--warmup", type=int,
                    help="epochs of each contender run first and not "
                    "counted (default 1, or 0 from storage: every epoch "
                    "there is a fresh mount's first)")
    ap.add_argument("--skip", default="",
                    help="comma-separated contender prefixes to leave out")
    ap.add_argument("--baseline", metavar="BIN",
                    help="another rankfs binary (an older commit's build): "
                    "its shuffle and block_shuffle take turns with this "
                    "build's on the dense file")
    ap.add_argument("--only", metavar="REGEX",
                    help="run only the contenders whose name matches")
    ap.add_argument("--ranks", type=int, default=2,
                    help="concurrent readers (world_size)")
    ap.add_argument("--batches", type=int,
                    help="batches per rank of each epoch (a partial epoch; "
                    "default: all, or 100 with --from-storage, 40 with "
                    "--atlas)")
    ap.add_argument("--from-storage", action="store_true",
                    help="a dense 4 GB source read from storage: a fresh "
                    "mount and drop_caches before every epoch")
    ap.add_argument("--storage-rows", type=int, default=1000000,
                    help="rows of --from-storage's source (x --cols)")
    ap.add_argument("--atlas", action="store_true",
                    help="a Tahoe-shaped CSR source (--atlas-cells x "
                    "62,710 genes, 2,000 values a cell) from storage")
    ap.add_argument("--atlas-cells", type=int, default=200000)
    ap.add_argument("--atlas-gzip", action="store_true",
                    help="--atlas also on a gzip copy of the source")
    ap.add_argument("--atlas-zarr", action="store_true",
                    help="--atlas also on a zarr copy written by anndata's "
                    "write_zarr (blosc lz4, zarr's automatic chunks) and a "
                    "zarr v3 one sharded as annbatch writes (zstd)")
    ap.add_argument("--atlas-contiguous", action="store_true",
                    help="--atlas also on a copy with contiguous data and "
                    "indices (h5py's default, not anndata's)")
    ap.add_argument("--zarr", action=argparse.BooleanOptionalAction,
                    default=True,
                    help="zarr v2 copies of the dense and CSR files: "
                    "rankfs shuffle against zarr-python on the same "
                    "batches (a mount that fails ends the run; on by "
                    "default, not with --from-storage or --atlas)")
    ap.add_argument("--memory-mb", type=int,
                    help="with --from-storage or --atlas: each contender's "
                    "mount and readers in a memory cgroup of this many MiB, "
                    "page cache included (as a source larger than memory "
                    "is read; cgroup v1's memory controller)")
    ap.add_argument("--cache-mb", type=int,
                    help="rankfs's cache_mb (default: rankfs's own, 1024)")
    args = ap.parse_args()
    # The samplers' torch, loaded here, before the readers fork: in a
    # reader it cost ~200 MB, charged to --memory-mb's group (and its
    # libraries read from the disk after drop_caches) for those
    # contenders alone.
    importlib.import_module("torch.utils.data")
    if args.memory_mb and not (args.from_storage or args.atlas):
        ap.error("--memory-mb is for --from-storage and --atlas")
    global RANKS, LIMIT
    RANKS = args.ranks
    LIMIT = args.batches
    if LIMIT is None and args.from_storage:
        LIMIT = 100
    if LIMIT is None and args.atlas:
        LIMIT = 40
    storage = args.from_storage or args.atlas
    if args.repeats is None:
        args.repeats = 2 if storage else 5
    if args.warmup is None:
        args.warmup = 0 if storage else 1
    if args.replot:
        with open(args.replot) as f:
            plot(json.load(f)["results"], args.plot)
        return
    if not os.access(RANKFS, os.X_OK):
        raise SystemExit(f"bench: {RANKFS} is missing: run scripts/build")

    if args.from_storage or args.atlas:
        return storage_main(args)
    paths = make_data(args.dir, args.rows, args.cols, args.sparse_cols,
                      args.density)
    for p in paths.values():
        warm(p)
    work = tempfile.mkdtemp(prefix="rankfs-bench-")
    trivialfs = os.path.join(work, "trivialfs")
    build_trivialfs(trivialfs)
    skip = [s for s in args.skip.split(",") if s]
    only = re.compile(args.only) if args.only else None

    def skipped(name):
        return (any(name.startswith(s) for s in skip) or
                (only is not None and not only.search(name)))
    repeats = args.repeats

    nb = args.rows // (RANKS * BATCH)
    if LIMIT is not None:
        nb = min(nb, LIMIT)
    rows_per_rank = nb * BATCH
    dense_file = 128 + BATCH * args.cols * 4
    dense_bytes = nb * dense_file
    results = []

    served = {}  # per source: bytes per rank of a rankfs epoch

    cache = cache_option(args)

    def rankfs(name, path, options, ext, nbytes=None, binary=None):
        """nbytes None: the bytes per rank served, from st_size (which
        generates nothing). Listing is set-up; batches generate on read."""
        def mount():
            mnt = tempfile.mkdtemp(dir=work)
            m = rankfs_mount(path, f"world_size={RANKS},batch_size={BATCH},"
                             f"{options}{cache}", mnt, f"{mnt}.log", binary)
            size = nbytes
            if size is None:
                size = served_bytes(mnt, ext)
            served[path] = size
            return rankfs_reader(mnt, ext), size, m.close, m.proc.pid
        return Contender(name, mount)

    def trivial(name, direct_io):
        def mount():
            mnt = tempfile.mkdtemp(dir=work)
            # New files every epoch, as rankfs serves.
            m = trivial_mount(trivialfs, nb * (args.warmup + repeats),
                              args.cols, mnt, direct_io)
            return trivial_reader(mnt, nb), dense_bytes, m.close, m.proc.pid
        return Contender(name, mount)

    def group(*contenders):
        chosen = [c for c in contenders if not skipped(c.name)]
        if chosen:
            results.extend(measure_group(chosen, rows_per_rank, repeats,
                                         args.warmup))

    dense = paths["dense"]
    group(*[rankfs(f"rankfs {s} (dense)", dense, f"strategy={s}", ".npy",
                   dense_bytes)
            for s in ("block_shuffle", "shuffle")],
          # Another build of rankfs, taking turns with this one.
          *([rankfs(f"rankfs {s} (dense, baseline)", dense,
                    f"strategy={s}", ".npy", dense_bytes, args.baseline)
             for s in ("block_shuffle", "shuffle")] if args.baseline else []),
          Contender("h5py+DistributedSampler (dense)",
                    unmounted(h5py_reader(dense), dense_bytes)),
          Contender("AnnLoader+DistributedSampler (dense)",
                    unmounted(annloader_reader(dense), dense_bytes)),
          Contender("block reader (h5py, 64-row blocks) (dense)",
                    unmounted(block_reader(dense, rows_per_rank),
                              dense_bytes)),
          # The dense file is warm, and larger than one epoch.
          Contender("page cache read (dense bytes)",
                    unmounted(pagecache_reader(dense, dense_bytes,
                                               dense_file), dense_bytes)),
          trivial("trivial FUSE server (dense files)", False))
    # h5py's 1 MB chunk cache re-inflates chunks for every row here: one
    # epoch takes minutes, so it runs once.
    group(*[rankfs(f"rankfs {s} (dense, gzip)", paths["dense_gzip"],
                   f"strategy={s}", ".npy", dense_bytes)
            for s in ("block_shuffle", "shuffle")],
          Contender("h5py+DistributedSampler (dense, gzip)",
                    unmounted(h5py_reader(paths["dense_gzip"]),
                              dense_bytes), repeats=1))
    # CSR: MB/s counts the bytes of the .npz files rankfs serves (the
    # same rows in every contender), known once a rankfs CSR mount has
    # listed its files: the backed reader opens after them.
    csr = paths["csr"]
    group(*[rankfs(f"rankfs {s} (CSR .npz)", csr, f"strategy={s}", ".npz")
            for s in ("block_shuffle", "shuffle")],
          Contender("anndata backed CSR+DistributedSampler",
                    unmounted(backed_csr_reader(csr),
                              lambda: served.get(csr, 0))))

    if args.zarr:
        zpaths = make_zarr_copies(paths, args.dir, args.rows)
        for p in zpaths.values():
            for d, _, files in os.walk(p):
                for n in files:
                    warm(os.path.join(d, n))
        zdense, zcsr = zpaths["dense_zarr"], zpaths["csr_zarr"]
        group(*[rankfs(f"rankfs {s} (dense, zarr v2{b})", zdense,
                       f"strategy={s}", ".npy", dense_bytes, binary)
                for b, binary in builds_of(args)
                for s in ("block_shuffle", "shuffle")],
              Contender("zarr-python orthogonal selection (dense zarr)",
                        unmounted(zarr_dense_reader(zdense), dense_bytes)))

        def zarr_csr_open():
            return zarr_csr_reader(zcsr), served.get(zcsr, 0), \
                lambda: None, None

        # Row by row, zarr-python decodes a 32,768-value chunk twice per
        # row (minutes an epoch): two epochs, both counted, no warm-up.
        group(rankfs("rankfs shuffle (CSR .npz, zarr v2)", zcsr,
                     "strategy=shuffle", ".npz"),
              Contender("zarr-python per-row slices (CSR zarr)",
                        zarr_csr_open, repeats=2))

    ratio, cpu_ratio = ratios_of(results)

    ratios = [
        ("rankfs shuffle / h5py+DistributedSampler (dense)",
         ratio("rankfs shuffle (dense)", "h5py+DistributedSampler (dense)"),
         2.0),
        ("rankfs block_shuffle / block reader (dense)",
         ratio("rankfs block_shuffle (dense)",
               "block reader (h5py, 64-row blocks) (dense)"), 0.95),
        ("rankfs block_shuffle bytes / trivial FUSE server (scale)",
         ratio("rankfs block_shuffle (dense)",
               "trivial FUSE server (dense files)"), 0.9),
        ("rankfs shuffle bytes / trivial FUSE server (scale)",
         ratio("rankfs shuffle (dense)",
               "trivial FUSE server (dense files)"), 0.9),
        ("trivial server CPU/GB x 1.5 / rankfs block_shuffle CPU/GB",
         cpu_ratio("trivial FUSE server (dense files)",
                   "rankfs block_shuffle (dense)"), 1.0),
        ("trivial server CPU/GB x 1.5 / rankfs shuffle CPU/GB",
         cpu_ratio("trivial FUSE server (dense files)",
                   "rankfs shuffle (dense)"), 1.0),
        ("rankfs shuffle / baseline build's (dense)",
         ratio("rankfs shuffle (dense)", "rankfs shuffle (dense, baseline)"),
         None),
        ("baseline build's shuffle / trivial FUSE server",
         ratio("rankfs shuffle (dense, baseline)",
               "trivial FUSE server (dense files)"), None),
        ("rankfs shuffle / rankfs block_shuffle (dense)",
         ratio("rankfs shuffle (dense)", "rankfs block_shuffle (dense)"),
         0.8),
        ("rankfs block_shuffle / trivial FUSE server",
         ratio("rankfs block_shuffle (dense)",
               "trivial FUSE server (dense files)"), 0.7),
        ("rankfs shuffle / trivial FUSE server",
         ratio("rankfs shuffle (dense)", "trivial FUSE server (dense files)"),
         0.7),
        ("rankfs shuffle .npz / anndata backed CSR",
         ratio("rankfs shuffle (CSR .npz)",
               "anndata backed CSR+DistributedSampler"), 3.0),
        # Not a target: how far a FUSE server that does nothing gets
        # past h5py in this run. Below 2, 2x h5py asks rankfs to beat it.
        ("trivial FUSE server / h5py+DistributedSampler (bound)",
         ratio("trivial FUSE server (dense files)",
               "h5py+DistributedSampler (dense)"), None),
        ("rankfs shuffle / h5py+DistributedSampler (gzip)",
         ratio("rankfs shuffle (dense, gzip)",
               "h5py+DistributedSampler (dense, gzip)"), None),
        ("rankfs shuffle / zarr-python orthogonal selection (zarr v2)",
         ratio("rankfs shuffle (dense, zarr v2)",
               "zarr-python orthogonal selection (dense zarr)"),
         5.0),
        ("rankfs shuffle .npz / zarr-python per-row slices (CSR zarr)",
         ratio("rankfs shuffle (CSR .npz, zarr v2)",
               "zarr-python per-row slices (CSR zarr)"), 3.0),
    ]
    report(args, results, ratios, {"rows": args.rows, "cols": args.cols,
                                   "sparse_cols": args.sparse_cols,
                                   "density": args.density})
    if args.plot:
        plot(results, args.plot)


PUBLISHED = ("published, other hardware: annbatch 53-63k cells/s per process "
             "on 12 CPUs of an A100 node, scDataset about 4.6-5.3k, on the "
             "full Tahoe-100M")


def storage_figures(path, seconds=5.0):
    """The storage's own figures for one file, each after drop_caches:
    dd's sequential read of the whole file (bs=16M, through the page
    cache and its readahead), and 4 KiB random reads at 4 KiB-aligned
    offsets with O_DIRECT (no page cache, no readahead) for `seconds`
    each: one thread issuing os.preadv back to back (queue depth 1), and
    32 threads doing the same at once (Python drops the GIL in preadv:
    up to 32 requests in flight, queue depth 32)."""
    import mmap
    import threading
    out = {}
    drop_caches()
    r = subprocess.run(["dd", f"if={path}", "of=/dev/null", "bs=16M"],
                       capture_output=True, text=True)
    m = re.search(r"(\d+) bytes .* copied, ([\d.]+) s", r.stderr)
    out["dd_gb_per_s"] = int(m.group(1)) / float(m.group(2)) / 1e9
    size = os.path.getsize(path)
    pages = size // 4096

    def reader(n_done, stop, seed):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        buf = mmap.mmap(-1, 4096)
        rng = np.random.default_rng(seed)
        offs = rng.integers(0, pages, 1 << 16) * 4096
        k = 0
        while not stop.is_set():
            os.preadv(fd, [buf], int(offs[k & 0xFFFF]))
            k += 1
        n_done.append(k)
        os.close(fd)

    for qd in (1, 32):
        drop_caches()
        stop, done = threading.Event(), []
        ts = [threading.Thread(target=reader, args=(done, stop, q))
              for q in range(qd)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in ts:
            t.join()
        wall = time.perf_counter() - t0
        out[f"qd{qd}_iops"] = sum(done) / wall
    log(f"bench: storage: dd {out['dd_gb_per_s']:.2f} GB/s sequential; "
        f"4 KiB O_DIRECT random reads {out['qd1_iops']:.0f}/s at QD1, "
        f"{out['qd32_iops']:.0f}/s at QD32")
    return out


def builds_of(args):
    """(name suffix, rankfs binary): this build, and --baseline's beside
    it."""
    return [("", None)] + ([(", baseline", args.baseline)]
                           if args.baseline else [])


def cache_option(args):
    """--cache-mb as rankfs mount options to append."""
    return f",cache_mb={args.cache_mb}" if args.cache_mb else ""


def storage_main(args):
    """--from-storage and --atlas: every epoch from storage (a fresh
    mount, then drop_caches), partial epochs of LIMIT batches per rank."""
    work = tempfile.mkdtemp(prefix="rankfs-bench-")
    os.makedirs(args.dir, exist_ok=True)
    only = re.compile(args.only) if args.only else None
    skip = [s for s in args.skip.split(",") if s]

    def chosen(*cs):
        return [c for c in cs
                if not any(c.name.startswith(s) for s in skip) and
                (only is None or only.search(c.name))]
    extra_opts = cache_option(args)
    served = {}
    builds = builds_of(args)
    limit = MemoryLimit(args.memory_mb) if args.memory_mb else None
    try:
        storage_groups(args, work, chosen, extra_opts, served, builds, limit)
    finally:
        if limit:
            limit.close()


def storage_groups(args, work, chosen, extra_opts, served, builds, limit):

    def rankfs(name, path, options, ext, nbytes=None, binary=None):
        def mount():
            mnt = tempfile.mkdtemp(dir=work)
            m = rankfs_mount(path, f"world_size={RANKS},batch_size={BATCH},"
                             f"{options}{extra_opts}", mnt, f"{mnt}.log",
                             binary)
            size = nbytes if nbytes is not None else served_bytes(mnt, ext)
            served[(path, ext)] = size
            return rankfs_reader(mnt, ext), size, m.close, m.proc.pid
        return Contender(name, mount)

    results, ratios, notes, figures = [], [], [], {}
    if args.from_storage:
        path = make_dense_h5(os.path.join(
            args.dir, f"dense-{args.storage_rows}x{args.cols}.h5"),
            args.storage_rows, args.cols)
        figures[path] = storage_figures(path)
        nb = min(args.storage_rows // (RANKS * BATCH), LIMIT)
        rows_per_rank = nb * BATCH
        nbytes = nb * (128 + BATCH * args.cols * 4)
        cs = chosen(*[rankfs(f"rankfs {s} (storage{b})", path,
                             f"dataset=/X,strategy={s}", ".npy", nbytes,
                             binary)
                      for b, binary in builds
                      for s in ("block_shuffle", "shuffle")],
                    Contender("h5py+DistributedSampler (storage)",
                              unmounted(h5py_reader(path), nbytes)),
                    Contender("block reader (h5py, 64-row blocks) "
                              "(storage)",
                              unmounted(block_reader(path, rows_per_rank),
                                        nbytes)))
        results += measure_group(cs, rows_per_rank, args.repeats,
                                 args.warmup, fresh=True, disk=path,
                                     limit=limit)
        ratio, _ = ratios_of(results)
        ratios += [
            ("storage: rankfs block_shuffle / block reader",
             ratio("rankfs block_shuffle (storage)",
                   "block reader (h5py, 64-row blocks) (storage)"), 1.5),
            ("storage: rankfs shuffle / h5py+DistributedSampler",
             ratio("rankfs shuffle (storage)",
                   "h5py+DistributedSampler (storage)"), 3.0)]
    if args.atlas:
        genes, nnz = 62710, 2000
        # (tag, compression, file name suffix, anndata's resizable layout)
        sources = [("", None, "-chunked", True)] + \
            ([(" contiguous", None, "", False)]
             if args.atlas_contiguous else []) + \
            ([(" gzip", "gzip", "-gzip", True)] if args.atlas_gzip else [])
        for tag, comp, suffix, resizable in sources:
            path = make_atlas(os.path.join(
                args.dir, f"atlas-{args.atlas_cells}{suffix}.h5ad"),
                args.atlas_cells, genes, nnz, comp, resizable=resizable)
            if not tag:
                figures[path] = storage_figures(path)
            nb = min(args.atlas_cells // (RANKS * BATCH), LIMIT)
            rows_per_rank = nb * BATCH
            key = (path, ".npz")
            cs = chosen(*[rankfs(f"rankfs {s} (atlas{tag} {e}{b})", path,
                                 f"strategy={s}", e, None,
                                 binary)
                          for b, binary in builds
                          for e in (".npz", ".npy")
                          for s in ("block_shuffle", "shuffle")],
                        Contender(f"anndata backed CSR+DistributedSampler "
                                  f"(atlas{tag})",
                                  unmounted(backed_csr_reader(path),
                                            lambda key=key:
                                            served.get(key, 0))))
            results += measure_group(cs, rows_per_rank, args.repeats,
                                     args.warmup, fresh=True, disk=path,
                                     limit=limit)
            ratio, _ = ratios_of(results)
            ratios.append((f"atlas{tag}: rankfs .npz block_shuffle / "
                           "anndata backed",
                           ratio(f"rankfs block_shuffle (atlas{tag} .npz)",
                                 f"anndata backed CSR+DistributedSampler "
                                 f"(atlas{tag})"), 5.0))
            if args.baseline:
                ratios.append((f"atlas{tag}: rankfs .npz block_shuffle / "
                               "baseline build's",
                               ratio(f"rankfs block_shuffle (atlas{tag} .npz)",
                                     f"rankfs block_shuffle (atlas{tag} "
                                     ".npz, baseline)"), None))
        if args.atlas_zarr:
            h5ad = os.path.join(args.dir,
                                f"atlas-{args.atlas_cells}-chunked.h5ad")
            store = make_atlas_zarr(h5ad, os.path.join(
                args.dir, f"atlas-{args.atlas_cells}.zarr"))
            nb = min(args.atlas_cells // (RANKS * BATCH), LIMIT)
            key = (store, ".npz")

            def zarr_bytes(key=key):
                return served.get(key, 0)
            v3 = make_atlas_zarr_v3(h5ad, os.path.join(
                args.dir, f"atlas-{args.atlas_cells}-v3.zarr"))
            cs = chosen(*[rankfs(f"rankfs {s} (atlas zarr .npz{b})", store,
                                 f"strategy={s}", ".npz", None,
                                 binary)
                          for b, binary in builds
                          for s in ("block_shuffle", "shuffle")],
                        *[rankfs(f"rankfs {s} (atlas zarr v3 sharded "
                                 f".npz{b})", v3, f"strategy={s}", ".npz",
                                 None, binary)
                          for b, binary in builds
                          for s in ("block_shuffle", "shuffle")],
                        Contender("zarr-python CSR rows+DistributedSampler "
                                  "(atlas zarr)",
                                  unmounted(zarr_csr_reader(store),
                                            zarr_bytes)),
                        Contender("anndata backed CSR+DistributedSampler "
                                  "(atlas zarr's .h5ad)",
                                  unmounted(backed_csr_reader(h5ad),
                                            zarr_bytes)))
            results += measure_group(cs, nb * BATCH, args.repeats,
                                     args.warmup, fresh=True, disk=store,
                                     limit=limit)
            ratio, _ = ratios_of(results)
            ratios.append(("atlas zarr: rankfs .npz block_shuffle / "
                           "zarr-python",
                           ratio("rankfs block_shuffle (atlas zarr .npz)",
                                 "zarr-python CSR rows+DistributedSampler "
                                 "(atlas zarr)"), None))
            ratios.append(("atlas zarr: rankfs .npz block_shuffle / "
                           "anndata backed (.h5ad)",
                           ratio("rankfs block_shuffle (atlas zarr .npz)",
                                 "anndata backed CSR+DistributedSampler "
                                 "(atlas zarr's .h5ad)"), None))
            if args.baseline:
                ratios.append(("atlas zarr: rankfs .npz block_shuffle / "
                               "baseline build's",
                               ratio("rankfs block_shuffle (atlas zarr .npz)",
                                     "rankfs block_shuffle (atlas zarr "
                                     ".npz, baseline)"), None))
        notes.append(PUBLISHED)
    notes.append(f"every epoch from storage: {LIMIT} batches of {BATCH} per "
                 f"rank, {RANKS} ranks; rankfs cache_mb="
                 f"{args.cache_mb or 1024} (peak RSS is the daemon's VmHWM)"
                 + (f"; each contender's mount and readers in a "
                    f"{args.memory_mb} MiB memory cgroup, page cache "
                    f"included" if limit else ""))
    for p, f in figures.items():
        notes.append(f"storage ({os.path.basename(p)}): dd "
                     f"{f['dd_gb_per_s']:.2f} GB/s, 4 KiB O_DIRECT random "
                     f"reads {f['qd1_iops']:.0f}/s at QD1, "
                     f"{f['qd32_iops']:.0f}/s at QD32")
    report(args, results, ratios,
           {"storage_figures": figures, "from_storage": args.from_storage,
            "atlas": args.atlas, "atlas_cells": args.atlas_cells}, notes)


def served_bytes(mnt, ext):
    """The bytes per rank of epoch 0's first LIMIT batch files, from
    st_size (which generates nothing)."""
    d = f"{mnt}/epoch/0/rank"
    total = 0
    for r in range(RANKS):
        names = sorted(n for n in os.listdir(f"{d}/{r}/batch")
                       if n.endswith(ext))[:LIMIT]
        total += sum(os.stat(f"{d}/{r}/batch/{n}").st_size for n in names)
    return total // RANKS


def ratios_of(results):
    by = {r["name"]: r for r in results}

    def ratio(a, b):
        return (by[a]["rows_per_s"] / by[b]["rows_per_s"]
                if a in by and b in by else None)

    def cpu_ratio(trivial, rankfs):
        """1.5 x the trivial server's daemon CPU per GB over rankfs's:
        >= 1 where rankfs's is <= 1.5x the trivial server's."""
        if trivial not in by or rankfs not in by:
            return None
        t, r = by[trivial]["cpu_s_per_gb"], by[rankfs]["cpu_s_per_gb"]
        return 1.5 * t / r if t and r else None
    return ratio, cpu_ratio


def machine_info():
    def first(path, key):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith(key):
                        return line.split(":", 1)[1].strip()
        except OSError:
            return None
    return {"cpus": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version(),
            "cpu_model": first("/proc/cpuinfo", "model name"),
            "mem_total": first("/proc/meminfo", "MemTotal"),
            "loadavg": open("/proc/loadavg").read().split()[:3]}


def report(args, results, ratios, extra, notes=()):
    print(f"\n{'contender':48s} {'rows/s':>10s} {'MB/s':>8s} {'s':>7s} "
          f"{'CPU s/GB':>9s} {'peak RSS':>9s} {'disk MB':>8s}")
    for r in results:
        c = r["cpu_s_per_gb"]
        m = r["peak_rss_mb"]
        d = r.get("disk_mb_read")
        print(f"{r['name']:48s} {r['rows_per_s']:10.0f} "
              f"{r['mb_per_s']:8.0f} {r['seconds']:7.2f} "
              f"{'-' if c is None else f'{c:.2f}':>9s} "
              f"{'-' if m is None else f'{m:.0f} MiB':>9s} "
              f"{'-' if d is None else f'{d:.0f}':>8s}")
    print(f"\n{'ratio':60s} {'measured':>8s} {'target':>7s}")
    for name, value, target in ratios:
        if value is None:
            continue
        mark = "" if target is None else \
            (" ok" if value >= target else " BELOW")
        tgt = "-" if target is None else f">= {target:.2f}"
        print(f"{name:60s} {value:8.2f} {tgt:>7s}{mark}")
    for n in notes:
        print(n)
    machine = machine_info()
    print(f"\nmachine: {machine}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**extra, "batch": BATCH, "ranks": RANKS,
                       "batches_per_rank": LIMIT, "machine": machine,
                       "repeats": args.repeats, "warmup": args.warmup,
                       "results": results, "notes": list(notes),
                       "ratios": [{"name": n, "value": v, "target": t}
                                  for n, v, t in ratios if v is not None]},
                      f, indent=1)


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [r["name"] for r in results][::-1]
    values = [r["rows_per_s"] / 1000 for r in results][::-1]
    colors = ["tab:blue" if n.startswith("rankfs") else "tab:gray"
              for n in names]
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(names) + 1.2))
    ax.barh(names, values, color=colors)
    ax.set_xscale("log")  # the page cache bound is 10x everything else
    ax.set_xlabel("thousand rows per second, 2 ranks, batch 256, log scale "
                  "(higher is better)")
    for i, v in enumerate(values):
        # Two digits below 10k: gzip's h5py reads a few hundred rows/s.
        ax.text(v, i, f" {v:.0f}k" if v >= 10 else f" {v:.2g}k",
                va="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
