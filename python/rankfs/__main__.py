# SPDX-License-Identifier: MIT
"""python3 -m rankfs MOUNT: one screen about a mount (view_id, options,
sizes, and each rank's progress from stats.json)."""
from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, List, Optional

import numpy as np

from ._mount import Mount

# The options that change bytes come first.
BYTES_OPTIONS = ("world_size", "batch_size", "seed", "strategy",
                 "block_size", "fetch_factor", "partition", "drop_last",
                 "total_size", "weights", "label", "smoothing", "filter",
                 "dataset", "dtype")


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return ""


def _value(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def _words(c: Dict[str, Any], keys: List[str]) -> List[str]:
    """KEY=VALUE for each option, one for each value of a repeated
    option (filter= is a list: one filter each, values in a filter
    joined by |)."""
    out: List[str] = []
    for k in keys:
        v = c[k]
        values = (v or [None]) if isinstance(v, list) else [v]
        out += [f"{k}={_value(x)}" for x in values]
    return out


def _wrap(words: List[str], first: str, rest: str, width: int = 79
          ) -> List[str]:
    """words on lines of width, never cut inside one (a filter's
    values may hold spaces)."""
    lines = [first]
    for w in words:
        if len(lines[-1]) > len(rest) and \
                len(lines[-1]) + 1 + len(w) > width:
            lines.append(rest)
        lines[-1] += w if len(lines[-1]) == len(rest) else " " + w
    return lines


def _last(rank: Dict[str, Any]) -> str:
    last = rank.get("last_opened")
    if not last:
        return "-"
    return f"e{last['epoch']} b{last['batch']} {last['seconds_ago']}s ago"


def _epoch_rate(rank: Dict[str, Any]) -> str:
    """rows/s over the rank's last epoch read (stats.json's
    epoch_rows_per_s), which stays when rows/s falls to 0."""
    rate = rank.get("epoch_rows_per_s")
    return "-" if rate is None else f"{rate:.1f}"


def summary(m: Mount, stats: Optional[Dict[str, Any]] = None) -> str:
    """The text `python3 -m rankfs MOUNT` prints."""
    c, d = m.config, m.dataset
    stats = m.stats if stats is None else stats
    nb = m.batches_per_rank
    item = np.dtype(m.dtype).itemsize
    rows_per_batch = m.batch_size
    batch_bytes = rows_per_batch * m.columns * item
    out: List[str] = []
    out.append(f"rankfs {m.path}  view_id {m.view_id}")
    sources = d.get("sources", [])
    first = sources[0]["path"] if sources else "?"
    more = f" (+{len(sources) - 1} more)" if len(sources) > 1 else ""
    out.append(f"source    {first}{more}  {d.get('dataset')}  "
               f"{d.get('format')} {d.get('dtype')}, read by "
               f"{d.get('read_path')}")
    out.append(f"data      {d['rows']} rows x {d['columns']} columns"
               f", {d.get('filtered_rows', d['rows'])} kept; served as "
               f"{m.dtype}")
    label = d.get("label")
    if label:
        cats = label.get("categories")
        what = f"{len(cats)} categories" if cats is not None else \
            label.get("kind", "")
        out.append(f"label     {label['column']} ({what})")
    shown = [k for k in BYTES_OPTIONS if k in c] + \
        [k for k in c if k not in BYTES_OPTIONS and k != "view_id"]
    out += _wrap(_words(c, shown), "options   ", " " * 10)
    out.append(f"sizes     {nb} batches per rank per epoch, "
               f"{m.world_size} ranks, {m.epochs} epochs listed "
               f"({m.steps} steps)")
    out.append(f"          a batch {rows_per_batch} x {m.columns} "
               f"{m.dtype} = {_size(batch_bytes)}, an epoch "
               f"{_size(batch_bytes * nb * m.world_size)}")
    out.append(f"served    {stats.get('batches_served', 0)} batches, "
               f"{_size(stats.get('bytes_served', 0))}")
    out.append(f"{'rank':>6} {'batches':>9} {'served':>11} {'rows/s':>9} "
               f"{'epoch r/s':>9} {'ready':>6} {'wait_s':>8}  last opened")
    ranks = stats.get("ranks", [])
    shown = ranks if len(ranks) <= 12 else ranks[:6] + ranks[-6:]
    for i, r in enumerate(shown):
        if len(ranks) > 12 and i == 6:
            out.append(f"{'...':>6} ({len(ranks) - 12} ranks not shown)")
        out.append(f"{r['rank']:>6} {r['batches_served']:>9} "
                   f"{_size(r['bytes_served']):>11} "
                   f"{r['rows_per_s']:>9.1f} {_epoch_rate(r):>9} "
                   f"{r['ready_rate']:>6.2f} "
                   f"{r['wait_s']:>8.3f}  {_last(r)}")
    return "\n".join(out)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python3 -m rankfs",
        description="One screen about a rankfs mount: view_id, options, "
                    "sizes, per-rank progress (stats.json).")
    ap.add_argument("mount", help="the mountpoint")
    args = ap.parse_args(argv)
    try:
        m = Mount(args.mount)
        text = summary(m)
    except (OSError, ValueError) as e:
        print(f"python3 -m rankfs: {e}", file=sys.stderr)
        return 1
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
