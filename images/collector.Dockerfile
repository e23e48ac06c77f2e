# The collector image: our collector installed into the pinned framework image.
#
# `collectbot image build|ensure` assembles the build context itself and tags the image by
# the sha256 of that context and of the base image's identity:
#   Dockerfile        this file
#   requirements.txt  images/collector-requirements.txt
#   wheels/           an optional wheel bundle (--wheels DIR) for offline runners
#   collector/        the collector's sources and case files
#   pins.json         the framework's manifest entry (read by the version gate)
# Layers run from rarely to often changed, so a changed collector rebuilds only its own
# layers on top of the cached dependency layer. Bytecode is compiled at build: workers run
# with PYTHONDONTWRITEBYTECODE, and without .pyc files every worker compiles what it imports
# (vLLM 0.24.0's import: 25-30 s instead of 8.6 s on a 2-core VM; docs/benchmarks.md).
# compileall fails on files that are not Python of this version (templates, test data);
# those stay source, as pip leaves them.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

# 1. Dependencies. Installed only where the framework image does not already satisfy them;
#    from the bundled wheels when there are any (no index needed), else from the index the
#    build machine reaches. pip, or uv where the image has no pip (uv-made venvs).
COPY requirements.txt /opt/collectbot/requirements.txt
COPY wheels/ /opt/collectbot/wheels/
RUN set -eu; \
    py="$(command -v python3 || command -v python)"; \
    src=""; \
    if ls /opt/collectbot/wheels/*.whl >/dev/null 2>&1; then \
        src="--no-index --find-links /opt/collectbot/wheels"; \
    fi; \
    if "$py" -m pip --version >/dev/null 2>&1; then \
        "$py" -m pip install $src -r /opt/collectbot/requirements.txt; \
    else \
        uv pip install --python "$py" $src -r /opt/collectbot/requirements.txt; \
    fi; \
    rm -rf /opt/collectbot/wheels; \
    site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"; \
    echo /opt/collectbot/lib > "$site/collectbot.pth"; \
    "$py" -m compileall -q -j 0 "$site" >/dev/null || :; \
    mkdir -p /collectbot/out /collectbot/in /collectbot/cache

# 2. The collector: its sources, then the pins its version gate enforces.
COPY collector/ /opt/collectbot/lib/collector/
RUN "$(command -v python3 || command -v python)" -m compileall -q /opt/collectbot/lib >/dev/null
COPY pins.json /opt/collectbot/pins.json

ARG CONTENT_HASH=unknown
ARG FRAMEWORK=unknown
ARG FRAMEWORK_VERSION=unknown
ARG BASE_REF=unknown
LABEL org.collectbot.content-hash="${CONTENT_HASH}" \
      org.collectbot.framework="${FRAMEWORK}" \
      org.collectbot.framework-version="${FRAMEWORK_VERSION}" \
      org.opencontainers.image.base.name="${BASE_REF}"

CMD ["python3", "-m", "collector", "versions"]
