#!/usr/bin/env bash
# Delivery throughput of `queuebox serve` from a pre-loaded backlog to a local HTTP receiver.
#
#   bench/run-delivery.sh SCENARIO [RUNS]        (RUNS default 3; prints one line per run and the median)
#
# SCENARIO:
#   keyed20k     200,000 rows over 20,000 keys (10 a key); rate over the whole drain
#   unkeyed      200,000 rows without a key; rate over the whole drain
#   hotkey       1,000,000 rows: one key ("hot") holds 500,000, the rest over 20,000 keys (25 a key);
#                rate over the first MEASURE_N (default 100,000) deliveries, plus the hot key's own rate
#   backlog10k   10,000 / 100,000 / 1,000,000 rows waiting over 20,000 keys:
#   backlog100k  rate over the first MEASURE_N (default 10,000) deliveries
#   backlog1m
#   hotonly      20,000 rows of one key: the key's own serial rate (one row in flight at a time), over
#                the first MEASURE_N (default 2,000) deliveries
#
# Method: the rows are loaded once into a template database with INSERT ... SELECT generate_series
# (then ANALYZE, or VACUUM ANALYZE with SETTLED=1) while QueueBox is stopped; each run copies the template (CREATE DATABASE ... TEMPLATE,
# STRATEGY FILE_COPY), starts the receiver and QueueBox, and waits until the receiver has counted the
# target. The rate is (N-1) / (arrival of the N-th - arrival of the 1st), from the receiver's own clock,
# so QueueBox's start-up is not in it. CPU: utime+stime deltas from /proc (QueueBox, receiver, all
# postgres processes, whole machine) over the window from ready to the target. Memory: VmRSS/VmHWM of
# QueueBox from /proc/PID/status at idle (after ready) and at the end (VmHWM = peak).
# Settings: BATCH, CONC, POLL, POOL, DEST_TRANSFORM (see lib.sh). RUN_TIMEOUT bounds each run (default 300 s).
# CLAIM_LOG=1: a separate, slower run that sets log_min_duration_statement = 0 on the run database only
# (ALTER DATABASE, as the postgres superuser through runuser) and reads the server log afterwards:
# p50/p99 of the execute time of the keyed claim, the unkeyed claim and the batched finish.
# PG_LOG names the server log (default /var/log/postgresql/postgresql-15-main.log).
# CLAIM_LOG_EXTRA=1: the same, as one extra run after the RUNS measured ones (not in the median).
# SCHEMA_SQL="DROP INDEX ...; CREATE INDEX ...": SQL run on the template after the migrations
# (lib.sh's migrate), before the rows are loaded: a schema change to measure.
source "$(dirname "$0")/lib.sh"

SCENARIO=${1:-}; RUNS=${2:-3}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
KEYS=20000
case "$SCENARIO" in
  keyed20k)    N=200000;  KIND=keyed;   TARGET=$N ;;
  unkeyed)     N=200000;  KIND=unkeyed; TARGET=$N ;;
  hotkey)      N=1000000; KIND=hot;     TARGET=${MEASURE_N:-100000} ;;
  backlog10k)  N=10000;   KIND=keyed;   TARGET=${MEASURE_N:-10000} ;;
  backlog100k) N=100000;  KIND=keyed;   TARGET=${MEASURE_N:-10000} ;;
  backlog1m)   N=1000000; KIND=keyed;   TARGET=${MEASURE_N:-10000} ;;
  hotonly)     N=20000;   KIND=single;  TARGET=${MEASURE_N:-2000} ;;
  *) sed -n '2,30p' "$0" >&2; exit 2 ;;
esac
if [ -n "${SCALE_DOWN:-}" ]; then N=$((N / SCALE_DOWN)); TARGET=$((TARGET / SCALE_DOWN)); fi  # quick trials
[ "$TARGET" -le "$N" ] || die "MEASURE_N above the backlog"
need_bins
HZ=$(getconf CLK_TCK)

TEMPLATE=qb_bench_tmpl_${SCENARIO}_$$
RUNDB=qb_bench_run_${SCENARIO}_$$
log "loading the template $TEMPLATE: $N rows ($KIND)"
new_db "$TEMPLATE"
migrate "$TEMPLATE"
case "$KIND" in
  keyed)   keyexpr="'key-' || (g % $KEYS)" ;;
  unkeyed) keyexpr="NULL" ;;
  single)  keyexpr="'hot'" ;;
  hot)     keyexpr="CASE WHEN g % 2 = 0 THEN 'hot' ELSE 'key-' || ((g / 2) % $KEYS) END" ;;
esac
load_started=$(date +%s.%N)
# IDS=ordered: ids that grow with the insert order, as time-ordered ids (UUIDv7) do, instead of the
# table's default gen_random_uuid(): rows written together then share primary-key pages.
idexpr="gen_random_uuid()"
[ "${IDS:-random}" = ordered ] && idexpr="('00000000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid"
sql "$TEMPLATE" "INSERT INTO outbox (id, topic, key, payload)
                 SELECT $idexpr, 'order.created', $keyexpr, jsonb_build_object('g', g)
                   FROM generate_series(1, $N) g"
# SETTLED=1: VACUUM the loaded rows as autovacuum does to a backlog that has waited a while (hint bits
# and visibility map set); the default is a backlog bulk-loaded the moment before QueueBox starts.
if [ "${SETTLED:-0}" = 1 ]; then
  sql "$TEMPLATE" "VACUUM (ANALYZE) outbox"
elif [ "${SETTLED:-0}" = none ]; then
  :  # no statistics at all: a backlog inserted the moment before start, before autovacuum's first look
else
  sql "$TEMPLATE" "ANALYZE outbox"
fi
log "loaded in $(echo "$(date +%s.%N) - $load_started" | bc) s"

start_receiver
results=()
total_runs=$RUNS
[ "${CLAIM_LOG_EXTRA:-0}" = 1 ] && total_runs=$((RUNS + 1))
for run in $(seq 1 "$total_runs"); do
  logged=${CLAIM_LOG:-0}
  [ "$run" -gt "$RUNS" ] && logged=1
  new_db "$RUNDB" "$TEMPLATE"
  recv /reset >/dev/null
  if [ "$logged" = 1 ]; then
    PG_LOG=${PG_LOG:-/var/log/postgresql/postgresql-15-main.log}
    log_offset=$(stat -c %s "$PG_LOG")
    runuser -u postgres -- env -u PGHOST -u PGPORT -u PGUSER -u PGPASSWORD psql -X -q -p "$PGPORT" -d postgres -c "ALTER DATABASE \"$RUNDB\" SET log_min_duration_statement = 0" >/dev/null
  fi
  m0=($(ticks_machine)); p0=$(ticks_postgres); r0=$(ticks_pid "$RECV_PID")
  t_exec=$(date +%s.%N)
  start_queuebox "$RUNDB"
  t_ready=$(date +%s.%N)
  idle_mem=$(mem "$QB_PID")
  q0=$(ticks_pid "$QB_PID"); m0=($(ticks_machine)); p0=$(ticks_postgres); r0=$(ticks_pid "$RECV_PID")
  d0=$(ticks_db_list "$RUNDB" | tr '\n' ' ')
  wal0=$(sql postgres "SELECT pg_current_wal_lsn()"); fpi0=$(sql postgres "SELECT wal_fpi FROM pg_stat_wal")
  deadline=$((SECONDS + RUN_TIMEOUT)); snap=0; count=0
  while :; do
    count=$(recv /stats | field count)
    if [ "$snap" -eq 0 ] && [ "$count" -ge $((TARGET / 2)) ]; then
      top -b -n 1 -w 200 | head -15 >"$WORK/top-$run.txt"; snap=1
    fi
    [ "$count" -ge "$TARGET" ] && break
    [ "$SECONDS" -lt "$deadline" ] || { log "run $run: timeout at $count of $TARGET"; break; }
    sleep 0.2
  done
  t_done=$(date +%s.%N)
  q1=$(ticks_pid "$QB_PID"); m1=($(ticks_machine)); p1=$(ticks_postgres); r1=$(ticks_pid "$RECV_PID")
  d1=$(ticks_db_list "$RUNDB" | tr '\n' ' ')
  wal_bytes=$(sql postgres "SELECT pg_current_wal_lsn() - '$wal0'::pg_lsn")
  fpi1=$(sql postgres "SELECT wal_fpi FROM pg_stat_wal")
  db_ticks=$(ticks_db_delta "$d0" "$d1")
  peak_mem=$(mem "$QB_PID")
  hot_sent=""
  if [ "$KIND" = hot ]; then
    hot_sent=$(sql "$RUNDB" "SELECT count(*) FROM outbox WHERE key = 'hot' AND state = 'sent'")
  fi
  stop_queuebox
  rate_line=$(recv "/rate?n=$TARGET")
  stats=$(recv /stats)
  left=""
  if [ "$TARGET" -eq "$N" ]; then
    left=$(sql "$RUNDB" "SELECT count(*) FROM outbox WHERE state <> 'sent'")
  fi
  wall=$(echo "$t_done - $t_ready" | bc -l)
  cpu() { echo "scale=0; 100 * ($1) / ($HZ * $wall)" | bc -l; }
  mtot=$((m1[0] - m0[0])); midle=$((m1[1] - m0[1]))
  line="scenario=$SCENARIO run=$run batch=$BATCH conc=$CONC poll=$POLL pool=$POOL target=$TARGET"
  line+=" $(echo "$rate_line" | tr -d '\n' | sed 's/ready=1 //')"
  line+=" start_to_ready_ms=$(echo "($t_ready - $t_exec) * 1000" | bc -l | cut -d. -f1)"
  line+=" cpu_qb=$(cpu "$q1 - $q0")% cpu_pg=$(cpu "$p1 - $p0")% cpu_recv=$(cpu "$r1 - $r0")%"
  line+=" cpu_machine=$(( mtot > 0 ? 100 * (mtot - midle) / mtot : 0 ))%"
  # CPU per delivered message: QueueBox, and the backends of this run's database only (robust on a
  # shared machine, where cpu_pg also counts other databases' work)
  line+=" cpu_pg_rundb=$(cpu "$db_ticks")% us_per_msg_qb=$(echo "1000000 * ($q1 - $q0) / ($HZ * $TARGET)" | bc)"
  line+=" us_per_msg_pg_rundb=$(echo "1000000 * $db_ticks / ($HZ * $TARGET)" | bc)"
  line+=" idle_$(echo "$idle_mem" | sed 's/ VmHWM.*//') end_${peak_mem// / end_}"
  line+=" duplicates=$(echo "$stats" | field duplicates) out_of_order=$(echo "$stats" | field out_of_order)"
  [ -n "$left" ] && line+=" not_sent_after=$left"
  # WAL written over the window (the whole server's: other databases' writes count too), per message,
  # and the full-page images in it (pg_stat_wal, which backends flush up to a second late)
  line+=" wal_bytes_per_msg=$(echo "${wal_bytes%.*} / $TARGET" | bc) wal_fpi=$((fpi1 - fpi0))"
  # the rate over the first and the ninth tenth of the measured deliveries: does it drift?
  line+=" rate_first10pct=$(recv "/rate?from=0&to=$((TARGET / 10 - 1))" | field rate)"
  line+=" rate_9th10pct=$(recv "/rate?from=$((TARGET * 8 / 10))&to=$((TARGET * 9 / 10 - 1))" | field rate)"
  [ -n "$hot_sent" ] && line+=" hot_sent=$hot_sent hot_rate=$(echo "$hot_sent / $wall" | bc)"
  if [ "$logged" = 1 ]; then
    line+=" claim_log=1"
    line+=" $(tail -c +$((log_offset + 1)) "$PG_LOG" | "$BENCH_DIR/statement-times.sh" "$RUNDB")"
  fi
  echo "$line"
  [ "$run" -le "$RUNS" ] && results+=("$(echo "$rate_line" | field rate)")
  if [ -n "${TOP_OUT:-}" ] && [ -f "$WORK/top-$run.txt" ]; then cat "$WORK/top-$run.txt" >>"$TOP_OUT"; fi
  drop_db "$RUNDB"
done
median=$(printf '%s\n' "${results[@]}" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
echo "scenario=$SCENARIO batch=$BATCH conc=$CONC poll=$POLL runs=$RUNS rates=$(IFS=,; echo "${results[*]}") median_rate=$median"
