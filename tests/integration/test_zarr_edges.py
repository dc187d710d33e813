# SPDX-License-Identifier: MIT
"""Valid zarr stores at the edges of the layout, and hostile metadata,
read with the FUSE-free rankfs-cat: every batch equal to the independent
reader's rows (tests/support/zarr_read.py), or a clean refusal; never a
crash or wrong bytes."""
import io
import json
import os
import shutil
import subprocess
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


def _consolidated_v2(root, nodes):
    """A v2 store that is its .zmetadata alone (no chunk file)."""
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, ".zmetadata"), "w") as f:
        json.dump({"metadata": nodes, "zarr_consolidated_format": 1}, f)


def _v2_array(shape, chunks, dtype, strings=False):
    return {"zarr_format": 2, "shape": shape, "chunks": chunks,
            "dtype": dtype, "compressor": None, "order": "C",
            "filters": [{"id": "vlen-utf8"}] if strings else None,
            "fill_value": None if strings else 0}


def _anndata_v2(extra):
    nodes = {".zgroup": {"zarr_format": 2},
             ".zattrs": {"encoding-type": "anndata"},
             "X/.zarray": _v2_array([8, 2], [8, 2], "<f4"),
             "obs/.zgroup": {"zarr_format": 2}}
    nodes.update(extra)
    return nodes


def test_categories_outside_the_store(tmp_path, rankfs_cat):
    """A codes array's "categories" attribute with '..' (or an _index
    naming ../..) would read an array outside the store: refused, as
    zarr-python refuses such paths."""
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / ".zarray").write_text(json.dumps(_v2_array([2], [2], "|O",
                                                          strings=True)))
    p = tmp_path / "s.zarr"
    for cats in ("../../secret", "/../secret", "./../../secret"):
        shutil.rmtree(p, ignore_errors=True)
        _consolidated_v2(str(p), _anndata_v2({
            "obs/ct/.zarray": _v2_array([8], [8], "|i1"),
            "obs/ct/.zattrs": {"categories": cats}}))
        # the consolidated copy names it too: neither is read
        meta = json.loads((p / ".zmetadata").read_text())
        meta["metadata"][f"obs/{cats.lstrip('/')}/.zarray"
                         if not cats.startswith("/") else
                         f"{cats[1:]}/.zarray"] = _v2_array(
            [2], [2], "|O", strings=True)
        (p / ".zmetadata").write_text(json.dumps(meta))
        res = rankfs_cat(p, "batch_size=8,strategy=streaming,label=ct",
                         "dataset.json")
        assert res.returncode != 0, res.stdout
        assert "'.' or '..' segment" in res.stderr, res.stderr
        assert not sanitizer_error(res.stderr), res.stderr


def test_claimed_var_names_not_read(tmp_path, rankfs_cat):
    """A var index whose shape alone (no chunk written) says 2^24 names
    for 2 columns is not read: the mount is as quick as without it (it
    made 2^24 strings), and a var join says the counts differ. A var of
    another length than the columns mounts without var names (it was a
    NULL dereference in rfs_dataset_var_name)."""
    import time
    p = tmp_path / "v.zarr"
    _consolidated_v2(str(p), _anndata_v2({
        "var/.zgroup": {"zarr_format": 2},
        "var/.zattrs": {"_index": "_index"},
        "var/_index/.zarray": _v2_array([1 << 24], [1], "|O",
                                        strings=True)}))
    t = time.monotonic()
    res = rankfs_cat(p, "batch_size=8,strategy=streaming", "dataset.json")
    assert res.returncode == 0, res.stderr
    assert time.monotonic() - t < 20
    res = rankfs_cat(p, "batch_size=8,strategy=streaming,var_join=inner",
                     "dataset.json")
    assert res.returncode != 0
    assert "16777216 var names for 2 columns" in res.stderr, res.stderr


@pytest.mark.parametrize("names", [["g0"], ["g0", "g1", "g2"]],
                         ids=["one", "three"])
def test_var_names_written_for_another_width(tmp_path, rankfs_cat, names):
    """A var index of 1 or 3 names (written, chunk and all) for 2
    columns: served without var names, and a var join says the counts
    differ (a NULL dereference in rfs_dataset_var_name before)."""
    import warnings

    import anndata
    import numcodecs
    import zarr
    p = tmp_path / "w.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        anndata.AnnData(X=np.ones((8, 2), np.float32)).write_zarr(str(p))
        var = zarr.open_group(str(p / "var"), mode="r+")
        index = var.attrs["_index"]
        del var[index]
        var.create_dataset(index, dtype=object,
                           object_codec=numcodecs.VLenUTF8(),
                           data=np.array(names, dtype=object))
    opts = "batch_size=8,strategy=streaming"
    res = rankfs_cat(p, opts, "dataset.json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["var_names"] is None
    res = rankfs_cat(p, opts + ",var_join=inner", "dataset.json")
    assert res.returncode == 1
    assert f"{len(names)} var names for 2 columns of /X" in res.stderr


def test_claimed_categories_not_read(tmp_path, rankfs_cat):
    """int8 codes index 128 categories: a categories array claiming 2^24
    (no chunk written) is refused unread."""
    p = tmp_path / "c.zarr"
    _consolidated_v2(str(p), _anndata_v2({
        "obs/ct/.zgroup": {"zarr_format": 2},
        "obs/ct/.zattrs": {"encoding-type": "categorical"},
        "obs/ct/codes/.zarray": _v2_array([8], [8], "|i1"),
        "obs/ct/categories/.zarray": _v2_array([1 << 24], [1], "|O",
                                               strings=True)}))
    res = rankfs_cat(p, "batch_size=8,strategy=streaming,label=ct",
                     "dataset.json")
    assert res.returncode != 0
    assert "16777216 categories, more than its codes (int8)" in \
        res.stderr, res.stderr


def peak_of(args, timeout=60):
    """Runs args; (exit code, stderr, its peak RSS in KiB). Started by a
    small Python of its own: a child forked from this process counts
    this process's RSS at the fork in its ru_maxrss (1.2 GB late in the
    suite), whatever it execs."""
    import sys
    starter = ("import resource, subprocess, sys\n"
               "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)\n"
               "print(r.returncode, resource.getrusage("
               "resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    r = subprocess.run([sys.executable, "-c", starter] + list(args),
                       capture_output=True, text=True, timeout=timeout)
    code, peak = (int(v) for v in r.stdout.split())
    return code, r.stderr, peak


def test_chunk_longer_than_the_column(tmp_path, rankfs_cat):
    """A weights column of 8 rows whose chunks say 2^28 float64 values (2
    GiB, no chunk written) reads its 8 fill values: the whole chunk was
    allocated and filled (rfs_zarr_array_read_all)."""
    from conftest import RANKFS_CAT
    p = tmp_path / "w.zarr"
    w = _v2_array([8], [1 << 28], "<f8")
    w["fill_value"] = 1.0
    _consolidated_v2(str(p), _anndata_v2({"obs/w/.zarray": w}))
    code, err, peak = peak_of([RANKFS_CAT, "-o",
                               "batch_size=8,strategy=weighted,weights=w",
                               str(p), "dataset.json"])
    assert code == 0, err
    assert not sanitizer_error(err), err
    assert peak < 1 << 20, peak  # KiB: under 1 GiB


def test_stored_chunk_too_small_for_its_shape(tmp_path, rankfs_cat):
    """A weights column of 8 rows whose raw chunk (64 bytes stored) says
    2^28 float64 values fails the mount naming the chunk, before 2 GiB
    are allocated for it."""
    p = tmp_path / "w.zarr"
    w = _v2_array([8], [1 << 28], "<f8")
    _consolidated_v2(str(p), _anndata_v2({"obs/w/.zarray": w}))
    os.makedirs(p / "obs" / "w")
    (p / "obs" / "w" / "0").write_bytes(np.ones(8).tobytes())
    res = rankfs_cat(p, "batch_size=8,strategy=weighted,weights=w",
                     "dataset.json")
    assert res.returncode == 1, res.stderr
    assert "64 stored bytes cannot decode to the 2147483648 bytes" in \
        res.stderr, res.stderr
    assert not sanitizer_error(res.stderr), res.stderr
