# syntax=docker/dockerfile:1
# The LEMON operator: kopf runs lemon_operator (LemonSpec, LemonCapacityProfile -> KServe tiers).
# Build from the repository root (the chart's default image and tag):
#   docker build -f docker/operator.Dockerfile -t ghcr.io/lemon-ai/lemon-operator:0.1.0 .
# Installs the project's wheel with its `operator` extra, pinned by docker/constraints.txt.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src/ src/
COPY operator/ operator/
COPY services/ services/
COPY training_jobs/ training_jobs/
RUN pip install --no-cache-dir "setuptools==80.9.0" "wheel==0.45.1" \
    && pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
# The package version; tests/helm checks it equals pyproject's and the chart's appVersion.
ARG VERSION=0.1.0
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp
COPY docker/constraints.txt /etc/lemon/constraints.txt
COPY --from=build /wheels/ /wheels/
RUN pip install --no-cache-dir --constraint /etc/lemon/constraints.txt \
        "/wheels/lemon_orchestration-${VERSION}-py3-none-any.whl[operator]" \
    && rm -rf /wheels \
    && groupadd --gid 10001 lemon \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin lemon
USER 10001:10001
EXPOSE 8080
# kopf's liveness endpoint (the chart's probes use the same path and port).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]
ENTRYPOINT ["kopf", "run", "--module=lemon_operator.main", "--standalone", "--liveness=http://0.0.0.0:8080/healthz"]
CMD ["--all-namespaces"]
