#!/usr/bin/env bash
# Relay: inbox rows forwarded into the outbox a second, from a backlog of pending push rows.
#
#   bench/inbox/run-relay.sh [RUNS] [SCENARIOS...]
#
# Scenarios (default: agg1000 null):
#   agg1000    aggregate_id over 1,000 aggregates, round robin in insert order (a-0, a-1, ... a-999, a-0, ...)
#   null       every aggregate_id NULL (no order constraint)
#   block1000  1,000 aggregates, each one's rows consecutive in insert order (ROWS/1000 in a row)
# Environment: ROWS (100000), RUN_TIMEOUT (120 s a run), RELAY_BATCH (inbox.relay.batchSize, 100),
# RELAY_POLL (inbox.relay.pollIntervalMs, 100), POOL (10), SCHEMA_SQL (lib.sh's migrate).
#
# The backlog is written once per scenario into a template database (INSERT ... SELECT
# generate_series, consumption 'push', created_at increasing with the insert order, VACUUM ANALYZE)
# while QueueBox is stopped. Each run copies the template, starts QueueBox with the relay on, one
# push source `bench` and no route (the outbox rows go dead on the dispatcher side: expected), and
# waits until no pending or processing inbox row is left. The rate is
# (rows - 1) / (last processed_at - first processed_at), from the database's clock, so start-up is
# not in it; `wall_s` is start of QueueBox to the empty check (0.2 s polls). `qb_cpu_s` is the CPU
# time (user + system) of the QueueBox process, `pg_cpu_s` that of its database backends, both from
# start to the empty check; `cpu_ms_per_krow` is their sum per 1,000 rows.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${1:-3}
shift || true
SCENARIOS=${*:-agg1000 null}
ROWS=${ROWS:-100000}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
need_qb

agg_expr() {
  case $1 in
    agg1000) echo "'a-' || (i % 1000)" ;;
    null) echo "NULL" ;;
    block1000) echo "'a-' || ((i - 1) / GREATEST($ROWS / 1000, 1))" ;;
    *) die "unknown scenario $1" ;;
  esac
}

RES=$WORK/relay.txt
: >"$RES"
for scenario in $SCENARIOS; do
  TPL=qb_bench4_relay_tpl
  new_db "$TPL"
  migrate "$TPL"
  sql "$TPL" "INSERT INTO inbox (id, source, idempotency_key, aggregate_id, event_type, payload, headers, consumption, created_at)
              SELECT gen_random_uuid(), 'bench', 'k-' || i, $(agg_expr "$scenario"), 'created',
                     jsonb_build_object('id', 'k-' || i, 'type', 'created',
                                        'data', jsonb_build_object('amount', 1234, 'currency', 'EUR')),
                     '{}'::jsonb, 'push', now() - ($ROWS - i) * interval '1 microsecond'
                FROM generate_series(1, $ROWS) AS i" >/dev/null
  sql "$TPL" "VACUUM ANALYZE inbox" >/dev/null
  log "scenario $scenario: $ROWS pending push rows in the template"
  for run in $(seq 1 "$RUNS"); do
    DB=qb_bench4_relay
    new_db "$DB" "$TPL"
    t0=$(date +%s.%N)
    start_queuebox "$DB" true
    deadline=$(( $(date +%s) + RUN_TIMEOUT ))
    left=1
    while [ "$(date +%s)" -lt "$deadline" ]; do
      left=$(sql "$DB" "SELECT count(*) FROM (SELECT 1 FROM inbox WHERE state IN ('pending', 'processing') LIMIT 1) s")
      [ "$left" = 0 ] && break
      sleep 0.2
    done
    t1=$(date +%s.%N)
    # CPU of QueueBox and of its database backends over the run (the pool keeps its connections).
    qb_cpu=$(cpu_seconds "$QB_PID")
    # shellcheck disable=SC2046
    pg_cpu=$(cpu_seconds $(db_backend_pids "$DB"))
    stop_queuebox
    read -r processed dead pending rate <<<"$(sql "$DB" "SELECT count(*) FILTER (WHERE state = 'processed'),
        count(*) FILTER (WHERE state = 'dead'), count(*) FILTER (WHERE state IN ('pending', 'processing')),
        round(((count(*) FILTER (WHERE state = 'processed')) - 1)
              / NULLIF(extract(epoch FROM max(processed_at) - min(processed_at)), 0))
        FROM inbox" | tr '|' ' ')"
    outbox=$(sql "$DB" "SELECT count(*) FROM outbox")
    wall=$(echo "$t1 - $t0" | bc)
    timed_out=$([ "$left" = 0 ] && echo no || echo yes)
    echo "run=$run scenario=$scenario rows=$ROWS rate=$rate processed=$processed dead=$dead left=$pending outbox_rows=$outbox wall_s=$wall qb_cpu_s=$qb_cpu pg_cpu_s=$pg_cpu cpu_ms_per_krow=$(echo "scale=1; ($qb_cpu + $pg_cpu) * 1000000 / $ROWS" | bc) timed_out=$timed_out" | tee -a "$RES"
    drop_db "$DB"
  done
  drop_db "$TPL"
done

echo "# medians of $RUNS runs, $ROWS rows, relay batch ${RELAY_BATCH:-100}, poll ${RELAY_POLL:-100} ms, pool $POOL"
for scenario in $SCENARIOS; do
  echo "median scenario=$scenario rate=$(grep " scenario=$scenario " "$RES" | tr ' ' '\n' | sed -n 's/^rate=//p' | median)"
done
