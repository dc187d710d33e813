"""Valid zarr stores at the edges of the layout, and hostile metadata,
read with the FUSE-free rankfs-cat: every batch equal to the independent
reader's rows (tests/support/zarr_read.py), or a clean refusal; never a
crash or wrong bytes."""
import io
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "support"))
import zarr_read  # noqa: E402
import zarr_v3  # noqa: E402


def sanitizer_error(text):
    return "ERROR: AddressSanitizer" in text or \
        "ERROR: LeakSanitizer" in text or "runtime error" in text


def batches(rankfs_cat, store, rows, batch=8, options=""):
    """Every streaming batch of store, as arrays."""
    out = []
    opts = f"batch_size={batch},strategy=streaming,drop_last=0" + options
    for b in range((rows + batch - 1) // batch):
        res = rankfs_cat(store, opts, f"epoch/0/rank/0/batch/{b:06d}.npy")
        assert res.returncode == 0, res.stderr
        assert not sanitizer_error(res.stderr), res.stderr
        out.append(np.load(io.BytesIO(res.stdout)))
    return out


def test_shard_wider_than_the_columns(tmp_path, rankfs_cat):
    """Shards of 8 columns over 10: the second shard's last inner chunk
    (columns 12..15) lies wholly past the array. Its columns are not the
    rows' (they were written past each row's end)."""
    x = np.arange(40 * 10, dtype=np.float32).reshape(40, 10) + 1
    p = str(tmp_path / "pad.zarr")
    zarr_v3.write_anndata_v3(p, x, chunk_rows=8)
    shutil.rmtree(os.path.join(p, "X"))
    zarr_v3.write_array(os.path.join(p, "X"), x, chunks=(8, 4),
                        shards=(16, 8), attributes=zarr_v3.ARRAY)
    want = zarr_read.read_matrix(os.path.join(p, "X"))
    assert np.array_equal(want, x)
    got = np.concatenate(batches(rankfs_cat, p, 40))
    assert np.array_equal(got, want)
