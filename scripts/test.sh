#!/usr/bin/env bash
# Runs every check CI runs: formatting, lints on every target, and all tests of the workspace.
# Needs the services running: call it through `.ci/run`, or after `eval "$(bash scripts/services.sh)"`.
set -euo pipefail
cd "$(dirname "$0")/.."

# Keep build output outside the work tree so repeated runs on one machine reuse it.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/cache/queuebox-target}"
export CARGO_TERM_COLOR=never

: "${QB_TEST_PG_URL:?run through .ci/run, or eval \"\$(bash scripts/services.sh)\" first}"

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy (all targets, warnings are errors)"
cargo clippy --workspace --all-targets -- -D warnings

echo "== the slim build: --no-default-features --features postgres"
cargo build -p queuebox --no-default-features --features postgres

echo "== the full binary (the end-to-end tests run target/debug/queuebox as a process)"
# Built last so the slim build above does not leave a postgres-only binary behind.
cargo build -p queuebox

# The book in docs/ (mdBook, installed once with cargo into a cache directory). A page that
# SUMMARY.md lists but that does not exist fails the build; links and anchors are checked by the
# docs_links test below.
echo "== docs: mdbook build"
mdbook_root="${QB_MDBOOK_ROOT:-/var/cache/queuebox-mdbook}"
if ! [ -x "$mdbook_root/bin/mdbook" ]; then
    cargo install mdbook --locked --version 0.5.4 --root "$mdbook_root"
fi
book_out=$(mktemp -d)
"$mdbook_root/bin/mdbook" build docs -d "$book_out"
rm -rf "$book_out"

# The deploy kit (deploy/): alert rules and their promtool unit tests, Prometheus' config and the
# dashboard against the metrics reference (installs Debian's prometheus, which the deploy_monitoring
# test below runs); the Compose file against the Compose schema; the Kubernetes manifests against the
# Kubernetes schemas, the Dockerfile through hadolint; each shipped queuebox.yml through check-config.
echo "== deploy/monitoring: promtool rules, unit tests, config; dashboard and alerts against the docs"
bash scripts/check-monitoring.sh
echo "== deploy/compose: the Compose schema, the files agree, check-config"
QB_BIN="${CARGO_TARGET_DIR:-target}/debug/queuebox" bash scripts/check-compose.sh
echo "== deploy/kubernetes: kustomize + kubernetes-validate, check-config per Deployment, hadolint"
QB_BIN="${CARGO_TARGET_DIR:-target}/debug/queuebox" bash scripts/check-kubernetes.sh

echo "== cargo test"
cargo test --workspace --no-fail-fast

# The OpenAPI document (docs/openapi.yaml) against the running binary: Schemathesis (PyPI, in a
# virtual environment under /var/cache made on the first run), every operation, --checks all.
echo "== docs/openapi.yaml against the binary (Schemathesis)"
QB_BIN="${CARGO_TARGET_DIR:-target}/debug/queuebox" bash scripts/check-openapi.sh

# Webhook signatures against the providers' own libraries (PyPI standardwebhooks and stripe, npm
# standardwebhooks and @octokit/webhooks-methods, pinned under /var/cache, made on the first run):
# every inbound kind, 1,000 random requests, outbound signing verified in Python and TypeScript.
echo "== webhook signatures against the official libraries"
QB_BIN="${CARGO_TARGET_DIR:-target}/debug/queuebox" bash scripts/check-signatures.sh

# The capture example's own smoke test (a few seconds): the example keeps working as its README says.
echo "== examples/cdc smoke test"
QB_BIN="${CARGO_TARGET_DIR:-target}/debug/queuebox" bash examples/cdc/smoke.sh

# The Kafka bridge example's smoke test (5 s on a quiet machine; its first run puts confluent-kafka
# into a virtual environment under /var/cache, from PyPI): topic -> inbox -> relay -> outbox -> topic.
echo "== examples/kafka-bridge smoke test"
QB_BIN="${CARGO_TARGET_DIR:-target}/debug/queuebox" bash examples/kafka-bridge/smoke.sh

# The Redis bridge example's smoke test: stream -> inbox -> relay -> outbox -> stream, with
# redis-cli, on stream names of its own.
echo "== examples/redis-bridge smoke test"
QB_BIN="${CARGO_TARGET_DIR:-target}/debug/queuebox" bash examples/redis-bridge/smoke.sh

# The Rust pull client is a crate of its own (its own workspace and lock file): check it the same way.
client=clients/rust/Cargo.toml
echo "== clients/rust: fmt, clippy, test"
cargo fmt --manifest-path "$client" -- --check
cargo clippy --manifest-path "$client" --all-targets -- -D warnings
cargo test --manifest-path "$client" --no-fail-fast

# The Go pull client (its own module; the go command fetches its modules through the module
# proxy): vet, staticcheck (built once into a cache directory), and the tests with the race
# detector, which run the shared conformance scenarios of clients/conformance.
echo "== clients/go: vet, staticcheck, test -race"
(
    cd clients/go
    export GOBIN="${QB_GOBIN:-/var/cache/queuebox-gobin}"
    go vet ./...
    go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
    "$GOBIN/staticcheck" ./...
    go test -race -count=1 ./...
)

# The TypeScript pull client (its own npm package and lock file): install from the lock file,
# build the ESM and CommonJS outputs with declarations under strict TypeScript, then node --test
# (the shared conformance scenarios, the contract SQL check and the README's example program).
echo "== clients/typescript: npm ci, build, node --test"
(
    cd clients/typescript
    npm ci --no-audit --no-fund
    npm test
)

# The Python pull client (its own package, clients/python/pyproject.toml): pinned tools in a
# virtual environment under /var/cache (made on the first run, from PyPI), the package installed
# from the checkout as a user would, then ruff, mypy --strict and pytest (the shared conformance
# scenarios with the threaded and the asyncio worker, the contract SQL check, both examples).
echo "== clients/python: pip install, ruff, mypy --strict, pytest"
(
    source scripts/lib/pinned-venv.sh
    venv="${QB_PYCLIENT_VENV:-/var/cache/queuebox-pyvenv-pyclient}"
    pinned_venv clients/python "$venv" psycopg==3.3.9 psycopg-binary==3.3.9 hatchling==1.33.0 \
        pytest==9.2.0 mypy==2.4.1 ruff==0.17.6 sqlalchemy==2.1.9
    "$venv/bin/pip" install --quiet --disable-pip-version-check --no-build-isolation --no-deps \
        --force-reinstall ./clients/python
    cd clients/python
    "$venv/bin/ruff" check --no-cache .
    "$venv/bin/ruff" format --check --no-cache .
    "$venv/bin/mypy" --strict --cache-dir "$venv/mypy-cache"
    "$venv/bin/pytest" -q -p no:cacheprovider
)
