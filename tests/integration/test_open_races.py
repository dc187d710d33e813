# SPDX-License-Identifier: MIT
"""Opens of one file's bytes through a real mount: racing each other, and
through its two names (a step file and its epoch file)."""
import errno
import os
import threading

from conftest import write_h5
from test_reliability import mounted_with_batch_0, rewrite_in_place


def open_errnos(paths, threads):
    """Opens each path from threads threads at once (a barrier before
    each open); returns the errno of every open (0: it opened)."""
    got = []
    lock = threading.Lock()
    barrier = threading.Barrier(threads)

    def opener():
        for p in paths:
            barrier.wait()
            try:
                fd = os.open(p, os.O_RDONLY)
            except OSError as e:
                code = e.errno
            else:
                code = 0
                os.close(fd)
            with lock:
                got.append(code)

    ts = [threading.Thread(target=opener) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return got


def test_concurrent_opens_of_a_failing_batch_all_fail(mounts, tmp_path):
    """A batch that cannot be generated fails every open of it with EIO,
    also opens that came while another open of it was generating it (they
    waited for that one and then opened, their reads each a failed
    generation)."""
    path, _, m, _ = mounted_with_batch_0(mounts, tmp_path)
    rewrite_in_place(str(path), "rewritten")
    paths = [m.file("batch", e, 0, k) for e in range(1, 6)
             for k in range(1, 20)]
    got = open_errnos(paths, 8)
    assert len(got) == 8 * len(paths)
    assert set(got) == {errno.EIO}, (got.count(0), len(got))


def test_step_file_closed_keeps_its_open_epoch_file(mounts, tmp_path):
    """A reads half a batch file through O_DIRECT (its reads reach
    rankfs, from the batch cache); B opens the step file of the same
    batch, whose bytes are the same cache entry, reads it and closes it;
    A reads the rest. The file (1 MB, above the eighth of the batch cache
    that closed files keep) is generated once, as when B opens the batch
    file itself (test_core.py's test_file_open_elsewhere_stays_at_a_close)."""
    import numpy as np
    import time
    x = np.arange(4000000, dtype=np.float32).reshape(4000, 1000)
    path = write_h5(str(tmp_path / "s.h5"), {"x": x})
    m = mounts(path, "dataset=/x,batch_size=256,prefetch=0,cache_mb=8")
    f = m.file("batch", 0, 0, 3)
    step = m.path("step/rank/0/000000003.npy")
    made = lambda: m.json("stats.json")["generation"]["batches"]
    with os.fdopen(os.open(f, os.O_RDONLY | os.O_DIRECT), "rb",
                   buffering=0) as a:
        size = os.fstat(a.fileno()).st_size
        first = a.read(size // 2)
        with open(step, "rb", buffering=0) as b:
            whole = b.read()
        time.sleep(0.2)  # B's release reaches rankfs after close()
        first += a.read()
    assert first == whole
    assert made() == 1
