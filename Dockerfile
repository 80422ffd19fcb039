# syntax=docker/dockerfile:1
# rag-monitor: the Kafka consumer that scores RAG interactions (`rag-monitor run`).
#
#   docker build -t rag-monitor .
#   docker run --rm -e RAG_MONITOR_KAFKA_BOOTSTRAP_SERVERS=kafka:9092 rag-monitor
#
# Two stages: the build stage installs the package and its wheels into a
# virtualenv, every package at the version constraints.txt pins (refresh it with
# scripts/lock_constraints.py); the final stage copies only that virtualenv onto a
# clean slim base (no compilers, no pip cache), and runs as an unprivileged user.
#
# The base image is named by tag, not digest: a digest written here would freeze
# Debian's security updates until someone edits it. To pin the exact base your
# registry holds, pass it: --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:...

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
COPY pyproject.toml README.md constraints.txt ./
COPY monitor ./monitor
# the sidecar only: no demo extra, so no Kafka broker or Postgres binaries in the image
RUN pip install --no-cache-dir -c constraints.txt . \
    && python -m compileall -q /opt/venv/lib

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="rag-monitor" \
      org.opencontainers.image.description="Production monitor for RAG services" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 ragmon \
    && useradd --system --uid 10001 --gid ragmon --no-create-home \
       --home-dir /tmp --shell /usr/sbin/nologin ragmon
COPY --from=build /opt/venv /opt/venv
# /tmp is the only writable path in Kubernetes (readOnlyRootFilesystem + emptyDir).
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp \
    XDG_CACHE_HOME=/tmp/.cache \
    RAG_MONITOR_METRICS_PORT=9108
USER 10001:10001
WORKDIR /tmp
EXPOSE 9108
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, sys, urllib.request; port = os.environ.get('RAG_MONITOR_METRICS_PORT', '9108'); sys.exit(0 if urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=4).status == 200 else 1)"]
ENTRYPOINT ["rag-monitor"]
CMD ["run"]
