#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""CPU the FUSE daemon spends per epoch: rankfs against the trivial server.

The side-by-side benchmark times whole epochs, which on 2 cores mixes the
daemon's work with the readers'. This counts the daemon's own CPU
(utime + stime from /proc/PID/stat, its threads and kernel work included)
while 2 ranks read epochs 1..N of the dense file with np.load, after an
unmeasured epoch 0, for rankfs (shuffle, or --strategies) and the trivial
server.

    bench/daemon_cpu.py [--epochs 4] [--strategies streaming,block_shuffle,
                        shuffle] [--dir data/bench]   (after scripts/bench
                                                      wrote the data)

With --csr it reads the CSR file's .npz batches instead (scipy's
load_npz), page cache only, and no trivial server.

With --distinct it also measures the trivial server serving each file
from its own bytes in memory (trivialfs.c's "distinct") instead of its
one zero page.

With --each it prints every epoch: its time, the daemon's CPU in it and
how often its threads were switched out while runnable, per thread name
(rankfs-prefetch generates batches, rankfs-drop drops pages at release,
rankfs are the FUSE handlers, whose opens store batches in the page
cache), and the daemon's CPU in an idle second after it (work left for
later, such as the next epoch's prefetch).

With --builds A,B it compares rankfs binaries instead: each round mounts
every build in turn (the first of --strategies, plus --options) and
measures it as above; the medians over --rounds come last. To A/B two
commits, build the older one in a git worktree:

    git worktree add /tmp/old REV && (cd /tmp/old && scripts/build)
    bench/daemon_cpu.py --builds /tmp/old/build/rankfs,build/rankfs

With --builds and --files N (and --csr), the source is a directory of N
CSR .h5ad files sharing --rows (written on first use, under --dir), as
sharded atlases come: a batch's rows then lie in many files.

With --builds and --turns, every build is mounted at once and they take
turns per epoch, as scripts/bench's contenders do (epochs of one build
then lie seconds apart); each epoch's daemon CPU and time are printed.
A build may be a script that runs rankfs with more options (-o prefetch=0).
"""
import argparse
import os
import statistics
import tempfile
import time

import run

HZ = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ  # utime, stime


def thread_seconds(pid):
    """{tid: (name, CPU seconds, times switched out while runnable)} of
    pid's threads (rankfs's names: rankfs-prefetch, rankfs-drop, and
    rankfs for the FUSE handlers)."""
    threads = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                status = f.read()
        except FileNotFoundError:  # a handler thread that just ended
            continue
        fields = stat.rsplit(")", 1)[1].split()
        switched = int(status.split("nonvoluntary_ctxt_switches:")[1]
                       .split()[0])
        threads[tid] = (stat[stat.index("(") + 1:stat.rindex(")")],
                        (int(fields[11]) + int(fields[12])) / HZ, switched)
    return threads


def by_name(before, after):
    """{name: [CPU seconds, switches out while runnable]} between two
    thread_seconds(); threads that ended in between count in the
    process's total only."""
    spent = {}
    for tid, (name, secs, switched) in after.items():
        was = before.get(tid, (name, 0, 0))
        got = spent.setdefault(name, [0, 0])
        got[0] += secs - was[1]
        got[1] += switched - was[2]
    return spent


def machine_seconds():
    """Busy and idle CPU seconds of the whole machine, all cores."""
    with open("/proc/stat") as f:
        ticks = [int(t) for t in f.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return (sum(ticks) - idle) / HZ, idle / HZ


def one_epoch(name, mounted, setup, epoch, each):
    """@return the epoch's seconds. each: also prints the daemon's CPU
    in it and in the second after it (work it left for later), which
    the sums then include."""
    pid = mounted.proc.pid
    before, threads = cpu_seconds(pid), thread_seconds(pid)
    wall = run.measure_once(name, setup, epoch)[0]
    if each:
        during = cpu_seconds(pid)
        spent = by_name(threads, thread_seconds(pid))
        time.sleep(1)
        after = cpu_seconds(pid)
        split = ", ".join(f"{n} {1000 * t:.0f} ms, {k} switched out"
                          for n, (t, k) in sorted(spent.items()))
        print(f"  {name} epoch {epoch}: {wall:.3f} s, daemon CPU "
              f"{1000 * (during - before):4.0f} ms ({split}), in the "
              f"second after {1000 * (after - during):3.0f} ms")
    return wall


def per_epoch(name, mounted, setup, epochs, each=False):
    one_epoch(name, mounted, setup, 0, each)
    before = cpu_seconds(mounted.proc.pid)
    busy0, idle0 = machine_seconds()
    wall = sum(one_epoch(name, mounted, setup, e, each)
               for e in range(1, epochs + 1))
    busy1, idle1 = machine_seconds()
    cpu = cpu_seconds(mounted.proc.pid) - before
    print(f"{name:36s} daemon CPU {1000 * cpu / epochs:6.0f} ms/epoch, "
          f"machine busy {1000 * (busy1 - busy0) / epochs:6.0f} "
          f"idle {1000 * (idle1 - idle0) / epochs:5.0f} ms/epoch, "
          f"epoch {wall / epochs:5.2f} s")
    return cpu / epochs, wall / epochs


def source(args, kind):
    """The benchmark file of kind (dense, csr), warm in the page cache."""
    path = os.path.join(args.dir, f"{kind}-{args.rows}.h5ad")
    if not os.path.exists(path):
        raise SystemExit(f"bench: {path} is missing: run scripts/bench")
    run.warm(path)
    return path


def csr_files(args):
    """A directory of args.files CSR .h5ad files of args.rows rows in all,
    about 10 % of values stored, warm in the page cache."""
    import h5py
    import numpy as np
    import scipy.sparse as sp
    d = os.path.join(args.dir, f"csr-{args.rows}-in-{args.files}")
    if not os.path.isdir(d):
        os.makedirs(d + ".part", exist_ok=True)
        rng = np.random.default_rng(0)
        each = -(-args.rows // args.files)
        for k in range(args.files):
            n = min(each, args.rows - k * each)
            x = sp.random(n, args.cols, density=0.1, format="csr",
                          dtype=np.float32, random_state=rng)
            with h5py.File(os.path.join(d + ".part", f"{k:06d}.h5ad"),
                           "w") as f:
                f.attrs["encoding-type"] = "anndata"
                f.attrs["encoding-version"] = "0.1.0"
                g = f.create_group("X")
                g.attrs["encoding-type"] = "csr_matrix"
                g.attrs["encoding-version"] = "0.1.0"
                g.attrs["shape"] = np.array(x.shape)
                g["data"], g["indices"], g["indptr"] = (x.data, x.indices,
                                                        x.indptr)
        os.rename(d + ".part", d)
    for name in os.listdir(d):
        run.warm(os.path.join(d, name))
    return d


def measure_rankfs(name, path, strategy, options, ext, epochs, work,
                   each=False):
    mnt = tempfile.mkdtemp(dir=work)
    m = run.rankfs_mount(path, f"world_size={run.RANKS},"
                         f"batch_size={run.BATCH},strategy={strategy}"
                         + (f",{options}" if options else ""), mnt)
    try:
        return per_epoch(name, m, run.rankfs_reader(mnt, ext), epochs,
                         each)
    finally:
        m.close()


def csr(args):
    path = source(args, "csr")
    work = tempfile.mkdtemp(prefix="rankfs-cpu-")
    for strategy in args.strategies.split(","):
        measure_rankfs(f"rankfs {strategy} (CSR .npz)", path, strategy, "",
                       ".npz", args.epochs, work)


def compare(args):
    if args.files:
        path, ext = csr_files(args), ".npz"
    else:
        path, ext = ((source(args, "csr"), ".npz") if args.csr else
                     (source(args, "dense"), ".npy"))
    strategy = args.strategies.split(",")[0]
    builds = args.builds.split(",")
    work = tempfile.mkdtemp(prefix="rankfs-cpu-")
    got = {b: [] for b in builds}
    for _ in range(args.rounds):
        for b in builds:
            run.RANKFS = os.path.abspath(b)
            got[b].append(measure_rankfs(b, path, strategy, args.options,
                                         ext, args.epochs, work))
    for b, xs in got.items():
        print(f"median {b:29s} daemon CPU "
              f"{1000 * statistics.median(x[0] for x in xs):6.0f} ms/epoch, "
              f"epoch {statistics.median(x[1] for x in xs):5.3f} s")


def turns(args):
    path = source(args, "dense")
    strategy = args.strategies.split(",")[0]
    work = tempfile.mkdtemp(prefix="rankfs-cpu-")
    mounted = []
    try:
        for b in args.builds.split(","):
            mnt = tempfile.mkdtemp(dir=work)
            run.RANKFS = os.path.abspath(b)
            mounted.append((b, run.rankfs_mount(
                path, f"world_size={run.RANKS},batch_size={run.BATCH},"
                f"strategy={strategy}"
                + (f",{args.options}" if args.options else ""), mnt),
                run.rankfs_reader(mnt, ".npy")))
        got = {b: [] for b, _, _ in mounted}
        for epoch in range(args.epochs + 1):
            line = []
            for b, m, setup in mounted:
                before = cpu_seconds(m.proc.pid)
                wall = run.measure_once(b, setup, epoch)[0]
                cpu = cpu_seconds(m.proc.pid) - before
                line.append(f"{b} {cpu:.2f}/{wall:.2f}")
                if epoch:  # epoch 0 is the warm-up
                    got[b].append((cpu, wall))
            print(f"epoch {epoch} daemon CPU/epoch s: " + " | ".join(line))
        for b, xs in got.items():
            print(f"median {b:29s} daemon CPU "
                  f"{1000 * statistics.median(x[0] for x in xs):6.0f} "
                  f"ms/epoch, epoch "
                  f"{statistics.median(x[1] for x in xs):5.3f} s")
    finally:
        for _, m, _ in mounted:
            m.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--rows", type=int, default=100000)
    ap.add_argument("--cols", type=int, default=1000)
    ap.add_argument("--dir", default=os.path.join(run.REPO, "data", "bench"))
    ap.add_argument("--strategies", default="shuffle",
                    help="comma-separated rankfs strategies to measure")
    ap.add_argument("--csr", action="store_true",
                    help="the CSR file's .npz batches instead")
    ap.add_argument("--files", type=int, default=0,
                    help="with --builds: a directory of this many CSR "
                    "files instead")
    ap.add_argument("--builds", metavar="BIN,BIN",
                    help="compare these rankfs binaries, in turn")
    ap.add_argument("--rounds", type=int, default=3,
                    help="with --builds: rounds of every build")
    ap.add_argument("--options", default="",
                    help="with --builds: extra mount options")
    ap.add_argument("--turns", action="store_true",
                    help="with --builds: all mounted, taking turns per "
                    "epoch")
    ap.add_argument("--distinct", action="store_true",
                    help="also the trivial server with distinct bytes")
    ap.add_argument("--each", action="store_true",
                    help="print every epoch, its daemon CPU per thread "
                    "name, and the daemon's CPU in the second after it "
                    "(idle: the machine's busy and idle times then count "
                    "those seconds too)")
    args = ap.parse_args()
    if args.builds:
        return turns(args) if args.turns else compare(args)
    if args.csr:
        return csr(args)
    path = source(args, "dense")
    work = tempfile.mkdtemp(prefix="rankfs-cpu-")
    trivialfs = os.path.join(work, "trivialfs")
    run.build_trivialfs(trivialfs)
    nb = args.rows // (run.RANKS * run.BATCH)
    for strategy in args.strategies.split(","):
        measure_rankfs(f"rankfs {strategy}", path, strategy, "", ".npy",
                       args.epochs, work, args.each)
    for distinct in (False, True)[:1 + args.distinct]:
        mnt = tempfile.mkdtemp(dir=work)
        m = run.trivial_mount(trivialfs, nb * (args.epochs + 1), args.cols,
                              mnt, False, distinct)
        try:
            per_epoch("trivial FUSE server" +
                      (" distinct" if distinct else ""), m,
                      run.trivial_reader(mnt, nb), args.epochs, args.each)
        finally:
            m.close()


if __name__ == "__main__":
    main()
