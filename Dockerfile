# syntax=docker/dockerfile:1
# cebroker with every protocol extra (MQTT, AMQP 1.0, Kafka, NATS) and PostgreSQL.
#
# Two stages: "build" has the compiler, the OpenSSL headers and pkg-config, and makes a wheel of
# everything the broker needs (python-qpid-proton has no wheel for CPython 3.11 on Linux and is
# compiled here, with TLS); the final image installs those wheels only: no compiler, no headers,
# no build cache, and it runs as an unprivileged user.
#
#   docker build -t cebroker .        (or: podman build --format docker -t cebroker .)
#
# The base is pinned by version; PYTHON_IMAGE overrides it (a digest pin, a mirror).
ARG PYTHON_IMAGE=docker.io/library/python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
# gcc and the C library headers compile proton's C core; libssl-dev and pkg-config give it TLS
# (without them it builds silently with none, and amqps:// fails).
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev libssl-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY filters ./filters
COPY protocols ./protocols
COPY pyproject.toml README.md LICENSE VERSION ./
COPY src ./src
# One wheel per distribution (ours, and every dependency, compiled where PyPI has none).
RUN --mount=type=cache,target=/root/.cache/pip \
    pip wheel --wheel-dir /wheels ./filters "./protocols[all]" ".[mqtt,amqp,kafka,nats,postgres]"
# Refuse an image whose AMQP client cannot speak TLS.
RUN pip install --no-index --find-links /wheels python-qpid-proton \
 && python -c 'import proton, sys; sys.exit(0 if proton.SSL.present() else "proton built without TLS")'

FROM ${PYTHON_IMAGE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="cebroker" \
      org.opencontainers.image.description="CloudEvents subscription-manager broker: Subscriptions API, filters, durable at-least-once delivery over HTTP, MQTT, AMQP 1.0, Kafka and NATS" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels "cebroker[mqtt,amqp,kafka,nats,postgres]" \
 && useradd --system --uid 10001 --user-group --home-dir /data --no-create-home cebroker \
 && mkdir -p /data /keys && chown cebroker:cebroker /data /keys
USER 10001:10001
WORKDIR /data
ENV CEBROKER_HOST=0.0.0.0 CEBROKER_PORT=8080 CEBROKER_DB=/data/cebroker.db
EXPOSE 8080
VOLUME /data
# /readyz answers 200 once every part has started and 503 while stopping. Python itself asks
# (the image has no curl); the port is the one the broker listens on.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, sys, urllib.request; port = os.environ.get('CEBROKER_PORT', '8080'); sys.exit(0 if urllib.request.urlopen(f'http://127.0.0.1:{port}/readyz', timeout=2).status == 200 else 1)"]
ENTRYPOINT ["cebroker"]
CMD ["serve"]
