#!/usr/bin/env bash
# NATS JetStream -> inbox (issue 15): rows stored a second by QueueBox's nats source (relay off)
# from a preloaded stream, for each BATCHES value, against the HTTP ingestion rate of run-ingest.sh
# with the same payloads, interleaved round by round in the same session. Called by
# bench/run-nats.sh; runs alone too.
#
#   bench/inbox/run-nats-ingest.sh [RUNS=3] [ROWS=100000]
#
# Each run of a batch size: TRUNCATE the inbox; a fresh file stream over `S.>`; preload ROWS
# messages with the body of post.lua (`{"id":"<prefix>-1-<i>","type":"created","data":{...}}`,
# unique ids), each acknowledged by JetStream, through `qb-bench-nats preload` while QueueBox is
# stopped; start QueueBox with one nats source `bench` (stream, a fresh durable, batchSize,
# idempotencyKeyPath $.id, eventTypePath $.type), relay off, no destination; poll
# `SELECT count(*) FROM inbox` every 0.2 s until ROWS (RUN_TIMEOUT bound). Rate = (ROWS-1) /
# (max - min created_at) of the stored rows (the database's clock), and `poll_rate` as a
# cross-check. Then dead rows, QueueBox's VmHWM, the CPU of QueueBox, nats-server and the run
# database's backends.
# Each round ends with `run-ingest.sh 1 DURATION_S` (MODES=unique, TARGETS=HTTP_TARGETS, wrk -t2 -c64,
# the same bodies over HTTP) unless HTTP=0.
# Environment: BATCHES ("100 500"; 100 is the product default), RUN_TIMEOUT (300), HTTP (1),
# DURATION_S (10), HTTP_TARGETS ("queuebox"), NATS_URL, POOL (10).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${1:-3}
ROWS=${2:-100000}
BATCHES=${BATCHES:-100 500}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
HTTP=${HTTP:-1}
DURATION_S=${DURATION_S:-10}
NATS_URL=${NATS_URL:-nats://127.0.0.1:4222}
BENCH_BIN_DIR=${BENCH_BIN_DIR:-/var/cache/qb-target-bench/release}
NATS_BIN=$BENCH_BIN_DIR/qb-bench-nats
HZ=$(getconf CLK_TCK)
need_qb
if ! [ -x "$NATS_BIN" ]; then
  log "building bench/nats"
  (cd "$INBOX_BENCH_DIR/../nats" && CARGO_TARGET_DIR=${BENCH_BIN_DIR%/release} cargo build --release -q) || die "bench/nats build failed"
fi
BROKER_PID=$(pgrep -o -x nats-server || true)
[ -n "$BROKER_PID" ] || die "no nats-server running: bash scripts/services.sh"

STREAM=QB_BENCH4_$$
tool() { "$NATS_BIN" "$1" --url "$NATS_URL" "${@:2}"; }
stream_down() { tool teardown --stream "$STREAM" 2>/dev/null || true; }
trap 'stream_down; _cleanup' EXIT

ticks() { awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
ticks_many() { local t=0 p; for p in "$@"; do t=$((t + $(ticks "$p"))); done; echo "$t"; }
mem() { awk '/^VmRSS:/{r=$2} /^VmHWM:/{h=$2} END{printf "VmRSS_kB=%s VmHWM_kB=%s", r, h}' "/proc/$1/status"; }

write_nats_config() {
  local db=$1 file=$2 batch=$3
  cat >"$file" <<YML
server:
  httpPort: $QB_PORT
database:
  type: postgresql
  # Plain TCP, as every figure before database TLS existed (2026-12-01) was measured.
  url: jdbc:postgresql://$PGHOST:$PGPORT/$db?sslmode=disable
  username: $PGUSER
  password: $PGPASSWORD
  poolSize: $POOL
  migrate: true
inbox:
  relay:
    enabled: false
sources:
  bench:
    type: nats
    servers: $NATS_URL
    stream: $STREAM
    durable: qb-bench-$batch
    batchSize: $batch
    idempotencyKeyPath: \$.id
    eventTypePath: \$.type
admin:
  enabled: false
YML
}

DB=qb_bench4_nats_$$
new_db "$DB"
migrate "$DB"
echo "# nats ingest $(date -u +%FT%TZ) machine=$(nproc)cpu commit=$(git -C "$REPO_DIR" rev-parse --short HEAD) binary_sha256=$(sha256sum "$QB_BIN" | cut -c1-12) load=$(cut -d' ' -f1-3 /proc/loadavg) rows=$ROWS batches=\"$BATCHES\" pool=$POOL"

for run in $(seq 1 "$RUNS"); do
  for batch in $BATCHES; do
    sql "$DB" "TRUNCATE inbox; TRUNCATE outbox" >/dev/null
    sql "$DB" "CHECKPOINT" >/dev/null 2>&1 || true
    stream_down
    tool setup --stream "$STREAM"
    preload=$(tool preload --stream "$STREAM" --n "$ROWS" --prefix "r$run-b$batch-$$")
    load0=$(cut -d' ' -f1-3 /proc/loadavg)
    cfg=$WORK/qb-nats-$batch.yml
    write_nats_config "$DB" "$cfg" "$batch"
    t_exec=$(date +%s.%N)
    RUST_LOG=${QB_RUST_LOG:-warn} "$QB_BIN" --config "$cfg" serve >>"$WORK/queuebox.log" 2>&1 &
    QB_PID=$!
    _PIDS+=("$QB_PID")
    q0=$(ticks "$QB_PID"); b0=$(ticks "$BROKER_PID")
    # the backends appear once the pool connects; read them after the first rows
    deadline=$((SECONDS + RUN_TIMEOUT)); count=0; t_zero=$t_exec; t_full=; pids=; d0=0
    while :; do
      count=$(sql "$DB" "SELECT count(*) FROM inbox")
      now=$(date +%s.%N)
      if [ "$count" -eq 0 ]; then t_zero=$now; fi
      if [ -z "$pids" ] && [ "$count" -gt 0 ]; then pids=$(db_backend_pids "$DB"); d0=$(ticks_many $pids); fi
      [ "$count" -ge "$ROWS" ] && { t_full=$now; break; }
      kill -0 "$QB_PID" 2>/dev/null || { cat "$WORK/queuebox.log" >&2; die "queuebox exited"; }
      [ "$SECONDS" -lt "$deadline" ] || { log "run $run batch $batch: timeout at $count of $ROWS"; break; }
      sleep 0.2
    done
    q1=$(ticks "$QB_PID"); b1=$(ticks "$BROKER_PID"); d1=$(ticks_many $pids)
    peak=$(mem "$QB_PID")
    sleep 0.5  # the last acks reach the server
    stop_queuebox
    read -r stored dead db_rate <<<"$(sql "$DB" "SELECT count(*), count(*) FILTER (WHERE state = 'dead'), round((count(*) - 1) / NULLIF(extract(epoch FROM max(created_at) - min(created_at)), 0)) FROM inbox" | tr '|' ' ')"
    wall=$(echo "${t_full:-$now} - $t_zero" | bc -l)
    poll_rate=$(echo "$stored / $wall" | bc)
    per() { echo "1000000 * ($1) / ($HZ * $stored)" | bc; }
    echo "target=nats run=$run batch=$batch rows=$ROWS stored=$stored dead=$dead rate=$db_rate poll_rate=$poll_rate" \
         "us_per_row_qb=$(per "$q1 - $q0") us_per_row_nats=$(per "$b1 - $b0") us_per_row_pg_rundb=$(per "$d1 - $d0")" \
         "end_$(echo "$peak" | sed 's/ / end_/') load_at_start=${load0// /,} $(echo "$preload" | sed 's/\([a-z_]*\)=/preload_\1=/g')"
    stream_down
  done
  if [ "$HTTP" = 1 ]; then
    MODES=unique TARGETS=${HTTP_TARGETS:-queuebox} "$INBOX_BENCH_DIR/run-ingest.sh" 1 "$DURATION_S" 2>>"$WORK/http.err" | grep '^run=' | sed "s/^run=1 /target=http round=$run /" \
      || { tail -5 "$WORK/http.err" >&2; log "run-ingest.sh failed"; }
  fi
done
