#!/usr/bin/env bash
# Outbox -> RabbitMQ (issue 12): delivery rate of `queuebox serve` with a rabbitmq destination
# (persistent, publisher confirms, mandatory) from a pre-loaded backlog, against, in the same
# session and interleaved round by round,
#   (a) the bare lapin publisher of bench/amqp (`qb-bench-amqp publish`) with INFLIGHTS confirms
#       outstanding, publishing the same messages alone (same properties and body) to the same kind
#       of exchange (durable topic) and queue (durable classic, bound with '#');
#   (b) QueueBox's own HTTP drain: `run-delivery.sh SCENARIO 1` (bench receiver).
#
#   bench/run-rabbitmq.sh [RUNS] [SCENARIOS]       (RUNS default 3; SCENARIOS default "unkeyed keyed20k")
#
# SCENARIO: unkeyed   200,000 rows without a key
#           keyed20k  200,000 rows over 20,000 keys (10 a key); payload {"g": insert order}
# SCALE_DOWN=20 divides the row counts for a quick trial.
#
# Method (the habits of run-delivery.sh): the rows are loaded once into a template database while
# QueueBox is stopped; each QueueBox run copies it (CREATE DATABASE ... TEMPLATE, FILE_COPY),
# declares a fresh exchange + queue (names end in the script's pid), starts the timing consumer
# (`qb-bench-amqp consume`: prefetch 2000, manual acks in groups of 500, records each arrival on its
# own clock, duplicates by AMQP message_id, per-routing-key order of the payload field g), then
# starts QueueBox with one rabbitmq destination (exchange = that exchange, routingKeyTemplate
# "{{ key }}", missing-field default "none", deliveryMode persistent) and waits until the consumer
# has counted every row (RUN_TIMEOUT bound). The rate is (N-1) / (last arrival - first arrival) on
# the consumer's clock, so start-up is not in it; the same consumer measures the bare publisher.
# Cross-check from the database: (N-1) / (max - min updated_at of the sent rows) = `db_rate`.
# CPU: utime+stime deltas from /proc over the window ready -> last arrival, for QueueBox, the
# broker (beam.smp), the run database's backends, the consumer and the whole machine.
# Memory: VmRSS/VmHWM of QueueBox at ready and at the end (VmHWM = the peak of the run).
# Settings: BATCH CONC POLL POOL (lib.sh; the measured session uses 500/64/100/10 like the latest
# passes), INFLIGHTS ("1 8 64 256"), BARE_SMALL_N (10000: the row count for in-flight settings
# below 64, which would take minutes over 200k), HTTP (1: run the HTTP drain each round), AMQP_URL.
# LAYOUT=split: the broker on a core of its own, as on a host of its own. beam.smp (every thread)
# on CPU REMOTE_CPU (1) with the consumer and the HTTP drain's receiver (the remote side); every
# PostgreSQL process, QueueBox and the bare publisher on CPU LOCAL_CPU (0). Affinities are set with
# taskset (PostgreSQL's new backends inherit the postmaster's) and put back to every CPU at exit.
# LAYOUT=shared (the default): nothing is pinned, everything shares both cores.
# PERF=1: `perf record -g` of QueueBox during the first QueueBox run of each scenario, report to
# results/ (needs perf).
source "$(dirname "$0")/lib.sh"

RUNS=${1:-3}
SCENARIOS=${2:-unkeyed keyed20k}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
INFLIGHTS=${INFLIGHTS:-1 8 64 256}
BARE_SMALL_N=${BARE_SMALL_N:-10000}
HTTP=${HTTP:-1}
AMQP_URL=${AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}
AMQP_BIN=$BENCH_BIN_DIR/qb-bench-amqp
KEYS=20000
HZ=$(getconf CLK_TCK)
need_bins
if ! [ -x "$AMQP_BIN" ]; then
  log "building bench/amqp"
  (cd "$BENCH_DIR/amqp" && CARGO_TARGET_DIR=${BENCH_BIN_DIR%/release} cargo build --release -q) || die "bench/amqp build failed"
fi
BROKER_PID=$(pgrep -o -x beam.smp || true)
[ -n "$BROKER_PID" ] || die "no RabbitMQ broker (beam.smp) running: bash scripts/services.sh"

EXCHANGE=qb-bench-ex-$$
QUEUE=qb-bench-q-$$
amqp() { "$AMQP_BIN" "$@" --url "$AMQP_URL"; }
topology_up() { amqp setup --exchange "$EXCHANGE" --queue "$QUEUE" --binding '#' --timeout-s 30; }
topology_down() { amqp teardown --exchange "$EXCHANGE" --queue "$QUEUE" --timeout-s 30 2>/dev/null || true; }
LAYOUT=${LAYOUT:-shared}
LOCAL_CPU=${LOCAL_CPU:-0}
REMOTE_CPU=${REMOTE_CPU:-1}
CONS_CPUS=
PUB_CPUS=
case "$LAYOUT" in
  shared) ;;
  split)
    pin_all "$REMOTE_CPU" "$BROKER_PID"
    pin_all "$LOCAL_CPU" $(pgrep -u postgres)
    export QB_CPUS=$LOCAL_CPU RECV_CPUS=$REMOTE_CPU
    CONS_CPUS=$REMOTE_CPU PUB_CPUS=$LOCAL_CPU
    ;;
  *) die "LAYOUT must be shared or split, not '$LAYOUT'" ;;
esac
# the cleanup of lib.sh stops processes and drops databases; this also removes the broker objects
trap 'topology_down; _cleanup' EXIT

CONS_PID=
# start_consumer N KEYED(0|1): the timing consumer on $QUEUE, output in $WORK/consumer.out
start_consumer() {
  local n=$1 keyed=$2 extra=()
  [ "$keyed" = 1 ] && extra=(--keyed)
  rm -f "$WORK/consumer.ready"
  ${CONS_CPUS:+taskset -c $CONS_CPUS} "$AMQP_BIN" consume --url "$AMQP_URL" --queue "$QUEUE" --expect "$n" --timeout-s "$RUN_TIMEOUT" --ready-file "$WORK/consumer.ready" "${extra[@]}" \
    >"$WORK/consumer.out" 2>"$WORK/consumer.err" &
  CONS_PID=$!
  _PIDS+=("$CONS_PID")
  for _ in $(seq 1 300); do
    [ -f "$WORK/consumer.ready" ] && return 0
    kill -0 "$CONS_PID" 2>/dev/null || { cat "$WORK/consumer.err" >&2; die "the consumer exited"; }
    sleep 0.05
  done
  die "the consumer did not start"
}
wait_consumer() { wait "$CONS_PID" 2>/dev/null || { cat "$WORK/consumer.err" >&2; log "the consumer failed"; }; }

# The QueueBox configuration: one rabbitmq destination, every topic routed to it.
write_rmq_config() {
  local db=$1 file=$2
  { config_head "$db"; cat <<EOF
destinations:
  rabbit:
    type: rabbitmq
    url: $AMQP_URL
    exchange: $EXCHANGE
    routingKeyTemplate: "{{ key }}"
    deliveryMode: persistent
routes:
  - topicPattern: "**"
    destination: rabbit
    routingKeyMissingFieldDefault: none
admin:
  enabled: false
EOF
  } >"$file"
}
start_qb_rmq() {
  local db=$1 cfg=$WORK/qb-rmq-$1.yml
  write_rmq_config "$db" "$cfg"
  RUST_LOG=${QB_RUST_LOG:-warn} ${QB_CPUS:+taskset -c $QB_CPUS} "$QB_BIN" --config "$cfg" serve >>"$WORK/queuebox.log" 2>&1 &
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

# run_queuebox SCENARIO RUN N TEMPLATE: one QueueBox -> RabbitMQ drain; prints its line.
run_queuebox() {
  local scenario=$1 run=$2 n=$3 template=$4 keyed=0 rundb=qb_bench_rmq_run_$$
  [ "$scenario" = keyed20k ] && keyed=1
  topology_down; topology_up
  new_db "$rundb" "$template"
  start_consumer "$n" "$keyed"
  local load0 t_exec t_ready idle_mem q0 b0 m0 d0 q1 b1 m1 d1 peak_mem
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  t_exec=$(date +%s.%N)
  start_qb_rmq "$rundb"
  t_ready=$(date +%s.%N)
  idle_mem=$(mem "$QB_PID")
  q0=$(ticks_pid "$QB_PID"); b0=$(ticks_pid "$BROKER_PID"); m0=($(ticks_machine))
  d0=$(ticks_db_list "$rundb" | tr '\n' ' ')
  local perf_pid=
  if [ "${PERF:-0}" = 1 ] && [ "$run" = 1 ] && command -v perf >/dev/null; then
    perf record -q -g -F 499 -p "$QB_PID" -o "$WORK/perf-$scenario.data" -- sleep "${PERF_S:-8}" >/dev/null 2>&1 &
    perf_pid=$!
  fi
  # the consumer's own deadline bounds this wait (it exits at the target or at RUN_TIMEOUT)
  local half=0
  while kill -0 "$CONS_PID" 2>/dev/null; do
    if [ "$half" = 0 ] && [ $(( $(date +%s) - ${t_ready%.*} )) -ge 3 ]; then
      top -b -n 1 -w 200 | head -15 >"$WORK/top-$scenario-$run.txt"; half=1
    fi
    sleep 0.1
  done
  q1=$(ticks_pid "$QB_PID"); b1=$(ticks_pid "$BROKER_PID"); m1=($(ticks_machine))
  d1=$(ticks_db_list "$rundb" | tr '\n' ' ')
  peak_mem=$(mem "$QB_PID")
  local t_done; t_done=$(date +%s.%N)
  wait_consumer
  if [ -n "$perf_pid" ]; then
    wait "$perf_pid" 2>/dev/null || true
    mkdir -p "$BENCH_DIR/results"
    perf report -i "$WORK/perf-$scenario.data" --no-children --sort dso,symbol --stdio 2>/dev/null | grep -v '^#' | grep '%' | head -40 \
      >"$BENCH_DIR/results/perf-rabbitmq-$scenario-$(date -u +%Y%m%dT%H%M).txt" || true
  fi
  # a short grace for the last mark-sent statements, then the database's view
  sleep 0.5
  stop_queuebox
  local left db_rate
  left=$(sql "$rundb" "SELECT count(*) FROM outbox WHERE state <> 'sent'")
  db_rate=$(sql "$rundb" "SELECT round((count(*) - 1) / NULLIF(extract(epoch FROM max(updated_at) - min(updated_at)), 0)) FROM outbox WHERE state = 'sent'")
  local db_ticks wall cons
  db_ticks=$(ticks_db_delta "$d0" "$d1")
  wall=$(echo "$t_done - $t_ready" | bc -l)
  cpu() { echo "scale=0; 100 * ($1) / ($HZ * $wall)" | bc -l; }
  us() { echo "1000000 * ($1) / ($HZ * $n)" | bc; }
  local mtot=$((m1[0] - m0[0])) midle=$((m1[1] - m0[1]))
  cons=$(cat "$WORK/consumer.out")
  echo "target=queuebox scenario=$scenario run=$run n=$n batch=$BATCH conc=$CONC poll=$POLL pool=$POOL $cons db_rate=$db_rate" \
       "start_to_ready_ms=$(echo "($t_ready - $t_exec) * 1000" | bc -l | cut -d. -f1)" \
       "cpu_qb=$(cpu "$q1 - $q0")% cpu_broker=$(cpu "$b1 - $b0")% cpu_pg_rundb=$(cpu "$db_ticks")%" \
       "cpu_machine=$(( mtot > 0 ? 100 * (mtot - midle) / mtot : 0 ))%" \
       "us_per_msg_qb=$(us "$q1 - $q0") us_per_msg_broker=$(us "$b1 - $b0") us_per_msg_pg_rundb=$(us "$db_ticks")" \
       "idle_$(echo "$idle_mem" | sed 's/ VmHWM.*//') end_${peak_mem// / end_} not_sent_after=$left load_at_start=${load0// /,}"
  if [ -n "${TOP_OUT:-}" ] && [ -f "$WORK/top-$scenario-$run.txt" ]; then cat "$WORK/top-$scenario-$run.txt" >>"$TOP_OUT"; fi
  drop_db "$rundb"
  topology_down
}

# run_bare SCENARIO RUN N INFLIGHT: the bare lapin publisher alone; prints its line.
run_bare() {
  local scenario=$1 run=$2 n=$3 inflight=$4 keyed=0 keys=0
  [ "$scenario" = keyed20k ] && { keyed=1; keys=$KEYS; }
  topology_down; topology_up
  start_consumer "$n" "$keyed"
  local load0 b0 c0 m0 b1 c1 m1 t0 t1 pub
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  b0=$(ticks_pid "$BROKER_PID"); c0=$(ticks_pid "$CONS_PID"); m0=($(ticks_machine)); t0=$(date +%s.%N)
  pub=$( /usr/bin/time -f 'pub_cpu_s=%U+%S pub_maxrss_kB=%M' ${PUB_CPUS:+taskset -c $PUB_CPUS} "$AMQP_BIN" publish --url "$AMQP_URL" --exchange "$EXCHANGE" --n "$n" \
           --inflight "$inflight" --keys "$keys" --unkeyed-routing-key none --timeout-s "$RUN_TIMEOUT" 2>"$WORK/pub.err" ) \
    || { cat "$WORK/pub.err" >&2; log "the bare publisher failed"; }
  wait_consumer
  b1=$(ticks_pid "$BROKER_PID"); c1=$(ticks_pid "$CONS_PID"); m1=($(ticks_machine)); t1=$(date +%s.%N)
  local wall mtot=$((m1[0] - m0[0])) midle=$((m1[1] - m0[1]))
  wall=$(echo "$t1 - $t0" | bc -l)
  echo "target=bare scenario=$scenario run=$run n=$n $(cat "$WORK/consumer.out") $pub $(grep -o 'pub_cpu_s=[^ ]* pub_maxrss_kB=[0-9]*' "$WORK/pub.err" || true)" \
       "cpu_broker=$(echo "scale=0; 100 * ($b1 - $b0) / ($HZ * $wall)" | bc -l)% us_per_msg_broker=$(echo "1000000 * ($b1 - $b0) / ($HZ * $n)" | bc)" \
       "cpu_machine=$(( mtot > 0 ? 100 * (mtot - midle) / mtot : 0 ))% load_at_start=${load0// /,}"
  topology_down
}

echo "# rabbitmq bench $(date -u +%FT%TZ) machine=$(nproc)cpu commit=$(git -C "$REPO_DIR" rev-parse --short HEAD) binary_sha256=$(sha256sum "$QB_BIN" | cut -c1-12) load=$(cut -d' ' -f1-3 /proc/loadavg) rabbitmq=$(rabbitmqctl -q version 2>/dev/null || echo '?') inflights=\"$INFLIGHTS\" http=$HTTP layout=$LAYOUT"
for scenario in $SCENARIOS; do
  case "$scenario" in unkeyed|keyed20k) ;; *) sed -n '2,16p' "$0" >&2; exit 2 ;; esac
  N=200000
  [ -n "${SCALE_DOWN:-}" ] && N=$((N / SCALE_DOWN))
  small=$BARE_SMALL_N; [ "$small" -gt "$N" ] && small=$N
  TEMPLATE=qb_bench_rmq_tmpl_${scenario}_$$
  load_template "$scenario" "$TEMPLATE" "$N"
  for run in $(seq 1 "$RUNS"); do
    run_queuebox "$scenario" "$run" "$N" "$TEMPLATE"
    for inflight in $INFLIGHTS; do
      n=$N; [ "$inflight" -lt 64 ] && n=$small
      run_bare "$scenario" "$run" "$n" "$inflight" | sed "s/^target=bare /target=bare inflight_setting=$inflight /"
    done
    if [ "$HTTP" = 1 ]; then
      # the existing HTTP drain path, one run, in the same round (its own template, receiver, cleanup)
      "$BENCH_DIR/run-delivery.sh" "$scenario" 1 2>>"$WORK/http.err" | grep ' run=1 ' | sed "s/^/target=http round=$run /" \
        || { tail -5 "$WORK/http.err" >&2; log "the HTTP drain failed"; }
    fi
  done
  drop_db "$TEMPLATE"
done
