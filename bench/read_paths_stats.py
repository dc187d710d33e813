# SPDX-License-Identifier: MIT
"""Summaries of bench/read_paths.sh output.

    python3 bench/read_paths_stats.py FILE...             medians per path
    python3 bench/read_paths_stats.py --paired A B FILE... B/A per round
"""
import sys
if sys.argv[1] == "--paired":
    sys.argv = [sys.argv[0]] + sys.argv[2:]
    import sys, statistics as st, collections
    # paired ratio A/B per round (same rows): time(b)/time(a)
    a, b = sys.argv[1], sys.argv[2]
    for fn in sys.argv[3:]:
        d = collections.defaultdict(dict)
        for l in open(fn):
            f = l.split()
            if len(f) < 11: continue
            d[f[0]][f[2]] = (float(f[6]), float(f[8]))
        r = sorted(v[b][0]/v[a][0] for v in d.values() if a in v and b in v)
        c = sorted(v[b][1]/v[a][1] for v in d.values() if a in v and b in v)
        wins = sum(x > 1 for x in r)
        print(f"{fn}: n={len(r)} wall {b}/{a} median {st.median(r):.3f} IQR {r[len(r)//4]:.3f}-{r[3*len(r)//4]:.3f} min-max {r[0]:.3f}-{r[-1]:.3f}; {a} faster in {wins}/{len(r)}; cpu ratio median {st.median(c):.3f}")
    sys.exit(0)
import sys, statistics as st, collections
rows = collections.defaultdict(list)
for fn in sys.argv[1:]:
    for l in open(fn):
        f = l.split()
        if len(f) < 11: continue
        rnd, load, path, reg, th, n, sec, rps, cpu, minf, majf = f[:11]
        rows[(reg, th, path)].append((float(sec), float(rps), float(cpu), int(minf), int(majf), float(load)))
groups = collections.defaultdict(dict)
for k, v in rows.items():
    groups[k[:2]][k[2]] = v
for g, paths in sorted(groups.items()):
    best = max(st.median([x[1] for x in v]) for v in paths.values())
    print(f"== regime={g[0]} threads={g[1]}")
    print(f"{'path':7} {'n':>3} {'med s':>8} {'min-max s':>17} {'med rows/s':>11} {'min-max rows/s':>19} {'/best':>6} {'cpu s':>7} {'majflt':>7} {'load':>5}")
    for p, v in sorted(paths.items(), key=lambda kv: -st.median([x[1] for x in kv[1]])):
        s = [x[0] for x in v]; r = [x[1] for x in v]
        m = st.median(r)
        print(f"{p:7} {len(v):3} {st.median(s):8.4f} {min(s):8.4f}-{max(s):8.4f} {m:11.0f} {min(r):9.0f}-{max(r):9.0f} {m/best:6.2f} {st.median([x[2] for x in v]):7.3f} {st.median([x[4] for x in v]):7.0f} {st.median([x[5] for x in v]):5.2f}")
