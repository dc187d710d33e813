#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The node-scale benchmark: rankfs at 8 ranks on a warm 4 GB file.

A dense --rows x --cols float32 HDF5 file (default 1,000,000 x 1,000,
4 GB; contiguous dataset /X written with h5py in row slabs) is read in
the page cache by --ranks concurrent reader processes (default 8, like
the GPUs of a node), batch 256, one full epoch each time:

  rankfs shuffle           np.load of epoch/E/rank/R/batch/*.npy
  rankfs block_shuffle     the same, 64-row blocks
  trivial FUSE server      bench/trivialfs.c, as many files of the same
                           size (zeros) from memory, read with np.load
  h5py+DistributedSampler  torch's sampler, 256 indices a batch, sorted,
                           h5py fancy indexing

The contenders take turns epoch by epoch (--warmup epochs each first,
shown but not counted, then --rounds epochs); medians are reported. The
daemon's CPU seconds (utime + stime of /proc/PID/stat, read around each
epoch) per GB served are reported for rankfs and the trivial server.
Only numpy, h5py and torch are needed (bench/run.py is imported for its
readers and timing; it imports nothing else at module level).

A table goes to stderr; the JSON summary to stdout, and to
$OUT/node_scale.json where $OUT is set. As root (FUSE mounts, the
trivial server's readahead in /sys/class/bdi).

    bench/node_scale.py [--rows N] [--ranks N] [--rankfs BIN]
                        [--trivialfs BIN] [--dir D] [--rounds N]

--rankfs and --trivialfs default to build/rankfs and a trivialfs compiled
into a temporary directory; .device/bin/node_scale (scripts/device-pack)
passes its own. A fusermount3 beside --rankfs goes first on PATH.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (stdlib and numpy only at import)

SHUFFLE = "rankfs shuffle"
BLOCK = "rankfs block_shuffle"
TRIVIAL = "trivial FUSE server"
H5PY = "h5py+DistributedSampler"


def trivial_mount(binary, files, cols, mnt, notes):
    """run.trivial_mount, but where /sys is read-only (a container) the
    trivial server keeps the kernel's default readahead, and says so."""
    m = run.Mounted([binary, mnt, str(run.RANKS), str(files),
                     str(run.BATCH), str(cols)], mnt)
    try:
        with open("/proc/self/mountinfo") as f:
            dev = next(line.split()[2] for line in f
                       if line.split()[4] == os.path.realpath(mnt))
        # What rankfs does for its own mount: 1 MiB readahead.
        with open(f"/sys/class/bdi/{dev}/read_ahead_kb", "w") as f:
            f.write("1024\n")
    except (OSError, StopIteration) as e:
        notes.append(f"trivial server: default readahead ({e})")
        run.log(f"node_scale: {notes[-1]}")
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1000000)
    ap.add_argument("--cols", type=int, default=1000)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3,
                    help="counted epochs per contender (median reported)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="epochs per contender first, not counted")
    ap.add_argument("--batches", type=int,
                    help="batches per rank of an epoch (default: all)")
    ap.add_argument("--dir", default=os.path.join(run.REPO, "data", "node"),
                    help="where the source file is written (kept)")
    ap.add_argument("--rankfs", default=run.RANKFS)
    ap.add_argument("--trivialfs",
                    help="trivial server binary (default: compile "
                    "bench/trivialfs.c)")
    ap.add_argument("--skip", default="",
                    help="comma-separated contender prefixes to leave out")
    args = ap.parse_args()

    run.RANKS = args.ranks
    run.LIMIT = args.batches
    rankfs = os.path.abspath(args.rankfs)
    if not os.access(rankfs, os.X_OK):
        raise SystemExit(f"node_scale: {rankfs} is missing "
                         "(scripts/build, or scripts/device-pack)")
    # Mounted.close() unmounts with the fusermount3 on PATH.
    here = os.path.dirname(rankfs)
    if os.access(os.path.join(here, "fusermount3"), os.X_OK):
        os.environ["PATH"] = here + os.pathsep + os.environ.get("PATH", "")
    if not shutil.which("fusermount3"):
        raise SystemExit("node_scale: no fusermount3 on PATH")

    os.makedirs(args.dir, exist_ok=True)
    src = os.path.join(args.dir, f"dense-{args.rows}x{args.cols}.h5")
    # Slabs of about 256 MB.
    t0 = time.perf_counter()
    run.make_dense_h5(src, args.rows, args.cols,
                      max(1, (1 << 28) // (4 * args.cols)))
    run.log(f"node_scale: source ready in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    run.warm(src)
    run.log(f"node_scale: warmed the source in "
            f"{time.perf_counter() - t0:.1f} s")

    work = tempfile.mkdtemp(prefix="rankfs-node-")
    trivialfs = args.trivialfs
    if trivialfs is None:
        trivialfs = os.path.join(work, "trivialfs")
        run.build_trivialfs(trivialfs)
    trivialfs = os.path.abspath(trivialfs)

    batch = run.BATCH
    nb = args.rows // (args.ranks * batch)
    if args.batches is not None:
        nb = min(nb, args.batches)
    if nb == 0:
        raise SystemExit("node_scale: fewer rows than ranks x 256")
    rows_per_rank = nb * batch
    file_bytes = 128 + batch * args.cols * 4
    nbytes = nb * file_bytes  # per rank and epoch, every contender

    def rankfs_contender(name, strategy):
        def mount():
            mnt = tempfile.mkdtemp(dir=work)
            m = run.rankfs_mount(
                src, f"dataset=/X,world_size={args.ranks},"
                f"batch_size={batch},strategy={strategy}",
                mnt, f"{mnt}.log", rankfs)
            # st_size generates nothing; the trivial server's files are
            # the same size.
            served = run.served_bytes(mnt, ".npy")
            if served != nbytes:
                notes.append(f"{name}: {served} bytes per rank served, "
                             f"the trivial server {nbytes}")
                run.log(f"node_scale: {notes[-1]}")
            return run.rankfs_reader(mnt, ".npy"), served, m.close, m.proc.pid
        return run.Contender(name, mount)

    def trivial_contender():
        def mount():
            mnt = tempfile.mkdtemp(dir=work)
            # New files every epoch, as rankfs serves.
            m = trivial_mount(trivialfs, nb * (args.warmup + args.rounds),
                              args.cols, mnt, notes)
            return run.trivial_reader(mnt, nb), nbytes, m.close, m.proc.pid
        return run.Contender(name=TRIVIAL, open=mount)

    notes = []
    skip = [s for s in args.skip.split(",") if s]
    contenders = [c for c in (
        rankfs_contender(SHUFFLE, "shuffle"),
        rankfs_contender(BLOCK, "block_shuffle"),
        trivial_contender(),
        run.Contender(H5PY, run.unmounted(run.h5py_reader(src), nbytes)))
        if not any(c.name.startswith(s) for s in skip)]

    t0 = time.perf_counter()
    try:
        results = run.measure_group(contenders, rows_per_rank, args.rounds,
                                    args.warmup)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    wall = time.perf_counter() - t0

    by = {r["name"]: r for r in results}

    def ratio(a, b, key="rows_per_s"):
        if a in by and b in by and by[a][key] and by[b][key]:
            return by[a][key] / by[b][key]
        return None

    ratios = {
        "rankfs shuffle / trivial FUSE server (bytes/s)":
            ratio(SHUFFLE, TRIVIAL, "mb_per_s"),
        "rankfs block_shuffle / trivial FUSE server (bytes/s)":
            ratio(BLOCK, TRIVIAL, "mb_per_s"),
        "rankfs shuffle / h5py+DistributedSampler": ratio(SHUFFLE, H5PY),
        "rankfs block_shuffle / h5py+DistributedSampler": ratio(BLOCK, H5PY),
        "trivial FUSE server / h5py+DistributedSampler": ratio(TRIVIAL, H5PY),
        "rankfs shuffle CPU/GB / trivial server CPU/GB":
            ratio(SHUFFLE, TRIVIAL, "cpu_s_per_gb"),
        "rankfs block_shuffle CPU/GB / trivial server CPU/GB":
            ratio(BLOCK, TRIVIAL, "cpu_s_per_gb"),
    }
    summary = {
        "benchmark": "node_scale",
        "rows": args.rows, "cols": args.cols, "ranks": args.ranks,
        "batch": batch, "batches_per_rank": nb,
        "bytes_per_epoch": args.ranks * nbytes,
        "rounds": args.rounds, "warmup": args.warmup,
        "source": src, "rankfs": rankfs, "trivialfs": trivialfs,
        "page_cache": "warm (source read once before; same mount every "
                      "epoch, new batch files each epoch)",
        "results": [{k: r[k] for k in (
            "name", "rows_per_s", "mb_per_s", "seconds", "all_seconds",
            "warmup_seconds", "cpu_s_per_gb", "all_cpu_seconds",
            "peak_rss_mb")} for r in results],
        "ratios": {k: v for k, v in ratios.items() if v is not None},
        "notes": notes,
        "machine": run.machine_info(),
        "wall_s": wall,
    }

    run.log(f"\n{'contender':28s} {'rows/s':>10s} {'MB/s':>8s} "
            f"{'s':>7s} {'CPU s/GB':>9s}")
    for r in results:
        c = r["cpu_s_per_gb"]
        run.log(f"{r['name']:28s} {r['rows_per_s']:10.0f} "
                f"{r['mb_per_s']:8.0f} {r['seconds']:7.2f} "
                f"{'-' if c is None else f'{c:.3f}':>9s}")
    for k, v in summary["ratios"].items():
        run.log(f"{k:52s} {v:6.2f}")
    text = json.dumps(summary, indent=1)
    print(text, flush=True)
    if os.environ.get("OUT"):
        with open(os.path.join(os.environ["OUT"], "node_scale.json"),
                  "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
