# SPDX-License-Identifier: MIT
"""Zarr sources through real mounts (issue #24): AnnData stores in zarr v2
(anndata.write_zarr, recompressed by zarr-python) and v3 (written by
tests/support/zarr_v3.py, sharded and not), an annbatch collection of
three datasets, and a mount mixing an .h5ad file and a zarr store. For
every strategy and partition, each batch .npy (and .npz for CSR), index
and label file equals the rows the independent reader
(tests/support/zarr_read.py) gives for that index, and the index files
equal the FUSE-free planner's where it needs no column.

A zarr store or collection is passed as a SOURCE like an .h5ad file: its
directory. The h5ad_* kinds are controls: the same checks over the HDF5
backend, so that a failure of a zarr kind is the backend's. The last
test joins a zarr v2 store, a v3 store and an .h5ad whose genes differ
(var_join=inner|outer, var_names=FILE: main's varjoin)."""
import os
import shutil
import sys

import anndata
import numcodecs
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from conftest import covering, plan, write_h5ad
from test_fetch import check_npz

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "support"))
import zarr_read  # noqa: E402
import zarr_v3  # noqa: E402

N, D = 300, 12
CLASSES = ["B", "T", "NK", "mono"]
WORLD, BATCH = 2, 32
BASE = f"world_size={WORLD},batch_size={BATCH},fetch_factor=2,seed=7," \
    "block_size=8"
# Every strategy with every row partition, and a filter; partition=file
# (rows of whole files) where a mount has several sources.
EXTRA = {"weighted": "weights=weight", "class_balanced": "smoothing=0.5"}
COMBOS = [(s, p, EXTRA.get(s, ""))
          for s in ("streaming", "shuffle", "block_shuffle", "weighted",
                    "class_balanced")
          for p in ("batch", "round_robin", "contiguous")] + \
    [("shuffle", "contiguous", "filter=keep:true")] + \
    [(s, "file", "") for s in ("streaming", "shuffle", "block_shuffle")]
MULTI_SOURCE = ("collection_dense", "collection_csr", "mixed_h5ad_zarr")
V2_CODECS = {
    "blosc_lz4": numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE),
    "zstd": numcodecs.Zstd(3),
    "gzip": numcodecs.GZip(5),
    # Blocks of 4 dense rows or 48 CSR values: a chunk is cached and
    # decoded in parts (a blosc block each), as a big chunk of an atlas.
    "blosc_blocks": numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE,
                                    blocksize=192),
    # Blocks of 200 bytes, 4 dense rows and a sixth: parts of 4 rows, most
    # cut from the two blocks they straddle (50 CSR values: whole).
    "blosc_straddle": numcodecs.Blosc("lz4", 5, numcodecs.Blosc.SHUFFLE,
                                      blocksize=200),
}


def make_x(rng, n=N, d=D, fmt="dense"):
    x = sp.random(n, d, density=0.25, format="csr", random_state=rng,
                  dtype=np.float32)
    x.data[:] = rng.integers(1, 100, x.nnz)  # exact in every dtype
    x = x.tolil()
    x[3] = 0  # an empty row
    if n >= 64:
        x[32:64] = 0  # v3 writes no chunk of these (fill_value)
    x = x.tocsr()
    x.eliminate_zeros()
    return x if fmt == "csr" else x.toarray()


def make_obs(rng, n=N, first=0):
    weight = rng.random(n) + 0.1
    weight[rng.choice(n, n // 10, replace=False)] = 0.0
    return pd.DataFrame({
        "cell_type": pd.Categorical(rng.choice(CLASSES, n),
                                    categories=CLASSES),
        "weight": weight,
        "keep": rng.random(n) < 0.6,
        "age": rng.integers(20, 80, n).astype(np.int32),
        "donor": rng.choice(["d1", "d2", "d3"], n).astype(object),
    }, index=[f"cell{first + i}" for i in range(n)])


def var_names(d=D):
    return [f"gene{j}" for j in range(d)]


def recompress_v2(store, compressor, csr_chunk=None):
    """Every array of a v2 store rewritten by zarr-python with compressor
    (anndata 0.8's write_zarr always takes zarr's default, blosc lz4),
    X/data and X/indices in chunks of csr_chunk values (anndata 0.8
    writes a sparse X's arrays in one chunk)."""
    import zarr
    for d, dirs, files in os.walk(store):
        if ".zarray" not in files:
            continue
        dirs[:] = []
        z = zarr.open_array(d, mode="r")
        data, attrs = z[...], dict(z.attrs)
        chunks = z.chunks
        if csr_chunk and os.path.relpath(d, store) in (
                os.path.join("X", "data"), os.path.join("X", "indices")):
            chunks = (csr_chunk,)
        kw = dict(shape=z.shape, chunks=chunks, dtype=z.dtype,
                  fill_value=z.fill_value,
                  compressor=compressor or z.compressor)
        if z.dtype == object:
            kw["object_codec"] = numcodecs.VLenUTF8()
        shutil.rmtree(d)
        out = zarr.open_array(d, mode="w", **kw)
        out[...] = data
        out.attrs.update(attrs)


def write_v2(path, x, obs, compressor, consolidated=False):
    ad = anndata.AnnData(X=x, obs=obs, var=pd.DataFrame(index=var_names()))
    ad.write_zarr(path, chunks=(64,) if sp.issparse(x) else (64, D))
    recompress_v2(path, compressor, csr_chunk=128)
    if consolidated:
        import zarr
        zarr.consolidate_metadata(path)
    return path


ZARR_KINDS = [f"{v}_{fmt}_{name}" for fmt in ("dense", "csr")
              for v, names in (("v2", V2_CODECS),
                               ("v3", ("plain", "sharded",
                                       "sharded_start_be",
                                       "sharded_blocks_be")))
              for name in names]
KINDS = ["h5ad_dense", "h5ad_csr"] + ZARR_KINDS + \
    ["collection_dense", "collection_csr", "mixed_h5ad_zarr"]
WRITTEN = {}


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """kind -> source paths. The tests expect what zarr_read (or anndata
    for an .h5ad) reads back from them, not the arrays they were written
    from (WRITTEN[kind]; test_sources_read_back compares the two)."""
    d = tmp_path_factory.mktemp("zarr")
    rng = np.random.default_rng(24)
    out = {}
    for fmt in ("dense", "csr"):
        x, obs = make_x(rng, fmt=fmt), make_obs(rng)
        for kind in [f"h5ad_{fmt}"] + [k for k in ZARR_KINDS
                                       if k.split("_")[1] == fmt]:
            WRITTEN[kind] = (x, obs)
        out[f"h5ad_{fmt}"] = [write_h5ad(str(d / f"{fmt}.h5ad"), x, obs)]
        for name, comp in V2_CODECS.items():
            out[f"v2_{fmt}_{name}"] = [write_v2(
                str(d / f"v2_{fmt}_{name}.zarr"), x, obs, comp,
                consolidated=name == "gzip")]
        v3 = {"plain": dict(sharded=False, codec=zarr_v3.BLOSC_LZ4),
              "sharded": dict(sharded=True, codec=[("zstd", {"level": 3})],
                              consolidated=True),
              "sharded_start_be": dict(sharded=True, index_location="start",
                                       endian="big",
                                       codec=[("gzip", {"level": 5})]),
              # Inner chunks read in parts (blosc blocks of 4 rows or 48
              # values) from inside their shard files, big-endian.
              "sharded_blocks_be": dict(
                  sharded=True, endian="big",
                  codec=[("blosc", {"cname": "lz4", "clevel": 3,
                                    "shuffle": "shuffle",
                                    "blocksize": 192})])}
        for name, kw in v3.items():
            out[f"v3_{fmt}_{name}"] = [zarr_v3.write_anndata_v3(
                str(d / f"v3_{fmt}_{name}.zarr"), x, obs=obs,
                var_names=var_names(), chunk_rows=16, shard_rows=64,
                csr_chunk=128, csr_shard=512, **kw)]
    # An annbatch collection of three datasets, and an .h5ad beside a
    # zarr store in one row space.
    for fmt in ("dense", "csr"):
        parts = []
        for i, n in enumerate((90, 130, 80)):
            parts.append(anndata.AnnData(
                X=make_x(rng, n=n, fmt=fmt), obs=make_obs(rng, n, 1000 * i),
                var=pd.DataFrame(index=var_names())))
        coll = str(d / f"collection_{fmt}")
        # src_path categorical as annbatch writes it, and as a string
        # column.
        zarr_v3.write_annbatch_collection(
            coll, parts, src_paths=[f"/atlas/part{i}.h5ad" for i in range(3)],
            chunk_rows=16, shard_rows=64, csr_chunk=128, csr_shard=512,
            src_path_categorical=fmt == "dense")
        out[f"collection_{fmt}"] = [coll]
        WRITTEN[f"collection_{fmt}"] = (
            sp.vstack([p.X for p in parts], format="csr") if fmt == "csr"
            else np.concatenate([p.X for p in parts]),
            pd.concat([p.obs for p in parts]))
    x1, obs1 = make_x(rng, n=140), make_obs(rng, 140)
    x2, obs2 = make_x(rng, n=160), make_obs(rng, 160, 140)
    WRITTEN["mixed_h5ad_zarr"] = (np.concatenate([x1, x2]),
                                  pd.concat([obs1, obs2]))
    out["mixed_h5ad_zarr"] = [
        write_h5ad(str(d / "first.h5ad"), x1, obs1),
        zarr_v3.write_anndata_v3(str(d / "second.zarr"), x2, obs=obs2,
                                 var_names=var_names(), sharded=True,
                                 chunk_rows=16, shard_rows=32)]
    return out


def read_source(path):
    """(X, obs, var names) of one source, read without rankfs."""
    if path.endswith(".h5ad"):
        ad = anndata.read_h5ad(path)
        x = sp.csr_matrix(ad.X) if sp.issparse(ad.X) else np.asarray(ad.X)
        return x, ad.obs, list(ad.var_names)
    if zarr_read.zarr_format(path) == 3 and \
            zarr_read.attributes(path).get("encoding-type") == \
            "annbatch-preshuffled":
        return zarr_read.read_collection(path)
    return zarr_read.read_anndata(path)


_expected = {}


def expected(sources):
    """The row space of the sources, in their order."""
    key = tuple(sources)
    if key not in _expected:
        parts = [read_source(s) for s in sources]
        xs = [p[0] for p in parts]
        assert all(p[2] == var_names() for p in parts)
        x = sp.vstack(xs, format="csr") if sp.issparse(xs[0]) \
            else np.concatenate(xs)
        _expected[key] = (x, pd.concat([p[1] for p in parts]))
    return _expected[key]


def label_values(obs, column):
    return obs[column].astype(str).to_numpy()


def check_mount(m, x, obs, label=None, epochs=(0, 1)):
    """Every batch, index (and label, .npz) file of the epochs equals the
    source rows; returns the index files, per epoch and rank."""
    csr = sp.issparse(x)
    dense = x.toarray() if csr else x
    nb = m.batches()
    assert nb >= 1
    info = m.json("dataset.json")
    assert info["rows"] == x.shape[0]
    assert info["format"] == ("csr" if csr else "dense")
    cats = info["label"]["categories"] if label else None
    labels = label_values(obs, label) if label else None
    seen = {}
    for e in epochs:
        for r in range(WORLD):
            per_rank = []
            for k in range(nb):
                index = m.load("index", e, r, k)
                assert index.dtype == np.int64 and index.shape == (BATCH,)
                assert index.min() >= 0 and index.max() < x.shape[0]
                batch = m.load("batch", e, r, k)
                assert batch.dtype == dense.dtype
                np.testing.assert_array_equal(batch, dense[index])
                if csr:
                    check_npz(m, x, e, r, k)
                if label:
                    got = m.load("label", e, r, k)
                    np.testing.assert_array_equal(
                        np.asarray(cats, dtype=object)[got], labels[index])
                per_rank.append(index)
            seen[e, r] = per_rank
    return seen


@pytest.mark.parametrize("kind", KINDS)
def test_sources_read_back(stores, kind):
    """No mount: the reader gives back what was written, and the stores
    are what they claim to be (v2 compressors, v3 sharding)."""
    import json
    x, obs = expected(stores[kind])
    wx, wobs = WRITTEN[kind]
    if sp.issparse(wx):
        assert sp.issparse(x) and (x != wx).nnz == 0
    else:
        np.testing.assert_array_equal(x, wx)
    assert list(obs.index) == list(wobs.index)
    for c in ("cell_type", "weight", "keep", "age", "donor"):
        np.testing.assert_array_equal(obs[c].astype(str).to_numpy(),
                                      wobs[c].astype(str).to_numpy())
    src = stores[kind][-1]
    if kind.startswith("v2_"):
        codec = kind.split("_", 2)[2]
        arr = "X/data" if "_csr_" in kind else "X"
        with open(os.path.join(src, arr, ".zarray")) as f:
            comp = json.load(f)["compressor"]
        assert comp == V2_CODECS[codec].get_config()
        with open(os.path.join(src, arr, ".zarray")) as f:
            assert json.load(f)["chunks"][0] == (128 if "_csr_" in kind
                                                 else 64)
        assert os.path.exists(os.path.join(src, ".zmetadata")) == \
            (codec == "gzip")
        if codec in ("blosc_blocks", "blosc_straddle"):
            first = "0" if "_csr_" in kind else "0.0"
            with open(os.path.join(src, arr, first), "rb") as f:
                # blosc's header: nbytes, blocksize
                nbytes, blocksize = np.frombuffer(f.read(12)[4:], "<u4")
            assert (nbytes, blocksize) == (
                512 if "_csr_" in kind else 64 * D * 4,
                V2_CODECS[codec].blocksize)
    if kind.startswith("v3_") or kind == "mixed_h5ad_zarr":
        arr = "X/data" if "_csr_" in kind else "X"
        meta = zarr_read.node_meta(os.path.join(src, arr))
        sharded = "sharded" in kind or kind == "mixed_h5ad_zarr"
        assert (meta["codecs"][0]["name"] == "sharding_indexed") == sharded
        if kind.endswith("_blocks_be"):
            inner = meta["codecs"][0]["configuration"]["codecs"]
            assert [c["name"] for c in inner] == ["bytes", "blosc"]
            assert inner[0]["configuration"]["endian"] == "big"
            assert inner[1]["configuration"]["blocksize"] == 192
        if kind == "v3_dense_plain":  # rows 32..63: absent chunks 2, 3
            assert sorted(os.listdir(os.path.join(src, "X", "c"))) == \
                sorted(str(i) for i in range(N // 16 + 1) if i not in (2, 3))


ROWS_CASES = covering((k, c) for k in KINDS for c in COMBOS
                      if c[1] != "file" or k in MULTI_SOURCE)


@pytest.mark.parametrize(
    "kind,strategy,partition,extra",
    [(k, s, p, e) for k, (s, p, e) in ROWS_CASES],
    ids=[f"{k}-{s}-{p}" + ("-" + e.split("=")[0] if e else "")
         for k, (s, p, e) in ROWS_CASES])
def test_rows_equal_source(mounts, stores, kind, strategy, partition,
                           extra):
    sources = stores[kind]
    x, obs = expected(sources)
    o = ",".join(p for p in (BASE, f"strategy={strategy}",
                             f"partition={partition}", "label=cell_type",
                             extra) if p)
    m = mounts(sources, o)
    seen = check_mount(m, x, obs, label="cell_type")
    info = m.json("dataset.json")
    assert info["label"]["categories"] == CLASSES
    # A collection is one source argument, and one source per dataset.
    assert len(info["sources"]) == \
        (3 if kind.startswith("collection") else len(sources))
    if "filter" in extra:
        keep = obs["keep"].to_numpy()
        assert info["filtered_rows"] == keep.sum()
        assert all(keep[i].all() for v in seen.values() for i in v)
    if strategy == "weighted":
        w = obs["weight"].to_numpy()
        assert all((w[i] > 0).all() for v in seen.values() for i in v)
    if strategy in ("streaming", "shuffle", "block_shuffle") and \
            "filter" not in extra:
        for e in (0, 1):
            every = np.concatenate([np.concatenate(seen[e, r])
                                    for r in range(WORLD)])
            assert len(np.unique(every)) == len(every)  # disjoint ranks
            if partition == "file":
                continue  # rankfs-plan --rows knows no file sizes
            sampling = f"{BASE},strategy={strategy},partition={partition}"
            for r, k in ((0, 0), (1, m.batches() - 1)):
                np.testing.assert_array_equal(
                    seen[e, r][k], plan(x.shape[0], sampling, e, r, k))


@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_collection_src_path_label_and_filter(mounts, stores, fmt):
    """A collection's src_path column works like any obs column."""
    sources = stores[f"collection_{fmt}"]
    x, obs = expected(sources)
    src = obs["src_path"].to_numpy()
    o = f"{BASE},strategy=shuffle,label=src_path"
    m = mounts(sources, o)
    check_mount(m, x, obs, label="src_path")
    info = m.json("dataset.json")
    assert info["label"]["categories"] == \
        [f"/atlas/part{i}.h5ad" for i in range(3)]
    assert [s["rows"] for s in info["sources"]] == [90, 130, 80]
    assert [s["first_row"] for s in info["sources"]] == [0, 90, 220]
    o = f"{BASE},strategy=block_shuffle,drop_last=0," \
        "filter=src_path:/atlas/part1.h5ad,label=cell_type"
    f = mounts(sources, o)
    assert f.json("dataset.json")["filtered_rows"] == 130
    rows = np.concatenate([np.concatenate(f.epoch_index(0, r))
                           for r in range(WORLD)])
    assert (src[rows] == "/atlas/part1.h5ad").all()
    assert set(rows) == set(range(90, 220))  # rows stay global
    for r in range(WORLD):
        for k in range(f.batches()):
            index = f.load("index", 0, r, k)
            dense = x[index].toarray() if sp.issparse(x) else x[index]
            np.testing.assert_array_equal(f.load("batch", 0, r, k), dense)


def test_mixed_sources_partition_file(mounts, stores):
    """partition=file over an .h5ad and a zarr store: rank 0 serves the
    .h5ad's rows, rank 1 the store's."""
    sources = stores["mixed_h5ad_zarr"]
    x, obs = expected(sources)
    o = f"{BASE},strategy=shuffle,partition=file,label=cell_type"
    m = mounts(sources, o)
    seen = check_mount(m, x, obs, label="cell_type")
    r0 = np.concatenate(seen[0, 0])
    r1 = np.concatenate(seen[0, 1])
    assert (r0 < 140).all() and (r1 >= 140).all()
    info = m.json("dataset.json")
    assert [s["rows"] for s in info["sources"]] == [140, 160]
    assert [s["first_row"] for s in info["sources"]] == [0, 140]


def test_zarr_equals_h5ad_byte_for_byte(mounts, stores):
    """The same matrix and obs as .h5ad, zarr v2 and zarr v3: one view,
    identical files (the sampler sees only rows and columns)."""
    o = f"{BASE},strategy=class_balanced,label=cell_type,filter=keep:true"
    for fmt in ("dense", "csr"):
        digests = []
        for kind in (f"h5ad_{fmt}", f"v2_{fmt}_zstd",
                     f"v3_{fmt}_sharded_start_be"):
            m = mounts(stores[kind], o)
            files = []
            for e in (0, 2):
                for r in range(WORLD):
                    for k in range(m.batches()):
                        for kind_ in ("batch", "index", "label"):
                            with open(m.file(kind_, e, r, k), "rb") as f:
                                files.append(f.read())
                        if fmt == "csr":
                            with open(m.file("batch", e, r, k)[:-4] +
                                      ".npz", "rb") as f:
                                files.append(f.read())
            digests.append(files)
            m.unmount()
        assert digests[0] == digests[1] == digests[2], fmt


@pytest.mark.parametrize("version", ["v2", "v3"])
def test_layer_raw_and_dtype(mounts, tmp_path, version):
    """layer= serves layers/NAME of a store, raw serves raw/X (with raw's
    var), dtype= casts."""
    rng = np.random.default_rng(5)
    x, obs = make_x(rng, n=200), make_obs(rng, 200)
    counts = (x * 3).astype(np.int32)
    rawx = make_x(rng, n=200, d=D + 3)
    raw_names = [f"raw{j}" for j in range(D + 3)]
    p = str(tmp_path / f"layers_{version}.zarr")
    if version == "v2":
        full = anndata.AnnData(X=rawx, obs=obs,
                               var=pd.DataFrame(index=raw_names))
        anndata.AnnData(X=x, obs=obs, var=pd.DataFrame(index=var_names()),
                        layers={"counts": counts}, raw=full).write_zarr(
                            p, chunks=(32, D))
    else:
        zarr_v3.write_anndata_v3(p, x, obs=obs, var_names=var_names(),
                                 layers={"counts": counts}, sharded=True,
                                 chunk_rows=16, shard_rows=64,
                                 raw=(rawx, raw_names))
    got, _, _ = zarr_read.read_anndata(p, layer="counts")
    assert got.dtype == np.int32
    m = mounts(p, f"{BASE},strategy=shuffle,layer=counts")
    for k in range(m.batches()):
        index = m.load("index", 0, 1, k)
        b = m.load("batch", 0, 1, k)
        assert b.dtype == np.int32
        np.testing.assert_array_equal(b, got[index])
    c = mounts(p, f"{BASE},strategy=shuffle,layer=counts,dtype=float64")
    index = c.load("index", 1, 0, 2)
    b = c.load("batch", 1, 0, 2)
    assert b.dtype == np.float64
    np.testing.assert_array_equal(b, got[index].astype(np.float64))
    want, _, names = zarr_read.read_anndata(p, raw=True)
    assert names == raw_names and want.shape == (200, D + 3)
    r = mounts(p, f"{BASE},strategy=block_shuffle,raw")
    assert r.json("dataset.json")["columns"] == D + 3
    for k in range(r.batches()):
        index = r.load("index", 2, 0, k)
        np.testing.assert_array_equal(r.load("batch", 2, 0, k), want[index])


JOIN_VARS = [
    [f"gene{j}" for j in range(10)],
    ["gene5", "gene2", "new0", "gene0", "gene9", "gene7", "gene3", "new1"],
    ["gene3", "new1", "gene0", "gene5", "gene9", "new2", "gene2"],
]


def served_names(mode, names_per_source, listed=None):
    """The columns a join serves, computed here from the sources' names."""
    if mode == "inner":
        return [g for g in names_per_source[0]
                if all(g in n for n in names_per_source[1:])]
    if mode == "outer":
        out = []
        for names in names_per_source:
            out += [g for g in names if g not in out]
        return out
    return list(listed)


@pytest.mark.parametrize("mode", ["inner", "outer", "names"])
@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_var_join_over_zarr_and_h5ad(mounts, tmp_path, fmt, mode):
    """A zarr v2 store, a sharded v3 store and an .h5ad whose genes differ,
    joined by var_join=inner|outer or var_names=FILE: every batch equals
    the join computed here from the independent reader's matrices."""
    rng = np.random.default_rng(31)
    sources, parts = [], []
    for i, (n, names) in enumerate(zip((100, 120, 80), JOIN_VARS)):
        x = make_x(rng, n=n, d=len(names), fmt=fmt)
        o = make_obs(rng, n, 1000 * i)
        var = pd.DataFrame(index=names)
        if i == 0:
            p = str(tmp_path / "a.zarr")
            anndata.AnnData(X=x, obs=o, var=var).write_zarr(p)
        elif i == 1:
            p = zarr_v3.write_anndata_v3(str(tmp_path / "b.zarr"), x, obs=o,
                                         var_names=names, sharded=True,
                                         chunk_rows=16, shard_rows=32,
                                         csr_chunk=64, csr_shard=256)
        else:
            p = str(tmp_path / "c.h5ad")
            anndata.AnnData(X=x, obs=o, var=var).write_h5ad(p)
        sources.append(p)
        parts.append(read_source(p))
    assert [p[2] for p in parts] == JOIN_VARS
    listed = ["new2", "gene3", "gene7", "new0"]
    names = served_names(mode, JOIN_VARS, listed)
    # The joined matrix: each source's columns moved to the served ones,
    # 0 where a source lacks a name.
    blocks = []
    for x, _, have in parts:
        dense = x.toarray() if sp.issparse(x) else x
        out = np.zeros((dense.shape[0], len(names)), dtype=dense.dtype)
        for j, g in enumerate(names):
            if g in have:
                out[:, j] = dense[:, have.index(g)]
        blocks.append(out)
    want = np.concatenate(blocks)
    want = sp.csr_matrix(want) if fmt == "csr" else want
    obs = pd.concat([p[1] for p in parts])
    if mode == "names":
        listing = tmp_path / "genes.txt"
        listing.write_text("\n".join(listed) + "\n")
        join = f"var_names={listing}"
    else:
        join = f"var_join={mode}"
    for strategy, partition in (("shuffle", "round_robin"),
                                ("block_shuffle", "contiguous")):
        o = f"{BASE},strategy={strategy},partition={partition}," \
            f"label=cell_type,{join}"
        m = mounts(sources, o)
        with open(m.path("var_names.txt")) as f:
            assert f.read().split("\n")[:-1] == names
        info = m.json("dataset.json")
        assert info["columns"] == len(names)
        assert info["var_names"]["count"] == len(names)
        assert info["var_join"] == mode
        check_mount(m, want, obs, label="cell_type")
        m.unmount()
