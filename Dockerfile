# syntax=docker/dockerfile:1
# QueueBox image. Build a slim variant with, for example:
#   docker build --build-arg FEATURES=postgres,kafka -t queuebox:slim .
ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS build
ARG FEATURES=postgres,rabbitmq,kafka,nats
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p queuebox --no-default-features --features "${FEATURES}" \
 && cp target/release/queuebox /usr/local/bin/queuebox

# librdkafka (the kafka feature) links OpenSSL and zlib dynamically: libssl3 and zlib1g below.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl libssl3 zlib1g \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 queuebox \
 && useradd --system --uid 10001 --gid queuebox --home-dir /nonexistent --shell /usr/sbin/nologin queuebox \
 && mkdir -p /etc/queuebox
COPY --from=build /usr/local/bin/queuebox /usr/local/bin/queuebox
COPY examples/queuebox.yml /etc/queuebox/queuebox.yml
# The user queuebox, by number: Kubernetes' runAsNonRoot can only verify a numeric user, and
# deploy/kubernetes sets runAsUser to the same 10001.
USER 10001:10001
ENV QUEUEBOX_CONFIG_FILE=/etc/queuebox/queuebox.yml
EXPOSE 8080 9090
# Liveness only: it touches no dependency. With server.managementPort set, the data port answers 404
# there, so the management port is tried first: QUEUEBOX_SERVER_MANAGEMENTPORT, else 9090 (refused
# at once when there is none), then the data port, QUEUEBOX_SERVER_HTTPPORT, else 8080. A management
# port other than 9090 set in the file only needs QUEUEBOX_SERVER_MANAGEMENTPORT, or its own check.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["/bin/sh", "-c", "curl -fsS -o /dev/null http://localhost:${QUEUEBOX_SERVER_MANAGEMENTPORT:-9090}/health/live || curl -fsS -o /dev/null http://localhost:${QUEUEBOX_SERVER_HTTPPORT:-8080}/health/live"]
ENTRYPOINT ["/usr/local/bin/queuebox"]
CMD ["serve"]
