#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Plain numpy on a rankfs mount: one rank's epoch, read by
rankfs.loader's threads in order, summed into per-column means; then the
same from a global step on, as a job resumed there would read it.

    rankfs -o world_size=2,batch_size=256,seed=7 atlas.h5ad /mnt/atlas
    docs/examples/numpy_loader.py /mnt/atlas --epoch 3 --rank 1

Prints one JSON line: view_id, rank, batches and rows read, the column
means, and the batches left from --start-step. The rank may come from
env RANK and WORLD_SIZE (as torchrun sets, or set them per process:
Debian 12's torchrun fails on Python 3.11, docs/usage.md "Starting the
ranks without torchrun") or SLURM_PROCID and SLURM_NTASKS (as srun
sets) instead.
"""
import argparse
import json

import numpy as np

import rankfs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mount")
    ap.add_argument("--epoch", type=int, default=0)
    ap.add_argument("--rank", type=int)
    ap.add_argument("--start-step", type=int, default=0)
    ap.add_argument("--threads", type=int, default=4)
    args = ap.parse_args()

    m = rankfs.Mount(args.mount)
    batches = rankfs.loader(m, args.epoch, rank=args.rank,
                            threads=args.threads)
    total, rows = np.zeros(m.columns), 0
    for x in batches:  # numpy arrays, in batch order
        total += x.sum(axis=0, dtype=np.float64)
        rows += len(x)

    # Resuming at a global step: step s is batch s mod nb of epoch
    # s div nb, as in MOUNT/step/rank/R/.
    resumed = rankfs.loader(m, args.epoch, rank=batches.rank,
                            start_step=args.start_step)
    print(json.dumps({"view_id": m.view_id, "rank": batches.rank,
                      "batches": len(batches), "rows": rows,
                      "mean": (total / rows).tolist(),
                      "resumed_batches": len(resumed)}))


if __name__ == "__main__":
    main()
