#!/usr/bin/env bash
# The whole measured session, in order, each step bounded; every output line goes to
# results/raw-<UTC date-time>.log (and the mid-run `top` snapshots to results/top-<...>.txt).
#   bench/run-all.sh            BEST="500 64" (batch, concurrency) is the tuned setting compared with the defaults
set -uo pipefail
cd "$(dirname "$0")"
export PGHOST=${PGHOST:-127.0.0.1} PGPORT=${PGPORT:-5432} PGUSER=${PGUSER:-queuebox} PGPASSWORD=${PGPASSWORD:-queuebox}
QB_BIN=${QB_BIN:-/var/cache/queuebox-target/release/queuebox}; export QB_BIN
# BIN_COMMIT: the commit the binary was built from, when it is not the checkout's HEAD.
BIN_COMMIT=${BIN_COMMIT:-$(git -C .. rev-parse --short HEAD)}
mkdir -p results
stamp=$(date -u +%Y%m%dT%H%M)
out=results/raw-$stamp.log
export TOP_OUT=$PWD/results/top-$stamp.txt
export RUN_TIMEOUT=${RUN_TIMEOUT:-150}
read -r BB BC <<<"${BEST:-500 64}"
step() { echo "# $(date -u +%H:%M:%S) $*" | tee -a "$out"; timeout "${STEP_TIMEOUT:-900}" "$@" 2>>"$out.stderr" | tee -a "$out"; }
{
  echo "# machine: nproc=$(nproc) mem=$(free -m | awk '/^Mem:/{print $2}')MiB $(psql -X -Atc 'select version()' -d postgres 2>/dev/null | cut -d, -f1)"
  echo "# commit: $BIN_COMMIT binary: $QB_BIN ($(sha256sum "$QB_BIN" | cut -c1-12)) date: $(date -u)"
  echo "# load: $(cat /proc/loadavg)"
} | tee -a "$out"
step ./run-idle-memory.sh 3
step ./run-startup.sh 10
step ./run-db-cycle.sh 3 4
BATCH=$BB CONC=$BC CLAIM_LOG_EXTRA=1 step ./run-delivery.sh unkeyed 3
BATCH=$BB CONC=$BC CLAIM_LOG_EXTRA=1 step ./run-delivery.sh keyed20k 3
BATCH=$BB CONC=$BC CLAIM_LOG_EXTRA=1 step ./run-delivery.sh backlog10k 3
BATCH=$BB CONC=$BC CLAIM_LOG_EXTRA=1 step ./run-delivery.sh backlog100k 3
BATCH=$BB CONC=$BC CLAIM_LOG_EXTRA=1 step ./run-delivery.sh backlog1m 3
BATCH=$BB CONC=$BC CLAIM_LOG_EXTRA=1 step ./run-delivery.sh hotkey 3
step ./run-latency.sh 2
CLAIM_LOG_EXTRA=1 step ./run-delivery.sh unkeyed 3
CLAIM_LOG_EXTRA=1 step ./run-delivery.sh keyed20k 3
POLL=10 step ./run-latency.sh 1
BATCH=$BB CONC=$BC step ./run-latency.sh 1
BATCH=$BB CONC=$BC step ./run-delivery.sh hotonly 3
step ./run-dead-entries.sh 100000
echo "# $(date -u +%H:%M:%S) done" | tee -a "$out"
