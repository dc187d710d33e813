# SPDX-License-Identifier: MIT
"""Files whose genes differ, joined on var names through real mounts:
-o var_join=inner, var_join=outer and var_names=FILE, dense and CSR. For
every strategy and partition each batch .npy, .npz and index file equals
the rows anndata.concat computes from the sources (reindexed to the served
names, absent genes 0); var_names.txt and dataset.json list the served
names; bad options and the default mismatch are mount errors."""
import json
import os
import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import xxhash

from conftest import covering, plan, run_rankfs

# Overlapping gene sets in different orders: g2 and g4 are in every file.
VARS = [["g1", "g2", "g3", "g4", "g5"],
        ["g4", "g6", "g2", "g1"],
        ["g2", "g7", "g4", "g1", "g3", "g8"]]
ROWS = [23, 17, 26]
NAMES = ["g8", "g1", "g6", "g3"]  # var_names=FILE: g8 and g6 in one file
STRATEGIES = ["streaming", "shuffle", "block_shuffle", "weighted",
              "class_balanced"]
PARTITIONS = ["batch", "round_robin", "contiguous", "file"]


def served_names(mode):
    """The served order, computed here from the var lists alone."""
    if mode == "inner":
        return [g for g in VARS[0] if all(g in v for v in VARS)]
    if mode == "outer":
        seen = []
        for v in VARS:
            seen += [g for g in v if g not in seen]
        return seen
    return list(NAMES)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    import anndata
    warnings.filterwarnings("ignore")
    d = tmp_path_factory.mktemp("varjoin")
    rng = np.random.default_rng(24)
    out = {"dense": [], "csr": [], "adatas": []}
    for k, (var, n) in enumerate(zip(VARS, ROWS)):
        x = rng.integers(1, 9, size=(n, len(var))).astype(np.float32)
        x[rng.random(x.shape) < 0.5] = 0
        obs = pd.DataFrame({
            "w": rng.random(n) + 0.1,
            "ct": pd.Categorical(rng.choice(["a", "b"], n)),
        }, index=[f"f{k}c{i}" for i in range(n)])
        var_df = pd.DataFrame(index=var)
        a = anndata.AnnData(X=x, obs=obs, var=var_df)
        out["adatas"].append(a)
        a.write_h5ad(d / f"dense{k}.h5ad")
        anndata.AnnData(X=sp.csr_matrix(x), obs=obs,
                        var=var_df).write_h5ad(d / f"csr{k}.h5ad")
        out["dense"].append(str(d / f"dense{k}.h5ad"))
        out["csr"].append(str(d / f"csr{k}.h5ad"))
    names = d / "names.txt"
    names.write_text("".join(g + "\n" for g in NAMES))
    out["names"] = str(names)
    out["dir"] = d
    return out


def expected(data, mode):
    """The served matrix from anndata.concat, an independent reader."""
    import anndata
    join = "inner" if mode == "inner" else "outer"
    both = anndata.concat(data["adatas"], join=join, fill_value=0)
    x = both[:, served_names(mode)].X
    return np.asarray(x.toarray() if sp.issparse(x) else x,
                      dtype=np.float32)


def option_of(data, mode):
    return f"var_names={data['names']}" if mode == "names" else \
        f"var_join={mode}"


def fingerprint(names):
    h = xxhash.xxh3_64()
    for g in names:
        h.update(g.encode() + b"\0")
    return f"{h.intdigest():016x}"


def check_mount(m, want, options, csr):
    rows = sum(ROWS)
    seen = []
    # rankfs-plan's second opinion needs no source: not for weights,
    # labels or files.
    plannable = not any(o in options for o in ("weights=", "label=",
                                               "partition=file"))
    for rank in range(2):
        for k in range(m.batches()):
            idx = m.load("index", 0, rank, k)
            assert idx.min() >= 0 and idx.max() < rows
            seen.append(idx)
            if plannable:
                np.testing.assert_array_equal(
                    idx, plan(rows, options, 0, rank, k))
            batch = m.load("batch", 0, rank, k)
            assert batch.dtype == np.float32
            np.testing.assert_array_equal(batch, want[idx], err_msg=options)
            if not csr:
                continue
            path = m.file("batch", 0, rank, k)[:-4] + ".npz"
            z = sp.load_npz(path)
            assert z.shape == (len(idx), want.shape[1])
            assert z.has_sorted_indices
            np.testing.assert_array_equal(z.toarray(), want[idx])
            # Stored values are the source's nonzeros, none of a dropped
            # gene: the counts the .npz's size came from.
            assert z.nnz == np.count_nonzero(want[idx])
    if "weights=" not in options and "label=" not in options:
        assert len(np.unique(np.concatenate(seen))) == sum(map(len, seen))


@pytest.mark.parametrize("fmt", ["dense", "csr"])
@pytest.mark.parametrize("mode", ["inner", "outer", "names"])
def test_every_strategy_and_partition(mounts, data, mode, fmt):
    want = expected(data, mode)
    names = served_names(mode)
    assert want.shape == (sum(ROWS), len(names))
    join = option_of(data, mode)
    m = mounts(data[fmt], f"{join},batch_size=8")
    with open(m.path("var_names.txt")) as f:
        assert f.read().splitlines() == names
    assert "var_names.txt" in os.listdir(m.mnt)
    info = m.json("dataset.json")
    assert info["columns"] == len(names)
    assert info["shape"] == [sum(ROWS), len(names)]
    assert info["var_join"] == mode
    assert info["var_names"] == {"count": len(names),
                                 "fingerprint": fingerprint(names)}
    if fmt == "csr":
        assert info["nnz"] == np.count_nonzero(want)
    m.unmount()
    # partition=file samples no weights or labels
    for strategy, partition in covering(
            (s, p) for s in STRATEGIES for p in PARTITIONS
            if p != "file" or s not in ("weighted", "class_balanced")):
        extra = {"weighted": ",weights=w",
                 "class_balanced": ",label=ct"}.get(strategy, "")
        o = f"{join},world_size=2,batch_size=8,block_size=4," \
            f"fetch_factor=2,seed=3,strategy={strategy}," \
            f"partition={partition}{extra}"
        m = mounts(data[fmt], o)
        check_mount(m, want, o.split(",", 1)[1], fmt == "csr")
        m.unmount()


def test_default_serves_the_first_files_names(mounts, data):
    """Files with the same var: no join needed, var_names.txt is theirs."""
    m = mounts(data["dense"][:1], "batch_size=8")
    with open(m.path("var_names.txt")) as f:
        assert f.read().splitlines() == VARS[0]
    info = m.json("dataset.json")
    assert info["var_join"] == "none"
    assert info["var_names"]["fingerprint"] == fingerprint(VARS[0])
    assert "var_names.txt" in os.listdir(m.mnt)


def test_config_json_mounts_the_same_view_again(mounts, data):
    from test_core import options_of
    for mode in ("outer", "names"):
        first = mounts(data["csr"], option_of(data, mode) + ",batch_size=8")
        config = first.json("config.json")
        again = mounts(data["csr"], options_of(config))
        assert again.json("config.json")["view_id"] == config["view_id"]
        with open(first.file("batch", 0, 0, 1), "rb") as a, \
                open(again.file("batch", 0, 0, 1), "rb") as b:
            assert a.read() == b.read()
    # Another join is another view.
    ids = {mounts(data["csr"], o + ",batch_size=8").json(
        "config.json")["view_id"]
        for o in ("var_join=inner", "var_join=outer",
                  option_of(data, "names"))}
    assert len(ids) == 3


def refused(data, tmp_path, options, sources=None):
    mnt = tmp_path / f"mnt{len(os.listdir(tmp_path))}"
    mnt.mkdir()
    args = (["-o", options] if options else []) + \
        list(sources or data["dense"]) + [mnt]
    r = run_rankfs(args)
    assert r.returncode != 0, options
    return r.stderr


@pytest.mark.parametrize("spelling", ["X", "/X/", "//X", "/./X", "X/.",
                                      "/./X/./"])
def test_dataset_spellings_are_one_path(data, mounts, rankfs_cat, spelling):
    """dataset=X, /X/, //X, /./X and X/. name /X (HDF5 takes them all):
    they were not recognised as X, whose var names are read, so files
    whose genes differ were joined unchecked or refused as having none,
    and the view had another id."""
    def config(options):
        r = rankfs_cat(data["dense"], options, "config.json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)
    want = config("batch_size=8,var_join=outer")
    got = config(f"batch_size=8,var_join=outer,dataset={spelling}")
    assert got["dataset"] == "/X" and got["view_id"] == want["view_id"]
    r = rankfs_cat(data["dense"], f"batch_size=8,dataset={spelling}",
                   "config.json")
    assert r.returncode != 0 and "dense1.h5ad" in r.stderr and \
        "var_join" in r.stderr, r.stderr
    # A mount too: the same view, with its var names.
    m = mounts(data["dense"],
               f"batch_size=8,var_join=outer,dataset={spelling}")
    assert m.json("config.json")["view_id"] == want["view_id"]
    assert os.path.exists(m.path("var_names.txt"))


def test_errors(data, tmp_path):
    d = data["dir"]
    # The default: the first differing file named.
    err = refused(data, tmp_path, "")
    assert "dense1.h5ad" in err and "var_join" in err
    err = refused(data, tmp_path, "var_join=left")
    assert "var_join=left" in err and "inner, outer" in err
    err = refused(data, tmp_path, f"var_names={d}/missing.txt")
    assert "missing.txt" in err and "No such file" in err
    (d / "empty.txt").write_text("")
    err = refused(data, tmp_path, f"var_names={d}/empty.txt")
    assert "empty.txt: the file names no var" in err
    (d / "dup.txt").write_text("g1\ng2\ng1\n")
    err = refused(data, tmp_path, f"var_names={d}/dup.txt")
    assert "dup.txt" in err and "'g1' is given twice" in err
    (d / "unknown.txt").write_text("g1\nnope\n")
    err = refused(data, tmp_path, f"var_names={d}/unknown.txt")
    assert "unknown.txt: 'nope' (line 2) is in no source" in err
    err = refused(data, tmp_path, f"var_join=inner,var_names={data['names']}")
    assert "give one" in err
    # A file whose var has a name twice.
    import anndata
    dup = anndata.AnnData(X=np.ones((3, 2), np.float32),
                          var=pd.DataFrame(index=["g1", "g1"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dup.write_h5ad(d / "dupvar.h5ad")
    err = refused(data, tmp_path, "var_join=outer",
                  [data["dense"][0], str(d / "dupvar.h5ad")])
    assert "dupvar.h5ad: var name 'g1' is given twice" in err


def test_var_names_in_another_order_name_the_first_that_differs(data,
                                                                 tmp_path):
    """Unjoined files with the same genes in another order: the error
    names the first position where they differ and both names (it gave
    two hashes), control characters escaped, on one line."""
    import anndata
    d = tmp_path / "order"
    d.mkdir()
    x = np.ones((20, 4), np.float32)

    def write(name, var):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            anndata.AnnData(X=x, var=pd.DataFrame(index=var)).write_h5ad(
                d / name)
        return str(d / name)
    a = write("a.h5ad", ["g1", "g2", "g3", "g4"])
    b = write("b.h5ad", ["g1", "g2", "g4", "g3"])
    err = refused(data, tmp_path, "", [a, b])
    assert err == (f"rankfs: {b}: var name 2 (counting from 0) is 'g4' "
                   f"where {a} has 'g3': var names differ, so the columns "
                   "are not the same genes (-o var_join=inner|outer or "
                   "var_names=FILE joins them)\n"), err
    c = write("c.h5ad", ["g1", "g\n2\t\x01", "g3", "g4"])
    err = refused(data, tmp_path, "", [a, c])
    assert err.count("\n") == 1, err
    assert "var name 1 (counting from 0) is 'g\\n2\\t\\x01' where " \
        f"{a} has 'g2'" in err, err


def test_joined_files_of_another_dtype(data, tmp_path):
    """Joined files whose dtypes differ are refused for the dtype alone:
    the line said their widths differed and advised the var_join= it
    was given; unjoined, the advice to join is not given where joining
    would be refused the same way."""
    import anndata
    import h5py
    var = pd.DataFrame(index=["g2", "g4"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        anndata.AnnData(X=np.ones((9, 2), np.float32),
                        var=var).write_h5ad(tmp_path / "f64.h5ad")
    with h5py.File(tmp_path / "f64.h5ad", "r+") as f:
        attrs = dict(f["X"].attrs)  # anndata may store float32 anyway
        del f["X"]
        f["X"] = np.ones((9, 2), np.float64)
        f["X"].attrs.update(attrs)
    sources = [data["dense"][0], str(tmp_path / "f64.h5ad")]
    for option in ("var_join=outer", "var_join=inner",
                   f"var_names={data['names']}"):
        err = refused(data, tmp_path, option + ",batch_size=8", sources)
        assert err.strip() == (
            f"rankfs: {sources[1]}: /X is float64, but {sources[0]}'s is "
            "float32 (files must agree on the dtype, joined on var names "
            "or not)"), err
    err = refused(data, tmp_path, "batch_size=8", sources)
    assert "f64.h5ad: /X has 2 columns of float64" in err and \
        "var_join" not in err, err
