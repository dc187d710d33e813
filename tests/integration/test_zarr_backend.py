# SPDX-License-Identifier: MIT
"""The zarr backend through real mounts: AnnData v2 stores written by
anndata 0.8 and zarr-python 2 (dense and CSR, blosc lz4 with shuffle,
zstd, gzip, big-endian, "/" keys, consolidated metadata) read back equal
to zarr-python's own reading for every batch of a strategy; obs columns,
layers and raw; a mount mixing .h5ad and zarr sources; directories; an annbatch collection."""
import json
import os
import shutil
import struct
import warnings

import anndata
import numcodecs
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import zarr

N, D = 700, 50
COMPRESSORS = {
    "lz4": numcodecs.Blosc(cname="lz4", clevel=3,
                           shuffle=numcodecs.Blosc.SHUFFLE),
    "zstd": numcodecs.Zstd(level=3),
    "gzip": numcodecs.GZip(level=5),
    "zlib": numcodecs.Zlib(level=1),
    "bitshuffle": numcodecs.Blosc(cname="zstd", clevel=1,
                                  shuffle=numcodecs.Blosc.BITSHUFFLE),
    "none": None,
}


def obs_frame(rng, n):
    return pd.DataFrame({
        "cell_type": pd.Categorical(rng.choice(["B", "T", "NK"], n)),
        "w": rng.random(n) + 0.1,
        "flag": rng.random(n) < 0.5,
        "donor": [f"d{i % 7}" for i in range(n)],
    }, index=[f"c{i}" for i in range(n)])


def write_store(path, x, rng, layers=None, raw=None):
    ad = anndata.AnnData(
        X=x, dtype=x.dtype, obs=obs_frame(rng, x.shape[0]),
        var=pd.DataFrame(index=[f"g{j}" for j in range(x.shape[1])]),
        layers=layers or {})
    if raw is not None:
        ad.raw = raw
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ad.write_zarr(str(path))
    return ad


def rechunk(path, name, data, chunks, compressor, **kw):
    """Rewrites array name of the store as zarr-python would with these
    chunks and compressor."""
    g = zarr.open_group(str(path), mode="r+")
    attrs = dict(g[name].attrs)
    del g[name]
    g.create_dataset(name, data=data, chunks=chunks, compressor=compressor,
                     **kw)
    g[name].attrs.update(attrs)  # anndata's encoding-type


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("zarr")
    rng = np.random.default_rng(11)
    x = rng.random((N, D), dtype=np.float32)
    out = {"x": x, "dir": d}
    for name, comp in COMPRESSORS.items():
        p = d / f"dense_{name}.zarr"
        write_store(p, x, rng)
        # 64 x 16 chunks: partial chunks at both edges.
        rechunk(p, "X", x, (64, 16), comp)
        out[f"dense_{name}"] = str(p)
    p = d / "dense_be.zarr"
    write_store(p, x.astype(">f8"), rng)
    rechunk(p, "X", x.astype(">f8"), (100, D), COMPRESSORS["lz4"],
            dtype=">f8")
    out["dense_be"] = str(p)
    p = d / "dense_slash.zarr"
    write_store(p, x, rng)
    rechunk(p, "X", x, (50, 25), COMPRESSORS["zstd"],
            dimension_separator="/")
    out["dense_slash"] = str(p)
    m = sp.random(N, D, density=0.1, format="csr", random_state=rng,
                  dtype=np.float32)
    m.data[:] = rng.integers(1, 100, m.nnz)
    m = m.tocsr()
    out["csr_x"] = m
    counts = rng.integers(0, 255, (N, D)).astype(np.uint16)
    raw = anndata.AnnData(X=rng.random((N, D + 3), dtype=np.float32))
    raw.var_names = [f"r{j}" for j in range(D + 3)]
    out["counts"], out["raw"] = counts, raw.X
    for name in ("lz4", "zstd", "gzip"):
        p = d / f"csr_{name}.zarr"
        write_store(p, m, rng, layers={"counts": counts}, raw=raw)
        rechunk(p, "X/data", m.data, (300,), COMPRESSORS[name])
        rechunk(p, "X/indices", m.indices, (256,), COMPRESSORS[name])
        out[f"csr_{name}"] = str(p)
    p = d / "consolidated.zarr"
    write_store(p, x, rng)
    rechunk(p, "X", x, (128, D), COMPRESSORS["lz4"])
    zarr.consolidate_metadata(str(p))
    out["consolidated"] = str(p)
    out["consolidated_obs"] = anndata.read_zarr(str(p)).obs
    return out


def all_batches(m, epoch=0, rank=0):
    for k in range(m.batches()):
        yield k, m.load("index", epoch, rank, k)


def zarr_rows(path, name="X"):
    """zarr-python's own reading of the matrix."""
    g = zarr.open_group(path, mode="r")
    node = g[name]
    if isinstance(node, zarr.Group):
        shape = tuple(node.attrs["shape"])
        return sp.csr_matrix((node["data"][:], node["indices"][:],
                              node["indptr"][:]), shape=shape)
    return node[:]


@pytest.mark.parametrize("kind", ["dense_" + c for c in COMPRESSORS] +
                         ["dense_be", "dense_slash", "consolidated"])
def test_dense_every_batch(mounts, stores, kind):
    want = zarr_rows(stores[kind])
    m = mounts(stores[kind], "batch_size=64,strategy=shuffle,seed=3")
    info = m.json("dataset.json")
    assert info["read_path"] == "chunks" and info["rows"] == N
    for k, index in all_batches(m):
        np.testing.assert_array_equal(m.load("batch", 0, 0, k),
                                      want[index].astype(info["dtype"]))


@pytest.mark.parametrize("kind", ["csr_lz4", "csr_zstd", "csr_gzip"])
def test_csr_every_batch_npz_and_npy(mounts, stores, kind):
    want = zarr_rows(stores[kind])
    assert (want != stores["csr_x"]).nnz == 0
    m = mounts(stores[kind], "batch_size=50,strategy=block_shuffle")
    assert m.json("dataset.json")["nnz"] == want.nnz
    for k, index in all_batches(m):
        path = m.file("batch", 0, 0, k)
        np.testing.assert_array_equal(np.load(path), want[index].toarray())
        z = np.load(path[:-4] + ".npz")
        got = sp.csr_matrix((z["data"], z["indices"], z["indptr"]),
                            shape=tuple(z["shape"]))
        assert (got != want[index]).nnz == 0


@pytest.mark.parametrize("options", [
    "world_size=3,partition=round_robin,strategy=shuffle",
    "world_size=2,partition=contiguous,strategy=block_shuffle",
    "world_size=2,partition=batch,strategy=streaming",
])
def test_partitions_cover_the_rows(mounts, stores, options):
    want = zarr_rows(stores["dense_lz4"])
    m = mounts(stores["dense_lz4"], "batch_size=40," + options)
    world = int(options.split(",")[0].split("=")[1])
    seen = []
    for rank in range(world):
        for k, index in all_batches(m, 0, rank):
            np.testing.assert_array_equal(m.load("batch", 0, rank, k),
                                          want[index])
            seen.extend(index.tolist())
    assert len(set(seen)) == N or len(seen) >= N - world * 40


def test_obs_columns(mounts, stores):
    obs = stores["consolidated_obs"]
    m = mounts(stores["consolidated"],
               "batch_size=50,label=cell_type,filter=flag:true")
    label = m.json("dataset.json")["label"]
    assert label["categories"] == list(obs.cell_type.cat.categories)
    codes = obs.cell_type.cat.codes.to_numpy()
    flag = obs.flag.to_numpy()
    assert m.json("dataset.json")["filtered_rows"] == flag.sum()
    for k, index in all_batches(m):
        assert flag[index].all()
        np.testing.assert_array_equal(m.load("label", 0, 0, k),
                                      codes[index])
    m = mounts(stores["consolidated"], "batch_size=50,label=donor,"
               "strategy=weighted,weights=w")
    donors = sorted(set(obs.donor))
    assert m.json("dataset.json")["label"]["categories"] == donors
    index = m.load("index", 0, 0, 0)
    np.testing.assert_array_equal(
        m.load("label", 0, 0, 0),
        [donors.index(obs.donor.iloc[i]) for i in index])


@pytest.mark.parametrize("options,expect", [
    ("layer=counts", "counts"), ("raw", "raw"), ("dtype=float64", "csr_x")])
def test_layer_raw_and_casts(mounts, stores, options, expect):
    m = mounts(stores["csr_lz4"], f"batch_size=100,{options}")
    src = stores[expect]
    src = src.toarray() if sp.issparse(src) else src
    for k, index in all_batches(m):
        got = m.load("batch", 0, 0, k)
        if options.startswith("dtype"):
            assert got.dtype == np.float64
        np.testing.assert_array_equal(got, src[index].astype(got.dtype))
    assert m.json("dataset.json")["columns"] == src.shape[1]


def test_mixed_h5ad_and_zarr_and_directories(mounts, stores, tmp_path):
    x = stores["x"]
    h5 = tmp_path / "a.h5ad"
    ad = anndata.AnnData(
        X=x, obs=pd.DataFrame(index=[f"h{i}" for i in range(N)]),
        var=pd.DataFrame(index=[f"g{j}" for j in range(D)]))
    ad.write_h5ad(h5)
    both = np.concatenate([x, x])
    m = mounts([str(h5), stores["dense_zstd"]],
               "batch_size=70,strategy=shuffle")
    assert m.json("dataset.json")["sources"][1]["read_path"] == "chunks"
    for k, index in all_batches(m):
        np.testing.assert_array_equal(m.load("batch", 0, 0, k), both[index])
    # A directory of sources takes *.zarr stores with the .h5ad files.
    d = tmp_path / "dir"
    d.mkdir()
    os.link(h5, d / "a.h5ad")
    shutil.copytree(stores["dense_gzip"], d / "b.zarr")
    os.mkdir(d / "other.zarr")  # not a store: skipped
    m = mounts(str(d), "batch_size=70")
    assert [os.path.basename(s["path"]) for s in
            m.json("dataset.json")["sources"]] == ["a.h5ad", "b.zarr"]
    index = m.load("index", 0, 0, 3)
    np.testing.assert_array_equal(m.load("batch", 0, 0, 3), both[index])


def test_annbatch_collection(mounts, stores, tmp_path):
    """A collection directory is one source argument: its dataset_N
    stores, in numeric order, one row space; src_path is an obs column
    like any other."""
    x = stores["x"]
    coll = tmp_path / "coll"
    coll.mkdir()
    with open(coll / "zarr.json", "w") as f:
        f.write('{"zarr_format": 3, "node_type": "group", "attributes": '
                '{"encoding-type": "annbatch-preshuffled"}}')
    parts, srcs = [], []
    for k, n in ((0, 100), (1, 250), (2, 30), (10, 60)):
        part = x[:n] + k
        ad = anndata.AnnData(
            X=part, obs=pd.DataFrame(
                {"src_path": pd.Categorical([f"file{k % 3}.h5ad"] * n)},
                index=[f"c{k}_{i}" for i in range(n)]),
            var=pd.DataFrame(index=[f"g{j}" for j in range(D)]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ad.write_zarr(str(coll / f"dataset_{k}"))
        parts.append(part)
        srcs += [f"file{k % 3}.h5ad"] * n
    want = np.concatenate(parts)  # 0, 1, 2, 10: numeric, not name order
    m = mounts(str(coll), "batch_size=32,strategy=shuffle,label=src_path")
    info = m.json("dataset.json")
    assert [os.path.basename(s["path"]) for s in info["sources"]] == [
        "dataset_0", "dataset_1", "dataset_2", "dataset_10"]
    cats = info["label"]["categories"]
    assert cats == sorted(set(srcs))
    for k, index in all_batches(m):
        np.testing.assert_array_equal(m.load("batch", 0, 0, k), want[index])
        np.testing.assert_array_equal(
            m.load("label", 0, 0, k), [cats.index(srcs[i]) for i in index])


def crc32c(b):
    crc = 0xFFFFFFFF
    for byte in b:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def shard_chunks(d, out, meta, per, at_start):
    """Packs the v2 chunk files of an array chunked along rows only into
    shards of `per` chunks each (sharding_indexed, crc32c index)."""
    inner = meta["chunk_grid"]["configuration"]["chunk_shape"]
    nd = len(inner)
    grid = -(-meta["shape"][0] // inner[0])
    for s in range(-(-grid // per)):
        body, index = b"", b""
        base = 16 * per + 4 if at_start else 0
        for i in range(s * per, (s + 1) * per):
            name = os.path.join(d, str(i) + (".0" if nd == 2 else ""))
            if not os.path.exists(name):
                index += struct.pack("<QQ", 2**64 - 1, 2**64 - 1)
                continue
            data = open(name, "rb").read()
            index += struct.pack("<QQ", base + len(body), len(data))
            body += data
        index += struct.pack("<I", crc32c(index))
        key = os.path.join(out, "c", str(s), *(["0"] if nd == 2 else []))
        os.makedirs(os.path.dirname(key), exist_ok=True)
        with open(key, "wb") as f:
            f.write(index + body if at_start else body + index)
    meta["codecs"] = [{"name": "sharding_indexed", "configuration": {
        "chunk_shape": inner, "codecs": meta["codecs"],
        "index_codecs": [{"name": "bytes",
                          "configuration": {"endian": "little"}},
                         {"name": "crc32c"}],
        "index_location": "start" if at_start else "end"}}]
    meta["chunk_grid"]["configuration"]["chunk_shape"] = \
        [inner[0] * per] + inner[1:]


def to_v3(src, dst, consolidated=False, shard=0):
    """A v3 copy of a v2 store: each node's metadata rewritten as
    zarr.json (codecs translated: the chunk bytes are the same for blosc,
    zstd, gzip and vlen-utf8), chunk keys "i.j" moved to "c/i/j"; X's
    arrays chunked along rows only packed into shards of `shard` chunks
    (the index at the start for X/indices, else at the end)."""
    nodes = {}
    for d, _, files in os.walk(src):
        rel = os.path.relpath(d, src)
        rel = "" if rel == "." else rel
        out = os.path.join(dst, rel)
        os.makedirs(out, exist_ok=True)
        attrs = {}
        if ".zattrs" in files:
            attrs = json.load(open(os.path.join(d, ".zattrs")))
        if ".zarray" in files:
            a = json.load(open(os.path.join(d, ".zarray")))
            dt = a["dtype"]
            names = {"b1": "bool", "O": "string", "f4": "float32",
                     "f8": "float64", "i1": "int8", "i4": "int32",
                     "i8": "int64", "u2": "uint16", "u1": "uint8"}
            codecs = [{"name": "vlen-utf8"} if dt == "|O" else
                      {"name": "bytes", "configuration": {
                          "endian": "big" if dt[0] == ">" else "little"}}]
            c = a["compressor"]
            if c and c["id"] == "blosc":
                codecs.append({"name": "blosc", "configuration": {
                    "cname": c["cname"], "clevel": c["clevel"],
                    "shuffle": ["noshuffle", "shuffle",
                                "bitshuffle"][c["shuffle"]],
                    "typesize": 4, "blocksize": 0}})
            elif c:
                codecs.append({"name": c["id"], "configuration": {
                    "level": c.get("level", 1)}})
            fill = a["fill_value"]
            meta = {"zarr_format": 3, "node_type": "array",
                    "shape": a["shape"], "data_type": names[dt[1:]],
                    "chunk_grid": {"name": "regular", "configuration": {
                        "chunk_shape": a["chunks"]}},
                    "chunk_key_encoding": {"name": "default"},
                    "fill_value": "" if dt == "|O" else fill,
                    "codecs": codecs, "attributes": attrs}
            if shard and rel.startswith("X") and (
                    len(a["chunks"]) == 1 or a["chunks"][1] == a["shape"][1]):
                shard_chunks(d, out, meta, shard, rel.endswith("indices"))
                files = []
            for f in files:
                if f[0] != ".":
                    key = os.path.join(out, "c", *f.split("."))
                    os.makedirs(os.path.dirname(key), exist_ok=True)
                    shutil.copy(os.path.join(d, f), key)
        elif ".zgroup" in files:
            meta = {"zarr_format": 3, "node_type": "group",
                    "attributes": attrs}
        else:
            continue
        nodes[rel] = meta
        if rel or not consolidated:
            json.dump(meta, open(os.path.join(out, "zarr.json"), "w"))
    if consolidated:
        root = nodes.pop("")
        root["consolidated_metadata"] = {"kind": "inline",
                                         "metadata": nodes}
        json.dump(root, open(os.path.join(dst, "zarr.json"), "w"))
        for rel in nodes:  # only the consolidated copy says what they are
            os.unlink(os.path.join(dst, rel, "zarr.json")) \
                if os.path.exists(os.path.join(dst, rel, "zarr.json")) \
                else None
    return str(dst)


@pytest.mark.parametrize("kind,consolidated,shard", [
    ("dense_lz4", False, 0), ("dense_be", True, 0), ("csr_zstd", False, 0),
    ("csr_gzip", True, 0), ("consolidated", False, 3), ("csr_lz4", True, 4)])
def test_v3_copies(mounts, stores, tmp_path, kind, consolidated, shard):
    p = to_v3(stores[kind], tmp_path / "v3.zarr", consolidated, shard)
    want = zarr_rows(stores[kind])
    obs = anndata.read_zarr(stores[kind]).obs
    m = mounts(p, "batch_size=64,strategy=shuffle,label=donor,"
               "filter=flag:true|false")
    cats = m.json("dataset.json")["label"]["categories"]
    for k, index in all_batches(m):
        got = m.load("batch", 0, 0, k)
        rows = want[index]
        rows = rows.toarray() if sp.issparse(rows) else rows
        np.testing.assert_array_equal(got, rows.astype(got.dtype))
        np.testing.assert_array_equal(
            m.load("label", 0, 0, k),
            [cats.index(obs.donor.iloc[i]) for i in index])
    m2 = mounts(stores[kind], "batch_size=64,strategy=shuffle")
    # One matrix, one fingerprint, whatever the format.
    assert m.json("dataset.json")["fingerprint"] == \
        m2.json("dataset.json")["fingerprint"]


def test_lone_array_and_named_arrays(mounts, stores, tmp_path):
    """A store that is one array (zarr.save) serves it; in a store that is
    no AnnData, dataset=/PATH names the rows and /PATH the columns."""
    x = stores["x"]
    lone = str(tmp_path / "lone.zarr")
    zarr.save(lone, x)
    m = mounts(lone, "batch_size=100,strategy=shuffle")
    for k, index in all_batches(m):
        np.testing.assert_array_equal(m.load("batch", 0, 0, k), x[index])
    plain = str(tmp_path / "plain.zarr")
    g = zarr.open_group(plain, mode="w")
    g.create_dataset("data/x", data=x, chunks=(33, 7))
    g.create_dataset("meta/y", data=np.arange(N) % 4, chunks=(100,))
    m = mounts(plain, "dataset=/data/x,label=/meta/y,batch_size=100")
    for k, index in all_batches(m):
        np.testing.assert_array_equal(m.load("batch", 0, 0, k), x[index])
        np.testing.assert_array_equal(m.load("label", 0, 0, k), index % 4)


def test_array_paths_with_a_trailing_slash(mounts, stores, tmp_path):
    """dataset=/data/x/ and label=/meta/y/ name the same arrays as without
    the slash, in a store without consolidated metadata: their chunk files
    are listed under the directory however it is spelt (a listing that
    missed them served the label as fill and the rows as EIO)."""
    x = stores["x"]
    plain = str(tmp_path / "plain.zarr")
    g = zarr.open_group(plain, mode="w")
    g.create_dataset("data/x", data=x, chunks=(33, 7))
    g.create_dataset("meta/y", data=np.arange(N) % 4 + 1, chunks=(100,))
    m = mounts(plain, "dataset=/data/x/,label=/meta/y/,batch_size=100")
    for k, index in all_batches(m):
        np.testing.assert_array_equal(m.load("batch", 0, 0, k), x[index])
        np.testing.assert_array_equal(m.load("label", 0, 0, k),
                                      index % 4 + 1)
