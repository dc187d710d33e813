# SPDX-License-Identifier: MIT
"""Bad input at mount time: one line naming the culprit, a non-zero exit,
nothing left mounted, in the foreground and in the background."""
import errno
import os
import re
import subprocess
import time

import h5py
import numpy as np
import pytest

from conftest import (RANKFS, RANKFS_CAT, RANKFS_PLAN, is_mounted,
                      run_rankfs, wait_mounted, write_h5, write_h5ad)

N = 300


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    rng = np.random.default_rng(1)
    f = {}
    f["good"] = write_h5(str(d / "good.h5"), {
        "x": rng.random((N, 4), dtype=np.float32)})
    f["h5ad"] = write_h5ad(str(d / "ok.h5ad"),
                           rng.random((N, 4), dtype=np.float32))
    f["text"] = str(d / "notes.txt")
    with open(f["text"], "w") as t:
        t.write("not hdf5\n")
    f["empty"] = write_h5(str(d / "empty.h5"), {
        "x": np.zeros((0, 4), dtype=np.float32)})
    f["strings"] = write_h5(str(d / "strings.h5"), {
        "s": np.array([b"abc"] * N)})
    f["cube"] = write_h5(str(d / "cube.h5"), {
        "c": np.zeros((N, 2, 2), dtype=np.float32)})
    f["complex"] = write_h5(str(d / "complex.h5"), {
        "z": np.zeros((N, 2), dtype=np.complex64)})
    f["bool"] = write_h5(str(d / "bool.h5"), {
        "b": np.zeros((N, 2), dtype=bool)})
    f["zerocols"] = write_h5(str(d / "zerocols.h5"), {
        "x": (np.zeros((N, 0), dtype=np.float32),
              dict(maxshape=(None, None), chunks=(10, 4),
                   compression="gzip"))})
    # uint64 columns: 2^63 + 1 is no int64 (HDF5 would clamp it).
    big = np.array([2**63 + 1, 7] * (N // 2), dtype=np.uint64)
    f["u64"] = write_h5(str(d / "u64.h5"), {
        "x": rng.random((N, 4), dtype=np.float32), "big": big,
        "pairs": rng.random((N, 2))})
    f["few"] = write_h5(str(d / "few.h5"), {
        "x": np.zeros((10, 4), dtype=np.float32)})
    f["long"] = write_h5(str(d / "long.h5"), {
        "v": np.zeros(2**23, dtype=np.uint8)})
    # 2^62 rows that were never written: a few KB on disk, and a column
    # no memory can hold (its size in bytes overflowed 64 bits).
    f["huge"] = write_h5(str(d / "huge.h5"), {
        "x": (None, dict(shape=(2**62, 4), dtype="f4", chunks=(1024, 4))),
        "lab": (None, dict(shape=(2**62,), dtype="i8", chunks=(1024,)))})
    # Data outside the file (rankfs reads none), each in an intact file:
    # a virtual dataset, external raw data files, an external link, for
    # the rows, a label column, a CSR's indptr and the var names.
    part = write_h5(str(d / "part.h5"), {
        "x": np.zeros((N, 4), dtype=np.float32),
        "lab": np.zeros(N, dtype=np.int64)})
    with h5py.File(d / "vds.h5", "w") as v:
        v["x"] = np.zeros((N, 4), dtype=np.float32)
        for name, src, shape, dtype in (("vx", "x", (N, 4), "f4"),
                                        ("lab", "lab", (N,), "i8")):
            layout = h5py.VirtualLayout(shape=shape, dtype=dtype)
            layout[:] = h5py.VirtualSource(part, src, shape=shape)
            v.create_virtual_dataset(name, layout)
    f["vds"] = str(d / "vds.h5")
    with h5py.File(d / "ext.h5", "w") as h:
        h["x"] = np.zeros((N, 4), dtype=np.float32)
        h.create_dataset("ex", data=np.ones((N, 4), "f4"), external=[
            (str(d / "ex.raw"), 0, h5py.h5f.UNLIMITED)])
        h.create_dataset("lab", data=np.ones(N, "i8"), external=[
            (str(d / "lab.raw"), 0, h5py.h5f.UNLIMITED)])
        g = h.create_group("X")
        g.attrs.update({"encoding-type": "csr_matrix",
                        "encoding-version": "0.1.0", "shape": (2, 4)})
        g["data"] = np.ones(4, "f4")
        g["indices"] = np.arange(4, dtype="i4")
        g.create_dataset("indptr", data=np.array([0, 2, 4], "i8"),
                         external=[(str(d / "indptr.raw"), 0,
                                    h5py.h5f.UNLIMITED)])
        h["link"] = h5py.ExternalLink(part, "/x")
        h["linklab"] = h5py.ExternalLink(part, "/lab")
    f["ext"] = str(d / "ext.h5")
    with h5py.File(d / "extvar.h5ad", "w") as h:
        h["X"] = np.zeros((N, 4), dtype=np.float32)
        h.create_group("var").attrs["_index"] = "_index"
        h["var"].create_dataset(
            "_index", data=np.array([b"g0", b"g1", b"g2", b"g3"]),
            external=[(str(d / "var.raw"), 0, h5py.h5f.UNLIMITED)])
    f["extvar"] = str(d / "extvar.h5ad")
    # A CSR matrix of 4 columns whose row 3 repeats them: 400 values.
    with h5py.File(d / "dups.h5", "w") as h:
        g = h.create_group("X")
        g.attrs.update({"encoding-type": "csr_matrix",
                        "encoding-version": "0.1.0", "shape": (10, 4)})
        g["data"] = np.ones(400, "f4")
        g["indices"] = np.arange(400, dtype="i4") % 4
        g["indptr"] = np.array([0, 0, 0, 0] + [400] * 7, "i8")
    f["dups"] = str(d / "dups.h5")
    # Offsets or a shape stored as floats: HDF5 converts them to integers
    # by truncation, and the rows were cut at 0, 1, 4, 5, 8.
    for name, shape, indptr in (("floatptr", (4, 4), [0, 1.7, 4.2, 5.9, 8]),
                                ("floatshape", (4.5, 4), [0, 2, 4, 6, 8])):
        with h5py.File(d / f"{name}.h5", "w") as h:
            g = h.create_group("X")
            g.attrs.update({"encoding-type": "csr_matrix",
                            "encoding-version": "0.1.0",
                            "shape": np.array(shape)})
            g["data"] = np.ones(8, "f4")
            g["indices"] = np.arange(8, dtype="i4") % 4
            g["indptr"] = np.array(indptr)
        f[name] = str(d / f"{name}.h5")
    # Cut short after it was written: HDF5 refuses it at open.
    f["truncated"] = write_h5(str(d / "cut.h5"), {
        "x": rng.random((N, 4), dtype=np.float32)})
    os.truncate(f["truncated"], os.path.getsize(f["truncated"]) // 2)
    # A directory whose *.h5 entry cannot be looked at (a dangling link).
    (d / "broken").mkdir()
    write_h5(str(d / "broken" / "a.h5"), {"x": np.zeros((N, 4), "f4")})
    os.symlink(d / "gone.h5", d / "broken" / "b.h5")
    f["broken"] = str(d / "broken")
    # A directory of files that differ in dtype only.
    (d / "mixed").mkdir()
    write_h5(str(d / "mixed" / "a.h5"), {"x": np.zeros((N, 4), "f4")})
    write_h5(str(d / "mixed" / "b.h5"), {"x": np.zeros((N, 4), "f8")})
    f["mixed"] = str(d / "mixed")
    # A directory whose second file stores the label as floats, the
    # first as integers: the line named neither.
    (d / "floatlab").mkdir()
    write_h5(str(d / "floatlab" / "a.h5"), {"x": np.zeros((N, 4), "f4"),
                                            "lab": np.zeros(N, "i8")})
    write_h5(str(d / "floatlab" / "b.h5"), {"x": np.zeros((N, 4), "f4"),
                                            "lab": np.zeros(N, "f8")})
    f["floatlab"] = str(d / "floatlab")
    # A directory whose second file has a negative weight at its row 5:
    # the line said 'row 305' alone, a global row, leaving the file to
    # be found by adding up the files' rows.
    (d / "badweights").mkdir()
    w = np.ones(N)
    write_h5(str(d / "badweights" / "a.h5"), {"x": np.zeros((N, 4), "f4"),
                                              "w": w})
    w[5] = -1
    write_h5(str(d / "badweights" / "b.h5"), {"x": np.zeros((N, 4), "f4"),
                                              "w": w})
    f["badweights"] = str(d / "badweights")
    return f


CASES = [
    # (id, source key or literal path, options, words the line must hold)
    ("missing source", "/nonexistent/a.h5ad", "",
     ["/nonexistent/a.h5ad", "No such file"]),
    # rankfs "$DATA" /mnt with DATA unset: the line was
    # 'rankfs: : No such file or directory'.
    ("empty source name", "", "",
     ["rankfs: source 1 of 1 is an empty name (an unset variable?)"]),
    ("not hdf5", "text", "dataset=/x", ["notes.txt", "not an HDF5 file"]),
    ("dataset not found", "good", "dataset=/nope",
     ["good.h5", "/nope", "not found", "/x"]),
    ("generic needs dataset", "good", "", ["good.h5", "dataset="]),
    ("zero rows", "empty", "dataset=/x", ["empty.h5", "no rows"]),
    ("string dtype", "strings", "dataset=/s", ["strings.h5", "/s", "dtype"]),
    ("complex dtype", "complex", "dataset=/z", ["complex.h5", "dtype"]),
    ("bool dtype", "bool", "dataset=/b", ["bool.h5", "dtype"]),
    ("three dims", "cube", "dataset=/c", ["cube.h5", "/c", "3 dimensions"]),
    ("zero columns, chunked", "zerocols", "dataset=/x",
     ["zerocols.h5", "0 columns"]),
    ("fewer rows than a global batch", "few",
     "dataset=/x,world_size=2,batch_size=8",
     ["few.h5", "10 rows", "global batch"]),
    ("unknown option", "good", "dataset=/x,bogus=1",
     ["'bogus'", "world_size", "log_file", "allow_other", "clone_fd"]),
    ("misspelt option", "good", "dataset=/x,batchsize=10",
     ["unknown option 'batchsize' (batch_size?); rankfs's options: "]),
    # FUSE passthrough was removed: its option is unknown like any other.
    ("passthrough option", "good", "dataset=/x,passthrough",
     ["'passthrough'", "world_size", "log_file"]),
    # So was direct_io: the page cache serves every file.
    ("direct_io option", "good", "dataset=/x,direct_io",
     ["'direct_io'", "world_size", "log_file"]),
    ("bad strategy", "good", "dataset=/x,strategy=random",
     ["strategy=random", "streaming, shuffle, block_shuffle"]),
    ("zero world size", "good", "dataset=/x,world_size=0",
     ["world_size=0", "integer from 1"]),
    ("hex batch size", "good", "dataset=/x,batch_size=0x10",
     ["batch_size=0x10"]),
    ("exponent seed", "good", "dataset=/x,seed=1e3", ["seed=1e3"]),
    ("negative epochs", "good", "dataset=/x,epochs=-1", ["epochs=-1"]),
    ("empty dataset value", "good", "dataset=", ["dataset"]),
    ("drop_last 2", "good", "dataset=/x,drop_last=2", ["drop_last=2"]),
    ("zero handler threads", "good", "dataset=/x,max_threads=0",
     ["max_threads=0", "from 1 to 1024"]),
    ("negative idle threads", "good", "dataset=/x,max_idle_threads=-1",
     ["max_idle_threads=-1", "from 0 to 1024"]),
    ("group instead of dataset", "h5ad", "dataset=/obs", ["/obs", "group"]),
    ("truncated source", "truncated", "dataset=/x",
     ["cut.h5", "cannot open as HDF5"]),
    ("files differ in dtype", "mixed", "dataset=/x",
     ["b.h5", "float64", "a.h5", "float32", "must agree"]),
    ("directory entry unreadable", "broken", "dataset=/x",
     ["broken/b.h5", "No such file"]),
    ("libfuse flag with a value", "good", "dataset=/x,allow_other=5",
     ["allow_other=5", "takes no value"]),
    ("libfuse number not a number", "good", "dataset=/x,max_read=abc",
     ["max_read=abc", "integer from 1"]),
    ("empty fsname", "good", "dataset=/x,fsname=",
     ["fsname=", "1 to 1024 bytes"]),
    ("empty subtype", "good", "dataset=/x,subtype=",
     ["subtype=", "1 to 1024 bytes"]),
    ("uint64 label over 2^63 - 1", "u64", "dataset=/x,label=/big",
     ["u64.h5", "/big", "uint64 values over 2^63 - 1", "as int64"]),
    ("uint64 filter over 2^63 - 1", "u64", "dataset=/x,filter=/big:7",
     ["u64.h5", "/big", "uint64 values over 2^63 - 1"]),
    ("uint64 weights over 2^63 - 1", "u64",
     "dataset=/x,strategy=weighted,weights=/big",
     ["u64.h5", "/big", "uint64 values over 2^63 - 1"]),
    ("2-D label", "u64", "dataset=/x,label=/pairs",
     ["label=/pairs", "u64.h5", "/pairs has 2 dimensions", "1-D"]),
    ("label column missing", "h5ad", "label=nope",
     ["label=nope", "ok.h5ad", "'nope' not found"]),
    ("float label in one of the files", "floatlab", "dataset=/x,label=/lab",
     ["option label=/lab: ", "floatlab/b.h5: a float column cannot be a "
      "label"]),
    ("negative weight in one of the files", "badweights",
     "dataset=/x,strategy=weighted,weights=/w",
     ["option weights=/w: ", f"row {N + 5} (row 5 of ",
      "badweights/b.h5) has weight -1"]),
    ("virtual dataset", "vds", "dataset=/vx",
     ["vds.h5: dataset /vx is a virtual dataset", "inside the source file",
      "h5repack -l CONTI"]),
    ("virtual label", "vds", "dataset=/x,label=/lab",
     ["vds.h5: dataset /lab is a virtual dataset", "h5repack -l CONTI"]),
    ("external storage", "ext", "dataset=/ex",
     ["ext.h5: dataset /ex stores its data in external files",
      "h5repack -l CONTI"]),
    ("external storage of a label", "ext", "dataset=/x,label=/lab",
     ["ext.h5: dataset /lab stores its data in external files"]),
    ("external storage of indptr", "ext", "dataset=/X",
     ["ext.h5: dataset /X/indptr stores its data in external files"]),
    ("external storage of var names", "extvar", "",
     ["extvar.h5ad: dataset /var/_index stores its data in external files"]),
    ("external link", "ext", "dataset=/link",
     ["ext.h5: dataset /link is reached through an external link",
      "h5repack --merge"]),
    ("label through an external link", "ext", "dataset=/x,label=/linklab",
     ["ext.h5: dataset /linklab is reached through an external link"]),
    ("float indptr", "floatptr", "dataset=/X,batch_size=2",
     ["floatptr.h5", "/X/indptr", "integer offsets"]),
    ("float shape", "floatshape", "dataset=/X,batch_size=2",
     ["floatshape.h5", "/X", "shape attribute"]),
    # 2^20 rows of up to 400 values (plus 8-byte ids) pass 3.5 GiB; of 4
    # (the columns) they would not.
    ("npz over 4 GiB with repeated columns", "dups",
     "dataset=/X,batch_size=1048576",
     ["batch_size=1048576", "400 stored values", ".npz over 3.5 GiB"]),
    # 4 cached windows of 2^23 rows and one being built (two arrays):
    # 384 MiB of row ids, far beyond a quarter of cache_mb.
    ("fetch windows beyond cache_mb", "long",
     "dataset=/v,world_size=1024,batch_size=1024,fetch_factor=8,cache_mb=4",
     ["cache_mb=4", "fetch windows", "384 MiB", "fetch_factor"]),
    # Any machine's memory (or its cgroup's limit, where less) is under
    # 2^30 MiB, a PiB; tests/unit/test_memlimit.c words each source.
    ("cache_mb over the machine's memory", "good",
     "dataset=/x,cache_mb=1073741824",
     ["option cache_mb=1073741824", "1073741856 MiB", "more than the",
      "give cache_mb="]),
    ("too many batches to number", "huge", "dataset=/x",
     ["18014398509481984 batches per epoch", "raise batch_size"]),
    ("label longer than memory", "huge",
     "dataset=/x,batch_size=16777216,fetch_factor=1,label=/lab",
     ["label=/lab", "huge.h5: /lab claims 4611686018427387904 entries",
      "over 2^64 bytes at mount, more than"]),
    ("filter over more rows than memory", "huge",
     "dataset=/x,batch_size=16777216,fetch_factor=1,filter=/lab:1",
     ["option filter: a mark per row claims 4611686018427387904 entries",
      "at least 4398046511104 MiB at mount, more than"]),
]


def source_of(files, key):
    return files.get(key, key)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("foreground", [True, False],
                         ids=["foreground", "background"])
def test_mount_errors(files, tmp_path, case, foreground):
    _, src, options, words = case
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    args = (["-f"] if foreground else []) + \
        (["-o", options] if options else []) + [source_of(files, src), mnt]
    r = run_rankfs(args)
    try:
        assert r.returncode == 1
        # Under ASan (allocator_may_return_null=1) an allocation refused
        # for its size is also reported by ASan itself, on a line of its
        # own; rankfs's own message must still be the one line left.
        lines = [line for line in r.stderr.strip().splitlines()
                 if not re.match(r"==\d+==WARNING: AddressSanitizer "
                                 r"failed to allocate", line)]
        assert len(lines) == 1, r.stderr
        assert lines[0].startswith("rankfs: ")
        for w in words:
            assert w in lines[0], (w, lines[0])
    finally:
        if is_mounted(mnt):
            import subprocess
            subprocess.run(["fusermount3", "-u", str(mnt)])
            raise AssertionError("a failed mount was left behind")


def test_the_served_dataset_is_also_a_column(mounts, tmp_path):
    """dataset=/lab,label=/lab: a 1-D dataset is a column as well as the
    rows, but HDF5 refuses to open a dataset again with other access
    properties than it is open with (the external file prefix), so the
    mount failed saying /lab had -1 rows."""
    lab = np.arange(60) % 4
    path = write_h5(str(tmp_path / "lab.h5"), {"lab": lab})
    for option in ("label=/lab", "filter=/lab:1|2",
                   "strategy=weighted,weights=/lab"):
        m = mounts(path, "dataset=/lab,batch_size=5," + option)
        index = m.load("index", 0, 0, 1)
        np.testing.assert_array_equal(m.load("batch", 0, 0, 1),
                                      lab[index])
        if option.startswith("label"):
            np.testing.assert_array_equal(m.load("label", 0, 0, 1),
                                          lab[index])


@pytest.mark.parametrize("args,words", [
    (["--bogus"], ["'--bogus'", "-o OPTION", "--log-file=PATH"]),
    (["--log-file"], ["'--log-file'", "--log-file=PATH"]),
    (["-x"], ["'-x'"]),
])
def test_unknown_dash_options(files, tmp_path, args, words):
    """Refused by rankfs, before any source is opened (a bad source does
    not hide it), in one line naming what rankfs takes."""
    r = run_rankfs(args + ["-o", "dataset=/nope", files["good"], tmp_path])
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1, r.stderr
    assert lines[0].startswith("rankfs: ")
    for w in words:
        assert w in lines[0]


@pytest.mark.parametrize("option", ["bo\ngus=1", "strategy=shu\nffle\x01",
                                    "batch_size=1\n2"])
def test_option_errors_escape_control_characters(files, tmp_path, option):
    """An option holding a newline once printed it raw: a forged second
    line in the mount's error (issue 43, item 7)."""
    r = run_rankfs(["-o", option, files["good"], tmp_path])
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("rankfs: "), \
        r.stderr
    assert "\\n" in r.stderr, r.stderr


def test_dash_o_without_a_value(files, tmp_path):
    """-o last on the line (an option list left off) is rankfs's own
    line, as rankfs-cat's: it was libfuse's "fuse: missing argument after
    `-o'"."""
    r = run_rankfs(["-o", "dataset=/x", files["good"], tmp_path, "-o"])
    assert r.returncode == 1
    assert r.stderr == "rankfs: -o needs a value: -o OPTION[,OPTION...]\n", \
        r.stderr
    assert not is_mounted(tmp_path)


def test_source_given_twice(files, tmp_path):
    """Its rows would be served twice over: as itself, or through a
    directory and a link."""
    d = tmp_path / "d"
    d.mkdir()
    os.symlink(files["good"], d / "same.h5")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    for sources in ([files["good"], files["good"]],
                    [files["good"], str(d)]):
        r = run_rankfs(["-o", "dataset=/x"] + sources + [mnt])
        assert r.returncode == 1
        assert "the same file as" in r.stderr and "given once" in r.stderr
        assert not is_mounted(mnt)


def test_mountpoint_hiding_a_source(files, tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    write_h5(str(d / "a.h5"), {"x": np.zeros((N, 4), np.float32)})
    for source in (str(d / "a.h5"), str(d)):
        r = run_rankfs(["-o", "dataset=/x", source, d])
        assert r.returncode == 1
        assert f"mountpoint {d}: source {source} lies under it" in r.stderr
        assert not is_mounted(d)


def test_mountpoint_errors(files, tmp_path):
    r = run_rankfs(["-o", "dataset=/x", files["good"], tmp_path / "none"])
    assert r.returncode == 1 and "none" in r.stderr and \
        "No such file" in r.stderr
    r = run_rankfs(["-o", "dataset=/x", files["good"], files["text"]])
    assert r.returncode == 1 and "not a directory" in r.stderr
    r = run_rankfs([files["good"]])
    assert r.returncode == 1 and "MOUNTPOINT" in r.stderr
    r = run_rankfs([])
    assert r.returncode == 1 and "SOURCE" in r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    (tmp_path / "mnt").mkdir()
    r = run_rankfs(["-o", "dataset=/x", files["good"], empty,
                    tmp_path / "mnt"])
    assert r.returncode == 1 and "no *.h5ad or *.h5 files" in r.stderr \
        and str(empty) in r.stderr


def test_many_sources_under_a_low_descriptor_limit(tmp_path):
    """1,500 files need more descriptors than ulimit -n 1024 allows: the
    mount says so before opening any, naming the limit and the need."""
    import resource
    import shutil
    import subprocess
    from conftest import RANKFS
    d = tmp_path / "many"
    d.mkdir()
    write_h5(str(d / "s0000.h5"), {"x": np.zeros((2, 4), np.float32)})
    for i in range(1, 1500):
        shutil.copyfile(d / "s0000.h5", d / f"s{i:04d}.h5")
    mnt = tmp_path / "mnt"
    mnt.mkdir()

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
    r = subprocess.run([RANKFS, "-o", "dataset=/x,batch_size=2", str(d),
                        str(mnt)], capture_output=True, text=True,
                       timeout=120, preexec_fn=low_limit)
    assert r.returncode == 1
    assert ("1500 source files need about 3064 file descriptors"
            in r.stderr), r.stderr
    assert "RLIMIT_NOFILE allows 1024" in r.stderr
    assert not is_mounted(mnt)


def test_cache_mb_within_the_memory_cgroup(cgroups, mounts, files, tmp_path):
    """In a memory cgroup of 512 MiB a cache_mb that with the daemon's own
    32 MiB would not fit fails the mount, naming the group's limit file;
    without cache_mb the cache is half of what the group leaves (the
    readers share it), said in the log and config.json."""
    import subprocess
    from conftest import RANKFS
    group = cgroups.memory(512)
    mnt = tmp_path / "refused"
    mnt.mkdir()
    r = subprocess.run([RANKFS, "-o", "dataset=/x,cache_mb=481",
                        files["good"], str(mnt)], capture_output=True,
                       text=True, timeout=60, preexec_fn=group.join)
    assert r.returncode == 1, r.stderr
    assert r.stderr.strip() == (
        "rankfs: option cache_mb=481: the daemon would hold up to 513 MiB "
        "(cache_mb and 32 MiB of its own), more than the 512 MiB of the "
        f"limit of its memory cgroup ({group.files[0]}); give "
        "cache_mb=480 or less"), r.stderr
    assert not is_mounted(mnt)
    m = mounts(files["good"], "dataset=/x,cache_mb=480",
               preexec=group.join)
    assert m.json("config.json")["cache_mb"] == 480
    m = mounts(files["good"], "dataset=/x", preexec=group.join)
    assert m.json("config.json")["cache_mb"] == 240
    assert m.json("stats.json")["budget"]["total_bytes"] == \
        240 << 20
    assert (f"cache_mb=240, not 1024: half of what the limit of its "
            f"memory cgroup ({group.files[0]}) leaves beside the "
            f"daemon's own 32 MiB") in m.log_text()


def claims_h5ad(path, x_rows, build):
    """An AnnData file of x_rows rows never written; build(h) adds the
    datasets whose shape (no storage either) claims too much."""
    with h5py.File(path, "w") as h:
        h.attrs["encoding-type"] = "anndata"
        h.create_dataset("X", shape=(x_rows, 4), dtype="f4",
                         chunks=(min(x_rows, 1 << 16), 4))
        build(h)
    return str(path)


def categorical(h, codes_dtype, n):
    g = h.create_group("obs/ct")
    g.attrs["encoding-type"] = "categorical"
    g.create_dataset("codes", data=np.zeros(8, codes_dtype))
    g.create_dataset("categories", shape=(n,), dtype=h5py.string_dtype(),
                     chunks=(1 << 16,))


def referenced(h, codes_dtype, n):
    """anndata 0.7: the codes' "categories" attribute references them."""
    cats = h.create_dataset("obs/__categories/ct", shape=(n,),
                            dtype=h5py.string_dtype(), chunks=(1 << 16,))
    h.create_dataset("obs/ct", data=np.zeros(8, codes_dtype))
    h["obs/ct"].attrs["categories"] = cats.ref


def csr(h, rows):
    g = h.create_group("Y")
    g.attrs.update({"encoding-type": "csr_matrix",
                    "encoding-version": "0.1.0", "shape": (rows, 4)})
    g.create_dataset("data", shape=(0,), dtype="f4")
    g.create_dataset("indices", shape=(0,), dtype="i4")
    g.create_dataset("indptr", shape=(rows + 1,), dtype="i8",
                     chunks=(1 << 16,))


def csr_row(h, n):
    """CSR whose stored indptr gives row 0 n values, which its data's and
    indices' lengths (no storage) back."""
    g = h.create_group("Y")
    g.attrs.update({"encoding-type": "csr_matrix",
                    "encoding-version": "0.1.0", "shape": (8, 4)})
    g.create_dataset("data", shape=(n + 7,), dtype="f4", chunks=(1 << 16,))
    g.create_dataset("indices", shape=(n + 7,), dtype="i4",
                     chunks=(1 << 16,))
    g.create_dataset("indptr", data=np.r_[0, n + np.arange(8)].astype("i8"))


BIG = 1 << 26  # rows: a column of them is 512 MiB of int64
CLAIMS = {
    # int32 codes index 2^31 categories: each absent one was a string.
    "categories": (8, lambda h: categorical(h, "i4", 1 << 31), "label=ct",
                   "/obs/ct/categories claims 2147483648 entries"),
    "0.7 categories": (8, lambda h: referenced(h, "i4", 1 << 31),
                       "label=ct",
                       "/obs/__categories/ct claims 2147483648 entries"),
    "label": (BIG, lambda h: h.create_dataset(
        "obs/lab", shape=(BIG,), dtype="i8", chunks=(1 << 16,)),
        "label=lab", f"/obs/lab claims {BIG} entries"),
    "indptr": (8, lambda h: csr(h, BIG), "dataset=/Y",
               f"/Y/indptr claims {BIG + 1} entries"),
    # 2^28 values of 20 bytes read (value twice, column id as stored and
    # as int64) for the fingerprint: the daemon was killed.
    "csr row": (8, lambda h: csr_row(h, 1 << 28), "dataset=/Y",
                "/Y row 0 (its stored values, read for its fingerprint) "
                f"claims {1 << 28} entries"),
    # A dense row of 2^27 float32 (512 MiB, no storage) read for the
    # fingerprint: the daemon was killed.
    "dense row": (8, lambda h: h.create_dataset(
        "Z", shape=(8, 1 << 27), dtype="f4", chunks=(8, 1 << 16)),
        "dataset=/Z", "/Z's first and last rows (read for its fingerprint) "
        f"claims {1 << 27} entries"),
}


def refused_at_once(tmp_path, sources, options, group):
    """Runs the daemon on sources in group (a cgroup): the mount must fail
    within 10 s, exit 1, nothing mounted. Returns its stderr."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    t = time.monotonic()
    r = run_rankfs(["-f", "-o", options] + sources + [mnt],
                   preexec=group.join)
    assert time.monotonic() - t < 10
    mounted = is_mounted(mnt)
    if mounted:
        subprocess.run(["fusermount3", "-u", str(mnt)])
    assert not mounted and r.returncode == 1, r.stderr
    return r.stderr


@pytest.mark.parametrize("case", CLAIMS)
def test_claimed_shapes_over_the_memory_limit(cgroups, tmp_path, case):
    """A dataset's length, no storage allocated, that the daemon's memory
    (here a cgroup of 256 MiB) cannot hold fails the mount at once,
    naming the file, the dataset and the limit: it was read (an OOM
    kill, or a string made per category)."""
    rows, build, options, words = CLAIMS[case]
    path = claims_h5ad(tmp_path / "claims.h5ad", rows, build)
    group = cgroups.memory(256)
    err = refused_at_once(tmp_path, [path], "batch_size=8," + options,
                          group)
    assert f"{path}: {words}: at least" in err, err
    assert f"more than the 256 MiB of the limit of its memory cgroup " \
        f"({group.files[0]})" in err, err


def test_claims_add_up_over_files(cgroups, tmp_path):
    """What a mount claims adds up: six files whose labels of 2^23 int64
    each fit a cgroup of 256 MiB alone, but not together beside the cache
    (cache_mb=112 given, and the daemon's 32 MiB), fail the mount at the
    second, naming it and what the first holds (each claim was checked
    alone: every label was read, 384 MiB, and the daemon killed for
    memory). Without cache_mb the default yields to the claims, which
    fail beside the daemon's 32 MiB alone: at the third file, whose rows
    appended to the two before it are copied while all three are held."""
    rows = 1 << 23
    paths = [claims_h5ad(tmp_path / f"f{i}.h5ad", rows,
                         lambda h: h.create_dataset(
                             "obs/lab", shape=(rows,), dtype="i8",
                             chunks=(1 << 16,)))
             for i in range(6)]
    group = cgroups.memory(256)
    err = refused_at_once(tmp_path, paths,
                          "batch_size=8,label=lab,cache_mb=112", group)
    assert (f"{paths[1]}: /obs/lab claims {rows} entries: at least 64 MiB "
            "at mount, more than the 256 MiB of the limit of its memory "
            f"cgroup ({group.files[0]}) leaves beside the 64 MiB claimed "
            "before it and cache_mb=112 with the daemon's own 32 MiB; give "
            "cache_mb=96 or less") in err, err
    if os.environ.get("RANKFS_SANITIZED"):
        # ASan's quarantine and shadow memory, beside what the claims
        # count, outgrow the group before they fail: checked in the plain
        # pass.
        return
    os.rmdir(tmp_path / "mnt")
    err = refused_at_once(tmp_path, paths, "batch_size=8,label=lab", group)
    assert (f"{paths[2]}: column 'lab': its rows appended to the files "
            f"before it claims {rows} entries: at least 64 MiB at mount, "
            "more than the 256 MiB of the limit of its memory cgroup "
            f"({group.files[0]}) leaves beside the 192 MiB claimed before "
            "it and the daemon's own 32 MiB\n") in err, err


def test_default_cache_mb_yields_to_claims(cgroups, mounts, tmp_path):
    """In a cgroup of 256 MiB the default cache_mb is 112; a label of
    2^24 - 30 int64 claims 128 MiB less 240 bytes, which fits beside the
    daemon's 32 MiB but not beside 112 more. Without cache_mb the mount
    takes what the claims leave (the label, its 3 var names' 240 bytes
    and var_names.txt's 9: 129 MiB in whole MiB), 95, said in the log,
    config.json and stats.json, and serves the source's rows; X's 48 MiB,
    mapped out of the 56 MiB chunk share at open, does not fit 7/8 of the
    settled one and is read with pread. With cache_mb=112 given, the
    mount fails as before (it failed without cache_mb too). Windows that
    a 95 MiB cache cannot hold fail it, naming the claims and the
    limit."""
    rows = (1 << 24) - 30
    path = str(tmp_path / "big_label.h5ad")
    x = (np.arange(rows * 3, dtype=np.uint64) % 251).astype(
        np.uint8).reshape(rows, 3)
    lab = np.arange(rows, dtype=np.int64) % 5
    with h5py.File(path, "w") as h:
        h.attrs["encoding-type"] = "anndata"
        h.create_dataset("X", data=x)
        h.create_dataset("obs/lab", data=lab)
        h.create_group("var").attrs["_index"] = "_index"
        h.create_dataset("var/_index", data=["g0", "g1", "g2"],
                         dtype=h5py.string_dtype())
    group = cgroups.memory(256)
    m = mounts(path, "batch_size=64,label=lab", preexec=group.join)
    assert m.json("config.json")["cache_mb"] == 95
    budget = m.json("stats.json")["budget"]
    total = 95 << 20
    assert budget["total_bytes"] == total, budget
    assert budget["chunks_bytes"] == total // 2, budget
    assert budget["pool_bytes"] == total // 8, budget
    assert budget["chunks_bytes"] + budget["plan_bytes"] + \
        budget["batches_bytes"] == total, budget
    assert budget["prefetch_bytes"] == budget["batches_bytes"] // 2, budget
    assert m.json("dataset.json")["read_path"] == "pread", \
        m.json("dataset.json")
    # Claimed last, before the default settled: after it, claimed beside
    # 96, it found no room.
    with open(m.path("var_names.txt")) as f:
        assert f.read() == "g0\ng1\ng2\n"
    assert ("cache_mb=95, not 112: the mount's claims, 129 MiB at most at "
            f"once (the biggest: {path}: /obs/lab, 128 MiB), leave that of "
            "the 256 MiB of the limit of its memory cgroup "
            f"({group.files[0]}) beside the daemon's own 32 MiB; give "
            "cache_mb to choose") in m.log_text(), m.log_text()
    for epoch, batch in ((0, 0), (1, 7), (2, m.batches() - 1)):
        index = m.load("index", epoch, 0, batch)
        np.testing.assert_array_equal(m.load("batch", epoch, 0, batch),
                                      x[index])
        np.testing.assert_array_equal(m.load("label", epoch, 0, batch),
                                      lab[index])
    assert m.unmount() == 0, m.log_text()
    err = refused_at_once(tmp_path, [path],
                          "batch_size=64,label=lab,cache_mb=112", group)
    assert (f"{path}: /obs/lab claims {rows} entries: at least 127 MiB at "
            "mount, more than the 256 MiB of the limit of its memory cgroup "
            f"({group.files[0]}) leaves beside the 1 MiB claimed before it "
            "and cache_mb=112 with the daemon's own 32 MiB; give "
            "cache_mb=96 or less") in err, err
    # Windows of 2^19 + 2^16 rows: 6 of them, 27 MiB of row ids, fit a
    # quarter of 112 but not of 95.
    os.rmdir(tmp_path / "mnt")
    err = refused_at_once(tmp_path, [path],
                          "batch_size=9216,fetch_factor=64,label=lab",
                          group)
    assert re.search(
        r"the mount's claims, 129 MiB at most at once \(the biggest: "
        + re.escape(f"{path}: /obs/lab, 128 MiB), leave 95 MiB of the 256 "
                    "MiB of the limit of its memory cgroup "
                    f"({group.files[0]}) beside the daemon's own 32 MiB, "
                    "less than the cache_mb=")
        + r"1(0[89]|1[01]) it needs for its fetch windows and a prefetched "
        r"batch; raise the limit, or lower batch_size or fetch_factor$",
        err.strip()), err


def test_chunk_table_over_the_memory_limit(cgroups, mounts, tmp_path):
    """A grid of 2^24 one-byte chunks allocated at creation (HDF5's
    implicit index: no entry stored per chunk) is a sparse file of 16 MiB;
    the table of its chunks' addresses is 384 MiB. In a cgroup of 256 MiB
    the table is refused and the rows read through HDF5, logged (it was
    built, HDF5 asked for each address: no mount within 20 s, the table
    growing toward 384 MiB)."""
    rows = 1 << 24
    path = str(tmp_path / "tiny_chunks.h5")
    with h5py.File(path, "w", libver="latest") as h:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((1, 1))
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
        dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
        h5py.h5d.create(h.id, b"X", h5py.h5t.NATIVE_UINT8,
                        h5py.h5s.create_simple((rows, 1)), dcpl=dcpl)
        h["X"][:1024, 0] = np.arange(1024) % 251
    group = cgroups.memory(256)
    t = time.monotonic()
    m = mounts(path, "dataset=/X,batch_size=1024,strategy=streaming",
               preexec=group.join)
    assert time.monotonic() - t < 10
    assert m.json("dataset.json")["read_path"] == "hdf5", \
        m.json("dataset.json")
    np.testing.assert_array_equal(m.load("batch", 0, 0, 0)[:, 0],
                                  np.arange(1024) % 251)
    assert (f"{path}: /X (its chunks' addresses) claims {rows} entries: at "
            "least 384 MiB at mount, more than the 256 MiB of the limit of "
            f"its memory cgroup ({group.files[0]}) leaves beside "
            "cache_mb=112 with the daemon's own 32 MiB; its chunks are read "
            "through HDF5 instead") in m.log_text(), m.log_text()


def test_claimed_var_names_not_read(cgroups, mounts, tmp_path):
    """A var index whose length alone (no storage) says 2^31 names for 4
    columns is not read, as in a zarr store: the mount serves without
    var names, promptly, in a cgroup of 256 MiB (2^31 strings were made
    in a child, and the memory ran out)."""
    def var(h):
        h.create_group("var").attrs["_index"] = "_index"
        h.create_dataset("var/_index", shape=(1 << 31,),
                         dtype=h5py.string_dtype(), chunks=(1 << 16,))
    path = claims_h5ad(tmp_path / "var.h5ad", 8, var)
    group = cgroups.memory(256)
    t = time.monotonic()
    m = mounts(path, "batch_size=8", preexec=group.join)
    assert time.monotonic() - t < 10
    assert m.json("dataset.json")["var_names"] is None


def test_a_source_that_never_answers_fails_the_mount(mounts, files,
                                                    tmp_path):
    """A mount-time read that never returns (HDF5 looping on a damaged
    file, or storage that does not answer) ends the mount with a message
    naming the source. Here the source lies on a FUSE mount whose daemon
    is stopped: opening it waits for good."""
    import signal
    inner = mounts(files["good"], "dataset=/x")
    source = inner.path("config.json")
    os.stat(source)  # looked up and cached before the daemon stops
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    os.kill(inner.proc.pid, signal.SIGSTOP)
    try:
        for foreground in ([], ["-f"]):
            r = run_rankfs(foreground + ["-o", "dataset=/x,open_timeout=2",
                                         source, mnt], timeout=60)
            assert r.returncode == 1, r.stderr
            assert (f"source {source}: opening it: no answer after 2 s"
                    in r.stderr), r.stderr
            assert not is_mounted(mnt)
    finally:
        os.kill(inner.proc.pid, signal.SIGCONT)


def test_help_lists_every_option_and_version():
    # Every option an unknown one's message lists as accepted.
    r = run_rankfs(["-o", "nope", "x.h5ad", "/nonexistent"])
    accepted = re.search(r"rankfs's options: (.*); libfuse's: (.*) \(",
                         r.stderr)
    assert accepted, r.stderr
    names = ", ".join(accepted.groups()).split(", ")
    assert len(names) > 30
    r = run_rankfs(["--help"])
    assert r.returncode == 0
    for opt in names:
        assert f"-o {opt}" in r.stdout, opt
    assert "usage: rankfs" in r.stdout
    # rankfs's thread defaults, not libfuse's (10, and -1 for idle).
    assert "4 x world_size" in r.stdout
    assert "default: 10" not in r.stdout and "default: -1" not in r.stdout
    r = run_rankfs(["--version"])
    assert r.returncode == 0 and r.stdout.startswith("rankfs ")


@pytest.mark.parametrize("foreground", [True, False],
                         ids=["foreground", "background"])
def test_a_mount_point_is_refused(mounts, files, tmp_path, foreground):
    """A second mount on a mount point would hide the first, which would
    go on unseen: refused before mounting, naming what is there."""
    import subprocess
    from conftest import mount_entry
    first = mounts(files["good"], "dataset=/x,batch_size=10")
    before = np.load(first.file("batch", 0, 0, 1))
    for spelling in (first.mnt, first.mnt + "/"):
        r = run_rankfs((["-f"] if foreground else []) +
                       ["-o", "batch_size=10", files["h5ad"], spelling])
        if r.returncode == 0:  # mounted over the first: take it away
            subprocess.run(["fusermount3", "-u", first.mnt])
        assert r.returncode == 1, r.stderr
        lines = r.stderr.strip().splitlines()
        assert lines == [f"rankfs: mountpoint {first.mnt} is already a "
                         f"mount point (fuse.rankfs from {files['good']}); "
                         "unmount it first or mount elsewhere"], r.stderr
    # The first mount is the one still there, and still serves (the
    # second would say /X, AnnData's).
    assert first.json("config.json")["dataset"] == "/x"
    assert np.array_equal(np.load(first.file("batch", 0, 0, 1)), before)
    assert first.proc.poll() is None
    if os.geteuid() == 0:  # any file system: a tmpfs
        t = tmp_path / "tmp"
        t.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "scratch", str(t)],
                       check=True)
        try:
            r = run_rankfs((["-f"] if foreground else []) +
                           ["-o", "dataset=/x", files["good"], t])
            if r.returncode == 0:
                subprocess.run(["fusermount3", "-u", str(t)])
            assert r.returncode == 1, r.stderr
            assert r.stderr == (f"rankfs: mountpoint {t} is already a "
                                "mount point (tmpfs from scratch); unmount "
                                "it first or mount elsewhere\n")
            assert mount_entry(t)[2] == "tmpfs"  # still on top
        finally:
            subprocess.run(["umount", str(t)], check=True)


@pytest.mark.parametrize("foreground", [True, False],
                         ids=["foreground", "background"])
def test_a_mount_point_inside_a_rankfs_mount_is_refused(mounts, files,
                                                        foreground):
    """A mount on a directory of a live rankfs mount (its epoch/) was
    accepted and hid that mount's epochs: refused, naming the mount it is
    in, and the outer mount serves on."""
    import subprocess
    outer = mounts(files["good"], "dataset=/x,batch_size=10")
    before = np.load(outer.file("batch", 0, 0, 1))
    for inner in (outer.path("epoch"), outer.path("epoch", 0, "rank")):
        r = run_rankfs((["-f"] if foreground else []) +
                       ["-o", "dataset=/x", files["good"], inner])
        if is_mounted(inner):
            subprocess.run(["fusermount3", "-u", inner])
        assert r.returncode == 1, r.stderr
        assert r.stderr == (f"rankfs: mountpoint {inner} is inside the "
                            f"rankfs mount {outer.mnt} (of "
                            f"{files['good']}), whose files it would "
                            "hide; mount elsewhere\n"), r.stderr
    assert np.array_equal(np.load(outer.file("batch", 0, 0, 1)), before)
    assert outer.proc.poll() is None


def test_log_file_planted_link_refused(files, tmp_path):
    """A link planted at log_file's path by someone who can write its
    directory once had root's daemon append to the file it named (a 0600
    file of root's): the log is opened without following a link, which
    is refused, whatever it names, and the file is left as it was."""
    import subprocess
    secret = tmp_path / "secret"
    secret.write_bytes(b"root only\n")
    os.chmod(secret, 0o600)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    for target in (secret, tmp_path / "absent"):
        link = tmp_path / "rankfs.log"
        os.symlink(target, link)
        r = run_rankfs(["-o", f"dataset=/x,log_file={link}", files["good"],
                        mnt])
        if is_mounted(mnt):
            subprocess.run(["fusermount3", "-u", str(mnt)])
        assert r.returncode == 1, r.stderr
        assert r.stderr == (f"rankfs: option log_file={link} is a "
                            "symbolic link; give the file itself\n"), \
            r.stderr
        os.unlink(link)
    assert secret.read_bytes() == b"root only\n"
    assert not os.path.exists(tmp_path / "absent")


FORGED = "\n2026-01-01T00:00:00Z rankfs: forged\tline\x1b[2K"
ESCAPED = "\\n2026-01-01T00:00:00Z rankfs: forged\\tline\\x1b[2K"


def test_control_characters_in_names_are_escaped(mounts, files, tmp_path):
    """A source named with a newline once wrote forged, timestamped lines
    into the log, and into the errors on the terminal: control characters
    are escaped (\\n, \\t, \\xHH) in both, each message one line."""
    import shutil
    bad = tmp_path / f"bad{FORGED}.h5"
    bad.write_bytes(b"not HDF5")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = run_rankfs(["-f", "-o", "dataset=/x", bad, mnt])
    assert r.returncode == 1, r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("rankfs: "), \
        r.stderr
    assert f"bad{ESCAPED}.h5" in r.stderr, r.stderr
    # In the log: a source so named, removed while mounted, is logged.
    src = tmp_path / f"src{FORGED}.h5"
    shutil.copyfile(files["good"], src)
    m = mounts(src, "dataset=/x,batch_size=10")
    os.unlink(src)
    assert m.json("stats.json")["sources"][0]["state"].startswith(
        "replaced")
    log = m.log_text()
    line = [x for x in log.splitlines() if "was replaced" in x]
    assert len(line) == 1 and f"src{ESCAPED}.h5" in line[0], log
    assert "forged" not in log.replace(line[0], ""), log


def test_remount_says_it_cannot(mounts, files):
    """mount -o remount,rw MNT runs mount.fuse3, which runs rankfs SOURCE
    MNT -o remount,rw,...: one line saying a mount cannot be remounted
    (it was 'unknown option 'remount'' and the whole option list, though
    mount(8)'s other words are accepted), and the mount stays as it was."""
    m = mounts(files["good"], "dataset=/x,batch_size=10")
    before = np.load(m.file("batch", 0, 0, 1))
    env = dict(os.environ, PATH=os.path.dirname(os.path.abspath(RANKFS)) +
               os.pathsep + os.environ.get("PATH", ""))
    r = subprocess.run(["mount.fuse3", files["good"], m.mnt, "-t", "rankfs",
                        "-o", "remount,rw,dataset=/x"],
                       capture_output=True, text=True, env=env, timeout=30)
    assert r.returncode == 1, r.stderr
    assert r.stderr == ("rankfs: option remount: a rankfs mount cannot be "
                        "remounted (it is read-only, its options fixed "
                        "for its life): unmount it and mount again\n"), \
        r.stderr
    assert m.proc.poll() is None
    assert np.array_equal(np.load(m.file("batch", 0, 0, 1)), before)
    with pytest.raises(OSError) as e:
        open(m.path("new"), "w")
    assert e.value.errno == errno.EROFS


@pytest.mark.parametrize("foreground", [True, False],
                         ids=["foreground", "background"])
def test_log_file_only_a_regular_file_not_a_source(files, tmp_path,
                                                   foreground):
    """log_file once appended log lines into a source it named (which
    rankfs must never write), and a FIFO hung the mount for good. Both
    are refused before the log is opened, the source through a link
    too, and so is anything else but a regular file; a new file works."""
    import hashlib
    import shutil
    import subprocess
    src = tmp_path / "src.h5"
    shutil.copyfile(files["good"], src)
    os.symlink(src, tmp_path / "link.h5")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    before = (hashlib.sha256(src.read_bytes()).hexdigest(),
              os.stat(src).st_mtime_ns)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    fg = ["-f"] if foreground else []
    for log, why in [(src, f"is the source {src}"),
                     (tmp_path / "link.h5",
                      "is a symbolic link; give the file itself"),
                     (tmp_path / "fifo", ": not a regular file"),
                     (tmp_path / "dir", ": not a regular file")]:
        for spelling in (["-o", f"dataset=/x,log_file={log}"],
                         ["-o", "dataset=/x", f"--log-file={log}"]):
            # A FIFO used to block the open: a hang fails the test.
            r = run_rankfs(fg + spelling + [src, mnt], timeout=20)
            if is_mounted(mnt):
                subprocess.run(["fusermount3", "-u", str(mnt)])
            assert r.returncode == 1, r.stderr
            sep = "" if why.startswith(":") else " "
            assert r.stderr == \
                f"rankfs: option log_file={log}{sep}{why}\n", r.stderr
            assert not is_mounted(mnt)
    assert (hashlib.sha256(src.read_bytes()).hexdigest(),
            os.stat(src).st_mtime_ns) == before
    # A new file is made and takes the log.
    new = tmp_path / "new.log"
    proc = None
    try:
        if foreground:
            proc = subprocess.Popen(
                [RANKFS, "-f", "-o", f"dataset=/x,log_file={new}",
                 str(src), str(mnt)], stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE)
            wait_mounted(str(mnt), proc, str(new))
        else:
            r = run_rankfs(["-o", f"dataset=/x,log_file={new}", src, mnt])
            assert r.returncode == 0, r.stderr
            assert is_mounted(mnt)
        assert os.path.isfile(new)
        assert np.load(mnt / "epoch/0/rank/0/batch/000000.npy").shape == \
            (256, 4)
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)])
    if proc is not None:
        assert proc.wait(timeout=20) == 0, proc.stderr.read()
    assert (hashlib.sha256(src.read_bytes()).hexdigest(),
            os.stat(src).st_mtime_ns) == before


def test_plan_help_and_version():
    """rankfs-plan --help is a usage text, not "'--help' is not a
    number"; both exit 0."""
    for flag in ("--help", "-h"):
        r = subprocess.run([RANKFS_PLAN, flag], capture_output=True,
                           text=True)
        assert r.returncode == 0 and r.stderr == "", r.stderr
        assert r.stdout.startswith("usage: rankfs-plan --rows N")
        assert "--time" in r.stdout and "EPOCH RANK BATCH" in r.stdout
    for flag in ("--version", "-V"):
        r = subprocess.run([RANKFS_PLAN, flag], capture_output=True,
                           text=True)
        assert r.returncode == 0 and r.stdout.startswith("rankfs-plan ")
    r = subprocess.run([RANKFS_PLAN, "--bogus"], capture_output=True,
                       text=True)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("rankfs-plan: unknown option '--bogus'\n")
    r = subprocess.run([RANKFS_PLAN, "--rows", "10", "-o"],
                       capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("rankfs-plan: a value must follow '-o'\n")


@pytest.mark.parametrize("args,why", [
    (["0", "0", "0"], "--rows N, the source's rows (at least 1), is needed"),
    (["--rows", "0", "0", "0", "0"],
     "--rows N, the source's rows (at least 1), is needed"),
    (["--rows", "100", "0", "0"], "EPOCH RANK BATCH are needed"),
    (["--rows", "100", "0", "0", "0", "7"], "'7': one argument too many"),
    (["--rows", "100", "--time", "1", "2"],
     "--time takes one COUNT of at least 1"),
    (["--rows", "100", "0", "x", "0"], "'x' is not a number"),
    (["--rows", "100", "-o", "world_size=2,batch_size=10", "2147483648",
      "0", "0"], "epoch 2147483648 out of range [0, 2^31)"),
    (["--rows", "100", "-o", "world_size=2,batch_size=10", "0", "2", "0"],
     "rank 2 out of range [0, 2) (world_size)"),
    (["--rows", "100", "-o", "world_size=2,batch_size=10", "0", "1", "5"],
     "no batch 5 (5 batches per rank)"),
])
def test_plan_says_which_argument_is_wrong(args, why):
    r = subprocess.run([RANKFS_PLAN] + args, capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr.startswith(f"rankfs-plan: {why}\n"), r.stderr


def test_plan_rows_with_an_equals_sign():
    """--rows=N as well as --rows N: the same row ids."""
    spaced, joined = (subprocess.run(
        [RANKFS_PLAN] + rows + ["-o", "world_size=2,batch_size=10", "1",
                                "1", "4"],
        capture_output=True, text=True) for rows in (["--rows", "100"],
                                                     ["--rows=100"]))
    assert spaced.returncode == 0 and joined.stdout == spaced.stdout, \
        joined.stderr
    assert len(spaced.stdout.split()) == 10


def test_help_and_version_lost_to_a_full_disk_fail():
    """rankfs and rankfs-cat's --help and --version written to a full
    disk fail with a line and a non-zero exit, as rankfs-plan's do (they
    exited 0, the text lost)."""
    for tool, name in ((RANKFS, "rankfs"), (RANKFS_CAT, "rankfs-cat")):
        for arg in ("--help", "--version"):
            with open("/dev/full", "w") as full:
                r = subprocess.run([tool, arg], stdout=full,
                                   stderr=subprocess.PIPE, text=True)
            assert r.returncode == 1, (tool, arg, r.stderr)
            assert r.stderr == (f"{name}: writing to stdout: No space left "
                                "on device\n"), (tool, arg, r.stderr)
            r = subprocess.run([tool, arg], capture_output=True, text=True)
            assert r.returncode == 0 and name in r.stdout, (tool, arg)


def test_plan_says_when_its_output_is_lost():
    """Row ids that cannot be written (a full disk: /dev/full) fail with a
    line, exit 2 as its other failures, like rankfs-cat's failed write:
    rankfs-plan exited 0, silent."""
    for args in (["--rows", "1000", "-o", "batch_size=10", "0", "0", "3"],
                 ["--rows", "1000", "-o", "batch_size=10", "--time", "1"],
                 ["--version"]):
        with open("/dev/full", "w") as full:
            r = subprocess.run([RANKFS_PLAN] + args, stdout=full,
                               stderr=subprocess.PIPE, text=True)
        assert r.returncode == 2, (args, r.stderr)
        assert r.stderr == ("rankfs-plan: writing to stdout: No space left "
                            "on device\n"), (args, r.stderr)
