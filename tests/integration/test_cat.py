# SPDX-License-Identifier: MIT
"""rankfs-cat, the FUSE-free second opinion: for every strategy, partition
and file kind, its stdout must be byte for byte what a real mount with the
same options and sources serves at the same path; and a bad option, a
missing source or a path outside the namespace must fail with a message
naming it, as the mount would refuse them."""
import json
import subprocess

import numpy as np
import pandas as pd
import pytest

from conftest import run_rankfs, write_h5, write_h5ad

N, D = 600, 6
CLASSES = ["B", "T", "NK", "mono"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """An AnnData atlas with obs columns, the same rows split in two files
    (partition=file), a CSR atlas and a generic uint8 HDF5 file."""
    d = tmp_path_factory.mktemp("cat")
    rng = np.random.default_rng(11)
    x = rng.random((N, D), dtype=np.float32) * 300
    obs = pd.DataFrame({
        "cell_type": pd.Categorical(rng.choice(CLASSES, N, p=[.5, .3, .15,
                                                              .05]),
                                    categories=CLASSES),
        "split": rng.choice(["train", "val", "test"], N, p=[.6, .2, .2]),
        "weight": rng.random(N) + 0.1,
    }, index=[f"cell{i}" for i in range(N)])
    atlas = write_h5ad(str(d / "atlas.h5ad"), x, obs)
    split = [write_h5ad(str(d / f"part{i}.h5ad"), x[i * 300:(i + 1) * 300],
                        obs.iloc[i * 300:(i + 1) * 300])
             for i in range(2)]
    import scipy.sparse as sp
    csr = write_h5ad(str(d / "csr.h5ad"),
                     sp.random(N, 40, density=0.1, format="csr",
                               dtype=np.float32, random_state=3))
    images = write_h5(str(d / "images.h5"), {
        "x": rng.integers(0, 256, (N, 12), dtype=np.uint8)})
    return {"atlas": atlas, "split": split, "csr": csr, "images": images}


def batch_name(m, k, ext="npy"):
    return f"{k:0{max(6, len(str(m.batches() - 1)))}d}.{ext}"


def sample(m, world, kinds=("batch", "index"), ext="npy"):
    """A few files of a few epochs and ranks, the last batch among them,
    and an epoch past those listed."""
    nb = m.batches()
    picks = [(0, 0, 0), (1, world - 1, nb - 1), (4, 0, nb // 2),
             (1000, world - 1, 1)]
    return [f"epoch/{e}/rank/{r}/{kind}/"
            f"{batch_name(m, k, ext if kind == 'batch' else 'npy')}"
            for e, r, k in picks for kind in kinds]


def assert_same(m, rankfs_cat, sources, options, paths):
    """rankfs-cat's stdout equals the mount's bytes at every path."""
    assert paths
    for p in paths:
        with open(f"{m.mnt}/{p}", "rb") as f:
            want = f.read()
        r = rankfs_cat(sources, options, p)
        assert r.returncode == 0, f"{p}: {r.stderr}"
        assert r.stderr == "", f"{p}: {r.stderr}"
        assert len(r.stdout) == len(want), p
        assert r.stdout == want, f"{p} differs"


@pytest.mark.parametrize("strategy", [
    "streaming", "shuffle", "block_shuffle",
    "weighted,weights=weight", "class_balanced,label=cell_type,smoothing=0.5"])
def test_every_strategy(mounts, rankfs_cat, data, strategy):
    options = f"world_size=2,batch_size=32,seed=5,strategy={strategy}"
    m = mounts(data["atlas"], options)
    kinds = ("batch", "index") + (("label",) if "label=" in options else ())
    assert_same(m, rankfs_cat, data["atlas"], options, sample(m, 2, kinds))


@pytest.mark.parametrize("partition", ["batch", "round_robin",
                                       "contiguous", "file"])
def test_every_partition(mounts, rankfs_cat, data, partition):
    sources = data["split"]
    options = f"world_size=2,batch_size=25,seed=1,partition={partition}"
    m = mounts(sources, options)
    assert_same(m, rankfs_cat, sources, options, sample(m, 2))


@pytest.mark.parametrize("options", [
    "filter=split:train|val,label=cell_type",
    "drop_last=0,batch_size=70,strategy=shuffle",
    "drop_last=0,batch_size=30,filter=split:test,partition=round_robin",
])
def test_filter_and_drop_last(mounts, rankfs_cat, data, options):
    options = "world_size=3,seed=9," + options
    if "batch_size" not in options:
        options += ",batch_size=40"
    m = mounts(data["atlas"], options)
    kinds = ("batch", "index") + (("label",) if "label=" in options else ())
    assert_same(m, rankfs_cat, data["atlas"], options, sample(m, 3, kinds))
    if "drop_last=0" in options:
        size = int(options.split("batch_size=")[1].split(",")[0])
        last = np.load(m.file("batch", 1, 2, m.batches() - 1))
        assert 0 < last.shape[0] < size  # partial, and compared above


@pytest.mark.parametrize("source,options", [
    ("images", "dataset=/x,dtype=float32"),
    ("images", "dataset=/x,dtype=int16,strategy=streaming"),
    ("atlas", "dtype=float16"),
    ("atlas", "dtype=uint8"),  # saturating casts
])
def test_dtype_cast(mounts, rankfs_cat, data, source, options):
    options = "world_size=2,batch_size=50," + options
    m = mounts(data[source], options)
    paths = sample(m, 2, ("batch",))
    assert_same(m, rankfs_cat, data[source], options, paths)
    want = options.split("dtype=")[1].split(",")[0]
    assert np.load(m.path(paths[0])).dtype == np.dtype(want)


def test_step_files_and_labels(mounts, rankfs_cat, data):
    options = "world_size=2,batch_size=30,label=cell_type,epochs=3"
    m = mounts(data["atlas"], options)
    nb = m.batches()
    paths = [f"step/rank/{r}/{kind}{k:09d}.npy"
             for r, k in ((0, 0), (1, nb + 2), (1, 5 * nb - 1))
             for kind in ("", "index/", "label/")]
    assert_same(m, rankfs_cat, data["atlas"], options, paths)
    # A step file is its epoch file.
    e, b = divmod(nb + 2, nb)
    r = rankfs_cat(data["atlas"], options,
                   f"epoch/{e}/rank/1/label/{batch_name(m, b)}")
    assert r.stdout == rankfs_cat(data["atlas"], options,
                                  f"step/rank/1/label/{nb + 2:09d}.npy").stdout


def test_csr_npy_and_npz(mounts, rankfs_cat, data):
    import io
    import scipy.sparse as sp
    options = "world_size=2,batch_size=40,seed=3"
    m = mounts(data["csr"], options)
    paths = sample(m, 2, ("batch",), "npz") + sample(m, 2, ("batch",)) + \
        [f"step/rank/1/{7:09d}.npz", f"step/rank/0/{3:09d}.npy",
         f"epoch/2/rank/0/index/{batch_name(m, 1)}"]
    assert_same(m, rankfs_cat, data["csr"], options, paths)
    npz = rankfs_cat(data["csr"], options, paths[0]).stdout
    dense = rankfs_cat(data["csr"], options,
                       paths[0][:-4] + ".npy").stdout
    np.testing.assert_array_equal(
        sp.load_npz(io.BytesIO(npz)).toarray(), np.load(io.BytesIO(dense)))


def test_json_files_with_a_mount_option_string(mounts, rankfs_cat, data):
    """The option string of a mount, libfuse's and mount(8)'s words
    included, works unchanged; config.json (view_id, prefetch and all) and
    dataset.json read the same; stats.json is a fresh mount's."""
    options = ("world_size=2,batch_size=32,seed=4,label=cell_type,"
               "noauto,nofail,x-systemd.automount,max_threads=8,"
               "fsname=atlas,default_permissions")
    m = mounts(data["atlas"], options)
    assert_same(m, rankfs_cat, data["atlas"], options,
                ["config.json", "/dataset.json", "./epoch/../config.json",
                 "var_names.txt"])
    config = json.loads(rankfs_cat(data["atlas"], options,
                                   "config.json").stdout)
    assert config["prefetch"] == m.json("config.json")["prefetch"] > 0
    r = rankfs_cat(data["atlas"], options, "stats.json")
    assert r.returncode == 0, r.stderr
    stats = json.loads(r.stdout)
    assert stats["view_id"] == config["view_id"]
    assert stats["batches_served"] == 0


def test_an_option_given_twice_takes_its_last_value(mounts, rankfs_cat,
                                                    data):
    """As mount(8): a later value wins, in one -o list or a later -o (a
    command line's -o after /etc/fstab's options)."""
    m = mounts(data["atlas"], "batch_size=32,seed=4,batch_size=64",
               extra=["-o", "seed=5"])
    config = m.json("config.json")
    assert (config["batch_size"], config["seed"]) == (64, 5)
    assert_same(m, rankfs_cat, data["atlas"], "batch_size=64,seed=5",
                ["config.json", "epoch/0/rank/0/batch/000001.npy"])


@pytest.mark.parametrize("options", ["var_join=inner", "var_join=outer"])
def test_var_join(mounts, rankfs_cat, tmp_path, options):
    """Files whose genes differ: batches, .npz files and the root files
    of a join read the same."""
    import anndata
    import scipy.sparse as sp
    paths = []
    for k, var in enumerate((["a", "b", "c", "d"], ["d", "x", "b"])):
        x = sp.random(40, len(var), density=0.4, format="csr",
                      dtype=np.float32, random_state=k)
        paths.append(str(tmp_path / f"g{k}.h5ad"))
        anndata.AnnData(X=x, var=pd.DataFrame(index=var)).write_h5ad(
            paths[-1])
    options += ",world_size=2,batch_size=8,strategy=shuffle"
    m = mounts(paths, options)
    assert_same(m, rankfs_cat, paths, options,
                ["var_names.txt", "dataset.json", "config.json"] +
                sample(m, 2, ("batch",), "npz") + sample(m, 2))


def test_bad_options(rankfs_cat, data, tmp_path):
    """Refused with the line the mount prints, and only where the mount
    refuses them."""
    for options, named in (("bogus=1", "unknown option 'bogus'"),
                           ("world_size=2,,seed=1",
                            "-o world_size=2,,seed=1: an empty option"),
                           ("world_size=2, seed=1",
                            "option ' seed=1': a space after a comma "
                            "(options are comma-separated without "
                            "spaces)"),
                           ("batch_size=0", "batch_size"),
                           ("strategy=random", "strategy"),
                           ("filter=a\\,b", "option filter=a,b"),
                           ("max_threads=0", "option max_threads=0"),
                           ("allow_other=5", "takes no value"),
                           ("strategy=weighted", "weights"),
                           ("label=nope", "nope")):
        r = rankfs_cat(data["atlas"], options, "config.json")
        assert r.returncode == 1, (options, r.stderr)
        assert r.stdout == b""
        assert named in r.stderr and r.stderr.count("\n") == 1, r.stderr
        assert r.stderr.startswith("rankfs-cat: "), r.stderr
        mount = run_rankfs(["-o", options, data["atlas"], tmp_path])
        if mount.returncode == 0:
            subprocess.run(["fusermount3", "-u", str(tmp_path)])
        assert mount.returncode == 1, options
        assert mount.stderr == r.stderr.replace("rankfs-cat", "rankfs")


def test_space_after_a_comma_not_quoted(rankfs_cat, data, tmp_path):
    """-o world_size=2, batch_size=64 as a shell splits it: the list ends
    with a comma and batch_size=64 is an argument of its own. rankfs,
    rankfs-cat and rankfs-plan say so in the same words (rankfs-plan,
    which skips empty options, too)."""
    from conftest import RANKFS_CAT, RANKFS_PLAN
    split = ["-o", "world_size=2,", "batch_size=64"]
    want = ("-o world_size=2, ends with a comma, and 'batch_size=64' after "
            "it is an argument of its own: a space after a comma? (options "
            "are comma-separated without spaces: -o "
            "world_size=2,batch_size=64)\n")
    mount = run_rankfs(split + [data["atlas"], tmp_path])
    if mount.returncode == 0:
        subprocess.run(["fusermount3", "-u", str(tmp_path)])
    assert (mount.returncode, mount.stderr) == (1, "rankfs: " + want)
    cat = subprocess.run([RANKFS_CAT] + split + [data["atlas"],
                                                 "config.json"],
                         capture_output=True, text=True)
    assert (cat.returncode, cat.stdout) == (1, "")
    assert cat.stderr == "rankfs-cat: " + want
    plan = subprocess.run([RANKFS_PLAN, "--rows", "600"] + split +
                          ["0", "0", "0"], capture_output=True, text=True)
    assert (plan.returncode, plan.stderr) == (2, "rankfs-plan: " + want)


def test_missing_source_and_usage(rankfs_cat, data, tmp_path):
    missing = tmp_path / "nope.h5ad"
    r = rankfs_cat(missing, "", "config.json")
    assert r.returncode == 1 and str(missing) in r.stderr, r.stderr
    r = rankfs_cat([data["atlas"], missing], "", "config.json")
    assert r.returncode == 1 and str(missing) in r.stderr, r.stderr
    r = rankfs_cat([], "", "config.json")  # no SOURCE
    assert r.returncode == 2 and "usage:" in r.stderr, r.stderr


OUTSIDE = [
    ("epoch/0/rank/2/batch/000000.npy", "No such file"),  # rank >= world
    ("epoch/0/rank/0/batch/000000.npz", "No such file"),  # dense source
    ("epoch/0/rank/0/batch/0.npy", "No such file"),  # not canonical
    ("epoch/0/rank/0/label/000000.npy", "No such file"),  # no label=
    ("epoch/0/rank/0/batch/999999.npy", "No such file"),  # past the last
    ("epoch/2147483648", "No such file"),
    ("var_names.json", "No such file"),
    ("epoch/../..", "No such file"),  # above the root
    ("config.json/", "Not a directory"),
    ("epoch/0", "Is a directory"),
    ("", "Is a directory"),
]


def test_paths_outside_the_namespace(mounts, rankfs_cat, data):
    options = "world_size=2,batch_size=32"
    m = mounts(data["atlas"], options)
    for path, error in OUTSIDE:
        r = rankfs_cat(data["atlas"], options, path)
        assert r.returncode == 2, (path, r.stderr)
        assert r.stdout == b""
        assert error in r.stderr, (path, r.stderr)
        assert r.stderr.startswith("rankfs-cat: "), r.stderr
        if path.startswith("epoch/.."):
            continue  # the mount's parent, not the mount
        # The mount agrees: nothing to read there.
        with pytest.raises(OSError):
            with open(f"{m.mnt}/{path}", "rb") as f:
                f.read()
