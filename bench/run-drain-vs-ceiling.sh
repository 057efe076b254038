#!/usr/bin/env bash
# Issue 36's comparison in one run: the HTTP drain (run-delivery.sh, unkeyed and keyed20k, 200k
# rows) against the database's own outbox cycle (../shared/bench/limit through
# run-limit-index-cost.sh, which runs it on the limit page's schema and, beside it, without
# idx_outbox_topic), interleaved round by round so a drift of the shared machine hits both.
#
#   bench/run-drain-vs-ceiling.sh [ROUNDS]       (default 3)
#
# Environment: QB_BIN, BATCH, CONC (default 500 and 64) and the rest as run-delivery.sh takes them.
# Prints each run's line and, at the end, the medians and the drain / ceiling ratios.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROUNDS=${1:-3}
export BATCH=${BATCH:-500} CONC=${CONC:-64}
RES=$(mktemp /tmp/qb-drain-vs-ceiling.XXXXXX)
trap 'rm -f "$RES"' EXIT
for round in $(seq 1 "$ROUNDS"); do
  for scenario in unkeyed keyed20k; do
    bash "$BENCH_DIR/run-delivery.sh" "$scenario" 1 2>/dev/null | grep ' run=1 ' | sed "s/^/round=$round /" | tee -a "$RES"
  done
  bash "$BENCH_DIR/run-limit-index-cost.sh" 1 2>/dev/null | grep 'variant=' | sed "s/^round=1 /round=$round /" | tee -a "$RES"
done
source "$BENCH_DIR/stats.sh"
ceiling=$(sed -n 's/.* variant=with .* msg_per_s=\([0-9]*\) .*/\1/p' "$RES" | median)
ceiling_without=$(sed -n 's/.* variant=without .* msg_per_s=\([0-9]*\) .*/\1/p' "$RES" | median)
echo "median ceiling msg_per_s=$ceiling (limit schema) $ceiling_without (without idx_outbox_topic)"
for scenario in unkeyed keyed20k; do
  rate=$(sed -n "s/.* scenario=$scenario .* rate=\([0-9]*\) .*/\1/p" "$RES" | median)
  echo "median scenario=$scenario rate=$rate of_ceiling=$(awk -v a="$rate" -v b="$ceiling" 'BEGIN {printf "%.3f", a / b}')"
done
