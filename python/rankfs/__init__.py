# SPDX-License-Identifier: MIT
"""rankfs from Python: a mount's options and files, and loaders that read
one rank's batch files with threads, in order, into numpy arrays
(``rankfs.loader``), PyTorch tensors (``rankfs.torch``) or JAX arrays
(``rankfs.jax``); the CSR batches of a CSR source as
scipy.sparse.csr_matrix or torch sparse CSR tensors (sparse=True).

Files are the interface: nothing here is needed to train on a mount, and
nothing in the filesystem depends on it. numpy is the only requirement;
torch and jax are imported by their own submodules only.

    import rankfs, rankfs.torch
    m = rankfs.Mount("/mnt/atlas")
    for x, y in rankfs.torch.loader(m, epoch, labels=True, device="cuda"):
        ...
"""
from __future__ import annotations

from typing import Optional

from ._loader import Loader
from ._mount import Mount, MountGone, MountLike, as_mount
from ._read import (StartStep, Steps, numpy_alloc, read_npy,
                    read_npz, resolve_rank)

__version__ = "0.1.0"
__all__ = ["Mount", "MountGone", "Loader", "loader", "read_npy",
           "read_npz", "__version__"]


def loader(mount: MountLike, epoch: Optional[int], rank: Optional[int] = None,
           labels: bool = False, start_step: StartStep = 0,
           threads: int = 4, sparse: bool = False) -> Loader:
    """This rank's batches of one epoch as numpy arrays (with sparse=True
    scipy.sparse.csr_matrix), read ahead by `threads` threads.

    @param mount a Mount or its path
    @param epoch the epoch; None for the step view: every listed epoch's
        batches from start_step on, one after the other (a start_step
        past their end is a ValueError)
    @param rank from env RANK and WORLD_SIZE when set (WORLD_SIZE must
        equal the mount's world_size), else this argument, else env
        SLURM_PROCID and SLURM_NTASKS (srun); may be left out on a
        world_size=1 mount
    @param labels yield (batch, labels) pairs (label/ files)
    @param start_step the global step to start at (step s is batch
        s mod nb of epoch s div nb); batches of the epoch before it are
        skipped. Or Mount.resume_point(step) of the mount that saved it,
        which may have another world size (Mount.resume_step)
    @param sparse read the batch/*.npz files of a CSR source instead of
        the dense .npy: each batch a scipy.sparse.csr_matrix of the same
        rows (float16 served as float32, as the .npz holds it; scipy is
        then needed); on a dense source a ValueError
    @return a Loader: iterate it (in order), len() it
    """
    m = as_mount(mount)
    r = resolve_rank(m, rank, None)
    return Loader(m, Steps(m, epoch, r, start_step, labels, sparse),
                  numpy_alloc, threads)
