#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Time to open a directory of many small .h5ad files, as a mount does.

Sharded atlases come as one file per sample: hundreds or thousands of
files. Opening each reads its variable-length strings (var names, the
encoding attributes, a label's categories) in another process
(lib/source/hdf5/hdf5_strings.c), so what asking it costs decides the
mount's time.
This writes FILES files of 20 cells x 50 genes each (var names, an obs
categorical 'ct', as anndata writes them) once under --dir, then times
`rankfs-cat DIR dataset.json` (all of a mount's opening, without FUSE)
for each build, interleaved, with and without label=ct (batch_size=8):

    bench/mount_files.py --files 300,1000 --builds OLD/build,build

A build is a build directory holding rankfs-cat. Prints each run's wall
time and peak RSS, then the medians.
"""
import argparse
import os
import statistics
import subprocess
import time

import h5py
import numpy as np


def write_files(d, files):
    if os.path.isdir(d):
        return
    part = d + ".part"
    os.makedirs(part, exist_ok=True)
    rng = np.random.default_rng(0)
    strings = h5py.string_dtype()
    genes = np.array([f"gene{j}" for j in range(50)], dtype=object)
    for k in range(files):
        with h5py.File(os.path.join(part, f"{k:06d}.h5ad"), "w") as f:
            f.attrs["encoding-type"] = "anndata"
            f.attrs["encoding-version"] = "0.1.0"
            x = f.create_dataset("X", data=rng.random((20, 50),
                                                      dtype=np.float32))
            x.attrs["encoding-type"] = "array"
            x.attrs["encoding-version"] = "0.2.0"
            var = f.create_group("var")
            var.attrs["_index"] = "_index"
            var.attrs["encoding-type"] = "dataframe"
            var.attrs["encoding-version"] = "0.2.0"
            var.attrs.create("column-order", [], dtype=strings)
            var.create_dataset("_index", data=genes, dtype=strings)
            obs = f.create_group("obs")
            obs.attrs["_index"] = "_index"
            obs.attrs["encoding-type"] = "dataframe"
            obs.attrs["encoding-version"] = "0.2.0"
            obs.attrs.create("column-order", ["ct"], dtype=strings)
            obs.create_dataset("_index", dtype=strings, data=np.array(
                [f"c{k}-{i}" for i in range(20)], dtype=object))
            ct = obs.create_group("ct")
            ct.attrs["encoding-type"] = "categorical"
            ct.attrs["encoding-version"] = "0.2.0"
            ct.attrs["ordered"] = False
            ct.create_dataset("categories", dtype=strings, data=np.array(
                ["B", "T", "NK"], dtype=object))
            ct.create_dataset("codes", data=rng.integers(0, 3, 20,
                                                         dtype=np.int8))
    os.rename(part, d)


def one_run(cat, options, d):
    """@return (seconds, peak RSS in MiB) of rankfs-cat reading
    dataset.json."""
    t = time.monotonic()
    p = subprocess.Popen([cat] + options + [d, "dataset.json"],
                         stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0:
        raise SystemExit(f"bench: {cat} {' '.join(options)} {d} failed")
    return time.monotonic() - t, usage.ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", default="300,1000")
    ap.add_argument("--builds", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "data", "bench"))
    args = ap.parse_args()
    builds = args.builds.split(",")
    for files in map(int, args.files.split(",")):
        d = os.path.join(args.dir, f"h5ad-{files}-files")
        write_files(d, files)
        for options in (["-o", "batch_size=8"],
                        ["-o", "batch_size=8,label=ct"]):
            got = {b: [] for b in builds}
            for _ in range(args.rounds):
                for b in builds:
                    got[b].append(one_run(os.path.join(b, "rankfs-cat"),
                                          options, d))
                    s, rss = got[b][-1]
                    print(f"{files} files {' '.join(options):12s} {b}: "
                          f"{s:.2f} s, peak RSS {rss:.0f} MiB", flush=True)
            for b in builds:
                print(f"median {files} files {' '.join(options):12s} {b}: "
                      f"{statistics.median(x[0] for x in got[b]):.2f} s, "
                      f"peak RSS "
                      f"{statistics.median(x[1] for x in got[b]):.0f} MiB")


if __name__ == "__main__":
    main()
