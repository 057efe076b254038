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


write_nats_config() {
  local db=$1 file=$2 batch=$3
  { config_head "$db"; cat <<YML
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
  } >"$file"
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
    cfg=$WORK/qb-nats-$batch.yml
    write_nats_config "$DB" "$cfg" "$batch"
    ingest_drain "$DB" "$cfg" "$BROKER_PID" "run $run batch $batch"
    sleep 0.5  # the last acks reach the server
    stop_queuebox
    echo "target=nats run=$run batch=$batch rows=$ROWS $(ingest_result "$DB")" \
         "$(echo "$preload" | sed 's/\([a-z_]*\)=/preload_\1=/g')"
    stream_down
  done
  if [ "$HTTP" = 1 ]; then
    MODES=unique TARGETS=${HTTP_TARGETS:-queuebox} "$INBOX_BENCH_DIR/run-ingest.sh" 1 "$DURATION_S" 2>>"$WORK/http.err" | grep '^run=' | sed "s/^run=1 /target=http round=$run /" \
      || { tail -5 "$WORK/http.err" >&2; log "run-ingest.sh failed"; }
  fi
done
