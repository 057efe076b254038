#!/usr/bin/env bash
# The measured session of issue 4: the three inbox benches with the settings of RESULTS.md, raw
# lines into results/<UTC date-time>/. Bounded: about 12 minutes on the 2-core bench machine.
set -euo pipefail
DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=$DIR/results/$(date -u +%Y%m%dT%H%MZ)
mkdir -p "$OUT"
{ date -u; git -C "$DIR" rev-parse --short HEAD; nproc; free -g | sed -n 2p; uname -r; } >"$OUT/machine.txt"
"$DIR/run-ingest.sh" 3 10 2>&1 | tee "$OUT/ingest.txt"
"$DIR/run-relay.sh" 3 agg1000 null 2>&1 | tee "$OUT/relay.txt"
RUN_TIMEOUT=20 "$DIR/run-relay.sh" 1 block1000 2>&1 | tee "$OUT/relay-block.txt"
RUN_TIMEOUT=12 "$DIR/run-pull.sh" 3 agg1000 null 2>&1 | tee "$OUT/pull.txt"
"$DIR/claim-plan.sh" 50000 2>&1 | tee "$OUT/claim-plan.txt"
