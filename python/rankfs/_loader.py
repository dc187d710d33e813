# SPDX-License-Identifier: MIT
"""The loader every framework module returns: ordered, threaded reads of
one rank's batch files, each converted for the framework."""
from __future__ import annotations

import functools
from typing import Any, Callable, Iterator, Optional

from ._mount import Mount, int_arg
from ._read import Alloc, Steps, ordered_map, read_pair


def _identity(item: Any) -> Any:
    return item


class Loader:
    """An iterable over one rank's batches, read ahead by a thread pool.

    Iterating yields each batch (or (batch, labels)) in step order, a
    sparse one where the steps name .npz files (sparse=True); at
    most 2 x threads files are read ahead of the one being consumed.
    ``len()`` is the number of batches an iteration yields (those from
    start_step to the end of the epoch, or of the listed epochs for the
    step view). Each iteration starts again at start_step.

    An iteration holds the mount open (Mount.hold) and checks that each
    file it opens is on it (an fstat): a mount put at the path since the
    Mount was made, or while the loader iterates, is a MountGone naming
    it where the first file of it is reached, not batches of its plan.
    """

    def __init__(self, mount: Mount, steps: Steps, alloc: Alloc,
                 threads: int,
                 convert: Optional[Callable[[Any], Any]] = None,
                 to_sparse: Optional[Callable[[Any], Any]] = None) -> None:
        threads = int_arg("threads", threads)
        if threads < 1:
            raise ValueError(f"threads={threads}: must be >= 1")
        self.mount = mount
        self.steps = steps
        self.rank = steps.rank
        self.epoch = steps.epoch
        self.threads = threads
        self.sparse = steps.sparse
        # Sparse steps name .npz files: read as csr_matrix, then made the
        # framework's (on the reading thread) by to_sparse.
        self._read = functools.partial(
            read_pair, alloc=alloc,
            to_sparse=(to_sparse or _identity) if steps.sparse else None)
        self._convert = convert or _identity

    @property
    def start_step(self) -> int:
        """The global step of the first batch an iteration yields."""
        return self.steps.first

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self) -> Iterator[Any]:
        with self.mount.hold() as held:
            read = functools.partial(self._read, held=held)
            for item in ordered_map(read, self.steps, self.threads,
                                    2 * self.threads):
                yield self._convert(item)

    def __repr__(self) -> str:
        return (f"<rankfs loader {self.mount.path} epoch={self.epoch} "
                f"rank={self.rank} steps [{self.steps.first}, "
                f"{self.steps.end})>")
