#!/usr/bin/env bash
# Redis Streams -> inbox (issue 31, part 5): rows stored a second by QueueBox's redis source (relay
# off) from a preloaded stream, for each BATCHES value, against the HTTP ingestion rate of
# run-ingest.sh with the same bodies, interleaved round by round in the same session. The goal is
# the other broker sources' one: at least 80 % of the HTTP ingestion rate of the same round (a bare
# Redis reader that stores nothing is far faster than either, so the HTTP path is the lower).
#
#   bench/inbox/run-redis-ingest.sh [RUNS=3] [ROWS=100000]
#
# Each run of a batch size: TRUNCATE the inbox; a fresh stream; preload ROWS entries whose
# `payload` field is the body of post.lua (`{"id":"<prefix>-1-<i>","type":"created","data":{...}}`,
# unique ids), written as raw RESP XADD commands through `redis-cli --pipe` while QueueBox is
# stopped (redis-cli reports every reply; the stream's XLEN is checked); start QueueBox with one
# redis source `bench` (the stream, a fresh group read from the start, batchSize,
# idempotencyKeyPath $.id, eventTypePath $.type), relay off, no destination; poll
# `SELECT count(*) FROM inbox` every 0.2 s until ROWS (RUN_TIMEOUT bound). Rate = (ROWS-1) /
# (max - min created_at) of the stored rows (the database's clock), and `poll_rate` as a
# cross-check. Then the dead rows, the group's pending count (0: every entry acknowledged),
# QueueBox's VmHWM, and the CPU of QueueBox, redis-server and the run database's backends.
# Each round ends with `run-ingest.sh 1 DURATION_S` (MODES=unique, TARGETS=HTTP_TARGETS, wrk -t2
# -c64, the same bodies over HTTP) unless HTTP=0.
# Environment: BATCHES ("100 500"; 100 is the product default), RUN_TIMEOUT (300), HTTP (1),
# DURATION_S (10), HTTP_TARGETS ("queuebox"), REDIS_URL, POOL (10).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${1:-3}
ROWS=${2:-100000}
BATCHES=${BATCHES:-100 500}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
HTTP=${HTTP:-1}
DURATION_S=${DURATION_S:-10}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
need_qb
command -v redis-cli >/dev/null || die "no redis-cli: bash scripts/services.sh"
BROKER_PID=$(pgrep -o -x redis-server || pgrep -o -f 'redis-server ' || true)
[ -n "$BROKER_PID" ] || die "no redis-server running: bash scripts/services.sh"

STREAM="qb:bench:ingest:$$"
rcli() { redis-cli -u "$REDIS_URL" "$@"; }
stream_down() { rcli DEL "$STREAM" >/dev/null 2>&1 || true; }
trap 'stream_down; _cleanup' EXIT


# ROWS XADD commands in the Redis protocol (the bodies are ASCII, so length() counts bytes), piped
# in one go; prints redis-cli's summary (`errors: 0, replies: ROWS`) as preload_* fields.
preload() {
  local prefix=$1 t0 t1 out
  t0=$(date +%s.%N)
  out=$(awk -v n="$ROWS" -v s="$STREAM" -v p="$prefix" 'BEGIN {
      for (i = 0; i < n; i++) {
        body = "{\"id\":\"" p "-1-" i "\",\"type\":\"created\",\"data\":{\"amount\":1234,\"currency\":\"EUR\",\"customer\":\"c-" (i % 1000) "\"}}"
        printf "*5\r\n$4\r\nXADD\r\n$%d\r\n%s\r\n$1\r\n*\r\n$7\r\npayload\r\n$%d\r\n%s\r\n", length(s), s, length(body), body
      }
    }' | rcli --pipe 2>&1 | tail -1)
  t1=$(date +%s.%N)
  local len
  len=$(rcli XLEN "$STREAM")
  [ "$len" -eq "$ROWS" ] || die "preload: the stream holds $len entries, not $ROWS ($out)"
  echo "preload_seconds=$(echo "$t1 - $t0" | bc -l | cut -c1-5) preload_reply=\"$out\""
}

write_redis_config() {
  local db=$1 file=$2 batch=$3
  { config_head "$db"; cat <<YML
inbox:
  relay:
    enabled: false
sources:
  bench:
    type: redis
    url: $REDIS_URL
    stream: "$STREAM"
    group: qb-bench-$batch
    consumer: bench
    batchSize: $batch
    idempotencyKeyPath: \$.id
    eventTypePath: \$.type
admin:
  enabled: false
YML
  } >"$file"
}

DB=qb_bench4_redis_$$
new_db "$DB"
migrate "$DB"
echo "# redis ingest $(date -u +%FT%TZ) machine=$(nproc)cpu commit=$(git -C "$REPO_DIR" rev-parse --short HEAD) binary_sha256=$(sha256sum "$QB_BIN" | cut -c1-12) load=$(cut -d' ' -f1-3 /proc/loadavg) rows=$ROWS batches=\"$BATCHES\" pool=$POOL"

for run in $(seq 1 "$RUNS"); do
  for batch in $BATCHES; do
    sql "$DB" "TRUNCATE inbox; TRUNCATE outbox" >/dev/null
    sql "$DB" "CHECKPOINT" >/dev/null 2>&1 || true
    stream_down
    loaded=$(preload "r$run-b$batch-$$")
    cfg=$WORK/qb-redis-$batch.yml
    write_redis_config "$DB" "$cfg" "$batch"
    ingest_drain "$DB" "$cfg" "$BROKER_PID" "run $run batch $batch"
    # The last acknowledgements reach the server: wait (bounded) until the group holds none pending.
    pending=
    for _ in $(seq 1 50); do
      pending=$(rcli XPENDING "$STREAM" "qb-bench-$batch" | head -1)
      [ "$pending" = 0 ] && break
      sleep 0.1
    done
    stop_queuebox
    echo "target=redis run=$run batch=$batch rows=$ROWS pending_after=$pending $(ingest_result "$DB") $loaded"
    stream_down
  done
  if [ "$HTTP" = 1 ]; then
    MODES=unique TARGETS=${HTTP_TARGETS:-queuebox} "$INBOX_BENCH_DIR/run-ingest.sh" 1 "$DURATION_S" 2>>"$WORK/http.err" | grep '^run=' | sed "s/^run=1 /target=http round=$run /" \
      || { tail -5 "$WORK/http.err" >&2; log "run-ingest.sh failed"; }
  fi
done
