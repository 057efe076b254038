#!/usr/bin/env bash
# PostgreSQL logical capture (outbox.capture.mode: postgres-logical) against polling, in one run.
#
#   bench/run-capture.sh [PART ...]    PART: latency, drain, replicas (default: all three, in that order)
#
# Every output line goes to stdout and to results/raw-<UTC date-time>-capture.log (stderr to
# <that>.stderr, a `top` snapshot half-way through each load and each drain to <that>.top); OUT names
# another file.
#
# latency   Commit-to-delivery latency at each rate of RATES (default "200 1000" rows/s offered), for
#           capture (the owner: enabled: true, pollIntervalMs CAP_POLL=5000, reconciliationIntervalMs
#           CAP_RECONCILE=5000) and for plain polling (mode polling, pollIntervalMs POLL=100), the two
#           interleaved, LAT_RUNS (1) rounds (LAT_MODES="capture" or "polling" runs one of them).
#           LAT_MODES may also hold "floor": instead of QueueBox, pg_recvlogical (test_decoding) piped
#           into capture-floor/, the least work a capture-woken deliverer can do (one claim statement
#           a commit, no key order, a POST per row, CONC in flight): the machine's own floor for the
#           same load in the same run. "floordirect": the same without any claim, each row POSTed
#           straight from the decoded stream (not a deliverer: the floor of decoding plus HTTP).
#           The load is run-latency.sh's: pgbench -R (one client) commits RATE/10 transactions a
#           second of 10 rows, random keys over LAT_KEYS (20000), each row with created_at =
#           clock_timestamp() and that instant, in µs, in the payload field "t".
#           DURATION (30 s) of load, the first WARMUP (5 s) of arrivals discarded. The commit lies
#           between two instants on the same machine clock, so each row gets two latencies:
#             ins_*  arrival - t: from the INSERT, before the commit; includes the commit's WAL flush
#                    (an upper bound of commit -> delivery; what run-latency.sh reports)
#             ack_*  arrival - the end of the row's pgbench transaction in pgbench's per-transaction
#                    log (-l: the moment pgbench had the COMMIT's answer; the row is visible to other
#                    sessions just before it): a lower bound of commit -> delivery
#             commit_*  that end - t: how long the INSERT + COMMIT took (the flush's share of ins_*)
#           ack_before counts rows that arrived before pgbench took its timestamp.
#           DIAG_DIR=DIR: after each latency run, the receiver's per-row arrivals (/dump: id, arrival µs,
#           t µs, path) to DIR/<mode>-<rate>-<run>.recv and the rows' created_at / claimed_at /
#           updated_at (µs), attempt and key to DIR/<mode>-<rate>-<run>.rows and pgbench's transaction
#           log to DIR/<mode>-<rate>-<run>.pgbench-log, for a per-row look at where
#           the time went (claimed_at is the start of the claim that took the row); a "part=breakdown"
#           line per run from capture-breakdown.sh splits each row's time. With STMT_LOG=1
#           also the server log lines of the run database with log_min_duration_statement = 0 (set
#           on that database only, as the postgres superuser through runuser: needs root) to
#           DIR/<mode>-<rate>-<run>.pglog (PG_LOG names the server log). Slower: diagnosis only.
#           QB_SYNC_COMMIT=off (diagnosis): ALTER DATABASE <run db> SET synchronous_commit = off, so
#           QueueBox's own transactions (claim, finish) commit without waiting for the WAL flush,
#           while pgbench's inserts keep synchronous_commit = on (PGOPTIONS): how much of the tail is
#           the claim's own flush. Latency and replicas parts only.
# drain     A pre-loaded 200k-row backlog (DRAIN_SCENARIOS, default "unkeyed keyed20k": the rows of
#           run-delivery.sh's scenarios of those names, loaded once into a template) drained by
#           capture and by polling, interleaved (DRAIN_MODES, default "capture polling", sets the order), DRAIN_RUNS (3) rounds, each from a fresh copy of the
#           template. Reported: rate on the receiver's clock (N-1)/(last - first arrival), as
#           run-delivery.sh does, and the wall time from exec of QueueBox to the N-th arrival
#           ("time until all are sent"), CPU a message of QueueBox and of the run database's backends
#           (walsender included), the walsender's own CPU, and whether capture was streaming at the end.
#           SCALE_DOWN=N divides the row count (quick trials).
# replicas  Owner (as in latency, destination path /owner) and a follower (second process, same
#           database, mode postgres-logical, enabled: false, pollIntervalMs CAP_POLL, port
#           FOLLOWER_PORT = QB_PORT+1, destination path /follower) at each rate of RATES, LAT_RUNS
#           rounds, the latency figures (as in latency) per replica from the request path of each row,
#           and both replicas' capture counters (the follower's peer wake-ups).
#
# LAYOUT=split: the database on a core of its own, as on a host of its own: every PostgreSQL process
# (walsender included) on CPU DB_CPU (0); QueueBox, the receiver and pgbench (the application side) on
# CPU APP_CPU (1). Affinities are put back to every CPU at exit. LAYOUT=shared (default): no pinning.
#
# Capture set-up per run: a fresh database (QueueBox's migrations), then, as its owner,
# CREATE PUBLICATION queuebox_outbox FOR TABLE outbox WITH (publish = 'insert'); a slot name unique
# to the run (qb_bench_cap_<pid>_<n>), a fresh state directory; the load starts only after the
# owner logged "capture streaming". After the run QueueBox is stopped and the slot dropped (lib.sh
# drop_slot, as CAPTURE_USER, default queuebox_capture). Settings: BATCH CONC POOL as in lib.sh
# (the product defaults 100 8 10 unless set).
source "$(dirname "$0")/lib.sh"

PARTS=${*:-latency drain replicas}
RATES=${RATES:-200 1000}; DURATION=${DURATION:-30}; WARMUP=${WARMUP:-5}; LAT_KEYS=${LAT_KEYS:-20000}
LAT_RUNS=${LAT_RUNS:-1}
LAT_MODES=${LAT_MODES:-capture polling}
DRAIN_SCENARIOS=${DRAIN_SCENARIOS:-unkeyed keyed20k}; DRAIN_RUNS=${DRAIN_RUNS:-3}
DRAIN_MODES=${DRAIN_MODES:-capture polling}
CAP_POLL=${CAP_POLL:-5000}; CAP_RECONCILE=${CAP_RECONCILE:-5000}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
FOLLOWER_PORT=${FOLLOWER_PORT:-$((QB_PORT + 1))}
PUBLICATION=queuebox_outbox
IDENTITY=bench_$$
HZ=$(getconf CLK_TCK)
LAYOUT=${LAYOUT:-shared}
APP_CPUS=
case "$LAYOUT" in
  shared) ;;
  split)
    pin_all "${DB_CPU:-0}" $(pgrep -u postgres)
    APP_CPUS=${APP_CPU:-1}
    export QB_CPUS=$APP_CPUS RECV_CPUS=$APP_CPUS
    ;;
  *) die "LAYOUT must be shared or split, not '$LAYOUT'" ;;
esac

mkdir -p "$BENCH_DIR/results"
OUT=${OUT:-$BENCH_DIR/results/raw-$(date -u +%Y%m%dT%H%M)-capture.log}
exec > >(tee -a "$OUT") 2> >(tee -a "$OUT.stderr" >&2)

# The receiver must know /dump (per-row arrivals); cargo rebuilds it only when its source changed.
(cd "$BENCH_DIR/receiver" && CARGO_TARGET_DIR=${BENCH_BIN_DIR%/release} cargo build --release -q) || die "receiver build failed"
FLOOR_BIN=$BENCH_BIN_DIR/qb-bench-capture-floor
case " $LAT_MODES " in
  *" floor "*|*" floordirect "*) (cd "$BENCH_DIR/capture-floor" && CARGO_TARGET_DIR=${BENCH_BIN_DIR%/release} cargo build --release -q) || die "capture-floor build failed" ;;
esac
need_bins

echo "# run-capture.sh $PARTS"
echo "# machine: nproc=$(nproc) mem=$(free -m | awk '/^Mem:/{print $2}')MiB $(sql postgres 'select version()' | cut -d, -f1) wal_level=$(sql postgres 'show wal_level') synchronous_commit=$(sql postgres 'show synchronous_commit') layout=$LAYOUT"
echo "# commit: ${BIN_COMMIT:-$(git -C "$REPO_DIR" rev-parse --short HEAD)} binary: $QB_BIN ($(sha256sum "$QB_BIN" | cut -c1-12), built $(date -u -r "$QB_BIN" +%FT%TZ)) date: $(date -u)"
echo "# settings: qb_synchronous_commit=${QB_SYNC_COMMIT:-server default} rates=\"$RATES\" duration=${DURATION}s warmup=${WARMUP}s keys=$LAT_KEYS batch=$BATCH conc=$CONC pool=$POOL polling_poll=$POLL capture_poll=$CAP_POLL capture_reconciliation=$CAP_RECONCILE"
loadavg() { echo "load=$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' /)"; }
echo "# $(loadavg)"

SLOT_N=0
# next_slot: sets SLOT to a slot name not used before in this run (and a state directory of its own)
next_slot() { SLOT_N=$((SLOT_N + 1)); SLOT=qb_bench_cap_$$_$SLOT_N; }

# cap_config DB FILE ROLE PORT DEST_PATH [SLOT]: a configuration delivering every topic to the
# receiver at DEST_PATH. ROLE: polling (mode polling, pollIntervalMs POLL), owner (capture enabled,
# pollIntervalMs CAP_POLL) or follower (mode postgres-logical, enabled: false, pollIntervalMs CAP_POLL).
cap_config() {
  local db=$1 file=$2 role=$3 port=$4 dest=$5 slot=${6:-} poll=$CAP_POLL
  [ "$role" = polling ] && poll=$POLL
  {
    QB_PORT=$port POLL=$poll config_head "$db"
    case "$role" in
      polling) printf '  capture:\n    mode: polling\n' ;;
      owner) cat <<EOF
  capture:
    mode: postgres-logical
    enabled: true
    identity: $IDENTITY
    stateDirectory: $WORK/state-$slot
    slot: $slot
    publication: $PUBLICATION
    reconciliationIntervalMs: $CAP_RECONCILE
    connection:
      username: $CAPTURE_USER
      password: $CAPTURE_PASSWORD
EOF
      ;;
      follower) cat <<EOF
  capture:
    mode: postgres-logical
    enabled: false
    identity: $IDENTITY
    publication: $PUBLICATION
EOF
      ;;
    esac
    cat <<EOF
destinations:
  sink:
    type: http
    baseUrl: http://127.0.0.1:$RECV_PORT
    path: $dest
    timeoutMs: 30000
routes:
  - topicPattern: "**"
    destination: sink
admin:
  enabled: false
EOF
  } >"$file"
}

declare -A QBP   # replica name -> pid
declare -A QBPORT
# start_qb NAME CFG PORT: starts `queuebox serve` (log $WORK/NAME.log) and waits for /health/ready.
start_qb() {
  local name=$1 cfg=$2 port=$3 pid
  RUST_LOG=${QB_RUST_LOG:-warn,queuebox_application::capture=info} ${QB_CPUS:+taskset -c $QB_CPUS} "$QB_BIN" --config "$cfg" serve >"$WORK/$name.log" 2>&1 &
  pid=$!
  _PIDS+=("$pid"); QBP[$name]=$pid; QBPORT[$name]=$port
  for _ in $(seq 1 3000); do
    curl -fs "http://127.0.0.1:$port/health/ready" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$WORK/$name.log" >&2; die "queuebox $name exited"; }
    sleep 0.01
  done
  die "queuebox $name not ready in 30 s"
}
stop_qb() {
  local pid=${QBP[$1]:-}
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 400); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  QBP[$1]=
}
# wait_streaming NAME: waits (30 s bound) for the owner's "capture streaming" line.
wait_streaming() {
  for _ in $(seq 1 300); do
    grep -q "capture streaming" "$WORK/$1.log" && return 0
    kill -0 "${QBP[$1]}" 2>/dev/null || { cat "$WORK/$1.log" >&2; die "queuebox $1 exited"; }
    sleep 0.1
  done
  cat "$WORK/$1.log" >&2; die "capture of $1 not streaming after 30 s"
}
# cap_metrics NAME: the capture counters of a replica's /metrics as name=value pairs, and the commit -> wake-up
# summary (p50, p99 of the exporter's rolling window, and the max since start), in ms.
cap_metrics() {
  curl -fs "http://127.0.0.1:${QBPORT[$1]}/metrics" 2>/dev/null | awk -v p="$1" '
    /^queuebox_capture_changes_total\{kind="insert"\}/ { ins = $2 }
    /^queuebox_capture_wakes_total\{origin="log"\}/    { log_ = $2 }
    /^queuebox_capture_wakes_total\{origin="peer"\}/   { peer = $2 }
    /^queuebox_capture_wakes_total\{origin="start"\}/  { start = $2 }
    /^queuebox_capture_status\{status="streaming"\}/   { st = $2 }
    /^queuebox_capture_commit_to_wake_seconds\{quantile="0.5"\}/  { w50 = $2 * 1000 }
    /^queuebox_capture_commit_to_wake_seconds\{quantile="0.99"\}/ { w99 = $2 * 1000 }
    /^queuebox_capture_commit_to_wake_seconds_max /                { wmax = $2 * 1000 }
    END { printf "%s_cap_inserts=%s %s_wakes_log=%s %s_wakes_peer=%s %s_wakes_start=%s %s_streaming=%s %s_commit_to_wake_p50/p99/max_ms=%.2f/%.2f/%.2f",
                 p, ins + 0, p, log_ + 0, p, peer + 0, p, start + 0, p, st + 0, p, w50, w99, wmax }'
}
# warnings NAME: how many WARN/ERROR lines the replica logged.
warnings() { grep -c -E 'WARN|ERROR' "$WORK/$1.log" || true; }

# new_run_db DB [TEMPLATE]: a database with the schema and the publication.
new_run_db() {
  local db=$1 template=${2:-}
  if [ -n "$template" ]; then
    new_db "$db" "$template"   # the template already holds the schema and the publication
  else
    new_db "$db"; migrate "$db"
    sql "$db" "CREATE PUBLICATION $PUBLICATION FOR TABLE outbox WITH (publish = 'insert')"
    if [ -n "${QB_SYNC_COMMIT:-}" ]; then
      sql "$db" "ALTER DATABASE \"$db\" SET synchronous_commit = $QB_SYNC_COMMIT"
    fi
  fi
}

# start_replica NAME ROLE DB PORT DEST_PATH: a configured replica; an owner's slot is registered for
# the cleanup before QueueBox can create it. Sets SLOT for an owner.
start_replica() {
  local name=$1 role=$2 db=$3 port=$4 dest=$5
  SLOT=
  if [ "$role" = owner ]; then
    next_slot; _SLOTS+=("$SLOT $db")
    mkdir -p "$WORK/state-$SLOT"
  fi
  cap_config "$db" "$WORK/$name.yml" "$role" "$port" "$dest" "$SLOT"
  start_qb "$name" "$WORK/$name.yml" "$port"
}

cat >"$WORK/insert.pgbench" <<SQL
INSERT INTO outbox (topic, key, payload, created_at)
SELECT 'order.created', $([ "$LAT_KEYS" -gt 0 ] && echo "'key-' || floor(random() * $LAT_KEYS)::int" || echo NULL), jsonb_build_object('t', (extract(epoch FROM ct) * 1000000)::bigint), ct
  FROM (SELECT clock_timestamp() AS ct FROM generate_series(1, 10)) s;
SQL

# offer_load DB RATE: pgbench at RATE rows/s for DURATION, the receiver reset after WARMUP; then waits
# (20 s bound) until no row is left unsent. Sets PGB (tps, latency and lag figures) and LEFT.
offer_load() {
  local db=$1 rate=$2 resetter m0 m1
  m0=($(ticks_machine))
  recv /reset >/dev/null
  # a `top` snapshot half-way through the load goes to $OUT.top (who else used the cores)
  ( sleep "$WARMUP"; recv /reset >/dev/null
    sleep $(( DURATION / 2 > WARMUP ? DURATION / 2 - WARMUP : 0 ))
    { echo "# $(date -u +%H:%M:%S) $db offered=$rate"; top -b -n 1 -w 200 | head -16; } >>"$OUT.top" ) &
  resetter=$!
  rm -f "$WORK"/pgblog.*
  PGOPTIONS="-c synchronous_commit=on" ${APP_CPUS:+taskset -c $APP_CPUS} pgbench -n -c 1 -j 1 -R $((rate / 10)) -T "$DURATION" -l --log-prefix="$WORK/pgblog" -f "$WORK/insert.pgbench" "$db" >"$WORK/pgbench.txt" 2>&1 || { cat "$WORK/pgbench.txt" >&2; die "pgbench failed"; }
  m1=($(ticks_machine))
  wait "$resetter" || true
  for _ in $(seq 1 100); do
    LEFT=$(sql "$db" "SELECT count(*) FROM outbox WHERE state <> 'sent'")
    [ "$LEFT" = 0 ] && break
    sleep 0.2
  done
  local tps lat lag
  tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$WORK/pgbench.txt" | head -1)
  lat=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$WORK/pgbench.txt" | head -1)
  lag=$(sed -n 's/^rate limit schedule lag: avg \([0-9.]*\) .*/\1/p' "$WORK/pgbench.txt" | head -1)
  # cpu_machine: the whole machine's busy share during the load (this bench's own share at these
  # rates is small: a high figure means other work shared the two cores)
  local mtot=$((m1[0] - m0[0])) midle=$((m1[1] - m0[1]))
  PGB="rate_rows_per_s=$(echo "$tps * 10" | bc | cut -d. -f1) tx_ms=$(echo "scale=3; ${lat:-0} - ${lag:-0}" | bc) cpu_machine=$(( mtot > 0 ? 100 * (mtot - midle) / mtot : 0 ))%"
}

# diag_dump DB PREFIX: see DIAG_DIR.
diag_dump() {
  mkdir -p "$(dirname "$2")"
  recv /dump >"$2.recv"
  cat "$WORK"/pgblog.* >"$2.pgbench-log"
  sql "$1" "SELECT replace(id::text, '-', ''), (extract(epoch FROM created_at) * 1000000)::bigint,
                   (extract(epoch FROM claimed_at) * 1000000)::bigint,
                   (extract(epoch FROM updated_at) * 1000000)::bigint, attempt, COALESCE(key, '')
              FROM outbox" | tr '|' ' ' >"$2.rows"
}

# lat_figures [PATH]: the ins_/ack_/commit_ figures (see the header) of the rows delivered to PATH
# (all when empty) since the last /reset, from the receiver's /dump and pgbench's transaction log.
lat_figures() {
  local prefix=${1:-}
  recv /dump >"$WORK/dump.txt"
  # transaction ends (µs since the epoch, client clock = server clock here), ascending
  cat "$WORK"/pgblog.* | awk '{ printf "%d%06d\n", $5, $6 }' | sort -n >"$WORK/ends.txt"
  # "t arrival" of the rows of PATH, by t
  awk -v p="$prefix" 'index($4, p) == 1 { print $3, $2 }' "$WORK/dump.txt" | sort -n >"$WORK/tarr.txt"
  # each row's transaction: the first end at or after its t (one client: transactions do not overlap)
  awk 'NR == FNR { e[++n] = $1; next }
       { while (j < n && e[j + 1] < $1) j++; if (j >= n) next
         ack = e[j + 1]; print $2 - $1, $2 - ack, ack - $1 }' "$WORK/ends.txt" "$WORK/tarr.txt" >"$WORK/lat3.txt"
  local col name
  for col in 1 2 3; do
    name=$(echo "ins ack commit" | cut -d' ' -f$col)
    cut -d' ' -f$col "$WORK/lat3.txt" | sort -n | awk -v name="$name" '
      { v[NR] = $1; if ($1 < 0) neg++ }
      function pct(q) { i = int(q * (NR - 1) + 0.5) + 1; return sprintf("%.2f", v[i] / 1000) }
      END {
        if (NR == 0) { printf "%s_count=0 ", name; exit }
        printf "%s_count=%d %s_p50_ms=%s %s_p90_ms=%s %s_p99_ms=%s %s_p999_ms=%s %s_max_ms=%s ", name, NR, name, pct(0.5), name, pct(0.9), name, pct(0.99), name, pct(0.999), name, pct(1)
        if (name == "ack") printf "ack_before=%d ", neg
      }'
  done
}

# start_floor DB MODE: the latency floor (LAT_MODES=floor) instead of QueueBox: pg_recvlogical (a
# test_decoding slot of its own, as CAPTURE_USER) piped into capture-floor (see its source), which
# claims with one statement a commit and POSTs each row to the receiver at /events with CONC in
# flight; MODE floordirect POSTs each row straight from the decoded stream, no claim. Sets SLOT,
# FLOOR_PID and RECVLOGICAL_PID; waits until the slot streams.
start_floor() {
  local db=$1 how=
  [ "$2" = floordirect ] && how=direct
  next_slot; _SLOTS+=("$SLOT $db")
  PGUSER=$CAPTURE_USER PGPASSWORD=$CAPTURE_PASSWORD pg_recvlogical -d "$db" --slot "$SLOT" --create-slot -P test_decoding \
    || die "creating the floor's slot $SLOT failed"
  rm -f "$WORK/floor.fifo"; mkfifo "$WORK/floor.fifo"
  ${QB_CPUS:+taskset -c $QB_CPUS} "$FLOOR_BIN" "postgres://$PGUSER:$PGPASSWORD@$PGHOST:$PGPORT/$db" \
    "http://127.0.0.1:$RECV_PORT/events" "$CONC" $how <"$WORK/floor.fifo" >"$WORK/floor.log" 2>&1 &
  FLOOR_PID=$!; _PIDS+=("$FLOOR_PID")
  PGUSER=$CAPTURE_USER PGPASSWORD=$CAPTURE_PASSWORD pg_recvlogical -d "$db" --slot "$SLOT" --start -f - -F 0 \
    >"$WORK/floor.fifo" 2>>"$WORK/floor.log" &
  RECVLOGICAL_PID=$!; _PIDS+=("$RECVLOGICAL_PID")
  for _ in $(seq 1 300); do
    [ "$(sql postgres "SELECT active FROM pg_replication_slots WHERE slot_name = '$SLOT'")" = t ] \
      && grep -q "capture floor ready" "$WORK/floor.log" && return 0
    kill -0 "$FLOOR_PID" 2>/dev/null || { cat "$WORK/floor.log" >&2; die "capture-floor exited"; }
    sleep 0.1
  done
  cat "$WORK/floor.log" >&2; die "the floor's slot $SLOT not streaming after 30 s"
}
stop_floor() {
  local pid
  for pid in "$RECVLOGICAL_PID" "$FLOOR_PID"; do
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}

# --- 1. latency: capture owner against polling ---------------------------------------------------
part_latency() {
  local run rate mode db
  for run in $(seq 1 "$LAT_RUNS"); do
    for rate in $RATES; do
      for mode in $LAT_MODES; do
        db=qb_bench_cap_lat_$$
        new_run_db "$db"
        local t0 stream_ms=- metrics="" log_offset=
        if [ -n "${DIAG_DIR:-}" ] && [ "${STMT_LOG:-0}" = 1 ]; then
          PG_LOG=${PG_LOG:-/var/log/postgresql/postgresql-15-main.log}
          log_offset=$(stat -c %s "$PG_LOG")
          runuser -u postgres -- env -u PGHOST -u PGPORT -u PGUSER -u PGPASSWORD psql -X -q -p "$PGPORT" -d postgres \
            -c "ALTER DATABASE \"$db\" SET log_min_duration_statement = 0" >/dev/null
        fi
        t0=$(date +%s%N)
        case "$mode" in
          capture)
            start_replica qb owner "$db" "$QB_PORT" /events
            wait_streaming qb
            stream_ms=$((($(date +%s%N) - t0) / 1000000))
            ;;
          polling) start_replica qb polling "$db" "$QB_PORT" /events ;;
          floor|floordirect)
            start_floor "$db" "$mode"
            stream_ms=$((($(date +%s%N) - t0) / 1000000))
            ;;
          *) die "LAT_MODES: unknown mode '$mode' (capture, polling, floor, floordirect)" ;;
        esac
        local before; before=$(loadavg)
        offer_load "$db" "$rate"
        [ -n "${DIAG_DIR:-}" ] && diag_dump "$db" "$DIAG_DIR/$mode-$rate-$run"
        [ -n "$log_offset" ] && tail -c +$((log_offset + 1)) "$PG_LOG" | grep -F "@$db " >"$DIAG_DIR/$mode-$rate-$run.pglog"
        [ "$mode" = capture ] && metrics=$(cap_metrics qb)
        local rss
        if [ "${mode#floor}" != "$mode" ]; then
          rss=$(mem "$FLOOR_PID"); stop_floor
        else
          rss=$(mem "${QBP[qb]}"); stop_qb qb
        fi
        [ -n "$SLOT" ] && drop_slot "$SLOT" "$db"
        local poll_text=$POLL warns
        [ "$mode" = polling ] || poll_text="$CAP_POLL reconciliation=$CAP_RECONCILE"
        if [ "${mode#floor}" != "$mode" ]; then warns=$(grep -c -E 'POST of|finishing' "$WORK/floor.log" || true); else warns=$(warnings qb); fi
        echo "part=latency mode=$mode run=$run offered=$rate $PGB poll=$poll_text $(lat_figures)duplicates=$(recv /stats | field duplicates) not_sent_after=$LEFT start_to_streaming_ms=$stream_ms $metrics warn_lines=$warns $rss $before end_$(loadavg)"
        if [ -n "${DIAG_DIR:-}" ]; then
          echo "part=breakdown mode=$mode run=$run offered=$rate $("$BENCH_DIR/capture-breakdown.sh" "$DIAG_DIR/$mode-$rate-$run")"
        fi
        drop_db "$db"
      done
    done
  done
}

# --- 2. drain: a 200k backlog, capture against polling ---------------------------------------------
part_drain() {
  local scenario n keyexpr tmpl run mode
  for scenario in $DRAIN_SCENARIOS; do
    case "$scenario" in
      keyed20k) n=200000; keyexpr="'key-' || (g % 20000)" ;;
      unkeyed)  n=200000; keyexpr="NULL" ;;
      *) die "drain scenario $scenario: unkeyed or keyed20k" ;;
    esac
    [ -n "${SCALE_DOWN:-}" ] && n=$((n / SCALE_DOWN))
    tmpl=qb_bench_cap_tmpl_${scenario}_$$
    log "loading the template $tmpl: $n rows ($scenario)"
    new_run_db "$tmpl"
    sql "$tmpl" "INSERT INTO outbox (topic, key, payload)
                 SELECT 'order.created', $keyexpr, jsonb_build_object('g', g) FROM generate_series(1, $n) g"
    sql "$tmpl" "ANALYZE outbox"
    for run in $(seq 1 "$DRAIN_RUNS"); do
      for mode in $DRAIN_MODES; do
        drain_run "$scenario" "$tmpl" "$n" "$run" "$mode"
      done
    done
    drop_db "$tmpl"
  done
}

drain_run() {
  local scenario=$1 tmpl=$2 n=$3 run=$4 mode=$5 db=qb_bench_cap_drain_$$
  new_run_db "$db" "$tmpl"
  recv /reset >/dev/null
  local before; before=$(loadavg)
  local t_exec t_ready q0 d0 m0 count deadline
  t_exec=$(date +%s%N)
  if [ "$mode" = capture ]; then start_replica qb owner "$db" "$QB_PORT" /events
  else start_replica qb polling "$db" "$QB_PORT" /events; fi
  t_ready=$(date +%s%N)
  q0=$(ticks_pid "${QBP[qb]}"); m0=($(ticks_machine)); d0=$(ticks_db_list "$db" | tr '\n' ' ')
  deadline=$((SECONDS + RUN_TIMEOUT)); local snap=0
  while :; do
    count=$(recv /stats | field count)
    if [ "$snap" = 0 ] && [ "$count" -ge $((n / 2)) ]; then
      { echo "# $(date -u +%H:%M:%S) drain $scenario $mode run $run"; top -b -n 1 -w 200 | head -16; } >>"$OUT.top"; snap=1
    fi
    [ "$count" -ge "$n" ] && break
    [ "$SECONDS" -lt "$deadline" ] || { log "drain $scenario $mode run $run: timeout at $count of $n"; break; }
    sleep 0.1
  done
  local q1 d1 m1 ws_ticks=0 metrics="" streaming_log=-
  q1=$(ticks_pid "${QBP[qb]}"); m1=($(ticks_machine)); d1=$(ticks_db_list "$db" | tr '\n' ' ')
  if [ "$mode" = capture ]; then
    metrics=$(cap_metrics qb)
    grep -q "capture streaming" "$WORK/qb.log" && streaming_log=1 || streaming_log=0
    # the walsender's CPU over the window (it connected after ticks_db_list's first snapshot or
    # before; a pid new in the second snapshot counts whole, as in ticks_db_delta)
    local wpid; wpid=$(sql postgres "SELECT active_pid FROM pg_replication_slots WHERE slot_name = '$SLOT'")
    if [ -n "$wpid" ]; then
      local w1; w1=$(ticks_pid "$wpid")
      local w0; w0=$(echo "$d0" | tr ' ' '\n' | awk -F: -v p="$wpid" '$1 == p {print $2}')
      ws_ticks=$((w1 - ${w0:-0}))
    fi
  fi
  local peak; peak=$(mem "${QBP[qb]}")
  stop_qb qb
  [ -n "$SLOT" ] && drop_slot "$SLOT" "$db"
  local stats last_us first_us wall_all left db_ticks mtot midle
  stats=$(recv /stats)
  first_us=$(echo "$stats" | field first_us); last_us=$(echo "$stats" | field last_us)
  left=$(sql "$db" "SELECT count(*) FROM outbox WHERE state <> 'sent'")
  db_ticks=$(ticks_db_delta "$d0" "$d1")
  mtot=$((m1[0] - m0[0])); midle=$((m1[1] - m0[1]))
  wall_all=$(echo "scale=3; ($last_us - $t_exec / 1000) / 1000000" | bc)
  echo "part=drain scenario=$scenario mode=$mode run=$run n=$n poll=$([ "$mode" = capture ] && echo "$CAP_POLL reconciliation=$CAP_RECONCILE" || echo "$POLL")" \
    "$(recv "/rate?n=$n" | tr -d '\n' | sed 's/ready=1 //') exec_to_all_sent_s=$wall_all" \
    "start_to_ready_ms=$(((t_ready - t_exec) / 1000000)) exec_to_first_ms=$(((first_us - t_exec / 1000) / 1000))" \
    "us_per_msg_qb=$(echo "1000000 * ($q1 - $q0) / ($HZ * $n)" | bc) us_per_msg_pg_rundb=$(echo "1000000 * $db_ticks / ($HZ * $n)" | bc)" \
    "us_per_msg_walsender=$(echo "1000000 * $ws_ticks / ($HZ * $n)" | bc) cpu_machine=$(( mtot > 0 ? 100 * (mtot - midle) / mtot : 0 ))%" \
    "duplicates=$(echo "$stats" | field duplicates) out_of_order=$(echo "$stats" | field out_of_order) not_sent_after=$left" \
    "streaming_logged=$streaming_log $metrics warn_lines=$(warnings qb) end_${peak// / end_} $before end_$(loadavg)"
  drop_db "$db"
}

# --- 3. replicas: owner + follower on one outbox ---------------------------------------------------
part_replicas() {
  local rate db run
  for run in $(seq 1 "$LAT_RUNS"); do
    for rate in $RATES; do
      db=qb_bench_cap_rep_$$
      new_run_db "$db"
      start_replica owner owner "$db" "$QB_PORT" /owner
      local slot=$SLOT
      wait_streaming owner
      start_replica follower follower "$db" "$FOLLOWER_PORT" /follower
      # the follower is live once its LISTEN session is (10 s bound)
      local listening=0
      for _ in $(seq 1 100); do
        listening=$(sql postgres "SELECT count(*) FROM pg_stat_activity WHERE datname = '$db' AND query ILIKE 'listen %'")
        [ "$listening" -ge 1 ] && break
        sleep 0.1
      done
      local before; before=$(loadavg)
      offer_load "$db" "$rate"
      local mo mf
      mo=$(cap_metrics owner); mf=$(cap_metrics follower)
      stop_qb follower; stop_qb owner
      drop_slot "$slot" "$db"
      local lat_o lat_f
      lat_o=$(lat_figures /owner | sed 's/\([a-z0-9_]*\)=/owner_\1=/g')
      lat_f=$(lat_figures /follower | sed 's/\([a-z0-9_]*\)=/follower_\1=/g')
      echo "part=replicas run=$run offered=$rate $PGB poll=$CAP_POLL reconciliation=$CAP_RECONCILE follower_listening=$listening" \
        "$lat_o$lat_f$(lat_figures | sed 's/\([a-z0-9_]*\)=/all_\1=/g')duplicates=$(recv /stats | field duplicates)" \
        "not_sent_after=$LEFT $mo $mf warn_lines_owner=$(warnings owner) warn_lines_follower=$(warnings follower) $before end_$(loadavg)"
      drop_db "$db"
    done
  done
}

start_receiver
for part in $PARTS; do
  echo "# $(date -u +%H:%M:%S) part $part $(loadavg)"
  case "$part" in
    latency) part_latency ;;
    drain) part_drain ;;
    replicas) part_replicas ;;
    *) die "unknown part $part: latency drain replicas" ;;
  esac
done
echo "# $(date -u +%H:%M:%S) done $(loadavg)"
