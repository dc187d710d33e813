"""Valid zarr stores at the edges of the layout, and hostile metadata,
read with the FUSE-free rankfs-cat: every batch equal to the independent
reader's rows (tests/support/zarr_read.py), or a clean refusal; never a
crash or wrong bytes."""
import io
import os
import shutil
import sys

import numpy as np
import pytest

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


def test_var_name_with_a_newline(tmp_path, rankfs_cat):
    """var_names.txt is one name per line: a name holding a line break
    would shift every later name onto the wrong column (Mount.var_names
    reads it with splitlines). Such names: no var_names.txt, and the
    batches as before."""
    import warnings

    import anndata
    import pandas as pd
    x = np.arange(20 * 3, dtype=np.float32).reshape(20, 3)
    for names, served in ((["a\nb", "c", "d"], False),
                          (["a\rb", "c", "d"], False),
                          (["a", "c", "d"], True)):
        p = tmp_path / f"v{len(os.listdir(tmp_path))}.zarr"
        ad = anndata.AnnData(X=x, var=pd.DataFrame(index=names),
                             obs=pd.DataFrame(index=[f"c{i}"
                                                     for i in range(20)]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ad.write_zarr(str(p))
        res = rankfs_cat(p, "batch_size=4", "var_names.txt")
        if served:
            assert res.returncode == 0, res.stderr
            assert res.stdout.decode().splitlines() == names
        else:
            assert res.returncode != 0, res.stdout
            assert "No such file" in res.stderr, res.stderr
        assert np.array_equal(np.concatenate(batches(rankfs_cat, p, 20,
                                                     batch=4)), x)


def test_fifo_in_the_store(tmp_path, rankfs_cat):
    """A chunk file, or a metadata file, that is a FIFO: opening one for
    reading waits for a writer forever (a reader thread, or the mount,
    hung). Refused or EIO at once instead."""
    import subprocess
    import warnings

    import numcodecs
    import zarr
    x = np.arange(40 * 8, dtype=np.float32).reshape(40, 8)
    p = tmp_path / "plain.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.open_array(str(p), mode="w", shape=x.shape, chunks=(8, 8),
                            dtype="<f4", compressor=numcodecs.Zstd(1))
        z[:] = x
    os.remove(p / "1.0")
    os.mkfifo(p / "1.0")
    opts = "batch_size=8,strategy=streaming"
    try:
        res = rankfs_cat(p, opts, "epoch/0/rank/0/batch/000001.npy",
                         timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("a read of a FIFO chunk hung")
    assert res.returncode == 1, res.stderr
    assert not sanitizer_error(res.stderr), res.stderr
    res = rankfs_cat(p, opts, "epoch/0/rank/0/batch/000000.npy")
    assert res.returncode == 0, res.stderr
    assert np.array_equal(np.load(io.BytesIO(res.stdout)), x[:8])
    os.remove(p / "1.0")
    os.mkfifo(p / ".zattrs")
    try:
        res = rankfs_cat(p, opts, "epoch/0/rank/0/batch/000000.npy",
                         timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("a mount with a FIFO .zattrs hung")
    assert res.returncode == 1, res.stderr
    assert "not a regular file" in res.stderr, res.stderr


def test_anndata_07_categories_beside_their_codes(tmp_path, rankfs_cat):
    """anndata 0.7 wrote a categorical obs column as a codes array whose
    "categories" attribute names its categories array relative to obs
    (obs/cell_type -> "__categories/cell_type", as anndata 0.7 reads it:
    from the codes' parent group), not the store's root."""
    import json
    import warnings

    import anndata
    import numcodecs
    import pandas as pd
    import zarr
    n = 24
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    p = tmp_path / "old.zarr"
    ad = anndata.AnnData(X=x, obs=pd.DataFrame(index=[f"c{i}"
                                                      for i in range(n)]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ad.write_zarr(str(p))
        obs = zarr.open_group(str(p / "obs"), mode="r+")
        codes = (np.arange(n) % 3).astype(np.int8)
        obs.create_dataset("cell_type", data=codes)
        obs["cell_type"].attrs["categories"] = "__categories/cell_type"
        obs.create_dataset("__categories/cell_type", dtype=object,
                           object_codec=numcodecs.VLenUTF8(),
                           data=np.array(["B", "NK", "T"], dtype=object))
    opts = "batch_size=8,strategy=streaming,label=cell_type"
    res = rankfs_cat(p, opts, "dataset.json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["label"]["categories"] == ["B", "NK", "T"]
    res = rankfs_cat(p, opts, "epoch/0/rank/0/label/000001.npy")
    assert res.returncode == 0, res.stderr
    assert np.array_equal(np.load(io.BytesIO(res.stdout)), codes[8:16])


def test_float16_fill_value(tmp_path, rankfs_cat):
    """A float16 array's fill_value (1.5, -inf, NaN) in its absent
    chunks, as zarr-python reads them."""
    import zarr
    for fill in (1.5, float("-inf"), float("nan")):
        x = np.arange(40 * 3, dtype=np.float16).reshape(40, 3)
        p = str(tmp_path / f"h{fill}.zarr")
        z = zarr.open_array(p, mode="w", shape=x.shape, chunks=(8, 3),
                            dtype="f2", fill_value=fill)
        z[:] = x
        os.unlink(os.path.join(p, "1.0"))  # rows 8..15: the fill
        want = zarr.open_array(p, mode="r")[:]
        assert np.isnan(want[8:16]).all() if fill != fill else \
            (want[8:16] == np.float16(fill)).all()
        got = np.concatenate(batches(rankfs_cat, p, 40))
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, want)
