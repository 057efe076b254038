#!/usr/bin/env bash
# The cost of trace export (issue 33): the HTTP drain (run-delivery.sh) and HTTP ingestion
# (inbox/run-ingest.sh, relay off) with export off against export on, sampling RATIO (10 %) of new
# traces, to an OpenTelemetry Collector this script runs (OTLP over HTTP, spans written to a file).
#
#   bench/run-tracing-cost.sh [ROUNDS]        (default 5)
#
# Arms: `off` (no export), `on` (export to the collector), `down` (export on, but to a port where no
# collector listens: what an outage costs; issue 33 asks for it within 5 % of off). Each round runs
# every part once per arm, interleaved: in the order of ARMS in odd rounds and reversed in even
# ones, so a drift of the shared machine hits every arm. A fourth arm, `base`, runs BASE_BIN (a build
# from before trace context existed) with no export: "export off costs nothing" against it. Each part is one call of the existing
# script (its own database, receiver and QueueBox start), so the method and the figures are theirs:
# the drain rate on the receiver's clock, the ingest rate from wrk. Export is turned on for a run by
# the environment only (QUEUEBOX_TELEMETRY_TRACING_ENABLED, _ENDPOINT, _SAMPLERATIO; the bench
# configurations have no telemetry section), and every run is checked: an "on" run must add spans to
# the collector's file, an "off" run none. Prints one line per run, then per part the median of
# each arm, the ratio of the medians (on/off) and the median of the rounds' own ratios.
#
# Environment:
#   PARTS       "drain ingest" (either or both)
#   SCENARIO    the run-delivery.sh scenario of the drain (default unkeyed: 200,000 rows)
#   SCALE_DOWN  passed on to run-delivery.sh (100: 2,000 rows; for a trial, not for figures)
#   INGEST_S    seconds of each measured ingest run (default 10; WARMUP_S, THREADS, CONNS as
#               run-ingest.sh takes them)
#   RATIO       the sample ratio with export on (default 0.1)
#   ARMS        "off on down" (any of them, in the order of odd rounds)
#   DOWN_PORT   the closed port the `down` arm exports to (default 18439)
#   BASE_BIN    the binary of the `base` arm (needed only when ARMS holds base)
#   OTELCOL     the collector binary (default $QB_TEST_OTELCOL, which scripts/services.sh prints)
#   OTEL_HTTP_PORT OTEL_GRPC_PORT   the collector's ports (default 18431, 18432)
#   QB_BIN      the queuebox binary both scripts run (default the release build, see bench/README.md)
# Everything else (BATCH, CONC, POLL, POOL, QB_PORT, ...) as the two scripts take it.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROUNDS=${1:-5}
PARTS=${PARTS:-drain ingest}
SCENARIO=${SCENARIO:-unkeyed}
INGEST_S=${INGEST_S:-10}
RATIO=${RATIO:-0.1}
OTELCOL=${OTELCOL:-${QB_TEST_OTELCOL:-}}
OTEL_HTTP_PORT=${OTEL_HTTP_PORT:-18431}
OTEL_GRPC_PORT=${OTEL_GRPC_PORT:-18432}
ARMS=${ARMS:-off on down}
DOWN_PORT=${DOWN_PORT:-18439}

log() { printf '[%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

[ -n "$OTELCOL" ] && [ -x "$OTELCOL" ] ||
  die "no OpenTelemetry Collector: run \`eval \"\$(bash scripts/services.sh)\"\` (QB_TEST_OTELCOL) or set OTELCOL"
# The export settings come from the environment of each run only.
unset QUEUEBOX_TELEMETRY_TRACING_ENABLED QUEUEBOX_TELEMETRY_TRACING_ENDPOINT \
  QUEUEBOX_TELEMETRY_TRACING_SAMPLERATIO OTEL_EXPORTER_OTLP_ENDPOINT OTEL_TRACES_SAMPLER OTEL_TRACES_SAMPLER_ARG

WORK=$(mktemp -d /tmp/qb-bench-tracing.XXXXXX)
COLLECTOR_PID=
cleanup() {
  if [ -n "$COLLECTOR_PID" ] && kill -0 "$COLLECTOR_PID" 2>/dev/null; then
    kill -TERM "$COLLECTOR_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$COLLECTOR_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$COLLECTOR_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

SPANS=$WORK/traces.jsonl
cat >"$WORK/collector.yaml" <<EOF
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$OTEL_GRPC_PORT
      http:
        endpoint: 127.0.0.1:$OTEL_HTTP_PORT
exporters:
  file:
    path: $SPANS
    flush_interval: 1s
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
EOF
"$OTELCOL" --config "$WORK/collector.yaml" >"$WORK/collector.log" 2>&1 &
COLLECTOR_PID=$!
for _ in $(seq 1 200); do
  (exec 3<>"/dev/tcp/127.0.0.1/$OTEL_HTTP_PORT") 2>/dev/null && break
  kill -0 "$COLLECTOR_PID" 2>/dev/null || { cat "$WORK/collector.log" >&2; die "the collector exited"; }
  sleep 0.1
done
(exec 3<>"/dev/tcp/127.0.0.1/$OTEL_HTTP_PORT") 2>/dev/null || die "the collector did not open port $OTEL_HTTP_PORT"
log "collector on 127.0.0.1:$OTEL_HTTP_PORT; $ROUNDS rounds of: $PARTS; arms: $ARMS; sample ratio $RATIO with export on"
if (exec 3<>"/dev/tcp/127.0.0.1/$DOWN_PORT") 2>/dev/null; then die "DOWN_PORT $DOWN_PORT answers: the down arm needs a closed port"; fi

HZ=$(getconf CLK_TCK)
# collector_ticks: the collector's user + system CPU time so far, in clock ticks.
collector_ticks() { awk '{print $14 + $15}' "/proc/$COLLECTOR_PID/stat"; }

# spans_now: the spans in the collector's file so far (each line holds a batch of them).
spans_now() {
  if [ -f "$SPANS" ]; then { grep -o '"spanId"' "$SPANS" || true; } | wc -l; else echo 0; fi
}

# one_run PART ARM: runs the part's script once with export ARM (off|on|down); prints its rate.
one_run() {
  local part=$1 arm=$2 out=$WORK/$1-$2.out before after rate
  local -a env_on=()
  if [ "$arm" = on ]; then
    env_on=(QUEUEBOX_TELEMETRY_TRACING_ENABLED=true
      QUEUEBOX_TELEMETRY_TRACING_ENDPOINT="http://127.0.0.1:$OTEL_HTTP_PORT"
      QUEUEBOX_TELEMETRY_TRACING_SAMPLERATIO="$RATIO")
  elif [ "$arm" = base ]; then
    [ -n "${BASE_BIN:-}" ] && [ -x "$BASE_BIN" ] || die "arm base needs BASE_BIN, an executable queuebox"
    env_on=(QB_BIN="$BASE_BIN")
  elif [ "$arm" = down ]; then
    env_on=(QUEUEBOX_TELEMETRY_TRACING_ENABLED=true
      QUEUEBOX_TELEMETRY_TRACING_ENDPOINT="http://127.0.0.1:$DOWN_PORT"
      QUEUEBOX_TELEMETRY_TRACING_SAMPLERATIO="$RATIO")
  fi
  before=$(spans_now)
  local ticks0 ticks1 qb_us=
  ticks0=$(collector_ticks)
  case $part in
    drain)
      env "${env_on[@]}" bash "$BENCH_DIR/run-delivery.sh" "$SCENARIO" 1 >"$out" 2>"$out.err" ||
        { cat "$out" "$out.err" >&2; die "run-delivery.sh failed ($arm)"; }
      rate=$(sed -n 's/.* median_rate=\([0-9.]*\).*/\1/p' "$out" | tail -1)
      qb_us=$(sed -n 's/.* us_per_msg_qb=\([0-9.]*\).*/\1/p' "$out" | tail -1) ;;
    ingest)
      env "${env_on[@]}" TARGETS=queuebox MODES=unique bash "$BENCH_DIR/inbox/run-ingest.sh" 1 "$INGEST_S" \
        >"$out" 2>"$out.err" || { cat "$out" "$out.err" >&2; die "run-ingest.sh failed ($arm)"; }
      rate=$(sed -n 's/^median target=queuebox mode=unique rps=\([0-9.]*\).*/\1/p' "$out" | tail -1) ;;
    *) die "unknown part $part (drain, ingest)" ;;
  esac
  [ -n "$rate" ] || { cat "$out" "$out.err" >&2; die "no rate in the $part output ($arm)"; }
  # The collector flushes its file every second; the export thread sends within a second of a span.
  sleep 2.5
  after=$(spans_now)
  ticks1=$(collector_ticks)
  if [ "$arm" = on ] && [ "$after" -le "$before" ]; then
    die "export on, yet the collector received no span during the $part run"
  fi
  if [ "$arm" != on ] && [ "$after" -ne "$before" ]; then
    die "export $arm, yet the collector received $((after - before)) spans during the $part run"
  fi
  # The collector's CPU over the run and the flush after it: work the export adds to the machine,
  # which on these shared cores competes with the drain.
  echo "$rate $((after - before)) $(echo "scale=2; ($ticks1 - $ticks0) / $HZ" | bc) ${qb_us:-n/a}"
}

RES=$WORK/results.txt
: >"$RES"
for round in $(seq 1 "$ROUNDS"); do
  if [ $((round % 2)) -eq 1 ]; then arms=$ARMS; else arms=$(echo "$ARMS" | tr ' ' '\n' | tac | tr '\n' ' '); fi
  for part in $PARTS; do
    for arm in $arms; do
      result=$(one_run "$part" "$arm")
      read -r rate spans collector_s qb_us <<<"$result"
      echo "round=$round part=$part arm=$arm rate=$rate spans=$spans collector_cpu_s=$collector_s us_per_msg_qb=$qb_us" | tee -a "$RES"
    done
  done
done

source "$BENCH_DIR/stats.sh"
rates() { sed -n "s/.* part=$1 arm=$2 rate=\([0-9.]*\) .*/\1/p" "$RES"; }
echo "# $ROUNDS interleaved rounds; drain: run-delivery.sh $SCENARIO${SCALE_DOWN:+ (SCALE_DOWN=$SCALE_DOWN)}, msg/s; ingest: run-ingest.sh ${INGEST_S}s, requests/s; export on/down = sample ratio $RATIO"
for part in $PARTS; do
  off=$(rates "$part" off | median)
  for arm in $ARMS; do
    [ "$arm" = off ] && continue
    value=$(rates "$part" "$arm" | median)
    # The rounds' own ratios: this arm / off of the same round.
    paired=$(paste <(rates "$part" "$arm") <(rates "$part" off) | awk '$2 > 0 {print $1 / $2}' | sort -g |
      awk '{a[NR]=$1} END {if (NR==0) print "n/a"; else if (NR%2) printf "%.3f\n", a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}')
    echo "median part=$part arm=$arm collector_cpu_s=$(sed -n "s/.* part=$part arm=$arm .* collector_cpu_s=\([0-9.]*\) .*/\1/p" "$RES" | median) us_per_msg_qb=$(sed -n "s/.* part=$part arm=$arm .* us_per_msg_qb=\([0-9.]*\)$/\1/p" "$RES" | median) (off: $(sed -n "s/.* part=$part arm=off .* us_per_msg_qb=\([0-9.]*\)$/\1/p" "$RES" | median))"
    echo "median part=$part off=$off $arm=$value ratio_of_medians=$(awk -v a="$value" -v b="$off" 'BEGIN {if (b > 0) printf "%.3f", a / b; else print "n/a"}') median_of_round_ratios=$paired"
  done
done
