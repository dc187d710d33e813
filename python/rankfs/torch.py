# SPDX-License-Identifier: MIT
"""rankfs for PyTorch: a threaded loader that reads batch files into
(pinned) tensors, or a CSR source's .npz files into sparse CSR tensors
(sparse=True), and a map-style Dataset for DataLoader workers.

    import rankfs, rankfs.torch
    m = rankfs.Mount("/mnt/atlas")
    for epoch in range(start_step // m.batches_per_rank, m.epochs):
        for x, y in rankfs.torch.loader(m, epoch, labels=True,
                                        start_step=start_step, device="cuda"):
            ...
"""
from __future__ import annotations

import functools
from typing import Any, List, Optional, Tuple, Union

import numpy as np
import torch
import torch.distributed as dist
import torch.utils.data

from ._loader import Loader
from ._mount import MountLike, as_mount
from ._read import (StartStep, Steps, agree_across_ranks, read_pair,
                    resolve_rank)

__all__ = ["loader", "BatchDataset", "detect_rank", "check_view_id"]


def _torch_dtype(dtype: np.dtype) -> torch.dtype:
    try:
        return torch.from_numpy(np.empty(0, dtype)).dtype
    except TypeError:
        raise TypeError(f"torch has no dtype for the batch files' {dtype}: "
                        "mount with -o dtype=float32 (or another that "
                        "torch has)") from None


def _alloc(shape: Tuple[int, ...], dtype: np.dtype, pin: bool
           ) -> Tuple[torch.Tensor, np.ndarray]:
    t = torch.empty(shape, dtype=_torch_dtype(dtype), pin_memory=pin)
    return t, t.numpy()


def _sparse(x: Any) -> torch.Tensor:
    """A scipy csr_matrix as a torch sparse CSR tensor on the CPU, sharing
    its arrays' memory. torch wants each row's column ids sorted and
    distinct (a .npz holds them as the source stores them): where they
    are not, they are sorted and duplicates added up, as the .npy has
    them; crow and column indices of one dtype (int64 where scipy's
    differ)."""
    x.sum_duplicates()  # nothing where has_canonical_format
    indptr, indices = x.indptr, x.indices
    if indptr.dtype != indices.dtype:
        indptr, indices = indptr.astype(np.int64), indices.astype(np.int64)
    _torch_dtype(x.data.dtype)  # a TypeError naming dtype= where none
    return torch.sparse_csr_tensor(torch.from_numpy(indptr),
                                   torch.from_numpy(indices),
                                   torch.from_numpy(x.data), size=x.shape)


def _group() -> bool:
    return dist.is_available() and dist.is_initialized()


def detect_rank(mount: MountLike, rank: Optional[int] = None) -> int:
    """This process's rank for the mount: torch.distributed's when a
    process group is initialised, else env RANK and WORLD_SIZE, else
    `rank` (world size then the mount's), else env SLURM_PROCID and
    SLURM_NTASKS. A world size other than the mount's is a ValueError
    naming both."""
    m = as_mount(mount)
    found = None
    if _group():
        found = (dist.get_rank(), dist.get_world_size(), "torch.distributed")
    return resolve_rank(m, rank, found)


def check_view_id(mount: MountLike) -> None:
    """With a process group: all-gathers the view_id of every rank's
    mount and raises ValueError naming the ranks if they differ (every
    rank raises). A collective: every rank must call it. Without a
    process group it does nothing."""
    if _group():
        agree_across_ranks(mount, None, None, _gather)


# (default group, gloo group of all its ranks), made at the first gather.
_side_group: Optional[Tuple[Any, Any]] = None


def _gather_group() -> Any:
    """The group the view_ids are gathered over: the default one if it is
    gloo, else a gloo group of every rank, made once per default group.
    On NCCL, all_gather_object stages each rank's object on
    torch.cuda.current_device(), GPU 0 in every process that has not
    called torch.cuda.set_device: the ranks then share one GPU, which
    NCCL refuses or hangs on. A collective (new_group): every rank is
    here, as in the gather."""
    global _side_group
    world = dist.group.WORLD
    if dist.get_backend() == dist.Backend.GLOO:
        return world
    if _side_group is None or _side_group[0] is not world:
        _side_group = (world, dist.new_group(backend=dist.Backend.GLOO))
    return _side_group[1]


def _gather(mine: tuple) -> List[tuple]:
    got: List[tuple] = [()] * dist.get_world_size()
    dist.all_gather_object(got, mine, group=_gather_group())
    return got


def loader(mount: MountLike, epoch: Optional[int], rank: Optional[int] = None,
           labels: bool = False, start_step: StartStep = 0, threads: int = 4,
           pin_memory: bool = True,
           device: Union[str, torch.device, None] = None,
           sparse: bool = False) -> Loader:
    """This rank's batches of one epoch as tensors, read by a thread pool.

    Rank and world size come from torch.distributed when a process group
    is initialised, else from env RANK and WORLD_SIZE, else from `rank`
    (world size the mount's), else from env SLURM_PROCID and
    SLURM_NTASKS; a world size other than the mount's is a ValueError.
    With a process group the view_id of every rank's mount is compared
    (a collective: every rank calls loader() alike) and a mismatch is a
    ValueError naming the ranks.

    Each file is read with readinto straight into a tensor's memory,
    pinned when pin_memory is set and CUDA is available, by `threads`
    threads, at most 2 x threads files ahead; batches come in order.

    @param mount a rankfs.Mount or its path
    @param epoch the epoch; None for the step view: every listed epoch
        from start_step on (a start_step past their end is a ValueError)
    @param labels yield (batch, labels) with labels the int64 label codes
    @param start_step global step to resume at (step s is batch s mod nb
        of epoch s div nb, as in MOUNT/step/); an epoch's batches before
        it are skipped, an epoch wholly before it yields nothing. Or
        Mount.resume_point(step) of the mount that saved it: of another
        world size only where that step holds the same rows here
        (Mount.resume_step), else a ValueError
    @param device move each tensor there (non_blocking) before yielding
    @param sparse read the batch/*.npz files of a CSR source instead of
        the dense .npy: each batch a torch.sparse_csr_tensor of the same
        rows (scipy.sparse.load_npz reads the file; values float32 where
        the .npy is float16, as the .npz holds them; torch's CSR support
        is beta). Sparse batches are not pinned (pin_memory does not
        apply: torch 1.13's sparse_csr_tensor takes no pin_memory);
        device= copies them there. On a dense source a ValueError
    @return a Loader: iterate it; len() is the batches it yields
    """
    m, r = agree_across_ranks(mount, rank, detect_rank,
                              _gather if _group() else None)
    pin = bool(pin_memory) and torch.cuda.is_available()
    convert = None
    if device is not None:
        dev = torch.device(device)

        def move(item: Any) -> Any:
            if isinstance(item, tuple):
                return tuple(t.to(dev, non_blocking=True) for t in item)
            return item.to(dev, non_blocking=True)
        convert = move
    return Loader(m, Steps(m, epoch, r, start_step, labels, sparse),
                  functools.partial(_alloc, pin=pin), threads, convert,
                  _sparse)


class BatchDataset(torch.utils.data.Dataset):
    """Map-style: item k is batch k of `rank` in `epoch` as a tensor
    (with its labels when labels is set), for
    ``DataLoader(ds, batch_size=None, num_workers=k, pin_memory=True)``
    where worker processes are wanted. Read in order: rankfs prefetches
    ahead of a rank that reads its files in order. The rank is found as
    by loader(); the view_id is not compared (no collective here): call
    check_view_id(mount) on every rank for that. Each file read must be
    on the device the mount had when the dataset was made (a MountGone
    where another mount was put at its path since); the mount is not
    held open between items, as a loader holds it, so one that is put
    there after an unmount may be given the same device number."""

    def __init__(self, mount: MountLike, epoch: int,
                 rank: Optional[int] = None, labels: bool = False) -> None:
        m = as_mount(mount)
        self.mount = m
        self.steps = Steps(m, epoch, detect_rank(m, rank), 0, labels)
        self.epoch, self.rank = self.steps.epoch, self.steps.rank
        with m.hold() as held:
            self._held = held

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, k: int) -> Any:
        if not 0 <= k < len(self):
            raise IndexError(k)
        return read_pair(self.steps.pair(self.steps.first + k),
                         functools.partial(_alloc, pin=False),
                         held=self._held)

