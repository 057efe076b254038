#!/usr/bin/env bash
# Ingestion: requests a second and p50/p99 latency of POST /inbox/bench, QueueBox (relay off)
# beside the salvo + sqlx yardstick (baseline/), same database, same table, same load.
#
#   bench/inbox/run-ingest.sh [RUNS] [DURATION_S]
#
# Environment: THREADS (wrk -t, 2), CONNS (wrk -c, 64), WARMUP_S (2), MODES ("unique half"),
# TARGETS ("queuebox baseline"), POOL (10), SCHEMA_SQL (lib.sh's migrate). Each run of a target and mode: TRUNCATE the inbox,
# start the server, WARMUP_S of load (not counted), DURATION_S measured, stop the server. Runs
# interleave the targets (qb, base, qb, base, ...) so a drift of the shared machine hits both.
# Prints one line per run and a median line per target and mode. Bounded: each wrk run has its own
# -d and --timeout, each server start 30 s.
# The cost of signature verification: TARGETS="queuebox-sig queuebox-verify" MODES=unique. Both
# targets POST the same pre-signed Standard Webhooks requests (presign.py, post-signed.lua; SIGNED_N
# of them, default 400,000); queuebox-verify's source checks them (auth standardWebhooks),
# queuebox-sig's has no auth.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=${1:-3}
DURATION=${2:-10}
THREADS=${THREADS:-2}
CONNS=${CONNS:-64}
WARMUP_S=${WARMUP_S:-2}
MODES=${MODES:-unique half}
TARGETS=${TARGETS:-queuebox baseline}

command -v wrk >/dev/null || die "wrk is missing: apt-get install -y wrk"
need_qb
case " $TARGETS " in *" baseline "*) build_tool baseline "$BASELINE_BIN" ;; esac

DB=qb_bench4_ingest
new_db "$DB"
migrate "$DB"
log "database $DB migrated; $RUNS runs x ${DURATION}s, wrk -t$THREADS -c$CONNS, pool $POOL"

case " $TARGETS " in *" queuebox-sig "*|*" queuebox-verify "*)
  SIG_SECRET=$(printf 'bench-signing-secret-0123456789' | base64)
  python3 "$INBOX_BENCH_DIR/presign.py" "$WORK/warm.tsv" 60000 warm "$SIG_SECRET"
  python3 "$INBOX_BENCH_DIR/presign.py" "$WORK/main.tsv" "${SIGNED_N:-400000}" main "$SIG_SECRET" ;;
esac

RES=$WORK/ingest.txt
: >"$RES"
for run in $(seq 1 "$RUNS"); do
  for mode in $MODES; do
    for target in $TARGETS; do
      sql "$DB" "TRUNCATE inbox; TRUNCATE outbox" >/dev/null
      sql "$DB" "CHECKPOINT" >/dev/null 2>&1 || true
      case $target in
        queuebox) start_queuebox "$DB" false; port=$QB_PORT ;;
        baseline) start_baseline "$DB"; port=$BASE_PORT ;;
        queuebox-sig) start_queuebox "$DB" false; port=$QB_PORT ;;
        queuebox-verify)
          auth_block=$(printf '    auth:\n      type: standardWebhooks\n      secrets: ["whsec_%s"]\n      timestampTolerance: 86400000\n_' "$SIG_SECRET")
          # Set for this call only: the next queuebox-sig start must not see it.
          SOURCE_AUTH=${auth_block%_} start_queuebox "$DB" false; port=$QB_PORT
          # The check is on: a request with a wrong signature is refused.
          code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$port/inbox/bench" \
            -H 'Content-Type: application/json' -H 'webhook-id: probe' -H "webhook-timestamp: $(date +%s)" \
            -H 'webhook-signature: v1,AAAA' -d '{"id":"probe","type":"created"}')
          [ "$code" = 401 ] || die "queuebox-verify answered $code to a wrong signature, not 401" ;;
        *) die "unknown target $target" ;;
      esac
      url="http://127.0.0.1:$port/inbox/bench"
      tag="r$run-$target-$mode-$$"
      case $target in
        queuebox-sig|queuebox-verify)
          wrk -t"$THREADS" -c"$CONNS" -d"${WARMUP_S}s" --timeout 5s -s "$INBOX_BENCH_DIR/post-signed.lua" "$url" -- "$WORK/warm.tsv" "$THREADS" >/dev/null
          line=$(wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --timeout 5s -s "$INBOX_BENCH_DIR/post-signed.lua" "$url" -- "$WORK/main.tsv" "$THREADS" | grep '^rps=') ;;
        *)
          wrk -t"$THREADS" -c"$CONNS" -d"${WARMUP_S}s" --timeout 5s -s "$INBOX_BENCH_DIR/post.lua" "$url" -- "w$tag" "$mode" >/dev/null
          line=$(wrk -t"$THREADS" -c"$CONNS" -d"${DURATION}s" --timeout 5s -s "$INBOX_BENCH_DIR/post.lua" "$url" -- "m$tag" "$mode" | grep '^rps=') ;;
      esac
      rows=$(sql "$DB" "SELECT count(*) FROM inbox")
      case $target in queuebox*) stop_queuebox ;; baseline) stop_baseline ;; esac
      echo "run=$run target=$target mode=$mode $line rows=$rows" | tee -a "$RES"
    done
  done
done

f() { tr ' ' '\n' | sed -n "s/^$1=//p"; }
echo "# medians of $RUNS runs of ${DURATION}s, wrk -t$THREADS -c$CONNS, pool $POOL"
for mode in $MODES; do
  for target in $TARGETS; do
    sel=$(grep " target=$target mode=$mode " "$RES" || true)
    echo "median target=$target mode=$mode rps=$(echo "$sel" | f rps | median) p50_us=$(echo "$sel" | f p50_us | median) p99_us=$(echo "$sel" | f p99_us | median)"
  done
  # a target left out of TARGETS has no lines: grep finds none, which is not a failure here
  q=$( { grep " target=queuebox mode=$mode " "$RES" || true; } | f rps | median)
  b=$( { grep " target=baseline mode=$mode " "$RES" || true; } | f rps | median)
  if [ "$q" != n/a ] && [ "$b" != n/a ]; then echo "ratio mode=$mode queuebox/baseline=$(echo "scale=3; $q / $b" | bc)"; fi
  v=$( { grep " target=queuebox-verify mode=$mode " "$RES" || true; } | f rps | median)
  s=$( { grep " target=queuebox-sig mode=$mode " "$RES" || true; } | f rps | median)
  if [ "$v" != n/a ] && [ "$s" != n/a ]; then echo "ratio mode=$mode verify/sig=$(echo "scale=3; $v / $s" | bc)"; fi
done
