# SPDX-License-Identifier: MIT
"""The zarr test support itself, without rankfs: the v3 writer
(tests/support/zarr_v3.py) and the independent reader
(tests/support/zarr_read.py) agree on every codec, byte order, sharding
layout and absent chunk; the bytes on disk are checked against the
specification by hand where it is cheap; v2 stores written by zarr-python
and anndata read back. test_zarr.py trusts these two only because of
this file."""
import json
import os
import sys

import numcodecs
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "support"))
import zarr_read  # noqa: E402
import zarr_v3  # noqa: E402

CODECS = {
    "raw": [],
    "blosc_lz4_shuffle": zarr_v3.BLOSC_LZ4,
    "blosc_zstd_bitshuffle": [("blosc", {"cname": "zstd", "clevel": 5,
                                         "shuffle": "bitshuffle"})],
    "blosc_blosclz_noshuffle": [("blosc", {"cname": "blosclz", "clevel": 9,
                                           "shuffle": "noshuffle"})],
    "blosc_zlib": [("blosc", {"cname": "zlib", "clevel": 1,
                              "shuffle": "shuffle"})],
    "zstd": [("zstd", {"level": 3})],
    "gzip": [("gzip", {"level": 5})],
}
LAYOUTS = {"plain": {}, "shard_end": {"shards": (16, 6)},
           "shard_start": {"shards": (16, 6), "index_location": "start"},
           "shard_nocrc": {"shards": (16, 6), "index_crc": False}}
DTYPES = ["float32", "float64", "int32", "int64", "uint32", "bool",
          "int8", "uint16", "float16"]


def sample(dtype, rng, shape=(45, 6)):
    if dtype == "bool":
        a = rng.random(shape) < 0.3
    elif dtype.startswith("float"):
        a = rng.standard_normal(shape).astype(dtype)
    else:
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, shape, dtype=dtype,
                         endpoint=True)
    a[8:24] = 0  # two whole chunks of fill (chunks of 8 rows)
    return a


def test_crc32c_check_values():
    for f in (zarr_v3.crc32c, zarr_read.crc32c):
        assert f(b"123456789") == 0xE3069283
        assert f(b"") == 0
        assert f(bytes(32)) == 0x8A9136AA  # RFC 3720's test vector
        assert f(bytes([0xFF] * 32)) == 0x62A8AB43
        assert f(bytes(range(32))) == 0x46DD794E


@pytest.mark.parametrize("omit_fill", [True, False], ids=["omit", "keep"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("endian", ["little", "big"])
@pytest.mark.parametrize("codec", list(CODECS))
def test_round_trip(tmp_path, codec, endian, layout, omit_fill):
    rng = np.random.default_rng(len(codec) * 7 + len(layout))
    for dtype in DTYPES:
        a = sample(dtype, rng)
        p = str(tmp_path / dtype)
        zarr_v3.write_array(p, a, chunks=(8, 6), codecs=CODECS[codec],
                            endian=endian, omit_fill=omit_fill,
                            **LAYOUTS[layout])
        got = zarr_read.read_array(p)
        assert got.dtype == a.dtype and got.shape == a.shape, dtype
        np.testing.assert_array_equal(got, a, err_msg=dtype)
        meta = json.load(open(os.path.join(p, "zarr.json")))
        assert meta["data_type"] == dtype
        files = sorted(os.listdir(os.path.join(p, "c")))
        if layout == "plain":
            # Chunks of 8 rows: 6 of them, chunks 1 and 2 all fill.
            want = ["0", "3", "4", "5"] if omit_fill else \
                [str(i) for i in range(6)]
            assert files == want
            assert os.listdir(os.path.join(p, "c", "0")) == ["0"]
        else:
            assert files == ["0", "1", "2"]  # shards of 16 rows: 3


def test_v3_metadata_by_hand(tmp_path):
    a = np.arange(40, dtype=np.float64).reshape(20, 2)
    p = str(tmp_path / "a")
    zarr_v3.write_array(p, a, chunks=(4, 2), shards=(8, 2),
                        codecs=zarr_v3.BLOSC_LZ4, endian="big",
                        attributes={"k": [1, "v"]})
    meta = json.load(open(os.path.join(p, "zarr.json")))
    assert meta == {
        "zarr_format": 3, "node_type": "array", "shape": [20, 2],
        "data_type": "float64",
        "chunk_grid": {"name": "regular",
                       "configuration": {"chunk_shape": [8, 2]}},
        "chunk_key_encoding": {"name": "default",
                               "configuration": {"separator": "/"}},
        "fill_value": 0.0,
        "codecs": [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [4, 2],
            "codecs": [{"name": "bytes",
                        "configuration": {"endian": "big"}},
                       {"name": "blosc", "configuration": {
                           "cname": "lz4", "clevel": 3,
                           "shuffle": "shuffle", "typesize": 8,
                           "blocksize": 0}}],
            "index_codecs": [{"name": "bytes",
                              "configuration": {"endian": "little"}},
                             {"name": "crc32c"}],
            "index_location": "end"}}],
        "attributes": {"k": [1, "v"]}}


@pytest.mark.parametrize("location", ["end", "start"])
def test_shard_bytes_by_hand(tmp_path, location):
    """A shard decoded here with numcodecs alone: index of (offset,
    nbytes) little-endian uint64 pairs in C order, 2^64-1 for an absent
    chunk, its CRC-32C after it; offsets from the file's start."""
    a = np.arange(1, 49, dtype=np.int32).reshape(12, 4)
    a[4:6, 2:4] = 0  # inner chunk (2, 1) of shard 0 is all fill
    p = str(tmp_path / "s")
    zarr_v3.write_array(p, a, chunks=(2, 2), shards=(6, 4),
                        codecs=[("zstd", {"level": 1})],
                        index_location=location)
    with open(os.path.join(p, "c", "0", "0"), "rb") as f:
        raw = f.read()
    n = 3 * 2
    size = 16 * n + 4
    index = raw[:size] if location == "start" else raw[-size:]
    assert int.from_bytes(index[-4:], "little") == \
        zarr_read.crc32c(index[:-4])
    pairs = np.frombuffer(index[:-4], dtype="<u8").reshape(n, 2)
    assert tuple(pairs[5]) == (2**64 - 1, 2**64 - 1)
    for k in range(5):
        off, nb = (int(v) for v in pairs[k])
        if location == "start":
            assert off >= size
        chunk = np.frombuffer(numcodecs.Zstd().decode(raw[off:off + nb]),
                              dtype="<i4").reshape(2, 2)
        r, c = divmod(k, 2)
        np.testing.assert_array_equal(chunk, a[2 * r:2 * r + 2,
                                                2 * c:2 * c + 2])
    # The blosc header's typesize byte is the element size.
    zarr_v3.write_array(str(tmp_path / "b"), a, chunks=(12, 4),
                        codecs=zarr_v3.BLOSC_LZ4)
    with open(os.path.join(tmp_path, "b", "c", "0", "0"), "rb") as f:
        assert f.read()[3] == 4


def test_reader_refuses_a_damaged_shard(tmp_path):
    a = np.arange(64, dtype=np.float32).reshape(16, 4)
    p = str(tmp_path / "d")
    zarr_v3.write_array(p, a, chunks=(4, 4), shards=(16, 4))
    f = os.path.join(p, "c", "0", "0")
    raw = bytearray(open(f, "rb").read())
    raw[-10] ^= 1  # in the index
    open(f, "wb").write(raw)
    with pytest.raises(zarr_read.ZarrFormatError, match="crc32c"):
        zarr_read.read_array(p)
    zarr_v3.write_array(p, a, chunks=(4, 4), shards=(16, 4))
    open(f, "wb").write(open(f, "rb").read()[:100])  # truncated
    with pytest.raises(zarr_read.ZarrFormatError):
        zarr_read.read_array(p)


def test_fill_values_for_absent_chunks(tmp_path):
    a = np.full((30, 3), np.nan, dtype=np.float32)
    a[0] = 1
    p = str(tmp_path / "n")
    zarr_v3.write_array(p, a, chunks=(10, 3), fill_value=float("nan"))
    assert json.load(open(os.path.join(p, "zarr.json")))["fill_value"] \
        == "NaN"
    assert os.listdir(os.path.join(p, "c")) == ["0"]
    np.testing.assert_array_equal(zarr_read.read_array(p), a)
    b = np.full((30,), 7, dtype=np.int64)
    b[25] = 1
    zarr_v3.write_array(str(tmp_path / "i"), b, chunks=(10,), fill_value=7,
                        shards=(20,))
    np.testing.assert_array_equal(zarr_read.read_array(str(tmp_path / "i")),
                                  b)


@pytest.mark.parametrize("codec", ["raw", "blosc_lz4_shuffle", "zstd"])
@pytest.mark.parametrize("sharded", [False, True])
def test_strings(tmp_path, codec, sharded):
    s = np.array(["a", "bé", "", "ccc", "ünï"] * 7, dtype=object)
    p = str(tmp_path / "s")
    zarr_v3.write_array(p, s, chunks=(4,), codecs=CODECS[codec],
                        shards=(8,) if sharded else None)
    meta = json.load(open(os.path.join(p, "zarr.json")))
    assert meta["data_type"] == "string" and meta["fill_value"] == ""
    assert list(zarr_read.read_array(p)) == list(s)


def test_v2_stores_read_through_zarr_python(tmp_path):
    import zarr
    a = np.arange(300, dtype=">i8").reshape(100, 3)
    for name, comp in (("lz4", numcodecs.Blosc("lz4", 5,
                                               numcodecs.Blosc.SHUFFLE)),
                       ("zstd", numcodecs.Zstd(3)),
                       ("gzip", numcodecs.GZip(5))):
        p = str(tmp_path / name)
        z = zarr.open_array(p, mode="w", shape=a.shape, chunks=(16, 3),
                            dtype=a.dtype, compressor=comp)
        z[...] = a
        assert zarr_read.zarr_format(p) == 2
        np.testing.assert_array_equal(zarr_read.read_array(p), a)
        # The same array as v3: the two paths of the reader agree.
        zarr_v3.write_array(p + "3", a, chunks=(16, 3), endian="big",
                            codecs=[(name if name != "lz4" else "blosc",
                                     {"cname": "lz4"} if name == "lz4"
                                     else {})])
        np.testing.assert_array_equal(zarr_read.read_array(p + "3"),
                                      zarr_read.read_array(p))


def obs_frame(n, rng):
    return pd.DataFrame({
        "cell_type": pd.Categorical(rng.choice(["B", "T", "NK"], n),
                                    categories=["B", "T", "NK"]),
        "age": rng.integers(20, 80, n).astype(np.int32),
        "weight": rng.random(n),
        "keep": rng.random(n) < 0.5,
        "donor": rng.choice(["d1", "d2"], n).astype(object),
    }, index=[f"c{i}" for i in range(n)])


def check_obs(got, want):
    assert list(got.columns) == list(want.columns)
    assert list(got.index) == list(want.index)
    for c in want.columns:
        if isinstance(want[c].dtype, pd.CategoricalDtype):
            assert list(got[c].cat.categories) == \
                list(want[c].cat.categories)
            np.testing.assert_array_equal(got[c].cat.codes,
                                          want[c].cat.codes)
        else:
            np.testing.assert_array_equal(got[c].to_numpy(),
                                          want[c].to_numpy())


@pytest.mark.parametrize("consolidated", [False, True])
@pytest.mark.parametrize("sharded", [False, True])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_anndata_v3(tmp_path, fmt, sharded, consolidated):
    rng = np.random.default_rng(5)
    n, d = 70, 9
    x = sp.random(n, d, density=0.2, format="csr", random_state=rng,
                  dtype=np.float32)
    x = x if fmt == "csr" else x.toarray()
    obs = obs_frame(n, rng)
    p = str(tmp_path / "a.zarr")
    zarr_v3.write_anndata_v3(p, x, obs=obs,
                             var_names=[f"g{j}" for j in range(d)],
                             layers={"counts": x * 2}, sharded=sharded,
                             raw=(np.arange(2 * n).reshape(n, 2),
                                  ["r0", "r1"]),
                             chunk_rows=8, shard_rows=32, csr_chunk=16,
                             csr_shard=64, consolidated=consolidated)
    for layer, want in ((None, x), ("counts", x * 2)):
        got, gobs, var = zarr_read.read_anndata(p, layer)
        if fmt == "csr":
            assert sp.issparse(got)
            np.testing.assert_array_equal(got.indptr, want.indptr)
            np.testing.assert_array_equal(got.indices, want.indices)
            np.testing.assert_array_equal(got.data, want.data)
        else:
            np.testing.assert_array_equal(got, want)
    check_obs(gobs, obs)
    assert var == [f"g{j}" for j in range(d)]
    assert zarr_read.read_anndata(p, raw=True)[2] == ["r0", "r1"]
    np.testing.assert_array_equal(zarr_read.read_anndata(p, raw=True)[0],
                                  np.arange(2 * n).reshape(n, 2))
    at = zarr_read.attributes(os.path.join(p, "obs"))
    assert at == {"_index": "_index", "column-order": list(obs.columns),
                  "encoding-type": "dataframe", "encoding-version": "0.2.0"}
    assert zarr_read.attributes(os.path.join(p, "obs", "cell_type")) == {
        "encoding-type": "categorical", "encoding-version": "0.2.0",
        "ordered": False}
    assert zarr_read.attributes(os.path.join(p, "obs", "donor"))[
        "encoding-type"] == "string-array"
    if fmt == "csr":
        assert zarr_read.attributes(os.path.join(p, "X")) == {
            "encoding-type": "csr_matrix", "encoding-version": "0.1.0",
            "shape": [n, d]}
    meta = zarr_read.read_consolidated(p)
    if consolidated:
        for key, node in meta.items():
            assert node == json.load(open(os.path.join(p, key,
                                                       "zarr.json")))
        assert {"X", "obs", "obs/cell_type/codes", "var/_index"} <= \
            set(meta)
    else:
        assert meta is None


def test_anndata_v2_read_back(tmp_path):
    """anndata 0.8's write_zarr (v2): read_anndata goes through
    anndata.read_zarr and gives what was written."""
    import anndata
    rng = np.random.default_rng(2)
    n = 50
    x = sp.random(n, 6, density=0.3, format="csr", random_state=rng,
                  dtype=np.float32)
    obs = obs_frame(n, rng)
    ad = anndata.AnnData(X=x, obs=obs,
                         var=pd.DataFrame(index=[f"g{j}" for j in range(6)]))
    p = str(tmp_path / "v2.zarr")
    ad.write_zarr(p, chunks=(16,))
    got, gobs, var = zarr_read.read_anndata(p)
    assert (got != x).nnz == 0
    assert var == [f"g{j}" for j in range(6)]
    assert list(gobs.index) == list(obs.index)
    np.testing.assert_array_equal(gobs["age"], obs["age"])


@pytest.mark.parametrize("categorical", [True, False])
def test_annbatch_collection(tmp_path, categorical):
    import anndata
    rng = np.random.default_rng(9)
    parts = []
    for n in (30, 45, 20):
        x = sp.random(n, 5, density=0.4, format="csr", random_state=rng,
                      dtype=np.float32)
        parts.append(anndata.AnnData(
            X=x, obs=obs_frame(n, rng),
            var=pd.DataFrame(index=[f"g{j}" for j in range(5)])))
    p = str(tmp_path / "coll")
    zarr_v3.write_annbatch_collection(p, parts, src_paths=[
        "/data/a.h5ad", "/data/b.h5ad", "/data/c.h5ad"], csr_chunk=16,
        csr_shard=64, chunk_rows=8, shard_rows=16,
        src_path_categorical=categorical)
    assert zarr_read.attributes(p) == {
        "encoding-type": "annbatch-preshuffled", "encoding-version": "0.1.0"}
    assert sorted(os.listdir(p)) == ["dataset_0", "dataset_1", "dataset_2",
                                     "zarr.json"]
    x, obs, var = zarr_read.read_collection(p)
    want = sp.vstack([a.X for a in parts], format="csr")
    assert (x != want).nnz == 0
    assert list(obs["src_path"]) == ["/data/a.h5ad"] * 30 + \
        ["/data/b.h5ad"] * 45 + ["/data/c.h5ad"] * 20
    kind = zarr_read.attributes(os.path.join(p, "dataset_2", "obs",
                                             "src_path"))["encoding-type"]
    assert kind == ("categorical" if categorical else "string-array")
    if categorical:  # every dataset lists every file, as annbatch writes
        cats = zarr_read.read_array(os.path.join(
            p, "dataset_0", "obs", "src_path", "categories"))
        assert list(cats) == ["/data/a.h5ad", "/data/b.h5ad",
                              "/data/c.h5ad"]
    meta = zarr_read.read_consolidated(p)
    assert meta["dataset_1/X/data"] == json.load(open(os.path.join(
        p, "dataset_1", "X", "data", "zarr.json")))
    meta = json.load(open(os.path.join(p, "dataset_1", "X", "data",
                                       "zarr.json")))
    assert meta["chunk_grid"]["configuration"]["chunk_shape"] == [64]
    cfg = meta["codecs"][0]["configuration"]
    assert cfg["chunk_shape"] == [16]
    assert cfg["codecs"][1] == {"name": "blosc", "configuration": {
        "cname": "lz4", "clevel": 3, "shuffle": "shuffle", "typesize": 4,
        "blocksize": 0}}
