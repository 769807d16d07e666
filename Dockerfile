# syntax=docker/dockerfile:1
#
# volcano-elastic: one image for the webhook, the controller + agent, and the certgen Job
# (ENTRYPOINT `volcano-elastic`; the Deployments pass the subcommand as args).
#
#   docker build -t volcano-elastic:0.1.0 .
#   buildah build -t volcano-elastic:0.1.0 .          # the same, without a daemon
#
# The project builds it without Docker: `make dist` (hack/localbox/dockerfile.py) runs
# `buildah build` on a Python base image made by mmdebstrap from Debian's archive
# (--build-arg PYTHON_IMAGE=oci-archive:<that base>), writes the image as an OCI archive into
# dist/, and the real-node tier (tests/real) installs that same image and runs it.
# hack/kind-e2e.sh builds it with Docker on a machine that has one.
#
# Reproducibility: the base image is one ARG (pin it by digest for release builds:
# --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:...; it needs `python` with the
# venv module, and groupadd/useradd), every runtime dependency is
# pinned by requirements-image.txt, byte code is compiled with unchecked-hash (no timestamps),
# and SOURCE_DATE_EPOCH is honoured by BuildKit for file times.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------- build: a venv with us in it
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
WORKDIR /src
# dependencies first (a layer that survives source edits); binary wheels only: no compiler
COPY requirements-image.txt ./
RUN /opt/venv/bin/pip install --only-binary=:all: --no-compile -r requirements-image.txt
COPY pyproject.toml README.md ./
COPY elastic_controller ./elastic_controller
COPY webhook ./webhook
COPY certs ./certs
RUN /opt/venv/bin/pip install --no-compile --no-deps -c requirements-image.txt . \
 && /opt/venv/bin/pip check \
 && /opt/venv/bin/pip uninstall -y pip setuptools wheel \
 && /opt/venv/bin/python -m compileall -q -j 0 --invalidation-mode unchecked-hash /opt/venv

# ---------------------------------------------------------------- runtime: the venv, no tools
FROM ${PYTHON_IMAGE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="volcano-elastic" \
      org.opencontainers.image.description="Elastic PyTorchJobs on the Volcano scheduler: webhook, controller, preemption agent" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
# A fixed non-root user (the manifests run as 65532 with runAsNonRoot and a read-only root
# filesystem; /tmp is an emptyDir there). HOME points at /tmp so nothing looks under /root.
RUN groupadd --system --gid 65532 volcano-elastic \
 && useradd --system --uid 65532 --gid 65532 --home-dir /nonexistent --no-create-home \
            --shell /usr/sbin/nologin volcano-elastic
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
WORKDIR /tmp
# 8443: the webhook (HTTPS); 8080: the controller's /healthz /readyz /metrics
EXPOSE 8443 8080
ENTRYPOINT ["volcano-elastic"]
CMD ["--help"]
