# SPDX-License-Identifier: MIT
"""rankfs.Mount: one mounted view, its JSON files and its file names."""
from __future__ import annotations

import contextlib
import errno
import json
import operator
import os
from typing import Any, Dict, Iterator, List, Optional, Union

EPOCH_LIMIT = 2**31
BATCH_MIN_WIDTH = 6
STEP_MIN_WIDTH = 9
KINDS = ("batch", "index", "label")
# config.json's keys that leave the rows of a global step as they are
# (world_size and batch_size are compared as their product).
NOT_SAMPLING = frozenset({"view_id", "world_size", "batch_size", "epochs",
                          "cache_mb", "prefetch", "threads", "log_file",
                          "open_timeout"})
# dataset.json's keys that a resumed mount must share (not the sources'
# paths, nor how this node reads them). Its fingerprint holds what
# var_join= or var_names= served, whose file's path may differ.
SAMPLED_DATA = ("fingerprint", "rows", "columns", "served_dtype",
                "filtered_rows", "label")


def _canonical_filter(f: str) -> str:
    """filter= COLUMN:V1|V2 as view_id sees it (config.c): its values
    sorted, repeats and empty ones dropped."""
    column, colon, values = f.partition(":")
    if not colon:
        return f
    return column + ":" + "|".join(sorted({v for v in values.split("|")
                                           if v}))


def _sampling(c: Dict[str, Any]) -> Dict[str, Any]:
    """config.json's options that change a global step's rows, as
    view_id sees them (config.c): those its strategy does not use left
    out, filter= canonical, var_names= (a path) left to dataset.json."""
    s = c.get("strategy")
    unused = set(NOT_SAMPLING) | {"partition", "var_names"}
    if s == "streaming":
        unused |= {"seed", "fetch_factor"}
    if s in ("streaming", "shuffle"):
        unused.add("block_size")
    if s != "class_balanced":
        unused.add("smoothing")
    out = {k: v for k, v in c.items() if k not in unused}
    if isinstance(out.get("filter"), list):
        out["filter"] = sorted({_canonical_filter(str(f))
                                for f in out["filter"]})
    return out


def _digits(n: int) -> int:
    return len(str(n))


def int_arg(name: str, value: Any) -> int:
    """value as an int, numpy's and torch's ints too. A bool, a float or
    a string is a TypeError naming the argument: True passed as a rank
    made paths of rank/True, 1.5 a rank that no file has."""
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TypeError(f"{name}={value!r}: an int, not "
                    f"{type(value).__name__}")


class MountGone(OSError):
    """The rankfs mount a loader started on is no longer at its path:
    unmounted, or another mount (other options, another view_id) put
    there, whose files are of another plan. errno is ESTALE; the message
    names the mount's path and view_id."""

    def __init__(self, message: str, filename: Optional[str] = None
                 ) -> None:
        super().__init__(errno.ESTALE, message, filename)
        self.message = message

    def __str__(self) -> str:
        return self.message


def _device(dev: int) -> str:
    return f"{os.major(dev)}:{os.minor(dev)}"


class Held:
    """The mount a loader's iteration started on, kept open (config.json)
    while it reads: each file a read opens must be on its device. Held
    open, the mount's device number stays its own after a lazy unmount,
    so no mount put there in the meantime can have the same one."""

    def __init__(self, mount: "Mount", dev: int) -> None:
        self.path, self.view_id, self.dev = mount.path, mount.view_id, dev

    def gone(self, path: str, why: str) -> MountGone:
        return MountGone(f"{self.path}: the rankfs mount this loader "
                         f"started on (view_id {self.view_id}) is gone: "
                         f"{why}; make a rankfs.Mount and a loader of the "
                         "mount there now to read it", path)

    def check(self, fd: int, path: str) -> None:
        """Raises MountGone where the open file fd (path) is not on the
        mount held: an fstat, nothing read."""
        dev = os.fstat(fd).st_dev
        if dev != self.dev:
            raise self.gone(path, f"{path} is on device {_device(dev)}, "
                            f"the mount was {_device(self.dev)}")

    def missing(self, e: OSError, path: str) -> OSError:
        """What an open of path that failed with e raises: MountGone where
        the mount's path is on another device now (unmounted, with
        nothing or something else there), else e."""
        try:
            dev = os.stat(self.path).st_dev
        except OSError:
            dev = None
        if dev == self.dev:
            return e
        return self.gone(path, f"{self.path} is no longer that mount")


class Mount:
    """A rankfs mount: its options, dataset and live counters, and the
    paths of its files.

    config.json and dataset.json are read once (they never change while
    the mount lives); stats.json is read again at every access of
    :attr:`stats`. Nothing here reads a batch.

    >>> m = rankfs.Mount("/mnt/atlas")
    >>> m.view_id, m.world_size, m.batches_per_rank
    ('88e9694888868d85', 2, 117)
    >>> np.load(m.batch_path(epoch=0, rank=1, k=5)).shape
    (256, 784)
    """

    def __init__(self, path: "os.PathLike[str] | str") -> None:
        self.path: str = os.path.abspath(os.fspath(path))
        try:
            self.config: Dict[str, Any] = self._json("config.json")
            self.dataset: Dict[str, Any] = self._json("dataset.json")
        except (FileNotFoundError, NotADirectoryError) as e:
            why = f"no {os.path.basename(e.filename)}"
            if not os.path.lexists(self.path):
                why = "no such directory"
            elif not os.path.isdir(self.path):
                why = "not a directory: give the mountpoint, not a source"
            raise ValueError(f"{self.path} is not a rankfs mount "
                             f"({why})") from None
        # Checked here, once: the collectives that compare ranks encode it
        # (rankfs.jax as two uint32), and a rank that raised there would
        # leave the others waiting.
        view_id = self.config.get("view_id")
        if not (isinstance(view_id, str) and len(view_id) == 16 and
                all(c in "0123456789abcdef" for c in view_id)):
            raise ValueError(f"{self.path} is not a rankfs mount (its "
                             f"config.json has no view_id of 16 hex "
                             f"digits: {view_id!r})")
        self._batches: Optional[int] = None
        self._var_names: Optional[List[str]] = None

    def __repr__(self) -> str:
        return f"rankfs.Mount({self.path!r})"

    def _json(self, name: str) -> Dict[str, Any]:
        """MOUNT/name, a JSON object; anything else is a ValueError
        naming the file (a directory that is not a mount may hold a
        config.json of its own)."""
        with open(os.path.join(self.path, name), "rb") as f:
            return self._parse(name, f.read())

    def _parse(self, name: str, text: bytes) -> Dict[str, Any]:
        try:
            value = json.loads(text)
        except ValueError as e:  # JSONDecodeError, UnicodeDecodeError
            raise ValueError(f"{self.path} is not a rankfs mount ({name} "
                             f"is not JSON: {e})") from None
        if not isinstance(value, dict):
            raise ValueError(f"{self.path} is not a rankfs mount ({name} "
                             f"holds a {type(value).__name__}, not an "
                             "object)")
        return value

    @contextlib.contextmanager
    def hold(self) -> Iterator[Held]:
        """This mount, kept open while a loader iterates: config.json is
        opened and its view_id compared with the one read at __init__
        (another mount put at the path since is a MountGone), and the
        file stays open until the block ends, so that the mount's device
        number is not given to another mount in the meantime.

        @return (as the with's value) the Held whose check(fd, path)
            each read makes of the files it opens
        """
        name = os.path.join(self.path, "config.json")
        try:
            f = open(name, "rb", buffering=0)
        except OSError as e:
            raise MountGone(f"{self.path}: the rankfs mount of view_id "
                            f"{self.view_id} is gone: {name}: "
                            f"{e.strerror}", name) from None
        with f:
            try:
                view_id = self._parse("config.json",
                                      f.read()).get("view_id")
            except ValueError:
                view_id = None
            if view_id != self.view_id:
                raise MountGone(
                    f"{self.path}: the rankfs mount of view_id "
                    f"{self.view_id} is gone: the mount there now serves "
                    + (f"view_id {view_id}" if isinstance(view_id, str)
                       else "no view_id") +
                    "; make a rankfs.Mount and a loader of it to read it",
                    name)
            yield Held(self, os.fstat(f.fileno()).st_dev)

    # config.json and dataset.json

    @property
    def view_id(self) -> str:
        """16 hex digits, a hash of the options and of a fingerprint of
        the sources (shape, dtype, first and last rows, var names; not
        every byte): mounts of the same source files with equal view_id
        serve equal bytes."""
        return self.config["view_id"]

    @property
    def world_size(self) -> int:
        return int(self.config["world_size"])

    @property
    def batch_size(self) -> int:
        return int(self.config["batch_size"])

    @property
    def epochs(self) -> int:
        """Epochs listed by ``ls epoch/`` (any epoch below 2^31 resolves)."""
        return int(self.config["epochs"])

    @property
    def columns(self) -> int:
        return int(self.dataset["columns"])

    @property
    def rows(self) -> int:
        """Rows of the sources (before filters)."""
        return int(self.dataset["rows"])

    @property
    def dtype(self) -> str:
        """The dtype of the batch files (numpy's name, e.g. 'float32')."""
        return self.dataset["served_dtype"]

    @property
    def is_csr(self) -> bool:
        """Whether the source is CSR (dataset.json's format), whose
        batches are also served as .npz files (:meth:`npz_path`)."""
        return self.dataset.get("format") == "csr"

    @property
    def has_labels(self) -> bool:
        """Whether label/ files exist (mounted with ``-o label=``)."""
        return self.dataset.get("label") is not None

    @property
    def label_categories(self) -> Optional[List[str]]:
        """The categories that label codes index, or None (no label, or
        integer labels, whose codes are their values)."""
        label = self.dataset.get("label")
        return None if label is None else label.get("categories")

    @property
    def var_names(self) -> Optional[List[str]]:
        """The served columns' names from var_names.txt, or None where the
        mount has no such file."""
        if self._var_names is None:
            try:
                # Lines end at "\n" alone: splitlines() would also split
                # a name at \x1c, \x85, U+2028 ...
                with open(os.path.join(self.path, "var_names.txt"),
                          encoding="utf-8", newline="\n") as f:
                    names = f.read().split("\n")
                self._var_names = names[:-1] if names[-1] == "" else names
            except FileNotFoundError:
                return None
        return self._var_names

    @property
    def stats(self) -> Dict[str, Any]:
        """stats.json, read now (its counters are live)."""
        return self._json("stats.json")

    @property
    def batches_per_rank(self) -> int:
        """Batches of every rank in every epoch (equal for all ranks).

        Found with a few lookups, not a full listing: the name
        width from the first entry of rank 0's batch/ of epoch 0, then a
        binary search on which batch files exist.
        """
        if self._batches is None:
            self._batches = self._count_batches()
        return self._batches

    def _count_batches(self) -> int:
        d = os.path.join(self.path, "epoch", "0", "rank", "0", "batch")
        width = None
        with os.scandir(d) as it:
            for entry in it:
                stem, ext = os.path.splitext(entry.name)
                if ext == ".npy" and stem.isdigit():
                    width = len(stem)
                    break
        if width is None:
            raise ValueError(f"{d} lists no batch file")

        def exists(k: int) -> bool:
            return os.path.exists(os.path.join(d, f"{k:0{width}d}.npy"))

        hi = 1
        while exists(hi):
            hi *= 2
        lo = hi // 2  # exists(lo) (batch 0 always does)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if exists(mid):
                lo = mid
            else:
                hi = mid
        return lo + 1

    @property
    def steps(self) -> int:
        """Steps of the listed epochs: epochs x batches_per_rank."""
        return self.epochs * self.batches_per_rank

    # resuming

    def resume_point(self, step: int) -> Dict[str, Any]:
        """What a checkpoint keeps to resume at global step `step` (a
        dict for JSON or pickle): the step, this mount's config.json and
        what its dataset.json says of the rows. Give it back to
        :meth:`resume_step` or as a loader's start_step, on this mount or
        on a mount of another world size."""
        try:
            k = operator.index(step)  # numpy's and torch's ints too
        except TypeError:
            k = -1
        if k < 0:
            raise ValueError(f"step={step!r}: an int >= 0")
        return {"step": k, "config": dict(self.config),
                "dataset": {k: self.dataset.get(k) for k in SAMPLED_DATA}}

    def resume_step(self, point: Dict[str, Any]) -> int:
        """The global step of `point` (resume_point's, on the mount that
        saved it) to resume at here. A mount of the same view_id takes
        it as it is. One of another world size takes it only where the
        step holds the same rows (elastic, docs/sampling.md): both
        partition=batch, equal world_size x batch_size, every other
        option that changes the files (not epochs, cache_mb, threads ...,
        nor those the strategy does not use; filters in any order;
        label= too, though it picks rows only for class_balanced) and the
        sources alike (var_names= by what it served, not its path);
        anything else is a ValueError naming what differs."""
        step, saved = int(point["step"]), point["config"]
        if saved.get("view_id") == self.view_id:
            return step
        c, why = self.config, []
        parts = (saved.get("partition"), c.get("partition"))
        if parts != ("batch", "batch"):
            why.append(f"partition={parts[0]} there, {parts[1]} here: only "
                       "partition=batch serves a global step's rows for "
                       "any world size")
        sizes = [(x["world_size"], x["batch_size"]) for x in (saved, c)]
        if sizes[0][0] * sizes[0][1] != sizes[1][0] * sizes[1][1]:
            why.append("world_size x batch_size = " + " there, ".join(
                f"{w} x {b} = {w * b}" for w, b in sizes) + " here")
        there, here = _sampling(saved), _sampling(c)
        for k in sorted(set(there) | set(here)):
            if there.get(k) != here.get(k):
                why.append(f"{k}={saved.get(k)} there, {c.get(k)} here")
        data = {k: self.dataset.get(k) for k in SAMPLED_DATA}
        for k in SAMPLED_DATA:
            if point["dataset"].get(k) != data[k]:
                why.append(f"dataset.json's {k} differs")
        if why:
            raise ValueError(
                f"step {step} of view {saved.get('view_id')} (world_size "
                f"{sizes[0][0]}) cannot be resumed on {self.path} (view "
                f"{self.view_id}, world_size {sizes[1][0]}): it holds other "
                "rows here: " + "; ".join(why))
        return step

    # file names

    def _check(self, epoch: int, rank: int, k: int, kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind {kind!r}: expected one of {KINDS}")
        if not 0 <= epoch < EPOCH_LIMIT:
            raise IndexError(f"epoch {epoch} out of range [0, 2^31)")
        if not 0 <= rank < self.world_size:
            raise IndexError(f"rank {rank} out of range "
                             f"[0, {self.world_size})")
        if not 0 <= k < self.batches_per_rank:
            raise IndexError(f"batch {k} out of range "
                             f"[0, {self.batches_per_rank})")

    def batch_path(self, epoch: int, rank: int, k: int,
                   kind: str = "batch") -> str:
        """MOUNT/epoch/E/rank/R/KIND/NNNNNN.npy: batch k of rank in epoch
        (kind 'batch', 'index' or 'label')."""
        epoch, rank = int_arg("epoch", epoch), int_arg("rank", rank)
        k = int_arg("k", k)
        self._check(epoch, rank, k, kind)
        width = max(BATCH_MIN_WIDTH, _digits(self.batches_per_rank - 1))
        return os.path.join(self.path, "epoch", str(epoch), "rank",
                            str(rank), kind, f"{k:0{width}d}.npy")

    def npz_path(self, epoch: int, rank: int, k: int) -> str:
        """MOUNT/epoch/E/rank/R/batch/NNNNNN.npz: batch k's rows as CSR
        (scipy.sparse.load_npz reads it); CSR sources only, elsewhere a
        ValueError."""
        return self._npz(self.batch_path(epoch, rank, k))

    def _npz(self, npy: str) -> str:
        if not self.is_csr:
            raise ValueError(
                f"{self.path} has no .npz files: its source is "
                f"{self.dataset.get('format')} (dataset.json's format), "
                "not csr; read the .npy batches")
        return npy[:-len(".npy")] + ".npz"

    def index_path(self, epoch: int, rank: int, k: int) -> str:
        """The int64 global row ids of batch k, in row order."""
        return self.batch_path(epoch, rank, k, "index")

    def label_path(self, epoch: int, rank: int, k: int) -> str:
        """The int64 label codes of batch k, in row order."""
        if not self.has_labels:
            raise ValueError(f"{self.path} has no label/ files (mount "
                             "with -o label=COLUMN)")
        return self.batch_path(epoch, rank, k, "label")

    def step_path(self, rank: int, step: int, kind: str = "batch") -> str:
        """MOUNT/step/rank/R/NNNNNNNNN.npy (or its index/ or label/ file):
        step k is batch k mod nb of epoch k div nb."""
        step, rank = int_arg("step", step), int_arg("rank", rank)
        nb = self.batches_per_rank
        epoch, k = divmod(step, nb)
        self._check(epoch, rank, k, kind)
        width = max(STEP_MIN_WIDTH, _digits(max(self.steps - 1, 0)))
        if _digits(step) > width:
            raise IndexError(f"step {step} has more than the {width} "
                             "digits of the step view's names")
        d = os.path.join(self.path, "step", "rank", str(rank))
        if kind != "batch":
            d = os.path.join(d, kind)
        return os.path.join(d, f"{step:0{width}d}.npy")

    def step_npz_path(self, rank: int, step: int) -> str:
        """MOUNT/step/rank/R/NNNNNNNNN.npz: step's batch as CSR, the
        same bytes as that epoch's .npz; CSR sources only."""
        return self._npz(self.step_path(rank, step))


MountLike = Union[Mount, str, "os.PathLike[str]"]


def as_mount(mount: MountLike) -> Mount:
    return mount if isinstance(mount, Mount) else Mount(mount)
