#!/usr/bin/env bash
# Checks the Compose stack in deploy/compose/ without a container engine:
#   1. compose.yaml validates against the Compose specification's JSON schema
#      (check-jsonschema --builtin-schema vendor.compose-spec);
#   2. the stack hangs together: every ${VARIABLE} that queuebox.yml reads is passed to the
#      queuebox service, every variable compose.yaml requires (${NAME:?...}) is in .env.example,
#      the queuebox healthcheck calls server.managementPort, and every file it mounts exists
#      (the deploy/monitoring/ files too);
#   3. queuebox.yml passes `queuebox check-config` with only the variables of .env.example set.
#
#   QB_BIN   the binary (default: $CARGO_TARGET_DIR/debug/queuebox, built by scripts/test.sh)
#
# check-jsonschema lives in a venv under /var/cache/queuebox-check-jsonschema, made on first use.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR="$ROOT/deploy/compose"
TARGET=${CARGO_TARGET_DIR:-/var/cache/queuebox-target}
QB_BIN=${QB_BIN:-$TARGET/debug/queuebox}
VENV=/var/cache/queuebox-check-jsonschema
CHECK_JSONSCHEMA_VERSION=0.39.0

if [[ ! -x $QB_BIN ]]; then
  echo "check-compose: no binary at $QB_BIN (build it with cargo build -p queuebox, or set QB_BIN)" >&2
  exit 2
fi

# shellcheck source=lib/pinned-venv.sh
source "$ROOT/scripts/lib/pinned-venv.sh"
pinned_venv check-compose "$VENV" "check-jsonschema==$CHECK_JSONSCHEMA_VERSION"

status=0
summary=()

# 1. The Compose specification's schema (vendored in check-jsonschema).
if "$VENV/bin/check-jsonschema" --builtin-schema vendor.compose-spec "$DIR/compose.yaml"; then
  summary+=("compose.yaml: valid against the Compose specification schema (check-jsonschema $CHECK_JSONSCHEMA_VERSION)")
else
  summary+=("compose.yaml: INVALID against the Compose specification schema")
  status=1
fi

# 2. Cross-file consistency (ruamel.yaml comes with check-jsonschema).
if out=$("$VENV/bin/python" - "$DIR" <<'EOF'
import os, re, sys
from ruamel.yaml import YAML

d = sys.argv[1]
yaml = YAML(typ="safe")
compose = yaml.load(open(os.path.join(d, "compose.yaml")))
config_text = open(os.path.join(d, "queuebox.yml")).read()
config = yaml.load(config_text)
env_example = {}
for line in open(os.path.join(d, ".env.example")):
    m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", line.strip())
    if m:
        env_example[m.group(1)] = m.group(2)
errors = []
services = compose["services"]
qb = services["queuebox"]

# Variables queuebox.yml reads (comments left out) must reach the container.
live = "\n".join(l.split(" #")[0] for l in config_text.splitlines() if not l.lstrip().startswith("#"))
read = sorted(set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}", live)))
passed = qb.get("environment", {})
for name in read:
    if name not in passed:
        errors.append(f"queuebox.yml reads ${{{name}}}, which compose.yaml does not pass to the queuebox service")

# Variables compose.yaml requires must be in .env.example.
required = sorted(set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*):\?", open(os.path.join(d, "compose.yaml")).read())))
for name in required:
    if name not in env_example:
        errors.append(f"compose.yaml requires ${{{name}}}, which .env.example does not set")

# The healthcheck must call the management port (the data port answers 404 on /health/live).
mgmt = config.get("server", {}).get("managementPort")
test = " ".join(qb.get("healthcheck", {}).get("test", []))
if mgmt is None:
    errors.append("queuebox.yml sets no server.managementPort")
elif f"localhost:{mgmt}/health/live" not in test:
    errors.append(f"the queuebox healthcheck ({test!r}) does not call /health/live on the management port {mgmt}")
ports = " ".join(str(p) for p in qb.get("ports", []))
if f":{mgmt}" not in ports:
    errors.append(f"the management port {mgmt} is not among the queuebox service's ports ({ports})")
if not qb.get("depends_on", {}).get("postgres"):
    errors.append("the queuebox service does not depend on postgres")

# PostgreSQL must run with wal_level=logical, for capture.
if "wal_level=logical" not in services["postgres"].get("command", []):
    errors.append("the postgres service does not run with wal_level=logical")

# Every healthcheck, every profile, every mounted file.
for name, svc in services.items():
    if "healthcheck" not in svc:
        errors.append(f"service {name} has no healthcheck")
profiles = sorted({p for svc in services.values() for p in svc.get("profiles", [])})
for wanted in ["kafka", "nats", "observe", "rabbitmq"]:
    if wanted not in profiles:
        errors.append(f"no service has the profile {wanted}")
mounts = 0
for name, svc in services.items():
    for volume in svc.get("volumes", []):
        source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source", "")
        if source.startswith("."):
            mounts += 1
            if not os.path.exists(os.path.normpath(os.path.join(d, source))):
                errors.append(f"service {name} mounts {source}, which does not exist")
for e in errors:
    print("  " + e, file=sys.stderr)
print(f"{len(services)} services, profiles {','.join(profiles)}, {mounts} mounted files, "
      f"{len(read)} variables read by queuebox.yml, {len(required)} required by compose.yaml")
sys.exit(1 if errors else 0)
EOF
); then
  summary+=("consistency: $out")
else
  summary+=("consistency: FAILED ($out)")
  status=1
fi

# 3. queuebox check-config with the variables of .env.example only (env -i: nothing from CI leaks in).
vars=()
while IFS= read -r line; do
  [[ $line =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] && vars+=("$line")
done <"$DIR/.env.example"
if log=$(env -i PATH="$PATH" "${vars[@]}" "$QB_BIN" --config "$DIR/queuebox.yml" check-config 2>&1); then
  summary+=("queuebox.yml: check-config passed with the ${#vars[@]} variables of .env.example")
else
  echo "$log" >&2
  summary+=("queuebox.yml: check-config FAILED")
  status=1
fi

echo "check-compose summary:"
printf '  %s\n' "${summary[@]}"
if ((status != 0)); then
  echo "check-compose: FAILED" >&2
fi
exit "$status"
