# SPDX-License-Identifier: MIT
"""The sampling suite through real mounts: labels, weighted and
class-balanced draws, filters, every partition, drop_last=0, the elastic
property, multi-file sources and the step view, on files written by
anndata and h5py."""
import os
import re
import subprocess

import h5py
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from conftest import (is_mounted, options_from_config, run_rankfs,
                      source_rows, write_h5, write_h5ad)

N, D = 6000, 8
CLASSES = ["B cell", "T cell", "monocyte", "NK", "platelet"]
SHARES = [0.50, 0.25, 0.15, 0.07, 0.03]


def make_obs(n, rng):
    counts = [int(round(s * n)) for s in SHARES]
    counts[0] += n - sum(counts)
    ct = np.repeat(np.arange(5), counts)
    rng.shuffle(ct)
    heavy = np.zeros(n, dtype=bool)
    heavy[rng.choice(n, n // 10, replace=False)] = True
    weight = np.where(heavy, 9.0, 1.0)
    weight[rng.choice(np.flatnonzero(~heavy), 50, replace=False)] = 0.0
    missing = ct.astype(object)
    missing = pd.Categorical([CLASSES[c] for c in ct], categories=CLASSES)
    donor = pd.Categorical(rng.choice(["d1", "d2", None], n),
                           categories=["d1", "d2"])
    return pd.DataFrame({
        "cell_type": pd.Categorical([CLASSES[c] for c in ct],
                                    categories=CLASSES),
        "split": rng.choice(["train", "val", "test"], n, p=[.7, .2, .1]),
        "weight": weight,
        "heavy": heavy,
        "age": rng.integers(20, 80, n).astype(np.int32),
        "donor": donor,
        "label_with_missing": missing,
    }, index=[f"cell{i}" for i in range(n)])


@pytest.fixture(scope="module")
def atlas(tmp_path_factory):
    d = tmp_path_factory.mktemp("atlas")
    rng = np.random.default_rng(7)
    x = rng.random((N, D), dtype=np.float32)
    obs = make_obs(N, rng)
    path = write_h5ad(str(d / "atlas.h5ad"), x, obs)
    return {"path": path, "x": x, "obs": obs, "dir": d}


def codes(series):
    return np.asarray(series.cat.codes, dtype=np.int64)


def all_index(m, epoch, world):
    return [np.concatenate(m.epoch_index(epoch, r)) for r in range(world)]


def test_label_codes_equal_obs_codes(mounts, atlas):
    m = mounts(atlas["path"], "world_size=2,batch_size=100,label=cell_type")
    info = m.json("dataset.json")
    assert info["label"]["categories"] == CLASSES
    assert info["label"]["kind"] == "categorical"
    want = codes(atlas["obs"]["cell_type"])
    assert sorted(os.listdir(m.path("epoch/0/rank/1"))) == \
        ["batch", "index", "label"]
    for rank in (0, 1):
        for k in (0, 7, m.batches() - 1):
            index = m.load("index", 1, rank, k)
            label = m.load("label", 1, rank, k)
            assert label.dtype == np.int64
            np.testing.assert_array_equal(label, want[index])
            np.testing.assert_array_equal(m.load("batch", 1, rank, k),
                                          atlas["x"][index])


@pytest.mark.parametrize("column,expect", [
    ("heavy", lambda obs: obs["heavy"].to_numpy().astype(np.int64)),
    ("age", lambda obs: obs["age"].to_numpy().astype(np.int64)),
    ("donor", lambda obs: codes(obs["donor"])),  # -1 where missing
    ("split", lambda obs: np.searchsorted(["test", "train", "val"],
                                          obs["split"].to_numpy())),
])
def test_other_label_kinds(mounts, atlas, column, expect):
    m = mounts(atlas["path"], f"batch_size=500,label={column}")
    want = expect(atlas["obs"])
    index = m.load("index", 0, 0, 3)
    np.testing.assert_array_equal(m.load("label", 0, 0, 3), want[index])
    cats = m.json("dataset.json")["label"]["categories"]
    if column == "split":
        assert cats == ["test", "train", "val"]
    if column == "heavy":
        assert cats == ["False", "True"]
    if column == "age":
        assert cats is None


def test_bool_categorical_label(mounts, tmp_path):
    """pandas' bool categories are stored by h5py as an HDF5 enum."""
    flags = np.arange(600) % 3 == 0
    obs = pd.DataFrame({"doublet": pd.Categorical(flags)},
                       index=[f"c{i}" for i in range(600)])
    path = write_h5ad(str(tmp_path / "b.h5ad"),
                      np.ones((600, 4), dtype=np.float32), obs)
    m = mounts(path, "batch_size=50,label=doublet,filter=doublet:true")
    cats = m.json("dataset.json")["label"]["categories"]
    assert cats == ["False", "True"]
    index = np.concatenate(m.epoch_index(0, 0))
    assert flags[index].all() and len(index) == 200
    assert (m.load("label", 0, 0, 0) == cats.index("True")).all()


# uint64 labels up to 2^63 - 1 are served as they are (a value over it
# is a mount error, test_errors.py).
@pytest.mark.parametrize("dtype,base", [("i2", 0), ("u8", 2**63 - 7)])
def test_generic_hdf5_label_dataset(mounts, tmp_path, dtype, base):
    labels = np.arange(1000, dtype=np.uint64) % 7 + np.uint64(base)
    path = write_h5(str(tmp_path / "g.h5"), {
        "x": np.arange(2000, dtype=np.float64).reshape(1000, 2),
        "meta/labels": labels.astype(dtype)})
    m = mounts(path, "dataset=/x,batch_size=64,label=/meta/labels")
    index = m.load("index", 2, 0, 5)
    np.testing.assert_array_equal(m.load("label", 2, 0, 5),
                                  labels[index].astype(np.int64))


def class_histogram(m, epochs, world=2):
    labels = []
    for e in range(epochs):
        for r in range(world):
            for k in range(m.batches()):
                labels.append(m.load("label", e, r, k))
    return np.bincount(np.concatenate(labels), minlength=5)


def test_class_balanced_smoothing_0_is_uniform(mounts, atlas):
    m = mounts(atlas["path"], "world_size=2,batch_size=200,"
               "strategy=class_balanced,label=cell_type,smoothing=0,seed=3")
    hist = class_histogram(m, epochs=2)
    chi = stats.chisquare(hist)  # uniform expected
    print("class_balanced smoothing=0:", hist, "p =", chi.pvalue)
    assert chi.pvalue > 0.001
    # The natural frequencies are far from what was served.
    natural = np.array(SHARES) * hist.sum()
    assert stats.chisquare(hist, natural).pvalue < 1e-10


def test_class_balanced_smoothing_1_is_natural(mounts, atlas):
    m = mounts(atlas["path"], "world_size=2,batch_size=200,"
               "strategy=class_balanced,label=cell_type,smoothing=1,seed=3")
    hist = class_histogram(m, epochs=2)
    natural = np.bincount(codes(atlas["obs"]["cell_type"]), minlength=5)
    expected = natural / natural.sum() * hist.sum()
    chi = stats.chisquare(hist, expected)
    print("class_balanced smoothing=1:", hist, "p =", chi.pvalue)
    assert chi.pvalue > 0.001


def test_class_balanced_smoothing_half_is_count_to_the_half(mounts, atlas):
    """Between the ends: weight 1/count^(1 - smoothing), so a class's
    share goes as count^0.5 at smoothing 0.5, which neither the uniform
    nor the natural shares (nor their mean) pass."""
    m = mounts(atlas["path"], "world_size=2,batch_size=200,"
               "strategy=class_balanced,label=cell_type,smoothing=0.5,"
               "seed=3")
    hist = class_histogram(m, epochs=2)
    natural = np.bincount(codes(atlas["obs"]["cell_type"]), minlength=5)
    share = natural ** 0.5 / (natural ** 0.5).sum()
    chi = stats.chisquare(hist, share * hist.sum())
    print("class_balanced smoothing=0.5:", hist, "p =", chi.pvalue)
    assert chi.pvalue > 0.001
    mean = (natural / natural.sum() + 0.2) / 2
    assert stats.chisquare(hist, mean * hist.sum()).pvalue < 1e-6


def test_weighted_draws_do_not_depend_on_locality(mounts, atlas):
    """block_size and fetch_factor only group and order an epoch's draws
    for reading: the draws themselves are the same."""
    drawn = []
    for opts in ("block_size=1,fetch_factor=1", "block_size=64",
                 "block_size=7,fetch_factor=3"):
        m = mounts(atlas["path"], "world_size=2,batch_size=100,"
                   "strategy=weighted,weights=weight,seed=5," + opts)
        drawn.append(np.sort(np.concatenate(all_index(m, 1, 2))))
    assert len(drawn[0]) == N
    for d in drawn[1:]:
        np.testing.assert_array_equal(d, drawn[0])


def test_class_balanced_never_draws_missing_labels(mounts, atlas):
    m = mounts(atlas["path"], "batch_size=250,strategy=class_balanced,"
               "label=donor")
    labels = np.concatenate([m.load("label", 0, 0, k)
                             for k in range(m.batches())])
    assert labels.min() >= 0
    assert len(labels) == N // 250 * 250


def test_weighted_follows_weights(mounts, atlas):
    m = mounts(atlas["path"], "world_size=2,batch_size=200,"
               "strategy=weighted,weights=weight,seed=9")
    heavy = atlas["obs"]["heavy"].to_numpy()
    weight = atlas["obs"]["weight"].to_numpy()
    drawn = np.concatenate([np.concatenate(all_index(m, e, 2))
                            for e in range(3)])
    assert len(drawn) == 3 * N // 400 * 400
    assert weight[drawn].min() > 0  # zero-weight rows never drawn
    p = weight[heavy].sum() / weight.sum()
    k = heavy[drawn].sum()
    n = len(drawn)
    z = (k - n * p) / np.sqrt(n * p * (1 - p))
    print(f"weighted: heavy share {k / n:.4f}, expected {p:.4f}, z = {z:.2f}")
    assert abs(z) < 4
    # Rows repeat (with replacement) and every window is read sorted, but
    # batches still mix heavy and light rows.
    assert len(np.unique(drawn)) < len(drawn)


def test_weighted_draws_pass_chi_square(mounts, tmp_path):
    """Weights of eight sizes, 1 to 8: the draws of 25 epochs (5.5 or
    more expected per row), counted per weight class and per row,
    against counts proportional to the weights (chi-square, each at
    p > 0.001; the seed makes it deterministic). Rows of one class must
    not be favoured over others of the same weight: the per-row test
    sees that, a two-group test could not."""
    n = 4000
    w = (np.arange(n) % 8 + 1).astype(np.float64)
    path = write_h5(str(tmp_path / "graded.h5"), {
        "x": np.zeros((n, 2), dtype=np.float32), "w": w})
    m = mounts(path, "dataset=/x,world_size=2,batch_size=100,"
               "strategy=weighted,weights=/w,seed=4")
    drawn = np.concatenate([np.concatenate(all_index(m, e, 2))
                            for e in range(25)])
    assert len(drawn) == 25 * n
    per_row = np.bincount(drawn, minlength=n)
    expected_row = w / w.sum() * len(drawn)
    by_row = stats.chisquare(per_row, expected_row)
    per_class = np.bincount(np.arange(n) % 8, weights=per_row)
    expected_class = np.bincount(np.arange(n) % 8, weights=expected_row)
    by_class = stats.chisquare(per_class, expected_class)
    print("weighted: per class", per_class, "p =", by_class.pvalue,
          "; per row p =", by_row.pvalue)
    assert by_class.pvalue > 0.001
    assert by_row.pvalue > 0.001
    # The test can fail: the same draws against equal weights.
    assert stats.chisquare(per_class).pvalue < 1e-10


@pytest.mark.parametrize("options", [
    "world_size=2,batch_size=100",
    "world_size=2,batch_size=100,strategy=shuffle,label=cell_type,"
    "filter=split:train|val,filter=cell_type:NK|B cell,drop_last=0",
    "batch_size=50,strategy=weighted,weights=weight,total_size=3000",
    "batch_size=50,strategy=class_balanced,label=cell_type,smoothing=0.5",
])
def test_config_json_mounts_again(mounts, atlas, options):
    """config.json, given back as -o, mounts the same view: what another
    node needs to reproduce a mount from its config.json alone."""
    first = mounts(atlas["path"], options).json("config.json")
    again = mounts(atlas["path"], options_from_config(first))
    assert again.json("config.json") == first


@pytest.fixture(scope="module")
def layered(tmp_path_factory):
    """An .h5ad with a float64 layer and a raw copy of its float32 X."""
    import anndata
    d = tmp_path_factory.mktemp("layered")
    x = np.random.default_rng(8).random((600, 5), dtype=np.float32)
    ad = anndata.AnnData(
        X=x, obs=pd.DataFrame(index=[f"c{i}" for i in range(600)]),
        var=pd.DataFrame(index=[f"g{j}" for j in range(5)]))
    ad.layers["counts"] = (x * 10).astype(np.float64)
    ad.raw = ad
    path = str(d / "layered.h5ad")
    ad.write_h5ad(path)
    return path


@pytest.mark.parametrize("options,same_as", [
    ("batch_size=50,layer=counts", "batch_size=50,dataset=/layers/counts"),
    ("batch_size=50,raw", "batch_size=50,dataset=/raw/X"),
    ("batch_size=50,dtype=float32", "batch_size=50"),
    ("batch_size=50,layer=counts,dtype=float16", None),
])
def test_config_json_shows_the_matrix_and_dtype_resolved(
        mounts, layered, options, same_as):
    """config.json names the matrix by its path and the dtype served, so
    that it mounts again, and equal views spelt differently have one
    view_id."""
    first = mounts(layered, options).json("config.json")
    assert first["layer"] is None and not first["raw"]
    assert first["dataset"].startswith("/")
    assert first["dtype"] in ("float16", "float32", "float64")
    again = mounts(layered, options_from_config(first))
    assert again.json("config.json") == first
    if same_as:
        other = mounts(layered, same_as).json("config.json")
        assert other["view_id"] == first["view_id"]


def test_weighted_total_size_and_blocks(mounts, atlas):
    m = mounts(atlas["path"], "batch_size=100,strategy=weighted,"
               "weights=weight,total_size=1000,block_size=10")
    assert m.batches() == 10
    assert m.json("config.json")["total_size"] == 1000
    batch = m.load("index", 0, 0, 4)
    # block_size groups sorted draws: runs of 10 ascending ids, the runs
    # shuffled (the batch as a whole is not sorted).
    runs = batch.reshape(10, 10)
    assert all(np.all(np.diff(r) >= 0) for r in runs)
    assert np.any(np.diff(batch) < 0)


def test_filter_serves_only_matching_rows(mounts, atlas):
    obs = atlas["obs"]
    m = mounts(atlas["path"], "world_size=2,batch_size=50,drop_last=0,"
               "filter=split:train|val,filter=cell_type:T cell|NK")
    keep = obs["split"].isin(["train", "val"]).to_numpy() & \
        obs["cell_type"].isin(["T cell", "NK"]).to_numpy()
    seen = np.concatenate(all_index(m, 0, 2))
    assert keep[seen].all()
    assert set(seen) == set(np.flatnonzero(keep))  # every kept row
    assert m.json("dataset.json")["filtered_rows"] == keep.sum()
    # Row ids stay global: the batch rows are the source rows.
    index = m.load("index", 0, 1, 2)
    np.testing.assert_array_equal(m.load("batch", 0, 1, 2),
                                  atlas["x"][index])


@pytest.mark.parametrize("flt,col,values", [
    ("heavy:true", "heavy", [True]),
    ("age:20|21|22", "age", [20, 21, 22]),
])
def test_filter_bool_and_integer(mounts, atlas, flt, col, values):
    m = mounts(atlas["path"], f"batch_size=10,filter={flt}")
    seen = np.concatenate(m.epoch_index(0, 0))
    assert atlas["obs"][col].to_numpy()[seen].tolist() and \
        set(atlas["obs"][col].to_numpy()[seen]) <= set(values)


@pytest.mark.parametrize("partition", ["batch", "round_robin",
                                       "contiguous"])
@pytest.mark.parametrize("strategy", ["shuffle", "block_shuffle"])
def test_partitions_disjoint_equal(mounts, atlas, partition, strategy):
    m = mounts(atlas["path"], f"world_size=3,batch_size=64,"
               f"partition={partition},strategy={strategy}")
    per_rank = all_index(m, 0, 3)
    nb = N // (3 * 64)
    assert [len(os.listdir(m.path(f"epoch/0/rank/{r}/batch")))
            for r in range(3)] == [nb] * 3
    seen = np.concatenate(per_rank)
    assert len(seen) == len(np.unique(seen)) == nb * 3 * 64


def test_round_robin_matches_distributed_sampler_split(mounts, atlas):
    """round_robin gives rank R every W-th row of the epoch order, like
    torch's DistributedSampler: the ranks' i-th rows interleave into the
    batch partition's global batches."""
    o = "world_size=2,batch_size=50,strategy=shuffle,seed=4"
    rr = mounts(atlas["path"], o + ",partition=round_robin")
    gb = mounts(atlas["path"], o)
    for k in range(3):
        r0, r1 = rr.load("index", 0, 0, k), rr.load("index", 0, 1, k)
        glob = np.concatenate([gb.load("index", 0, 0, k),
                               gb.load("index", 0, 1, k)])
        np.testing.assert_array_equal(np.stack([r0, r1], 1).ravel(), glob)


@pytest.mark.parametrize("partition", ["batch", "round_robin",
                                       "contiguous"])
def test_drop_last_0_serves_every_row(mounts, atlas, partition):
    w, b = 4, 64
    m = mounts(atlas["path"], f"world_size={w},batch_size={b},drop_last=0,"
               f"partition={partition}")
    per_rank = -(-N // w)
    nb = -(-N // (w * b))
    last = per_rank - (nb - 1) * b
    for r in range(w):
        names = sorted(os.listdir(m.path(f"epoch/0/rank/{r}/batch")))
        assert len(names) == nb
        assert m.load("batch", 0, r, nb - 1).shape == (last, D)
        assert os.stat(m.file("index", 0, r, nb - 1)).st_size == \
            128 + 8 * last
    seen = np.concatenate(all_index(m, 0, w))
    assert len(seen) == w * per_rank
    assert set(seen) == set(range(N))
    assert len(seen) - N < w  # padding repeats fewer than W rows


@pytest.mark.parametrize("partition", ["batch", "round_robin",
                                       "contiguous"])
def test_drop_last_0_pads_with_the_start_of_the_epoch(mounts, atlas,
                                                      partition):
    """With 7 ranks the 6000 rows fill 6006 positions: the 6 padded ones
    wrap around to the start of the served order T_e, so the rows served
    twice are T_e's first 6 (sampling.md's tables say where T_e's first
    positions go: rank 0's first batch, each rank's first row, rank 0's
    first rows)."""
    w = 7
    m = mounts(atlas["path"], f"world_size={w},batch_size=64,drop_last=0,"
               f"strategy=shuffle,partition={partition}")
    first = [m.load("index", 0, r, 0) for r in range(w)]
    pad = w * -(-N // w) - N
    start = {"batch": first[0][:pad], "contiguous": first[0][:pad],
             "round_robin": np.array([f[0] for f in first[:pad]])}
    seen = np.concatenate(all_index(m, 0, w))
    values, counts = np.unique(seen, return_counts=True)
    assert len(values) == N and pad == 6
    np.testing.assert_array_equal(np.sort(values[counts == 2]),
                                  np.sort(start[partition]))


@pytest.mark.parametrize("strategy", ["streaming", "shuffle",
                                      "block_shuffle"])
def test_elastic_same_global_steps(mounts, atlas, strategy):
    glob = {}
    for w in (1, 2, 4):
        m = mounts(atlas["path"], f"world_size={w},batch_size={64 // w},"
                   f"strategy={strategy},seed=5,fetch_factor=4")
        glob[w] = [np.concatenate([m.load("index", e, r, k)
                                   for r in range(w)])
                   for e in (0, 1) for k in (0, 1, 17, m.batches() - 1)]
        m.unmount()
    for a, b in zip(glob[1], glob[2]):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(glob[1], glob[4]):
        np.testing.assert_array_equal(a, b)


@pytest.fixture(scope="module")
def split_atlas(atlas):
    """atlas.h5ad written again as three files by anndata."""
    import anndata
    d = atlas["dir"] / "parts"
    d.mkdir()
    ad = anndata.read_h5ad(atlas["path"])
    cuts = [0, 1500, 4100, N]
    paths = []
    for i in range(3):
        p = str(d / f"part{i}.h5ad")
        ad[cuts[i]:cuts[i + 1]].copy().write_h5ad(p)
        paths.append(p)
    return paths


def digest_tree(m, kinds=("batch", "index", "label"), world=2):
    out = []
    for e in (0, 3):
        for r in range(world):
            for kind in kinds:
                for k in range(m.batches()):
                    with open(m.file(kind, e, r, k), "rb") as f:
                        out.append(f.read())
    return out


@pytest.mark.parametrize("strategy", ["block_shuffle", "class_balanced"])
def test_multi_file_equals_single_file(mounts, atlas, split_atlas, strategy):
    o = f"world_size=2,batch_size=100,label=cell_type,strategy={strategy}," \
        f"filter=split:train|val"
    single = mounts(atlas["path"], o)
    files = mounts(split_atlas, o)
    folder = mounts(os.path.dirname(split_atlas[0]), o)
    assert digest_tree(single) == digest_tree(files) == digest_tree(folder)
    info = files.json("dataset.json")
    assert [s["rows"] for s in info["sources"]] == [1500, 2600, 1900]
    assert [s["first_row"] for s in info["sources"]] == [0, 1500, 4100]
    assert info["label"]["categories"] == CLASSES


def test_partition_file_gives_whole_files(mounts, split_atlas, tmp_path):
    m = mounts(split_atlas, "world_size=2,batch_size=100,partition=file")
    free = tmp_path / "free"  # m.mnt is a mount point: refused as such
    free.mkdir()
    # Rank 0 has files 0 and 2, rank 1 file 1 (rows 1500..4099).
    r0 = np.concatenate(m.epoch_index(0, 0))
    r1 = np.concatenate(m.epoch_index(0, 1))
    assert ((r0 < 1500) | (r0 >= 4100)).all()
    assert ((r1 >= 1500) & (r1 < 4100)).all()
    assert len(r0) == len(r1) == 2600 // 100 * 100
    assert len(np.unique(r0)) == len(r0)
    r = run_rankfs(["-o", "world_size=4,partition=file", *split_atlas,
                    free])
    assert r.returncode == 1 and "partition=file" in r.stderr and \
        "3 source files" in r.stderr
    # A batch more than rank 1's one file holds: the rank is named.
    r = run_rankfs(["-o", "world_size=2,batch_size=3000,partition=file",
                    *split_atlas, free])
    assert r.returncode == 1 and "partition=file rank 1's files hold " \
        "2600 rows, fewer than batch_size 3000" in r.stderr, r.stderr


def test_partition_file_drop_last_0_wraps_each_rank(mounts, split_atlas):
    """drop_last=0 with partition=file: every rank serves as many rows as
    the longest (rank 0's 3400), a shorter rank wrapping around its own
    sequence: rank 1's positions past its 2600 rows repeat its first."""
    m = mounts(split_atlas, "world_size=2,batch_size=100,partition=file,"
               "drop_last=0,strategy=shuffle")
    r0 = np.concatenate(m.epoch_index(0, 0))
    r1 = np.concatenate(m.epoch_index(0, 1))
    assert len(r0) == len(r1) == 3400
    assert sorted(r0) == list(range(1500)) + list(range(4100, 6000))
    assert set(r1) == set(range(1500, 4100))
    np.testing.assert_array_equal(r1[2600:], r1[:800])


def test_mismatched_files_refused(atlas, tmp_path):
    rng = np.random.default_rng(0)
    other_genes = write_h5ad(str(tmp_path / "other.h5ad"),
                             rng.random((100, D), dtype=np.float32))
    import anndata
    ad = anndata.AnnData(X=rng.random((100, D + 1), dtype=np.float32))
    wider = str(tmp_path / "wider.h5ad")
    ad.write_h5ad(wider)
    # write_h5ad names genes gene0..: rename them to differ.
    with h5py.File(other_genes, "r+") as f:
        names = f["var/_index"][()]
        names[0] = b"not-a-gene"
        del f["var/_index"]
        f["var/_index"] = names
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = run_rankfs([atlas["path"], other_genes, mnt])
    assert r.returncode == 1 and "other.h5ad" in r.stderr and \
        "var names differ" in r.stderr
    r = run_rankfs([atlas["path"], wider, mnt])
    assert r.returncode == 1 and "wider.h5ad" in r.stderr and \
        "9 columns" in r.stderr


def test_step_view(mounts, atlas):
    m = mounts(atlas["path"], "world_size=2,batch_size=100,label=cell_type,"
               "epochs=3")
    nb = m.batches()
    names = os.listdir(m.path("step/rank/1"))
    assert "index" in names and "label" in names
    files = sorted(n for n in names if n.endswith(".npy"))
    assert len(files) == 3 * nb and files[0] == "000000000.npy"
    for k in (0, nb - 1, nb, 2 * nb + 5, 10**8 + 7):
        e, b = divmod(k, nb)
        step = m.path(f"step/rank/1/{k:09d}.npy")
        with open(step, "rb") as f, open(m.file("batch", e, 1, b),
                                         "rb") as g:
            assert f.read() == g.read()
        np.testing.assert_array_equal(
            np.load(m.path(f"step/rank/1/index/{k:09d}.npy")),
            m.load("index", e, 1, b))
        np.testing.assert_array_equal(
            np.load(m.path(f"step/rank/1/label/{k:09d}.npy")),
            m.load("label", e, 1, b))


ARCHIVE = "/usr/lib/python3/dist-packages/anndata/tests/data/archives"


@pytest.mark.parametrize("version", ["v0.7.0", "v0.7.8"])
def test_anndata_07_archive_names_missing_lzf(tmp_path, version):
    """anndata's own 0.7 archives compress with lzf, an h5py-only filter:
    the mount fails naming it."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    path = f"{ARCHIVE}/{version}/adata.h5ad"
    r = run_rankfs(["-o", "dataset=/layers/array,batch_size=10", path, mnt])
    assert r.returncode == 1 and "'lzf'" in r.stderr and path in r.stderr


def test_anndata_07_categorical_references(mounts, tmp_path):
    """The 0.7 encoding, as the archives lay it out: codes whose
    "categories" attribute references obs/__categories/NAME."""
    path = f"{ARCHIVE}/v0.7.8/adata.h5ad"
    out = str(tmp_path / "v07.h5ad")
    with h5py.File(path, "r") as f, h5py.File(out, "w") as g:
        g["X"] = f["layers/array"][()]  # dense, uncompressed
        cats = g.create_dataset(
            "obs/__categories/obs_cat",
            data=f[f["obs/obs_cat"].attrs["categories"]][()],
            dtype=h5py.string_dtype())
        codes_ = g.create_dataset("obs/obs_cat", data=f["obs/obs_cat"][()])
        codes_.attrs["categories"] = cats.ref
        obs_codes = f["obs/obs_cat"][()].astype(np.int64)
        names = [c.decode() for c in cats[()]]
    m = mounts(out, "batch_size=10,label=obs_cat")
    assert m.json("dataset.json")["label"]["categories"] == names
    index = m.load("index", 0, 0, 1)
    np.testing.assert_array_equal(m.load("label", 0, 0, 1), obs_codes[index])
    np.testing.assert_array_equal(m.load("batch", 0, 0, 1),
                                  source_rows(out, "/X")[index])


def test_integer_categories_that_name_categories(mounts, tmp_path):
    """Integer categories whose own "categories" attribute references
    themselves (or any categories) are read as their numbers: the mount
    once followed the reference again and again, until the stack ran
    out."""
    out = str(tmp_path / "selfref.h5ad")
    with h5py.File(out, "w") as g:
        g["X"] = np.arange(40 * 3, dtype=np.float32).reshape(40, 3)
        cats = g.create_dataset("obs/__categories/c",
                                data=np.array([10, 20, 30], np.int64))
        cats.attrs["categories"] = cats.ref
        codes = g.create_dataset("obs/c", data=np.arange(40, dtype=np.int8) % 3)
        codes.attrs["categories"] = cats.ref
    m = mounts(out, "batch_size=10,label=c")
    assert m.json("dataset.json")["label"]["categories"] == ["10", "20", "30"]
    index = m.load("index", 0, 0, 1)
    np.testing.assert_array_equal(m.load("label", 0, 0, 1), index % 3)


def add_nullable(group, name, encoding, values, mask):
    """An AnnData (>= 0.10) nullable obs column, as anndata lays it out:
    a group of values and a bool mask (true: no value), in an h5py or a
    zarr group."""
    g = group.create_group(name)
    g.attrs["encoding-type"] = encoding
    g.attrs["encoding-version"] = "0.1.0"
    if values.dtype.kind == "U":
        if isinstance(group, h5py.Group):
            g.create_dataset("values", data=values.astype(object),
                             dtype=h5py.string_dtype())
        else:
            import numcodecs
            g.create_dataset("values", data=values.astype(object),
                             dtype=object, object_codec=numcodecs.VLenUTF8())
    else:
        g.create_dataset("values", data=values)
    g.create_dataset("mask", data=mask)


@pytest.mark.parametrize("store", ["h5ad", "zarr"])
def test_nullable_obs_columns(mounts, tmp_path, store):
    """pandas' boolean, string and Int64 columns (anndata's nullable
    encodings): a row without a value (pd.NA) is a missing label (-1, as
    a categorical's NaN), kept by no filter; categories are those of the
    rows with values; an integer column has no missing value to give,
    so one with pd.NA is a mount error saying so."""
    n = 600
    i = np.arange(n)
    mask = i % 5 == 0
    x = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
    obs = pd.DataFrame(index=[f"c{k}" for k in range(n)])
    flags = i % 3 == 0
    words = np.array(["b", "a", "c"])[i % 3]
    words[mask] = ""  # the placeholder under the mask
    if store == "h5ad":
        path = write_h5ad(str(tmp_path / "n.h5ad"), x, obs)
        f = h5py.File(path, "r+")
        root = f["obs"]
    else:
        import anndata
        import zarr
        path = str(tmp_path / "n.zarr")
        anndata.AnnData(x, obs=obs).write_zarr(path)
        f = None
        root = zarr.open_group(path, mode="r+")["obs"]
    add_nullable(root, "flag", "nullable-boolean", flags, mask)
    add_nullable(root, "word", "nullable-string-array", words, mask)
    add_nullable(root, "count", "nullable-integer", i % 4, mask)
    add_nullable(root, "full", "nullable-integer", i % 4, np.zeros(n, bool))
    if f:
        f.close()
    m = mounts(path, "batch_size=50,strategy=streaming,label=word,"
               "filter=flag:true")
    assert m.json("dataset.json")["label"]["categories"] == ["a", "b", "c"]
    index = np.concatenate(m.epoch_index(0, 0))
    kept = i[flags & ~mask]  # 160 rows: 150 in whole batches
    assert len(index) == 150 and (index == kept[:150]).all()
    m = mounts(path, "batch_size=50,strategy=streaming,label=flag")
    want = np.where(mask, -1, flags.astype(np.int64))
    for k in range(n // 50):
        np.testing.assert_array_equal(m.load("label", 0, 0, k),
                                      want[k * 50:(k + 1) * 50])
    m = mounts(path, "batch_size=50,strategy=streaming,label=word")
    want = np.where(mask, -1, np.array([1, 0, 2])[i % 3])  # b, a, c
    np.testing.assert_array_equal(m.load("label", 0, 0, 3), want[150:200])
    m = mounts(path, "batch_size=50,strategy=streaming,label=full,"
               "filter=full:2|3")
    index = np.concatenate(m.epoch_index(0, 0))
    assert (index == i[i % 4 >= 2][:len(index)]).all() and len(index) == 300
    np.testing.assert_array_equal(m.load("label", 0, 0, 0), index[:50] % 4)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = run_rankfs(["-o", "batch_size=50,label=count", path, mnt])
    assert r.returncode == 1, r.stderr
    assert re.search(re.escape(path) + ": obs column 'count' has 120 "
                     r"missing values \(pd.NA\), which an integer column "
                     r"cannot hold: fill them \(.fillna\(\)\) or store it "
                     "as categorical$", r.stderr.strip()), r.stderr


def test_missing_filter_is_named(tmp_path):
    path = write_h5(str(tmp_path / "lzf.h5"), {
        "x": (np.ones((100, 4), dtype=np.float32),
              dict(compression="lzf", chunks=(10, 4)))})
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = run_rankfs(["-o", "dataset=/x,batch_size=10", path, mnt])
    assert r.returncode == 1 and "lzf" in r.stderr and "lzf.h5" in r.stderr


BAD = [
    ("strategy=weighted", "weights=COLUMN"),
    ("strategy=class_balanced", "label=COLUMN"),
    ("strategy=weighted,weights=nope", "obs column 'nope' not found"),
    ("strategy=weighted,weights=cell_type", "cannot be weights"),
    ("label=weight", "float column cannot be a label"),
    ("weights=weight", "needs strategy=weighted"),
    ("total_size=10", "total_size=10: strategy=block_shuffle serves each "
     "of its 6000 rows once"),
    ("filter=split:train,total_size=6000", "total_size=6000"),
    ("filter=split:training", "no value 'training'"),
    ("filter=split", "expected COLUMN:VALUE1|VALUE2"),
    ("filter=age:old", "'old' is not a number"),
    ("filter=age:20|81", "no row has value '81' (values: "),
    ("filter=cell_type:NK,filter=split:nothing", "filter=split:nothing"),
    ("smoothing=2", "smoothing=2"),
    ("partition=file,world_size=2", "1 source files for world_size 2"),
    ("strategy=weighted,weights=weight,partition=file",
     "partition=file works with"),
    # The draws, not the file's rows, are too few: the option is named.
    ("strategy=weighted,weights=weight,total_size=100,batch_size=500",
     "option total_size=100: 100 draws are fewer than one global batch "
     "(world_size 1 x batch_size 500 = 500)"),
]


def test_filter_on_a_float32_column_matches_the_value_shown(mounts,
                                                             tmp_path):
    """numpy shows float32 0.1 as 0.1: filter=/f:0.1 keeps its rows
    (rounded as the column stores it), not none."""
    f = np.float32([0.1, 0.25, 0.5, 0.7] * 10)
    path = write_h5(str(tmp_path / "f32.h5"), {
        "x": np.arange(80, dtype=np.float32).reshape(40, 2), "f": f})
    m = mounts(path, "dataset=/x,batch_size=5,filter=/f:0.1|0.7")
    kept = np.sort(np.concatenate(m.epoch_index(0, 0)))
    np.testing.assert_array_equal(
        kept, np.flatnonzero((f == np.float32(0.1)) |
                             (f == np.float32(0.7))))


@pytest.mark.parametrize("opts,words", BAD, ids=[b[0] for b in BAD])
def test_sampling_option_errors(atlas, tmp_path, opts, words):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = run_rankfs(["-o", opts, atlas["path"], mnt])
    assert r.returncode == 1 and not is_mounted(str(mnt)), r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], r.stderr


@pytest.mark.parametrize("weights,words", [
    (-1.0, "weight -1"), (np.nan, "weight nan"), (0.0, "every weight is 0")])
def test_bad_weights_refused(tmp_path, weights, words):
    w = np.ones(200)
    w[17] = weights
    if weights == 0.0:
        w[:] = 0.0
    path = write_h5(str(tmp_path / "w.h5"), {
        "x": np.zeros((200, 2), dtype=np.float32), "w": w})
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = run_rankfs(["-o", "dataset=/x,batch_size=10,strategy=weighted,"
                    "weights=/w", path, mnt])
    assert r.returncode == 1 and words in r.stderr and "weights=/w" in \
        r.stderr, r.stderr
    if weights != 0.0:
        assert "row 17" in r.stderr


def test_the_worked_example_of_sampling_md():
    """docs/sampling.md's table, read from the doc, is what rankfs-plan
    prints: the doc stays true, and a change to the plan (every view's
    bytes between versions) cannot pass unnoticed."""
    from conftest import REPO, RANKFS_PLAN
    text = open(os.path.join(REPO, "docs", "sampling.md")).read()
    table = text.split("## A worked example")[1].split("Reading the")[0]
    opts = "world_size=2,batch_size=2,block_size=4,fetch_factor=2"

    def plan(options, epoch, rank, k):
        r = subprocess.run([RANKFS_PLAN, "--rows", "18", "-o", options,
                            str(epoch), str(rank), str(k)],
                           capture_output=True, text=True, check=True)
        return [int(v) for v in r.stdout.split()]

    checked = 0
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != 4 or not cells[2].startswith("["):
            continue
        strategy, epochs = cells[0], cells[1]
        for epoch in (int(e) for e in epochs.split(" and ")):
            for rank in (0, 1):
                want = [[int(v) for v in b.split()] for b in
                        re.findall(r"\[([^]]*)\]", cells[2 + rank])]
                assert len(want) == 4
                got = [plan(f"{opts},strategy={strategy}", epoch, rank, k)
                       for k in range(4)]
                assert got == want, (strategy, epoch, rank)
                checked += 1
    assert checked == 10
    # The paragraph after it: round_robin deals each global batch's
    # positions alternately; drop_last=0 serves all 18 rows, in four
    # batches of 2 and one of 1 per rank.
    rr = opts + ",strategy=block_shuffle,partition=round_robin"
    assert plan(rr, 0, 0, 0) == [6, 8] and plan(rr, 0, 0, 1) == [10, 5]
    assert plan(rr, 0, 1, 0) == [4, 7] and plan(rr, 0, 1, 1) == [9, 11]
    rows = [plan(rr + ",drop_last=0", 0, r, k) for r in (0, 1)
            for k in range(5)]
    assert [len(b) for b in rows] == [2, 2, 2, 2, 1] * 2
    assert sorted(v for b in rows for v in b) == list(range(18))
