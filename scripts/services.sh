#!/usr/bin/env bash
# Installs (from Debian packages) and starts every service the QueueBox tests need, on loopback only,
# then prints the environment variables the tests read, as `export NAME=value` lines.
#
#   eval "$(bash scripts/services.sh)"
#
# Test variables start with QB_TEST_, never QUEUEBOX_, which the binary reads as configuration.
# Idempotent: a service that is already installed, configured or running is left as it is.
# Runs as root (these machines have no systemd; services are started by hand).
# Progress goes to stderr so that stdout carries only the export lines.
set -euo pipefail

log() { printf 'services: %s\n' "$*" >&2; }
die() { printf 'services: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root: the script installs packages and starts services"

PG_VERSION=15
PG_PORT=5432
PG_USER=queuebox
PG_PASSWORD=queuebox
PG_MAX_CONNECTIONS=300

apt_updated=0
apt_install() {
  if [ "$apt_updated" -eq 0 ]; then
    log "apt-get update"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    apt_updated=1
  fi
  log "installing $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2
}

# Waits until "$@" succeeds, or fails after $1 seconds naming $2.
wait_for() {
  local seconds=$1 what=$2; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || die "$what did not answer within ${seconds}s"
    sleep 0.2
  done
}

start_postgres() {
  if ! [ -x "/usr/lib/postgresql/$PG_VERSION/bin/postgres" ]; then
    apt_install "postgresql-$PG_VERSION" postgresql-client
  fi
  if ! pg_lsclusters -h 2>/dev/null | awk '{print $1" "$2}' | grep -qx "$PG_VERSION main"; then
    log "creating cluster $PG_VERSION/main"
    pg_createcluster "$PG_VERSION" main --port "$PG_PORT" >&2
  fi
  local conf="/etc/postgresql/$PG_VERSION/main/conf.d/queuebox-tests.conf"
  local wanted
  wanted=$(cat <<CONF
# Written by QueueBox scripts/services.sh for the test suite.
listen_addresses = '127.0.0.1'
port = $PG_PORT
max_connections = $PG_MAX_CONNECTIONS
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
jit = off
CONF
)
  if [ "$(cat "$conf" 2>/dev/null)" != "$wanted" ]; then
    log "writing $conf"
    mkdir -p "$(dirname "$conf")"
    printf '%s\n' "$wanted" > "$conf"
    if pg_lsclusters -h | awk -v v="$PG_VERSION" '$1==v && $2=="main" {print $4}' | grep -q online; then
      log "restarting PostgreSQL to apply its settings"
      pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" main restart >&2
    fi
  fi
  if ! pg_lsclusters -h | awk -v v="$PG_VERSION" '$1==v && $2=="main" {print $4}' | grep -q online; then
    log "starting PostgreSQL $PG_VERSION"
    pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" main start >&2
  fi
  wait_for 60 "PostgreSQL" su postgres -c "pg_isready -q -h 127.0.0.1 -p $PG_PORT"
  # The test user may create databases (one fresh database per test) and owns nothing else.
  su postgres -c "psql -q -v ON_ERROR_STOP=1 -p $PG_PORT -d postgres" >&2 <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$PG_USER') THEN
    CREATE ROLE $PG_USER LOGIN CREATEDB PASSWORD '$PG_PASSWORD';
  ELSE
    ALTER ROLE $PG_USER LOGIN CREATEDB PASSWORD '$PG_PASSWORD';
  END IF;
END \$\$;
SQL
  if ! su postgres -c "psql -tAq -p $PG_PORT -d postgres -c \"SELECT 1 FROM pg_database WHERE datname = 'queuebox'\"" | grep -q 1; then
    su postgres -c "createdb -p $PG_PORT -O $PG_USER queuebox" >&2
  fi
  wait_for 30 "PostgreSQL login as $PG_USER" env PGPASSWORD="$PG_PASSWORD" psql -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" -d queuebox -c 'SELECT 1'
  log "PostgreSQL ready on 127.0.0.1:$PG_PORT"
  echo "export QB_TEST_PG_URL=postgres://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/postgres"
}

start_postgres
