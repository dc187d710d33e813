#!/bin/sh
# SPDX-License-Identifier: MIT
# Interleaved rounds of bench/read_paths.c (root, for drop_caches):
#   bench/read_paths.sh ROUNDS FILE ROWS BATCHES THREADS warm|cold PATH...
# Each round runs every PATH once, the order rotated by one per round;
# appends "round loadavg1 <read_paths line>" to stdout.
set -eu
rounds=$1 file=$2 rows=$3 batches=$4 threads=$5 regime=$6
shift 6
bin=${BIN:-build/rankfs-bench-read-paths}
n=$#
r=0
while [ "$r" -lt "$rounds" ]; do
	i=0
	while [ "$i" -lt "$n" ]; do
		k=$(( (i + r) % n + 1 ))
		eval p=\${$k}
		load=$(cut -d' ' -f1 /proc/loadavg)
		line=$("$bin" run "$file" 2048 "$rows" 1000 "$p" "$batches" \
			"$threads" "$((r + 1))" "$regime" 2>/dev/null)
		echo "$r $load $line"
		i=$((i + 1))
	done
	r=$((r + 1))
done
