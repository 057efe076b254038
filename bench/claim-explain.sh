#!/usr/bin/env bash
# EXPLAIN ANALYZE of QueueBox's claim statements on an existing database, REPEAT times (default 20),
# each inside a transaction that is rolled back (nothing is claimed for real). Prints p50/p99 of the
# "Execution Time" and the buffers of the last run.
#   bench/claim-explain.sh DB keyed   [CURSOR] [LIMIT] [SCAN]   (defaults '' 100 2000; the product's SCAN_BOUND is 2000)
#   bench/claim-explain.sh DB unkeyed [LIMIT]
# The statements are the product's own files (adapters/postgres/queries/outbox_claim_*.sql) with the
# default column names filled in, as the product renders them.
source "$(dirname "$0")/lib.sh"
db=$1; kind=$2; REPEAT=${REPEAT:-20}
render() { grep -v '^\s*--' "$REPO_DIR/adapters/postgres/queries/$1" | sed -e 's/{outbox}/outbox/g' -e 's/{outbox\.\([A-Za-z]*\)}/\1/g' -e 's/\b\(scheduledAt\|createdAt\|claimToken\|claimedAt\|leaseExpiresAt\|updatedAt\|aggregateType\|maxAttempts\)\b/\L&/g' \
  | sed -e 's/scheduledat/scheduled_at/g; s/createdat/created_at/g; s/claimtoken/claim_token/g; s/claimedat/claimed_at/g; s/leaseexpiresat/lease_expires_at/g; s/updatedat/updated_at/g; s/aggregatetype/aggregate_type/g; s/maxattempts/max_attempts/g'; }
case "$kind" in
  keyed)   stmt=$(render outbox_claim_keyed.sql); params="'${3:-}', ${4:-100}, 300000, ${5:-2000}"; types="text, int, bigint, int" ;;
  unkeyed) stmt=$(render outbox_claim_unkeyed.sql); params="${3:-100}, 300000"; types="int, bigint" ;;
  *) die "kind: keyed or unkeyed" ;;
esac
times=()
for i in $(seq 1 "$REPEAT"); do
  outp=$(psql -X -q -v ON_ERROR_STOP=1 -d "$db" -At <<SQL
BEGIN;
PREPARE c($types) AS $stmt;
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE c($params);
ROLLBACK;
SQL
)
  times+=("$(echo "$outp" | sed -n 's/^Execution Time: \([0-9.]*\) ms/\1/p')")
  last=$outp
done
[ -n "${VERBOSE:-}" ] && echo "$last"
echo "$last" | grep -E '^\s*Buffers' | head -1 | sed 's/^ */first-node /'
printf '%s\n' "${times[@]}" | sort -n | awk -v k="$kind" '{a[NR]=$1} END{i99=int(NR*0.99+0.999); printf "claim_%s explain runs=%d p50_ms=%.3f p99_ms=%.3f min_ms=%.3f max_ms=%.3f\n", k, NR, a[int((NR+1)/2)], a[i99], a[1], a[NR]}'
