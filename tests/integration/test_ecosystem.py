# SPDX-License-Identifier: MIT
"""rankfs among the usual tools: a real DDP job, mount(8) and fstab after
cmake --install, the man page, stats.json as a dashboard, content hashes
in xattrs, and the debugging session example."""
import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import xxhash

from conftest import REPO, RANKFS, is_mounted, run_rankfs, write_h5ad

EXAMPLES = os.path.join(REPO, "docs", "examples")


@pytest.fixture(scope="module")
def fashion(tmp_path_factory):
    """The demo dataset, made by the project's own converter."""
    path = str(tmp_path_factory.mktemp("fm") / "fashion-mnist.h5")
    subprocess.run([os.path.join(REPO, "scripts", "make-demo-data"), path],
                   check=True, capture_output=True)
    return path


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(args, world=2):
    port = free_port()
    procs = []
    for r in range(world):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), RANK=str(r),
                   WORLD_SIZE=str(world))
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(EXAMPLES, "ddp_fashion_mnist.py")]
            + args, env=env, stdout=subprocess.PIPE, text=True))
    # A rank that fails must not leave the others waiting for it.
    deadline = time.monotonic() + 600
    while any(p.poll() is None for p in procs):
        if time.monotonic() > deadline or any(
                p.poll() not in (None, 0) for p in procs):
            for p in procs:
                p.kill()
            break
        time.sleep(0.2)
    outs = [p.communicate()[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    return json.loads(outs[0].strip().splitlines()[-1])


def test_ddp_job_matches_in_memory_baseline(mounts, fashion):
    m = mounts(fashion, "dataset=/images,label=/labels,dtype=float32,"
               "world_size=2,batch_size=256,strategy=shuffle,seed=1")
    ours = run_ranks(["--mount", m.mnt, "--data", fashion])
    base = run_ranks(["--baseline", "--data", fashion])
    print("DDP through rankfs:", ours)
    print("DDP from memory with DistributedSampler:", base)
    assert ours["disjoint"] and base["disjoint"]
    assert ours["rows"] == base["rows"] == 2 * (60000 // 512) * 512
    assert ours["accuracy"] > 0.75
    assert abs(ours["accuracy"] - base["accuracy"]) <= 0.02


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    prefix = tmp_path_factory.mktemp("prefix")
    subprocess.run(["cmake", "--install", os.path.join(REPO, "build"),
                    "--prefix", str(prefix)], check=True,
                   capture_output=True)
    return prefix


def mount8(args, mnt, ranks, mounts_line=None):
    """Mounts through mount(8) with args, checks that epoch/0/rank lists
    ranks ranks (and that /proc/self/mounts holds mounts_line), and
    unmounts."""
    r = subprocess.run(["mount"] + args, capture_output=True, text=True,
                       timeout=60)
    try:
        assert r.returncode == 0, r.stderr
        assert os.listdir(mnt / "epoch/0/rank") == \
            [str(k) for k in range(ranks)]
        if mounts_line:
            assert mounts_line in open("/proc/self/mounts").read()
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)])
    assert not is_mounted(mnt)


def test_cmake_install_then_mount_t_fuse(installed, fashion, tmp_path):
    assert os.access(installed / "bin" / "rankfs", os.X_OK)
    assert (installed / "share" / "man" / "man1" / "rankfs.1").exists()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    # -t fuse.rankfs runs `rankfs` from the PATH mount(8) leaves, which
    # may be the default one (it clears PATH when it runs with AT_SECURE,
    # as in a container short of some capability): the installed binary
    # is named the other way mount.fuse3 knows, PROGRAM#SOURCE. mount.fuse3
    # passes rw, dev, suid...: accepted, the mount stays ro.
    mount8(["-t", "fuse", f"{installed}/bin/rankfs#{fashion}", str(mnt),
            "-o", "dataset=/images,world_size=2,noatime"], mnt, 2,
           f"{mnt} fuse.rankfs ro,")

    # An /etc/fstab line, from a file of our own.
    fstab = tmp_path / "fstab"
    fstab.write_text(f"{installed}/bin/rankfs#{fashion} {mnt} fuse "
                     "dataset=/images,world_size=3,nofail,_netdev,"
                     "x-systemd.requires-mounts-for=/data,noauto 0 0\n")
    mount8(["-T", str(fstab), str(mnt)], mnt, 3)


@pytest.fixture
def rankfs_in_usr_local(installed):
    """`cmake --install` to /usr/local, as usage.md tells: mount -t
    fuse.rankfs finds `rankfs` only in the default PATH where mount(8)
    clears PATH. The test must not depend on what is installed there (a
    rankfs of an older checkout stopped scripts/test), nor change it: its
    mount(8) calls run in a private mount namespace of their own, where
    this build's bin/ is bound over /usr/local/bin; nothing outside it
    sees that, and it goes with the namespace's last process, however the
    test ends."""
    return str(installed / "bin")


def mount8_seeing(bin_dir, args, mnt, ranks, mounts_line=None):
    """As mount8, in a private mount namespace where bin_dir is
    /usr/local/bin: the mount is made, looked at and unmounted there."""
    script = ('mount --bind "$0" /usr/local/bin || exit 9; mount "$@" || '
              'exit 8; ls "$MNT/epoch/0/rank"; echo; cat /proc/self/mounts;'
              ' fusermount3 -u "$MNT"')
    r = subprocess.run(["unshare", "--mount", "--propagation", "private",
                        "sh", "-c", script, bin_dir] + args,
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, MNT=str(mnt)))
    assert r.returncode == 0, r.stderr
    listed, mounts = r.stdout.split("\n\n", 1)
    assert sorted(listed.split(), key=int) == [str(k) for k in range(ranks)]
    if mounts_line:
        assert mounts_line in mounts
    assert not is_mounted(mnt)


def test_mount_t_fuse_rankfs_and_fstab(rankfs_in_usr_local, fashion,
                                       tmp_path):
    """The type usage.md and the systemd example use: mount -t
    fuse.rankfs, and an fstab line of that type."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    mount8_seeing(rankfs_in_usr_local,
                  ["-t", "fuse.rankfs", fashion, str(mnt),
                   "-o", "dataset=/images,world_size=2,defaults"], mnt, 2,
                  f"{fashion} {mnt} fuse.rankfs ro,")
    fstab = tmp_path / "fstab"
    fstab.write_text(f"{fashion} {mnt} fuse.rankfs "
                     "dataset=/images,world_size=3,noauto,nofail 0 0\n")
    mount8_seeing(rankfs_in_usr_local, ["-T", str(fstab), str(mnt)], mnt,
                  3)


def test_man_page_renders_every_option():
    help_text = run_rankfs(["--help"]).stdout
    options = [line.split()[1].split("=")[0] for line in
               help_text.splitlines() if line.startswith("    -o ")]
    assert len(options) >= 25
    r = subprocess.run(["man", "-l", os.path.join(REPO, "docs",
                                                   "rankfs.1")],
                       capture_output=True, text=True,
                       env=dict(os.environ, MANPAGER="cat", PAGER="cat",
                                MANWIDTH="100"), timeout=60)
    assert r.returncode == 0, r.stderr
    page = r.stdout.replace("\u2010", "-")
    for section in ("NAME", "SYNOPSIS", "OPTIONS", "FILES", "EXAMPLES",
                    "EXIT STATUS"):
        assert section in page
    missing = [o for o in options if o not in page]
    assert not missing, missing


def test_man_page_name_says_what_is_served():
    """The NAME line (whatis, apropos) says AnnData .h5ad or zarr and
    HDF5 datasets, dense or CSR, as the DESCRIPTION does: it said "an
    HDF5 dataset"."""
    text = open(os.path.join(REPO, "docs", "rankfs.1")).read()
    name = text.split(".SH NAME\n")[1].split("\n.SH")[0]
    assert name.count("\n") == 0, name  # one line, for whatis
    for word in ("AnnData", ".h5ad", "zarr", "HDF5", "dense", "CSR"):
        assert word in name, name


def test_readme_ls_lists_what_a_csr_mount_lists(mounts, tmp_path):
    """The README's ls of an atlas's batch/ lists what a mount of a CSR
    .h5ad with its options lists: each .npy, then its .npz (it showed
    the .npy alone)."""
    import scipy.sparse as sp
    readme = open(os.path.join(REPO, "README.md")).read()
    mount_line = re.search(r"^    rankfs -o (\S+) atlas\.h5ad /mnt/atlas$",
                           readme, re.M)
    ls_line = re.search(r"^    ls /mnt/atlas/(\S+) +# (.*?) \.\.\.",
                        readme, re.M)
    assert mount_line and ls_line
    x = sp.random(3000, 40, density=0.1, format="csr", dtype=np.float32,
                  random_state=1)
    m = mounts(write_h5ad(str(tmp_path / "atlas.h5ad"), x),
               mount_line.group(1))
    shown = ls_line.group(2).split()
    listed = sorted(os.listdir(m.path(ls_line.group(1))))
    assert listed[:len(shown)] == shown


def test_man_page_options_exist_with_their_ranges(rankfs_cat, fashion):
    """The other way round: every option the man page documents among
    rankfs's own is one (a removed option once stayed there), and each
    range it gives, "(A to B", is the one the parser enforces."""
    text = open(os.path.join(REPO, "docs", "rankfs.1")).read()
    ours = text.split(".SS Sampling")[1].split(".SS Command line")[0]
    help_text = run_rankfs(["--help"]).stdout
    known = {line.split()[1].split("=")[0] for line in
             help_text.splitlines() if line.startswith("    -o ")}
    ranges = 0
    for item in ours.split(".TP\n")[1:]:
        head, body = item.split("\n", 1)
        name = head.split()[1].split("=")[0]
        assert name in known, f"rankfs.1 documents {name}, not an option"
        found = re.search(r"\((\d+) to (2\^\d+|\d+)(\\-1)?[,)]",
                          body.split("\n.TP")[0])
        if not found:
            continue
        low = int(found.group(1))
        high = found.group(2)
        high = 2 ** int(high[2:]) if high.startswith("2^") else int(high)
        high -= 1 if found.group(3) else 0
        r = rankfs_cat(fashion, f"dataset=/images,{name}={high + 1}",
                       "config.json")
        assert r.returncode == 1 and f"expected an integer from {low} to " \
            f"{high}" in r.stderr, (name, r.stderr)
        ranges += 1
    assert ranges >= 10


def test_stats_json_is_a_dashboard(mounts, tmp_path):
    rng = np.random.default_rng(0)
    path = write_h5ad(str(tmp_path / "s.h5ad"),
                      rng.random((4000, 16), dtype=np.float32))
    m = mounts(path, "world_size=2,batch_size=100,prefetch=4,fetch_factor=2")
    # Before the first generation the latencies have no value.
    assert m.json("stats.json")["generation"] == {
        "batches": 0, "p50_ms": None, "p99_ms": None}
    out = subprocess.run([os.path.join(REPO, "scripts", "top"), m.mnt,
                          "--once"], capture_output=True, text=True)
    assert out.returncode == 0 and "generation p50 - p99 -" in out.stdout, \
        out.stdout + out.stderr
    for k in range(12):  # one open every 50 ms or more
        m.load("batch", 0, 1, k)
        time.sleep(0.05)
    time.sleep(1.2)  # rows/s counts whole seconds
    s = m.json("stats.json")
    r1, r0 = s["ranks"][1], s["ranks"][0]
    assert r1["batches_served"] == 12
    # The epoch's rate: the 11 x 100 rows opened after the first, over
    # the time from the first open to the last (11 x 50 ms or more). It
    # stays when rows_per_s falls to 0, and the next epoch's shows from
    # its second open.
    span = r1["epoch_rate"]
    assert span["epoch"] == 0 and span["batches"] == 12
    assert 0.55 <= span["seconds"] < 30
    assert r1["epoch_rows_per_s"] == pytest.approx(1100 / span["seconds"],
                                                   rel=0.01)
    assert r0["epoch_rows_per_s"] is None and r0["epoch_rate"] is None
    assert r1["last_opened"] == {"epoch": 0, "batch": 11,
                                 "seconds_ago": r1["last_opened"][
                                     "seconds_ago"]}
    assert r1["last_opened"]["seconds_ago"] <= 3
    assert r1["rows_per_s"] > 0
    first = r1["first_reads"]
    assert sum(first.values()) == 12
    assert first["ready"] >= 1  # prefetched ahead of the reader
    assert 0 < r1["ready_rate"] <= 1 and r1["wait_s"] >= 0
    assert r0["batches_served"] == 0 and r0["last_opened"] is None
    gen = s["generation"]
    assert gen["batches"] >= 12 and 0 < gen["p50_ms"] <= gen["p99_ms"]
    assert s["prefetch"]["done"] >= 1
    out = subprocess.run([os.path.join(REPO, "scripts", "top"), m.mnt,
                          "--once"], capture_output=True, text=True)
    assert out.returncode == 0 and "rows/s" in out.stdout
    assert f"generation p50 {gen['p50_ms']:.1f} ms" in out.stdout
    assert out.stdout.splitlines()[-1].split()[:2] == ["1", "12"]
    m.load("batch", 1, 1, 0)  # the next epoch's first open
    assert m.json("stats.json")["ranks"][1]["epoch_rate"] == span


def test_top_of_what_is_not_a_mount_says_so(tmp_path):
    """scripts/top given a source, a missing path or a directory that is
    not a mount says what python3 -m rankfs says (it said "stats.json:
    Not a directory" for a source) and exits 1."""
    source = write_h5ad(str(tmp_path / "s.h5ad"),
                        np.zeros((10, 2), dtype=np.float32))
    for path, why in ((source, "not a directory: give the mountpoint, "
                       "not a source"),
                      (str(tmp_path / "absent"), "no such directory"),
                      (str(tmp_path), "no stats.json")):
        out = subprocess.run([os.path.join(REPO, "scripts", "top"), path,
                              "--once"], capture_output=True, text=True)
        assert (out.returncode, out.stdout, out.stderr) == (
            1, "", f"top: {path} is not a rankfs mount ({why})\n")


def test_content_hash_xattr(mounts, tmp_path):
    import scipy.sparse as sp
    x = sp.random(600, 40, density=0.1, format="csr", dtype=np.float32,
                  random_state=1)
    path = write_h5ad(str(tmp_path / "c.h5ad"), x)
    m = mounts(path, "world_size=2,batch_size=50")
    files = [m.file("batch", 1, 0, 3), m.file("index", 1, 0, 3),
             m.file("batch", 1, 0, 3)[:-4] + ".npz",
             m.path("step/rank/1/000000007.npy")]
    for f in files:
        with open(f, "rb") as fh:
            want = xxhash.xxh3_64_hexdigest(fh.read())
        assert os.getxattr(f, "user.rankfs.xxh3").decode() == want, f
        assert os.listxattr(f) == ["user.rankfs.xxh3"]
    # A step file hashes like its epoch file.
    e, b = divmod(7, m.batches())
    assert os.getxattr(m.path("step/rank/1/000000007.npy"),
                       "user.rankfs.xxh3") == \
        os.getxattr(m.file("batch", e, 1, b), "user.rankfs.xxh3")
    with pytest.raises(OSError):
        os.getxattr(files[0], "user.other")
    assert os.listxattr(m.path("config.json")) == []
    # The command docs/usage.md gives (getfattr: package attr, which
    # scripts/setup installs).
    out = subprocess.run(["getfattr", "-n", "user.rankfs.xxh3",
                          "--only-values", files[0]],
                         capture_output=True, text=True, check=True)
    assert out.stdout == os.getxattr(files[0], "user.rankfs.xxh3").decode()


def test_debugging_session_example(fashion, tmp_path):
    mnt = tmp_path / "mnt"
    r = subprocess.run(["sh", os.path.join(EXAMPLES, "debug_session.sh"),
                        fashion, str(mnt)],
                       env=dict(os.environ, RANKFS=RANKFS, PYTHON=sys.executable),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "view_id" in r.stdout and "000042.npy" in r.stdout
    assert not is_mounted(mnt)
