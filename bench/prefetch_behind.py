#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Batches generated beyond those read, when prefetch falls behind.

Two ranks read --epochs epochs of a gzip-chunked HDF5 file (20,000 x 200
float32, chunks of 100 rows) in order, as fast as np.load goes, while one
prefetch thread (-o threads=1) decodes for both: the readers outrun it.
Every batch read once, so a generation past the batches opened is one
made for nobody. Each build in --builds mounts in turn, --rounds times.

    bench/prefetch_behind.py --builds OLD/build/rankfs,build/rankfs
"""
import argparse
import json
import multiprocessing as mp
import os
import subprocess
import tempfile
import time

import h5py
import numpy as np

OPTIONS = ("dataset=/x,world_size=2,batch_size=128,strategy=shuffle,"
           "threads=1,cache_mb=16")


def read_rank(mnt, rank, epochs):
    for e in range(epochs):
        d = f"{mnt}/epoch/{e}/rank/{rank}/batch"
        for name in sorted(os.listdir(d)):
            np.load(f"{d}/{name}")


def measure(binary, src, mnt, epochs):
    subprocess.run([binary, "-o", OPTIONS, src, mnt], check=True)
    try:
        start = time.monotonic()
        procs = [mp.Process(target=read_rank, args=(mnt, r, epochs))
                 for r in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        seconds = time.monotonic() - start
        with open(f"{mnt}/stats.json") as f:
            s = json.load(f)
    finally:
        subprocess.run(["fusermount3", "-u", mnt], check=True)
    made, read = s["generation"]["batches"], s["batches_served"]
    print(f"{binary:40} read {read:5}  generated {made:5}  extra "
          f"{made - read:5} ({(made - read) / read:5.1%})  misses "
          f"{s['cache']['misses']:5}  {seconds:5.1f} s", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--builds", required=True, metavar="BIN,BIN")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        src, mnt = os.path.join(d, "gz.h5"), os.path.join(d, "mnt")
        os.mkdir(mnt)
        x = np.random.default_rng(0).random((20000, 200), dtype=np.float32)
        with h5py.File(src, "w") as f:
            f.create_dataset("x", data=x, chunks=(100, 200),
                             compression="gzip", compression_opts=6)
        for _ in range(args.rounds):
            for binary in args.builds.split(","):
                measure(binary, src, mnt, args.epochs)


if __name__ == "__main__":
    main()
