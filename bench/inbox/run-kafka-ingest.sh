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


write_kafka_config() {
  local db=$1 file=$2 maxpoll=$3 group=$4
  { config_head "$db"; cat <<YML
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
  } >"$file"
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
    cfg=$WORK/qb-kafka-$maxpoll.yml
    write_kafka_config "$DB" "$cfg" "$maxpoll" "$GROUP"
    ingest_drain "$DB" "$cfg" "$BROKER_PID" "run $run maxPollRecords $maxpoll"
    # the stop commits the stored offsets and leaves the group
    stop_queuebox
    lag=$(kafka lag --topic "$TOPIC" --group "$GROUP" --timeout-s 30 | sed 's/.*lag=//')
    echo "target=kafka run=$run maxpoll=$maxpoll rows=$ROWS partitions=$PARTITIONS group_lag_after=$lag $(ingest_result "$DB")" \
         "$(echo "$preload" | sed 's/\([a-z_]*\)=/preload_\1=/g')"
    topic_down
  done
  if [ "$HTTP" = 1 ]; then
    # run-ingest.sh exits 1 when it has no baseline to compare with; its run line is what counts
    http=$(MODES=unique TARGETS=${HTTP_TARGETS:-queuebox} "$INBOX_BENCH_DIR/run-ingest.sh" 1 "$DURATION_S" 2>>"$WORK/http.err" || true)
    grep '^run=' <<<"$http" | sed "s/^run=1 /target=http round=$run /" || { tail -5 "$WORK/http.err" >&2; log "run-ingest.sh printed no run line"; }
  fi
done
