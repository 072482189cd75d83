#!/usr/bin/env bash
# Compare two run_suite.sh output folders with the wall-clock fields removed; exits 1 if any
# file differs (and names it).
#
# usage: benchmarks/ab/jdiff.sh DIR_A DIR_B
set -uo pipefail
if [ $# -ne 2 ]; then
    echo "usage: $0 DIR_A DIR_B" >&2
    exit 2
fi
n=0
bad=0
filt() {
    grep -v -E '"(timestamp|timestamp_ms|time|wall_s)" *:' "$1" |
        sed -E 's/[0-9.]+ s wall/N s wall/g; s/simulated in [0-9.]+ s/simulated in N s/g; s/, [0-9.]+ s$/, N s/'
}
for f in "$1"/*.json "$1"/*.log "$1"/*.txt "$1"/*.err; do
    [ -e "$f" ] || continue
    b=$(basename "$f")
    n=$((n + 1))
    if [ ! -e "$2/$b" ] || ! cmp -s <(filt "$f") <(filt "$2/$b"); then
        echo "DIFF $b"
        bad=$((bad + 1))
    fi
done
echo "$n files compared (wall-clock fields removed), $bad differ"
[ "$bad" -eq 0 ]
