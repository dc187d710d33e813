# SPDX-License-Identifier: MIT
"""The daemon's life: background start, signals, death, log file."""
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import (RANKFS, is_mounted, start_daemon, thread_names,
                      wait_mounted, write_h5)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    d = tmp_path_factory.mktemp("life")
    return write_h5(str(d / "s.h5"), {
        "x": np.arange(4000, dtype=np.float32).reshape(1000, 4)})


def wait_gone(mnt, deadline=10.0):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if not is_mounted(mnt):
            return True
        time.sleep(0.05)
    return False


def daemon_pids(mnt):
    """rankfs processes serving mnt (found through their command line)."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0] == RANKFS.encode() and \
                str(mnt).encode() in argv:
            pids.append(int(pid))
    return pids


@pytest.mark.parametrize("spelling", ["mnt/", "mnt//", "link", "./mnt/."])
def test_mountpoint_spellings(source, tmp_path, spelling):
    """A trailing slash once hung the daemon (it looked up its own mount
    before serving); a link to a directory failed in fusermount3. All
    name the same directory, mounted by its real path, from any working
    directory."""
    (tmp_path / "mnt").mkdir()
    os.symlink("mnt", tmp_path / "link")
    r = subprocess.run([RANKFS, "-o", "dataset=/x,batch_size=10", source,
                        spelling], cwd=tmp_path, capture_output=True,
                       text=True, timeout=30)
    try:
        assert r.returncode == 0, r.stderr
        assert r.stderr == ""
        assert is_mounted(tmp_path / "mnt")
        assert np.load(tmp_path / "mnt/epoch/0/rank/0/batch/000000.npy"
                       ).shape == (10, 4)
    finally:
        subprocess.run(["fusermount3", "-u", str(tmp_path / "mnt")])
    assert wait_gone(tmp_path / "mnt")


def test_non_empty_mountpoint_mounts_with_a_warning(source, tmp_path):
    """fuse3 mounts over a directory that holds files (fuse2 refused it
    without -o nonempty), hiding them while mounted: an fstab line or a
    unit may mean it, a typo in a path may not. So the mount goes ahead
    and one line says what it hides; it used to say nothing."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    (mnt / "notes.txt").write_text("mine")
    r = subprocess.run([RANKFS, "-o", "dataset=/x,batch_size=10", source,
                        str(mnt)], capture_output=True, text=True,
                       timeout=30)
    try:
        assert r.returncode == 0, r.stderr
        assert r.stderr == (f"rankfs: mountpoint {mnt} is not empty: what "
                            "it holds is hidden while rankfs is mounted "
                            "there\n"), r.stderr
        assert "notes.txt" not in os.listdir(mnt)
        assert np.load(mnt / "epoch/0/rank/0/batch/000000.npy").shape == \
            (10, 4)
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)])
    assert wait_gone(mnt)
    assert (mnt / "notes.txt").read_text() == "mine"


def test_background_start_returns_once_mounted(source, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "rankfs.log"
    r = subprocess.run([RANKFS, "-o", f"dataset=/x,batch_size=10,"
                        f"log_file={log}", source, str(mnt)],
                       capture_output=True, text=True, timeout=30)
    try:
        assert r.returncode == 0, r.stderr
        assert is_mounted(mnt)  # up before the command returned
        pids = daemon_pids(mnt)
        assert len(pids) == 1
        assert np.load(mnt / "epoch/0/rank/0/batch/000000.npy").shape == \
            (10, 4)
        # Daemonised: fds 0-2 are /dev/null, not our pipes.
        assert os.readlink(f"/proc/{pids[0]}/fd/2") == "/dev/null"
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)])
    assert wait_gone(mnt)
    end = time.monotonic() + 10
    while daemon_pids(mnt) and time.monotonic() < end:
        time.sleep(0.05)
    assert not daemon_pids(mnt)


@pytest.mark.parametrize("sig,extra", [(signal.SIGTERM, ()),
                                       (signal.SIGINT, ()),
                                       (signal.SIGHUP, ()),
                                       (signal.SIGTERM, ("-s",))])
def test_signal_unmounts_and_exits_0(source, tmp_path, sig, extra):
    """With the multithreaded loop and with -s (one thread, whose wait is
    a read of /dev/fuse, not a semaphore)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = str(tmp_path / "log")
    proc = start_daemon(str(mnt), [source], "dataset=/x,batch_size=10",
                        extra=extra, log=log)
    try:
        wait_mounted(str(mnt), proc, log)
        np.load(mnt / "epoch/0/rank/0/batch/000001.npy")
        proc.send_signal(sig)
        assert proc.wait(timeout=20) == 0
        assert wait_gone(mnt)
    finally:
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", str(mnt)])
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigkill_leaves_no_dead_mount(source, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = str(tmp_path / "log")
    proc = start_daemon(str(mnt), [source], "dataset=/x,batch_size=10",
                        log=log)
    try:
        wait_mounted(str(mnt), proc, log)
        proc.kill()
        proc.wait()
        # auto_unmount: fusermount3 removes the mount when we die.
        assert wait_gone(mnt)
        assert os.listdir(mnt) == []
    finally:
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", str(mnt)])


def fds_of(pid):
    """{descriptor: what it names} of process pid."""
    return {int(f): os.readlink(f"/proc/{pid}/fd/{f}")
            for f in os.listdir(f"/proc/{pid}/fd")}


def test_killed_process_releases_highest_descriptor_first():
    """What test_fuse_device_released_before_the_unmounters_socket
    relies on: the kernel releases a killed process's files highest
    descriptor first (their last puts queue task work, run last in,
    first out). Seen here by which of two sockets' peers epoll finds
    closed first."""
    for _ in range(5):
        low, low_peer = socket.socketpair()
        high, high_peer = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            os.dup2(low.fileno(), 100)
            os.dup2(high.fileno(), 101)
            os.kill(os.getpid(), signal.SIGSTOP)
            os._exit(0)
        for s in (low, high):
            s.close()
        os.waitpid(pid, os.WUNTRACED)
        with select.epoll() as ep:
            for s in (low_peer, high_peer):
                ep.register(s.fileno(), select.EPOLLRDHUP)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            order = [fd for fd, _ in ep.poll(5)]
        assert order == [high_peer.fileno(), low_peer.fileno()]
        low_peer.close()
        high_peer.close()


def test_fuse_device_released_before_the_unmounters_socket(mounts, source):
    """auto_unmount's fusermount3 unmounts a killed daemon's mount once
    the daemon's end of their socket closes, and only if opening the
    mount then fails with ENOTCONN: the connection aborted, as the
    release of the daemon's /dev/fuse aborts it. libfuse 3.14 left that
    socket just above /dev/fuse, so it was released first: fusermount3
    could open the mount in between, have its request ended by the abort
    (ECONNABORTED) and leave a dead mount (issue 43's kills of the
    daemon's group and session; test_sigkill_leaves_no_dead_mount under
    load). The daemon's last /dev/fuse descriptor is above that socket."""
    m = mounts(source, "dataset=/x,batch_size=10")
    daemon = fds_of(m.proc.pid)
    with open(f"/proc/{m.proc.pid}/task/{m.proc.pid}/children") as f:
        (watcher,) = map(int, f.read().split())
    theirs = {t for t in fds_of(watcher).values() if t.startswith("socket:")}
    peers = {}
    for line in subprocess.run(["ss", "-xan"], capture_output=True,
                               text=True, check=True).stdout.splitlines():
        cols = line.split()
        if len(cols) >= 8 and cols[5].isdigit() and cols[7].isdigit():
            peers[f"socket:[{cols[5]}]"] = f"socket:[{cols[7]}]"
    (ours,) = [fd for fd, t in daemon.items() if peers.get(t) in theirs]
    device = max(fd for fd, t in daemon.items() if t == "/dev/fuse")
    assert device > ours, daemon


def test_sigkill_of_group_and_session_leaves_no_dead_mount(source, tmp_path):
    """A kill -9 of every process in the background daemon's process
    group and session (a job controller's kill -- -PGID) spares the
    unmounter: auto_unmount leaves fusermount3 watching the daemon from
    a session of its own, and it unmounts. A kill that takes fusermount3
    too (the daemon's whole cgroup) leaves nothing to unmount: a dead
    mount until fusermount3 -u (reliability.md)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    for trial in range(3):
        r = subprocess.run([RANKFS, "-o", "dataset=/x,batch_size=10",
                            source, str(mnt)], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        try:
            np.load(mnt / "epoch/0/rank/0/batch/000001.npy")
            (pid,) = daemon_pids(mnt)
            ps = subprocess.run(["ps", "-eo", "pid=,pgid=,sid="],
                                capture_output=True, text=True).stdout
            ids = {int(p): (g, s) for p, g, s in map(str.split,
                                                      ps.splitlines())}
            group = [p for p, (g, s) in ids.items()
                     if g == ids[pid][0] or s == ids[pid][1]]
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                (watcher,) = map(int, f.read().split())
            assert watcher not in group
            for p in group:
                os.kill(p, signal.SIGKILL)
            assert wait_gone(mnt), f"trial {trial}: a dead mount"
            assert os.listdir(mnt) == []
        finally:
            if is_mounted(mnt):
                subprocess.run(["fusermount3", "-u", str(mnt)])


def test_log_file_keeps_serve_errors(tmp_path):
    src = tmp_path / "doomed.h5"
    write_h5(str(src), {"x": np.ones((1000, 64), dtype=np.float32)})
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    log = tmp_path / "rankfs.log"
    r = subprocess.run([RANKFS, "-o", "dataset=/x,batch_size=10",
                        f"--log-file={log}", str(src), str(mnt)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    try:
        os.truncate(src, 4096)  # the rows are gone now
        with pytest.raises(OSError) as e:
            with open(mnt / "epoch/0/rank/0/batch/000000.npy", "rb") as f:
                f.read()
        assert e.value.errno == 5  # EIO
        text = log.read_text()
        assert str(src) in text and "/x" in text
        # Metadata still served.
        assert (mnt / "config.json").read_text().startswith("{")
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)])
    assert wait_gone(mnt)


# Run by test_background_lines_go_to_syslog in a private mount namespace:
# a tmpfs on /dev holding null, fuse and a datagram socket at /dev/log,
# the syslog socket glibc's syslog() writes to. Mounts RANKFS in the
# background without log_file, truncates the source, reads a batch, and
# prints each datagram that came (repr), one a line, after the read's
# errno, until the change's line and a failed read's came, in either
# order (prefetch threads may meet the change first).
SYSLOG_SCRIPT = r'''
import os, socket, stat, subprocess, sys, time
rankfs, src, mnt = sys.argv[1:4]
devs = {n: os.stat("/dev/" + n).st_rdev for n in ("null", "fuse")}
subprocess.run(["mount", "-t", "tmpfs", "dev", "/dev"], check=True)
for name, rdev in devs.items():
    os.mknod("/dev/" + name, 0o666 | stat.S_IFCHR, rdev)
log = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
log.bind("/dev/log")
log.settimeout(10)
r = subprocess.run([rankfs, "-o", "dataset=/x,batch_size=10", src, mnt],
                   capture_output=True, text=True)
assert r.returncode == 0, r.stderr
os.truncate(src, 4096)
try:
    open(mnt + "/epoch/0/rank/0/batch/000000.npy", "rb").read()
    print("read")
except OSError as e:
    print(e.errno)
seen = set()
try:
    while seen != {"changed in place", "not served"}:
        line = log.recv(4096).decode()
        print(repr(line))
        seen |= {w for w in ("changed in place", "not served") if w in line}
except socket.timeout:
    pass
subprocess.run(["fusermount3", "-u", mnt])
end = time.monotonic() + 10
while mnt in open("/proc/self/mounts").read() and time.monotonic() < end:
    time.sleep(0.05)
'''


def test_background_lines_go_to_syslog(tmp_path):
    """In the background without log_file, the daemon's lines went
    nowhere (stderr is /dev/null): a failed read's reason was lost. They
    go to syslog, as the daemon rankfs[PID] of facility LOG_DAEMON, each
    escaped as in the log (a source named with a newline writes \\n)."""
    src = tmp_path / "s\nt.h5"
    write_h5(str(src), {"x": np.ones((1000, 64), dtype=np.float32)})
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(["unshare", "--mount", "--propagation", "private",
                        sys.executable, "-c", SYSLOG_SCRIPT, RANKFS,
                        str(src), str(mnt)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    errno_line, *lines = r.stdout.splitlines()
    assert errno_line == "5", r.stdout  # EIO
    lines = [eval(line) for line in lines]
    escaped = str(src).replace("\n", "\\n")
    said = [m for m in lines if f"source {escaped} " in m]
    assert any("changed in place" in m for m in said), lines
    assert any("not served" in m for m in said), lines
    for m in said:
        pri = int(m[1:m.index(">")])
        assert pri >> 3 == 3, m  # LOG_DAEMON
        assert re.search(r"> ?\w{3} [ \d]\d [\d:]{8} rankfs\[\d+\]: ", m), m
    assert not is_mounted(mnt)


def test_relative_log_file_is_shown_absolute(tmp_path):
    """A relative log_file is taken from the directory rankfs was started
    in (the daemon then moves to /), and config.json names it absolutely
    (as var_names), so that it says where the lines go."""
    src = tmp_path / "s.h5"
    write_h5(str(src), {"x": np.ones((100, 4), dtype=np.float32)})
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run([RANKFS, "-o", "dataset=/x,batch_size=10,"
                        "log_file=logs.txt", str(src), str(mnt)],
                       cwd=tmp_path, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    try:
        config = json.loads((mnt / "config.json").read_text())
        assert config["log_file"] == str(tmp_path / "logs.txt")
        assert (tmp_path / "logs.txt").exists()
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)])
    assert wait_gone(mnt)


@pytest.mark.parametrize("options,prefetchers,droppers", [
    ("threads=3", 3, 1),
    ("threads=1", 1, 1),
])
def test_helper_threads_are_named(mounts, source, options, prefetchers,
                                  droppers):
    """top -H and perf tell the batch generators and the page dropper
    from the FUSE workers, which keep the process's name."""
    m = mounts(source, f"dataset=/x,batch_size=10,{options}")
    assert len(m.load("batch", 0, 0, 0)) == 10
    names = thread_names(m.proc.pid)
    assert names.count("rankfs-prefetch") == prefetchers, names
    assert names.count("rankfs-drop") == droppers, names
    assert "rankfs" in names, names  # the main thread


@pytest.mark.parametrize("foreground", [True, False],
                         ids=["foreground", "background"])
def test_max_read_mounts_and_serves(tmp_path, foreground):
    """-o max_read=N once ended the session at the kernel's INIT
    (libfuse wants init() to repeat the option) while the background
    command exited 0 with nothing mounted. Batches of 256,000 bytes are
    read through the page cache and with O_DIRECT."""
    src = write_h5(str(tmp_path / "s.h5"), {
        "x": np.arange(256000, dtype=np.float32).reshape(4000, 64)})
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    options = "dataset=/x,batch_size=1000,max_read=65536"
    log = str(tmp_path / "log")
    proc = None
    try:
        if foreground:
            proc = start_daemon(str(mnt), [src], options, log=log)
            wait_mounted(str(mnt), proc, log)
        else:
            r = subprocess.run([RANKFS, "-o", options, src, str(mnt)],
                               capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, r.stderr
            assert r.stderr == ""
            assert is_mounted(mnt)
        rows = np.arange(256000, dtype=np.float32).reshape(4000, 64)
        for k in range(2):
            batch = np.load(mnt / f"epoch/0/rank/0/batch/{k:06d}.npy")
            index = np.load(mnt / f"epoch/0/rank/0/index/{k:06d}.npy")
            assert batch.shape == (1000, 64)
            assert np.array_equal(batch, rows[index])
            # O_DIRECT reads reach rankfs, in 64 KiB requests.
            f = mnt / f"epoch/0/rank/0/batch/{k:06d}.npy"
            fd = os.open(f, os.O_RDONLY | os.O_DIRECT)
            try:
                assert os.pread(fd, 1 << 20, 0) == f.read_bytes()
            finally:
                os.close(fd)
    finally:
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", str(mnt)])
    assert wait_gone(mnt)
    if proc is not None:
        assert proc.wait(timeout=20) == 0, open(log).read()


def test_session_failing_at_init_fails_the_background_start(source,
                                                            tmp_path):
    """The kernel sends INIT once the mount exists; a session that fails
    there (as -o max_read once did) made the background command exit 0
    with nothing mounted. The parent now waits for the mount to answer.
    RANKFS_FAULT_INIT makes the daemon's init() disagree with libfuse."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    env = dict(os.environ, RANKFS_FAULT_INIT="1")
    r = subprocess.run([RANKFS, "-o", "dataset=/x,batch_size=10", source,
                        str(mnt)], capture_output=True, text=True,
                       timeout=30, env=env)
    try:
        assert r.returncode == 1, r.stderr
        assert (f"rankfs: {mnt}: the FUSE session ended before the mount "
                "answered (Protocol error)") in r.stderr, r.stderr
        assert not is_mounted(mnt)
        end = time.monotonic() + 10
        while daemon_pids(mnt) and time.monotonic() < end:
            time.sleep(0.05)
        assert not daemon_pids(mnt)
    finally:
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", str(mnt)])
