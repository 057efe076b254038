#!/usr/bin/env bash
# RabbitMQ -> inbox (issue 12): rows stored a second by QueueBox's rabbitmq source (relay off)
# from a preloaded queue, for each PREFETCHES value, against the HTTP ingestion rate of
# run-ingest.sh with the same payloads, interleaved round by round in the same session.
#
#   bench/inbox/run-rabbitmq-ingest.sh [RUNS=3] [ROWS=100000]
#
# Each run of a prefetch: TRUNCATE the inbox; declare a fresh durable queue; preload ROWS
# persistent messages with the body of post.lua (`{"id":"<prefix>-1-<i>","type":"created",
# "data":{...}}`, unique ids) through `qb-bench-amqp preload` (confirmed) while QueueBox is stopped;
# start QueueBox with one rabbitmq source `bench` (queueName, connectionUrl, prefetchCount,
# idempotencyKeyPath $.id, eventTypePath $.type), relay off, no destination; poll
# `SELECT count(*) FROM inbox` every 0.2 s until ROWS (RUN_TIMEOUT bound). Rate = (ROWS-1) /
# (max - min created_at) of the stored rows (the database's clock; created_at is the insert's
# transaction time), and `poll_rate`, ROWS / (first poll at ROWS - last poll at 0) as a cross-check.
# Then: the queue depth (must be 0; the unique key of the inbox already makes duplicates impossible), dead rows,
# QueueBox's VmHWM, the CPU of QueueBox, the broker, the run database's backends.
# Each round ends with `run-ingest.sh 1 DURATION_S` (MODES=unique, TARGETS=HTTP_TARGETS, wrk -t2 -c64,
# the same bodies over HTTP) unless HTTP=0.
# Environment: PREFETCHES ("10 100 500"; 10 is the product default), RUN_TIMEOUT (300), HTTP (1),
# DURATION_S (10), HTTP_TARGETS ("queuebox"; "queuebox baseline" adds the salvo+sqlx yardstick, built on
# first use), AMQP_URL, POOL (10).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${1:-3}
ROWS=${2:-100000}
PREFETCHES=${PREFETCHES:-10 100 500}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
HTTP=${HTTP:-1}
DURATION_S=${DURATION_S:-10}
AMQP_URL=${AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}
BENCH_BIN_DIR=${BENCH_BIN_DIR:-/var/cache/qb-target-bench/release}
AMQP_BIN=$BENCH_BIN_DIR/qb-bench-amqp
need_qb
if ! [ -x "$AMQP_BIN" ]; then
  log "building bench/amqp"
  (cd "$INBOX_BENCH_DIR/../amqp" && CARGO_TARGET_DIR=${BENCH_BIN_DIR%/release} cargo build --release -q) || die "bench/amqp build failed"
fi
BROKER_PID=$(pgrep -o -x beam.smp || true)
[ -n "$BROKER_PID" ] || die "no RabbitMQ broker (beam.smp) running: bash scripts/services.sh"

QUEUE=qb-bench4-q-$$
amqp() { "$AMQP_BIN" "$@" --url "$AMQP_URL"; }
queue_down() { amqp teardown --queue "$QUEUE" --timeout-s 30 2>/dev/null || true; }
trap 'queue_down; _cleanup' EXIT


write_rmq_config() {
  local db=$1 file=$2 prefetch=$3
  { config_head "$db"; cat <<YML
inbox:
  relay:
    enabled: false
sources:
  bench:
    type: rabbitmq
    queueName: $QUEUE
    connectionUrl: $AMQP_URL
    prefetchCount: $prefetch
    idempotencyKeyPath: \$.id
    eventTypePath: \$.type
admin:
  enabled: false
YML
  } >"$file"
}

DB=qb_bench4_rmq_$$
new_db "$DB"
migrate "$DB"
echo "# rabbitmq ingest $(date -u +%FT%TZ) machine=$(nproc)cpu commit=$(git -C "$REPO_DIR" rev-parse --short HEAD) binary_sha256=$(sha256sum "$QB_BIN" | cut -c1-12) load=$(cut -d' ' -f1-3 /proc/loadavg) rows=$ROWS prefetches=\"$PREFETCHES\" pool=$POOL"

for run in $(seq 1 "$RUNS"); do
  for prefetch in $PREFETCHES; do
    sql "$DB" "TRUNCATE inbox; TRUNCATE outbox" >/dev/null
    sql "$DB" "CHECKPOINT" >/dev/null 2>&1 || true
    queue_down
    amqp setup --queue "$QUEUE" --timeout-s 30
    preload=$(amqp preload --queue "$QUEUE" --n "$ROWS" --prefix "r$run-p$prefetch-$$" --timeout-s "$RUN_TIMEOUT")
    cfg=$WORK/qb-rmq-$prefetch.yml
    write_rmq_config "$DB" "$cfg" "$prefetch"
    ingest_drain "$DB" "$cfg" "$BROKER_PID" "run $run prefetch $prefetch"
    sleep 0.5  # the last acks reach the broker
    depth=$(amqp depth --queue "$QUEUE" --timeout-s 30 | sed 's/depth=//')
    stop_queuebox
    echo "target=rabbitmq run=$run prefetch=$prefetch rows=$ROWS queue_depth_after=$depth $(ingest_result "$DB")" \
         "$(echo "$preload" | sed 's/\([a-z_]*\)=/preload_\1=/g')"
    queue_down
  done
  if [ "$HTTP" = 1 ]; then
    MODES=unique TARGETS=${HTTP_TARGETS:-queuebox} "$INBOX_BENCH_DIR/run-ingest.sh" 1 "$DURATION_S" 2>>"$WORK/http.err" | grep '^run=' | sed "s/^run=1 /target=http round=$run /" \
      || { tail -5 "$WORK/http.err" >&2; log "run-ingest.sh failed"; }
  fi
done
