#!/usr/bin/env bash
# The database's own outbox-cycle ceiling (no network, no publisher), per the shared limit README:
# schema.sql + cycle.sql, 300,000 rows each with its own key, then pgbench -c CLIENTS -j CLIENTS -T 10
# -f cycle.pgbench. Reloads the table before each of RUNS runs (default 3). Messages/s = cycles/s x 100.
#   bench/run-db-cycle.sh [RUNS] [CLIENTS]      (LIMIT_DIR: where schema.sql, cycle.sql, cycle.pgbench are)
source "$(dirname "$0")/lib.sh"
RUNS=${1:-3}; CLIENTS=${2:-4}
LIMIT_DIR=${LIMIT_DIR:-/work/shared/bench/limit}
db=qb_bench_limit_$$
new_db "$db"
psql -X -q -v ON_ERROR_STOP=1 -d "$db" -f "$LIMIT_DIR/schema.sql" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -d "$db" -f "$LIMIT_DIR/cycle.sql" >/dev/null
vals=()
for run in $(seq 1 "$RUNS"); do
  sql "$db" "TRUNCATE outbox"
  sql "$db" "INSERT INTO outbox (topic,key,payload) SELECT 'order.created','key-'||g,'{}' FROM generate_series(1,300000) g"
  sql "$db" "VACUUM ANALYZE outbox"
  tps=$(pgbench -n -c "$CLIENTS" -j "$CLIENTS" -T 10 -f "$LIMIT_DIR/cycle.pgbench" "$db" 2>&1 | sed -n 's/^tps = \([0-9.]*\).*/\1/p' | head -1)
  sent=$(sql "$db" "SELECT count(*) FROM outbox WHERE state = 'sent'")
  echo "db-cycle run=$run clients=$CLIENTS cycles_per_s=$tps msgs_per_s=$(echo "$tps * 100" | bc | cut -d. -f1) rows_sent_in_10s=$sent"
  vals+=("$tps")
done
printf '%s\n' "${vals[@]}" | sort -n | awk -v c="$CLIENTS" '{a[NR]=$1} END{m=a[int((NR+1)/2)]; printf "db-cycle clients=%s runs=%d median_cycles_per_s=%s median_msgs_per_s=%d\n", c, NR, m, m*100}'
