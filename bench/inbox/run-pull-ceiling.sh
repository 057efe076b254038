#!/usr/bin/env bash
# Pull ceiling: the database's own rate for the pull contract on this machine, with no Rust client.
# pgbench runs, per claim, the statements and round trips the Rust client (clients/rust) runs with
# a no-op handler, over the same data set as run-pull.sh, in pgbench's prepared mode (extended
# protocol, each statement prepared once per connection, like sqlx's statement cache):
#
#   one claim transaction:   BEGIN / the claim of examples/pull/sql/postgresql/claim.sql / COMMIT
#                            (three round trips, as the client; the generic plan comes from
#                            PGOPTIONS and the claim turns synchronous_commit off for its own
#                            transaction with set_config, where the client sends SET LOCAL with its
#                            BEGIN: prepared mode cannot send two statements in one message)
#   then for each claimed row: BEGIN / fenced completion (complete.sql) / COMMIT,
#                            three round trips and one WAL flush, as the client does.
#
# With COMPLETION=one_trip each row instead sends its completion, in a form that fails when it
# finds no row, with the COMMIT in one message (BEGIN still separate). That needs pgbench's simple
# mode: the claim is then prepared with PREPARE and run with EXECUTE, and the completion is planned
# from its text on every call, as a client sending it as a simple query would see.
#
# pgbench can keep only one result row in variables (\gset), so the claim's RETURNING rows are
# folded into two arrays (ids and tokens, in claim order) by an outer SELECT over the claim, which
# stays a data-modifying CTE of the same statement; the outer SELECT also serialises every claimed
# row to JSON once (the client decodes every column). Completion k binds the k-th id and token of
# those arrays; a claim that came back short (concurrent claims skip each other's locked rows)
# completes only the rows it got. No lease renewal runs (the client renews every 10 s of a 30 s
# lease; a no-op handler run is far shorter), and nothing stands for the pool's pings. pgbench is
# one C thread driving CLIENTS connections, so the client side costs little (its CPU is printed).
#
#   bench/inbox/run-pull-ceiling.sh [RUNS=3] [BATCHES="10 25"]
#
# Environment: ROWS (50000), CLIENTS (4), COMPLETION (three_trips | one_trip), PER_STATEMENT (set:
# pgbench -r, the mean latency of each command, printed on stderr). Each run copies a template
# built as run-pull.sh builds it (scenario agg1000) and runs as many pgbench transactions (claims)
# as would take 96 % of ROWS if every claim came back full, then counts the processed rows.
# Printed: rows/s = processed rows / pgbench's run time (claims / its tps without connection
# time), the pgbench process's CPU and the whole machine's CPU per row (user + system + irq from
# /proc/stat; on a quiet machine PostgreSQL is almost all of the rest).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${1:-3}
BATCHES=${2:-10 25}
ROWS=${ROWS:-50000}
CLIENTS=${CLIENTS:-4}
COMPLETION=${COMPLETION:-three_trips}
need_qb

# The claim, comments stripped, its final UPDATE ... RETURNING turned into the CTE `claimed`, as the
# body of `PREPARE claim(text, int, bigint, int)`.
claim_sql() {
  echo "PREPARE claim(text, int, bigint, int) AS"
  sed -e 's/--.*$//' "$REPO_DIR/examples/pull/sql/postgresql/claim.sql" | grep -v '^[[:space:]]*$' |
    sed -e 's/^UPDATE inbox t$/, claimed AS (UPDATE inbox t/' -e 's/t\.created_at;$/t.created_at)/' \
        -e 's/CAST(:source AS text)/CAST($1 AS text)/g; s/CAST(:batch AS int)/CAST($2 AS int)/g' \
        -e 's/CAST(:lease_ms AS bigint)/CAST($3 AS bigint)/g; s/CAST(:cand_limit AS int)/CAST($4 AS int)/g'
  echo "SELECT coalesce(array_agg(id ORDER BY created_at, id)::text, '{}') AS ids,"
  echo "       coalesce(array_agg(claim_token ORDER BY created_at, id)::text, '{}') AS toks,"
  echo "       coalesce(length(json_agg(claimed)::text), 0) AS bytes, count(*) AS n"
  echo "  FROM claimed;"
}

# COMPLETION=one_trip: the worker's completion (clients/rust/src/sql.rs COMPLETE_OR_FAIL: the fenced
# update that fails its statement when it finds no row) for the k-th claimed row, written out in
# full on one line (the worker sends it as a simple query, planned on every call), then COMMIT,
# in one message.
complete_or_fail_line() {
  local id="(CAST(':ids' AS uuid[]))[$1]" token="(CAST(':toks' AS uuid[]))[$1]"
  printf '%s' "WITH done AS (UPDATE inbox SET state = 'processed', processed_at = now(), claim_token = NULL, lease_expires_at = NULL"
  printf '%s' " WHERE id = $id AND claim_token = $token AND state || '' = 'processing' AND lease_expires_at > now() RETURNING 1)"
  printf '%s' " SELECT CASE WHEN count(*) = 1 THEN 1 ELSE CAST('queuebox-inbox: claim lost, the completion found no row for message '"
  printf '%s' " || CAST($id AS text) || ' under its claim token (' || count(*) || ' rows)' AS int) END AS completed FROM done"
  echo ' \; COMMIT;'
}

# COMPLETION=three_trips, pgbench's prepared mode (extended protocol, each command prepared once
# per connection, as the client's cached statements): the claim's parameters are pgbench
# variables, the claim transaction is BEGIN / claim / COMMIT (three round trips, as the client's),
# plan_cache_mode comes from PGOPTIONS and the claim sets synchronous_commit = off for its own
# transaction with set_config (prepared mode cannot send the client's compound BEGIN; SET LOCAL).
write_prepared_script() {
  local batch=$1 file=$2 k
  {
    echo "\\set batch $batch"
    echo "\\set lease_ms 30000"
    echo "\\set cand_limit $(( batch * 3 < 50 ? 50 : (batch * 3 > 500 ? 500 : batch * 3) ))"
    echo 'BEGIN;'
    claim_sql | sed -e '1d' -e 's/CAST(\$1 AS text)/CAST(:source AS text)/g; s/CAST(\$2 AS int)/CAST(:batch AS int)/g' \
      -e 's/CAST(\$3 AS bigint)/CAST(:lease_ms AS bigint)/g; s/CAST(\$4 AS int)/CAST(:cand_limit AS int)/g' \
      -e "s/count(\*) AS n\$/count(*) AS n, set_config('synchronous_commit', 'off', true) AS sync/"
    echo '\gset'
    echo 'COMMIT;'
    for k in $(seq 1 "$batch"); do
      echo "\\if :n >= $k"
      echo 'BEGIN;'
      sed -e 's/--.*$//' "$REPO_DIR/examples/pull/sql/postgresql/complete.sql" | grep -v '^[[:space:]]*$' |
        sed -e "s/CAST(:id AS uuid)/(CAST(:ids AS uuid[]))[$k]/; s/CAST(:token AS uuid)/(CAST(:toks AS uuid[]))[$k]/"
      echo 'COMMIT;'
      echo '\endif'
    done
  } >"$file"
}

# COMPLETION=one_trip, pgbench's simple mode (the only mode that sends a compound command as one
# message): the claim is prepared once per connection (the first transaction of each client) and
# run with EXECUTE after the client's own BEGIN; SET LOCAL ... message; each row then sends BEGIN,
# and its completion with the COMMIT in one message.
write_one_trip_script() {
  local batch=$1 file=$2 k
  {
    echo '\if :prepared = 0'
    claim_sql
    echo '\set prepared 1'
    echo '\endif'
    echo 'BEGIN \; SET LOCAL plan_cache_mode = force_generic_plan \; SET LOCAL synchronous_commit = off;'
    echo "EXECUTE claim('bench', $batch, 30000, $(( batch * 3 < 50 ? 50 : (batch * 3 > 500 ? 500 : batch * 3) )));"
    echo '\gset'
    echo 'COMMIT;'
    for k in $(seq 1 "$batch"); do
      # A claim may come back short (rows that another claim locked are skipped); the client
      # then has fewer rows to complete, and so has this script.
      echo "\\if :n >= $k"
      echo 'BEGIN;'
      complete_or_fail_line "$k"
      echo '\endif'
    done
  } >"$file"
}

cpu_jiffies() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }

TPL=qb_bench4_ceiling_tpl
new_db "$TPL"
migrate "$TPL"
psql -X -q -v ON_ERROR_STOP=1 -d "$TPL" -f "$REPO_DIR/examples/pull/sql/postgresql/recommended_indexes.sql" >/dev/null
sql "$TPL" "INSERT INTO inbox (id, source, idempotency_key, aggregate_id, event_type, payload, headers, consumption, created_at, scheduled_at)
            SELECT gen_random_uuid(), 'bench', 'k-' || i, 'a-' || (i % 1000), 'created',
                   jsonb_build_object('id', 'k-' || i, 'type', 'created',
                                      'data', jsonb_build_object('amount', 1234, 'currency', 'EUR')),
                   '{}'::jsonb, 'pull', now() - ($ROWS - i) * interval '1 microsecond',
                   now() - ($ROWS - i) * interval '1 microsecond'
              FROM generate_series(1, $ROWS) AS i" >/dev/null
sql "$TPL" "VACUUM ANALYZE inbox" >/dev/null
log "agg1000: $ROWS pending pull rows in the template"

RES=$WORK/ceiling.txt
: >"$RES"
tick=$(getconf CLK_TCK)
for run in $(seq 1 "$RUNS"); do
  for batch in $BATCHES; do
    script=$WORK/pull-$batch.sql
    if [ "$COMPLETION" = one_trip ]; then
      write_one_trip_script "$batch" "$script"
      mode=(-M simple -D prepared=0)
    else
      write_prepared_script "$batch" "$script"
      mode=(-M prepared -D source=bench)
    fi
    per_client=$(( ROWS * 96 / 100 / batch / CLIENTS ))
    DB=qb_bench4_ceiling
    new_db "$DB" "$TPL"
    cpu0=$(cpu_jiffies)
    PGOPTIONS="-c plan_cache_mode=force_generic_plan" /usr/bin/time -f '%U %S' -o "$WORK/time.txt" \
      pgbench -n "${mode[@]}" -c "$CLIENTS" -j 1 -t "$per_client" ${PER_STATEMENT:+-r} -f "$script" "$DB" >"$WORK/pgbench.txt" 2>&1 ||
      { cat "$WORK/pgbench.txt" >&2; die "pgbench failed"; }
    cpu1=$(cpu_jiffies)
    # PER_STATEMENT=1: pgbench's mean latency of each command, on stderr.
    [ -z "${PER_STATEMENT:-}" ] || sed -n '/statement latencies/,$p' "$WORK/pgbench.txt" | cut -c1-160 >&2
    tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$WORK/pgbench.txt")
    processed=$(sql "$DB" "SELECT count(*) FROM inbox WHERE state = 'processed'")
    claims=$(( per_client * CLIENTS ))
    # Run time from pgbench's own tps, so connection set-up is not in it.
    secs=$(echo "scale=4; $claims / $tps" | bc)
    rate=$(echo "scale=0; $processed / $secs" | bc)
    pgb_us=$(awk -v n="$processed" '{printf "%.0f", ($1 + $2) * 1e6 / n}' "$WORK/time.txt")
    all_us=$(echo "scale=0; ($cpu1 - $cpu0) * 1000000 / $tick / $processed" | bc)
    echo "run=$run scenario=agg1000 clients=$CLIENTS batch=$batch completion=$COMPLETION claims=$claims processed=$processed expected=$(( claims * batch )) secs=$secs rate=$rate pgbench_us_per_row=$pgb_us machine_us_per_row=$all_us" | tee -a "$RES"
    drop_db "$DB"
  done
done
drop_db "$TPL"

echo "# medians of $RUNS runs, $ROWS rows, $CLIENTS clients, completion $COMPLETION"
for batch in $BATCHES; do
  lines=$(grep " batch=$batch " "$RES" || true)
  pick() { tr ' ' '\n' <<<"$lines" | sed -n "s/^$1=//p" | median; }
  echo "median ceiling batch=$batch completion=$COMPLETION rate=$(pick rate) machine_us_per_row=$(pick machine_us_per_row) pgbench_us_per_row=$(pick pgbench_us_per_row)"
done
