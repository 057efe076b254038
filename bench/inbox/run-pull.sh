#!/usr/bin/env bash
# Pull: rows claimed and completed a second on one source by WORKERS workers of the Rust pull
# client (clients/rust) with a no-op handler (pullbench/).
#
#   bench/inbox/run-pull.sh [RUNS] [SCENARIOS...]
#
# Scenarios (default: agg1000 null): agg1000 = aggregate_id over 1,000 aggregates round robin;
# null = every aggregate_id NULL. Environment: ROWS (50000), WORKERS (4), CONFIGS (one run set per
# BATCH:CONCURRENCY pair, the batch_size and max_concurrency of each worker: "10:1 10:10 25:25";
# 10:1 are the client's defaults; since 2026-11-30 16:20 a claim takes a whole batch and the rows
# beyond the free slots wait in the worker), RUN_TIMEOUT (120 s a run: a run that has not handled
# ROWS by then reports the rate of the rows it handled), TEST_BEFORE_ACQUIRE (true: the sqlx pool pings
# every connection it hands out, as by default; false saves that round trip per handled row).
#
# The rows are written once per scenario into a template database (the QueueBox migrations plus
# examples/pull/sql/postgresql/recommended_indexes.sql, INSERT ... SELECT, consumption 'pull',
# VACUUM ANALYZE); each run copies it and runs the bench binary until it handled ROWS rows. The
# rate is (ROWS - 1) / (time of the last handler call - time of the first), on the bench's clock.
# QueueBox itself is not running: the pull side is the client and the database only.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${1:-3}
shift || true
SCENARIOS=${*:-agg1000 null}
ROWS=${ROWS:-50000}
WORKERS=${WORKERS:-4}
CONFIGS=${CONFIGS:-10:1 10:10 25:25}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
TEST_BEFORE_ACQUIRE=${TEST_BEFORE_ACQUIRE:-true}
need_qb
# Always through cargo (not build_tool), so that a change of clients/rust is in the binary.
(cd "$INBOX_BENCH_DIR/pullbench" && CARGO_TARGET_DIR=$BENCH4_TARGET cargo build --release -q) || die "build of pullbench failed"

agg_expr() {
  case $1 in
    agg1000) echo "'a-' || (i % 1000)" ;;
    null) echo "NULL" ;;
    *) die "unknown scenario $1" ;;
  esac
}

RES=$WORK/pull.txt
: >"$RES"
for scenario in $SCENARIOS; do
  TPL=qb_bench4_pull_tpl
  new_db "$TPL"
  migrate "$TPL"
  psql -X -q -v ON_ERROR_STOP=1 -d "$TPL" -f "$REPO_DIR/examples/pull/sql/postgresql/recommended_indexes.sql" >/dev/null
  sql "$TPL" "INSERT INTO inbox (id, source, idempotency_key, aggregate_id, event_type, payload, headers, consumption, created_at, scheduled_at)
              SELECT gen_random_uuid(), 'bench', 'k-' || i, $(agg_expr "$scenario"), 'created',
                     jsonb_build_object('id', 'k-' || i, 'type', 'created',
                                        'data', jsonb_build_object('amount', 1234, 'currency', 'EUR')),
                     '{}'::jsonb, 'pull', now() - ($ROWS - i) * interval '1 microsecond',
                     now() - ($ROWS - i) * interval '1 microsecond'
                FROM generate_series(1, $ROWS) AS i" >/dev/null
  sql "$TPL" "VACUUM ANALYZE inbox" >/dev/null
  log "scenario $scenario: $ROWS pending pull rows in the template"
  for run in $(seq 1 "$RUNS"); do
    for config in $CONFIGS; do
      batch=${config%%:*} conc=${config##*:}
      DB=qb_bench4_pull
      new_db "$DB" "$TPL"
      line=$(timeout $((RUN_TIMEOUT + 30)) "$PULLBENCH_BIN" --url "postgres://$PGUSER:$PGPASSWORD@$PGHOST:$PGPORT/$DB" \
        --source bench --expect "$ROWS" --workers "$WORKERS" --batch "$batch" --concurrency "$conc" \
        --timeout "$RUN_TIMEOUT" --test-before-acquire "$TEST_BEFORE_ACQUIRE" 2>"$WORK/pullbench.log" | grep -E '^(handled|cpu)' | tr '\n' ' ' || echo "handled=0 rate=0 failed=yes")
      echo "run=$run scenario=$scenario workers=$WORKERS batch=$batch concurrency=$conc test_before_acquire=$TEST_BEFORE_ACQUIRE $line" | tee -a "$RES"
      drop_db "$DB"
    done
  done
  drop_db "$TPL"
done

echo "# medians of $RUNS runs, $ROWS rows, $WORKERS workers"
for scenario in $SCENARIOS; do
  for config in $CONFIGS; do
    batch=${config%%:*} conc=${config##*:}
    lines=$(grep " scenario=$scenario .* batch=$batch concurrency=$conc " "$RES" || true)
    pick() { tr ' ' '\n' <<<"$lines" | sed -n "s/^$1=//p" | median; }
    echo "median scenario=$scenario batch=$batch concurrency=$conc rate=$(pick rate) worker_us_per_row=$(pick worker_us_per_row) pg_us_per_row=$(pick pg_us_per_row)"
  done
done
