#!/usr/bin/env bash
# Smoke test of the Kafka bridge example, end to end, with the built binary and the services of
# scripts/services.sh (PostgreSQL and Kafka on loopback):
#
#   eval "$(bash scripts/services.sh)"
#   CARGO_TARGET_DIR=/var/cache/queuebox-target cargo build -p queuebox   # if not built yet
#   bash examples/kafka-bridge/smoke.sh
#
# It runs the example's queuebox.yml and bridge.py as the README does, on names of its own, and
# checks, each failure stopping the run with FAIL and a reason:
#   - the source joins its group and its health component kafka.orders is up;
#   - 3 orders produced twice each (6 records) and one record that is not JSON become 3 received
#     inbox rows plus 1 dead one; the relay writes 3 outbox rows and all 3 turn `sent`;
#   - the processed topic holds exactly 3 records, each keyed by its customer, carrying the outbox
#     row id as x-message-id, the relay's x-idempotency-key and the static x-bridge header;
#   - the group's committed offsets reach the end of the incoming topic (all 7 records, the dead
#     one included): nothing is left to read again.
#
# Everything it creates has a name unique to the run (database, topics, consumer group, port,
# directory) and is removed at exit, on failure too. KEEP=1 keeps the directory (logs).
#
# Inputs: QB_TEST_PG_URL (postgres://user:password@host:port/db, an account that may create
# databases), QB_TEST_KAFKA_BOOTSTRAP (host:port, PLAINTEXT), QB_BIN (default
# /var/cache/queuebox-target/debug/queuebox) and KAFKA_PYTHON: a Python with confluent-kafka
# (default: the virtual environment /var/cache/queuebox-pyvenv-kafka, made with
# confluent-kafka==2.16.1 from PyPI on the first run).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
QB_BIN=${QB_BIN:-/var/cache/queuebox-target/debug/queuebox}
VENV=/var/cache/queuebox-pyvenv-kafka
CONFLUENT_KAFKA_VERSION=2.16.1
DEADLINE_S=20
STOP_DEADLINE_S=20

now_ms() { date +%s%3N; }
STARTED_AT_MS=$(now_ms)
say() { printf 'smoke: [%5d ms] %s\n' "$(($(now_ms) - STARTED_AT_MS))" "$*" >&2; }
fail() {
  printf '\nsmoke: FAIL: %s\n' "$*" >&2
  exit 1
}

# ---------------------------------------------------------------------------------------------
# Inputs

[ -x "$QB_BIN" ] || fail "no QueueBox binary at $QB_BIN (build it, or set QB_BIN)"
command -v psql >/dev/null || fail "psql is not installed"
command -v curl >/dev/null || fail "curl is not installed"
: "${QB_TEST_PG_URL:?set it first: eval \"\$(bash scripts/services.sh)\"}"
: "${QB_TEST_KAFKA_BOOTSTRAP:?set it first: eval \"\$(bash scripts/services.sh)\"}"

if [ -z "${KAFKA_PYTHON:-}" ]; then
  KAFKA_PYTHON=$VENV/bin/python
  if ! "$KAFKA_PYTHON" -c "import confluent_kafka" 2>/dev/null; then
    say "installing confluent-kafka $CONFLUENT_KAFKA_VERSION into $VENV (once)"
    python3 -m venv "$VENV" || fail "python3 -m venv $VENV failed (Debian: apt-get install python3-venv)"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "confluent-kafka==$CONFLUENT_KAFKA_VERSION" \
      || fail "pip could not install confluent-kafka==$CONFLUENT_KAFKA_VERSION"
  fi
fi
"$KAFKA_PYTHON" -c "import confluent_kafka" 2>/dev/null || fail "$KAFKA_PYTHON cannot import confluent_kafka"

url_re='^postgres(ql)?://([^:@/]+):([^@/]*)@([^:/]+):([0-9]+)/'
[[ $QB_TEST_PG_URL =~ $url_re ]] || fail "QB_TEST_PG_URL is not postgres://user:password@host:port/db"
PG_USER=${BASH_REMATCH[2]} PG_PASSWORD=${BASH_REMATCH[3]}
PG_HOST=${BASH_REMATCH[4]} PG_PORT=${BASH_REMATCH[5]}

RUN="$(date +%s)_$$_${RANDOM}"
DB="qb_kafka_smoke_$RUN"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/qb-kafka-smoke.XXXXXX")
LOG="$WORK/queuebox.log"
# Topic and group names of this run, read by bridge.py and set on QueueBox through QUEUEBOX_
# variables (the configuration file stays the README's).
export KAFKA_BOOTSTRAP=$QB_TEST_KAFKA_BOOTSTRAP
export KAFKA_IN_TOPIC="qb-kafka-smoke-$RUN-in" KAFKA_OUT_TOPIC="qb-kafka-smoke-$RUN-out"
export KAFKA_GROUP="qb-kafka-smoke-$RUN" RECEIVE_TIMEOUT_S=$DEADLINE_S

export PGPASSWORD="$PG_PASSWORD" PGCONNECT_TIMEOUT=5
psql_admin() { psql -X -q -v ON_ERROR_STOP=1 -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d postgres "$@"; }
sql_value() { psql -X -q -v ON_ERROR_STOP=1 -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d "$DB" -tA -c "$1"; }
bridge() { "$KAFKA_PYTHON" "$HERE/bridge.py" "$@"; }

# ---------------------------------------------------------------------------------------------
# Cleanup, on every exit

QB_PID="" DB_CREATED=0 TOPICS_CREATED=0

cleanup() {
  local status=$?
  set +e
  trap - EXIT INT TERM
  if [ "$status" -ne 0 ]; then
    for log in "$LOG" "$WORK/received.txt"; do
      [ -s "$log" ] || continue
      say "---- last lines of $(basename "$log") ----"
      tail -n 25 "$log" >&2
    done
    if [ -n "$QB_PID" ]; then
      sql_value "SELECT 'inbox ' || state || ' ' || count(*) FROM inbox GROUP BY state" >&2
      sql_value "SELECT 'outbox ' || state || ' ' || count(*) || ' ' || coalesce(max(last_error), '') FROM outbox GROUP BY state" >&2
    fi
  fi
  if [ -n "$QB_PID" ]; then
    kill -TERM "$QB_PID" 2>/dev/null
    local deadline=$((SECONDS + STOP_DEADLINE_S))
    while kill -0 "$QB_PID" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.05; done
    kill -KILL "$QB_PID" 2>/dev/null
    wait "$QB_PID" 2>/dev/null
  fi
  if [ "$TOPICS_CREATED" -eq 1 ]; then
    bridge teardown >/dev/null 2>"$WORK/teardown.err" \
      || say "WARNING: could not delete the topics $KAFKA_IN_TOPIC, $KAFKA_OUT_TOPIC or the group $KAFKA_GROUP: $(tail -n 3 "$WORK/teardown.err")"
  fi
  if [ "$DB_CREATED" -eq 1 ]; then
    psql_admin -c "DROP DATABASE IF EXISTS \"$DB\" WITH (FORCE)" || say "WARNING: could not drop the database $DB"
  fi
  if [ "${KEEP:-0}" = 1 ]; then say "kept $WORK"; else rm -rf "$WORK"; fi
  if [ "$status" -eq 0 ]; then
    say "PASS in $(($(now_ms) - STARTED_AT_MS)) ms"
  else
    say "FAILED (exit $status) after $(($(now_ms) - STARTED_AT_MS)) ms"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_for SECONDS WHAT COMMAND...: runs COMMAND until it succeeds; fails naming WHAT at the deadline.
wait_for() {
  local seconds=$1 what=$2
  shift 2
  local deadline=$(($(now_ms) + seconds * 1000))
  until "$@" >/dev/null 2>&1; do
    [ -z "$QB_PID" ] || kill -0 "$QB_PID" 2>/dev/null || fail "QueueBox exited while waiting for $what"
    [ "$(now_ms)" -lt "$deadline" ] || fail "$what: not within ${seconds}s"
    sleep 0.1
  done
}
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ---------------------------------------------------------------------------------------------
say "database $DB, topics $KAFKA_IN_TOPIC and $KAFKA_OUT_TOPIC, group $KAFKA_GROUP"

psql_admin -c "CREATE DATABASE \"$DB\""
DB_CREATED=1
TOPICS_CREATED=1
bridge setup >"$WORK/setup.txt" || fail "bridge.py setup failed: $(cat "$WORK/setup.txt")"
say "topics created"

PORT=$(free_port)
env \
  QUEUEBOX_DATABASE_URL="jdbc:postgresql://$PG_HOST:$PG_PORT/$DB" \
  QUEUEBOX_DATABASE_USERNAME="$PG_USER" \
  QUEUEBOX_DATABASE_PASSWORD="$PG_PASSWORD" \
  QUEUEBOX_SERVER_HTTPPORT="$PORT" \
  QUEUEBOX_SOURCES_ORDERS_TOPICS_0="$KAFKA_IN_TOPIC" \
  QUEUEBOX_SOURCES_ORDERS_GROUPID="$KAFKA_GROUP" \
  QUEUEBOX_DESTINATIONS_PROCESSED_TOPIC="$KAFKA_OUT_TOPIC" \
  NO_COLOR=1 \
  "$QB_BIN" --config "$HERE/queuebox.yml" serve >"$LOG" 2>&1 &
QB_PID=$!

ready_with_source() { curl -fsS "http://127.0.0.1:$PORT/health/ready" | grep -qE '"kafka\.orders":\{"status":"up"'; }
wait_for "$DEADLINE_S" "QueueBox ready with kafka.orders up on port $PORT" ready_with_source
say "QueueBox ready, kafka.orders up"

bridge send 3 >"$WORK/send.txt" || fail "bridge.py send failed: $(cat "$WORK/send.txt")"
say "$(cat "$WORK/send.txt")"
bridge receive 3 >"$WORK/received.txt" || fail "bridge.py receive: $(tail -n 1 "$WORK/received.txt")"
say "received:"
cat "$WORK/received.txt" >&2

# The database's view: 3 orders stored once each, the non-JSON record dead, 3 rows relayed and sent.
all_sent() { [ "$(sql_value "SELECT count(*) FILTER (WHERE state = 'sent') || '/' || count(*) FROM outbox")" = "3/3" ]; }
wait_for "$DEADLINE_S" "3 of 3 outbox rows sent" all_sent
inbox=$(sql_value "SELECT string_agg(state || ':' || n, ' ' ORDER BY state) FROM (SELECT state, count(*) n FROM inbox GROUP BY state) s")
[ "$inbox" = "dead:1 processed:3" ] || fail "the inbox holds '$inbox', expected 3 processed rows and 1 dead one"
dead_reason=$(sql_value "SELECT coalesce(last_error, '') FROM inbox WHERE state = 'dead'")
say "inbox: $inbox (dead: $dead_reason)"

# Every received record: the customer as key, the outbox row id, the relay's and the static headers,
# checked against the tables in one statement.
values=$(sed -n 's/.* key=\([^ ]*\) x-message-id=\([^ ]*\) .* x-idempotency-key=\([^ ]*\) x-bridge=\([^ ]*\) .*/('"'"'\1'"'"','"'"'\2'"'"','"'"'\3'"'"','"'"'\4'"'"')/p' "$WORK/received.txt" | paste -sd,)
[ -n "$values" ] || fail "no record in $WORK/received.txt has the expected fields"
matched=$(sql_value "SELECT count(*) FROM (VALUES $values) r(key, id, idem, bridge)
  JOIN outbox o ON o.id::text = r.id AND o.key = r.key AND o.state = 'sent'
  JOIN inbox i ON i.idempotency_key = r.idem AND i.aggregate_id = r.key
  WHERE r.bridge = 'queuebox-example'")
[ "$matched" = 3 ] || fail "$matched of the 3 received records match a sent outbox row (id, key), its inbox row (idempotency key, aggregate) and carry x-bridge=queuebox-example"

# Nothing was published twice (the processed topic ends at 3 records), and the group committed past
# every record of the incoming topic, the dead one included (librdkafka commits every second).
all_committed() { bridge offsets "$KAFKA_GROUP" >"$WORK/offsets.txt" && [ "$(cat "$WORK/offsets.txt")" = "in_end=7 committed=7 out_end=3" ]; }
commit_deadline=$(($(now_ms) + 10000))
until all_committed; do
  [ "$(sed -n 's/.*out_end=\([0-9]*\).*/\1/p' "$WORK/offsets.txt")" = 3 ] || fail "offsets: $(cat "$WORK/offsets.txt"): the processed topic should hold exactly 3 records"
  [ "$(now_ms)" -lt "$commit_deadline" ] || fail "the group $KAFKA_GROUP did not commit all 7 records within 10 s: $(cat "$WORK/offsets.txt")"
  sleep 0.2
done
say "group $KAFKA_GROUP: $(cat "$WORK/offsets.txt")"
