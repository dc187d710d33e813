# SPDX-License-Identifier: MIT
"""rankfs for JAX: the threaded loader, yielding jax arrays.

    import rankfs, rankfs.jax
    for x, y in rankfs.jax.loader("/mnt/atlas", epoch, labels=True):
        state = train_step(state, x, y)

The rank is jax.process_index() when jax runs several processes
(jax.distributed.initialize), whose count must equal the mount's
world_size; else env RANK and WORLD_SIZE, else the argument, else env
SLURM_PROCID and SLURM_NTASKS.
"""
from __future__ import annotations

from typing import Any, List, Optional

import jax
import numpy as np

from ._loader import Loader
from ._mount import MountLike, as_mount
from ._read import (StartStep, Steps, agree_across_ranks, numpy_alloc,
                    resolve_rank)

__all__ = ["loader", "detect_rank", "check_view_id"]


def detect_rank(mount: MountLike, rank: Optional[int] = None) -> int:
    """jax.process_index() when jax.process_count() > 1 (which must equal
    the mount's world_size), else env RANK/WORLD_SIZE, else `rank`, else
    env SLURM_PROCID/SLURM_NTASKS."""
    m = as_mount(mount)
    found = None
    if jax.process_count() > 1:
        found = (jax.process_index(), jax.process_count(),
                 "jax.process_count()")
    return resolve_rank(m, rank, found)


def check_view_id(mount: MountLike) -> None:
    """With several jax processes: compares every process's view_id (a
    collective, through multihost_utils) and raises ValueError naming the
    ranks if they differ."""
    if jax.process_count() > 1:
        agree_across_ranks(mount, None, None, _gather)


def _gather(mine: tuple) -> List[tuple]:
    """agree_across_ranks's collective: the view_id as two uint32 halves
    (without jax_enable_x64 a uint64 would be cut) and 1 where a rank's
    checks failed; other ranks' paths and errors stay with them."""
    from jax.experimental import multihost_utils
    row = np.zeros(3, dtype=np.uint32)
    if mine[0] is not None:
        row[:2] = np.frombuffer(bytes.fromhex(mine[0]), dtype=np.uint32)
    row[2] = mine[2] is not None
    every = np.asarray(multihost_utils.process_allgather(row)).reshape(-1, 3)
    me = jax.process_index()
    return [(r[:2].astype(np.uint32).tobytes().hex(),
             mine[1] if k == me else None,
             "see its own error" if r[2] else None)
            for k, r in enumerate(every)]


def loader(mount: MountLike, epoch: Optional[int], rank: Optional[int] = None,
           labels: bool = False, start_step: StartStep = 0, threads: int = 4,
           device: Optional[Any] = None) -> Loader:
    """This process's batches of one epoch as jax arrays (with their
    label codes when labels is set), read by `threads` threads into
    numpy buffers and put on `device` (default: jax's default device)
    in order. jax_enable_x64 off (jax's default), device_put makes the
    int64 codes int32 and float64 batches float32, as jax does with
    every 64-bit array. start_step and epoch=None as in
    rankfs.torch.loader; len() is the batches it yields."""
    m, r = agree_across_ranks(mount, rank, detect_rank,
                              _gather if jax.process_count() > 1 else None)

    def put(item: Any) -> Any:
        if isinstance(item, tuple):
            return tuple(jax.device_put(a, device) for a in item)
        return jax.device_put(item, device)
    return Loader(m, Steps(m, epoch, r, start_step, labels), numpy_alloc,
                  threads, put)
