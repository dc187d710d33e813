# SPDX-License-Identifier: MIT
"""An independent reader of zarr stores for the tests: v3 (zarr.json,
chunks, sharding_indexed shards whose crc32c it checks) decoded here from
the specification, v2 through zarr-python 2.13 and anndata.read_zarr.

It shares nothing with tests/support/zarr_v3.py (the writer) but
numcodecs: a writer's mistake does not come back as the reader's.

read_array(path) -> ndarray; read_anndata(path) -> (X, obs, var_names),
X a dense ndarray or a scipy CSR matrix; read_collection(path) for an
annbatch DatasetCollection (its datasets one after the other)."""
import json
import math
import os

import numcodecs
import numpy as np


class ZarrFormatError(ValueError):
    pass


def _crc32c_nibble_table():
    # Four bits at a time, Castagnoli's reflected polynomial.
    table = []
    for n in range(16):
        c = n
        for _ in range(4):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    return table


_NIBBLE = _crc32c_nibble_table()


def crc32c(data):
    """CRC-32C, a nibble at a time (the writer goes a byte at a time)."""
    crc = 0xFFFFFFFF
    t = _NIBBLE
    for byte in memoryview(bytes(data)):
        crc ^= byte
        crc = (crc >> 4) ^ t[crc & 15]
        crc = (crc >> 4) ^ t[crc & 15]
    return (~crc) & 0xFFFFFFFF


def _load_json(path):
    with open(path) as f:
        return json.load(f)


def zarr_format(path):
    """3, 2, or None for a directory that is no zarr node."""
    if os.path.exists(os.path.join(path, "zarr.json")):
        return _load_json(os.path.join(path, "zarr.json"))["zarr_format"]
    if any(os.path.exists(os.path.join(path, n))
           for n in (".zarray", ".zgroup")):
        return 2
    return None


def node_meta(path):
    """A v3 node's zarr.json."""
    meta = _load_json(os.path.join(path, "zarr.json"))
    if meta.get("zarr_format") != 3:
        raise ZarrFormatError(f"{path}: zarr_format {meta.get('zarr_format')}")
    return meta


def attributes(path):
    if zarr_format(path) == 3:
        return node_meta(path).get("attributes", {})
    p = os.path.join(path, ".zattrs")
    return _load_json(p) if os.path.exists(p) else {}


_NUMERIC = {"bool": "?", "int8": "i1", "uint8": "u1", "int16": "i2",
            "uint16": "u2", "int32": "i4", "uint32": "u4", "int64": "i8",
            "uint64": "u8", "float16": "f2", "float32": "f4",
            "float64": "f8"}


def _fill(value, data_type):
    if data_type == "string":
        return value
    dt = np.dtype(_NUMERIC[data_type])
    if isinstance(value, str):
        if value == "NaN":
            return dt.type(np.nan)
        if value in ("Infinity", "-Infinity"):
            return dt.type(np.inf if value[0] != "-" else -np.inf)
        if value.startswith("0x"):
            bits = int(value, 16).to_bytes(dt.itemsize, "little")
            return np.frombuffer(bits, dtype=dt.newbyteorder("<"))[0]
        raise ZarrFormatError(f"fill_value {value!r}")
    return dt.type(value)


class _Chain:
    """A decoding codec chain: bytes->bytes codecs run backwards, then
    one array->bytes codec turns the bytes into a chunk of chunk_shape."""

    def __init__(self, codecs, data_type, chunk_shape, fill, where):
        self.where = where
        self.data_type = data_type
        self.shape = tuple(chunk_shape)
        self.fill = fill
        self.array_to_bytes = None
        self.after = []
        for c in codecs:
            name = c["name"]
            cfg = c.get("configuration", {}) or {}
            if name in ("bytes", "vlen-utf8", "sharding_indexed"):
                if self.array_to_bytes is not None:
                    raise ZarrFormatError(f"{where}: two array->bytes codecs")
                self.array_to_bytes = (name, cfg)
            elif name in ("blosc", "zstd", "gzip", "crc32c"):
                if self.array_to_bytes is None:
                    raise ZarrFormatError(f"{where}: {name} before bytes")
                self.after.append((name, cfg))
            else:
                raise ZarrFormatError(f"{where}: codec {name} unknown here")
        if self.array_to_bytes is None:
            raise ZarrFormatError(f"{where}: no array->bytes codec")
        if self.array_to_bytes[0] == "sharding_indexed":
            cfg = self.array_to_bytes[1]
            inner = tuple(cfg["chunk_shape"])
            if any(s % i for s, i in zip(self.shape, inner)):
                raise ZarrFormatError(f"{where}: shard {self.shape} is not "
                                      f"a multiple of {inner}")
            self.inner_shape = inner
            self.per_shard = [s // i for s, i in zip(self.shape, inner)]
            self.inner = _Chain(cfg["codecs"], data_type, inner, fill, where)
            self.index_location = cfg.get("index_location", "end")
            icodecs = [x["name"] for x in cfg["index_codecs"]]
            if icodecs[0] != "bytes" or \
                    cfg["index_codecs"][0].get("configuration", {}).get(
                        "endian", "little") != "little" or \
                    any(n != "crc32c" for n in icodecs[1:]):
                raise ZarrFormatError(f"{where}: index codecs {icodecs}")
            self.index_crc = "crc32c" in icodecs

    def _unbytes(self, raw):
        for name, cfg in reversed(self.after):
            if name == "crc32c":
                body, tail = raw[:-4], raw[-4:]
                if crc32c(body) != int.from_bytes(tail, "little"):
                    raise ZarrFormatError(f"{self.where}: crc32c mismatch")
                raw = body
            elif name == "blosc":
                raw = numcodecs.Blosc().decode(raw)
            elif name == "zstd":
                raw = numcodecs.Zstd().decode(raw)
            elif name == "gzip":
                raw = numcodecs.GZip().decode(raw)
        return bytes(raw)

    def decode(self, raw):
        """The chunk of chunk_shape encoded as raw (bytes)."""
        name, cfg = self.array_to_bytes
        if name == "sharding_indexed":
            return self._decode_shard(raw)
        raw = self._unbytes(raw)
        count = math.prod(self.shape)
        if name == "vlen-utf8":
            got = numcodecs.VLenUTF8().decode(raw)
            if len(got) != count:
                raise ZarrFormatError(f"{self.where}: {len(got)} strings, "
                                      f"not {count}")
            return np.asarray(got, dtype=object).reshape(self.shape)
        dt = np.dtype(_NUMERIC[self.data_type])
        if dt.itemsize > 1:
            end = cfg.get("endian")
            if end not in ("little", "big"):
                raise ZarrFormatError(f"{self.where}: endian {end!r}")
            dt = dt.newbyteorder("<" if end == "little" else ">")
        if len(raw) != count * dt.itemsize:
            raise ZarrFormatError(f"{self.where}: chunk of {len(raw)} bytes,"
                                  f" not {count * dt.itemsize}")
        return np.frombuffer(raw, dtype=dt).astype(
            dt.newbyteorder("=")).reshape(self.shape)

    def _decode_shard(self, raw):
        n = math.prod(self.per_shard)
        size = 16 * n + (4 if self.index_crc else 0)
        if len(raw) < size:
            raise ZarrFormatError(f"{self.where}: shard shorter than its "
                                  "index")
        ib = raw[:size] if self.index_location == "start" else raw[-size:]
        if self.index_crc:
            if crc32c(ib[:16 * n]) != int.from_bytes(ib[16 * n:], "little"):
                raise ZarrFormatError(f"{self.where}: shard index crc32c "
                                      "mismatch")
        index = np.frombuffer(ib[:16 * n], dtype="<u8").reshape(n, 2)
        out = np.empty(self.shape, dtype=object if self.data_type == "string"
                       else np.dtype(_NUMERIC[self.data_type]))
        out[...] = self.fill
        for k in range(n):
            off, nb = int(index[k, 0]), int(index[k, 1])
            if off == 2**64 - 1 and nb == 2**64 - 1:
                continue
            if off + nb > len(raw):
                raise ZarrFormatError(f"{self.where}: inner chunk {k} past "
                                      "the end of its shard")
            pos = np.unravel_index(k, self.per_shard)
            sl = tuple(slice(p * s, (p + 1) * s)
                       for p, s in zip(pos, self.inner_shape))
            out[sl] = self.inner.decode(raw[off:off + nb])
        return out


def _chunk_file(path, meta, idx):
    enc = meta["chunk_key_encoding"]
    sep = (enc.get("configuration") or {}).get(
        "separator", "/" if enc["name"] == "default" else ".")
    if enc["name"] == "default":
        key = sep.join(["c"] + [str(i) for i in idx])
    elif enc["name"] == "v2":
        key = sep.join(str(i) for i in idx) if idx else "0"
    else:
        raise ZarrFormatError(f"{path}: chunk key encoding {enc['name']}")
    return os.path.join(path, *key.split("/"))


def read_v3_array(path):
    meta = node_meta(path)
    if meta["node_type"] != "array":
        raise ZarrFormatError(f"{path} is a {meta['node_type']}")
    for key in ("storage_transformers",):
        if meta.get(key):
            raise ZarrFormatError(f"{path}: {key} unsupported")
    shape = tuple(meta["shape"])
    dtype_name = meta["data_type"]
    grid = meta["chunk_grid"]
    if grid["name"] != "regular":
        raise ZarrFormatError(f"{path}: chunk grid {grid['name']}")
    cshape = tuple(grid["configuration"]["chunk_shape"])
    fill = _fill(meta["fill_value"], dtype_name)
    chain = _Chain(meta["codecs"], dtype_name, cshape, fill, path)
    out = np.empty(shape, dtype=object if dtype_name == "string"
                   else np.dtype(_NUMERIC[dtype_name]))
    out[...] = fill
    counts = [-(-s // c) for s, c in zip(shape, cshape)]
    for idx in np.ndindex(*counts):
        f = _chunk_file(path, meta, idx)
        if not os.path.exists(f):
            continue
        with open(f, "rb") as fh:
            chunk = chain.decode(fh.read())
        sl = tuple(slice(i * c, min((i + 1) * c, s))
                   for i, c, s in zip(idx, cshape, shape))
        out[sl] = chunk[tuple(slice(0, x.stop - x.start) for x in sl)]
    return out


def read_array(path):
    """The whole array at path, v3 here or v2 through zarr-python."""
    fmt = zarr_format(path)
    if fmt == 3:
        return read_v3_array(path)
    if fmt == 2:
        import zarr
        return zarr.open_array(path, mode="r")[...]
    raise ZarrFormatError(f"{path}: no zarr array")


def _strings(a):
    return np.asarray([str(s) for s in a], dtype=object)


def _read_column(path):
    import pandas as pd
    at = attributes(path)
    kind = at.get("encoding-type")
    if kind == "categorical":
        codes = read_array(os.path.join(path, "codes"))
        cats = read_array(os.path.join(path, "categories"))
        if cats.dtype == object:
            cats = _strings(cats)
        return pd.Categorical.from_codes(codes, categories=list(cats),
                                         ordered=bool(at.get("ordered")))
    a = read_array(path)
    if kind == "string-array" or a.dtype == object:
        return _strings(a)
    return a


def read_dataframe(path):
    import pandas as pd
    at = attributes(path)
    if at.get("encoding-type") != "dataframe":
        raise ZarrFormatError(f"{path}: not a dataframe "
                              f"({at.get('encoding-type')})")
    index = _strings(read_array(os.path.join(path, at["_index"])))
    cols = {c: _read_column(os.path.join(path, c))
            for c in at.get("column-order", [])}
    return pd.DataFrame(cols, index=index)


def read_matrix(path):
    """A dense array or a csr_matrix group (scipy CSR)."""
    at = attributes(path)
    if at.get("encoding-type") == "csr_matrix":
        import scipy.sparse as sp
        data = read_array(os.path.join(path, "data"))
        indices = read_array(os.path.join(path, "indices"))
        indptr = read_array(os.path.join(path, "indptr"))
        return sp.csr_matrix((data, indices, indptr),
                             shape=tuple(at["shape"]))
    if at.get("encoding-type") not in (None, "array"):
        raise ZarrFormatError(f"{path}: encoding {at.get('encoding-type')}")
    return read_array(path)


def read_anndata(path, layer=None, raw=False):
    """(X or layers/layer or raw/X, obs DataFrame, var names (raw's for
    raw)) of an AnnData zarr store: v3 decoded here, v2 through
    anndata.read_zarr (zarr-python)."""
    fmt = zarr_format(path)
    if fmt == 2:
        import anndata
        import scipy.sparse as sp
        ad = anndata.read_zarr(path)
        x = ad.raw.X if raw else ad.layers[layer] if layer else ad.X
        if sp.issparse(x):
            x = sp.csr_matrix(x)
        else:
            x = np.asarray(x)
        names = ad.raw.var_names if raw else ad.var_names
        return x, ad.obs, list(names)
    if fmt != 3:
        raise ZarrFormatError(f"{path}: no zarr group")
    if attributes(path).get("encoding-type") != "anndata":
        raise ZarrFormatError(f"{path}: not an AnnData store")
    if raw:
        rp = os.path.join(path, "raw")
        if attributes(rp).get("encoding-type") != "raw":
            raise ZarrFormatError(f"{rp}: not a raw group")
        x = read_matrix(os.path.join(rp, "X"))
        var = read_dataframe(os.path.join(rp, "var"))
    else:
        x = read_matrix(os.path.join(path, "layers", layer) if layer
                        else os.path.join(path, "X"))
        var = read_dataframe(os.path.join(path, "var"))
    obs = read_dataframe(os.path.join(path, "obs"))
    return x, obs, list(var.index)


def collection_datasets(path):
    """An annbatch collection's dataset directories, in order."""
    at = attributes(path)
    if at.get("encoding-type") != "annbatch-preshuffled":
        raise ZarrFormatError(f"{path}: not an annbatch collection")
    names = [n for n in os.listdir(path) if n.startswith("dataset_")
             and n[len("dataset_"):].isdigit()]
    names.sort(key=lambda n: int(n[len("dataset_"):]))
    if [int(n[8:]) for n in names] != list(range(len(names))):
        raise ZarrFormatError(f"{path}: datasets {names} not 0..n-1")
    return [os.path.join(path, n) for n in names]


def read_collection(path, layer=None):
    """(X, obs, var_names) of the collection's datasets, stacked."""
    import pandas as pd
    import scipy.sparse as sp
    parts = [read_anndata(p, layer) for p in collection_datasets(path)]
    xs = [p[0] for p in parts]
    x = sp.vstack(xs, format="csr") if sp.issparse(xs[0]) \
        else np.concatenate(xs)
    obs = pd.concat([p[1] for p in parts])
    for p in parts[1:]:
        if p[2] != parts[0][2]:
            raise ZarrFormatError(f"{path}: datasets' var names differ")
    return x, obs, parts[0][2]


def read_consolidated(path):
    """A v3 root's inline consolidated metadata: {relative path: node}."""
    cm = node_meta(path).get("consolidated_metadata")
    if not cm:
        return None
    if cm.get("kind") != "inline":
        raise ZarrFormatError(f"{path}: consolidated kind {cm.get('kind')}")
    return cm["metadata"]
