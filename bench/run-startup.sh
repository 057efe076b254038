#!/usr/bin/env bash
# Start-up to ready on an existing schema: the time from the exec of `queuebox serve` to the first 200
# of GET /health/ready, polled every 2 ms over a fresh connection (qb-bench-startup), RUNS times
# (default 10), then the median. Each start is stopped with SIGTERM before the next.
source "$(dirname "$0")/lib.sh"
RUNS=${1:-10}
need_bins
db=qb_bench_start_$$
new_db "$db"; migrate "$db"
cfg=$WORK/start.yml; write_config "$db" "$cfg"
start_receiver   # the destination exists, as in production; no rows are waiting
vals=()
for run in $(seq 1 "$RUNS"); do
  out=$("$STARTUP_BIN" --port "$QB_PORT" --interval-ms 2 --timeout-s 20 -- "$QB_BIN" --config "$cfg" serve)
  echo "startup run=$run $out"
  vals+=("$(echo "$out" | field ready_ms)")
done
printf '%s\n' "${vals[@]}" | sort -n | awk '{a[NR]=$1} END{printf "startup runs=%d min_ms=%s median_ms=%s max_ms=%s\n", NR, a[1], (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2), a[NR]}'
