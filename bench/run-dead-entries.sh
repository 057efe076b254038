#!/usr/bin/env bash
# How the claim's cost depends on delivered rows that VACUUM has not yet removed.
#   bench/run-dead-entries.sh [ROWS]     (default 100000)
# Loads ROWS rows of one key ("hot") and ROWS rows without a key, times both claim statements
# (EXPLAIN ANALYZE, rolled back, claim-explain.sh), marks all but the last 10 hot rows and the last 1,000
# unkeyed rows 'sent' (as delivery does: an UPDATE, so their entries stay in the partial indexes until
# VACUUM), times the claims again, then VACUUMs and times them a third time.
source "$(dirname "$0")/lib.sh"
ROWS=${1:-100000}
need_bins
db=qb_bench_dead_$$; new_db "$db"; migrate "$db"
sql "$db" "INSERT INTO outbox (topic,key,payload) SELECT 'order.created','hot',jsonb_build_object('g',g) FROM generate_series(1,$ROWS) g"
sql "$db" "INSERT INTO outbox (topic,key,payload) SELECT 'order.created',NULL,jsonb_build_object('g',g) FROM generate_series(1,$ROWS) g"
sql "$db" "ANALYZE outbox"
times() {
  echo "$1: $(REPEAT=${REPEAT:-10} "$BENCH_DIR/claim-explain.sh" "$db" keyed '' 100 2000 | tr '\n' ' ')"
  echo "$1: $(REPEAT=${REPEAT:-10} "$BENCH_DIR/claim-explain.sh" "$db" unkeyed 100 | tr '\n' ' ')"
}
times "fresh ($ROWS pending hot rows + $ROWS pending unkeyed rows)"
sql "$db" "UPDATE outbox SET state='sent' WHERE key='hot' AND sequence < (SELECT max(sequence) - 10 FROM outbox WHERE key='hot')"
sql "$db" "UPDATE outbox SET state='sent' WHERE key IS NULL AND sequence < (SELECT max(sequence) - 1000 FROM outbox WHERE key IS NULL)"
times "after marking all but 10 hot / 1000 unkeyed rows sent, before VACUUM"
sql "$db" "VACUUM outbox"
times "after VACUUM"
