#!/usr/bin/env bash
# Commit-to-delivery latency at a steady insert rate.
#
#   bench/run-latency.sh [RUNS]     (RUNS default 1)
#
# pgbench (-R, one client) inserts RATE rows a second in transactions of 10 rows (RATE/10 a second),
# each row with created_at = clock_timestamp() and the same instant, in microseconds, in the payload
# field "t". The receiver takes arrival - t per message (same machine clock). The first WARMUP seconds
# are discarded. Keys: LAT_KEYS random keys per row (default 20000; 0 = rows without a key).
# Env: RATE (default 1000), DURATION (default 30 s), WARMUP (default 5 s), and BATCH CONC POLL POOL.
# PRELOAD_HOT=N: before QueueBox starts, N rows of one key ("hot", payload without "t") wait in the
# outbox, so the latency is that of the other keys' rows behind a hot key with a backlog; the line then
# also reports how many hot rows were sent during the run (hot_sent).
source "$(dirname "$0")/lib.sh"
RUNS=${1:-1}
RATE=${RATE:-1000}; DURATION=${DURATION:-30}; WARMUP=${WARMUP:-5}; LAT_KEYS=${LAT_KEYS:-20000}
need_bins
if [ "$LAT_KEYS" -gt 0 ]; then keyexpr="'key-' || floor(random() * $LAT_KEYS)::int"; else keyexpr="NULL"; fi
cat >"$WORK/insert.pgbench" <<SQL
INSERT INTO outbox (topic, key, payload, created_at)
SELECT 'order.created', $keyexpr, jsonb_build_object('t', (extract(epoch FROM ct) * 1000000)::bigint), ct
  FROM (SELECT clock_timestamp() AS ct FROM generate_series(1, 10)) s;
SQL
start_receiver
for run in $(seq 1 "$RUNS"); do
  db=qb_bench_lat_$$_$run
  new_db "$db"; migrate "$db"
  if [ "${PRELOAD_HOT:-0}" -gt 0 ]; then
    sql "$db" "INSERT INTO outbox (topic, key, payload)
               SELECT 'order.created', 'hot', jsonb_build_object('g', g) FROM generate_series(1, $PRELOAD_HOT) g"
    sql "$db" "ANALYZE outbox"
  fi
  start_queuebox "$db"
  recv /reset >/dev/null
  ( sleep "$WARMUP"; recv /reset >/dev/null ) &
  resetter=$!
  pgbench -n -c 1 -j 1 -R $((RATE / 10)) -T "$DURATION" -f "$WORK/insert.pgbench" "$db" >"$WORK/pgbench.txt" 2>&1 || { cat "$WORK/pgbench.txt" >&2; die "pgbench failed"; }
  wait "$resetter" || true
  for _ in $(seq 1 50); do
    [ "$(sql "$db" "SELECT count(*) FROM outbox WHERE state <> 'sent'")" = 0 ] && break
    sleep 0.2
  done
  rss=$(mem "$QB_PID")
  hot=""
  [ "${PRELOAD_HOT:-0}" -gt 0 ] && hot="hot_preloaded=$PRELOAD_HOT hot_sent=$(sql "$db" "SELECT count(*) FROM outbox WHERE key = 'hot' AND state = 'sent'")"
  stop_queuebox
  tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$WORK/pgbench.txt" | head -1)
  echo "latency run=$run rate_rows_per_s=$(echo "$tps * 10" | bc | cut -d. -f1) keys=$LAT_KEYS batch=$BATCH conc=$CONC poll=$POLL $(recv /lat | tr -d '\n') $(recv /stats | field duplicates | sed 's/^/duplicates=/') $rss $hot"
  drop_db "$db"
done
