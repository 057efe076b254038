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
# The capture tests' account: REPLICATION and nothing else, so the tests also show that capture can
# run under an account of its own (outbox.capture.connection.username) while queuebox has none.
PG_CAPTURE_USER=queuebox_capture
PG_CAPTURE_PASSWORD=queuebox_capture
PG_MAX_CONNECTIONS=300
# The TLS tests' certificates: a CA of our own and a server certificate for the IP 127.0.0.1 only
# (so a connection to `localhost` with verify-full fails on the host name), and a second CA that
# signed nothing the server presents (so verify-ca with it fails on the chain).
PG_TLS_DIR=/etc/postgresql/$PG_VERSION/main/queuebox-tls

AMQP_PORT=5672
RABBITMQ_START_SECONDS=120

# Apache Kafka from its Maven Central jars (Debian has no package), one KRaft node on loopback:
# a PLAINTEXT listener, and a SASL_PLAINTEXT listener with SCRAM for the security tests. The
# authorizer lets PLAINTEXT clients (principal ANONYMOUS) and the SCRAM user queuebox do anything;
# the SCRAM user queuebox-denied has no ACL at all, so its requests are refused as unauthorized.
KAFKA_VERSION=4.0.0
KAFKA_PORT=9092
KAFKA_SASL_PORT=9094
KAFKA_CONTROLLER_PORT=9093
# A third listener that binds one port and advertises another, where a test puts a TCP proxy of
# its own: clients that bootstrap through the proxy keep talking through it, so a test can hold
# the broker's answers (a silent broker) or cut the link.
KAFKA_PROXIED_PORT=9096
KAFKA_PROXY_PORT=9095
KAFKA_JARS=/var/cache/queuebox-kafka/$KAFKA_VERSION
KAFKA_HOME=/var/lib/queuebox-kafka
KAFKA_START_SECONDS=120
KAFKA_SCRAM_USER=queuebox
KAFKA_SCRAM_PASSWORD=queuebox-secret
KAFKA_DENIED_USER=queuebox-denied
KAFKA_DENIED_PASSWORD=queuebox-denied-secret

# The restart and fail-over tests' own pair of clusters (the shared main cluster is never stopped):
# a primary and a streaming standby with synchronous replication, driven by pair.sh.
PGF_PRIMARY=qbprimary
PGF_PRIMARY_PORT=5433
PGF_STANDBY=qbstandby
PGF_STANDBY_PORT=5434
PGF_HOME=/var/lib/queuebox-pg-failover

NATS_PORT=4222
# JetStream's state (streams, consumers) lives here; the log beside it.
NATS_DIR=/var/lib/queuebox-nats

# Redis (Streams) from Debian's package, one server on loopback with its config, data and log here.
REDIS_PORT=6379
REDIS_DIR=/var/lib/queuebox-redis

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

# Installs packages whose maintainer scripts would start a service through invoke-rc.d, which on a
# machine without systemd fails or hangs. A policy-rc.d that answers 101 ("action forbidden") makes
# invoke-rc.d skip the start; the caller starts the server itself. One already in place (container
# images ship one) is left alone.
apt_install_without_start() {
  local policy=/usr/sbin/policy-rc.d own_policy=0 status=0
  if ! [ -e "$policy" ]; then
    printf '#!/bin/sh\n# Written by QueueBox scripts/services.sh during a package install.\nexit 101\n' > "$policy"
    chmod 755 "$policy"
    own_policy=1
  fi
  apt_install "$@" || status=$?
  [ "$own_policy" -eq 0 ] || rm -f "$policy"
  [ "$status" -eq 0 ] || die "installing $* failed"
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

# The certificates of the TLS tests, made once: a CA, a server certificate it signs for
# IP:127.0.0.1, and an unrelated second CA. The server reads its key as the postgres user.
make_pg_certificates() {
  [ -f "$PG_TLS_DIR/server.crt" ] && [ -f "$PG_TLS_DIR/other-ca.crt" ] && return 0
  command -v openssl >/dev/null 2>&1 || apt_install openssl
  log "making the TLS certificates of the tests in $PG_TLS_DIR"
  mkdir -p "$PG_TLS_DIR"
  (
    cd "$PG_TLS_DIR"
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=QueueBox test CA" \
      -keyout ca.key -out ca.crt 2>/dev/null
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=QueueBox other CA" \
      -keyout other-ca.key -out other-ca.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout server.key -out server.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' > server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
      -extfile server.ext -out server.crt 2>/dev/null
    rm -f server.csr server.ext ca.srl
    chown postgres:postgres server.key server.crt
    chmod 600 server.key ca.key other-ca.key
    chmod 644 ca.crt other-ca.crt server.crt
  )
}

start_postgres() {
  if ! [ -x "/usr/lib/postgresql/$PG_VERSION/bin/postgres" ]; then
    apt_install "postgresql-$PG_VERSION" postgresql-client
  fi
  if ! pg_lsclusters -h 2>/dev/null | awk '{print $1" "$2}' | grep -qx "$PG_VERSION main"; then
    log "creating cluster $PG_VERSION/main"
    pg_createcluster "$PG_VERSION" main --port "$PG_PORT" >&2
  fi
  make_pg_certificates
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
ssl = on
ssl_cert_file = '$PG_TLS_DIR/server.crt'
ssl_key_file = '$PG_TLS_DIR/server.key'
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
  # The test user may create databases (one fresh database per test) and owns nothing else. It
  # may signal other sessions (pg_signal_backend) so that a test's DROP DATABASE ... WITH (FORCE)
  # can end an autovacuum worker that happens to be in the database; without it the drop fails
  # ("must be a member of the role whose process is being terminated") and the database is left.
  su postgres -c "psql -q -v ON_ERROR_STOP=1 -p $PG_PORT -d postgres" >&2 <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$PG_USER') THEN
    CREATE ROLE $PG_USER LOGIN CREATEDB PASSWORD '$PG_PASSWORD';
  ELSE
    ALTER ROLE $PG_USER LOGIN CREATEDB PASSWORD '$PG_PASSWORD';
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$PG_CAPTURE_USER') THEN
    CREATE ROLE $PG_CAPTURE_USER LOGIN REPLICATION PASSWORD '$PG_CAPTURE_PASSWORD';
  ELSE
    ALTER ROLE $PG_CAPTURE_USER LOGIN REPLICATION PASSWORD '$PG_CAPTURE_PASSWORD';
  END IF;
END \$\$;
GRANT pg_signal_backend TO $PG_USER;
SQL
  if ! su postgres -c "psql -tAq -p $PG_PORT -d postgres -c \"SELECT 1 FROM pg_database WHERE datname = 'queuebox'\"" | grep -q 1; then
    su postgres -c "createdb -p $PG_PORT -O $PG_USER queuebox" >&2
  fi
  wait_for 30 "PostgreSQL login as $PG_USER" env PGPASSWORD="$PG_PASSWORD" psql -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" -d queuebox -c 'SELECT 1'
  log "PostgreSQL ready on 127.0.0.1:$PG_PORT"
  echo "export QB_TEST_PG_URL=postgres://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/postgres"
  echo "export QB_TEST_PG_CAPTURE_ACCOUNT=$PG_CAPTURE_USER:$PG_CAPTURE_PASSWORD"
  echo "export QB_TEST_PG_CA=$PG_TLS_DIR/ca.crt"
  echo "export QB_TEST_PG_OTHER_CA=$PG_TLS_DIR/other-ca.crt"
}

# The pair of the restart and fail-over tests: clusters $PGF_PRIMARY and $PGF_STANDBY of their own,
# so stopping, promoting or fencing them never touches the main cluster other tests use. pair.sh
# (written below) is what the tests call; `reset` rebuilds the known topology: the primary up and
# writable, the standby a fresh base backup streaming synchronously (a commit returns only once the
# standby has flushed it, so a promotion loses no committed row).
start_postgres_pair() {
  local name port
  for name in "$PGF_PRIMARY" "$PGF_STANDBY"; do
    port=$PGF_PRIMARY_PORT
    [ "$name" = "$PGF_STANDBY" ] && port=$PGF_STANDBY_PORT
    if ! pg_lsclusters -h 2>/dev/null | awk '{print $1" "$2}' | grep -qx "$PG_VERSION $name"; then
      log "creating cluster $PG_VERSION/$name on port $port"
      pg_createcluster "$PG_VERSION" "$name" --port "$port" >&2
    fi
    local conf="/etc/postgresql/$PG_VERSION/$name/conf.d/queuebox-tests.conf" wanted
    # Only the primary waits for a standby: a promoted standby must not wait for one of its own.
    local sync="synchronous_standby_names = '*'"
    [ "$name" = "$PGF_STANDBY" ] && sync="# no synchronous standby: this cluster is the standby"
    wanted=$(cat <<CONF
# Written by QueueBox scripts/services.sh for the restart and fail-over tests.
listen_addresses = '127.0.0.1'
port = $port
max_connections = 100
shared_buffers = 32MB
wal_level = replica
max_wal_senders = 10
wal_keep_size = 256MB
hot_standby = on
jit = off
$sync
CONF
)
    if [ "$(cat "$conf" 2>/dev/null)" != "$wanted" ]; then
      log "writing $conf"
      mkdir -p "$(dirname "$conf")"
      printf '%s\n' "$wanted" > "$conf"
      if pg_lsclusters -h | awk -v v="$PG_VERSION" -v n="$name" '$1==v && $2==n {print $4}' | grep -q online; then
        pg_ctlcluster --skip-systemctl-redirect "$PG_VERSION" "$name" restart >&2
      fi
    fi
  done
  mkdir -p "$PGF_HOME"
  cat > "$PGF_HOME/pair.sh" <<SCRIPT
#!/usr/bin/env bash
# Written by QueueBox scripts/services.sh: drives the test pair, primary $PGF_PRIMARY on
# $PGF_PRIMARY_PORT and standby $PGF_STANDBY on $PGF_STANDBY_PORT. Progress on stderr.
#   pair.sh reset                      primary up and writable, standby rebuilt and streaming in sync
#   pair.sh stop primary|standby [fast|immediate]   (immediate: as a crash)
#   pair.sh start primary|standby
#   pair.sh promote standby            the standby becomes writable
#   pair.sh read-only primary|standby on|off        default_transaction_read_only, reloaded
set -euo pipefail
V=$PG_VERSION
cluster() { case "\$1" in primary) echo $PGF_PRIMARY ;; standby) echo $PGF_STANDBY ;; *) echo "unknown cluster \$1" >&2; exit 2 ;; esac; }
port() { case "\$1" in primary) echo $PGF_PRIMARY_PORT ;; standby) echo $PGF_STANDBY_PORT ;; esac; }
online() { pg_lsclusters -h | awk -v v=\$V -v n="\$(cluster "\$1")" '\$1==v && \$2==n {print \$4}' | grep -q online; }
# synchronous_commit = local: the pair's own changes must not wait for a standby that is down.
sql() { su postgres -c "psql -qtAX -v ON_ERROR_STOP=1 -p \$(port "\$1") -d postgres" <<<"SET synchronous_commit = local; \$2"; }
# Waits up to 60 s for "\$@" to succeed.
await() { for _ in \$(seq 1 300); do "\$@" >/dev/null 2>&1 && return 0; sleep 0.2; done; echo "pair.sh: timed out: \$*" >&2; exit 1; }
ready() { su postgres -c "pg_isready -q -h 127.0.0.1 -p \$(port "\$1")"; }
stop() { online "\$1" || return 0; pg_ctlcluster --skip-systemctl-redirect \$V "\$(cluster "\$1")" stop -m "\${2:-fast}" >&2; }
start() { online "\$1" || pg_ctlcluster --skip-systemctl-redirect \$V "\$(cluster "\$1")" start >&2; await ready "\$1"; }
writable() { [ "\$(sql "\$1" 'SELECT pg_is_in_recovery()')" = f ]; }
in_sync() { [ "\$(sql primary "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = 'sync'")" = 1 ]; }
case "\${1:-}" in
  reset)
    stop standby immediate
    start primary
    sql primary "ALTER SYSTEM RESET default_transaction_read_only; SELECT pg_reload_conf();" >/dev/null
    for db in \$(sql primary "SELECT datname FROM pg_database WHERE datname LIKE 'qb\\_e2e\\_%'"); do
      sql primary "DROP DATABASE \\"\$db\\" WITH (FORCE)" >/dev/null
    done
    data=/var/lib/postgresql/\$V/$PGF_STANDBY
    rm -rf "\$data"
    su postgres -c "pg_basebackup -p $PGF_PRIMARY_PORT -D \$data -R -X stream -c fast" >&2
    start standby
    await in_sync
    echo "pair.sh: reset: primary on $PGF_PRIMARY_PORT, standby on $PGF_STANDBY_PORT in sync" >&2
    ;;
  stop) stop "\${2:?primary or standby}" "\${3:-fast}" ;;
  start) start "\${2:?primary or standby}" ;;
  promote)
    pg_ctlcluster --skip-systemctl-redirect \$V "\$(cluster "\${2:?standby}")" promote >&2
    await writable "\$2"
    ;;
  read-only)
    sql "\${2:?primary or standby}" "ALTER SYSTEM SET default_transaction_read_only = \${3:?on or off}; SELECT pg_reload_conf();" >/dev/null
    ;;
  *) echo "usage: pair.sh reset | stop|start NAME | promote standby | read-only NAME on|off" >&2; exit 2 ;;
esac
SCRIPT
  chmod 755 "$PGF_HOME/pair.sh"
  "$PGF_HOME/pair.sh" start primary
  # The same test account as the main cluster; the standby receives it through replication.
  su postgres -c "psql -q -v ON_ERROR_STOP=1 -p $PGF_PRIMARY_PORT -d postgres" >&2 <<SQL
SET synchronous_commit = local;
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$PG_USER') THEN
    CREATE ROLE $PG_USER LOGIN CREATEDB PASSWORD '$PG_PASSWORD';
  ELSE
    ALTER ROLE $PG_USER LOGIN CREATEDB PASSWORD '$PG_PASSWORD';
  END IF;
END \$\$;
GRANT pg_signal_backend TO $PG_USER;
SQL
  "$PGF_HOME/pair.sh" reset
  log "PostgreSQL pair ready: primary 127.0.0.1:$PGF_PRIMARY_PORT, standby 127.0.0.1:$PGF_STANDBY_PORT"
  echo "export QB_TEST_PG_FAILOVER_PRIMARY=127.0.0.1:$PGF_PRIMARY_PORT"
  echo "export QB_TEST_PG_FAILOVER_STANDBY=127.0.0.1:$PGF_STANDBY_PORT"
  echo "export QB_TEST_PG_FAILOVER_ACCOUNT=$PG_USER:$PG_PASSWORD"
  echo "export QB_TEST_PG_FAILOVER_CONTROL=$PGF_HOME/pair.sh"
}

# RabbitMQ from Debian's package, on loopback, as the node rabbit@localhost (a fixed node name, so
# the CLI tools find the node whatever the machine's host name resolves to).
start_rabbitmq() {
  command -v rabbitmq-server >/dev/null 2>&1 || apt_install_without_start rabbitmq-server

  mkdir -p /etc/rabbitmq
  local changed=0
  # The AMQP listener on loopback only; no plugin is enabled, so no management listener exists.
  local conf=/etc/rabbitmq/rabbitmq.conf wanted
  wanted=$(cat <<CONF
# Written by QueueBox scripts/services.sh for the test suite.
listeners.tcp.1 = 127.0.0.1:$AMQP_PORT
loopback_users.guest = true
CONF
)
  if [ "$(cat "$conf" 2>/dev/null)" != "$wanted" ]; then
    log "writing $conf"
    printf '%s\n' "$wanted" > "$conf"
    changed=1
  fi
  # The Erlang distribution port (used by rabbitmqctl) and epmd on loopback too.
  local env_conf=/etc/rabbitmq/rabbitmq-env.conf
  wanted=$(cat <<'CONF'
# Written by QueueBox scripts/services.sh for the test suite.
NODENAME=rabbit@localhost
NODE_IP_ADDRESS=127.0.0.1
export ERL_EPMD_ADDRESS=127.0.0.1
SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
CONF
)
  if [ "$(cat "$env_conf" 2>/dev/null)" != "$wanted" ]; then
    log "writing $env_conf"
    printf '%s\n' "$wanted" > "$env_conf"
    changed=1
  fi

  if rabbitmqctl -q status >/dev/null 2>&1; then
    if [ "$changed" -eq 1 ]; then
      log "restarting RabbitMQ to apply its settings"
      rabbitmqctl -q stop >&2 || true
      wait_for 60 "RabbitMQ stop" sh -c '! rabbitmqctl -q status'
    fi
  fi
  if ! rabbitmqctl -q status >/dev/null 2>&1; then
    log "starting RabbitMQ"
    rabbitmq-server -detached >&2
  fi
  # await_startup returns at once with an error while the node is not yet reachable, so it is
  # retried under the deadline; each try waits at most 10 s for a node that is booting.
  wait_for "$RABBITMQ_START_SECONDS" "RabbitMQ" rabbitmqctl -q await_startup --timeout 10
  wait_for 30 "RabbitMQ AMQP port" bash -c "exec 3<>/dev/tcp/127.0.0.1/$AMQP_PORT"
  log "RabbitMQ ready on 127.0.0.1:$AMQP_PORT"
  echo "export QB_TEST_AMQP_URL=amqp://guest:guest@127.0.0.1:$AMQP_PORT/%2f"
}

# NATS from Debian's package, with JetStream on and its state in $NATS_DIR, on loopback. The server
# is started by hand in the background (no systemd); one already answering on the port is kept.
start_nats() {
  command -v nats-server >/dev/null 2>&1 || apt_install nats-server
  if ! bash -c "exec 3<>/dev/tcp/127.0.0.1/$NATS_PORT" 2>/dev/null; then
    mkdir -p "$NATS_DIR"
    log "starting nats-server (JetStream, state in $NATS_DIR)"
    nohup nats-server -a 127.0.0.1 -p "$NATS_PORT" -js -sd "$NATS_DIR" \
      >>"$NATS_DIR/nats-server.log" 2>&1 </dev/null &
  fi
  # The port opens a moment before JetStream is ready; the monitoring-free way to know the server
  # is fully up is its INFO line, which it sends first on every connection.
  wait_for 30 "nats-server" bash -c "exec 3<>/dev/tcp/127.0.0.1/$NATS_PORT && head -c 4 <&3 | grep -q INFO"
  log "NATS ready on 127.0.0.1:$NATS_PORT"
  echo "export QB_TEST_NATS_URL=nats://127.0.0.1:$NATS_PORT"
}

# Redis from Debian's package, started by hand (no systemd) with a config of our own in $REDIS_DIR:
# loopback only, no persistence (test data is disposable), daemonized with its pid and log there.
# A server already answering on the port with that config is kept; one with another config (the
# package's own, say) is shut down and ours started in its place.
redis_cli() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }
start_redis() {
  command -v redis-server >/dev/null 2>&1 || apt_install_without_start redis-server
  command -v redis-cli >/dev/null 2>&1 || apt_install redis-tools
  mkdir -p "$REDIS_DIR"
  local conf="$REDIS_DIR/redis.conf" wanted changed=0
  wanted=$(cat <<CONF
# Written by QueueBox scripts/services.sh for the test suite.
bind 127.0.0.1
port $REDIS_PORT
protected-mode yes
daemonize yes
pidfile $REDIS_DIR/redis-server.pid
logfile $REDIS_DIR/redis-server.log
dir $REDIS_DIR
save ""
appendonly no
CONF
)
  if [ "$(cat "$conf" 2>/dev/null)" != "$wanted" ]; then
    log "writing $conf"
    printf '%s\n' "$wanted" > "$conf"
    changed=1
  fi
  if [ "$(redis_cli ping 2>/dev/null)" = PONG ]; then
    if [ "$changed" -eq 1 ] || [ "$(redis_cli config get dir 2>/dev/null | tail -n 1)" != "$REDIS_DIR" ]; then
      log "stopping the Redis on port $REDIS_PORT to start it with $conf"
      redis_cli shutdown nosave >/dev/null 2>&1 || true
      wait_for 30 "Redis stop" sh -c "! redis-cli -h 127.0.0.1 -p $REDIS_PORT ping"
    fi
  fi
  if [ "$(redis_cli ping 2>/dev/null)" != PONG ]; then
    log "starting redis-server (state and log in $REDIS_DIR)"
    redis-server "$conf" >&2
  fi
  wait_for 30 "redis-server" sh -c "[ \"\$(redis-cli -h 127.0.0.1 -p $REDIS_PORT ping)\" = PONG ]"
  log "Redis ready on 127.0.0.1:$REDIS_PORT"
  echo "export QB_TEST_REDIS_URL=redis://127.0.0.1:$REDIS_PORT"
}

# Kafka: the broker jars come from Maven Central through a throwaway Maven project (fetched once
# into $KAFKA_JARS), the storage is formatted once with the SCRAM users, and the broker runs in the
# background with its log in $KAFKA_HOME/broker.log.
fetch_kafka_jars() {
  [ -f "$KAFKA_JARS/.complete" ] && return 0
  command -v mvn >/dev/null 2>&1 || apt_install maven
  command -v java >/dev/null 2>&1 || apt_install openjdk-17-jre-headless
  log "fetching the Kafka $KAFKA_VERSION jars from Maven Central"
  local project
  project=$(mktemp -d)
  cat > "$project/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>queuebox.services</groupId>
  <artifactId>kafka-broker</artifactId>
  <version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId><version>1.7.36</version></dependency>
  </dependencies>
</project>
POM
  rm -rf "$KAFKA_JARS"
  mkdir -p "$KAFKA_JARS"
  (cd "$project" && mvn -q -B dependency:copy-dependencies -DoutputDirectory="$KAFKA_JARS/libs") >&2 \
    || die "fetching the Kafka jars failed"
  rm -rf "$project"
  touch "$KAFKA_JARS/.complete"
}

kafka_answers() { bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

start_kafka() {
  fetch_kafka_jars
  mkdir -p "$KAFKA_HOME"
  local conf="$KAFKA_HOME/server.properties" wanted
  wanted=$(cat <<CONF
# Written by QueueBox scripts/services.sh for the test suite: one KRaft node on loopback.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,SASL_PLAINTEXT://127.0.0.1:$KAFKA_SASL_PORT,PROXIED://127.0.0.1:$KAFKA_PROXIED_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,SASL_PLAINTEXT://127.0.0.1:$KAFKA_SASL_PORT,PROXIED://127.0.0.1:$KAFKA_PROXY_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,PROXIED:PLAINTEXT,CONTROLLER:PLAINTEXT
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS;User:$KAFKA_SCRAM_USER
allow.everyone.if.no.acl.found=false
log.dirs=$KAFKA_HOME/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# Tests create their topics, so a publish to a missing topic shows as one.
auto.create.topics.enable=false
CONF
)
  local running=0
  kafka_answers "$KAFKA_PORT" && running=1
  if [ "$(cat "$conf" 2>/dev/null)" != "$wanted" ]; then
    # Settings changed (or first run): the test broker's data is disposable, so stop it, write
    # the settings and format the storage again with them.
    if [ "$running" -eq 1 ]; then
      log "stopping Kafka to apply new settings"
      pkill -f 'kafka\.Kafka ' || true
      wait_for 60 "Kafka stop" sh -c "! pgrep -f 'kafka\\.Kafka ' >/dev/null"
      running=0
    fi
    log "writing $conf"
    printf '%s\n' "$wanted" > "$conf"
    rm -rf "$KAFKA_HOME/data"
  fi
  if ! [ -f "$KAFKA_HOME/data/meta.properties" ]; then
    log "formatting the Kafka storage"
    local cluster
    cluster=$(java -cp "$KAFKA_JARS/libs/*" kafka.tools.StorageTool random-uuid)
    java -cp "$KAFKA_JARS/libs/*" kafka.tools.StorageTool format -t "$cluster" -c "$conf" \
      --add-scram "SCRAM-SHA-256=[name=$KAFKA_SCRAM_USER,password=$KAFKA_SCRAM_PASSWORD]" \
      --add-scram "SCRAM-SHA-512=[name=$KAFKA_SCRAM_USER,password=$KAFKA_SCRAM_PASSWORD]" \
      --add-scram "SCRAM-SHA-256=[name=$KAFKA_DENIED_USER,password=$KAFKA_DENIED_PASSWORD]" >&2
  fi
  # The broker's own log, at INFO, to broker.log (reload4j reads this file).
  printf '%s\n' 'log4j.rootLogger=INFO, stdout' \
    'log4j.appender.stdout=org.apache.log4j.ConsoleAppender' \
    'log4j.appender.stdout.layout=org.apache.log4j.PatternLayout' \
    'log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n' > "$KAFKA_HOME/log4j.properties"
  # broker.sh starts (in the background) or stops (and waits for the exit) this broker; the
  # end-to-end test of a Kafka restart runs it too.
  cat > "$KAFKA_HOME/broker.sh" <<SCRIPT
#!/usr/bin/env bash
# Written by QueueBox scripts/services.sh: start or stop the test broker.
set -euo pipefail
case "\${1:-}" in
  start)
    nohup java -Xmx512m -Dlog4j.configuration="file:$KAFKA_HOME/log4j.properties" \\
      -cp "$KAFKA_JARS/libs/*" kafka.Kafka "$conf" >> "$KAFKA_HOME/broker.log" 2>&1 &
    ;;
  stop)
    pkill -TERM -f 'kafka\\.Kafka ' || exit 0
    for _ in \$(seq 1 300); do pgrep -f 'kafka\\.Kafka ' >/dev/null || exit 0; sleep 0.2; done
    pkill -KILL -f 'kafka\\.Kafka ' || true
    ;;
  *) echo "usage: broker.sh start|stop" >&2; exit 2 ;;
esac
SCRIPT
  chmod 755 "$KAFKA_HOME/broker.sh"
  if [ "$running" -eq 0 ]; then
    log "starting Kafka $KAFKA_VERSION"
    : > "$KAFKA_HOME/broker.log"
    "$KAFKA_HOME/broker.sh" start
  fi
  wait_for "$KAFKA_START_SECONDS" "Kafka" kafka_answers "$KAFKA_PORT"
  wait_for 30 "Kafka SASL listener" kafka_answers "$KAFKA_SASL_PORT"
  log "Kafka ready on 127.0.0.1:$KAFKA_PORT (SASL/SCRAM on $KAFKA_SASL_PORT)"
  echo "export QB_TEST_KAFKA_BOOTSTRAP=127.0.0.1:$KAFKA_PORT"
  echo "export QB_TEST_KAFKA_SASL_BOOTSTRAP=127.0.0.1:$KAFKA_SASL_PORT"
  echo "export QB_TEST_KAFKA_SCRAM=$KAFKA_SCRAM_USER:$KAFKA_SCRAM_PASSWORD"
  echo "export QB_TEST_KAFKA_DENIED_SCRAM=$KAFKA_DENIED_USER:$KAFKA_DENIED_PASSWORD"
  echo "export QB_TEST_KAFKA_CONTROL=$KAFKA_HOME/broker.sh"
  echo "export QB_TEST_KAFKA_PROXIED='127.0.0.1:$KAFKA_PROXY_PORT->127.0.0.1:$KAFKA_PROXIED_PORT'"
}

# What building the Kafka adapter needs beyond Rust: librdkafka is compiled from the rdkafka
# crate's sources with cmake, against Debian's OpenSSL (SSL and SASL/SCRAM) and zlib.
install_build_tools() {
  local missing=()
  command -v cmake >/dev/null 2>&1 || missing+=(cmake)
  command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
  command -v g++ >/dev/null 2>&1 || missing+=(g++)
  dpkg -s libssl-dev >/dev/null 2>&1 || missing+=(libssl-dev)
  dpkg -s zlib1g-dev >/dev/null 2>&1 || missing+=(zlib1g-dev)
  [ "${#missing[@]}" -eq 0 ] || apt_install "${missing[@]}"
}

# An OpenTelemetry Collector for the tracing tests, built once from the Go module proxy: the
# collector's builder generates the sources of a distribution with the OTLP receiver (gRPC and
# HTTP) and the file exporter, nothing else. Its own module update (`go mod tidy`) also fetches the
# file exporter's test dependencies, one of which the proxy does not serve, so the module file is
# written here and tidied with -e (which resolves everything the build needs) instead. Only the
# binary is installed: each test starts its own collector on ports and a file of its own (and may
# stop it), so nothing shared is ever stopped. The build is cached under /var/cache.
OTELCOL_VERSION=0.165.0
OTELCOL_DIR=/var/cache/queuebox-otelcol/$OTELCOL_VERSION
install_otelcol() {
  local bin="$OTELCOL_DIR/otelcol-queuebox" build="$OTELCOL_DIR/build"
  if [ ! -x "$bin" ]; then
    command -v go >/dev/null 2>&1 || apt_install golang-go
    log "building the OpenTelemetry Collector $OTELCOL_VERSION (once; several minutes)"
    rm -rf "$build" && mkdir -p "$build"
    GOBIN="$OTELCOL_DIR" go install "go.opentelemetry.io/collector/cmd/builder@v$OTELCOL_VERSION" >&2
    cat >"$OTELCOL_DIR/builder.yaml" <<EOF
dist:
  name: otelcol-queuebox
  description: OpenTelemetry Collector for the QueueBox tracing tests
  output_path: $build
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver v$OTELCOL_VERSION
exporters:
  - gomod: github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter v$OTELCOL_VERSION
EOF
    "$OTELCOL_DIR/builder" --config="$OTELCOL_DIR/builder.yaml" --skip-get-modules --skip-compilation >&2
    cat >"$build/go.mod" <<EOF
module otelcol-queuebox

go 1.25.0

require (
	go.opentelemetry.io/collector/receiver/otlpreceiver v$OTELCOL_VERSION
	github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter v$OTELCOL_VERSION
)
EOF
    (cd "$build" && go mod tidy -e >&2 && go build -trimpath -o "$bin.tmp" .) \
      || die "building the OpenTelemetry Collector failed"
    mv "$bin.tmp" "$bin"
  fi
  "$bin" components >/dev/null || die "the OpenTelemetry Collector at $bin does not run"
  log "OpenTelemetry Collector at $bin"
  echo "export QB_TEST_OTELCOL=$bin"
}

# Headless Chromium and its WebDriver for the console's browser test (tests/tests/console.rs):
# Debian's own packages, nothing downloaded by a browser installer.
install_chromium() {
  command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 \
    || apt_install chromium chromium-driver
  chromedriver --version >/dev/null || die "chromedriver does not run"
  log "$(chromium --version 2>/dev/null) with $(chromedriver --version | cut -d' ' -f1-2)"
  echo "export QB_TEST_CHROMIUM=$(command -v chromium)"
  echo "export QB_TEST_CHROMEDRIVER=$(command -v chromedriver)"
}

install_build_tools
install_chromium
start_postgres
start_postgres_pair
start_rabbitmq
start_kafka
start_nats
start_redis
install_otelcol
