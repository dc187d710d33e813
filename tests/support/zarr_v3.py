# SPDX-License-Identifier: MIT
"""A writer of zarr v3 directory stores for the tests, following the v3
core specification (zarr.json, regular chunk grid, default chunk key
encoding) and the sharding_indexed codec, with numcodecs for the codec
bytes. zarr-python 2.13 (Debian's) writes v2 only: v3 stores, sharded
ones and annbatch's DatasetCollection layout are written here.

Nothing in this file is used to read a store back: tests/support/
zarr_read.py is a second, independent reader, so that a bug here is not
mirrored there.

Codecs are given as a list of (name, configuration) pairs for the
bytes-to-bytes stage after the "bytes" codec, e.g.
    [("blosc", {"cname": "lz4", "clevel": 3, "shuffle": "shuffle"})]
    [("zstd", {"level": 3})], [("gzip", {"level": 5})], [] (none).
"""
import itertools
import json
import os

import numcodecs
import numpy as np

# data_type -> numpy dtype (without byte order for the multi-byte ones).
DATA_TYPES = {
    "bool": np.dtype(bool), "int8": np.dtype("i1"), "uint8": np.dtype("u1"),
    "int16": np.dtype("i2"), "uint16": np.dtype("u2"),
    "int32": np.dtype("i4"), "uint32": np.dtype("u4"),
    "int64": np.dtype("i8"), "uint64": np.dtype("u8"),
    "float16": np.dtype("f2"), "float32": np.dtype("f4"),
    "float64": np.dtype("f8"),
}

BLOSC_LZ4 = [("blosc", {"cname": "lz4", "clevel": 3, "shuffle": "shuffle"})]
BLOSC_SHUFFLE = {"noshuffle": numcodecs.Blosc.NOSHUFFLE,
                 "shuffle": numcodecs.Blosc.SHUFFLE,
                 "bitshuffle": numcodecs.Blosc.BITSHUFFLE}
ABSENT = 2**64 - 1

_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data):
    """CRC-32C (Castagnoli, reflected 0x82F63B78), table-driven."""
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for b in bytes(data):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def data_type_of(array):
    """The v3 data_type name of a numpy array (object/str arrays: string)."""
    a = np.asarray(array)
    if a.dtype.kind in "OUS":
        return "string"
    for name, dt in DATA_TYPES.items():
        if a.dtype.newbyteorder("=") == dt.newbyteorder("="):
            return name
    raise ValueError(f"no v3 data_type for {a.dtype}")


def fill_json(value, data_type):
    if data_type == "string":
        return str(value)
    if data_type == "bool":
        return bool(value)
    if data_type.startswith("float"):
        v = float(value)
        if np.isnan(v):
            return "NaN"
        if np.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return v
    return int(value)


def default_fill(data_type):
    return {"string": "", "bool": False}.get(
        data_type, 0.0 if data_type.startswith("float") else 0)


# Codecs: JSON metadata and the numcodecs object doing the bytes.

def bytes_to_bytes(codecs, itemsize):
    """[(name, config)] -> (JSON codec list, [encode(np.ndarray|bytes)])."""
    meta, encoders = [], []
    for name, cfg in codecs:
        cfg = dict(cfg)
        if name == "blosc":
            shuffle = cfg.get("shuffle", "shuffle")
            conf = {"cname": cfg.get("cname", "lz4"),
                    "clevel": int(cfg.get("clevel", 5)),
                    "shuffle": shuffle, "typesize": int(itemsize),
                    "blocksize": int(cfg.get("blocksize", 0))}
            enc = numcodecs.Blosc(cname=conf["cname"], clevel=conf["clevel"],
                                  shuffle=BLOSC_SHUFFLE[shuffle],
                                  blocksize=conf["blocksize"])
        elif name == "zstd":
            conf = {"level": int(cfg.get("level", 0)),
                    "checksum": bool(cfg.get("checksum", False))}
            enc = numcodecs.Zstd(level=conf["level"])
            if conf["checksum"]:
                raise ValueError("numcodecs 0.11's Zstd writes no checksum")
        elif name == "gzip":
            conf = {"level": int(cfg.get("level", 5))}
            enc = numcodecs.GZip(level=conf["level"])
        elif name == "crc32c":
            conf = None
            enc = None
        else:
            raise ValueError(f"codec {name} is not written here")
        entry = {"name": name}
        if conf is not None:
            entry["configuration"] = conf
        meta.append(entry)
        encoders.append((name, enc))
    return meta, encoders


def run_bytes_codecs(encoders, buf, itemsize):
    """buf: the bytes codec's output as a uint8 array. Blosc takes its
    typesize from the buffer's item size: the first codec gets a view of
    the typesize the metadata says."""
    out = buf
    for name, enc in encoders:
        if name == "crc32c":
            raw = bytes(out)
            out = raw + crc32c(raw).to_bytes(4, "little")
            continue
        if name == "blosc" and isinstance(out, np.ndarray) and itemsize > 1:
            out = np.frombuffer(bytes(out), dtype=f"u{itemsize}") \
                if itemsize in (2, 4, 8) else out
        out = enc.encode(out)
    return bytes(out)


class ChunkCodec:
    """The codec chain of one chunk (or inner chunk): array -> bytes
    ("bytes" or "vlen-utf8"), then bytes -> bytes codecs."""

    def __init__(self, data_type, codecs, endian="little"):
        self.data_type = data_type
        self.endian = endian
        if data_type == "string":
            first = {"name": "vlen-utf8", "configuration": {}}
            itemsize = 1
        else:
            first = {"name": "bytes", "configuration": {"endian": endian}}
            itemsize = DATA_TYPES[data_type].itemsize
            if itemsize == 1:  # endian is optional for 1-byte types
                first = {"name": "bytes", "configuration": {}} \
                    if endian is None else first
        rest, self.encoders = bytes_to_bytes(codecs, itemsize)
        self.itemsize = itemsize
        self.meta = [first] + rest

    def encode(self, chunk):
        if self.data_type == "string":
            raw = numcodecs.VLenUTF8().encode(
                np.asarray(chunk, dtype=object).ravel(order="C"))
            buf = np.frombuffer(bytes(raw), dtype=np.uint8)
        else:
            dt = DATA_TYPES[self.data_type]
            if dt.itemsize > 1:
                dt = dt.newbyteorder("<" if self.endian == "little" else ">")
            buf = np.ascontiguousarray(np.asarray(chunk).astype(dt))
            buf = buf.view(np.uint8).ravel()
        return run_bytes_codecs(self.encoders, buf, self.itemsize)


def chunk_of(data, origin, shape, fill):
    """data[origin : origin + shape], padded with fill past the edge (v3
    edge chunks have the full chunk shape)."""
    sl = tuple(slice(o, min(o + s, n))
               for o, s, n in zip(origin, shape, data.shape))
    part = data[sl]
    if part.shape == tuple(shape):
        return np.ascontiguousarray(part)
    out = np.full(shape, fill, dtype=data.dtype)
    out[tuple(slice(0, p) for p in part.shape)] = part
    return out


def is_fill(chunk, fill):
    if chunk.dtype.kind == "f" and isinstance(fill, float) and np.isnan(fill):
        return bool(np.isnan(chunk).all())
    return bool((chunk == fill).all())


def grid(shape, chunk_shape):
    return [-(-n // c) if n else 0 for n, c in zip(shape, chunk_shape)]


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)


def write_array(path, data, chunks=None, codecs=(), endian="little",
                shards=None, index_location="end", index_crc=True,
                omit_fill=True, fill_value=None, attributes=None,
                separator="/"):
    """Writes the array data as a zarr v3 array at path (a directory).

    chunks: the chunk shape (default: the whole array); shards: with it,
    the shard shape (a multiple of chunks per dimension), and chunks are
    the inner chunks of a sharding_indexed codec whose index is at
    index_location ("end" or "start"), with a crc32c index codec unless
    index_crc is false. omit_fill: chunks (and inner chunks) whose
    elements all equal the fill value are not written; chunks wholly
    outside the array never are. Returns the zarr.json written."""
    data = np.asarray(data)
    data_type = data_type_of(data)
    if data_type == "string":
        data = data.astype(object)
    if data.ndim == 0:
        raise ValueError("0-d arrays are not written here")
    chunks = tuple(int(c) for c in (chunks or data.shape))
    chunks = tuple(max(c, 1) for c in chunks)
    fill = default_fill(data_type) if fill_value is None else fill_value
    os.makedirs(path, exist_ok=True)
    inner = ChunkCodec(data_type, list(codecs), endian)
    if shards is None:
        outer_shape, codec_meta = chunks, inner.meta
    else:
        outer_shape = tuple(int(s) for s in shards)
        if any(s % c for s, c in zip(outer_shape, chunks)):
            raise ValueError(f"shard {outer_shape} is not a multiple of "
                             f"chunks {chunks}")
        index_codecs = [{"name": "bytes",
                         "configuration": {"endian": "little"}}]
        if index_crc:
            index_codecs.append({"name": "crc32c"})
        codec_meta = [{"name": "sharding_indexed", "configuration": {
            "chunk_shape": list(chunks), "codecs": inner.meta,
            "index_codecs": index_codecs,
            "index_location": index_location}}]
    meta = {
        "zarr_format": 3, "node_type": "array",
        "shape": list(data.shape), "data_type": data_type,
        "chunk_grid": {"name": "regular",
                       "configuration": {"chunk_shape": list(outer_shape)}},
        "chunk_key_encoding": {"name": "default",
                               "configuration": {"separator": separator}},
        "fill_value": fill_json(fill, data_type),
        "codecs": codec_meta,
        "attributes": dict(attributes or {}),
    }
    write_json(os.path.join(path, "zarr.json"), meta)
    for idx in itertools.product(*(range(g) for g in
                                   grid(data.shape, outer_shape))):
        origin = [i * s for i, s in zip(idx, outer_shape)]
        if shards is None:
            chunk = chunk_of(data, origin, outer_shape, fill)
            if omit_fill and is_fill(chunk, fill):
                continue
            blob = inner.encode(chunk)
        else:
            blob = encode_shard(data, origin, outer_shape, chunks, fill,
                                inner, index_location, index_crc, omit_fill)
            if blob is None:
                continue
        key = separator.join(["c"] + [str(i) for i in idx])
        file = os.path.join(path, *key.split("/"))
        os.makedirs(os.path.dirname(file), exist_ok=True)
        with open(file, "wb") as f:
            f.write(blob)
    return meta


def encode_shard(data, origin, shard_shape, chunks, fill, inner,
                 index_location, index_crc, omit_fill):
    """One shard file's bytes, or None when every inner chunk is absent."""
    per = [s // c for s, c in zip(shard_shape, chunks)]
    n = int(np.prod(per))
    index = np.full((n, 2), ABSENT, dtype="<u8")
    blobs = []
    index_size = 16 * n + (4 if index_crc else 0)
    pos = index_size if index_location == "start" else 0
    for k, sub in enumerate(itertools.product(*(range(p) for p in per))):
        o = [a + i * c for a, i, c in zip(origin, sub, chunks)]
        if any(x >= dim for x, dim in zip(o, data.shape)):
            continue  # wholly outside the array
        chunk = chunk_of(data, o, chunks, fill)
        if omit_fill and is_fill(chunk, fill):
            continue
        blob = inner.encode(chunk)
        index[k] = (pos, len(blob))
        blobs.append(blob)
        pos += len(blob)
    if not blobs and omit_fill:
        return None
    raw = index.tobytes()
    if index_crc:
        raw += crc32c(raw).to_bytes(4, "little")
    body = b"".join(blobs)
    return raw + body if index_location == "start" else body + raw


def write_group(path, attributes=None):
    os.makedirs(path, exist_ok=True)
    meta = {"zarr_format": 3, "node_type": "group",
            "attributes": dict(attributes or {})}
    write_json(os.path.join(path, "zarr.json"), meta)
    return meta


def consolidate(root):
    """Adds inline consolidated metadata to root's zarr.json: every node
    below it, keyed by its path relative to root ("X", "X/data")."""
    found = {}
    for d, dirs, files in os.walk(root):
        dirs.sort()
        if d == root or "zarr.json" not in files:
            continue
        with open(os.path.join(d, "zarr.json")) as f:
            node = json.load(f)
        if node.get("node_type") not in ("array", "group"):
            continue
        if node["node_type"] == "array":
            dirs[:] = []  # chunk directories, not nodes
        found[os.path.relpath(d, root).replace(os.sep, "/")] = node
    with open(os.path.join(root, "zarr.json")) as f:
        meta = json.load(f)
    meta["consolidated_metadata"] = {"kind": "inline",
                                     "must_understand": False,
                                     "metadata": found}
    write_json(os.path.join(root, "zarr.json"), meta)
    return meta


# AnnData's on-disk layout (anndata 0.8's h5ad and zarr: the same names
# and attributes).

ARRAY = {"encoding-type": "array", "encoding-version": "0.2.0"}
STRINGS = {"encoding-type": "string-array", "encoding-version": "0.2.0"}
DICT = {"encoding-type": "dict", "encoding-version": "0.1.0"}


def write_dataframe(path, df, index_name="_index", **kw):
    """obs or var: _index, one node per column (categorical as a group of
    codes and categories, numeric and bool as arrays, strings as string
    arrays), column-order."""
    import pandas as pd
    cols = [str(c) for c in df.columns]
    write_group(path, {"_index": index_name, "column-order": cols,
                       "encoding-type": "dataframe",
                       "encoding-version": "0.2.0"})
    small = dict(kw, shards=None)
    write_array(os.path.join(path, index_name),
                np.asarray(df.index.astype(str), dtype=object),
                attributes=STRINGS, **small)
    for c in cols:
        s = df[c]
        p = os.path.join(path, c)
        if isinstance(s.dtype, pd.CategoricalDtype):
            write_group(p, {"encoding-type": "categorical",
                            "encoding-version": "0.2.0",
                            "ordered": bool(s.cat.ordered)})
            cats = s.cat.categories
            codes = np.asarray(s.cat.codes)
            write_array(os.path.join(p, "codes"), codes, attributes=ARRAY,
                        **small)
            if cats.dtype.kind in "OUS":
                write_array(os.path.join(p, "categories"),
                            np.asarray(cats.astype(str), dtype=object),
                            attributes=STRINGS, **small)
            else:
                write_array(os.path.join(p, "categories"),
                            np.asarray(cats), attributes=ARRAY, **small)
        elif s.dtype.kind in "biuf":
            write_array(p, s.to_numpy(), attributes=ARRAY, **small)
        else:
            write_array(p, np.asarray(s.astype(str), dtype=object),
                        attributes=STRINGS, **small)


def write_matrix(path, x, sharded, codecs, chunk_rows, shard_rows,
                 csr_chunk, csr_shard, **kw):
    """X or a layer: dense (rows chunked, and sharded along rows) or a
    csr_matrix group of data, indices and indptr (chunked by values)."""
    import scipy.sparse as sp
    if sp.issparse(x):
        x = sp.csr_matrix(x)
        write_group(path, {"encoding-type": "csr_matrix",
                           "encoding-version": "0.1.0",
                           "shape": [int(s) for s in x.shape]})
        for name, arr in (("data", x.data), ("indices", x.indices),
                          ("indptr", x.indptr)):
            write_array(os.path.join(path, name), arr, chunks=(csr_chunk,),
                        shards=(csr_shard,) if sharded else None,
                        codecs=codecs, **kw)
    else:
        x = np.asarray(x)
        chunks = (chunk_rows,) + x.shape[1:]
        write_array(path, x, chunks=chunks,
                    shards=(shard_rows,) + x.shape[1:] if sharded else None,
                    codecs=codecs, attributes=ARRAY, **kw)


def write_anndata_v3(path, X, obs=None, var_names=None, layers=None,
                     sharded=False, codec=BLOSC_LZ4, chunk_rows=1024,
                     shard_rows=None, csr_chunk=32768, csr_shard=None,
                     endian="little", index_location="end", omit_fill=True,
                     consolidated=False, obs_codecs=None, raw=None):
    """An AnnData zarr v3 store at path, laid out as anndata writes it.

    raw: (X, var_names) written as the raw group (raw/X, raw/var,
    raw/varm), encoding-type "raw".

    codec: bytes-to-bytes codecs of X and the layers (see the module's
    docstring); obs and var use obs_codecs (default: codec). shard_rows
    defaults to 4 chunks of rows, csr_shard to 4 chunks of values."""
    import pandas as pd
    n = X.shape[0]
    shard_rows = shard_rows or 4 * chunk_rows
    csr_shard = csr_shard or 4 * csr_chunk
    if obs is None:
        obs = pd.DataFrame(index=[f"cell{i}" for i in range(n)])
    if var_names is None:
        var_names = [f"gene{j}" for j in range(X.shape[1])]
    kw = dict(endian=endian, index_location=index_location,
              omit_fill=omit_fill)
    meta_kw = dict(endian=endian, omit_fill=omit_fill,
                   codecs=codec if obs_codecs is None else obs_codecs)
    write_group(path, {"encoding-type": "anndata",
                       "encoding-version": "0.1.0"})
    write_matrix(os.path.join(path, "X"), X, sharded, codec, chunk_rows,
                 shard_rows, csr_chunk, csr_shard, **kw)
    write_dataframe(os.path.join(path, "obs"), obs, **meta_kw)
    write_dataframe(os.path.join(path, "var"),
                    pd.DataFrame(index=list(var_names)), **meta_kw)
    write_group(os.path.join(path, "layers"), DICT)
    for name, layer in (layers or {}).items():
        write_matrix(os.path.join(path, "layers", name), layer, sharded,
                     codec, chunk_rows, shard_rows, csr_chunk, csr_shard,
                     **kw)
    for g in ("obsm", "obsp", "varm", "varp", "uns"):
        write_group(os.path.join(path, g), DICT)
    if raw is not None:
        rx, rnames = raw
        rp = os.path.join(path, "raw")
        write_group(rp, {"encoding-type": "raw", "encoding-version": "0.1.0"})
        write_matrix(os.path.join(rp, "X"), rx, sharded, codec, chunk_rows,
                     shard_rows, csr_chunk, csr_shard, **kw)
        write_dataframe(os.path.join(rp, "var"),
                        pd.DataFrame(index=list(rnames)), **meta_kw)
        write_group(os.path.join(rp, "varm"), DICT)
    if consolidated:
        consolidate(path)
    return path


def write_annbatch_collection(path, adatas, src_paths=None,
                              chunk_rows=1024, shard_rows=4194304,
                              csr_chunk=32768, csr_shard=134217728,
                              codec=BLOSC_LZ4, src_path_categorical=True,
                              consolidated=True, **kw):
    """annbatch's DatasetCollection layout (annbatch/io.py): a v3 group
    (encoding-type annbatch-preshuffled) of AnnData v3 stores dataset_0,
    dataset_1, ...; dense X in chunks of chunk_rows rows and shards of
    shard_rows (each at most the rows rounded down to a whole chunk, as
    annbatch's write_sharded), CSR data/indices/indptr in chunks of
    csr_chunk values and shards of csr_shard (a shard may pass the end of
    the array); blosc lz4 clevel 3 byte shuffle.

    adatas: anndata.AnnData objects, one per dataset. Each obs gets a
    src_path column naming the file each row came from: src_paths[i] for
    the rows of adatas[i] (default "dataset_i.h5ad"), a categorical over
    every src_paths as annbatch writes it, or a string column with
    src_path_categorical=False. consolidated: inline consolidated
    metadata of the whole tree in the collection's zarr.json (annbatch
    consolidates the store). Returns the dataset paths."""
    write_group(path, {"encoding-type": "annbatch-preshuffled",
                       "encoding-version": "0.1.0"})
    import pandas as pd
    names = list(src_paths) if src_paths else \
        [f"dataset_{i}.h5ad" for i in range(len(adatas))]
    out = []
    for i, ad in enumerate(adatas):
        obs = ad.obs.copy()
        if src_path_categorical:
            obs["src_path"] = pd.Categorical.from_codes(
                np.full(ad.n_obs, i), categories=names)
        else:
            obs["src_path"] = np.asarray([names[i]] * ad.n_obs, dtype=object)
        rows = ad.n_obs - ad.n_obs % chunk_rows
        if rows == 0:
            raise ValueError(f"dataset {i}: {ad.n_obs} rows, fewer than "
                             f"one chunk of {chunk_rows}")
        p = os.path.join(path, f"dataset_{i}")
        write_anndata_v3(p, ad.X, obs=obs, var_names=list(ad.var_names),
                         layers=dict(ad.layers), sharded=True, codec=codec,
                         chunk_rows=min(chunk_rows, rows),
                         shard_rows=min(shard_rows, rows),
                         csr_chunk=csr_chunk,
                         csr_shard=min_multiple(csr_shard, csr_chunk), **kw)
        out.append(p)
    if consolidated:
        consolidate(path)
    return out


def min_multiple(n, m):
    """n rounded up to a multiple of m (a shard holds whole chunks)."""
    return -(-n // m) * m
