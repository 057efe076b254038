#!/usr/bin/env bash
# Pull throughput of the pull clients (clients/rust, clients/go, clients/typescript, clients/python) against
# the contract's own ceiling (run-pull-ceiling.sh), measured in the same run on the same data set:
# 50,000 pending pull rows over 1,000 aggregates round robin (scenario agg1000 of run-pull.sh),
# WORKERS workers of one client in one process, a no-op handler.
#
#   bench/inbox/run-pull-clients.sh [RUNS=1]
#
# Environment: ROWS (50000), WORKERS (4), CONFIGS (BATCH:CONCURRENCY pairs of every worker,
# default "10:10 25:25"), CLIENT_SET (default "rust go typescript python python-asyncio"; python is
# the threaded InboxWorker, python-asyncio the AsyncInboxWorker; python-bare-threads and
# python-bare-asyncio, not in the default set, are plain psycopg sending the same exchanges as those
# workers with none of their machinery: the yardstick of what psycopg itself costs on these cores,
# and python-raw-asyncio the same through libpq directly, as the workers send a row's transaction,
# python-chain-asyncio that with each completion carrying the next row's BEGIN, as the asyncio
# worker sends it; see pullbench-py/bench.py), PY_PROCS (1: the Python clients' WORKERS spread over that many
# processes, bench.py --procs), RUN_TIMEOUT (120 s a run),
# QB_PYCLIENT_VENV (the venv of scripts/test.sh's Python block, /var/cache/queuebox-pyvenv-pyclient).
# Order: the ceiling first (run-pull-ceiling.sh RUNS "<the batches of CONFIGS>"), then per run,
# per config, each client in turn on a fresh copy of the template. The bench programs:
# pullbench (Rust), pullbench-go, pullbench-ts, pullbench-py; each prints handled/rate/cpu lines alike, rate =
# (rows - 1) / (time of the last handler call - time of the first).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${1:-1}
ROWS=${ROWS:-50000}
WORKERS=${WORKERS:-4}
CONFIGS=${CONFIGS:-10:10 25:25}
CLIENT_SET=${CLIENT_SET:-rust go typescript python python-asyncio}
PYVENV=${QB_PYCLIENT_VENV:-/var/cache/queuebox-pyvenv-pyclient}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
PY_PROCS=${PY_PROCS:-1}
need_qb

for client in $CLIENT_SET; do
  case $client in
    rust) (cd "$INBOX_BENCH_DIR/pullbench" && CARGO_TARGET_DIR=$BENCH4_TARGET cargo build --release -q) || die "build of pullbench failed" ;;
    go) (cd "$INBOX_BENCH_DIR/pullbench-go" && go build -o "$WORK/pullbench-go" .) || die "build of pullbench-go failed" ;;
    typescript)
      (cd "$REPO_DIR/clients/typescript" && { [ -d node_modules ] || npm ci --no-audit --no-fund >/dev/null; } && npm run -s build) ||
        die "build of clients/typescript failed" ;;
    python | python-asyncio | python-bare-threads | python-bare-asyncio | python-raw-asyncio | python-chain-asyncio)
      [ -n "${python_installed:-}" ] && continue # one install serves every Python client
      python_installed=yes
      [ -x "$PYVENV/bin/python" ] || python3 -m venv "$PYVENV" || die "python3 -m venv $PYVENV failed"
      { "$PYVENV/bin/pip" install --quiet --disable-pip-version-check "$REPO_DIR/clients/python[binary]" &&
        "$PYVENV/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps \
          "$REPO_DIR/clients/python"; } || die "install of clients/python failed" ;;
    *) die "unknown client $client" ;;
  esac
done

bench_cmd() {
  local client=$1
  case $client in
    rust) echo "$PULLBENCH_BIN" ;;
    go) echo "$WORK/pullbench-go" ;;
    typescript) echo "node $INBOX_BENCH_DIR/pullbench-ts/bench.mjs" ;;
    python) echo "$PYVENV/bin/python $INBOX_BENCH_DIR/pullbench-py/bench.py --mode threads --procs $PY_PROCS" ;;
    python-asyncio) echo "$PYVENV/bin/python $INBOX_BENCH_DIR/pullbench-py/bench.py --mode asyncio --procs $PY_PROCS" ;;
    python-bare-threads) echo "$PYVENV/bin/python $INBOX_BENCH_DIR/pullbench-py/bench.py --mode bare-threads --procs $PY_PROCS" ;;
    python-bare-asyncio) echo "$PYVENV/bin/python $INBOX_BENCH_DIR/pullbench-py/bench.py --mode bare-asyncio --procs $PY_PROCS" ;;
    python-raw-asyncio) echo "$PYVENV/bin/python $INBOX_BENCH_DIR/pullbench-py/bench.py --mode raw-asyncio --procs $PY_PROCS" ;;
    python-chain-asyncio) echo "$PYVENV/bin/python $INBOX_BENCH_DIR/pullbench-py/bench.py --mode chain-asyncio --procs $PY_PROCS" ;;
  esac
}

batches=$(for c in $CONFIGS; do echo "${c%%:*}"; done | sort -nu | tr '\n' ' ')
log "the ceiling, batches $batches"
CEIL=$WORK/ceiling-medians.txt
ROWS=$ROWS CLIENTS=$WORKERS bash "$INBOX_BENCH_DIR/run-pull-ceiling.sh" "$RUNS" "$batches" | tee "$WORK/ceiling-run.txt" >&2
grep '^median ceiling' "$WORK/ceiling-run.txt" >"$CEIL" || die "the ceiling run printed no median"

TPL=qb_bench4_clients_tpl
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

RES=$WORK/clients.txt
: >"$RES"
for run in $(seq 1 "$RUNS"); do
  for config in $CONFIGS; do
    batch=${config%%:*} conc=${config##*:}
    for client in $CLIENT_SET; do
      DB=qb_bench4_clients
      new_db "$DB" "$TPL"
      # shellcheck disable=SC2046 # the command of a client may be two words (node and its script)
      line=$(timeout $((RUN_TIMEOUT + 30)) $(bench_cmd "$client") --url "postgres://$PGUSER:$PGPASSWORD@$PGHOST:$PGPORT/$DB" \
        --source bench --expect "$ROWS" --workers "$WORKERS" --batch "$batch" --concurrency "$conc" \
        --timeout "$RUN_TIMEOUT" 2>"$WORK/bench-$client.log" | grep -E '^(handled|cpu)' | tr '\n' ' ' || echo "handled=0 rate=0 failed=yes")
      echo "run=$run client=$client workers=$WORKERS batch=$batch concurrency=$conc $line" | tee -a "$RES"
      drop_db "$DB"
    done
  done
done
drop_db "$TPL"

echo "# medians of $RUNS runs, $ROWS rows, $WORKERS workers, against the ceiling of the same run"
cat "$CEIL"
for config in $CONFIGS; do
  batch=${config%%:*} conc=${config##*:}
  ceiling=$(sed -n "s/^median ceiling batch=$batch .* rate=\([0-9.]*\) .*/\1/p" "$CEIL")
  for client in $CLIENT_SET; do
    lines=$(grep " client=$client .* batch=$batch concurrency=$conc " "$RES" || true)
    pick() { tr ' ' '\n' <<<"$lines" | sed -n "s/^$1=//p" | median; }
    rate=$(pick rate)
    share=$(awk -v r="$rate" -v c="$ceiling" 'BEGIN { if (c > 0 && r != "n/a") printf "%.0f", 100 * r / c; else print "n/a" }')
    echo "median client=$client batch=$batch concurrency=$conc rate=$rate ceiling=$ceiling share_pct=$share worker_us_per_row=$(pick worker_us_per_row) pg_us_per_row=$(pick pg_us_per_row)"
  done
done
