# SPDX-License-Identifier: MIT
"""Two builds of rankfs-cat, the same bytes: writes a scripted set of
sources (dense and CSR .h5ad of float and integer types, gzip-compressed
and chunked variants, a generic HDF5 file read with dataset=, zarr v2 and
v3 stores, several files as one source, var_join and var_names=, obs
columns for labels, filters and weights, layers and raw), then for a
matrix of options (every strategy, every partition, drop_last 0 and 1,
world sizes 1, 2 and 3, dtype casts, label=, filter=, weights=, layer=,
raw=) asks both binaries for the root files (config.json, dataset.json,
var_names.txt), the view_id, and batch .npy, .npz (CSR), index and label
files of a few epochs, ranks and batches and a step file, and compares
their exit status and stdout byte for byte.

    compare_builds.py [--jobs N] [--keep DIR] [--match TEXT] BASE CURRENT

scripts/compare-builds REV builds REV's rankfs-cat and runs this. Every
line of config.json and dataset.json is compared: neither holds the
build's path or version; what they hold of the machine (cache_mb,
threads, the sources' absolute paths) is the same for two binaries run
here on the same files. stats.json (live counters and memory sizes) is
not compared. Prints each mismatch and ends with 'N passed, M failed';
exits 1 on any failure (a path that both binaries refuse is one too: the
matrix must read real files)."""
import argparse
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zarr_v3  # noqa: E402

N, D = 480, 16
CLASSES = ["B", "T", "NK", "mono"]


def genes(d, prefix="gene"):
    return [f"{prefix}{j}" for j in range(d)]


def make_obs(rng, n, first=0):
    weight = rng.random(n) + 0.1
    weight[rng.choice(n, n // 10, replace=False)] = 0.0
    flag = pd.array(rng.random(n) < 0.5, dtype="boolean")
    flag[rng.choice(n, n // 8, replace=False)] = pd.NA
    return pd.DataFrame({
        "cell_type": pd.Categorical(rng.choice(CLASSES, n,
                                               p=[.5, .3, .15, .05]),
                                    categories=CLASSES),
        "split": rng.choice(["train", "val", "test"], n,
                            p=[.6, .2, .2]).astype(object),
        "weight": weight,
        "keep": rng.random(n) < 0.6,
        "age": rng.integers(20, 80, n).astype(np.int32),
        "flag": flag,
    }, index=[f"cell{first + i}" for i in range(n)])


def make_csr(rng, n, d, dtype=np.float32):
    import scipy.sparse as sp
    x = sp.random(n, d, density=0.2, format="csr", random_state=rng,
                  dtype=np.float32)
    x.data[:] = rng.integers(1, 400, x.nnz)  # 300+: casts saturate, wrap
    x = x.tolil()
    x[3] = 0  # an empty row
    x = x.tocsr()
    x.eliminate_zeros()
    return x.astype(dtype)


def write_h5ad(path, x, obs=None, var=None, layers=None, raw=None,
               compression=None):
    import anndata
    n, d = x.shape
    obs = obs if obs is not None else pd.DataFrame(
        index=[f"cell{i}" for i in range(n)])
    a = anndata.AnnData(X=x, obs=obs,
                        var=pd.DataFrame(index=var or genes(d)),
                        layers=layers, dtype=x.dtype)
    if raw is not None:
        a.raw = anndata.AnnData(X=raw, obs=obs,
                                var=pd.DataFrame(index=genes(
                                    raw.shape[1], "raw")))
    a.write_h5ad(path, compression=compression)
    return path


def recompress_v2(store, compressor, csr_chunk):
    """Every array of a v2 store rewritten with compressor, X/data and
    X/indices in chunks of csr_chunk values (anndata 0.8 writes them in
    one chunk), as tests/integration/test_zarr.py does."""
    import numcodecs
    import zarr
    for d, dirs, files in os.walk(store):
        if ".zarray" not in files:
            continue
        dirs[:] = []
        z = zarr.open_array(d, mode="r")
        data, attrs, chunks = z[...], dict(z.attrs), z.chunks
        if os.path.relpath(d, store) in (os.path.join("X", "data"),
                                         os.path.join("X", "indices")):
            chunks = (csr_chunk,)
        kw = dict(shape=z.shape, chunks=chunks, dtype=z.dtype,
                  fill_value=z.fill_value, compressor=compressor)
        if z.dtype == object:
            kw["object_codec"] = numcodecs.VLenUTF8()
        shutil.rmtree(d)
        out = zarr.open_array(d, mode="w", **kw)
        out[...] = data
        out.attrs.update(attrs)


def write_v2(path, x, obs, var=None, compressor=None, consolidated=False):
    import anndata
    import scipy.sparse as sp
    a = anndata.AnnData(X=x, obs=obs,
                        var=pd.DataFrame(index=var or genes(x.shape[1])),
                        dtype=x.dtype)
    a.write_zarr(path, chunks=(64,) if sp.issparse(x) else (64, x.shape[1]))
    if compressor is not None:
        recompress_v2(path, compressor, 128)
    if consolidated:
        import zarr
        zarr.consolidate_metadata(path)
    return path


def make_sources(d):
    """name -> (source paths, {"csr": bool, "var": bool})."""
    import h5py
    import numcodecs
    rng = np.random.default_rng(42)
    p = lambda name: os.path.join(d, name)  # noqa: E731
    out = {}
    obs = make_obs(rng, N)
    dense = rng.random((N, D), dtype=np.float32) * 300
    dense[7] = [np.nan, np.inf, -np.inf, -1.5, 1e9, -1e9, 255.9, 256] + \
        [0.0] * (D - 8)  # casts: NaN, infinities, saturation, truncation
    counts = rng.integers(0, 1000, (N, D)).astype(np.int32)
    raw = rng.random((N, D + 4), dtype=np.float32)
    out["dense"] = [write_h5ad(p("dense.h5ad"), dense, obs,
                               layers={"counts": counts}, raw=raw)]
    out["dense_int_gzip"] = [write_h5ad(
        p("dense_int.h5ad"), rng.integers(-300, 300, (N, D)).astype(np.int16),
        obs, compression="gzip")]
    csr = make_csr(rng, N, 40)
    out["csr"] = [write_h5ad(p("csr.h5ad"), csr, obs,
                             layers={"counts": make_csr(rng, N, 40,
                                                        np.int32)})]
    out["csr_int_gzip"] = [write_h5ad(p("csr_int.h5ad"),
                                      make_csr(rng, N, 40, np.int32), obs,
                                      compression="gzip")]
    with h5py.File(p("generic.h5"), "w") as f:
        f.create_dataset("x", data=rng.integers(0, 256, (N, 12),
                                                dtype=np.uint8))
        f.create_dataset("xz", data=rng.integers(-2**20, 2**20, (N, 12),
                                                 dtype=np.int32),
                         chunks=(32, 12), compression="gzip")
        f.create_dataset("xf", data=rng.random((N, 12)) * 1e5,
                         chunks=(50, 12))
        f.create_dataset("meta/labels", data=rng.integers(0, 5, N))
        f.create_dataset("meta/w", data=rng.random(N) + 0.05)
    out["generic"] = [p("generic.h5")]
    # One row space of three files of different lengths (partition=file).
    out["split"] = []
    first = 0
    for i, n in enumerate((150, 170, 160)):
        out["split"].append(write_h5ad(
            p(f"part{i}.h5ad"), rng.random((n, D), dtype=np.float32),
            make_obs(rng, n, first)))
        first += n
    z_obs = make_obs(rng, 300)
    z_dense = rng.integers(0, 100, (300, 12)).astype(np.float32)
    z_csr = make_csr(rng, 300, 12)
    out["v2_dense"] = [write_v2(p("v2_dense.zarr"), z_dense, z_obs)]
    out["v2_csr_gzip"] = [write_v2(p("v2_csr.zarr"), z_csr, z_obs,
                                   compressor=numcodecs.GZip(5),
                                   consolidated=True)]
    v3_obs = z_obs.drop(columns="flag")  # zarr_v3.py: no nullable columns
    v3 = dict(var_names=genes(12), chunk_rows=16, shard_rows=64,
              csr_chunk=128, csr_shard=512)
    out["v3_dense"] = [zarr_v3.write_anndata_v3(p("v3_dense.zarr"), z_dense,
                                                obs=v3_obs, **v3)]
    out["v3_csr_sharded"] = [zarr_v3.write_anndata_v3(
        p("v3_csr.zarr"), z_csr, obs=v3_obs, sharded=True,
        codec=[("zstd", {"level": 3})], consolidated=True, **v3)]
    out["v3_dense_sharded_be"] = [zarr_v3.write_anndata_v3(
        p("v3_dense_be.zarr"), z_dense, obs=v3_obs, sharded=True,
        endian="big", index_location="start",
        codec=[("gzip", {"level": 5})], **v3)]
    # An .h5ad and a zarr v3 store in one row space.
    out["mixed"] = [
        write_h5ad(p("first.h5ad"), z_dense[:140], v3_obs.iloc[:140],
                   var=genes(12)),
        zarr_v3.write_anndata_v3(p("second.zarr"), z_dense[140:],
                                 obs=v3_obs.iloc[140:], sharded=True, **v3)]
    # Files whose genes differ: CSR (.h5ad, v3, .h5ad) and dense (.h5ad,
    # v2), for var_join= and var_names=.
    gsets = (["a", "b", "c", "d", "e"], ["d", "x", "b", "y"],
             ["b", "e", "d", "z", "a"])
    out["join_csr"] = [
        write_h5ad(p("j0.h5ad"), make_csr(rng, 60, 5), make_obs(rng, 60),
                   var=gsets[0]),
        zarr_v3.write_anndata_v3(
            p("j1.zarr"), make_csr(rng, 70, 4),
            obs=make_obs(rng, 70, 60).drop(columns="flag"),
            var_names=gsets[1], csr_chunk=64),
        write_h5ad(p("j2.h5ad"), make_csr(rng, 50, 5),
                   make_obs(rng, 50, 130), var=gsets[2])]
    out["join_dense"] = [
        write_h5ad(p("k0.h5ad"), rng.random((90, 5), dtype=np.float32),
                   make_obs(rng, 90), var=gsets[0]),
        write_v2(p("k1.zarr"), rng.random((80, 4), dtype=np.float32),
                 make_obs(rng, 80, 90), var=gsets[1])]
    with open(p("names.txt"), "w") as f:
        f.write("d\nb\nx\n")  # x: not in the first file, read as 0
    info = {name: {"csr": "csr" in name, "var": True}
            for name in out}
    info["generic"]["var"] = False
    return out, info, p("names.txt")


STRATEGY_EXTRA = {"weighted": "weights=weight",
                  "class_balanced": "label=cell_type,smoothing=0.5"}
STRATEGIES = ("streaming", "shuffle", "block_shuffle", "weighted",
              "class_balanced")
# (world_size, drop_last) pairs, taken in turn.
SHAPES = ((1, 1), (3, 0), (3, 1), (1, 0))


def configurations(names_file):
    """(name, source set, options)."""
    out = []
    # Every strategy with every row partition, world sizes and drop_last
    # in turn; labels with round_robin.
    for si, s in enumerate(STRATEGIES):
        for pi, part in enumerate(("batch", "round_robin", "contiguous")):
            w, drop = SHAPES[(si + pi) % 4]
            extra = STRATEGY_EXTRA.get(s, "")
            if part == "round_robin" and "label=" not in extra:
                extra = ",".join(filter(None, (extra, "label=cell_type")))
            out.append(("dense", f"world_size={w},batch_size=32,seed=5,"
                        f"strategy={s},partition={part},drop_last={drop},"
                        f"block_size=8,fetch_factor=2" +
                        (f",{extra}" if extra else "")))
    # partition=file (streaming, shuffle and block_shuffle only: the mount
    # refuses the weighted strategies with it) over three files.
    for s, w, drop in (("streaming", 3, 1), ("shuffle", 3, 0),
                       ("block_shuffle", 2, 1)):
        out.append(("split", f"world_size={w},batch_size=20,seed=3,"
                    f"strategy={s},partition=file,drop_last={drop},"
                    "label=cell_type"))
    # Filters (string, categorical, bool, int, nullable bool), labels of
    # each kind.
    out += [
        ("dense", "world_size=3,batch_size=40,seed=9,"
         "filter=split:train|val,label=cell_type"),
        ("dense", "world_size=1,batch_size=25,strategy=shuffle,"
         "filter=keep:true,filter=cell_type:B|NK,label=age"),
        ("dense", "world_size=3,batch_size=16,strategy=weighted,"
         "weights=weight,filter=flag:true,label=split,total_size=500"),
        ("dense", "world_size=1,batch_size=20,strategy=class_balanced,"
         "label=flag,filter=age:30|40|50|60|70,drop_last=0"),
    ]
    # dtype casts, layer and raw, integer and gzip sources, CSR, dataset=.
    out += [(src, f"world_size={w},batch_size=50,{o}") for src, w, o in (
        ("dense", 1, "dtype=float16"),
        ("dense", 3, "dtype=uint8,strategy=streaming"),
        ("dense", 1, "dtype=int16,drop_last=0"),
        ("dense", 3, "layer=counts,dtype=uint8,strategy=shuffle"),
        ("dense", 1, "raw=1,label=cell_type,drop_last=0"),
        ("dense_int_gzip", 3, "dtype=float32,label=cell_type"),
        ("dense_int_gzip", 1, "dtype=int8,drop_last=0"),
        ("csr", 3, "strategy=shuffle,drop_last=0,label=cell_type"),
        ("csr", 1, "strategy=class_balanced,label=cell_type,dtype=float16"),
        ("csr", 3, "layer=counts,strategy=weighted,weights=weight,"
         "partition=round_robin"),
        ("csr_int_gzip", 1, "dtype=uint8,strategy=streaming,drop_last=0"),
        ("generic", 3, "dataset=/x,dtype=float32,label=/meta/labels"),
        ("generic", 1, "dataset=/xz,strategy=weighted,weights=/meta/w,"
         "dtype=int16"),
        ("generic", 3, "dataset=/xf,dtype=float16,drop_last=0,"
         "filter=/meta/labels:1|3"),
    )]
    # zarr v2 and v3, alone and beside an .h5ad.
    out += [(src, f"world_size={w},batch_size=24,seed=7,{o}")
            for src, w, o in (
                ("v2_dense", 3, "strategy=class_balanced,label=cell_type,"
                 "drop_last=0"),
                ("v2_dense", 1, "filter=keep:true,dtype=uint8"),
                ("v2_csr_gzip", 3, "strategy=weighted,weights=weight"),
                ("v3_dense", 3, "strategy=block_shuffle,block_size=8,"
                 "partition=round_robin,label=cell_type"),
                ("v3_csr_sharded", 1, "strategy=shuffle,dtype=float16,"
                 "drop_last=0"),
                ("v3_dense_sharded_be", 3, "strategy=streaming,"
                 "dtype=float64,filter=split:train|test"),
                ("mixed", 2, "partition=file,strategy=shuffle"),
                ("mixed", 1, "strategy=block_shuffle,label=cell_type,"
                 "filter=keep:false"),
            )]
    # Files whose genes differ.
    out += [(src, f"world_size={w},batch_size=8,seed=2,{o}")
            for src, w, o in (
                ("join_csr", 1, "var_join=inner,strategy=shuffle"),
                ("join_csr", 3, "var_join=outer,label=cell_type,"
                 "partition=file,strategy=streaming"),
                ("join_csr", 1, f"var_names={names_file},drop_last=0"),
                ("join_dense", 3, "var_join=outer,strategy=shuffle,"
                 "dtype=float16"),
                ("join_dense", 1, f"var_names={names_file},"
                 "label=cell_type"),
            )]
    return [(f"{src}[{opts}]", src, opts) for src, opts in out]


def run_cat(binary, sources, options, path):
    r = subprocess.run([binary, "-o", options] + sources + [path],
                       capture_output=True)
    return r.returncode, r.stdout, r.stderr


def batch_count(cat, sources, options, config):
    """Batches per rank: partition.c's arithmetic over config.json's
    total_size (the epoch's rows, after filters), or for partition=file,
    whose ranks read files of their own, found by lookups of rank 0's
    index files with the current binary (the namespace refuses a batch
    past the last with exit status 2). A wrong count shows as paths both
    binaries refuse."""
    w, b = config["world_size"], config["batch_size"]
    if config["partition"] != "file":
        t = config["total_size"]
        per_rank = t // (w * b) * b if config["drop_last"] else -(-t // w)
        return -(-per_rank // b)

    def exists(k):
        name = f"epoch/0/rank/0/index/{k:0{max(6, len(str(k)))}d}.npy"
        rc = run_cat(cat, sources, options, name)[0]
        if rc not in (0, 2):
            raise RuntimeError(f"{options}: {name}: rankfs-cat exit {rc}")
        return rc == 0
    hi = 1
    while exists(hi):
        hi *= 2
    lo = hi // 2  # batch 0 is there (config.json was made)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if exists(mid) else (lo, mid)
    return hi


# Options that dataset.json and var_names.txt depend on: those files are
# compared once per source set and values of these.
DATASET_KEYS = ("dataset", "layer", "raw", "dtype", "label", "filter",
                "var_join", "var_names")


def paths_of(src, config, nb, info, seen, step):
    """Root files (dataset.json and var_names.txt where not compared
    already, seen); batch (.npz too for CSR) and label files of the first
    batch of epoch 0 and the last batch of the last rank in an epoch past
    those listed; an index file in the middle; with step, a step file."""
    w = config["world_size"]
    name = lambda k: f"{k:0{max(6, len(str(nb - 1)))}d}"  # noqa: E731
    out = ["config.json"]
    key = json.dumps([src] + [config[k] for k in DATASET_KEYS])
    if key not in seen:
        seen.add(key)
        out.append("dataset.json")
        if info["var"]:
            out.append("var_names.txt")
    for e, r, k in ((0, 0, 0), (1000, w - 1, nb - 1)):
        out.append(f"epoch/{e}/rank/{r}/batch/{name(k)}.npy")
        if info["csr"]:
            out.append(f"epoch/{e}/rank/{r}/batch/{name(k)}.npz")
        if config["label"]:
            out.append(f"epoch/{e}/rank/{r}/label/{name(k)}.npy")
    out.append(f"epoch/3/rank/{w // 2}/index/{name(nb // 2)}.npy")
    if step:
        out.append(f"step/rank/{w - 1}/{nb + 1:09d}." +
                   ("npz" if info["csr"] else "npy"))
    return out


def first_difference(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def compare(base, cur, sources, options, path):
    """[(path, None or what differs)]; config.json's view_id is a check
    of its own."""
    b, c = run_cat(base, sources, options, path), \
        run_cat(cur, sources, options, path)
    if b[0] != 0 and b == c:
        why = "both refused it: " + b[2].decode(errors="replace").strip()
    elif b[0] != c[0]:
        why = (f"exit status {b[0]} (base) != {c[0]} (current): "
               f"{(b[2] or c[2]).decode(errors='replace').strip()}")
    elif b[1] != c[1]:
        why = (f"first differing byte at {first_difference(b[1], c[1])} "
               f"(sizes {len(b[1])} base, {len(c[1])} current)")
    else:
        why = None
    if path != "config.json":
        return [(path, why)]
    try:
        ids = [json.loads(x[1])["view_id"] for x in (b, c)]
        id_why = None if ids[0] == ids[1] else \
            f"{ids[0]} (base) != {ids[1]} (current)"
    except (ValueError, KeyError):
        id_why = "config.json unreadable: " + (why or "no view_id")
    return [(path, why), ("view_id", id_why)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base", help="rankfs-cat of the build compared against")
    ap.add_argument("current", help="rankfs-cat of the build under test")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--keep", help="write the sources here and keep them")
    ap.add_argument("--match", default="",
                    help="only the configurations whose name (source set"
                    "[options]) holds this text")
    args = ap.parse_args()
    start = time.monotonic()
    d = args.keep or tempfile.mkdtemp(prefix="rankfs-compare-")
    os.makedirs(d, exist_ok=True)
    try:
        sets, info, names = make_sources(d)
        configs = [c for c in configurations(names) if args.match in c[0]]
        print(f"sources written in {time.monotonic() - start:.1f} s: "
              f"{len(sets)} source sets, {len(configs)} configurations",
              flush=True)
        passed, failed = 0, 0

        def plan(cfg):
            name, src, opts = cfg
            rc, out, err = run_cat(args.current, sets[src], opts,
                                   "config.json")
            if rc != 0:
                return None, err.decode(errors="replace")
            config = json.loads(out)
            return config, batch_count(args.current, sets[src], opts,
                                       config)

        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            planned = list(pool.map(plan, configs))
            jobs, seen = [], set()
            for i, ((name, src, opts), (config, nb)) in enumerate(
                    zip(configs, planned)):
                if config is None:
                    print(f"FAIL {name}: config.json: the current build "
                          f"refuses it: {nb.strip()}")
                    failed += 1
                    continue
                paths = paths_of(src, config, nb, info[src], seen, i % 2)
                jobs += [(name, src, opts, p) for p in paths]
            results = pool.map(
                lambda j: compare(args.base, args.current, sets[j[1]], j[2],
                                  j[3]), jobs)
            for (name, _, _, _), checks in zip(jobs, results):
                for path, why in checks:
                    if why is None:
                        passed += 1
                    else:
                        failed += 1
                        print(f"FAIL {name}: {path}: {why}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(d, ignore_errors=True)
    print(f"{len(configs)} configurations, "
          f"{time.monotonic() - start:.1f} s")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
