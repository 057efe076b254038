#!/usr/bin/env bash
# Smoke test of the Redis Streams bridge example, end to end, with the built binary and the
# services of scripts/services.sh (PostgreSQL and Redis on loopback):
#
#   eval "$(bash scripts/services.sh)"
#   CARGO_TARGET_DIR=/var/cache/queuebox-target cargo build -p queuebox   # if not built yet
#   bash examples/redis-bridge/smoke.sh
#
# It runs the example's queuebox.yml as the README does, on names of its own, and checks, each
# failure stopping the run with FAIL and a reason:
#   - the source's health component redis.orders is up;
#   - 3 orders added twice each (6 entries) and one entry that is not JSON become 3 inbox rows
#     processed by the relay plus 1 dead one; the 3 outbox rows turn `sent`;
#   - the processed stream holds exactly 3 entries, each with a sent outbox row's id as
#     x-message-id, the customer as x-message-key, the relay's x-idempotency-key and the static
#     x-bridge field;
#   - nothing is left pending in the source's group (all 7 entries acknowledged).
#
# Everything it creates has a name unique to the run (database, stream keys, port, directory) and
# is removed at exit, on failure too. KEEP=1 keeps the directory (logs).
#
# Inputs: QB_TEST_PG_URL (postgres://user:password@host:port/db, an account that may create
# databases), QB_TEST_REDIS_URL (redis://host:port) and QB_BIN (default
# /var/cache/queuebox-target/debug/queuebox).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
QB_BIN=${QB_BIN:-/var/cache/queuebox-target/debug/queuebox}
DEADLINE_S=20
STOP_DEADLINE_S=20

now_ms() { date +%s%3N; }
STARTED_AT_MS=$(now_ms)
say() { printf 'smoke: [%5d ms] %s\n' "$(($(now_ms) - STARTED_AT_MS))" "$*" >&2; }
fail() {
  printf '\nsmoke: FAIL: %s\n' "$*" >&2
  exit 1
}

[ -x "$QB_BIN" ] || fail "no QueueBox binary at $QB_BIN (build it, or set QB_BIN)"
for tool in psql curl redis-cli; do command -v "$tool" >/dev/null || fail "$tool is not installed"; done
: "${QB_TEST_PG_URL:?set it first: eval \"\$(bash scripts/services.sh)\"}"
: "${QB_TEST_REDIS_URL:?set it first: eval \"\$(bash scripts/services.sh)\"}"

url_re='^postgres(ql)?://([^:@/]+):([^@/]*)@([^:/]+):([0-9]+)/'
[[ $QB_TEST_PG_URL =~ $url_re ]] || fail "QB_TEST_PG_URL is not postgres://user:password@host:port/db"
PG_USER=${BASH_REMATCH[2]} PG_PASSWORD=${BASH_REMATCH[3]}
PG_HOST=${BASH_REMATCH[4]} PG_PORT=${BASH_REMATCH[5]}
redis_re='^redis://([^:/]+):([0-9]+)/?$'
[[ $QB_TEST_REDIS_URL =~ $redis_re ]] || fail "QB_TEST_REDIS_URL is not redis://host:port"
REDIS_HOST=${BASH_REMATCH[1]} REDIS_PORT=${BASH_REMATCH[2]}

RUN="$(date +%s)_$$_${RANDOM}"
DB="qb_redis_smoke_$RUN"
IN="qb:redis-smoke:$RUN:in" OUT="qb:redis-smoke:$RUN:out"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/qb-redis-smoke.XXXXXX")
LOG="$WORK/queuebox.log"

export PGPASSWORD="$PG_PASSWORD" PGCONNECT_TIMEOUT=5
psql_admin() { psql -X -q -v ON_ERROR_STOP=1 -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d postgres "$@"; }
sql_value() { psql -X -q -v ON_ERROR_STOP=1 -h "$PG_HOST" -p "$PG_PORT" -U "$PG_USER" -d "$DB" -tA -c "$1"; }
rcli() { redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" "$@"; }

QB_PID="" DB_CREATED=0

cleanup() {
  local status=$?
  set +e
  trap - EXIT INT TERM
  if [ "$status" -ne 0 ] && [ -s "$LOG" ]; then
    say "---- last lines of queuebox.log ----"
    tail -n 25 "$LOG" >&2
    sql_value "SELECT 'inbox ' || state || ' ' || count(*) FROM inbox GROUP BY state" >&2
    sql_value "SELECT 'outbox ' || state || ' ' || count(*) || ' ' || coalesce(max(last_error), '') FROM outbox GROUP BY state" >&2
  fi
  if [ -n "$QB_PID" ]; then
    kill -TERM "$QB_PID" 2>/dev/null
    local deadline=$((SECONDS + STOP_DEADLINE_S))
    while kill -0 "$QB_PID" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.05; done
    kill -KILL "$QB_PID" 2>/dev/null
    wait "$QB_PID" 2>/dev/null
  fi
  rcli DEL "$IN" "$OUT" "$IN:dead" >/dev/null 2>&1 || say "WARNING: could not delete the streams $IN, $OUT"
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

say "database $DB, streams $IN and $OUT"
psql_admin -c "CREATE DATABASE \"$DB\""
DB_CREATED=1

PORT=$(free_port)
env \
  QUEUEBOX_DATABASE_URL="jdbc:postgresql://$PG_HOST:$PG_PORT/$DB" \
  QUEUEBOX_DATABASE_USERNAME="$PG_USER" \
  QUEUEBOX_DATABASE_PASSWORD="$PG_PASSWORD" \
  QUEUEBOX_SERVER_HTTPPORT="$PORT" \
  REDIS_URL="$QB_TEST_REDIS_URL" \
  QUEUEBOX_SOURCES_ORDERS_STREAM="$IN" \
  QUEUEBOX_SOURCES_ORDERS_CONSUMER="smoke" \
  QUEUEBOX_DESTINATIONS_PROCESSED_STREAM="$OUT" \
  NO_COLOR=1 \
  "$QB_BIN" --config "$HERE/queuebox.yml" serve >"$LOG" 2>&1 &
QB_PID=$!

ready_with_source() { curl -fsS "http://127.0.0.1:$PORT/health/ready" | grep -qE '"redis\.orders":\{"status":"up"'; }
wait_for "$DEADLINE_S" "QueueBox ready with redis.orders up on port $PORT" ready_with_source
say "QueueBox ready, redis.orders up"

for order in 1 2 3; do
  for _copy in a b; do
    rcli XADD "$IN" '*' payload "{\"orderId\":\"o-$order\",\"customerId\":\"c-$order\",\"type\":\"created\"}" >/dev/null
  done
done
rcli XADD "$IN" '*' payload 'this is not JSON' >/dev/null
say "added 3 orders twice each and one entry that is not JSON"

all_sent() { [ "$(sql_value "SELECT count(*) FILTER (WHERE state = 'sent') || '/' || count(*) FROM outbox")" = "3/3" ]; }
wait_for "$DEADLINE_S" "3 of 3 outbox rows sent" all_sent
inbox=$(sql_value "SELECT string_agg(state || ':' || n, ' ' ORDER BY state) FROM (SELECT state, count(*) n FROM inbox GROUP BY state) s")
[ "$inbox" = "dead:1 processed:3" ] || fail "the inbox holds '$inbox', expected 3 processed rows and 1 dead one"
say "inbox: $inbox"

# The processed stream, one line per entry: id, key, idempotency key, x-bridge.
length=$(rcli XLEN "$OUT")
[ "$length" = 3 ] || fail "the processed stream holds $length entries, expected 3"
rcli --no-raw XRANGE "$OUT" - + >"$WORK/processed.txt"
field_values() { awk -v name="\"$1\"" '$0 ~ name {getline; sub(/^ *[0-9]+\) /, ""); gsub(/"/, ""); print}' "$WORK/processed.txt"; }
mapfile -t ids < <(field_values x-message-id)
mapfile -t keys < <(field_values x-message-key)
mapfile -t idems < <(field_values x-idempotency-key)
mapfile -t bridges < <(field_values x-bridge)
[ "${#ids[@]}" = 3 ] && [ "${#keys[@]}" = 3 ] && [ "${#idems[@]}" = 3 ] && [ "${#bridges[@]}" = 3 ] \
  || fail "the entries lack fields: $(cat "$WORK/processed.txt")"
values=""
for i in 0 1 2; do
  values+="${values:+,}('${ids[$i]}','${keys[$i]}','${idems[$i]}','${bridges[$i]}')"
done
matched=$(sql_value "SELECT count(*) FROM (VALUES $values) r(id, key, idem, bridge)
  JOIN outbox o ON o.id::text = r.id AND o.key = r.key AND o.state = 'sent'
  JOIN inbox i ON i.idempotency_key = r.idem AND i.aggregate_id = r.key
  WHERE r.bridge = 'queuebox-example'")
[ "$matched" = 3 ] || fail "$matched of the 3 entries match a sent outbox row (id, key), its inbox row (idempotency key, aggregate) and carry x-bridge=queuebox-example"
say "the 3 processed entries match their outbox and inbox rows"

none_pending() { [ "$(rcli XPENDING "$IN" queuebox-orders | head -n 1)" = 0 ]; }
wait_for "$DEADLINE_S" "every incoming entry acknowledged" none_pending
say "nothing pending in group queuebox-orders"
