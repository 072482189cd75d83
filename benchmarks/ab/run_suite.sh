#!/usr/bin/env bash
# The bit-identity suite of docs/performance.md ("A/B runs"): a fixed set of fio jobs, tenants
# and `reproduce pblaze5`, run with one build of ssdtwin into OUTDIR. Run it with two builds
# and compare with jdiff.sh: where the model did not change, only wall-clock fields differ.
#
# usage: benchmarks/ab/run_suite.sh OUTDIR        (SSDTWIN: the command to run, default `ssdtwin`)
set -euo pipefail
if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR   (SSDTWIN=/path/to/venv/bin/ssdtwin to pick a build)" >&2
    exit 2
fi
JOBS=$(cd "$(dirname "$0")/jobs" && pwd)
OUT=$1
SSDTWIN=${SSDTWIN:-ssdtwin}
rm -rf "$OUT" && mkdir -p "$OUT" && cd "$OUT"
# The job files are copied and named relatively, so the notes that quote them are the same
# wherever the suite runs.
cp -r "$JOBS" ./jobs
st() { $SSDTWIN "$@"; }

# CM6-V at 1/256: reads, writes, mixes, a rate limit and a latency target; again in power state 2.
st create ./cm6 --model kioxia-cm6-v-3.2t --scale 1/256 > create.txt
st precondition ./cm6 --seq 128k > pre.txt 2>&1
for j in rr1 rw8 mix1qd1 mix8 rate lat; do
    st fio ./cm6 "jobs/$j.fio" --output-format json+ > "$j.json" 2> "$j.err" || echo "ERR $j"
done
st nvme set-feature ./cm6 -f 0x02 -v 2 > ps.txt
for j in rr1 mix1qd1 rw8; do
    st fio ./cm6 "jobs/$j.fio" --output-format json+ > "ps2-$j.json" 2> "ps2-$j.err" || echo "ERR ps2 $j"
done

# PBlaze5 at 1/64: three tenants (one on a DRAM namespace), a QoS cap and WRR arbitration.
st create ./pb5 --model memblaze-pblaze5-910-3.84t --scale 1/64 > c2.txt
st nvme delete-ns ./pb5 -n 0xffffffff > t.txt
st nvme create-ns ./pb5 -s 4194304 -c 4194304 -b 512 >> t.txt
st nvme create-ns ./pb5 -s 8388608 -c 8388608 -b 4096 >> t.txt
st nvme create-ns ./pb5 --dram -s 65536 -c 65536 -b 512 >> t.txt
for n in 1 2 3; do st nvme attach-ns ./pb5 -n $n -c 1 >> t.txt; done
st nvme qos ./pb5 -n 2 --read-mbps 391 --write-mbps 100 --iops 100000 >> t.txt
st nvme qos ./pb5 -n 1 --sq-priority high >> t.txt
st nvme set-feature ./pb5 -f 0x01 -v 0x0f030000 >> t.txt
st fio ./pb5 "jobs/tenants.fio" --output-format json+ > tenants.json 2> tenants.err || echo "ERR tenants"
st reproduce pblaze5 -o json > pblaze5.json 2> pblaze5.err || echo "ERR pblaze5"
for d in cm6 pb5; do st check "./$d" > "check-$d.txt"; done
