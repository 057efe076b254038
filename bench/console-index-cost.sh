#!/usr/bin/env bash
# What the console's index (V16, idx_outbox_dead_topic) costs the write path, against no V16 and
# against the two indexes an earlier, never released draft of V16 had (idx_outbox_state_topic over
# pending, processing and dead rows; idx_inbox_correlation over every inbox row).
#
#   PGHOST=127.0.0.1 PGUSER=queuebox PGPASSWORD=queuebox bench/console-index-cost.sh [ROUNDS] [SECONDS]
#
# Creates the database qb_console_index_cost (dropped first and at the end) with migrations V1-V15,
# then:
# 1. WAL records per message, for 10,000 messages at a time, in three variants: none (V1-V15),
#    v16 (this V16) and draft (the draft's two indexes). Paths: an outbox message written, claimed
#    and sent; one written, claimed and gone dead; an inbox message stored, claimed and processed.
#    A count of records does not depend on the machine's load.
# 2. ROUNDS (default 5) rotating pgbench runs of SECONDS (default 20) each, none against v16: one
#    transaction writes one row, claims it and finishes it, 2 clients, synchronous_commit off (so
#    index work is not hidden behind the commit's flush). Run it on a quiet machine.
set -euo pipefail
rounds=${1:-5}
seconds=${2:-20}
repo=$(cd "$(dirname "$0")/.." && pwd)
db=qb_console_index_cost
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PGOPTIONS="-c client_min_messages=warning"
q() { psql -X -q -v ON_ERROR_STOP=1 -At -d "$db" "$@"; }

psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db"
for v in $(seq 1 15); do q -f "$repo"/migrations/postgres/V${v}__*.sql >/dev/null; done
clear_all() {
  q -c "DROP INDEX IF EXISTS idx_outbox_dead_topic; DROP INDEX IF EXISTS idx_outbox_state_topic;
        DROP INDEX IF EXISTS idx_inbox_correlation"
}
none() { clear_all; }
v16() { clear_all; q -f "$repo/migrations/postgres/V16__add_outbox_dead_topic_index.sql"; }
draft() {
  clear_all
  q -c "CREATE INDEX idx_outbox_state_topic ON outbox (state, topic, created_at)
          WHERE state IN ('pending', 'processing', 'dead');
        CREATE INDEX idx_inbox_correlation ON inbox (correlation_id, created_at)"
}

# One line of WAL records per statement, in this order.
cat >"$work/wal.sql" <<'SQL'
TRUNCATE outbox; TRUNCATE inbox;
EXPLAIN (ANALYZE, WAL, COSTS OFF, TIMING OFF, SUMMARY OFF) INSERT INTO outbox (topic, key, payload) SELECT 'topic.' || (g % 50), 'key-' || (g % 9973), jsonb_build_object('n', g, 'text', repeat('p', 200)) FROM generate_series(1, 10000) g;
EXPLAIN (ANALYZE, WAL, COSTS OFF, TIMING OFF, SUMMARY OFF) UPDATE outbox SET state = 'processing', claimed_at = now(), updated_at = now();
EXPLAIN (ANALYZE, WAL, COSTS OFF, TIMING OFF, SUMMARY OFF) UPDATE outbox SET state = 'sent', updated_at = now();
TRUNCATE outbox;
EXPLAIN (ANALYZE, WAL, COSTS OFF, TIMING OFF, SUMMARY OFF) INSERT INTO outbox (topic, key, payload) SELECT 'topic.' || (g % 50), 'key-' || (g % 9973), jsonb_build_object('n', g, 'text', repeat('p', 200)) FROM generate_series(1, 10000) g;
EXPLAIN (ANALYZE, WAL, COSTS OFF, TIMING OFF, SUMMARY OFF) UPDATE outbox SET state = 'processing', claimed_at = now(), updated_at = now();
EXPLAIN (ANALYZE, WAL, COSTS OFF, TIMING OFF, SUMMARY OFF) UPDATE outbox SET state = 'dead', last_error = 'HTTP 500', updated_at = now();
EXPLAIN (ANALYZE, WAL, COSTS OFF, TIMING OFF, SUMMARY OFF) INSERT INTO inbox (source, idempotency_key, payload, correlation_id) SELECT 'source' || (g % 5), 'evt-' || g, jsonb_build_object('n', g), gen_random_uuid()::text FROM generate_series(1, 10000) g;
EXPLAIN (ANALYZE, WAL, COSTS OFF, TIMING OFF, SUMMARY OFF) UPDATE inbox SET state = 'processing', claimed_at = now();
EXPLAIN (ANALYZE, WAL, COSTS OFF, TIMING OFF, SUMMARY OFF) UPDATE inbox SET state = 'processed', processed_at = now();
SQL
echo "WAL records per message (10,000 messages a path), write + claim + finish = total"
printf '%-6s %-28s %-28s %-28s\n' variant "outbox sent" "outbox dead" "inbox processed"
for variant in none v16 draft; do
  $variant
  mapfile -t r < <(q -f "$work/wal.sql" | sed -n 's/^  WAL: records=\([0-9]*\).*/\1/p')
  path() { # three statement counts -> "a + b + c = total" per message
    awk -v a="$1" -v b="$2" -v c="$3" 'BEGIN { printf "%.2f + %.2f + %.2f = %.2f", a/1e4, b/1e4, c/1e4, (a+b+c)/1e4 }'
  }
  printf '%-6s %-28s %-28s %-28s\n' "$variant" "$(path "${r[0]}" "${r[1]}" "${r[2]}")" \
    "$(path "${r[3]}" "${r[4]}" "${r[5]}")" "$(path "${r[6]}" "${r[7]}" "${r[8]}")"
done

cat >"$work/outbox.sql" <<'SQL'
\set t random(0, 49)
\set k random(0, 9999)
BEGIN;
INSERT INTO outbox (topic, key, payload) VALUES ('topic.' || :t, 'key-' || :k, '{"n": 1, "text": "pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp"}') RETURNING sequence AS seq \gset
UPDATE outbox SET state = 'processing', claimed_at = now(), claim_token = gen_random_uuid(), lease_expires_at = now() + interval '30 seconds', updated_at = now() WHERE key = 'key-' || :k AND sequence = :seq AND state = 'pending';
UPDATE outbox SET state = 'sent', claim_token = NULL, lease_expires_at = NULL, updated_at = now() WHERE key = 'key-' || :k AND sequence = :seq AND state = 'processing';
END;
SQL
cat >"$work/inbox.sql" <<'SQL'
\set s random(0, 4)
\set n random(1, 1000000000000)
BEGIN;
INSERT INTO inbox (source, idempotency_key, payload, correlation_id) VALUES ('source' || :s, 'e' || :n, '{"n": 1}', gen_random_uuid()::text) ON CONFLICT DO NOTHING;
UPDATE inbox SET state = 'processing', claimed_at = now(), claim_token = gen_random_uuid(), lease_expires_at = now() + interval '30 seconds' WHERE source = 'source' || :s AND idempotency_key = 'e' || :n;
UPDATE inbox SET state = 'processed', processed_at = now(), claim_token = NULL, lease_expires_at = NULL WHERE source = 'source' || :s AND idempotency_key = 'e' || :n;
END;
SQL
tps() {
  PGOPTIONS="-c synchronous_commit=off -c client_min_messages=warning" pgbench -n -c 2 -j 2 -T "$seconds" -f "$1" "$db" 2>/dev/null |
    sed -n 's/^tps = \([0-9.]*\) (without.*/\1/p'
}
echo "pgbench, transactions/s (one row written, claimed and finished each)"
for r in $(seq 1 "$rounds"); do
  # Rotate which arm goes first, so a drift in the machine's load does not favour one.
  if ((r % 2)); then arms="none v16"; else arms="v16 none"; fi
  for variant in $arms; do
    q -c "TRUNCATE outbox; TRUNCATE inbox"
    $variant
    echo "round $r $variant: outbox $(tps "$work/outbox.sql") inbox $(tps "$work/inbox.sql")"
  done
done
psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $db"
