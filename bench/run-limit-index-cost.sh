#!/usr/bin/env bash
# What one index costs the database's own outbox cycle (issue 36's "six indexes" lever): the
# claim + fenced finish of ../shared/bench/limit, in a database with its documented schema and in one
# where DROP_INDEX is dropped, interleaved round by round (odd rounds with-then-without, even rounds
# the other way). Every run starts from the same fresh backlog of FILL rows, vacuumed, after a
# CHECKPOINT, and runs a fixed number of cycles that never drains the backlog (so no empty cycle
# inflates the rate).
#
#   bench/run-limit-index-cost.sh [ROUNDS]            (default 3)
#
# Environment: DROP_INDEX (default idx_outbox_topic), FILL (300000), KEYS (unset: every row its own
# key, as the limit page fills it; a number: the FILL rows spread round robin over KEYS keys, so a
# key's rows wait behind its head as in run-delivery.sh's keyed scenarios), CLIENTS (4), CYCLES per client
# (700: 2,800 cycles of 100 rows), LIMIT_DIR (default ../shared/bench/limit), PGHOST/PGUSER/
# PGPASSWORD for a role that may create databases (default queuebox on 127.0.0.1); the CHECKPOINT
# runs as the postgres OS user through its socket.
set -euo pipefail
ROUNDS=${1:-3}
DROP_INDEX=${DROP_INDEX:-idx_outbox_topic}
FILL=${FILL:-300000}
KEYS=${KEYS:-}
key_expr="'key-'||g"; [ -n "$KEYS" ] && key_expr="'key-'||(g % $KEYS)"
CLIENTS=${CLIENTS:-4}
CYCLES=${CYCLES:-700}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LIMIT_DIR=${LIMIT_DIR:-$REPO/../shared/bench/limit}
export PGHOST=${PGHOST:-127.0.0.1} PGUSER=${PGUSER:-queuebox} PGPASSWORD=${PGPASSWORD:-queuebox}

checkpoint() { env -u PGHOST -u PGUSER -u PGPASSWORD runuser -u postgres -- psql -X -q -c CHECKPOINT; }

for v in with without; do
  psql -X -q -d postgres -c "DROP DATABASE IF EXISTS qblim_$v" -c "CREATE DATABASE qblim_$v" 2>/dev/null
  psql -X -q -d "qblim_$v" -f "$LIMIT_DIR/schema.sql" >/dev/null 2>&1
  psql -X -q -d "qblim_$v" -f "$LIMIT_DIR/cycle.sql" >/dev/null
  psql -X -q -d "qblim_$v" -c "ALTER DATABASE qblim_$v SET jit = off"
done
psql -X -q -d qblim_without -c "DROP INDEX $DROP_INDEX"
echo "# limit cycle with and without $DROP_INDEX $(date -u +%FT%TZ) machine=$(nproc)cpu load=$(cut -d' ' -f1-3 /proc/loadavg) fill=$FILL keys=${KEYS:-$FILL} clients=$CLIENTS cycles=$CYCLES batch=100"
for round in $(seq 1 "$ROUNDS"); do
  order="with without"; [ $((round % 2)) -eq 0 ] && order="without with"
  for v in $order; do
    psql -X -q -d "qblim_$v" -c "TRUNCATE outbox" \
      -c "INSERT INTO outbox (topic,key,payload) SELECT 'order.created',$key_expr,'{}' FROM generate_series(1,$FILL) g" \
      -c "VACUUM ANALYZE outbox"
    checkpoint
    tps=$(pgbench -n -c "$CLIENTS" -j "$CLIENTS" -t "$CYCLES" -f "$LIMIT_DIR/cycle.pgbench" "qblim_$v" 2>/dev/null | awk '/^tps/ {printf "%.0f", $3}')
    sent=$(psql -X -Atq -d "qblim_$v" -c "SELECT count(*) FROM outbox WHERE state = 'sent'")
    echo "round=$round variant=$v cycles_per_s=$tps msg_per_s=$((tps * 100)) sent=$sent"
  done
done
for v in with without; do psql -X -q -d postgres -c "DROP DATABASE IF EXISTS qblim_$v"; done
