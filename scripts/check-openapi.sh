#!/usr/bin/env bash
# Checks docs/openapi.yaml against the running binary with Schemathesis: every operation, positive
# and negative cases, every check (`--checks all`). Fails on any failure or 5xx, and prints how
# many operations and test cases ran.
#
#   QB_TEST_PG_URL   the test PostgreSQL server's maintenance database (scripts/services.sh prints it)
#   QB_BIN           the binary (default: $CARGO_TARGET_DIR/debug/queuebox, built by scripts/test.sh)
#   QB_OPENAPI_EXAMPLES  test cases per operation and phase (default 100)
#
# Schemathesis lives in a venv under /var/cache/queuebox-schemathesis, made on the first run.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-/var/cache/queuebox-target}
QB_BIN=${QB_BIN:-$TARGET/debug/queuebox}
VENV=/var/cache/queuebox-schemathesis
SCHEMATHESIS_VERSION=4.32.5
EXAMPLES=${QB_OPENAPI_EXAMPLES:-100}
: "${QB_TEST_PG_URL:?QB_TEST_PG_URL is not set: eval \"\$(bash scripts/services.sh)\" first}"

if [[ ! -x $QB_BIN ]]; then
  echo "check-openapi: no binary at $QB_BIN (build it with cargo build -p queuebox, or set QB_BIN)" >&2
  exit 2
fi

# The venv, reused when it holds the pinned version.
if ! "$VENV/bin/schemathesis" --version 2>/dev/null | grep -q "version $SCHEMATHESIS_VERSION\$"; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

WORK=$(mktemp -d)
DB="qb_openapi_$(date +%s)_$$"
QB_PID=""
cleanup() {
  if [[ -n $QB_PID ]]; then
    kill "$QB_PID" 2>/dev/null || true
    wait "$QB_PID" 2>/dev/null || true
  fi
  psql "$QB_TEST_PG_URL" -qAt -c "DROP DATABASE IF EXISTS \"$DB\" WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

psql "$QB_TEST_PG_URL" -qAt -v ON_ERROR_STOP=1 -c "CREATE DATABASE \"$DB\"" >/dev/null

# postgres://user:password@host:port/db -> its parts, for the documented jdbc form.
read -r PG_USER PG_PASSWORD PG_HOSTPORT < <(python3 - "$QB_TEST_PG_URL" <<'EOF'
import sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
print(urllib.parse.unquote(u.username or ""), urllib.parse.unquote(u.password or "") or "-",
      f"{u.hostname}:{u.port or 5432}")
EOF
)
[[ $PG_PASSWORD == - ]] && PG_PASSWORD=""

read -r DATA_PORT MGMT_PORT < <(python3 - <<'EOF'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
EOF
)

SOURCE_TOKEN=partner-t0ken
ADMIN_TOKEN=adm1n-t0ken
cat >"$WORK/queuebox.yml" <<EOF
server:
  httpPort: $DATA_PORT
  managementPort: $MGMT_PORT
database:
  url: jdbc:postgresql://$PG_HOSTPORT/$DB
  username: $PG_USER
  password: "$PG_PASSWORD"
  migrate: true
destinations:
  webhook:
    type: http
    baseUrl: http://127.0.0.1:9
routes:
  - topicPattern: "order.*"
    destination: webhook
sources:
  orders:
    type: http
    path: /orders
    idempotencyKeyPath: \$.id
    topic: order.received
  partners:
    type: http
    path: /partners
    idempotencyKeyPath: \$.id
    topic: order.received
    auth:
      type: bearer
      token: $SOURCE_TOKEN
admin:
  enabled: true
  auth:
    type: bearer
    token: $ADMIN_TOKEN
EOF

"$QB_BIN" serve --config "$WORK/queuebox.yml" >"$WORK/queuebox.log" 2>&1 &
QB_PID=$!

# Ready within 30 s, or the log says why not.
deadline=$((SECONDS + 30))
until curl -fsS -o /dev/null "http://127.0.0.1:$MGMT_PORT/health/ready" 2>/dev/null; do
  if ! kill -0 "$QB_PID" 2>/dev/null || ((SECONDS > deadline)); then
    echo "check-openapi: QueueBox did not become ready; its log:" >&2
    cat "$WORK/queuebox.log" >&2
    exit 1
  fi
  sleep 0.2
done

# The admin transform test answers 400 for an expression that is valid as a string but not as
# JSONata, which no schema can tell apart: 400 is an accepted answer to a valid request there.
cat >"$WORK/schemathesis.toml" <<EOF
[auth.openapi.sourceBearer]
bearer = "$SOURCE_TOKEN"

[auth.openapi.adminBearer]
bearer = "$ADMIN_TOKEN"

[[operations]]
include-path = "/admin/transform/test"
checks.positive_data_acceptance.expected-statuses = ["2xx", 400]
EOF

status=0
summary=()
run() {
  local port=$1 tag=$2
  local out="$WORK/schemathesis-$tag.txt"
  set +e
  "$VENV/bin/schemathesis" --config-file "$WORK/schemathesis.toml" --no-color run \
    "$ROOT/docs/openapi.yaml" --url "http://127.0.0.1:$port" --include-tag "$tag" \
    --checks all --max-examples "$EXAMPLES" --seed 20261203 --workers 2 \
    --generation-database none --no-shrink >"$out" 2>&1
  local rc=$?
  set -e
  cat "$out"
  if ((rc != 0)); then
    status=1
  fi
  local tested cases
  tested=$(awk '/^ *Tested:/ {print $2}' "$out" | tail -n 1)
  cases=$(awk 'found {print; exit} /^Test cases:/ {found = 1}' "$out" | sed 's/^ *//')
  summary+=("$tag port: ${tested:-?} operations tested; test cases: ${cases:-?}")
}
run "$DATA_PORT" data
run "$MGMT_PORT" management

# `--checks all` already fails on a 5xx (not_a_server_error); this says so in plain words.
if grep -qE '^\[5[0-9]{2}\]' "$WORK"/schemathesis-*.txt; then
  echo "check-openapi: a 5xx answer was seen" >&2
  status=1
fi
echo
echo "check-openapi summary:"
printf '  %s\n' "${summary[@]}"
if ((status != 0)); then
  echo "check-openapi: FAILED (QueueBox log tail follows)" >&2
  tail -n 40 "$WORK/queuebox.log" >&2
fi
exit "$status"
