# Shared helpers of the bench scripts. Source it; it sets strict mode and a cleanup trap that stops
# every process the script started and drops every database it created.
#
# Environment (all optional):
#   QB_BIN         the queuebox release binary   (default /var/cache/queuebox-target/release/queuebox)
#   BENCH_BIN_DIR  where the receiver and probe are built (default /var/cache/qb-target-bench/release)
#   PGHOST PGPORT PGUSER PGPASSWORD               (default 127.0.0.1 5432 queuebox queuebox)
#   QB_PORT        the QueueBox data port of the bench (default 18080)
#   RECV_PORT      the receiver port (default 19999)
#   BATCH CONC POLL   outbox.batchSize, outbox.concurrency, outbox.pollIntervalMs (default 100 8 100)
#   POOL           database.poolSize (default 10)
#   PG_SSLMODE     sslmode of the database URL (default disable; require = the pool over TLS)
#   CAPTURE_USER CAPTURE_PASSWORD  the account with REPLICATION that drops capture slots
#                  (default queuebox_capture/queuebox_capture, made by scripts/services.sh)
#   QB_CPUS RECV_CPUS  CPU lists (taskset -c) for QueueBox and the receiver; unset = any CPU

set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/.." && pwd)
QB_BIN=${QB_BIN:-/var/cache/queuebox-target/release/queuebox}
BENCH_BIN_DIR=${BENCH_BIN_DIR:-/var/cache/qb-target-bench/release}
RECEIVER_BIN=$BENCH_BIN_DIR/qb-bench-receiver
STARTUP_BIN=$BENCH_BIN_DIR/qb-bench-startup
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-queuebox} PGPASSWORD=${PGPASSWORD:-queuebox}
QB_PORT=${QB_PORT:-18080}
RECV_PORT=${RECV_PORT:-19999}
BATCH=${BATCH:-100}
CONC=${CONC:-8}
POLL=${POLL:-100}
POOL=${POOL:-10}
QB_CPUS=${QB_CPUS:-}
RECV_CPUS=${RECV_CPUS:-}
# Pinned starts write `${QB_CPUS:+taskset -c $QB_CPUS} COMMAND ...`: a plain command, not a shell
# function, so `$!` of a backgrounded start is COMMAND's own pid (taskset execs it), which the CPU
# figures read and the cleanup stops.

WORK=$(mktemp -d /tmp/qb-bench.XXXXXX)
_PIDS=()
_DBS=()
_SLOTS=()   # "slot database" pairs: logical slots QueueBox created for the script (see drop_slot)
CAPTURE_USER=${CAPTURE_USER:-queuebox_capture}
CAPTURE_PASSWORD=${CAPTURE_PASSWORD:-queuebox_capture}

_PINNED=()  # pids whose every thread pin_all moved; _cleanup gives them every CPU back
# pin_all CPUS PID...: every thread of each PID onto the CPU list CPUS (taskset -a). A PostgreSQL
# postmaster's later backends inherit its affinity.
pin_all() {
  local cpus=$1 pid; shift
  command -v taskset >/dev/null || die "pinning needs taskset (util-linux)"
  for pid in "$@"; do
    taskset -a -p -c "$cpus" "$pid" >/dev/null 2>&1 && _PINNED+=("$pid")
  done
  return 0
}

log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

_cleanup() {
  local pid db
  for pid in "${_PIDS[@]:-}"; do
    [ -n "$pid" ] || continue
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  # a database that still has a logical slot cannot be dropped: slots first
  local pair
  for pair in "${_SLOTS[@]:-}"; do
    [ -n "$pair" ] || continue
    drop_slot $pair || true
  done
  for db in "${_DBS[@]:-}"; do
    [ -n "$db" ] || continue
    drop_db "$db" || true
  done
  rm -rf "$WORK"
  local all=0-$(( $(nproc) - 1 ))
  for pid in "${_PINNED[@]:-}"; do
    [ -n "$pid" ] && taskset -a -p -c "$all" "$pid" >/dev/null 2>&1 || true
  done
}
trap _cleanup EXIT
trap 'exit 130' INT TERM

need_bins() {
  [ -x "$QB_BIN" ] || die "no queuebox binary at $QB_BIN: CARGO_TARGET_DIR=/var/cache/queuebox-target cargo build --release -p queuebox"
  if ! [ -x "$RECEIVER_BIN" ] || ! [ -x "$STARTUP_BIN" ]; then
    log "building the bench receiver"
    (cd "$BENCH_DIR/receiver" && CARGO_TARGET_DIR=${BENCH_BIN_DIR%/release} cargo build --release -q) || die "receiver build failed"
  fi
}

sql() { local db=$1; shift; psql -X -q -v ON_ERROR_STOP=1 -d "$db" -Atc "$*"; }

# drop_db NAME: drops a bench database. WITH (FORCE) cannot end an autovacuum worker for a role that
# is not superuser, so on failure it waits and tries again (as postgres through runuser when root).
drop_db() {
  local name=$1 try
  for try in 1 2 3 4 5 6 7 8 9 10; do
    psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$name\" WITH (FORCE)" >/dev/null 2>&1 && return 0
    if [ "$(id -u)" -eq 0 ]; then
      runuser -u postgres -- env -u PGHOST -u PGPORT -u PGUSER -u PGPASSWORD psql -X -q -p "$PGPORT" -d postgres \
        -c "DROP DATABASE IF EXISTS \"$name\" WITH (FORCE)" >/dev/null 2>&1 && return 0
    fi
    sleep 1
  done
  log "could not drop database $name"; return 1
}

# drop_slot SLOT DB: drops a logical replication slot (QueueBox's capture creates its slot and never
# drops it; a leftover slot keeps WAL forever and blocks DROP DATABASE). A logical slot is dropped
# from a session on its own database, by an account with REPLICATION (the capture account: queuebox
# has none), once no walsender uses it; a stopped QueueBox's walsender can take a moment to end.
drop_slot() {
  local slot=$1 db=$2 active
  for _ in $(seq 1 100); do
    active=$(sql postgres "SELECT active FROM pg_replication_slots WHERE slot_name = '$slot'")
    [ -n "$active" ] || return 0
    if [ "$active" = f ]; then
      PGUSER=$CAPTURE_USER PGPASSWORD=$CAPTURE_PASSWORD psql -X -q -d "$db" \
        -c "SELECT pg_drop_replication_slot('$slot')" >/dev/null 2>&1 || true
    fi
    sleep 0.2
  done
  log "could not drop replication slot $slot (database $db)"; return 1
}

# new_db NAME [TEMPLATE]: creates a database that the cleanup drops.
new_db() {
  local name=$1 template=${2:-}
  drop_db "$name"
  if [ -n "$template" ]; then
    psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE \"$name\" TEMPLATE \"$template\" STRATEGY = FILE_COPY" >/dev/null
  else
    psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "CREATE DATABASE \"$name\"" >/dev/null
  fi
  _DBS+=("$name")
}

# DEST_TRANSFORM: a JSONata expression set as the sink destination's transform (the cost of a
# destination transform); empty for none.
dest_transform() {
  [ -n "${DEST_TRANSFORM:-}" ] || return 0
  printf "    transform:\n      expression: '%s'\n" "${DEST_TRANSFORM//\'/\'\'}"
}

# DEST_SIGNING=1: the sink destination signs every request (Standard Webhooks, one secret): the cost
# of signing; empty for none.
dest_signing() {
  [ -n "${DEST_SIGNING:-}" ] || return 0
  printf '    signing:\n      secrets: ["whsec_%s"]\n' "$(printf 'bench-signing-secret-0123456789' | base64)"
}

# config_head DB: the server, database and outbox sections every bench configuration shares.
config_head() {
  local db=$1
  cat <<EOF
server:
  httpPort: $QB_PORT
database:
  type: postgresql
  # Plain TCP by default, as every figure before database TLS existed (2026-12-01) was measured.
  url: jdbc:postgresql://$PGHOST:$PGPORT/$db?sslmode=${PG_SSLMODE:-disable}
  username: $PGUSER
  password: $PGPASSWORD
  poolSize: $POOL
  migrate: true
outbox:
  pollIntervalMs: $POLL
  batchSize: $BATCH
  concurrency: $CONC
EOF
}

# write_config DB FILE: a QueueBox configuration that delivers every topic to the receiver.
write_config() {
  local db=$1 file=$2
  { config_head "$db"; cat <<EOF
destinations:
  sink:
    type: http
    baseUrl: http://127.0.0.1:$RECV_PORT
    path: /events
    timeoutMs: 30000
$(dest_transform)
$(dest_signing)
routes:
  - topicPattern: "**"
    destination: sink
admin:
  enabled: false
EOF
  } >"$file"
}

# migrate DB: creates the QueueBox schema in DB with the binary's own migrations.
migrate() {
  local db=$1 cfg=$WORK/migrate-$1.yml
  write_config "$db" "$cfg"
  RUST_LOG=warn "$QB_BIN" --config "$cfg" migrate >"$WORK/migrate-$db.log" 2>&1 || { cat "$WORK/migrate-$db.log" >&2; die "migrate $db failed"; }
  # SCHEMA_SQL: SQL run on every database this script migrates, after the migrations: a schema
  # change to measure (run the script alternated with the variable unset).
  if [ -n "${SCHEMA_SQL:-}" ]; then sql "$db" "$SCHEMA_SQL" >/dev/null; log "ran SCHEMA_SQL on $db: $SCHEMA_SQL"; fi
}

RECV_PID=
start_receiver() {
  ${RECV_CPUS:+taskset -c $RECV_CPUS} "$RECEIVER_BIN" --port "$RECV_PORT" --threads "${RECV_THREADS:-1}" >"$WORK/receiver.log" 2>&1 &
  RECV_PID=$!
  _PIDS+=("$RECV_PID")
  for _ in $(seq 1 100); do
    curl -fs "http://127.0.0.1:$RECV_PORT/stats" >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  die "the receiver did not start (port $RECV_PORT busy?)"
}
recv() { curl -fs "http://127.0.0.1:$RECV_PORT$1"; }
# field NAME < "a=1 b=2": prints the value of NAME.
field() { tr ' ' '\n' | sed -n "s/^$1=//p" | head -1; }

QB_PID=
# start_queuebox DB: starts `queuebox serve` on DB and waits for /health/ready (30 s bound).
start_queuebox() {
  local db=$1 cfg=$WORK/qb-$1.yml
  write_config "$db" "$cfg"
  RUST_LOG=${QB_RUST_LOG:-warn} ${QB_CPUS:+taskset -c $QB_CPUS} "$QB_BIN" --config "$cfg" serve >"$WORK/queuebox.log" 2>&1 &
  QB_PID=$!
  _PIDS+=("$QB_PID")
  for _ in $(seq 1 3000); do
    curl -fs "http://127.0.0.1:$QB_PORT/health/ready" >/dev/null 2>&1 && return 0
    kill -0 "$QB_PID" 2>/dev/null || { cat "$WORK/queuebox.log" >&2; die "queuebox exited"; }
    sleep 0.01
  done
  die "queuebox not ready in 30 s"
}
stop_queuebox() {
  [ -n "$QB_PID" ] || return 0
  kill -TERM "$QB_PID" 2>/dev/null || true
  for _ in $(seq 1 400); do kill -0 "$QB_PID" 2>/dev/null || break; sleep 0.05; done
  kill -KILL "$QB_PID" 2>/dev/null || true
  wait "$QB_PID" 2>/dev/null || true
  QB_PID=
}

# mem PID: "VmRSS_kB=.. VmHWM_kB=.."
mem() { awk '/^VmRSS:/{r=$2} /^VmHWM:/{h=$2} END{printf "VmRSS_kB=%s VmHWM_kB=%s", r, h}' "/proc/$1/status"; }

# Process CPU ticks (utime+stime) of one pid, and of every postgres process.
ticks_pid() { awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
ticks_postgres() {
  local total=0 p t
  for p in $(pgrep -x postgres); do
    t=$(awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null || echo 0)
    total=$((total + t))
  done
  # exited backends are lost from this sum; the cumulative child time of the postmaster catches them
  local pm; pm=$(pgrep -o -x postgres)
  [ -n "$pm" ] && total=$((total + $(awk '{print $16+$17}' "/proc/$pm/stat")))
  echo "$total"
}
# "pid:ticks" of every backend connected to database $1 (QueueBox's pooled sessions). On a shared
# machine ticks_postgres also counts other databases' backends; this does not. Backends that exit
# during the window are lost from it (the pool keeps its sessions for the whole run).
ticks_db_list() {
  local p
  for p in $(psql -X -A -t -q -d postgres -c "SELECT pid FROM pg_stat_activity WHERE datname = '$1'"); do
    echo "$p:$(awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null || echo 0)"
  done
}
# ticks spent between two ticks_db_list snapshots ($1 before, $2 after; a pid new in $2 counts whole)
ticks_db_delta() {
  awk -v before="$1" -v after="$2" 'BEGIN {
    n = split(before, b, " "); for (i = 1; i <= n; i++) { split(b[i], kv, ":"); t0[kv[1]] = kv[2] }
    n = split(after, a, " "); total = 0
    for (i = 1; i <= n; i++) { split(a[i], kv, ":"); total += kv[2] - ((kv[1] in t0) ? t0[kv[1]] : 0) }
    print total }'
}
ticks_machine() { awk '/^cpu /{print $2+$3+$4+$5+$6+$7+$8, $5+$6}' /proc/stat; }  # total idle
