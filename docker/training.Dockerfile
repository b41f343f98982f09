# syntax=docker/dockerfile:1
# The LEMON training image: SFT and counterfactual GRPO (lemon_train) in PyTorchJobs. Build from
# the repository root:
#   docker build -f docker/training.Dockerfile -t ghcr.io/lemon-ai/lemon-train:0.1.0 .
# Installs the project's wheel with its `train` extra, pinned by docker/constraints.txt; on
# x86_64 Linux, PyPI's torch wheel brings its CUDA libraries.
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
    HOME=/tmp \
    HF_HOME=/tmp/hf
COPY docker/constraints.txt /etc/lemon/constraints.txt
COPY --from=build /wheels/ /wheels/
RUN pip install --no-cache-dir --constraint /etc/lemon/constraints.txt \
        "/wheels/lemon_orchestration-${VERSION}-py3-none-any.whl[train]" \
    && rm -rf /wheels \
    && groupadd --gid 10001 lemon \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin lemon
USER 10001:10001
WORKDIR /tmp
# A batch job: the PyTorchJob's restart policy watches it, not a health check.
HEALTHCHECK NONE
CMD ["lemon", "train", "--help"]
