# SPDX-License-Identifier: MIT
"""Shared helpers for the integration tests: real rankfs mounts of files
written by h5py and anndata.

Every mount is made through `mounts` (a fixture): it starts the daemon in
the foreground, waits for the mount with a deadline, and at teardown
unmounts with fusermount3 -u and asserts that the daemon exited 0, whatever
the test did in between.
"""
import ctypes
import json
import mmap
import os
import signal
import subprocess
import sys
import threading
import time

import h5py
import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
RANKFS = os.environ.get("RANKFS_BIN", os.path.join(REPO, "build/rankfs"))
RANKFS_PLAN = os.environ.get("RANKFS_PLAN",
                             os.path.join(REPO, "build/rankfs-plan"))
# No default: a default would be build/'s, beside build-asan/'s rankfs.
RANKFS_CAT = os.environ.get("RANKFS_CAT")
# The rankfs Python package: the installed copy scripts/test names in
# RANKFS_PYTHONPATH, else the source tree's. Exported in PYTHONPATH too,
# so that the examples and processes the tests start import the same one.
PYTHON_PACKAGES = os.environ.get("RANKFS_PYTHONPATH",
                                 os.path.join(REPO, "python"))
sys.path.insert(0, PYTHON_PACKAGES)
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (PYTHON_PACKAGES, os.environ.get("PYTHONPATH")) if p)
MOUNT_DEADLINE = 20.0
EXIT_DEADLINE = 20.0


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "serial: looks at the whole machine (the page cache), "
        "so scripts/test runs it alone, not beside other workers")
    # Fail loudly instead of skipping: a suite that cannot run must not pass.
    for tool in (RANKFS, RANKFS_PLAN) + ((RANKFS_CAT,) if RANKFS_CAT else ()):
        if not os.access(tool, os.X_OK):
            raise pytest.UsageError(f"{tool} is missing: build first "
                                    "(scripts/build)")
    if not os.path.exists("/dev/fuse"):
        raise pytest.UsageError("/dev/fuse is missing")


def covering(cases):
    """cases, pairs (a, b) of a cross product; with the sanitized daemon
    (RANKFS_SANITIZED), only those that hold each a and each b once at
    least. The daemon's code a source runs depends on the source, what a
    sampling runs on the sampling: the plain pass runs every pair, and
    the unit tests under ASan every sampling (docs/testing.md measures
    that the cut covers the same lines)."""
    cases = list(cases)
    if not os.environ.get("RANKFS_SANITIZED"):
        return cases
    seen_a, seen_b, kept = set(), set(), []
    # Diagonals first, so that each a meets another b.
    firsts = list(dict.fromkeys(a for a, _ in cases))
    seconds = list(dict.fromkeys(b for _, b in cases))
    for a, b in sorted(cases, key=lambda c: (seconds.index(c[1]) -
                                             firsts.index(c[0])) %
                       len(seconds)):
        if a not in seen_a or b not in seen_b:
            kept.append((a, b))
            seen_a.add(a)
            seen_b.add(b)
    return [c for c in cases if c in kept]


def unescape(field):
    """A path as /proc/self/mounts and mountinfo write it: space, tab,
    newline and backslash as \\ooo (octal)."""
    return field.encode().decode("unicode_escape")


def is_mounted(path):
    return mount_entry(path) is not None


def mount_entry(path):
    """The /proc/self/mounts fields of the mount at path, or None."""
    real = os.path.realpath(path)
    # Fields are bytes: a source's name (fsname) need not be UTF-8.
    with open("/proc/self/mounts", errors="surrogateescape") as f:
        for line in f:
            fields = line.split()
            if unescape(fields[1]) == real:
                return fields
    return None


class Mount:
    """A running rankfs daemon and its mountpoint."""

    def __init__(self, mnt, proc, log):
        self.mnt = mnt
        self.proc = proc
        self.log = log
        self.exit_code = None

    def path(self, *parts):
        return os.path.join(self.mnt, *(str(p) for p in parts))

    def json(self, name):
        with open(self.path(name)) as f:
            return json.load(f)

    def file(self, kind, epoch, rank, batch):
        width = max(6, len(str(self.batches() - 1)))
        return self.path("epoch", epoch, "rank", rank, kind,
                         f"{batch:0{width}d}.npy")

    def load(self, kind, epoch, rank, batch, **kw):
        return np.load(self.file(kind, epoch, rank, batch), **kw)

    def batches(self):
        if not hasattr(self, "_batches"):
            self._batches = sum(n.endswith(".npy") for n in os.listdir(
                self.path("epoch/0/rank/0/batch")))
        return self._batches

    def epoch_index(self, epoch, rank):
        """Every index file of rank in epoch, in batch order."""
        return [self.load("index", epoch, rank, k)
                for k in range(self.batches())]

    def log_text(self):
        with open(self.log) as f:
            return f.read()

    def unmount(self):
        """Unmounts and waits for the daemon; returns its exit code."""
        if self.exit_code is not None:
            return self.exit_code
        if is_mounted(self.mnt):
            subprocess.run(["fusermount3", "-u", self.mnt], check=False)
        try:
            self.exit_code = self.proc.wait(timeout=EXIT_DEADLINE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            self.exit_code = "hung"
        return self.exit_code


def start_daemon(mnt, sources, options, extra=(), log=None, preexec=None):
    args = [RANKFS, "-f"]
    if options:
        args += ["-o", options]
    args += list(extra) + [str(s) for s in sources] + [mnt]
    out = open(log, "w")
    return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                            preexec_fn=preexec)


def wait_mounted(mnt, proc, log):
    """Until the mount answers a request: the daemon finishes setting up
    (the 1 MiB readahead, for one) after the mount appears and before it
    serves."""
    deadline = time.monotonic() + MOUNT_DEADLINE
    while time.monotonic() < deadline:
        if is_mounted(mnt):
            # In a process of its own: a daemon stuck before it serves
            # would hold this one's stat for good.
            try:
                asked = subprocess.run(
                    ["stat", "-c", "%s", os.path.join(mnt, "config.json")],
                    capture_output=True, text=True,
                    timeout=max(1, deadline - time.monotonic()))
                answer = asked.stderr if asked.returncode else None
            except subprocess.TimeoutExpired:
                answer = "no answer"
            if answer is None:
                return
            proc.kill()
            with open(log) as f:
                raise AssertionError(f"{mnt} mounted but does not answer "
                                     f"({answer.strip()}): {f.read()}")
        if proc.poll() is not None:
            with open(log) as f:
                raise AssertionError(f"rankfs exited {proc.returncode} "
                                     f"before mounting: {f.read()}")
        time.sleep(0.02)
    proc.kill()
    raise AssertionError(f"rankfs did not mount {mnt} within "
                         f"{MOUNT_DEADLINE} s")


@pytest.fixture
def mounts(tmp_path):
    """Factory: mounts(sources, options) -> Mount, unmounted at teardown."""
    made = []
    counter = [0]

    def make(sources, options="", extra=(), name=None, preexec=None):
        if isinstance(sources, (str, os.PathLike)):
            sources = [sources]
        counter[0] += 1
        mnt = tmp_path / (name or f"mnt{counter[0]}")
        mnt.mkdir()
        log = tmp_path / f"rankfs{counter[0]}.log"
        proc = start_daemon(str(mnt), sources, options, extra, str(log),
                            preexec)
        m = Mount(str(mnt), proc, str(log))
        made.append(m)
        wait_mounted(str(mnt), proc, str(log))
        return m

    yield make
    codes = [(m.mnt, m.unmount(), m.log_text()) for m in made]
    for mnt, code, log in codes:
        assert not is_mounted(mnt), f"{mnt} still mounted"
        assert code == 0, f"rankfs for {mnt} exited {code}: {log}"


class Cgroup:
    """A cgroup of controller beside this process's own group (v1), or
    under the v2 hierarchy's root (the one group that may delegate a
    controller while holding processes), its files written: v1_files or
    v2_files ({name: value}); join() in a child's preexec_fn puts the
    child in it. Fails, never skips: the suite runs as root where cgroups
    are mounted (scripts/test)."""

    def __init__(self, controller, v1_files, v2_files):
        own = {}
        with open("/proc/self/cgroup") as f:
            for line in f:
                hid, ctrls, path = line.rstrip("\n").split(":", 2)
                for c in ctrls.split(",") if ctrls else ["v2" + hid]:
                    own[c] = path
        mounts = []
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                tail = fields[fields.index("-") + 1:]
                mounts.append((unescape(fields[3]), unescape(fields[4]),
                               tail[0], tail[2]))
        name = f"rankfs-test-{os.getpid()}-{id(self)}"
        v1 = [(r, p) for r, p, t, o in mounts
              if t == "cgroup" and controller in o.split(",")]
        v2 = [p for r, p, t, o in mounts if t == "cgroup2"]
        if v1 and controller in own:
            root, point = v1[0]
            group = own[controller]
            # The mount shows the hierarchy from its root directory on.
            if root != "/" and group.startswith(root):
                group = group[len(root):]
            self.dir = os.path.join(point + group, name)
            files = v1_files
        elif v2 and controller in open(os.path.join(
                v2[0], "cgroup.controllers")).read().split():
            with open(os.path.join(v2[0], "cgroup.subtree_control"),
                      "w") as f:
                f.write(f"+{controller}\n")
            self.dir = os.path.join(v2[0], name)
            files = v2_files
        else:
            raise AssertionError(f"no {controller} cgroup controller to make "
                                 "a group in (/proc/self/cgroup, mountinfo)")
        os.mkdir(self.dir)
        for file, value in files.items():
            with open(os.path.join(self.dir, file), "w") as f:
                f.write(f"{value}\n")
        self.files = [os.path.join(self.dir, file) for file in files]

    def join(self):
        with open(os.path.join(self.dir, "cgroup.procs"), "w") as f:
            f.write(f"{os.getpid()}\n")

    def close(self):
        """Removes the group once its processes have exited."""
        deadline = time.monotonic() + 10
        while True:
            try:
                os.rmdir(self.dir)
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


@pytest.fixture
def cgroups():
    """Factory: cgroups.memory(limit_mb) or cgroups.cpu(cores) -> Cgroup
    (.files[0] its limit's file), removed at teardown."""
    made = []

    class Factory:
        @staticmethod
        def memory(limit_mb):
            made.append(Cgroup("memory",
                               {"memory.limit_in_bytes": limit_mb << 20},
                               {"memory.max": limit_mb << 20}))
            return made[-1]

        @staticmethod
        def cpu(cores):
            made.append(Cgroup("cpu", {"cpu.cfs_period_us": 100000,
                                       "cpu.cfs_quota_us": cores * 100000},
                               {"cpu.max": f"{cores * 100000} 100000"}))
            return made[-1]
    yield Factory
    for g in made:
        g.close()


def run_rankfs(args, timeout=30, preexec=None):
    """Runs rankfs to completion (for errors, --help); returns the result.
    preexec: run in the child before rankfs (a cgroup's join)."""
    return subprocess.run([RANKFS] + [str(a) for a in args],
                          capture_output=True, text=True, timeout=timeout,
                          preexec_fn=preexec)


def plan(rows, options, epoch, rank, batch):
    """Row ids of a batch according to the FUSE-free rankfs-plan tool."""
    out = subprocess.run([RANKFS_PLAN, "--rows", str(rows), "-o", options,
                          str(epoch), str(rank), str(batch)],
                         capture_output=True, text=True, check=True)
    return np.array([int(x) for x in out.stdout.split()], dtype=np.int64)


@pytest.fixture
def rankfs_cat():
    """Runs the FUSE-free rankfs-cat: rankfs_cat(sources, options, path)
    -> CompletedProcess (stdout bytes, stderr text). Fails, never skips,
    when RANKFS_CAT is unset."""
    if not RANKFS_CAT:
        pytest.fail("RANKFS_CAT is unset: point it at the rankfs-cat built "
                    "beside RANKFS_BIN (scripts/test sets both)")

    def run(sources, options, path, timeout=60):
        if isinstance(sources, (str, os.PathLike)):
            sources = [sources]
        args = [RANKFS_CAT] + (["-o", options] if options else [])
        args += [str(s) for s in sources] + [str(path)]
        r = subprocess.run(args, capture_output=True, timeout=timeout)
        r.stderr = r.stderr.decode(errors="replace")
        return r

    return run


# Source files, written by the real libraries.

def options_from_config(config):
    """config.json's effective options as -o text: nulls left out, a
    flag as 0 or 1, one filter= per filter."""
    out = []
    for key, value in config.items():
        if key == "view_id" or value is None:
            continue
        if isinstance(value, list):
            out += [f"{key}={v}" for v in value]
        elif isinstance(value, bool):
            out.append(f"{key}={int(value)}")
        else:
            out.append(f"{key}={value}")
    return ",".join(out)


def write_h5(path, datasets, attrs=None):
    """datasets: {name: array or (array, create_dataset kwargs)}."""
    with h5py.File(path, "w") as f:
        for name, spec in datasets.items():
            data, kw = spec if isinstance(spec, tuple) else (spec, {})
            f.create_dataset(name, data=data, **kw)
        for k, v in (attrs or {}).items():
            f.attrs[k] = v
    return path


def write_h5ad(path, x, obs=None):
    import anndata
    import pandas as pd
    n = x.shape[0]
    obs = obs if obs is not None else pd.DataFrame(
        index=[f"cell{i}" for i in range(n)])
    var = pd.DataFrame(index=[f"gene{j}" for j in range(x.shape[1])])
    anndata.AnnData(X=x, obs=obs, var=var).write_h5ad(path)
    return path


def write_cells_h5ad(path, x, codes, categories):
    """An .h5ad of x whose obs column cell_type holds codes into
    categories, its cells named cell0, cell1, ..."""
    import pandas as pd
    obs = pd.DataFrame(
        {"cell_type": pd.Categorical.from_codes(codes, categories)},
        index=[f"cell{i}" for i in range(len(codes))])
    return write_h5ad(path, x, obs)


def source_rows(path, dataset):
    with h5py.File(path, "r") as f:
        return f[dataset][()]


class PageCacheProbe:
    """Which pages of a file are in the page cache: mincore() over a
    mapping that is never touched, so probing reads nothing. The mapping
    keeps the file open: no release of its own."""

    def __init__(self, path):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.mmap.restype = ctypes.c_void_p
        self.libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                   ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                   ctypes.c_long]
        self.libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                      ctypes.c_char_p]
        self.libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.size = os.stat(path).st_size
        fd = os.open(path, os.O_RDONLY)
        try:
            self.addr = self.libc.mmap(None, self.size, mmap.PROT_READ,
                                       mmap.MAP_SHARED, fd, 0)
        finally:
            os.close(fd)
        assert self.addr not in (None, ctypes.c_void_p(-1).value), \
            f"{path}: mmap: {os.strerror(ctypes.get_errno())}"

    def cached(self):
        vec = ctypes.create_string_buffer(-(-self.size // mmap.PAGESIZE))
        assert self.libc.mincore(self.addr, self.size, vec) == 0, \
            f"mincore: {os.strerror(ctypes.get_errno())}"
        return sum(b & 1 for b in vec.raw)

    def close(self):
        self.libc.munmap(self.addr, self.size)


def thread_names(pid):
    """The names of the daemon's threads (top -H's): rankfs-prefetch,
    rankfs-drop, and the FUSE workers' rankfs."""
    names = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except FileNotFoundError:  # a FUSE worker that just ended
            pass
    return names


def wait_stopped(pid, deadline=10.0):
    """Waits until every thread of pid is stopped: a stop signal reaches
    each thread on its own, and one still running (slower under ASan) may
    take a request first."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                continue  # a thread that ended
        if states and all(st in "tT" for st in states):
            return
        time.sleep(0.01)
    raise AssertionError(f"rankfs ({pid}) did not stop within {deadline} s")


def without_daemon(m, read):
    """Runs read() on a thread while the daemon is stopped. @return
    (True, None) if it waited for the daemon (10 s), else (False, its
    result). A thread, not a process: an exiting process would close
    files, and a close waits for the daemon (FUSE's flush)."""
    got = []
    reader = threading.Thread(target=lambda: got.append(read()))
    os.kill(m.proc.pid, signal.SIGSTOP)
    try:
        wait_stopped(m.proc.pid)
        reader.start()
        reader.join(10)
        stuck = reader.is_alive()
    finally:
        os.kill(m.proc.pid, signal.SIGCONT)
    reader.join()
    return stuck, (got[0] if got else None)
