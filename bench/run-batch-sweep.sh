#!/usr/bin/env bash
# Delivery rate across outbox.batchSize x outbox.concurrency (issue 28): one run-delivery.sh run per
# cell, unkeyed and over 20,000 keys, then a table of msg/s per cell.
#
#   bench/run-batch-sweep.sh [OUT]          (OUT: the raw log, default results/raw-<time>-batch-sweep.log)
#
# BATCHES (default "50 100 200 500 1000"), CONCS ("16 64 256"), SCENARIOS ("unkeyed keyed20k"),
# SSLMODES ("require disable": TLS to PostgreSQL, then plain TCP; the cliff of issue 28 lived on TLS
# only), SCALE_DOWN (default 2: 100,000 rows a run; 1 for the full 200,000). Each cell is one run, so
# read a single cell as +-15 %; the question the table answers is whether the rate ever falls as the
# batch grows, which a 2x cliff shows plainly.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BATCHES=${BATCHES:-"50 100 200 500 1000"}
CONCS=${CONCS:-"16 64 256"}
SCENARIOS=${SCENARIOS:-"unkeyed keyed20k"}
SSLMODES=${SSLMODES:-"require disable"}
export SCALE_DOWN=${SCALE_DOWN:-2}
OUT=${1:-$here/results/raw-$(date -u +%Y%m%dT%H%M)-batch-sweep.log}
: >"$OUT"
for ssl in $SSLMODES; do
  for scenario in $SCENARIOS; do
    for conc in $CONCS; do
      for batch in $BATCHES; do
        line=$(PG_SSLMODE=$ssl BATCH=$batch CONC=$conc bash "$here/run-delivery.sh" "$scenario" 1 2>>"$OUT.stderr" |
          grep ' run=1 ' || echo "scenario=$scenario batch=$batch conc=$conc rate=failed")
        echo "sslmode=$ssl $line" | tee -a "$OUT"
      done
    done
  done
done
# The table: one row per (sslmode, scenario, concurrency), one column per batch size.
echo
printf '| sslmode | scenario | concurrency |'; for b in $BATCHES; do printf ' %s |' "$b"; done; echo
printf '| --- | --- | --- |'; for _ in $BATCHES; do printf ' --- |'; done; echo
for ssl in $SSLMODES; do
  for scenario in $SCENARIOS; do
    for conc in $CONCS; do
      printf '| %s | %s | %s |' "$ssl" "$scenario" "$conc"
      for batch in $BATCHES; do
        rate=$(grep "^sslmode=$ssl scenario=$scenario " "$OUT" | grep " batch=$batch conc=$conc " |
          sed -n 's/.* rate=\([0-9a-z]*\).*/\1/p' | head -1)
        printf ' %s |' "${rate:-?}"
      done
      echo
    done
  done
done
