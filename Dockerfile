# syntax=docker/dockerfile:1
#
# LoRA What-If: Streamlit dashboard + Numba simulation engine.
#
#   docker build -t lora-what-if .
#   docker run -p 8501:8501 lora-what-if      # then open http://localhost:8501
#
# Based on Streamlit's documented Docker recipe, with: dependency layer cached
# separately from the source, a non-root runtime user, and the Numba JIT cache
# warmed at build time so the first request doesn't pay the compile cost.
# .ci/run replays the pip install and warm-up steps of this file without Docker.

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NUMBA_CACHE_DIR=/tmp/numba_cache \
    STREAMLIT_SERVER_FILE_WATCHER_TYPE=none \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false

# curl is only needed by HEALTHCHECK. Not version-pinned on purpose: Debian
# security updates replace the exact version in the archive, which would
# break rebuilds; the base image tag already fixes the Debian release.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends curl \
    && rm -rf /var/lib/apt/lists/*

# Non-root runtime user. The source tree stays root-owned (read-only for the
# app); only the Numba cache directory must be writable.
RUN groupadd --gid 1000 app \
    && useradd --uid 1000 --gid app --create-home --shell /bin/bash app \
    && mkdir -p "$NUMBA_CACHE_DIR" \
    && chown app:app "$NUMBA_CACHE_DIR"

WORKDIR /srv/lora-what-if

# Dependencies first: this layer is rebuilt only when requirements.txt changes.
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

COPY . .

# Numeric uid:gid (= app:app) so orchestrators can verify runAsNonRoot.
USER 1000:1000

# Compile the Numba kernels now, as the runtime user, so the cache files in
# $NUMBA_CACHE_DIR belong to it. Numba keys the cache on the CPU model: on a
# host with a different CPU the kernels are recompiled once on first use.
RUN python -m engine warmup

EXPOSE 8501

# Shell form on purpose: `|| exit 1` maps every curl error to "unhealthy" (1).
# hadolint ignore=DL3025
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD curl --fail --silent --show-error http://localhost:8501/_stcore/health || exit 1

ENTRYPOINT ["streamlit", "run", "app/main.py", "--server.port=8501", "--server.address=0.0.0.0"]
