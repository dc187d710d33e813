# SPDX-License-Identifier: MIT
"""Damaged zarr stores (issue #24's bad input): a truncated chunk, a
chunk that decodes to the wrong size, a shard index pointing past the end
of its file or failing its CRC-32C, an unknown codec, a missing
zarr.json or .zarray, a CSR indptr that is not monotonic or indices out
of range, a blosc block of a chunk read in parts that does not decode
(its chunk's other block still reads), and a chunk file replaced under
the mount. What must hold: a
mount error (exit 1, one message naming the array) or EIO for every
batch holding a damaged row, and never bytes other than the undamaged
store's. Fails until the zarr backend lands."""
import errno
import functools
import json
import os
import shutil
import subprocess
import sys
import time

import anndata
import numcodecs
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from conftest import RANKFS, is_mounted
from test_fuzz_sources import in_child, read_mount

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "support"))
import zarr_read  # noqa: E402
import zarr_v3  # noqa: E402

N, D, CHUNK = 120, 6, 16
DEADLINE = 60.0
OPTIONS = "batch_size=10,drop_last=0,strategy=streaming,prefetch=0," \
    "open_timeout=10"


def dense(rng):
    return rng.integers(1, 100, (N, D)).astype(np.float32)


def obs():
    return pd.DataFrame(index=[f"c{i}" for i in range(N)])


def v3_dense(path, rng, **kw):
    return zarr_v3.write_anndata_v3(path, dense(rng), obs=obs(),
                                    chunk_rows=CHUNK, **kw)


def v3_csr(path, rng):
    x = sp.random(N, D, density=0.5, format="csr", random_state=rng,
                  dtype=np.float32)
    x.data[:] = rng.integers(1, 100, x.nnz)
    return zarr_v3.write_anndata_v3(path, x, obs=obs(), csr_chunk=32)


def truncate(f, keep):
    with open(f, "rb") as h:
        raw = h.read()
    with open(f, "wb") as h:
        h.write(raw[:keep(len(raw))])


def edit_json(path, change):
    with open(path) as f:
        meta = json.load(f)
    change(meta)
    with open(path, "w") as f:
        json.dump(meta, f)


# Each damage: (writer, damage(store) -> damaged rows, words the refusal
# must hold). Rows are those the damage makes unreadable.

def truncated_chunk(store):
    truncate(os.path.join(store, "X", "c", "2", "0"), lambda n: n // 2)
    return set(range(2 * CHUNK, 3 * CHUNK))


def wrong_size_chunk(store):
    """c/3/0 replaced by a valid blosc chunk of one row less."""
    x = zarr_read.read_array(os.path.join(store, "X"))
    short = np.ascontiguousarray(x[3 * CHUNK:4 * CHUNK - 1], dtype="<f4")
    blob = numcodecs.Blosc("lz4", 3, numcodecs.Blosc.SHUFFLE).encode(short)
    with open(os.path.join(store, "X", "c", "3", "0"), "wb") as f:
        f.write(blob)
    return set(range(3 * CHUNK, 4 * CHUNK))


def shard_index_past_end(store):
    """Shard 0's entry for inner chunk 1 points past the end of the file;
    the index's CRC-32C is made right again."""
    f = os.path.join(store, "X", "c", "0", "0")
    raw = bytearray(open(f, "rb").read())
    n = 4  # shards of 4 chunks
    size = 16 * n + 4
    index = np.frombuffer(bytes(raw[-size:-4]), dtype="<u8").copy()
    index[2] = len(raw) + 100  # entry 1's offset
    body = index.tobytes()
    raw[-size:] = body + zarr_v3.crc32c(body).to_bytes(4, "little")
    open(f, "wb").write(raw)
    return set(range(CHUNK, 2 * CHUNK))


def shard_index_crc(store):
    f = os.path.join(store, "X", "c", "0", "0")
    raw = bytearray(open(f, "rb").read())
    raw[-1] ^= 0x40  # the stored CRC-32C
    open(f, "wb").write(raw)
    return set(range(0, 4 * CHUNK))


def unknown_codec(store):
    edit_json(os.path.join(store, "X", "zarr.json"),
              lambda m: m["codecs"].append({"name": "lzma",
                                            "configuration": {}}))
    return set(range(N))


def missing_zarr_json(store):
    os.unlink(os.path.join(store, "X", "zarr.json"))
    return set(range(N))


def indptr_not_monotonic(store):
    p = os.path.join(store, "X", "indptr")
    indptr = zarr_read.read_array(p)
    indptr[50] = indptr[51] + 3
    shutil.rmtree(p)
    zarr_v3.write_array(p, indptr, chunks=(32,),
                        codecs=zarr_v3.BLOSC_LZ4)
    return {49, 50}


def indices_out_of_range(store):
    p = os.path.join(store, "X", "indices")
    indices = zarr_read.read_array(p)
    indptr = zarr_read.read_array(os.path.join(store, "X", "indptr"))
    row = 70
    indices[indptr[row]] = D + 5
    shutil.rmtree(p)
    zarr_v3.write_array(p, indices, chunks=(32,),
                        codecs=zarr_v3.BLOSC_LZ4)
    return {row}


def v2_dense(path, rng):
    anndata.AnnData(X=dense(rng), obs=obs(),
                    var=pd.DataFrame(index=[f"g{j}" for j in range(D)])
                    ).write_zarr(path, chunks=(CHUNK, D))
    return path


def v2_truncated_chunk(store):
    truncate(os.path.join(store, "X", "2.0"), lambda n: n - 7)
    return set(range(2 * CHUNK, 3 * CHUNK))


def v2_dense_blocks(path, rng):
    """v2_dense in blosc blocks of 8 rows: chunks are read in parts."""
    from test_zarr import recompress_v2
    v2_dense(path, rng)
    recompress_v2(path, numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE,
                                        blocksize=8 * D * 4))
    return path


def v2_block_length(store):
    """Chunk 2's second blosc block says its stream is 2 GiB long: its
    rows fail; the first block's rows (32..39) still read, in part."""
    p = os.path.join(store, "X", "2.0")
    with open(p, "r+b") as f:
        head = f.read(24)
        nbytes, blocksize = np.frombuffer(head[4:12], "<u4")
        assert (nbytes, blocksize) == (CHUNK * D * 4, 8 * D * 4)
        second = int(np.frombuffer(head[20:24], "<u4")[0])
        f.seek(second)
        f.write(np.uint32(0x7fffffff).tobytes())
    return set(range(2 * CHUNK + 8, 3 * CHUNK))


def v2_missing_zarray(store):
    os.unlink(os.path.join(store, "X", ".zarray"))
    return set(range(N))


CASES = {
    "truncated_chunk": (v3_dense, {}, truncated_chunk, ["X/c/2/0"]),
    "wrong_size_chunk": (v3_dense, {}, wrong_size_chunk, ["X/c/3/0"]),
    "shard_index_past_end": (v3_dense, {"sharded": True,
                                        "shard_rows": 4 * CHUNK},
                             shard_index_past_end, ["X/c/0/0"]),
    "shard_index_crc": (v3_dense, {"sharded": True,
                                   "shard_rows": 4 * CHUNK},
                        shard_index_crc, ["X/c/0/0"]),
    "unknown_codec": (v3_dense, {}, unknown_codec, ["X", "lzma"]),
    "missing_zarr_json": (v3_dense, {}, missing_zarr_json, ["X"]),
    "indptr_not_monotonic": (v3_csr, None, indptr_not_monotonic,
                             ["indptr"]),
    "indices_out_of_range": (v3_csr, None, indices_out_of_range,
                             ["column index 11 of value 210", "outside"]),
    "v2_truncated_chunk": (v2_dense, None, v2_truncated_chunk,
                           ["X/2.0"]),
    "v2_missing_zarray": (v2_dense, None, v2_missing_zarray, ["X"]),
    "v2_block_length": (v2_dense_blocks, None, v2_block_length,
                        ["X/2.0"]),
}
# Rows that must still be served: those of a chunk's undamaged parts.
SERVED = {"v2_block_length": set(range(2 * CHUNK, 2 * CHUNK + 8))}


def attempt(tmp_path, source, options=OPTIONS):
    """Mounts source in the foreground: (mountpoint, process, log), or
    (None, None, message) where the mount was refused (exit 1)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir(exist_ok=True)
    log = tmp_path / "rankfs.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([RANKFS, "-f", "-o", options, source,
                                 str(mnt)], stdout=out,
                                stderr=subprocess.STDOUT)
    deadline = time.monotonic() + DEADLINE
    while not is_mounted(str(mnt)) and proc.poll() is None:
        assert time.monotonic() < deadline, f"{source}: mount hangs"
        time.sleep(0.02)
    if proc.poll() is not None:
        text = open(log).read()
        assert proc.returncode == 1, (proc.returncode, text)
        assert text.strip(), "refused without a word"
        return None, None, text
    return str(mnt), proc, str(log)


def unmount(mnt, proc, log):
    subprocess.run(["fusermount3", "-u", mnt], check=False)
    code = proc.wait(timeout=DEADLINE)
    assert code == 0, (code, open(log).read())


@pytest.mark.parametrize("case", list(CASES))
def test_damaged_store(tmp_path, case):
    writer, kw, damage, words = CASES[case]
    rng = np.random.default_rng(11)
    store = str(tmp_path / "store.zarr")
    if kw is None:
        writer(store, rng)
    else:
        writer(store, rng, **kw)
    x, _, _ = zarr_read.read_anndata(store)  # before the damage
    x = x.toarray() if sp.issparse(x) else x
    bad = damage(store)
    mnt, proc, log = attempt(tmp_path, store)
    if mnt is None:
        log = log.replace(str(tmp_path), "TMP")  # the words, not the path
        for w in words:
            assert w in log, f"the refusal does not name {w}: {log}"
        print(case, "refused:", log.strip())
        return
    try:
        got = in_child(read_mount, mnt)
    finally:
        unmount(mnt, proc, log)
    assert got != "hung", f"{case}: a read hangs"
    text = open(log).read().replace(str(tmp_path), "TMP")
    eio = 0
    served = set()
    for item in got:
        if isinstance(item[0], int):
            code, index = item
            assert code == errno.EIO and index is not None, item
            # Only a batch with a damaged row fails: the others are
            # served (a daemon failing every read must not pass).
            assert bad & set(index.tolist()), \
                f"{case}: a batch of undamaged rows failed: {index}"
            eio += 1
            continue
        index, batch = item
        served |= set(index.tolist())
        assert not bad & set(index.tolist()), \
            f"{case}: damaged rows {sorted(bad & set(index.tolist()))} " \
            "served"
        np.testing.assert_array_equal(batch, x[index])
    assert eio, f"{case}: the damage went unnoticed"
    assert SERVED.get(case, set()) <= served, \
        f"{case}: undamaged rows not served"
    print(case, f"{eio} of {len(got)} batches EIO")
    # The log says why, naming the damaged file.
    for w in words:
        assert w in text, f"{case}: the log does not name {w}: {text}"


def test_chunk_replaced_under_the_mount(tmp_path):
    """A chunk file renamed over under the mount: new batches fail with
    EIO, and no batch serves its new bytes."""
    rng = np.random.default_rng(3)
    store = v3_dense(str(tmp_path / "live.zarr"), rng)
    x, _, _ = zarr_read.read_anndata(store)
    mnt, proc, log = attempt(tmp_path, store)
    assert mnt is not None, log
    try:
        first = in_child(read_mount, mnt)
        assert all(not isinstance(i[0], int) for i in first), first
        for index, batch in first:
            np.testing.assert_array_equal(batch, x[index])
        # New bytes for rows 16..31 (chunk c/1/0), renamed over the old.
        y = x.copy()
        y[CHUNK:2 * CHUNK] += 1000
        other = str(tmp_path / "other.zarr")
        zarr_v3.write_array(os.path.join(other, "X"), y,
                            chunks=(CHUNK, D), codecs=zarr_v3.BLOSC_LZ4)
        os.rename(os.path.join(other, "X", "c", "1", "0"),
                  os.path.join(store, "X", "c", "1", "0"))
        time.sleep(1.1)  # a new mtime second for watchers that poll
        later = in_child(functools.partial(read_mount, epoch=1), mnt)
    finally:
        unmount(mnt, proc, log)
    assert later != "hung"
    eio = 0
    for item in later:
        if isinstance(item[0], int):
            assert item[0] == errno.EIO, item
            eio += 1
            continue
        index, batch = item
        # Never the new bytes; the old ones only as a decoded chunk kept
        # from epoch 0 may give them.
        np.testing.assert_array_equal(batch, x[index])
    assert eio, "no new batch failed after the chunk was replaced"
