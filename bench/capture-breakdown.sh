#!/usr/bin/env bash
# Where the commit -> delivery time of each row went, from the files `DIAG_DIR=DIR run-capture.sh latency`
# leaves (DIR/<mode>-<rate>-<run>.recv, .rows, .pgbench-log).
#
#   bench/capture-breakdown.sh DIR/capture-200-1 [DIR/polling-200-1 ...]
#
# Per row (µs, one machine clock): ack = the end of its pgbench transaction (pgbench had the COMMIT's
# answer), claimed = claimed_at (start of the claim transaction that took it), arrival = the receiver's.
#   total  arrival - ack        commit acknowledged -> delivered (run-capture.sh's ack_*)
#   wake   claimed - ack        commit acknowledged -> the claim that took the row began (capture's
#                               wake-up or polling's wait, plus a claim already under way)
#   post   arrival - claimed    the claim statement and its commit, the hand-over, the HTTP request
#   commit ack - t              the INSERT + COMMIT as pgbench saw it (t = clock_timestamp() in the INSERT)
# Prints p50/p90/p99/max (ms) of each, and how many of the rows over 10 ms had wake > 5 ms or post > 5 ms.
set -euo pipefail
for pre in "$@"; do
  tmp=$(mktemp -d)
  awk '{ printf "%d%06d\n", $5, $6 }' "$pre.pgbench-log" | sort -n >"$tmp/ends"
  # id created claimed updated attempt key  /  id arrival t path
  sort -k1,1 "$pre.rows" | awk '{ print $1, $3 }' >"$tmp/rows"
  sort -k1,1 "$pre.recv" >"$tmp/recv"
  # "t arrival claimed", by t
  join "$tmp/recv" "$tmp/rows" | awk '{ print $3, $2, $5 }' | sort -n >"$tmp/tac"
  awk 'NR == FNR { e[++n] = $1; next }
       { while (j < n && e[j + 1] < $1) j++; if (j >= n) next
         ack = e[j + 1]; print $2 - ack, $3 - ack, $2 - $3, ack - $1 }' "$tmp/ends" "$tmp/tac" >"$tmp/parts"
  line="$(basename "$pre") rows=$(wc -l <"$tmp/parts")"
  for col in 1 2 3 4; do
    name=$(echo "total wake post commit" | cut -d' ' -f$col)
    line+=" $(cut -d' ' -f$col "$tmp/parts" | sort -n | awk -v name="$name" '
      { v[NR] = $1 }
      function pct(q) { return sprintf("%.2f", v[int(q * (NR - 1) + 0.5) + 1] / 1000) }
      END { printf "%s_p50/p90/p99/max_ms=%s/%s/%s/%s", name, pct(0.5), pct(0.9), pct(0.99), pct(1) }')"
  done
  line+=" $(awk '$1 > 10000 { n++; if ($2 > 5000) w++; if ($3 > 5000) p++ }
                END { printf "over_10ms=%d of_which_wake_over_5ms=%d post_over_5ms=%d", n, w, p }' "$tmp/parts")"
  echo "$line"
  rm -rf "$tmp"
done
