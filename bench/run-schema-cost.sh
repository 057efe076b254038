#!/usr/bin/env bash
# What a change to the outbox's indexes does to the HTTP drain (issue 36): run-delivery.sh on the
# product schema against the same schema changed by one variant's SQL (SCHEMA_SQL, run on the
# template after the migrations), interleaved: the arms in order in odd rounds, reversed in even.
#
#   bench/run-schema-cost.sh [ROUNDS] [SCENARIOS]     (default 3, "unkeyed keyed20k")
#
# ARMS (default "base before_v17"): base is the schema as migrated; the variants undo migration
# V17 (which took two indexes off every message's path) in part or whole:
#   before_v17   the V16 schema: idx_outbox_topic (every row by topic) and idx_outbox_key_sequence
#                (rows with and without a key) in place of idx_outbox_keyed_sequence
#   with_topic   base plus idx_outbox_topic
#   all_keys     base with the key index over rows without a key too
# Everything else (QB_BIN, BATCH, CONC, ...) as run-delivery.sh takes it. Prints one line per run
# and per scenario the median rate of each arm and its ratio to base.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROUNDS=${1:-3}
SCENARIOS=${2:-unkeyed keyed20k}
ARMS=${ARMS:-base before_v17}

WITH_TOPIC="CREATE INDEX idx_outbox_topic ON outbox (topic);"
ALL_KEYS="DROP INDEX idx_outbox_keyed_sequence; CREATE INDEX idx_outbox_key_sequence ON outbox (key, sequence) WHERE state IN ('pending', 'processing');"
variant_sql() {
  case $1 in
    base) echo "" ;;
    before_v17) echo "$WITH_TOPIC $ALL_KEYS" ;;
    with_topic) echo "$WITH_TOPIC" ;;
    all_keys) echo "$ALL_KEYS" ;;
    *) echo "unknown arm $1" >&2; exit 2 ;;
  esac
}

RES=$(mktemp /tmp/qb-schema-cost.XXXXXX)
trap 'rm -f "$RES"' EXIT
for round in $(seq 1 "$ROUNDS"); do
  arms=$ARMS
  [ $((round % 2)) -eq 0 ] && arms=$(echo "$ARMS" | tr ' ' '\n' | tac | tr '\n' ' ')
  for scenario in $SCENARIOS; do
    for arm in $arms; do
      line=$(SCHEMA_SQL="$(variant_sql "$arm")" bash "$BENCH_DIR/run-delivery.sh" "$scenario" 1 2>/dev/null | grep ' run=1 ')
      rate=$(sed -n 's/.* rate=\([0-9.]*\) .*/\1/p' <<<"$line")
      extra=$(grep -o 'us_per_msg_qb=[0-9]* us_per_msg_pg_rundb=[0-9]*\|wal_bytes_per_msg=[0-9]*\|duplicates=[0-9]* out_of_order=[0-9]* not_sent_after=[0-9]*' <<<"$line" | tr '\n' ' ')
      echo "round=$round scenario=$scenario arm=$arm rate=$rate $extra" | tee -a "$RES"
    done
  done
done
source "$BENCH_DIR/stats.sh"
for scenario in $SCENARIOS; do
  base=$(sed -n "s/.* scenario=$scenario arm=base rate=\([0-9.]*\) .*/\1/p" "$RES" | median)
  for arm in $ARMS; do
    value=$(sed -n "s/.* scenario=$scenario arm=$arm rate=\([0-9.]*\) .*/\1/p" "$RES" | median)
    echo "median scenario=$scenario arm=$arm rate=$value of_base=$(awk -v a="$value" -v b="$base" 'BEGIN {if (b > 0) printf "%.3f", a / b; else print "n/a"}')"
  done
done
