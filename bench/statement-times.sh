#!/usr/bin/env bash
# Reads PostgreSQL server log lines (log_min_duration_statement = 0, log_line_prefix '%m [%p] %q%u@%d ')
# on stdin and prints p50/p99 (ms) of the execute time of QueueBox's claim and finish statements in
# database $1: claim_keyed (WITH RECURSIVE walk ...), claim_unkeyed (WITH locked AS ...), claim_released
# (WITH heads AS ...), finish (UPDATE ...;
# renewals, rare, count here too) and pending_stats (the gauge query, every pendingGaugeIntervalMs),
# each with its count, p50, p99 and total execute time in the window.
set -euo pipefail
db=$1
grep -F "@$db " | grep -E 'duration: [0-9.]+ ms  execute ' | awk '
  {
    match($0, /duration: [0-9.]+ ms/); d = substr($0, RSTART + 10, RLENGTH - 13) + 0
    i = index($0, " execute "); rest = substr($0, i + 9); j = index(rest, ": "); stmt = substr(rest, j + 2)
    if (stmt ~ /^WITH RECURSIVE walk/) k = "claim_keyed"
    else if (stmt ~ /^WITH locked AS/) k = "claim_unkeyed"
    else if (stmt ~ /^WITH heads AS/) k = "claim_released"
    else if (stmt ~ /^UPDATE "?outbox"? t/) k = "finish"
    else if (stmt ~ /^SELECT "?topic"? AS topic,/) k = "pending_stats"
    else next
    print k, d
  }' | sort -k1,1 -k2,2n | awk '
  { v[$1, ++n[$1]] = $2; sum[$1] += $2 }
  END {
    for (k in n) {
      c = n[k]; p50 = v[k, int((c + 1) * 0.50)]; i99 = int(c * 0.99 + 0.999); if (i99 < 1) i99 = 1; if (i99 > c) i99 = c
      printf "%s_n=%d %s_p50_ms=%.3f %s_p99_ms=%.3f %s_total_ms=%.0f ", k, c, k, p50 ? p50 : v[k,1], k, v[k, i99], k, sum[k]
    }
  }'
