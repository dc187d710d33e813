#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""JAX on a rankfs mount: a softmax classifier trained on one process's
batches, read by rankfs.jax.loader (threads, in order, put on the
default device), labels from label/.

    rankfs -o dataset=/images,label=/labels,dtype=float32,batch_size=256,\\
        seed=1 data/fashion-mnist.h5 /mnt/fm
    docs/examples/jax_loader.py /mnt/fm --epochs 2

With several processes (jax.distributed.initialize()), mount with
world_size=jax.process_count() on every host: the loader takes the rank
from jax.process_index(), refuses another world size, and compares the
view_id of every process's mount. Prints one JSON line: the loss of the
last batch of each epoch and the rows trained on.
"""
import argparse
import json

import jax
import jax.numpy as jnp

import rankfs
import rankfs.jax


def loss_fn(params, x, y):
    logits = x @ params["w"] + params["b"]
    return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(len(y)), y])


@jax.jit
def train_step(params, x, y, lr=0.5):
    loss, grads = jax.value_and_grad(loss_fn)(params, x / 255.0, y)
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params,
                                  grads), loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mount")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--rank", type=int)  # one process reading one rank
    args = ap.parse_args()

    m = rankfs.Mount(args.mount)
    classes = len(m.label_categories or []) or 10
    params = {"w": jnp.zeros((m.columns, classes)),
              "b": jnp.zeros(classes)}
    losses, rows = [], 0
    for epoch in range(args.epochs):
        for x, y in rankfs.jax.loader(m, epoch, rank=args.rank,
                                      labels=True):
            params, loss = train_step(params, x, y)
            rows += x.shape[0]
        losses.append(float(loss))
    print(json.dumps({"view_id": m.view_id, "losses": losses,
                      "rows": rows}))


if __name__ == "__main__":
    main()
