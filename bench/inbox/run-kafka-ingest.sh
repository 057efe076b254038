#!/usr/bin/env bash
# Kafka -> inbox (issue 14): rows stored a second by QueueBox's kafka source (relay off) from a
# preloaded topic, for each MAXPOLLS value (`maxPollRecords`), against the HTTP ingestion rate of
# run-ingest.sh with the same payloads, interleaved round by round in the same session.
#
#   bench/inbox/run-kafka-ingest.sh [RUNS=3] [ROWS=100000]
#
# Each run of a maxPollRecords value: TRUNCATE the inbox; create a fresh topic of PARTITIONS
# partitions; preload ROWS records without a key carrying the body of post.lua
# (`{"id":"<prefix>-1-<i>","type":"created","data":{...}}`, unique ids) through
# `qb-bench-kafka preload` (acks=all, every acknowledgement awaited) while QueueBox is stopped;
# start QueueBox with one kafka source `bench` (that topic, a group of its own, autoOffsetReset
# earliest, maxPollRecords, idempotencyKeyPath $.id, eventTypePath $.type), relay off, no
# destination; poll `SELECT count(*) FROM inbox` every 0.2 s until ROWS (RUN_TIMEOUT bound).
# Rate = (ROWS-1) / (max - min created_at) of the stored rows (the database's clock), and
# `poll_rate`, ROWS / (first poll at ROWS - last poll at 0) as a cross-check. Then: the group's
# lag after QueueBox stopped (must be 0: every offset committed), dead rows, QueueBox's VmHWM, the
# CPU of QueueBox, the broker (the kafka.Kafka JVM), the run database's backends.
# Each round ends with `run-ingest.sh 1 DURATION_S` (MODES=unique, TARGETS=HTTP_TARGETS, wrk -t2
# -c64, the same bodies over HTTP) unless HTTP=0.
# Environment: MAXPOLLS ("100 500"; 100 is the product default), PARTITIONS (4), RUN_TIMEOUT (300),
# HTTP (1), DURATION_S (10), HTTP_TARGETS ("queuebox"), KAFKA_BOOTSTRAP (QB_TEST_KAFKA_BOOTSTRAP,
# else 127.0.0.1:9092), POOL (10).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${1:-3}
ROWS=${2:-100000}
MAXPOLLS=${MAXPOLLS:-100 500}
PARTITIONS=${PARTITIONS:-4}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
HTTP=${HTTP:-1}
DURATION_S=${DURATION_S:-10}
KAFKA_BOOTSTRAP=${KAFKA_BOOTSTRAP:-${QB_TEST_KAFKA_BOOTSTRAP:-127.0.0.1:9092}}
BENCH_BIN_DIR=${BENCH_BIN_DIR:-/var/cache/qb-target-bench/release}
KAFKA_BIN=$BENCH_BIN_DIR/qb-bench-kafka
HZ=$(getconf CLK_TCK)
need_qb
if ! [ -x "$KAFKA_BIN" ]; then
  log "building bench/kafka"
  (cd "$INBOX_BENCH_DIR/../kafka" && CARGO_TARGET_DIR=${BENCH_BIN_DIR%/release} cargo build --release -q) || die "bench/kafka build failed"
fi
BROKER_PID=$(pgrep -o -f 'kafka\.Kafka ' || true)
[ -n "$BROKER_PID" ] || die "no Kafka broker (kafka.Kafka) running: bash scripts/services.sh"

kafka() { "$KAFKA_BIN" "$@" --bootstrap "$KAFKA_BOOTSTRAP"; }
TOPIC=
topic_down() { [ -z "$TOPIC" ] || kafka delete --topic "$TOPIC" --timeout-s 30 2>/dev/null || true; TOPIC=; }
trap 'topic_down; _cleanup' EXIT

ticks() { awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
ticks_many() { local t=0 p; for p in "$@"; do t=$((t + $(ticks "$p"))); done; echo "$t"; }
mem() { awk '/^VmRSS:/{r=$2} /^VmHWM:/{h=$2} END{printf "VmRSS_kB=%s VmHWM_kB=%s", r, h}' "/proc/$1/status"; }

write_kafka_config() {
  local db=$1 file=$2 maxpoll=$3 group=$4
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
    type: kafka
    bootstrapServers: $KAFKA_BOOTSTRAP
    topics: [$TOPIC]
    groupId: $group
    autoOffsetReset: earliest
    maxPollRecords: $maxpoll
    idempotencyKeyPath: \$.id
    eventTypePath: \$.type
admin:
  enabled: false
YML
}

DB=qb_bench4_kafka_$$
new_db "$DB"
migrate "$DB"
echo "# kafka ingest $(date -u +%FT%TZ) machine=$(nproc)cpu commit=$(git -C "$REPO_DIR" rev-parse --short HEAD) binary_sha256=$(sha256sum "$QB_BIN" | cut -c1-12) load=$(cut -d' ' -f1-3 /proc/loadavg) rows=$ROWS maxpolls=\"$MAXPOLLS\" partitions=$PARTITIONS pool=$POOL"

for run in $(seq 1 "$RUNS"); do
  for maxpoll in $MAXPOLLS; do
    sql "$DB" "TRUNCATE inbox; TRUNCATE outbox" >/dev/null
    sql "$DB" "CHECKPOINT" >/dev/null 2>&1 || true
    topic_down
    TOPIC=qb-bench4-$$-r$run-m$maxpoll
    GROUP=qb-bench4-$$-r$run-m$maxpoll
    kafka create --topic "$TOPIC" --partitions "$PARTITIONS" --timeout-s 60
    preload=$(kafka preload --topic "$TOPIC" --n "$ROWS" --prefix "r$run-m$maxpoll-$$" --timeout-s "$RUN_TIMEOUT")
    load0=$(cut -d' ' -f1-3 /proc/loadavg)
    cfg=$WORK/qb-kafka-$maxpoll.yml
    write_kafka_config "$DB" "$cfg" "$maxpoll" "$GROUP"
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
      [ "$SECONDS" -lt "$deadline" ] || { log "run $run maxPollRecords $maxpoll: timeout at $count of $ROWS"; break; }
      sleep 0.2
    done
    q1=$(ticks "$QB_PID"); b1=$(ticks "$BROKER_PID"); d1=$(ticks_many $pids)
    peak=$(mem "$QB_PID")
    # the stop commits the stored offsets and leaves the group
    stop_queuebox
    lag=$(kafka lag --topic "$TOPIC" --group "$GROUP" --timeout-s 30 | sed 's/.*lag=//')
    read -r stored dead db_rate <<<"$(sql "$DB" "SELECT count(*), count(*) FILTER (WHERE state = 'dead'), round((count(*) - 1) / NULLIF(extract(epoch FROM max(created_at) - min(created_at)), 0)) FROM inbox" | tr '|' ' ')"
    wall=$(echo "${t_full:-$now} - $t_zero" | bc -l)
    poll_rate=$(echo "$stored / $wall" | bc)
    per() { echo "1000000 * ($1) / ($HZ * $stored)" | bc; }
    echo "target=kafka run=$run maxpoll=$maxpoll rows=$ROWS partitions=$PARTITIONS stored=$stored dead=$dead rate=$db_rate poll_rate=$poll_rate" \
         "group_lag_after=$lag us_per_row_qb=$(per "$q1 - $q0") us_per_row_broker=$(per "$b1 - $b0") us_per_row_pg_rundb=$(per "$d1 - $d0")" \
         "end_$(echo "$peak" | sed 's/ / end_/') load_at_start=${load0// /,} $(echo "$preload" | sed 's/\([a-z_]*\)=/preload_\1=/g')"
    topic_down
  done
  if [ "$HTTP" = 1 ]; then
    # run-ingest.sh exits 1 when it has no baseline to compare with; its run line is what counts
    http=$(MODES=unique TARGETS=${HTTP_TARGETS:-queuebox} "$INBOX_BENCH_DIR/run-ingest.sh" 1 "$DURATION_S" 2>>"$WORK/http.err" || true)
    grep '^run=' <<<"$http" | sed "s/^run=1 /target=http round=$run /" || { tail -5 "$WORK/http.err" >&2; log "run-ingest.sh printed no run line"; }
  fi
done
