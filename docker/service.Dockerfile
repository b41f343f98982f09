# syntax=docker/dockerfile:1
# The LEMON gRPC orchestration service: `lemon serve` (lemon.v1.Orchestrator, gRPC health and
# reflection) on port 50051. Build from the repository root (the chart's default image and tag):
#   docker build -f docker/service.Dockerfile -t ghcr.io/lemon-ai/lemon-service:0.1.0 .
# Installs the project's wheel with its `service` extra, pinned by docker/constraints.txt. Tiers
# run on OpenAI-compatible endpoints (KServe); in-process models would need the `model` extra.
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
        "/wheels/lemon_orchestration-${VERSION}-py3-none-any.whl[service]" \
    && rm -rf /wheels \
    && groupadd --gid 10001 lemon \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin lemon
USER 10001:10001
EXPOSE 50051
# The standard gRPC health service (open without the bearer token; plaintext only).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import grpc; from grpc_health.v1 import health_pb2 as h, health_pb2_grpc as g; r = g.HealthStub(grpc.insecure_channel('127.0.0.1:50051')).Check(h.HealthCheckRequest(), timeout=4); raise SystemExit(r.status != h.HealthCheckResponse.SERVING)"]
ENTRYPOINT ["lemon", "serve"]
CMD ["--host=0.0.0.0", "--port=50051"]
