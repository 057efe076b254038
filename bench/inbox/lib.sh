# Shared helpers of the inbox bench scripts (issue 4). Source it: strict mode, and a cleanup trap
# that stops every process the script started (by pid) and drops every database it created.
#
# Environment (all optional):
#   QB_BIN          the queuebox release binary   (default /var/cache/queuebox-target/release/queuebox)
#   BENCH4_TARGET   cargo target dir of the bench crates (default /var/cache/qb-target-bench4)
#   PGHOST PGPORT PGUSER PGPASSWORD                 (default 127.0.0.1 5432 queuebox queuebox)
#   QB_PORT         QueueBox data port            (default 18480)
#   BASE_PORT       baseline server port          (default 18481)
#   POOL            database.poolSize, and the baseline's pool (default 10, the product default)

set -euo pipefail

INBOX_BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$INBOX_BENCH_DIR/../.." && pwd)
QB_BIN=${QB_BIN:-/var/cache/queuebox-target/release/queuebox}
BENCH4_TARGET=${BENCH4_TARGET:-/var/cache/qb-target-bench4}
BASELINE_BIN=$BENCH4_TARGET/release/qb-inbox-baseline
PULLBENCH_BIN=$BENCH4_TARGET/release/qb-inbox-pullbench
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-queuebox} PGPASSWORD=${PGPASSWORD:-queuebox}
QB_PORT=${QB_PORT:-18480}
BASE_PORT=${BASE_PORT:-18481}
POOL=${POOL:-10}

WORK=$(mktemp -d /tmp/qb-bench4.XXXXXX)
_PIDS=()
_DBS=()

log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# stop_pid PID: SIGTERM, up to 5 s, then SIGKILL.
stop_pid() {
  local pid=$1
  [ -n "$pid" ] || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

_cleanup() {
  local pid db
  for pid in "${_PIDS[@]:-}"; do stop_pid "$pid"; done
  for db in "${_DBS[@]:-}"; do
    [ -n "$db" ] || continue
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 || true
  done
  rm -rf "$WORK"
}
trap _cleanup EXIT
trap 'exit 130' INT TERM

# build_tool DIR: builds a standalone bench crate under bench/inbox/ when its binary is missing.
build_tool() {
  local dir=$1 bin=$2
  if ! [ -x "$bin" ]; then
    log "building $dir"
    (cd "$INBOX_BENCH_DIR/$dir" && CARGO_TARGET_DIR=$BENCH4_TARGET cargo build --release -q) || die "build of $dir failed"
  fi
}

need_qb() {
  [ -x "$QB_BIN" ] || die "no queuebox binary at $QB_BIN: CARGO_TARGET_DIR=/var/cache/queuebox-target cargo build --release -p queuebox"
}

sql() { local db=$1; shift; psql -X -q -v ON_ERROR_STOP=1 -d "$db" -Atc "$*"; }

# new_db NAME [TEMPLATE]: creates a database that the cleanup drops.
new_db() {
  local name=$1 template=${2:-}
  psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$name\" WITH (FORCE)" >/dev/null 2>&1
  if [ -n "$template" ]; then
    psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE \"$name\" TEMPLATE \"$template\" STRATEGY = FILE_COPY" >/dev/null
  else
    psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE \"$name\"" >/dev/null
  fi
  _DBS+=("$name")
}

# drop_db NAME: drops a database now (it stays on the cleanup list, where a second drop is a no-op).
drop_db() { psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$1\" WITH (FORCE)" >/dev/null 2>&1 || true; }

# config_head DB: the server and database sections every bench configuration starts with.
config_head() {
  cat <<YML
server:
  httpPort: $QB_PORT
database:
  type: postgresql
  # Plain TCP, as every figure before database TLS existed (2026-12-01) was measured.
  url: jdbc:postgresql://$PGHOST:$PGPORT/$1?sslmode=disable
  username: $PGUSER
  password: $PGPASSWORD
  poolSize: $POOL
  migrate: true
YML
}

# write_config DB FILE RELAY(true|false) [CONSUMPTION push|pull]: one HTTP source `bench` at
# /inbox/bench (key $.id, type $.type, topic bench.{{ eventType }}), no destination, no route.
# SOURCE_AUTH: lines of an `auth` block for the source (indented, newline-terminated), or empty.
write_config() {
  local db=$1 file=$2 relay=$3 consumption=${4:-push}
  { config_head "$db"; cat <<YML
inbox:
  relay:
    enabled: $relay
    batchSize: ${RELAY_BATCH:-100}
    pollIntervalMs: ${RELAY_POLL:-100}
sources:
  bench:
    type: http
    path: /bench
    idempotencyKeyPath: \$.id
    eventTypePath: \$.type
    consumption: $consumption
    topic: "bench.{{ eventType }}"
${SOURCE_AUTH:-}admin:
  enabled: false
YML
  } >"$file"
}

# migrate DB: the QueueBox schema in DB, from the binary's own migrations.
migrate() {
  local db=$1 cfg=$WORK/migrate-$1.yml
  write_config "$db" "$cfg" false
  RUST_LOG=warn "$QB_BIN" --config "$cfg" migrate >"$WORK/migrate-$db.log" 2>&1 || { cat "$WORK/migrate-$db.log" >&2; die "migrate $db failed"; }
  # SCHEMA_SQL: SQL run on every database this script migrates, after the migrations: a schema
  # change to measure (run the script alternated with the variable unset).
  if [ -n "${SCHEMA_SQL:-}" ]; then sql "$db" "$SCHEMA_SQL" >/dev/null; log "ran SCHEMA_SQL on $db: $SCHEMA_SQL"; fi
}

# wait_http PORT PATH PID: waits (30 s bound) until GET answers, or dies when PID exited.
wait_http() {
  local port=$1 path=$2 pid=$3 log=$4
  for _ in $(seq 1 600); do
    curl -fs -o /dev/null "http://127.0.0.1:$port$path" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; die "process $pid exited"; }
    sleep 0.05
  done
  cat "$log" >&2
  die "nothing answered on port $port within 30 s"
}

QB_PID=
# start_queuebox DB RELAY [CONSUMPTION]: `queuebox serve` on DB, waits for /health/ready.
start_queuebox() {
  local db=$1 relay=$2 consumption=${3:-push} cfg=$WORK/qb-$1.yml
  write_config "$db" "$cfg" "$relay" "$consumption"
  RUST_LOG=${QB_RUST_LOG:-warn} "$QB_BIN" --config "$cfg" serve >>"$WORK/queuebox.log" 2>&1 &
  QB_PID=$!
  _PIDS+=("$QB_PID")
  wait_http "$QB_PORT" /health/ready "$QB_PID" "$WORK/queuebox.log"
}
stop_queuebox() { stop_pid "$QB_PID"; QB_PID=; }

BASE_PID=
# start_baseline DB: the salvo + sqlx yardstick on DB; ready when a GET of its route answers (405).
start_baseline() {
  local db=$1
  "$BASELINE_BIN" --url "postgres://$PGUSER:$PGPASSWORD@$PGHOST:$PGPORT/$db" --port "$BASE_PORT" --pool "$POOL" --source bench \
    >>"$WORK/baseline.log" 2>&1 &
  BASE_PID=$!
  _PIDS+=("$BASE_PID")
  for _ in $(seq 1 600); do
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$BASE_PORT/inbox/bench" 2>/dev/null || true)
    [ "$code" != "000" ] && [ -n "$code" ] && return 0
    kill -0 "$BASE_PID" 2>/dev/null || { cat "$WORK/baseline.log" >&2; die "baseline exited"; }
    sleep 0.05
  done
  die "the baseline did not start"
}
stop_baseline() { stop_pid "$BASE_PID"; BASE_PID=; }

# cpu_seconds PID...: user + system CPU seconds the processes used so far (gone ones count 0).
cpu_seconds() {
  local tick total=0 pid fields
  tick=$(getconf CLK_TCK)
  for pid in "$@"; do
    fields=$(cut -d')' -f2 "/proc/$pid/stat" 2>/dev/null) || continue
    # After the command name: field 12 and 13 are utime and stime (fields 14 and 15 of stat(5)).
    total=$(( total + $(echo "$fields" | awk '{print $12 + $13}') ))
  done
  echo "scale=2; $total / $tick" | bc
}

# db_backend_pids DB: the pids of the PostgreSQL backends connected to DB.
db_backend_pids() { sql postgres "SELECT pid FROM pg_stat_activity WHERE datname = '$1'" | tr '\n' ' '; }

# median: the median of the numbers on stdin (one a line).
source "$(dirname "${BASH_SOURCE[0]}")/../stats.sh"

# --- One broker-source ingest run (run-kafka-, run-nats-, run-rabbitmq-, run-redis-ingest.sh) ---
# The broker is preloaded while QueueBox is stopped; ingest_drain starts QueueBox on a config with
# one broker source (relay off) and waits until the inbox holds ROWS rows; the script then settles
# its broker (acks, offsets), stops QueueBox and prints ingest_result. The rate is on the
# database's clock: (rows - 1) / (max - min created_at) of the stored rows.

ticks() { awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
ticks_many() { local t=0 p; for p in "$@"; do t=$((t + $(ticks "$p"))); done; echo "$t"; }
mem() { awk '/^VmRSS:/{r=$2} /^VmHWM:/{h=$2} END{printf "VmRSS_kB=%s VmHWM_kB=%s", r, h}' "/proc/$1/status"; }

# ingest_drain DB CFG BROKER_PID LABEL: QueueBox on CFG until DB's inbox holds ROWS rows or
# RUN_TIMEOUT passes (logged with LABEL); QueueBox is left running. Sets the _IN_* state that
# ingest_result reads.
ingest_drain() {
  local db=$1 cfg=$2 broker=$3 label=$4 deadline count now
  _IN_LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
  _IN_ZERO=$(date +%s.%N)
  RUST_LOG=${QB_RUST_LOG:-warn} "$QB_BIN" --config "$cfg" serve >>"$WORK/queuebox.log" 2>&1 &
  QB_PID=$!
  _PIDS+=("$QB_PID")
  _IN_Q0=$(ticks "$QB_PID"); _IN_B0=$(ticks "$broker"); _IN_PIDS=; _IN_D0=0; _IN_FULL=
  # The backends appear once the pool connects: read them after the first rows.
  deadline=$((SECONDS + RUN_TIMEOUT))
  while :; do
    count=$(sql "$db" "SELECT count(*) FROM inbox")
    now=$(date +%s.%N)
    if [ "$count" -eq 0 ]; then _IN_ZERO=$now; fi
    if [ -z "$_IN_PIDS" ] && [ "$count" -gt 0 ]; then _IN_PIDS=$(db_backend_pids "$db"); _IN_D0=$(ticks_many $_IN_PIDS); fi
    [ "$count" -ge "$ROWS" ] && { _IN_FULL=$now; break; }
    kill -0 "$QB_PID" 2>/dev/null || { cat "$WORK/queuebox.log" >&2; die "queuebox exited"; }
    [ "$SECONDS" -lt "$deadline" ] || { log "$label: timeout at $count of $ROWS"; break; }
    sleep 0.2
  done
  _IN_END=$now
  _IN_Q1=$(ticks "$QB_PID"); _IN_B1=$(ticks "$broker"); _IN_D1=$(ticks_many $_IN_PIDS)
  _IN_PEAK=$(mem "$QB_PID")
}

# ingest_result DB: the fields of the run ingest_drain measured (call after stop_queuebox).
ingest_result() {
  local db=$1 stored dead db_rate wall hz
  hz=$(getconf CLK_TCK)
  read -r stored dead db_rate <<<"$(sql "$db" "SELECT count(*), count(*) FILTER (WHERE state = 'dead'), round((count(*) - 1) / NULLIF(extract(epoch FROM max(created_at) - min(created_at)), 0)) FROM inbox" | tr '|' ' ')"
  wall=$(echo "${_IN_FULL:-$_IN_END} - $_IN_ZERO" | bc -l)
  per() { echo "1000000 * ($1) / ($hz * $stored)" | bc; }
  echo "stored=$stored dead=$dead rate=$db_rate poll_rate=$(echo "$stored / $wall" | bc)" \
       "us_per_row_qb=$(per "$_IN_Q1 - $_IN_Q0") us_per_row_broker=$(per "$_IN_B1 - $_IN_B0") us_per_row_pg_rundb=$(per "$_IN_D1 - $_IN_D0")" \
       "end_$(echo "$_IN_PEAK" | sed 's/ / end_/') load_at_start=${_IN_LOAD// /,}"
}
