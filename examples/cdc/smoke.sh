#!/usr/bin/env bash
# Smoke test of PostgreSQL logical capture, end to end, with the built binary and the services of
# scripts/services.sh:
#
#   eval "$(bash scripts/services.sh)"
#   CARGO_TARGET_DIR=/var/cache/queuebox-target cargo build -p queuebox   # if not built yet
#   bash examples/cdc/smoke.sh
#
# It proves three things, each with assertions that stop the run with FAIL and a reason:
#   (a) capture wakes delivery: with pollIntervalMs and reconciliationIntervalMs at 60000, an
#       inserted row reaches the sink within 2 s, and the capture counters say the log woke it;
#   (b) the position survives a restart: after SIGTERM, offsets.dat lies past the delivered row
#       and the slot's confirmed_flush_lsn is not ahead of it; the next start resumes streaming
#       from offsets.dat (no new slot, no new state, no fault; the slot confirms that position),
#       reads only the new row's insert, delivers it within 2 s, and delivers no earlier row again;
#   (c) one owner: a second process with the same identity (own port and state directory) is
#       refused with "already has an owner", stays ready with outbox-capture down, and still
#       delivers through SQL (shown while the owner is paused with SIGSTOP).
#
# Everything it creates has a name unique to the run (database, slot, temp directory, ports) and
# is removed at exit, on failure too: the processes, then the slot (once nothing streams from it),
# the database and the directory. KEEP=1 keeps the directory (logs, state files) for a look.
#
# Inputs: QB_TEST_PG_URL (postgres://user:password@host:port/db, an account that may create
# databases), QB_TEST_PG_CAPTURE_ACCOUNT (user:password of an account with REPLICATION), and
# QB_BIN (default /var/cache/queuebox-target/debug/queuebox).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
QB_BIN=${QB_BIN:-/var/cache/queuebox-target/debug/queuebox}
DELIVERY_DEADLINE_MS=2000
START_DEADLINE_S=30
STOP_DEADLINE_S=20

STARTED_AT_MS=$(date +%s%3N)
say() { printf 'smoke: %s\n' "$*" >&2; }
fail() {
  printf '\nsmoke: FAIL: %s\n' "$*" >&2
  exit 1
}
now_ms() { date +%s%3N; }

# ---------------------------------------------------------------------------------------------
# Inputs

[ -x "$QB_BIN" ] || fail "no QueueBox binary at $QB_BIN (build it, or set QB_BIN)"
command -v psql >/dev/null || fail "psql is not installed"
command -v python3 >/dev/null || fail "python3 is not installed"
command -v curl >/dev/null || fail "curl is not installed"
: "${QB_TEST_PG_URL:?set it first: eval \"\$(bash scripts/services.sh)\"}"
: "${QB_TEST_PG_CAPTURE_ACCOUNT:?set it first: eval \"\$(bash scripts/services.sh)\"}"

url_re='^postgres(ql)?://([^:@/]+):([^@/]*)@([^:/]+):([0-9]+)/'
[[ $QB_TEST_PG_URL =~ $url_re ]] || fail "QB_TEST_PG_URL is not postgres://user:password@host:port/db"
PG_USER=${BASH_REMATCH[2]} PG_PASSWORD=${BASH_REMATCH[3]}
PG_HOST=${BASH_REMATCH[4]} PG_PORT=${BASH_REMATCH[5]}
CAPTURE_USER=${QB_TEST_PG_CAPTURE_ACCOUNT%%:*}
CAPTURE_PASSWORD=${QB_TEST_PG_CAPTURE_ACCOUNT#*:}

# Names unique to this run: slots are cluster-wide, so a fixed name could meet another run's.
RUN="$(date +%s)_$$_${RANDOM}"
DB="qb_cdc_smoke_$RUN"
SLOT="qb_cdc_smoke_$RUN"
IDENTITY="cdc_smoke"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/qb-cdc-smoke.XXXXXX")
SINK_OUT="$WORK/received.jsonl"
: >"$SINK_OUT"

export PGPASSWORD="$PG_PASSWORD" PGCONNECT_TIMEOUT=5
# psql on the maintenance database, and on the run's database, as the test account.
psql_admin() { psql -X -q -v ON_ERROR_STOP=1 -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d postgres "$@"; }
psql_db() { psql -X -q -v ON_ERROR_STOP=1 -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d "$DB" "$@"; }
sql_value() { psql_db -tA -c "$1"; }
# Dropping a slot takes the REPLICATION attribute, which the capture account has.
psql_capture() {
  PGPASSWORD="$CAPTURE_PASSWORD" psql -X -q -v ON_ERROR_STOP=1 -h "$PG_HOST" -p "$PG_PORT" -U "$CAPTURE_USER" -d postgres "$@"
}

# ---------------------------------------------------------------------------------------------
# Cleanup, on every exit

QB1_PID="" QB2_PID="" SINK_PID="" DB_CREATED=0

# SIGTERM, then waits up to STOP_DEADLINE_S, then SIGKILL. Never fails.
stop_process() {
  local pid=$1
  [ -n "$pid" ] || return 0
  kill -CONT "$pid" 2>/dev/null || true
  kill -TERM "$pid" 2>/dev/null || return 0
  local deadline=$((SECONDS + STOP_DEADLINE_S))
  while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.05; done
  if kill -0 "$pid" 2>/dev/null; then
    say "process $pid did not stop within ${STOP_DEADLINE_S}s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

cleanup() {
  local status=$?
  set +e
  trap - EXIT INT TERM
  if [ "$status" -ne 0 ]; then
    for log in "$WORK"/qb*.log "$WORK/sink.log"; do
      [ -s "$log" ] || continue
      say "---- last lines of $(basename "$log") ----"
      tail -n 25 "$log" >&2
    done
    # What capture and the server knew at the failure.
    for port in ${PORT1:-} ${PORT2:-}; do
      say "---- capture metrics on port $port ----"
      curl -s --max-time 2 "http://127.0.0.1:$port/metrics" | grep '^queuebox_capture' >&2
    done
    if [ "$DB_CREATED" -eq 1 ]; then
      say "---- slot $SLOT and its sender, server log end $(psql_admin -tA -c "SELECT pg_current_wal_lsn()") ----"
      psql_admin -c "SELECT s.active, s.restart_lsn, s.confirmed_flush_lsn, r.state, r.sent_lsn, r.flush_lsn, r.replay_lag FROM pg_replication_slots s LEFT JOIN pg_stat_replication r ON r.pid = s.active_pid WHERE s.slot_name = '$SLOT'" >&2
      psql_db -c "SELECT payload, state, attempt, created_at, updated_at, last_error FROM outbox ORDER BY sequence" >&2
    fi
  fi
  stop_process "$QB1_PID"
  stop_process "$QB2_PID"
  stop_process "$SINK_PID"
  if [ "$DB_CREATED" -eq 1 ]; then
    # QueueBox has stopped, so nothing streams from the slot any more. A slot keeps write-ahead
    # log for ever, so a leftover one would fill the disk: drop it, waiting for its walsender to
    # be gone (a killed process's session can take a moment to end).
    local deadline=$((SECONDS + 10))
    while [ "$(psql_admin -tA -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$SLOT' AND active")" != "0" ] \
      && [ "$SECONDS" -lt "$deadline" ]; do
      sleep 0.1
    done
    psql_capture -tA -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '$SLOT'" >/dev/null \
      || say "WARNING: could not drop the replication slot $SLOT; drop it by hand: SELECT pg_drop_replication_slot('$SLOT');"
    psql_admin -c "DROP DATABASE IF EXISTS \"$DB\" WITH (FORCE)" \
      || say "WARNING: could not drop the database $DB"
    if [ "$(psql_admin -tA -c "SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$SLOT'")" != 0 ] \
      || [ "$(psql_admin -tA -c "SELECT count(*) FROM pg_database WHERE datname = '$DB'")" != 0 ]; then
      say "FAIL: the slot $SLOT or the database $DB is still there after the cleanup"
      [ "$status" -ne 0 ] || status=1
    fi
  fi
  if [ "${KEEP:-0}" = 1 ]; then
    say "kept $WORK"
  else
    rm -rf "$WORK"
  fi
  if [ "$status" -eq 0 ]; then
    say "PASS in $(( ($(now_ms) - STARTED_AT_MS) )) ms"
  else
    say "FAILED (exit $status) after $(( ($(now_ms) - STARTED_AT_MS) )) ms"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------------------------
# Helpers

# wait_for SECONDS WHAT COMMAND...: runs COMMAND until it succeeds; fails naming WHAT at the deadline.
wait_for() {
  local seconds=$1 what=$2
  shift 2
  local deadline=$(($(now_ms) + seconds * 1000))
  until "$@" >/dev/null 2>&1; do
    [ "$(now_ms)" -lt "$deadline" ] || fail "$what: not within ${seconds}s"
    sleep 0.05
  done
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# An LSN (hex/hex) as a number, for comparisons.
lsn_number() {
  local lsn=$1
  [[ $lsn =~ ^[0-9A-Fa-f]+/[0-9A-Fa-f]+$ ]] || fail "\`$lsn\` is not a log position"
  echo $(((16#${lsn%/*} << 32) | 16#${lsn#*/}))
}

# How many times the sink received the row marked $1 (at path $2, any path when omitted). The
# sink writes one JSON object per line with sorted keys, so plain text matching is exact enough.
received() {
  local marker=$1 path=${2:-}
  grep -F "\"marker\": \"$marker\"}" "$SINK_OUT" | grep -cF "\"path\": \"${path}" || true
}
delivered() { [ "$(received "$@")" -ge 1 ]; }

# The sink's arrival time of the row marked $1, in milliseconds since the epoch.
arrival_ms() {
  grep -F "\"marker\": \"$1\"}" "$SINK_OUT" | head -n 1 | sed -E 's/^\{"at": ([0-9]+)\.([0-9]{1,3}).*/\1 \2/' |
    { read -r seconds fraction; fraction=${fraction}00; echo $((seconds * 1000 + 10#${fraction:0:3})); }
}

# insert_and_expect MARKER [PATH]: inserts an outbox row whose payload carries MARKER, asserts it
# reaches the sink (at PATH) within DELIVERY_DEADLINE_MS of the insert, and prints how long it took.
# Sets INSERTED_LSN to the log position reached just before the commit: the commit record, and so
# the position capture records once it handled the row, lies after it.
insert_and_expect() {
  local marker=$1 path=${2:-} start took out inserted_at
  start=$(now_ms)
  out=$(psql_db -tA -c "BEGIN" \
    -c "INSERT INTO outbox (topic, key, payload) VALUES ('orders.created', 'order-$marker', '{\"marker\": \"$marker\"}') RETURNING (extract(epoch FROM clock_timestamp()) * 1000)::bigint" \
    -c "SELECT pg_current_wal_insert_lsn()" -c "COMMIT")
  inserted_at=$(grep -E '^[0-9]+$' <<<"$out")
  INSERTED_LSN=$(grep -F / <<<"$out")
  until delivered "$marker" "$path"; do
    took=$(($(now_ms) - start))
    [ "$took" -lt "$DELIVERY_DEADLINE_MS" ] || not_delivered "$marker" "$path"
    sleep 0.02
  done
  say "row $marker delivered${path:+ at $path} $(($(arrival_ms "$marker") - inserted_at)) ms after its insert ($(($(arrival_ms "$marker") - start)) ms with the psql start)"
}

# Fails for a row that did not arrive in time, saying what capture saw. When the owner (OWNER_PORT)
# read the insert and woke delivery but the row is still pending, the claims that followed the
# wake-up missed the commit (QueueBox retries them for 100 ms, see docs/concepts/capture.md).
not_delivered() {
  local marker=$1 path=$2 state reads wakes why=""
  state=$(sql_value "SELECT state FROM outbox WHERE payload->>'marker' = '$marker'")
  if [ -z "$path" ] && [ -n "${OWNER_PORT:-}" ]; then
    reads=$(metric "$OWNER_PORT" 'queuebox_capture_changes_total{kind="insert"}')
    wakes=$(metric "$OWNER_PORT" 'queuebox_capture_wakes_total{origin="log"}')
    why="; the owner has read $reads inserts from the log and woken delivery $wakes times for them"
    if [ "$state" = pending ] && [ "$reads" -ge "$CAPTURE_READS_EXPECTED" ]; then
      why="$why, yet the row is still pending: the claims after the wake-up did not see the commit (QueueBox retries them for 100 ms; docs/concepts/capture.md), and the next claim comes with the 60 s reconciliation pass"
    fi
  fi
  fail "row $marker was not delivered${path:+ at $path} within ${DELIVERY_DEADLINE_MS} ms of its insert (row state: ${state:-missing})$why"
}

# A counter or gauge value from /metrics on port $1 (the sum over lines matching $2).
metric() {
  curl -fsS "http://127.0.0.1:$1/metrics" | awk -v pat="$2" 'index($0, pat) == 1 { sum += $NF } END { print sum + 0 }'
}

# Whether the slot's confirmed position reached $1.
slot_confirmed_past() {
  local confirmed
  confirmed=$(psql_admin -tA -c "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$SLOT'")
  [ -n "$confirmed" ] && [ "$(lsn_number "$confirmed")" -ge "$(lsn_number "$1")" ]
}

log_has() { grep -qF -- "$2" "$1"; }

# start_queuebox NAME PORT STATE_DIR [VAR=value...]: starts QueueBox on the example configuration
# with this run's database, slot, sink and identity, plus the extra variables; sets STARTED_PID (a
# child of this shell, so that `wait` can read its exit status).
start_queuebox() {
  local name=$1 port=$2 state=$3
  shift 3
  env \
    QUEUEBOX_DATABASE_URL="jdbc:postgresql://$PG_HOST:$PG_PORT/$DB" \
    QUEUEBOX_DATABASE_USERNAME="$PG_USER" \
    QUEUEBOX_DATABASE_PASSWORD="$PG_PASSWORD" \
    QUEUEBOX_SERVER_HTTPPORT="$port" \
    QUEUEBOX_OUTBOX_CAPTURE_IDENTITY="$IDENTITY" \
    QUEUEBOX_OUTBOX_CAPTURE_SLOT="$SLOT" \
    QUEUEBOX_OUTBOX_CAPTURE_STATEDIRECTORY="$state" \
    QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_USERNAME="$CAPTURE_USER" \
    QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_PASSWORD="$CAPTURE_PASSWORD" \
    QUEUEBOX_DESTINATIONS_SINK_BASEURL="http://127.0.0.1:$SINK_PORT" \
    NO_COLOR=1 \
    "$@" \
    "$QB_BIN" --config "$HERE/queuebox.yml" serve >>"$WORK/$name.log" 2>&1 &
  STARTED_PID=$!
}

ready() { curl -fsS "http://127.0.0.1:$1/health/ready"; }

# Waits for "capture streaming" in log $1 (appearing after byte offset $2) while process $3 lives.
wait_streaming() {
  local log=$1 from=$2 pid=$3 deadline=$((SECONDS + START_DEADLINE_S))
  until tail -c +"$((from + 1))" "$log" | grep -qF "capture streaming"; do
    kill -0 "$pid" 2>/dev/null || fail "QueueBox ($log) exited before capture streamed"
    if tail -c +"$((from + 1))" "$log" | grep -qE "capture stopped|capture failed"; then
      fail "capture did not stream: $(tail -c +"$((from + 1))" "$log" | grep -E 'capture stopped|capture failed' | head -n 1)"
    fi
    [ "$SECONDS" -lt "$deadline" ] || fail "capture did not stream within ${START_DEADLINE_S}s ($log)"
    sleep 0.05
  done
}

# ---------------------------------------------------------------------------------------------
# The run's database, prepared as examples/cdc/setup.sql says

say "database $DB, slot $SLOT, work directory $WORK"
psql_admin -c "CREATE DATABASE \"$DB\""
DB_CREATED=1
[ "$(sql_value "SHOW wal_level")" = logical ] || fail "wal_level is not logical on $PG_HOST:$PG_PORT"

# The tables, through QueueBox's own migrations.
QUEUEBOX_DATABASE_URL="jdbc:postgresql://$PG_HOST:$PG_PORT/$DB" \
  QUEUEBOX_DATABASE_USERNAME="$PG_USER" QUEUEBOX_DATABASE_PASSWORD="$PG_PASSWORD" \
  "$QB_BIN" --config "$HERE/queuebox.yml" migrate >"$WORK/migrate.log" 2>&1 \
  || { cat "$WORK/migrate.log" >&2; fail "queuebox migrate failed"; }

# setup.sql grants to the example's capture account; point it at this run's one.
sed "s/TO queuebox_capture;/TO \"$CAPTURE_USER\";/" "$HERE/setup.sql" >"$WORK/setup.sql"
psql_db -f "$WORK/setup.sql"
[ "$(sql_value "SELECT count(*) FROM pg_publication_tables WHERE pubname = 'queuebox_outbox' AND tablename = 'outbox'")" = 1 ] \
  || fail "setup.sql did not create the publication queuebox_outbox over outbox"

# The sink.
SINK_PORT=$(free_port)
python3 "$HERE/sink.py" --port "$SINK_PORT" --out "$SINK_OUT" >"$WORK/sink.log" 2>&1 &
SINK_PID=$!
wait_for 10 "the sink on port $SINK_PORT" curl -fsS "http://127.0.0.1:$SINK_PORT/"

# ---------------------------------------------------------------------------------------------
say "(a) capture wakes delivery"

PORT1=$(free_port)
STATE1="$WORK/state-1"
LOG1="$WORK/qb1.log"
: >"$LOG1"
start_queuebox qb1 "$PORT1" "$STATE1" \
  QUEUEBOX_OUTBOX_POLLINTERVALMS=60000 QUEUEBOX_OUTBOX_CAPTURE_RECONCILIATIONINTERVALMS=60000
QB1_PID=$STARTED_PID
wait_streaming "$LOG1" 0 "$QB1_PID"
wait_for "$START_DEADLINE_S" "QueueBox 1 ready on port $PORT1" ready "$PORT1"
log_has "$LOG1" "replication slot created" || fail "the first start did not report creating the slot"
log_has "$LOG1" "capture state created" || fail "the first start did not report creating the capture state"
[ "$(psql_admin -tA -c "SELECT database || ' ' || active FROM pg_replication_slots WHERE slot_name = '$SLOT'")" = "$DB true" ] \
  || fail "slot $SLOT is not an active slot of $DB"
ready "$PORT1" | grep -qE '"outbox-capture":\{"status":"up"' \
  || fail "outbox-capture is not UP on the owner: $(ready "$PORT1")"

inserts_before=$(metric "$PORT1" 'queuebox_capture_changes_total{kind="insert"}')
OWNER_PORT=$PORT1 CAPTURE_READS_EXPECTED=$((inserts_before + 1))
insert_and_expect r1
wait_for 5 "the owner counting the insert" \
  test "$(metric "$PORT1" 'queuebox_capture_changes_total{kind="insert"}')" -gt "$inserts_before"
[ "$(metric "$PORT1" 'queuebox_capture_wakes_total{origin="log"}')" -ge 1 ] \
  || fail "queuebox_capture_wakes_total{origin=\"log\"} did not move"
R1_LSN=$INSERTED_LSN

# ---------------------------------------------------------------------------------------------
say "(b) the position survives a restart"

kill -TERM "$QB1_PID"
deadline=$((SECONDS + STOP_DEADLINE_S))
while kill -0 "$QB1_PID" 2>/dev/null; do
  [ "$SECONDS" -lt "$deadline" ] || fail "QueueBox 1 did not stop within ${STOP_DEADLINE_S}s of SIGTERM"
  sleep 0.05
done
qb1_status=0
wait "$QB1_PID" || qb1_status=$?
QB1_PID=""
[ "$qb1_status" -eq 0 ] || fail "QueueBox 1 exited with $qb1_status after SIGTERM"

[ -s "$STATE1/identity" ] || fail "no identity file in $STATE1"
[ -s "$STATE1/offsets.dat" ] || fail "no offsets.dat in $STATE1"
OFFSET=$(tr -d '[:space:]' <"$STATE1/offsets.dat")
# The slot is inactive once the owner's session ended; then its confirmed position is final.
wait_for 10 "slot $SLOT becoming inactive" \
  test "$(psql_admin -tA -c "SELECT active FROM pg_replication_slots WHERE slot_name = '$SLOT'")" = f
CONFIRMED=$(psql_admin -tA -c "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$SLOT'")
[ -n "$CONFIRMED" ] || fail "slot $SLOT is gone or has no confirmed position after a graceful stop"
say "after the stop: offsets.dat $OFFSET, slot confirmed_flush_lsn $CONFIRMED (r1 committed after $R1_LSN)"
# r1 was delivered within 2 s with 60 s intervals, so capture handled its commit, and the position
# written at the stop lies past it.
[ "$(lsn_number "$OFFSET")" -gt "$(lsn_number "$R1_LSN")" ] \
  || fail "offsets.dat ($OFFSET) does not lie past r1 (committed after $R1_LSN)"
# The slot never confirms more than capture recorded: the stream reports its position about once a
# second and a stop sends no last report, so the slot may lag the file, never lead it.
[ "$(lsn_number "$CONFIRMED")" -le "$(lsn_number "$OFFSET")" ] \
  || fail "the slot confirmed $CONFIRMED, beyond what offsets.dat records ($OFFSET)"
instance=$(sed -n 's/^instance=//p' "$STATE1/identity")
[ "$(sql_value "SELECT instance_id::text FROM queuebox_capture_state WHERE identity_name = '$IDENTITY'")" = "$instance" ] \
  || fail "queuebox_capture_state does not name the instance of $STATE1/identity ($instance)"

# The owner lock lives in the old replication session; the restart must not meet it.
wait_for 10 "the owner lock of the stopped process being released" \
  test "$(psql_admin -tA -c "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE l.locktype = 'advisory' AND d.datname = '$DB'")" = 0

restart_from=$(stat -c %s "$LOG1")
start_queuebox qb1 "$PORT1" "$STATE1" \
  QUEUEBOX_OUTBOX_POLLINTERVALMS=60000 QUEUEBOX_OUTBOX_CAPTURE_RECONCILIATIONINTERVALMS=60000
QB1_PID=$STARTED_PID
wait_streaming "$LOG1" "$restart_from" "$QB1_PID"
wait_for "$START_DEADLINE_S" "QueueBox 1 ready again" ready "$PORT1"
second_run=$(tail -c +"$((restart_from + 1))" "$LOG1")
! grep -qF "replication slot created" <<<"$second_run" || fail "the restart created a new slot"
! grep -qF "capture state created" <<<"$second_run" || fail "the restart created a new capture state"
! grep -qF "capture stopped;" <<<"$second_run" || fail "the restart stopped capture: $(grep -F 'capture stopped;' <<<"$second_run")"
grep -F "capture streaming" <<<"$second_run" | grep -qF "$OFFSET" \
  || fail "the restart did not resume from offsets.dat ($OFFSET): $(grep -F 'capture streaming' <<<"$second_run")"
# The restarted stream starts at offsets.dat, whatever the slot had confirmed, and confirms it.
wait_for 10 "slot $SLOT confirming the position of offsets.dat ($OFFSET) after the restart" slot_confirmed_past "$OFFSET"
say "restart resumed streaming from $OFFSET; slot confirmed_flush_lsn now $(psql_admin -tA -c "SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '$SLOT'")"

CAPTURE_READS_EXPECTED=1
insert_and_expect r2
# The restarted stream began after r1, so the only insert it read is r2's.
[ "$(metric "$PORT1" 'queuebox_capture_changes_total{kind="insert"}')" = 1 ] \
  || fail "after the restart capture read $(metric "$PORT1" 'queuebox_capture_changes_total{kind="insert"}') inserts, expected 1 (r2): the position did not survive"
[ "$(received r1)" = 1 ] || fail "row r1 was delivered $(received r1) times, expected once"
[ "$(received r2)" = 1 ] || fail "row r2 was delivered $(received r2) times, expected once"

# ---------------------------------------------------------------------------------------------
say "(c) one owner per identity"

PORT2=$(free_port)
STATE2="$WORK/state-2"
LOG2="$WORK/qb2.log"
: >"$LOG2"
# The refused replica idles for the reconciliation interval (capture mode, enabled), so it is short
# here; its rows go to /second so the sink tells who delivered them.
start_queuebox qb2 "$PORT2" "$STATE2" \
  QUEUEBOX_OUTBOX_POLLINTERVALMS=200 QUEUEBOX_OUTBOX_CAPTURE_RECONCILIATIONINTERVALMS=200 \
  QUEUEBOX_DESTINATIONS_SINK_PATH=/second
QB2_PID=$STARTED_PID
wait_for "$START_DEADLINE_S" "\"already has an owner\" in the second process's log" log_has "$LOG2" "already has an owner"
say "second process: $(grep -oE 'capture identity [a-z0-9_]+ already has an owner[^;.]*' "$LOG2" | head -n 1)"
wait_for "$START_DEADLINE_S" "QueueBox 2 ready on port $PORT2" ready "$PORT2"
health2=$(ready "$PORT2")
grep -qE '"outbox-capture":\{"status":"down"' <<<"$health2" \
  || fail "outbox-capture is not DOWN on the refused process: $health2"
grep -qF "already has an owner" <<<"$health2" \
  || fail "the refused process's health does not give the reason: $health2"
[ ! -e "$STATE2/identity" ] || fail "the refused process wrote an identity file"
kill -0 "$QB1_PID" || fail "the owner died"
ready "$PORT1" | grep -qE '"outbox-capture":\{"status":"up"' || fail "the owner's capture is no longer UP"

# Pause the owner (it keeps its lock and its slot), so only the refused process can claim.
kill -STOP "$QB1_PID"
OWNER_PORT=""
insert_and_expect r3 /second
kill -CONT "$QB1_PID"

# ---------------------------------------------------------------------------------------------
say "stopping and checking that every row went out once"

stop_process "$QB2_PID"
QB2_PID=""
stop_process "$QB1_PID"
QB1_PID=""
for marker in r1 r2 r3; do
  [ "$(received "$marker")" = 1 ] || fail "row $marker was delivered $(received "$marker") times, expected once"
done
[ "$(sql_value "SELECT count(*) FILTER (WHERE state = 'sent') || '/' || count(*) FROM outbox")" = "3/3" ] \
  || fail "not every outbox row is sent: $(sql_value "SELECT string_agg(state, ',') FROM outbox")"
