# SPDX-License-Identifier: MIT
"""Reading batch files into buffers the caller allocates, on a thread
pool, in order: the part the framework loaders share.

A batch file is a .npy: a header, then the array's bytes. The header is
parsed here and the data part read with ``readinto`` straight into the
caller's buffer (a pinned tensor's memory, a numpy array): one copy, from
the kernel into that buffer, and the read releases the GIL, so threads
read several files at once. A CSR source's .npz batch (sparse=True) is
read by scipy.sparse.load_npz from its path: as fast as reading the
file whole first and loading from memory (docs/usage.md).
"""
from __future__ import annotations

import ast
import collections
import concurrent.futures
import os
from typing import (Any, Callable, Dict, Iterable, Iterator, List,
                    Optional, Sequence, Tuple, TypeVar, Union)

import numpy as np

from ._mount import Held, Mount, MountLike, as_mount, int_arg

MAGIC = b"\x93NUMPY"
T = TypeVar("T")
R = TypeVar("R")

# A global step, or Mount.resume_point's dict holding one.
StartStep = Union[int, Dict[str, Any]]
# (buffer handed back to the caller, its numpy view that the bytes go into)
Alloc = Callable[[Tuple[int, ...], np.dtype], Tuple[Any, np.ndarray]]


def read_header(f: Any, path: str) -> Tuple[Tuple[int, ...], np.dtype, int]:
    """Parses the .npy header of the open file f.

    @return (shape, dtype, offset of the data part)
    """
    pre = f.read(128)  # rankfs's headers take 128 bytes, np.save's 128 too
    if pre[:6] != MAGIC or len(pre) < 10:
        raise ValueError(f"{path}: not a .npy file")
    major = pre[6]
    if major == 1:
        start, hlen = 10, int.from_bytes(pre[8:10], "little")
    elif major in (2, 3):
        start, hlen = 12, int.from_bytes(pre[8:12], "little")
    else:
        raise ValueError(f"{path}: .npy version {major} unknown")
    end = start + hlen
    if len(pre) < end:
        pre += f.read(end - len(pre))
    header = ast.literal_eval(pre[start:end].decode("latin1"))
    if header.get("fortran_order"):
        raise ValueError(f"{path}: Fortran order is not read here")
    dtype = np.lib.format.descr_to_dtype(header["descr"])
    if dtype.hasobject:
        raise ValueError(f"{path}: object arrays are not read here")
    return tuple(header["shape"]), dtype, end


def _open(path: str, held: Optional[Held], buffering: int = -1) -> Any:
    """path opened for reading; with held, a file of the mount held
    (else MountGone)."""
    try:
        f = open(path, "rb", buffering=buffering)
    except OSError as e:
        if held is None:
            raise
        raise held.missing(e, path) from None
    if held is not None:
        try:
            held.check(f.fileno(), path)
        except BaseException:
            f.close()
            raise
    return f


def read_npy(path: str, alloc: Alloc, held: Optional[Held] = None) -> Any:
    """Reads the .npy file at path into a buffer from alloc(shape, dtype).

    @param held the mount the file must be on (Mount.hold), or None
    @return the buffer alloc returned, filled; an OSError of a read (EIO
        where the mount could not make the batch) names the file; a file
        not on held's mount is a MountGone
    """
    try:
        return _read_npy(path, alloc, held)
    except OSError as e:
        if e.filename is not None:
            raise
        # read() and readinto() raise without the file's name.
        raise OSError(e.errno, e.strerror, path) from e


def _read_npy(path: str, alloc: Alloc, held: Optional[Held]) -> Any:
    with _open(path, held, buffering=0) as f:
        shape, dtype, offset = read_header(f, path)
        buf, view = alloc(shape, dtype)
        if view.shape != shape or view.dtype != dtype:
            raise AssertionError(f"alloc gave {view.shape} {view.dtype} "
                                 f"for {shape} {dtype}")
        f.seek(offset)
        mem = memoryview(view.reshape(-1)).cast("B")
        got = 0
        while got < len(mem):
            n = f.readinto(mem[got:])
            if not n:
                raise ValueError(f"{path}: {len(mem) - got} bytes short "
                                 f"of its shape {shape}")
            got += n
    return buf


def read_npz(path: str, held: Optional[Held] = None) -> Any:
    """The .npz file at path (a CSR batch) as a scipy.sparse.csr_matrix.

    @param held the mount the file must be on (Mount.hold), or None
    @return the matrix; an OSError of a read names the file; a file not
        on held's mount is a MountGone
    """
    import scipy.sparse  # only where sparse batches are read
    try:
        # load_npz opens a path as open(path, "rb") would.
        with _open(path, held) as f:
            x = scipy.sparse.load_npz(f)
    except OSError as e:
        if e.filename is not None:
            raise
        raise OSError(e.errno, e.strerror, path) from e
    if not isinstance(x, scipy.sparse.csr_matrix):
        raise ValueError(f"{path}: a {x.format} matrix, not CSR")
    return x


def numpy_alloc(shape: Tuple[int, ...], dtype: np.dtype
                ) -> Tuple[np.ndarray, np.ndarray]:
    a = np.empty(shape, dtype)
    return a, a


def ordered_map(fn: Callable[[T], R], items: Iterable[T], threads: int,
                depth: int) -> Iterator[R]:
    """fn over items on `threads` threads, results in the items' order,
    at most `depth` submitted ahead of the one being consumed. Leaving
    the iteration early cancels what has not started and waits for the
    reads under way."""
    if threads < 1 or depth < 1:
        raise ValueError(f"threads={threads}, depth={depth}: need >= 1")
    pool = concurrent.futures.ThreadPoolExecutor(
        threads, thread_name_prefix="rankfs-read")
    pending: collections.deque = collections.deque()
    items = iter(items)
    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= depth:
                break
        while pending:
            result = pending.popleft().result()
            for item in items:
                pending.append(pool.submit(fn, item))
                break
            yield result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


class Steps:
    """The files a loader reads: rank's batches of one epoch from a
    global step on, or, with epoch None, the step view from start_step
    to the end of the listed epochs.

    Global step s is batch s mod nb of epoch s div nb (nb batches per
    rank and epoch), as in MOUNT/step/rank/R/.
    """

    def __init__(self, mount: Mount, epoch: Optional[int], rank: int,
                 start_step: StartStep, labels: bool,
                 sparse: bool = False) -> None:
        if sparse and not mount.is_csr:
            raise ValueError(
                f"sparse=True but {mount.path} has no .npz files: its "
                f"source is {mount.dataset.get('format')} (dataset.json's "
                "format), not csr; read its dense .npy batches "
                "(sparse=False)")
        if isinstance(start_step, dict):  # Mount.resume_point's
            start_step = mount.resume_step(start_step)
        start_step = int_arg("start_step", start_step)
        if epoch is not None:
            epoch = int_arg("epoch", epoch)
        if start_step < 0:
            raise ValueError(f"start_step={start_step}: must be >= 0")
        if labels and not mount.has_labels:
            raise ValueError(f"labels=True but {mount.path} has no label/ "
                             "files (mount with -o label=COLUMN)")
        nb = mount.batches_per_rank
        self.mount, self.epoch, self.rank = mount, epoch, rank
        self.labels, self.sparse = labels, sparse
        if epoch is None:
            # Silently empty, a resumed job would end at once.
            if start_step > mount.steps:
                raise ValueError(
                    f"start_step={start_step} is past the end of the step "
                    f"view's listed epochs ({mount.epochs} x {nb} = "
                    f"{mount.steps} steps): mount with a larger -o epochs= "
                    "or give the epoch")
            self.first, self.end = start_step, mount.steps
        else:
            if not 0 <= epoch < 2**31:
                raise IndexError(f"epoch {epoch} out of range [0, 2^31)")
            self.first = min(max(start_step, epoch * nb), (epoch + 1) * nb)
            self.end = (epoch + 1) * nb

    def __len__(self) -> int:
        return self.end - self.first

    def path(self, step: int, kind: str) -> str:
        """The file of kind ('batch', 'label') that step is read from:
        a batch's .npz where the steps are sparse."""
        if self.epoch is None:
            path = self.mount.step_path(self.rank, step, kind)
        else:
            nb = self.mount.batches_per_rank
            path = self.mount.batch_path(self.epoch, self.rank, step % nb,
                                         kind)
        if self.sparse and kind == "batch":
            return path[:-len(".npy")] + ".npz"
        return path

    def pair(self, step: int) -> Tuple[str, Optional[str]]:
        """(batch file, label file or None) of step."""
        return (self.path(step, "batch"),
                self.path(step, "label") if self.labels else None)

    def __iter__(self) -> Iterator[Tuple[str, Optional[str]]]:
        for step in range(self.first, self.end):
            yield self.pair(step)


def read_pair(pair: Tuple[str, Optional[str]], alloc: Alloc,
              to_sparse: Optional[Callable[[Any], Any]] = None,
              held: Optional[Held] = None) -> Any:
    """One batch (and its labels when the pair names a label file). With
    to_sparse the batch is a .npz, handed to it as a csr_matrix. With
    held, each file must be on that mount (else MountGone)."""
    if to_sparse is None:
        x = read_npy(pair[0], alloc, held)
    else:
        x = to_sparse(read_npz(pair[0], held))
    if pair[1] is None:
        return x
    return x, read_npy(pair[1], alloc, held)


def _env_int(name: str) -> int:
    value = os.environ[name]
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"env {name}={value!r} is not an integer") from None


# Environment variables that say (rank, world size): torchrun's (or set
# per process by hand where Debian 12's torchrun fails: docs/usage.md,
# "Starting the ranks without torchrun"), then Slurm's (srun sets them
# in every task).
ENV_PAIRS = (("RANK", "WORLD_SIZE"), ("SLURM_PROCID", "SLURM_NTASKS"))


def _env_pair(names: Tuple[str, str], rank: Optional[int], world: int
              ) -> Optional[Tuple[int, int, str]]:
    if not all(n in os.environ for n in names):
        return None
    found = (_env_int(names[0]), _env_int(names[1]),
             f"env {names[0]}/{names[1]}")
    # Slurm's are set in every process of an allocation, a batch script's
    # own too (SLURM_PROCID=0, SLURM_NTASKS the tasks it asked for): an
    # explicit rank= wins, and a pair whose world size is not the mount's
    # is not srun's for this mount.
    if names[0] == "SLURM_PROCID" and (rank is not None or
                                       found[1] != world):
        return None
    return found


def resolve_rank(mount: Mount, rank: Optional[int],
                 detected: Optional[Tuple[int, int, str]]) -> int:
    """This process's rank, from `detected` (rank, world size, where they
    came from), else env RANK and WORLD_SIZE (torchrun), else the
    argument (with the mount's world size), else env SLURM_PROCID and
    SLURM_NTASKS (srun). A world size that differs from the mount's, or
    an argument that differs from the detected rank, is a ValueError; an
    argument that is not an int (True, 1.5) a TypeError."""
    if rank is not None:
        rank = int_arg("rank", rank)
    for names in ENV_PAIRS:
        if detected is None:
            detected = _env_pair(names, rank, mount.world_size)
    world = mount.world_size
    if detected is None and "WORLD_SIZE" in os.environ:
        # RANK missing, WORLD_SIZE still says how many ranks the job
        # has: a mount split for another number is not this job's.
        detected_world = _env_int("WORLD_SIZE")
        if detected_world != world:
            raise ValueError(
                f"world size {detected_world} (from env WORLD_SIZE) differs "
                f"from the mount's world_size {world} ({mount.path}/"
                f"config.json): mount with -o world_size={detected_world}")
    if detected is not None:
        found, found_world, source = detected
        if found_world != world:
            raise ValueError(
                f"world size {found_world} (from {source}) differs from the "
                f"mount's world_size {world} ({mount.path}/config.json): "
                f"mount with -o world_size={found_world}")
        if rank is not None and rank != found:
            raise ValueError(f"rank={rank} given, but {source} says this "
                             f"process is rank {found}")
        rank = found
    elif rank is None:
        if world != 1:
            alone = [f"env {a} is set, without {b}"
                     for pair in ENV_PAIRS for a, b in (pair, pair[::-1])
                     if a in os.environ and b not in os.environ]
            if "SLURM_PROCID" in os.environ and \
                    "SLURM_NTASKS" in os.environ:
                alone.append(f"env SLURM_NTASKS={os.environ['SLURM_NTASKS']}"
                             " is not the mount's world size: not used")
            raise ValueError(
                f"{mount.path} has world_size {world}: give rank=, set env "
                "RANK and WORLD_SIZE, run under srun or start a process "
                "group" + (f" ({'; '.join(alone)})" if alone else ""))
        rank = 0
    if not 0 <= rank < world:
        raise ValueError(f"rank {rank} out of range [0, {world}) for "
                         f"{mount.path}")
    return rank


def agree_across_ranks(mount: MountLike,
                       rank: Optional[int],
                       detect: Optional[Callable[[Mount, Optional[int]],
                                                 int]],
                       gather: Optional[Callable[[tuple], List[tuple]]]
                       ) -> Tuple[Mount, int]:
    """This process's mount and rank (detect(mount, rank); -1 without
    detect), compared with every rank's. gather(mine) is the collective:
    it takes this rank's (view_id, path, error text or None) and returns
    every rank's, in rank order; None: no other ranks, nothing compared.
    A rank whose own checks fail still takes part, then every rank
    raises: its own error, else one naming the ranks that failed, else
    a view_id mismatch. A rank that raised before the collective would
    leave the others waiting for it until the group's timeout."""
    if gather is None:
        m = as_mount(mount)
        return m, detect(m, rank) if detect else -1
    m, r, error = None, -1, None
    try:
        m = as_mount(mount)
        r = detect(m, rank) if detect else -1
        mine: tuple = (m.view_id, m.path, None)
    except Exception as e:  # raised after the collective
        error = e
        mine = (None, str(getattr(mount, "path", mount)),
                f"{type(e).__name__}: {e}")
    got = gather(mine)
    if error is not None:
        raise error
    failed = [f"rank {k}" + (f" ({p})" if p else "") + f": {e}"
              for k, (_, p, e) in enumerate(got) if e]
    if failed:
        raise ValueError("another rank's checks failed: " +
                         "; ".join(failed))
    message = view_id_mismatch([(v, p) for v, p, _ in got])
    if message:
        raise ValueError(message)
    return m, r


def view_id_mismatch(gathered: Sequence[Tuple[str, Optional[str]]]
                     ) -> Optional[str]:
    """gathered[r] = (view_id, mount path or None) of rank r. @return the error
    message if the ranks do not all have one view_id, else None."""
    groups: dict = {}
    for r, (view_id, path) in enumerate(gathered):
        groups.setdefault(view_id, []).append((r, path))
    if len(groups) < 2:
        return None
    parts: List[str] = []
    for view_id, members in groups.items():
        ranks = ", ".join(str(r) for r, _ in members)
        paths = ", ".join(sorted({p for _, p in members if p}))
        who = f"rank {ranks} has" if len(members) == 1 else \
            f"ranks {ranks} have"
        parts.append(f"{who} {view_id}" + (f" ({paths})" if paths else ""))
    return ("view_id differs across ranks: " + "; ".join(parts) +
            ": mount the same source with the same options everywhere")
