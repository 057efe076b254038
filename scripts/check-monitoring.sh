#!/usr/bin/env bash
# Checks deploy/monitoring/ with the tools its users run:
#   - promtool check rules  alerts.yml
#   - promtool test rules   alerts.test.yml (each alert fires on a bad series, quiet on a healthy one)
#   - promtool check config prometheus.yml (which loads alerts.yml too)
#   - the files against the docs: every metric and label an alert or a dashboard query names is in
#     docs/reference/metrics.md, every runbook_url's section exists in docs/operations/runbook.md,
#     every alert has a firing and a quiet unit test, every panel uses the provisioned data source.
# promtool comes from Debian's `prometheus` package, installed with apt-get when missing.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
MON=$ROOT/deploy/monitoring

as_root() { if [[ $(id -u) == 0 ]]; then "$@"; else sudo "$@"; fi; }
apt_install() {
  echo "check-monitoring: installing Debian package(s) $* with apt-get"
  if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >/dev/null; then
    as_root apt-get update -q >/dev/null
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >/dev/null
  fi
}
command -v promtool >/dev/null || apt_install prometheus
python3 -c 'import yaml' 2>/dev/null || apt_install python3-yaml

echo "check-monitoring: $(promtool --version 2>&1 | head -1)"
cd "$MON"
promtool check rules alerts.yml
promtool test rules alerts.test.yml
promtool check config prometheus.yml

python3 - "$ROOT" <<'PY'
import json, re, sys, yaml
from pathlib import Path

root = Path(sys.argv[1])
mon = root / "deploy/monitoring"
errors = []

# Families and label names of docs/reference/metrics.md (the tables with Metric, Type, Labels).
families, labels, values = {}, set(), {}
for line in (root / "docs/reference/metrics.md").read_text().splitlines():
    m = re.match(r"\| `([a-z_]+)` \| (counter|gauge|summary) \| ([^|]*) \|", line)
    if m:
        names = set(re.findall(r"`([a-z_]+)` \(", m.group(3)))
        families[m.group(1)] = (m.group(2), names)
        labels |= names
        for label, vals in re.findall(r"`([a-z_]+)` \(([^)]*)\)", m.group(3)):
            if "`" in vals:
                values.setdefault(label, set()).update(re.findall(r"`([^`]*)`", vals))
labels |= {"quantile", "instance", "job"}  # summaries' quantile; Prometheus' target labels

def series_names(name):
    kind, _ = families.get(name, (None, None))
    yield name
    if kind == "summary":
        yield name + "_sum"
        yield name + "_count"

known = {s for f in families for s in series_names(f)} | {"up"}

def check_expr(where, expr):
    for metric in re.findall(r"\b((?:queuebox|hikaricp)_[a-z0-9_]*|queuebox|up)\b(?!\s*\()", expr):
        if metric not in known:
            errors.append(f"{where}: metric {metric} is not in docs/reference/metrics.md")
    used = set(re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr))
    used = {l.strip() for group in used for l in group.split(",") if l.strip()}
    used |= set(re.findall(r"([a-z_]+)\s*(?:=~|!=|!~|=)\s*\"", expr))
    for label in sorted(used - labels):
        errors.append(f"{where}: label {label} is not in docs/reference/metrics.md")
    for label, value in re.findall(r"([a-z_]+)\s*=\s*\"([^\"]*)\"", expr):
        if label in values and value not in values[label]:
            errors.append(f"{where}: {label}=\"{value}\" is not a value docs/reference/metrics.md lists")

# Runbook sections (GitHub/mdBook anchors of the headings).
def anchor(heading):
    return re.sub(r"[^a-z0-9 -]", "", heading.strip().lower()).replace(" ", "-")
anchors = {}
def anchors_of(path):
    if path not in anchors:
        text = path.read_text()
        anchors[path] = {anchor(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
    return anchors[path]

rules = [r for g in yaml.safe_load((mon / "alerts.yml").read_text())["groups"] for r in g["rules"]]
alerts = [r["alert"] for r in rules if "alert" in r]
for r in rules:
    check_expr(f"alerts.yml {r.get('alert')}", r["expr"])
    url = r.get("annotations", {}).get("runbook_url", "")
    path, _, frag = url.partition("#")
    if not path.startswith("docs/operations/runbook.md") or not frag:
        errors.append(f"alerts.yml {r['alert']}: runbook_url {url!r} is not docs/operations/runbook.md#<section>")
    elif frag not in anchors_of(root / path):
        errors.append(f"alerts.yml {r['alert']}: runbook.md has no section #{frag}")

tests = yaml.safe_load((mon / "alerts.test.yml").read_text())["tests"]
fires, quiet = set(), set()
for t in tests:
    for c in t.get("alert_rule_test", []):
        (fires if c.get("exp_alerts") else quiet).add(c["alertname"])
for a in alerts:
    if a not in fires:
        errors.append(f"alerts.test.yml: no test where {a} fires")
    if a not in quiet:
        errors.append(f"alerts.test.yml: no test where {a} stays quiet")

ds = yaml.safe_load((mon / "grafana/provisioning/datasources/queuebox.yml").read_text())
uids = {d["uid"] for d in ds["datasources"]}
dash = json.loads((mon / "grafana/dashboards/queuebox-dashboard.json").read_text())
panels = [p for p in dash["panels"] if p["type"] != "row"]
queries = 0
for p in panels:
    for t in [p] + p.get("targets", []):
        if t.get("datasource", {}).get("uid") not in uids:
            errors.append(f"dashboard panel {p['title']!r}: data source {t.get('datasource')} is not provisioned")
    for t in p.get("targets", []):
        queries += 1
        check_expr(f"dashboard panel {p['title']!r}", t["expr"])
    if not p.get("targets"):
        errors.append(f"dashboard panel {p['title']!r}: no query")
rows = [p["title"] for p in dash["panels"] if p["type"] == "row"]
for kind in ("HTTP", "RabbitMQ", "Kafka", "NATS"):
    if f"{kind} destinations" not in rows:
        errors.append(f"dashboard: no row for {kind} destinations")

if errors:
    print("\n".join("check-monitoring: " + e for e in errors), file=sys.stderr)
    sys.exit(1)
print(f"check-monitoring: {len(alerts)} alerts (each with a runbook section, a firing and a quiet test), "
      f"{len(panels)} dashboard panels in {len(rows)} rows with {queries} queries; "
      f"every metric and label is in docs/reference/metrics.md ({len(families)} families)")
PY
echo "check-monitoring: OK"
