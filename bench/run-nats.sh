#!/usr/bin/env bash
# NATS JetStream (issue 15), both directions in one run:
#
# 1. Outbox -> JetStream: delivery rate of `queuebox serve` with a nats destination (jetStream: true,
#    every row sent only on its JetStream acknowledgement, Nats-Msg-Id = row id) from a pre-loaded
#    backlog, against, interleaved round by round,
#      (a) the bare async-nats publisher of bench/nats (`qb-bench-nats publish`) with INFLIGHT
#          acknowledgements outstanding, publishing the same message shape (body {"g": i}, the same
#          headers) to the same kind of stream (file storage, one subject filter `S.>`);
#      (b) QueueBox's own HTTP drain: `run-delivery.sh SCENARIO 1` (bench receiver).
# 2. JetStream -> inbox: `inbox/run-nats-ingest.sh RUNS ROWS` (rows stored a second from a preloaded
#    stream against HTTP ingestion of the same bodies), unless INGEST=0.
#
#   bench/run-nats.sh [RUNS] [SCENARIOS]       (RUNS default 3; SCENARIOS default "unkeyed keyed20k")
#
# SCENARIO: unkeyed   200,000 rows without a key
#           keyed20k  200,000 rows over 20,000 keys (10 a key); payload {"g": insert order}
# SCALE_DOWN=20 divides the row counts for a quick trial.
#
# Rate (both targets of part 1): `qb-bench-nats rate` waits until the stream holds N messages and
# divides N-1 by the span between the first and the last message's JetStream timestamp (the
# server's clock), so QueueBox's start-up is not in it. The stream's duplicate window is 2 minutes,
# so a copy would not be counted; `held` = N and `not_sent_after` = 0 show that nothing was lost.
# Cross-check from the database: (N-1) / (max - min updated_at of the sent rows) = `db_rate`.
# CPU: utime+stime deltas from /proc over ready -> last message for QueueBox, nats-server, the run
# database's backends and the machine. Memory: VmRSS/VmHWM of QueueBox (VmHWM = the run's peak).
# Settings: BATCH CONC POLL POOL (lib.sh), INFLIGHT (256), HTTP (1), INGEST (1), NATS_URL.
source "$(dirname "$0")/lib.sh"

RUNS=${1:-3}
SCENARIOS=${2:-unkeyed keyed20k}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
INFLIGHT=${INFLIGHT:-256}
HTTP=${HTTP:-1}
INGEST=${INGEST:-1}
NATS_URL=${NATS_URL:-nats://127.0.0.1:4222}
NATS_BIN=$BENCH_BIN_DIR/qb-bench-nats
KEYS=20000
HZ=$(getconf CLK_TCK)
need_bins
if ! [ -x "$NATS_BIN" ]; then
  log "building bench/nats"
  (cd "$BENCH_DIR/nats" && CARGO_TARGET_DIR=${BENCH_BIN_DIR%/release} cargo build --release -q) || die "bench/nats build failed"
fi
SERVER_PID=$(pgrep -o -x nats-server || true)
[ -n "$SERVER_PID" ] || die "no nats-server running: bash scripts/services.sh"

STREAM=QB_BENCH_$$
tool() { "$NATS_BIN" "$1" --url "$NATS_URL" "${@:2}"; }
stream_up() { tool setup --stream "$STREAM"; }
stream_down() { tool teardown --stream "$STREAM" 2>/dev/null || true; }
trap 'stream_down; _cleanup' EXIT

write_nats_config() {
  local db=$1 file=$2
  { config_head "$db"; cat <<YML
destinations:
  js:
    type: nats
    servers: $NATS_URL
    subject: "$STREAM.{{ topic }}"
    jetStream: true
routes:
  - topicPattern: "**"
    destination: js
admin:
  enabled: false
YML
  } >"$file"
}
start_qb_nats() {
  local db=$1 cfg=$WORK/qb-nats-$1.yml
  write_nats_config "$db" "$cfg"
  RUST_LOG=${QB_RUST_LOG:-warn} "$QB_BIN" --config "$cfg" serve >>"$WORK/queuebox.log" 2>&1 &
  QB_PID=$!
  _PIDS+=("$QB_PID")
  for _ in $(seq 1 3000); do
    curl -fs "http://127.0.0.1:$QB_PORT/health/ready" >/dev/null 2>&1 && return 0
    kill -0 "$QB_PID" 2>/dev/null || { cat "$WORK/queuebox.log" >&2; die "queuebox exited"; }
    sleep 0.01
  done
  die "queuebox not ready in 30 s"
}

load_template() {
  local scenario=$1 template=$2 n=$3 keyexpr
  case "$scenario" in
    unkeyed) keyexpr="NULL" ;;
    keyed20k) keyexpr="'key-' || (g % $KEYS)" ;;
  esac
  log "loading the template $template: $n rows ($scenario)"
  new_db "$template"
  migrate "$template"
  sql "$template" "INSERT INTO outbox (id, topic, key, payload)
                   SELECT gen_random_uuid(), 'order.created', $keyexpr, jsonb_build_object('g', g)
                     FROM generate_series(1, $n) g"
  sql "$template" "ANALYZE outbox"
}

# run_queuebox SCENARIO RUN N TEMPLATE: one QueueBox -> JetStream drain; prints its line.
run_queuebox() {
  local scenario=$1 run=$2 n=$3 template=$4 rundb=qb_bench_nats_run_$$
  stream_down; stream_up
  new_db "$rundb" "$template"
  local load0 t_exec t_ready q0 s0 m0 d0 q1 s1 m1 d1 peak_mem rate
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  t_exec=$(date +%s.%N)
  start_qb_nats "$rundb"
  t_ready=$(date +%s.%N)
  q0=$(ticks_pid "$QB_PID"); s0=$(ticks_pid "$SERVER_PID"); m0=($(ticks_machine))
  d0=$(ticks_db_list "$rundb" | tr '\n' ' ')
  rate=$(tool rate --stream "$STREAM" --n "$n" --timeout-s "$RUN_TIMEOUT")
  q1=$(ticks_pid "$QB_PID"); s1=$(ticks_pid "$SERVER_PID"); m1=($(ticks_machine))
  d1=$(ticks_db_list "$rundb" | tr '\n' ' ')
  peak_mem=$(mem "$QB_PID")
  local t_done; t_done=$(date +%s.%N)
  # a short grace for the last mark-sent statements, then the database's view
  sleep 0.5
  stop_queuebox
  local left db_rate db_ticks wall
  left=$(sql "$rundb" "SELECT count(*) FROM outbox WHERE state <> 'sent'")
  db_rate=$(sql "$rundb" "SELECT round((count(*) - 1) / NULLIF(extract(epoch FROM max(updated_at) - min(updated_at)), 0)) FROM outbox WHERE state = 'sent'")
  db_ticks=$(ticks_db_delta "$d0" "$d1")
  wall=$(echo "$t_done - $t_ready" | bc -l)
  cpu() { echo "scale=0; 100 * ($1) / ($HZ * $wall)" | bc -l; }
  us() { echo "1000000 * ($1) / ($HZ * $n)" | bc; }
  local mtot=$((m1[0] - m0[0])) midle=$((m1[1] - m0[1]))
  echo "target=queuebox scenario=$scenario run=$run n=$n batch=$BATCH conc=$CONC poll=$POLL pool=$POOL $rate db_rate=$db_rate" \
       "cpu_qb=$(cpu "$q1 - $q0")% cpu_nats=$(cpu "$s1 - $s0")% cpu_pg_rundb=$(cpu "$db_ticks")%" \
       "cpu_machine=$(( mtot > 0 ? 100 * (mtot - midle) / mtot : 0 ))%" \
       "us_per_msg_qb=$(us "$q1 - $q0") us_per_msg_nats=$(us "$s1 - $s0") us_per_msg_pg_rundb=$(us "$db_ticks")" \
       "end_${peak_mem// / end_} not_sent_after=$left load_at_start=${load0// /,}"
  drop_db "$rundb"
  stream_down
}

# run_bare SCENARIO RUN N: the bare async-nats publisher alone; prints its line.
run_bare() {
  local scenario=$1 run=$2 n=$3 keys=0
  [ "$scenario" = keyed20k ] && keys=$KEYS
  stream_down; stream_up
  local load0 s0 m0 s1 m1 t0 t1 pub rate
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  s0=$(ticks_pid "$SERVER_PID"); m0=($(ticks_machine)); t0=$(date +%s.%N)
  pub=$( /usr/bin/time -f 'pub_cpu_s=%U+%S pub_maxrss_kB=%M' "$NATS_BIN" publish --url "$NATS_URL" --stream "$STREAM" --n "$n" \
           --inflight "$INFLIGHT" --keys "$keys" 2>"$WORK/pub.err" ) \
    || { cat "$WORK/pub.err" >&2; log "the bare publisher failed"; }
  rate=$(tool rate --stream "$STREAM" --n "$n" --timeout-s "$RUN_TIMEOUT")
  s1=$(ticks_pid "$SERVER_PID"); m1=($(ticks_machine)); t1=$(date +%s.%N)
  local wall mtot=$((m1[0] - m0[0])) midle=$((m1[1] - m0[1]))
  wall=$(echo "$t1 - $t0" | bc -l)
  echo "target=bare scenario=$scenario run=$run n=$n inflight=$INFLIGHT $rate $pub $(grep -o 'pub_cpu_s=[^ ]* pub_maxrss_kB=[0-9]*' "$WORK/pub.err" || true)" \
       "cpu_nats=$(echo "scale=0; 100 * ($s1 - $s0) / ($HZ * $wall)" | bc -l)% us_per_msg_nats=$(echo "1000000 * ($s1 - $s0) / ($HZ * $n)" | bc)" \
       "cpu_machine=$(( mtot > 0 ? 100 * (mtot - midle) / mtot : 0 ))% load_at_start=${load0// /,}"
  stream_down
}

echo "# nats bench $(date -u +%FT%TZ) machine=$(nproc)cpu commit=$(git -C "$REPO_DIR" rev-parse --short HEAD) binary_sha256=$(sha256sum "$QB_BIN" | cut -c1-12) load=$(cut -d' ' -f1-3 /proc/loadavg) nats-server=$(nats-server --version 2>/dev/null | head -1) inflight=$INFLIGHT http=$HTTP"
for scenario in $SCENARIOS; do
  case "$scenario" in unkeyed|keyed20k) ;; *) sed -n '2,21p' "$0" >&2; exit 2 ;; esac
  N=200000
  [ -n "${SCALE_DOWN:-}" ] && N=$((N / SCALE_DOWN))
  TEMPLATE=qb_bench_nats_tmpl_${scenario}_$$
  load_template "$scenario" "$TEMPLATE" "$N"
  for run in $(seq 1 "$RUNS"); do
    run_queuebox "$scenario" "$run" "$N" "$TEMPLATE"
    run_bare "$scenario" "$run" "$N"
    if [ "$HTTP" = 1 ]; then
      "$BENCH_DIR/run-delivery.sh" "$scenario" 1 2>>"$WORK/http.err" | grep ' run=1 ' | sed "s/^/target=http round=$run /" \
        || { tail -5 "$WORK/http.err" >&2; log "the HTTP drain failed"; }
    fi
  done
  drop_db "$TEMPLATE"
done
if [ "$INGEST" = 1 ]; then
  ROWS=100000; [ -n "${SCALE_DOWN:-}" ] && ROWS=$((ROWS / SCALE_DOWN))
  "$BENCH_DIR/inbox/run-nats-ingest.sh" "$RUNS" "$ROWS"
fi
