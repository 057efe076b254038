#!/usr/bin/env bash
# Quick start: set up a local PostgreSQL (from Debian packages, on 127.0.0.1:5432) and run QueueBox
# with examples/queuebox.yml. Stop it with Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/cache/queuebox-target}"
eval "$(bash scripts/services.sh)"
exec cargo run --release -p queuebox -- --config examples/queuebox.yml serve
