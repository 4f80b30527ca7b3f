#!/usr/bin/env bash
# Installs the real servers the test suite starts on 127.0.0.1: mosquitto, nats-server, RabbitMQ
# (AMQP 1.0 plugin enabled per test run), PostgreSQL, a Java runtime for Spark, Chromium for the
# console tests, wrk for the ingress benchmark, podman and buildah for the image test, and a
# compose client to check docker-compose.yml. tansu (Kafka protocol) comes from PyPI with the dev
# extra. Nothing is started here: the test fixtures start and stop each server.
set -euo pipefail
need=()
command -v mosquitto >/dev/null 2>&1 || need+=(mosquitto)
command -v nats-server >/dev/null 2>&1 || need+=(nats-server)
dpkg -s rabbitmq-server >/dev/null 2>&1 || need+=(rabbitmq-server)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || need+=(postgresql)
# The console's browser tests drive Debian's Chromium through Playwright (never its own download).
[ -x /usr/bin/chromium ] || need+=(chromium)
# The ingress benchmark's load generator.
command -v wrk >/dev/null 2>&1 || need+=(wrk)
# The image test builds the Dockerfile with podman and runs the broker from it with buildah (no
# Docker engine needed).
command -v podman >/dev/null 2>&1 || need+=(podman)
command -v buildah >/dev/null 2>&1 || need+=(buildah)
# docker-compose.yml is checked with `docker compose config` (no engine needed); without the
# compose plugin, Debian's docker-compose does the same check.
if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null 2>&1; then
  need+=(docker-compose)
fi
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# policy-rc.d keeps Debian from starting the system services on install; tests start their own.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
