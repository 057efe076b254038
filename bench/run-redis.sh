#!/usr/bin/env bash
# Redis Streams (issue 31): outbox -> Redis stream, delivery rate of `queuebox serve` with a redis
# destination (every row sent only once Redis answered its XADD with the entry id) from a
# pre-loaded backlog, against, interleaved round by round in the same run,
#   (a) the bare redis-crate publisher of bench/redis (`qb-bench-redis publish`): the same entry
#       shape (x-message-id, x-topic, x-attempt, x-message-key when keyed, payload {"g": i}), each
#       XADD awaited, INFLIGHT adds in flight on one multiplexed connection;
#   (b) QueueBox's own HTTP drain: `run-delivery.sh SCENARIO 1` (bench receiver).
#
#   bench/run-redis.sh [RUNS] [SCENARIOS]      (RUNS default 3; SCENARIOS default "unkeyed keyed20k")
#
# SCENARIO: unkeyed   200,000 rows without a key
#           keyed20k  200,000 rows over 20,000 keys (10 a key); payload {"g": insert order}
# SCALE_DOWN=20 divides the row counts for a quick trial.
#
# Rate (both Redis targets): `qb-bench-redis rate` waits until the stream holds N entries and
# divides N-1 by the span between the first and the last entry id's milliseconds (Redis's own
# clock), so QueueBox's start-up is not in it. `held` = N and `not_sent_after` = 0 show that
# nothing was lost. CPU: utime+stime deltas from /proc over ready -> last entry for QueueBox,
# redis-server and the run database's backends. Settings: BATCH CONC POLL POOL (lib.sh),
# INFLIGHT (256), HTTP (1), REDIS_URL.
source "$(dirname "$0")/lib.sh"

RUNS=${1:-3}
SCENARIOS=${2:-unkeyed keyed20k}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
INFLIGHT=${INFLIGHT:-256}
HTTP=${HTTP:-1}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
REDIS_BIN=$BENCH_BIN_DIR/qb-bench-redis
KEYS=20000
HZ=$(getconf CLK_TCK)
need_bins
if ! [ -x "$REDIS_BIN" ]; then
  log "building bench/redis"
  (cd "$BENCH_DIR/redis" && CARGO_TARGET_DIR=${BENCH_BIN_DIR%/release} cargo build --release -q) || die "bench/redis build failed"
fi
SERVER_PID=$(pgrep -o -x redis-server || pgrep -o -f 'redis-server ' || true)
[ -n "$SERVER_PID" ] || die "no redis-server running: bash scripts/services.sh"

STREAM="qb:bench:$$"
stream_down() { redis-cli -u "$REDIS_URL" DEL "$STREAM" >/dev/null 2>&1 || true; }
trap 'stream_down; _cleanup' EXIT

write_redis_config() {
  local db=$1 file=$2
  { config_head "$db"; cat <<YML
destinations:
  rs:
    type: redis
    url: $REDIS_URL
    stream: "$STREAM"
routes:
  - topicPattern: "**"
    destination: rs
admin:
  enabled: false
YML
  } >"$file"
}
start_qb_redis() {
  local db=$1 cfg=$WORK/qb-redis-$1.yml
  write_redis_config "$db" "$cfg"
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

# run_queuebox SCENARIO RUN N TEMPLATE: one QueueBox -> Redis drain; prints its line.
run_queuebox() {
  local scenario=$1 run=$2 n=$3 template=$4 rundb=qb_bench_redis_run_$$
  stream_down
  new_db "$rundb" "$template"
  local t_ready q0 s0 d0 q1 s1 d1 peak_mem rate t_done
  start_qb_redis "$rundb"
  t_ready=$(date +%s.%N)
  q0=$(ticks_pid "$QB_PID"); s0=$(ticks_pid "$SERVER_PID")
  d0=$(ticks_db_list "$rundb" | tr '\n' ' ')
  rate=$("$REDIS_BIN" rate --url "$REDIS_URL" --stream "$STREAM" --n "$n" --timeout-s "$RUN_TIMEOUT")
  q1=$(ticks_pid "$QB_PID"); s1=$(ticks_pid "$SERVER_PID")
  d1=$(ticks_db_list "$rundb" | tr '\n' ' ')
  peak_mem=$(mem "$QB_PID")
  t_done=$(date +%s.%N)
  sleep 0.5
  stop_queuebox
  local left db_ticks wall
  left=$(sql "$rundb" "SELECT count(*) FROM outbox WHERE state <> 'sent'")
  db_ticks=$(ticks_db_delta "$d0" "$d1")
  wall=$(echo "$t_done - $t_ready" | bc -l)
  cpu() { echo "scale=0; 100 * ($1) / ($HZ * $wall)" | bc -l; }
  echo "target=queuebox scenario=$scenario run=$run n=$n batch=$BATCH conc=$CONC poll=$POLL pool=$POOL $rate" \
       "cpu_qb=$(cpu "$q1 - $q0")% cpu_redis=$(cpu "$s1 - $s0")% cpu_pg_rundb=$(cpu "$db_ticks")%" \
       "end_${peak_mem// / end_} not_sent_after=$left load=$(cut -d' ' -f1 /proc/loadavg)"
  drop_db "$rundb"
  stream_down
}

# run_bare SCENARIO RUN N: the bare redis-crate publisher alone; prints its line.
run_bare() {
  local scenario=$1 run=$2 n=$3 keys=0 pub rate
  [ "$scenario" = keyed20k ] && keys=$KEYS
  stream_down
  pub=$("$REDIS_BIN" publish --url "$REDIS_URL" --stream "$STREAM" --n "$n" --inflight "$INFLIGHT" --keys "$keys" 2>"$WORK/pub.err") \
    || { cat "$WORK/pub.err" >&2; log "the bare publisher failed"; }
  rate=$("$REDIS_BIN" rate --url "$REDIS_URL" --stream "$STREAM" --n "$n" --timeout-s "$RUN_TIMEOUT")
  echo "target=bare scenario=$scenario run=$run n=$n inflight=$INFLIGHT $rate $pub load=$(cut -d' ' -f1 /proc/loadavg)"
  stream_down
}

echo "# redis bench $(date -u +%FT%TZ) machine=$(nproc)cpu commit=$(git -C "$REPO_DIR" rev-parse --short HEAD) binary_sha256=$(sha256sum "$QB_BIN" | cut -c1-12) load=$(cut -d' ' -f1-3 /proc/loadavg) redis-server=$(redis-server --version | awk '{print $3}') inflight=$INFLIGHT http=$HTTP"
for scenario in $SCENARIOS; do
  case "$scenario" in unkeyed|keyed20k) ;; *) sed -n '2,20p' "$0" >&2; exit 2 ;; esac
  N=200000
  [ -n "${SCALE_DOWN:-}" ] && N=$((N / SCALE_DOWN))
  TEMPLATE=qb_bench_redis_tmpl_${scenario}_$$
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
