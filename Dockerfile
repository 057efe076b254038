# syntax=docker/dockerfile:1
# QueueBox image. Build a slim variant with, for example:
#   docker build --build-arg FEATURES=postgres,kafka -t queuebox:slim .
ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS build
ARG FEATURES=postgres,sqlserver,rabbitmq,kafka,nats
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p queuebox --no-default-features --features "${FEATURES}" \
 && cp target/release/queuebox /usr/local/bin/queuebox

# librdkafka (the kafka feature) links OpenSSL and zlib dynamically: libssl3 and zlib1g below.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl libssl3 zlib1g \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system queuebox \
 && useradd --system --gid queuebox --home-dir /nonexistent --shell /usr/sbin/nologin queuebox \
 && mkdir -p /etc/queuebox
COPY --from=build /usr/local/bin/queuebox /usr/local/bin/queuebox
COPY examples/queuebox.yml /etc/queuebox/queuebox.yml
USER queuebox
ENV QUEUEBOX_CONFIG_FILE=/etc/queuebox/queuebox.yml
EXPOSE 8080 9090
# Liveness only: it touches no dependency. With server.managementPort set, point it at that port.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD curl -fsS http://localhost:8080/health/live || exit 1
ENTRYPOINT ["/usr/local/bin/queuebox"]
CMD ["serve"]
