"""rankfs for JAX: the threaded loader, yielding jax arrays.

    import rankfs, rankfs.jax
    for x, y in rankfs.jax.loader("/mnt/atlas", epoch, labels=True):
        state = train_step(state, x, y)

The rank is jax.process_index() when jax runs several processes
(jax.distributed.initialize), whose count must equal the mount's
world_size; else env RANK and WORLD_SIZE, else the argument.
"""
from __future__ import annotations

from typing import Any, Optional, Tuple

import jax
import numpy as np

from ._loader import Loader, MountLike, as_mount
from ._mount import Mount
from ._read import Steps, numpy_alloc, resolve_rank, view_id_mismatch

__all__ = ["loader", "detect_rank", "check_view_id"]


def detect_rank(mount: MountLike, rank: Optional[int] = None) -> int:
    """jax.process_index() when jax.process_count() > 1 (which must equal
    the mount's world_size), else env RANK/WORLD_SIZE, else `rank`."""
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
    if jax.process_count() < 2:
        return
    m, error = None, None
    try:
        m = as_mount(mount)
    except Exception as e:  # raised after the collective (_agree)
        error = e
    _agree(m, error)


def _agree(m: Optional[Mount], error: Optional[Exception]) -> None:
    """All-gathers each process's view_id and whether its own checks
    failed; then every process raises: its own error, else one naming
    the ranks that failed, else a view_id mismatch. A process that
    raised before the collective would leave the others waiting."""
    from jax.experimental import multihost_utils
    # Two uint32 halves (without jax_enable_x64 a uint64 would be cut),
    # then 1 where this process's checks failed.
    mine = np.zeros(3, dtype=np.uint32)
    if m is not None:
        mine[:2] = np.frombuffer(bytes.fromhex(m.view_id), dtype=np.uint32)
    mine[2] = error is not None
    every = np.asarray(multihost_utils.process_allgather(mine)).reshape(-1, 3)
    if error is not None:
        raise error
    failed = [str(r) for r, row in enumerate(every) if row[2]]
    if failed:
        raise ValueError(f"rank {', '.join(failed)} could not make its "
                         "loader (its own error says why)")
    gathered = [(row[:2].astype(np.uint32).tobytes().hex(), None)
                for row in every]
    message = view_id_mismatch(gathered)
    if message:
        raise ValueError(message + f" (this is {m.path})")


def _checked_rank(mount: MountLike, rank: Optional[int]
                  ) -> Tuple[Mount, int]:
    """detect_rank() then check_view_id(), as one collective with several
    processes: a process whose own checks fail still joins it."""
    if jax.process_count() < 2:
        m = as_mount(mount)
        return m, detect_rank(m, rank)
    m, r, error = None, -1, None
    try:
        m = as_mount(mount)
        r = detect_rank(m, rank)
    except Exception as e:  # raised after the collective (_agree)
        error = e
    _agree(m, error)
    return m, r


def loader(mount: MountLike, epoch: Optional[int], rank: Optional[int] = None,
           labels: bool = False, start_step: int = 0, threads: int = 4,
           device: Optional[Any] = None) -> Loader:
    """This process's batches of one epoch as jax arrays (with their
    int64 label codes when labels is set), read by `threads` threads
    into numpy buffers and put on `device` (default: jax's default
    device) in order. start_step and epoch=None as in
    rankfs.torch.loader; len() is the batches it yields."""
    m, r = _checked_rank(mount, rank)

    def put(item: Any) -> Any:
        if isinstance(item, tuple):
            return tuple(jax.device_put(a, device) for a in item)
        return jax.device_put(item, device)
    return Loader(m, Steps(m, epoch, r, start_step, labels), numpy_alloc,
                  threads, put)
