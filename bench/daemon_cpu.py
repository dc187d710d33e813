#!/usr/bin/python3
"""CPU the FUSE daemon spends per epoch: rankfs against the trivial server.

The side-by-side benchmark times whole epochs, which on 2 cores mixes the
daemon's work with the readers'. This counts the daemon's own CPU
(utime + stime from /proc/PID/stat, its threads and kernel work included)
while 2 ranks read epochs 1..N of the dense file with np.load, after an
unmeasured epoch 0, for rankfs (shuffle, or --strategies) and the trivial
server, each with and without direct_io.

    bench/daemon_cpu.py [--epochs 4] [--strategies streaming,block_shuffle,
                        shuffle] [--dir data/bench]   (after scripts/bench
                                                      wrote the data)

With --csr it reads the CSR file's .npz batches instead (scipy's
load_npz), page cache only, and no trivial server.
"""
import argparse
import os
import tempfile

import run

HZ = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / HZ  # utime, stime


def machine_seconds():
    """Busy and idle CPU seconds of the whole machine, all cores."""
    with open("/proc/stat") as f:
        ticks = [int(t) for t in f.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return (sum(ticks) - idle) / HZ, idle / HZ


def per_epoch(name, mounted, setup, epochs):
    run.measure_once(name, setup, 0)
    before = cpu_seconds(mounted.proc.pid)
    busy0, idle0 = machine_seconds()
    wall = sum(run.measure_once(name, setup, e)[0]
               for e in range(1, epochs + 1))
    busy1, idle1 = machine_seconds()
    cpu = cpu_seconds(mounted.proc.pid) - before
    print(f"{name:36s} daemon CPU {1000 * cpu / epochs:6.0f} ms/epoch, "
          f"machine busy {1000 * (busy1 - busy0) / epochs:6.0f} "
          f"idle {1000 * (idle1 - idle0) / epochs:5.0f} ms/epoch, "
          f"epoch {wall / epochs:5.2f} s")


def csr(args):
    path = os.path.join(args.dir, f"csr-{args.rows}.h5ad")
    if not os.path.exists(path):
        raise SystemExit(f"bench: {path} is missing: run scripts/bench")
    run.warm(path)
    work = tempfile.mkdtemp(prefix="rankfs-cpu-")
    for strategy in args.strategies.split(","):
        mnt = tempfile.mkdtemp(dir=work)
        m = run.rankfs_mount(path, f"world_size={run.RANKS},"
                             f"batch_size={run.BATCH},strategy={strategy}",
                             mnt)
        try:
            per_epoch(f"rankfs {strategy} (CSR .npz)", m,
                      run.rankfs_reader(mnt, ".npz"), args.epochs)
        finally:
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
    args = ap.parse_args()
    if args.csr:
        return csr(args)
    path = os.path.join(args.dir, f"dense-{args.rows}.h5ad")
    if not os.path.exists(path):
        raise SystemExit(f"bench: {path} is missing: run scripts/bench")
    run.warm(path)
    work = tempfile.mkdtemp(prefix="rankfs-cpu-")
    trivialfs = os.path.join(work, "trivialfs")
    run.build_trivialfs(trivialfs)
    nb = args.rows // (run.RANKS * run.BATCH)
    for direct_io in (False, True):
        suffix = " direct_io" if direct_io else ""
        for strategy in args.strategies.split(","):
            mnt = tempfile.mkdtemp(dir=work)
            m = run.rankfs_mount(path, f"world_size={run.RANKS},"
                                 f"batch_size={run.BATCH},"
                                 f"strategy={strategy}"
                                 + (",direct_io" if direct_io else ""), mnt)
            try:
                per_epoch(f"rankfs {strategy}{suffix}", m,
                          run.rankfs_reader(mnt, ".npy"), args.epochs)
            finally:
                m.close()
        mnt = tempfile.mkdtemp(dir=work)
        m = run.trivial_mount(trivialfs, nb * (args.epochs + 1), args.cols,
                              mnt, direct_io)
        try:
            per_epoch("trivial FUSE server" + suffix, m,
                      run.trivial_reader(mnt, nb), args.epochs)
        finally:
            m.close()


if __name__ == "__main__":
    main()
