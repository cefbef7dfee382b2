#!/usr/bin/env bash
# Thread scaling of one `neardup` binary on one corpus, in one run: dedup at
# T1 and at T2 threads alternating (T1, T2, T1, T2, ...) so that machine load
# hits both alike; the best of N runs of each, its median, and the speed-up
# T2 over T1 (best over best, and median over median). Throughput is the
# `--json` summary's `mb_per_s` (timed inside the process: no start-up, no
# exit).
#
# `--threads T` sizes the pool that fingerprints and verifies; the reader
# and the thread that inserts and decides run beside it, so a `--threads 1`
# run on a machine with a spare core uses more than one core (~1.1). With
# PIN=1 a run of T threads is confined to T cores (`taskset`, the first T
# of the cores this script may use): the speed-up is then two cores over
# one, every thread of the run included. Where the first two CPUs are
# hyperthreads of one physical core (`lscpu -e` shows their CORE), that is
# what is measured: pin a list of your own with `taskset` instead.
#
# Usage: [PIN=1] bench/scaling.sh BIN CORPUS.jsonl [RUNS] [T1] [T2] [EXTRA DEDUP FLAGS...]
# Defaults: 7 runs, 1 and 2 threads, not pinned.
set -euo pipefail
bin=$1 corpus=$2 runs=${3:-7} t1=${4:-1} t2=${5:-2}
shift $(( $# < 5 ? $# : 5 ))
# The cores this script may run on, in order.
mapfile -t cores < <(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)), sep="\n")')
case ${PIN:-0} in
    0) unit=threads ;;
    1) unit=cores ;;
    *) echo "scaling.sh: PIN is 0 or 1, not '$PIN'" >&2; exit 2 ;;
esac
for t in "$t1" "$t2"; do
    if ! [[ $t =~ ^[1-9][0-9]*$ ]]; then
        echo "scaling.sh: a thread count is a positive integer, not '$t'" >&2
        exit 2
    fi
done
if [[ $unit == cores ]]; then
    for t in "$t1" "$t2"; do
        if (( t > ${#cores[@]} )); then
            echo "scaling.sh: PIN=1 needs $t cores, this process may use ${#cores[@]}" >&2
            exit 2
        fi
    done
fi
pin() {
    if [[ $unit == cores ]]; then
        local list
        list=$(IFS=,; echo "${cores[*]:0:$1}")
        echo taskset -c "$list"
    fi
}
# The summary is read after the run ends: a reader started beside it (a
# pipe into python3) takes CPU from a run that uses every core.
rate() {
    local out
    # shellcheck disable=SC2046 # `pin` prints a command and its arguments, or nothing.
    out=$($(pin "$1") "$bin" dedup "$corpus" --threads "$1" --json -q "${@:2}")
    python3 -c 'import json,sys; print(json.load(sys.stdin)["mb_per_s"])' <<<"$out"
}
a=() b=()
for _ in $(seq "$runs"); do
    a+=("$(rate "$t1" "$@")"); b+=("$(rate "$t2" "$@")")
    echo "  run: ${t1} ${unit} ${a[-1]} MB/s, ${t2} ${unit} ${b[-1]} MB/s" >&2
done
python3 - "$corpus" "$t1" "$t2" "${a[*]}" "${b[*]}" "$unit" <<'PY'
import statistics, sys, os
corpus, t1, t2, a, b, unit = sys.argv[1], sys.argv[2], sys.argv[3], list(map(float, sys.argv[4].split())), list(map(float, sys.argv[5].split())), sys.argv[6]
print(f"| {os.path.basename(corpus)} | {len(a)} | {t1} {unit}: best {max(a):.1f}, median {statistics.median(a):.1f} MB/s "
      f"| {t2} {unit}: best {max(b):.1f}, median {statistics.median(b):.1f} MB/s "
      f"| {max(b)/max(a):.3f}x best, {statistics.median(b)/statistics.median(a):.3f}x median |")
PY
