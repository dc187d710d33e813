# SPDX-License-Identifier: MIT
"""The loaders' sparse=True against a real mount of a CSR .h5ad: each
batch, read from its .npz, a scipy csr_matrix (rankfs.loader) or a torch
sparse CSR tensor (rankfs.torch.loader) equal to the source's rows by
index/ and to the dense .npy batch, labels as the dense loaders give
them, start_step and the step view alike, the refusal on a dense
source, and no reading thread left by an abandoned iteration.

(test_python.py holds the dense loaders' tests.)"""
import re
import threading
import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from conftest import write_cells_h5ad, write_h5ad

import rankfs  # noqa: E402 (conftest puts the package on sys.path)
import rankfs.torch  # noqa: E402

N, D, W, B = 600, 40, 2, 30
CATEGORIES = ["B cell", "T cell", "NK"]
OPTIONS = f"label=cell_type,world_size={W},batch_size={B},epochs=3,seed=5"


@pytest.fixture(autouse=True)
def quiet_torch_and_no_launcher_env(monkeypatch):
    """No rank from a torchrun or srun the suite runs under, and torch's
    one "sparse CSR support is in beta" warning not counted."""
    for name in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Sparse CSR tensor support")
        yield


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    rng = np.random.default_rng(11)
    # Stored as anndata writes it: each row's column ids reversed, row 3
    # empty, and row 5 holding column 7 twice (the .npy adds them up).
    x = sp.random(N, D, density=0.1, format="csr", dtype=np.float32,
                  random_state=4)
    indptr, indices, data = [0], [], []
    for i in range(N):
        row = x[i]
        cols, vals = list(row.indices[::-1]), list(row.data[::-1])
        if i == 3:
            cols, vals = [], []
        if i == 5:
            cols, vals = cols + [7, 7], vals + [0.25, 0.5]
        indices += cols
        data += vals
        indptr.append(len(indices))
    x = sp.csr_matrix((np.array(data, np.float32),
                       np.array(indices, np.int32),
                       np.array(indptr, np.int64)), shape=(N, D))
    assert not x.has_sorted_indices
    codes = rng.integers(0, len(CATEGORIES), N)
    path = write_cells_h5ad(str(tmp_path_factory.mktemp("sparse") /
                                "csr.h5ad"), x, codes, CATEGORIES)
    return path, x, codes


@pytest.fixture
def mounted(mounts, source):
    return rankfs.Mount(mounts(source[0], OPTIONS).mnt)


def same(a, b):
    """Two csr_matrix alike: shape, dtype and every stored array."""
    return (a.shape == b.shape and a.dtype == b.dtype and
            np.array_equal(a.indptr, b.indptr) and
            np.array_equal(a.indices, b.indices) and
            np.array_equal(a.data, b.data))


def canonical(a):
    """a with each row's column ids sorted and duplicates added up: what
    the torch loader makes of a .npz (torch wants them so)."""
    a = a.copy()
    a.sum_duplicates()
    return a


def as_scipy(t):
    """A torch sparse CSR tensor as a csr_matrix of its arrays."""
    import torch
    assert isinstance(t, torch.Tensor) and t.layout == torch.sparse_csr
    return sp.csr_matrix((t.values().numpy(), t.col_indices().numpy(),
                          t.crow_indices().numpy()), shape=tuple(t.shape))


def test_mount_helpers_name_the_npz_files(mounted):
    m = mounted
    assert m.is_csr and m.dataset["format"] == "csr"
    assert m.npz_path(2, 1, 5) == m.batch_path(2, 1, 5)[:-4] + ".npz"
    assert m.step_npz_path(1, 13) == m.step_path(1, 13)[:-4] + ".npz"
    with open(m.npz_path(2, 1, 5), "rb") as f, \
            open(m.step_npz_path(1, 2 * m.batches_per_rank + 5), "rb") as g:
        assert f.read() == g.read()


def test_sparse_batches_are_the_source_rows_and_the_npy(mounted, source):
    m = mounted
    _, x, codes = source
    nb = m.batches_per_rank
    assert nb == N // (W * B)
    numpy_got = list(rankfs.loader(m, 1, rank=1, labels=True, threads=3,
                                   sparse=True))
    torch_got = list(rankfs.torch.loader(m, 1, rank=1, labels=True,
                                         threads=2, sparse=True))
    assert len(numpy_got) == len(torch_got) == nb
    for k, ((a, y), (t, ty)) in enumerate(zip(numpy_got, torch_got)):
        index = np.load(m.index_path(1, 1, k))
        rows = x[index]
        assert isinstance(a, sp.csr_matrix)
        assert same(a, sp.load_npz(m.npz_path(1, 1, k)))
        assert (a != rows).nnz == 0 and a.shape == (B, D)
        assert np.array_equal(a.toarray(), np.load(m.batch_path(1, 1, k)))
        if k == 0:  # the column ids in the source's order
            assert not a.has_sorted_indices
        assert same(as_scipy(t), canonical(a))
        assert np.array_equal(t.to_dense().numpy(), a.toarray())
        # Labels as the dense loaders read them.
        assert y.dtype == np.int64 and y.tolist() == codes[index].tolist()
        assert ty.numpy().tolist() == y.tolist()
    # device= copies each sparse tensor (and its labels) there.
    t, y = next(iter(rankfs.torch.loader(m, 1, rank=1, labels=True,
                                         device="cpu", sparse=True)))
    assert t.device.type == "cpu"
    assert same(as_scipy(t), canonical(numpy_got[0][0]))


def test_sparse_start_step_and_the_step_view(mounted):
    """start_step skips the same batches as the dense loader does, and
    epoch=None reads the step view's .npz files."""
    m = mounted
    nb = m.batches_per_rank
    start = nb + 4
    for make in (rankfs.loader, rankfs.torch.loader):
        resumed = make(m, 1, rank=0, labels=True, start_step=start,
                       sparse=True)
        dense = make(m, 1, rank=0, labels=True, start_step=start)
        assert len(resumed) == len(dense) == nb - 4
        assert resumed.start_step == start
        for (a, y), (d, dy), s in zip(resumed, dense, range(start, 2 * nb)):
            want = sp.load_npz(m.step_npz_path(0, s))
            if make is rankfs.torch.loader:
                a, want = as_scipy(a), canonical(want)
            assert same(a, want)
            assert np.array_equal(a.toarray(), np.asarray(d))
            assert np.asarray(y).tolist() == np.asarray(dy).tolist()
        assert list(make(m, 0, rank=0, start_step=start, sparse=True)) == []
        stream = list(make(m, None, rank=0, start_step=start, sparse=True))
        assert len(stream) == 3 * nb - start
        for a, s in zip(stream, range(start, 3 * nb)):
            want = sp.load_npz(m.step_npz_path(0, s))
            if make is rankfs.torch.loader:
                a, want = as_scipy(a), canonical(want)
            assert same(a, want)
    # A resume point saved on this mount resumes the sparse loader alike.
    point = m.resume_point(start)
    first = next(iter(rankfs.loader(m, None, rank=0, start_step=point,
                                    sparse=True)))
    assert same(first, sp.load_npz(m.step_npz_path(0, start)))


def test_sparse_on_a_dense_source_is_refused(mounts, tmp_path):
    x = np.random.default_rng(2).random((120, 6), dtype=np.float32)
    path = write_h5ad(str(tmp_path / "dense.h5ad"), x)
    m = rankfs.Mount(mounts(path, "batch_size=20").mnt)
    assert m.dataset["format"] == "dense" and not m.is_csr
    why = re.escape(f"sparse=True but {m.path} has no .npz files: its "
                    "source is dense (dataset.json's format), not csr")
    for make in (rankfs.loader, rankfs.torch.loader):
        with pytest.raises(ValueError, match=why):
            make(m, 0, sparse=True)
        assert len(list(make(m, 0))) == 6  # the dense batches are there
    with pytest.raises(ValueError, match="has no .npz files"):
        m.npz_path(0, 0, 0)


def test_an_abandoned_sparse_iteration_leaves_no_thread(mounted):
    m = mounted

    def readers():
        return [t for t in threading.enumerate()
                if t.name.startswith("rankfs-read")]
    for make in (rankfs.loader, rankfs.torch.loader):
        it = iter(make(m, 0, rank=0, threads=4, sparse=True))
        next(it)
        assert readers()
        it.close()
        deadline = time.monotonic() + 10
        while readers() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not readers()
