#!/usr/bin/env bash
# Checks the webhook signature kinds against the providers' own code, through the real binary:
#   - inbound: each `auth` kind (standardWebhooks, stripe, github, shopify, slack) with requests
#     signed by the official libraries (PyPI standardwebhooks and stripe, npm standardwebhooks and
#     @octokit/webhooks-methods) or, for Shopify and Slack, their published algorithm and the
#     documented example vectors: valid, replay (200 duplicate), rotated secret, wrong secret,
#     tampered body, old timestamp, missing header, one byte changed in a (multi-)signature header;
#     nothing is stored on a refusal and no 401 names a secret or a signature;
#   - property: QB_SIG_PROPERTY_N (default 1000) random bodies, header orders and letter cases,
#     half broken by one random change: 0 false accepts and 0 false rejects;
#   - outbound: Standard Webhooks signing on HTTP destinations, every delivery verified by the
#     official Python and TypeScript (npm) packages, across a retry and a secret rotation.
#
#   QB_TEST_PG_URL   the test PostgreSQL server's maintenance database (scripts/services.sh prints it)
#   QB_BIN           the binary (default: $CARGO_TARGET_DIR/debug/queuebox)
#
# The libraries live under /var/cache (a venv and an npm project), made on the first run.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET=${CARGO_TARGET_DIR:-/var/cache/queuebox-target}
QB_BIN=${QB_BIN:-$TARGET/debug/queuebox}
VENV=/var/cache/queuebox-signatures-venv
NPM=/var/cache/queuebox-signatures-npm
PROPERTY_N=${QB_SIG_PROPERTY_N:-1000}
: "${QB_TEST_PG_URL:?QB_TEST_PG_URL is not set: eval \"\$(bash scripts/services.sh)\" first}"

if [[ ! -x $QB_BIN ]]; then
  echo "check-signatures: no binary at $QB_BIN (build it with cargo build -p queuebox, or set QB_BIN)" >&2
  exit 2
fi
for tool in node npm psql python3; do
  command -v "$tool" >/dev/null || { echo "check-signatures: $tool is not installed" >&2; exit 2; }
done

# shellcheck source=lib/pinned-venv.sh
source "$ROOT/scripts/lib/pinned-venv.sh"
pinned_venv check-signatures "$VENV" standardwebhooks==1.1.0 stripe==16.1.0

# The npm packages, pinned; installed again only when package.json changes.
PACKAGE_JSON='{
  "name": "queuebox-signatures-check",
  "private": true,
  "type": "module",
  "dependencies": {
    "@octokit/webhooks-methods": "6.0.0",
    "@types/node": "20.9.5",
    "standardwebhooks": "1.1.1",
    "typescript": "5.9.3"
  }
}'
mkdir -p "$NPM"
if [[ "$(cat "$NPM/package.json" 2>/dev/null)" != "$PACKAGE_JSON" || ! -d $NPM/node_modules/typescript ]]; then
  printf '%s\n' "$PACKAGE_JSON" >"$NPM/package.json"
  (cd "$NPM" && npm install --no-audit --no-fund --silent)
fi

WORK=$(mktemp -d)
RUN=$(mktemp -d "$NPM/run.XXXXXX")
DB="qb_signatures_$(date +%s)_$$"
QB_PID=""
cleanup() {
  if [[ -n $QB_PID ]]; then
    kill "$QB_PID" 2>/dev/null || true
    wait "$QB_PID" 2>/dev/null || true
  fi
  psql "$QB_TEST_PG_URL" -qAt -c "DROP DATABASE IF EXISTS \"$DB\" WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$WORK" "$RUN"
}
trap cleanup EXIT

# The TypeScript check, compiled next to the npm packages so node finds them.
cp "$ROOT/scripts/signatures/sign.mjs" "$ROOT/scripts/signatures/verify_outbound.ts" \
  "$ROOT/scripts/signatures/tsconfig.json" "$RUN/"
"$NPM/node_modules/.bin/tsc" -p "$RUN/tsconfig.json"

psql "$QB_TEST_PG_URL" -qAt -v ON_ERROR_STOP=1 -c "CREATE DATABASE \"$DB\"" >/dev/null
DB_URL=$(python3 - "$QB_TEST_PG_URL" "$DB" <<'PY'
import sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
print(urllib.parse.urlunsplit(u._replace(path="/" + sys.argv[2])))
PY
)
read -r PG_USER PG_PASSWORD PG_HOSTPORT < <(python3 - "$QB_TEST_PG_URL" <<'PY'
import sys, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
print(urllib.parse.unquote(u.username or ""), urllib.parse.unquote(u.password or "") or "-",
      f"{u.hostname}:{u.port or 5432}")
PY
)
[[ $PG_PASSWORD == - ]] && PG_PASSWORD=""
read -r PORT RECEIVER_PORT < <(python3 - <<'PY'
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])
PY
)

# The secrets of scripts/signatures/common.py (inbound) and of the three destinations (outbound).
secrets() { "$VENV/bin/python" -c "import sys; sys.path.insert(0, '$ROOT/scripts/signatures'); \
import os; os.environ.setdefault('QB_SIG_PORT', '0'); os.environ.setdefault('QB_SIG_PG_URL', ''); \
os.environ.setdefault('QB_SIG_NPM_RUN', ''); from common import SECRETS; print(*SECRETS['$1'])"; }
OUT_OLD="whsec_$(printf 'outbound-old-secret-0123456789' | base64)"
OUT_NEW="whsec_$(printf 'outbound-new-secret-9876543210' | base64)"
source_block() { # NAME TYPE [EXTRA_LINES]
  local old new
  read -r old new < <(secrets "$1")
  printf '  %s:\n    path: /%s\n    consumption: pull\n%s    auth:\n      type: %s\n      secrets:\n        - "%s"\n        - "%s"\n' \
    "$1" "$1" "${3:-}" "$2" "$new" "$old"
}
{
  cat <<EOF
server:
  httpPort: $PORT
database:
  url: jdbc:postgresql://$PG_HOSTPORT/$DB
  username: $PG_USER
  password: "$PG_PASSWORD"
  migrate: true
outbox:
  pollIntervalMs: 50
  retryBaseDelayMs: 200
destinations:
EOF
  for path in old both new; do
    printf '  out_%s:\n    baseUrl: http://127.0.0.1:%s\n    path: /%s\n    signing:\n      scheme: standardWebhooks\n      secrets:\n' \
      "$path" "$RECEIVER_PORT" "$path"
    case $path in
      old) printf '        - "%s"\n' "$OUT_OLD" ;;
      both) printf '        - "%s"\n        - "%s"\n' "$OUT_NEW" "$OUT_OLD" ;;
      new) printf '        - "%s"\n' "$OUT_NEW" ;;
    esac
  done
  cat <<EOF
routes:
  - {topicPattern: sig.old, destination: out_old}
  - {topicPattern: sig.both, destination: out_both}
  - {topicPattern: sig.new, destination: out_new}
sources:
EOF
  source_block sw standardWebhooks
  source_block stripe stripe
  source_block github github
  source_block shopify shopify
  source_block slack slack '    idempotencyKeyPath: $.event_id
'
  # The documented vectors are years old: these sources accept any timestamp of the last decade.
  cat <<'EOF'
  swdoc:
    path: /swdoc
    consumption: pull
    auth:
      type: standardWebhooks
      secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]
      timestampTolerance: 315360000000
  slackdoc:
    path: /slackdoc
    consumption: pull
    idempotencyKeyPath: $.event_id
    auth:
      type: slack
      secrets: ["8f742231b10e8888abcd99yyyzzz85a5"]
      timestampTolerance: 315360000000
  ghdoc:
    path: /ghdoc
    consumption: pull
    auth:
      type: github
      secrets: ["It's a Secret to Everybody"]
EOF
} >"$WORK/queuebox.yml"

"$QB_BIN" serve --config "$WORK/queuebox.yml" >"$WORK/queuebox.log" 2>&1 &
QB_PID=$!
deadline=$((SECONDS + 30))
until curl -fsS -o /dev/null "http://127.0.0.1:$PORT/health/ready" 2>/dev/null; do
  if ! kill -0 "$QB_PID" 2>/dev/null || ((SECONDS > deadline)); then
    echo "check-signatures: QueueBox did not become ready; its log:" >&2
    cat "$WORK/queuebox.log" >&2
    exit 1
  fi
  sleep 0.2
done

export PYTHONDONTWRITEBYTECODE=1 QB_SIG_PORT=$PORT QB_SIG_PG_URL=$DB_URL QB_SIG_NPM_RUN=$RUN
export QB_SIG_RECEIVER_PORT=$RECEIVER_PORT QB_SIG_OUT_OLD=$OUT_OLD QB_SIG_OUT_NEW=$OUT_NEW
cd "$ROOT/scripts/signatures"
status=0
"$VENV/bin/python" inbound.py || status=1
"$VENV/bin/python" property.py "$PROPERTY_N" || status=1
"$VENV/bin/python" outbound.py "$WORK/deliveries.json" || status=1
# The same deliveries through the TypeScript package, whatever the Python check said.
if [[ -s $WORK/deliveries.json ]]; then
  node "$RUN/verify_outbound.js" "$WORK/deliveries.json" "$OUT_OLD" "$OUT_NEW" || status=1
else
  status=1
fi
# No configured secret reaches the log either.
for secret in "$OUT_OLD" "$OUT_NEW" $(for k in sw stripe github shopify slack; do secrets "$k"; done); do
  if grep -qF -- "$secret" "$WORK/queuebox.log"; then
    echo "check-signatures: the log holds a configured secret" >&2
    status=1
  fi
done
if ((status)); then
  echo "check-signatures: FAILED; the QueueBox log:" >&2
  tail -n 40 "$WORK/queuebox.log" >&2
fi
exit $status
