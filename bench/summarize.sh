#!/usr/bin/env bash
# Summarizes a raw log of run-all.sh (or of run-delivery.sh lines) into a markdown table:
# one row per scenario and setting: median rate of the measured runs, median CPU split, largest VmHWM,
# and the claim/finish statement times of the logged run.
#   bench/summarize.sh results/raw-XXXX.log
set -euo pipefail
awk '
function get(line, name,   n, parts, i, kv) {
  n = split(line, parts, " ")
  for (i = 1; i <= n; i++) { if (index(parts[i], name "=") == 1) return substr(parts[i], length(name) + 2) }
  return ""
}
function median(list,   n, a, i, j, t) {
  n = split(list, a, ",")
  for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
  return a[int((n + 1) / 2)]
}
/^scenario=/ && / run=/ {
  k = get($0, "scenario") " | " get($0, "batch") "/" get($0, "conc") "/" get($0, "poll")
  if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
  if (get($0, "claim_log") == "1") {
    cl[k] = sprintf("%s / %s", get($0, "claim_keyed_p50_ms"), get($0, "claim_keyed_p99_ms"))
    cu[k] = sprintf("%s / %s", get($0, "claim_unkeyed_p50_ms"), get($0, "claim_unkeyed_p99_ms"))
    fi[k] = sprintf("%s / %s", get($0, "finish_p50_ms"), get($0, "finish_p99_ms"))
    next
  }
  rate[k] = rate[k] (rate[k] == "" ? "" : ",") get($0, "rate")
  qb[k] = qb[k] (qb[k] == "" ? "" : ",") get($0, "cpu_qb") + 0
  pg[k] = pg[k] (pg[k] == "" ? "" : ",") get($0, "cpu_pg") + 0
  rc[k] = rc[k] (rc[k] == "" ? "" : ",") get($0, "cpu_recv") + 0
  h = get($0, "end_VmHWM_kB") + 0; if (h > hwm[k]) hwm[k] = h
  i = get($0, "idle_VmRSS_kB") + 0; idle[k] = i
  hs = get($0, "hot_sent"); if (hs != "") hot[k] = hot[k] (hot[k] == "" ? "" : ",") hs
}
END {
  print "| scenario | batch/conc/poll | runs (msg/s) | median msg/s | CPU % qb / pg / recv (median) | RSS after ready / peak (MiB) | keyed claim p50/p99 ms | unkeyed claim p50/p99 ms | finish p50/p99 ms |"
  print "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  for (n = 1; n <= nk; n++) {
    k = order[n]
    printf "| %s | %s | **%s** | %s / %s / %s | %.1f / %.1f | %s | %s | %s |\n", k, rate[k], median(rate[k]), median(qb[k]), median(pg[k]), median(rc[k]), idle[k] / 1024, hwm[k] / 1024, cl[k], cu[k], fi[k]
    if (hot[k] != "") printf "|  | hot key rows sent in the measured window: %s |  |  |  |  |  |  |  |\n", hot[k]
  }
}' "$@"
