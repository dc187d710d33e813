"""Opens of one file racing each other through a real mount."""
import errno
import os
import threading

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
