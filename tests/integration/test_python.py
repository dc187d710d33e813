# SPDX-License-Identifier: MIT
"""The rankfs Python package against real mounts: Mount's properties and
paths, the loaders' bytes, labels and resume equal to the files, rank and
world size detection (env, argument, torch.distributed with gloo ranks),
the world-size and view_id mismatch errors, `python3 -m rankfs`, and the
package as cmake --install lays it out.

The package imported is conftest's PYTHON_PACKAGES: the installed copy
when scripts/test names one in RANKFS_PYTHONPATH."""
import datetime
import json
import os
import re
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from conftest import (PYTHON_PACKAGES, REPO, write_cells_h5ad, write_h5,
                      write_h5ad)

import rankfs  # noqa: E402 (conftest puts the package on sys.path)
import rankfs.torch  # noqa: E402

N, D, W, B = 1200, 8, 2, 50
CATEGORIES = ["B cell", "T cell", "monocyte", "NK"]
OPTIONS = f"label=cell_type,world_size={W},batch_size={B},epochs=3"


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    rng = np.random.default_rng(7)
    x = rng.random((N, D), dtype=np.float32)
    codes = rng.integers(0, len(CATEGORIES), N)
    path = write_cells_h5ad(str(tmp_path_factory.mktemp("py") /
                                "cells.h5ad"), x, codes, CATEGORIES)
    return path, x, codes


@pytest.fixture(autouse=True)
def no_launcher_env(monkeypatch):
    """Tests set the variables that say a rank themselves: none from a
    torchrun or srun the suite runs under."""
    for name in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def mounted(mounts, source):
    m = mounts(source[0], OPTIONS + ",seed=3")
    return rankfs.Mount(m.mnt), m


def test_the_package_imported_is_the_one_under_test():
    assert rankfs.__file__.startswith(os.path.abspath(PYTHON_PACKAGES))


def test_mount_properties_and_paths(mounted, source):
    m, fixture = mounted
    config = fixture.json("config.json")
    assert m.view_id == config["view_id"] and len(m.view_id) == 16
    assert (m.world_size, m.batch_size, m.epochs) == (W, B, 3)
    assert (m.rows, m.columns, m.dtype) == (N, D, "float32")
    assert m.batches_per_rank == fixture.batches() == N // (W * B)
    assert m.steps == 3 * m.batches_per_rank
    assert m.has_labels and m.label_categories == CATEGORIES
    assert m.var_names == [f"gene{j}" for j in range(D)]
    assert m.batch_path(2, 1, 5) == fixture.file("batch", 2, 1, 5)
    assert m.index_path(2, 1, 5) == fixture.file("index", 2, 1, 5)
    assert m.label_path(2, 1, 5) == fixture.file("label", 2, 1, 5)
    assert m.step_path(1, 13) == fixture.path("step/rank/1/000000013.npy")
    assert m.step_path(1, 13, "index") == \
        fixture.path("step/rank/1/index/000000013.npy")
    for bad in ((0, W, 0), (0, 0, m.batches_per_rank), (-1, 0, 0)):
        with pytest.raises(IndexError):
            m.batch_path(*bad)
    # stats.json is read again at each access.
    before = m.stats["ranks"][1]["batches_served"]
    np.load(m.batch_path(0, 1, 0))
    assert m.stats["ranks"][1]["batches_served"] == before + 1
    with pytest.raises(ValueError, match="not a rankfs mount"):
        rankfs.Mount(os.path.dirname(source[0]))


def test_mount_refuses_a_config_without_a_view_id(tmp_path):
    for view_id in ("x" * 16, "88e96948", 7, None):
        (tmp_path / "config.json").write_text(json.dumps(
            {"view_id": view_id, "world_size": 2}))
        (tmp_path / "dataset.json").write_text("{}")
        with pytest.raises(ValueError, match=r"config\.json has no view_id "
                           r"of 16 hex digits: " + re.escape(repr(view_id))):
            rankfs.Mount(str(tmp_path))


def test_mount_of_what_is_not_a_mount_is_a_value_error(source, tmp_path):
    """A source given instead of the mountpoint, a missing directory, and
    a directory whose config.json is not rankfs's: each a ValueError
    saying so (they were NotADirectoryError, AttributeError and a bare
    JSONDecodeError), and `python3 -m rankfs` exits 1 with that line."""
    def refused(path, why):
        with pytest.raises(ValueError, match=re.escape(
                f"{path} is not a rankfs mount ({why}")):
            rankfs.Mount(path)
    refused(source[0], "not a directory: give the mountpoint, not a source")
    refused(str(tmp_path / "absent"), "no such directory")
    (tmp_path / "dataset.json").write_text("{}")
    for text, why in (("[1, 2]", "config.json holds a list, not an object"),
                      ('"x"', "config.json holds a str, not an object"),
                      ("{oops", "config.json is not JSON: Expecting "),
                      ("\xff", "config.json is not JSON: ")):
        (tmp_path / "config.json").write_bytes(text.encode("latin1"))
        refused(str(tmp_path), why)
    r = subprocess.run([sys.executable, "-m", "rankfs", source[0]],
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stderr) == (
        1, f"python3 -m rankfs: {source[0]} is not a rankfs mount (not a "
        "directory: give the mountpoint, not a source)\n")


def test_torch_loader_yields_the_files_bytes_in_order(mounted):
    m, _ = mounted
    import torch
    loader = rankfs.torch.loader(m, 2, rank=1, threads=3)
    assert len(loader) == m.batches_per_rank
    got = list(loader)
    assert len(got) == m.batches_per_rank
    for k, t in enumerate(got):
        assert isinstance(t, torch.Tensor) and t.dtype == torch.float32
        want = np.load(m.batch_path(2, 1, k))
        assert t.numpy().tobytes() == want.tobytes()
        assert t.shape == want.shape
    # The numpy loader reads the same bytes.
    for k, a in enumerate(rankfs.loader(m, 2, rank=1, threads=2)):
        assert a.tobytes() == got[k].numpy().tobytes()
    # device= moves each tensor (non_blocking).
    first = next(iter(rankfs.torch.loader(m, 2, rank=1, device="cpu")))
    assert first.device.type == "cpu"
    assert torch.equal(first, got[0])


def test_labels_are_aligned_with_rows(mounted, source):
    m, _ = mounted
    _, x, codes = source
    for k, (t, y) in enumerate(rankfs.torch.loader(m, 1, rank=0,
                                                   labels=True)):
        index = np.load(m.index_path(1, 0, k))
        assert y.numpy().tolist() == np.load(m.label_path(1, 0, k)).tolist()
        assert y.numpy().tolist() == codes[index].tolist()
        assert np.array_equal(t.numpy(), x[index])


def test_a_partial_last_batch(mounts, source):
    """drop_last=0: the last batch is shorter; its header says so."""
    m = rankfs.Mount(mounts(source[0], f"world_size={W},batch_size=70,"
                            "drop_last=0").mnt)
    nb = m.batches_per_rank
    assert nb == -(-N // (W * 70))
    got = list(rankfs.torch.loader(m, 0, rank=1, threads=2))
    assert len(got) == nb and got[-1].shape[0] < 70
    for k, t in enumerate(got):
        assert t.numpy().tobytes() == np.load(m.batch_path(0, 1, k)).tobytes()


def test_a_csr_source_is_read_dense(mounts, tmp_path):
    """The loaders read a CSR source's batch/*.npy: its rows densified,
    equal to the source's rows by index/ and to the .npz beside it."""
    import scipy.sparse as sp
    x = sp.random(600, 40, density=0.1, format="csr", dtype=np.float32,
                  random_state=3)
    path = write_h5ad(str(tmp_path / "csr.h5ad"), x)
    m = rankfs.Mount(mounts(path, "world_size=2,batch_size=30").mnt)
    assert m.dataset["format"] == "csr" and m.batches_per_rank == 10
    for k, t in enumerate(rankfs.torch.loader(m, 1, rank=1, threads=2)):
        rows = x[np.load(m.index_path(1, 1, k))].toarray()
        assert np.array_equal(t.numpy(), rows)
        npz = sp.load_npz(m.batch_path(1, 1, k)[:-len(".npy")] + ".npz")
        assert np.array_equal(npz.toarray(), rows)
    assert k == 9


def test_labels_needs_a_label_mount(mounts, source):
    m = rankfs.Mount(mounts(source[0], f"world_size={W},batch_size={B}").mnt)
    assert not m.has_labels and m.label_categories is None
    with pytest.raises(ValueError, match="label"):
        rankfs.torch.loader(m, 0, rank=0, labels=True)


def step_file_bytes(m, rank, steps, kind="batch"):
    return [open(m.step_path(rank, s, kind), "rb").read() for s in steps]


def npy_bytes(a):
    import io
    f = io.BytesIO()
    np.save(f, a)
    return f.getvalue()


def test_start_step_resumes_as_the_step_view(mounted):
    m, _ = mounted
    nb = m.batches_per_rank
    start = nb + 4  # epoch 1, batch 4
    resumed = rankfs.torch.loader(m, 1, rank=1, labels=True,
                                  start_step=start)
    assert len(resumed) == nb - 4 and resumed.start_step == start
    got = list(resumed)
    steps = range(start, 2 * nb)
    assert [npy_bytes(t.numpy()) for t, _ in got] == \
        step_file_bytes(m, 1, steps)
    assert [npy_bytes(y.numpy()) for _, y in got] == \
        step_file_bytes(m, 1, steps, "label")
    # An epoch wholly before the step yields nothing, one after it all.
    assert len(rankfs.torch.loader(m, 0, rank=1, start_step=start)) == 0
    assert list(rankfs.torch.loader(m, 0, rank=1, start_step=start)) == []
    assert len(rankfs.torch.loader(m, 2, rank=1, start_step=start)) == nb
    # epoch=None: the step view itself, to the end of the listed epochs.
    stream = rankfs.torch.loader(m, None, rank=1, start_step=start)
    assert len(stream) == 3 * nb - start
    assert [npy_bytes(t.numpy()) for t in stream] == \
        step_file_bytes(m, 1, range(start, 3 * nb))
    with pytest.raises(ValueError, match="start_step"):
        rankfs.torch.loader(m, 0, rank=1, start_step=-1)


def test_start_step_at_epoch_boundaries_and_past_the_end(mounted):
    """A step at an epoch's last or first batch, the step view resumed
    at its end (nothing left) and past it (a ValueError: silently empty,
    a resumed job ended at once)."""
    m, _ = mounted
    nb = m.batches_per_rank
    last = rankfs.loader(m, 0, rank=0, labels=True, start_step=nb - 1)
    (x, y), = list(last)
    assert npy_bytes(x) == step_file_bytes(m, 0, [nb - 1])[0]
    assert npy_bytes(y) == step_file_bytes(m, 0, [nb - 1], "label")[0]
    assert len(rankfs.loader(m, 0, rank=0, start_step=nb)) == 0
    first = rankfs.loader(m, 1, rank=0, start_step=nb)
    assert [npy_bytes(a) for a in first] == \
        step_file_bytes(m, 0, range(nb, 2 * nb))
    across = rankfs.loader(m, None, rank=0, start_step=nb - 1)
    assert [npy_bytes(a) for a in across][:2] == \
        step_file_bytes(m, 0, [nb - 1, nb])
    assert list(rankfs.loader(m, None, rank=0, start_step=m.steps)) == []
    for make in (rankfs.loader, rankfs.torch.loader):
        with pytest.raises(ValueError, match=re.escape(
                f"start_step={m.steps + 1} is past the end of the step "
                f"view's listed epochs (3 x {nb} = {m.steps} steps): mount "
                "with a larger -o epochs= or give the epoch")):
            make(m, None, rank=0, start_step=m.steps + 1)


def test_elastic_resume_at_a_global_step(mounted, mounts, source):
    """A step saved on a world_size=2 mount (resume_point, through JSON)
    resumes on mounts of world_size 4 and 1 with the same world_size x
    batch_size (partition=batch): each step's ranks together hold the
    rows and labels the 2 ranks held. Where the step would hold other
    rows (another partition, global batch size or seed) resuming is
    refused, naming why."""
    a, _ = mounted
    _, x, codes = source
    nb = a.batches_per_rank
    point = json.loads(json.dumps(a.resume_point(np.int64(nb + 5))))
    assert a.resume_step(point) == nb + 5

    def steps(m, world):
        loaders = [rankfs.loader(m, 1, rank=r, labels=True,
                                 start_step=point) for r in range(world)]
        assert [len(loader) for loader in loaders] == [nb - 5] * world
        return [(np.concatenate([b[0] for b in step]),
                 np.concatenate([b[1] for b in step]))
                for step in zip(*loaders)]
    want = steps(a, W)
    assert np.array_equal(want[0][0], x[np.concatenate(
        [np.load(a.index_path(1, r, 5)) for r in range(W)])])
    for world in (4, 1):
        m = rankfs.Mount(mounts(source[0], OPTIONS.replace(
            f"world_size={W},batch_size={B}",
            f"world_size={world},batch_size={W * B // world}") +
            ",seed=3").mnt)
        assert m.view_id != a.view_id and m.resume_step(point) == nb + 5
        got = steps(m, world)
        assert len(got) == len(want)
        for (gx, gy), (wx, wy) in zip(got, want):
            assert gx.tobytes() == wx.tobytes()
            assert gy.tolist() == wy.tolist()
        assert np.isin(got[-1][1], np.arange(len(CATEGORIES))).all()

    def refused(theirs, ours, why):
        m = rankfs.Mount(mounts(source[0], ours).mnt)
        saved = rankfs.Mount(mounts(source[0], theirs).mnt)
        assert saved.resume_step(saved.resume_point(7)) == 7
        with pytest.raises(ValueError, match=re.escape(
                f"step 7 of view {saved.view_id} (world_size "
                f"{saved.world_size}) cannot be resumed on {m.path} (view "
                f"{m.view_id}, world_size {m.world_size}): it holds other "
                f"rows here: {why}")):
            rankfs.torch.loader(m, 0, rank=0,
                                start_step=saved.resume_point(7))
    refused("world_size=2,batch_size=50,partition=contiguous",
            "world_size=4,batch_size=25,partition=contiguous",
            "partition=contiguous there, contiguous here: only "
            "partition=batch serves a global step's rows for any world "
            "size")
    refused("world_size=2,batch_size=50", "world_size=4,batch_size=50",
            "world_size x batch_size = 2 x 50 = 100 there, 4 x 50 = 200 "
            "here")
    refused("world_size=2,batch_size=50,seed=3",
            "world_size=4,batch_size=25,seed=4", "seed=3 there, 4 here")


def test_elastic_resume_takes_what_leaves_the_rows_alike(mounts, source,
                                                         tmp_path):
    """What view_id does not tell apart is no reason to refuse: filters
    in another order, the seed of streaming (which has none), var_names=
    files of the same names at other paths (a node's own copy). The step
    then holds the same rows; other filter values are still refused
    (failed before: each of the three refused)."""
    names = "".join(f"gene{j}\n" for j in range(D))
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "names.txt").write_text(names)

    def resumed(theirs, ours):
        saved = rankfs.Mount(mounts(source[0], "world_size=2,batch_size=50,"
                                    + theirs).mnt)
        m = rankfs.Mount(mounts(source[0], "world_size=4,batch_size=25,"
                                + ours).mnt)
        point = json.loads(json.dumps(saved.resume_point(1)))
        assert m.resume_step(point) == 1
        nb = m.batches_per_rank
        for a, w in ((saved, 2), (m, 4)):
            assert a.batches_per_rank == nb
        rows = [np.concatenate([np.load(a.index_path(0, r, 1))
                                for r in range(w)])
                for a, w in ((saved, 2), (m, 4))]
        assert rows[0].tolist() == rows[1].tolist()
        return saved, m
    resumed("filter=cell_type:B cell|T cell,filter=cell_type:NK|T cell",
            "filter=cell_type:T cell|NK,filter=cell_type:T cell|B cell|")
    resumed("strategy=streaming,seed=1", "strategy=streaming,seed=2")
    resumed(f"var_names={tmp_path}/a/names.txt",
            f"var_names={tmp_path}/b/names.txt")
    saved = rankfs.Mount(mounts(source[0], "world_size=2,batch_size=50,"
                                "filter=cell_type:B cell|T cell").mnt)
    m = rankfs.Mount(mounts(source[0], "world_size=4,batch_size=25,"
                            "filter=cell_type:B cell|NK").mnt)
    with pytest.raises(ValueError, match=r"filter=\['cell_type:B cell\|T "
                       r"cell'\] there, \['cell_type:B cell\|NK'\] here"):
        m.resume_step(saved.resume_point(7))


def test_rank_from_env_argument_and_mismatches(mounted, monkeypatch):
    m, _ = mounted
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert rankfs.torch.loader(m, 0, rank=1).rank == 1
    with pytest.raises(ValueError, match="world_size 2.*rank="):
        rankfs.torch.loader(m, 0)  # nothing says which rank
    with pytest.raises(ValueError, match=r"rank 2 out of range \[0, 2\)"):
        rankfs.torch.loader(m, 0, rank=2)
    monkeypatch.setenv("RANK", "1")  # without WORLD_SIZE: not used
    with pytest.raises(ValueError, match=r"world_size 2.*rank=.*\(env RANK "
                       r"is set, without WORLD_SIZE\)$"):
        rankfs.torch.loader(m, 0)
    monkeypatch.delenv("RANK")  # WORLD_SIZE alone still checked
    monkeypatch.setenv("WORLD_SIZE", "4")
    for give in (1, None):
        with pytest.raises(ValueError, match=r"world size 4 \(from env "
                           r"WORLD_SIZE\) differs from the mount's "
                           r"world_size 2"):
            rankfs.torch.loader(m, 0, rank=give)
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert rankfs.torch.loader(m, 0, rank=1).rank == 1
    monkeypatch.setenv("RANK", "1")
    assert rankfs.torch.loader(m, 0).rank == 1
    assert rankfs.loader(m, 0).rank == 1
    assert rankfs.torch.BatchDataset(m, 0).rank == 1
    with pytest.raises(ValueError, match="rank=0 given.*rank 1"):
        rankfs.torch.loader(m, 0, rank=0)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    with pytest.raises(ValueError, match=r"world size 4 \(from env "
                       r"RANK/WORLD_SIZE\) differs from the mount's "
                       r"world_size 2"):
        rankfs.torch.loader(m, 0)


def test_rank_from_slurm_env(mounted, monkeypatch):
    """Under srun (no torchrun, no process group): SLURM_PROCID and
    SLURM_NTASKS, checked as RANK and WORLD_SIZE are; torchrun's RANK and
    WORLD_SIZE come first (with torchrun under srun, SLURM_PROCID counts
    nodes); an explicit rank= wins over Slurm's, which every process of
    an allocation inherits."""
    m, _ = mounted
    monkeypatch.setenv("SLURM_PROCID", "1")
    monkeypatch.setenv("SLURM_NTASKS", "2")
    assert rankfs.torch.loader(m, 0).rank == 1
    assert rankfs.loader(m, 0).rank == 1
    assert rankfs.torch.BatchDataset(m, 0).rank == 1
    assert rankfs.torch.loader(m, 0, rank=0).rank == 0
    got = next(iter(rankfs.loader(m, 2, labels=True)))
    assert got[0].tobytes() == np.load(m.batch_path(2, 1, 0)).tobytes()
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert rankfs.torch.loader(m, 0).rank == 0
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    # Another world size is not srun's for this mount (a batch script's
    # own process has SLURM_PROCID=0 and the tasks it asked for): not used.
    monkeypatch.setenv("SLURM_NTASKS", "4")
    with pytest.raises(ValueError, match=re.escape(
            "run under srun or start a process group (env SLURM_NTASKS=4 "
            "is not the mount's world size: not used)")):
        rankfs.torch.loader(m, 0)
    monkeypatch.setenv("SLURM_PROCID", "x")
    with pytest.raises(ValueError, match=r"^env SLURM_PROCID='x' is not an "
                       "integer$"):
        rankfs.loader(m, 0)
    monkeypatch.delenv("SLURM_NTASKS")
    with pytest.raises(ValueError, match=r"run under srun.*\(env "
                       r"SLURM_PROCID is set, without SLURM_NTASKS\)$"):
        rankfs.loader(m, 0)


def test_a_batch_script_reads_a_world_size_1_mount(mounts, source,
                                                   monkeypatch):
    """A batch script's own process (sbatch --ntasks=4, no srun) has
    SLURM_PROCID=0 and SLURM_NTASKS=4: on a world_size=1 mount it is
    rank 0, as without Slurm (it was refused as world size 4)."""
    m = rankfs.Mount(mounts(source[0], "batch_size=16").mnt)
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("SLURM_NTASKS", "4")
    assert rankfs.loader(m, 0).rank == 0
    assert rankfs.torch.loader(m, 0).rank == 0
    got = next(iter(rankfs.loader(m, 1)))
    assert got.tobytes() == np.load(m.batch_path(1, 0, 0)).tobytes()


def test_loader_claims_of_usage_md(mounts, mounted, tmp_path, monkeypatch):
    """Each iteration starts at start_step again; rank may be left out on
    a world_size=1 mount; integer labels have no categories; a dtype
    torch lacks is a TypeError saying to mount with dtype=."""
    m, _ = mounted
    loader = rankfs.torch.loader(m, 1, rank=1, start_step=m.batches_per_rank
                                 + 3)
    first = [t.numpy().tobytes() for t in loader]
    assert len(first) == len(loader) == m.batches_per_rank - 3
    assert [t.numpy().tobytes() for t in loader] == first
    assert first[0] == np.load(m.batch_path(1, 1, 3)).tobytes()
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    path = write_h5(str(tmp_path / "u16.h5"), {
        "x": np.arange(400 * 3, dtype=np.uint16).reshape(400, 3),
        "y": np.arange(400, dtype=np.int32) % 5})
    one = rankfs.Mount(mounts(path, "dataset=/x,batch_size=40,label=/y").mnt)
    assert one.has_labels and one.label_categories is None
    assert len(rankfs.loader(one, 0)) == 10  # no rank given: rank 0
    assert rankfs.loader(one, 0).rank == 0
    with pytest.raises(TypeError, match="torch has no dtype for the batch "
                       "files' uint16.*dtype="):
        next(iter(rankfs.torch.loader(one, 0)))
    as_int32 = rankfs.Mount(mounts(path, "dataset=/x,batch_size=40,"
                                   "dtype=int32").mnt)
    got = next(iter(rankfs.torch.loader(as_int32, 0)))
    assert got.numpy().tobytes() == \
        np.load(as_int32.batch_path(0, 0, 0)).tobytes()


def test_pinned_memory_and_cuda(mounted):
    """GPU-only (the loaders' default path on a GPU machine): tensors are
    pinned, and device="cuda" gives the files' bytes."""
    import torch
    if not torch.cuda.is_available():
        pytest.skip("GPU-only: no CUDA device on this machine")
    m, _ = mounted
    for k, t in enumerate(rankfs.torch.loader(m, 0, rank=0)):
        assert t.is_pinned()
        assert t.numpy().tobytes() == np.load(m.batch_path(0, 0, k)).tobytes()
    for k, t in enumerate(rankfs.torch.loader(m, 0, rank=0, device="cuda")):
        assert t.device.type == "cuda"
        torch.cuda.synchronize()
        assert t.cpu().numpy().tobytes() == \
            np.load(m.batch_path(0, 0, k)).tobytes()


def test_batch_dataset_with_dataloader_workers(mounted):
    m, _ = mounted
    import torch.utils.data as tud
    ds = rankfs.torch.BatchDataset(m, 1, rank=0, labels=True)
    assert len(ds) == m.batches_per_rank
    dl = tud.DataLoader(ds, batch_size=None, num_workers=2)
    for k, (x, y) in enumerate(dl):
        assert x.numpy().tobytes() == np.load(m.batch_path(1, 0, k)).tobytes()
        assert y.numpy().tolist() == np.load(m.label_path(1, 0, k)).tolist()
    assert k == m.batches_per_rank - 1


def test_leaving_a_loader_early_stops_its_threads(mounted):
    m, _ = mounted

    def readers():
        return [t for t in threading.enumerate()
                if t.name.startswith("rankfs-read")]
    it = iter(rankfs.torch.loader(m, 0, rank=0, threads=4))
    next(it)
    assert readers()
    it.close()
    deadline = time.monotonic() + 10
    while readers() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not readers()


def test_a_read_error_names_the_file(mounts, source, tmp_path):
    """A source changed in place after mount makes every later batch EIO
    (docs/usage.md, "Changing a source under a mount"): the loaders raise
    it as an OSError naming the batch file (readinto's and read()'s own
    name none), and stop their threads."""
    import errno
    import shutil
    path = str(tmp_path / "copy.h5ad")
    shutil.copy(source[0], path)
    m = rankfs.Mount(mounts(path, OPTIONS).mnt)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    for make in (rankfs.loader, rankfs.torch.loader):
        with pytest.raises(OSError) as raised:
            list(make(m, 1, rank=1, threads=3))
        assert raised.value.errno == errno.EIO
        assert raised.value.filename == m.batch_path(1, 1, 0)
        assert str(raised.value) == (f"[Errno {errno.EIO}] Input/output "
                                     f"error: '{m.batch_path(1, 1, 0)}'")
    assert not [t for t in threading.enumerate()
                if t.name.startswith("rankfs-read")]


# torch.distributed: gloo ranks on 127.0.0.1, one process each.

def _gloo_rank(rank, world, port, paths, out, as_nccl=False):
    """Runs in a spawned process: joins the group, makes a loader for its
    mount and writes what happened to out/rankR.json. as_nccl: the group
    says its backend is NCCL, two loaders are made, and the groups the
    view_ids were gathered over are reported."""
    import torch.distributed as dist
    os.environ.pop("RANK", None)
    os.environ.pop("WORLD_SIZE", None)
    result = {}
    try:
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
            world_size=world, timeout=datetime.timedelta(seconds=60))
        groups = []
        if as_nccl:
            dist.get_backend = lambda group=None: dist.Backend.NCCL
            gather = dist.all_gather_object
            dist.all_gather_object = lambda got, mine, group=None: (
                groups.append(group), gather(got, mine, group=group))[1]
        m = rankfs.Mount(paths[rank])
        for _ in range(2 if as_nccl else 1):
            loader = rankfs.torch.loader(m, 1, labels=True, threads=2)
        if as_nccl:
            result["groups"] = [
                "default" if g is None or g is dist.group.WORLD else
                f"{g.size()} ranks, {type(g).__name__}, "
                f"{'same' if g is groups[0] else 'another'}"
                for g in groups]
        result["rank"] = loader.rank
        same = [x.numpy().tobytes() ==
                np.load(m.batch_path(1, rank, k)).tobytes()
                for k, (x, _) in enumerate(loader)]
        result["same"] = all(same)
        result["batches"] = len(same) == m.batches_per_rank  # not none
    except Exception as e:  # reported to the test
        result["error"] = f"{type(e).__name__}: {e}"
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    sys.stdout.flush()
    os._exit(0)  # no torch 1.13 exit-time destructors (see the example)


def run_gloo(paths, world, tmp_path, as_nccl=False):
    import socket
    import torch.multiprocessing as tmp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = tmp.spawn(_gloo_rank,
                    args=(world, port, paths, str(tmp_path), as_nccl),
                    nprocs=world, join=False)
    deadline = time.monotonic() + 120
    while not ctx.join(timeout=1):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            raise AssertionError("gloo ranks did not finish in 120 s")
    results = []
    for r in range(world):
        with open(tmp_path / f"rank{r}.json") as f:
            results.append(json.load(f))
    return results


def test_rank_from_torch_distributed(mounted, tmp_path):
    m, _ = mounted
    results = run_gloo([m.path, m.path], 2, tmp_path)
    assert results == [{"rank": 0, "same": True, "batches": True},
                       {"rank": 1, "same": True, "batches": True}]


def test_view_ids_gathered_over_gloo_beside_nccl(mounted, tmp_path):
    """On an NCCL group the view_ids go through a gloo group of every
    rank, made once: NCCL would stage them on GPU 0 of every process
    that has not called torch.cuda.set_device. The gloo group stands in
    for NCCL here (no GPUs), saying its backend is NCCL."""
    m, _ = mounted
    results = run_gloo([m.path, m.path], 2, tmp_path, as_nccl=True)
    side = ["2 ranks, ProcessGroupGloo, same"] * 2
    assert results == [
        {"groups": side, "rank": 0, "same": True, "batches": True},
        {"groups": side, "rank": 1, "same": True, "batches": True}]


def test_world_size_of_the_process_group_must_match(mounted, tmp_path):
    m, _ = mounted
    (result,) = run_gloo([m.path], 1, tmp_path)
    assert result["error"] == (
        "ValueError: world size 1 (from torch.distributed) differs from "
        f"the mount's world_size 2 ({m.path}/config.json): mount with "
        "-o world_size=1")


def test_view_id_must_match_across_ranks(mounts, source, tmp_path):
    a = rankfs.Mount(mounts(source[0], OPTIONS + ",seed=1").mnt)
    b = rankfs.Mount(mounts(source[0], OPTIONS + ",seed=2").mnt)
    assert a.view_id != b.view_id
    results = run_gloo([a.path, b.path], 2, tmp_path)
    want = (f"ValueError: view_id differs across ranks: rank 0 has "
            f"{a.view_id} ({a.path}); rank 1 has {b.view_id} ({b.path}): "
            "mount the same source with the same options everywhere")
    assert results == [{"error": want}, {"error": want}]


def test_a_rank_that_fails_its_checks_fails_every_rank(mounts, source,
                                                      tmp_path):
    """Rank 1's mount has another world size: it raises before the
    view_id's all-gather, which rank 0 must not be left waiting in (the
    group's timeout, 30 minutes by default)."""
    a = rankfs.Mount(mounts(source[0], OPTIONS + ",seed=1").mnt)
    b = rankfs.Mount(mounts(source[0], OPTIONS.replace(
        f"world_size={W}", "world_size=4") + ",seed=1").mnt)
    start = time.monotonic()
    results = run_gloo([a.path, b.path], 2, tmp_path)
    assert time.monotonic() - start < 50  # the group's timeout is 60 s
    own = ("ValueError: world size 2 (from torch.distributed) differs from "
           f"the mount's world_size 4 ({b.path}/config.json): mount with "
           "-o world_size=2")
    assert results == [
        {"error": "ValueError: another rank's checks failed: "
                  f"rank 1 ({b.path}): {own}"},
        {"error": own}]


def test_env_rank_that_is_not_a_number_is_named(mounted, monkeypatch):
    m, _ = mounted
    monkeypatch.setenv("RANK", "")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match=r"^env RANK='' is not an integer$"):
        rankfs.loader(m, 0)


def test_python_m_rankfs_prints_a_summary(mounted):
    m, _ = mounted
    for k in range(3):
        np.load(m.batch_path(0, 1, k))
    r = subprocess.run([sys.executable, "-m", "rankfs", m.path],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    print(r.stdout)
    lines = r.stdout.splitlines()
    # One screen (the first two lines hold paths).
    assert len(lines) <= 24 and max(map(len, lines[2:])) <= 80
    assert lines[0] == f"rankfs {m.path}  view_id {m.view_id}"
    assert "world_size=2 batch_size=50 seed=3" in r.stdout
    assert f"{m.batches_per_rank} batches per rank per epoch" in r.stdout
    assert "cell_type (4 categories)" in r.stdout
    ranks = [line.split() for line in lines
             if line.split()[:1] in (["0"], ["1"])]
    assert [row[0] for row in ranks] == ["0", "1"]
    assert int(ranks[1][1]) >= 3 and "e0 b2" in " ".join(ranks[1])
    # Served (2 words), rows/s, then epoch r/s: rank 1 opened 3 batches
    # of epoch 0 (or more).
    assert float(ranks[1][5]) > 0
    bad = subprocess.run([sys.executable, "-m", "rankfs", REPO],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1
    assert bad.stderr.startswith("python3 -m rankfs: ") and \
        "not a rankfs mount" in bad.stderr


def test_python_m_rankfs_shows_each_filter(mounts, source):
    """Two filter= options are two words of the options, each whole on
    its line (values with spaces too); joined by | they read as one
    filter of other values."""
    m = mounts(source[0], f"world_size={W},batch_size=20,"
               "filter=cell_type:B cell|T cell,filter=cell_type:T cell|NK")
    r = subprocess.run([sys.executable, "-m", "rankfs", m.mnt],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for want in ("filter=cell_type:B cell|T cell",
                 "filter=cell_type:T cell|NK"):
        assert re.search(f"(^| ){re.escape(want)}( |$)", r.stdout, re.M)
    assert max(map(len, r.stdout.splitlines()[2:])) <= 80
    assert "filter=-" not in r.stdout


def test_cmake_install_lays_out_an_importable_package(tmp_path):
    prefix = tmp_path / "prefix"
    subprocess.run(["cmake", "--install", os.path.join(REPO, "build"),
                    "--prefix", str(prefix)], check=True,
                   capture_output=True)
    found = [os.path.dirname(os.path.dirname(os.path.join(d, "__init__.py")))
             for d, _, files in os.walk(prefix)
             if d.endswith("/rankfs") and "__init__.py" in files]
    assert len(found) == 1
    # The directory is the system interpreter's for its prefix.
    rel = os.path.relpath(found[0], prefix)
    assert rel in (f"lib/python{sys.version_info[0]}.{sys.version_info[1]}"
                   "/dist-packages",
                   f"lib/python{sys.version_info[0]}.{sys.version_info[1]}"
                   "/site-packages")
    r = subprocess.run(
        [sys.executable, "-c",
         "import rankfs, rankfs.torch, rankfs.__main__; "
         "print(rankfs.__file__)"],
        env=dict(os.environ, PYTHONPATH=found[0]), cwd=str(tmp_path),
        capture_output=True, text=True, check=True)
    assert r.stdout.strip() == os.path.join(found[0], "rankfs", "__init__.py")


EXAMPLES = os.path.join(REPO, "docs", "examples")


def test_numpy_example(mounted):
    m, _ = mounted
    nb = m.batches_per_rank
    r = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, "numpy_loader.py"), m.path,
         "--epoch", "2", "--rank", "1", "--start-step", str(2 * nb + 5)],
        capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    rows = np.concatenate([np.load(m.batch_path(2, 1, k))
                           for k in range(nb)])
    assert out["view_id"] == m.view_id and out["rank"] == 1
    assert (out["batches"], out["rows"]) == (nb, nb * B)
    assert np.allclose(out["mean"], rows.mean(axis=0, dtype=np.float64))
    assert out["resumed_batches"] == nb - 5


# jax is not a Debian 12 package (and nothing is downloaded): a stand-in
# of the few calls docs/examples/jax_loader.py makes, on numpy, with no
# gradients (the parameters stay put). It runs the example's use of
# rankfs.jax, not JAX.
JAX_STAND_IN = {
    "jax/__init__.py": """
import numpy
from . import nn, numpy as numpy_, tree_util
Array = numpy.ndarray
def process_count(): return 1
def process_index(): return 0
def device_put(a, device=None): return numpy.asarray(a)
def jit(f): return f
def value_and_grad(f):
    return lambda p, *a: (f(p, *a), tree_util.tree_map(numpy.zeros_like, p))
""",
    "jax/numpy.py": "from numpy import *  # noqa\n",
    "jax/nn.py": """
import numpy
def log_softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    return z - numpy.log(numpy.exp(z).sum(axis=-1, keepdims=True))
""",
    "jax/tree_util.py": """
def tree_map(f, tree, *rest):
    return {k: f(v, *(r[k] for r in rest)) for k, v in tree.items()}
""",
}


def test_jax_example(mounted, tmp_path):
    """docs/examples/jax_loader.py, run against the stand-in above: every
    batch of two epochs reaches its training step."""
    for name, text in JAX_STAND_IN.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    m, _ = mounted
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run(
        [sys.executable, os.path.join(EXAMPLES, "jax_loader.py"), m.path,
         "--epochs", "2", "--rank", "0"],
        capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["view_id"] == m.view_id
    assert out["rows"] == 2 * m.batches_per_rank * B
    assert len(out["losses"]) == 2


def test_gpu_feed_bench_runs_on_cpu(tmp_path):
    """bench/gpu_feed.py, small and on the CPU: it prints all three feeds
    (its numbers are for a GPU and a real size)."""
    from conftest import RANKFS
    r = subprocess.run(
        [sys.executable, os.path.join(REPO, "bench", "gpu_feed.py"),
         "--rows", "16384", "--cols", "32", "--world-size", "2",
         "--device", "cpu", "--dir", str(tmp_path),
         "--json", str(tmp_path / "feed.json")],
        env=dict(os.environ, RANKFS_BIN=RANKFS), capture_output=True,
        text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    print(r.stdout)
    for feed in ("rankfs.torch.loader", "DataLoader(workers)", "in memory"):
        assert f"  {feed} " in r.stdout
    assert "rankfs.torch.loader / DataLoader(workers): " in r.stdout
    out = json.load(open(tmp_path / "feed.json"))
    assert all(v > 0 for v in out["rows_per_s"].values())
    assert os.listdir(tmp_path) == ["feed.json"]  # unmounted, cleaned up


def test_rankfs_jax_with_a_stand_in_for_jax(mounted, monkeypatch):
    """rankfs.jax's own logic without jax (not in Debian 12): a module
    standing in for jax says process 1 of 2, puts arrays as they are, and
    all-gathers the view_id from a rank 0 with another view_id."""
    import types
    m, _ = mounted
    other = "0123456789abcdef"

    failed = 0  # rank 0's own checks failed

    def allgather(mine):
        theirs = np.frombuffer(bytes.fromhex(other), dtype=np.uint32)
        return np.stack([np.append(theirs, np.uint32(failed)), mine])
    fake = types.ModuleType("jax")
    fake.process_count = lambda: 2
    fake.process_index = lambda: 1
    fake.device_put = lambda a, device=None: ("put", a)
    fake.experimental = types.ModuleType("jax.experimental")
    fake.experimental.multihost_utils = types.ModuleType(
        "jax.experimental.multihost_utils")
    fake.experimental.multihost_utils.process_allgather = allgather
    for name, mod in (("jax", fake), ("jax.experimental", fake.experimental),
                      ("jax.experimental.multihost_utils",
                       fake.experimental.multihost_utils)):
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.delitem(sys.modules, "rankfs.jax", raising=False)
    try:
        import rankfs.jax as rj
        assert rj.detect_rank(m) == 1
        with pytest.raises(ValueError, match=re.escape(
                f"view_id differs across ranks: rank 0 has {other}; "
                f"rank 1 has {m.view_id} ({m.path}): ")):
            rj.loader(m, 0)
        other = m.view_id
        got = list(rj.loader(m, 0, labels=True, start_step=3))
        assert len(got) == m.batches_per_rank - 3
        (tag, x), (_, y) = got[0]
        assert tag == "put"
        assert x.tobytes() == np.load(m.batch_path(0, 1, 3)).tobytes()
        assert y.tolist() == np.load(m.label_path(0, 1, 3)).tolist()
        failed = 1
        with pytest.raises(ValueError, match=r"^another rank's checks "
                           r"failed: rank 0: see its own error$"):
            rj.loader(m, 0)
        failed = 0
        fake.process_count = lambda: 3
        with pytest.raises(ValueError, match=r"world size 3 \(from "
                           r"jax.process_count\(\)\) differs"):
            rj.loader(m, 0)
    finally:  # the real jax, where there is one, gets a fresh rankfs.jax
        sys.modules.pop("rankfs.jax", None)
        if hasattr(rankfs, "jax"):
            del rankfs.jax


def test_var_names_split_on_newlines_only(tmp_path):
    """var_names.txt is one name a line, the lines ended by "\\n":
    splitlines() also split names at \\x1c, \\x85, U+2028 ... and
    universal newlines at a bare \\r, moving later names onto the wrong
    columns. (FUSE-free: the mount's files written here.)"""
    names = ["CD4", "odd\x1cname", "x\x85y", "p\u2028q", "\u00e9t\u00e9",
             "last"]
    (tmp_path / "config.json").write_text('{"view_id": "%s"}' % ("0" * 16))
    (tmp_path / "dataset.json").write_text("{}")
    with open(tmp_path / "var_names.txt", "w", encoding="utf-8",
              newline="") as f:
        f.write("".join(n + "\n" for n in names))
    assert rankfs.Mount(tmp_path).var_names == names


def _replace_mount(m, source_path, options, log):
    """Lazily unmounts m (what its daemon serves stays for the files open
    on it) and mounts another daemon at the same path: @return that
    daemon's process."""
    from conftest import start_daemon, wait_mounted
    subprocess.run(["fusermount3", "-u", "-z", m.path], check=True)
    proc = start_daemon(m.path, [source_path], options, log=log)
    wait_mounted(m.path, proc, log)
    return proc


def _unmount_replacement(path, proc, log):
    subprocess.run(["fusermount3", "-u", path], check=False)
    assert proc.wait(timeout=20) == 0, open(log).read()


def test_a_loader_stops_where_its_mount_was_replaced(mounts, source,
                                                      tmp_path):
    """Another mount (another seed) put where a loader's mount was, while
    it iterates or after the Mount was made: the loaders raise an error
    naming the mount rather than go on with the other plan's batches
    (they yielded 6 of 12 batches from it), and yield no batch of it
    first."""
    first = mounts(source[0], OPTIONS + ",seed=3")
    m = rankfs.Mount(first.mnt)
    nb = m.batches_per_rank
    want = [np.load(m.batch_path(0, 0, k)).tobytes() for k in range(nb)]
    log = str(tmp_path / "replacement.log")
    ds = rankfs.torch.BatchDataset(m, 0, rank=0)
    it = iter(rankfs.torch.loader(m, 0, rank=0, threads=1))
    got = [next(it).numpy().tobytes()]
    proc = _replace_mount(m, source[0], OPTIONS + ",seed=4", log)
    try:
        other = rankfs.Mount(m.path)
        assert other.view_id != m.view_id
        raised = None
        try:
            for t in it:
                got.append(t.numpy().tobytes())
        except OSError as e:
            raised = e
        it.close()
        foreign = sum(g != w for g, w in zip(got, want))
        assert raised is not None, (f"no error: {len(got)} of {nb} batches "
                                    f"yielded, {foreign} of the other mount")
        assert type(raised).__name__ == "MountGone", raised
        assert str(raised).startswith(
            f"{m.path}: the rankfs mount this loader started on "
            f"(view_id {m.view_id}) is gone: "), raised
        assert 1 <= len(got) < nb and got == want[:len(got)]
        # A BatchDataset made before: each item is checked likewise.
        with pytest.raises(OSError, match=re.escape(
                f"{m.path}: the rankfs mount this loader started on "
                f"(view_id {m.view_id}) is gone: {m.batch_path(0, 0, 1)} "
                "is on device ")):
            ds[1]
        # A Mount made before the replacement: the first batch is refused.
        for make in (rankfs.loader, rankfs.torch.loader):
            with pytest.raises(OSError, match=re.escape(
                    f"{m.path}: the rankfs mount of view_id {m.view_id} "
                    f"is gone: the mount there now serves view_id "
                    f"{other.view_id}")):
                next(iter(make(m, 0, rank=0)))
        # Made on the new mount, a loader reads it.
        again = next(iter(rankfs.torch.loader(other, 0, rank=0)))
        assert again.numpy().tobytes() == \
            np.load(other.batch_path(0, 0, 0)).tobytes()
    finally:
        _unmount_replacement(m.path, proc, log)


def test_rank_epoch_and_step_must_be_ints(mounted):
    """rank=True and rank=1.5 were taken as a rank (True a FileNotFoundError
    naming .../rank/True/...): each int argument that is not an int is a
    TypeError naming it (numpy's ints are ints)."""
    m, _ = mounted
    bad = (True, 1.5, "1")
    for value in bad:
        for make in (rankfs.loader, rankfs.torch.loader,
                     rankfs.torch.BatchDataset):
            with pytest.raises(TypeError, match=re.escape(
                    f"rank={value!r}: an int, not {type(value).__name__}")):
                make(m, 0, rank=value)
            with pytest.raises(TypeError, match=re.escape(
                    f"epoch={value!r}: an int, not {type(value).__name__}")):
                make(m, value, rank=0)
        with pytest.raises(TypeError, match=re.escape(f"start_step={value!r}")):
            rankfs.loader(m, 0, rank=0, start_step=value)
        with pytest.raises(TypeError, match=re.escape(f"threads={value!r}")):
            rankfs.loader(m, 0, rank=0, threads=value)
        with pytest.raises(TypeError, match=re.escape(f"rank={value!r}")):
            rankfs.torch.detect_rank(m, value)
        with pytest.raises(TypeError, match=re.escape(f"rank={value!r}")):
            m.batch_path(0, value, 0)
        with pytest.raises(TypeError, match=re.escape(f"epoch={value!r}")):
            m.batch_path(value, 0, 0)
        with pytest.raises(TypeError, match=re.escape(f"k={value!r}")):
            m.batch_path(0, 0, value)
        with pytest.raises(TypeError, match=re.escape(f"step={value!r}")):
            m.step_path(0, value)
    assert rankfs.loader(m, np.int64(0), rank=np.int32(1)).rank == 1
    assert m.batch_path(np.int64(1), np.int64(1), np.int64(2)) == \
        m.batch_path(1, 1, 2)
