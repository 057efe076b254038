#!/usr/bin/env bash
# Planning and execution time of one pull claim (examples/pull/sql/postgresql/claim.sql) as a
# prepared statement, the way the client runs it: 12 executions of EXPLAIN (ANALYZE) EXECUTE, each
# in a transaction that rolls back, on ROWS pending pull rows over 1,000 aggregates with the
# recommended index. Prints the median planning and execution ms for batch 1 and batch 10.
# PLAN_CACHE_MODE (auto) is set for the session first: the client runs its claim with
# force_generic_plan, which plans once per connection instead of on every execution.
#
#   [PLAN_CACHE_MODE=force_generic_plan] bench/inbox/claim-plan.sh [ROWS=50000]
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ROWS=${1:-50000}
PLAN_CACHE_MODE=${PLAN_CACHE_MODE:-auto}
need_qb
DB=qb_bench4_claimplan
new_db "$DB"
migrate "$DB"
psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -f "$REPO_DIR/examples/pull/sql/postgresql/recommended_indexes.sql" >/dev/null 2>&1
sql "$DB" "INSERT INTO inbox (id, source, idempotency_key, aggregate_id, event_type, payload, headers, consumption, created_at, scheduled_at)
           SELECT gen_random_uuid(), 'bench', 'k-' || i, 'a-' || (i % 1000), 'created', '{\"id\": 1}'::jsonb, '{}'::jsonb, 'pull',
                  now() - ($ROWS - i) * interval '1 microsecond', now() - ($ROWS - i) * interval '1 microsecond'
             FROM generate_series(1, $ROWS) AS i" >/dev/null
sql "$DB" "VACUUM ANALYZE inbox" >/dev/null
sed -e 's/CAST(:source AS text)/CAST($1 AS text)/g; s/CAST(:batch AS int)/CAST($2 AS int)/g' \
    -e 's/CAST(:lease_ms AS bigint)/CAST($3 AS bigint)/g; s/CAST(:cand_limit AS int)/CAST($4 AS int)/g' \
    "$REPO_DIR/examples/pull/sql/postgresql/claim.sql" | grep -v '^--' >"$WORK/claim.sql"
for batch in 1 10; do
  cand=$(( batch * 3 > 50 ? batch * 3 : 50 ))
  {
    echo "SET plan_cache_mode = $PLAN_CACHE_MODE;"
    echo "PREPARE c(text, int, bigint, int) AS"; cat "$WORK/claim.sql"; echo ";"
    for _ in $(seq 1 12); do
      echo "BEGIN; EXPLAIN (ANALYZE, COSTS OFF) EXECUTE c('bench', $batch, 30000, $cand); ROLLBACK;"
    done
  } >"$WORK/run.sql"
  psql -X -q -d "$DB" -f "$WORK/run.sql" >"$WORK/out.txt" 2>&1
  [ -z "${SHOW_PLAN:-}" ] || sed -n "/QUERY PLAN/,/Execution Time/p" "$WORK/out.txt" | tail -n 120 >&2
  plan=$(sed -n 's/.*Planning Time: \([0-9.]*\) ms.*/\1/p' "$WORK/out.txt" | median)
  exec=$(sed -n 's/.*Execution Time: \([0-9.]*\) ms.*/\1/p' "$WORK/out.txt" | median)
  echo "claim plan_cache_mode=$PLAN_CACHE_MODE rows=$ROWS batch=$batch cand_limit=$cand planning_ms=$plan execution_ms=$exec"
done
