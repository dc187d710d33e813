# SPDX-License-Identifier: MIT
"""Byte-flipped sources: small dense, gzip and CSR .h5ad files with a few
bits flipped at random places, at a bounded number of seeds
(RANKFS_FUZZ_SEEDS, default 12 per file). Each mount and each read runs
under a deadline. What must hold: no hang, no crash, and no batch whose
bytes differ from h5py's reading of the same file; where h5py cannot read
a row, a batch holding it is a mount error or EIO."""
import errno
import multiprocessing as mp
import os
import random
import subprocess
import time

import h5py
import numpy as np
import pytest

from conftest import RANKFS, is_mounted

SEEDS = int(os.environ.get("RANKFS_FUZZ_SEEDS", "12"))
# The sanitized daemon's leak check leaves out what the HDF5 library
# itself loses on a damaged file (its error paths leak, ours must not:
# the rest of the suite checks those with undamaged files).
LSAN_SUPPRESSIONS = os.path.join(os.path.dirname(__file__),
                                 "lsan-hdf5.supp")
ROWS, COLS, BATCH = 60, 16, 10
DEADLINE = 60.0


def write_original(kind, path):
    import anndata
    import pandas as pd
    import scipy.sparse as sp
    x = np.random.default_rng(0).random((ROWS, COLS), dtype=np.float32)
    if kind == "csr":
        x[x < 0.7] = 0
        x = sp.csr_matrix(x)
    a = anndata.AnnData(
        X=x, obs=pd.DataFrame(index=[f"c{i}" for i in range(ROWS)]),
        var=pd.DataFrame(index=[f"g{j}" for j in range(COLS)]))
    a.write_h5ad(path, compression="gzip" if kind == "gzip" else None)


def flip(src, dst, seed):
    data = bytearray(open(src, "rb").read())
    rng = random.Random(seed)
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    with open(dst, "wb") as f:
        f.write(data)


def reference_rows(path, kind, out):
    """Row i as h5py reads it (CSR: densified from its entries), or None
    where h5py cannot read it."""
    rows = [None] * ROWS
    try:
        with h5py.File(path, "r") as f:
            if kind == "csr":
                g = f["X"]
                cols = int(g.attrs["shape"][1])
                indptr = g["indptr"][()]
                for i in range(ROWS):
                    try:
                        a, b = int(indptr[i]), int(indptr[i + 1])
                        d, c = g["data"][a:b], g["indices"][a:b]
                        if b < a or len(d) != b - a or \
                                (c < 0).any() or (c >= cols).any():
                            continue
                        row = np.zeros(cols, d.dtype)
                        np.add.at(row, c.astype(np.int64), d)
                        rows[i] = row
                    except Exception:
                        pass
            else:
                for i in range(ROWS):
                    try:
                        rows[i] = f["X"][i]
                    except Exception:
                        pass
    except Exception:
        pass
    out.put(rows)


def read_mount(mnt, out, epoch=0):
    """Every batch of rank 0 in epoch: (index, bytes), or (the errno,
    index) where a read failed (index None if that one did)."""
    got = []
    d = f"{mnt}/epoch/{epoch}/rank/0"
    for name in sorted(os.listdir(f"{d}/batch")):
        if not name.endswith(".npy"):
            continue
        index = None
        try:
            index = np.load(f"{d}/index/{name}")
            got.append((index, np.load(f"{d}/batch/{name}")))
        except OSError as e:
            got.append((e.errno, index))
    out.put(got)


def in_child(target, *args):
    """target(*args, queue) in a forked process under the deadline: a
    hang fails the test instead of stopping the suite."""
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=target, args=(*args, q))
    p.start()
    try:
        return q.get(timeout=DEADLINE)
    except Exception:
        p.kill()
        return "hung"
    finally:
        p.join(5)


def sanitizer_error(text):
    """A sanitizer's error report (its warning that an allocation of a
    damaged size failed, answered by rankfs, is none)."""
    return "ERROR: AddressSanitizer" in text or \
        "ERROR: LeakSanitizer" in text or "runtime error" in text


def check_one(path, kind, mnt, log):
    ref = in_child(reference_rows, path, kind)
    if ref == "hung":  # h5py loops on it: no row is readable
        ref = [None] * ROWS
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [RANKFS, "-f", "-o", f"batch_size={BATCH},drop_last=0,"
             "open_timeout=10,prefetch=0", path, mnt],
            stdout=out, stderr=subprocess.STDOUT,
            env=dict(os.environ,
                     LSAN_OPTIONS=f"suppressions={LSAN_SUPPRESSIONS}"))
    deadline = time.monotonic() + DEADLINE
    while not is_mounted(mnt) and proc.poll() is None:
        assert time.monotonic() < deadline, f"{path}: mount hangs"
        time.sleep(0.02)
    text = open(log).read()
    assert not sanitizer_error(text), text
    if proc.poll() is not None:  # refused: a message, a failure status
        assert proc.returncode == 1, (proc.returncode, text)
        assert text.strip(), f"{path}: mount failed without a word"
        return "refused"
    try:
        got = in_child(read_mount, mnt)
    finally:
        subprocess.run(["fusermount3", "-u", mnt], check=False)
        code = proc.wait(timeout=DEADLINE)
    assert got != "hung", f"{path}: a read hangs"
    text = open(log).read()
    assert code == 0, (code, text)
    assert not sanitizer_error(text), text
    compared = 0
    for item in got:
        if isinstance(item[0], int):
            assert item[0] == errno.EIO, item
            continue
        compared += 1
        index, batch = item
        for j, i in enumerate(index):
            want = ref[i]
            assert want is not None, f"{path}: row {i} served, h5py " \
                "cannot read it"
            assert batch.dtype == want.dtype and \
                batch[j].tobytes() == want.tobytes(), \
                f"{path}: row {i} differs from h5py's"
    return compared


@pytest.mark.parametrize("kind", ["dense", "gzip", "csr"])
def test_byte_flipped_sources(tmp_path, kind):
    original = str(tmp_path / f"{kind}.h5ad")
    write_original(kind, original)
    outcomes = []
    for seed in range(SEEDS):
        path = str(tmp_path / f"{kind}-{seed}.h5ad")
        flip(original, path, seed)
        mnt = tmp_path / f"mnt{seed}"
        mnt.mkdir()
        outcomes.append(check_one(path, kind, str(mnt),
                                  str(tmp_path / f"{seed}.log")))
        assert not is_mounted(str(mnt))
    # The run exercised both sides: batches served and compared with
    # h5py's rows (a daemon failing every read must not pass), and files
    # refused or reads failing (printed for the record).
    print(kind, outcomes)
    assert sum(o for o in outcomes if o != "refused") > 0, outcomes
