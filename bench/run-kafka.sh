#!/usr/bin/env bash
# Outbox -> Kafka (issue 14): delivery rate of `queuebox serve` with a kafka destination (acks=all,
# idempotent producer, lingerMs LINGER_MS, default 1) from a pre-loaded backlog, against, in the same session and
# interleaved round by round,
#   (a) the bare rdkafka producer of bench/kafka (`qb-bench-kafka publish`) with the same producer
#       settings and the same records (headers, key, value), at most INFLIGHTS records waiting for
#       their acknowledgement, publishing alone to a topic like QueueBox's;
#   (b) QueueBox's own HTTP drain: `run-delivery.sh SCENARIO 1` (bench receiver).
#
#   bench/run-kafka.sh [RUNS] [SCENARIOS]          (RUNS default 3; SCENARIOS default "unkeyed keyed20k")
#
# SCENARIO: unkeyed   200,000 rows without a key (records without a key)
#           keyed20k  200,000 rows over 20,000 keys (10 a key; record key = row key); payload
#                     {"g": insert order}
# SCALE_DOWN=20 divides the row counts for a quick trial.
#
# Method (the habits of run-rabbitmq.sh): the rows are loaded once into a template database while
# QueueBox is stopped; each QueueBox run copies it (CREATE DATABASE ... TEMPLATE, FILE_COPY),
# creates a fresh topic of PARTITIONS partitions (name ends in the script's pid and a counter),
# starts the timing consumer (`qb-bench-kafka consume`: every partition assigned from its start,
# fetch wait 5 ms, the arrival of each record on its own clock, duplicates by x-message-id,
# per-key order of the payload field g), then QueueBox with one kafka destination (that topic,
# keyTemplate "{{ key }}", timeoutMs 30000) and waits until the consumer counted every row
# (RUN_TIMEOUT bound). Rate = (N-1) / (last arrival - first arrival) on the consumer's clock, so
# start-up is not in it; the same consumer measures the bare producer. Cross-checks: `ts_rate`
# (the same over the records' create timestamps, set when the producer took each record) and
# `db_rate` ((N-1) / (max - min updated_at) of the sent rows).
# CPU: utime+stime deltas from /proc over the window ready -> last arrival, for QueueBox, the
# broker (the kafka.Kafka JVM), the run database's backends and the whole machine.
# Memory: VmRSS/VmHWM of QueueBox at ready and at the end (VmHWM = the peak of the run).
# Settings: BATCH CONC POLL POOL (lib.sh; the measured session uses 500/64/100/10 as the RabbitMQ
# pass), INFLIGHTS ("64 512": 64 = outbox.concurrency of the measured session, the comparable
# setting), PARTITIONS (4), HTTP (1: run the HTTP drain each round), KAFKA_BOOTSTRAP
# (QB_TEST_KAFKA_BOOTSTRAP, else 127.0.0.1:9092), LINGER_MS (1: the destination's lingerMs, and the
# bare producer's linger.ms, so both keep the same settings). Diagnosis only: BARE_LINGER_MS
# (LINGER_MS) sets the bare producer's linger.ms alone; QB_LINGERS ("1 5") runs QueueBox once per
# lingerMs in each round, interleaved; QueueBox's line ends with mean_publish_ms and
# mean_processing_ms from its /metrics (publish duration, and delivery start to finish queued).
# At the end it runs inbox/run-kafka-ingest.sh RUNS INGEST_ROWS (100000) unless INGEST=0.
source "$(dirname "$0")/lib.sh"

RUNS=${1:-3}
SCENARIOS=${2:-unkeyed keyed20k}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
INFLIGHTS=${INFLIGHTS:-64 512}
PARTITIONS=${PARTITIONS:-4}
HTTP=${HTTP:-1}
KAFKA_BOOTSTRAP=${KAFKA_BOOTSTRAP:-${QB_TEST_KAFKA_BOOTSTRAP:-127.0.0.1:9092}}
KAFKA_BIN=$BENCH_BIN_DIR/qb-bench-kafka
KEYS=20000
LINGER_MS=${LINGER_MS:-1}
BENCH_LINGER_MS=$LINGER_MS
QB_LINGERS=${QB_LINGERS:-$LINGER_MS}
HZ=$(getconf CLK_TCK)
need_bins
if ! [ -x "$KAFKA_BIN" ]; then
  log "building bench/kafka"
  (cd "$BENCH_DIR/kafka" && CARGO_TARGET_DIR=${BENCH_BIN_DIR%/release} cargo build --release -q) || die "bench/kafka build failed"
fi
BROKER_PID=$(pgrep -o -f 'kafka\.Kafka ' || true)
[ -n "$BROKER_PID" ] || die "no Kafka broker (kafka.Kafka) running: bash scripts/services.sh"

kafka() { "$KAFKA_BIN" "$@" --bootstrap "$KAFKA_BOOTSTRAP"; }
TOPIC=
TOPIC_N=0
topic_up() {
  TOPIC_N=$((TOPIC_N + 1))
  TOPIC=qb-bench-$$-$TOPIC_N
  kafka create --topic "$TOPIC" --partitions "$PARTITIONS" --timeout-s 60
}
topic_down() { [ -z "$TOPIC" ] || kafka delete --topic "$TOPIC" --timeout-s 30 2>/dev/null || true; TOPIC=; }
# the cleanup of lib.sh stops processes and drops databases; this also deletes the topic in use
trap 'topic_down; _cleanup' EXIT

CONS_PID=
# start_consumer N KEYED(0|1): the timing consumer on $TOPIC, output in $WORK/consumer.out
start_consumer() {
  local n=$1 keyed=$2 extra=()
  [ "$keyed" = 1 ] && extra=(--keyed)
  rm -f "$WORK/consumer.ready"
  kafka consume --topic "$TOPIC" --expect "$n" --timeout-s "$RUN_TIMEOUT" --ready-file "$WORK/consumer.ready" "${extra[@]}" \
    >"$WORK/consumer.out" 2>"$WORK/consumer.err" &
  CONS_PID=$!
  _PIDS+=("$CONS_PID")
  for _ in $(seq 1 600); do
    [ -f "$WORK/consumer.ready" ] && return 0
    kill -0 "$CONS_PID" 2>/dev/null || { cat "$WORK/consumer.err" >&2; die "the consumer exited"; }
    sleep 0.05
  done
  die "the consumer did not start"
}
wait_consumer() { wait "$CONS_PID" 2>/dev/null || { cat "$WORK/consumer.err" >&2; log "the consumer failed"; }; }

# The QueueBox configuration: one kafka destination, every topic routed to it.
write_kafka_config() {
  local db=$1 file=$2
  { config_head "$db"; cat <<EOF
destinations:
  kafka:
    type: kafka
    bootstrapServers: $KAFKA_BOOTSTRAP
    topic: $TOPIC
    keyTemplate: "{{ key }}"
    timeoutMs: 30000
    lingerMs: $LINGER_MS
routes:
  - topicPattern: "**"
    destination: kafka
admin:
  enabled: false
EOF
  } >"$file"
}
start_qb_kafka() {
  local db=$1 cfg=$WORK/qb-kafka-$1.yml
  write_kafka_config "$db" "$cfg"
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

# run_queuebox SCENARIO RUN N TEMPLATE: one QueueBox -> Kafka drain; prints its line.
run_queuebox() {
  local scenario=$1 run=$2 n=$3 template=$4 keyed=0 rundb=qb_bench_kafka_run_$$
  [ "$scenario" = keyed20k ] && keyed=1
  topic_up
  new_db "$rundb" "$template"
  start_consumer "$n" "$keyed"
  local load0 t_exec t_ready idle_mem q0 b0 m0 d0 q1 b1 m1 d1 peak_mem
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  t_exec=$(date +%s.%N)
  start_qb_kafka "$rundb"
  t_ready=$(date +%s.%N)
  idle_mem=$(mem "$QB_PID")
  q0=$(ticks_pid "$QB_PID"); b0=$(ticks_pid "$BROKER_PID"); m0=($(ticks_machine))
  d0=$(ticks_db_list "$rundb" | tr '\n' ' ')
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
  # QueueBox's own view: the mean time a publish took (the broker's acknowledgement included) and
  # the mean time a row took from the start of its delivery to its finish being queued
  local metrics publish_ms processing_ms
  metrics=$(curl -fs "http://127.0.0.1:$QB_PORT/metrics" || true)
  publish_ms=$(awk '/^queuebox_outbox_publish_duration_seconds_sum/ {s=$NF} /^queuebox_outbox_publish_duration_seconds_count/ {c=$NF} END {if (c > 0) printf "%.2f", 1000 * s / c; else print "?"}' <<<"$metrics")
  processing_ms=$(awk '/^queuebox_outbox_processing_duration_seconds_sum/ {s=$NF} /^queuebox_outbox_processing_duration_seconds_count/ {c=$NF} END {if (c > 0) printf "%.2f", 1000 * s / c; else print "?"}' <<<"$metrics")
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
  echo "target=queuebox scenario=$scenario run=$run n=$n batch=$BATCH conc=$CONC poll=$POLL pool=$POOL partitions=$PARTITIONS linger_ms=$LINGER_MS $cons db_rate=$db_rate" \
       "start_to_ready_ms=$(echo "($t_ready - $t_exec) * 1000" | bc -l | cut -d. -f1)" \
       "cpu_qb=$(cpu "$q1 - $q0")% cpu_broker=$(cpu "$b1 - $b0")% cpu_pg_rundb=$(cpu "$db_ticks")%" \
       "cpu_machine=$(( mtot > 0 ? 100 * (mtot - midle) / mtot : 0 ))%" \
       "us_per_msg_qb=$(us "$q1 - $q0") us_per_msg_broker=$(us "$b1 - $b0") us_per_msg_pg_rundb=$(us "$db_ticks")" \
       "idle_$(echo "$idle_mem" | sed 's/ VmHWM.*//') end_${peak_mem// / end_} not_sent_after=$left load_at_start=${load0// /,}" \
       "mean_publish_ms=$publish_ms mean_processing_ms=$processing_ms"
  if [ -n "${TOP_OUT:-}" ] && [ -f "$WORK/top-$scenario-$run.txt" ]; then cat "$WORK/top-$scenario-$run.txt" >>"$TOP_OUT"; fi
  drop_db "$rundb"
  topic_down
}

# run_bare SCENARIO RUN N INFLIGHT: the bare rdkafka producer alone; prints its line.
run_bare() {
  local scenario=$1 run=$2 n=$3 inflight=$4 keyed=0 keys=0
  [ "$scenario" = keyed20k ] && { keyed=1; keys=$KEYS; }
  topic_up
  start_consumer "$n" "$keyed"
  local load0 b0 m0 b1 m1 t0 t1 pub
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  b0=$(ticks_pid "$BROKER_PID"); m0=($(ticks_machine)); t0=$(date +%s.%N)
  pub=$( /usr/bin/time -f 'pub_cpu_s=%U+%S pub_maxrss_kB=%M' "$KAFKA_BIN" publish --bootstrap "$KAFKA_BOOTSTRAP" --topic "$TOPIC" --n "$n" \
           --inflight "$inflight" --keys "$keys" --linger-ms "${BARE_LINGER_MS:-$LINGER_MS}" --message-timeout-ms 30000 --timeout-s "$RUN_TIMEOUT" 2>"$WORK/pub.err" ) \
    || { cat "$WORK/pub.err" >&2; log "the bare producer failed"; }
  wait_consumer
  b1=$(ticks_pid "$BROKER_PID"); m1=($(ticks_machine)); t1=$(date +%s.%N)
  local wall mtot=$((m1[0] - m0[0])) midle=$((m1[1] - m0[1]))
  wall=$(echo "$t1 - $t0" | bc -l)
  echo "target=bare scenario=$scenario run=$run n=$n partitions=$PARTITIONS linger_ms=${BARE_LINGER_MS:-$LINGER_MS} $(cat "$WORK/consumer.out") $pub $(grep -o 'pub_cpu_s=[^ ]* pub_maxrss_kB=[0-9]*' "$WORK/pub.err" || true)" \
       "cpu_broker=$(echo "scale=0; 100 * ($b1 - $b0) / ($HZ * $wall)" | bc -l)% us_per_msg_broker=$(echo "1000000 * ($b1 - $b0) / ($HZ * $n)" | bc)" \
       "cpu_machine=$(( mtot > 0 ? 100 * (mtot - midle) / mtot : 0 ))% load_at_start=${load0// /,}"
  topic_down
}

KAFKA_VERSION=$(tr '\0' ' ' <"/proc/$BROKER_PID/cmdline" | grep -o 'queuebox-kafka/[0-9][0-9.]*' | head -1 | cut -d/ -f2)
echo "# kafka bench $(date -u +%FT%TZ) machine=$(nproc)cpu commit=$(git -C "$REPO_DIR" rev-parse --short HEAD) binary_sha256=$(sha256sum "$QB_BIN" | cut -c1-12) load=$(cut -d' ' -f1-3 /proc/loadavg)" \
     "kafka=${KAFKA_VERSION:-?} inflights=\"$INFLIGHTS\" partitions=$PARTITIONS http=$HTTP"
for scenario in $SCENARIOS; do
  case "$scenario" in unkeyed|keyed20k) ;; *) sed -n '2,16p' "$0" >&2; exit 2 ;; esac
  N=200000
  [ -n "${SCALE_DOWN:-}" ] && N=$((N / SCALE_DOWN))
  TEMPLATE=qb_bench_kafka_tmpl_${scenario}_$$
  load_template "$scenario" "$TEMPLATE" "$N"
  for run in $(seq 1 "$RUNS"); do
    for LINGER_MS in $QB_LINGERS; do
      run_queuebox "$scenario" "$run" "$N" "$TEMPLATE"
    done
    LINGER_MS=$BENCH_LINGER_MS
    for inflight in $INFLIGHTS; do
      run_bare "$scenario" "$run" "$N" "$inflight" | sed "s/^target=bare /target=bare inflight_setting=$inflight /"
    done
    if [ "$HTTP" = 1 ]; then
      # the existing HTTP drain path, one run, in the same round (its own template, receiver, cleanup)
      "$BENCH_DIR/run-delivery.sh" "$scenario" 1 2>>"$WORK/http.err" | grep ' run=1 ' | sed "s/^/target=http round=$run /" \
        || { tail -5 "$WORK/http.err" >&2; log "the HTTP drain failed"; }
    fi
  done
  drop_db "$TEMPLATE"
done
# Kafka -> inbox against HTTP ingestion, in the same session (bench/inbox/run-kafka-ingest.sh)
if [ "${INGEST:-1}" = 1 ]; then
  "$BENCH_DIR/inbox/run-kafka-ingest.sh" "$RUNS" "${INGEST_ROWS:-100000}"
fi
