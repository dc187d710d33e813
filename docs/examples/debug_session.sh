#!/bin/sh
# SPDX-License-Identifier: MIT
# A debugging session with ls and cat: what a rank will read, and whether
# two nodes agree. Usage: debug_session.sh SOURCE.h5 MOUNTPOINT
# (RANKFS and PYTHON name the binaries; default: rankfs and python3 on
# PATH). Unmounts on exit.
set -eu
src=$1 mnt=$2
rankfs=${RANKFS:-rankfs}
python=${PYTHON:-python3}
mkdir -p "$mnt"
"$rankfs" -o dataset=/images,label=/labels,world_size=2,batch_size=64 \
	"$src" "$mnt"
trap 'fusermount3 -u "$mnt"' EXIT

set -x
ls "$mnt"
cat "$mnt/config.json"                      # options, and the view_id to compare across nodes
ls "$mnt/epoch/3/rank/1"                    # batch/ index/ label/
ls "$mnt/epoch/3/rank/1/batch" | head -3
ls -l "$mnt/epoch/3/rank/1/batch/000042.npy"  # exact size, nothing generated yet
"$python" -c "import numpy, sys; print(numpy.load(sys.argv[1])[:10])" \
	"$mnt/epoch/3/rank/1/index/000042.npy"  # which rows batch 42 holds
"$python" -c "import os, sys; print(os.getxattr(sys.argv[1], 'user.rankfs.xxh3'))" \
	"$mnt/epoch/3/rank/1/batch/000042.npy"  # compare with another node
cat "$mnt/stats.json"                       # who read what, who waited
