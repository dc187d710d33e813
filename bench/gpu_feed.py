#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Does rankfs feed a training loop? An MLP (D -> 256 -> D, Adam, MSE to
its input) trains on rank 0's batches of a mount, fed three ways:

  rankfs.torch.loader   threads read batch files into (pinned) tensors,
                        moved to the device non_blocking
  DataLoader            DataLoader(BatchDataset, batch_size=None,
                        num_workers=4, pin_memory=True): worker processes
  in memory             rows already on the device, sliced in the same
                        batch sizes: the loop's own speed, the ceiling

While a file feed trains, ranks 1..W-1 read their batch files of the same
epoch in background processes, as the other ranks of a node would (at
full speed: they do not train). Each file feed reads an epoch no feed
read before, so every batch is generated for it. The data is made here
with h5py (float32, contiguous) and mounted with RANKFS_BIN or
build/rankfs.

    bench/gpu_feed.py                               # on the GPU if present
    bench/gpu_feed.py --rows 8192 --cols 64 --device cpu   # a quick look

Prints rows/s of each feed, their ratios to the ceiling and to each
other, and with --json FILE writes them there.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.utils.data as tud

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
try:  # the package as installed (or on PYTHONPATH), else this tree's
    import rankfs
except ImportError:
    sys.path.insert(0, os.path.join(REPO, "python"))
    import rankfs
import rankfs.torch  # noqa: E402

RANKFS = os.environ.get("RANKFS_BIN", os.path.join(REPO, "build", "rankfs"))


def make_data(path, rows, cols, seed=0):
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        x = f.create_dataset("x", (rows, cols), dtype=np.float32)
        step = max(1, (64 << 20) // (cols * 4))
        for i in range(0, rows, step):
            n = min(step, rows - i)
            x[i:i + n] = rng.standard_normal((n, cols), dtype=np.float32)


def mount(source, mnt, options, log):
    proc = subprocess.Popen([RANKFS, "-f", "-o", options, source, mnt],
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not os.path.exists(os.path.join(mnt, "config.json")):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"gpu_feed: {RANKFS} did not mount {mnt} "
                             f"(see {log.name})")
        time.sleep(0.05)
    return proc


def unmount(mnt, proc):
    subprocess.run(["fusermount3", "-u", mnt], check=False)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


# A background rank: its epoch, in order, as a loader would read it (in a
# process that imports no torch).
READER = ("import sys, rankfs\n"
          "for x in rankfs.loader(sys.argv[1], int(sys.argv[2]),\n"
          "                       rank=int(sys.argv[3]), threads=2):\n"
          "    pass\n")


def start_readers(mnt, epoch, world):
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (os.path.dirname(os.path.dirname(rankfs.__file__)),
                    env.get("PYTHONPATH")) if p)
    return [subprocess.Popen([sys.executable, "-c", READER, mnt, str(epoch),
                              str(r)], env=env)
            for r in range(1, world)]


def stop_readers(readers):
    for p in readers:
        p.wait()
        if p.returncode != 0:
            raise SystemExit(f"gpu_feed: a background reader exited "
                             f"{p.returncode}")


class Trainer:
    def __init__(self, cols, device):
        torch.manual_seed(0)
        self.device = device
        self.model = nn.Sequential(nn.Linear(cols, 256), nn.ReLU(),
                                   nn.Linear(256, cols)).to(device)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def step(self, x):
        self.opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(self.model(x), x)
        loss.backward()
        self.opt.step()
        return loss

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def run(self, batches):
        """Trains on every batch; returns (rows, seconds)."""
        rows = 0
        self.sync()
        t0 = time.perf_counter()
        for x in batches:
            if x.device != self.device:
                x = x.to(self.device, non_blocking=True)
            self.step(x)
            rows += x.shape[0]
        self.sync()
        return rows, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1 << 18)
    ap.add_argument("--cols", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--world-size", type=int, default=4)
    ap.add_argument("--threads", type=int, default=4,
                    help="rankfs.torch.loader's threads")
    ap.add_argument("--workers", type=int, default=4,
                    help="DataLoader's worker processes")
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of the three feeds (best of each kept)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available()
                    else "cpu")
    ap.add_argument("--options", default="",
                    help="more rankfs -o options")
    ap.add_argument("--dir", help="for the data and the mount (default: a "
                    "temporary directory)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    for k in ("RANK", "WORLD_SIZE"):
        os.environ.pop(k, None)

    # More workers than cores is what is measured here.
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    device = torch.device(args.device)
    pin = device.type == "cuda"
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        source = os.path.join(tmp, "rows.h5")
        t0 = time.perf_counter()
        make_data(source, args.rows, args.cols)
        made = time.perf_counter() - t0
        mnt = os.path.join(tmp, "mnt")
        os.mkdir(mnt)
        options = ",".join(o for o in (
            f"dataset=/x,world_size={args.world_size},"
            f"batch_size={args.batch_size},epochs={2 * args.repeat}",
            args.options) if o)
        with open(os.path.join(tmp, "rankfs.log"), "w") as log:
            proc = mount(source, mnt, options, log)
            try:
                results = feed_all(args, mnt, device, pin)
            finally:
                unmount(mnt, proc)
    report(args, device, made, results)


def feed_all(args, mnt, device, pin):
    m = rankfs.Mount(mnt)
    trainer = Trainer(args.cols, device)
    warm = torch.randn(args.batch_size, args.cols, device=device)
    for _ in range(5):  # allocations, Adam's state, kernels chosen
        trainer.step(warm)
    with h5py.File(m.dataset["sources"][0]["path"], "r") as f:
        rows = f["x"][:m.batches_per_rank * args.batch_size]  # rank 0's
    on_device = torch.from_numpy(rows).to(device)
    best = {}

    def keep(name, rows_s):
        best[name] = max(best.get(name, 0.0), rows_s)

    for r in range(args.repeat):
        epoch = 2 * r
        readers = start_readers(mnt, epoch, args.world_size)
        n, s = trainer.run(rankfs.torch.loader(
            m, epoch, rank=0, threads=args.threads, pin_memory=pin,
            device=device))
        stop_readers(readers)
        keep("rankfs.torch.loader", n / s)

        epoch += 1
        readers = start_readers(mnt, epoch, args.world_size)
        ds = rankfs.torch.BatchDataset(m, epoch, rank=0)
        dl = tud.DataLoader(ds, batch_size=None, num_workers=args.workers,
                            pin_memory=pin)
        n, s = trainer.run(dl)
        stop_readers(readers)
        keep("DataLoader(workers)", n / s)

        perm = torch.randperm(len(on_device), device=device)
        n, s = trainer.run(
            on_device[perm[i:i + args.batch_size]]
            for i in range(0, len(perm) - args.batch_size + 1,
                           args.batch_size))
        keep("in memory", n / s)
    return best, m.batches_per_rank


def report(args, device, made, results):
    best, nb = results
    ceiling = best["in memory"]
    w = args.world_size
    others = "no other rank" if w == 1 else "rank 1" if w == 2 else \
        f"ranks 1..{w - 1}"
    print(f"gpu_feed: {args.rows} x {args.cols} float32, batch "
          f"{args.batch_size}, world_size {w} ({others} reading in the "
          f"background), rank 0's "
          f"{nb} batches per epoch, device {device}, data made in "
          f"{made:.1f} s")
    for name, rows_s in best.items():
        print(f"  {name:<22} {rows_s:>12,.0f} rows/s  "
              f"{rows_s / ceiling:6.2f} x in memory")
    ratio = best["rankfs.torch.loader"] / best["DataLoader(workers)"]
    print(f"  rankfs.torch.loader / DataLoader(workers): {ratio:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "device": str(device),
                       "rows_per_s": best, "loader_over_dataloader": ratio},
                      f, indent=1)


if __name__ == "__main__":
    main()
