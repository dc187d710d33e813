#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""PyTorch DDP on a rankfs mount: no sampler, just each rank's directory.

Every rank reads MOUNT/epoch/E/rank/R/batch/ (images, float32 via
-o dtype=float32) and label/ (targets) with rankfs.torch.loader, which
takes the rank from the process group, checks the world size and the
view_id of every rank's mount, and reads the files with threads. The
script asserts the view_id itself too, and all-gathers the index/ files
of each epoch to check that the ranks were disjoint. With --baseline it
trains the same model on the same data held in memory, with PyTorch's
DistributedSampler, for comparison.

Start one process per rank, as torchrun would (Debian's torch 1.13 has a
torchrun that fails on Python 3.11, so set the variables yourself):

    rankfs -o dataset=/images,label=/labels,dtype=float32,world_size=2,\\
        batch_size=256,strategy=shuffle,seed=1 data/fashion-mnist.h5 /mnt/fm
    for r in 0 1; do MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 RANK=$r \\
        WORLD_SIZE=2 docs/examples/ddp_fashion_mnist.py --mount /mnt/fm \\
        --data data/fashion-mnist.h5 & done; wait

The rankfs package comes with `cmake --install build` (or set
PYTHONPATH=python in the repository). Rank 0 prints one JSON line:
accuracy on the 10,000 test images, rows trained on, and whether the
ranks were disjoint in every epoch.
"""
import argparse
import datetime
import json
import os
import sys

import h5py
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.utils.data as tud

import rankfs
import rankfs.torch


def model():
    torch.manual_seed(0)  # the same start for rankfs and baseline
    return nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))


def train_epoch(ddp, opt, batches):
    seen = []
    for x, y, index in batches:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(ddp(x / 255.0), y)
        loss.backward()
        opt.step()
        seen.append(np.asarray(index))
    return np.concatenate(seen)


def with_index(loader, mount, epoch, rank):
    """(x, y, global row ids) of each batch: the ids from index/."""
    for k, (x, y) in enumerate(loader):
        yield x, y, np.load(mount.index_path(epoch, rank, k))


def memory_batches(images, labels, rank, world, epoch, batch_size):
    ds = tud.TensorDataset(torch.from_numpy(images),
                           torch.from_numpy(labels),
                           torch.arange(len(labels)))
    sampler = tud.DistributedSampler(ds, num_replicas=world, rank=rank,
                                     shuffle=True, seed=1, drop_last=True)
    sampler.set_epoch(epoch)
    return tud.DataLoader(ds, batch_size=batch_size, sampler=sampler,
                          drop_last=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mount")
    ap.add_argument("--data", required=True)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--baseline", action="store_true")
    args = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)
    # A rank that cannot start fails within a minute instead of leaving
    # the others waiting for it for half an hour.
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))

    with h5py.File(args.data, "r") as f:
        test_x = torch.from_numpy(f["test/images"][()].astype(np.float32))
        test_y = torch.from_numpy(f["test/labels"][()])
        if args.baseline:
            images = f["images"][()].astype(np.float32)
            labels = f["labels"][()]

    if not args.baseline:
        mount = rankfs.Mount(args.mount)
        # Every rank must read the same view (rankfs.torch.loader checks
        # it as well): same source, same options, same view_id.
        views = [None] * world
        dist.all_gather_object(views, mount.view_id)
        if len(set(views)) != 1:
            sys.exit(f"view_id differs across ranks: {views}")

    ddp = nn.parallel.DistributedDataParallel(model())
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    disjoint, rows = True, 0
    for epoch in range(args.epochs):
        if args.baseline:
            batches = memory_batches(images, labels, rank, world, epoch,
                                     args.batch_size)
        else:
            batches = with_index(
                rankfs.torch.loader(mount, epoch, labels=True,
                                    threads=args.threads),
                mount, epoch, rank)
        seen = train_epoch(ddp, opt, batches)
        everyone = [None] * world
        dist.all_gather_object(everyone, seen)
        every_row = np.concatenate(everyone)
        disjoint &= len(np.unique(every_row)) == len(every_row)
        rows += len(every_row)

    if rank == 0:
        with torch.no_grad():
            pred = ddp.module(test_x / 255.0).argmax(1)
        accuracy = float((pred == test_y).float().mean())
        print(json.dumps({"mode": "baseline" if args.baseline else "rankfs",
                          "accuracy": accuracy, "rows": rows,
                          "disjoint": bool(disjoint)}), flush=True)
    # Leave once both ranks are done, without torch 1.13's exit-time
    # destructors: destroying the DDP reducer joins a gloo thread that may
    # be waiting for the GIL the destructor holds (a rank hung so, at 100 %
    # CPU, after printing its result).
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
