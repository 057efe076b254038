#!/usr/bin/env bash
# Evaluations a second of queuebox-jsonata beside jsonata-js 2.2.2 on the three
# representative transform expressions (envelope, order summary, redaction; JSON text in and out, compiled once,
# single-threaded), in the same run: each implementation is run RUNS times,
# alternately; every run prints the median of 3 rounds of N evaluations per
# workload. Usage: bench/jsonata-js/compare.sh [N] [RUNS]   (defaults 100000, 3)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
n=${1:-100000}
runs=${2:-3}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/var/cache/qb-target-jsonata}
(cd "$root" && cargo build -q --release -p queuebox-jsonata --example bench)
[ -d "$here/node_modules/jsonata" ] || (cd "$here" && npm ci --silent)
ours="$CARGO_TARGET_DIR/release/examples/bench"
echo "# $(date -u +%FT%TZ) $(uname -m), $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# rustc: $(rustc --version); node: $(node --version)"
for r in $(seq 1 "$runs"); do
  echo "## run $r"
  (cd "$here" && node bench.js "$n" 3) | grep median | sed 's/^/jsonata-js /'
  "$ours" "$n" 3 | grep median | sed 's/^/queuebox-jsonata /'
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
