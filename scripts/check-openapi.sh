#!/usr/bin/env bash
# Checks docs/openapi.yaml against the running binary with Schemathesis: every operation, positive
# and negative cases, every check (`--checks all`). Fails on any failure or 5xx, and prints how
# many operations and test cases ran.
#
#   QB_TEST_PG_URL   the test PostgreSQL server's maintenance database (scripts/services.sh prints it)
#   QB_BIN           the binary (default: $CARGO_TARGET_DIR/debug/queuebox, built by scripts/test.sh)
#   QB_OPENAPI_EXAMPLES  test cases per operation and phase (default 100)
#   QB_OPENAPI_SEED      Hypothesis seed (default fixed, so CI runs the same cases each time)
#
# Schemathesis lives in a venv under /var/cache/queuebox-schemathesis, made on the first run.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-/var/cache/queuebox-target}
QB_BIN=${QB_BIN:-$TARGET/debug/queuebox}
VENV=/var/cache/queuebox-schemathesis
SCHEMATHESIS_VERSION=4.32.5
EXAMPLES=${QB_OPENAPI_EXAMPLES:-100}
SEED=${QB_OPENAPI_SEED:-20261203}
: "${QB_TEST_PG_URL:?QB_TEST_PG_URL is not set: eval \"\$(bash scripts/services.sh)\" first}"

if [[ ! -x $QB_BIN ]]; then
  echo "check-openapi: no binary at $QB_BIN (build it with cargo build -p queuebox, or set QB_BIN)" >&2
  exit 2
fi

# shellcheck source=lib/pinned-venv.sh
source "$ROOT/scripts/lib/pinned-venv.sh"
pinned_venv check-openapi "$VENV" "schemathesis==$SCHEMATHESIS_VERSION"

WORK=$(mktemp -d)
DB="qb_openapi_$(date +%s)_$$"
QB_PIDS=()
cleanup() {
  local pid
  for pid in "${QB_PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
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

read -r DATA_PORT MGMT_PORT SHARED_PORT < <(python3 - <<'EOF'
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
EOF
)

SOURCE_TOKEN=partner-t0ken
SOURCE_KEY=acme-k3y
SIGNING_SECRET=whs3cret
ADMIN_TOKEN=adm1n-t0ken
# config FILE SERVER_BLOCK: the same sources, admin and database, on the ports given.
config() {
  cat >"$1" <<EOF
server:
$2
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
  acme:
    type: http
    path: /acme
    idempotencyKeyPath: \$.id
    topic: order.received
    auth:
      type: api-key
      key: $SOURCE_KEY
  signed:
    type: http
    path: /signed
    idempotencyKeyPath: \$.id
    topic: order.received
    auth:
      type: hmac
      secret: $SIGNING_SECRET
admin:
  enabled: true
  auth:
    type: bearer
    token: $ADMIN_TOKEN
EOF
}
# Two replicas on the one database: one with a management port, one serving every route on its
# data port.
config "$WORK/split.yml" "  httpPort: $DATA_PORT
  managementPort: $MGMT_PORT"
config "$WORK/shared.yml" "  httpPort: $SHARED_PORT"

# The first start migrates; the second starts once the first is ready.
start() {
  local name=$1 ready_port=$2
  "$QB_BIN" serve --config "$WORK/$name.yml" >"$WORK/$name.log" 2>&1 &
  local pid=$!
  QB_PIDS+=("$pid")
  local deadline=$((SECONDS + 30))
  until curl -fsS -o /dev/null "http://127.0.0.1:$ready_port/health/ready" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null || ((SECONDS > deadline)); then
      echo "check-openapi: QueueBox ($name) did not become ready; its log:" >&2
      cat "$WORK/$name.log" >&2
      exit 1
    fi
    sleep 0.2
  done
}
start split "$MGMT_PORT"
start shared "$SHARED_PORT"

# An HMAC cannot be a static credential: Schemathesis sends a placeholder as the `sourceHmac` key,
# and this hook replaces it with the signature of the exact bytes it then sends. A request whose
# credential Schemathesis removed or changed (its auth checks) keeps what it was given.
SIGN_ME=sign-this-request
cat >"$WORK/hooks.py" <<EOF
import hashlib, hmac, json
import schemathesis
from schemathesis.core import NotSet

@schemathesis.hook
def before_call(context, case, kwargs):
    headers = case.headers or {}
    if headers.get("X-Signature") != "$SIGN_ME" or isinstance(case.body, NotSet):
        return
    body = case.body if isinstance(case.body, bytes) else json.dumps(case.body).encode()
    kwargs["data"] = body
    digest = hmac.new(b"$SIGNING_SECRET", body, hashlib.sha256).hexdigest()
    headers["X-Signature"] = "sha256=" + digest
    case.headers = headers
EOF

# The admin transform test answers 400 for an expression that is valid as a string but not as
# JSONata, which no schema can tell apart: 400 is an accepted answer to a valid request there.
cat >"$WORK/schemathesis.toml" <<EOF
hooks = "$WORK/hooks.py"

[auth.openapi.sourceBearer]
bearer = "$SOURCE_TOKEN"

[auth.openapi.sourceApiKey]
api_key = "$SOURCE_KEY"

[auth.openapi.sourceHmac]
api_key = "$SIGN_ME"

[auth.openapi.adminBearer]
bearer = "$ADMIN_TOKEN"

# A valid request must be accepted: Schemathesis's default also lets 401, 404, 409 and 429 pass,
# which would hide a credential this script or its hook gets wrong.
[checks.positive_data_acceptance]
expected-statuses = ["2xx"]

[[operations]]
include-path = "/admin/transform/test"
checks.positive_data_acceptance.expected-statuses = ["2xx", 400]
EOF

status=0
summary=()
# One worker: Schemathesis's workers are threads, and the ast module of CPython before 3.11.5
# (Debian 12 ships 3.11.2) fails when two threads parse at once ("AST constructor recursion depth
# mismatch"), which Hypothesis does when it describes a strategy.
run() {
  local name=$1 port=$2 tags=$3 out
  out="$WORK/schemathesis-$((${#summary[@]} + 1)).txt"
  set +e
  "$VENV/bin/schemathesis" --config-file "$WORK/schemathesis.toml" --no-color run \
    "$ROOT/docs/openapi.yaml" --url "http://127.0.0.1:$port" --include-tag-regex "$tags" \
    --checks all --max-examples "$EXAMPLES" --seed "$SEED" --workers 1 \
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
  summary+=("$name: ${tested:-?} operations tested; test cases: ${cases:-?}")
}
run "data port (with a management port)" "$DATA_PORT" '^data$'
run "management port" "$MGMT_PORT" '^management$'
run "data port (without a management port)" "$SHARED_PORT" '^(data|management)$'

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
  tail -n 20 "$WORK/split.log" "$WORK/shared.log" >&2
fi
exit "$status"
