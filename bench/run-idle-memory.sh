#!/usr/bin/env bash
# Idle resident memory of `queuebox serve` on an existing schema with no traffic: VmRSS and VmHWM from
# /proc/PID/status HOLD seconds (default 5) after /health/ready answered 200, RUNS times (default 3);
# idle_cpu_ticks = utime+stime (1/100 s) spent during the HOLD seconds.
source "$(dirname "$0")/lib.sh"
RUNS=${1:-3}; HOLD=${HOLD:-5}
need_bins
db=qb_bench_idle_$$
new_db "$db"; migrate "$db"
cfg=$WORK/idle.yml; write_config "$db" "$cfg"
start_receiver
vals=()
for run in $(seq 1 "$RUNS"); do
  out=$("$STARTUP_BIN" --port "$QB_PORT" --interval-ms 2 --hold-s "$HOLD" -- "$QB_BIN" --config "$cfg" serve)
  echo "idle-memory run=$run hold_s=$HOLD $out"
  vals+=("$(echo "$out" | field VmRSS_kB)")
done
printf '%s\n' "${vals[@]}" | sort -n | awk '{a[NR]=$1} END{printf "idle-memory runs=%d median_VmRSS_kB=%s (%.1f MB)\n", NR, a[int((NR+1)/2)], a[int((NR+1)/2)]/1024}'
